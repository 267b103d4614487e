//! Tries: one linked worktree on one try branch per attempt at a task.
//!
//! - Try numbers are never reused: a number is taken by creating `refs/loop/tries/<id>/<n>`
//!   (compare-and-swap against absent, with a record unique to the taker; on the shared remote
//!   when there is one, so two clones never take the same number), and the next number is one
//!   more than the highest found in those anchors, the try branches, and the journal's
//!   `try_opened` events. Deleting a branch or a worktree frees nothing.
//! - The task branch `loop/<id>` starts at the base with the task's done dependencies'
//!   branches merged in, so a task builds on the work it depends on.
//! - Worktrees live under `loop.worktrees` (default `<git-common-dir>/loop/worktrees`), named
//!   `<task-id>-<n>`: ids are validated ref components, so a name cannot leave its root.
//! - Moving a branch is a compare-and-swap and is refused while the branch is checked out in
//!   any worktree: git would silently revert the move at that worktree's next commit.

pub mod checks;
pub mod commit;
pub mod merge;
pub mod pool;
pub mod warm;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use crate::git;
use crate::ids::{random_base32, TaskId};
use crate::refs;
use crate::store::cas::{self, Cas, Expect};
use crate::store::events::Recorded;
use crate::store::flock::FileLock;
use crate::store::journal;
pub use crate::store::objects::{FileChange, Merged};
use crate::store::{remote, Store};

/// One try of a task.
#[derive(Debug, Clone)]
pub struct Try {
    pub task: TaskId,
    pub number: u32,
    /// Full name of the try branch.
    pub branch: String,
    pub worktree: PathBuf,
}

impl Try {
    pub fn describe(task: &TaskId, number: u32, root: &Path) -> Try {
        Try {
            task: task.clone(),
            number,
            branch: refs::try_branch(task, number),
            worktree: root.join(format!("{task}-{number}")),
        }
    }
}

/// The commit task branches start from: `explicit` (`--base`), else `loop.base`, else the
/// current branch's head.
pub fn base(store: &Store, explicit: Option<&str>) -> Result<ObjectId> {
    match explicit.map(ToOwned::to_owned).or_else(|| store.settings().base()) {
        Some(rev) => store.resolve_commit(&rev),
        None => Ok(store.head_commit().ok_or_else(|| {
            crate::error::usage("the current branch has no commits to start task branches from")
                .hint("make a first commit, or pass --base <rev>")
        })?),
    }
}

/// Where try worktrees live.
pub fn worktrees_root(store: &Store) -> Result<PathBuf> {
    match store.settings().worktrees() {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            Ok(if dir.is_absolute() { dir } else { store.workdir().join(dir) })
        }
        None => Ok(store.layout()?.worktrees()),
    }
}

/// The highest try number any trace of this task records (0 if none): its anchors, its try
/// branches, and its journal `events` (the task's timeline, as read by the caller).
pub fn highest_number(store: &Store, task: &TaskId, events: &[journal::Entry]) -> Result<u32> {
    let mut highest = 0;
    for prefix in [format!("{}{task}/", refs::TRIES), format!("{}{task}/", refs::TRY_BRANCHES)] {
        // Through `refs_prefixed`: a bad line in packed-refs must not hide a number taken.
        for listed in store.refs_prefixed(&prefix).context("could not list try refs")? {
            let git::Listed::Ref { name, .. } = listed else { continue };
            if let Some(n) = name.strip_prefix(&prefix).and_then(|n| n.parse::<u32>().ok()) {
                highest = highest.max(n);
            }
        }
    }
    // A folded task's anchors are in the archive: their numbers stay taken.
    let anchors = format!("{}{task}/", refs::TRIES);
    for (name, _) in store.archived(&anchors)? {
        if let Some(n) = name.strip_prefix(&anchors).and_then(|n| n.parse::<u32>().ok()) {
            highest = highest.max(n);
        }
    }
    for entry in events {
        let numbers = match Recorded::of(&entry.event) {
            Recorded::TryOpened(opened) => vec![opened.number],
            Recorded::RaceStarted(started) => started.tries,
            _ => Vec::new(),
        };
        highest = numbers.into_iter().fold(highest, u32::max);
    }
    Ok(highest)
}

