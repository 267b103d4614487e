//! The settings that steer a walk (`loop.*`: the checks, notify, setup, reviewers, agents'
//! command lines, the sandbox…), watched from one walk to the next.
//!
//! A walk reads them once, when it starts, and goes on with those whatever changes meanwhile.
//! It keeps what it started with in `.git/loop/steering-v1.json` (docs/storage.md):
//! - the next walk names, in its first lines and in a `settings_changed` event, every setting
//!   that changed since — a person's change between walks is obeyed, and said;
//! - after each of its sessions it reads them again: a change made while a session ran is
//!   journaled (`settings_changed` with the sessions running) and not obeyed by this walk; when
//!   that session ran unconfined — able to write the repository's configuration itself — the
//!   change is kept as possibly planted, and the next walk refuses to start while it stands,
//!   unless a person accepts it (`run --accept-settings`). A confined session cannot reach the
//!   configuration at all.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::error::usage;
use crate::store::events::SettingChange;
use crate::store::Store;

/// The version of the file written here; another version is read as none.
pub const VERSION: u32 = 1;

/// What the file holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Kept {
    version: u32,
    /// The settings the last walk started with.
    values: BTreeMap<String, String>,
    /// Settings changed while an unconfined session ran: the value then seen, and the sessions.
    #[serde(default)]
    planted: BTreeMap<String, Planted>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Planted {
    /// The value it was changed to (`None`: removed).
    value: Option<String>,
    sessions: Vec<String>,
}

/// The settings a walk started with, and what it has said of changes since.
pub struct Steering {
    start: BTreeMap<String, String>,
    /// Changes already journaled, so each is said once.
    said: std::sync::Mutex<BTreeMap<String, Option<String>>>,
}

/// The changes from `from` to `to`, key by key.
fn changes(from: &BTreeMap<String, String>, to: &BTreeMap<String, String>) -> Vec<SettingChange> {
    let keys: std::collections::BTreeSet<&String> = from.keys().chain(to.keys()).collect();
    keys.into_iter()
        .filter(|k| from.get(*k) != to.get(*k))
        .map(|k| SettingChange { key: k.clone(), from: from.get(k).cloned(), to: to.get(k).cloned() })
        .collect()
}

fn read(store: &Store) -> Kept {
    let Ok(layout) = store.layout() else { return Kept::default() };
    std::fs::read(layout.steering())
        .ok()
        .and_then(|b| serde_json::from_slice::<Kept>(&b).ok())
        .filter(|k| k.version == VERSION)
        .unwrap_or_default()
}

fn write(store: &Store, kept: &Kept) -> Result<()> {
    let path = store.layout()?.steering();
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(kept)?)
        .with_context(|| format!("could not write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("could not write '{}'", path.display()))
}

/// A setting's value as a person reads it.
pub fn shown(value: &Option<String>) -> String {
    match value {
        Some(v) => format!("'{}'", v.replace('\n', "', '")),
        None => "unset".to_owned(),
    }
}

/// What a walk watches for changes: the `loop.*` settings, and the main checkout's
/// `.worktreeinclude` (what every new try is warmed with: an agent that lands one naming a file
/// copies it into every later try), its lines as the value of the key `.worktreeinclude`.
fn watched(store: &Store) -> BTreeMap<String, String> {
    let mut now = store.loop_settings();
    let file = store.workdir().join(crate::tries::warm::INCLUDE_FILE);
    if std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file()) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
        if !lines.is_empty() {
            now.insert(crate::tries::warm::INCLUDE_FILE.to_owned(), lines.join("\n"));
        }
    }
    now
}

