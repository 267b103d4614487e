//! `git loop land`: the landing queue — done task branches onto the target branch, checked on
//! the merged result.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::run::parse_sandbox;
use super::{exit, text};
use git_loop::ids::Span;
use git_loop::{ops, walk};

/// Land done work on the target branch, checked on the merged result.
///
/// Done task branches not yet in the target are merged onto it in dependency order, then
/// priority (p0 first), then when they were done; a task waits for a dependency that has not
/// landed. Up to --batch branches are merged one after another and the result is checked once
/// in a landing worktree of its own; when the checks fail, the batch is bisected until the
/// failing tasks are found, and the others land. The target only ever moves to a commit whose
/// checks passed, by compare-and-swap (with loop.remote: on the remote, by a push with a
/// lease), and never needs to be checked out: a worktree that has it checked out and clean
/// follows it, a dirty one is refused (with loop.remote the landing goes to the remote's
/// target, and a dirty local checkout is left behind it, said). A task whose merge conflicts
/// or whose checks fail goes
/// to needs-you with the reason, and the target is left as it was; with --resolver, a
/// conflict-resolver session resolves a conflicting merge first. With --summarizer, a
/// summarizer session writes each landing commit's message. One lander per target across
/// clones (claim lander:<branch>). With loop.epicBranch, an epic's children land on the epic's
/// own branch (loop/<epic>) first, and the epic lands on the target once it is done and every
/// child's work is on its branch.
///
/// Exit codes: 0 every task asked for by id is on the target now (without ids: something
/// landed, or nothing was left to land); 1 a landing failed, a task asked for is not on the
/// target (it waits for a dependency), nothing landed of what was queued, or the target is
/// checked out with changes (without loop.remote); 2 usage, 3 another lander holds the target.
///
/// Example: git loop land --checks "cargo test" --batch 4
#[derive(Args)]
pub struct LandArgs {
    /// Only these tasks (id or unique prefix; each must be done).
    ids: Vec<String>,
    /// merge: the landing queue merges, checks and moves the target itself; pr: a pull or
    /// merge request per task on the forge (GitHub, GitLab, Forgejo/Gitea), opened once and
    /// read back on each run: merged there, the task landed; closed, parked; failing CI or
    /// changes asked for, sent back to its agent (default: loop.land's way, else merge).
    #[arg(long, value_name = "WAY", value_parser = super::run::parse_via)]
    via: Option<git_loop::landing::Via>,
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
    let store = env.open()?;
    let only = args.ids.iter().map(|id| git_loop::backlog::resolve(&store, id)).collect::<Result<Vec<_>>>()?;
    let flags = ops::land::LandFlags {
        via: args.via,
        into: args.into,
        only,
        batch: args.batch,
        checks: args.checks,
        checks_timeout: args.checks_timeout.map(|span| Duration::from_secs(span.0.num_seconds().max(0) as u64)),
        resolver: args.resolver,
        summarizer: args.summarizer,
        sandbox: args.sandbox,
    };
    let prepared = ops::land::prepare(&store, &env.ctx, &env.exe, flags)?;
    if prepared.runs_unconfined() {
        super::output::stderr_line(format!("warning: {}", prepared.confinement.describe()));
    }
    let cancelled = || gix::interrupt::is_triggered();
    let report = ops::land::land(&store, &env.ctx, &env.cwd, &env.exe, prepared, &cancelled, &Warnings)?;
    let unlanded = ops::land::unlanded(&report, !args.ids.is_empty());
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
        out.line(format!(
            "{}  landed on {} at {}{with}",
            landed.task,
            landed.on.as_deref().unwrap_or(&report.into),
            git_loop::ids::short_commit(&landed.commit)
        ))?;
    }
    for seen in report.requests.iter().filter(|r| r.known.state == "open") {
        let opened = if seen.opened { " (opened now)" } else { "" };
        let onto = if seen.base != report.into { format!(" (stacked on {})", seen.base) } else { String::new() };
        out.line(format!("{}  {}{opened}{onto}", seen.known.task, text::line(&seen.known.line())))?;
    }
    for failed in &report.failed {
        let said = match failed.cause.as_str() {
            "sent_back" => "sent back to its agent",
            "closed" => "parked",
            "branch" => "not landed",
            _ => "not landed, needs you",
        };
        out.line(format!("{}  {said}: {}", failed.task, text::line(&failed.reason)))?;
        let standing = super::answer::Standing {
            conflict: (failed.cause == "conflict").then(|| failed.on.clone().unwrap_or_else(|| report.into.clone())),
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
    if report.landed.is_empty() && report.failed.is_empty() && report.waiting.is_empty() && report.requests.is_empty() {
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
