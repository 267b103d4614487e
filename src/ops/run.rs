//! `run` and `race`: a walk's options from what was asked and what is set, checked before
//! anything is claimed — every agent named exists, every value parses, a task asked for can
//! ever be ready.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::config;
use crate::agent::presets::{self, Agent};
use crate::backlog::{self, Board};
use crate::context::Context;
use crate::engine::Limits;
use crate::error::{refused, usage, Class, Refusal};
use crate::mission::AgentChoice;
use crate::sandbox::{self, Confinement};
use crate::store::settings::parse_usd;
use crate::store::Store;
use crate::walk::{self, unit::Pick};

/// Which agent was asked for (`--agent`, `--agent-cmd`, `--model`).
#[derive(Debug, Clone, Default)]
pub struct AgentFlags {
    pub agent: Option<String>,
    pub agent_cmd: Option<String>,
    pub model: Option<String>,
}

/// The agent asked for: the flags, else `loop.agent`, else `default` (a race's first entrant);
/// none at all is a usage error.
pub fn choose_agent(store: &Store, flags: AgentFlags, default: Option<&str>) -> Result<AgentChoice> {
    if let Some(cmd) = flags.agent_cmd {
        return Ok(AgentChoice::Command(cmd));
    }
    match config::agent(store, flags.agent) {
        Some(name) => Ok(AgentChoice::Named { name, model: flags.model }),
        None => match default {
            Some(name) => Ok(AgentChoice::Named { name: name.to_owned(), model: None }),
            None => Err(usage("no agent to run")
                .hint(format!(
                    "pass --agent <{}> or --agent-cmd <command>, or set loop.agent",
                    presets::preset_names().join("|")
                ))
                .into()),
        },
    }
}

/// The agent a choice names, found (a preset, a configured name, or a command line).
pub fn agent_of(store: &Store, exe: &Path, choice: AgentChoice) -> Result<Agent> {
    Ok(match choice {
        AgentChoice::Command(cmd) => presets::custom("custom", &cmd),
        AgentChoice::Named { name, model } => presets::resolve(store, &name, model.as_deref(), exe)?,
    })
}

/// How each task is worked, as asked on the command line (`None`, empty: not asked).
#[derive(Debug, Clone)]
pub struct WalkFlags {
    pub pick: Option<String>,
    pub judge_cmd: Option<String>,
    pub checks: Option<String>,
    pub setup: Option<String>,
    pub review: Option<String>,
    pub reviewer: Vec<String>,
    pub reviewer_override: Option<String>,
    pub resolver: Option<String>,
    pub summarizer: Option<String>,
    pub fallback: Vec<String>,
    pub budget_usd: Option<String>,
    pub budget_tokens: Option<u64>,
    pub task_budget_usd: Option<String>,
    pub max_turns: Option<u32>,
    pub per_unit_dispatches: u32,
    /// Failed tasks in a row before the walk pauses (0: never).
    pub pause_after: u32,
    pub session_timeout: Duration,
    pub checks_timeout: Option<Duration>,
    pub grace: Duration,
    pub wrap_up: Duration,
    pub lease: chrono::Duration,
    pub base: Option<String>,
    pub land: bool,
    /// How to land (`--via`; given, it lands).
    pub land_via: Option<crate::landing::Via>,
    pub sandbox: Option<sandbox::Mode>,
    pub accept_settings: bool,
}

/// A pick word, parsed; `what` names where it came from.
fn parse_pick(word: Option<String>, what: &str) -> Result<Option<Pick>> {
    match word {
        Some(word) => Ok(Some(Pick::parse(&word).ok_or_else(|| {
            usage(format!("{what} '{}' is not valid", word.escape_debug())).hint("use 'first' or 'judge'")
        })?)),
        None => Ok(None),
    }
}

