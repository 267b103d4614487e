//! The archive: finished tasks' records folded into one ref, `refs/loop/archive`, so that
//! refs grow with live work, not with history (docs/storage.md, "Archive"; on a fleet's
//! remote, docs/concurrency.md, "The archive on a shared remote"). This module reads it; the
//! folds are `store::fold`'s.
//!
//! A **fold** retires the refs of finished tasks — the task's chain, its claim's tombstone, its
//! done and try anchors — and the journal chains of sessions and walks that ended, into one
//! commit on `refs/loop/archive`:
//! - parents: the previous fold first (the first fold's: a root commit, `loop: the archive
//!   begins`), then every retired commit (sorted): everything a retired ref reached stays
//!   reachable from the archive, and `git log --first-parent` lists the folds;
//! - tree: `index/<shard>` blobs, lines `<object id> <ref name>` (the shard is the last two
//!   characters of the task id or journal writer), the whole index of what was retired;
//!   `kept/<shard>/<ref name, its slashes as underscores>`, each retired ref that held a blob
//!   (a claim's tombstone, a try anchor's record), kept alive; `tasks/<shard>` blobs, lines
//!   `<tip> <task id> <task.json at that tip, on one line>` (version 2: [`snapshot`]), so that a
//!   clone that never read a folded task builds its task index from a hundred blobs instead of
//!   reading a hundred thousand chains;
//! - message `loop: fold N tasks, M journal chains`.
//!
//! Readers see a retired ref as if it were still there, the live ref shadowing it
//! ([`lookup`], [`under`]): `show`, `log`, `cost`, `list` and the completion notes read a
//! folded task as before, and `git show refs/loop/archive:index/<shard>` then `git log <tip>`
//! read it with plain git. A change to a folded task (a reopen) writes its ref again on top of
//! the archived tip (an "unfold"): it is live from then on.
//!
//! A fold writes the archive before it deletes a retired ref, and deletes each only if it
//! still holds the value archived (compare-and-swap): a fold killed at any point leaves refs
//! that equal their archive entries (harmless duplicates, which the next fold deletes), never a
//! hole.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};
use gix::ObjectId;

use crate::git;
use crate::refs;

/// The archive's ref.
pub const REF: &str = "refs/loop/archive";

/// Every retired ref and the value it held, as of one archive tip.
#[derive(Debug, Default)]
pub struct Archive {
    pub tip: Option<ObjectId>,
    pub refs: BTreeMap<String, ObjectId>,
}

/// The last archives read, by repository and tip: each is read once per tip (a sync looks at
/// this clone's and the remote's, which differ only after a fold).
static READ: Mutex<Vec<(std::path::PathBuf, ObjectId, Arc<Archive>)>> = Mutex::new(Vec::new());

/// The archive as its ref holds it now (empty when there is none).
pub fn read(repo: &gix::Repository) -> Result<Arc<Archive>> {
    match git::ref_target(repo, REF)? {
        Some(tip) => at(repo, tip),
        None => Ok(Arc::new(Archive::default())),
    }
}

/// The archive as fold commit `tip` of `store` holds it.
pub fn in_store(store: &super::Store, tip: ObjectId) -> Result<Arc<Archive>> {
    at(&store.repo, tip)
}

/// The archive as fold commit `tip` holds it.
pub fn at(repo: &gix::Repository, tip: ObjectId) -> Result<Arc<Archive>> {
    let key = repo.common_dir().to_owned();
    if let Some((_, _, archive)) =
        READ.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(dir, at, _)| *dir == key && *at == tip)
    {
        return Ok(archive.clone());
    }
    let archive = Arc::new(Archive { tip: Some(tip), refs: index_of(repo, tip)? });
    let mut read = READ.lock().unwrap_or_else(|p| p.into_inner());
    if read.len() >= 2 {
        read.remove(0);
    }
    read.push((key, tip, archive.clone()));
    Ok(archive)
}

/// The index a fold commit's tree holds.
fn index_of(repo: &gix::Repository, commit: ObjectId) -> Result<BTreeMap<String, ObjectId>> {
    let mut out = BTreeMap::new();
    let commit = repo.find_commit(commit).context("could not read the archive's commit")?;
    let tree = commit.tree().context("could not read the archive's tree")?;
    let Some(index) = tree.find_entry("index") else { return Ok(out) };
    let index = repo.find_tree(index.object_id()).context("could not read the archive's index")?;
    for entry in index.iter() {
        let entry = entry.context("could not read the archive's index")?;
        let blob = git::read_blob(repo, entry.object_id())?;
        parse_lines(&blob, &mut out)?;
    }
    Ok(out)
}

fn parse_lines(blob: &[u8], out: &mut BTreeMap<String, ObjectId>) -> Result<()> {
    for line in String::from_utf8_lossy(blob).lines() {
        let Some((id, name)) = line.split_once(' ') else { continue };
        let id = ObjectId::from_hex(id.as_bytes()).with_context(|| format!("the archive's index line '{line}'"))?;
        out.insert(name.to_owned(), id);
    }
    Ok(())
}