/// The record a try anchor (`refs/loop/tries/<id>/<n>`) first holds, taking the number:
/// unique to its taker, so two takers never write the same object (docs/storage.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumberRecord {
    pub nonce: String,
    pub taker: String,
    pub task: String,
    #[serde(rename = "try")]
    pub number: u32,
}

impl NumberRecord {
    /// Decode the record of try `number` of task `task` and check it is that one, with a taker
    /// and a nonce. `Err` says what is wrong. The one definition of a valid try-number record
    /// (the server's pre-receive hook uses it too).
    pub fn decode(bytes: &[u8], task: &TaskId, number: u32) -> Result<NumberRecord, String> {
        let record: NumberRecord =
            serde_json::from_slice(bytes).map_err(|err| format!("it is not a try-number record: {err}"))?;
        if record.task != task.as_str() || record.number != number {
            return Err(format!(
                "its record takes try {} of task '{}', not try {number} of '{task}'",
                record.number,
                record.task.escape_debug()
            ));
        }
        if record.taker.trim().is_empty() || record.nonce.is_empty() {
            return Err("its try-number record names no taker or has no nonce".into());
        }
        Ok(record)
    }
}

/// Take `count` try numbers for `task` none of whose traces (see `highest_number`) has used,
/// each by creating its anchor ref.
pub fn take_numbers(
    store: &Store,
    task: &TaskId,
    taker: &str,
    count: usize,
    events: &[journal::Entry],
) -> Result<Vec<u32>> {
    let mut taken = Vec::with_capacity(count);
    if count == 0 {
        return Ok(taken);
    }
    let first = highest_number(store, task, events)? + 1;
    let arbiter = store.arbiter();
    // Another taker may win a number first: move on, a bounded number of times.
    for n in (first..).take(64 + count) {
        // The anchor's first value is a record unique to this taker: two takers never write
        // the same object, so exactly one create-if-absent wins.
        let record =
            NumberRecord { nonce: random_base32(12), taker: taker.to_owned(), task: task.to_string(), number: n };
        let blob = store.write_blob(&serde_json::to_vec(&record)?)?;
        let anchor = refs::try_anchor(task, n);
        // With a shared remote the number is taken there, so that two clones never open the
        // same try branch; the local anchor then mirrors the remote's.
        let taken_here = match &arbiter {
            Some(remote_name) => remote::swap(store, remote_name, &anchor, Expect::Absent, Some(blob))?,
            None => cas::update(store, &anchor, Expect::Absent, blob, "loop: take try number")?,
        };
        if taken_here == Cas::Applied {
            taken.push(n);
            if taken.len() == count {
                return Ok(taken);
            }
        }
    }
    anyhow::bail!("could not take a try number for task '{task}' (64 attempts)")
}

