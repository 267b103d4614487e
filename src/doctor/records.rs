//! The shared state: every loop ref and the record or history it holds, and packed-refs.
//!
//! Each ref is read as its readers read it (the same parsers, the same version checks), and
//! what those readers never look at is checked too: every object of a task's, a journal's or
//! the notes' history, and the commits of the loop's branches.

use std::collections::{HashMap, HashSet};

use anyhow::Result;
use gix::ObjectId;

use super::{Action, Checked, Finding, Kind};
use crate::git::{self, Found, Listed, Unreadable};
use crate::ids::{TaskId, WriterId};
use crate::refs;
use crate::store::{claim, journal, notes, task, Store};

/// How doctor found each task ref: its tip, and whether its chain is healthy there (what the
/// task index is held against).
pub type TaskStates = HashMap<String, (ObjectId, bool)>;

/// The hint for an object lost from a history: only the object itself mends it.
const REFETCH: &str =
    "copy the object back from a clone that has it ('git fetch --refetch <remote>' fetches every object again)";

/// Check every loop ref and packed-refs.
pub(super) fn check(store: &Store, out: &mut Vec<Finding>, checked: &mut Checked) -> Result<TaskStates> {
    store.fresh_refs();
    let file = store.packed_refs_path();
    for line in store.packed_refs_bad_lines() {
        out.push(Finding::corrupt(Kind::PackedRefs, git::packed::NAME, line.describe(&file)).fix(format!(
            "git reads no ref until it is gone: save a copy and delete the line ('cp {0} {0}.bak && sed -i {1}d {0}')",
            file.display(),
            line.number
        )));
    }
    let mut states = TaskStates::new();
    let mut seen_commits = HashSet::new();
    for prefix in [refs::LOOP, refs::TASK_BRANCHES, refs::TRY_BRANCHES, refs::KEPT_BRANCHES, refs::REMOTES] {
        for listed in store.refs_prefixed(prefix)? {
            match listed {
                // Said once above, with every bad line.
                Listed::Unreadable(Unreadable::PackedRefs(_)) => {}
                Listed::Unreadable(Unreadable::Ref(name)) => {
                    checked.count(kind_of(&name));
                    out.push(unparsable(store, &name))
                }
                Listed::Ref { name, target: Found::Symbolic(to) } => {
                    checked.count(kind_of(&name));
                    out.push(symbolic(&name, &to))
                }
                Listed::Ref { name, target: Found::Direct(id) } => {
                    check_ref(store, &name, id, out, checked, &mut states, &mut seen_commits)
                }
            }
        }
    }
    check_notes(store, out, checked);
    Ok(states)
}

fn kind_of(name: &str) -> Kind {
    let rest = name.strip_prefix(refs::LOOP).unwrap_or("");
    match rest.split('/').next().unwrap_or("") {
        _ if name.starts_with(refs::REMOTES) => Kind::Mirror,
        _ if name.starts_with("refs/heads/") => Kind::Branch,
        "tasks" => Kind::Task,
        "claims" => Kind::Claim,
        "journal" => Kind::Journal,
        "tries" | "done" => Kind::Anchor,
        "missions" => Kind::Mission,
        _ => Kind::Ref,
    }
}

/// A loose ref file gix cannot parse: neither git nor git-loop can read it.
fn unparsable(store: &Store, name: &str) -> Finding {
    let path = store.common_dir().join(name);
    let finding =
        Finding::corrupt(kind_of(name), name, format!("ref '{name}' cannot be parsed (its file holds no object id)"));
    match refs::task_id_of(name) {
        Some(_) => finding.fix_from(&task::corrupt_unparsable(store, name)),
        None => finding.fix(format!(
            "git ignores it as broken: look at '{0}', and remove it ('rm {0}') if it holds nothing you need",
            path.display()
        )),
    }
}

