//! Claims: one ref per key, `refs/loop/claims/<kind>/<name>`, pointing at a JSON blob that
//! records who holds it and until when.
//!
//! Every attempt writes a record with a fresh nonce, so no two attempts ever write the same
//! object: gix's create-if-absent succeeds when the ref already holds exactly the new id, and
//! identical records would let two claimants both "win".
//!
//! Releasing never deletes the ref: it writes a tombstone record (`released_at` set), by
//! compare-and-swap like any other change. A delete racing a concurrent `git pack-refs` can
//! resurrect the ref (pack-refs read it before the delete and writes it back into packed-refs
//! after), while an update cannot (the loose ref shadows packed-refs, and pack-refs only prunes
//! a loose ref still holding what it packed). A tombstone counts as "not held" everywhere.
//!
//! The decision (create, refresh, take over a stale record, or refuse) is made against the
//! record as read, and the write is a compare-and-swap against that same record, so of any
//! number of concurrent claimants exactly one succeeds from a given state; the others read
//! again and decide again. With `loop.remote` set the swap is a push with a lease to the
//! remote (see `remote`), and the local ref is only a mirror of what the remote said.
//!
//! Whether another holder's record is stale is never read off its `expires_at` (the holder's
//! clock, not ours): it is stale once this clone has seen the same record for a whole lease by
//! its own clock (`lease`). Records carry the writer's Lamport clock, which a reader witnesses.

use std::collections::BTreeSet;

use anyhow::{Context as _, Result};
use chrono::Duration;
use gix::ObjectId;

use super::cas::{Cas, Expect};
pub use super::claim_record::{
    check_holder, corrupt_claim, decode, parse, proves, symbolic, Capability, Held, Link, Record, CHAIN, CLAIM_VERSION,
    HOLD_REASON, LOCAL_KIND, MAX_HOLDER, PERSON_PREFIX, TASK_KIND,
};
use super::{lamport, lease, remote, Store};
use crate::context::Context;
use crate::error::Refusal;
use crate::git;
use crate::ids::{random_base32, ClaimKey};
use crate::refs;

/// A claim held for the life of one process — a clone's walker, a mission's commander —
/// and released however that process's work ends (it is released when dropped, so errors
/// and panics release it too).
pub struct Singleton<'s> {
    store: &'s Store,
    ctx: &'s Context,
    key: ClaimKey,
    opts: AcquireOptions,
}

impl Drop for Singleton<'_> {
    fn drop(&mut self) {
        let _ = release(self.store, self.ctx, &self.key, &self.opts.holder, false);
    }
}

/// Read the record behind object `oid` of claim `key` (a claim ref's value, now or once).
pub fn read_at(store: &Store, key: &ClaimKey, oid: ObjectId) -> Result<Held, Refusal> {
    super::claim_record::read_at(&store.repo, key, oid)
}

/// Take `key` for the life of this process: free, already ours, stale, or held by a process
/// of this machine that is gone (taken over at once, not after its lease: that needs no
/// clock). Otherwise `Err` with the live holder, for the caller to name.
pub fn take_singleton<'s>(
    store: &'s Store,
    ctx: &'s Context,
    key: &ClaimKey,
    opts: AcquireOptions,
) -> Result<Result<Singleton<'s>, Held>> {
    match acquire(store, ctx, key, &opts)? {
        Acquire::Acquired(_) | Acquire::Refreshed(_) | Acquire::TookOver { .. } => {}
        Acquire::HeldByOther(held) => {
            let taken = lease::judge(store, ctx, key, &held).holder_gone
                && matches!(take_over(store, ctx, key, &held, &opts)?, Acquire::TookOver { .. });
            if !taken {
                return Ok(Err(held));
            }
        }
    }
    Ok(Ok(Singleton { store, ctx, key: key.clone(), opts }))
}

/// How `acquire` went.
#[derive(Debug, Clone)]
pub enum Acquire {
    /// The claim was free and is ours now.
    Acquired(Held),
    /// We held it already; the lease is refreshed.
    Refreshed(Held),
    /// Its holder had not refreshed it for a whole lease, as this clone watched; it is ours now.
    TookOver { held: Held, previous: Box<Record> },
    /// Someone else holds it, and this clone has not yet seen it unchanged for a whole lease.
    HeldByOther(Held),
}

/// What `acquire` needs besides the key.
#[derive(Debug, Clone)]
pub struct AcquireOptions {
    pub holder: String,
    pub ttl: Duration,
    pub reason: Option<String>,
    pub session: Option<String>,
}

/// Read claim `key`: `None` when nobody holds it (never claimed, or released).
pub fn read(store: &Store, key: &ClaimKey) -> Result<Option<Held>> {
    Ok(read_record(store, key)?.filter(|held| !held.record.is_released()))
}