/// Which worktree has `branch` (a full ref name) checked out, if any.
pub fn checked_out_in(store: &Store, branch: &str) -> Result<Option<PathBuf>> {
    let common = store.common_dir();
    let head_names = |git_dir: &Path| -> Option<String> {
        let text = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
        text.strip_prefix("ref: ").map(|r| r.trim().to_owned())
    };
    if head_names(common).as_deref() == Some(branch) {
        return Ok(Some(store.workdir().to_owned()));
    }
    let Ok(entries) = std::fs::read_dir(store.worktree_registrations()) else {
        return Ok(None);
    };
    for entry in entries.flatten() {
        let admin = entry.path();
        if head_names(&admin).as_deref() == Some(branch) {
            let gitdir = std::fs::read_to_string(admin.join("gitdir")).unwrap_or_default();
            let path = PathBuf::from(gitdir.trim()).parent().map(Path::to_owned).unwrap_or(admin);
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// How moving a branch went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    Moved,
    /// It is checked out in this worktree; moving it would be reverted there.
    CheckedOut(PathBuf),
    /// Someone else moved it first; it holds this now.
    Lost(Option<ObjectId>),
}

/// Move (or create) branch `name` from `from` to `to`, by compare-and-swap.
pub fn move_branch(store: &Store, name: &str, from: Option<ObjectId>, to: ObjectId, why: &str) -> Result<Move> {
    if let Some(path) = checked_out_in(store, name)? {
        return Ok(Move::CheckedOut(path));
    }
    Ok(match cas::update(store, name, Expect::from_current(from), to, why)? {
        Cas::Applied => Move::Moved,
        Cas::Lost { actual } => Move::Lost(actual),
    })
}

/// How preparing a task branch went.
#[derive(Debug, Clone)]
pub enum TaskBranch {
    Ready(ObjectId),
    /// Merging a dependency's branch conflicted in these paths and was not resolved (why, when
    /// a resolver tried); nothing was written.
    Conflict {
        dependency: String,
        paths: Vec<String>,
        unresolved: Option<String>,
    },
}

/// A dependency's merge into a new task branch that conflicts: the task branch so far
/// (`ours`), the dependency's head (`theirs`), and the paths.
pub struct DependencyConflict<'c> {
    pub dependency: &'c TaskId,
    pub ours: ObjectId,
    pub theirs: ObjectId,
    pub paths: &'c [String],
}

/// What resolves a dependency's merge (see `ensure_task_branch_resolving`).
pub type DependencyResolver<'r> = dyn FnMut(&DependencyConflict<'_>) -> Result<Option<Result<ObjectId, String>>> + 'r;

/// Make sure `loop/<task>` exists: the base with every done dependency's task branch merged
/// in (fast-forward where possible). An existing task branch is used as it is.
pub fn ensure_task_branch(store: &Store, task: &TaskId, base: ObjectId, deps: &[TaskId]) -> Result<TaskBranch> {
    ensure_task_branch_resolving(store, task, base, deps, &mut |_| Ok(None))
}

/// `ensure_task_branch`, where a dependency's merge that conflicts goes to `resolve`: a merge
/// commit of the two that resolves it (`Some(Ok)`), why it could not (`Some(Err)`), or no
/// resolver (`None`).
pub fn ensure_task_branch_resolving(
    store: &Store,
    task: &TaskId,
    base: ObjectId,
    deps: &[TaskId],
    resolve: &mut DependencyResolver<'_>,
) -> Result<TaskBranch> {
    let name = refs::task_branch(task);
    if let Some(head) = store.ref_target(&name)? {
        return Ok(TaskBranch::Ready(head));
    }
    let mut head = base;
    for dep in deps {
        let Some(dep_head) = store.ref_target(&refs::task_branch(dep))? else { continue };
        if store.is_ancestor(dep_head, head)? {
            continue;
        }
        if store.is_ancestor(head, dep_head)? {
            head = dep_head;
            continue;
        }
        let message =
            format!("loop: merge {} into {}\n", refs::short_branch(&refs::task_branch(dep)), refs::short_branch(&name));
        match store.merge(head, dep_head, &message)? {
            Merged::Commit(commit) => head = commit,
            Merged::Conflict(paths) => {
                let conflict = DependencyConflict { dependency: dep, ours: head, theirs: dep_head, paths: &paths };
                match resolve(&conflict)? {
                    Some(Ok(commit)) => head = commit,
                    Some(Err(why)) => {
                        return Ok(TaskBranch::Conflict { dependency: dep.to_string(), paths, unresolved: Some(why) })
                    }
                    None => return Ok(TaskBranch::Conflict { dependency: dep.to_string(), paths, unresolved: None }),
                }
            }
        }
    }
    match cas::update(store, &name, Expect::Absent, head, "loop: create task branch")? {
        Cas::Applied => Ok(TaskBranch::Ready(head)),
        // Another walker made it first: use theirs.
        Cas::Lost { actual: Some(theirs) } => Ok(TaskBranch::Ready(theirs)),
        Cas::Lost { actual: None } => anyhow::bail!("task branch '{name}' vanished while being created"),
    }
}

