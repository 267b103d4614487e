//! Folding finished tasks into the archive (`store::archive`, docs/storage.md "Archive"): what
//! a fold retires (`plan`), the fold commit (`build`), and the fold of this clone (`fold`) or of
//! the fleet's remote (`fold_remote`), always the archive first and each delete leased on the
//! value archived.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::ObjectId;

use super::archive::{read, shard, REF};
use super::cas::{self, Cas};
use super::Store;
use crate::git;
use crate::refs;

/// How many tasks one fold takes at most (a gc folds in several rounds).
pub const BATCH: usize = 10_000;

/// How many retired commits one fold commit takes as parents at most: a fold of more is a
/// chain of commits on the first-parent line, the earlier ones carrying parents only (their
/// tree the archive's before the fold), the last one the new index.
const PARENTS_PER_COMMIT: usize = 1_000;

/// What one fold retires.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// The finished tasks folded.
    pub tasks: Vec<String>,
    /// The journal chains folded (ref names).
    pub chains: Vec<String>,
    /// Every ref retired and its value.
    pub refs: BTreeMap<String, ObjectId>,
}

/// Plan a fold: done and cancelled tasks unchanged since `before` whose claim is not held, with
/// their claim tombstones and done and try anchors; journal chains of sessions and walks that
/// ended (`session_ended`, `walk_ended`) and hold nothing newer than `before`.
/// (Their branches are judged above the store, by `prune::plan_fold`, which callers use.)
pub fn plan(store: &Store, before: DateTime<Utc>) -> Result<Plan> {
    use crate::store::events::Recorded;
    use crate::store::task::State;
    let repo = &store.repo;
    let mut plan = Plan::default();
    let listed = |prefix: &str| store.direct_refs(prefix);
    let claims: HashMap<String, ObjectId> = listed(&format!("{}node/", refs::CLAIMS))?.into_iter().collect();
    let anchors = listed(refs::TRIES)?;
    for (name, tip) in listed(refs::TASKS)? {
        let Some(id) = refs::task_id_of(&name).map(str::to_owned) else { continue };
        let Ok(task) = crate::store::task::read_at(store, &name, tip) else { continue };
        if !matches!(task.state, State::Done | State::Cancelled) || task.updated_at > before {
            continue;
        }
        let claim = format!("{}node/{id}", refs::CLAIMS);
        if let Some(blob) = claims.get(&claim) {
            // A held claim (a hold kept on the closed task, a walker's): not finished with.
            let key = crate::ids::ClaimKey::node(&id.parse()?);
            let released = crate::store::claim_record::parse(&key, &git::read_blob(repo, *blob)?)
                .is_ok_and(|r| r.released_at.is_some());
            if !released {
                continue;
            }
            plan.refs.insert(claim, *blob);
        }
        plan.refs.insert(name, tip);
        if let Some(done) = git::ref_target(repo, &format!("{}{id}", refs::DONE))? {
            plan.refs.insert(format!("{}{id}", refs::DONE), done);
        }
        let tries = format!("{}{id}/", refs::TRIES);
        for (anchor, at) in anchors.iter().filter(|(n, _)| n.starts_with(&tries)) {
            plan.refs.insert(anchor.clone(), *at);
        }
        plan.tasks.push(id);
        if plan.tasks.len() >= BATCH {
            break;
        }
    }
    // Which sessions and walks ended, and when each writer last wrote: from the live chains of
    // sessions and walks only (a walk journals its sessions' ends; what is folded already, and
    // the clones' own shards, are not read), so a plan costs what live work holds, not history.
    let chains: Vec<(String, ObjectId)> = listed(refs::JOURNAL)?
        .into_iter()
        .filter(|(name, _)| {
            let writer = name.strip_prefix(refs::JOURNAL).unwrap_or_default();
            writer.starts_with("s-") || writer.starts_with("w-")
        })
        .collect();
    let mut ended: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut last: HashMap<String, DateTime<Utc>> = HashMap::new();
    for (_, tip) in &chains {
        let mut problems = Vec::new();
        for entry in crate::store::journal::read_chain(store, *tip, &mut problems) {
            let e = &entry.event;
            let at = last.entry(e.writer.clone()).or_insert(e.at);
            *at = (*at).max(e.at);
            match Recorded::of(e) {
                Recorded::SessionEnded(s) => {
                    ended.insert(s.session);
                }
                Recorded::WalkEnded(_) => {
                    ended.insert(e.writer.clone());
                }
                _ => {}
            }
        }
    }
    for (name, tip) in chains {
        let writer = name.strip_prefix(refs::JOURNAL).unwrap_or_default();
        // A chain written to since `before`, or whose session or walk did not end, stays live.
        if !ended.contains(writer) {
            continue;
        }
        if last.get(writer).is_some_and(|at| *at <= before) {
            plan.refs.insert(name.clone(), tip);
            plan.chains.push(name);
        }
    }
    Ok(plan)
}

