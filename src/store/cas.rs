//! The one small transaction type every ref write goes through: each write states what it
//! expects to replace (absent, or this exact id), and a lost compare-and-swap comes back as
//! an outcome, not an error.
//!
//! Lock files: gix waits up to `core.filesRefLockTimeout` (set to 1 s by `git::open`) for a
//! ref's `.lock`. A writer killed with SIGKILL leaves its lock behind for ever, so a lock on a
//! loop-owned ref that is older than [`STALE_LOCK`] is treated as abandoned (our writers hold
//! theirs for well under a millisecond) and removed in a way that cannot remove a fresh one
//! by mistake; see `remove_stale_lock`. A lock's age is judged by the clock of the file system
//! that stamped it, never by this process's clock (see `lock_age`). `packed-refs.lock` belongs to git as a whole and is
//! never removed by us. While it is held, gix takes it too for any write that must look at
//! packed refs, and `git pack-refs` or `git gc` may take it again and again: a write keeps
//! trying while a new lock file appears between tries (up to [`PACKED_PATIENCE`]); the same
//! lock file at two tries a second apart was left behind, and is reported with its path and
//! how to clear it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;
use gix::ObjectId;

use super::Store;
use crate::error::{Class, Refusal};
use crate::refs;

/// How old a lock on a loop-owned ref must be before it counts as left by a crashed writer.
pub const STALE_LOCK: Duration = Duration::from_secs(30);

/// What a write expects the ref to hold before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The ref must not exist.
    Absent,
    /// The ref must hold exactly this id.
    Is(ObjectId),
}

impl Expect {
    pub fn from_current(current: Option<ObjectId>) -> Expect {
        current.map_or(Expect::Absent, Expect::Is)
    }
}

impl From<Expect> for Option<ObjectId> {
    fn from(expect: Expect) -> Option<ObjectId> {
        match expect {
            Expect::Absent => None,
            Expect::Is(id) => Some(id),
        }
    }
}

/// How a compare-and-swap went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cas {
    /// The ref now holds the new value (or is gone, for a delete).
    Applied,
    /// Someone else changed the ref first; it holds `actual` now.
    Lost { actual: Option<ObjectId> },
}

/// Set `name` to `new` if it holds what `expect` says.
pub fn update(store: &Store, name: &str, expect: Expect, new: ObjectId, message: &str) -> Result<Cas> {
    let previous = match expect {
        Expect::Absent => PreviousValue::MustNotExist,
        Expect::Is(old) => PreviousValue::MustExistAndMatch(Target::Object(old)),
    };
    let edit = RefEdit {
        change: Change::Update {
            log: LogChange { mode: RefLog::AndReference, force_create_reflog: false, message: message.into() },
            expected: previous,
            new: Target::Object(new),
        },
        name: name.try_into().with_context(|| format!("'{name}' is not a valid ref name"))?,
        deref: false,
    };
    apply(store, name, edit)
}

/// Delete `name` if it holds `expect`.
pub fn delete(store: &Store, name: &str, expect: ObjectId) -> Result<Cas> {
    let edit = RefEdit {
        change: Change::Delete {
            expected: PreviousValue::MustExistAndMatch(Target::Object(expect)),
            log: RefLog::AndReference,
        },
        name: name.try_into().with_context(|| format!("'{name}' is not a valid ref name"))?,
        deref: false,
    };
    apply(store, name, edit)
}

/// How long a write keeps trying while git holds `packed-refs.lock`.
pub const PACKED_PATIENCE: Duration = Duration::from_secs(10);

