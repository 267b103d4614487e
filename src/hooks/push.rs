//! The client-side `pre-push` policy: a clone does not push a task or try branch, or a claim,
//! that its holders do not hold.
//!
//! "This clone's holders" are every name this clone takes claims as: the `loop.holder`
//! values in git config (`git config --add loop.holder agent-7` for each name you pass to
//! `--holder`), the walkers that ran here and their sessions (from this clone's session
//! records, which never leave it), the walker singleton's holder, and the session or walker
//! the push runs in. The decision uses what this clone knows of the claims (its claim refs,
//! which mirror `loop.remote` after every claim operation and every `git loop sync`).
//!
//! - A task branch `loop/<id>` or try branch `loop-try/<id>/<n>` is refused while someone
//!   else holds a live claim `node:<id>`. Unclaimed, released or stale (seen unchanged for a
//!   whole lease, `store::lease`): nobody is working on it, so the push is not taking anything
//!   from anyone.
//! - A claim ref is refused when its record names a holder that is not this clone's, when it
//!   would overwrite another holder's live record (other than taking over a stale one), or
//!   when it deletes the ref (claims are released with a tombstone, never deleted).
//!
//! git-loop's own pushes bypass this hook (they run with `--no-verify`): it guards pushes
//! made by hand.

use std::collections::BTreeSet;

use anyhow::Result;
use gix::ObjectId;

use crate::agent::record;
use crate::context::Context;
use crate::error::{usage, Refusal};
use crate::ids::{ClaimKey, TaskId};
use crate::refs;
use crate::store::claim::{self, Held};
use crate::store::lease::{self, Lease};
use crate::store::Store;

/// One line git gives a pre-push hook: `<local ref> <local oid> <remote ref> <remote oid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushLine {
    pub local_ref: String,
    /// `None` for a deletion.
    pub local: Option<ObjectId>,
    pub remote_ref: String,
    /// `None` when the remote does not have the ref.
    pub remote: Option<ObjectId>,
}

/// Parse the pre-push hook's standard input.
pub fn parse(input: &str) -> Result<Vec<PushLine>, Refusal> {
    input
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let [local_ref, local, remote_ref, remote] = fields.as_slice() else {
                return Err(usage(format!(
                    "pre-push input line '{}' is not '<ref> <oid> <ref> <oid>'",
                    line.escape_debug()
                )));
            };
            Ok(PushLine {
                local_ref: (*local_ref).to_owned(),
                local: oid(local)?,
                remote_ref: (*remote_ref).to_owned(),
                remote: oid(remote)?,
            })
        })
        .collect()
}

/// A hex object id; all zeros means none.
pub fn oid(hex: &str) -> Result<Option<ObjectId>, Refusal> {
    let id = ObjectId::from_hex(hex.as_bytes()).map_err(|_| usage(format!("'{hex}' is not an object id")))?;
    Ok((!id.is_null()).then_some(id))
}

/// Every name this clone takes claims as (see the module documentation). `current` are the
/// session and walker the caller runs in, if any.
pub fn holders(store: &Store, current: &[String]) -> Result<BTreeSet<String>> {
    let mut out: BTreeSet<String> = current.iter().filter(|h| !h.is_empty()).cloned().collect();
    for text in store.settings().holders() {
        if !text.trim().is_empty() {
            out.insert(text.trim().to_owned());
        }
    }
    for rec in record::all(&store.loop_dir()?) {
        out.insert(rec.walker);
        out.insert(rec.session);
    }
    if let Ok(key) = ClaimKey::new(claim::LOCAL_KIND, &store.clone_id()?) {
        if let Ok(Some(held)) = claim::read_record(store, &key) {
            out.insert(held.record.holder);
        }
    }
    Ok(out)
}

/// A ref the push may not update, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub remote_ref: String,
    pub reason: String,
}

/// Check every ref of a push against this clone's holders.
pub fn check(store: &Store, ctx: &Context, holders: &BTreeSet<String>, lines: &[PushLine]) -> Result<Vec<Refused>> {
    let mut refused = Vec::new();
    for line in lines {
        let reason = if let Some(task) = branch_task(&line.remote_ref) {
            check_branch(store, ctx, holders, &task)?
        } else if let Some(key) = refs::claim_key_of(&line.remote_ref) {
            check_claim(store, ctx, holders, &key, line)
        } else {
            None
        };
        if let Some(reason) = reason {
            refused.push(Refused { remote_ref: line.remote_ref.clone(), reason });
        }
    }
    Ok(refused)
}

