//! Leases measured by the watcher: whether another holder's claim is stale is decided by how
//! long this clone has seen the very same record at the claim ref, by this machine's own
//! clock — never by comparing the holder's clock (`expires_at`) with ours.
//!
//! A claim record states its lease as `expires_at − refreshed_at`: two times stamped by one
//! clock, the holder's, so their difference means something whatever that clock says. Every
//! refresh writes a new record (a fresh nonce), so the ref's object id changes on every
//! refresh. A reader that has seen one object id at the ref for a whole lease knows that the
//! holder did not refresh within its lease: the claim is stale. A clock an hour fast or slow
//! changes nothing; only a holder that stopped refreshing loses its claim. (Chubby and etcd
//! measure leases the same way: by the observer's elapsed time.)
//!
//! What was seen when is kept in `<git-common-dir>/loop/leases`, so that observations outlive
//! the process that made them (an agent's `next --claim` lives a moment, a walk for hours):
//!
//! ```text
//! leases v1
//! <claim ref>\t<object id>\t<clock source>\t<reading in ns>
//! ```
//!
//! The file is replaced by rename, and only when something new was seen. Concurrent writers
//! may lose each other's lines; that is safe: an entry only ever says "this object id was at
//! this ref at that reading", so a lost line makes the next look record a later first sight,
//! and a takeover waits longer — never shorter. An entry from another clock source (another
//! boot, or a pinned clock) counts as not seen. Deleting the file makes every takeover wait one
//! more lease.
//!
//! The clock is `Context::tick`: this machine's monotonic clock. Only the observer's own
//! elapsed time matters, so any clock that counts seconds steadily will do; the monotonic one
//! is better than the wall clock because nothing steps it (an NTP correction or a person
//! setting the time would otherwise shorten or lengthen a wait by the step), it is shared by
//! every process of the machine, and it does not count time the machine was suspended (a holder
//! on the same machine was suspended too). Its readings mean nothing after a reboot, hence the
//! boot id in the source. Tests pin it with `GIT_LOOP_NOW`, like the wall clock.
//!
//! With a shared remote the local claim ref is only a mirror of the remote's, and an old mirror
//! may show a record the remote replaced long ago. That cannot cause a wrong takeover: a
//! takeover is a push leased on exactly the record observed, which the remote refuses when it
//! holds another; the mirror is then refreshed and the observation of the new record starts
//! over.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use gix::ObjectId;

use super::claim_record::Held;
use super::Store;
use crate::context::{Context, Tick};
use crate::ids::ClaimKey;
use crate::refs;

const HEADER: &str = "leases v1";

/// What this clone knows of another holder's lease on a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The lease its holder took: `expires_at − refreshed_at`, both by the holder's clock.
    pub length: Duration,
    /// How long this clone has seen this very record at the claim ref, by its own clock.
    pub unchanged_for: Duration,
    /// The holder is a process of this machine (same host, same boot) that no longer exists:
    /// it will never refresh nor release the claim. Judged only for holders that are the
    /// process that wrote the record (a walk, a singleton's holder); an agent's claim names
    /// the short-lived `git loop` process that took it.
    pub holder_gone: bool,
}

impl Lease {
    /// The holder did not refresh within its lease, as far as this clone has seen.
    pub fn is_stale(&self) -> bool {
        self.unchanged_for >= self.length
    }
}

/// One first sight of a record at a claim ref.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    oid: ObjectId,
    source: String,
    at: Duration,
}

/// This clone's observations of claim refs, loaded once and saved when something new was seen.
/// Every decision on another holder's lease goes through [`Watcher::judge`].
pub struct Watcher {
    path: PathBuf,
    ctx: Context,
    seen: BTreeMap<String, Seen>,
    dirty: bool,
}

impl Watcher {
    /// Load this clone's observations (none if the file is missing or unreadable).
    pub fn load(store: &Store, ctx: &Context) -> Watcher {
        let path = super::layout::Layout::of(store.repo.common_dir()).leases();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut seen = BTreeMap::new();
        let mut lines = text.lines();
        if lines.next() == Some(HEADER) {
            for line in lines {
                let fields: Vec<&str> = line.split('\t').collect();
                let [name, oid, source, at] = fields.as_slice() else { continue };
                let (Ok(oid), Ok(at)) = (ObjectId::from_hex(oid.as_bytes()), at.parse::<u128>()) else { continue };
                let at = Duration::new((at / 1_000_000_000) as u64, (at % 1_000_000_000) as u32);
                seen.insert((*name).to_owned(), Seen { oid, source: (*source).to_owned(), at });
            }
        }
        Watcher { path, ctx: ctx.clone(), seen, dirty: false }
    }

