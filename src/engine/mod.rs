//! The engine: a run as pure control flow. A queue hands out units, a dispatcher runs one
//! session on a unit, and this module decides what happens next — re-dispatch, close, pause,
//! stop — under budgets and the policy. No git and no processes here: the walk (`walk`: the
//! backlog's queue, agent sessions) and missions (`mission`: projects, child walks) each bring
//! a queue and a dispatcher, and `tests/it/library/engine.rs` drives it with in-memory fakes.
//!
//! Semantics (kept from the seeds):
//! - A session that ends without a verdict is re-dispatched (a continuation, told what the
//!   last one left) up to the per-unit cap; then the unit fails.
//! - Three consecutive failures pause the walk; a failure of a p0 unit pauses it at once; a
//!   success resets both.
//! - `max_iterations` counts every dispatch; `max_units` counts every closed unit (parked
//!   included). With parallel workers, units in flight count against `max_units` so the
//!   walk never overshoots.
//! - `budget_usd` and `budget_tokens` count what every session of the run spent, as the
//!   dispatcher reports it (`Run::spend`); once spending reaches either, no further session
//!   starts (`take_iteration`; a role's session asks `budget_spent`) and the run stops as for
//!   any budget. A session whose spend is unknown counts nothing (and is counted as unknown).
//! - A worker that finds nothing ready waits while other units are in flight (finishing
//!   them may make more ready); the walk ends with no work only when none are.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use anyhow::Result;

/// What a session reported when it finished its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Done, and the checks passed.
    Done,
    /// It cannot proceed without something it does not have.
    Blocked,
    /// It tried and failed.
    Failed,
    /// A person must choose (a race whose judge gave no usable answer).
    Undecided,
    /// Set aside, with the reason (a task that spent its share of the budget).
    Parked,
}

/// What one dispatch came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatched {
    /// A final verdict for the unit.
    Verdict { verdict: Verdict, message: String },
    /// No verdict (or the checks failed): dispatch again, telling the next session this.
    Continue { note: String },
    /// The unit's claim is no longer ours: stop working on it, do not close it.
    Lost { reason: String },
    /// The walk was interrupted while the session ran.
    Interrupted,
    /// The walk's session budget ran out partway (a race takes more sessions as it goes).
    Spent,
    /// No agent can work the unit now (every one unreachable): leave it and pause the walk.
    Pause { reason: String },
}

/// Identity of a unit, as the policy needs it.
pub trait Unit {
    fn id(&self) -> String;
    fn is_p0(&self) -> bool;
}

/// Hands out units and closes them.
pub trait Queue {
    type Unit: Unit;
    /// The next unit to work on, already claimed; `None` when nothing is ready.
    fn next(&mut self) -> Result<Option<Self::Unit>>;
    /// Close a unit with its verdict; `Ok(true)` if it counts as a success.
    fn close(&mut self, unit: &mut Self::Unit, verdict: Verdict, message: &str) -> Result<bool>;
    /// Stop working on a unit without closing it (budget spent, interrupted, claim lost).
    fn abandon(&mut self, unit: &mut Self::Unit, why: &str) -> Result<()>;
}

/// Runs one session on a unit (or, for a race, several at once).
pub trait Dispatcher<U> {
    /// Dispatch number `attempt` (from 1); `carry` is what the previous session left, for a
    /// continuation.
    fn dispatch(&mut self, unit: &mut U, attempt: u32, carry: Option<&str>) -> Result<Dispatched>;

    /// The same, for a dispatcher that may run more sessions than the one the engine took
    /// from the budget for this dispatch (a race): it takes each further one from `budget`.
    fn dispatch_within(
        &mut self,
        unit: &mut U,
        attempt: u32,
        carry: Option<&str>,
        budget: &Budget<'_>,
    ) -> Result<Dispatched> {
        let _ = budget;
        self.dispatch(unit, attempt, carry)
    }
}

