//! The loop's settings shared through the repository (`git loop config --share`): a versioned
//! record on the chain `refs/loop/settings` (docs/storage.md, "Shared settings record"), which
//! `sync` exchanges like any loop ref. A clone adopts it only when a person says so (`git loop
//! config --adopt`): settings steer what runs — the agent's command, the checks, the setup — so
//! nothing here ever writes a clone's configuration on its own.
//!
//! Which settings are the project's to share and which are a clone's own is decided here:
//! [`is_shareable`] (the remote, where worktrees go, who this clone is and how it notifies
//! stay local).

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::cas::{self, Cas, Expect};
use super::Store;
use crate::refs;

/// The version of the record.
pub const VERSION: u32 = 1;

/// The file of the record in its commit's tree.
pub const FILE: &str = "settings.json";

/// The settings a clone shares: key (as `git config` names it) → its values, in order (most
/// keys have one; a repeatable one, several).
pub type Settings = BTreeMap<String, Vec<String>>;

/// The largest record, in bytes: a few hundred settings with room to spare. Every clone fetches
/// and reads it, so a larger one is refused by its writer, by the pre-receive hook and by
/// every reader (docs/storage.md, "Size limits").
pub const LIMIT: usize = 64 * 1024;

/// One shared record: who shared what, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    /// Who shared it (`Name <email>`), as its clone's git identity says: what anyone with push
    /// access could write.
    pub by: String,
    /// The user the shared remote authenticates the sharing clone's pushes as (`loop.user`):
    /// a remote with `loop.bindHolders` refuses a record whose user is not the pusher, so there
    /// it is verified. Added to version 1; absent where `loop.user` is not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub at: DateTime<Utc>,
    pub settings: Settings,
}

impl Record {
    /// Who shared it, for people: `Tess <tess@example.com> (user 'tess', verified only by a
    /// remote that binds pushers)`, or unverified when it names no user.
    pub fn author(&self) -> String {
        match &self.user {
            Some(user) => format!(
                "{} (user '{}': verified where the remote binds pushers to users, loop.bindHolders)",
                self.by,
                user.escape_debug()
            ),
            None => format!("{} (unverified: it names no loop.user)", self.by),
        }
    }
}

/// What is wrong with a record of `len` bytes, if it is past [`LIMIT`].
fn too_large(len: usize) -> Option<String> {
    (len > LIMIT).then(|| {
        format!("{FILE} is {len} bytes, over the limit of {} for a settings record", super::limits::size(LIMIT))
    })
}

/// Settings every clone reads the same way: the project's.
const SHARED_KEYS: &[&str] = &[
    "loop.agent",
    "loop.checks",
    "loop.setup",
    "loop.warm",
    "loop.review",
    "loop.reviewer",
    "loop.reviewRounds",
    "loop.resolver",
    "loop.summarizer",
    "loop.pick",
    "loop.judge",
    "loop.fallback",
    "loop.unreachableFor",
    "loop.forbid",
    "loop.budgetUsd",
    "loop.syncEvery",
    "loop.checksTimeout",
    "loop.base",
    "loop.mergeInto",
    "loop.land",
    "loop.landBatch",
    "loop.epicBranch",
    "loop.forge.branch",
    "loop.forge.stack",
    "loop.fold",
];

/// Sections of named settings that are shared whole: agents, roles, prices.
const SHARED_SECTIONS: &[&str] = &["loop.agent.", "loop.role.", "loop.price."];

/// A clone's own: the remote it follows, where its worktrees go and how many it keeps, who it
/// is, how it notifies, how long it waits on its network, which forge its token goes to, and
/// how its machine confines sessions (paths of its own).
const LOCAL_KEYS: &[&str] = &[
    "loop.remote",
    "loop.notify",
    "loop.notify.webhook",
    "loop.worktrees",
    "loop.pool",
    "loop.pool.maxSize",
    "loop.pool.share",
    "loop.holder",
    "loop.user",
    "loop.transferTimeout",
    // The web board's secret: never another clone's word, never in a shared record.
    "loop.serve.token",
    // Where this clone's forge token is sent: never another clone's word.
    "loop.forge",
    "loop.forge.url",
    "loop.forge.repo",
    "loop.forge.wait",
    "loop.forge.poll",
    "loop.sandbox",
    "loop.sandbox.network",
    "loop.sandbox.allow",
    "loop.sandbox.readOnly",
    "loop.sandbox.readWrite",
    "loop.sandbox.hide",
    "loop.sandbox.tmpSize",
];

