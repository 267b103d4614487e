//! Completion evidence as a git note in `refs/notes/loop`, on the commit that completed a
//! task: `git notes --ref=loop show <commit>` and `git log --notes=loop` read it.
//!
//! One commit can complete several tasks (a merge that lands two, a person marking two done
//! by one commit), so a note holds a list of completions, one per task (version 2; a note of
//! version 1 holds one completion and reads as a list of one). Adding a completion reads the
//! note where the notes ref points, adds or replaces that task's entry and keeps every other,
//! and moves the ref by compare-and-swap from the tip it read (`cas::update`), trying again
//! when another writer got there first: no completion is ever dropped by a concurrent one.
//! (`git notes add` would not do: concurrent adds silently lose notes.) Two clones' notes
//! merge as the union of their entries (`merge`).

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::cas::{self, Cas, Expect};
use super::Store;
use crate::error::{corrupt, Refusal};
use crate::{git, refs};

/// Version of a completion note written now; readers refuse newer ones.
pub const NOTE_VERSION: u32 = 2;

/// One task's completion, as a note records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completed {
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
    /// Who approved which tree (the walk's review rounds); added to version 2 later.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviews: Vec<crate::store::task::Approval>,
    pub at: DateTime<Utc>,
    pub by: String,
    /// Where the task's work landed (the landing queue), once it has. Added to version 2;
    /// absent before it lands, and on notes written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<Landed>,
    /// What the task's sessions cost up to its completion (every session of its history);
    /// added to version 2 later, absent on notes written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::store::usage::Total>,
    /// True when a walk counted the task done on its agent's word alone (no checks were
    /// configured); added to version 2 later, absent (false) otherwise and on notes before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
}

/// Where a task's work landed: the target branch and the commit the target moved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landed {
    /// The target branch (full ref name).
    pub into: String,
    /// The target's commit holding the work (the merge that landed it).
    pub commit: String,
    pub at: DateTime<Utc>,
    /// The forge's request it landed through (`pull request #12 <url>`); added later, absent
    /// for the landing queue's own landings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

/// A note of version 2: every task this commit completed, sorted by task id.
#[derive(Debug, Serialize, Deserialize)]
struct NoteV2 {
    version: u32,
    completions: Vec<Completed>,
}

/// A note of version 1: one completion, its fields beside the version.
#[derive(Debug, Deserialize)]
struct NoteV1 {
    #[allow(dead_code)]
    version: u32,
    #[serde(flatten)]
    completed: Completed,
}

#[derive(Deserialize)]
struct Versioned {
    version: u32,
}

/// What a note blob holds, as far as this version can tell.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Its completions (one for a note of version 1).
    Known(Vec<Completed>),
    /// A version newer than this program knows: kept as it is, never rewritten.
    Newer(u32),
    /// Not a completion note at all.
    Unreadable,
}

/// Read a note's bytes.
pub fn parse(bytes: &[u8]) -> Parsed {
    let Ok(Versioned { version }) = serde_json::from_slice::<Versioned>(bytes) else { return Parsed::Unreadable };
    match version {
        1 => serde_json::from_slice::<NoteV1>(bytes)
            .map_or(Parsed::Unreadable, |note| Parsed::Known(vec![note.completed])),
        NOTE_VERSION => {
            serde_json::from_slice::<NoteV2>(bytes).map_or(Parsed::Unreadable, |note| Parsed::Known(note.completions))
        }
        v if v > NOTE_VERSION => Parsed::Newer(v),
        _ => Parsed::Unreadable,
    }
}

/// Decode a completion note: `Err` says what is wrong. The one definition of a readable note
/// (the server's pre-receive hook uses it too); a note of a newer version is not readable here.
pub fn decode(bytes: &[u8]) -> Result<Vec<Completed>, String> {
    match parse(bytes) {
        Parsed::Known(completions) => Ok(completions),
        Parsed::Newer(v) => Err(format!("its version {v} was written by a newer git-loop")),
        Parsed::Unreadable => Err("it is not a completion note of any version this git-loop reads".into()),
    }
}