/// Where a task's branch goes to take a try's `head`, as the branch is now.
pub enum Target {
    /// Move from `from` (None: the branch does not exist yet) to `to`: the head itself when
    /// the branch has not moved since the try began, else a merge of the two.
    Move { from: Option<ObjectId>, to: ObjectId },
    /// The branch moved meanwhile and merging it into the try conflicts in these paths.
    Conflict(Vec<String>),
}

/// Where task `task`'s branch would go to take try `number`'s `head`.
pub fn landing_target(store: &Store, task: &TaskId, number: u32, head: ObjectId) -> Result<Target> {
    let branch = refs::task_branch(task);
    let current = store.ref_target(&branch)?;
    let to = match current {
        Some(current) if !store.is_ancestor(current, head)? => {
            let message = format!("loop: merge {} into try {number} of {task}\n", refs::short_branch(&branch));
            match store.merge(head, current, &message)? {
                Merged::Commit(commit) => commit,
                Merged::Conflict(paths) => return Ok(Target::Conflict(paths)),
            }
        }
        _ => head,
    };
    Ok(Target::Move { from: current, to })
}

/// Whether `done --try` can accept try `try_` (its worktree path is not read): its branch
/// exists and its head merges into the task branch without a conflict.
pub fn acceptable(store: &Store, try_: &Try) -> Result<bool> {
    let Some(head) = store.ref_target(&try_.branch)? else { return Ok(false) };
    Ok(matches!(landing_target(store, &try_.task, try_.number, head)?, Target::Move { .. }))
}

/// How landing a try on its task's branch went.
pub enum Landed {
    /// The task branch holds this now.
    Moved(ObjectId),
    /// The branch moved since the try began and merging it conflicts in these paths.
    Conflict(Vec<String>),
    /// The branch is checked out in this worktree (moving it would be undone there).
    CheckedOut(PathBuf),
}

/// Land try `try_` (at `head`) on its task's branch: a fast-forward, or a merge with what the
/// branch gained meanwhile, moved by compare-and-swap; when another writer moves the branch
/// first, decided again against where it went (the store's one retry policy). The one way
/// the walk and a person's `hand-back --keep` land work.
pub fn land(store: &Store, try_: &Try, head: ObjectId, why: &str) -> Result<Landed> {
    let branch = refs::task_branch(&try_.task);
    cas::until_settled(&format!("branch '{}'", refs::short_branch(&branch)), std::process::id(), || {
        let (from, to) = match landing_target(store, &try_.task, try_.number, head)? {
            Target::Move { from, to } => (from, to),
            Target::Conflict(paths) => return Ok(Some(Landed::Conflict(paths))),
        };
        Ok(match move_branch(store, &branch, from, to, why)? {
            Move::Moved => Some(Landed::Moved(to)),
            Move::CheckedOut(path) => Some(Landed::CheckedOut(path)),
            Move::Lost(_) => None,
        })
    })
}

/// A try opened to work in.
pub struct Opened {
    pub try_: Try,
    /// An unfinished try taken up again (its branch, with its work, was there already).
    pub resumed: bool,
    /// How its worktree was made (`None`: it was there).
    pub checkout: Option<pool::Checkout>,
}