/// The task a task or try branch belongs to.
pub fn branch_task(name: &str) -> Option<TaskId> {
    if let Some(rest) = name.strip_prefix(refs::TASK_BRANCHES) {
        return rest.parse().ok();
    }
    let rest = name.strip_prefix(refs::TRY_BRANCHES)?;
    let (task, number) = rest.split_once('/')?;
    number.parse::<u32>().ok()?;
    task.parse().ok()
}

fn check_branch(store: &Store, ctx: &Context, holders: &BTreeSet<String>, task: &TaskId) -> Result<Option<String>> {
    let key = ClaimKey::node(task);
    let held = match claim::read(store, &key) {
        Ok(held) => held,
        Err(err) => return Ok(Some(format!("the claim on task '{task}' cannot be read: {err:#}"))),
    };
    Ok(match held {
        Some(held) if !holders.contains(&held.record.holder) => {
            let lease = lease::judge(store, ctx, &key, &held);
            (!lease.is_stale()).then(|| {
                format!(
                    "task '{task}' is claimed by '{}' ({}), not by this clone ({})",
                    held.record.holder,
                    watched(&lease),
                    names(holders)
                )
            })
        }
        _ => None,
    })
}

/// "seen unchanged for 3 min of its 1 h lease".
fn watched(lease: &Lease) -> String {
    let span = |d: std::time::Duration| {
        let s = d.as_secs();
        match s {
            0..=59 => format!("{s} s"),
            60..=3599 => format!("{} min", s / 60),
            _ => format!("{} h", s / 3600),
        }
    };
    format!("seen unchanged for {} of its {} lease", span(lease.unchanged_for), span(lease.length))
}

fn check_claim(
    store: &Store,
    ctx: &Context,
    holders: &BTreeSet<String>,
    key: &ClaimKey,
    line: &PushLine,
) -> Option<String> {
    let Some(local) = line.local else {
        return Some(format!(
            "claim '{key}' would be deleted; claims are released with a tombstone ('git loop claim release {key}')"
        ));
    };
    let pushed = match claim::read_at(store, key, local) {
        Ok(held) => held.record,
        Err(refusal) => return Some(refusal.message),
    };
    if !holders.contains(&pushed.holder) {
        return Some(format!(
            "the record pushed for claim '{key}' names holder '{}', which is not this clone's ({})",
            pushed.holder,
            names(holders)
        ));
    }
    // What the remote holds now, if this clone has that object (it does when it mirrors it).
    let current: Option<Held> = line.remote.and_then(|id| claim::read_at(store, key, id).ok());
    match current {
        Some(current) if !current.record.is_released() && current.record.holder != pushed.holder => {
            let lease = lease::judge(store, ctx, key, &current);
            (!lease.is_stale()).then(|| {
                format!(
                    "claim '{key}' is held by '{}' ({}); it can be taken over only once seen unchanged for its whole lease",
                    current.record.holder,
                    watched(&lease)
                )
            })
        }
        _ => None,
    }
}

fn names(holders: &BTreeSet<String>) -> String {
    if holders.is_empty() {
        "this clone has no holders: set 'loop.holder'".to_owned()
    } else {
        let list: Vec<&str> = holders.iter().map(String::as_str).collect();
        format!("this clone's holders: {}", list.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_push_lines_are_read_with_deletions_and_new_refs() {
        let zero = "0".repeat(40);
        let one = "1".repeat(40);
        let input = format!(
            "refs/heads/loop/t-1 {one} refs/heads/loop/t-1 {zero}\n(delete) {zero} refs/loop/claims/node/t-1 {one}\n"
        );
        let lines = parse(&input).expect("valid");
        assert_eq!(lines[0].remote, None);
        assert_eq!(lines[1].local, None);
        assert_eq!(lines[1].remote_ref, "refs/loop/claims/node/t-1");
    }

    #[test]
    fn task_and_try_branches_name_their_task() {
        assert_eq!(branch_task("refs/heads/loop/t-1").map(|t| t.to_string()), Some("t-1".into()));
        assert_eq!(branch_task("refs/heads/loop-try/t-1/3").map(|t| t.to_string()), Some("t-1".into()));
        assert_eq!(branch_task("refs/heads/loop-try/t-1/x"), None);
        assert_eq!(branch_task("refs/heads/main"), None);
    }
}
