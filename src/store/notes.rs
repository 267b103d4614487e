//! Completion evidence as a git note in `refs/notes/loop`, on the commit that completed a
//! task: `git notes --ref=loop show <commit>` and `git log --notes=loop` read it.
//!
//! Written through gix, whose notes writes are a compare-and-swap on the notes ref (`git
//! notes add` is not: concurrent adds silently lose notes), retried when another writer
//! got there first.

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::locks::Recovery;
use super::Store;
use crate::refs;

/// Version of a completion note; readers refuse newer ones.
pub const NOTE_VERSION: u32 = 1;

/// The content of a completion note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionNote {
    pub version: u32,
    pub task: String,
    pub title: String,
    pub state: String,
    pub commit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "try")]
    pub try_number: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub at: DateTime<Utc>,
    pub by: String,
}

/// Decode a completion note and check its version. `Err` says what is wrong. The one
/// definition of a readable note (the server's pre-receive hook uses it too).
pub fn decode(bytes: &[u8]) -> Result<CompletionNote, String> {
    let note: CompletionNote =
        serde_json::from_slice(bytes).map_err(|err| format!("it is not a completion note: {err}"))?;
    if note.version > NOTE_VERSION {
        return Err(format!("its version {} was written by a newer git-loop", note.version));
    }
    Ok(note)
}

/// Attach `note` to `commit`, replacing any earlier loop note there.
pub fn write(store: &Store, commit: ObjectId, note: &CompletionNote) -> Result<()> {
    let body = format!("{}\n", serde_json::to_string_pretty(note)?);
    let started = std::time::Instant::now();
    let mut last_err = None;
    for _attempt in 0..50 {
        store.fresh_refs();
        let mut notes = store
            .repo
            .notes()
            .context("could not open the notes")?
            .with_commit_message(format!("loop: completion of {}", note.task));
        crate::failpoint::write_point();
        let replaced = {
            let _in_flight = super::locks::writing(store.repo.common_dir())?;
            notes.replace(refs::NOTES, commit, body.as_bytes())
        };
        match replaced {
            Ok(_) => {
                store.note_written(refs::NOTES);
                crate::failpoint::write_point();
                return Ok(());
            }
            Err(err) if err.is_conflict() => {
                // Another writer's note landed first: write ours on top of it.
                last_err = Some(err.to_string());
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(err) if err.is_retryable() => {
                // A lock: the notes ref's own, or packed-refs'. One a killed writer left is
                // removed (see `store::locks`); one still held is waited for, a little.
                let common = store.repo.common_dir();
                let held = [common.join(format!("{}.lock", refs::NOTES)), common.join("packed-refs.lock")]
                    .into_iter()
                    .find(|lock| lock.exists());
                if let Some(lock) = held {
                    let recovered = super::locks::recover(store.repo.common_dir(), &lock)?;
                    let still_held = !matches!(recovered, Recovery::Removed | Recovery::Gone);
                    if still_held && started.elapsed() > super::cas::PACKED_PATIENCE {
                        return Err(super::locks::refusal(&lock, "the completion notes are locked").into());
                    }
                    if still_held {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                }
                last_err = Some(err.to_string());
            }
            Err(err) => {
                return Err(anyhow::Error::from(err).context(format!("could not write the completion note on {commit}")))
            }
        }
    }
    Err(anyhow::anyhow!("could not write the completion note on {commit}: {}", last_err.unwrap_or_default()))
}

/// Every note in notes tree `tree`: (annotated object, note blob). Walks git's fan-out
/// directories (`ab/cdef...`), joining path parts back into the full hex id.
pub fn all(repo: &gix::Repository, tree: ObjectId) -> Result<Vec<(ObjectId, ObjectId)>> {
    let mut out = Vec::new();
    let mut stack = vec![(tree, String::new())];
    while let Some((tree_id, prefix)) = stack.pop() {
        let tree = repo.find_tree(tree_id).with_context(|| format!("could not read notes tree {tree_id}"))?;
        for entry in tree.iter() {
            let entry = entry.with_context(|| format!("could not decode notes tree {tree_id}"))?;
            let name = format!("{prefix}{}", entry.filename());
            let oid = entry.object_id();
            if entry.mode().is_tree() {
                stack.push((oid, name));
            } else if let Ok(annotated) = ObjectId::from_hex(name.as_bytes()) {
                out.push((annotated, oid));
            }
        }
    }
    Ok(out)
}

/// Whether note blob `a` was recorded later than note blob `b` (by their `at`); ties and
/// unreadable notes are broken by blob id, so every clone picks the same one.
pub fn later(repo: &gix::Repository, a: ObjectId, b: ObjectId) -> bool {
    let at = |id: ObjectId| repo.find_blob(id).ok().and_then(|blob| decode(&blob.data).ok()).map(|note| note.at);
    (at(a), a) > (at(b), b)
}
