//! The git-native walk behind `git loop run`: the queue claims tasks and closes them in git,
//! the dispatcher runs agent sessions in try worktrees; `engine` decides the control flow.
//!
//! A walk, start to end:
//! 1. Check the agent's program exists (exit 77 before any claim).
//! 2. Take the `walker:<clone-id>` singleton (a second walker in this clone exits 3). A
//!    walker that died without releasing it (same host and boot, process gone) is taken over
//!    at once rather than after its lease.
//! 3. Recover what a crashed walk of this clone left: stop its orphaned sessions, commit
//!    their leftovers to their try branches, release their task claims.
//! 4. Run `parallel` workers (see `engine::work`), each with its own repository handle.
//! 5. Journal how it ended, release the singleton, report.

pub mod dispatch;
pub mod handoff;
pub mod prompt;
pub mod queue;
pub mod race;
pub mod recover;
pub mod reports;
pub mod resolve;
pub mod review;
pub mod session;
pub mod steering;
pub mod summarize;
pub mod unit;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result};
use chrono::Utc;
use gix::ObjectId;

use crate::agent::presets::Agent;
use crate::backlog::Board;
use crate::context::Context;
use crate::engine::{self, Limits, Stop, Tally};
use crate::error::{Class, Refusal};
use crate::ids::{ClaimKey, TaskId, WriterId};
use crate::refs;
use crate::store::claim::{self, AcquireOptions, Singleton};
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, NewEvent};
use crate::store::layout::Layout;
use crate::store::watch::Watch;
use crate::store::{index, Store};

/// How to walk.
#[derive(Debug, Clone)]
pub struct Options {
    pub agent: Agent,
    pub checks: Option<String>,
    pub session_timeout: Option<Duration>,
    pub checks_timeout: Duration,
    /// Between SIGTERM and SIGKILL when a session is stopped.
    pub grace: Duration,
    pub labels: Vec<String>,
    /// Only these tasks (empty: any).
    pub tasks: Vec<String>,
    /// Also journal how the walk ended in the chain of this writer (for mission commanders).
    pub termination_key: Option<WriterId>,
    /// How long a task claim lasts unless refreshed (it is refreshed while sessions run).
    pub lease: chrono::Duration,
    pub limits: Limits,
    pub parallel: u32,
    /// The revision task branches start from (default: the current branch).
    pub base: Option<String>,
    /// Land each done task through the landing queue (`--land`, `--merge`, `loop.land`).
    pub land: bool,
    /// How many branches a landing merges before checking (`loop.landBatch`).
    pub land_batch: usize,
    /// Agents to race on every task that does not name its own (on every task, with
    /// `together_first`).
    pub together: Vec<String>,
    /// `together` wins over the task's own race (`git loop race --together`).
    pub together_first: bool,
    /// How races pick their winner, said on the command line: wins over the task's pick.
    pub pick: Option<unit::Pick>,
    /// How races pick their winner when neither the command line nor the task says (`loop.pick`).
    pub pick_default: Option<unit::Pick>,
    /// The command that picks among passing tries in `judge` mode.
    pub judge: Option<String>,
    /// A command that must approve a try (exit 0) for it to pass.
    pub review: Option<String>,
    /// Reviewers (roles or agents) whose sessions must approve a try's work after its checks
    /// pass, for tasks that name none of their own (`--reviewer`, `loop.reviewer`).
    pub reviewers: Vec<String>,
    /// Who resolves merge conflicts (`--resolver`, `loop.resolver`; a role or an agent); none:
    /// the built-in conflict-resolver role, played by its configured agent, else the walk's.
    pub resolver: Option<String>,
    /// Who writes landing commits' messages (`--summarizer`, `loop.summarizer`; a role or an
    /// agent); none: the built-in summarizer role when its agent is configured, else the loop's
    /// own message.
    pub summarizer: Option<String>,
    /// Review rounds without approval before a task goes to a person (`loop.reviewRounds`).
    pub review_rounds: u32,
    /// Why reviewers may review workers of the same (or an unknown) provider, if a person said.
    pub review_override: Option<String>,
    /// Agents that take over a task whose agent is unreachable, when the task names none.
    pub fallback: Vec<String>,
    /// How long a session asked to wrap up may take before it is stopped.
    pub wrap_up: Duration,
    /// How long an unreachable agent is left alone before new tasks go back to it.
    pub unreachable_for: Duration,
    /// Sync the loop's refs with `loop.remote` this often while walking (none: never).
    pub sync_every: Option<Duration>,
    /// Dollars one task's sessions may spend together (`--task-budget-usd`): a task that has
    /// spent them is parked before its next session.
    pub task_budget_usd: Option<f64>,
    /// Turns each session may take (`--max-turns`): handed to every agent as
    /// `GIT_LOOP_MAX_TURNS`, and to the CLIs that take such a limit.
    pub max_turns: Option<u32>,
    /// The mission this walk works for (`--mission`, from a mission commander): named in its
    /// `walk_started` and in each of its sessions' `session_ended`.
    pub mission: Option<String>,
    /// A command run in each new try worktree before its first session (`--setup`,
    /// `loop.setup`): copy `.env`, install dependencies.
    pub setup: Option<String>,
    /// The ignored build state each new try starts with (`loop.warm`, `.worktreeinclude`).
    pub warm: crate::tries::warm::Plan,
    /// A command told, as JSON on its stdin, when a task needs a person and how the walk
    /// ended (`loop.notify`; docs/hooks.md, "Notifications").
    pub notify: Option<String>,
    /// How sessions and checks are confined (decided when the walk starts: `sandbox`).
    pub confinement: crate::sandbox::Confinement,
    /// Obey settings changed while an unconfined session ran (`run --accept-settings`; see
    /// `steering`).
    pub accept_settings: bool,
}

impl Options {
    /// A walk with `agent` and the defaults `git loop run` has.
    pub fn new(agent: Agent) -> Options {
        Options {
            agent,
            checks: None,
            session_timeout: Some(Duration::from_secs(60 * 60)),
            checks_timeout: Duration::from_secs(10 * 60),
            grace: Duration::from_secs(10),
            labels: Vec::new(),
            tasks: Vec::new(),
            termination_key: None,
            lease: chrono::Duration::minutes(30),
            limits: Limits::default(),
            parallel: 1,
            base: None,
            land: false,
            land_batch: crate::store::settings::LAND_BATCH,
            together: Vec::new(),
            together_first: false,
            pick: None,
            pick_default: None,
            judge: None,
            review: None,
            reviewers: Vec::new(),
            resolver: None,
            summarizer: None,
            review_rounds: crate::store::settings::REVIEW_ROUNDS,
            review_override: None,
            fallback: Vec::new(),
            wrap_up: Duration::from_secs(30),
            unreachable_for: Duration::from_secs(15 * 60),
            sync_every: Some(Duration::from_secs(30)),
            max_turns: None,
            task_budget_usd: None,
            mission: None,
            setup: None,
            warm: Default::default(),
            notify: None,
            confinement: crate::sandbox::Confinement::Off,
            accept_settings: false,
        }
    }
}