/// What a dispatch may still spend: sessions left for its unit, and the walk's own budget.
pub struct Budget<'w> {
    walk: Option<&'w Run>,
    unit_left: Mutex<u32>,
}

impl Budget<'_> {
    /// No sessions beyond the dispatch's own.
    pub fn none() -> Budget<'static> {
        Budget { walk: None, unit_left: Mutex::new(0) }
    }

    /// Take one more session; false when the unit's or the walk's budget is spent.
    pub fn take(&self) -> bool {
        let mut left = self.unit_left.lock().unwrap_or_else(|p| p.into_inner());
        if *left == 0 || !self.walk.is_some_and(|w| w.take_iteration()) {
            return false;
        }
        *left -= 1;
        true
    }

    /// Sessions the unit may still run after this dispatch's first.
    pub fn unit_left(&self) -> u32 {
        *self.unit_left.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Which rule paused the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PausePolicy {
    ConsecutiveFailures(u32),
    P0Failure,
    /// A p0 unit closed not done but waiting for a person (it asked a question, it needs a
    /// decision): the state it waits in. The engine pauses on `P0Failure`; the walk names it.
    P0Waiting(String),
    /// No agent could be reached (the reason says which and why).
    Unreachable(String),
}

/// Why the walk stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Nothing ready, nothing in flight.
    NoWork,
    /// `max_units` reached and every unit closed in this walk succeeded.
    Done,
    /// `max_units` reached with units closed in this walk that did not succeed.
    UnitLimit,
    /// A budget ran out: money, tokens, or `max_iterations` sessions.
    Budget,
    /// The walk policy paused it; the failed units that triggered it.
    Paused { policy: PausePolicy, units: Vec<String> },
    /// Ctrl-C, SIGTERM or a cancel marker.
    Interrupted,
    /// An error ended it (the walk returns it).
    Failed,
}

/// Budgets and caps.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_units: Option<u32>,
    pub max_iterations: Option<u32>,
    /// Dollars every session of the run may spend together.
    pub budget_usd: Option<f64>,
    /// Tokens every session of the run may spend together.
    pub budget_tokens: Option<u64>,
    pub per_unit_dispatches: u32,
    /// Consecutive failures that pause the walk.
    pub pause_after: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_units: None,
            max_iterations: None,
            budget_usd: None,
            budget_tokens: None,
            per_unit_dispatches: 15,
            pause_after: 3,
        }
    }
}

/// Counters for the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub closed: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub dispatches: u32,
    pub abandoned: u32,
    /// What the run's sessions spent: tokens, dollars (in millionths), and how many sessions'
    /// spend is unknown.
    pub spent_tokens: u64,
    pub spent_micro_usd: u64,
    pub spent_unknown: u32,
}

impl Tally {
    /// Dollars spent.
    pub fn spent_usd(&self) -> f64 {
        self.spent_micro_usd as f64 / 1_000_000.0
    }
}

/// State shared by the workers of one walk.
struct State {
    limits: Limits,
    tally: Tally,
    in_flight: u32,
    consecutive: u32,
    recent_failures: Vec<String>,
    stop: Option<Stop>,
}

/// A stop flag that wakes a thread sleeping on it at once: what a walk's background threads
/// (lease refresh, progress ticks) wait on, so the walk never waits out their sleep to end.
#[derive(Default)]
pub struct StopFlag {
    stopped: Mutex<bool>,
    woken: Condvar,
}

impl StopFlag {
    pub fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.woken.notify_all();
    }

    /// Sleep for `span` or until stopped; whether it is stopped.
    pub fn sleep(&self, span: Duration) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        let (stopped, _) =
            self.woken.wait_timeout_while(stopped, span, |stopped| !*stopped).unwrap_or_else(|e| e.into_inner());
        *stopped
    }
}

/// One run's shared state (a walk's or a mission's); hand a reference to each worker.
pub struct Run {
    state: Mutex<State>,
    changed: Condvar,
}