/// The note holding `completions`, in the one form every clone writes for them (version 2,
/// sorted by task), so two clones that merge the same notes write the same blob.
pub fn render(completions: &[Completed]) -> String {
    let mut completions = completions.to_vec();
    completions.sort_by(|a, b| a.task.cmp(&b.task));
    let note = NoteV2 { version: NOTE_VERSION, completions };
    format!("{}\n", serde_json::to_string_pretty(&note).expect("notes serialize"))
}

/// The union of two notes' completions: one entry per task; where both hold one for the
/// same task, the one recorded later (by `at`, ties broken by content, so every clone picks
/// the same one).
pub fn union(a: Vec<Completed>, b: Vec<Completed>) -> Vec<Completed> {
    let mut out: Vec<Completed> = Vec::with_capacity(a.len() + b.len());
    for entry in a.into_iter().chain(b) {
        match out.iter_mut().find(|kept| kept.task == entry.task) {
            Some(kept) => {
                // Its landing is added to an entry later, under the same `at`.
                let key = |c: &Completed| {
                    (c.at, c.landed.as_ref().map(|l| l.at), serde_json::to_string(c).unwrap_or_default())
                };
                if key(&entry) > key(kept) {
                    *kept = entry;
                }
            }
            None => out.push(entry),
        }
    }
    out.sort_by(|a, b| a.task.cmp(&b.task));
    out
}

/// Where the notes ref points now (its tip), the note blob `commit` has there, and that notes
/// tree, ready to edit.
fn current(
    store: &Store,
    commit: ObjectId,
) -> Result<(Option<ObjectId>, Option<ObjectId>, gix::note::plumbing::State)> {
    let repo = &store.repo;
    store.fresh_refs();
    // A notes ref that holds anything but a notes commit is a corrupt record (exit 3).
    let tip = check_ref(store)?;
    let tree = match tip {
        Some(tip) => repo
            .find_commit(tip)
            .with_context(|| format!("'{}' does not point to a notes commit", refs::NOTES))?
            .tree_id()
            .with_context(|| format!("could not read the tree of notes commit {tip}"))?
            .detach(),
        None => git::empty_tree(repo)?,
    };
    let mut state = gix::note::plumbing::State::new(tree, repo).context("could not read the notes")?;
    let blob = state.get(&commit, repo).with_context(|| format!("could not read the note on {commit}"))?;
    Ok((tip, blob, state))
}

fn newer(commit: ObjectId, version: u32) -> crate::error::Refusal {
    crate::error::corrupt(format!(
        "the completion note on {commit} is version {version}, newer than this git-loop reads (up to {NOTE_VERSION})"
    ))
    .hint("upgrade git-loop")
}

/// Whether the note on `commit` holds an entry for `task`.
pub fn holds(store: &Store, commit: ObjectId, task: &str) -> Result<bool> {
    let (_, blob, _) = current(store, commit)?;
    let Some(blob) = blob else { return Ok(false) };
    Ok(match parse(&git::read_blob(&store.repo, blob)?) {
        Parsed::Known(completions) => completions.iter().any(|c| c.task == task),
        Parsed::Newer(_) => true,
        Parsed::Unreadable => false,
    })
}

/// Where the note on `commit` says `task`'s work landed, if it says so.
pub fn landed(store: &Store, commit: ObjectId, task: &str) -> Result<Option<Landed>> {
    let (_, blob, _) = current(store, commit)?;
    let Some(blob) = blob else { return Ok(None) };
    Ok(match parse(&git::read_blob(&store.repo, blob)?) {
        Parsed::Known(completions) => completions.into_iter().find(|c| c.task == task).and_then(|c| c.landed),
        Parsed::Newer(_) | Parsed::Unreadable => None,
    })
}

/// Add `completed` to the note on `commit`: its task's entry is added or replaced, every
/// other task's stays. A note that is not a completion note is replaced.
pub fn add(store: &Store, commit: ObjectId, completed: &Completed) -> Result<()> {
    add_all(store, &[(commit, completed.clone())])
}