/// A symbolic ref where a loop ref must hold an object id.
fn symbolic(name: &str, to: &str) -> Finding {
    Finding::corrupt(kind_of(name), name, format!("ref '{name}' is a symbolic ref (to '{to}'), not an object id")).fix(
        format!("delete the symbolic ref itself with 'git update-ref --no-deref -d {name}' (without --no-deref git deletes '{to}')"),
    )
}

fn check_ref(
    store: &Store,
    name: &str,
    id: ObjectId,
    out: &mut Vec<Finding>,
    checked: &mut Checked,
    states: &mut TaskStates,
    seen_commits: &mut HashSet<ObjectId>,
) {
    let kind = kind_of(name);
    checked.count(kind);
    match kind {
        Kind::Task => {
            let health = task::health(store, name, id);
            states.insert(name.to_owned(), (id, matches!(health, task::Health::Healthy)));
            match health {
                task::Health::Healthy => {}
                task::Health::Corrupt(refusal) => {
                    out.push(Finding::corrupt(kind, name, refusal.message.clone()).fix_from(&refusal))
                }
                task::Health::Repairable(refusal) => {
                    let Some(task_id) = refs::task_id_of(name).and_then(|t| t.parse::<TaskId>().ok()) else { return };
                    out.push(
                        Finding::corrupt(kind, name, refusal.message)
                            .fix("'git loop doctor --repair' appends a commit holding the task folded from the operations that parse (nothing is rewritten; the unreadable operations stay in its history)")
                            .repair(Action::RepairTask(task_id)),
                    );
                }
            }
        }
        Kind::Claim => {
            let Some(key) = refs::claim_key_of(name) else {
                out.push(
                    Finding::corrupt(kind, name, format!("claim ref '{name}' does not name a valid claim key")).fix(
                        format!(
                    "git-loop never wrote it: remove it with 'git update-ref -d {name}' once you know what it is"
                ),
                    ),
                );
                return;
            };
            if let Err(refusal) = claim::read_at(store, &key, id) {
                out.push(Finding::corrupt(kind, name, refusal.message.clone()).fix_from(&refusal));
            }
        }
        Kind::Journal => {
            let writer = name.strip_prefix(refs::JOURNAL).unwrap_or_default();
            if writer.parse::<WriterId>().is_err() {
                out.push(Finding::corrupt(kind, name, format!("journal ref '{name}' does not name a valid writer")).fix(
                    format!("git-loop never wrote it and reads it as a chain all the same; remove it with 'git update-ref -d {name}' once you know what it is"),
                ));
            }
            check_journal(store, name, id, out, checked);
        }
        Kind::Anchor => {
            if let Err(problem) = check_anchor(store, name, id) {
                let fix = if problem.contains("is missing") {
                    REFETCH.to_owned()
                } else {
                    format!("the anchor only keeps its commit alive and its number taken; point it at the commit it stands for with 'git update-ref {name} <commit>'")
                };
                out.push(Finding::corrupt(kind, name, format!("anchor '{name}' is corrupt: {problem}")).fix(fix));
            }
        }
        Kind::Mission => {
            let Some(mission) = refs::mission_id_of(name).and_then(|m| m.parse::<crate::mission::MissionId>().ok())
            else {
                out.push(Finding::corrupt(kind, name, format!("mission ref '{name}' does not name a valid mission")));
                return;
            };
            if let Err(err) = crate::mission::record::read(store, &mission) {
                match crate::error::find_refusal(&err) {
                    Some(refusal) => out.push(Finding::corrupt(kind, name, refusal.message.clone()).fix_from(refusal)),
                    None => out.push(Finding::corrupt(
                        kind,
                        name,
                        format!("mission record '{name}' cannot be read: {err:#}"),
                    )),
                }
            }
        }
        Kind::Branch => {
            if let Err(problem) = store.check_history(id, seen_commits) {
                out.push(
                    Finding::corrupt(
                        kind,
                        name,
                        format!("branch '{}' is damaged: {problem}", refs::short_branch(name)),
                    )
                    .fix(REFETCH),
                );
            }
        }
        _ if name == crate::store::archive::REF => check_archive(store, name, id, out, checked),
        _ if name == refs::SETTINGS => {
            if let Err(err) = crate::store::shared::read(store) {
                let problem = crate::error::find_refusal(&err).map_or(format!("{err:#}"), |r| r.message.clone());
                out.push(
                    Finding::corrupt(kind, name, problem)
                        .fix("share them again from a clone that has them right: git loop config --share"),
                );
            }
        }
        // Kept refs and mirrors only need their object: what they point to is read from there.
        _ => {
            if let Err(problem) = store.object_kind(id) {
                out.push(Finding::corrupt(kind, name, format!("ref '{name}' is damaged: {problem}")).fix(REFETCH));
            }
        }
    }
}

