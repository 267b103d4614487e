//! The engine (`engine`) behind its traits, driven by fakes: which unit is worked, how often,
//! when a unit is closed or abandoned, and what ends a walk.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use git_loop::engine::{
    work, Budget, Dispatched, Dispatcher, Limits, PausePolicy, Queue, Run, Stop, StopFlag, Unit, Verdict,
};

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

/// Hands out its units in order; a close succeeds when the verdict is `Done` and the unit is
/// not in `fail_to_land`. Records every close and abandon.
#[derive(Default)]
struct FakeQueue {
    units: VecDeque<FakeUnit>,
    fail_to_land: Vec<String>,
    closed: Vec<(String, Verdict, String)>,
    abandoned: Vec<(String, String)>,
    /// `next` fails once this many units were handed out.
    fail_after: Option<usize>,
    handed: usize,
}

fn queue(ids: &[&str]) -> FakeQueue {
    FakeQueue {
        units: ids.iter().map(|id| FakeUnit { id: (*id).to_owned(), p0: id.starts_with("p0") }).collect(),
        ..Default::default()
    }
}

impl FakeQueue {
    fn closed_ids(&self) -> Vec<(&str, Verdict)> {
        self.closed.iter().map(|(id, v, _)| (id.as_str(), *v)).collect()
    }
    fn abandoned_ids(&self) -> Vec<&str> {
        self.abandoned.iter().map(|(id, _)| id.as_str()).collect()
    }
}

impl Queue for FakeQueue {
    type Unit = FakeUnit;
    fn next(&mut self) -> Result<Option<FakeUnit>> {
        if self.fail_after.is_some_and(|n| self.handed >= n) {
            anyhow::bail!("the backlog cannot be read");
        }
        let next = self.units.pop_front();
        self.handed += usize::from(next.is_some());
        Ok(next)
    }
    fn close(&mut self, unit: &mut FakeUnit, verdict: Verdict, message: &str) -> Result<bool> {
        self.closed.push((unit.id.clone(), verdict, message.to_owned()));
        Ok(verdict == Verdict::Done && !self.fail_to_land.contains(&unit.id))
    }
    fn abandon(&mut self, unit: &mut FakeUnit, why: &str) -> Result<()> {
        self.abandoned.push((unit.id.clone(), why.to_owned()));
        Ok(())
    }
}

/// Plays a script of results per unit; a unit whose script is used up is done. Records each
/// dispatch as (unit, attempt, carry).
#[derive(Default)]
struct Scripted {
    scripts: HashMap<String, VecDeque<Result<Dispatched, String>>>,
    calls: Vec<(String, u32, Option<String>)>,
}

impl Scripted {
    fn new(scripts: Vec<(&str, Vec<Dispatched>)>) -> Scripted {
        Scripted {
            scripts: scripts.into_iter().map(|(id, s)| (id.to_owned(), s.into_iter().map(Ok).collect())).collect(),
            calls: Vec::new(),
        }
    }
    fn attempts_of(&self, id: &str) -> Vec<u32> {
        self.calls.iter().filter(|(u, _, _)| u == id).map(|(_, a, _)| *a).collect()
    }
}

impl Dispatcher<FakeUnit> for Scripted {
    fn dispatch(&mut self, unit: &mut FakeUnit, attempt: u32, carry: Option<&str>) -> Result<Dispatched> {
        self.calls.push((unit.id.clone(), attempt, carry.map(ToOwned::to_owned)));
        match self.scripts.get_mut(&unit.id).and_then(VecDeque::pop_front) {
            Some(Ok(d)) => Ok(d),
            Some(Err(e)) => Err(anyhow::anyhow!(e)),
            None => Ok(verdict(Verdict::Done, "done")),
        }
    }
}

fn verdict(verdict: Verdict, message: &str) -> Dispatched {
    Dispatched::Verdict { verdict, message: message.into() }
}

fn failed() -> Dispatched {
    verdict(Verdict::Failed, "broke")
}

fn note(text: &str) -> Dispatched {
    Dispatched::Continue { note: text.into() }
}