/// Read claim `key` as its arbiter has it now: with `loop.remote`, the remote's record is
/// fetched into the local mirror first (a holder paused past its lease learns that it was
/// taken over on another clone); without one, the local ref.
///
/// A remote that does not answer is asked again, after a growing backoff (at most
/// [`CONFIRM_STEP`] apart), for up to [`CONFIRM_PATIENCE`] or until the process is
/// interrupted: a walk cut off from its remote waits here, its session's work committed, to
/// learn whether the claim is still its own before it closes the task (a claim lost meanwhile
/// makes the work a kept try; one still held closes as it would have).
pub fn read_confirmed(store: &Store, key: &ClaimKey) -> Result<Option<Held>> {
    if let Some(remote_name) = arbiter_for(store, key) {
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            match remote::refresh_mirror(store, &remote_name, &refs::claim(key)) {
                Ok(_) => break,
                Err(err)
                    if remote::no_answer(&err).is_some()
                        && started.elapsed() < CONFIRM_PATIENCE
                        && !gix::interrupt::is_triggered() =>
                {
                    attempt += 1;
                    std::thread::sleep(remote::backoff(attempt).min(CONFIRM_STEP));
                }
                Err(err) => return Err(err),
            }
        }
    }
    read(store, key)
}

/// How long `read_confirmed` waits for a remote that does not answer.
pub const CONFIRM_PATIENCE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The longest wait between two of `read_confirmed`'s attempts.
pub const CONFIRM_STEP: std::time::Duration = std::time::Duration::from_secs(5);

/// Read claim `key`'s record as it is, tombstones included (what a compare-and-swap expects).
/// The record's clock is witnessed: whatever this clone writes next sorts after its writer's.
pub fn read_record(store: &Store, key: &ClaimKey) -> Result<Option<Held>> {
    let name = refs::claim(key);
    let target = match store.find_ref_settled(&name) {
        Ok(None) => None,
        Ok(Some(git::Found::Direct(oid))) => Some(oid),
        // A symbolic claim ref would read as free, and every claim on it lose its swap.
        Ok(Some(git::Found::Symbolic(to))) => return Err(corrupt_claim(key, symbolic(&to)).into()),
        Err(err) => return Err(corrupt_claim(key, format!("the ref cannot be read: {:#}", err.root_cause())).into()),
    };
    match target {
        None => Ok(None),
        Some(oid) => {
            let held = vouch(store, key, read_at(store, key, oid)?);
            lamport::witness(store, held.record.lamport.unwrap_or(0))?;
            Ok(Some(held))
        }
    }
}

/// The record that counts at claim `key` when its ref holds `raw`: `raw` itself, unless this
/// clone last saw a live, locked record of the same holder there (`lease::last_seen`) that
/// `raw` — a change in that holder's name — does not prove (`proves`): a change made without
/// the holder's capability, which a remote without git-loop's hook let through. The record seen
/// then stands, as live as this clone's watch of it says (its takeover waits a lease from when
/// it was first seen, as any), with the ref's real value to compare-and-swap against.
pub fn vouch(store: &Store, key: &ClaimKey, raw: Held) -> Held {
    let Some(seen) = lease::last_seen(store, key).filter(|seen| *seen != raw.oid) else { return raw };
    let Ok(before) = read_at(store, key, seen) else { return raw };
    if before.record.holder != raw.record.holder || proves(&before.record, &raw.record).is_ok() {
        return raw;
    }
    Held { record: before.record, oid: raw.oid, watched: before.oid }
}

/// The clone's claim secret (`.git/loop/claim-secret`: 64 hex digits, made on first use,
/// never in a session's directory or a worktree): what only this clone's holders can make
/// capability tokens from.
fn secret(store: &Store) -> Result<String> {
    let path = store.layout()?.claim_secret();
    if let Ok(text) = std::fs::read_to_string(&path) {
        if text.trim().len() == 64 {
            return Ok(text.trim().to_owned());
        }
    }
    let made: String = crate::ids::random_bytes(32).iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("could not create '{}'", dir.display()))?;
    }
    let aside = path.with_extension(format!("tmp-{}", random_base32(8)));
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&aside)
            .with_context(|| format!("could not create '{}'", aside.display()))?;
        writeln!(file, "{made}").with_context(|| format!("could not write '{}'", aside.display()))?;
    }
    // Never over another process's: the first one made is the clone's.
    let linked = std::fs::hard_link(&aside, &path);
    let _ = std::fs::remove_file(&aside);
    match linked {
        Ok(()) => Ok(made),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("could not read '{}'", path.display()))?;
            Ok(text.trim().to_owned())
        }
        Err(err) => Err(err).with_context(|| format!("could not write '{}'", path.display())),
    }
}

/// The token of `round` on `holder`'s chain `chain` of claim `key`, made from this clone's
/// secret (see `Capability`).
fn token(secret: &str, key: &ClaimKey, holder: &str, chain: &str, round: u32) -> String {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(format!("git-loop claim capability v1\n{secret}\n{key}\n{holder}\n{chain}\n").as_bytes());
    let mut token = hasher.try_finalize().expect("SHA-1 is always computed");
    for _ in round..CHAIN {
        token = super::claim_record::hash_token(&token);
    }
    token.to_hex().to_string()
}

/// A claim record of `holder` that this clone did not make cannot be changed in its name here.
#[derive(Debug)]
struct NotOurs;