/// The archive (`store::archive`): its index reads, every record it holds is present, and no
/// ref is left live at exactly its archived value (what a fold that stopped leaves; readers
/// read it the same, and `--repair` or the next `gc` deletes it).
fn check_archive(store: &Store, name: &str, tip: ObjectId, out: &mut Vec<Finding>, checked: &mut Checked) {
    let archive = match crate::store::archive::in_store(store, tip) {
        Ok(archive) => archive,
        Err(err) => {
            out.push(
                Finding::corrupt(Kind::Ref, name, format!("the archive's index cannot be read: {err:#}")).fix(REFETCH),
            );
            return;
        }
    };
    if let Err(why) = crate::store::fold::check_snapshots_in(store, tip) {
        out.push(Finding::corrupt(Kind::Ref, name, why).fix(
            "a fresh clone builds its task index from these records: fold again from a clone of this release (git loop gc), which writes them anew, or refetch the archive from a remote whose hook checked it",
        ));
    }
    let mut missing = Vec::new();
    let mut left = 0;
    for (folded, id) in &archive.refs {
        checked.archived += 1;
        if store.object_kind(*id).is_err() {
            missing.push(folded.as_str());
        } else if store.ref_target(folded).ok().flatten() == Some(*id) {
            left += 1;
        }
    }
    if let Some(first) = missing.first() {
        let more = match missing.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        out.push(
            Finding::corrupt(Kind::Ref, name, format!("the archive holds '{first}'{more} but not its record"))
                .fix(REFETCH),
        );
    }
    if left > 0 {
        out.push(
            Finding::leftover(
                Kind::Ref,
                name,
                format!("{left} refs are still live at exactly their archived value (a fold that stopped before its deletes)"),
            )
            .fix("'git loop doctor --repair' deletes them here (the next 'git loop gc' does too); nothing is lost: the archive holds them")
            .repair(Action::Tidy),
        );
    }
}

/// A try anchor holds its try-number record (a blob) or the try's last head (a commit); a done
/// anchor, the completing commit.
fn check_anchor(store: &Store, name: &str, id: ObjectId) -> Result<(), String> {
    let kind = store.object_kind(id)?;
    let rest = name.strip_prefix(refs::LOOP).unwrap_or_default();
    match (rest.split('/').collect::<Vec<_>>().as_slice(), kind) {
        (["tries", task, n], gix::object::Kind::Blob) => {
            let blob = store.read_blob(id).map_err(|_| format!("object {id} cannot be read"))?;
            let record: serde_json::Value =
                serde_json::from_slice(&blob).map_err(|_| "its try-number record is not JSON".to_owned())?;
            let matches = record["task"].as_str() == Some(task)
                && record["try"].as_u64().map(|t| t.to_string()).as_deref() == Some(n);
            if !matches {
                return Err(format!("its try-number record names {} try {}", record["task"], record["try"]));
            }
            Ok(())
        }
        // Its history is the try branch's, checked with the branches.
        (["tries", task, n], gix::object::Kind::Commit)
            if task.parse::<TaskId>().is_ok() && n.parse::<u32>().is_ok() =>
        {
            store.check_commit(id)
        }
        (["done", task], gix::object::Kind::Commit) if task.parse::<TaskId>().is_ok() => store.check_commit(id),
        (["tries", ..] | ["done", ..], kind) => Err(format!("it points to a {kind} ({id})")),
        _ => Err("its name is not an anchor's".to_owned()),
    }
}

