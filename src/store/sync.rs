//! `sync`: exchange loop state with a remote so that every clone converges on the same state,
//! with nothing lost or resurrected whatever order clones sync in.
//!
//! 1. Fetch (gix) the remote's loop refs into `refs/loop-remotes/<remote>/...`; the listing
//!    the remote advertised is the truth about what it holds (mirrors of refs it no longer has
//!    are deleted: gix never prunes).
//! 2. Merge per ref, by class:
//!    - tasks: union of both sides' operations (`task::merge`); the merge commit is the same
//!      on every clone, so merging twice never ping-pongs;
//!    - journal chains, try and done anchors: the union of commits (a merge commit joins two
//!      divergent copies of one chain);
//!    - completion notes: the union of notes (two notes on one commit: the later one wins);
//!    - claims: with this remote as the arbiter, the remote's record is the claim (a claim
//!      released there is deleted here); otherwise claims stay local;
//!    - task and try branches: fast-forward only, either way; divergence is reported, never
//!      forced.
//! 3. Push everything that is ahead locally in one `git push --atomic` with a lease on each
//!    ref equal to what the fetch saw; if someone pushed meanwhile, start over (bounded).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::cas::{self, Cas, Expect};
use super::remote;
use super::task::{self, Merge};
use super::Store;
use crate::git;
use crate::git::program::{self, PushUpdate, RefStatus};
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
    /// The two sides diverged and cannot be merged automatically; left as they are.
    Diverged(String),
    /// Could not be read on one side; left as it is.
    Problem(String),
}

#[derive(Debug, Clone)]
pub struct RefChange {
    pub name: String,
    pub change: Change,
}

/// What `sync` did.
#[derive(Debug, Default)]
pub struct Report {
    pub remote: String,
    pub changes: Vec<RefChange>,
}

/// How a ref class is merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Task,
    Chain,
    Notes,
    Claim,
    Branch,
}

fn class_of(name: &str) -> Option<Class> {
    if name.starts_with(refs::TASKS) {
        Some(Class::Task)
    } else if name.starts_with(refs::JOURNAL) || name.starts_with(refs::TRIES) || name.starts_with(refs::DONE) {
        Some(Class::Chain)
    } else if name == refs::NOTES {
        Some(Class::Notes)
    } else if name.starts_with(refs::CLAIMS) {
        Some(Class::Claim)
    } else if name.starts_with(refs::TASK_BRANCHES) || name.starts_with(refs::TRY_BRANCHES) {
        Some(Class::Branch)
    } else {
        None
    }
}

/// The refspecs `sync` fetches with: each lands under `refs/loop-remotes/<remote>/`.
fn refspecs(remote: &str) -> Vec<String> {
    ["refs/loop/*", refs::NOTES, "refs/heads/loop/*", "refs/heads/loop-try/*"]
        .iter()
        .map(|src| format!("+{src}:{}", refs::mirror(remote, src)))
        .collect()
}

