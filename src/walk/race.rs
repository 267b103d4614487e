//! Races: several agents on one task at once, each on a try of its own.
//!
//! - Every entrant takes a try number no earlier try of the task used (`tries::take_numbers`),
//!   gets a try branch started from the task branch's head (or, when the race takes over
//!   from an unreachable agent, from that agent's try) and a worktree of its own, and runs its
//!   own sessions; the entrants share the unit's remaining session budget.
//! - A try passes when its verdict is done, the checks pass in its worktree and the review
//!   approves (see `session`).
//! - `first`: the first try to pass wins, and the others are stopped at once; what they left
//!   is committed on their own try branches, which are kept.
//! - `judge`: every try runs to its end; when more than one passed, the judge command reads a
//!   JSON document listing them on stdin and prints the winner's try number. An answer that
//!   names none of them leaves the task in needs-decision.
//! - The winner's try becomes the unit's try, and closing the unit moves the task branch to it
//!   (see `queue`).
//!
//! The journal carries the race: `race_started` (entrants and their try numbers), one
//! `entrant_ended` per entrant that finished, `race_won`. A walk killed mid-race finds the
//! race again from the journal since the task's last state change, and neither renumbers its
//! tries nor restarts the entrants that had finished; a race won but not yet closed is closed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use anyhow::Result;
use gix::ObjectId;
use serde_json::json;

use super::unit::{first_line, GitDispatcher, Pick, Seat, Step, Withdrawal, WorkUnit};
use super::{Event, Walker};
use crate::engine::{Budget, Dispatched, Verdict};
use crate::refs;
use crate::store::events::{self, Recorded};
use crate::store::journal;
use crate::store::task::{State, Task};
use crate::store::Store;
use crate::tries::{self, Try};

/// How a race is entered.
pub enum Entry<'h> {
    /// A new race; `history` is the task's journal events (for its try numbers).
    New {
        agents: Vec<String>,
        pick: Pick,
        history: &'h [journal::Entry],
    },
    Resume(Unfinished),
}

/// A race found in the journal, not yet over.
#[derive(Debug, Clone)]
pub struct Unfinished {
    pub agents: Vec<String>,
    pub tries: Vec<u32>,
    pub pick: Pick,
    pub start: Option<ObjectId>,
    /// Entrants that finished, by try number.
    pub ended: HashMap<u32, EntrantEnd>,
    /// The winner, if one was chosen.
    pub won: Option<u32>,
}

/// How an entrant ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    Blocked,
    /// Stopped because another try won.
    Stopped,
    Unreachable,
    /// The session budget ran out before it finished.
    Spent,
    /// The claim was lost, a person stepped in, or the walk was interrupted.
    Aborted,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Blocked => "blocked",
            Outcome::Stopped => "stopped",
            Outcome::Unreachable => "unreachable",
            Outcome::Spent => "spent",
            Outcome::Aborted => "aborted",
        }
    }

    fn parse(word: &str) -> Option<Outcome> {
        [
            Outcome::Passed,
            Outcome::Failed,
            Outcome::Blocked,
            Outcome::Stopped,
            Outcome::Unreachable,
            Outcome::Spent,
            Outcome::Aborted,
        ]
        .into_iter()
        .find(|o| o.word() == word)
    }
}

/// What an entrant came to.
#[derive(Debug, Clone)]
pub struct EntrantEnd {
    pub outcome: Outcome,
    pub message: String,
    pub checks: Option<serde_json::Value>,
    /// Why the race as a whole must stop (a lost claim, a person, an interruption).
    abort: Option<Abort>,
}

#[derive(Debug, Clone)]
enum Abort {
    Lost(String),
    Withdrawn(Withdrawal, String),
    Interrupted,
}

impl EntrantEnd {
    fn new(outcome: Outcome, message: impl Into<String>) -> EntrantEnd {
        EntrantEnd { outcome, message: message.into(), checks: None, abort: None }
    }
}

/// Whether an event ends any race in progress: a state change, the race's end, or the unit's
/// close.
fn is_boundary(recorded: &Recorded) -> bool {
    matches!(recorded, Recorded::RaceEnded(_) | Recorded::UnitClosed(_) | Recorded::HandedBack(_))
        || State::ALL.iter().any(|s| s.event_kind() == recorded.kind())
}