impl Run {
    pub fn new(limits: Limits) -> Run {
        Run {
            state: Mutex::new(State {
                limits,
                tally: Tally::default(),
                in_flight: 0,
                consecutive: 0,
                recent_failures: Vec::new(),
                stop: None,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A worker that panicked left consistent counters (every update is a whole step).
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Ask every worker to stop after its current step.
    pub fn stop(&self, why: Stop) {
        let mut s = self.lock();
        s.stop.get_or_insert(why);
        self.changed.notify_all();
    }

    /// Why the walk stopped (`NoWork` if the workers simply ran out).
    pub fn outcome(&self) -> (Stop, Tally) {
        let s = self.lock();
        (s.stop.clone().unwrap_or(Stop::NoWork), s.tally.clone())
    }

    /// Reserve a slot for a new unit, or say why not.
    fn begin_unit(&self) -> Option<()> {
        let mut s = self.lock();
        if s.stop.is_some() {
            return None;
        }
        if let Some(max) = s.limits.max_units {
            if s.tally.closed + s.in_flight >= max {
                if s.in_flight == 0 {
                    let done = s.tally.failed == 0 && s.tally.abandoned == 0;
                    s.stop = Some(if done { Stop::Done } else { Stop::UnitLimit });
                    self.changed.notify_all();
                }
                return None;
            }
        }
        s.in_flight += 1;
        Some(())
    }

    /// The queue was empty: wait for units in flight (they may make more ready), or end.
    /// Returns whether to look again.
    fn nothing_ready(&self) -> bool {
        let mut s = self.lock();
        s.in_flight -= 1;
        if s.in_flight == 0 {
            s.stop.get_or_insert(Stop::NoWork);
            self.changed.notify_all();
            return false;
        }
        let (s, _) = self.changed.wait_timeout(s, Duration::from_millis(500)).unwrap_or_else(|p| p.into_inner());
        s.stop.is_none()
    }

    /// Count what one session spent: its tokens and dollars, or `None` for each not known.
    pub fn spend(&self, tokens: Option<u64>, usd: Option<f64>) {
        let mut s = self.lock();
        match tokens {
            Some(tokens) => s.tally.spent_tokens += tokens,
            None => s.tally.spent_unknown += 1,
        }
        if let Some(usd) = usd.filter(|d| d.is_finite() && *d > 0.0) {
            s.tally.spent_micro_usd += crate::store::usage::micro_usd(usd);
        }
    }

    /// Dollars the run may still spend, when it has a dollar budget.
    pub fn usd_left(&self) -> Option<f64> {
        let s = self.lock();
        s.limits.budget_usd.map(|b| (b - s.tally.spent_usd()).max(0.0))
    }

    /// Whether the run's money or token budget is spent, and which (nothing stopped by asking).
    pub fn money_spent(&self) -> Option<&'static str> {
        money_spent(&self.lock())
    }

    /// Whether the run's money or token budget is spent, and which: a session of a role
    /// (reviewer, conflict resolver, summarizer) asks before it starts. A spent budget stops
    /// the run, as for a worker's session.
    pub fn budget_spent(&self) -> Option<&'static str> {
        let mut s = self.lock();
        let why = money_spent(&s)?;
        s.stop.get_or_insert(Stop::Budget);
        self.changed.notify_all();
        Some(why)
    }

    /// Take one dispatch from the iteration budget (and see the money and tokens are not spent).
    fn take_iteration(&self) -> bool {
        self.take_session().is_ok()
    }

    /// Count one more session, or say which budget is spent (and stop the run).
    fn take_session(&self) -> std::result::Result<(), &'static str> {
        let mut s = self.lock();
        let spent = if let Some(why) = money_spent(&s) {
            Some(why)
        } else if s.limits.max_iterations.is_some_and(|max| s.tally.dispatches >= max) {
            Some("the iteration budget is spent")
        } else {
            None
        };
        if let Some(why) = spent {
            s.stop.get_or_insert(Stop::Budget);
            self.changed.notify_all();
            return Err(why);
        }
        s.tally.dispatches += 1;
        Ok(())
    }

    fn stopped(&self) -> bool {
        self.lock().stop.is_some()
    }

    fn end_unit(&self, id: String, p0: bool, success: Option<bool>) {
        let mut s = self.lock();
        s.in_flight -= 1;
        match success {
            None => s.tally.abandoned += 1,
            Some(true) => {
                s.tally.closed += 1;
                s.tally.succeeded += 1;
                s.consecutive = 0;
                s.recent_failures.clear();
            }
            Some(false) => {
                s.tally.closed += 1;
                s.tally.failed += 1;
                s.consecutive += 1;
                s.recent_failures.push(id.clone());
                if p0 {
                    s.stop.get_or_insert(Stop::Paused { policy: PausePolicy::P0Failure, units: vec![id] });
                } else if s.consecutive >= s.limits.pause_after {
                    let (units, count) = (s.recent_failures.clone(), s.consecutive);
                    s.stop.get_or_insert(Stop::Paused { policy: PausePolicy::ConsecutiveFailures(count), units });
                }
            }
        }
        self.changed.notify_all();
    }
}

/// Which of the run's budgets in money and tokens is spent, if one is.
fn money_spent(s: &State) -> Option<&'static str> {
    if s.limits.budget_usd.is_some_and(|b| s.tally.spent_usd() >= b) {
        Some("the walk's budget in dollars is spent")
    } else if s.limits.budget_tokens.is_some_and(|b| s.tally.spent_tokens >= b) {
        Some("the walk's budget in tokens is spent")
    } else {
        None
    }
}

