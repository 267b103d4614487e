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
mod run;
pub mod session;
pub mod steering;
pub mod summarize;
pub mod unit;
mod walker;

pub use run::{one_off, recover_crashed, stop_word, this_clones_walk, walk};
pub use walker::Walker;

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::presets::Agent;
use crate::engine::{Limits, Stop, Tally};
use crate::ids::WriterId;
use crate::store::claim;
use crate::store::events;

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
    /// How it lands: the queue's merge, or the forge's requests (`--via`, `loop.land = pr`).
    pub land_via: crate::landing::Via,
    /// Landing through the forge: how often the lander reads back every open request.
    pub forge_poll: Duration,
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
    /// Fold finished tasks this old on the remote as the walk syncs (`loop.fold`; `None`: off).
    pub fold_after: Option<chrono::Duration>,
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
    /// A URL the same document is posted to (`loop.notify.webhook`).
    pub notify_webhook: Option<String>,
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
            land_via: crate::landing::Via::Merge,
            forge_poll: Duration::from_secs(120),
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
            fold_after: None,
            max_turns: None,
            task_budget_usd: None,
            mission: None,
            setup: None,
            warm: Default::default(),
            notify: None,
            notify_webhook: None,
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
    /// Finished tasks folded into the archive on the remote as the walk synced (`loop.fold`).
    Folded {
        remote: String,
        tasks: usize,
        chains: usize,
        refs: usize,
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

/// The longest wait between two attempts of a call the walk makes `patiently`: once the
/// remote answers again, the walk notices within this.
pub const WAIT_STEP: Duration = Duration::from_secs(5);

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
