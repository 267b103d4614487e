//! The queue side of the walk: claim the next ready task, and close units in git.
//!
//! Closing done: the task branch moves to the try's head by compare-and-swap (fast-forward
//! when it can, else a merge of the two), never while it is checked out somewhere; the task
//! is marked done with a completion note on that commit; the claim is released; with
//! `--land`, the task goes to the landing queue (`Walker::land`).
//! Closing otherwise: failed goes to `failed`, blocked (or work that cannot land without a
//! person) to `needs-you`, an undecided race to `needs-decision`; the claim is kept with its
//! lease refreshed (park exclusion: `next` moves on instead of re-picking a broken task) until
//! a person reopens the task. A lost claim is never released: it is not ours any more.

use std::collections::BTreeSet;

use anyhow::Result;

use super::unit::{first_line, WorkUnit};
use super::{Event, Walker};
use crate::backlog::{self, DoneOptions};
use crate::context::{Context, SessionEnv};
use crate::engine::{self, Verdict};
use crate::ids::{ClaimKey, TaskId};
use crate::refs;
use crate::store::claim::{self, Acquire, AcquireOptions};
use crate::store::events::{self, Recorded};
use crate::store::task::{self, State};
use crate::store::{remote, sync, Store};
use crate::tries::{self};

pub struct GitQueue<'a> {
    store: &'a Store,
    walker: &'a Walker<'a>,
    /// This worker has lost a task to another claimer: others are racing down the same list,
    /// so it spreads out from now on (see `backlog::claim_order`).
    contended: bool,
}

