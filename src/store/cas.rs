//! The one small transaction type every ref write goes through: each write states what it
//! expects to replace (absent, or this exact id), and a lost compare-and-swap comes back as
//! an outcome, not an error.
//!
//! Lock files: gix waits up to `core.filesRefLockTimeout` (set to 1 s by `git::open`) for a
//! ref's `.lock`. A writer killed with SIGKILL leaves its lock behind for ever, so a lock on a
//! loop-owned ref, or `packed-refs.lock`, that no process has open and that is older than
//! `locks::SETTLED` by the file system's clock is taken to be abandoned and removed in
//! a way that cannot remove a fresh one by mistake (see `store::locks`). While git holds
//! `packed-refs.lock` (`pack-refs`, `gc`), gix takes it too for any write that must look at
//! packed refs, and git may take it again and again: a write keeps trying while a new lock
//! file appears between tries (up to [`PACKED_PATIENCE`]). A lock still held is reported with
//! its path, its age, and what to do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;
use gix::ObjectId;

use super::locks::{self, Recovery};
use super::Store;
use crate::refs;

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

/// How many times a read-decide-swap loop ([`until_settled`]) tries before it gives up.
pub const ATTEMPTS: u32 = 200;

/// Run `attempt` — read a ref, decide, write by compare-and-swap — until it is settled:
/// `Ok(Some(value))` ends it; `Ok(None)` means the swap was lost (another writer moved the ref
/// after it was read), so it reads again: at once the first time, then after a short pause
/// that grows with each loss and differs between processes, so that writers contending for
/// one ref stop colliding. After [`ATTEMPTS`] losses it gives up, saying `what` kept changing.
/// The one retry policy of every record the store writes.
pub fn until_settled<T>(what: &str, pid: u32, mut attempt: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    for lost in 0..ATTEMPTS {
        if let Some(done) = attempt()? {
            return Ok(done);
        }
        if lost > 0 {
            let jitter = u64::from(pid % 7) * 150;
            std::thread::sleep(Duration::from_micros((200 + jitter) * u64::from(lost.min(10))));
        }
    }
    Err(crate::error::refused(format!("{what} kept changing under this write ({ATTEMPTS} attempts)"))
        .hint("another writer is busy with it; try again")
        .into())
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

/// How a batch of creations went: all or nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Batch {
    /// Every ref now holds its new value.
    Applied,
    /// One of them existed already (made by someone else meanwhile): none was written.
    Lost,
}