/// The capability of a new record of `holder` at `key` replacing `previous` (as read, a
/// tombstone included; `None`: the claim was never taken). `open`: it locks nothing further (a
/// tombstone, a hold, a person's claim). A record of the same holder that `previous` locks
/// continues its chain (a new chain once one is spent), which only the clone that made the chain
/// can do (`NotOurs` otherwise); any other starts a chain, naming the last link of `previous`'s
/// (`from`), so a clone that saw an earlier record of the chain can tell that it was released.
fn successor(
    store: &Store,
    key: &ClaimKey,
    holder: &str,
    previous: Option<&Record>,
    open: bool,
) -> Result<std::result::Result<Capability, NotOurs>> {
    let secret = secret(store)?;
    let start = |from: Option<Link>| {
        let chain = random_base32(12);
        let token = token(&secret, key, holder, &chain, 0);
        Capability { chain, round: 0, token, open, from }
    };
    let link = |c: &Capability| Link { chain: c.chain.clone(), round: c.round, token: c.token.clone() };
    let Some(previous) = previous else { return Ok(Ok(start(None))) };
    let lock = match &previous.capability {
        Some(lock) if previous.locks() && previous.holder == holder => lock,
        other => return Ok(Ok(start(other.as_ref().map(link)))),
    };
    if token(&secret, key, holder, &lock.chain, lock.round) != lock.token {
        return Ok(Err(NotOurs));
    }
    let next = lock.round + 1;
    if open || next < CHAIN {
        let token = token(&secret, key, holder, &lock.chain, next);
        return Ok(Ok(Capability { chain: lock.chain.clone(), round: next, token, open, from: None }));
    }
    // The chain is spent: its last link opens a new one.
    let last = Link { chain: lock.chain.clone(), round: CHAIN, token: token(&secret, key, holder, &lock.chain, CHAIN) };
    Ok(Ok(start(Some(last))))
}

/// Whether a record of `holder` with `reason` locks nothing further: a person's claim (a
/// take-over, released by whoever reopens the task) or a hold on a closed task (park
/// exclusion, released by a reopen on any clone).
fn opens(holder: &str, reason: Option<&str>) -> bool {
    holder.starts_with(PERSON_PREFIX) || reason.is_some_and(|r| r.starts_with(HOLD_REASON))
}

/// Take claim `key` for `opts.holder`: create it, refresh our own, or take over one this clone
/// has seen unchanged for a whole lease (`lease`).
pub fn acquire(store: &Store, ctx: &Context, key: &ClaimKey, opts: &AcquireOptions) -> Result<Acquire> {
    acquire_with(store, ctx, key, opts, &BTreeSet::new())
}

