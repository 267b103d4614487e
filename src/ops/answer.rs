//! How to answer a task that waits for a person, as `stop` lists its options: the commands
//! that move it on from where it is, each with what it does (`show`, `status`, the board and the
//! walk's line show them, so a task that needs you says what you can do about it); and what
//! failed last, with the end of its output and where the rest is.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::agent::record;
use crate::ids::TaskId;
use crate::refs;
use crate::store::events::Recorded;
use crate::store::journal::Entry;
use crate::store::task::State;
use crate::store::Store;

/// Where a waiting task stands, beyond its state: what decides which answers work.
#[derive(Debug, Clone, Default)]
pub struct Standing {
    /// Its latest try, when `done --try` can accept it (its work merges into the task branch,
    /// and accepting it answers what the task waits on).
    pub accept: Option<u32>,
    /// Its landing on this target (a short name) conflicted and nothing answered it yet.
    pub conflict: Option<String>,
    /// The try a person took over is the merge its landing conflicted on.
    pub merging: bool,
}

impl Standing {
    /// The standing of task `id` in `state` from its `history` (its journal, oldest first).
    pub fn of(store: &Store, id: &TaskId, state: State, history: &[Entry]) -> Result<Standing> {
        let conflict = match crate::landing::conflict::pending(store, id, history)? {
            Some(pending) if state == State::NeedsYou => Some(refs::short_branch(&pending.into).to_owned()),
            _ => None,
        };
        let merging = state == State::TakenOver
            && taken_try(history).is_some_and(|n| crate::landing::conflict::merge_of(history, n).is_some());
        let accept = match (&conflict, last_try(history)) {
            (None, Some(n)) if crate::tries::acceptable(store, &crate::tries::Try::describe(id, n, Path::new("")))? => {
                Some(n)
            }
            _ => None,
        };
        Ok(Standing { accept, conflict, merging })
    }
}

/// The commands that answer task `id` in `state` (a person's states: needs-you,
/// needs-decision, failed, taken-over), each with what it does, as `standing` allows: only
/// commands that work from where it is. Empty for the states nobody waits on.
pub fn ways(id: &str, state: State, standing: &Standing) -> Vec<(String, &'static str)> {
    let accept = standing.accept.map(|n| (format!("git loop done {id} --try {n}"), "accept its try as it is"));
    let mut ways = Vec::new();
    match state {
        State::NeedsYou if standing.conflict.is_some() => {
            ways.push((
                format!("git loop take-over {id}"),
                "resolve the conflict yourself: its worktree holds the merge in progress",
            ));
            ways.push((
                format!("git loop reopen {id}"),
                "let the agent resolve it: its next try starts from the merge in progress",
            ));
            ways.push((format!("git loop reassign {id} <agent>"), "let another agent resolve it"));
            ways.push((format!("git loop park {id} --reason '…'"), "set it aside"));
        }
        State::NeedsYou => {
            ways.push((
                format!("git loop edit {id} --body '…' && git loop reopen {id}"),
                "answer in its plan, and let the agent go on",
            ));
            ways.extend(accept);
            ways.push((format!("git loop reassign {id} <agent>"), "give it to another agent"));
            ways.push((format!("git loop take-over {id}"), "do it yourself in its worktree"));
            ways.push((format!("git loop park {id} --reason '…'"), "set it aside"));
        }
        State::NeedsDecision => {
            ways.push((format!("git loop reopen {id}"), "let the agent go on"));
            ways.extend(accept);
            ways.push((format!("git loop reassign {id} <agent>"), "give it to another agent"));
            ways.push((format!("git loop take-over {id}"), "do it yourself in its worktree"));
            ways.push((format!("git loop park {id} --reason '…'"), "set it aside"));
        }
        State::Failed => {
            ways.push((format!("git loop reopen {id}"), "try again (the next walk continues its try)"));
            ways.push((format!("git loop reassign {id} <agent>"), "give it to another agent"));
            ways.push((format!("git loop take-over {id}"), "do it yourself in its worktree"));
            ways.push((format!("git loop cancel {id} --reason '…'"), "give it up"));
        }
        State::TakenOver if standing.merging => {
            ways.push((
                format!("git loop hand-back {id} --keep"),
                "your resolution: the task branch takes the merge once the checks pass",
            ));
            ways.push((format!("git loop hand-back {id} --continue"), "let the agent finish the merge"));
        }
        State::TakenOver => {
            ways.push((format!("git loop hand-back {id} --keep"), "your work, landed once the checks pass"));
            ways.push((format!("git loop hand-back {id} --continue"), "let the agent go on from your changes"));
        }
        State::Open | State::Done | State::Parked | State::Cancelled => {}
    }
    ways
}

/// The try a person took over last, from the journal's `taken_over` events.
fn taken_try(entries: &[Entry]) -> Option<u32> {
    entries.iter().rev().find_map(|e| match Recorded::of(&e.event) {
        Recorded::TakenOver(taken) => Some(taken.number),
        _ => None,
    })
}

/// What explains a task that waits for a person: its last failed checks, or else its last
/// session, with where their output is.
pub struct Failure {
    /// In words: "the checks failed on try 2 (exit 1)", "session s-… ended: …".
    pub what: String,
    /// The full output (on the clone that ran it).
    pub log: PathBuf,
    /// Its last lines (empty when the log is not on this clone).
    pub tail: Vec<String>,
}

/// How many lines of a failure's output `show` quotes.
pub const TAIL: usize = crate::walk::session::FAILURE_TAIL;

/// The failure that explains task's history `entries` (its journal, oldest first): the last
/// checks if they failed after its last session, else its last session. `None` without a
/// session.
pub fn last_failure(loop_dir: &Path, entries: &[Entry]) -> Option<Failure> {
    let mut last_session: Option<String> = None;
    let mut found: Option<(String, PathBuf)> = None;
    for e in entries {
        match Recorded::of(&e.event) {
            Recorded::SessionEnded(ended) => {
                let log = record::dir(loop_dir, &ended.session).join("log");
                found =
                    Some((format!("session {} (try {}) ended: {}", ended.session, ended.number, ended.reason), log));
                last_session = Some(ended.session);
            }
            Recorded::Checks(checks) if !checks.passed => {
                let Some(session) = &last_session else { continue };
                let how = checks.exit.map(|e| format!(" ({e})")).unwrap_or_else(|| " (stopped)".to_owned());
                let log = record::dir(loop_dir, session).join("checks.log");
                found = Some((format!("the checks failed on try {}{how}", checks.number), log));
            }
            _ => {}
        }
    }
    let (what, log) = found?;
    let tail = crate::walk::session::last_lines(&log, TAIL);
    Some(Failure { what, log, tail })
}

/// The latest try in task's history `entries` that a worker's session worked on (a conflict
/// resolver's try is its own, begun on the target: never the task's work to accept).
pub fn last_try(entries: &[Entry]) -> Option<u32> {
    let resolvers: std::collections::HashSet<u32> = entries
        .iter()
        .filter_map(|e| match Recorded::of(&e.event) {
            Recorded::ConflictResolving(r) => Some(r.number),
            _ => None,
        })
        .collect();
    entries.iter().rev().find_map(|e| match Recorded::of(&e.event) {
        Recorded::SessionEnded(ended) if !resolvers.contains(&ended.number) => Some(ended.number),
        _ => None,
    })
}

/// Whether a task in `state` waits for a person.
pub fn waits(state: State) -> bool {
    matches!(state, State::NeedsYou | State::NeedsDecision | State::Failed | State::TakenOver)
}