/// Something worth telling the person watching.
#[derive(Debug, Clone)]
pub enum Event {
    Started {
        walker: String,
        agent: String,
        parallel: u32,
        limits: Limits,
        labels: Vec<String>,
        /// The checks' command; `None`: a task counts as done on its agent's word.
        checks: Option<String>,
        /// How its sessions and checks run.
        sandbox: Sandboxing,
    },
    Recovered {
        task: String,
        detail: String,
    },
    Claimed {
        task: String,
        title: String,
        priority: String,
    },
    TryOpened {
        task: String,
        number: u32,
        branch: String,
        worktree: PathBuf,
        resumed: bool,
        /// How its worktree was warmed (`loop.warm`), if it was.
        warmed: Option<crate::tries::warm::Warmed>,
        /// How its worktree was made (added, or a pooled one reused), if it was made.
        checkout: Option<crate::tries::pool::Checkout>,
    },
    SessionStarted {
        task: String,
        session: String,
        agent: String,
        number: u32,
        attempt: u32,
        /// The session's role when it is not the worker's (a reviewer, a conflict resolver…).
        role: Option<String>,
    },
    SessionEnded {
        task: String,
        session: String,
        elapsed: Duration,
        why: String,
        /// What its work was committed as; `None` when there was nothing to commit.
        commit: Option<String>,
        /// The commit is the agent's own (or its hooks'): the loop found nothing left
        /// uncommitted, and took the commits as they are.
        own: bool,
        /// False for a session whose role never commits (a reviewer, a summarizer).
        commits: bool,
        /// What it used; `None`: unknown.
        usage: Option<crate::store::usage::Usage>,
        /// Its output.
        log: PathBuf,
        /// When it failed (exited non-zero, timed out, could not run): the last lines of its
        /// output, as written. Empty otherwise.
        tail: Vec<String>,
    },
    Checks {
        task: String,
        passed: bool,
        elapsed: Duration,
        /// Their output.
        log: PathBuf,
        /// When they failed: the last lines of their output, as written. Empty otherwise.
        tail: Vec<String>,
    },
    Reviewed {
        task: String,
        approved: bool,
    },
    /// A reviewer's verdict in a review round (`approve`, `changes`, or `none`).
    ReviewVerdict {
        task: String,
        round: u32,
        rounds: u32,
        reviewer: String,
        verdict: String,
        comments: String,
    },
    /// A race begins (or is taken up again); `line` says who races and how it is decided.
    RaceStarted {
        task: String,
        agents: Vec<String>,
        tries: Vec<u32>,
        line: String,
    },
    /// A race is decided (or ends without a winner).
    RaceDecided {
        task: String,
        winner: Option<u32>,
        line: String,
    },
    /// The task goes from one agent to another (reassigned, restarted, unreachable).
    Handover {
        task: String,
        line: String,
    },
    Synced {
        changes: usize,
    },
    /// The shared remote stopped answering (a fault that may heal: a reset, a timeout, a
    /// stall, a 5xx): the walk goes on with the work it holds, claims nothing it cannot make on
    /// the remote, and asks again. Said once per outage.
    RemoteSilent {
        remote: String,
        why: String,
    },
    /// The shared remote answers again, after being silent for `after`.
    RemoteBack {
        remote: String,
        after: Duration,
    },
    BranchMoved {
        task: String,
        branch: String,
        commit: String,
    },
    /// A done task landed on the target (the landing queue).
    Landed {
        task: String,
        into: String,
        commit: String,
        batch: usize,
    },
    /// A done task could not land: it needs a person now.
    LandingFailed {
        task: String,
        into: String,
        /// `conflict`, `checks` or `summary` (see `landing::Failed`).
        cause: String,
        reason: String,
    },
    /// Done tasks wait to land: why (another lander, a dirty checkout, a dependency).
    NotLanded {
        tasks: Vec<String>,
        why: String,
    },
    Done {
        task: String,
        message: String,
    },
    /// Closed without landing: failed, needs-you or needs-decision.
    Closed {
        task: String,
        state: String,
        reason: String,
        /// Its latest try, when `done --try` can accept it.
        number: Option<u32>,
    },
    Abandoned {
        task: String,
        why: String,
    },
    FollowUp {
        task: String,
        added: String,
        title: String,
    },
    Warning {
        message: String,
    },
    /// Settings that steer walks changed: since the last walk (obeyed), or while a session ran
    /// (`during`; not obeyed by this walk).
    SettingsChanged {
        changes: Vec<events::SettingChange>,
        during: Vec<String>,
        obeyed: bool,
    },
    Finished {
        stop: Stop,
        tally: Tally,
        /// With `--land`: done tasks of this walk left unlanded (see `WalkEnd`).
        unlanded: Vec<String>,
    },
}

/// How a walk's sessions run, as its first lines say.
#[derive(Debug, Clone)]
pub enum Sandboxing {
    /// Confined: the line that says how.
    Confined(String),
    /// The machine cannot confine them (`loop.sandbox = auto`): why, and what would help.
    Unconfined { line: String, hint: String },
    /// `loop.sandbox = off`.
    Off(String),
}

impl Sandboxing {
    pub fn of(confinement: &crate::sandbox::Confinement) -> Sandboxing {
        use crate::sandbox::Confinement;
        match confinement {
            Confinement::Confined(_) => Sandboxing::Confined(confinement.describe()),
            Confinement::Unconfined { hint, .. } => {
                Sandboxing::Unconfined { line: confinement.describe(), hint: hint.clone() }
            }
            Confinement::Off => Sandboxing::Off(confinement.describe()),
        }
    }

    /// `confined`, `unconfined` or `off`.
    pub fn word(&self) -> &'static str {
        match self {
            Sandboxing::Confined(_) => "confined",
            Sandboxing::Unconfined { .. } => "unconfined",
            Sandboxing::Off(_) => "off",
        }
    }
}

/// Receives events as they happen (from several worker threads).
pub trait Observer: Sync {
    fn event(&self, event: &Event);
}

/// The walk's observer as the walk talks to it: an outage of the shared remote is said once
/// (`RemoteSilent` for the first warning that says it did not answer, `RemoteBack` when it
/// answers again, see `heard`), not once for every call of every thread that meets it.
struct Quiet<'a> {
    inner: &'a dyn Observer,
    /// The outage said, if one is: which remote, since when.
    said: std::sync::Mutex<Option<(String, std::time::Instant)>>,
}

impl Observer for Quiet<'_> {
    fn event(&self, event: &Event) {
        if let Event::Warning { message } = event {
            if message.contains(crate::store::remote::NO_ANSWER) {
                let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
                if said.is_none() {
                    let remote = message
                        .split_once("remote '")
                        .and_then(|(_, rest)| rest.split_once('\''))
                        .map_or_else(|| "the remote".to_owned(), |(name, _)| name.to_owned());
                    let why = message
                        .split_once(crate::store::remote::NO_ANSWER)
                        .map(|(_, rest)| rest.trim_start_matches([' ', '(']))
                        .and_then(|rest| rest.split_once("); nothing was lost").map(|(why, _)| why.to_owned()))
                        .unwrap_or_default();
                    // Since the first call that met it, not since it was said.
                    let since = match crate::store::remote::health(&remote) {
                        crate::store::remote::Health::Silent { since, .. } => since,
                        crate::store::remote::Health::Answering => std::time::Instant::now(),
                    };
                    *said = Some((remote.clone(), since));
                    drop(said);
                    self.inner.event(&Event::RemoteSilent { remote, why });
                }
                return;
            }
        }
        self.inner.event(event);
    }
}