/// What a fold did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Folded {
    pub tasks: usize,
    pub chains: usize,
    /// Refs deleted (a ref that moved since it was planned is kept, and folded again later).
    pub deleted: usize,
    pub kept: usize,
    /// The archive's commit.
    pub archive: Option<String>,
}

/// The fold commit of `plan` on the archive at `previous` (its tip, if any): `None` when the
/// archive holds every ref of the plan already, with those values.
fn build(store: &Store, plan: &Plan, previous: Option<ObjectId>, at: DateTime<Utc>) -> Result<Option<ObjectId>> {
    let repo = &store.repo;
    let archived = match previous {
        Some(tip) => super::archive::at(repo, tip)?.refs.clone(),
        None => BTreeMap::new(),
    };
    // What the archive holds already (a fold that stopped before its deletes) is not
    // written twice.
    let fresh: BTreeMap<&String, &ObjectId> =
        plan.refs.iter().filter(|(n, id)| archived.get(*n) != Some(*id)).collect();
    if fresh.is_empty() {
        return Ok(None);
    }
    let base_tree = match previous {
        Some(tip) => repo.find_commit(tip)?.tree_id()?.detach(),
        None => git::empty_tree(repo)?,
    };
    let mut editor = repo.edit_tree(base_tree).context("could not edit the archive's tree")?;
    let mut shards: BTreeMap<String, BTreeMap<String, ObjectId>> = BTreeMap::new();
    for (name, id) in &archived {
        shards.entry(shard(name)).or_default().insert(name.clone(), *id);
    }
    let touched: BTreeSet<String> = fresh.keys().map(|n| shard(n)).collect();
    for (name, id) in &fresh {
        shards.entry(shard(name)).or_default().insert((*name).clone(), **id);
    }
    for s in &touched {
        let lines: String = shards[s].iter().map(|(n, id)| format!("{id} {n}\n")).collect();
        let blob = git::write_blob(repo, lines.as_bytes())?;
        editor.upsert(format!("index/{s}"), gix::object::tree::EntryKind::Blob, blob)?;
    }
    // Each folded task's record, on one line, by shard (`archive::snapshot`): the previous
    // fold's lines, a task folded again replacing its own.
    let mut snapshots: BTreeMap<String, BTreeMap<String, (ObjectId, String)>> = BTreeMap::new();
    for (name, tip) in &fresh {
        let Some(id) = refs::task_id_of(name) else { continue };
        let task = crate::store::task::read_at(store, name, **tip)?;
        snapshots.entry(shard(name)).or_default().insert(id.to_owned(), (**tip, serde_json::to_string(&task)?));
    }
    for (s, new) in snapshots {
        let mut lines = match previous {
            Some(tip) => super::archive::snapshots_of(repo, tip, &s)?.into_iter().collect::<BTreeMap<_, _>>(),
            None => BTreeMap::new(),
        };
        lines.extend(new);
        let text: String = lines.iter().map(|(id, (tip, json))| format!("{tip} {id} {json}\n")).collect();
        let blob = git::write_blob(repo, text.as_bytes())?;
        editor.upsert(format!("tasks/{s}"), gix::object::tree::EntryKind::Blob, blob)?;
    }
    // Commits are kept by the fold's parents; anything else a ref held (a claim's tombstone, a
    // try anchor's record) by an entry of its tree.
    let mut parents: BTreeSet<ObjectId> = BTreeSet::new();
    for (name, id) in &fresh {
        let kind = repo.find_header(**id).with_context(|| format!("could not read what '{name}' holds"))?.kind();
        if kind == gix::object::Kind::Commit {
            parents.insert(**id);
        } else {
            let entry = format!("kept/{}/{}", shard(name), name.trim_start_matches(refs::LOOP).replace('/', "_"));
            editor.upsert(entry, gix::object::tree::EntryKind::Blob, **id)?;
        }
    }
    let tree = editor.write().context("could not write the archive's tree")?.detach();
    let sig = gix::actor::Signature {
        name: "git-loop".into(),
        email: "fold@git-loop".into(),
        time: gix::date::Time { seconds: at.timestamp(), offset: 0 },
    };
    // The first parent is always the archive's previous fold (the first fold's, a root commit
    // of its own), so `git log --first-parent refs/loop/archive` lists the folds.
    let mut first = match previous {
        Some(tip) => tip,
        None => git::write_commit(repo, git::empty_tree(repo)?, &[], "loop: the archive begins\n", &sig)?,
    };
    let parents: Vec<ObjectId> = parents.into_iter().collect();
    let parts: Vec<&[ObjectId]> = parents.chunks(PARENTS_PER_COMMIT).collect();
    let message = format!("loop: fold {} tasks, {} journal chains\n", plan.tasks.len(), plan.chains.len());
    let Some((last, carried)) = parts.split_last() else {
        return Ok(Some(git::write_commit(repo, tree, &[first], &message, &sig)?));
    };
    for (i, part) in carried.iter().enumerate() {
        let mut all = vec![first];
        all.extend_from_slice(part);
        let carrier = format!("loop: fold, part {} of {} (its commits only)\n", i + 1, parts.len());
        first = git::write_commit(repo, base_tree, &all, &carrier, &sig)?;
    }
    let mut all = vec![first];
    all.extend_from_slice(last);
    Ok(Some(git::write_commit(repo, tree, &all, &message, &sig)?))
}

