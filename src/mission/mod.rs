//! Missions: the loop of loops. One altitude up from `walk`, a unit of work is a whole
//! project, and working it is a full walk of that project's backlog by a child `git loop
//! run`. The control flow is `engine`'s, unchanged: `queue::MissionQueue` hands out the
//! projects of the current wave, `dispatch::ChildDispatcher` runs one child walk per
//! dispatch, and `engine::work` decides re-dispatch, close and pause with these limits:
//! three dispatches per project (a child that ends without journaling how it ended is
//! dispatched again, then the project fails), and one failure pauses the mission.
//!
//! A mission run, start to end:
//! 1. Read the mission; check the agent's program in every local project (exit 77 before any
//!    claim).
//! 2. Take the `fleet:<mission>` claim (a second commander exits 3, naming the holder); it is
//!    released however the run ends, panics included.
//! 3. For each project of the lowest wave with work left: spawn `git-loop -C <project> run
//!    --termination-key <key> ...`, stream its lines, wait, read its `walk_terminated` event
//!    under that key in the project's journal, check the mission's tasks there are really
//!    done, record the outcome in the mission.
//! 4. Record how the run ended (complete, paused with the reason, budget, interrupted) and
//!    release the claim.

pub mod dispatch;
pub mod plan;
pub mod queue;
pub mod record;
pub mod verify;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Result;
use chrono::{DateTime, Utc};

pub use crate::ids::{MissionId, ProjectName};
use record::{MissionState, Outcome, Source, Status};

use crate::agent::presets;
use crate::context::Context;
use crate::engine::{self, Limits};
use crate::error::{Class, Refusal};
use crate::ids::{random_base32, ClaimKey, WriterId};
use crate::store::claim::{self, AcquireOptions, Singleton};
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, NewEvent};
use crate::store::layout::Layout;
use crate::store::Store;

/// Child walks per project per run: the first, and two more when a child ends without
/// journaling how it ended. Then the project fails.
pub const DISPATCHES_PER_PROJECT: u32 = 3;

/// How long the fleet claim lasts unless refreshed (it is refreshed every 30 s while the
/// commander runs).
const CLAIM_TTL_MINUTES: i64 = 2;

/// Which agent the child walks run.
#[derive(Debug, Clone)]
pub enum AgentChoice {
    /// A preset or a name configured in the project (`loop.agent.<name>.command`).
    Named { name: String, model: Option<String> },
    /// A command line of your own (`--agent-cmd`).
    Command(String),
}

/// How to run a mission. Budgets count over the whole run: each child walk is given what is
/// left, and what it reports having used is taken off.
#[derive(Debug, Clone)]
pub struct Options {
    pub agent: AgentChoice,
    /// Tasks closed, over every project.
    pub max_units: Option<u32>,
    /// Agent sessions, over every project.
    pub max_iterations: Option<u32>,
    /// Dollars, over every session of every project's walks (`--budget-usd`, `loop.budgetUsd`).
    pub budget_usd: Option<f64>,
    /// Tokens, likewise (`--budget-tokens`).
    pub budget_tokens: Option<u64>,
    /// Passed to each child walk as is, when given.
    pub per_unit_dispatches: Option<u32>,
    pub session_timeout_s: Option<u64>,
    pub grace_s: Option<u64>,
    pub parallel: Option<u32>,
    /// Children stream JSON lines (`run --json`).
    pub json: bool,
}

/// Something worth telling the person watching.
#[derive(Debug, Clone)]
pub enum Event {
    Started {
        mission: String,
        commander: String,
        waves: Vec<(u32, Vec<String>)>,
        agent: String,
    },
    /// The commander moved on to this wave; these projects of it have work left.
    Wave {
        wave: u32,
        projects: Vec<String>,
    },
    Dispatched {
        project: String,
        wave: u32,
        attempt: u32,
        key: String,
        dir: PathBuf,
    },
    /// One line a child wrote.
    Output {
        project: String,
        line: String,
        stderr: bool,
    },
    /// A dispatch that came to nothing: the child ended without journaling how it ended, or
    /// the clone could not be prepared or synced.
    Unfinished {
        project: String,
        attempt: u32,
        note: String,
    },
    Closed {
        project: String,
        status: Status,
        outcome: Outcome,
    },
    /// Left without an outcome (interrupted, budget spent); it stays pending.
    Left {
        project: String,
        why: String,
    },
    Finished {
        stop: Stop,
    },
}

/// Receives events as they happen (from the commander and its output readers).
pub trait Observer: Sync {
    fn event(&self, event: &Event);
}

