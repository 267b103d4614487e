//! Exchanging loop state with a remote, so that every clone converges on the same state with
//! nothing lost or resurrected, whatever order clones do things in. Three verbs share one
//! exchange:
//!
//! - `sync`: every loop ref, both ways (`git loop sync`, a walk's heartbeat, its start and end),
//!   in two exchanges: every ref but the notes ref, then the notes ref (see `sync`);
//! - `publish`: the refs a command or a closing unit changed, and, in the same atomic push, the
//!   claim change that must not be seen before them (a task's result and its claim's release
//!   arrive together, so whoever sees the claim free also sees the task done);
//! - `pull`: some refs, fetched and merged into ours, nothing pushed (a claimer that just won a
//!   task reads the remote's record of it before working it).
//!
//! An exchange:
//! 1. Fetch (gix) the remote's refs into `refs/loop-remotes/<remote>/...`; the listing the
//!    remote advertised is the truth about what it holds (mirrors of refs it no longer has are
//!    deleted: gix never prunes).
//! 2. Merge per ref, by class:
//!    - tasks: union of both sides' operations (`task::merge`); the merge commit is the same
//!      on every clone, so merging twice never ping-pongs;
//!    - journal chains: the union of commits (a merge commit joins two divergent copies);
//!    - completion notes: the union of notes (two notes on one commit: the later one wins);
//!    - claims: with this remote as the arbiter, the remote's record is the claim; otherwise
//!      claims stay local;
//!    - task and try branches, try and done anchors, kept refs: fast-forward either way (a try
//!      anchor's number record gives way to the try's head). Where the two truly diverged, the
//!      remote's side wins — it was published first — and ours is kept under
//!      `refs/heads/loop-kept/<tag>/…` or `refs/loop/kept/<tag>/…` (pushed too), with a
//!      `ref_diverged` event in the journal. Nothing is ever forced or dropped.
//! 3. Push everything that is ahead locally in one `git push --atomic`, each ref leased on what
//!    the fetch saw (and the claim change leased on the claim we hold); if someone pushed
//!    meanwhile, start over (bounded, with a jittered backoff).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::cas::{self, Cas, Expect};
use super::remote;
use super::task::{self, Merge};
use super::Store;
use crate::context::Context;
use crate::git;
use crate::git::program::{self, PushUpdate};
use crate::refs;

/// What happened to one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// New from the remote.
    Fetched,
    /// Moved forward to the remote's value.
    FastForwarded,
    /// Both sides had changes; merged locally (and pushed).
    Merged,
    /// Only we had it, or we were ahead: pushed.
    Pushed,
    /// Deleted locally because the remote no longer has it (released claims).
    Removed,
    /// The two sides diverged: the remote's was taken, and ours is kept under `kept_as`.
    Kept { kept_as: String },
    /// Could not be read on one side; left as it is.
    Problem(String),
}

#[derive(Debug, Clone)]
pub struct RefChange {
    pub name: String,
    pub change: Change,
}

/// A claim change that rides in the same atomic push as the refs it follows: from what the
/// remote holds (`expect`: the record we hold, or nothing) to `new` (a tombstone, a refreshed
/// hold; `None` deletes).
#[derive(Debug, Clone)]
pub struct ClaimChange {
    pub name: String,
    pub expect: Option<ObjectId>,
    pub new: Option<ObjectId>,
}

/// How a claim change went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    Applied,
    /// The remote's claim is no longer the one we held (taken over): it was left alone, and
    /// the rest was published without it.
    Lost {
        actual: Option<ObjectId>,
    },
}

/// What an exchange did.
#[derive(Debug, Default)]
pub struct Report {
    pub remote: String,
    pub changes: Vec<RefChange>,
    /// The claim change's fate, when one was asked for.
    pub claim: Option<ClaimOutcome>,
}

impl Report {
    /// Refs that came in from the remote (what a walk tells its watcher about).
    pub fn incoming(&self) -> usize {
        self.changes
            .iter()
            .filter(|c| matches!(c.change, Change::Fetched | Change::FastForwarded | Change::Merged))
            .count()
    }
}

/// Which refs an exchange covers.
enum Scope {
    /// Every loop ref, on both sides.
    All,
    /// Exactly these refs (which may not exist on one side or the other).
    Refs(BTreeSet<String>),
}

/// How a ref class is merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Task,
    /// An append-only event chain: divergent copies are joined by a merge commit.
    Journal,
    Notes,
    Claim,
    /// A ref that only moves forward (task and try branches, try and done anchors, kept
    /// refs): fast-forward, or keep both sides (see the module docs).
    Forward,
}

