//! The dispatcher side of the walk: what works a unit next, and with which agent.
//!
//! Before each dispatch the task is read again, so a person's word between sessions counts.
//! Then the plan:
//! 1. A race of this task that a killed walk left unfinished is re-entered (`race`).
//! 2. An agent a person assigned (`git loop reassign`) works it alone.
//! 3. A race: the task's `together` agents, else the walk's `--together`.
//! 4. Else one agent: the task's first preferred agent that is allowed and reachable, else
//!    the walk's agent.
//!
//! An agent whose CLI said it cannot be reached (rate or usage limit, service down, login
//! expired) is left alone for `loop.unreachableFor` (default 15 minutes): its task goes to
//! the fallback agents (the task's own, else `loop.fallback`), one continuing its try, several
//! racing from its work; new tasks go back to it once that time is up. With no fallback, the
//! walk pauses.

use anyhow::Result;
use gix::ObjectId;

use super::unit::{BudgetSpent, GitDispatcher, Pick, Plan, Ran, Seat, Step, Withdrawal, WorkUnit};
use super::{handoff, race, resolve, Event};
use crate::engine::{self, Budget, Dispatched, Verdict};
use crate::refs;
use crate::store::events::{self, Recorded};
use crate::store::journal;
use crate::store::task::{self, State, Task};
use crate::tries;