/// Open a try of `task` to work in, with its worktree: the unfinished try `unfinished` if its
/// branch still exists (its work is kept), else a new one — a number no try of the task has
/// used, taken by `taker` (`take_numbers`), its branch made from the commit `start` gives.
/// The one way the walk, races and people open tries.
pub fn open(
    store: &Store,
    task: &TaskId,
    taker: &str,
    unfinished: Option<u32>,
    history: &[journal::Entry],
    start: impl FnOnce() -> Result<ObjectId>,
) -> Result<Opened> {
    let root = worktrees_root(store)?;
    let resumable = match unfinished {
        Some(n) if store.ref_target(&refs::try_branch(task, n))?.is_some() => Some(n),
        _ => None,
    };
    let (try_, resumed) = match resumable {
        Some(n) => (Try::describe(task, n, &root), true),
        None => {
            let start = start()?;
            let n = take_numbers(store, task, taker, 1, history)?[0];
            let try_ = Try::describe(task, n, &root);
            open_branch(store, &try_, start)?;
            (try_, false)
        }
    };
    let checkout = add_worktree(store, &try_)?;
    Ok(Opened { try_, resumed, checkout })
}

/// Make `try_`'s branch at `start`, unless it exists: then it holds the try's own work (its
/// number is the try's alone), made by an earlier attempt that stopped before it said so.
pub fn open_branch(store: &Store, try_: &Try, start: ObjectId) -> Result<()> {
    match cas::update(store, &try_.branch, Expect::Absent, start, "loop: open try")? {
        Cas::Applied | Cas::Lost { actual: Some(_) } => Ok(()),
        Cas::Lost { actual: None } => {
            anyhow::bail!("could not make the branch of try {} of {}", try_.number, try_.task)
        }
    }
}

/// Add the worktree for `try_` on its branch (which must exist), serialized across
/// processes: concurrent `worktree add`s otherwise fail now and then. A finished try's worktree
/// in the pool is checked out in place when there is one (see `pool`), else one is added. A
/// leftover registration whose directory is gone (deleted under the loop) is pruned first.
/// `None` when the worktree is there already.
pub fn add_worktree(store: &Store, try_: &Try) -> Result<Option<pool::Checkout>> {
    let _guard = WorktreeLock::take(store)?;
    if try_.worktree.join(".git").exists() {
        return Ok(None);
    }
    prune_missing(store)?;
    let (reused, elapsed) = pool::timed(|| pool::take(store, try_))?;
    if let Some(reused) = reused {
        return Ok(Some(pool::Checkout { how: pool::How::Pooled(reused), elapsed }));
    }
    if let Some(parent) = try_.worktree.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
    }
    let existed = try_.worktree.exists();
    // `git worktree prune` beside the loop (by hand, or in `git gc`) removes a registration
    // whose worktree is not there yet, and `.git/worktrees` once it is empty: gix, unlike
    // git, does not lock a worktree while it adds it. What vanished is tried again, after the
    // half-made worktree is undone.
    let ((), added) = pool::timed(|| {
        store.add_worktree(&try_.worktree, &try_.branch, &|| {
            if !existed {
                let _ = std::fs::remove_dir_all(&try_.worktree);
                let _ = prune_missing(store);
            }
        })
    })?;
    Ok(Some(pool::Checkout { how: pool::How::Added, elapsed: elapsed + added }))
}

/// Add a worktree at `path` with `commit` checked out on a detached HEAD (a reviewer's
/// checkout of a try's work: nothing it does moves a branch), serialized as `add_worktree` is.
pub fn add_detached_worktree(store: &Store, path: &Path, commit: ObjectId) -> Result<()> {
    let _guard = WorktreeLock::take(store)?;
    prune_missing(store)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
    }
    store.add_detached_worktree(path, commit, &|| {
        let _ = std::fs::remove_dir_all(path);
        let _ = prune_missing(store);
    })
}