/// `acquire`, and with `loop.remote` publish `riders` (refs this clone changed) in the same
/// atomic push as the claim: what a walk does when it keeps a closed task's claim, so that
/// the task's new state is never seen without the claim that goes with it.
pub fn acquire_with(
    store: &Store,
    ctx: &Context,
    key: &ClaimKey,
    opts: &AcquireOptions,
    riders: &BTreeSet<String>,
) -> Result<Acquire> {
    if let Some(reason) = &opts.reason {
        super::limits::check("the claim's reason", reason, super::limits::MESSAGE)?;
    }
    let name = refs::claim(key);
    let arbiter = arbiter_for(store, key);
    let mut watcher = lease::Watcher::load(store, ctx);
    // With a remote arbiter the local ref is only a mirror: before refusing, make sure the
    // record we would refuse on is still the remote's (or was read from it a moment ago). (A
    // takeover needs no such check: it is leased on exactly the record watched, so an old
    // mirror only makes the push fail.)
    let mut confirmed = arbiter.is_none();
    let acquired = super::cas::until_settled(&format!("claim '{key}'"), ctx.pid, || {
        let raw = read_record(store, key)?;
        let expect = Expect::from_current(raw.as_ref().map(|h| h.oid));
        let seen = raw.as_ref().and_then(|h| h.record.lamport).unwrap_or(0);
        let raw_record = raw.as_ref().map(|h| h.record.clone());
        let current = raw.filter(|h| !h.record.is_released());
        let now = ctx.now();
        let (acquired_at, previous) = match &current {
            None => (now, None),
            Some(held) if held.record.holder == opts.holder => (held.record.acquired_at, None),
            Some(held) if watcher.judge(key, held).is_stale() => (now, Some(held.record.clone())),
            Some(_) if !confirmed && !remote::mirrored_recently(store, &name) => {
                remote::refresh_mirror(store, arbiter.as_deref().expect("not confirmed only with an arbiter"), &name)?;
                confirmed = true;
                return Ok(None);
            }
            Some(held) => return Ok(Some(Acquire::HeldByOther(held.clone()))),
        };
        // A refresh without a reason keeps the one given when the claim was taken.
        let reason = opts.reason.clone().or_else(|| {
            current.as_ref().filter(|h| h.record.holder == opts.holder).and_then(|h| h.record.reason.clone())
        });
        let replaced = raw_record.as_ref();
        let capability = match successor(store, key, &opts.holder, replaced, opens(&opts.holder, reason.as_deref()))? {
            Ok(capability) => capability,
            Err(NotOurs) => return Err(not_ours(key, &opts.holder).into()),
        };
        let record = Record {
            version: CLAIM_VERSION,
            key: key.to_string(),
            holder: opts.holder.clone(),
            session: opts.session.clone(),
            reason,
            host: ctx.host.clone(),
            pid: ctx.pid,
            boot_id: ctx.boot_id.clone(),
            nonce: random_base32(16),
            acquired_at,
            refreshed_at: now,
            expires_at: now + opts.ttl,
            took_over_from: previous.as_ref().map(|p| p.holder.clone()),
            released_at: None,
            lamport: Some(lamport::tick(store, seen)?),
            user: writer_user(store),
            capability: Some(capability),
        };
        let oid = git::write_blob(&store.repo, &serde_json::to_vec(&record)?)?;
        // Taking a task's claim through the remote: lease the push on the task's record as our
        // mirror last saw it, so that a claim won is known to come with a current record (the
        // result of whoever held the claim before arrives in the same push as their release),
        // and the winner needs no fetch of it (`backlog::open_after_claim`).
        let taking = current.is_none() || previous.is_some();
        let task_check = match &arbiter {
            Some(remote_name) if taking && riders.is_empty() && key.kind() == TASK_KIND => {
                let task = format!("{}{}", refs::TASKS, key.name());
                remote::mirrored(store, remote_name, std::slice::from_ref(&task))?.remove(&task).map(|id| (task, id))
            }
            _ => None,
        };
        let outcome = match (&arbiter, &task_check) {
            (Some(remote_name), Some(check)) => {
                remote::swap_checked(store, remote_name, &name, expect, Some(oid), std::slice::from_ref(check))?
            }
            _ => swap(store, ctx, arbiter.as_deref(), &name, expect, Some(oid), riders)?,
        };
        if let (Cas::Lost { actual }, Some((task, _)), Some(remote_name)) = (&outcome, &task_check, &arbiter) {
            if *actual == Option::<ObjectId>::from(expect) {
                // The claim was as we saw it; the task's record was not: bring it here (the
                // board then shows whether the task is still open), and try again.
                super::sync::pull(store, ctx, remote_name, BTreeSet::from([task.clone()]))?;
            }
        }
        match outcome {
            Cas::Applied => {
                if let Some((task, _)) = &task_check {
                    store.note_confirmed(task);
                }
                // This clone has seen our record since it was written.
                watcher.saw(key, oid);
                let held = Held { record, oid, watched: oid };
                Ok(Some(match (current, previous) {
                    (None, _) => Acquire::Acquired(held),
                    (Some(_), Some(previous)) => Acquire::TookOver { held, previous: Box::new(previous) },
                    (Some(_), None) => Acquire::Refreshed(held),
                }))
            }
            Cas::Lost { .. } => Ok(None),
        }
    });
    watcher.save();
    acquired
}

/// How `release` went.
#[derive(Debug, Clone)]
pub enum Release {
    Released(Record),
    /// Nobody held it.
    NotHeld,
    /// Its record was corrupt and has been removed (`force`).
    RemovedCorrupt,
    /// Someone else holds it.
    HeldByOther(Record),
}

/// Release claim `key` held by `holder`. With `force`, also removes a corrupt record or a
/// stale one of another holder (one this clone has seen unchanged for a whole lease; never a
/// live one).
pub fn release(store: &Store, ctx: &Context, key: &ClaimKey, holder: &str, force: bool) -> Result<Release> {
    release_with(store, ctx, key, holder, force, &BTreeSet::new())
}

/// `release`, and with `loop.remote` publish `riders` (refs this clone changed: a task's
/// record, branches, notes, journal) in the same atomic push as the release. Whoever sees the
/// claim free then also sees what its holder did with the task: a task done anywhere is
/// never picked up again.
pub fn release_with(
    store: &Store,
    ctx: &Context,
    key: &ClaimKey,
    holder: &str,
    force: bool,
    riders: &BTreeSet<String>,
) -> Result<Release> {
    let name = refs::claim(key);
    let arbiter = arbiter_for(store, key);
    if arbiter.is_some() {
        // The local mirror may be behind the remote (another clone's claim, or our own push
        // whose outcome we never learned): decide on the remote's current record.
        remote::refresh_mirror(store, arbiter.as_deref().expect("checked"), &name)?;
    }
    super::cas::until_settled(&format!("claim '{key}'"), ctx.pid, || {
        let current = match read(store, key) {
            Ok(current) => current,
            Err(err)
                if force
                    && crate::error::find_refusal(&err).is_some_and(|r| r.class == crate::error::Class::Corrupt) =>
            {
                let Some(oid) = git::ref_target(&store.repo, &name).ok().flatten() else {
                    return remove_unreadable_ref(store, &name).map(Some);
                };
                let tombstone = tombstone(store, ctx, key, "(corrupt record)", None)?;
                return Ok(
                    match swap(store, ctx, arbiter.as_deref(), &name, Expect::Is(oid), Some(tombstone), riders)? {
                        Cas::Applied => Some(Release::RemovedCorrupt),
                        Cas::Lost { .. } => None,
                    },
                );
            }
            Err(err) => return Err(err),
        };
        let Some(held) = current else {
            publish_riders(store, ctx, arbiter.as_deref(), riders)?;
            return Ok(Some(Release::NotHeld));
        };
        if held.record.holder != holder && !(force && lease::judge(store, ctx, key, &held).is_stale()) {
            publish_riders(store, ctx, arbiter.as_deref(), riders)?;
            return Ok(Some(Release::HeldByOther(held.record)));
        }
        let tombstone = tombstone(store, ctx, key, &held.record.holder, Some(&held.record))?;
        Ok(match swap(store, ctx, arbiter.as_deref(), &name, Expect::Is(held.oid), Some(tombstone), riders)? {
            Cas::Applied => {
                let mut watcher = lease::Watcher::load(store, ctx);
                watcher.forget(key);
                watcher.save();
                Some(Release::Released(held.record))
            }
            Cas::Lost { .. } => None,
        })
    })
}