fn run(limits: Limits, q: &mut FakeQueue, d: &mut Scripted) -> (Stop, git_loop::engine::Tally) {
    let walk = Run::new(limits);
    work(&walk, q, d, &|| false).expect("the walk ends without an error");
    walk.outcome()
}

#[test]
fn every_verdict_reaches_the_queue_with_its_message_and_the_queue_decides_success() {
    let (mut q, mut d) = (
        queue(&["a", "b", "c", "d"]),
        Scripted::new(vec![
            ("a", vec![verdict(Verdict::Blocked, "needs a key")]),
            ("b", vec![verdict(Verdict::Undecided, "the judge gave no answer")]),
            ("c", vec![verdict(Verdict::Done, "passed")]),
        ]),
    );
    q.fail_to_land = vec!["d".into()];
    let (stop, tally) = run(Limits { pause_after: 10, ..Default::default() }, &mut q, &mut d);
    assert_eq!(
        q.closed,
        vec![
            ("a".into(), Verdict::Blocked, "needs a key".into()),
            ("b".into(), Verdict::Undecided, "the judge gave no answer".into()),
            ("c".into(), Verdict::Done, "passed".into()),
            ("d".into(), Verdict::Done, "done".into()),
        ]
    );
    // Blocked and undecided units are closed (not retried) and count as failures; so does a
    // done unit whose landing the queue refused.
    assert_eq!((stop, tally.closed, tally.succeeded, tally.failed, tally.dispatches), (Stop::NoWork, 4, 1, 3, 4));
}

#[test]
fn a_continuation_is_told_the_last_note_and_numbered_until_a_verdict() {
    let (mut q, mut d) =
        (queue(&["a"]), Scripted::new(vec![("a", vec![note("first"), note("second"), verdict(Verdict::Done, "ok")])]));
    let (stop, tally) = run(Limits { per_unit_dispatches: 5, ..Default::default() }, &mut q, &mut d);
    assert_eq!(
        d.calls,
        vec![("a".into(), 1, None), ("a".into(), 2, Some("first".into())), ("a".into(), 3, Some("second".into())),]
    );
    assert_eq!(q.closed_ids(), vec![("a", Verdict::Done)]);
    assert_eq!((stop, tally.dispatches, tally.succeeded), (Stop::NoWork, 3, 1));
}

#[test]
fn the_per_unit_cap_fails_a_unit_that_never_decides_and_the_walk_moves_on() {
    // Each session ends its own way (the same way again and again is the next test's).
    let notes: Vec<Dispatched> = (0..10).map(|i| note(&format!("x{i}"))).collect();
    let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(vec![("a", notes)]));
    let (stop, tally) = run(Limits { per_unit_dispatches: 4, ..Default::default() }, &mut q, &mut d);
    assert_eq!(d.attempts_of("a"), vec![1, 2, 3, 4]);
    assert_eq!(q.closed_ids(), vec![("a", Verdict::Failed), ("b", Verdict::Done)]);
    assert_eq!(q.closed[0].2, "no verdict after 4 sessions");
    assert_eq!((stop, tally.failed, tally.succeeded, tally.dispatches), (Stop::NoWork, 1, 1, 5));
}

/// Issue 43: sessions that end the same way, word for word, each within seconds — a cause in
/// the environment, not the agent's to fix — stop the unit after three, asking a person, with
/// the repeated line: not every session of its cap burnt in seconds.
#[test]
fn the_same_quick_failure_three_times_asks_a_person_instead_of_burning_the_cap() {
    let same = |s: &str| {
        note(&format!("The previous session (s-{s}) ended without reporting a verdict.\nerror: no module named foo"))
    };
    let (mut q, mut d) =
        (queue(&["a", "b"]), Scripted::new(vec![("a", vec![same("1"), same("2"), same("3"), same("4")])]));
    let (stop, tally) = run(Limits { per_unit_dispatches: 15, ..Default::default() }, &mut q, &mut d);
    assert_eq!(d.attempts_of("a"), vec![1, 2, 3], "three sessions, not fifteen");
    assert_eq!(q.closed_ids(), vec![("a", Verdict::Blocked), ("b", Verdict::Done)]);
    assert!(
        q.closed[0]
            .2
            .starts_with("the same failure 3 sessions in a row, each over within 5 s: error: no module named foo"),
        "{}",
        q.closed[0].2
    );
    assert_eq!((stop, tally.dispatches), (Stop::NoWork, 4));
}