/// Remove the registrations of linked worktrees whose directories no longer exist, as
/// `git worktree prune` does, so their branches are free to be checked out again.
pub fn prune_missing(store: &Store) -> Result<()> {
    let admin_root = store.worktree_registrations();
    let Ok(entries) = std::fs::read_dir(&admin_root) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let admin = entry.path();
        if admin.join("locked").exists() {
            continue;
        }
        let Ok(gitdir) = std::fs::read_to_string(admin.join("gitdir")) else { continue };
        let gitfile = PathBuf::from(gitdir.trim());
        if !gitfile.exists() {
            store
                .retire_worktree_registration(&admin)
                .with_context(|| format!("could not prune '{}'", admin.display()))?;
        }
    }
    Ok(())
}

/// Remove one registration, `<common-dir>/worktrees/<name>/`, if its worktree's directory is
/// gone and it is not locked (judged again under the worktree lock, so a worktree added back
/// meanwhile keeps it). True if it was removed.
pub fn prune_registration(store: &Store, admin: &Path) -> Result<bool> {
    let _guard = WorktreeLock::take(store)?;
    let Ok(gitdir) = std::fs::read_to_string(admin.join("gitdir")) else { return Ok(false) };
    if admin.join("locked").exists() || Path::new(gitdir.trim()).exists() {
        return Ok(false);
    }
    store.retire_worktree_registration(admin).with_context(|| format!("could not prune '{}'", admin.display()))?;
    Ok(true)
}

/// Be done with a try's worktree, whatever is in it (its branch and commits stay): kept in the
/// pool for the next try when the pool takes it (see `pool`), else removed with its
/// registration (`git worktree remove --force`). Callers commit what they keep first.
pub fn remove_worktree(store: &Store, try_: &Try) -> Result<()> {
    {
        let _guard = WorktreeLock::take(store)?;
        if std::fs::symlink_metadata(&try_.worktree).is_ok_and(|m| m.is_dir()) && pool::give_back(store, try_)? {
            return Ok(());
        }
    }
    remove_worktree_at(store, &try_.worktree)
}

/// Remove the worktree at `path`, whatever is in it, and its registration.
pub fn remove_worktree_at(store: &Store, path: &Path) -> Result<()> {
    let _guard = WorktreeLock::take(store)?;
    if !path.exists() {
        return prune_missing(store);
    }
    // Found before the files go: the registration whose `gitdir` names this worktree (never
    // one the worktree's own `.git` file points at, which an agent could have rewritten).
    let admin = registration_of(store, path);
    crate::failpoint::write_point();
    remove_tree(path).with_context(|| format!("could not remove the worktree '{}'", path.display()))?;
    match admin {
        Some(admin) => store.retire_worktree_registration(&admin),
        None => prune_missing(store),
    }
}

/// Remove a directory and everything in it. A directory an agent left without write
/// permission (Go's module cache is read-only, for one) is made writable and the removal tried
/// again; symlinks are removed, never followed.
fn remove_tree(root: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(root) {
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            make_dirs_writable(root);
            std::fs::remove_dir_all(root)
        }
        other => other,
    }
}

/// Give the owner write and search permission on every directory under `dir` (not through
/// symlinks). Best effort: what cannot be changed is left for the removal to report.
fn make_dirs_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return };
    if !meta.is_dir() {
        return;
    }
    let mode = meta.permissions().mode();
    if mode & 0o300 != 0o300 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o300));
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            make_dirs_writable(&entry.path());
        }
    }
}

/// The directory under `<common-dir>/worktrees/` that registers `worktree`.
fn registration_of(store: &Store, worktree: &Path) -> Option<PathBuf> {
    let root = store.worktree_registrations();
    let gitfile = worktree.join(".git");
    let names = |dir: &Path| std::fs::read_to_string(dir.join("gitdir")).is_ok_and(|g| Path::new(g.trim()) == gitfile);
    // The registration is named after the worktree's directory, unless that name was taken.
    let likely = root.join(worktree.file_name()?);
    if names(&likely) {
        return Some(likely);
    }
    std::fs::read_dir(&root).ok()?.flatten().map(|e| e.path()).find(|dir| names(dir))
}