/// Create every ref of `creates` (each must not exist) in one transaction written straight
/// into `packed-refs`: one file replaced by rename, not a loose file per ref, so a hundred
/// thousand refs cost one write and are all there or none is. Each ref's own lock is still
/// taken while the transaction is prepared, so a concurrent writer of one of them either
/// made it first (the batch is `Lost`) or waits.
pub fn create_all(store: &Store, creates: &[(String, ObjectId)], message: &str) -> Result<Batch> {
    let Some((first, _)) = creates.first() else { return Ok(Batch::Applied) };
    let edits = creates
        .iter()
        .map(|(name, new)| {
            Ok(RefEdit {
                change: Change::Update {
                    log: LogChange { mode: RefLog::AndReference, force_create_reflog: false, message: message.into() },
                    expected: PreviousValue::MustNotExist,
                    new: Target::Object(*new),
                },
                name: name.as_str().try_into().with_context(|| format!("'{name}' is not a valid ref name"))?,
                deref: false,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let applied = apply_all(store, first, edits, true)?;
    if applied == Cas::Applied {
        for (name, _) in creates {
            store.note_written(name);
        }
        return Ok(Batch::Applied);
    }
    Ok(Batch::Lost)
}

/// Delete each ref of `deletes` that still holds its value: in transactions of many refs (one
/// `packed-refs` rewrite each, where deleting one by one rewrites it once per ref, which at a
/// hundred thousand refs takes hours), a transaction that meets a moved ref redone one ref at a
/// time. Returns the refs deleted; a ref that moved is kept.
pub fn delete_all(store: &Store, deletes: &[(String, ObjectId)]) -> Result<Vec<String>> {
    const PER_TRANSACTION: usize = 10_000;
    let mut deleted = Vec::new();
    for chunk in deletes.chunks(PER_TRANSACTION) {
        let edits = chunk
            .iter()
            .map(|(name, expect)| {
                Ok(RefEdit {
                    change: Change::Delete {
                        expected: PreviousValue::MustExistAndMatch(Target::Object(*expect)),
                        log: RefLog::AndReference,
                    },
                    name: name.as_str().try_into().with_context(|| format!("'{name}' is not a valid ref name"))?,
                    deref: false,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if apply_all(store, &chunk[0].0, edits, true)? == Cas::Applied {
            for (name, _) in chunk {
                store.note_written(name);
            }
            deleted.extend(chunk.iter().map(|(name, _)| name.clone()));
            continue;
        }
        for (name, expect) in chunk {
            if delete(store, name, *expect)? == Cas::Applied {
                deleted.push(name.clone());
            }
        }
    }
    Ok(deleted)
}

/// How long a write keeps trying while git holds `packed-refs.lock`.
pub const PACKED_PATIENCE: Duration = Duration::from_secs(10);

fn apply(store: &Store, name: &str, edit: RefEdit) -> Result<Cas> {
    let cas = apply_all(store, name, vec![edit], false)?;
    if cas == Cas::Applied {
        store.note_written(name);
    }
    Ok(cas)
}

/// Apply `edits` in one transaction, `name` (one of them) standing for them in errors and in
/// the search for a lock in the way; `packed`: written into `packed-refs` rather than as
/// loose files.
fn apply_all(store: &Store, name: &str, edits: Vec<RefEdit>, packed: bool) -> Result<Cas> {
    let repo = &store.repo;
    let started = std::time::Instant::now();
    let sig = store.signature();
    let mut time = gix::date::parse::TimeBuf::default();
    loop {
        store.fresh_refs();
        crate::failpoint::write_point();
        let edited = {
            let _in_flight = locks::writing(repo.common_dir())?;
            if packed {
                let wait = gix::lock::acquire::Fail::AfterDurationWithBackoff(Duration::from_secs(1));
                repo.refs
                    .transaction()
                    .packed_refs(gix::refs::file::transaction::PackedRefs::DeletionsAndNonSymbolicUpdatesRemoveLooseSourceReference(Box::new(
                        repo.objects.clone(),
                    )))
                    .prepare(edits.iter().cloned(), wait, wait)
                    .and_then(|prepared| prepared.commit(Some(sig.to_ref(&mut time))))
            } else {
                repo.edit_references_as(edits.iter().cloned(), Some(sig.to_ref(&mut time)))
            }
        };
        match edited {
            Ok(_) => {
                crate::failpoint::write_point();
                return Ok(Cas::Applied);
            }
            Err(err) if err.is_conflict() || err.is_not_found() => {
                // Read what is there now, so the caller can decide again.
                let actual = crate::git::ref_target(repo, name)?;
                return Ok(Cas::Lost { actual });
            }
            Err(err) if err.is_retryable() => {
                // A lock is in the way: `packed-refs.lock` (gix takes it for any write that
                // must look at packed refs, and git's `pack-refs` or `gc` may hold it, again
                // and again) or the ref's own. One a killed writer left is removed at once;
                // one a live process holds is waited for, up to `PACKED_PATIENCE`.
                let common = repo.common_dir();
                let lock =
                    [common.join("packed-refs.lock"), lock_path(common, name)].into_iter().find(|lock| lock.exists());
                let Some(lock) = lock else {
                    if started.elapsed() < PACKED_PATIENCE {
                        continue;
                    }
                    return Err(anyhow::Error::from(err).context(format!("could not update ref '{name}'")));
                };
                let ours = lock.file_name().is_some_and(|f| f == "packed-refs.lock") || owned_by_loop(name);
                let recovered = if ours { locks::recover(common, &lock)? } else { Recovery::Open };
                if matches!(recovered, Recovery::Removed | Recovery::Gone) || started.elapsed() < PACKED_PATIENCE {
                    std::thread::sleep(Duration::from_millis(2 + u64::from(std::process::id() % 13)));
                    continue;
                }
                let what = match lock.file_name().is_some_and(|f| f == "packed-refs.lock") {
                    true => "packed-refs.lock is held".to_owned(),
                    false => format!("ref '{name}' is locked by another writer"),
                };
                return Err(locks::refusal(&lock, &what).into());
            }
            Err(err) if racing_directories(&err) && started.elapsed() < PACKED_PATIENCE => {
                // `git pack-refs --prune` (and `gc`) removes the ref directories it empties,
                // and the lock file's directory can vanish, or come back, while gix makes
                // it: try again, as git does.
                std::thread::sleep(Duration::from_millis(1 + u64::from(std::process::id() % 7)));
                continue;
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

/// Whether a failed ref edit met a directory made or removed under it (an I/O "exists" or
/// "not found" among its causes) rather than a lock or a conflict.
fn racing_directories(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(err) = cause {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return matches!(io.kind(), std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotFound);
        }
        cause = err.source();
    }
    false
}

/// Refs only git-loop writes; a stale lock on any other ref is left for the user to judge.
pub(crate) fn owned_by_loop(name: &str) -> bool {
    name.starts_with(refs::LOOP)
        || name == refs::NOTES
        || name.starts_with(refs::TASK_BRANCHES)
        || name.starts_with(refs::TRY_BRANCHES)
        || name.starts_with(refs::KEPT_BRANCHES)
        || name.starts_with(refs::REMOTES)
}

fn lock_path(common_dir: &Path, name: &str) -> PathBuf {
    common_dir.join(format!("{name}.lock"))
}