/// The remote that decides `key`, if any. Walker singletons are local to a clone: one walker
/// per clone, whatever other clones do, and never exchanged by `sync`.
pub fn arbiter_for(store: &Store, key: &ClaimKey) -> Option<String> {
    if key.kind() == LOCAL_KIND {
        None
    } else {
        store.arbiter()
    }
}

/// Take over the claim `held` (as read) whatever its lease says, by compare-and-swap against
/// exactly that record: for a holder known to be dead (its process is gone).
pub fn take_over(store: &Store, ctx: &Context, key: &ClaimKey, held: &Held, opts: &AcquireOptions) -> Result<Acquire> {
    let now = ctx.now();
    let lamport = lamport::tick(store, held.record.lamport.unwrap_or(0))?;
    let open = opens(&opts.holder, opts.reason.as_deref());
    let capability = match successor(store, key, &opts.holder, Some(&held.record), open)? {
        Ok(capability) => capability,
        Err(NotOurs) => return Err(not_ours(key, &opts.holder).into()),
    };
    let record = Record {
        version: CLAIM_VERSION,
        key: key.to_string(),
        holder: opts.holder.clone(),
        session: opts.session.clone(),
        reason: opts.reason.clone(),
        host: ctx.host.clone(),
        pid: ctx.pid,
        boot_id: ctx.boot_id.clone(),
        nonce: random_base32(16),
        acquired_at: now,
        refreshed_at: now,
        expires_at: now + opts.ttl,
        took_over_from: Some(held.record.holder.clone()),
        released_at: None,
        lamport: Some(lamport),
        user: writer_user(store),
        capability: Some(capability),
    };
    let oid = git::write_blob(&store.repo, &serde_json::to_vec(&record)?)?;
    let name = refs::claim(key);
    let riders = BTreeSet::new();
    match swap(store, ctx, arbiter_for(store, key).as_deref(), &name, Expect::Is(held.oid), Some(oid), &riders)? {
        Cas::Applied => {
            let mut watcher = lease::Watcher::load(store, ctx);
            watcher.saw(key, oid);
            watcher.save();
            Ok(Acquire::TookOver { held: Held { record, oid, watched: oid }, previous: Box::new(held.record.clone()) })
        }
        Cas::Lost { .. } => match read(store, key)? {
            Some(now_held) => Ok(Acquire::HeldByOther(now_held)),
            None => acquire(store, ctx, key, opts),
        },
    }
}

/// Write the tombstone that releases `key` (held by `holder`, as recorded in `was`).
fn tombstone(store: &Store, ctx: &Context, key: &ClaimKey, holder: &str, was: Option<&Record>) -> Result<ObjectId> {
    let now = ctx.now();
    // Proving the record it ends when this clone holds its chain; else (a stale claim of
    // another clone's, released by force) only naming it, which a remote's hook lets through
    // once the claim has expired, and no clone takes for a release before it has gone stale.
    let capability = match successor(store, key, holder, was, true)? {
        Ok(capability) => capability,
        Err(NotOurs) => {
            let from = was.and_then(|r| r.capability.as_ref()).map(|c| Link {
                chain: c.chain.clone(),
                round: c.round,
                token: c.token.clone(),
            });
            let chain = random_base32(12);
            Capability { token: token(&secret(store)?, key, holder, &chain, 0), chain, round: 0, open: true, from }
        }
    };
    let record = Record {
        version: CLAIM_VERSION,
        key: key.to_string(),
        holder: holder.to_owned(),
        session: was.and_then(|r| r.session.clone()),
        reason: was.and_then(|r| r.reason.clone()),
        host: ctx.host.clone(),
        pid: ctx.pid,
        boot_id: ctx.boot_id.clone(),
        nonce: random_base32(16),
        acquired_at: was.map_or(now, |r| r.acquired_at),
        refreshed_at: now,
        expires_at: now,
        took_over_from: None,
        released_at: Some(now),
        lamport: Some(lamport::tick(store, was.and_then(|r| r.lamport).unwrap_or(0))?),
        user: writer_user(store),
        capability: Some(capability),
    };
    git::write_blob(&store.repo, &serde_json::to_vec(&record)?)
}

