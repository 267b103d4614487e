//! What the landing queue does with a merge that conflicts: it asks a `Resolver`, the one
//! place a conflict-resolver agent plugs in. The resolver is given the conflict (the task, the
//! target, both commits and the conflicting paths) and answers with a merge commit of the two
//! that resolves it — which is then checked with the rest of its batch like any merge — or
//! that it cannot, and why. The walk's `walk::resolve::AgentResolver` dispatches a
//! conflict-resolver session; `NoResolver` (a `git loop land` given no resolver) fails every
//! conflicting landing, and the task goes to needs-you with the paths named.

use anyhow::{Context as _, Result};
use gix::ObjectId;

use crate::ids::TaskId;
use crate::refs;
use crate::store::events::{self, Recorded};
use crate::store::journal::Entry;
use crate::store::Store;
pub use crate::tries::merge::Concluded;

/// A merge of a task branch onto the target that conflicts.
#[derive(Debug, Clone)]
pub struct Conflict {
    pub task: String,
    /// The target branch (full ref name).
    pub target: String,
    /// The target's side: the tip, with the batch's earlier merges.
    pub ours: ObjectId,
    /// The task branch's head.
    pub theirs: ObjectId,
    /// The paths that conflict.
    pub paths: Vec<String>,
    /// The merge commit's message (a resolution's commit takes it).
    pub message: String,
}

/// What a resolver made of a conflict.
#[derive(Debug, Clone)]
pub enum Resolution {
    /// A merge commit with parents `ours` and `theirs` that resolves it (checked before it
    /// lands), and the session that resolved it (none: it merged cleanly after all).
    Resolved { commit: ObjectId, by: Option<String> },
    /// It cannot be resolved, and why.
    Unresolved(String),
}

/// Resolves a conflicting landing, or says it cannot. `keep` is called while it works: it keeps
/// the lander's claim, and true means stop (the landing was interrupted or its claim lost).
pub trait Resolver {
    fn resolve(&self, store: &Store, conflict: &Conflict, keep: &dyn Fn() -> bool) -> Result<Resolution>;
}

/// No resolver: every conflict stays one.
pub struct NoResolver;

impl Resolver for NoResolver {
    fn resolve(&self, _store: &Store, _conflict: &Conflict, _keep: &dyn Fn() -> bool) -> Result<Resolution> {
        Ok(Resolution::Unresolved(
            "no conflict resolver is configured: pass --resolver <agent or role>, or set loop.resolver".into(),
        ))
    }
}

/// A task's landing that conflicted and that nothing has resolved since: the last
/// `landing_failed` of cause `conflict` in its history with no `task_landed` after it, while
/// its task branch is still at the head that landing could not merge (a branch moved since
/// holds someone's answer to it).
#[derive(Debug, Clone)]
pub struct Pending {
    /// The target (full ref name).
    pub into: String,
    /// The task branch's head that conflicts.
    pub head: ObjectId,
    pub paths: Vec<String>,
}

/// The landing conflict task `task` waits on, from its `history` (its journal, oldest first).
pub fn pending(store: &Store, task: &TaskId, history: &[Entry]) -> Result<Option<Pending>> {
    let mut found: Option<events::LandingFailed> = None;
    for entry in history {
        match Recorded::of(&entry.event) {
            Recorded::LandingFailed(failed) => found = (failed.cause == "conflict").then_some(failed),
            Recorded::TaskLanded(_) => found = None,
            _ => {}
        }
    }
    let Some(failed) = found else { return Ok(None) };
    let Ok(head) = failed.head.parse::<ObjectId>() else { return Ok(None) };
    if store.ref_target(&refs::task_branch(task))? != Some(head) {
        return Ok(None);
    }
    Ok(Some(Pending { into: failed.into, head, paths: failed.paths }))
}

/// The merge that answers `pending`: the task branch merged into the target's tip as this
/// clone knows it (`super::known_tip`), the markers naming the target and the task branch.
pub struct Answer {
    pub ours: ObjectId,
    pub theirs: ObjectId,
    /// The target's and the task branch's short names.
    pub into: String,
    pub from: String,
    pub message: String,
}

