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

/// Version of a claim record; readers refuse newer ones.
pub const CLAIM_VERSION: u32 = 1;

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
    pub oid: ObjectId,
}

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
    Ok(Held { record: parse(key, &object.data)?, oid })
}

#[cfg(test)]
mod tests {
    use super::*;

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
