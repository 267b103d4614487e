//! The one place doctor decides whether a lock file was abandoned, and removes one.
//!
//! The policy is `store::cas`'s, whose helpers do the work: a lock is abandoned once it is
//! older than [`cas::STALE_LOCK`] by the clock of the file system that stamped it (never this
//! process's clock), and it is removed by renaming it aside and deleting it only if it is still
//! the very file judged (a fresh lock taken meanwhile is put back). On top of that, a lock that
//! any process of ours has open is never judged abandoned, whatever its age: its holder is
//! alive (paused, or slow). `cas` is being taught to recover `packed-refs.lock` and the notes
//! lock at run time; when it is, these two functions are what changes.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::store::cas;

/// How a lock file stands.
pub(super) enum Verdict {
    /// Older than the threshold and held open by no process: its writer is gone.
    Abandoned(Duration),
    /// Young, held open, or of an age that cannot be told: a writer may be at work.
    MaybeHeld,
}

/// Judge the lock file at `path`.
pub(super) fn judge(path: &Path) -> Verdict {
    let Ok(meta) = std::fs::metadata(path) else { return Verdict::MaybeHeld };
    match cas::lock_age(path, &meta) {
        Some(age) if age >= cas::STALE_LOCK && !held_open(path) => Verdict::Abandoned(age),
        _ => Verdict::MaybeHeld,
    }
}

/// Remove an abandoned lock on a ref git-loop owns (`cas` judges its age again, and removes it
/// only if it is still the file judged). True if it is gone.
pub(super) fn remove(path: &Path) -> Result<bool> {
    if held_open(path) {
        return Ok(false);
    }
    Ok(cas::remove_stale_lock(path)? && !path.exists())
}

/// Whether a process whose file descriptors we can read has `path` open. git and gix hold a
/// lock file open from taking it until it is renamed into place; a process that cannot be
/// inspected (another user's) is not seen, which the age threshold covers.
fn held_open(path: &Path) -> bool {
    let Ok(target) = std::fs::canonicalize(path) else { return false };
    let Ok(procs) = std::fs::read_dir("/proc") else { return false };
    procs.flatten().filter(|p| p.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))).any(|p| {
        std::fs::read_dir(p.path().join("fd"))
            .map(|fds| fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == target)))
            .unwrap_or(false)
    })
}
