//! A claim record — the blob a claim ref points to — and how it is read: the one definition
//! of a readable claim (the verbs in `claim`, the lease watcher in `lease`, `sync`, and the
//! server's pre-receive hook all read through it). docs/storage.md, "Claim record".

use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::{corrupt, Refusal};
use crate::ids::ClaimKey;
use crate::refs;

/// Version of a claim record; readers refuse newer ones. Version 2 added `capability`; a
/// version 1 record (no capability) is read as one that locks nothing.
pub const CLAIM_VERSION: u32 = 2;

/// A claim record: the content of the blob a claim ref points to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    pub key: String,
    pub holder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub host: String,
    pub pid: u32,
    pub boot_id: String,
    /// Unique per attempt: no two attempts write the same object.
    pub nonce: String,
    /// The holder's times, by the holder's clock: only their difference (the lease,
    /// `expires_at − refreshed_at`) decides anything (see `lease`).
    pub acquired_at: DateTime<Utc>,
    pub refreshed_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The holder this record took the claim over from, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub took_over_from: Option<String>,
    /// Set on a tombstone: the claim was released then (by `holder`, who held it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at: Option<DateTime<Utc>>,
    /// The writer's Lamport clock when written (a tombstone: what its releaser had seen), so
    /// the next holder's events sort after the previous one's. Added to version 1; absent on
    /// records written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lamport: Option<u64>,
    /// Who wrote it, as the shared remote knows them (`loop.user`): a server that binds claims
    /// to the people who push them (`loop.bindHolders`, docs/hooks.md) checks it. Added to
    /// version 1; absent where `loop.user` is not set, and on records written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// What proves that a change of this claim comes from its holder (version 2; see
    /// [`Capability`]). Absent: the record locks nothing (version 1, a person's claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<Capability>,
}

/// A claim's capability: a token only its holder can make, without which neither the server's
/// hook nor any clone accepts a refresh, release or tombstone of the live claim in the holder's
/// name (a takeover of an expired claim needs none: it is another holder's new claim).
///
/// The tokens of one acquisition form a hash chain: from a secret seed known only to the
/// holder's clone (`seed`), `token(round) = SHA-1^(CHAIN − round)(seed)`. A record carries the
/// token of its round; its successor carries the next round's token, whose hash is this one's.
/// So every record proves the one before it, and a reader that missed records in between
/// checks the gap by hashing as many times; nobody who sees a token can make the next one
/// (that would take a SHA-1 preimage). When a chain is spent, its last link (`from`) opens the
/// way to a new chain. docs/storage.md ("Claim record") has the format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// The chain's id: random, one per acquisition (and per new chain).
    pub chain: String,
    /// 0 for the chain's first record, one more for each successor.
    pub round: u32,
    /// `SHA-1^(CHAIN − round)(seed)`, 40 hex digits.
    pub token: String,
    /// This record locks nothing further (a tombstone, a hold on a closed task): it proves the
    /// record before it, and anyone may change it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
    /// Where the chain began: the last link of the spent chain it continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Link>,
}

/// One token of a chain, named by chain and round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub chain: String,
    pub round: u32,
    pub token: String,
}

/// How many links a chain has: a holder refreshing every 2 minutes spends one in 34 hours,
/// then starts another (`Capability::from`). Making a chain's first token costs this many
/// SHA-1s (about 0.3 ms).
pub const CHAIN: u32 = 1024;

/// One step down a chain: the SHA-1 of a token's 20 bytes.
pub fn hash_token(token: &gix::ObjectId) -> gix::ObjectId {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(token.as_bytes());
    hasher.try_finalize().expect("SHA-1 of 20 bytes is always computed")
}

/// `token` hashed `times` times.
fn walk_down(mut token: gix::ObjectId, times: u32) -> gix::ObjectId {
    for _ in 0..times {
        token = hash_token(&token);
    }
    token
}

fn parse_token(hex: &str) -> Result<gix::ObjectId, String> {
    gix::ObjectId::from_hex(hex.as_bytes())
        .map_err(|_| format!("its capability token '{}' is not 40 hex digits", hex.escape_debug()))
}

/// Whether `later` (a token of round `later_round`) continues `earlier` (round
/// `earlier_round`) on one chain: hashing it `later_round − earlier_round` times gives it.
fn continues(earlier: &str, earlier_round: u32, later: &str, later_round: u32) -> Result<bool, String> {
    if later_round <= earlier_round || later_round > CHAIN {
        return Ok(false);
    }
    Ok(walk_down(parse_token(later)?, later_round - earlier_round) == parse_token(earlier)?)
}

impl Record {
    /// Whether this record locks its claim: a live record whose capability is not open. Only
    /// a change that proves it (see [`proves`]) may then refresh, release or rewrite it in its
    /// holder's name.
    pub fn locks(&self) -> bool {
        !self.is_released() && self.capability.as_ref().is_some_and(|c| !c.open)
    }
}

