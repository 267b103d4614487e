//! `git loop land`: the landing queue — done task branches onto the target branch, checked on
//! the merged result.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::run::{parse_sandbox, walk_confinement};
use super::{exit, text, Env};
use git_loop::agent::role;
use git_loop::error::{usage, Class, Refusal};
use git_loop::ids::Span;
use git_loop::landing::{self, Outcome};
use git_loop::walk;

/// Land done work on the target branch, checked on the merged result.
///
/// Done task branches not yet in the target are merged onto it in dependency order, then
/// priority (p0 first), then when they were done; a task waits for a dependency that has not
/// landed. Up to --batch branches are merged one after another and the result is checked once
/// in a landing worktree of its own; when the checks fail, the batch is bisected until the
/// failing tasks are found, and the others land. The target only ever moves to a commit whose
/// checks passed, by compare-and-swap (with loop.remote: on the remote, by a push with a
/// lease), and never needs to be checked out: a worktree that has it checked out and clean
/// follows it, a dirty one is refused. A task whose merge conflicts or whose checks fail goes
/// to needs-you with the reason, and the target is left as it was; with --resolver, a
/// conflict-resolver session resolves a conflicting merge first. With --summarizer, a
/// summarizer session writes each landing commit's message. One lander per target across
/// clones (claim lander:<branch>).
///
/// Exit codes: 0 every task asked for by id is on the target now (without ids: something
/// landed, or nothing was left to land); 1 a landing failed, a task asked for is not on the
/// target (it waits for a dependency), nothing landed of what was queued, or the target is
/// checked out with changes; 2 usage, 3 another lander holds the target.
///
/// Example: git loop land --checks "cargo test" --batch 4
#[derive(Args)]
pub struct LandArgs {
    /// Only these tasks (id or unique prefix; each must be done).
    ids: Vec<String>,
    /// The branch to land on (default: loop.mergeInto, else the current branch).
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
    /// How many task branches to merge before checking the result once (default:
    /// loop.landBatch, else 8).
    #[arg(long, value_name = "N")]
    batch: Option<usize>,
    /// The checks to run on each merged result (default: loop.checks; none: land on the merge
    /// alone).
    #[arg(long, value_name = "COMMAND")]
    checks: Option<String>,
    /// Stop the checks after this long [default: loop.checksTimeout, else 10m].
    #[arg(long, value_name = "DURATION")]
    checks_timeout: Option<Span>,
    /// Who resolves a landing's merge that conflicts: a role of the conflict-resolver contract
    /// or an agent (default: loop.resolver; none: a conflict sends the task to needs-you).
    #[arg(long, value_name = "ROLE")]
    resolver: Option<String>,
    /// Who writes each landing commit's message from the task and its sessions: a role of the
    /// summarizer contract or an agent (default: loop.summarizer, else
    /// loop.role.summarizer.agent; none: "loop: land loop/<id> (<title>)").
    #[arg(long, value_name = "ROLE")]
    summarizer: Option<String>,
    /// How the checks and the roles' sessions are confined: auto, required or off (default:
    /// loop.sandbox, else auto).
    #[arg(long, value_name = "MODE", value_parser = parse_sandbox)]
    sandbox: Option<git_loop::sandbox::Mode>,
    /// Print what landed as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: LandArgs) -> Result<u8> {
    if args.batch == Some(0) {
        return Err(usage("--batch must be at least 1").into());
    }
    let store = env.open()?;
    let only = args.ids.iter().map(|id| git_loop::backlog::resolve(&store, id)).collect::<Result<Vec<_>>>()?;
    let batch = match args.batch {
        Some(n) => n,
        None => store.settings().land_batch()?,
    };
    let checks = args.checks.or_else(|| store.settings().checks()).filter(|c| !c.trim().is_empty());
    let checks_timeout = match args.checks_timeout {
        Some(span) => std::time::Duration::from_secs(span.0.num_seconds().max(0) as u64),
        None => store.settings().checks_timeout()?,
    };
    let cancelled = || gix::interrupt::is_triggered();
    let resolver = match args.resolver.or_else(|| store.settings().resolver()) {
        Some(name) => Some(role::of_contract(&store, &name, role::Contract::ConflictResolver, "--resolver")?),
        None => None,
    };
    let summarizer = walk::summarize::role_of(&store, args.summarizer.as_deref())?;
    // Every agent a role names must be known before anything lands.
    let mut agent = None;
    for role in resolver.iter().chain(&summarizer) {
        let found =
            git_loop::agent::presets::resolve(&store, role.agent.as_deref().unwrap_or_default(), None, &env.exe)?;
        agent.get_or_insert(found);
    }
    // The checks run the merged code, and the roles are agents: confined as a walk's are.
    let confinement = walk_confinement(env, &store, args.sandbox)?;
    if checks.is_some() || agent.is_some() {
        if let git_loop::sandbox::Confinement::Unconfined { .. } = &confinement {
            super::output::stderr_line(format!("warning: {}", confinement.describe()));
        }
    }
    let opts = landing::Options {
        into: args.into,
        only,
        batch,
        checks,
        checks_timeout,
        grace: std::time::Duration::from_secs(10),
        exe: env.exe.clone(),
        holder: format!("lander-{}", git_loop::ids::random_base32(8)),
        cancelled: &cancelled,
        resolver: &landing::NoResolver,
        summarizer: &landing::NoSummarizer,
        sandbox: confinement.sandbox().map(|s| s.as_ref()),
    };
    let outcome = match agent {
        None => landing::land(&store, &env.ctx, &opts)?,
        Some(agent) => {
            // The roles' sessions run as a walk's do, under a walker of this command's own.
            let mut walk_opts = walk::Options::new(agent);
            walk_opts.checks = opts.checks.clone();
            walk_opts.checks_timeout = opts.checks_timeout;
            walk_opts.confinement = confinement.clone();
            let observer = Warnings;
            walk::one_off(&store, &env.ctx, env.cwd.clone(), env.exe.clone(), walk_opts, &observer, |walker| {
                let resolver = resolver.map(|role| walk::resolve::AgentResolver { walker, role });
                let summarizer = summarizer.map(|role| walk::summarize::AgentSummarizer { walker, role });
                let opts = landing::Options {
                    resolver: match &resolver {
                        Some(r) => r,
                        None => &landing::NoResolver,
                    },
                    summarizer: match &summarizer {
                        Some(s) => s,
                        None => &landing::NoSummarizer,
                    },
                    ..opts
                };
                landing::land(&store, &env.ctx, &opts)
            })?
        }
    };
    let report = match outcome {
        Outcome::Ran(report) => report,
        Outcome::Busy(held) => {
            let r = &held.record;
            return Err(Refusal::new(
                Class::Busy,
                format!("another lander is at work on this target: {} (pid {} on {})", r.holder, r.pid, r.host),
            )
            .hint(
                "its landing takes in every done task; wait for it, then run 'git loop land' again if anything is left",
            )
            .into());
        }
    };
    // A landing failed; or asked for tasks by id, one is not on the target now (the queue left
    // out only what the target holds already); or asked for every done task, it landed none of
    // those left in the queue.
    let unlanded = !report.failed.is_empty()
        || (!args.ids.is_empty() && !report.waiting.is_empty())
        || (report.landed.is_empty() && !report.waiting.is_empty());
    let code = if unlanded { exit::FAILED } else { exit::OK };
    let mut out = super::output::Out::new();
    if args.json {
        out.json(&json!({ "landing": report }))?;
        return Ok(code);
    }
    if report.checks.is_none() && !report.landed.is_empty() {
        super::output::stderr_line(
            "note: no checks are configured (--checks, loop.checks): the work landed on its merge alone",
        );
    }
    for landed in &report.landed {
        let with = if landed.batch > 1 { format!(" (a batch of {})", landed.batch) } else { String::new() };
        out.line(format!("{}  landed on {} at {}{with}", landed.task, report.into, &landed.commit[..12]))?;
    }
    for failed in &report.failed {
        out.line(format!("{}  not landed, needs you: {}", failed.task, text::line(&failed.reason)))?;
        let standing = super::answer::Standing {
            conflict: (failed.cause == "conflict").then(|| report.into.clone()),
            ..Default::default()
        };
        if standing.conflict.is_some() {
            let ways = super::answer::ways(&failed.task, git_loop::store::task::State::NeedsYou, &standing);
            for l in super::answer::lines("    ", &ways) {
                out.line(l)?;
            }
        }
    }
    for waiting in &report.waiting {
        out.line(format!("{}  waits for {} to land first", waiting.task, waiting.waiting_for.join(", ")))?;
    }
    for note in &report.notes {
        out.line(format!("note: {note}"))?;
    }
    if report.landed.is_empty() && report.failed.is_empty() && report.waiting.is_empty() {
        out.line(format!("nothing to land on {}", report.into))?;
    }
    if unlanded {
        let left = report.failed.len() + report.waiting.len();
        super::output::stderr_line(format!(
            "error: {left} task{} asked to land {} not on {}",
            if left == 1 { "" } else { "s" },
            if left == 1 { "is" } else { "are" },
            report.into
        ));
        super::output::stderr_line("hint: 'git loop show <id>' says why; land its dependencies first, or answer it");
    }
    Ok(code)
}

/// The role sessions' warnings (a contract broken, a checkout left), on stderr.
struct Warnings;

impl walk::Observer for Warnings {
    fn event(&self, event: &walk::Event) {
        if let walk::Event::Warning { message } = event {
            super::output::stderr_line(format!("warning: {message}"));
        }
    }
}
