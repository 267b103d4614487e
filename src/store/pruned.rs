//! The branches this clone pruned (`git loop prune`): task and try branches of finished tasks,
//! deleted here while the remote (with `loop.remote`) keeps them as its archive. A sync does not
//! create them here again while the remote's is still the head that was pruned; one that moved
//! since is new work, and comes as any would. The file is machine-local state, written whole
//! (a temporary file renamed over it) under `.git/loop/pruned.json` (docs/storage.md).

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::Store;

/// The version of the file's format.
pub const VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    /// Full ref name → the head it was pruned at (hex).
    refs: BTreeMap<String, String>,
}

/// What this clone pruned: full ref name → the head it was pruned at. Empty when nothing was,
/// or the file is of a version this one does not read (it then prunes nothing of a sync's).
pub fn load(store: &Store) -> BTreeMap<String, ObjectId> {
    let Ok(layout) = store.layout() else { return BTreeMap::new() };
    let Ok(bytes) = std::fs::read(layout.pruned()) else { return BTreeMap::new() };
    match serde_json::from_slice::<File>(&bytes) {
        Ok(file) if file.version == VERSION => file
            .refs
            .into_iter()
            .filter_map(|(name, hex)| ObjectId::from_hex(hex.as_bytes()).ok().map(|id| (name, id)))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Add `pruned` (full ref name, head) to what this clone pruned.
pub fn add(store: &Store, pruned: &[(String, ObjectId)]) -> Result<()> {
    if pruned.is_empty() {
        return Ok(());
    }
    let path = store.layout()?.pruned();
    let mut refs: BTreeMap<String, String> = load(store).into_iter().map(|(n, id)| (n, id.to_string())).collect();
    for (name, id) in pruned {
        refs.insert(name.clone(), id.to_string());
    }
    let text = serde_json::to_vec_pretty(&File { version: VERSION, refs })?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
    }
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("could not write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("could not write '{}'", path.display()))
}