/// Fold `plan` into this clone's archive: the fold commit first (by compare-and-swap on the
/// archive's ref), then each retired ref deleted if it still holds what was archived.
pub fn fold(store: &Store, plan: &Plan, at: DateTime<Utc>) -> Result<Folded> {
    let mut folded = Folded { tasks: plan.tasks.len(), chains: plan.chains.len(), ..Folded::default() };
    if plan.refs.is_empty() {
        return Ok(folded);
    }
    let commit = cas::until_settled("the archive", std::process::id(), || {
        let previous = git::ref_target(&store.repo, REF)?;
        let Some(commit) = build(store, plan, previous, at)? else { return Ok(Some(previous)) };
        let expect = previous.map_or(super::cas::Expect::Absent, super::cas::Expect::Is);
        Ok(match cas::update(store, REF, expect, commit, "loop: fold")? {
            Cas::Applied => Some(Some(commit)),
            Cas::Lost { .. } => None,
        })
    })?;
    folded.archive = commit.map(|c| c.to_string());
    crate::failpoint::write_point();
    let retire: Vec<(String, ObjectId)> = plan.refs.iter().map(|(n, id)| (n.clone(), *id)).collect();
    folded.deleted = cas::delete_all(store, &retire)?.len();
    folded.kept = retire.len() - folded.deleted;
    Ok(folded)
}

/// How many leased deletes go in one push: an atomic push, which the remote applies in one
/// transaction (one `packed-refs` rewrite; git applies a non-atomic push's refs one by one,
/// each rewriting it: deletes × refs). About 120 bytes of arguments each.
const DELETES_PER_PUSH: usize = 2_000;

/// A push redone without `--atomic` after one of its leases failed: a ref at a time.
const DELETES_PER_LONE_PUSH: usize = 250;