/// Whether `next` may replace `current` as a change in `current`'s holder's name (a refresh,
/// a release, a rewrite): yes when `current` locks nothing; else `next`'s capability must
/// continue `current`'s chain (or start a new chain from its last link). `Err` says why not.
pub fn proves(current: &Record, next: &Record) -> Result<(), String> {
    let Some(lock) = current.capability.as_ref().filter(|_| current.locks()) else { return Ok(()) };
    let Some(key) = &next.capability else {
        return Err("it carries no capability, and the live record it replaces is locked by one (only its holder's clone can change it)".into());
    };
    let proven = if key.chain == lock.chain {
        continues(&lock.token, lock.round, &key.token, key.round)?
    } else {
        match &key.from {
            Some(from) if from.chain == lock.chain => continues(&lock.token, lock.round, &from.token, from.round)?,
            _ => false,
        }
    };
    if proven {
        Ok(())
    } else {
        Err("its capability does not continue the live record's (only its holder's clone can change it)".into())
    }
}

impl Record {
    /// A tombstone: released, held by nobody.
    pub fn is_released(&self) -> bool {
        self.released_at.is_some()
    }

    /// Whether the holder was a process of this machine (this host, this boot) that no
    /// longer exists: it will never refresh or release the claim.
    pub fn holder_gone_here(&self, ctx: &Context) -> bool {
        self.host == ctx.host
            && self.boot_id == ctx.boot_id
            && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

/// A claim as found: its record and the object id the ref held.
#[derive(Debug, Clone)]
pub struct Held {
    pub record: Record,
    /// What the claim ref holds (what a compare-and-swap of it expects).
    pub oid: ObjectId,
    /// The object `record` was read from: `oid`, unless the ref holds a change this clone does
    /// not believe (see `claim::vouch`), when it is the record seen before it. A lease is
    /// watched on this.
    pub watched: ObjectId,
}

/// The reason a claim kept on a closed task starts with (park exclusion, `backlog::is_hold`):
/// such a record locks nothing (a reopen on any clone releases it).
pub const HOLD_REASON: &str = "closed";

/// The holder prefix of a person's claim (`person:<email>`, a take-over), which locks nothing.
pub const PERSON_PREFIX: &str = "person:";

/// The claim kind of a task (`node:<task id>`).
pub const TASK_KIND: &str = "node";

/// The claim kind that stays in its clone.
pub const LOCAL_KIND: &str = "walker";

/// The refusal for an unreadable claim record, naming its ref and the repair.
pub fn corrupt_claim(key: &ClaimKey, why: impl std::fmt::Display) -> Refusal {
    corrupt(format!("claim record '{}' is corrupt: {why}", refs::claim(key)))
        .hint(format!("remove it with 'git loop claim release {key} --force'"))
}

/// Why a symbolic claim ref is corrupt: a claim ref holds its record, never another ref.
pub fn symbolic(to: impl std::fmt::Display) -> String {
    format!("it is a symbolic ref (to '{to}'), not a record")
}

/// Parse a claim record blob.
pub fn parse(key: &ClaimKey, bytes: &[u8]) -> Result<Record, Refusal> {
    decode(key, bytes).map_err(|why| corrupt_claim(key, why))
}

/// Decode the record of claim `key` and check it: its version is known and it records that
/// key. `Err` says what is wrong. The one definition of a readable claim record (the server's
/// pre-receive hook uses it too, and adds its policy: docs/hooks.md).
pub fn decode(key: &ClaimKey, bytes: &[u8]) -> Result<Record, String> {
    let record: Record = serde_json::from_slice(bytes).map_err(|err| err.to_string())?;
    if record.version > CLAIM_VERSION {
        return Err(format!("record version {} was written by a newer git-loop", record.version));
    }
    if record.key != key.to_string() {
        return Err(format!("it records key '{}'", record.key.escape_debug()));
    }
    check_holder(&record.holder).map_err(|why| format!("its holder '{}' {why}", record.holder.escape_debug()))?;
    Ok(record)
}

/// The longest holder name, in bytes.
pub const MAX_HOLDER: usize = 256;

/// Whether `holder` can name a claim's holder: not blank, no control characters (it is shown
/// to people and compared by clients), at most [`MAX_HOLDER`] bytes. `Err` says what is wrong
/// with it ("is empty").
pub fn check_holder(holder: &str) -> Result<(), String> {
    if holder.trim().is_empty() {
        return Err("is empty".into());
    }
    if holder.chars().any(char::is_control) {
        return Err("contains a control character".into());
    }
    if holder.len() > MAX_HOLDER {
        return Err(format!("is longer than {MAX_HOLDER} bytes"));
    }
    Ok(())
}

/// Read the record behind object `oid` of claim `key`.
pub(super) fn read_at(repo: &gix::Repository, key: &ClaimKey, oid: ObjectId) -> Result<Held, Refusal> {
    let object = repo.find_object(oid).map_err(|_| corrupt_claim(key, format!("object {oid} is missing")))?;
    if object.kind != gix::object::Kind::Blob {
        return Err(corrupt_claim(key, format!("it points to a {}, not a blob", object.kind)));
    }
    Ok(Held { record: parse(key, &object.data)?, oid, watched: oid })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of holder "h" on round `round` of a chain from `seed`.
    fn link_record(seed: gix::ObjectId, chain: &str, round: u32, open: bool) -> Record {
        let token = walk_down(seed, CHAIN - round).to_hex().to_string();
        let mut record: Record = serde_json::from_value(serde_json::json!({
            "version": 2, "key": "node:t-1", "holder": "h", "host": "x", "pid": 1, "boot_id": "b", "nonce": "n",
            "acquired_at": "2026-03-01T12:00:00Z", "refreshed_at": "2026-03-01T12:00:00Z",
            "expires_at": "2026-03-01T13:00:00Z",
        }))
        .expect("a record");
        record.capability = Some(Capability { chain: chain.into(), round, token, open, from: None });
        if open {
            record.released_at = Some(record.refreshed_at);
        }
        record
    }

    #[test]
    fn a_chain_proves_each_successor_and_gaps_but_no_forgery() {
        let seed = hash_token(&gix::ObjectId::null(gix::hash::Kind::Sha1));
        let at = |round| link_record(seed, "c1", round, false);
        assert_eq!(proves(&at(0), &at(1)), Ok(()), "the next round");
        assert_eq!(proves(&at(3), &at(9)), Ok(()), "a reader that missed five records");
        assert!(proves(&at(4), &at(2)).is_err(), "an earlier round is not a successor");
        assert!(proves(&at(4), &at(4)).is_err(), "nor the same round");
        // Whoever saw round 4 knows its token, and every earlier one, but no later one.
        let mut forged = at(5);
        forged.capability.as_mut().expect("a capability").token = at(4).capability.expect("a capability").token;
        assert!(proves(&at(4), &forged).is_err(), "a token already seen proves nothing new");
        let other = hash_token(&seed);
        assert!(proves(&at(4), &link_record(other, "c1", 5, false)).is_err(), "another seed's chain");
        let mut bare = at(5);
        bare.capability = None;
        assert!(proves(&at(4), &bare).unwrap_err().contains("carries no capability"), "no capability at all");
        // A tombstone continues the chain, and locks nothing after it.
        let tombstone = link_record(seed, "c1", 5, true);
        assert_eq!(proves(&at(4), &tombstone), Ok(()));
        assert!(!tombstone.locks());
        assert_eq!(proves(&tombstone, &bare), Ok(()), "what locks nothing may be changed by anyone");
        // A new chain names the last link of the one it follows.
        let mut next = link_record(other, "c2", 0, false);
        next.capability.as_mut().expect("a capability").from =
            Some(Link { chain: "c1".into(), round: CHAIN, token: seed.to_hex().to_string() });
        assert_eq!(proves(&at(CHAIN - 1), &next), Ok(()), "a spent chain's last link opens the next");
        assert_eq!(proves(&at(7), &next), Ok(()), "and a reader who saw an older round can tell");
        next.capability.as_mut().expect("a capability").from.as_mut().expect("from").chain = "c9".into();
        assert!(proves(&at(7), &next).is_err(), "a link of another chain proves nothing");
    }

    #[test]
    fn a_record_is_readable_only_with_a_printable_holder() {
        let key: ClaimKey = "node:t-1".parse().expect("a key");
        let record = |holder: &str| {
            serde_json::json!({
                "version": 1, "key": "node:t-1", "holder": holder, "host": "h", "pid": 1, "boot_id": "b",
                "nonce": "n", "acquired_at": "2026-03-01T12:00:00Z", "refreshed_at": "2026-03-01T12:00:00Z",
                "expires_at": "2026-03-01T13:00:00Z",
            })
            .to_string()
        };
        assert_eq!(decode(&key, record("agent-7").as_bytes()).map(|r| r.holder), Ok("agent-7".into()));
        for (holder, why) in [
            ("", "its holder '' is empty"),
            (" \t", "its holder ' \\t' is empty"),
            ("a\u{1b}[2Jb", "its holder 'a\\u{1b}[2Jb' contains a control character"),
            ("a\nb", "its holder 'a\\nb' contains a control character"),
        ] {
            assert_eq!(decode(&key, record(holder).as_bytes()).map(|r| r.holder), Err(why.into()), "{holder:?}");
        }
        let long = "x".repeat(MAX_HOLDER + 1);
        assert!(decode(&key, record(&long).as_bytes()).expect_err("too long").ends_with("is longer than 256 bytes"));
    }
}