/// `add` for several completions at once, in one notes commit.
pub fn add_all(store: &Store, entries: &[(ObjectId, Completed)]) -> Result<()> {
    let repo = &store.repo;
    if entries.is_empty() {
        return Ok(());
    }
    let tasks: Vec<&str> = entries.iter().map(|(_, c)| c.task.as_str()).collect();
    // Lost: another writer moved the notes meanwhile; read what it wrote, and add ours to it.
    cas::until_settled(&format!("the completion notes ('{}')", refs::NOTES), std::process::id(), || {
        let (tip, _, mut state) = current(store, entries[0].0)?;
        for (commit, completed) in entries {
            let blob = state.get(commit, repo).with_context(|| format!("could not read the note on {commit}"))?;
            let mut completions = match blob {
                Some(blob) => match parse(&git::read_blob(repo, blob)?) {
                    Parsed::Known(completions) => completions,
                    Parsed::Newer(v) => return Err(newer(*commit, v).into()),
                    Parsed::Unreadable => Vec::new(),
                },
                None => Vec::new(),
            };
            completions.retain(|c| c.task != completed.task);
            completions.push(completed.clone());
            let note = git::write_blob(repo, render(&completions).as_bytes())?;
            state.edit(*commit, Some(note), repo).with_context(|| format!("could not add the note on {commit}"))?;
        }
        let tree = git::retry_vanished(|| state.write(repo)).context("could not write the notes tree")?;
        let parents: Vec<ObjectId> = tip.into_iter().collect();
        let message = format!("loop: completion of {}\n", tasks.join(", "));
        let notes_commit = git::write_commit(repo, tree, &parents, &message, &store.signature())?;
        Ok(match cas::update(store, refs::NOTES, Expect::from_current(tip), notes_commit, "loop: completion note")? {
            Cas::Applied => Some(()),
            Cas::Lost { .. } => None,
        })
    })
}

/// Record where each task's work landed — `(completing commit, task, where)` — in its entry of
/// the note on its completing commit, in one notes commit, with its `cost` brought up to date
/// (the landing's own conflict resolver and summarizer sessions count). An entry that is not
/// there is left out. How many were recorded.
pub fn set_landed(store: &Store, landings: &[(ObjectId, String, Landed)]) -> Result<usize> {
    let mut entries = Vec::new();
    for (commit, task, landed) in landings {
        let (_, blob, _) = current(store, *commit)?;
        let Some(blob) = blob else { continue };
        let Parsed::Known(completions) = parse(&git::read_blob(&store.repo, blob)?) else { continue };
        let Some(mut entry) = completions.into_iter().find(|c| &c.task == task) else { continue };
        entry.landed = Some(landed.clone());
        let cost = super::ledger::task_total(store, task)?;
        if cost.sessions > 0 {
            entry.cost = Some(cost);
        }
        entries.push((*commit, entry));
    }
    add_all(store, &entries)?;
    Ok(entries.len())
}

/// The note two clones' notes on one commit merge to: the union of their completions, in the
/// one form every clone writes for it (so two clones merging the same pair write the same
/// blob). A note of a newer version is kept over ours (we cannot merge what we cannot read);
/// a readable note over an unreadable one; between two of a kind neither side can merge, the
/// greater blob id, so every clone picks the same.
pub fn merge(repo: &gix::Repository, a: ObjectId, b: ObjectId) -> Result<ObjectId> {
    let read = |id: ObjectId| repo.find_blob(id).map(|blob| parse(&blob.data)).unwrap_or(Parsed::Unreadable);
    Ok(match (read(a), read(b)) {
        (Parsed::Known(x), Parsed::Known(y)) => git::write_blob(repo, render(&union(x, y)).as_bytes())?,
        (Parsed::Newer(_), Parsed::Newer(_)) | (Parsed::Unreadable, Parsed::Unreadable) => a.max(b),
        (Parsed::Newer(_), _) | (Parsed::Known(_), Parsed::Unreadable) => a,
        (_, Parsed::Newer(_)) | (Parsed::Unreadable, Parsed::Known(_)) => b,
    })
}