/// Fold on the shared remote `remote` what `planner` plans after each sync (docs/concurrency.md,
/// "The archive on a shared remote"): sync; build the fold on the remote's archive; push the
/// archive alone, leased on the tip the sync saw (a lost lease syncs and builds again: two
/// clones folding at once serialise on it); then push the deletes of the retired refs, each
/// leased on its archived value and applied on its own (a ref that moved since is left live);
/// then delete them here. Killed anywhere, what is left is refs equal to their archive
/// entries, which every reader reads the same and the next fold deletes.
pub fn fold_remote(
    store: &Store,
    ctx: &crate::context::Context,
    remote_name: &str,
    planner: &dyn Fn() -> Result<Plan>,
) -> Result<Folded> {
    let mut total = Folded::default();
    for _round in 0..5 {
        super::sync::sync(store, ctx, remote_name)?;
        let sources = [refs::LOOP, refs::TASK_BRANCHES, refs::TRY_BRANCHES].map(|p| format!("{p}*"));
        let remote_refs = super::remote::mirrored(store, remote_name, &sources)?;
        let plan = published_only(planner()?, &remote_refs);
        // What an earlier fold archived but did not get to delete there (it stopped, or an
        // older clone pushed it back): the remote's refs that equal their archive entries.
        let mut leftovers = BTreeMap::new();
        let archived = read(&store.repo)?;
        for (name, id) in remote_refs {
            if archived.refs.get(&name) == Some(&id) {
                leftovers.insert(name, id);
            }
        }
        if plan.refs.is_empty() && leftovers.is_empty() {
            return Ok(total);
        }
        let previous = git::ref_target(&store.repo, REF)?;
        let commit = match build(store, &plan, previous, ctx.now())? {
            Some(commit) => {
                let expect = previous.map_or(super::cas::Expect::Absent, super::cas::Expect::Is);
                match super::remote::swap(store, remote_name, REF, expect, Some(commit))? {
                    Cas::Applied => Some(commit),
                    // Another clone folded meanwhile: sync, and fold what is left on its fold.
                    Cas::Lost { .. } => continue,
                }
            }
            // The archive holds them already (a fold stopped before its deletes).
            None => previous,
        };
        crate::failpoint::write_point();
        let mut retire = plan.refs.clone();
        retire.extend(leftovers);
        let (deleted, kept) = delete_remote(store, remote_name, &retire)?;
        let here: Vec<(String, ObjectId)> = plan.refs.iter().map(|(n, id)| (n.clone(), *id)).collect();
        cas::delete_all(store, &here)?;
        // Counted once: what another clone's fold archived already (its deletes still on the
        // way) is not this fold's.
        let new = |name: &str| archived.refs.get(name) != plan.refs.get(name);
        total.tasks += plan.tasks.iter().filter(|id| new(&format!("{}{id}", refs::TASKS))).count();
        total.chains += plan.chains.iter().filter(|name| new(name)).count();
        total.deleted += deleted;
        total.kept += kept;
        total.archive = commit.map(|c| c.to_string());
        if plan.tasks.len() < BATCH {
            return Ok(total);
        }
    }
    Ok(total)
}

/// `plan` without the tasks (and their refs) of which a ref holds here what the remote does not
/// (written here since the sync, not published yet): folded, this clone's newer value would go
/// into the archive while the remote's older one, which the leased delete leaves, came back
/// live over it and hid it. They fold once published.
fn published_only(mut plan: Plan, remote: &BTreeMap<String, ObjectId>) -> Plan {
    let ahead = |name: &str, id: &ObjectId| remote.get(name).is_some_and(|theirs| theirs != id);
    let of_task = |name: &str, task: &str| name.ends_with(&format!("/{task}")) || name.contains(&format!("/{task}/"));
    let held: Vec<String> = plan
        .tasks
        .iter()
        .filter(|task| plan.refs.iter().any(|(name, id)| of_task(name, task) && ahead(name, id)))
        .cloned()
        .collect();
    plan.tasks.retain(|task| !held.contains(task));
    plan.refs.retain(|name, id| !ahead(name, id) && !held.iter().any(|task| of_task(name, task)));
    plan.chains.retain(|chain| plan.refs.contains_key(chain));
    plan
}