#[test]
fn a_cap_of_zero_still_dispatches_each_unit_once() {
    let (mut q, mut d) = (queue(&["a"]), Scripted::new(vec![("a", vec![note("x")])]));
    run(Limits { per_unit_dispatches: 0, ..Default::default() }, &mut q, &mut d);
    assert_eq!(d.attempts_of("a"), vec![1]);
    assert_eq!(q.closed_ids(), vec![("a", Verdict::Failed)]);
}

#[test]
fn a_p0_failure_pauses_even_after_successes_and_a_p0_success_does_not() {
    let (mut q, mut d) = (queue(&["p0-ok", "b", "p0-bad", "c"]), Scripted::new(vec![("p0-bad", vec![failed()])]));
    let (stop, tally) = run(Limits::default(), &mut q, &mut d);
    assert_eq!(stop, Stop::Paused { policy: PausePolicy::P0Failure, units: vec!["p0-bad".into()] });
    assert_eq!((tally.succeeded, tally.failed), (2, 1));
    assert_eq!(q.units.len(), 1, "c was never taken");
}

#[test]
fn a_p0_unit_whose_claim_was_lost_does_not_pause_the_walk() {
    let (mut q, mut d) =
        (queue(&["p0-x", "b"]), Scripted::new(vec![("p0-x", vec![Dispatched::Lost { reason: "taken".into() }])]));
    let (stop, tally) = run(Limits::default(), &mut q, &mut d);
    assert_eq!((stop, tally.abandoned, tally.succeeded), (Stop::NoWork, 1, 1));
    assert_eq!(q.abandoned, vec![("p0-x".into(), "taken".into())]);
}

#[test]
fn the_pause_threshold_is_the_limits_own() {
    let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(vec![("a", vec![failed()])]));
    let (stop, _) = run(Limits { pause_after: 1, ..Default::default() }, &mut q, &mut d);
    assert_eq!(stop, Stop::Paused { policy: PausePolicy::ConsecutiveFailures(1), units: vec!["a".into()] });
    assert_eq!(q.closed_ids(), vec![("a", Verdict::Failed)], "b was never taken");
}

#[test]
fn a_unit_taken_when_the_iteration_budget_is_spent_is_given_back_unworked() {
    let (mut q, mut d) = (queue(&["a", "b", "c"]), Scripted::default());
    let (stop, tally) = run(Limits { max_iterations: Some(2), ..Default::default() }, &mut q, &mut d);
    assert_eq!(q.closed_ids(), vec![("a", Verdict::Done), ("b", Verdict::Done)]);
    assert_eq!(q.abandoned_ids(), vec!["c"]);
    assert_eq!(d.attempts_of("c"), Vec::<u32>::new(), "c was never dispatched");
    assert_eq!((stop, tally.dispatches, tally.abandoned), (Stop::Budget, 2, 1));
}

#[test]
fn max_units_is_done_only_when_every_unit_closed_succeeded() {
    let (mut q, mut d) = (queue(&["a", "b", "c"]), Scripted::default());
    let (stop, tally) = run(Limits { max_units: Some(2), ..Default::default() }, &mut q, &mut d);
    assert_eq!((stop, tally.closed, q.units.len()), (Stop::Done, 2, 1));
    let (mut q, mut d) =
        (queue(&["a", "b", "c"]), Scripted::new(vec![("a", vec![Dispatched::Lost { reason: "gone".into() }])]));
    let (stop, tally) = run(Limits { max_units: Some(2), ..Default::default() }, &mut q, &mut d);
    // An abandoned unit does not count against max_units, but it spoils "done".
    assert_eq!((stop, tally.closed, tally.abandoned, q.units.len()), (Stop::UnitLimit, 2, 1, 0));
}

#[test]
fn a_spent_budget_abandons_the_unit_without_a_failure_and_the_walk_goes_on() {
    let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(vec![("a", vec![Dispatched::Spent])]));
    let (stop, tally) = run(Limits::default(), &mut q, &mut d);
    assert_eq!(q.abandoned, vec![("a".into(), "the session budget is spent".into())]);
    assert_eq!(q.closed_ids(), vec![("b", Verdict::Done)]);
    assert_eq!((stop, tally.failed, tally.abandoned), (Stop::NoWork, 0, 1));
}