/// The race of `task` a killed walk left unfinished, if any.
pub fn unfinished(store: &Store, task: &Task) -> Result<Option<Unfinished>> {
    let filter = journal::Filter { task: Some(task.id.clone()), session: None };
    Ok(unfinished_in(&journal::timeline(store, &filter)?.entries))
}

/// `unfinished` over a task's events, already read.
pub fn unfinished_in(entries: &[journal::Entry]) -> Option<Unfinished> {
    let mut current: Option<Unfinished> = None;
    for entry in entries {
        let recorded = Recorded::of(&entry.event);
        match recorded {
            Recorded::RaceStarted(started) => {
                current =
                    (started.agents.len() == started.tries.len() && !started.agents.is_empty()).then(|| Unfinished {
                        pick: Pick::parse(&started.pick).unwrap_or(Pick::First),
                        start: started.start.as_deref().and_then(|s| s.parse().ok()),
                        agents: started.agents,
                        tries: started.tries,
                        ended: HashMap::new(),
                        won: None,
                    });
            }
            Recorded::EntrantEnded(e) => {
                if let (Some(race), Some(outcome)) = (current.as_mut(), Outcome::parse(&e.outcome)) {
                    let mut ended = EntrantEnd::new(outcome, e.message);
                    ended.checks = e.checks.filter(|c| !c.is_null());
                    race.ended.insert(e.number, ended);
                }
            }
            Recorded::RaceWon(won) => {
                if let Some(race) = current.as_mut() {
                    race.won = Some(won.number);
                }
            }
            ref other if is_boundary(other) => current = None,
            _ => {}
        }
    }
    current
}

/// "claude and codex both take t-4f2a · the first to pass the checks wins".
pub fn announce(agents: &[String], pick: Pick, task: &str, checks: bool) -> String {
    let who = match agents {
        [one] => format!("{one} takes"),
        [a, b] => format!("{a} and {b} both take"),
        [rest @ .., last] => format!("{} and {last} all take", rest.join(", ")),
        [] => "nobody takes".to_owned(),
    };
    let rule = match (pick, checks) {
        (Pick::First, true) => "the first to pass the checks wins",
        (Pick::First, false) => "the first to report done wins",
        (Pick::Judge, _) => "a judge picks among the tries that pass",
    };
    format!("{who} {task} · {rule}")
}

/// Entrant labels: the agent's name, with its try number when an agent races itself.
fn labels(agents: &[String], tries: &[u32]) -> Vec<String> {
    agents
        .iter()
        .zip(tries)
        .map(|(a, n)| if agents.iter().filter(|b| *b == a).count() > 1 { format!("{a} (try {n})") } else { a.clone() })
        .collect()
}

/// "claude's try", or "claude (try 3)" when an agent races itself.
fn tries_of(label: &str) -> String {
    if label.ends_with(')') {
        label.to_owned()
    } else {
        format!("{label}'s try")
    }
}

/// What the entrants share while they run.
struct Shared<'b> {
    halt: AtomicBool,
    winner: Mutex<Option<u32>>,
    /// The dispatch's first session is already paid for.
    prepaid: AtomicBool,
    budget: &'b Budget<'b>,
}

impl Shared<'_> {
    fn take_session(&self) -> bool {
        self.prepaid.swap(false, Ordering::SeqCst) || self.budget.take()
    }
}