/// Why a mission run stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Every project is done.
    Complete,
    /// A budget ran out.
    Budget { reason: String },
    /// A project failed or was incomplete.
    Paused { project: String, reason: String },
    /// Ctrl-C, SIGTERM, `git loop stop --all` in the commander, or the child was stopped.
    Interrupted,
    /// `git loop mission cancel` while it ran.
    Cancelled { reason: Option<String> },
}

impl Stop {
    /// The word the journal and `--json` use.
    pub fn word(&self) -> &'static str {
        match self {
            Stop::Complete => "complete",
            Stop::Budget { .. } => "budget",
            Stop::Paused { .. } => "paused",
            Stop::Interrupted => "interrupted",
            Stop::Cancelled { .. } => "cancelled",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct MissionEnd {
    pub stop: Stop,
}

/// What the commander has used of its budgets.
#[derive(Debug, Default)]
struct Spent {
    units: u32,
    sessions: u32,
    /// What the child walks' sessions spent: dollars in millionths, and tokens.
    micro_usd: u64,
    tokens: u64,
}

/// Why the queue handed out nothing more, besides "every project is done".
#[derive(Debug, Default)]
struct Flags {
    budget: Option<String>,
    cancelled: Option<Option<String>>,
}

/// Everything the queue and the dispatcher of one mission run share.
pub struct Commander<'a> {
    /// This run's key: holder of the fleet claim, writer of its journal chain, and the stem
    /// of its children's termination keys.
    pub key: String,
    pub mission: MissionId,
    pub opts: Options,
    pub ctx: Context,
    /// The commander's repository.
    pub cwd: PathBuf,
    /// This program: what the child walks run.
    pub exe: PathBuf,
    pub observer: &'a dyn Observer,
    cancel: &'a AtomicBool,
    loop_dir: PathBuf,
    started: DateTime<Utc>,
    spent: Mutex<Spent>,
    flags: Mutex<Flags>,
    dispatched: AtomicU32,
}

impl Commander<'_> {
    fn writer(&self) -> WriterId {
        self.key.parse().expect("commander keys are valid writer ids")
    }

    /// Journal a mission event in the commander's chain (in the commander's repository).
    pub fn journal(&self, store: &Store, event: Recorded) -> Result<()> {
        let (kind, data) = event.into_parts();
        journal::append(store, &self.ctx, &self.writer(), NewEvent { kind, task: None, session: None, data })?;
        Ok(())
    }

    /// Ctrl-C or SIGTERM, or `git loop stop --all` in the commander's repository since the run
    /// began.
    pub fn interrupted(&self) -> bool {
        if self.cancel.load(Ordering::SeqCst) || gix::interrupt::is_triggered() {
            return true;
        }
        let fresh = std::fs::metadata(Layout::at(&self.loop_dir).cancel())
            .and_then(|m| m.modified())
            .ok()
            .map(DateTime::<Utc>::from)
            .is_some_and(|at| at >= self.started - chrono::Duration::seconds(1));
        if fresh {
            self.cancel.store(true, Ordering::SeqCst);
        }
        fresh
    }

    /// Whether the mission was cancelled since the run began (read from its record).
    pub fn cancelled(&self, store: &Store) -> Result<bool> {
        let mission = record::require(store, &self.mission)?.mission;
        if mission.state == MissionState::Cancelled {
            self.flags.lock().unwrap_or_else(|p| p.into_inner()).cancelled = Some(mission.reason);
            return Ok(true);
        }
        Ok(false)
    }