/// Every commit of a journal chain present and every event one this build reads (merges of two
/// copies of a chain hold none).
fn check_journal(store: &Store, name: &str, tip: ObjectId, out: &mut Vec<Finding>, checked: &mut Checked) {
    let mut stack = vec![tip];
    let mut seen = HashSet::new();
    let mut bad_events = Vec::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let parents = match store.read_commit(id) {
            Ok((parents, _)) => parents,
            Err(_) => {
                let problem = store.object_kind(id).err().unwrap_or_else(|| format!("object {id} is not a commit"));
                out.push(
                    Finding::corrupt(Kind::Journal, name, format!("journal chain '{name}' is damaged: {problem}"))
                        .fix(REFETCH),
                );
                return;
            }
        };
        match journal::parse_commit(store, id) {
            Ok(_) => checked.journal_events += 1,
            Err(_) if parents.len() > 1 => {}
            Err(err) => bad_events.push(format!("{err:#}")),
        }
        stack.extend(parents);
    }
    if let Some(first) = bad_events.first() {
        let more = match bad_events.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        out.push(
            Finding::corrupt(Kind::Journal, name, format!("journal chain '{name}' holds an event that cannot be read: {first}{more}"))
                .fix("every reader skips it and reads the rest of the chain; it stays in the chain's history (a chain only grows)"),
        );
    }
}

/// The notes ref holds a notes commit whose history is present, and every note is a
/// completion note this build reads, on a commit that is present.
fn check_notes(store: &Store, out: &mut Vec<Finding>, checked: &mut Checked) {
    let commit = match notes::check_ref(store) {
        Ok(Some(commit)) => commit,
        Ok(None) => return,
        Err(refusal) => {
            out.push(Finding::corrupt(Kind::Notes, refs::NOTES, refusal.message.clone()).fix_from(&refusal));
            return;
        }
    };
    if let Err(problem) = store.check_history(commit, &mut HashSet::new()) {
        out.push(
            Finding::corrupt(Kind::Notes, refs::NOTES, format!("notes ref '{}' is damaged: {problem}", refs::NOTES))
                .fix(REFETCH),
        );
        return;
    }
    let tree = match store.commit_tree(commit) {
        Some(tree) => tree,
        None => return,
    };
    let all = match notes::all(store, tree) {
        Ok(all) => all,
        Err(err) => {
            out.push(
                Finding::corrupt(Kind::Notes, refs::NOTES, format!("notes ref '{}' is damaged: {err:#}", refs::NOTES))
                    .fix(REFETCH),
            );
            return;
        }
    };
    for (annotated, blob) in all {
        checked.notes += 1;
        let subject = format!("{} {annotated}", refs::NOTES);
        let note = store
            .read_blob(blob)
            .map_err(|_| store.object_kind(blob).err().unwrap_or_else(|| format!("object {blob} is not a blob")))
            .and_then(|b| match notes::parse(&b) {
                notes::Parsed::Known(_) => Ok(()),
                notes::Parsed::Newer(v) => Err(format!("its version {v} was written by a newer git-loop")),
                notes::Parsed::Unreadable => Err("it is not a completion note git-loop reads".to_owned()),
            });
        let problem = match note {
            Err(problem) => problem,
            Ok(_) if !store.has_object(annotated) => format!("the commit it annotates ({annotated}) is missing"),
            Ok(_) => continue,
        };
        let fix = if problem.contains("is missing") {
            REFETCH.to_owned()
        } else if problem.contains("newer git-loop") {
            "upgrade git-loop to read it".to_owned()
        } else {
            format!("see it with 'git notes --ref=loop show {annotated}'; the task's own record keeps the completion")
        };
        out.push(
            Finding::corrupt(Kind::Notes, &subject, format!("the note on {annotated} is corrupt: {problem}")).fix(fix),
        );
    }
}