/// Check that every agent named exists and its program is there: a missing one is exit 77
/// before anything is claimed. `what` says what it was named for (racing, fallback, …).
pub fn check_agents(store: &Store, ctx: &Context, exe: &Path, names: &[String], what: &str) -> Result<()> {
    for name in names {
        backlog::check_agent_name(name)?;
        let agent = presets::resolve(store, name, None, exe)?;
        if let Some(program) = agent.missing_program(ctx.path_var.as_deref()) {
            return Err(Refusal::new(
                Class::AgentMissing,
                format!("the {what} agent '{name}' needs '{program}', which was not found"),
            )
            .hint("install it or put it on PATH; see docs/agents.md")
            .into());
        }
    }
    Ok(())
}

/// Check that a role of `contract` named `name` exists and its agent is there.
fn check_role(
    store: &Store,
    ctx: &Context,
    exe: &Path,
    name: &str,
    contract: crate::agent::role::Contract,
    flag: &str,
    what: &str,
) -> Result<()> {
    let role = crate::agent::role::of_contract(store, name, contract, flag)?;
    check_agents(store, ctx, exe, &role.agent.into_iter().collect::<Vec<_>>(), what)
}

/// How a verb's sessions and checks are confined: `--sandbox` when given, else `loop.sandbox`;
/// tried on this machine once.
pub fn confinement(store: &Store, ctx: &Context, exe: &Path, mode: Option<sandbox::Mode>) -> Result<Confinement> {
    let policy = sandbox::Policy::read(store, ctx, mode)?;
    Ok(Confinement::decide(policy, ctx, exe)?)
}