impl Quiet<'_> {
    /// Say that the remote answers again, if an outage was said and this process's last call
    /// to that remote was answered (`remote::health`).
    fn heard(&self) {
        let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((remote, since)) = said.as_ref() {
            if crate::store::remote::health(remote) == crate::store::remote::Health::Answering {
                let back = Event::RemoteBack { remote: remote.clone(), after: since.elapsed() };
                *said = None;
                drop(said);
                self.inner.event(&back);
            }
        }
    }
}

/// Everything the workers of one walk share.
pub struct Walker<'a> {
    /// This walk's key: holder of its claims, writer of its journal chain.
    pub key: String,
    pub opts: Options,
    pub ctx: Context,
    pub cwd: PathBuf,
    /// This program, for the session guard and the demo agent.
    pub exe: PathBuf,
    pub base: ObjectId,
    pub observer: &'a dyn Observer,
    pub cancel: &'a AtomicBool,
    started: chrono::DateTime<Utc>,
    /// Agents found unreachable, with why and until when they are left alone.
    unreachable: std::sync::Mutex<std::collections::HashMap<String, (&'static str, std::time::Instant)>>,
    /// The board and the journal's chains, kept current between steps.
    seen: std::sync::Mutex<Seen>,
    /// Held while a worker publishes a closing unit, or the heartbeat syncs: the walk's workers
    /// share its journal chain, and two of them pushing it at once would fail each other's
    /// pushes.
    publishing: std::sync::Mutex<()>,
    /// Done tasks of this walk not landed yet (`--land`).
    to_land: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Held by the worker that lands; the others leave their tasks in `to_land` for it.
    landing: std::sync::Mutex<()>,
    /// Whether the walk said that it lands without checks (it says so once).
    said_no_checks: AtomicBool,
    /// Tasks this walk closed done whose landing then failed (they need a person now), and
    /// those of them whose close already counted as not done.
    landing_failed: std::sync::Mutex<std::collections::BTreeSet<String>>,
    counted_not_done: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Why tasks were not landed yet, as said: each said once, not at every try again.
    said_not_landed: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The try worktrees this walk ran the setup command in (`opts.setup`).
    set_up: std::sync::Mutex<std::collections::HashSet<PathBuf>>,
    /// The walk's run, which counts what its sessions spend (none for a recovery or a one-off
    /// role session).
    pub run: Option<&'a engine::Run>,
    /// The settings it started with, looked at again after each session (`steering`).
    pub steering: steering::Steering,
}

/// How one landing attempt of the walk went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Went {
    /// The queue ran: what could land landed, what could not was said.
    Landed,
    /// Another lander holds the target: its tasks wait for it.
    Busy,
    /// Refused (a dirty checkout of the target, an error): its tasks wait for the next close.
    Kept,
}

/// What a walk keeps current between steps instead of listing every ref again: its watch
/// names the task, claim and journal refs that changed (see `store::watch`).
struct Seen {
    watch: Watch,
    board: index::Live,
    chains: journal::LiveChains,
}

impl Seen {
    fn new(store: &Store) -> Seen {
        Seen {
            watch: Watch::new(store.common_dir(), &[refs::TASKS, "refs/loop/claims/node/", refs::JOURNAL]),
            board: index::Live::default(),
            chains: journal::LiveChains::default(),
        }
    }
}

/// What makes a walker, besides the store and the context: the one constructor's arguments.
struct Setup<'a> {
    key: String,
    opts: Options,
    cwd: PathBuf,
    exe: PathBuf,
    base: ObjectId,
    observer: &'a dyn Observer,
    cancel: &'a AtomicBool,
    run: Option<&'a engine::Run>,
}

impl<'a> Walker<'a> {
    /// A walker as a walk, a recovery or a one-off role session starts it: nothing seen,
    /// nothing landed, no agent found unreachable yet.
    fn new(store: &Store, ctx: &Context, s: Setup<'a>) -> Walker<'a> {
        Walker {
            key: s.key,
            opts: s.opts,
            ctx: ctx.clone(),
            cwd: s.cwd,
            exe: s.exe,
            base: s.base,
            observer: s.observer,
            cancel: s.cancel,
            started: ctx.now(),
            unreachable: Default::default(),
            seen: std::sync::Mutex::new(Seen::new(store)),
            publishing: Default::default(),
            to_land: Default::default(),
            landing: Default::default(),
            said_no_checks: AtomicBool::new(false),
            landing_failed: Default::default(),
            counted_not_done: Default::default(),
            said_not_landed: Default::default(),
            set_up: Default::default(),
            run: s.run,
            steering: steering::Steering::none(),
        }
    }
}

impl Walker<'_> {
    pub fn writer(&self) -> WriterId {
        self.key.parse().expect("walker keys are valid writer ids")
    }

    /// Warm `try_`'s worktree by the walk's plan (`opts.warm`) from the task's latest try
    /// below `below` that still has its worktree, else the main checkout. A failure is said
    /// and the try starts cold: warming is never why a try does not run.
    pub fn warm(&self, store: &Store, try_: &crate::tries::Try, below: u32) -> Option<crate::tries::warm::Warmed> {
        match crate::tries::warm::warm(store, try_, &self.opts.warm, below) {
            Ok(warmed) => warmed,
            Err(err) => {
                self.observer.event(&Event::Warning {
                    message: format!("could not warm the worktree of try {} of {}: {err:#}", try_.number, try_.task),
                });
                None
            }
        }
    }

    /// Warm a reviewer's checkout of `try_`'s work by the walk's plan, from the try's worktree
    /// (else the main checkout), as `warm` does; a failure is said and it starts cold.
    pub fn warm_checkout(&self, store: &Store, checkout: &std::path::Path, try_: &crate::tries::Try) {
        if let Err(err) = crate::tries::warm::warm_checkout(store, checkout, try_, &self.opts.warm) {
            self.observer.event(&Event::Warning {
                message: format!(
                    "could not warm the reviewer's checkout of try {} of {}: {err:#}",
                    try_.number, try_.task
                ),
            });
        }
    }

    /// Journal a walk event in this walker's chain.
    pub fn record(&self, store: &Store, task: Option<&str>, event: Recorded) -> Result<()> {
        let (kind, data) = event.into_parts();
        journal::append(
            store,
            &self.ctx,
            &self.writer(),
            NewEvent { kind, task: task.map(Into::into), session: None, data },
        )?;
        Ok(())
    }

    /// Where this walk's sessions and checks run confined (none: unconfined).
    pub fn sandbox(&self) -> Option<&crate::sandbox::Sandbox> {
        self.opts.confinement.sandbox().map(|s| s.as_ref())
    }

