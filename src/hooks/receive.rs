//! The server-side `pre-receive` policy for a self-hosted bare remote: what a push may do to
//! the loop's refs. git-loop's own writes all pass; rewriting history and taking a live claim
//! from its holder do not.
//!
//! - `refs/loop/claims/<kind>/<name>`: the new value must be a valid claim record for that
//!   key, and the update one of: create-if-absent; replacing a tombstone (a released claim is
//!   free); the same holder's refresh or release (a tombstone keeps the holder's name); a
//!   takeover of a record that has expired by the server's clock; a tombstone over a record
//!   that cannot be read (`claim release --force`). Deleting a claim ref is refused: claims
//!   are released with a tombstone, because a delete racing `git pack-refs` can resurrect it.
//! - `refs/loop/tries/<id>/<n>`: created freely (that is how a try number is taken); its
//!   first value, a record blob, may be replaced by the try's head; after that only
//!   fast-forwards; never deleted.
//! - Everything else under `refs/loop/` (task operation chains, journal chains, done anchors)
//!   and `refs/notes/loop`: fast-forwards only, never deleted. Task branches `loop/<id>`:
//!   fast-forwards only, never deleted (they hold accepted work). Try branches
//!   `loop-try/<id>/<n>`: fast-forwards only; deleting one is allowed (its commits stay alive
//!   under `refs/loop/tries/`).
//!
//! The hook cannot tell who pushes: it enforces the claim protocol, not identities (a
//! server that authenticates pushers can add that in its own hook).
//!
//! New objects of the push are still in git's quarantine directory while pre-receive runs:
//! they are read from there first, then from the repository.

use std::collections::{HashSet, VecDeque};
use std::path::Path;

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::objs::Find as _;
use gix::ObjectId;

use crate::error::{usage, Refusal};
use crate::refs;
use crate::store::claim;

/// One line git gives a pre-receive hook: `<old oid> <new oid> <ref>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// `None` when the ref is being created.
    pub old: Option<ObjectId>,
    /// `None` when the ref is being deleted.
    pub new: Option<ObjectId>,
    pub name: String,
}

/// Parse the pre-receive hook's standard input.
pub fn parse(input: &str) -> Result<Vec<Update>, Refusal> {
    input
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut fields = line.splitn(3, ' ');
            let (Some(old), Some(new), Some(name)) = (fields.next(), fields.next(), fields.next()) else {
                return Err(usage(format!(
                    "pre-receive input line '{}' is not '<old> <new> <ref>'",
                    line.escape_debug()
                )));
            };
            Ok(Update { old: super::push::oid(old)?, new: super::push::oid(new)?, name: name.to_owned() })
        })
        .collect()
}

/// The repository a push arrives at, with the push's quarantined objects.
pub struct Server {
    repo: gix::Repository,
    quarantine: Option<gix::odb::Handle>,
}

/// How far back a fast-forward check walks before giving up (and refusing).
const MAX_WALK: usize = 200_000;

impl Server {
    /// Open the repository at `git_dir`; `quarantine` is the push's object directory
    /// (`$GIT_OBJECT_DIRECTORY` while pre-receive runs), if any.
    pub fn open(git_dir: &Path, quarantine: Option<&Path>) -> Result<Server> {
        let repo = gix::open_opts(git_dir, gix::open::Options::isolated())
            .with_context(|| format!("could not open the repository at '{}'", git_dir.display()))?;
        let quarantine = match quarantine {
            Some(dir) => Some(
                gix::odb::at(dir, repo.object_hash())
                    .with_context(|| format!("could not open the pushed objects at '{}'", dir.display()))?,
            ),
            None => None,
        };
        Ok(Server { repo, quarantine })
    }

    /// An object's kind and bytes, from the push or the repository.
    fn find(&self, id: ObjectId) -> Option<(gix::objs::Kind, Vec<u8>)> {
        let mut buf = Vec::new();
        if let Some(q) = &self.quarantine {
            if let Ok(Some(data)) = q.try_find(&id, &mut buf) {
                return Some((data.kind, data.data.to_vec()));
            }
        }
        let data = self.repo.objects.try_find(&id, &mut buf).ok()??;
        Some((data.kind, data.data.to_vec()))
    }

    fn kind(&self, id: ObjectId) -> Option<gix::objs::Kind> {
        self.find(id).map(|(kind, _)| kind)
    }

    /// Whether commit `ancestor` is in the history of commit `descendant`.
    fn is_ancestor(&self, ancestor: ObjectId, descendant: ObjectId) -> Result<bool, String> {
        let mut queue = VecDeque::from([descendant]);
        let mut seen = HashSet::from([descendant]);
        while let Some(id) = queue.pop_front() {
            if id == ancestor {
                return Ok(true);
            }
            if seen.len() > MAX_WALK {
                return Err(format!("its history is longer than {MAX_WALK} commits"));
            }
            let Some((kind, data)) = self.find(id) else {
                return Err(format!("commit {id} is missing"));
            };
            if kind != gix::objs::Kind::Commit {
                return Err(format!("{id} is a {kind}, not a commit"));
            }
            for parent in gix::objs::CommitRefIter::from_bytes(&data, self.repo.object_hash()).parent_ids() {
                if seen.insert(parent) {
                    queue.push_back(parent);
                }
            }
        }
        Ok(false)
    }

