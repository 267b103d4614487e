//! Tries that begin as a merge in progress: the way back from a merge that conflicts.
//!
//! A conflict resolver's try, a person's take-over of a task whose landing conflicted, and the
//! walk's next try of such a task (after `reopen`) all start the same way: the try branch at
//! the target's side (`ours`), and in its worktree the merge of the other side (`theirs`) in
//! progress, as `git merge` leaves one that conflicts — the files with conflict markers that
//! name both sides, the index with their three stages, `MERGE_HEAD` and `MERGE_MSG` written
//! (`Store::begin_merge`). `git status` lists the conflicts; `git add` and `git commit` make
//! the merge; a person or an agent works in it as in any merge.
//!
//! The try is concluded (`conclude`) when its work is accepted: a try whose head has both sides
//! in its history is merged already (someone committed the merge); one whose worktree still has
//! the merge in progress gets the merge commit made for it, of what is there (the loop
//! committed the files on stop, as a commit on `ours` alone: that commit becomes the merge);
//! one left with conflict markers in the conflicted paths, or whose merge was aborted, is not
//! a resolution. A concluded try's head contains the task branch's head, so the task branch
//! moves to it by fast-forward and the landing that conflicted merges cleanly after: the
//! conflict is resolved once.

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::{Opened, Try};
use crate::refs;
use crate::store::cas::{self, Cas, Expect};
use crate::store::journal;
use crate::store::{objects::Merged, Store};

/// A merge to begin in a new try: `theirs` into `ours`, the markers naming them by `labels`
/// (ours, theirs), with `message` as the merge commit's message.
pub struct Merge<'m> {
    pub ours: ObjectId,
    pub theirs: ObjectId,
    pub labels: (&'m str, &'m str),
    pub message: &'m str,
}

/// What opening a merging try came to.
pub enum Begun {
    /// The try is open with the merge in progress in its worktree, conflicting in these paths.
    Conflicts { opened: Opened, paths: Vec<String> },
    /// The two merge without a conflict (now): the merge commit, and no try was opened.
    Clean(ObjectId),
}

/// Open a new try of `task` (a number taken by `taker`, as `tries::open` takes them) whose
/// worktree holds `merge` in progress.
pub fn open(
    store: &Store,
    task: &crate::ids::TaskId,
    taker: &str,
    history: &[journal::Entry],
    merge: &Merge<'_>,
) -> Result<Begun> {
    // Whether it conflicts at all, before a number is taken for it.
    if let Merged::Commit(commit) = store.merge(merge.ours, merge.theirs, merge.message)? {
        return Ok(Begun::Clean(commit));
    }
    let opened = super::open(store, task, taker, None, history, || Ok(merge.ours))?;
    let paths = store
        .begin_merge(&opened.try_.worktree, merge.ours, merge.theirs, merge.labels, merge.message)?
        .unwrap_or_default();
    Ok(Begun::Conflicts { opened, paths })
}

/// Where a merging try stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Concluded {
    /// Its head is the merge of both sides: this commit.
    Merged(ObjectId),
    /// Conflict markers are left in these of the conflicted paths.
    MarkersLeft(Vec<String>),
    /// Its head does not have `theirs` in its history and no merge of it is in progress: the
    /// merge was aborted (or its worktree lost).
    NotMerged,
}

/// Conclude try `try_`, which began as the merge of `theirs` into `ours` conflicting in
/// `paths` (see the module's note): run after what its worktree holds was committed. The try
/// branch moves (by compare-and-swap) to the merge commit it makes, which has `message`.
pub fn conclude(
    store: &Store,
    try_: &Try,
    (ours, theirs): (ObjectId, ObjectId),
    paths: &[String],
    message: &str,
) -> Result<Concluded> {
    let head = store.ref_target(&try_.branch)?.with_context(|| format!("try branch '{}' is missing", try_.branch))?;
    let marked: Vec<String> = paths
        .iter()
        .filter(|p| store.read_path(head, p).ok().flatten().is_some_and(|bytes| has_markers(&bytes)))
        .cloned()
        .collect();
    if !marked.is_empty() {
        return Ok(Concluded::MarkersLeft(marked));
    }
    if store.is_ancestor(theirs, head)? {
        if store.merge_in_progress(&try_.worktree).is_some() {
            store.end_merge(&try_.worktree, None)?;
        }
        return Ok(Concluded::Merged(head));
    }
    if store.merge_in_progress(&try_.worktree) != Some(theirs) {
        return Ok(Concluded::NotMerged);
    }
    let tree = store.commit_tree(head).context("the try's tree")?;
    // What the loop committed on stop (one commit on `ours`) becomes the merge itself; more
    // than that stays, and the merge goes on top.
    let (parents, _) = store.read_commit(head)?;
    let first = if head == ours || parents == [ours] { ours } else { head };
    let merged = store.commit_tree_with(tree, &[first, theirs], message)?;
    match cas::update(store, &try_.branch, Expect::Is(head), merged, "loop: conclude the merge")? {
        Cas::Applied => {}
        Cas::Lost { actual } => anyhow::bail!(
            "try branch '{}' moved while its merge was concluded (now {actual:?}); the merge is commit {merged}",
            refs::short_branch(&try_.branch)
        ),
    }
    crate::store::remote::set_local(store, &refs::try_anchor(&try_.task, try_.number), Some(merged))?;
    store.end_merge(&try_.worktree, Some(tree))?;
    Ok(Concluded::Merged(merged))
}

/// Whether a file still holds a conflict marker line.
pub fn has_markers(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes)
        .lines()
        .any(|l| l.starts_with("<<<<<<< ") || l.starts_with(">>>>>>> ") || l == "<<<<<<<" || l == ">>>>>>>")
}