/// When a walk starts: refuse a setting changed while an unconfined session ran that still
/// stands (unless `accept`), and say what changed since the last walk. Returns the walk's
/// steering and those changes.
pub fn start(store: &Store, accept: bool) -> Result<(Steering, Vec<SettingChange>)> {
    let now = watched(store);
    let kept = read(store);
    let standing: Vec<(&String, &Planted)> =
        kept.planted.iter().filter(|(key, planted)| now.get(*key) == planted.value.as_ref()).collect();
    if let Some((key, planted)) = standing.first().filter(|_| !accept) {
        let others = match standing.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Err(usage(format!(
            "{key} was changed to {} while session {} ran unconfined{others}: a walk does not obey a setting an agent may have planted",
            shown(&planted.value),
            planted.sessions.join(", ")
        ))
        .hint(format!(
            "check it with 'git config --show-origin {key}'; if the change is yours, 'git loop run --accept-settings' obeys it from now on"
        ))
        .into());
    }
    let said = if kept.values.is_empty() && kept.planted.is_empty() { Vec::new() } else { changes(&kept.values, &now) };
    write(store, &Kept { version: VERSION, values: now.clone(), planted: BTreeMap::new() })?;
    Ok((Steering { start: now, said: Default::default() }, said))
}

impl Steering {
    /// Settings as the walk started with them (a walk that keeps none: recovery, one-off roles).
    pub fn none() -> Steering {
        Steering { start: BTreeMap::new(), said: Default::default() }
    }

    /// After a session, or when the walk ends: the settings changed since the walk started and
    /// not said yet (read afresh from `cwd`'s repository). When `planted_by` names an
    /// unconfined session, they are kept as possibly planted by it, for the next walk to refuse.
    pub fn look_again(
        &self,
        ctx: &crate::context::Context,
        cwd: &std::path::Path,
        planted_by: Option<&str>,
    ) -> Result<Vec<SettingChange>> {
        if self.start.is_empty() {
            return Ok(Vec::new());
        }
        let fresh = Store::open(ctx, cwd)?;
        let now = watched(&fresh);
        let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        let new: Vec<SettingChange> =
            changes(&self.start, &now).into_iter().filter(|c| said.get(&c.key) != Some(&c.to)).collect();
        for change in &new {
            said.insert(change.key.clone(), change.to.clone());
        }
        if let (Some(session), false) = (planted_by, new.is_empty()) {
            let mut kept = read(&fresh);
            for change in &new {
                let planted = kept.planted.entry(change.key.clone()).or_default();
                planted.value = change.to.clone();
                planted.sessions.push(session.to_owned());
            }
            write(&fresh, &kept)?;
        }
        Ok(new)
    }
}

/// Changes in a line for people: `loop.checks 'cargo test' → 'true'`.
pub fn describe(changes: &[SettingChange]) -> String {
    changes
        .iter()
        .map(|c| format!("{} {} → {}", crate::store::settings::documented_name(&c.key), shown(&c.from), shown(&c.to)))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_made_while_an_unconfined_session_ran_is_refused_until_a_person_accepts_it() {
        let (_dir, mut store) = crate::store::scratch();
        let ctx = crate::context::Context::for_tests();
        store.set_local_config("loop.checks", "cargo test").expect("set");
        let (steering, first) = start(&store, false).expect("the first walk starts");
        assert!(first.is_empty(), "nothing to compare the first walk with");
        store.set_local_config("loop.checks", "true").expect("an agent plants it");
        let seen = steering.look_again(&ctx, store.workdir(), Some("s-1")).expect("look");
        assert_eq!(describe(&seen), "loop.checks 'cargo test' → 'true'");
        assert!(steering.look_again(&ctx, store.workdir(), Some("s-2")).expect("look").is_empty(), "said once");
        let store = Store::open(&ctx, store.workdir()).expect("open");
        let refused = start(&store, false).err().expect("the next walk refuses");
        assert!(format!("{refused:#}").contains("loop.checks was changed to 'true' while session s-1 ran unconfined"));
        let (_, accepted) = start(&store, true).expect("a person accepts it");
        assert_eq!(describe(&accepted), "loop.checks 'cargo test' → 'true'", "named, and obeyed");
        let read_only = SettingChange { key: "loop.sandbox.readonly".into(), from: None, to: Some("/opt".into()) };
        assert!(describe(&[read_only]).starts_with("loop.sandbox.readOnly "), "named as the docs spell it");
        assert!(start(&store, false).expect("no longer refused").1.is_empty());
    }
}