/// Delete `refs` on the remote, each leased on its value, in atomic pushes of
/// `DELETES_PER_PUSH`; a push one of whose refs moved is redone ref by ref, so the others go:
/// (deleted, left because they moved).
fn delete_remote(store: &Store, remote_name: &str, refs: &BTreeMap<String, ObjectId>) -> Result<(usize, usize)> {
    let timeout = store.settings().transfer_timeout()?;
    let (mut deleted, mut kept) = (0, 0);
    let all: Vec<(&String, &ObjectId)> = refs.iter().collect();
    let push = |chunk: &[(&String, &ObjectId)], atomic: bool| -> Result<git::program::PushReport> {
        let updates: Vec<git::program::PushUpdate> = chunk
            .iter()
            .map(|(name, id)| git::program::PushUpdate { dst: (*name).clone(), src: None, expect: Some(Some(**id)) })
            .collect();
        let report = super::remote::answered(store, remote_name, || {
            git::program::push_with(store.workdir(), remote_name, &updates, &[], timeout, atomic)
        })?;
        if let Some(refusal) = report.refusal() {
            return Err(crate::error::Refusal::new(
                crate::error::Class::Refused,
                format!("remote '{remote_name}' refused to let the archive retire '{}': {}", refusal.dst, refusal.why),
            )
            .hint("install this release's hook on the server (git loop hooks install --server): it lets a ref go once the archive holds it")
            .into());
        }
        Ok(report)
    };
    let mut count = |report: &git::program::PushReport| {
        for (_, status) in &report.refs {
            if *status == git::program::RefStatus::Ok {
                deleted += 1;
            } else {
                kept += 1;
            }
        }
    };
    for chunk in all.chunks(DELETES_PER_PUSH) {
        let report = push(chunk, true)?;
        if report.all_ok() {
            count(&report);
            continue;
        }
        for lone in chunk.chunks(DELETES_PER_LONE_PUSH) {
            count(&push(lone, false)?);
        }
    }
    Ok((deleted, kept))
}

/// Delete the refs that still hold exactly what the archive holds for them (what a fold that
/// stopped left): the rule that a ref equal to its archive entry is folded.
pub fn tidy(store: &Store) -> Result<usize> {
    let archive = read(&store.repo)?;
    let mut left = Vec::new();
    for (name, id) in &archive.refs {
        if git::ref_target(&store.repo, name)? == Some(*id) {
            left.push((name.clone(), *id));
        }
    }
    Ok(cas::delete_all(store, &left)?.len())
}

/// Reads an object: its kind and bytes (the server's hook reads the push's quarantine too).
pub type ReadObject<'a> = &'a dyn Fn(ObjectId) -> Option<(gix::objs::Kind, Vec<u8>)>;