/// One worker: take units and work them until the walk stops. `cancelled` is polled between
/// steps (the dispatcher watches it during sessions).
pub fn work<Q, D>(walk: &Run, queue: &mut Q, dispatcher: &mut D, cancelled: &dyn Fn() -> bool) -> Result<()>
where
    Q: Queue,
    D: Dispatcher<Q::Unit>,
{
    loop {
        if cancelled() {
            walk.stop(Stop::Interrupted);
        }
        if walk.begin_unit().is_none() {
            return Ok(());
        }
        let mut unit = match queue.next() {
            Ok(Some(unit)) => unit,
            Ok(None) => {
                if walk.nothing_ready() {
                    continue;
                }
                return Ok(());
            }
            Err(err) => {
                walk.end_unit(String::new(), false, None);
                walk.stop(Stop::Failed);
                return Err(err);
            }
        };
        let id = unit.id();
        let p0 = unit.is_p0();
        match work_unit(walk, queue, dispatcher, &mut unit, cancelled) {
            Ok(success) => walk.end_unit(id, p0, success),
            Err(err) => {
                // Keep the unit's work and free it, then let the error end the walk.
                let _ = queue.abandon(&mut unit, &format!("error: {err:#}"));
                walk.end_unit(id, p0, None);
                walk.stop(Stop::Failed);
                return Err(err);
            }
        }
    }
}

/// What a session's continuation note says when the session reported done and the checks then
/// failed (the engine counts them, to say so when the unit runs out of sessions).
pub const CHECKS_FAILED: &str = "reported done, but the checks failed";

/// Sessions over within this long, ending the same way this many times in a row, stop the
/// unit (see `work_unit`).
const QUICK: std::time::Duration = std::time::Duration::from_secs(5);
const REPEATS: u32 = 3;

/// A continuation note without the session it names (`The previous session (s-…)`), for
/// telling one failure repeated from another.
fn without_session(note: &str) -> String {
    match (note.find("session ("), note.find(')')) {
        (Some(at), Some(end)) if end > at => format!("{}{}", &note[..at], &note[end + 1..]),
        _ => note.to_owned(),
    }
}

