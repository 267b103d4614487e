//! The walk's decisions that need no agent: which task is ready and in what order (the
//! board), in what order claimers try them, what `next --claim` takes, and what a task's
//! journal says is left unfinished (a try, a race).

use git_loop::backlog::{self, Board, NextClaimed, Readiness, TaskFields};
use git_loop::ids::{ClaimKey, Priority, TaskId};
use git_loop::store::claim::{self, AcquireOptions};
use git_loop::store::events::{EntrantEnded, RaceStarted, Recorded, TryOpened, UnitClosed};
use git_loop::store::journal::{self, Filter};
use git_loop::store::task::State;
use git_loop::store::Store;
use git_loop::walk::dispatch::unfinished_try;
use git_loop::walk::race::{unfinished_in, Outcome};

use super::{add, ctx, ctx_at, open};
use crate::harness::TestEnv;

fn p(priority: Priority) -> TaskFields {
    TaskFields { priority: Some(priority), ..Default::default() }
}

fn opts(holder: &str) -> AcquireOptions {
    AcquireOptions { holder: holder.into(), ttl: chrono::Duration::minutes(30), reason: None, session: None }
}

fn ready_ids(store: &Store, labels: &[String]) -> Vec<String> {
    let board = Board::load(store, &ctx()).expect("board");
    board.ready(labels).map(|r| r.id().to_owned()).collect()
}

#[test]
fn ready_tasks_come_by_priority_then_age() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let low = add(&store, &ctx_at("2026-03-01T10:00:00Z"), "low", p(Priority::P3));
    let young_p0 = add(&store, &ctx_at("2026-03-01T11:00:00Z"), "young p0", p(Priority::P0));
    let mid = add(&store, &ctx_at("2026-03-01T09:00:00Z"), "mid", p(Priority::P1));
    let old_p0 = add(&store, &ctx_at("2026-03-01T08:00:00Z"), "old p0", p(Priority::P0));
    assert_eq!(ready_ids(&store, &[]), [&old_p0, &young_p0, &mid, &low].map(|id| id.to_string()));
}

#[test]
fn a_task_is_ready_once_open_unclaimed_and_its_dependencies_done() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let first = add(&store, &ctx(), "first", TaskFields { labels: vec!["api".into()], ..Default::default() });
    let second = add(&store, &ctx(), "second", TaskFields { after: vec![first.to_string()], ..Default::default() });
    let third = add(&store, &ctx(), "third", TaskFields { after: vec![second.to_string()], ..Default::default() });
    let parked = add(&store, &ctx(), "parked", TaskFields::default());
    backlog::set_state(&store, &ctx(), &parked, State::Parked, None).expect("park");

    let board = Board::load(&store, &ctx()).expect("board");
    let readiness = |id: &TaskId| board.readiness(board.get(id.as_str()).expect("a row"));
    assert_eq!(readiness(&first), Readiness::Ready);
    assert_eq!(readiness(&second), Readiness::Blocked(vec![first.to_string()]));
    assert_eq!(readiness(&parked), Readiness::Closed);
    assert!(board.depends_on(third.as_str(), first.as_str()), "through second");
    assert!(!board.depends_on(first.as_str(), third.as_str()));
    assert_eq!(ready_ids(&store, &[]), [first.to_string()]);
    assert_eq!(ready_ids(&store, &["api".into()]), [first.to_string()]);
    assert!(ready_ids(&store, &["web".into()]).is_empty(), "no task has that label");

    claim::acquire(&store, &ctx(), &ClaimKey::node(&first), &opts("h")).expect("claim");
    let board = Board::load(&store, &ctx()).expect("board");
    assert_eq!(board.readiness(board.get(first.as_str()).expect("row")), Readiness::Claimed);
    assert!(board.ready(&[]).next().is_none());

    backlog::done(&store, &ctx(), &first, Default::default()).expect("done");
    claim::release(&store, &ctx(), &ClaimKey::node(&first), "h", false).expect("release");
    assert_eq!(ready_ids(&store, &[]), [second.to_string()], "second is unblocked, third still waits");
}