fn apply(store: &Store, name: &str, edit: RefEdit) -> Result<Cas> {
    let repo = &store.repo;
    let started = std::time::Instant::now();
    let mut packed_lock = None;
    let mut removed_stale = false;
    let sig = store.signature();
    let mut time = gix::date::parse::TimeBuf::default();
    loop {
        store.fresh_refs();
        match repo.edit_references_as([edit.clone()], Some(sig.to_ref(&mut time))) {
            Ok(_) => {
                store.note_written(name);
                return Ok(Cas::Applied);
            }
            Err(err) if err.is_conflict() || err.is_not_found() => {
                // Read what is there now, so the caller can decide again.
                let actual = crate::git::ref_target(repo, name)?;
                return Ok(Cas::Lost { actual });
            }
            Err(err) if err.is_retryable() => {
                let common = repo.common_dir();
                let packed = common.join("packed-refs.lock");
                if let Ok(meta) = std::fs::metadata(&packed) {
                    // A new lock file since the last try: git is at work (and each try waited a
                    // second); the same one: it was left behind.
                    let lock = std::os::unix::fs::MetadataExt::ino(&meta);
                    if packed_lock.replace(lock).is_none_or(|last| last != lock) && started.elapsed() < PACKED_PATIENCE
                    {
                        std::thread::sleep(Duration::from_millis(2 + u64::from(std::process::id() % 13)));
                        continue;
                    }
                    return Err(lock_refusal(&packed, "packed-refs.lock is held").into());
                }
                let lock = lock_path(common, name);
                if !removed_stale && owned_by_loop(name) && remove_stale_lock(&lock)? {
                    removed_stale = true;
                    continue;
                }
                return Err(lock_refusal(&lock, &format!("ref '{name}' is locked by another writer")).into());
            }
            Err(err) => {
                // gix looks refs up in packed-refs before writing: a bad line there fails writes
                // to healthy refs. Say what it is (exit 3), not that this ref is at fault.
                crate::git::packed::check(repo)?;
                return Err(anyhow::Error::from(err).context(format!("could not update ref '{name}'")));
            }
        }
    }
}

/// Refs only git-loop writes; a stale lock on any other ref is left for the user to judge.
pub(crate) fn owned_by_loop(name: &str) -> bool {
    name.starts_with(refs::LOOP)
        || name == refs::NOTES
        || name.starts_with(refs::TASK_BRANCHES)
        || name.starts_with(refs::TRY_BRANCHES)
        || name.starts_with(refs::REMOTES)
}

fn lock_path(common_dir: &Path, name: &str) -> PathBuf {
    common_dir.join(format!("{name}.lock"))
}

fn lock_refusal(lock: &Path, what: &str) -> Refusal {
    let age = std::fs::metadata(lock)
        .ok()
        .and_then(|meta| lock_age(lock, &meta))
        .map(|d| format!(" (for {}s)", d.as_secs()))
        .unwrap_or_default();
    Refusal::new(Class::Failure, format!("{what}{age}: '{}'", lock.display())).hint(format!(
        "if no git or git-loop process is running, a crashed one left it: remove it with 'rm {}'",
        lock.display()
    ))
}

/// Remove `lock` if it is older than [`STALE_LOCK`] (see `lock_age`); true if removed.
///
/// Two recoverers may see the same stale lock, and the winner may already have taken a fresh
/// lock at that path by the time the loser acts. So the lock is renamed away first (atomic),
/// and only deleted if the renamed file is the very inode judged stale; otherwise it is
/// linked back, untouched.
pub(crate) fn remove_stale_lock(lock: &Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(lock) else {
        // Gone meanwhile: the holder finished; just retry.
        return Ok(true);
    };
    if lock_age(lock, &meta).is_none_or(|age| age < STALE_LOCK) {
        return Ok(false);
    }
    // A name no ref can have and every ref reader skips (a leading dot, a `.lock` ending).
    let aside = lock.with_file_name(format!(".stale-{}.lock", crate::ids::random_base32(8)));
    if std::fs::rename(lock, &aside).is_err() {
        return Ok(true);
    }
    let moved = std::fs::metadata(&aside).with_context(|| format!("could not inspect '{}'", aside.display()))?;
    if moved.ino() == meta.ino() && moved.dev() == meta.dev() {
        std::fs::remove_file(&aside).with_context(|| format!("could not remove '{}'", aside.display()))?;
    } else {
        // We moved a fresh lock: put it back (fails harmlessly if a newer one exists).
        let _ = std::fs::hard_link(&aside, lock);
        let _ = std::fs::remove_file(&aside);
    }
    Ok(true)
}

/// How old the lock file `meta` describes is, by the clock of the file system that holds it:
/// the modification time of a file created beside it just now, minus the lock's. Both times
/// were stamped by the same clock (this machine's kernel, or a network file system's server),
/// so a process whose own clock runs fast never takes a live lock for an old one, and one whose
/// clock runs slow still recovers an abandoned one. `None` when it cannot tell: the lock is then
/// never taken to be abandoned.
pub(crate) fn lock_age(lock: &Path, meta: &std::fs::Metadata) -> Option<Duration> {
    // Named like `aside` above: no ref reader, watcher or recoverer ever takes it for a ref.
    let probe = lock.with_file_name(format!(".clock-{}.lock", crate::ids::random_base32(8)));
    let now = std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).and_then(|f| f.metadata());
    let _ = std::fs::remove_file(&probe);
    now.ok()?.modified().ok()?.duration_since(meta.modified().ok()?).ok()
}