#[test]
fn cancellation_is_seen_between_dispatches_and_before_the_first_unit() {
    // Cancelled while a's first session ran: its continuation is never dispatched.
    let cancelled = AtomicBool::new(false);
    struct Cancelling<'a>(&'a AtomicBool, Scripted);
    impl Dispatcher<FakeUnit> for Cancelling<'_> {
        fn dispatch(&mut self, unit: &mut FakeUnit, attempt: u32, carry: Option<&str>) -> Result<Dispatched> {
            self.0.store(true, Ordering::SeqCst);
            self.1.dispatch(unit, attempt, carry)
        }
    }
    let mut q = queue(&["a", "b"]);
    let mut d = Cancelling(&cancelled, Scripted::new(vec![("a", vec![note("more")])]));
    let walk = Run::new(Limits::default());
    work(&walk, &mut q, &mut d, &|| cancelled.load(Ordering::SeqCst)).expect("no error");
    let (stop, tally) = walk.outcome();
    assert_eq!((stop, tally.dispatches, tally.abandoned), (Stop::Interrupted, 1, 1));
    assert_eq!(q.abandoned, vec![("a".into(), "the walk was interrupted".into())]);
    assert!(q.closed.is_empty());

    // Cancelled before anything: no unit is even taken.
    let mut q = queue(&["a"]);
    let walk = Run::new(Limits::default());
    work(&walk, &mut q, &mut Scripted::default(), &|| true).expect("no error");
    assert_eq!((walk.outcome().0, q.handed), (Stop::Interrupted, 0));
}

#[test]
fn a_walk_stopped_from_outside_takes_no_unit() {
    let mut q = queue(&["a"]);
    let walk = Run::new(Limits::default());
    walk.stop(Stop::Budget);
    walk.stop(Stop::Interrupted);
    work(&walk, &mut q, &mut Scripted::default(), &|| false).expect("no error");
    assert_eq!((walk.outcome().0, q.handed), (Stop::Budget, 0), "the first reason given stands");
}

#[test]
fn a_dispatch_error_abandons_the_unit_and_ends_the_walk_with_it() {
    let mut q = queue(&["a", "b"]);
    let mut d = Scripted::default();
    d.scripts.insert("a".into(), VecDeque::from([Err("the worktree vanished".to_owned())]));
    let walk = Run::new(Limits::default());
    let err = work(&walk, &mut q, &mut d, &|| false).expect_err("the error ends the walk");
    assert!(format!("{err:#}").contains("the worktree vanished"));
    let (stop, tally) = walk.outcome();
    assert_eq!((stop, tally.abandoned, tally.closed), (Stop::Failed, 1, 0));
    assert_eq!(q.abandoned_ids(), vec!["a"]);
    assert!(q.abandoned[0].1.contains("the worktree vanished"), "{:?}", q.abandoned);
    assert_eq!(q.units.len(), 1, "b was never taken");
}

#[test]
fn a_queue_error_ends_the_walk_with_it() {
    let mut q = queue(&["a", "b"]);
    q.fail_after = Some(1);
    let walk = Run::new(Limits::default());
    let err = work(&walk, &mut q, &mut Scripted::default(), &|| false).expect_err("the error ends the walk");
    assert!(format!("{err:#}").contains("cannot be read"));
    let (stop, tally) = walk.outcome();
    assert_eq!((stop, tally.succeeded), (Stop::Failed, 1));
}

/// A queue shared by workers in which `b` is ready only once `a` is closed (it depends on it).
struct Dependent<'a> {
    state: &'a Mutex<(Vec<&'static str>, Vec<String>)>,
    empty_looks: &'a AtomicU32,
}