/// What ref `name` held when it was folded, if it was.
pub fn lookup(repo: &gix::Repository, name: &str) -> Result<Option<ObjectId>> {
    Ok(read(repo)?.refs.get(name).copied())
}

/// Every retired ref under `prefix` with what it held (live or not: callers let the live ref
/// shadow it).
pub fn under(repo: &gix::Repository, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
    let archive = read(repo)?;
    Ok(archive
        .refs
        .range(prefix.to_owned()..)
        .take_while(|(n, _)| n.starts_with(prefix))
        .map(|(n, id)| (n.clone(), *id))
        .collect())
}

/// The snapshots of one archive tip's `tasks/<shard>` blobs read so far, by shard: task id →
/// (tip, its task.json on one line).
type Shards = std::collections::HashMap<String, Arc<std::collections::HashMap<String, (ObjectId, String)>>>;

/// The last archive whose snapshots were read, with the shards read.
static SNAPSHOTS: Mutex<Option<(std::path::PathBuf, ObjectId, Shards)>> = Mutex::new(None);

/// Task `id`'s `task.json` as the archive at fold commit `archive` holds it, if that is the record
/// at `tip` (the fold read it there; the server's hook checked it against the chain when the
/// fold was pushed, `fold::check_snapshots`). `None`: no archive, no snapshot of that task, or one of
/// another tip (the task moved since): its chain is read instead.
pub fn snapshot(repo: &gix::Repository, archive: ObjectId, id: &str, tip: ObjectId) -> Result<Option<String>> {
    let shard = shard(id);
    let key = repo.common_dir().to_owned();
    let mut cache = SNAPSHOTS.lock().unwrap_or_else(|p| p.into_inner());
    if cache.as_ref().is_none_or(|(dir, at, _)| *dir != key || *at != archive) {
        *cache = Some((key, archive, Shards::new()));
    }
    let shards = &mut cache.as_mut().expect("set above").2;
    if !shards.contains_key(&shard) {
        shards.insert(shard.clone(), Arc::new(snapshots_of(repo, archive, &shard)?));
    }
    Ok(shards[&shard].get(id).filter(|(at, _)| *at == tip).map(|(_, json)| json.clone()))
}

/// The snapshots fold commit `commit` holds in `tasks/<shard>`.
pub(super) fn snapshots_of(
    repo: &gix::Repository,
    commit: ObjectId,
    shard: &str,
) -> Result<std::collections::HashMap<String, (ObjectId, String)>> {
    let commit = repo.find_commit(commit).context("could not read the archive's commit")?;
    let tree = commit.tree().context("could not read the archive's tree")?;
    let Some(entry) =
        tree.lookup_entry_by_path(format!("tasks/{shard}")).context("could not read the archive's tree")?
    else {
        return Ok(Default::default());
    };
    parse_snapshots(&git::read_blob(repo, entry.object_id())?).map_err(anyhow::Error::msg)
}

/// The lines of a `tasks/<shard>` blob: task id → (tip, its task.json on one line).
pub(super) fn parse_snapshots(blob: &[u8]) -> Result<std::collections::HashMap<String, (ObjectId, String)>, String> {
    let mut out = std::collections::HashMap::new();
    for line in String::from_utf8_lossy(blob).lines() {
        let mut parts = line.splitn(3, ' ');
        let (Some(tip), Some(id), Some(json)) = (parts.next(), parts.next(), parts.next()) else {
            let shown: String = line.chars().take(80).collect();
            return Err(format!("the archive's snapshot line '{shown}' is not '<tip> <id> <record>'"));
        };
        let tip = ObjectId::from_hex(tip.as_bytes())
            .map_err(|_| format!("the archive's snapshot of {id} names no commit"))?;
        out.insert(id.to_owned(), (tip, json.to_owned()));
    }
    Ok(out)
}

/// The shard of a ref: the last two characters of its task id or journal writer.
pub(super) fn shard(name: &str) -> String {
    let owner = if let Some(rest) = name.strip_prefix(refs::TRIES).or_else(|| name.strip_prefix(refs::TRY_BRANCHES)) {
        rest.split('/').next().unwrap_or(rest)
    } else {
        name.rsplit('/').next().unwrap_or(name)
    };
    let chars: Vec<char> = owner.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    chars[chars.len().saturating_sub(2)..].iter().collect::<String>().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ref_is_sharded_by_its_task_or_writer() {
        assert_eq!(shard("refs/loop/tasks/t-4f2a9k3m"), "3m");
        assert_eq!(shard("refs/loop/tries/t-4f2a9k3m/2"), "3m");
        assert_eq!(shard("refs/loop/claims/node/t-4f2a9k3m"), "3m");
        assert_eq!(shard("refs/loop/journal/s-8k2m1x0a"), "0a");
        assert_eq!(shard("refs/heads/loop/t-4f2a9k3m"), "3m");
        assert_eq!(shard("refs/heads/loop-try/t-4f2a9k3m/12"), "3m");
    }
}
