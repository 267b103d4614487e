//! Lock files that git and gix leave beside what they change (`<ref>.lock`, `packed-refs.lock`,
//! `refs/notes/loop.lock`): telling a live holder's lock from one a killed process left behind,
//! and recovering the latter at once, without ever taking a live one.
//!
//! Who can hold such a lock:
//! - git (`pack-refs`, `gc`, `update-ref`, a fetch): git keeps a lock file open while it holds
//!   it, so a live git holder is seen in `/proc/*/fd`;
//! - git-loop, through gix, which closes a lock file as soon as it has made it. So every ref
//!   and notes transaction of git-loop runs while its process holds `.git/loop/writing` shared
//!   (an `flock`, which the kernel drops when the process dies, however it dies; see
//!   [`writing`]). A recoverer that takes it exclusively knows that no git-loop transaction is
//!   in flight in this clone.
//!
//! A lock file is abandoned when no process has it open, no git-loop transaction is in flight,
//! and it is at least [`SETTLED`] old by the file system's clock (git closes its lock a moment
//! before renaming it into place; that moment is far shorter). It is then removed in a way
//! that cannot remove a fresh one taken meanwhile at that path: renamed aside, and deleted
//! only if it is still the very file judged abandoned. A git-loop process stopped in the middle
//! of a transaction (SIGSTOP) keeps its locks: they are never taken from a live process.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::flock::FileLock;
use crate::error::{Class, Refusal};

/// How old a lock file must be, by the file system's clock, before it can count as abandoned.
pub const SETTLED: Duration = Duration::from_secs(1);

/// The file git-loop's transactions hold shared.
fn writing_path(common_dir: &Path) -> PathBuf {
    super::layout::Layout::of(common_dir).writing()
}

/// Held (shared) for the length of one ref or notes transaction of this process.
pub struct Writing(#[allow(dead_code)] FileLock);

/// Mark a transaction in flight in the clone whose common directory is `common_dir` (a
/// recoverer waits for it to end). Transactions last well under a millisecond; a recovery holds
/// the mark for a few file operations.
pub fn writing(common_dir: &Path) -> Result<Writing> {
    let path = writing_path(common_dir);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("could not create '{}'", dir.display()))?;
    }
    Ok(Writing(FileLock::shared(&path, "recovering an abandoned lock", Duration::from_secs(60))?))
}

/// What `recover` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// There is no lock (any more): its holder finished.
    Gone,
    /// A process has it open (git at work): left alone.
    Open,
    /// A git-loop transaction is in flight in this clone, or the lock is younger than
    /// [`SETTLED`]: left alone for now; ask again in a moment.
    Busy,
    /// It was abandoned, and is removed.
    Removed,
}

/// How a lock file stands, as `recover` judges it (`git loop doctor` reports this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// There is no lock (any more).
    Gone,
    /// A process has it open: a live git holds it.
    Open,
    /// Younger than [`SETTLED`] by the file system's clock (or its age cannot be told): its
    /// writer may be at work.
    Young,
    /// A git-loop transaction is in flight in this clone (or a git-loop process is stopped in
    /// the middle of one): the lock may be that transaction's.
    InFlight,
    /// Abandoned, this old: `recover` removes it.
    Abandoned(Duration),
}

/// Judge `lock` without touching it. The answer holds for the moment it was given: a lock
/// judged abandoned is removed only by `recover`, which judges it again.
pub fn standing(common_dir: &Path, lock: &Path) -> Result<Standing> {
    Ok(judge(common_dir, lock)?.0)
}

/// `lock`'s standing and, when it is abandoned, its metadata and the exclusive hold on
/// `writing` that keeps every git-loop transaction of this clone out while it is removed.
fn judge(common_dir: &Path, lock: &Path) -> Result<(Standing, Option<(std::fs::Metadata, FileLock)>)> {
    let Ok(meta) = std::fs::metadata(lock) else {
        return Ok((Standing::Gone, None));
    };
    if is_open(lock) {
        return Ok((Standing::Open, None));
    }
    let Some(age) = age(lock, &meta).filter(|age| *age >= SETTLED) else {
        return Ok((Standing::Young, None));
    };
    let writing = writing_path(common_dir);
    if let Some(dir) = writing.parent() {
        // A lock can be left in a clone where git-loop never wrote (its directory not made yet).
        std::fs::create_dir_all(dir).with_context(|| format!("could not create '{}'", dir.display()))?;
    }
    match FileLock::try_exclusive(&writing)? {
        Some(no_transaction) => Ok((Standing::Abandoned(age), Some((meta, no_transaction)))),
        None => Ok((Standing::InFlight, None)),
    }
}

