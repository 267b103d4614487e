//! The walk, as pure control flow: a queue hands out units, a dispatcher runs one session on
//! a unit, and this module decides what happens next — re-dispatch, close, pause, stop —
//! under budgets and the walk policy. No git and no processes here: the git-native queue
//! and dispatcher live in `walk`, and the tests below drive this with in-memory fakes.
//!
//! Semantics (kept from the seeds):
//! - A session that ends without a verdict is re-dispatched (a continuation, told what the
//!   last one left) up to the per-unit cap; then the unit fails.
//! - Three consecutive failures pause the walk; a failure of a p0 unit pauses it at once; a
//!   success resets both.
//! - `max_iterations` counts every dispatch; `max_units` counts every closed unit (parked
//!   included). With parallel workers, units in flight count against `max_units` so the
//!   walk never overshoots.
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

    /// The same, for a dispatcher that may run more sessions than the one the runloop took
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
    walk: Option<&'w Walk>,
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
    /// A budget ran out (or `max_units` reached with failures among the units).
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
    pub per_unit_dispatches: u32,
    /// Consecutive failures that pause the walk.
    pub pause_after: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_units: None, max_iterations: None, per_unit_dispatches: 15, pause_after: 3 }
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

/// One walk's shared state; hand a reference to each worker.
pub struct Walk {
    state: Mutex<State>,
    changed: Condvar,
}