fn times(n: u32) -> String {
    if n == 1 {
        "once".to_owned()
    } else {
        format!("{n} times")
    }
}

/// Work one unit to a close; `None` if it was abandoned (not closed).
fn work_unit<Q, D>(
    walk: &Run,
    queue: &mut Q,
    dispatcher: &mut D,
    unit: &mut Q::Unit,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<bool>>
where
    Q: Queue,
    D: Dispatcher<Q::Unit>,
{
    let cap = walk.lock().limits.per_unit_dispatches.max(1);
    let mut carry: Option<String> = None;
    // Sessions that said done and whose checks then failed: a unit that ends so every time
    // ends saying that, not "no verdict".
    let mut checks_failed = 0u32;
    // The same continuation, word for word, from sessions each over within QUICK: a cause the
    // sessions cannot fix (the environment), which would burn every session left in seconds.
    let mut repeated: Option<(String, u32)> = None;
    let mut attempt = 0;
    while attempt < cap {
        attempt += 1;
        if cancelled() {
            walk.stop(Stop::Interrupted);
        }
        if walk.stopped() && walk.outcome().0 == Stop::Interrupted {
            queue.abandon(unit, "the walk was interrupted")?;
            return Ok(None);
        }
        if let Err(why) = walk.take_session() {
            queue.abandon(unit, why)?;
            return Ok(None);
        }
        let budget = Budget { walk: Some(walk), unit_left: Mutex::new(cap - attempt) };
        let began = std::time::Instant::now();
        let dispatched = dispatcher.dispatch_within(unit, attempt, carry.as_deref(), &budget)?;
        let quick = began.elapsed() < QUICK;
        // Sessions a race ran beyond the first count as attempts of this unit.
        attempt += (cap - attempt) - budget.unit_left();
        match dispatched {
            Dispatched::Verdict { verdict, message } => return queue.close(unit, verdict, &message).map(Some),
            Dispatched::Continue { note } => {
                checks_failed += u32::from(note.contains(CHECKS_FAILED));
                let same = without_session(&note);
                repeated = match repeated.take() {
                    Some((before, n)) if quick && before == same => Some((before, n + 1)),
                    _ if quick => Some((same, 1)),
                    _ => None,
                };
                if let Some((_, n)) = repeated.as_ref().filter(|(_, n)| *n >= REPEATS && attempt < cap) {
                    let line = note.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
                    let message = format!(
                        "the same failure {n} sessions in a row, each over within {} s: {line} — its cause is not the agent's to fix (the environment, the checks); fix it, then 'git loop reopen {}'",
                        QUICK.as_secs(),
                        unit.id()
                    );
                    return queue.close(unit, Verdict::Blocked, &message).map(Some);
                }
                carry = Some(note)
            }
            Dispatched::Spent => {
                queue.abandon(unit, "the session budget is spent")?;
                return Ok(None);
            }
            Dispatched::Pause { reason } => {
                walk.stop(Stop::Paused { policy: PausePolicy::Unreachable(reason.clone()), units: vec![unit.id()] });
                queue.abandon(unit, &reason)?;
                return Ok(None);
            }
            Dispatched::Lost { reason } => {
                queue.abandon(unit, &reason)?;
                return Ok(None);
            }
            Dispatched::Interrupted => {
                walk.stop(Stop::Interrupted);
                queue.abandon(unit, "the walk was interrupted")?;
                return Ok(None);
            }
        }
    }
    let sessions = if cap == 1 { "1 session".to_owned() } else { format!("{cap} sessions") };
    let message = match checks_failed {
        0 => format!("no verdict after {sessions}"),
        n if n == cap => {
            format!("the checks failed {} (each of its {sessions} reported done)", times(n))
        }
        n => format!("no verdict that stood after {sessions}: the checks failed {}", times(n)),
    };
    queue.close(unit, Verdict::Failed, &message).map(Some)
}