impl<'a> GitQueue<'a> {
    pub fn new(store: &'a Store, walker: &'a Walker<'a>) -> GitQueue<'a> {
        GitQueue { store, walker, contended: false }
    }

    fn claim_options(&self, reason: String) -> AcquireOptions {
        AcquireOptions {
            holder: self.walker.key.clone(),
            ttl: self.walker.opts.lease,
            reason: Some(reason),
            session: None,
        }
    }

    /// A context that attributes records to the unit's last session.
    fn session_ctx(&self, unit: &WorkUnit) -> Context {
        let mut ctx = self.walker.ctx.clone();
        ctx.session = SessionEnv {
            session: unit.last_session.clone(),
            task: Some(unit.task.id.clone()),
            try_number: unit.try_.as_ref().map(|t| t.number),
            contract: None,
            confined: None,
        };
        ctx
    }

    /// Everything the unit changed, to go to the remote with its claim's release or hold: the
    /// task's refs, this walk's journal chain and its sessions' chains for the task.
    fn riders(&self, unit: &WorkUnit) -> Result<BTreeSet<String>> {
        let mut names = sync::task_scope(self.store, &unit.id())?;
        names.insert(refs::journal(&self.walker.writer()));
        for entry in self.walker.task_history(self.store, &unit.task.id)? {
            if entry.event.writer == self.walker.key {
                if let Some(session) =
                    entry.event.session.as_deref().or(entry.event.data.get("session").and_then(|s| s.as_str()))
                {
                    if let Ok(writer) = crate::ids::session_writer(session) {
                        names.insert(refs::journal(&writer));
                    }
                }
            }
        }
        Ok(names)
    }

    /// Give the claim up, publishing what the unit changed in the same push; a lost claim is
    /// not ours to release, but its results are still published.
    fn release(&self, unit: &WorkUnit) -> Result<()> {
        let riders = self.riders(unit)?;
        let key = ClaimKey::node(&unit.id());
        let _one_at_a_time = self.walker.publishing();
        // Cut off from the remote, the unit's refs wait here (committed, nothing lost) until it
        // answers, and then go out with the release in one push, as they would have.
        self.walker.patiently(self.store, || {
            if unit.lost {
                if let Some(remote) = self.store.arbiter() {
                    sync::publish(self.store, &self.walker.ctx, &remote, riders.clone(), None)?;
                }
            } else {
                claim::release_with(self.store, &self.walker.ctx, &key, &self.walker.key, false, &riders)?;
            }
            Ok(())
        })?;
        self.store.take_written();
        Ok(())
    }

    fn drop_worktree(&self, unit: &WorkUnit) {
        if let Some(try_) = &unit.try_ {
            if let Err(err) = tries::remove_worktree(self.store, try_) {
                self.walker.observer.event(&Event::Warning {
                    message: format!("could not remove the worktree of {}: {err:#}", unit.task.id),
                });
            }
        }
    }

    /// Close the task in `state` (failed, needs-you, needs-decision), keep the claim (park
    /// exclusion), tidy the worktree.
    fn close_as(&mut self, unit: &mut WorkUnit, state: State, reason: &str) -> Result<bool> {
        // A claim lost while the remote was silent: the verdict is not this walk's to record.
        if let Some(why) = self.still_ours(unit)? {
            engine::Queue::abandon(self, unit, &why)?;
            return Ok(false);
        }
        let ctx = self.session_ctx(unit);
        let mut transition = backlog::Transition::to(state, Some(reason.to_owned()));
        transition.from = vec![State::Open];
        transition.about.number = unit.try_.as_ref().map(|t| t.number);
        transition.about.walker = Some(self.walker.key.clone());
        match backlog::transition(self.store, &ctx, &unit.id(), transition) {
            Ok(_) => {}
            // A person changed its state meanwhile: their word stands.
            Err(err) if crate::error::find_refusal(&err).is_some() => {}
            Err(err) => return Err(err),
        }
        self.walker.record(
            self.store,
            Some(&unit.task.id),
            Recorded::UnitClosed(events::UnitClosed {
                verdict: state.as_str().to_owned(),
                reason: Some(reason.to_owned()),
                commit: None,
                number: unit.try_.as_ref().map(|t| t.number),
                message: None,
            }),
        )?;
        let riders = self.riders(unit)?;
        let _one_at_a_time = self.walker.publishing();
        self.walker.patiently(self.store, || {
            if unit.lost {
                if let Some(remote) = self.store.arbiter() {
                    sync::publish(self.store, &self.walker.ctx, &remote, riders.clone(), None)?;
                }
            } else {
                // Keep the claim (park exclusion), and publish the task's new state with it.
                let opts = self.claim_options(format!(
                    "{} ({}): {}",
                    backlog::HOLD_REASON,
                    state.as_str(),
                    first_line(reason)
                ));
                claim::acquire_with(self.store, &self.walker.ctx, &ClaimKey::node(&unit.id()), &opts, &riders)?;
            }
            Ok(())
        })?;
        self.store.take_written();
        // `done --try` is offered for a try it can accept (one whose work merges into the task
        // branch), read before its worktree goes.
        let acceptable = match &unit.try_ {
            Some(t) => tries::acceptable(self.store, t).unwrap_or(false).then_some(t.number),
            None => None,
        };
        self.drop_worktree(unit);
        self.walker.observer.event(&Event::Closed {
            task: unit.task.id.clone(),
            state: state.as_str().to_owned(),
            reason: reason.to_owned(),
            number: acceptable,
        });
        if matches!(state, State::NeedsYou | State::NeedsDecision | State::Failed) {
            let told = serde_json::json!({
                "task": unit.task.id, "title": unit.task.title, "state": state.as_str(), "reason": reason,
                "try": unit.try_.as_ref().map(|t| t.number),
            });
            self.walker.notify(self.store, "needs_you", told);
        }
        Ok(false)
    }

    /// Work that is ready but cannot land without a person.
    fn park(&mut self, unit: &mut WorkUnit, reason: &str) -> Result<bool> {
        self.close_as(unit, State::NeedsYou, reason)
    }

    /// Before a unit closes with a shared remote: refresh its claim there (waiting while
    /// the remote does not answer), so that no other clone can take the task over before the
    /// close's push — which carries the task's new state with the claim's release — has gone
    /// out, a lease from now. `Some(why)` when the claim is not ours any more (its lease ran
    /// out while this clone was cut off, and another clone took the task): the unit is then
    /// left as lost, its work a kept try on its try branch (published with the abandonment),
    /// never a second done.
    fn still_ours(&self, unit: &mut WorkUnit) -> Result<Option<String>> {
        if self.store.arbiter().is_none() {
            return Ok(None);
        }
        let key = ClaimKey::node(&unit.id());
        let opts = self.claim_options(format!("worked by {}", self.walker.key));
        let ctx = &self.walker.ctx;
        // Refreshed less than a third of a lease ago (by this walk, confirmed by the remote
        // after its session): two thirds of a lease are left before anyone could take it over,
        // which the close needs no push of its own for.
        if let Some(held) = claim::read(self.store, &key)? {
            let age = ctx.now() - held.record.refreshed_at;
            if held.record.holder == self.walker.key && age >= chrono::Duration::zero() && age < opts.ttl / 3 {
                return Ok(None);
            }
        }
        let kept = |unit: &WorkUnit| {
            unit.try_
                .as_ref()
                .map_or(String::new(), |t| format!("; its work is kept on {}", refs::short_branch(&t.branch)))
        };
        match self.walker.patiently(self.store, || claim::acquire(self.store, ctx, &key, &opts))? {
            Acquire::Refreshed(_) => Ok(None),
            Acquire::HeldByOther(held) => {
                unit.lost = true;
                Ok(Some(format!("its claim was taken by {} before it could close{}", held.record.holder, kept(unit))))
            }
            // Free again (released meanwhile by someone else): taken back, but the task's record
            // must still be open on the remote.
            Acquire::Acquired(_) | Acquire::TookOver { .. } => {
                match self.walker.patiently(self.store, || backlog::open_after_claim(self.store, ctx, &unit.id()))? {
                    Some(_) => Ok(None),
                    None => Ok(Some(format!("the task was closed elsewhere before it could close{}", kept(unit)))),
                }
            }
        }
    }

    /// Move the task branch to the try's head and mark the task done.
    fn finish(&mut self, unit: &mut WorkUnit, message: &str) -> Result<bool> {
        let Some(try_) = unit.try_.clone() else {
            return self.park(unit, "the task was reported done before any work was done");
        };
        let id = unit.id();
        if task::read(self.store, &id)?.is_none_or(|now| now.task.state != State::Open) {
            // A person closed it while its last session was being checked: their word stands.
            engine::Queue::abandon(
                self,
                unit,
                "the task was closed as its try passed (a person's word, or done by another clone)",
            )?;
            return Ok(false);
        }
        if let Some(why) = self.still_ours(unit)? {
            engine::Queue::abandon(self, unit, &why)?;
            return Ok(false);
        }
        let branch = refs::task_branch(&id);
        let head = self
            .store
            .ref_target(&try_.branch)?
            .ok_or_else(|| anyhow::anyhow!("try branch '{}' is missing", try_.branch))?;
        // An approval holds for the tree its reviewer read, and for no other.
        let reviews = super::review::approvals_in(&self.walker.task_history(self.store, &unit.task.id)?, try_.number);
        let reviewed = !unit.task.reviewers.is_empty() || !self.walker.opts.reviewers.is_empty();
        if reviewed || !reviews.is_empty() {
            let tree = self.store.commit_tree(head).map(|t| t.to_string()).unwrap_or_default();
            if reviews.is_empty() {
                return self.park(unit, "its work was not approved by a review");
            }
            if let Some(stale) = reviews.iter().find(|r| r.tree != tree) {
                return self.park(
                    unit,
                    &format!(
                        "its work is not approved: {} approved tree {} in round {}, but the work's tree is now {} (an approval holds for the tree it read only)",
                        stale.role,
                        &stale.tree[..stale.tree.len().min(12)],
                        stale.round,
                        &tree[..tree.len().min(12)]
                    ),
                );
            }
        }
        // The task branch moved since this try began: its changes are brought along.
        let commit = match tries::land(self.store, &try_, head, "loop: task done")? {
            tries::Landed::Moved(commit) => commit,
            tries::Landed::Conflict(paths) => {
                return self.park(
                    unit,
                    &format!("the task branch moved meanwhile and merging it conflicts in: {}", paths.join(", ")),
                );
            }
            tries::Landed::CheckedOut(path) => {
                return self.park(
                    unit,
                    &format!(
                        "its work is on {} but {} is checked out in {}, so it was not moved",
                        refs::short_branch(&try_.branch),
                        refs::short_branch(&branch),
                        path.display()
                    ),
                );
            }
        };
        self.walker.observer.event(&Event::BranchMoved {
            task: unit.task.id.clone(),
            branch: refs::short_branch(&branch).to_owned(),
            commit: commit.to_string(),
        });
        let ctx = self.session_ctx(unit);
        let spent = crate::store::ledger::total_of(&self.walker.task_history(self.store, &unit.task.id)?);
        backlog::done(
            self.store,
            &ctx,
            &id,
            DoneOptions {
                commit: Some(commit.to_string()),
                message: (!message.trim().is_empty()).then(|| message.to_owned()),
                try_number: Some(try_.number),
                checks: unit.checks.clone(),
                reviews,
                unchecked: self.walker.opts.checks.is_none(),
                spent: Some(spent),
                children: Vec::new(),
            },
        )?;
        self.walker.record(
            self.store,
            Some(&unit.task.id),
            Recorded::UnitClosed(events::UnitClosed {
                verdict: "done".into(),
                reason: None,
                commit: Some(commit.to_string()),
                number: Some(try_.number),
                message: (!message.trim().is_empty()).then(|| message.to_owned()),
            }),
        )?;
        self.release(unit)?;
        self.drop_worktree(unit);
        self.walker.observer.event(&Event::Done { task: unit.task.id.clone(), message: message.to_owned() });
        Ok(true)
    }
}

impl engine::Queue for GitQueue<'_> {
    type Unit = WorkUnit;