    /// Judge the lease of `held`, the record read at claim `key` (call it after reading the
    /// ref, so the reading taken here is no earlier than the sight). The first sight of a
    /// record is remembered; its lease is measured from then.
    pub fn judge(&mut self, key: &ClaimKey, held: &Held) -> Lease {
        let now = self.ctx.tick();
        let name = refs::claim(key);
        let unchanged_for = match self.seen.get(&name) {
            Some(seen) if seen.oid == held.watched && seen.source == now.source => now.at.saturating_sub(seen.at),
            _ => {
                self.note(name, held.watched, now);
                Duration::ZERO
            }
        };
        let r = &held.record;
        let length = (r.expires_at - r.refreshed_at).to_std().unwrap_or_default();
        // A singleton (a clone's walker, a mission's commander, a target's lander) is held by
        // the process that wrote it, as is a walk's claim on a task.
        let own_process = matches!(key.kind(), super::claim_record::LOCAL_KIND | "fleet" | "lander")
            || crate::ids::is_walker_key(&r.holder);
        Lease { length, unchanged_for, holder_gone: own_process && r.holder_gone_here(&self.ctx) }
    }

    /// Remember that `oid` is at claim `key` now: a record this process has just written.
    pub fn saw(&mut self, key: &ClaimKey, oid: ObjectId) {
        let now = self.ctx.tick();
        self.note(refs::claim(key), oid, now);
    }

    /// Forget claim `key` (released: nothing to watch).
    pub fn forget(&mut self, key: &ClaimKey) {
        self.dirty |= self.seen.remove(&refs::claim(key)).is_some();
    }

    /// Forget every claim whose ref starts with `prefix` and is not in `held` (the claims a
    /// full listing under that prefix found held): the file only holds live observations.
    pub fn keep_only(&mut self, prefix: &str, held: &std::collections::HashSet<String>) {
        let before = self.seen.len();
        self.seen.retain(|name, _| !name.starts_with(prefix) || held.contains(name));
        self.dirty |= self.seen.len() != before;
    }

    fn note(&mut self, name: String, oid: ObjectId, now: Tick) {
        self.seen.insert(name, Seen { oid, source: now.source, at: now.at });
        self.dirty = true;
    }

    /// Write the observations if anything changed (best effort: a lost file only makes a
    /// takeover wait one more lease).
    pub fn save(self) {
        if !self.dirty {
            return;
        }
        let mut text = format!("{HEADER}\n");
        for (name, seen) in &self.seen {
            text.push_str(&format!("{name}\t{}\t{}\t{}\n", seen.oid, seen.source, seen.at.as_nanos()));
        }
        let Some(dir) = self.path.parent() else { return };
        let _ = std::fs::create_dir_all(dir);
        let aside = self.path.with_extension(format!("tmp-{}", crate::ids::random_base32(8)));
        if std::fs::write(&aside, text).and_then(|()| std::fs::rename(&aside, &self.path)).is_err() {
            let _ = std::fs::remove_file(&aside);
        }
    }
}

/// The record this clone last saw at claim `key` (the object id), if it watches one: what a
/// change there must prove to be believed (`claim::vouch`). Read without a clock.
pub fn last_seen(store: &Store, key: &ClaimKey) -> Option<ObjectId> {
    let path = super::layout::Layout::of(store.repo.common_dir()).leases();
    let text = std::fs::read_to_string(path).ok()?;
    let name = refs::claim(key);
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return None;
    }
    lines.find_map(|line| {
        let (ref_name, rest) = line.split_once('\t')?;
        (ref_name == name).then(|| rest.split('\t').next().and_then(|oid| ObjectId::from_hex(oid.as_bytes()).ok()))?
    })
}

/// Judge one claim's lease (see [`Watcher::judge`]), saving what was seen.
pub fn judge(store: &Store, ctx: &Context, key: &ClaimKey, held: &Held) -> Lease {
    let mut watcher = Watcher::load(store, ctx);
    let lease = watcher.judge(key, held);
    watcher.save();
    lease
}

/// The ref prefix of the claims whose keys start with `key_prefix` (`node:` →
/// `refs/loop/claims/node/`).
pub fn ref_prefix(key_prefix: &str) -> String {
    format!("{}{}", refs::CLAIMS, key_prefix.replacen(':', "/", 1))
}