impl Queue for Dependent<'_> {
    type Unit = FakeUnit;
    fn next(&mut self) -> Result<Option<FakeUnit>> {
        let mut s = self.state.lock().expect("lock");
        let closed_a = s.1.iter().any(|c| c == "a");
        let at = s.0.iter().position(|id| *id == "a" || closed_a);
        match at {
            Some(at) => Ok(Some(FakeUnit { id: s.0.remove(at).to_owned(), p0: false })),
            None => {
                self.empty_looks.fetch_add(1, Ordering::SeqCst);
                Ok(None)
            }
        }
    }
    fn close(&mut self, unit: &mut FakeUnit, _verdict: Verdict, _message: &str) -> Result<bool> {
        self.state.lock().expect("lock").1.push(unit.id.clone());
        Ok(true)
    }
    fn abandon(&mut self, _unit: &mut FakeUnit, _why: &str) -> Result<()> {
        Ok(())
    }
}

/// Works `a` only once another worker found nothing ready.
struct WaitsForAnEmptyLook<'a>(&'a AtomicU32);

impl Dispatcher<FakeUnit> for WaitsForAnEmptyLook<'_> {
    fn dispatch(&mut self, unit: &mut FakeUnit, _attempt: u32, _carry: Option<&str>) -> Result<Dispatched> {
        if unit.id == "a" {
            let deadline = Instant::now() + Duration::from_secs(20);
            while self.0.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(verdict(Verdict::Done, "ok"))
    }
}

#[test]
fn a_worker_that_finds_nothing_ready_waits_for_the_units_in_flight() {
    let state = Mutex::new((vec!["a", "b"], Vec::new()));
    let empty_looks = AtomicU32::new(0);
    let walk = Run::new(Limits::default());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                let mut q = Dependent { state: &state, empty_looks: &empty_looks };
                work(&walk, &mut q, &mut WaitsForAnEmptyLook(&empty_looks), &|| false).expect("no error")
            });
        }
    });
    let (stop, tally) = walk.outcome();
    assert!(empty_looks.load(Ordering::SeqCst) >= 1, "a worker looked while a was in flight");
    assert_eq!(state.lock().expect("lock").1, vec!["a".to_owned(), "b".to_owned()], "b was worked after a closed");
    assert_eq!((stop, tally.succeeded), (Stop::NoWork, 2));
}

#[test]
fn a_budget_without_a_walk_gives_nothing() {
    let none = Budget::none();
    assert!(!none.take());
    assert_eq!(none.unit_left(), 0);
}

#[test]
fn a_stop_flag_wakes_its_sleeper_at_once() {
    let flag = StopFlag::default();
    let started = Instant::now();
    assert!(!flag.sleep(Duration::from_millis(20)), "not stopped: the whole sleep");
    assert!(started.elapsed() >= Duration::from_millis(20));
    let woke = std::thread::scope(|scope| {
        let sleeper = scope.spawn(|| {
            let at = Instant::now();
            (flag.sleep(Duration::from_secs(60)), at.elapsed())
        });
        std::thread::sleep(Duration::from_millis(20));
        flag.stop();
        sleeper.join().expect("the sleeper ends")
    });
    assert!(woke.0, "stopped");
    assert!(woke.1 < Duration::from_secs(30), "woken, not timed out: {:?}", woke.1);
}

#[test]
fn each_stop_has_its_word() {
    use git_loop::walk::stop_word;
    let paused = Stop::Paused { policy: PausePolicy::P0Failure, units: vec![] };
    let words: Vec<&str> =
        [Stop::NoWork, Stop::Done, Stop::UnitLimit, Stop::Budget, paused, Stop::Interrupted, Stop::Failed]
            .iter()
            .map(stop_word)
            .collect();
    assert_eq!(words, ["no_work", "done", "units", "budget", "paused", "interrupted", "failed"]);
}

// The engine's first tests, from when it lived in the crate with fakes of its own.

fn done() -> Dispatched {
    verdict(Verdict::Done, "")
}

fn silent() -> Dispatched {
    note("no verdict")
}

#[test]
fn a_drained_queue_ends_with_no_work() {
    let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(vec![]));
    let (stop, tally) = run(Limits::default(), &mut q, &mut d);
    assert_eq!(stop, Stop::NoWork);
    assert_eq!((tally.closed, tally.succeeded, tally.dispatches), (2, 2, 2));
}