/// Run (or re-enter) a race on `unit`.
pub fn run(
    d: &GitDispatcher<'_>,
    unit: &mut WorkUnit,
    entry: Entry<'_>,
    carry: Option<&str>,
    budget: &Budget<'_>,
) -> Result<Dispatched> {
    let (store, walker) = (d.store, d.walker);
    let task = unit.task.clone();
    let id = task.task_id();
    let root = tries::worktrees_root(store)?;
    let mut retired: Option<Try> = None;
    let race = match entry {
        Entry::New { agents, pick, history } => {
            if let Some(why) = d.review_refusal(&task, &agents)? {
                return Ok(Dispatched::Verdict { verdict: Verdict::Blocked, message: format!("review: {why}") });
            }
            let start = match &unit.try_ {
                // Taking over from an agent that became unreachable: build on its work.
                Some(from) => store.ref_target(&from.branch)?,
                None => None,
            };
            let start = match start {
                Some(start) => start,
                None => match d.task_branch(&task)? {
                    Ok(head) => head,
                    Err(early) => return Ok(early),
                },
            };
            let numbers = tries::take_numbers(store, &id, &walker.key, agents.len(), history)?;
            walker.record(
                store,
                Some(&task.id),
                Recorded::RaceStarted(events::RaceStarted {
                    agents: agents.clone(),
                    tries: numbers.clone(),
                    pick: pick.as_str().to_owned(),
                    start: Some(start.to_string()),
                    from_try: unit.try_.as_ref().map(|t| t.number),
                }),
            )?;
            if !unit.announced {
                walker.observer.event(&Event::RaceStarted {
                    task: task.id.clone(),
                    agents: agents.clone(),
                    tries: numbers.clone(),
                    line: announce(&labels(&agents, &numbers), pick, &task.id, walker.opts.checks.is_some()),
                });
            }
            // Its work is where the entrants start; its branch stays, its worktree goes once the
            // entrants are warmed from it.
            retired = unit.try_.take();
            Unfinished { agents, tries: numbers, pick, start: Some(start), ended: HashMap::new(), won: None }
        }
        Entry::Resume(race) => {
            let names = labels(&race.agents, &race.tries);
            let parts: Vec<String> = names
                .iter()
                .zip(&race.tries)
                .map(|(name, n)| match race.ended.get(n) {
                    Some(e) => format!("{name} {}", e.outcome.word()),
                    None => format!("{name} on try {n}"),
                })
                .collect();
            walker.observer.event(&Event::RaceStarted {
                task: task.id.clone(),
                agents: race.agents.clone(),
                tries: race.tries.clone(),
                line: format!("{} · back in the race: {}", task.id, parts.join(" · ")),
            });
            race
        }
    };
    unit.announced = false;
    let names = labels(&race.agents, &race.tries);
    if let Some(won) = race.won {
        // Won before the walk stopped: close it now.
        let ended = race.ended.get(&won).cloned().unwrap_or_else(|| EntrantEnd::new(Outcome::Passed, ""));
        return win(d, unit, &race, &names, won, ended, None);
    }
    // Each entrant's try: its branch (from the race's start) and, if it still runs, its worktree.
    let start = race.start;
    let mut seats: Vec<(usize, Try)> = Vec::new();
    let seated = (|| -> Result<()> {
        for (i, n) in race.tries.iter().enumerate() {
            let try_ = Try::describe(&id, *n, &root);
            if store.ref_target(&try_.branch)?.is_none() {
                let Some(start) = start else {
                    anyhow::bail!("the race on {id} has no start commit to open try {n} from");
                };
                tries::open_branch(store, &try_, start)?;
                walker.record(
                    store,
                    Some(&task.id),
                    Recorded::TryOpened(events::TryOpened {
                        number: *n,
                        agent: race.agents[i].clone(),
                        branch: refs::short_branch(&try_.branch).to_owned(),
                        worktree: try_.worktree.display().to_string(),
                        resumed: false,
                        race: true,
                        warmed: None,
                        checkout: None,
                    }),
                )?;
            }
            if !race.ended.contains_key(n) {
                let checkout = tries::add_worktree(store, &try_)?;
                // From the try the race began from, else the main checkout: never one entrant's
                // build state from another's.
                let first = race.tries.iter().copied().min().unwrap_or(*n);
                let fresh = checkout.as_ref().is_some_and(|c| matches!(c.how, tries::pool::How::Added));
                let warmed = walker.warm(store, &try_, first, fresh);
                walker.observer.event(&Event::TryOpened {
                    task: task.id.clone(),
                    number: *n,
                    branch: refs::short_branch(&try_.branch).to_owned(),
                    worktree: try_.worktree.clone(),
                    resumed: false,
                    warmed,
                    checkout,
                });
                seats.push((i, try_));
            }
        }
        Ok(())
    })();
    // Gone whether or not every entrant was seated: a race taken up again never needs it.
    if let Some(from) = retired {
        let _ = tries::remove_worktree(store, &from);
    }
    seated?;
    let shared =
        Shared { halt: AtomicBool::new(false), winner: Mutex::new(None), prepaid: AtomicBool::new(true), budget };
    let handoff = unit.handoff.take();
    let results: Vec<(usize, Result<EntrantEnd>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = seats
            .iter()
            .map(|(i, try_)| {
                let (shared, task, race, handoff) = (&shared, &task, &race, handoff.as_deref());
                let agent = race.agents[*i].clone();
                scope.spawn(move || (*i, entrant(walker, task, try_, &agent, race.pick, carry, handoff, shared)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| (usize::MAX, Err(anyhow::anyhow!("a race entrant panicked")))))
            .collect()
    });
    let mut outcomes: Vec<(usize, EntrantEnd)> =
        race.tries.iter().enumerate().filter_map(|(i, n)| race.ended.get(n).map(|e| (i, e.clone()))).collect();
    let mut error = None;
    for (i, result) in results {
        match result {
            Ok(ended) => outcomes.push((i, ended)),
            Err(err) => {
                error.get_or_insert(err);
            }
        }
    }
    if let Some(err) = error {
        return Err(err);
    }
    outcomes.sort_by_key(|(i, _)| *i);
    // A lost claim, a person, or the walk's end stops the whole race.
    for (i, ended) in &outcomes {
        match &ended.abort {
            Some(Abort::Interrupted) => return Ok(Dispatched::Interrupted),
            Some(Abort::Lost(reason)) => {
                unit.lost = true;
                return Ok(Dispatched::Lost { reason: reason.clone() });
            }
            Some(Abort::Withdrawn(w, session)) => {
                let ran =
                    super::unit::Ran { session: session.clone(), step: Step::Interrupted, checks: None, summary: None };
                if let Withdrawal::Reassigned { .. } = w {
                    walker.record(
                        store,
                        Some(&task.id),
                        Recorded::RaceEnded(events::RaceEnded { outcome: "reassigned".into() }),
                    )?;
                }
                return d.withdrawn(unit, w.clone(), &race.agents[*i], &ran);
            }
            None => {}
        }
    }
    let winner = *shared.winner.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(won) = winner {
        let i = race.tries.iter().position(|n| *n == won).expect("the winner is an entrant");
        let ended = outcomes.iter().find(|(j, _)| *j == i).map(|(_, e)| e.clone()).expect("the winner ended");
        return win(d, unit, &race, &names, won, ended, Some(&outcomes));
    }
    let passing: Vec<(usize, EntrantEnd)> =
        outcomes.iter().filter(|(_, e)| e.outcome == Outcome::Passed).cloned().collect();
    match passing.len() {
        0 => {}
        1 => {
            let (i, ended) = passing[0].clone();
            return win(d, unit, &race, &names, race.tries[i], ended, Some(&outcomes));
        }
        _ => {
            return match judge(d, &task, &race, &names, &passing)? {
                Ok(n) => {
                    let i = race.tries.iter().position(|t| *t == n).expect("the judge picked a passing try");
                    let ended = passing.iter().find(|(j, _)| *j == i).map(|(_, e)| e.clone()).expect("passing");
                    let line =
                        format!("{} · the judge picked {} ({} passed)", task.id, tries_of(&names[i]), passing.len());
                    walker.record(
                        store,
                        Some(&task.id),
                        Recorded::RaceWon(events::RaceWon {
                            number: n,
                            agent: race.agents[i].clone(),
                            how: "judge".into(),
                        }),
                    )?;
                    walker.observer.event(&Event::RaceDecided { task: task.id.clone(), winner: Some(n), line });
                    win(d, unit, &race, &names, n, ended, Some(&outcomes))
                }
                Err(problem) => {
                    drop_worktrees(store, walker, &id, &race, &root, None);
                    let line = format!("{} · {problem}", task.id);
                    walker.observer.event(&Event::RaceDecided { task: task.id.clone(), winner: None, line });
                    Ok(Dispatched::Verdict { verdict: Verdict::Undecided, message: problem })
                }
            };
        }
    }
    // Nobody passed.
    if outcomes.iter().any(|(_, e)| e.outcome == Outcome::Spent) {
        return Ok(Dispatched::Spent);
    }
    let said: Vec<String> = outcomes
        .iter()
        .map(|(i, e)| {
            let what = match e.outcome {
                Outcome::Blocked => format!("{} was blocked", tries_of(&names[*i])),
                Outcome::Unreachable => format!("{} was unreachable", names[*i]),
                _ => format!("{} failed", tries_of(&names[*i])),
            };
            if e.message.trim().is_empty() {
                what
            } else {
                format!("{what} ({})", first_line(&e.message))
            }
        })
        .collect();
    let line = format!("{} · no try passed: {}", task.id, said.join(" · "));
    walker.observer.event(&Event::RaceDecided { task: task.id.clone(), winner: None, line });
    drop_worktrees(store, walker, &id, &race, &root, None);
    if outcomes.iter().all(|(_, e)| e.outcome == Outcome::Unreachable) {
        walker.record(
            store,
            Some(&task.id),
            Recorded::RaceEnded(events::RaceEnded { outcome: "unreachable".into() }),
        )?;
        return Ok(Dispatched::Continue {
            note: format!("Every agent of the race was unreachable: {}.", said.join("; ")),
        });
    }
    let verdict =
        if outcomes.iter().all(|(_, e)| e.outcome == Outcome::Blocked) { Verdict::Blocked } else { Verdict::Failed };
    Ok(Dispatched::Verdict { verdict, message: format!("no try passed: {}", said.join("; ")) })
}

/// One entrant: sessions on its try until it passes, ends, or the race is over.
#[allow(clippy::too_many_arguments)]
fn entrant(
    walker: &Walker<'_>,
    task: &Task,
    try_: &Try,
    agent_name: &str,
    pick: Pick,
    carry: Option<&str>,
    handoff: Option<&std::path::Path>,
    shared: &Shared<'_>,
) -> Result<EntrantEnd> {
    let store = Store::open(&walker.ctx, &walker.cwd)?;
    let d = GitDispatcher::new(&store, walker);
    let agent = walker.agent(&store, agent_name)?;
    let mut carry = carry.map(ToOwned::to_owned);
    let mut attempt = 0;
    let journal_end = |ended: &EntrantEnd| -> Result<()> {
        walker.record(
            &store,
            Some(&task.id),
            Recorded::EntrantEnded(events::EntrantEnded {
                number: try_.number,
                agent: agent_name.to_owned(),
                outcome: ended.outcome.word().to_owned(),
                message: ended.message.clone(),
                checks: ended.checks.clone(),
                head: store.ref_target(&try_.branch)?.map(|h| h.to_string()),
            }),
        )
    };
    loop {
        if shared.halt.load(Ordering::SeqCst) {
            let ended = EntrantEnd::new(Outcome::Stopped, "another try won");
            journal_end(&ended)?;
            return Ok(ended);
        }
        if !shared.take_session() {
            // Not finished: a later walk goes on with it.
            return Ok(EntrantEnd::new(Outcome::Spent, "the session budget ran out"));
        }
        attempt += 1;
        let ran = d.session(&Seat {
            task,
            try_,
            agent: &agent,
            attempt,
            carry: carry.as_deref(),
            halt: Some(&shared.halt),
            handoff: if attempt == 1 { handoff } else { None },
        })?;
        let abort = |why: Abort, outcome: Outcome| -> EntrantEnd {
            shared.halt.store(true, Ordering::SeqCst);
            EntrantEnd { outcome, message: String::new(), checks: None, abort: Some(why) }
        };
        let ended = match ran.step {
            Step::Passed { message } => {
                let ended = EntrantEnd { outcome: Outcome::Passed, message, checks: ran.checks.clone(), abort: None };
                journal_end(&ended)?;
                if pick == Pick::First {
                    let mut winner = shared.winner.lock().unwrap_or_else(|p| p.into_inner());
                    if winner.is_none() {
                        *winner = Some(try_.number);
                        walker.record(
                            &store,
                            Some(&task.id),
                            Recorded::RaceWon(events::RaceWon {
                                number: try_.number,
                                agent: agent_name.to_owned(),
                                how: "first".into(),
                            }),
                        )?;
                        shared.halt.store(true, Ordering::SeqCst);
                    }
                }
                return Ok(ended);
            }
            Step::Continue { note } => {
                carry = Some(note);
                continue;
            }
            Step::Verdict { verdict, message } => {
                let outcome = if verdict == Verdict::Blocked { Outcome::Blocked } else { Outcome::Failed };
                EntrantEnd::new(outcome, message)
            }
            Step::Unreachable { reason } => {
                walker.mark_unreachable(&store, agent_name, reason, &task.id)?;
                EntrantEnd::new(Outcome::Unreachable, reason)
            }
            Step::Halted => EntrantEnd::new(Outcome::Stopped, "another try won"),
            // The race as a whole ends; nothing is journaled for this entrant, so a walk that
            // takes the race up again (after an interruption) restarts it.
            Step::Lost { reason } => return Ok(abort(Abort::Lost(reason), Outcome::Aborted)),
            Step::Withdrawn(w) => return Ok(abort(Abort::Withdrawn(w, ran.session.clone()), Outcome::Aborted)),
            Step::Interrupted => return Ok(abort(Abort::Interrupted, Outcome::Aborted)),
            Step::CannotRun { what, said, log } => {
                return Err(super::unit::cannot_run(agent_name, what, &said, &log, d.walker.sandbox().is_some(), None))
            }
            // Not finished, like an entrant the session budget stops: a later walk goes on.
            Step::Spent { why } => return Ok(EntrantEnd::new(Outcome::Spent, why)),
        };
        journal_end(&ended)?;
        return Ok(ended);
    }
}

/// Close the race for try `won`: the others' worktrees go (their branches stay), and the
/// winner's try becomes the unit's, which closing the unit lands on the task branch.
fn win(
    d: &GitDispatcher<'_>,
    unit: &mut WorkUnit,
    race: &Unfinished,
    names: &[String],
    won: u32,
    ended: EntrantEnd,
    outcomes: Option<&[(usize, EntrantEnd)]>,
) -> Result<Dispatched> {
    let (store, walker) = (d.store, d.walker);
    let root = tries::worktrees_root(store)?;
    let i = race.tries.iter().position(|n| *n == won).unwrap_or(0);
    drop_worktrees(store, walker, &unit.task.task_id(), race, &root, Some(won));
    if let Some(outcomes) = outcomes {
        let others: Vec<String> = outcomes
            .iter()
            .filter(|(j, _)| *j != i)
            .map(|(j, e)| match e.outcome {
                Outcome::Stopped => format!("{} stopped", tries_of(&names[*j])),
                Outcome::Passed => format!("{} passed too", tries_of(&names[*j])),
                Outcome::Blocked => format!("{} was blocked", tries_of(&names[*j])),
                Outcome::Unreachable => format!("{} was unreachable", names[*j]),
                _ => format!("{} failed", tries_of(&names[*j])),
            })
            .collect();
        let passed = outcomes.iter().filter(|(_, e)| e.outcome == Outcome::Passed).count();
        let line = if race.pick == Pick::First {
            let mut parts = vec![format!("{} · {} passed first", unit.task.id, names[i])];
            parts.extend(others);
            parts.join(" · ")
        } else if passed == 1 {
            format!("{} · only {} passed", unit.task.id, tries_of(&names[i]))
        } else {
            String::new()
        };
        if !line.is_empty() {
            walker.observer.event(&Event::RaceDecided { task: unit.task.id.clone(), winner: Some(won), line });
        }
    }
    unit.try_ = Some(Try::describe(&unit.task.task_id(), won, &root));
    unit.checks = ended.checks.clone();
    unit.last_agent = race.agents.get(i).cloned();
    Ok(Dispatched::Verdict { verdict: Verdict::Done, message: ended.message })
}

/// Remove the entrants' worktrees (their branches and commits stay), all but `keep`'s.
fn drop_worktrees(
    store: &Store,
    walker: &Walker<'_>,
    task: &crate::ids::TaskId,
    race: &Unfinished,
    root: &std::path::Path,
    keep: Option<u32>,
) {
    for n in race.tries.iter().filter(|n| Some(**n) != keep) {
        if let Err(err) = tries::remove_worktree(store, &Try::describe(task, *n, root)) {
            walker.observer.event(&Event::Warning {
                message: format!("could not remove the worktree of try {n} of {task}: {err:#}"),
            });
        }
    }
}

/// Ask the judge which of the passing tries wins; `Err` says why no answer can be used.
fn judge(
    d: &GitDispatcher<'_>,
    task: &Task,
    race: &Unfinished,
    names: &[String],
    passing: &[(usize, EntrantEnd)],
) -> Result<Result<u32, String>> {
    let (store, walker) = (d.store, d.walker);
    let numbers: Vec<u32> = passing.iter().map(|(i, _)| race.tries[*i]).collect();
    let list = numbers.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let Some(command) = walker.opts.judge.clone() else {
        return Ok(Err(format!(
            "{} tries passed ({list}) and there is no judge to pick one (--judge-cmd or loop.judge)",
            passing.len()
        )));
    };
    let id = task.task_id();
    let root = tries::worktrees_root(store)?;
    let start = race.start.or(store.ref_target(&refs::task_branch(&id))?);
    let mut entries = Vec::new();
    for (i, ended) in passing {
        let try_ = Try::describe(&id, race.tries[*i], &root);
        let head = store.ref_target(&try_.branch)?;
        let changes = match (start, head) {
            (Some(start), Some(head)) => store.diffstat(start, head)?,
            _ => Vec::new(),
        };
        entries.push(json!({
            "try": try_.number,
            "agent": race.agents[*i],
            "label": names[*i],
            "branch": refs::short_branch(&try_.branch),
            "head": head.map(|h| h.to_string()),
            "diffstat": changes,
            "diffstat_text": tries::describe_changes(&changes),
            "checks_log": ended.checks.as_ref().and_then(|c| c.get("log")).cloned(),
            "summary": ended.message,
        }));
    }
    let doc = json!({
        "version": 1,
        "task": { "id": task.id, "title": task.title, "body": task.body },
        "task_branch": refs::short_branch(&refs::task_branch(&id)),
        "start": start.map(|s| s.to_string()),
        "tries": entries,
    });
    let dir = store.layout()?.race(id.as_str(), &numbers);
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("could not create '{}': {e}", dir.display()))?;
    let input = dir.join("judge-input.json");
    std::fs::write(&input, serde_json::to_vec_pretty(&doc)?)
        .map_err(|e| anyhow::anyhow!("could not write '{}': {e}", input.display()))?;
    let log = dir.join("judge.log");
    let env = vec![
        ("GIT_LOOP_TASK".to_owned(), task.id.clone()),
        ("GIT_LOOP_JUDGE_INPUT".to_owned(), input.display().to_string()),
    ];
    let exit = d.run_command("judge", &command, store.workdir(), &env, Some(input.clone()), &log)?;
    walker.record(
        store,
        Some(&task.id),
        Recorded::Judged(events::Judged {
            tries: numbers.clone(),
            exit: exit.map(|e| e.to_string()),
            log: log.display().to_string(),
        }),
    )?;
    if exit != Some(crate::agent::process::Exit::Code(0)) {
        let said = exit.map(|e| e.to_string()).unwrap_or_else(|| "it timed out".into());
        return Ok(Err(format!(
            "the judge failed ({said}); {} tries passed ({list}): pick one with 'git loop done {id} --try <n>'",
            passing.len()
        )));
    }
    // The last line of its output names the winner: "3", "try 3" or "#3".
    let output = crate::agent::record::tail(&log, 5);
    let answer = output.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").to_owned();
    let lower = answer.to_lowercase();
    let picked = lower.trim_start_matches("try").trim().trim_start_matches('#').parse::<u32>().ok();
    match picked {
        Some(n) if numbers.contains(&n) => Ok(Ok(n)),
        _ => Ok(Err(format!(
            "the judge answered '{}', which is none of the tries that passed ({list}): pick one with 'git loop done {id} --try <n>'",
            first_line(&answer).chars().take(60).collect::<String>()
        ))),
    }
}