impl Walk {
    pub fn new(limits: Limits) -> Walk {
        Walk {
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
                    s.stop = Some(if done { Stop::Done } else { Stop::Budget });
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

    /// Take one dispatch from the iteration budget.
    fn take_iteration(&self) -> bool {
        let mut s = self.lock();
        if s.limits.max_iterations.is_some_and(|max| s.tally.dispatches >= max) {
            s.stop.get_or_insert(Stop::Budget);
            self.changed.notify_all();
            return false;
        }
        s.tally.dispatches += 1;
        true
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

/// One worker: take units and work them until the walk stops. `cancelled` is polled between
/// steps (the dispatcher watches it during sessions).
pub fn work<Q, D>(walk: &Walk, queue: &mut Q, dispatcher: &mut D, cancelled: &dyn Fn() -> bool) -> Result<()>
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

/// Work one unit to a close; `None` if it was abandoned (not closed).
fn work_unit<Q, D>(
    walk: &Walk,
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
        if !walk.take_iteration() {
            queue.abandon(unit, "the iteration budget is spent")?;
            return Ok(None);
        }
        let budget = Budget { walk: Some(walk), unit_left: Mutex::new(cap - attempt) };
        let dispatched = dispatcher.dispatch_within(unit, attempt, carry.as_deref(), &budget)?;
        // Sessions a race ran beyond the first count as attempts of this unit.
        attempt += (cap - attempt) - budget.unit_left();
        match dispatched {
            Dispatched::Verdict { verdict, message } => return queue.close(unit, verdict, &message).map(Some),
            Dispatched::Continue { note } => carry = Some(note),
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
    let message = format!("no verdict after {cap} sessions");
    queue.close(unit, Verdict::Failed, &message).map(Some)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    #[derive(Debug, Clone)]
    struct FakeUnit {
        id: String,
        p0: bool,
    }

    impl Unit for FakeUnit {
        fn id(&self) -> String {
            self.id.clone()
        }
        fn is_p0(&self) -> bool {
            self.p0
        }
    }

    #[derive(Default)]
    struct FakeQueue {
        units: VecDeque<FakeUnit>,
        closed: Vec<(String, Verdict)>,
        abandoned: Vec<String>,
    }

    impl Queue for FakeQueue {
        type Unit = FakeUnit;
        fn next(&mut self) -> Result<Option<FakeUnit>> {
            Ok(self.units.pop_front())
        }
        fn close(&mut self, unit: &mut FakeUnit, verdict: Verdict, _message: &str) -> Result<bool> {
            self.closed.push((unit.id.clone(), verdict));
            Ok(verdict == Verdict::Done)
        }
        fn abandon(&mut self, unit: &mut FakeUnit, _why: &str) -> Result<()> {
            self.abandoned.push(unit.id.clone());
            Ok(())
        }
    }

    /// Plays a script of dispatch results per unit id; once a script is used up, `done`.
    struct Scripted {
        scripts: std::collections::HashMap<String, VecDeque<Dispatched>>,
        carries: Vec<Option<String>>,
    }

    impl Scripted {
        fn new(scripts: &[(&str, Vec<Dispatched>)]) -> Scripted {
            Scripted {
                scripts: scripts.iter().map(|(id, s)| (id.to_string(), s.iter().cloned().collect())).collect(),
                carries: Vec::new(),
            }
        }
    }

    impl Dispatcher<FakeUnit> for Scripted {
        fn dispatch(&mut self, unit: &mut FakeUnit, _attempt: u32, carry: Option<&str>) -> Result<Dispatched> {
            self.carries.push(carry.map(ToOwned::to_owned));
            Ok(self.scripts.get_mut(&unit.id).and_then(VecDeque::pop_front).unwrap_or(done()))
        }
    }

    fn done() -> Dispatched {
        Dispatched::Verdict { verdict: Verdict::Done, message: String::new() }
    }
    fn failed() -> Dispatched {
        Dispatched::Verdict { verdict: Verdict::Failed, message: "broke".into() }
    }
    fn silent() -> Dispatched {
        Dispatched::Continue { note: "no verdict".into() }
    }

    fn queue(ids: &[&str]) -> FakeQueue {
        FakeQueue {
            units: ids.iter().map(|id| FakeUnit { id: id.to_string(), p0: id.starts_with("p0") }).collect(),
            ..Default::default()
        }
    }

    fn run(limits: Limits, q: &mut FakeQueue, d: &mut Scripted) -> (Stop, Tally) {
        let walk = Walk::new(limits);
        work(&walk, q, d, &|| false).expect("no errors");
        walk.outcome()
    }

    #[test]
    fn a_drained_queue_ends_with_no_work() {
        let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(&[]));
        let (stop, tally) = run(Limits::default(), &mut q, &mut d);
        assert_eq!(stop, Stop::NoWork);
        assert_eq!((tally.closed, tally.succeeded, tally.dispatches), (2, 2, 2));
    }

    #[test]
    fn three_consecutive_failures_pause_and_a_success_resets_the_count() {
        let (mut q, mut d) = (
            queue(&["a", "b", "c", "d", "e", "f"]),
            Scripted::new(&[
                ("a", vec![failed()]),
                ("b", vec![failed()]),
                ("d", vec![failed()]),
                ("e", vec![failed()]),
                ("f", vec![failed()]),
            ]),
        );
        let (stop, tally) = run(Limits::default(), &mut q, &mut d);
        assert_eq!(
            stop,
            Stop::Paused {
                policy: PausePolicy::ConsecutiveFailures(3),
                units: vec!["d".into(), "e".into(), "f".into()]
            }
        );
        assert_eq!((tally.failed, tally.succeeded), (5, 1), "c's success reset the count after a and b");
    }

    #[test]
    fn a_p0_failure_pauses_at_once() {
        let (mut q, mut d) = (queue(&["p0-x", "b"]), Scripted::new(&[("p0-x", vec![failed()])]));
        let (stop, tally) = run(Limits::default(), &mut q, &mut d);
        assert_eq!(stop, Stop::Paused { policy: PausePolicy::P0Failure, units: vec!["p0-x".into()] });
        assert_eq!(tally.closed, 1, "b was never taken");
    }

    #[test]
    fn sessions_without_a_verdict_continue_with_a_note_up_to_the_cap() {
        let (mut q, mut d) = (queue(&["a"]), Scripted::new(&[("a", vec![silent(), silent(), silent()])]));
        let limits = Limits { per_unit_dispatches: 3, ..Default::default() };
        let (stop, tally) = run(limits, &mut q, &mut d);
        assert_eq!(q.closed, vec![("a".to_owned(), Verdict::Failed)], "no verdict after the cap is a failure");
        assert_eq!(d.carries, vec![None, Some("no verdict".into()), Some("no verdict".into())]);
        assert_eq!((stop, tally.dispatches), (Stop::NoWork, 3));
    }

    #[test]
    fn max_units_is_once_mode_and_counts_parked_units() {
        let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(&[]));
        let (stop, _) = run(Limits { max_units: Some(1), ..Default::default() }, &mut q, &mut d);
        assert_eq!((stop, q.closed.len()), (Stop::Done, 1));
        let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(&[("a", vec![failed()])]));
        let (stop, _) = run(Limits { max_units: Some(1), ..Default::default() }, &mut q, &mut d);
        assert_eq!((stop, q.closed.len()), (Stop::Budget, 1), "a parked unit counts, and the walk did not succeed");
    }

    #[test]
    fn max_iterations_counts_every_dispatch_and_abandons_the_unit_in_hand() {
        let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(&[("a", vec![silent(), silent()])]));
        let (stop, tally) = run(Limits { max_iterations: Some(2), ..Default::default() }, &mut q, &mut d);
        assert_eq!((stop, tally.dispatches), (Stop::Budget, 2));
        assert_eq!(q.abandoned, vec!["a".to_owned()]);
    }

    #[test]
    fn a_lost_claim_abandons_without_closing_and_the_walk_goes_on() {
        let (mut q, mut d) =
            (queue(&["a", "b"]), Scripted::new(&[("a", vec![Dispatched::Lost { reason: "taken".into() }])]));
        let (stop, tally) = run(Limits::default(), &mut q, &mut d);
        assert_eq!((stop, tally.closed, tally.abandoned), (Stop::NoWork, 1, 1));
        assert!(q.closed.iter().all(|(id, _)| id != "a"));
    }

    #[test]
    fn an_interruption_abandons_the_unit_and_stops() {
        let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(&[("a", vec![Dispatched::Interrupted])]));
        let (stop, _) = run(Limits::default(), &mut q, &mut d);
        assert_eq!((stop, q.abandoned.clone(), q.closed.len()), (Stop::Interrupted, vec!["a".to_owned()], 0));
    }