    /// Who runs this walk's commands (checks, the review command, setup) and for how long:
    /// under the session guard, confined as its sessions are.
    pub fn runner<'s>(&'s self, cancelled: &'s dyn Fn() -> bool) -> crate::tries::checks::Runner<'s> {
        crate::tries::checks::Runner {
            exe: &self.exe,
            parent: self.ctx.pid,
            grace: self.opts.grace,
            timeout: self.opts.checks_timeout,
            cancelled,
            sandbox: self.sandbox(),
        }
    }

    /// Journal and say that settings changed (see `steering`).
    pub fn settings_changed(
        &self,
        store: &Store,
        changes: Vec<events::SettingChange>,
        during: Vec<String>,
        obeyed: bool,
    ) -> Result<()> {
        self.observer.event(&Event::SettingsChanged { changes: changes.clone(), during: during.clone(), obeyed });
        self.record(store, None, Recorded::SettingsChanged(events::SettingsChanged { changes, during, obeyed }))
    }

    /// After session `session` (`confined` or not): the settings changed while it ran,
    /// journaled and said, and kept as possibly planted when it ran unconfined. A failure to
    /// look is a warning: the walk goes on with the settings it started with either way.
    pub fn settings_after(&self, store: &Store, session: &str, confined: bool) {
        let planted_by = (!confined).then_some(session);
        match self.steering.look_again(&self.ctx, &self.cwd, planted_by) {
            Ok(changes) if changes.is_empty() => {}
            Ok(changes) => {
                if let Err(err) = self.settings_changed(store, changes, vec![session.to_owned()], false) {
                    self.observer.event(&Event::Warning { message: format!("{err:#}") });
                }
            }
            Err(err) => self.observer.event(&Event::Warning {
                message: format!("could not read the settings again after session {session}: {err:#}"),
            }),
        }
    }