/// A live claim of `holder` that another clone took (its capability is that clone's).
fn not_ours(key: &ClaimKey, holder: &str) -> Refusal {
    crate::error::refused(format!(
        "claim '{key}' is held by '{holder}' in another clone: only the clone that took it can refresh or release it"
    ))
    .hint(format!("release it there, or once it is stale here take it over ('git loop claim release {key} --force')"))
}

/// The name this clone's writer has on the shared remote (`loop.user`), for its records.
fn writer_user(store: &Store) -> Option<String> {
    store.settings().user()
}

/// A loose ref file that is not even a ref (empty, garbage): remove the file itself.
fn remove_unreadable_ref(store: &Store, name: &str) -> Result<Release> {
    let path = store.repo.common_dir().join(name);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(Release::RemovedCorrupt),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Release::NotHeld),
        Err(err) => Err(err).with_context(|| format!("could not remove '{}'", path.display())),
    }
}

/// Publish `riders` alone, when there is no claim change for them to ride with.
fn publish_riders(store: &Store, ctx: &Context, arbiter: Option<&str>, riders: &BTreeSet<String>) -> Result<()> {
    if let (Some(remote_name), false) = (arbiter, riders.is_empty()) {
        super::sync::publish(store, ctx, remote_name, riders.clone(), None)?;
    }
    Ok(())
}

/// Write or delete claim ref `name`: locally by compare-and-swap, or through the arbiter —
/// with `riders` published in the same atomic push when there are any.
fn swap(
    store: &Store,
    ctx: &Context,
    arbiter: Option<&str>,
    name: &str,
    expect: Expect,
    new: Option<ObjectId>,
    riders: &BTreeSet<String>,
) -> Result<Cas> {
    match arbiter {
        Some(remote_name) if !riders.is_empty() => {
            let change = super::sync::ClaimChange { name: name.to_owned(), expect: expect.into(), new };
            let report = super::sync::publish(store, ctx, remote_name, riders.clone(), Some(change))?;
            Ok(match report.claim {
                Some(super::sync::ClaimOutcome::Lost { actual }) => Cas::Lost { actual },
                _ => Cas::Applied,
            })
        }
        Some(remote_name) => remote::swap(store, remote_name, name, expect, new),
        None => match (expect, new) {
            (expect, Some(new)) => super::cas::update(store, name, expect, new, "loop: claim"),
            (Expect::Is(old), None) => super::cas::delete(store, name, old),
            (Expect::Absent, None) => Ok(Cas::Applied),
        },
    }
}

/// One row of `claim list`.
#[derive(Debug, Clone)]
pub enum Listed {
    Claim {
        key: ClaimKey,
        held: Box<Held>,
    },
    /// A claim ref whose record cannot be read.
    Corrupt {
        name: String,
        problem: String,
    },
}