#[test]
fn three_consecutive_failures_pause_and_a_success_resets_the_count() {
    let (mut q, mut d) = (
        queue(&["a", "b", "c", "d", "e", "f"]),
        Scripted::new(vec![
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
        Stop::Paused { policy: PausePolicy::ConsecutiveFailures(3), units: vec!["d".into(), "e".into(), "f".into()] }
    );
    assert_eq!((tally.failed, tally.succeeded), (5, 1), "c's success reset the count after a and b");
}

#[test]
fn a_p0_failure_pauses_at_once() {
    let (mut q, mut d) = (queue(&["p0-x", "b"]), Scripted::new(vec![("p0-x", vec![failed()])]));
    let (stop, tally) = run(Limits::default(), &mut q, &mut d);
    assert_eq!(stop, Stop::Paused { policy: PausePolicy::P0Failure, units: vec!["p0-x".into()] });
    assert_eq!(tally.closed, 1, "b was never taken");
}

#[test]
fn sessions_without_a_verdict_continue_with_a_note_up_to_the_cap() {
    let (mut q, mut d) = (queue(&["a"]), Scripted::new(vec![("a", vec![silent(), silent(), silent()])]));
    let limits = Limits { per_unit_dispatches: 3, ..Default::default() };
    let (stop, tally) = run(limits, &mut q, &mut d);
    assert_eq!(q.closed_ids(), vec![("a", Verdict::Failed)], "no verdict after the cap is a failure");
    let carries: Vec<Option<String>> = d.calls.iter().map(|(_, _, carry)| carry.clone()).collect();
    assert_eq!(carries, vec![None, Some("no verdict".into()), Some("no verdict".into())]);
    assert_eq!((stop, tally.dispatches), (Stop::NoWork, 3));
}

#[test]
fn max_units_is_once_mode_and_counts_parked_units() {
    let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(vec![]));
    let (stop, _) = run(Limits { max_units: Some(1), ..Default::default() }, &mut q, &mut d);
    assert_eq!((stop, q.closed.len()), (Stop::Done, 1));
    let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(vec![("a", vec![failed()])]));
    let (stop, _) = run(Limits { max_units: Some(1), ..Default::default() }, &mut q, &mut d);
    assert_eq!((stop, q.closed.len()), (Stop::UnitLimit, 1), "a parked unit counts, and the walk did not succeed");
}

#[test]
fn max_iterations_counts_every_dispatch_and_abandons_the_unit_in_hand() {
    let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(vec![("a", vec![silent(), silent()])]));
    let (stop, tally) = run(Limits { max_iterations: Some(2), ..Default::default() }, &mut q, &mut d);
    assert_eq!((stop, tally.dispatches), (Stop::Budget, 2));
    assert_eq!(q.abandoned_ids(), vec!["a"]);
}

#[test]
fn a_lost_claim_abandons_without_closing_and_the_walk_goes_on() {
    let (mut q, mut d) =
        (queue(&["a", "b"]), Scripted::new(vec![("a", vec![Dispatched::Lost { reason: "taken".into() }])]));
    let (stop, tally) = run(Limits::default(), &mut q, &mut d);
    assert_eq!((stop, tally.closed, tally.abandoned), (Stop::NoWork, 1, 1));
    assert!(q.closed_ids().iter().all(|(id, _)| *id != "a"));
}

#[test]
fn an_interruption_abandons_the_unit_and_stops() {
    let (mut q, mut d) = (queue(&["a", "b"]), Scripted::new(vec![("a", vec![Dispatched::Interrupted])]));
    let (stop, _) = run(Limits::default(), &mut q, &mut d);
    assert_eq!((stop, q.abandoned_ids(), q.closed.len()), (Stop::Interrupted, vec!["a"], 0));
}

/// A `FakeQueue` behind a lock, for workers in parallel.
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