/// Every snapshot line fold commit `new` adds over `old` (its parent fold, if any) is the
/// record at its tip: the task.json there, read as a task, equals the line's. What the server's
/// hook checks of a pushed fold, and `doctor` of the whole archive (`old` `None`).
pub fn check_snapshots(
    read: ReadObject<'_>,
    hash: gix::hash::Kind,
    old: Option<ObjectId>,
    new: ObjectId,
) -> Result<(), String> {
    let object = |id: ObjectId, want: gix::objs::Kind| -> Result<Vec<u8>, String> {
        match read(id) {
            Some((kind, data)) if kind == want => Ok(data),
            Some((kind, _)) => Err(format!("{id} is a {kind}, not a {want}")),
            None => Err(format!("object {id} is missing")),
        }
    };
    let tree_of = |commit: ObjectId| -> Result<ObjectId, String> {
        let data = object(commit, gix::objs::Kind::Commit)?;
        let commit = gix::objs::CommitRef::from_bytes(&data, hash).map_err(|e| format!("commit {commit}: {e}"))?;
        Ok(commit.tree())
    };
    let entry = |tree: ObjectId, name: &str| -> Result<Option<ObjectId>, String> {
        let data = object(tree, gix::objs::Kind::Tree)?;
        let tree = gix::objs::TreeRef::from_bytes(&data, hash).map_err(|e| format!("tree {tree}: {e}"))?;
        Ok(tree.entries.iter().find(|e| e.filename == name).map(|e| e.oid.to_owned()))
    };
    let lines = |tasks: Option<ObjectId>,
                 shard: &str|
     -> Result<std::collections::HashMap<String, (ObjectId, String)>, String> {
        match tasks.map(|t| entry(t, shard)).transpose()?.flatten() {
            Some(blob) => super::archive::parse_snapshots(&object(blob, gix::objs::Kind::Blob)?),
            None => Ok(Default::default()),
        }
    };
    let Some(tasks) = entry(tree_of(new)?, "tasks")? else { return Ok(()) };
    let before = match old {
        Some(old) => entry(tree_of(old)?, "tasks")?,
        None => None,
    };
    if before == Some(tasks) {
        return Ok(());
    }
    let data = object(tasks, gix::objs::Kind::Tree)?;
    let shards: Vec<String> = gix::objs::TreeRef::from_bytes(&data, hash)
        .map_err(|e| format!("tree {tasks}: {e}"))?
        .entries
        .iter()
        .map(|e| e.filename.to_string())
        .collect();
    for shard in shards {
        let was = lines(before, &shard)?;
        for (id, (tip, json)) in lines(Some(tasks), &shard)? {
            if was.get(&id).is_some_and(|(t, j)| *t == tip && *j == json) {
                continue;
            }
            let name = format!("{}{id}", refs::TASKS);
            let said = crate::store::task::decode_task(Some(&id), json.as_bytes())
                .map_err(|why| format!("the archive's snapshot of {name} is not a task record: {why}"))?;
            let held = tree_of(tip)
                .and_then(|tree| entry(tree, crate::store::task::TASK_FILE))
                .ok()
                .flatten()
                .and_then(|blob| object(blob, gix::objs::Kind::Blob).ok())
                .and_then(|bytes| crate::store::task::decode_task(Some(&id), &bytes).ok());
            if held.as_ref() != Some(&said) {
                return Err(format!("the archive's snapshot of {name} is not the record at {tip}"));
            }
        }
    }
    Ok(())
}

/// `check_snapshots` of the whole archive at fold commit `tip` of `store`.
pub fn check_snapshots_in(store: &Store, tip: ObjectId) -> Result<(), String> {
    let repo = &store.repo;
    let read = |id: ObjectId| repo.find_object(id).ok().map(|o| (o.kind, o.data.clone()));
    check_snapshots(&read, repo.object_hash(), None, tip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(n: u8) -> ObjectId {
        ObjectId::from_hex(format!("{n:02x}").repeat(20).as_bytes()).expect("hex")
    }

    #[test]
    fn a_task_ahead_of_the_remote_waits_for_the_next_fold() {
        let mut plan = Plan::default();
        for (task, tip) in [("t-aaaaaaaa", 1), ("t-bbbbbbbb", 2)] {
            plan.tasks.push(task.into());
            plan.refs.insert(format!("refs/loop/tasks/{task}"), oid(tip));
            plan.refs.insert(format!("refs/loop/tries/{task}/1"), oid(tip + 10));
        }
        plan.chains.push("refs/loop/journal/s-12345678".into());
        plan.refs.insert("refs/loop/journal/s-12345678".into(), oid(30));
        // The remote holds t-aaaaaaaa as here; t-bbbbbbbb at an older tip (done here since).
        let remote: BTreeMap<String, ObjectId> = [
            ("refs/loop/tasks/t-aaaaaaaa".to_owned(), oid(1)),
            ("refs/loop/tasks/t-bbbbbbbb".to_owned(), oid(9)),
            ("refs/loop/tries/t-bbbbbbbb/1".to_owned(), oid(12)),
        ]
        .into_iter()
        .collect();
        let kept = published_only(plan, &remote);
        assert_eq!(kept.tasks, ["t-aaaaaaaa"]);
        assert_eq!(
            kept.refs.keys().cloned().collect::<Vec<_>>(),
            ["refs/loop/journal/s-12345678", "refs/loop/tasks/t-aaaaaaaa", "refs/loop/tries/t-aaaaaaaa/1"]
        );
        assert_eq!(kept.chains, ["refs/loop/journal/s-12345678"]);
    }
}