    fn claim_record(&self, key: &crate::ids::ClaimKey, id: ObjectId) -> Result<claim::Record, String> {
        match self.find(id) {
            None => Err(format!("object {id} is missing")),
            Some((gix::objs::Kind::Blob, data)) => claim::parse(key, &data).map_err(|r| r.message),
            Some((kind, _)) => Err(format!("it points to a {kind}, not a claim record")),
        }
    }
}

/// A ref update the policy refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub name: String,
    pub reason: String,
}

/// Check every update of a push; `now` is the server's clock. Empty when all may go ahead.
pub fn check(server: &Server, now: DateTime<Utc>, updates: &[Update]) -> Vec<Rejected> {
    updates
        .iter()
        .filter_map(|u| check_one(server, now, u).map(|reason| Rejected { name: u.name.clone(), reason }))
        .collect()
}

fn check_one(server: &Server, now: DateTime<Utc>, u: &Update) -> Option<String> {
    let name = u.name.as_str();
    if name.starts_with(refs::CLAIMS) {
        check_claim(server, now, u)
    } else if name.starts_with(refs::TRIES) {
        match (u.old, u.new) {
            (None, _) => None,
            (Some(_), None) => Some("try anchors keep a try's work alive; they are never deleted".into()),
            (Some(old), Some(new)) => match server.kind(old) {
                Some(gix::objs::Kind::Commit) => fast_forward(server, old, new),
                // The try-number record, replaced by the try's first head.
                _ => None,
            },
        }
    } else if name.starts_with(refs::LOOP) || name == refs::NOTES || name.starts_with(refs::TASK_BRANCHES) {
        match (u.old, u.new) {
            (None, _) => None,
            (Some(_), None) => Some("loop history is append-only; it is never deleted".into()),
            (Some(old), Some(new)) => fast_forward(server, old, new),
        }
    } else if name.starts_with(refs::TRY_BRANCHES) {
        match (u.old, u.new) {
            (Some(old), Some(new)) => fast_forward(server, old, new),
            _ => None,
        }
    } else {
        None
    }
}

/// `None` when `new` descends from `old`; else why not.
fn fast_forward(server: &Server, old: ObjectId, new: ObjectId) -> Option<String> {
    match server.is_ancestor(old, new) {
        Ok(true) => None,
        Ok(false) => Some(format!("{new} does not descend from {old}: that would rewrite history")),
        Err(why) => Some(format!("cannot tell whether {new} descends from {old}: {why}")),
    }
}

fn check_claim(server: &Server, now: DateTime<Utc>, u: &Update) -> Option<String> {
    let Some(key) = refs::claim_key_of(&u.name) else {
        return Some("not a valid claim ref name".into());
    };
    let Some(new) = u.new else {
        return Some(format!("claims are released with a tombstone, never deleted ('git loop claim release {key}')"));
    };
    let record = match server.claim_record(&key, new) {
        Ok(record) => record,
        Err(why) => return Some(format!("the new record is not valid: {why}")),
    };
    // No old value: create-if-absent, which any valid record may do.
    let old = u.old?;
    let current = match server.claim_record(&key, old) {
        Ok(current) => current,
        // An unreadable record may be released (`claim release --force`), nothing else.
        Err(_) if record.is_released() => return None,
        Err(why) => return Some(format!("the current record cannot be read ({why}); release it first")),
    };
    // The server's clock against the holder's: with clocks that disagree this may refuse a
    // fair takeover (while the holder's clock runs ahead) or fail to refuse an early one. It is
    // a second check only: what keeps a live claim is the clients' own rule (a takeover only
    // after watching the record unchanged for a whole lease, leased on exactly that record).
    if current.is_released() || current.holder == record.holder || now >= current.expires_at {
        return None;
    }
    Some(format!(
        "'{key}' is held by '{}' until {}; '{}' may take it over only once it expires",
        current.holder,
        current.expires_at.format("%Y-%m-%d %H:%M:%S UTC"),
        record.holder
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_receive_lines_are_read() {
        let zero = "0".repeat(40);
        let one = "1".repeat(40);
        let updates =
            parse(&format!("{zero} {one} refs/loop/claims/node/t-1\n{one} {zero} refs/heads/x y\n")).expect("ok");
        assert_eq!(updates[0].old, None);
        assert_eq!(updates[1].new, None);
        assert_eq!(updates[1].name, "refs/heads/x y");
    }
}
