//! The walk's vocabulary, shared by its queue, its dispatcher, its races and its sessions:
//! the unit of work, who works it (`Plan`, `Pick`), one agent on one try (`Seat`), a role's
//! session as it is started and how it ended (`Launch`, `Launched`, `Ending`), what a worker's
//! session came to (`Ran`, `Step`, `Withdrawal`), and the dispatcher itself, whose methods are
//! written in `dispatch` (planning), `race` (several agents) and `session` (one agent).
//! Nothing here imports the files that use it.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::Walker;
use crate::agent::presets::Agent;
use crate::agent::role::Role;
use crate::engine::{self, Verdict};
use crate::ids::{Priority, TaskId};
use crate::store::task::{State, Task};
use crate::store::Store;
use crate::tries::Try;

/// The walk's dispatcher: its methods are in `dispatch`, `race` and `session`.
pub struct GitDispatcher<'a> {
    pub(super) store: &'a Store,
    pub(super) walker: &'a Walker<'a>,
}

/// How a race picks its winner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The first try to pass wins; the others are stopped at once.
    First,
    /// Every try runs to its end; a judge command picks among those that passed.
    Judge,
}

impl Pick {
    pub fn parse(word: &str) -> Option<Pick> {
        match word {
            "first" => Some(Pick::First),
            "judge" => Some(Pick::Judge),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Pick::First => "first",
            Pick::Judge => "judge",
        }
    }
}

/// Who works a unit next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    Single { agent: String },
    Race { agents: Vec<String>, pick: Pick },
}

impl<'a> GitDispatcher<'a> {
    pub fn new(store: &'a Store, walker: &'a Walker<'a>) -> GitDispatcher<'a> {
        GitDispatcher { store, walker }
    }
}

/// A task being worked: its claim and, once the first session starts, its try.
#[derive(Debug, Clone)]
pub struct WorkUnit {
    pub task: Task,
    pub try_: Option<Try>,
    /// The most recent session's key.
    pub last_session: Option<String>,
    /// What the checks said, for the completion note.
    pub checks: Option<serde_json::Value>,
    /// Set when the claim turned out to be someone else's.
    pub lost: bool,
    /// Who works it since its agent became unreachable (kept for the rest of this unit).
    pub plan: Option<Plan>,
    /// The transcript of the agent it was taken from, for the next agent's worktree.
    pub handoff: Option<std::path::PathBuf>,
    /// The next race was announced already (as part of a handover line).
    pub announced: bool,
    /// The agent of the most recent session.
    pub last_agent: Option<String>,
    /// Its try began as the merge its landing conflicted on (`tries::merge`): concluded
    /// before the try's work is taken.
    pub merging: Option<crate::store::events::MergeStarted>,
}

impl WorkUnit {
    pub fn id(&self) -> TaskId {
        self.task.task_id()
    }
}

impl engine::Unit for WorkUnit {
    fn id(&self) -> String {
        self.task.id.clone()
    }
    fn is_p0(&self) -> bool {
        self.task.priority == Priority::P0
    }
}

/// One agent on one try.
pub struct Seat<'s> {
    pub task: &'s Task,
    pub try_: &'s Try,
    pub agent: &'s Agent,
    /// Which session on this unit this is (1 for the first), for the prompt.
    pub attempt: u32,
    /// What the previous session left, or what the next agent should know.
    pub carry: Option<&'s str>,
    /// Set when the race this seat is in is over: stop at once.
    pub halt: Option<&'s AtomicBool>,
    /// The transcript of the agent this seat takes over from, to copy into its worktree.
    pub handoff: Option<&'s Path>,
}

/// A person's word on the task, seen while a session ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Withdrawal {
    /// The task left the open state: stopped (needs-decision), taken over, parked, cancelled
    /// or closed by hand.
    Closed { state: State, reason: Option<String> },
    /// It was assigned to an agent (perhaps the same one: a restart).
    Reassigned { agent: String },
}

impl Withdrawal {
    /// How the session's end reads.
    pub fn describe(&self) -> String {
        match self {
            Withdrawal::Closed { state: State::NeedsDecision, .. } => "you stopped it".to_owned(),
            Withdrawal::Closed { state: State::TakenOver, .. } => "a person took the task over".to_owned(),
            Withdrawal::Closed { state, .. } => format!("the task was marked {}", state.as_str()),
            Withdrawal::Reassigned { agent } => format!("the task was reassigned to {agent}"),
        }
    }
}

/// What one session came to.
#[derive(Debug, Clone)]
pub enum Step {
    /// Done, the checks passed and the review approved.
    Passed { message: String },
    /// No verdict, failing checks or a rejecting review: another session should go on.
    Continue { note: String },
    /// Blocked or failed, in the agent's own words.
    Verdict { verdict: Verdict, message: String },
    /// The agent could not be reached (rate or usage limit, service down, login expired).
    Unreachable { reason: &'static str },
    /// The claim is someone else's now.
    Lost { reason: String },
    /// A person stopped, took over or reassigned the task.
    Withdrawn(Withdrawal),
    /// The walk was interrupted.
    Interrupted,
    /// The race was decided while this session ran.
    Halted,
    /// The agent's command, or the checks', setup's or review's, could not run at all (the
    /// shell's 126 or 127: not found, not executable): the walk stops rather than spend the
    /// task's sessions on it. Which, what the shell said, and where.
    CannotRun { what: Unrunnable, said: String, log: PathBuf },
    /// A role's session (a reviewer's) was not started: the walk's budget in money or tokens
    /// is spent, and the walk stops as it would before a worker's session.
    Spent { why: &'static str },
}

/// A role's session not started because the walk's budget in money or tokens is spent (the
/// walk stops): the error of a conflict resolver or a summarizer, whose callers (a landing, a
/// dependency's merge) have no other way to say so. The dispatcher turns it into
/// `Dispatched::Spent`; a landing leaves its tasks unlanded with it as the reason.
#[derive(Debug, Clone)]
pub struct BudgetSpent {
    /// The role whose session did not start.
    pub role: String,
    pub why: &'static str,
}

impl std::fmt::Display for BudgetSpent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: no {} session was started", self.why, self.role)
    }
}