    /// The next termination key: `<commander key>-<n>`, unique to this dispatch.
    pub fn next_key(&self) -> String {
        format!("{}-{}", self.key, self.dispatched.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// What is left of the unit and session budgets (`None`: no limit).
    pub fn remaining(&self) -> (Option<u32>, Option<u32>) {
        let spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        (
            self.opts.max_units.map(|max| max.saturating_sub(spent.units)),
            self.opts.max_iterations.map(|max| max.saturating_sub(spent.sessions)),
        )
    }

    /// What is left of the budgets in dollars and tokens (`None`: no limit).
    pub fn money_left(&self) -> (Option<f64>, Option<u64>) {
        let spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        (
            self.opts.budget_usd.map(|max| (max - spent.micro_usd as f64 / 1_000_000.0).max(0.0)),
            self.opts.budget_tokens.map(|max| max.saturating_sub(spent.tokens)),
        )
    }

    /// What the child walks' sessions spent so far: dollars and tokens.
    pub fn money_spent(&self) -> (f64, u64) {
        let spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        (spent.micro_usd as f64 / 1_000_000.0, spent.tokens)
    }

    /// Take what a child walk used off the budgets.
    pub fn spend(&self, terminated: &queue::Terminated) {
        let mut spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        spent.units += terminated.closed;
        spent.sessions += terminated.sessions.unwrap_or(0);
        spent.micro_usd += terminated.spent_micro_usd.unwrap_or(0);
        spent.tokens += terminated.spent_tokens.unwrap_or(0);
    }

    /// The budget that is spent, if one is, as a sentence (with the figures).
    pub fn budget_spent(&self) -> Option<String> {
        let (units, sessions) = self.remaining();
        let (usd_left, tokens_left) = self.money_left();
        let (usd, tokens) = self.money_spent();
        let why = if units == Some(0) {
            format!("{} tasks closed, the --max-units budget", self.opts.max_units.unwrap_or(0))
        } else if sessions == Some(0) {
            format!("{} sessions run, the --max-iterations budget", self.opts.max_iterations.unwrap_or(0))
        } else if usd_left.is_some_and(|left| left <= 0.0) {
            format!(
                "{} spent of the mission's {} (--budget-usd), {tokens} tokens",
                crate::store::usage::dollars(usd),
                crate::store::usage::dollars(self.opts.budget_usd.unwrap_or(0.0))
            )
        } else if tokens_left == Some(0) {
            format!(
                "{tokens} tokens spent of the mission's {} (--budget-tokens), {}",
                self.opts.budget_tokens.unwrap_or(0),
                crate::store::usage::dollars(usd)
            )
        } else {
            return None;
        };
        self.flags.lock().unwrap_or_else(|p| p.into_inner()).budget.get_or_insert(why.clone());
        Some(why)
    }

    /// Where a project known by URL is cloned: `<git-common-dir>/loop/missions/<id>/<name>`.
    pub fn clone_dir(&self, project: &str) -> PathBuf {
        Layout::at(&self.loop_dir).mission_project(self.mission.as_str(), project)
    }

    /// The directory a project's child walks run in.
    pub fn project_dir(&self, project: &record::Project) -> PathBuf {
        match project.source() {
            Source::Path(path) => PathBuf::from(path),
            Source::Url(_) => self.clone_dir(&project.name),
        }
    }

    fn agent_name(&self) -> String {
        match &self.opts.agent {
            AgentChoice::Named { name, .. } => name.clone(),
            AgentChoice::Command(_) => "custom".into(),
        }
    }
}

/// Run mission `id` from the commander's repository (`store`). `exe` is this program, which the
/// child walks run; `cancel` is set by the caller's signal handling.
pub fn run(
    store: &Store,
    ctx: &Context,
    exe: PathBuf,
    id: &MissionId,
    opts: Options,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Result<MissionEnd> {
    let mission = record::require(store, id)?.mission;
    if mission.state == MissionState::Cancelled {
        return Err(crate::error::refused(format!("mission '{id}' is cancelled"))
            .hint("add a new mission with 'git loop mission add'")
            .into());
    }
    if mission.projects.is_empty() {
        return Err(crate::error::usage(format!("mission '{id}' has no projects"))
            .hint(format!("add one with 'git loop mission project {id} <name> --path <dir> --wave 1 --label <label>'"))
            .into());
    }
    let commander = Commander {
        key: format!("m-{}", random_base32(8)),
        mission: id.clone(),
        opts,
        ctx: ctx.clone(),
        cwd: store.workdir().to_owned(),
        exe,
        observer,
        cancel,
        loop_dir: store.loop_dir()?,
        started: ctx.now(),
        spent: Mutex::new(Spent::default()),
        flags: Mutex::new(Flags::default()),
        dispatched: AtomicU32::new(0),
    };
    check_agent(&commander, &mission)?;
    if mission.is_complete() {
        if mission.state != MissionState::Complete {
            set_state(store, ctx, id, MissionState::Complete, None)?;
        }
        observer.event(&Event::Finished { stop: Stop::Complete });
        return Ok(MissionEnd { stop: Stop::Complete });
    }
    let key = crate::refs::fleet_claim(id);
    let _held = take_fleet(store, ctx, &key, &commander.key)?;
    commander.journal(
        store,
        Recorded::MissionStarted(events::MissionStarted {
            mission: commander.mission.to_string(),
            summary: format!("{id} from wave {}", mission.current_wave().unwrap_or(1)),
            agent: commander.agent_name(),
            wave: mission.current_wave(),
        }),
    )?;
    observer.event(&Event::Started {
        mission: id.to_string(),
        commander: commander.key.clone(),
        waves: mission
            .waves()
            .into_iter()
            .map(|(n, projects)| (n, projects.iter().map(|p| p.name.clone()).collect()))
            .collect(),
        agent: commander.agent_name(),
    });
    let limits = Limits { per_unit_dispatches: DISPATCHES_PER_PROJECT, pause_after: 1, ..Limits::default() };
    let walk = engine::Run::new(limits);
    let heartbeat_stop = engine::StopFlag::default();
    let worked = std::thread::scope(|scope| {
        scope.spawn(|| heartbeat(&commander, &key, &heartbeat_stop));
        let mut queue = queue::MissionQueue::new(store, &commander);
        let mut dispatcher = dispatch::ChildDispatcher::new(store, &commander);
        let worked = engine::work(&walk, &mut queue, &mut dispatcher, &|| commander.interrupted());
        heartbeat_stop.stop();
        worked
    });
    worked?;
    let stop = decide_stop(store, &commander, walk.outcome().0)?;
    let (state, reason) = match &stop {
        Stop::Complete => (MissionState::Complete, None),
        Stop::Paused { reason, .. } => (MissionState::Paused, Some(reason.clone())),
        Stop::Budget { reason } => (MissionState::Open, Some(format!("stopped: {reason}"))),
        Stop::Interrupted => (MissionState::Open, Some("interrupted".to_owned())),
        Stop::Cancelled { reason } => (MissionState::Cancelled, reason.clone()),
    };
    set_state(store, ctx, id, state, reason.clone())?;
    if stop == Stop::Interrupted {
        // `git loop stop --all` asked once; the next run must not see it again.
        let _ = std::fs::remove_file(Layout::at(&commander.loop_dir).cancel());
    }
    commander.journal(
        store,
        Recorded::MissionEnded(events::MissionEnded {
            mission: commander.mission.to_string(),
            summary: format!("{id} {}", stop.word()),
            stop: stop.word().to_owned(),
            reason,
            spent_usd: Some(commander.money_spent().0),
            spent_tokens: Some(commander.money_spent().1),
        }),
    )?;
    observer.event(&Event::Finished { stop: stop.clone() });
    Ok(MissionEnd { stop })
}

/// Why the run stopped, from the engine's outcome and what the queue found.
fn decide_stop(store: &Store, commander: &Commander<'_>, stop: engine::Stop) -> Result<Stop> {
    let flags = std::mem::take(&mut *commander.flags.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some(reason) = flags.cancelled {
        return Ok(Stop::Cancelled { reason });
    }
    if commander.interrupted() {
        return Ok(Stop::Interrupted);
    }
    let mission = record::require(store, &commander.mission)?.mission;
    Ok(match stop {
        engine::Stop::Interrupted => Stop::Interrupted,
        engine::Stop::Paused { units, .. } => {
            let project = units.into_iter().next().unwrap_or_default();
            let reason = match mission.project(&project) {
                Some(p) => pause_reason(p),
                None => format!("project '{project}' failed"),
            };
            Stop::Paused { project, reason }
        }
        _ if mission.is_complete() => Stop::Complete,
        _ if flags.budget.is_some() => Stop::Budget { reason: flags.budget.unwrap_or_default() },
        _ => {
            // Nothing more was handed out, yet something is not done: say what.
            let left = mission.projects.iter().find(|p| p.status != Status::Done).expect("not complete");
            Stop::Paused { project: left.name.clone(), reason: pause_reason(left) }
        }
    })
}

/// "project 'web' is incomplete: t-4f2a is parked: ...", "project 'api' failed: ...".
fn pause_reason(p: &record::Project) -> String {
    let why = p.outcome.as_ref().and_then(|o| o.reason.clone()).unwrap_or_else(|| "it is not done".into());
    match p.status {
        Status::Failed => format!("project '{}' failed: {why}", p.name),
        status => format!("project '{}' is {}: {why}", p.name, status.as_str()),
    }
}

fn set_state(store: &Store, ctx: &Context, id: &MissionId, state: MissionState, reason: Option<String>) -> Result<()> {
    let change = |m: &mut record::Mission| -> Result<(), Refusal> {
        // A cancel that landed meanwhile stands.
        if m.state != MissionState::Cancelled {
            m.state = state;
            m.reason = reason.clone();
        }
        Ok(())
    };
    record::update(store, ctx, id, state.as_str(), &change)?;
    Ok(())
}

/// The agent's program must exist in every project it will run in, before any claim.
fn check_agent(commander: &Commander<'_>, mission: &record::Mission) -> Result<()> {
    let resolve = |store: &Store| -> Result<presets::Agent> {
        match &commander.opts.agent {
            AgentChoice::Named { name, model } => presets::resolve(store, name, model.as_deref(), &commander.exe),
            AgentChoice::Command(cmd) => Ok(presets::custom("custom", cmd)),
        }
    };
    let mut agents = Vec::new();
    for project in &mission.projects {
        let dir = commander.project_dir(project);
        if !dir.exists() {
            continue;
        }
        if let Ok(store) = Store::open(&commander.ctx, &dir) {
            agents.push(resolve(&store)?);
        }
    }
    if agents.is_empty() {
        agents.push(resolve(&Store::open(&commander.ctx, &commander.cwd)?)?);
    }
    for agent in agents {
        if let Some(program) = agent.missing_program(commander.ctx.path_var.as_deref()) {
            return Err(Refusal::new(Class::AgentMissing, format!("the agent's program '{program}' was not found"))
                .hint(format!("install it or put it on PATH (agent '{}'); see docs/agents.md", agent.name))
                .into());
        }
    }
    Ok(())
}

fn fleet_options(ctx: &Context, holder: &str) -> AcquireOptions {
    AcquireOptions {
        holder: holder.to_owned(),
        ttl: chrono::Duration::minutes(CLAIM_TTL_MINUTES),
        reason: Some(format!("git loop mission run (pid {})", ctx.pid)),
        session: None,
    }
}

/// Take the mission's `fleet:` claim for this commander (released when dropped).
fn take_fleet<'s>(store: &'s Store, ctx: &'s Context, key: &ClaimKey, holder: &str) -> Result<Singleton<'s>> {
    claim::take_singleton(store, ctx, key, fleet_options(ctx, holder))?.map_err(|held| {
        let r = &held.record;
        Refusal::new(
            Class::Busy,
            format!("another commander runs mission '{}': {} (pid {} on {})", key.name(), r.holder, r.pid, r.host),
        )
        .hint(format!("wait for it to finish, or interrupt it with 'kill -INT {}'", r.pid))
        .into()
    })
}

/// Keep the fleet claim's lease fresh until told to stop.
fn heartbeat(commander: &Commander<'_>, key: &ClaimKey, stop: &engine::StopFlag) {
    let Ok(store) = Store::open(&commander.ctx, &commander.cwd) else { return };
    let opts = fleet_options(&commander.ctx, &commander.key);
    let mut last = std::time::Instant::now();
    while !stop.sleep(Duration::from_millis(100)) {
        if last.elapsed() >= Duration::from_secs(30) {
            let _ = claim::acquire(&store, &commander.ctx, key, &opts);
            last = std::time::Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Context {
        Context::for_tests()
    }

    #[test]
    fn the_fleet_claim_is_released_when_the_commander_panics() {
        let dir = tempfile::tempdir().expect("tempdir");
        gix::init(dir.path()).expect("init");
        let ctx = context();
        let store = Store::open(&ctx, dir.path()).expect("open");
        let key = crate::refs::fleet_claim(&"m1".parse().expect("id"));
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = take_fleet(&store, &ctx, &key, "m-commander").expect("taken");
            assert!(claim::read(&store, &key).expect("read").is_some(), "held while the commander runs");
            panic!("the commander fails");
        }));
        assert!(panicked.is_err());
        assert!(claim::read(&store, &key).expect("read").is_none(), "released while unwinding");
    }

    #[test]
    fn a_live_commander_is_named_and_a_dead_one_of_this_machine_is_taken_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        gix::init(dir.path()).expect("init");
        let ctx = context();
        let store = Store::open(&ctx, dir.path()).expect("open");
        let key = crate::refs::fleet_claim(&"m1".parse().expect("id"));
        let _first = take_fleet(&store, &ctx, &key, "m-first").expect("taken");
        let err = take_fleet(&store, &ctx, &key, "m-second").err().expect("refused");
        let refusal = crate::error::find_refusal(&err).expect("a refusal");
        assert_eq!(refusal.class, Class::Busy, "exit 3");
        assert!(refusal.message.contains("m-first"), "{}", refusal.message);
        // A commander of this machine whose process is gone (no process has the largest pid)
        // never releases its claim: the next one takes it over at once.
        let dead = Context { pid: u32::MAX, ..context() };
        let dir2 = tempfile::tempdir().expect("tempdir");
        gix::init(dir2.path()).expect("init");
        let store2 = Store::open(&dead, dir2.path()).expect("open");
        claim::acquire(&store2, &dead, &key, &fleet_options(&dead, "m-dead")).expect("taken");
        let _next = take_fleet(&store2, &ctx, &key, "m-next").expect("a dead commander's claim is taken over");
    }
}