impl Answer {
    pub fn of(store: &Store, task: &TaskId, pending: &Pending) -> Result<Answer> {
        let ours = super::known_tip(store, &pending.into)?
            .with_context(|| format!("branch '{}' does not exist", refs::short_branch(&pending.into)))?;
        let into = refs::short_branch(&pending.into).to_owned();
        let from = refs::short_branch(&refs::task_branch(task)).to_owned();
        let message = answer_message(&from, &into);
        Ok(Answer { ours, theirs: pending.head, into, from, message })
    }

    /// As the merge a try begins with.
    pub fn merge(&self) -> crate::tries::merge::Merge<'_> {
        crate::tries::merge::Merge {
            ours: self.ours,
            theirs: self.theirs,
            labels: (&self.into, &self.from),
            message: &self.message,
        }
    }

    /// The journal's record of a try `number` that begins with it, conflicting in `paths`.
    pub fn started(&self, number: u32, paths: Vec<String>) -> events::MergeStarted {
        events::MergeStarted {
            number,
            into: self.into.clone(),
            from: self.from.clone(),
            ours: self.ours.to_string(),
            theirs: self.theirs.to_string(),
            paths,
        }
    }
}

/// The message of the merge that answers a landing conflict of task branch `from` on `into`.
fn answer_message(from: &str, into: &str) -> String {
    format!("loop: merge {from} into {into}\n\nIts landing on {into} conflicted: this merge resolves it.\n")
}

/// The merge try `number` of a task began with, from its `history`, if it began as one.
pub fn merge_of(history: &[Entry], number: u32) -> Option<events::MergeStarted> {
    history.iter().rev().find_map(|entry| match Recorded::of(&entry.event) {
        Recorded::MergeStarted(started) if started.number == number => Some(started),
        _ => None,
    })
}

/// Conclude try `try_`, which began as `started` (see `tries::merge::conclude`).
pub fn conclude(store: &Store, try_: &crate::tries::Try, started: &events::MergeStarted) -> Result<Concluded> {
    let side = |hex: &str| ObjectId::from_hex(hex.as_bytes()).with_context(|| format!("'{hex}' is not a commit id"));
    let message = answer_message(&started.from, &started.into);
    crate::tries::merge::conclude(store, try_, (side(&started.ours)?, side(&started.theirs)?), &started.paths, &message)
}

/// What is wrong with a try that began as `started` and was not concluded, in words for the
/// person or agent who works in it, with what to do.
pub fn unconcluded(started: &events::MergeStarted, concluded: &Concluded) -> Option<String> {
    match concluded {
        Concluded::Merged(_) => None,
        Concluded::MarkersLeft(paths) => Some(format!(
            "conflict markers are left in: {} — resolve them, 'git add' the files and commit the merge ('git commit --no-edit')",
            paths.join(", ")
        )),
        Concluded::NotMerged => Some(format!(
            "the merge of {} into {} is no longer in progress and this try does not hold it — merge it again ('git merge {}'), resolve the conflicts and commit",
            started.from, started.into, started.from
        )),
    }
}

/// What the sessions of a try that began as `started` are told, before `carry` (what the
/// sessions before them left, if anything).
pub fn note(started: &events::MergeStarted, carry: Option<&str>) -> String {
    let paths: String = started.paths.iter().map(|p| format!("- {p}\n")).collect();
    let mut text = format!(
        "This task's work was done on {from}, but landing it on {into} conflicts in:\n\n{paths}\n\
         Your worktree holds that merge in progress: {from} merged into {into}'s tip, as `git merge` \
         leaves a merge that conflicts (`git status` lists the conflicts; the markers name both sides, \
         `<<<<<<< {into}` and `>>>>>>> {from}`). Resolve every conflict so that both sides' intent is \
         kept, `git add` the files and commit the merge (`git commit --no-edit`), or leave the resolved \
         files for the loop to commit. Do not abort the merge, and do not redo the task: its work is \
         in the merge already. Then report done.\n",
        from = started.from,
        into = started.into,
    );
    if let Some(carry) = carry {
        text.push('\n');
        text.push_str(carry);
    }
    text
}