impl GitDispatcher<'_> {
    /// Who should work `task` now (see the module docs); `Err` says why nobody can.
    fn plan(&self, unit: &WorkUnit) -> Result<Plan, String> {
        let task = &unit.task;
        if let Some(assigned) = &task.assigned {
            return self.reachable_or_fallback(task, &assigned.agent);
        }
        if let Some(plan) = &unit.plan {
            return Ok(plan.clone());
        }
        let opts = &self.walker.opts;
        let racers = if task.together.is_empty() || opts.together_first { &opts.together } else { &task.together };
        let racers = if racers.is_empty() { &task.together } else { racers };
        if !racers.is_empty() {
            let pick =
                opts.pick.or(task.pick.as_deref().and_then(Pick::parse)).or(opts.pick_default).unwrap_or(Pick::First);
            let usable: Vec<String> =
                racers.iter().filter(|a| self.allowed(task, a) && self.walker.reachable(a)).cloned().collect();
            return match usable.len() {
                0 => self.reachable_or_fallback(task, &racers[0]),
                1 => Ok(Plan::Single { agent: usable[0].clone() }),
                _ => Ok(Plan::Race { agents: usable, pick }),
            };
        }
        let preferred = task.agents.iter().find(|a| self.allowed(task, a) && self.walker.installed(self.store, a));
        let agent = preferred.cloned().unwrap_or_else(|| opts.agent.name.clone());
        if !self.allowed(task, &agent) {
            return self.fallback_plan(task, &agent, &format!("{agent} is forbidden for {}", task.id));
        }
        self.reachable_or_fallback(task, &agent)
    }

    fn allowed(&self, task: &Task, agent: &str) -> bool {
        !task.forbid.iter().any(|f| f == agent) || task.assigned.as_ref().is_some_and(|a| a.agent == agent)
    }

    fn reachable_or_fallback(&self, task: &Task, agent: &str) -> Result<Plan, String> {
        match self.walker.unreachable_reason(agent) {
            None => Ok(Plan::Single { agent: agent.to_owned() }),
            Some(reason) => self.fallback_plan(task, agent, &format!("{agent} is unreachable ({reason})")),
        }
    }

    /// The fallback agents for `task` in place of `agent` (`why` says what is wrong with it):
    /// one continues, several race.
    fn fallback_plan(&self, task: &Task, agent: &str, why: &str) -> Result<Plan, String> {
        let listed = if task.fallback.is_empty() { &self.walker.opts.fallback } else { &task.fallback };
        let usable: Vec<String> = listed
            .iter()
            .filter(|a| a.as_str() != agent && self.allowed(task, a) && self.walker.reachable(a))
            .filter(|a| self.walker.installed(self.store, a))
            .cloned()
            .collect();
        match usable.len() {
            0 if listed.is_empty() => Err(format!("{why} and no fallback agent is set (loop.fallback)")),
            0 => Err(format!("{why} and no fallback agent can take {} either", task.id)),
            1 => Ok(Plan::Single { agent: usable[0].clone() }),
            _ => Ok(Plan::Race { agents: usable, pick: Pick::First }),
        }
    }

    /// Make sure the task branch exists (base + done dependencies); `Err` is a verdict.
    pub(super) fn task_branch(&self, task: &Task) -> Result<Result<ObjectId, Dispatched>> {
        let id = task.task_id();
        let deps = crate::landing::epic::start_after(self.store, task);
        let role =
            resolve::role_of(self.store, self.walker.opts.resolver.as_deref(), Some(&self.walker.opts.agent.name))?;
        let mut resolving = |c: &tries::DependencyConflict<'_>| -> Result<Option<Result<gix::ObjectId, String>>> {
            let Some(role) = &role else { return Ok(None) };
            let Some(dependency) = crate::store::task::read(self.store, c.dependency)? else { return Ok(None) };
            let merge = resolve::Merge {
                task,
                kind: "dependency",
                into: refs::short_branch(&refs::task_branch(&id)).to_owned(),
                from: &dependency.task,
                ours: c.ours,
                theirs: c.theirs,
                paths: c.paths,
                message: format!(
                    "loop: merge {} into {}\n",
                    refs::short_branch(&refs::task_branch(c.dependency)),
                    refs::short_branch(&refs::task_branch(&id))
                ),
                checks: true,
                keep: None,
            };
            Ok(Some(match self.resolve_merge(&merge, role)? {
                crate::landing::Resolution::Resolved { commit, .. } => Ok(commit),
                crate::landing::Resolution::Unresolved(why) => Err(why),
            }))
        };
        Ok(match tries::ensure_task_branch_resolving(self.store, &id, self.walker.base, &deps, &mut resolving)? {
            tries::TaskBranch::Ready(head) => Ok(head),
            tries::TaskBranch::Conflict { dependency, paths, unresolved } => Err(Dispatched::Verdict {
                verdict: Verdict::Blocked,
                message: match unresolved {
                    Some(why) => {
                        format!("merging the work of '{dependency}' conflicts in: {} ({why})", paths.join(", "))
                    }
                    None => format!("merging the work of '{dependency}' conflicts in: {}", paths.join(", ")),
                },
            }),
        })
    }

    /// Set up the unit's try: an unfinished try of this task to continue, or a new one from
    /// the task branch; and its worktree.
    fn prepare(&self, unit: &mut WorkUnit, agent: &str, history: &[journal::Entry]) -> Result<Option<Dispatched>> {
        let id = unit.id();
        let head = match self.task_branch(&unit.task)? {
            Ok(head) => head,
            Err(early) => return Ok(Some(early)),
        };
        let unfinished = unfinished_try(history);
        // A landing of this task that conflicted and that nobody answered: the try is that
        // merge in progress, not the task again on its old branch.
        let pending = match unfinished {
            None => crate::landing::conflict::pending(self.store, &id, history)?,
            Some(_) => None,
        };
        let mut started = None;
        let (try_, resumed, checkout) = match pending {
            Some(pending) => {
                let answer = crate::landing::conflict::Answer::of(self.store, &id, &pending)?;
                match tries::merge::open(self.store, &id, &self.walker.key, history, &answer.merge())? {
                    tries::merge::Begun::Conflicts { opened, paths } => {
                        started = Some(answer.started(opened.try_.number, paths));
                        (opened.try_, false, opened.checkout)
                    }
                    tries::merge::Begun::Clean(commit) => {
                        let opened = tries::open(self.store, &id, &self.walker.key, None, history, || Ok(commit))?;
                        (opened.try_, opened.resumed, opened.checkout)
                    }
                }
            }
            None => {
                let opened = tries::open(self.store, &id, &self.walker.key, unfinished, history, || Ok(head))?;
                (opened.try_, opened.resumed, opened.checkout)
            }
        };
        // Before `loop.setup`, which runs before the first session.
        let fresh = checkout.as_ref().is_some_and(|c| matches!(c.how, tries::pool::How::Added));
        let warmed = self.walker.warm(self.store, &try_, try_.number, fresh);
        self.walker.record(
            self.store,
            Some(&unit.task.id),
            Recorded::TryOpened(events::TryOpened {
                number: try_.number,
                agent: agent.to_owned(),
                branch: refs::short_branch(&try_.branch).to_owned(),
                worktree: try_.worktree.display().to_string(),
                resumed,
                race: false,
                warmed: warmed.as_ref().map(|w| w.record()),
                checkout: checkout.as_ref().map(|c| c.record()),
            }),
        )?;
        unit.merging = match started {
            Some(started) => {
                self.walker.record(self.store, Some(&unit.task.id), Recorded::MergeStarted(started.clone()))?;
                Some(started)
            }
            None => unfinished.and_then(|n| crate::landing::conflict::merge_of(history, n)),
        };
        self.walker.observer.event(&Event::TryOpened {
            task: unit.task.id.clone(),
            number: try_.number,
            branch: refs::short_branch(&try_.branch).to_owned(),
            worktree: try_.worktree.clone(),
            resumed,
            warmed,
            checkout,
        });
        unit.try_ = Some(try_);
        Ok(None)
    }

    /// One agent on the unit's own try.
    fn single(
        &self,
        unit: &mut WorkUnit,
        agent_name: &str,
        (attempt, carry): (u32, Option<&str>),
        history: &[journal::Entry],
        budget: &Budget<'_>,
    ) -> Result<Dispatched> {
        let agent = self.walker.agent(self.store, agent_name)?;
        // Checked before the first session of each agent on the unit.
        if unit.try_.is_none() || unit.last_agent.as_deref() != Some(agent_name) {
            if let Some(why) = self.review_refusal(&unit.task, &[agent_name.to_owned()])? {
                return Ok(Dispatched::Verdict { verdict: Verdict::Blocked, message: format!("review: {why}") });
            }
        }
        if unit.try_.is_none() {
            if let Some(early) = self.prepare(unit, agent_name, history)? {
                return Ok(early);
            }
        }
        let try_ = unit.try_.clone().expect("prepared above");
        let handoff = unit.handoff.take();
        // While its try is the merge its landing conflicted on, every session is told so.
        let merge_note = unit
            .merging
            .as_ref()
            .filter(|m| {
                let head = self.store.ref_target(&try_.branch).ok().flatten();
                let theirs = m.theirs.parse().ok();
                match (head, theirs) {
                    (Some(head), Some(theirs)) => !self.store.is_ancestor(theirs, head).unwrap_or(false),
                    _ => true,
                }
            })
            .map(|m| crate::landing::conflict::note(m, carry));
        let carry = merge_note.as_deref().or(carry);
        let ran = self.session(&Seat {
            task: &unit.task,
            try_: &try_,
            agent: &agent,
            attempt,
            carry,
            halt: None,
            handoff: handoff.as_deref(),
        })?;
        unit.last_session = Some(ran.session.clone());
        unit.last_agent = Some(agent.name.clone());
        if ran.checks.is_some() {
            unit.checks = ran.checks.clone();
        }
        match ran.step.clone() {
            Step::Passed { message } => {
                if let Some(started) = &unit.merging {
                    let concluded = crate::landing::conflict::conclude(self.store, &try_, started)?;
                    if let Some(what) = crate::landing::conflict::unconcluded(started, &concluded) {
                        return Ok(Dispatched::Continue { note: format!("Your work is not the merge yet: {what}.\n") });
                    }
                }
                self.walker.record(
                    self.store,
                    Some(&unit.task.id),
                    Recorded::TryPassed(events::TryPassed {
                        number: try_.number,
                        agent: agent.name.clone(),
                        head: self.store.ref_target(&try_.branch)?.map(|h| h.to_string()),
                    }),
                )?;
                Ok(Dispatched::Verdict { verdict: Verdict::Done, message })
            }
            Step::Continue { note } => Ok(Dispatched::Continue { note }),
            Step::Verdict { verdict, message } => Ok(Dispatched::Verdict { verdict, message }),
            Step::Unreachable { reason } => self.unreachable(unit, &agent.name, reason, &ran, budget),
            Step::Lost { reason } => {
                unit.lost = true;
                Ok(Dispatched::Lost { reason })
            }
            Step::Withdrawn(w) => self.withdrawn(unit, w, &agent.name, &ran),
            Step::Interrupted | Step::Halted => Ok(Dispatched::Interrupted),
            // The error ends the walk; the engine gives the task back, unburned.
            Step::CannotRun { what, said, log } => {
                let unwarmed = super::unit::missing_from_try(&said, self.store.workdir(), &try_.worktree);
                Err(super::unit::cannot_run(&agent.name, what, &said, &log, self.walker.sandbox().is_some(), unwarmed))
            }
            Step::Spent { .. } => Ok(Dispatched::Spent),
        }
    }

    /// A person's word ended the session: give the task up, or hand it to the new agent.
    pub(super) fn withdrawn(&self, unit: &mut WorkUnit, w: Withdrawal, from: &str, ran: &Ran) -> Result<Dispatched> {
        match w {
            Withdrawal::Closed { state, reason } => {
                // A take-over passes the claim to the person; any other state is closed by
                // a person, who decides what comes next: the claim goes.
                unit.lost = state == State::TakenOver;
                let said = reason.map(|r| format!(" ({r})")).unwrap_or_default();
                Ok(Dispatched::Lost { reason: format!("it is {} now{said}", state.as_str()) })
            }
            Withdrawal::Reassigned { agent } => {
                unit.plan = None;
                let why = if agent == from {
                    "a person restarted it".to_owned()
                } else {
                    format!("a person reassigned the task to {agent}")
                };
                let line = if agent == from {
                    format!("{} · {from} restarts · its work so far is kept", unit.task.id)
                } else {
                    format!("{} · reassigned from {from} to {agent} · its work so far is kept", unit.task.id)
                };
                self.walker.record(
                    self.store,
                    Some(&unit.task.id),
                    Recorded::HandedOver(events::HandedOver {
                        from: from.to_owned(),
                        to: events::Agents::One(agent.clone()),
                        why: why.clone(),
                        session: Some(ran.session.clone()),
                    }),
                )?;
                self.walker.observer.event(&Event::Handover { task: unit.task.id.clone(), line });
                let note = self.handoff_note(unit, from, &why, ran)?;
                Ok(Dispatched::Continue { note })
            }
        }
    }

    /// The note for the agent that takes the unit's try over from `from` (and the transcript
    /// to copy into its worktree, kept on the unit).
    fn handoff_note(&self, unit: &mut WorkUnit, from: &str, why: &str, ran: &Ran) -> Result<String> {
        let Some(try_) = &unit.try_ else {
            return Ok(format!("This task was with {from} until now: {why}.\n"));
        };
        let transcript = handoff::transcript_of(self.store, &ran.session);
        unit.handoff = transcript.clone();
        let previous =
            handoff::Previous { agent: from, why, session: Some(&ran.session), summary: ran.summary.as_deref() };
        handoff::note(self.store, try_, &previous, transcript.as_deref())
    }

    /// The agent could not be reached: mark it, and hand its task to the fallbacks.
    pub(super) fn unreachable(
        &self,
        unit: &mut WorkUnit,
        agent: &str,
        reason: &'static str,
        ran: &Ran,
        _budget: &Budget<'_>,
    ) -> Result<Dispatched> {
        self.walker.mark_unreachable(self.store, agent, reason, &unit.task.id)?;
        let head = format!("{agent} is unreachable ({reason})");
        let plan = match self.plan(unit) {
            Ok(plan) => plan,
            Err(why) => return Ok(Dispatched::Pause { reason: why }),
        };
        let line = match &plan {
            Plan::Single { agent: next } => format!("{head} · {next} takes {}", unit.task.id),
            Plan::Race { agents, pick } => {
                format!("{head} · {}", race::announce(agents, *pick, &unit.task.id, self.walker.opts.checks.is_some()))
            }
        };
        self.walker.observer.event(&Event::Handover { task: unit.task.id.clone(), line });
        let to = match &plan {
            Plan::Single { agent } => vec![agent.clone()],
            Plan::Race { agents, .. } => agents.clone(),
        };
        self.walker.record(
            self.store,
            Some(&unit.task.id),
            Recorded::HandedOver(events::HandedOver {
                from: agent.to_owned(),
                to: events::Agents::Many(to),
                why: head.clone(),
                session: Some(ran.session.clone()),
            }),
        )?;
        if let Plan::Race { .. } = &plan {
            unit.announced = true;
        }
        unit.plan = Some(plan);
        let note = self.handoff_note(unit, agent, &format!("it is unreachable ({reason})"), ran)?;
        Ok(Dispatched::Continue { note })
    }
}