/// Remove `lock`, a lock file in the repository whose common directory is `common_dir`, if it
/// was abandoned (see the module docs).
pub fn recover(common_dir: &Path, lock: &Path) -> Result<Recovery> {
    use std::os::unix::fs::MetadataExt;
    let (meta, _no_transaction) = match judge(common_dir, lock)? {
        (Standing::Gone, _) => return Ok(Recovery::Gone),
        (Standing::Open, _) => return Ok(Recovery::Open),
        (Standing::Young | Standing::InFlight, _) => return Ok(Recovery::Busy),
        (Standing::Abandoned(_), held) => held.expect("an abandoned lock comes with the hold on 'writing'"),
    };
    // A name no ref can have and every ref reader skips (a leading dot, a `.lock` ending).
    let aside = lock.with_file_name(format!(".stale-{}.lock", crate::ids::random_base32(8)));
    if std::fs::rename(lock, &aside).is_err() {
        return Ok(Recovery::Gone);
    }
    let moved = std::fs::metadata(&aside).with_context(|| format!("could not inspect '{}'", aside.display()))?;
    if moved.ino() == meta.ino() && moved.dev() == meta.dev() {
        std::fs::remove_file(&aside).with_context(|| format!("could not remove '{}'", aside.display()))?;
        Ok(Recovery::Removed)
    } else {
        // We moved a fresh lock (git's, taken meanwhile): put it back (fails harmlessly if a
        // newer one exists).
        let _ = std::fs::hard_link(&aside, lock);
        let _ = std::fs::remove_file(&aside);
        Ok(Recovery::Gone)
    }
}

/// The error for a lock that blocks a write and was not abandoned: its path, how long it has
/// been there, and what to do.
pub fn refusal(lock: &Path, what: &str) -> Refusal {
    let (age, open) = match std::fs::metadata(lock) {
        Ok(meta) => (age(lock, &meta), is_open(lock)),
        Err(_) => (None, false),
    };
    let age_text = age.map(|d| format!(" (for {} s)", d.as_secs())).unwrap_or_default();
    let hint = if open {
        "a git process holds it; wait for it to finish".to_owned()
    } else {
        format!(
            "a git-loop process of this clone is writing (or is stopped mid-write); if none is running, \
             remove it with 'rm {}'",
            lock.display()
        )
    };
    Refusal::new(Class::Failure, format!("{what}{age_text}: '{}'", lock.display())).hint(hint)
}

/// Whether any process of this machine that we can see has `path` open.
pub fn is_open(path: &Path) -> bool {
    let Ok(target) = std::fs::canonicalize(path) else { return false };
    let Ok(procs) = std::fs::read_dir("/proc") else { return false };
    for process in procs.flatten() {
        if !process.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|open| open == target) {
                return true;
            }
        }
    }
    false
}

/// How old the file `meta` describes is, by the clock of the file system that holds it: the
/// modification time of a file created beside it just now, minus its own. Both times were
/// stamped by the same clock (this machine's kernel, or a network file system's server), so a
/// process whose own clock is off changes nothing. `None` when it cannot tell.
pub fn age(path: &Path, meta: &std::fs::Metadata) -> Option<Duration> {
    // Named like the aside name above: no ref reader, watcher or recoverer takes it for a ref.
    let probe = path.with_file_name(format!(".clock-{}.lock", crate::ids::random_base32(8)));
    let now = std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).and_then(|f| f.metadata());
    let _ = std::fs::remove_file(&probe);
    now.ok()?.modified().ok()?.duration_since(meta.modified().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backdate(path: &Path, by: Duration) {
        let then = std::time::SystemTime::now() - by;
        std::fs::File::options().write(true).open(path).and_then(|f| f.set_modified(then)).expect("backdate");
    }

    #[test]
    fn an_abandoned_lock_is_removed_and_a_young_open_or_mid_transaction_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let common = dir.path();
        let lock = common.join("packed-refs.lock");
        std::fs::write(&lock, "").expect("write");
        assert_eq!(standing(common, &lock).expect("standing"), Standing::Young);
        assert_eq!(recover(common, &lock).expect("recover"), Recovery::Busy, "a lock just made stays");
        backdate(&lock, Duration::from_secs(5));
        let held = std::fs::File::open(&lock).expect("open");
        assert_eq!(standing(common, &lock).expect("standing"), Standing::Open);
        assert_eq!(recover(common, &lock).expect("recover"), Recovery::Open, "a lock a process has open stays");
        drop(held);
        let transaction = writing(common).expect("writing");
        assert_eq!(standing(common, &lock).expect("standing"), Standing::InFlight);
        assert_eq!(recover(common, &lock).expect("recover"), Recovery::Busy, "not while a transaction is in flight");
        drop(transaction);
        assert!(lock.exists());
        assert!(matches!(standing(common, &lock).expect("standing"), Standing::Abandoned(age) if age >= SETTLED));
        assert!(lock.exists(), "judging takes nothing");
        assert_eq!(recover(common, &lock).expect("recover"), Recovery::Removed);
        assert!(!lock.exists());
        assert_eq!(recover(common, &lock).expect("recover"), Recovery::Gone);
        assert_eq!(standing(common, &lock).expect("standing"), Standing::Gone);
    }
}