/// Every claim whose key starts with `prefix` (e.g. `node:`), in key order.
pub fn list(store: &Store, prefix: &str) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    for listed in git::refs_prefixed(&store.repo, refs::CLAIMS).context("could not list claim refs")? {
        let (name, target) = match listed {
            git::Listed::Ref { name, target } => (name, target),
            git::Listed::Unreadable(git::Unreadable::Ref(name)) => {
                let problem = match refs::claim_key_of(&name) {
                    Some(key) => corrupt_claim(&key, "the ref file cannot be parsed").message,
                    None => format!("claim ref '{name}' cannot be parsed"),
                };
                out.push(Listed::Corrupt { name, problem });
                continue;
            }
            // Not a claim's fault: said once, as what it is.
            git::Listed::Unreadable(git::Unreadable::PackedRefs(line)) => {
                let problem = line.describe(&git::packed::path(&store.repo));
                out.push(Listed::Corrupt { name: git::packed::NAME.to_owned(), problem });
                continue;
            }
        };
        let Some(key) = refs::claim_key_of(&name) else {
            out.push(Listed::Corrupt { name, problem: "not a valid claim key".into() });
            continue;
        };
        if !key.to_string().starts_with(prefix) {
            continue;
        }
        let oid = match target {
            git::Found::Direct(oid) => oid,
            git::Found::Symbolic(to) => {
                out.push(Listed::Corrupt { problem: corrupt_claim(&key, symbolic(&to)).message, name });
                continue;
            }
        };
        match read_at(store, &key, oid) {
            Ok(held) if held.record.is_released() => {}
            Ok(held) => out.push(Listed::Claim { key, held: Box::new(held) }),
            Err(refusal) => out.push(Listed::Corrupt { name, problem: refusal.message }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    // The lease rule, through the claims it judges (`lease`): a claim is stale only once this
    // clone has watched it unchanged for its whole lease by its own clock.
    use std::time::Duration;

    use super::lease::judge;
    use super::*;
    use crate::context::Clock;
    use crate::store::claim;

    fn repo() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).output().expect("git");
        assert!(out.status.success());
        let store = Store::open(&Context::for_tests(), dir.path()).expect("open");
        (dir, store)
    }

    fn at(ctx: &Context, time: &str) -> Context {
        Context { clock: Clock::Fixed(time.parse().expect("a time")), ..ctx.clone() }
    }

    fn opts(holder: &str, minutes: i64) -> AcquireOptions {
        AcquireOptions { holder: holder.into(), ttl: chrono::Duration::minutes(minutes), reason: None, session: None }
    }

    /// The lease rule: another holder's record is stale only once this clone has seen it
    /// unchanged for its whole lease by its own clock. The holder's own times (an hour off)
    /// play no part; a refresh starts the watch over.
    #[test]
    fn a_claim_is_stale_only_after_being_seen_unchanged_for_its_whole_lease() {
        let (_dir, store) = repo();
        let ours = Context::for_tests();
        // The holder's clock runs an hour fast: its record "expires" at 13:30 by its clock.
        let fast = Context { pid: 1, ..at(&ours, "2026-03-01T13:00:00Z") };
        let key: ClaimKey = "node:t-lease".parse().expect("key");
        claim::acquire(&store, &fast, &key, &opts("fast", 30)).expect("acquire");
        // This clone has not looked at it yet (the holder's write was on "another clone").
        std::fs::remove_file(store.layout().expect("dir").leases()).expect("forget the holder's sight");
        let held = claim::read(&store, &key).expect("read").expect("held");
        let look = |time: &str| judge(&store, &at(&ours, time), &key, &held);
        let first = look("2026-03-01T14:00:00Z");
        assert_eq!((first.length, first.unchanged_for), (Duration::from_secs(1800), Duration::ZERO));
        assert!(!first.is_stale(), "first seen now: live, though 14:00 is past its 13:30 expiry");
        assert!(!look("2026-03-01T14:29:59Z").is_stale(), "a second short of a lease: live");
        let stale = look("2026-03-01T14:30:00Z");
        assert_eq!((stale.unchanged_for, stale.is_stale()), (Duration::from_secs(1800), true));

        // A refresh (a new record) starts the watch over.
        claim::acquire(&store, &fast, &key, &opts("fast", 30)).expect("refresh");
        std::fs::remove_file(store.layout().expect("dir").leases()).expect("forget the holder's sight");
        let refreshed = claim::read(&store, &key).expect("read").expect("held");
        assert_ne!(refreshed.oid, held.oid, "every refresh writes a new record");
        let lease = judge(&store, &at(&ours, "2026-03-01T14:31:00Z"), &key, &refreshed);
        assert_eq!((lease.unchanged_for, lease.is_stale()), (Duration::ZERO, false));
    }

    /// A holder whose clock runs an hour slow wrote a record that "expired" an hour before it
    /// was written by ours: it is live all the same, and taking it over is refused until a
    /// lease has passed here.
    #[test]
    fn a_slow_holders_claim_is_not_taken_over_before_its_lease_has_passed_here() {
        let (_dir, store) = repo();
        let ours = Context::for_tests();
        let slow = Context { pid: 1, ..at(&ours, "2026-03-01T11:00:00Z") };
        let key: ClaimKey = "node:t-slow".parse().expect("key");
        claim::acquire(&store, &slow, &key, &opts("slow", 30)).expect("acquire");
        std::fs::remove_file(store.layout().expect("dir").leases()).expect("forget the holder's sight");
        let try_at = |time: &str| claim::acquire(&store, &at(&ours, time), &key, &opts("taker", 30)).expect("acquire");
        assert!(matches!(try_at("2026-03-01T12:00:00Z"), claim::Acquire::HeldByOther(_)));
        assert!(matches!(try_at("2026-03-01T12:29:00Z"), claim::Acquire::HeldByOther(_)));
        match try_at("2026-03-01T12:30:00Z") {
            claim::Acquire::TookOver { previous, .. } => assert_eq!(previous.holder, "slow"),
            other => panic!("a lease after the first sight, it is stale: {other:?}"),
        }
    }

    /// Observations from another clock source (another boot, a pinned clock) do not count.
    #[test]
    fn a_sight_on_another_clock_counts_as_none() {
        let (_dir, store) = repo();
        let ctx = Context::for_tests();
        let key: ClaimKey = "node:t-boot".parse().expect("key");
        claim::acquire(&store, &Context { pid: 1, ..ctx.clone() }, &key, &opts("h", 1)).expect("acquire");
        let held = claim::read(&store, &key).expect("read").expect("held");
        let path = store.layout().expect("dir").leases();
        let text = std::fs::read_to_string(&path).expect("the writer's sight was saved");
        assert!(text.contains("\tpinned\t"), "{text}");
        std::fs::write(&path, text.replace("\tpinned\t", "\tboot:other\t").replace("\t1772366400000000000", "\t0"))
            .expect("write");
        let lease = judge(&store, &at(&ctx, "2026-03-01T13:00:00Z"), &key, &held);
        assert_eq!(lease.unchanged_for, Duration::ZERO, "seen on another clock: first sight now");
    }

    /// Every change of a live claim in its holder's name proves the record before it: a
    /// refresh continues its capability's chain, a release ends it; a spent chain starts a new
    /// one from its last link.
    #[test]
    fn refreshes_and_releases_carry_the_holders_capability() {
        let (_dir, store) = repo();
        let ctx = Context::for_tests();
        let key: ClaimKey = "node:t-cap".parse().expect("key");
        let first = match claim::acquire(&store, &ctx, &key, &opts("h", 30)).expect("acquire") {
            claim::Acquire::Acquired(held) => held.record,
            other => panic!("free: {other:?}"),
        };
        let cap = first.capability.clone().expect("a new claim has a capability");
        assert_eq!((cap.round, cap.open, first.locks()), (0, false, true));
        let refreshed = match claim::acquire(&store, &ctx, &key, &opts("h", 30)).expect("refresh") {
            claim::Acquire::Refreshed(held) => held.record,
            other => panic!("ours: {other:?}"),
        };
        assert_eq!(proves(&first, &refreshed), Ok(()), "a refresh proves the record it replaces");
        assert_eq!(refreshed.capability.as_ref().map(|c| (c.chain.as_str(), c.round)), Some((cap.chain.as_str(), 1)));
        claim::release(&store, &ctx, &key, "h", false).expect("release");
        let tombstone = claim::read_record(&store, &key).expect("read").expect("a tombstone");
        assert_eq!(proves(&refreshed, &tombstone.record), Ok(()), "a release proves it too");
        assert!(!tombstone.record.locks());

        // Near the end of a chain: the next refresh starts another, linked to the last.
        let near = {
            let mut record = refreshed.clone();
            let c = record.capability.as_mut().expect("a capability");
            c.round = CHAIN - 1;
            c.token = token(&secret(&store).expect("secret"), &key, "h", &c.chain, CHAIN - 1);
            record
        };
        let next = successor(&store, &key, "h", Some(&near), false).expect("successor").expect("ours");
        assert_ne!(next.chain, near.capability.as_ref().expect("a capability").chain);
        let mut later = near.clone();
        later.capability = Some(next);
        assert_eq!(proves(&near, &later), Ok(()));
        // Another clone (another secret) cannot continue this clone's chain.
        let (_other_dir, other) = repo();
        assert!(successor(&other, &key, "h", Some(&near), false).expect("successor").is_err());
    }

    /// A release in the holder's name that does not prove its record — pushed by someone who
    /// knew only the holder's name — is not believed: the record seen before it stands, and its
    /// holder's next refresh restores the claim.
    #[test]
    fn a_forged_release_is_not_believed_and_the_holders_refresh_restores_the_claim() {
        let (_dir, store) = repo();
        let ctx = Context::for_tests();
        let key: ClaimKey = "node:t-forged".parse().expect("key");
        claim::acquire(&store, &ctx, &key, &opts("w-holder", 30)).expect("acquire");
        let live = claim::read(&store, &key).expect("read").expect("held");
        let mut forged = live.record.clone();
        forged.released_at = Some(forged.refreshed_at);
        forged.nonce = "forged".into();
        forged.capability = None;
        let forged_id = git::write_blob(&store.repo, &serde_json::to_vec(&forged).expect("json")).expect("blob");
        let name = refs::claim(&key);
        let applied = super::super::cas::update(&store, &name, Expect::Is(live.oid), forged_id, "forge").expect("cas");
        assert_eq!(applied, Cas::Applied);
        let read = claim::read(&store, &key).expect("read").expect("still held");
        assert_eq!(
            (read.record.nonce.as_str(), read.oid, read.watched),
            (live.record.nonce.as_str(), forged_id, live.oid)
        );
        // Nobody else takes it...
        assert!(matches!(
            claim::acquire(&store, &Context { pid: 2, ..ctx.clone() }, &key, &opts("w-other", 30)).expect("acquire"),
            claim::Acquire::HeldByOther(_)
        ));
        // ... and its holder's refresh replaces the forgery with a record that proves the last.
        match claim::acquire(&store, &ctx, &key, &opts("w-holder", 30)).expect("refresh") {
            claim::Acquire::Refreshed(held) => assert_eq!(proves(&live.record, &held.record), Ok(())),
            other => panic!("still ours: {other:?}"),
        }
    }

    /// A claim record carries its writer's clock (a tombstone, its releaser's): whoever reads
    /// it next writes after it.
    #[test]
    fn reading_a_claim_record_witnesses_its_writers_clock() {
        let (_dir, store) = crate::store::scratch();
        let ctx = Context::for_tests();
        let key: crate::ids::ClaimKey = "node:t-1".parse().expect("key");
        let opts = crate::store::claim::AcquireOptions {
            holder: "h".into(),
            ttl: chrono::Duration::minutes(1),
            reason: None,
            session: None,
        };
        crate::store::lamport::witness(&store, 30).expect("the releaser's clone has seen 30");
        crate::store::claim::acquire(&store, &ctx, &key, &opts).expect("acquire");
        crate::store::claim::release(&store, &ctx, &key, "h", false).expect("release");
        // Another clone, whose clock is far behind, reads the tombstone.
        let path = store.layout().expect("dir").lamport();
        std::fs::write(&path, format!("{:020}\n", 2)).expect("a clone that has seen little");
        let tombstone = crate::store::claim::read_record(&store, &key).expect("read").expect("a tombstone");
        assert_eq!(tombstone.record.lamport, Some(32), "the releaser's clock: after its acquire at 31");
        assert_eq!(crate::store::lamport::tick(&store, 0).expect("tick"), 33);
    }
}