#[test]
fn parallel_workers_share_the_unit_budget_without_overshooting() {
    let walk = Run::new(Limits { max_units: Some(3), ..Default::default() });
    let shared = Mutex::new(queue(&["a", "b", "c", "d", "e", "f"]));
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| work(&walk, &mut Shared(&shared), &mut Scripted::new(vec![]), &|| false).expect("works"));
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
        unreachable!("the engine dispatches within a budget")
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
    let walk = Run::new(Limits { max_iterations: Some(7), per_unit_dispatches: 4, ..Default::default() });
    let (mut q, mut d) = (queue(&["a", "b", "c"]), Racing { extra: 2, taken: Vec::new() });
    work(&walk, &mut q, &mut d, &|| false).expect("no errors");
    let (stop, tally) = walk.outcome();
    // a: 1 + 2, b: 1 + 2, c: 1 + 0 of 2 (the walk's 7 are spent).
    assert_eq!(d.taken, vec![2, 2, 0]);
    assert_eq!((stop, tally.dispatches, tally.succeeded, tally.abandoned), (Stop::Budget, 7, 2, 1));
    let walk = Run::new(Limits { per_unit_dispatches: 2, ..Default::default() });
    let (mut q, mut d) = (queue(&["a"]), Racing { extra: 3, taken: Vec::new() });
    work(&walk, &mut q, &mut d, &|| false).expect("no errors");
    assert_eq!(d.taken, vec![1], "a unit's cap bounds its race");
    assert_eq!(q.abandoned_ids(), vec!["a"]);
}

#[test]
fn nobody_to_work_a_unit_pauses_the_walk_and_leaves_the_unit_open() {
    let reason = "claude is unreachable (usage limit) and no fallback agent is set".to_owned();
    let (mut q, mut d) =
        (queue(&["a", "b"]), Scripted::new(vec![("a", vec![Dispatched::Pause { reason: reason.clone() }])]));
    let (stop, tally) = run(Limits::default(), &mut q, &mut d);
    assert_eq!(stop, Stop::Paused { policy: PausePolicy::Unreachable(reason), units: vec!["a".into()] });
    assert_eq!((tally.closed, q.abandoned_ids()), (0, vec!["a"]));
}

/// Each session spends what it is given (tokens, dollars; `None`: unknown), reported to the run.
struct Spending<'r> {
    run: &'r Run,
    each: (Option<u64>, Option<f64>),
    dispatched: u32,
}

impl Dispatcher<FakeUnit> for Spending<'_> {
    fn dispatch(&mut self, _: &mut FakeUnit, _: u32, _: Option<&str>) -> Result<Dispatched> {
        self.dispatched += 1;
        self.run.spend(self.each.0, self.each.1);
        Ok(Dispatched::Verdict { verdict: Verdict::Done, message: String::new() })
    }
}

#[test]
fn no_session_starts_once_the_money_or_the_tokens_are_spent() {
    let walk = Run::new(Limits { budget_usd: Some(1.0), ..Default::default() });
    let mut q = queue(&["a", "b", "c", "d", "e"]);
    let mut d = Spending { run: &walk, each: (Some(100), Some(0.4)), dispatched: 0 };
    work(&walk, &mut q, &mut d, &|| false).expect("work");
    let (stop, tally) = walk.outcome();
    // $0.40, $0.80: under the budget, a third starts; at $1.20 none does.
    assert_eq!((stop, d.dispatched, tally.spent_tokens, tally.spent_micro_usd), (Stop::Budget, 3, 300, 1_200_000));
    assert_eq!(q.abandoned_ids(), vec!["d"], "the unit taken when the money ran out is given back unworked");
    assert_eq!(walk.usd_left(), Some(0.0));

    let walk = Run::new(Limits { budget_tokens: Some(250), ..Default::default() });
    let (mut q, mut d) =
        (queue(&["a", "b", "c", "d"]), Spending { run: &walk, each: (Some(100), None), dispatched: 0 });
    work(&walk, &mut q, &mut d, &|| false).expect("work");
    assert_eq!((walk.outcome().0, d.dispatched, walk.usd_left()), (Stop::Budget, 3, None));

    // Unknown spend counts nothing, and is counted as unknown.
    let walk = Run::new(Limits { budget_usd: Some(1.0), ..Default::default() });
    let (mut q, mut d) = (queue(&["a", "b"]), Spending { run: &walk, each: (None, None), dispatched: 0 });
    work(&walk, &mut q, &mut d, &|| false).expect("work");
    let (stop, tally) = walk.outcome();
    assert_eq!((stop, d.dispatched, tally.spent_unknown, tally.spent_micro_usd), (Stop::NoWork, 2, 2, 0));
}