#[test]
fn contended_claimers_spread_over_the_best_priority_only() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    for (i, priority) in [Priority::P0, Priority::P0, Priority::P0, Priority::P1, Priority::P2].into_iter().enumerate()
    {
        add(&store, &ctx_at(&format!("2026-03-01T0{i}:00:00Z")), &format!("t{i}"), p(priority));
    }
    let board = Board::load(&store, &ctx()).expect("board");
    let ready: Vec<_> = board.ready(&[]).collect();
    let ids = |rows: &[&git_loop::store::index::Row]| rows.iter().map(|r| r.id().to_owned()).collect::<Vec<_>>();
    assert_eq!(ids(&backlog::claim_order(&ready, false)), ids(&ready), "uncontended: the board's order");
    for _ in 0..20 {
        let order = ids(&backlog::claim_order(&ready, true));
        let (mut best, rest) = (order[..3].to_vec(), order[3..].to_vec());
        best.sort();
        let mut expected = ids(&ready[..3]);
        expected.sort();
        assert_eq!(best, expected, "the p0 tasks first, in some order");
        assert_eq!(rest, ids(&ready[3..]), "lower priorities keep their places");
    }
}

#[test]
fn next_claim_takes_the_first_ready_task_and_then_the_next() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let urgent = add(&store, &ctx(), "urgent", p(Priority::P0));
    let later = add(&store, &ctx(), "later", p(Priority::P2));
    let claimed = |holder: &str| match backlog::next_claim(&store, &ctx(), &[], &opts(holder)).expect("next") {
        NextClaimed::Claimed { task, held } => {
            assert_eq!(held.record.holder, holder);
            Some(task.id)
        }
        NextClaimed::Nothing => None,
    };
    assert_eq!(claimed("h1"), Some(urgent.to_string()));
    assert_eq!(claimed("h2"), Some(later.to_string()), "the first is held: the next one");
    assert_eq!(claimed("h3"), None, "nothing left");
}

/// Journal `events` about task `id`, as the walk does, and read its events back.
fn history(store: &Store, id: &TaskId, events: Vec<Recorded>) -> Vec<journal::Entry> {
    for event in events {
        backlog::record(store, &ctx(), Some(id), event).expect("journal");
    }
    journal::timeline(store, &Filter { task: Some(id.to_string()), session: None }).expect("timeline").entries
}

fn opened(number: u32, race: bool) -> Recorded {
    Recorded::TryOpened(TryOpened {
        number,
        agent: "a".into(),
        branch: String::new(),
        worktree: String::new(),
        resumed: false,
        race,
        warmed: None,
        checkout: None,
    })
}

#[test]
fn the_journal_tells_the_walk_which_try_is_unfinished() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let id = add(&store, &ctx(), "t", TaskFields::default());
    assert_eq!(unfinished_try(&history(&store, &id, vec![])), None);
    assert_eq!(unfinished_try(&history(&store, &id, vec![opened(1, false)])), Some(1));
    let closed = Recorded::UnitClosed(UnitClosed {
        verdict: "failed".into(),
        reason: None,
        message: None,
        commit: None,
        number: Some(1),
    });
    assert_eq!(unfinished_try(&history(&store, &id, vec![closed])), None, "closed");
    assert_eq!(unfinished_try(&history(&store, &id, vec![opened(2, false), opened(3, true)])), Some(2), "not a race's");
    backlog::done(&store, &ctx(), &id, Default::default()).expect("done");
    let after_done = history(&store, &id, vec![]);
    assert_eq!(unfinished_try(&after_done), None, "a task done ends its try");
}

#[test]
fn the_journal_tells_the_walk_which_race_to_take_up_again() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let id = add(&store, &ctx(), "t", TaskFields::default());
    let started = Recorded::RaceStarted(RaceStarted {
        agents: vec!["claude".into(), "codex".into()],
        tries: vec![1, 2],
        pick: "first".into(),
        start: None,
        from_try: None,
    });
    let ended = Recorded::EntrantEnded(EntrantEnded {
        number: 2,
        agent: "codex".into(),
        outcome: "failed".into(),
        message: "tests fail".into(),
        checks: None,
        head: None,
    });
    let race = unfinished_in(&history(&store, &id, vec![started, ended])).expect("a race in progress");
    assert_eq!((race.agents, race.tries, race.won), (vec!["claude".to_owned(), "codex".to_owned()], vec![1, 2], None));
    assert_eq!(race.ended.keys().copied().collect::<Vec<_>>(), [2]);
    assert_eq!((race.ended[&2].outcome, race.ended[&2].message.as_str()), (Outcome::Failed, "tests fail"));

    backlog::set_state(&store, &ctx(), &id, State::Parked, None).expect("park");
    assert!(unfinished_in(&history(&store, &id, vec![])).is_none(), "a state change ends the race");
}