    fn next(&mut self) -> Result<Option<WorkUnit>> {
        give_back_memory();
        let ctx = &self.walker.ctx;
        for _round in 0..100 {
            let board = self.walker.board(self.store)?;
            let only = &self.walker.opts.tasks;
            let ready: Vec<&crate::store::index::Row> = board
                .ready(&self.walker.opts.labels)
                .filter(|r| only.is_empty() || only.iter().any(|t| t == r.id()))
                .take(64)
                .collect();
            if ready.is_empty() {
                return Ok(None);
            }
            let ready: Vec<TaskId> =
                backlog::claim_order(&ready, self.contended).into_iter().filter_map(|r| r.id().parse().ok()).collect();
            // A task tried and lost leaves our copy of its claim updated (or of its record, when
            // it was done meanwhile), and the pull below brings the rest of the fleet's news:
            // the next look at the board has fewer ready tasks, so this ends.
            let mut lost_any = false;
            for id in &ready {
                let key = ClaimKey::node(id);
                let opts = self.claim_options(format!("worked by {}", self.walker.key));
                // Cut off from the remote, no claim is made: the worker waits here (its other
                // units' sessions go on) until the remote answers.
                let acquired = match self.walker.patiently(self.store, || claim::acquire(self.store, ctx, &key, &opts))
                {
                    Err(err) if self.walker.cancelled(self.store) && remote::no_answer(&err).is_some() => {
                        return Ok(None)
                    }
                    acquired => acquired?,
                };
                match acquired {
                    Acquire::Acquired(_) | Acquire::TookOver { .. } => {}
                    // Our own live claim: another worker of this walk has the task.
                    Acquire::Refreshed(_) => continue,
                    Acquire::HeldByOther(_) => {
                        lost_any = true;
                        break;
                    }
                };
                // The claim is ours; the task may have been closed in between, here or on
                // another clone (whose result came with its release).
                match self.walker.patiently(self.store, || backlog::open_after_claim(self.store, ctx, id))? {
                    Some(task) => {
                        self.walker.record(
                            self.store,
                            Some(id.as_str()),
                            Recorded::Claimed(events::Claimed {
                                title: task.title.clone(),
                                priority: Some(task.priority.to_string()),
                            }),
                        )?;
                        self.walker.observer.event(&Event::Claimed {
                            task: id.to_string(),
                            title: task.title.clone(),
                            priority: task.priority.to_string(),
                        });
                        return Ok(Some(WorkUnit {
                            task,
                            try_: None,
                            last_session: None,
                            checks: None,
                            lost: false,
                            plan: None,
                            handoff: None,
                            announced: false,
                            last_agent: None,
                            merging: None,
                        }));
                    }
                    None => {
                        self.walker
                            .patiently(self.store, || claim::release(self.store, ctx, &key, &self.walker.key, false))?;
                        lost_any = true;
                        break;
                    }
                }
            }
            if !lost_any {
                // Every ready task is one this walk's other workers hold.
                return Ok(None);
            }
            self.contended = true;
            if let Some(remote) = self.store.arbiter() {
                // Our board is behind the fleet's: bring its claims and records up to date in
                // one fetch rather than losing task after task to others.
                let names = BTreeSet::from([format!("{}node/*", refs::CLAIMS), format!("{}*", refs::TASKS)]);
                self.walker.patiently(self.store, || sync::pull(self.store, ctx, &remote, names.clone()))?;
            }
        }
        Err(crate::error::refused("could not claim any ready task: others kept taking them first (100 rounds)")
            .hint("see who holds them with 'git loop claim list'")
            .into())
    }