/// The refusal for a notes ref that cannot be read as notes.
pub fn corrupt_notes(why: impl std::fmt::Display) -> Refusal {
    corrupt(format!("notes ref '{}' is corrupt: {why}", refs::NOTES)).hint(format!(
        "find the notes commit it held with 'git reflog {0}' and point it back with 'git update-ref {0} <commit>'",
        refs::NOTES
    ))
}

/// The notes commit `refs/notes/loop` points to (`None`: no notes yet), or a corrupt-class
/// refusal when the ref holds anything but a readable commit.
pub fn check_ref(store: &Store) -> Result<Option<ObjectId>, Refusal> {
    let repo = &store.repo;
    let id = match git::find_ref(repo, refs::NOTES) {
        Ok(None) => return Ok(None),
        Ok(Some(git::Found::Direct(id))) => id,
        Ok(Some(git::Found::Symbolic(to))) => {
            return Err(corrupt_notes(format!("it is a symbolic ref (to '{to}')"))
                .hint(format!("delete the symbolic ref itself with 'git update-ref --no-deref -d {}'", refs::NOTES)))
        }
        Err(err) => return Err(corrupt_notes(format!("the ref cannot be read: {:#}", err.root_cause()))),
    };
    let header = repo.find_header(id).map_err(|_| corrupt_notes(format!("object {id} is missing")))?;
    if header.kind() != gix::object::Kind::Commit {
        return Err(corrupt_notes(format!("it points to a {} ({id}), not a commit", header.kind())));
    }
    Ok(Some(id))
}

/// Every note in notes tree `tree`: (annotated object, note blob). Walks git's fan-out
/// directories (`ab/cdef...`), joining path parts back into the full hex id.
pub fn all(store: &Store, tree: ObjectId) -> Result<Vec<(ObjectId, ObjectId)>> {
    let repo = &store.repo;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn completed(task: &str, at: &str, message: &str) -> Completed {
        Completed {
            task: task.into(),
            title: format!("title of {task}"),
            state: "done".into(),
            commit: "0".repeat(40),
            session: None,
            try_number: None,
            checks: None,
            message: Some(message.into()),
            reviews: Vec::new(),
            at: at.parse().expect("RFC 3339"),
            by: "Tess <t@e>".into(),
            landed: None,
            cost: None,
            unchecked: false,
        }
    }

    #[test]
    fn a_version_1_note_reads_as_one_completion() {
        let v1 = br#"{"version":1,"task":"t-1","title":"T","state":"done","commit":"abc","try":2,"message":"m","at":"2026-03-01T12:00:00Z","by":"B"}"#;
        let Parsed::Known(read) = parse(v1) else { panic!("a version 1 note is readable") };
        assert_eq!((read.len(), read[0].task.as_str(), read[0].try_number), (1, "t-1", Some(2)));
    }

    #[test]
    fn notes_of_newer_versions_and_garbage_are_told_apart() {
        assert_eq!(parse(br#"{"version":3,"anything":[]}"#), Parsed::Newer(3));
        assert_eq!(parse(b"not json"), Parsed::Unreadable);
        assert_eq!(parse(br#"{"version":2}"#), Parsed::Unreadable);
    }

    #[test]
    fn the_union_keeps_every_task_and_the_later_entry_of_one_whatever_the_order() {
        let a = vec![completed("t-2", "2026-03-01T12:00:00Z", "old"), completed("t-1", "2026-03-01T12:00:00Z", "one")];
        let b =
            vec![completed("t-2", "2026-03-01T12:05:00Z", "new"), completed("t-3", "2026-03-01T12:00:00Z", "three")];
        let ab = union(a.clone(), b.clone());
        assert_eq!(ab, union(b, a), "the same union whichever side is ours");
        let said: Vec<(&str, &str)> =
            ab.iter().map(|c| (c.task.as_str(), c.message.as_deref().unwrap_or(""))).collect();
        assert_eq!(said, [("t-1", "one"), ("t-2", "new"), ("t-3", "three")]);
        assert_eq!(render(&ab), render(&ab.iter().rev().cloned().collect::<Vec<_>>()), "one form for one set");
    }
}