fn class_of(name: &str) -> Option<Class> {
    if name.starts_with(refs::TASKS) {
        Some(Class::Task)
    } else if name.starts_with(refs::JOURNAL) {
        Some(Class::Journal)
    } else if name.starts_with(refs::TRIES)
        || name.starts_with(refs::DONE)
        || name.starts_with(refs::KEPT)
        || name == refs::SETTINGS
        || name == super::archive::REF
    {
        Some(Class::Forward)
    } else if name == refs::NOTES {
        Some(Class::Notes)
    } else if name.starts_with(refs::CLAIMS) {
        Some(Class::Claim)
    } else if name.starts_with(refs::TASK_BRANCHES)
        || name.starts_with(refs::TRY_BRANCHES)
        || name.starts_with(refs::KEPT_BRANCHES)
    {
        Some(Class::Forward)
    } else {
        None
    }
}

/// What a full sync's first exchange fetches (each lands under `refs/loop-remotes/<remote>/`):
/// every loop ref but the notes ref, which has an exchange of its own (see `sync`).
fn all_sources() -> Vec<String> {
    ["refs/loop/*", "refs/heads/loop/*", "refs/heads/loop-try/*", "refs/heads/loop-kept/*"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The branch done work lands on (`loop.mergeInto`, else the main worktree's branch), as a
/// full ref name, when it is a branch outside the loop's own.
fn landing_target(store: &Store) -> Option<String> {
    let named = match store.settings().merge_into() {
        Some(name) if name.starts_with("refs/") => name,
        Some(name) => format!("refs/heads/{name}"),
        None => store.head_branch()?,
    };
    let loops = [refs::TASK_BRANCHES, refs::TRY_BRANCHES, refs::KEPT_BRANCHES];
    (named.starts_with("refs/heads/")
        && !loops.iter().any(|p| named.starts_with(p))
        && gix::refs::FullName::try_from(named.as_str()).is_ok())
    .then_some(named)
}

/// The notes ref alone, as a scope.
fn only_notes() -> Scope {
    Scope::Refs(BTreeSet::from([refs::NOTES.to_owned()]))
}

/// Sync every loop ref with `remote`: every ref but the notes in one exchange, then the notes
/// ref in one of its own. The notes ref is the one ref every close anywhere in the fleet
/// changes: leased in the same atomic push as the rest, it made a busy fleet's syncs lose
/// round after round (16 of them, then "kept changing") although nobody else had touched
/// their other refs. Each ref merges by its own rule, so the two exchanges need no common
/// lease; the tasks' records, which carry their completions, go first.
pub fn sync(store: &Store, ctx: &Context, remote_name: &str) -> Result<Report> {
    let mut report = exchange(store, ctx, remote_name, Plan::new(Scope::All))?;
    let notes = exchange(store, ctx, remote_name, Plan::new(only_notes()))?;
    report.changes.extend(notes.changes);
    if report.changes.iter().any(|c| c.name == super::archive::REF) {
        super::maintenance::after_archive_moved(store.common_dir());
    }
    Ok(report)
}

/// Bring the remote up to date with our side of `names` (merging what it has first), and make
/// `claim` in the same atomic push. Refs that exist on neither side are ignored.
///
/// The notes ref is the one ref every clone's every close changes, so it goes in a push of its
/// own afterwards (a few tries; what does not get through goes with the next sync): leasing it
/// in the same push would make closes all over the fleet fail each other's pushes. The task's
/// record carries its completion itself, so the claim's release never runs ahead of it.
pub fn publish(
    store: &Store,
    ctx: &Context,
    remote_name: &str,
    mut names: BTreeSet<String>,
    claim: Option<ClaimChange>,
) -> Result<Report> {
    let notes = names.remove(refs::NOTES);
    let mut report = exchange(store, ctx, remote_name, Plan { claim, ..Plan::new(Scope::Refs(names)) })?;
    if notes {
        if let Ok(more) = exchange(store, ctx, remote_name, Plan { rounds: 4, ..Plan::new(only_notes()) }) {
            report.changes.extend(more.changes);
        }
    }
    Ok(report)
}

/// Merge into ours what our mirrors last saw of the remote's side of `names` (no network):
/// for a ref whose remote value was just confirmed to equal its mirror (a claim pushed with a
/// lease on it, see `claim::acquire`).
pub fn merge_mirrored(store: &Store, ctx: &Context, remote_name: &str, names: BTreeSet<String>) -> Result<Report> {
    exchange(store, ctx, remote_name, Plan { push: false, fetch: false, ..Plan::new(Scope::Refs(names)) })
}

/// Fetch the remote's side of `names` and merge it into ours; push nothing.
pub fn pull(store: &Store, ctx: &Context, remote_name: &str, names: BTreeSet<String>) -> Result<Report> {
    exchange(store, ctx, remote_name, Plan { push: false, ..Plan::new(Scope::Refs(names)) })
}

/// The refs that carry one task's state and work — its record, task branch, done anchor, try
/// branches and anchors — and every other shared ref this handle changed but the notes: what
/// goes to the remote with a change of the task's claim. The notes ref is the one ref every
/// close in the fleet changes; leased in these pushes it would make closes all over the fleet
/// fail each other's pushes, so it goes with the next sync (the task's record carries the
/// completion itself).
pub fn task_scope(store: &Store, id: &crate::ids::TaskId) -> Result<BTreeSet<String>> {
    let mut names: BTreeSet<String> = refs::task_refs(id).into_iter().collect();
    let platform = store.repo.references().context("could not list refs")?;
    for prefix in refs::task_try_prefixes(id) {
        for reference in platform.prefixed(prefix.as_str()).context("could not list try refs")?.flatten() {
            names.insert(reference.name().as_bstr().to_string());
        }
    }
    names.extend(store.written_so_far().into_iter().filter(|n| n != refs::NOTES));
    Ok(names)
}

/// How many times an exchange starts over when someone else pushed between its fetch and its
/// push.
const ROUNDS: u32 = 16;

/// What one exchange does.
struct Plan {
    scope: Scope,
    /// A claim change to make in the same atomic push.
    claim: Option<ClaimChange>,
    /// Push what is ahead here (else only merge what the remote has into ours).
    push: bool,
    /// Ask the remote (else take its refs to be what our mirrors last saw of them).
    fetch: bool,
    /// How many times to start over when someone pushed between our fetch and our push.
    rounds: u32,
}

impl Plan {
    fn new(scope: Scope) -> Plan {
        Plan { scope, claim: None, push: true, fetch: true, rounds: ROUNDS }
    }
}

fn exchange(store: &Store, ctx: &Context, remote_name: &str, plan: Plan) -> Result<Report> {
    let Plan { mut scope, mut claim, push, fetch, rounds } = plan;
    let claims_follow_remote = store.arbiter().as_deref() == Some(remote_name);
    let mut claim_outcome = None;
    let mut kept_changes: Vec<RefChange> = Vec::new();
    let timeout = store.settings().transfer_timeout()?;
    // Pushes that failed on a fault that may heal, and the last one's reason (see below).
    let (mut failed_pushes, mut last_fault) = (0u32, None::<String>);
    for round in 0..rounds {
        if let Some(_why) = last_fault.take() {
            std::thread::sleep(remote::backoff(failed_pushes));
        } else if round > 0 {
            // Many clones pushing at once: back off, longer each round, with jitter, so one of
            // them gets through each time instead of all retrying in lockstep.
            let jitter = u64::from(crate::ids::random_bytes(1)[0]);
            std::thread::sleep(std::time::Duration::from_millis(10 * u64::from(round.min(8)) + jitter / 2));
        }
        let sources: Vec<String> = match &scope {
            // And the branch done work lands on, into its mirror only (never merged, never
            // pushed): `show` and `status` say a task landed only when the target as this clone
            // knows it holds its work, so the clone's view of it must be as fresh as its loop refs.
            Scope::All => all_sources().into_iter().chain(landing_target(store)).collect(),
            Scope::Refs(names) => names.iter().chain(claim.as_ref().map(|c| &c.name)).cloned().collect(),
        };
        if sources.is_empty() {
            return Ok(Report { remote: remote_name.to_owned(), changes: Vec::new(), claim: claim_outcome });
        }
        // Our claims as they were before the fetch: one that changes while we fetch was just
        // decided by the remote for a claimer of this clone, and is newer than what we fetched.
        let claims_before = if claims_follow_remote { local_claims(store)? } else { BTreeMap::new() };
        let theirs: BTreeMap<String, ObjectId> = match fetch {
            true => remote::fetch(store, remote_name, &sources)?.remote_refs.into_iter().collect(),
            false => remote::mirrored(store, remote_name, &sources)?,
        };
        let ours = match &scope {
            Scope::All => local_refs(store)?,
            Scope::Refs(names) => {
                let mut ours = BTreeMap::new();
                for name in names {
                    match name.strip_suffix('*') {
                        Some(prefix) => ours.extend(local_refs_under(store, prefix)?),
                        None => {
                            if let Some(id) = git::ref_target(&store.repo, name)? {
                                ours.insert(name.clone(), id);
                            }
                        }
                    }
                }
                ours
            }
        };
        // Clocks: what the fetch brought counts as seen (docs/concurrency.md, "Causal order").
        super::lamport::witness_fetched(store, &theirs, &ours)?;
        let mut report = Report { remote: remote_name.to_owned(), changes: Vec::new(), claim: None };
        let mut updates = Vec::new();
        let mut kept = Vec::new();
        let names: BTreeSet<&String> = match &scope {
            Scope::All => ours.keys().chain(theirs.keys()).collect(),
            // Patterns (`prefix*`) stand for every ref under them on either side.
            Scope::Refs(names) => names
                .iter()
                .filter(|n| !n.ends_with('*'))
                .chain(ours.keys().chain(theirs.keys()).filter(|n| in_scope(names, n)))
                .collect(),
        };
        // Branches this clone pruned, at the heads the remote still holds, stay pruned here.
        let pruned = super::pruned::load(store);
        // What either side's archive retired (`store::archive`): a ref that holds exactly its
        // archived value is folded, wherever it is left.
        // Read once per tip, not per sync; the remote's first (the newer, after a fold).
        let mut archives = Vec::new();
        for tip in [theirs.get(super::archive::REF), ours.get(super::archive::REF)].into_iter().flatten() {
            if store.has_object(*tip)
                && archives.iter().all(|a: &std::sync::Arc<super::archive::Archive>| a.tip != Some(*tip))
            {
                archives.push(super::archive::at(&store.repo, *tip)?);
            }
        }
        let mut folded_there = Vec::new();
        for name in names {
            let Some(class) = class_of(name) else { continue };
            if let Some(folded) = archives.iter().find_map(|a| a.refs.get(name)) {
                match (ours.get(name), theirs.get(name)) {
                    // Folded on the remote: deleted here too, never pushed back.
                    (Some(l), None) if l == folded => {
                        folded_there.push((name.clone(), *l));
                        continue;
                    }
                    // Folded here, its remote copy not deleted yet: not brought back.
                    (None, Some(o)) if o == folded => continue,
                    _ => {}
                }
            }
            if !ours.contains_key(name) && theirs.get(name).is_some_and(|o| pruned.get(name) == Some(o)) {
                continue;
            }
            if class == Class::Claim
                && (!claims_follow_remote || is_local_claim(name) || claims_before.get(name) != ours.get(name))
            {
                continue;
            }
            let local = ours.get(name).copied();
            let other = theirs.get(name).copied();
            match reconcile(store, class, name, local, other) {
                Ok(Some((change, push))) => {
                    if let Some(new) = push {
                        updates.push(PushUpdate { dst: name.clone(), src: Some(new), expect: Some(other) });
                    }
                    if let Change::Kept { kept_as } = &change {
                        kept.push((name.clone(), kept_as.clone(), local, other));
                    }
                    report.changes.push(RefChange { name: name.clone(), change });
                }
                Ok(None) => {}
                Err(err) => {
                    report.changes.push(RefChange { name: name.clone(), change: Change::Problem(format!("{err:#}")) })
                }
            }
        }
        // Deleted together: a fold of thousands is one transaction here, not one each.
        for name in cas::delete_all(store, &folded_there)? {
            report.changes.push(RefChange { name, change: Change::Removed });
        }
        if let Some(change) = &claim {
            let actual = theirs.get(&change.name).copied();
            if actual != change.expect {
                // Taken over since we last looked: not ours to change any more. Mirror what
                // the remote holds, and publish the rest without it.
                remote::set_local(store, &change.name, actual)?;
                claim_outcome = Some(ClaimOutcome::Lost { actual });
                claim = None;
            }
        }
        if !kept.is_empty() {
            // Say so in the journal, and push the kept refs and that event with the rest: the
            // next round sees them as ours alone.
            let writer = super::clone_writer(store, ctx)?;
            for (name, kept_as, ours, theirs) in &kept {
                let (kind, data) = super::events::Recorded::RefDiverged(super::events::RefDiverged {
                    name: name.to_string(),
                    kept_as: kept_as.to_string(),
                    ours: ours.map(|o| o.to_string()),
                    theirs: theirs.map(|o| o.to_string()),
                    rule: "the remote's side was published first and stays".into(),
                })
                .into_parts();
                let event = super::journal::NewEvent { kind, task: None, session: None, data };
                super::journal::append(store, ctx, &writer, event)?;
            }
            if let Scope::Refs(names) = &mut scope {
                names.extend(kept.iter().map(|(_, kept_as, ..)| kept_as.clone()));
                names.insert(refs::journal(&writer));
            }
            kept_changes.extend(report.changes.iter().filter(|c| matches!(c.change, Change::Kept { .. })).cloned());
            continue;
        }
        report.changes.splice(0..0, kept_changes.iter().cloned());
        if !push {
            report.claim = claim_outcome;
            return Ok(report);
        }
        if let Some(change) = &claim {
            updates.push(PushUpdate { dst: change.name.clone(), src: change.new, expect: Some(change.expect) });
        }
        if updates.is_empty() {
            report.claim = claim_outcome;
            return Ok(report);
        }
        // A sync with a lot to publish pushes it in bounded pieces, each its own atomic push
        // leased like the rest: no one transfer grows with what piled up unpublished, an
        // interrupted sync keeps what it published (its mirrors say so), and a retry starts
        // from there (docs/concurrency.md, "A large sync"). A claim change rides with the
        // refs it follows: such a push is never split.
        // Claims go in the last piece: a claim released on the remote before the task record
        // it follows would hand the task to another clone.
        let batches: Vec<Vec<PushUpdate>> = if claim.is_none() && updates.len() > BATCH {
            updates.sort_by_key(|u| u.dst.starts_with(refs::CLAIMS));
            updates.chunks(BATCH).map(<[PushUpdate]>::to_vec).collect()
        } else {
            vec![updates]
        };
        let whole = batches.len() == 1;
        let mut next = Next::Pushed;
        for batch in batches {
            let planned = batch.clone();
            // A wildcard pushes every ref of its class: only for a push that is not split.
            let (batch, patterns) = match scope {
                Scope::All if whole => wildcard(batch, &report),
                _ => (batch, Vec::new()),
            };
            crate::failpoint::write_point();
            let pushed = program::push(store.workdir(), remote_name, &batch, &patterns, timeout);
            crate::failpoint::write_point();
            next = settle(store, remote_name, &scope, &planned, pushed, &mut failed_pushes, &mut last_fault)?;
            if next != Next::Pushed {
                break;
            }
            if program::stopped_by_person() {
                return Err(crate::error::Refusal::new(
                    crate::error::Class::Interrupted,
                    format!("the sync with '{remote_name}' was stopped by you between two of its pushes; what it published stays"),
                )
                .hint("run 'git loop sync' again: it fetches what the remote holds and publishes the rest")
                .into());
            }
        }
        if next == Next::Pushed {
            if let Some(change) = &claim {
                remote::set_local(store, &change.name, change.new)?;
                claim_outcome = Some(ClaimOutcome::Applied);
            }
            report.claim = claim_outcome;
            return Ok(report);
        }
        // Someone pushed between our fetch and our push (that piece changed nothing), or a
        // fault that may heal: fetch again and merge what they added; what was pushed stays.
    }
    anyhow::bail!(
        "the remote '{remote_name}' kept changing during sync ({rounds} rounds); nothing was lost, run 'git loop sync' again"
    )
}

/// The most refs one push of a sync carries: a clone that walked thousands of sessions offline
/// publishes them in pushes of this many, each a transfer of bounded size.
pub const BATCH: usize = 500;

/// What a push came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Applied: the remote holds it, and our mirrors say so.
    Pushed,
    /// Not applied (someone pushed meanwhile, or a fault that may heal): fetch and merge again.
    Again,
}

/// Read what pushing `planned` (with or without wildcards) came to: `Pushed`, `Again`, or the
/// error that ends the exchange (a fault that does not heal, a refusal, a fault that did not
/// heal in `remote::ATTEMPTS`).
fn settle(
    store: &Store,
    remote_name: &str,
    scope: &Scope,
    planned: &[PushUpdate],
    pushed: Result<program::PushReport>,
    failed_pushes: &mut u32,
    last_fault: &mut Option<String>,
) -> Result<Next> {
    let pushed = match pushed {
        Ok(pushed) => pushed,
        Err(err) if err.downcast_ref::<program::Stopped>().is_some() => {
            // Whether this piece was applied is for the next sync's fetch to say; what earlier
            // pieces published stays (their mirrors say so).
            let progress = err.downcast_ref::<program::Stopped>().map(program::Stopped::progress).unwrap_or_default();
            return Err(crate::error::Refusal::new(
                crate::error::Class::Interrupted,
                format!("the sync with '{remote_name}' was stopped by you while it pushed ({progress}); what it published before stays"),
            )
            .hint("run 'git loop sync' again: it fetches what the remote holds and publishes the rest")
            .into());
        }
        Err(err) => match remote::fault(remote_name, &err) {
            // Reset, cut by the transfer timeout, a 5xx: whether it was applied is for the
            // next round's fetch to say (leased pushes make a second one harmless).
            remote::Fault::Transient(why) if *failed_pushes + 1 < remote::ATTEMPTS => {
                *failed_pushes += 1;
                *last_fault = Some(why);
                return Ok(Next::Again);
            }
            remote::Fault::Transient(why) => return Err(remote::gave_up(remote_name, why, err)),
            remote::Fault::Unhealable(refusal) => return Err(remote::unhealable(remote_name, refusal, err)),
            remote::Fault::Other => {
                return Err(err.context(format!(
                    "could not push to '{remote_name}'; nothing was lost, run 'git loop sync' again"
                )))
            }
        },
    };
    if pushed.all_ok() {
        // The remote holds what we pushed: our mirrors say so (a claim leased on a task's
        // record then needs no fetch of it, `claim::acquire`).
        remote::mirror_pushed(store, remote_name, planned)?;
        return Ok(Next::Pushed);
    }
    if let Some(refusal) = pushed.refusal() {
        // A lease that held when git checked it but not when the server took the ref locks
        // (another clone pushed in between) is reported as "[remote rejected] (atomic
        // transaction failed)", like a refusal: it is a race, to be fetched and merged
        // again, unless the remote still holds what we saw for every ref we meant to push
        // (those pushed by wildcard included).
        let sources: Vec<String> = match scope {
            Scope::All => all_sources(),
            Scope::Refs(_) => planned.iter().map(|u| u.dst.clone()).collect(),
        };
        let now: BTreeMap<String, ObjectId> =
            remote::fetch(store, remote_name, &sources)?.remote_refs.into_iter().collect();
        if planned.iter().any(|u| now.get(&u.dst).copied() != u.expect.flatten()) {
            return Ok(Next::Again);
        }
        let hint = match refusal.hint {
            Some(hint) => format!("{hint}; local state is unchanged and complete"),
            None => "the remote's hooks or settings forbid the update; local state is unchanged and complete".into(),
        };
        let refused =
            crate::error::refused(format!("remote '{remote_name}' refused '{}': {}", refusal.dst, refusal.why))
                .hint(hint);
        return Err(remote::unhealable(remote_name, refused, anyhow::anyhow!("the remote's hook refused the push")));
    }
    // Someone pushed between our fetch and our push: the atomic push changed nothing.
    Ok(Next::Again)
}

/// Ref classes whose every update is a fast-forward of a commit (after the merge step), so
/// they can be pushed with one wildcard refspec and no lease (see `program::push`).
const WILDCARD: &[&str] = &[refs::TASKS, refs::JOURNAL];

/// A wildcard-safe class is pushed by its wildcard refspec once it has at least this many
/// updates: git resolves explicit refspecs one by one (a thousand cost a second of CPU), but a
/// wildcard pushes every local ref of the class, those not ahead too, and in a busy fleet some
/// of them have moved on the remote since our fetch ("fetch first"): the atomic push fails as
/// a whole. With few updates — a walk's sync, every 30 s — explicit refspecs cost nothing and
/// touch only what we changed (four walks over 200 tasks lost 16 rounds in a row, twice, with
/// a wildcard for one or two updates).
const WILDCARD_FROM: usize = 64;

/// Replace the explicit updates of a wildcard-safe class by its wildcard refspec when there
/// are many of them (`WILDCARD_FROM`) — unless a ref of that class could not be merged this
/// round (it may be behind the remote locally).
fn wildcard(updates: Vec<PushUpdate>, report: &Report) -> (Vec<PushUpdate>, Vec<String>) {
    let mut patterns = Vec::new();
    let mut explicit = updates;
    for prefix in WILDCARD {
        let troubled =
            report.changes.iter().any(|c| c.name.starts_with(prefix) && matches!(c.change, Change::Problem(_)));
        if troubled || explicit.iter().filter(|u| u.dst.starts_with(prefix)).count() < WILDCARD_FROM {
            continue;
        }
        explicit.retain(|u| !u.dst.starts_with(prefix));
        patterns.push(format!("{prefix}*:{prefix}*"));
    }
    (explicit, patterns)
}

/// Claims that never leave their clone (the walker singleton).
fn is_local_claim(name: &str) -> bool {
    name.starts_with(&format!("{}{}/", refs::CLAIMS, super::claim_record::LOCAL_KIND))
}

/// Merge one ref; returns what changed and, if the remote needs it, the value to push.
fn reconcile(
    store: &Store,
    class: Class,
    name: &str,
    local: Option<ObjectId>,
    other: Option<ObjectId>,
) -> Result<Option<(Change, Option<ObjectId>)>> {
    let repo = &store.repo;
    let problem = || Some((Change::Problem("changed locally during sync; run sync again".into()), None));
    Ok(match (class, local, other) {
        (_, None, None) => None,
        (_, Some(l), Some(o)) if l == o => None,
        // The remote decides claims: copy or delete ours to match it.
        (Class::Claim, _, Some(o)) => {
            remote::set_local(store, name, Some(o))?;
            Some((Change::FastForwarded, None))
        }
        (Class::Claim, Some(_), None) => {
            remote::set_local(store, name, None)?;
            Some((Change::Removed, None))
        }
        (_, Some(l), None) => Some((Change::Pushed, Some(l))),
        (_, None, Some(o)) => match cas::update(store, name, Expect::Absent, o, "loop: sync")? {
            Cas::Applied => Some((Change::Fetched, None)),
            Cas::Lost { .. } => problem(),
        },
        (class, Some(l), Some(o)) => {
            let merged = match class {
                Class::Task => task::merge(repo, name, l, o)?,
                Class::Journal => merge_chain(store, l, o)?,
                Class::Notes => merge_notes(store, l, o)?,
                Class::Forward => match forward(store, l, o)? {
                    Some(m) => m,
                    None => return keep_ours(store, name, l, o),
                },
                Class::Claim => unreachable!("claims are handled above"),
            };
            match merged {
                Merge::Same => None,
                Merge::LocalAhead => Some((Change::Pushed, Some(l))),
                Merge::FastForward(o) => match cas::update(store, name, Expect::Is(l), o, "loop: sync")? {
                    Cas::Applied => Some((Change::FastForwarded, None)),
                    Cas::Lost { .. } => problem(),
                },
                Merge::Merged(m) => match cas::update(store, name, Expect::Is(l), m, "loop: sync merge")? {
                    Cas::Applied => Some((Change::Merged, Some(m))),
                    Cas::Lost { .. } => problem(),
                },
            }
        }
    })
}

/// The two sides of a forward-only ref diverged: take the remote's (published first) and keep
/// ours under a name of its own, so nothing is lost and nothing is forced.
fn keep_ours(
    store: &Store,
    name: &str,
    ours: ObjectId,
    theirs: ObjectId,
) -> Result<Option<(Change, Option<ObjectId>)>> {
    let tag = format!("{}-{}", store.clone_id()?, crate::ids::random_base32(4));
    let kept_as = refs::kept(name, &tag).with_context(|| format!("'{name}' cannot be kept aside"))?;
    if cas::update(store, &kept_as, Expect::Absent, ours, "loop: keep our side of a diverged ref")? != Cas::Applied {
        anyhow::bail!("'{kept_as}' exists already");
    }
    match cas::update(store, name, Expect::Is(ours), theirs, "loop: sync, the remote's side")? {
        Cas::Applied => Ok(Some((Change::Kept { kept_as }, None))),
        Cas::Lost { .. } => {
            // Moved under us meanwhile: leave the kept copy, and try again next time.
            Ok(Some((Change::Problem("changed locally during sync; run sync again".into()), None)))
        }
    }
}

/// Fast-forward either way, or `None` when the two have diverged. A try anchor first holds a
/// number record (a blob) and later the try's head (a commit): the commit is the later state.
fn forward(store: &Store, local: ObjectId, other: ObjectId) -> Result<Option<Merge>> {
    let kind = |id: ObjectId| store.repo.find_header(id).map(|h| h.kind()).ok();
    match (kind(local), kind(other)) {
        (Some(gix::object::Kind::Commit), Some(gix::object::Kind::Commit)) => fast_forward(store, local, other),
        (Some(gix::object::Kind::Commit), Some(gix::object::Kind::Blob)) => Ok(Some(Merge::LocalAhead)),
        (Some(gix::object::Kind::Blob), Some(gix::object::Kind::Commit)) => Ok(Some(Merge::FastForward(other))),
        _ => Ok(None),
    }
}

/// Fast-forward either way between two commits, or `None` when they have diverged.
fn fast_forward(store: &Store, local: ObjectId, other: ObjectId) -> Result<Option<Merge>> {
    if store.is_ancestor(other, local)? {
        Ok(Some(Merge::LocalAhead))
    } else if store.is_ancestor(local, other)? {
        Ok(Some(Merge::FastForward(other)))
    } else {
        Ok(None)
    }
}

/// The signature of a merge made by sync: a function of its parents only, so two clones
/// merging the same pair make the same commit.
fn merge_signature(repo: &gix::Repository, parents: &[ObjectId]) -> gix::actor::Signature {
    let seconds = parents
        .iter()
        .filter_map(|p| repo.find_commit(*p).ok().and_then(|c| c.time().ok()))
        .map(|t| t.seconds)
        .max()
        .unwrap_or(0);
    gix::actor::Signature {
        name: "git-loop".into(),
        email: "merge@git-loop".into(),
        time: gix::date::Time { seconds, offset: 0 },
    }
}

/// Two copies of an append-only chain: fast-forward, or join both in a merge commit.
fn merge_chain(store: &Store, local: ObjectId, other: ObjectId) -> Result<Merge> {
    let repo = &store.repo;
    if let Some(ff) = fast_forward(store, local, other)? {
        return Ok(ff);
    }
    let mut parents = [local, other];
    parents.sort();
    let tree = git::empty_tree(repo)?;
    let sig = merge_signature(repo, &parents);
    Ok(Merge::Merged(git::write_commit(repo, tree, &parents, "merge\n", &sig)?))
}

/// Two notes histories: fast-forward, or a merge commit whose tree holds every note of
/// both; where both annotate the same commit differently, the merged note holds the
/// completions of both (`notes::merge`: the later entry of a task both completed there).
fn merge_notes(store: &Store, local: ObjectId, other: ObjectId) -> Result<Merge> {
    let repo = &store.repo;
    if let Some(ff) = fast_forward(store, local, other)? {
        return Ok(ff);
    }
    let local_tree = repo.find_commit(local)?.tree_id()?.detach();
    let other_tree = repo.find_commit(other)?.tree_id()?.detach();
    let mut state = gix::note::plumbing::State::new(local_tree, repo).context("could not read the local notes")?;
    let local_notes: BTreeMap<ObjectId, ObjectId> = super::notes::all(store, local_tree)?.into_iter().collect();
    for (annotated, blob) in super::notes::all(store, other_tree)? {
        let merged = match local_notes.get(&annotated) {
            None => blob,
            Some(mine) if *mine == blob => continue,
            Some(mine) => super::notes::merge(repo, *mine, blob)?,
        };
        if local_notes.get(&annotated) != Some(&merged) {
            state.edit(annotated, Some(merged), repo).context("could not merge a note")?;
        }
    }
    let tree = git::retry_vanished(|| state.write(repo)).context("could not write the merged notes")?;
    let mut parents = [local, other];
    parents.sort();
    let sig = merge_signature(repo, &parents);
    Ok(Merge::Merged(git::write_commit(repo, tree, &parents, "notes: merge\n", &sig)?))
}

/// Every local ref a full sync's first exchange covers (all but the notes ref, see `sync`).
fn local_refs(store: &Store) -> Result<BTreeMap<String, ObjectId>> {
    let mut out = BTreeMap::new();
    let platform = store.repo.references().context("could not list refs")?;
    for prefix in [refs::LOOP, refs::TASK_BRANCHES, refs::TRY_BRANCHES, refs::KEPT_BRANCHES] {
        for reference in platform.prefixed(prefix).context("could not list refs")?.flatten() {
            let name = reference.name().as_bstr().to_string();
            if let Some(id) = reference.target().try_id() {
                out.insert(name, id.to_owned());
            }
        }
    }
    Ok(out)
}

/// This clone's claims, as `local_refs` lists them.
fn local_claims(store: &Store) -> Result<BTreeMap<String, ObjectId>> {
    local_refs_under(store, refs::CLAIMS)
}

/// Every local ref under `prefix`, with what it points to.
fn local_refs_under(store: &Store, prefix: &str) -> Result<BTreeMap<String, ObjectId>> {
    let platform = store.repo.references().context("could not list refs")?;
    Ok(platform
        .prefixed(prefix)
        .context("could not list refs")?
        .flatten()
        .filter_map(|r| Some((r.name().as_bstr().to_string(), r.target().try_id()?.to_owned())))
        .collect())
}

/// Whether `name` is one of `names`: an exact name, or under a `prefix*`.
fn in_scope(names: &BTreeSet<String>, name: &str) -> bool {
    names.iter().any(|n| n.strip_suffix('*').map_or(n == name, |prefix| name.starts_with(prefix)))
}

/// How a clone that does not name its arbiter yet found out about its remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adoption {
    /// `loop.remote` is set, or this clone has loop state of its own: nothing to find out.
    Decided,
    /// The clone has no remote to ask.
    NoRemote,
    /// The remote holds no loop state either: this clone works alone until someone shares.
    Nothing,
    /// The remote holds loop state: it is fetched, and `loop.remote` now names the remote.
    Followed { remote: String, changes: usize },
}

/// A fresh clone of a repository whose remote holds loop state must not show an empty board,
/// nor decide claims by itself while the remote decides them for everyone else: while
/// `loop.remote` is unset and this clone has no loop state of its own, ask the remote (`origin`,
/// else the only one) and, if it holds some, follow it — sync, and set `loop.remote`.
pub fn adopt(store: &mut Store, ctx: &Context) -> Result<Adoption> {
    if store.config("loop.remote").is_some() || has_loop_state(store)? {
        return Ok(Adoption::Decided);
    }
    let names: Vec<String> = store.repo.remote_names().iter().map(|n| n.to_string()).collect();
    let remote = match names.iter().find(|n| *n == "origin") {
        Some(origin) => origin.clone(),
        None if names.len() == 1 => names[0].clone(),
        None => return Ok(Adoption::NoRemote),
    };
    let changes = take_remote_state(store, ctx, &remote)?;
    if !has_loop_state(store)? {
        return Ok(Adoption::Nothing);
    }
    store.set_local_config("loop.remote", &remote)?;
    Ok(Adoption::Followed { remote, changes })
}

/// Bring `remote`'s loop state (tasks, claims, journal, notes) into this clone without sending
/// anything: what a clone that starts following a remote does first, so that its board is the
/// remote's from its first command. Returns how many refs changed here.
pub fn take_remote_state(store: &Store, ctx: &Context, remote: &str) -> Result<usize> {
    let mut report = exchange(store, ctx, remote, Plan { push: false, ..Plan::new(Scope::All) })?;
    report.changes.extend(exchange(store, ctx, remote, Plan { push: false, ..Plan::new(only_notes()) })?.changes);
    Ok(report.changes.len())
}

/// Whether this clone holds any shared loop state (a task, a claim, a journal event...).
fn has_loop_state(store: &Store) -> Result<bool> {
    let platform = store.repo.references().context("could not list refs")?;
    let found = platform.prefixed(refs::LOOP).context("could not list refs")?.flatten().next().is_some();
    Ok(found)
}

/// The remote `sync` talks to: the one given, else `loop.remote`, else `origin`.
pub fn choose_remote(store: &Store, given: Option<&str>) -> Result<String> {
    if let Some(given) = given {
        return Ok(given.to_owned());
    }
    if let Some(arbiter) = store.arbiter() {
        return Ok(arbiter);
    }
    if store.repo.find_remote("origin").is_ok() {
        return Ok("origin".into());
    }
    Err(crate::error::usage("there is no remote to sync with")
        .hint("add one with 'git remote add origin <url>', or pass --remote <name>")
        .into())
}