/// Whether `key` (lowercase or as written) is one of the loop's settings a clone may share.
pub fn is_shareable(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    SHARED_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key))
        || SHARED_SECTIONS
            .iter()
            .any(|s| lower.starts_with(s) && lower.len() > s.len() && lower[s.len()..].contains('.'))
}

/// This clone's values of every shareable setting it has (as its configuration reads them,
/// from every file git reads).
pub fn here(store: &Store) -> Settings {
    let mut out = Settings::new();
    for key in SHARED_KEYS {
        let values = store.config_values(key);
        if !values.is_empty() {
            out.insert((*key).to_owned(), values);
        }
    }
    for section in SHARED_SECTIONS {
        for (key, _) in store.config_all_prefixed(section) {
            if out.contains_key(&key) || !is_shareable(&key) {
                continue;
            }
            let values = store.config_values(&key);
            if !values.is_empty() {
                out.insert(key, values);
            }
        }
    }
    out
}

/// Decode a record, checking its version; `Err` says what is wrong (the one decoder: the
/// pre-receive hook and doctor use it too).
pub fn decode(bytes: &[u8]) -> Result<Record, String> {
    if let Some(problem) = too_large(bytes.len()) {
        return Err(problem);
    }
    let record: Record =
        serde_json::from_slice(bytes).map_err(|err| format!("{FILE} is not a settings record: {err}"))?;
    if record.version != VERSION {
        return Err(format!(
            "{FILE} is of version {}, which this git-loop does not read (it reads {VERSION})",
            record.version
        ));
    }
    if let Some(key) = record.settings.keys().find(|k| !is_shareable(k)) {
        return Err(format!("{FILE} shares '{}', which is not a setting clones share", key.escape_debug()));
    }
    Ok(record)
}

/// The shared record, and the commit holding it, if any was shared.
pub fn read(store: &Store) -> Result<Option<(ObjectId, Record)>> {
    let Some(tip) = store.ref_target(refs::SETTINGS)? else { return Ok(None) };
    let read = crate::git::read_commit_file_within(&store.repo, tip, FILE, LIMIT)?
        .with_context(|| format!("'{}' holds no {FILE}", refs::SETTINGS))?;
    let decoded = match read {
        Ok(bytes) => decode(&bytes),
        // Never loaded: its size is read from the object's header.
        Err(len) => Err(too_large(len).unwrap_or_default()),
    };
    let record = decoded.map_err(|problem| {
        crate::error::Refusal::new(
            crate::error::Class::Corrupt,
            format!("the shared settings record is corrupt: {problem}"),
        )
        .hint("share them again from a clone that has them right: git loop config --share")
    })?;
    Ok(Some((tip, record)))
}

/// What sharing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shared {
    /// A new record, this commit.
    Shared(ObjectId),
    /// The record already holds exactly these settings: nothing written.
    Same(ObjectId),
}