/// Sync loop state with `remote`.
pub fn sync(store: &Store, remote_name: &str) -> Result<Report> {
    let arbiter = store.arbiter();
    let claims_follow_remote = arbiter.as_deref() == Some(remote_name);
    const ROUNDS: u32 = 12;
    for round in 0..ROUNDS {
        if round > 0 {
            // Many clones syncing at once: back off, longer each round, with jitter, so one
            // of them gets through each time instead of all retrying in lockstep.
            let jitter = u64::from(crate::ids::random_bytes(1)[0]);
            std::thread::sleep(std::time::Duration::from_millis(20 * u64::from(round) + jitter));
        }
        let fetched = remote::fetch(store, remote_name, &refspecs(remote_name))?;
        let theirs: BTreeMap<String, ObjectId> = fetched.remote_refs.into_iter().collect();
        prune_mirrors(store, remote_name, &theirs)?;
        let ours = local_refs(store)?;
        // Clocks: what the fetch brought counts as seen (docs/concurrency.md, "Causal order").
        super::lamport::witness_fetched(store, &theirs, &ours)?;
        let mut report = Report { remote: remote_name.to_owned(), changes: Vec::new() };
        let mut updates = Vec::new();
        let names: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
        for name in names {
            let Some(class) = class_of(name) else { continue };
            if class == Class::Claim && (!claims_follow_remote || is_local_claim(name)) {
                continue;
            }
            let local = ours.get(name).copied();
            let other = theirs.get(name).copied();
            match reconcile(store, class, name, local, other) {
                Ok(Some((change, push))) => {
                    if let Some(new) = push {
                        updates.push(PushUpdate { dst: name.clone(), src: Some(new), expect: Some(other) });
                    }
                    report.changes.push(RefChange { name: name.clone(), change });
                }
                Ok(None) => {}
                Err(err) => {
                    report.changes.push(RefChange { name: name.clone(), change: Change::Problem(format!("{err:#}")) })
                }
            }
        }
        if updates.is_empty() {
            return Ok(report);
        }
        let planned = updates.clone();
        let (updates, patterns) = wildcard(updates, &report);
        let pushed = program::push(store.workdir(), remote_name, &updates, &patterns).with_context(|| {
            format!("could not push to '{remote_name}'; nothing was lost, run 'git loop sync' again")
        })?;
        if pushed.all_ok() {
            return Ok(report);
        }
        if let Some((dst, RefStatus::Refused(why))) =
            pushed.refs.iter().find(|(_, s)| matches!(s, RefStatus::Refused(_)))
        {
            // A lease that held when git checked it but not when the server took the ref locks
            // (another clone pushed in between) is reported as "[remote rejected] (atomic
            // transaction failed)", like a refusal: it is a race, to be fetched and merged
            // again, unless the remote still holds what we saw for every ref we meant to push
            // (those pushed by wildcard included).
            let now: BTreeMap<String, ObjectId> =
                remote::fetch(store, remote_name, &refspecs(remote_name))?.remote_refs.into_iter().collect();
            if planned.iter().any(|u| now.get(&u.dst).copied() != u.expect.flatten()) {
                continue;
            }
            return Err(crate::error::refused(format!("remote '{remote_name}' refused '{dst}': {why}"))
                .hint("the remote's hooks or settings forbid the update; local state is unchanged and complete")
                .into());
        }
        // Someone pushed between our fetch and our push: the atomic push changed nothing.
        // Fetch again and merge what they added.
    }
    anyhow::bail!("the remote '{remote_name}' kept changing during sync ({ROUNDS} rounds); nothing was lost, run 'git loop sync' again")
}

/// Ref classes whose every update is a fast-forward of a commit (after the merge step), so
/// they can be pushed with one wildcard refspec and no lease (see `program::push`).
const WILDCARD: &[&str] = &[refs::TASKS, refs::JOURNAL];

/// Replace the explicit updates of a wildcard-safe class by its wildcard refspec — unless a
/// ref of that class could not be merged this round (it may be behind the remote locally).
fn wildcard(updates: Vec<PushUpdate>, report: &Report) -> (Vec<PushUpdate>, Vec<String>) {
    let mut patterns = Vec::new();
    let mut explicit = updates;
    for prefix in WILDCARD {
        let troubled = report
            .changes
            .iter()
            .any(|c| c.name.starts_with(prefix) && matches!(c.change, Change::Diverged(_) | Change::Problem(_)));
        if troubled || !explicit.iter().any(|u| u.dst.starts_with(prefix)) {
            continue;
        }
        explicit.retain(|u| !u.dst.starts_with(prefix));
        patterns.push(format!("{prefix}*:{prefix}*"));
    }
    (explicit, patterns)
}

/// Claims that never leave their clone (the walker singleton).
fn is_local_claim(name: &str) -> bool {
    name.starts_with(&format!("{}{}/", refs::CLAIMS, super::claim::LOCAL_KIND))
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
            Cas::Lost { .. } => Some((Change::Problem("changed locally during sync; run sync again".into()), None)),
        },
        (class, Some(l), Some(o)) => {
            let merged = match class {
                Class::Task => task::merge(repo, name, l, o)?,
                Class::Chain => merge_chain(store, l, o)?,
                Class::Notes => merge_notes(store, l, o)?,
                Class::Branch => match fast_forward(repo, l, o)? {
                    Some(m) => m,
                    None => {
                        return Ok(Some((Change::Diverged("both sides have commits the other lacks".into()), None)))
                    }
                },
                Class::Claim => unreachable!("claims are handled above"),
            };
            match merged {
                Merge::Same => None,
                Merge::LocalAhead => Some((Change::Pushed, Some(l))),
                Merge::FastForward(o) => match cas::update(store, name, Expect::Is(l), o, "loop: sync")? {
                    Cas::Applied => Some((Change::FastForwarded, None)),
                    Cas::Lost { .. } => {
                        Some((Change::Problem("changed locally during sync; run sync again".into()), None))
                    }
                },
                Merge::Merged(m) => match cas::update(store, name, Expect::Is(l), m, "loop: sync merge")? {
                    Cas::Applied => Some((Change::Merged, Some(m))),
                    Cas::Lost { .. } => {
                        Some((Change::Problem("changed locally during sync; run sync again".into()), None))
                    }
                },
            }
        }
    })
}