    /// One worker at a time publishes (see `publishing`).
    pub fn publishing(&self) -> std::sync::MutexGuard<'_, ()> {
        self.publishing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `call`, which talks to the shared remote, until the remote answers: while it fails
    /// because the remote did not answer (`remote::NoAnswer`: every attempt met a fault that
    /// may heal), it is made again after a growing, jittered wait (at most [`WAIT_STEP`]),
    /// until the walk is cancelled. What the remote does not take now is not lost: the
    /// unit's work is committed here. Each failure is a warning, which the walk's observer
    /// says once per outage.
    pub fn patiently<T>(&self, store: &Store, mut call: impl FnMut() -> Result<T>) -> Result<T> {
        let mut attempt = 0;
        loop {
            match call() {
                Err(err) if crate::store::remote::no_answer(&err).is_some() && !self.cancelled(store) => {
                    self.observer.event(&Event::Warning { message: format!("{err:#}") });
                    attempt += 1;
                    let wait = crate::store::remote::backoff(attempt).min(WAIT_STEP);
                    let until = std::time::Instant::now() + wait;
                    while std::time::Instant::now() < until && !self.cancelled(store) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
                other => return other,
            }
        }
    }

    /// Land `done` (a task this walk just closed done), with every other done task of this
    /// walk not landed yet, through the landing queue. One worker lands at a time; a worker
    /// that finds another landing leaves its task for it (it looks again after each landing),
    /// so the tasks parallel workers finish meanwhile land together, in one batch. What stays
    /// unlanded (another clone's lander at work, a dirty checkout of the target) is tried again
    /// at the next close and when the walk ends. Never fails the walk: what went wrong is said.
    pub fn land(&self, store: &Store, done: Option<TaskId>) -> bool {
        if let Some(id) = done {
            self.to_land.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string());
        }
        let mut busy = false;
        loop {
            let Ok(_landing) = self.landing.try_lock() else { return false };
            let ids: Vec<String> =
                std::mem::take(&mut *self.to_land.lock().unwrap_or_else(|p| p.into_inner())).into_iter().collect();
            let went = if ids.is_empty() { Went::Landed } else { self.land_now(store, ids) };
            drop(_landing);
            busy |= went == Went::Busy;
            // A task added while this worker landed, by a worker that found it landing. What
            // could not land (a dirty checkout) waits for the next close: trying it again at
            // once would only fail again.
            if went != Went::Landed || self.to_land.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
                return busy;
            }
        }
    }

    /// Land `ids` now.
    fn land_now(&self, store: &Store, ids: Vec<String>) -> Went {
        let only: Vec<TaskId> = ids.iter().filter_map(|id| id.parse().ok()).collect();
        let checks = self.opts.checks.clone();
        if checks.is_none() && !self.said_no_checks.swap(true, Ordering::SeqCst) {
            self.observer.event(&Event::Warning {
                message: "no checks are configured (--checks, loop.checks): done work lands on its merge alone".into(),
            });
        }
        let cancelled = || self.cancelled(store);
        let opts = crate::landing::Options {
            into: None,
            only,
            batch: self.opts.land_batch,
            checks,
            checks_timeout: self.opts.checks_timeout,
            grace: self.opts.grace,
            exe: self.exe.clone(),
            holder: self.key.clone(),
            cancelled: &cancelled,
            resolver: &crate::landing::NoResolver,
            summarizer: &crate::landing::NoSummarizer,
            sandbox: self.sandbox(),
        };
        let agent_summarizer = match summarize::role_of(store, self.opts.summarizer.as_deref()) {
            Ok(role) => role.map(|role| summarize::AgentSummarizer { walker: self, role }),
            Err(err) => {
                self.observer.event(&Event::Warning { message: format!("no summarizer: {err:#}") });
                None
            }
        };
        let agent_resolver = match resolve::role_of(store, self.opts.resolver.as_deref(), Some(&self.opts.agent.name)) {
            Ok(role) => role.map(|role| resolve::AgentResolver { walker: self, role }),
            Err(err) => {
                self.observer.event(&Event::Warning { message: format!("no conflict resolver: {err:#}") });
                None
            }
        };
        let opts = crate::landing::Options {
            resolver: match &agent_resolver {
                Some(r) => r,
                None => &crate::landing::NoResolver,
            },
            summarizer: match &agent_summarizer {
                Some(s) => s,
                None => &crate::landing::NoSummarizer,
            },
            ..opts
        };
        let keep = |why: String| {
            self.to_land.lock().unwrap_or_else(|p| p.into_inner()).extend(ids.iter().cloned());
            self.not_landed(ids.clone(), why);
        };
        match crate::landing::land(store, &self.ctx, &opts) {
            Ok(crate::landing::Outcome::Ran(report)) => {
                let into = report.into.clone();
                for landed in &report.landed {
                    self.observer.event(&Event::Landed {
                        task: landed.task.clone(),
                        into: into.clone(),
                        commit: landed.commit.clone(),
                        batch: landed.batch,
                    });
                }
                for failed in &report.failed {
                    self.landing_failed.lock().unwrap_or_else(|p| p.into_inner()).insert(failed.task.clone());
                    self.observer.event(&Event::LandingFailed {
                        task: failed.task.clone(),
                        into: into.clone(),
                        cause: failed.cause.clone(),
                        reason: failed.reason.clone(),
                    });
                }
                for waiting in &report.waiting {
                    let why = format!("it waits for {} to land first", waiting.waiting_for.join(", "));
                    self.not_landed(vec![waiting.task.clone()], why);
                }
                for note in &report.notes {
                    self.observer.event(&Event::Warning { message: note.clone() });
                }
                Went::Landed
            }
            Ok(crate::landing::Outcome::Busy(held)) => {
                keep(format!(
                    "another lander is at work on the target: {} (pid {} on {})",
                    held.record.holder, held.record.pid, held.record.host
                ));
                Went::Busy
            }
            Err(err) => {
                let why = match crate::error::find_refusal(&err) {
                    Some(refusal) => match &refusal.hint {
                        Some(hint) => format!("{} ({hint})", refusal.message),
                        None => refusal.message.clone(),
                    },
                    None => format!("{err:#}"),
                };
                keep(why);
                Went::Kept
            }
        }
    }

    /// Say that `tasks` are not landed yet and why, unless that was said already.
    fn not_landed(&self, tasks: Vec<String>, why: String) {
        let said = format!("{}\n{why}", tasks.join(","));
        if self.said_not_landed.lock().unwrap_or_else(|p| p.into_inner()).insert(said) {
            self.observer.event(&Event::NotLanded { tasks, why });
        }
    }

    /// Whether the landing of `task`, which this walk closed done, failed; counted from now on
    /// as not done (its close says so), so the walk's tally agrees with the board.
    pub fn landing_failed_now(&self, task: &str) -> bool {
        let failed = self.landing_failed.lock().unwrap_or_else(|p| p.into_inner()).contains(task);
        if failed {
            self.counted_not_done.lock().unwrap_or_else(|p| p.into_inner()).insert(task.to_owned());
        }
        failed
    }

    /// The tasks whose landing failed after their close counted as done (another worker's
    /// landing, or the one as the walk ends).
    fn failed_after_counting(&self) -> u32 {
        let failed = self.landing_failed.lock().unwrap_or_else(|p| p.into_inner());
        let counted = self.counted_not_done.lock().unwrap_or_else(|p| p.into_inner());
        failed.difference(&counted).count() as u32
    }

    /// Land what this walk finished and has not landed yet, as the walk ends: waiting while
    /// another lander holds the target (up to `LAND_WAIT`), unless the walk is interrupted.
    fn land_the_rest(&self, store: &Store) {
        let started = std::time::Instant::now();
        while self.land(store, None) && started.elapsed() < LAND_WAIT && !self.cancelled(store) {
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Every task and claim, as `Board::load` reads them, re-reading only what changed.
    pub fn board(&self, store: &Store) -> Result<Board> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let Seen { watch, board, .. } = &mut *seen;
        Board::load_live(store, &self.ctx, board, watch)
    }

    /// One task's journal events, as `journal::timeline` reads them.
    pub fn task_history(&self, store: &Store, task: &str) -> Result<Vec<journal::Entry>> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let Seen { watch, chains, .. } = &mut *seen;
        Ok(journal::task_timeline(store, task, chains, watch)?.entries)
    }

    /// The agent named `name`: the walk's own, or a preset or configured agent.
    pub fn agent(&self, store: &Store, name: &str) -> Result<Agent> {
        if name == self.opts.agent.name {
            return Ok(self.opts.agent.clone());
        }
        crate::agent::presets::resolve(store, name, None, &self.exe)
    }

    /// Whether agent `name` can be started here (its program is on PATH).
    pub fn installed(&self, store: &Store, name: &str) -> bool {
        self.agent(store, name).is_ok_and(|agent| {
            crate::agent::process::find_program(&agent.program, self.ctx.path_var.as_deref()).is_some()
        })
    }

    /// Why agent `name` is being left alone, if it is.
    pub fn unreachable_reason(&self, name: &str) -> Option<&'static str> {
        let mut map = self.unreachable.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(name) {
            Some((reason, until)) if std::time::Instant::now() < *until => Some(reason),
            Some(_) => {
                map.remove(name);
                None
            }
            None => None,
        }
    }

    pub fn reachable(&self, name: &str) -> bool {
        self.unreachable_reason(name).is_none()
    }

    /// Leave agent `name` alone for a while: its CLI said it cannot be reached.
    pub fn mark_unreachable(&self, store: &Store, name: &str, reason: &'static str, task: &str) -> Result<()> {
        let until = std::time::Instant::now() + self.opts.unreachable_for;
        self.unreachable.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_owned(), (reason, until));
        self.record(
            store,
            Some(task),
            Recorded::AgentUnreachable(events::AgentUnreachable {
                agent: name.to_owned(),
                reason: reason.to_owned(),
                retry_after_s: self.opts.unreachable_for.as_secs(),
            }),
        )
    }

    /// The user's own "unreachable" phrases for a named agent (`loop.agent.<name>.unreachable`).
    pub fn agent_phrases(&self, store: &Store, agent: &Agent) -> Vec<String> {
        store.settings().agent_unreachable(&agent.name)
    }

    /// Tell the notify command (`opts.notify`) of `event`: the document of docs/hooks.md,
    /// "Notifications", with `fields` beside the ones every event has, on its stdin. It may run
    /// for [`NOTIFY_TIMEOUT`]; its failure is a warning, never the walk's.
    pub fn notify(&self, store: &Store, event: &str, fields: serde_json::Value) {
        let Some(command) = self.opts.notify.clone() else { return };
        if let Err(err) = self.try_notify(store, event, &command, fields) {
            self.observer.event(&Event::Warning { message: format!("the notify command failed: {err:#}") });
        }
    }

    fn try_notify(&self, store: &Store, event: &str, command: &str, fields: serde_json::Value) -> Result<()> {
        let mut doc = serde_json::json!({
            "version": NOTIFY_VERSION,
            "event": event,
            "at": self.ctx.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "repository": self.cwd,
            "walker": self.key,
        });
        if let (Some(doc), serde_json::Value::Object(fields)) = (doc.as_object_mut(), fields) {
            doc.extend(fields);
        }
        let dir = store.loop_dir()?.join("notify");
        std::fs::create_dir_all(&dir).with_context(|| format!("could not create '{}'", dir.display()))?;
        let input = dir.join(format!("{event}-{}.json", crate::ids::random_base32(8)));
        std::fs::write(&input, format!("{doc}\n")).with_context(|| format!("could not write '{}'", input.display()))?;
        let log = dir.join("log");
        let runner = crate::tries::checks::Runner {
            exe: &self.exe,
            parent: self.ctx.pid,
            grace: Duration::from_secs(1),
            timeout: NOTIFY_TIMEOUT,
            cancelled: &|| false,
            // The person's own command, in the main checkout: it runs no agent's code.
            sandbox: None,
        };
        let env = [("GIT_LOOP_EVENT".to_owned(), event.to_owned())];
        let ran = crate::tries::checks::run_fed(
            store,
            &runner,
            "notify",
            command,
            &self.cwd,
            &env,
            &log,
            Some(input.clone()),
        );
        let _ = std::fs::remove_file(&input);
        let ran = ran?;
        if !ran.passed {
            let how =
                ran.exit.map_or_else(|| format!("stopped after {} s", NOTIFY_TIMEOUT.as_secs()), |e| e.to_string());
            anyhow::bail!("`{command}` on {event} ({how}); its output: {}", log.display());
        }
        Ok(())
    }

    /// Whether the walk should stop: Ctrl-C / SIGTERM, or `git loop stop --all` since it began.
    pub fn cancelled(&self, store: &Store) -> bool {
        if self.cancel.load(Ordering::SeqCst) || gix::interrupt::is_triggered() {
            return true;
        }
        let marker = Layout::of(store.common_dir()).cancel();
        let fresh = std::fs::metadata(&marker)
            .and_then(|m| m.modified())
            .ok()
            .map(chrono::DateTime::<Utc>::from)
            .is_some_and(|at| at >= self.started - chrono::Duration::seconds(1));
        if fresh {
            self.cancel.store(true, Ordering::SeqCst);
        }
        fresh
    }
}