impl engine::Dispatcher<WorkUnit> for GitDispatcher<'_> {
    fn dispatch(&mut self, unit: &mut WorkUnit, attempt: u32, carry: Option<&str>) -> Result<Dispatched> {
        self.dispatch_within(unit, attempt, carry, &Budget::none())
    }

    fn dispatch_within(
        &mut self,
        unit: &mut WorkUnit,
        attempt: u32,
        carry: Option<&str>,
        budget: &Budget<'_>,
    ) -> Result<Dispatched> {
        match self.dispatch_unit(unit, attempt, carry, budget) {
            // A role's session (a dependency's conflict resolver) found the budget spent.
            Err(err) if err.downcast_ref::<BudgetSpent>().is_some() => Ok(Dispatched::Spent),
            dispatched => dispatched,
        }
    }
}

impl GitDispatcher<'_> {
    /// One dispatch of `unit` (see `engine::Dispatcher::dispatch_within`).
    fn dispatch_unit(
        &mut self,
        unit: &mut WorkUnit,
        attempt: u32,
        carry: Option<&str>,
        budget: &Budget<'_>,
    ) -> Result<Dispatched> {
        // A person may have acted since the last session.
        match task::read(self.store, &unit.id())? {
            Some(now) if now.task.state == State::Open => unit.task = now.task,
            Some(now) => {
                let from = unit.last_agent.clone().unwrap_or_default();
                let ran = Ran { session: String::new(), step: Step::Interrupted, checks: None, summary: None };
                let w = Withdrawal::Closed { state: now.task.state, reason: now.task.reason };
                return self.withdrawn(unit, w, &from, &ran);
            }
            None => {
                unit.lost = true;
                return Ok(Dispatched::Lost { reason: "the task was deleted".into() });
            }
        }
        // The task's history, read once: an unfinished try, a race to take up again, a hand-back.
        let history = self.walker.task_history(self.store, &unit.task.id)?;
        // The first session after a person handed the task back is told what they changed.
        let handed_back = match (carry, attempt) {
            (None, 1) => super::handoff::hand_back_note_in(&history)
                .or_else(|| crate::landing::request::sent_back_note_in(&history)),
            _ => None,
        };
        let carry = carry.or(handed_back.as_deref());
        if let Some(cap) = self.walker.opts.task_budget_usd {
            let spent = crate::store::ledger::total_of(&history);
            if spent.dollars() >= cap {
                let message = format!(
                    "its share of the budget is spent: {} of {} (--task-budget-usd)",
                    crate::store::usage::dollars(spent.dollars()),
                    crate::store::usage::dollars(cap)
                );
                return Ok(Dispatched::Verdict { verdict: Verdict::Parked, message });
            }
        }
        if let Some(resumed) = race::unfinished_in(&history) {
            return race::run(self, unit, race::Entry::Resume(resumed), carry, budget);
        }
        let plan = match self.plan(unit) {
            Ok(plan) => plan,
            Err(why) => return Ok(Dispatched::Pause { reason: why }),
        };
        // The merge a conflicting landing needs is resolved once, in one try: not raced.
        let plan = match plan {
            Plan::Race { agents, .. }
                if unit.try_.is_none()
                    && crate::landing::conflict::pending(self.store, &unit.id(), &history)?.is_some() =>
            {
                Plan::Single { agent: agents[0].clone() }
            }
            plan => plan,
        };
        match plan {
            Plan::Single { agent } => self.single(unit, &agent, (attempt, carry), &history, budget),
            Plan::Race { agents, pick } => {
                race::run(self, unit, race::Entry::New { agents, pick, history: &history }, carry, budget)
            }
        }
    }
}

/// The try a previous walk opened and did not close, if any, from the task's events.
///
/// Race entrants' tries are not counted (a race finds its own again), and a try stays
/// unfinished through a stop, a take-over and a hand-back: only closing it ends it.
pub fn unfinished_try(entries: &[journal::Entry]) -> Option<u32> {
    let mut open = None;
    for entry in entries {
        match Recorded::of(&entry.event) {
            Recorded::TryOpened(opened) if !opened.race => open = Some(opened.number),
            Recorded::UnitClosed(_) | Recorded::RaceStarted(_) => open = None,
            Recorded::TaskDone(_) => open = None,
            _ => {}
        }
    }
    open
}