impl std::error::Error for BudgetSpent {}

/// A role's session as the walk starts it: about which task and try, where it runs, who runs
/// it, and in which role (none: the worker).
pub struct Launch<'s> {
    /// Its key (`s-…`), chosen by the caller.
    pub session: &'s str,
    pub task: &'s Task,
    /// The try it is about (its number and branch, for its environment and record).
    pub try_: &'s Try,
    /// Where it runs: the try's worktree for the worker, a checkout of its own for a reviewer.
    pub worktree: &'s Path,
    pub agent: &'s Agent,
    pub attempt: u32,
    pub halt: Option<&'s std::sync::atomic::AtomicBool>,
    pub role: Option<&'s Role>,
    pub handoff: Option<&'s Path>,
    /// Whether what it leaves in `worktree` is committed to the try's branch (the worker's and
    /// a conflict resolver's work; never a reviewer's).
    pub commits: bool,
    /// Called while it runs in place of refreshing the task's claim (a session under another
    /// claim, such as the lander's): true stops it.
    pub keep: Option<&'s dyn Fn() -> bool>,
}

/// A session that ended: its key, files, environment, and why and how it ended.
pub struct Launched {
    pub dir: PathBuf,
    pub log: PathBuf,
    pub env: Vec<(String, String)>,
    pub why: String,
    pub ending: Ending,
    /// A confined session's commits that were not taken, and why (a path git refuses, a link
    /// in its git directory): its verdict is then failed with that reason, whatever it said.
    pub refused: Option<String>,
}

/// Why a session's process ended.
pub enum Ending {
    Exited(String),
    /// Exited at once with the shell's "cannot execute" or "not found" status (126, 127).
    CannotRun(String),
    TimedOut,
    Cancelled,
    Lost(String),
    Withdrawn(Withdrawal),
    Halted,
}

/// A finished session.
#[derive(Debug, Clone)]
pub struct Ran {
    pub session: String,
    pub step: Step,
    /// What the checks said, for the completion note.
    pub checks: Option<serde_json::Value>,
    /// The agent's own summary (its verdict message), if it gave one.
    pub summary: Option<String>,
}

pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// "42 s", "3 min 20 s", "1 h 5 min".
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// What could not run at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrunnable {
    /// The agent's command.
    Agent,
    /// A command of the walk's: `checks`, `setup` or `review`.
    Command(&'static str),
}

/// Whether a command's exit says it never ran: the shell's "cannot execute" (126) or "not
/// found" (127).
pub fn never_ran(exit: Option<crate::agent::process::Exit>) -> bool {
    matches!(exit, Some(crate::agent::process::Exit::Code(126 | 127)))
}

/// A path a command that could not run names (`.venv/bin/python: not found`) whose first
/// component the main checkout has and the try does not: ignored state (a virtualenv, a tool
/// installed into the checkout) a new worktree lacks. Its first component.
pub fn missing_from_try(said: &str, checkout: &std::path::Path, worktree: &std::path::Path) -> Option<String> {
    said.split(|c: char| c.is_whitespace() || c == ':' || c == '\'' || c == '"' || c == '`')
        .filter(|t| {
            !t.is_empty() && !t.starts_with('/') && !t.starts_with('-') && (t.contains('/') || t.starts_with('.'))
        })
        .filter_map(|t| t.trim_start_matches("./").split('/').next().map(str::to_owned))
        .filter(|first| !first.is_empty() && first != "." && first != ".." && first != ".git")
        .find(|first| {
            std::fs::symlink_metadata(checkout.join(first)).is_ok()
                && std::fs::symlink_metadata(worktree.join(first)).is_err()
        })
}

/// The error that stops a walk whose agent's command (or checks, setup or review command)
/// could not run at all. `confined`: it ran in the sandbox, where a program can be hidden;
/// `unwarmed`: what it names that the main checkout has and its try lacks (see
/// [`missing_from_try`]), which warming, not the sandbox, brings.
pub(super) fn cannot_run(
    agent: &str,
    what: Unrunnable,
    said: &str,
    log: &std::path::Path,
    confined: bool,
    unwarmed: Option<String>,
) -> anyhow::Error {
    let said = if said.is_empty() { "it exited at once, saying nothing".to_owned() } else { said.to_owned() };
    let (whose, fix) = match what {
        Unrunnable::Agent if agent == "custom" => ("the agent's command".to_owned(), "correct --agent-cmd".to_owned()),
        Unrunnable::Agent => (
            "the agent's command".to_owned(),
            format!("correct the agent '{agent}' (loop.agent.{agent}.command) or install its program"),
        ),
        Unrunnable::Command(name) => (format!("the {name} command"), format!("correct --{name} or loop.{name}")),
    };
    let sandbox = match unwarmed {
        Some(path) => format!(
            "; '{path}' is in the main checkout but not in the try (git ignores it): warm it into each try with git config --add loop.warm {path}"
        ),
        None if confined => "; a program installed outside what a session sees can be made visible with git config --add loop.sandbox.readOnly <its directory>".to_owned(),
        None => String::new(),
    };
    crate::error::Refusal::new(crate::error::Class::AgentMissing, format!("{whose} could not run: {said}"))
        .hint(format!("{fix}{sandbox}; the task is released, not failed; the output is in {}", log.display()))
        .into()
}