/// The cross-process lock around worktree creation and removal (concurrent `worktree add`s
/// otherwise fail now and then): `.git/loop/worktree.lock` (see `store::flock`).
struct WorktreeLock;

impl WorktreeLock {
    fn take(store: &Store) -> Result<FileLock> {
        let path = store.layout()?.worktree_lock();
        FileLock::exclusive(&path, "adding or removing a worktree", Duration::from_secs(60))
    }
}

/// A diffstat as lines a person or an agent reads: `  M src/lib.rs (+12 -3)`.
pub fn describe_changes(changes: &[FileChange]) -> String {
    if changes.is_empty() {
        return "  (no changes)".to_owned();
    }
    changes
        .iter()
        .map(|c| {
            let letter = match c.kind {
                "added" => 'A',
                "deleted" => 'D',
                "renamed" => 'R',
                _ => 'M',
            };
            let lines = match (c.added, c.removed) {
                (Some(a), Some(r)) => format!(" (+{a} -{r})"),
                _ => " (binary)".to_owned(),
            };
            format!("  {letter} {}{lines}", c.path)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::context::Context;

    use crate::git::for_tests as git;

    /// Two clones of one remote, neither knowing what the other did: each takes a try number
    /// for the same task, and they get different ones, because the number is taken on the
    /// remote.
    #[test]
    fn two_clones_never_take_the_same_try_number() {
        let root = tempfile::tempdir().expect("tempdir");
        let seed = root.path().join("seed");
        std::fs::create_dir_all(&seed).expect("mkdir");
        git(&seed, &["init", "-q", "-b", "main"]);
        git(&seed, &["-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "i"]);
        git(root.path(), &["clone", "-q", "--bare", "seed", "r.git"]);
        let ctx = Context::for_tests();
        let clones = |names: [&str; 2], remote: bool| -> Vec<Store> {
            names
                .iter()
                .map(|name| {
                    git(root.path(), &["clone", "-q", "r.git", name]);
                    if remote {
                        git(&root.path().join(name), &["config", "loop.remote", "origin"]);
                    }
                    Store::open(&ctx, &root.path().join(name)).expect("open")
                })
                .collect()
        };
        let task: TaskId = "t-1".parse().expect("an id");
        let stores = clones(["a", "b"], true);
        let a = take_numbers(&stores[0], &task, "w-a", 1, &[]).expect("a takes");
        let b = take_numbers(&stores[1], &task, "w-b", 1, &[]).expect("b takes");
        assert_eq!((a, b), (vec![1], vec![2]), "the second clone's first number is 2, not a second 1");
        // Control: clones that do not take their numbers on the remote collide.
        let alone = clones(["c", "d"], false);
        let c = take_numbers(&alone[0], &task, "w-c", 1, &[]).expect("c takes");
        let d = take_numbers(&alone[1], &task, "w-d", 1, &[]).expect("d takes");
        assert_eq!((c, d), (vec![1], vec![1]), "control: without the remote both take 1");
    }

    #[test]
    fn read_only_directories_are_made_writable_for_removal_and_symlinks_are_not_followed() {
        let root = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o555)).expect("chmod");
        let tree = root.path().join("wt");
        let locked = tree.join("cache/mod");
        std::fs::create_dir_all(&locked).expect("mkdir");
        std::fs::write(locked.join("file"), "x").expect("write");
        std::os::unix::fs::symlink(outside.path(), tree.join("link")).expect("symlink");
        for dir in [&locked, &tree.join("cache")] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        }
        make_dirs_writable(&tree);
        let mode = |p: &Path| std::fs::symlink_metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!((mode(&tree.join("cache")), mode(&locked)), (0o755, 0o755), "owner may write and search again");
        assert_eq!(mode(outside.path()), 0o555, "a symlinked directory outside is left alone");
        remove_tree(&tree).expect("remove");
        assert!(!tree.exists() && outside.path().exists());
    }
}