    fn close(&mut self, unit: &mut WorkUnit, verdict: Verdict, message: &str) -> Result<bool> {
        match verdict {
            Verdict::Done => {
                let done = self.finish(unit, message)?;
                if done && self.walker.opts.land {
                    // Landed beside the workers, by the walk's lander: this worker goes on.
                    // A landing that fails later counts the task as not done at the walk's
                    // end (`failed_after_counting`).
                    self.walker.queue_landing(unit.id());
                }
                Ok(done)
            }
            Verdict::Blocked => self.close_as(
                unit,
                State::NeedsYou,
                &format!("blocked: {}", if message.is_empty() { "no reason given" } else { message }),
            ),
            Verdict::Failed => self.close_as(
                unit,
                State::Failed,
                &format!("failed: {}", if message.is_empty() { "no reason given" } else { message }),
            ),
            Verdict::Undecided => self.close_as(unit, State::NeedsDecision, message),
            Verdict::Parked => self.close_as(unit, State::Parked, message),
        }
    }

    fn abandon(&mut self, unit: &mut WorkUnit, why: &str) -> Result<()> {
        self.walker.record(
            self.store,
            Some(&unit.task.id),
            Recorded::UnitAbandoned(events::UnitAbandoned {
                reason: why.to_owned(),
                number: unit.try_.as_ref().map(|t| t.number),
            }),
        )?;
        self.release(unit)?;
        // A task a person closed meanwhile (stop, park, cancel) has no try going on: its worktree
        // goes now, as a closed unit's does, rather than be found by the next walk as a crash's
        // leftover. One taken over is the person's; an open one goes on in it.
        let closed = task::read(self.store, &unit.id())?
            .is_some_and(|now| !matches!(now.task.state, State::Open | State::TakenOver));
        if closed {
            self.drop_worktree(unit);
        }
        self.walker.observer.event(&Event::Abandoned { task: unit.task.id.clone(), why: why.to_owned() });
        Ok(())
    }
}

/// Hand the memory the last unit freed back to the system: what is freed in the middle of the
/// arena stays resident until trimmed.
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages to the system; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