    #[test]
    fn parallel_workers_share_the_unit_budget_without_overshooting() {
        let walk = Walk::new(Limits { max_units: Some(3), ..Default::default() });
        let shared = Mutex::new(queue(&["a", "b", "c", "d", "e", "f"]));
        struct Shared<'a>(&'a Mutex<FakeQueue>);
        impl Queue for Shared<'_> {
            type Unit = FakeUnit;
            fn next(&mut self) -> Result<Option<FakeUnit>> {
                self.0.lock().expect("lock").next()
            }
            fn close(&mut self, unit: &mut FakeUnit, verdict: Verdict, message: &str) -> Result<bool> {
                self.0.lock().expect("lock").close(unit, verdict, message)
            }
            fn abandon(&mut self, unit: &mut FakeUnit, why: &str) -> Result<()> {
                self.0.lock().expect("lock").abandon(unit, why)
            }
        }
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| work(&walk, &mut Shared(&shared), &mut Scripted::new(&[]), &|| false).expect("works"));
            }
        });
        let (stop, tally) = walk.outcome();
        assert_eq!((stop, tally.closed), (Stop::Done, 3));
        assert_eq!(shared.lock().expect("lock").closed.len(), 3, "exactly max_units units were closed");
    }

    /// Runs "races": each dispatch takes `extra` more sessions from the budget, then passes.
    struct Racing {
        extra: u32,
        taken: Vec<u32>,
    }

    impl Dispatcher<FakeUnit> for Racing {
        fn dispatch(&mut self, _unit: &mut FakeUnit, _attempt: u32, _carry: Option<&str>) -> Result<Dispatched> {
            unreachable!("the runloop dispatches within a budget")
        }
        fn dispatch_within(
            &mut self,
            _unit: &mut FakeUnit,
            _attempt: u32,
            _carry: Option<&str>,
            budget: &Budget<'_>,
        ) -> Result<Dispatched> {
            let taken = (0..self.extra).take_while(|_| budget.take()).count() as u32;
            self.taken.push(taken);
            Ok(if taken == self.extra { done() } else { Dispatched::Spent })
        }
    }

    #[test]
    fn a_race_takes_its_extra_sessions_from_the_unit_and_the_walk_budgets() {
        let walk = Walk::new(Limits { max_iterations: Some(7), per_unit_dispatches: 4, ..Default::default() });
        let (mut q, mut d) = (queue(&["a", "b", "c"]), Racing { extra: 2, taken: Vec::new() });
        work(&walk, &mut q, &mut d, &|| false).expect("no errors");
        let (stop, tally) = walk.outcome();
        // a: 1 + 2, b: 1 + 2, c: 1 + 0 of 2 (the walk's 7 are spent).
        assert_eq!(d.taken, vec![2, 2, 0]);
        assert_eq!((stop, tally.dispatches, tally.succeeded, tally.abandoned), (Stop::Budget, 7, 2, 1));
        let walk = Walk::new(Limits { per_unit_dispatches: 2, ..Default::default() });
        let (mut q, mut d) = (queue(&["a"]), Racing { extra: 3, taken: Vec::new() });
        work(&walk, &mut q, &mut d, &|| false).expect("no errors");
        assert_eq!(d.taken, vec![1], "a unit's cap bounds its race");
        assert_eq!(q.abandoned, vec!["a".to_owned()]);
    }

    #[test]
    fn nobody_to_work_a_unit_pauses_the_walk_and_leaves_the_unit_open() {
        let reason = "claude is unreachable (usage limit) and no fallback agent is set".to_owned();
        let (mut q, mut d) =
            (queue(&["a", "b"]), Scripted::new(&[("a", vec![Dispatched::Pause { reason: reason.clone() }])]));
        let (stop, tally) = run(Limits::default(), &mut q, &mut d);
        assert_eq!(stop, Stop::Paused { policy: PausePolicy::Unreachable(reason), units: vec!["a".into()] });
        assert_eq!((tally.closed, q.abandoned.clone()), (0, vec!["a".to_owned()]));
    }
}