/// Whether `ancestor` is reachable from `descendant`.
fn is_ancestor(repo: &gix::Repository, ancestor: ObjectId, descendant: ObjectId) -> Result<bool> {
    Ok(repo
        .merge_base(ancestor, descendant)
        .context("could not compare histories")?
        .is_some_and(|base| base.detach() == ancestor))
}

/// Fast-forward either way, or `None` when the two have diverged.
fn fast_forward(repo: &gix::Repository, local: ObjectId, other: ObjectId) -> Result<Option<Merge>> {
    if is_ancestor(repo, other, local)? {
        Ok(Some(Merge::LocalAhead))
    } else if is_ancestor(repo, local, other)? {
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
    if let Some(ff) = fast_forward(repo, local, other)? {
        return Ok(ff);
    }
    let mut parents = [local, other];
    parents.sort();
    let tree = git::empty_tree(repo)?;
    let sig = merge_signature(repo, &parents);
    Ok(Merge::Merged(git::write_commit(repo, tree, &parents, "merge\n", &sig)?))
}

/// Two notes histories: fast-forward, or a merge commit whose tree holds every note of
/// both; where both annotate the same commit differently, the note recorded later wins.
fn merge_notes(store: &Store, local: ObjectId, other: ObjectId) -> Result<Merge> {
    let repo = &store.repo;
    if let Some(ff) = fast_forward(repo, local, other)? {
        return Ok(ff);
    }
    let local_tree = repo.find_commit(local)?.tree_id()?.detach();
    let other_tree = repo.find_commit(other)?.tree_id()?.detach();
    let mut state = gix::note::plumbing::State::new(local_tree, repo).context("could not read the local notes")?;
    let local_notes: BTreeMap<ObjectId, ObjectId> = super::notes::all(repo, local_tree)?.into_iter().collect();
    for (annotated, blob) in super::notes::all(repo, other_tree)? {
        let keep_other = match local_notes.get(&annotated) {
            None => true,
            Some(mine) if *mine == blob => false,
            Some(mine) => super::notes::later(repo, blob, *mine),
        };
        if keep_other {
            state.edit(annotated, Some(blob), repo).context("could not merge a note")?;
        }
    }
    let tree = state.write(repo).context("could not write the merged notes")?;
    let mut parents = [local, other];
    parents.sort();
    let sig = merge_signature(repo, &parents);
    Ok(Merge::Merged(git::write_commit(repo, tree, &parents, "notes: merge\n", &sig)?))
}

/// Every local ref `sync` exchanges.
fn local_refs(store: &Store) -> Result<BTreeMap<String, ObjectId>> {
    let mut out = BTreeMap::new();
    let platform = store.repo.references().context("could not list refs")?;
    for prefix in [refs::LOOP, refs::NOTES, refs::TASK_BRANCHES, refs::TRY_BRANCHES] {
        for reference in platform.prefixed(prefix).context("could not list refs")?.flatten() {
            let name = reference.name().as_bstr().to_string();
            if let Some(id) = reference.target().try_id() {
                out.insert(name, id.to_owned());
            }
        }
    }
    Ok(out)
}

/// Delete mirrors of refs the remote no longer advertises (gix fetch never prunes).
fn prune_mirrors(store: &Store, remote_name: &str, theirs: &BTreeMap<String, ObjectId>) -> Result<()> {
    let prefix = format!("{}{remote_name}/", refs::REMOTES);
    let wanted: BTreeSet<String> = theirs.keys().map(|n| refs::mirror(remote_name, n)).collect();
    let platform = store.repo.references().context("could not list refs")?;
    let stale: Vec<(String, ObjectId)> = platform
        .prefixed(prefix.as_str())
        .context("could not list mirrored refs")?
        .flatten()
        .filter_map(|r| Some((r.name().as_bstr().to_string(), r.target().try_id()?.to_owned())))
        .filter(|(name, _)| !wanted.contains(name))
        .collect();
    for (name, id) in stale {
        cas::delete(store, &name, id)?;
    }
    Ok(())
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