/// The longest wait between two attempts of a call the walk makes `patiently`: once the
/// remote answers again, the walk notices within this.
pub const WAIT_STEP: Duration = Duration::from_secs(5);

/// How long a walk that ends waits for another clone's lander to let it land its done tasks.
const LAND_WAIT: Duration = Duration::from_secs(10 * 60);

/// How long the notify command may run before it is stopped (the walk waits for it).
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// The version of the notify command's JSON document (docs/hooks.md, "Notifications").
pub const NOTIFY_VERSION: u32 = 1;

/// How a walk ended, for the exit code and the summary.
#[derive(Debug, Clone)]
pub struct WalkEnd {
    pub stop: Stop,
    /// With `--land`: tasks this walk closed done that it could not land (the landing was
    /// refused or left waiting, as it said); the exit code says so.
    pub unlanded: Vec<String>,
}

/// The walker singleton's key: one walker per clone (linked worktrees share it).
fn singleton(store: &Store) -> Result<ClaimKey> {
    Ok(ClaimKey::new("walker", &store.clone_id()?)?)
}

/// Walk the backlog. `cancel` is set by the caller's signal handling.
pub fn walk(
    store: &Store,
    ctx: &Context,
    cwd: PathBuf,
    exe: PathBuf,
    opts: Options,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Result<WalkEnd> {
    one_arena();
    let program_path = ctx.path_var.as_deref();
    if let Some(program) = opts.agent.missing_program(program_path) {
        return Err(Refusal::new(Class::AgentMissing, format!("the agent's program '{program}' was not found"))
            .hint(if opts.agent.name == "custom" {
                "install it or put it on PATH, or correct --agent-cmd; see docs/agents.md".to_owned()
            } else {
                format!("install it or put it on PATH (agent '{}'); see docs/agents.md", opts.agent.name)
            })
            .into());
    }
    // A reviewer of the worker's provider is refused before anything is claimed.
    let conflicts = review::walk_conflicts(store, &opts, &exe)?;
    if let (Some((_, _, why)), None) = (conflicts.first(), &opts.review_override) {
        return Err(Refusal::new(Class::Usage, format!("{why}: a reviewer must not share the worker's provider"))
            .hint("choose a reviewer of another provider (--reviewer codex), declare a named agent's with git config loop.agent.<name>.provider <provider>, or pass --reviewer-override \"<reason>\"")
            .into());
    }
    let base = crate::tries::base(store, opts.base.as_deref())?;
    let key = crate::ids::walker_key();
    let singleton = singleton(store)?;
    let _held = take_singleton(store, ctx, &singleton, &key)?;
    let (steering, changed) = steering::start(store, opts.accept_settings)?;
    let run = engine::Run::new(opts.limits);
    let quiet = Quiet { inner: observer, said: Default::default() };
    let observer: &dyn Observer = &quiet;
    let mut walker = Walker::new(store, ctx, Setup { key, opts, cwd, exe, base, observer, cancel, run: Some(&run) });
    walker.steering = steering;
    // Start from the remote's board, so the first picks are not tasks done elsewhere. The
    // remote must answer this once: a walk rides out an outage with the work it holds, but one
    // that never reached its remote holds nothing, and would only wait.
    if let Some(remote) = store.arbiter() {
        match crate::store::sync::sync(store, &walker.ctx, &remote) {
            Ok(report) if report.incoming() > 0 => observer.event(&Event::Synced { changes: report.incoming() }),
            Ok(_) => {}
            Err(err) if crate::store::remote::no_answer(&err).is_some() || stops_the_walk(&err) => return Err(err),
            Err(err) => observer.event(&Event::Warning { message: format!("could not sync with {remote}: {err:#}") }),
        }
    }
    walker.record(
        store,
        None,
        Recorded::WalkStarted(events::WalkStarted {
            agent: walker.opts.agent.name.clone(),
            parallel: walker.opts.parallel,
            labels: walker.opts.labels.clone(),
            walker: Some(walker.key.clone()),
            max_units: walker.opts.limits.max_units,
            max_iterations: walker.opts.limits.max_iterations,
            per_unit_dispatches: Some(walker.opts.limits.per_unit_dispatches),
            budget_usd: walker.opts.limits.budget_usd,
            budget_tokens: walker.opts.limits.budget_tokens,
            mission: walker.opts.mission.clone(),
            sandbox: Some(walker.opts.confinement.word().to_owned()),
        }),
    )?;
    if let Some(reason) = &walker.opts.review_override {
        for (worker, reviewer, rule) in &conflicts {
            walker.record(
                store,
                None,
                Recorded::ReviewOverride(events::ReviewOverride {
                    reviewer: reviewer.clone(),
                    worker: worker.clone(),
                    rule: rule.clone(),
                    reason: reason.clone(),
                }),
            )?;
        }
    }
    observer.event(&Event::Started {
        walker: walker.key.clone(),
        agent: walker.opts.agent.name.clone(),
        parallel: walker.opts.parallel,
        limits: walker.opts.limits,
        labels: walker.opts.labels.clone(),
        checks: walker.opts.checks.clone(),
        sandbox: Sandboxing::of(&walker.opts.confinement),
    });
    if !changed.is_empty() {
        walker.settings_changed(store, changed, Vec::new(), true)?;
    }
    walker.patiently(store, || recover::recover(store, &walker))?;
    let heartbeat_stop = engine::StopFlag::default();
    let errors: std::sync::Mutex<Vec<anyhow::Error>> = Default::default();
    // A handle of its own for every thread of the walk.
    let beat = Store::open(&walker.ctx, &walker.cwd)?;
    let handles =
        (0..walker.opts.parallel.max(1)).map(|_| Store::open(&walker.ctx, &walker.cwd)).collect::<Result<Vec<_>>>()?;
    let (walker_ref, run_ref, errors_ref) = (&walker, &run, &errors);
    std::thread::scope(|scope| {
        let beating = Beating { walker: walker_ref, quiet: &quiet, run: run_ref, errors: errors_ref };
        scope.spawn(|| heartbeat(beating, beat, &singleton, &heartbeat_stop));
        let workers: Vec<_> = handles
            .into_iter()
            .map(|store| {
                let (walker, run, errors) = (walker_ref, run_ref, errors_ref);
                scope.spawn(move || {
                    let mut queue = queue::GitQueue::new(&store, walker);
                    let mut dispatcher = unit::GitDispatcher::new(&store, walker);
                    let outcome = engine::work(run, &mut queue, &mut dispatcher, &|| walker.cancelled(&store));
                    if let Err(err) = outcome {
                        errors.lock().unwrap_or_else(|p| p.into_inner()).push(err);
                    }
                })
            })
            .collect();
        for worker in workers {
            let _ = worker.join();
        }
        heartbeat_stop.stop();
    });
    if walker.opts.land {
        walker.land_the_rest(store);
    }
    let (mut stop, mut tally) = run.outcome();
    // A task closed done whose landing failed afterwards needs a person: not done, as the
    // board has it.
    let late = walker.failed_after_counting().min(tally.succeeded);
    tally.succeeded -= late;
    tally.failed += late;
    if late > 0 && stop == Stop::Done {
        stop = Stop::Budget;
    }
    let unlanded: Vec<String> = if walker.opts.land {
        walker.to_land.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    } else {
        Vec::new()
    };
    if walker.cancelled(store) {
        stop = Stop::Interrupted;
    }
    // A p0 task that did not fail but waits for a person (it asked a question) paused the walk
    // for that: it is named so.
    if let Stop::Paused { policy: engine::PausePolicy::P0Failure, units } = &stop {
        let id = units.first().and_then(|u| u.parse::<crate::ids::TaskId>().ok());
        let state = match id {
            Some(id) => crate::store::task::read(store, &id)?.map(|s| s.task.state),
            None => None,
        };
        if let Some(state) = state.filter(|s| *s != crate::store::task::State::Failed) {
            stop = Stop::Paused {
                policy: engine::PausePolicy::P0Waiting(state.as_str().to_owned()),
                units: units.clone(),
            };
        }
    }
    let mut paused_reason = None;
    if let Stop::Paused { policy, units } = &stop {
        let policy = match policy {
            engine::PausePolicy::ConsecutiveFailures(n) => format!("{n} consecutive failures"),
            engine::PausePolicy::P0Failure => "a p0 task failed".to_owned(),
            engine::PausePolicy::P0Waiting(state) => match state.as_str() {
                "needs-decision" => "a p0 task needs a decision".to_owned(),
                "parked" => "a p0 task was parked".to_owned(),
                _ => "a p0 task needs you".to_owned(),
            },
            engine::PausePolicy::Unreachable(why) => why.clone(),
        };
        paused_reason = Some(policy.clone());
        walker.record(store, None, Recorded::WalkPaused(events::WalkPaused { policy, units: units.clone() }))?;
    }
    let error = errors.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().next();
    let ended = events::WalkEnded {
        stop: stop_word(&stop).to_owned(),
        closed: tally.closed,
        succeeded: tally.succeeded,
        failed: tally.failed,
        abandoned: Some(tally.abandoned),
        dispatches: tally.dispatches,
        error: error.as_ref().map(|e| format!("{e:#}")),
        spent_usd: Some(tally.spent_usd()),
        spent_tokens: Some(tally.spent_tokens),
        spent_unknown: Some(tally.spent_unknown),
    };
    walker.record(store, None, Recorded::WalkEnded(ended.clone()))?;
    if let Some(key) = &walker.opts.termination_key {
        let (kind, data) = Recorded::WalkTerminated(events::WalkTerminated {
            stop: ended.stop.clone(),
            walker: Some(walker.key.clone()),
            closed: tally.closed,
            succeeded: tally.succeeded,
            failed: tally.failed,
            error: ended.error.clone(),
        })
        .into_parts();
        journal::append(store, ctx, key, NewEvent { kind, task: None, session: None, data })?;
    }
    if stop == Stop::Interrupted {
        let _ = std::fs::remove_file(Layout::of(store.common_dir()).cancel());
    }
    // Units published their results as they closed; this brings the rest (how the walk
    // ended, anything a failed publish left behind) to the remote before the walk ends.
    sync_with_remote(store, &walker);
    let mut told = serde_json::json!({
        "stop": ended.stop, "done": tally.succeeded, "not_done": tally.failed, "left_open": tally.abandoned,
        "sessions": tally.dispatches, "spent_usd": tally.spent_usd(), "spent_tokens": tally.spent_tokens,
        "error": ended.error,
    });
    let kind = match &stop {
        Stop::Paused { units, .. } => {
            told["reason"] = serde_json::json!(paused_reason.clone().unwrap_or_default());
            told["tasks"] = serde_json::json!(units);
            "walk_paused"
        }
        Stop::Budget => "budget_spent",
        _ => "walk_ended",
    };
    walker.notify(store, kind, told);
    observer.event(&Event::Finished { stop: stop.clone(), tally: tally.clone(), unlanded: unlanded.clone() });
    if let Some(err) = error {
        return Err(err);
    }
    Ok(WalkEnd { stop, unlanded })
}

/// Whether a walk runs in this clone, as the next walk would judge it.
#[derive(Debug, Clone)]
pub enum ThisClonesWalk {
    /// No walk holds the clone's walker singleton.
    None,
    /// A walk holds it and may be at work: its sessions, claims and worktrees are its own.
    Running(claim::Held),
    /// The walk that holds it is gone (its process, on this machine, no longer exists, or it
    /// let its lease lapse): the next walk takes the singleton over and recovers what it left.
    Gone(claim::Held),
}

/// Judge the walk of this clone (`git loop doctor`). Reads only: a clone without an id has
/// never walked.
pub fn this_clones_walk(store: &Store, ctx: &Context) -> Result<ThisClonesWalk> {
    if !Layout::of(store.common_dir()).clone_id().exists() {
        return Ok(ThisClonesWalk::None);
    }
    let key = singleton(store)?;
    let Some(held) = claim::read(store, &key)? else { return Ok(ThisClonesWalk::None) };
    let lease = crate::store::lease::judge(store, ctx, &key, &held);
    Ok(if lease.holder_gone || lease.is_stale() { ThisClonesWalk::Gone(held) } else { ThisClonesWalk::Running(held) })
}

/// Recover what crashed walks of this clone left, without walking (`git loop doctor
/// --repair`): take the clone's walker singleton as a walk does (taking over a dead walk's),
/// recover as a walk does when it starts, and let the singleton go. `Some` with the holder when
/// a live walk holds it: that walk recovered when it started, and what it has in hand is its own.
pub fn recover_crashed(
    store: &Store,
    ctx: &Context,
    cwd: PathBuf,
    exe: PathBuf,
    observer: &dyn Observer,
) -> Result<Option<claim::Held>> {
    let key = crate::ids::walker_key();
    let singleton = singleton(store)?;
    let _held = match claim::take_singleton(store, ctx, &singleton, singleton_options(ctx, &key))? {
        Ok(held) => held,
        Err(live) => return Ok(Some(live)),
    };
    let cancel = AtomicBool::new(false);
    // Recovery starts no session: the agent is never run.
    let opts = Options::new(crate::agent::presets::custom("recovery", "true"));
    let base = ObjectId::null(gix::hash::Kind::Sha1);
    let walker = Walker::new(store, ctx, Setup { key, opts, cwd, exe, base, observer, cancel: &cancel, run: None });
    recover::recover(store, &walker)?;
    Ok(None)
}

/// Run `f` with a walker of one command's own, for role sessions outside a walk (the
/// conflict resolver of `git loop land --resolver`): its own key and journal chain, and no
/// walk singleton (it starts no worker, and takes no task's claim).
pub fn one_off<R>(
    store: &Store,
    ctx: &Context,
    cwd: PathBuf,
    exe: PathBuf,
    opts: Options,
    observer: &dyn Observer,
    f: impl FnOnce(&Walker<'_>) -> R,
) -> R {
    let cancel = AtomicBool::new(false);
    let (key, base) = (crate::ids::walker_key(), ObjectId::null(gix::hash::Kind::Sha1));
    let walker = Walker::new(store, ctx, Setup { key, opts, cwd, exe, base, observer, cancel: &cancel, run: None });
    f(&walker)
}

/// The word the journal and `--json` use for a stop reason.
pub fn stop_word(stop: &Stop) -> &'static str {
    match stop {
        Stop::NoWork => "no_work",
        Stop::Done => "done",
        Stop::Budget => "budget",
        Stop::Paused { .. } => "paused",
        Stop::Interrupted => "interrupted",
        Stop::Failed => "failed",
    }
}

/// How a walk holds its clone's walker singleton (and refreshes it).
fn singleton_options(ctx: &Context, holder: &str) -> AcquireOptions {
    AcquireOptions {
        holder: holder.to_owned(),
        ttl: chrono::Duration::minutes(2),
        reason: Some(format!("git loop run (pid {})", ctx.pid)),
        session: None,
    }
}

fn take_singleton<'s>(store: &'s Store, ctx: &'s Context, key: &ClaimKey, holder: &str) -> Result<Singleton<'s>> {
    claim::take_singleton(store, ctx, key, singleton_options(ctx, holder))?.map_err(|held| {
        let r = &held.record;
        Refusal::new(
            Class::Busy,
            format!("another walker runs in this repository: {} (pid {} on {})", r.holder, r.pid, r.host),
        )
        .hint("stop it with 'git loop stop --all', or wait for it to finish")
        .into()
    })
}

/// Sync with `loop.remote`, if there is one; a failure is a warning (what it would have sent
/// stays here for the next sync).
fn sync_with_remote(store: &Store, walker: &Walker<'_>) {
    let Some(remote) = store.arbiter() else { return };
    match crate::store::sync::sync(store, &walker.ctx, &remote) {
        Ok(report) if report.incoming() > 0 => walker.observer.event(&Event::Synced { changes: report.incoming() }),
        Ok(_) => {}
        // The walk's own error already says it.
        Err(err) if stops_the_walk(&err) => {}
        Err(err) => {
            walker.observer.event(&Event::Warning { message: format!("could not sync with {remote}: {err:#}") })
        }
    }
}

/// One malloc arena for the whole walk. A unit's work is done by several threads, and glibc
/// gives each its own arena: the few long-lived allocations a unit leaves (a session's journal
/// chain, in the maps that follow the chains) land between the short-lived ones, and each
/// worker's arena grew by about a KiB a unit of pages kept by them, which `malloc_trim` cannot
/// give back (2,000 units: 4 → 6 MiB anonymous; with one arena 2 → 4 MiB). The workers spend
/// their time waiting on agents and git, not in malloc, so sharing one arena costs nothing
/// measurable. Called when a walk begins: threads that have their arena already keep it.
pub(crate) fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a malloc parameter (under malloc's own lock).
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Hand the memory the last unit freed back to the system: what is freed in the middle of the
/// arena stays resident until trimmed.
pub(crate) fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages to the system; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What the heartbeat works with besides its store: the walk, the observer that says an
/// outage once, and where a fault that stops the walk goes.
struct Beating<'w, 'a> {
    walker: &'w Walker<'a>,
    quiet: &'w Quiet<'a>,
    run: &'w engine::Run,
    errors: &'w std::sync::Mutex<Vec<anyhow::Error>>,
}

/// Keep the singleton's lease fresh until told to stop; and with a shared remote, sync the
/// loop's refs with it now and then, so a person's word written on another clone (a stop, a
/// take-over, a reassignment) reaches this walk. After each refresh and sync, consolidate the
/// packs and loose objects if they have grown (here, beside the units, never in a claim).
///
/// A sync the remote did not answer is tried again at the next interval (the outage is said
/// once, and its end when the remote answers again); one that met a fault that cannot heal —
/// the remote refuses this clone's credentials, has no repository there, or its hook refuses
/// what this walk publishes — stops the walk with that fault: its units in flight finish,
/// nothing new is claimed. A sync is skipped while a worker publishes a closing unit (both
/// push the walk's journal chain, and would fail each other's atomic pushes): it is made at
/// the next look, 100 ms later.
fn heartbeat(beating: Beating<'_, '_>, store: Store, key: &ClaimKey, stop: &engine::StopFlag) {
    let Beating { walker, quiet, run, errors } = beating;
    let opts = singleton_options(&walker.ctx, &walker.key);
    let remote = store.arbiter();
    let mut last = std::time::Instant::now();
    let mut last_sync = std::time::Instant::now();
    while !stop.sleep(Duration::from_millis(100)) {
        quiet.heard();
        // Whether this round may have written objects or fetched a pack.
        let mut grown = false;
        if last.elapsed() >= Duration::from_secs(30) {
            let _ = claim::acquire(&store, &walker.ctx, key, &opts);
            last = std::time::Instant::now();
            grown = true;
        }
        if let (Some(remote), Some(every)) = (&remote, walker.opts.sync_every) {
            if last_sync.elapsed() >= every {
                let Ok(one_at_a_time) = walker.publishing.try_lock() else { continue };
                grown = true;
                last_sync = std::time::Instant::now();
                let synced = crate::store::sync::sync(&store, &walker.ctx, remote);
                drop(one_at_a_time);
                match synced {
                    Ok(report) => {
                        let incoming = report.incoming();
                        if incoming > 0 {
                            walker.observer.event(&Event::Synced { changes: incoming });
                        }
                    }
                    Err(err) if stops_the_walk(&err) => {
                        run.stop(engine::Stop::Failed);
                        errors.lock().unwrap_or_else(|p| p.into_inner()).push(err);
                    }
                    Err(err) => walker
                        .observer
                        .event(&Event::Warning { message: format!("could not sync with {remote}: {err:#}") }),
                }
                quiet.heard();
            }
        }
        if grown {
            if let Err(err) = crate::store::maintenance::auto(store.common_dir()) {
                walker.observer.event(&Event::Warning { message: format!("{err:#}") });
            }
        }
    }
}

/// Whether a failed sync stops the walk: a fault of the remote that cannot heal (it refuses
/// this clone, has no repository there, or its hook refuses what the walk publishes), which
/// every later sync would meet again. A remote that did not answer does not.
fn stops_the_walk(err: &anyhow::Error) -> bool {
    crate::store::remote::cannot_heal(err)
}