/// Share `settings` as the loop's: a new record on the chain, by compare-and-swap on its tip.
pub fn share(store: &Store, settings: Settings) -> Result<Shared> {
    if let Some(key) = settings.keys().find(|k| !is_shareable(k)) {
        return Err(crate::error::usage(format!("'{key}' is not a setting clones share"))
            .hint(format!("{} are each clone's own", LOCAL_KEYS.join(", ")))
            .into());
    }
    cas::until_settled("the shared settings", std::process::id(), || {
        let current = read(store)?;
        if let Some((tip, record)) = &current {
            if record.settings == settings {
                return Ok(Some(Shared::Same(*tip)));
            }
        }
        let record = Record {
            version: VERSION,
            by: store.identity.to_string(),
            user: store.settings().user().filter(|u| !u.is_empty()),
            at: store.now(),
            settings: settings.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&record)?;
        if let Some(problem) = too_large(bytes.len()) {
            return Err(crate::error::usage(problem)
                .hint("share fewer or shorter settings: every clone fetches and reads the record")
                .into());
        }
        let parents: Vec<ObjectId> = current.iter().map(|(tip, _)| *tip).collect();
        let message = format!("loop: settings shared by {}\n", record.by);
        let commit = store.write_file_commit(&[(FILE, &bytes)], &parents, &message, &store.signature())?;
        let expect = match current {
            Some((tip, _)) => Expect::Is(tip),
            None => Expect::Absent,
        };
        Ok(match cas::update(store, refs::SETTINGS, expect, commit, "loop: share settings")? {
            Cas::Applied => Some(Shared::Shared(commit)),
            Cas::Lost { .. } => None,
        })
    })
}

/// The shared record this clone adopted last (`.git/loop/settings-adopted`), if any.
pub fn adopted(store: &Store) -> Option<ObjectId> {
    let text = std::fs::read_to_string(store.layout().ok()?.settings_adopted()).ok()?;
    ObjectId::from_hex(text.trim().as_bytes()).ok()
}

/// Remember that this clone adopted the record in `commit`.
pub fn mark_adopted(store: &Store, commit: ObjectId) -> Result<()> {
    let path = store.layout()?.settings_adopted();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
    }
    std::fs::write(&path, format!("{commit}\n")).with_context(|| format!("could not write '{}'", path.display()))
}

/// How one shared setting compares with this clone's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compared {
    Same,
    /// Set differently here: this clone's values.
    Differs(Vec<String>),
    NotHere,
}

/// One shared setting against this clone's: its key, its shared values, and how they compare.
pub type Comparison = (String, Vec<String>, Compared);

/// Each shared setting against this clone's, and the shareable ones set only here.
pub fn compare(shared: &Settings, here: &Settings) -> (Vec<Comparison>, Vec<(String, Vec<String>)>) {
    let compared = shared
        .iter()
        .map(|(key, values)| {
            let how = match here.get(key) {
                Some(mine) if mine == values => Compared::Same,
                Some(mine) => Compared::Differs(mine.clone()),
                None => Compared::NotHere,
            };
            (key.clone(), values.clone(), how)
        })
        .collect();
    let only_here =
        here.iter().filter(|(k, _)| !shared.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    (compared, only_here)
}

/// Adopt the shared record in `commit`: every setting of it that this clone has set otherwise
/// (or not at all) is written into the repository's own configuration file
/// (`<git-common-dir>/config`), exactly its values; settings this clone has and the record does
/// not name are left alone. Returns what was written. A person's word only: nothing else calls
/// it.
pub fn adopt(store: &Store, commit: ObjectId, record: &Record) -> Result<Vec<Comparison>> {
    let here = here(store);
    let (compared, _) = compare(&record.settings, &here);
    let file = store.common_dir().join("config");
    let mut written = Vec::new();
    for (key, values, how) in compared {
        if how == Compared::Same {
            continue;
        }
        crate::git::program::config_replace(store.workdir(), &file, &key, &values)
            .with_context(|| format!("could not set '{key}' in '{}'", file.display()))?;
        written.push((key, values, how));
    }
    mark_adopted(store, commit)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every documented setting is decided one way or the other: a new one must say whether
    /// clones share it.
    #[test]
    fn every_setting_is_either_shared_or_a_clones_own() {
        for key in crate::store::settings::KEYS {
            for one in key.key.split(" / ") {
                let one = one.trim_matches('`');
                let one = if one.starts_with('.') { continue } else { one };
                let plain = one.replace("<name>", "x").replace("<model>", "x");
                let local = LOCAL_KEYS.iter().any(|k| k.eq_ignore_ascii_case(&plain));
                assert!(local != is_shareable(&plain), "'{one}' is either shared or local, not both or neither");
            }
        }
        assert!(
            is_shareable("loop.agent.mine.command") && !is_shareable("loop.agent.") && !is_shareable("loop.remote")
        );
    }
}