/// The options of a walk with `agent` (and `together` to race), from `flags` and the
/// repository's settings, each decided by [`config`]; every agent and role named is checked.
pub fn walk_options(
    store: &Store,
    ctx: &Context,
    exe: &Path,
    agent: Agent,
    together: Vec<String>,
    flags: WalkFlags,
) -> Result<walk::Options> {
    if flags.per_unit_dispatches == 0 {
        return Err(usage("--per-unit-dispatches must be at least 1").into());
    }
    let (pick_flag, pick_setting) = config::pick(store, flags.pick);
    let pick = parse_pick(pick_flag, "pick mode")?;
    let pick_default = parse_pick(pick_setting, "loop.pick")?;
    let judge = config::judge(store, flags.judge_cmd);
    if pick.or(pick_default) == Some(Pick::Judge) && judge.is_none() {
        return Err(usage("judge mode needs a judge")
            .hint("pass --judge-cmd <command> (it reads the passing tries as JSON and prints the winner's number), or set loop.judge")
            .into());
    }
    let fallback = config::fallback(store, flags.fallback);
    check_agents(store, ctx, exe, &together, "racing")?;
    check_agents(store, ctx, exe, &fallback, "fallback")?;
    let reviewers = config::reviewers(store, flags.reviewer);
    let mut reviewer_agents = Vec::new();
    for name in &reviewers {
        backlog::check_agent_name(name)?;
        reviewer_agents.extend(crate::agent::role::reviewer(store, name)?.agent);
    }
    check_agents(store, ctx, exe, &reviewer_agents, "reviewer")?;
    if flags.reviewer_override.as_deref().is_some_and(|r| r.trim().is_empty()) {
        return Err(usage("--reviewer-override needs a reason")
            .hint("--reviewer-override \"<why this reviewer may review this worker>\"")
            .into());
    }
    use crate::agent::role::Contract;
    let resolver = config::resolver(store, flags.resolver);
    if let Some(name) = &resolver {
        check_role(store, ctx, exe, name, Contract::ConflictResolver, "--resolver", "resolver")?;
    }
    let summarizer = config::summarizer(store, flags.summarizer);
    if let Some(name) = &summarizer {
        check_role(store, ctx, exe, name, Contract::Summarizer, "--summarizer", "summarizer")?;
    }
    let mut opts = walk::Options::new(agent);
    opts.confinement = confinement(store, ctx, exe, flags.sandbox)?;
    opts.accept_settings = flags.accept_settings;
    opts.resolver = resolver;
    opts.summarizer = summarizer;
    opts.reviewers = reviewers;
    opts.review_rounds = store.settings().review_rounds()?;
    opts.review_override = flags.reviewer_override;
    opts.checks = config::checks(store, flags.checks);
    opts.review = config::review(store, flags.review);
    opts.setup = config::setup(store, flags.setup);
    // What loop.sandbox.hide keeps from sessions is never warmed into their tries, whether or
    // not this machine confines them (the policy was read, and refused if bad, just above).
    let hide = crate::sandbox::Policy::read(store, ctx, flags.sandbox)?.hide;
    opts.warm = crate::tries::warm::Plan::read(store)?.hiding(store.workdir(), &hide);
    // Read where it is used; refused here, before anything runs.
    crate::tries::pool::size(store)?;
    crate::tries::pool::max_bytes(store)?;
    opts.notify = store.settings().notify().filter(|c| !c.trim().is_empty());
    opts.notify_webhook = store.settings().notify_webhook()?;
    opts.session_timeout = Some(flags.session_timeout);
    opts.checks_timeout = config::checks_timeout(store, flags.checks_timeout)?;
    opts.grace = flags.grace;
    opts.wrap_up = flags.wrap_up;
    opts.lease = flags.lease;
    let budget_usd = config::budget_usd(store, flags.budget_usd.as_deref())?;
    if flags.budget_tokens == Some(0) || flags.max_turns == Some(0) {
        return Err(usage("a budget of 0 would do nothing").hint("leave it out for no limit").into());
    }
    opts.max_turns = flags.max_turns;
    opts.task_budget_usd = match flags.task_budget_usd.as_deref() {
        Some(text) => Some(parse_usd(text).ok_or_else(|| {
            usage(format!("--task-budget-usd '{text}' is not a positive number of dollars"))
                .hint("e.g. --task-budget-usd 2")
        })?),
        None => None,
    };
    opts.limits = Limits {
        budget_usd,
        budget_tokens: flags.budget_tokens,
        per_unit_dispatches: flags.per_unit_dispatches,
        pause_after: if flags.pause_after == 0 { u32::MAX } else { flags.pause_after },
        ..Default::default()
    };
    opts.base = flags.base;
    opts.land = config::land(store, flags.land || flags.land_via.is_some())?;
    opts.land_via = config::land_via(store, flags.land_via)?;
    if opts.land && opts.land_via == crate::landing::Via::Request {
        opts.forge_poll = store.settings().forge_poll()?;
        // The forge and its token are known before the first session, not after the first task.
        let remote = crate::landing::request::remote_of(store)?;
        crate::forge::connect(store, &remote)?;
    }
    opts.land_batch = store.settings().land_batch()?;
    opts.together = together;
    opts.pick = pick;
    opts.pick_default = pick_default;
    opts.judge = judge;
    opts.fallback = fallback;
    if let Some(span) = store.settings().unreachable_for()? {
        opts.unreachable_for = span;
    }
    opts.sync_every = store.settings().sync_every()?;
    opts.fold_after = store.settings().fold_after()?;
    Ok(opts)
}

/// Refuse tasks a walk was given (`--task`) that can never be ready, their dependencies making
/// a cycle, saying which: otherwise the walk would find nothing to do and say only that.
pub fn refuse_stuck(store: &Store, ctx: &Context, tasks: &[String]) -> Result<()> {
    if tasks.is_empty() {
        return Ok(());
    }
    let board = Board::load(store, ctx)?;
    for id in tasks {
        if let Some(cycle) = board.cycle_blocking(id) {
            let waits = if cycle.first() == Some(id) { "is in" } else { "waits on" };
            return Err(refused(format!(
                "task '{id}' can never be ready: it {waits} a dependency cycle, {}",
                backlog::cycle_line(&cycle)
            ))
            .hint(format!("break it: git loop edit {} --remove-after {}", cycle[0], cycle[1]))
            .into());
        }
    }
    Ok(())
}
