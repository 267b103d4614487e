//! `status` and the board: what they show, read once — the board and who works on it, the walks
//! (a walk of this machine whose process is gone is shown as ended, whatever its lease says), what
//! waits for a person and how to answer it, missions, the landing queue and what was spent.

use std::collections::HashSet;

use anyhow::Result;

use crate::agent::record;
use crate::backlog::{Board, Readiness};
use crate::context::Context;
use crate::ids::ClaimKey;
use crate::mission::record::{self as missions, MissionState};
use crate::store::claim::{self, Listed};
use crate::store::claim_record::Held;
use crate::store::events::Recorded;
use crate::store::journal::{self, Filter};
use crate::store::lease::{Lease, Watcher};
use crate::store::task::{State, Task};
use crate::store::Store;

/// What `status` shows, read once: the board and who works on it, the walks, what waits for a
/// person, missions, the landing queue and what was spent. `board` shows the same.
pub struct Overview {
    pub board: Board,
    pub loop_dir: std::path::PathBuf,
    /// The sessions running on this machine.
    pub running: Vec<record::Record>,
    pub walkers: Vec<(Held, Lease)>,
    /// Walks of this machine whose process is gone, their singleton still held.
    pub dead_walkers: Vec<(Held, Lease)>,
    pub claims: Vec<(ClaimKey, Held, Lease)>,
    /// The first 50 ready tasks, and how many are ready.
    pub ready: Vec<Task>,
    pub ready_count: usize,
    pub parked: Vec<Task>,
    /// Tasks that need a decision, need you, are taken over, or failed.
    pub waiting: Vec<Task>,
    /// How many tasks a live walk works on, and which.
    pub worked: usize,
    pub worked_ids: Vec<String>,
    /// The last walk's start, pause or end.
    pub last_walk: Option<(journal::Entry, Recorded)>,
    /// The last walk's pause, with why (`walk_paused`), if it paused.
    pub paused: Option<(journal::Entry, crate::store::events::WalkPaused)>,
    /// How to answer each waiting task, and what failed last.
    pub answers: Answers,
    /// Where each task taken over is worked by hand: its worktree, and who took it.
    pub taken: std::collections::BTreeMap<String, (String, String)>,
    pub reviews: Vec<(String, crate::walk::review::ReviewState)>,
    pub mission_list: Vec<crate::mission::record::Mission>,
    pub mission_corrupt: Vec<(String, String)>,
    pub landing: Option<crate::landing::View>,
    pub at_work: Vec<crate::walk::resolve::AtWork>,
    pub blocked: usize,
    pub spent: crate::store::usage::Total,
}

/// Each waiting task's ways to answer it, and what failed last.
pub type Answers = std::collections::BTreeMap<String, (Vec<(String, &'static str)>, Option<super::answer::Failure>)>;

/// The sessions running on this machine, as their records and the process table say.
pub fn running_sessions(loop_dir: &std::path::Path, ctx: &Context) -> Vec<record::Record> {
    record::all(loop_dir)
        .into_iter()
        .filter(|r| r.ended_at.is_none() && record::is_alive(r.pid, r.pid_start, &r.boot_id, &ctx.boot_id))
        .collect()
}

/// Read what `status` shows.
pub fn overview(store: &Store, ctx: &Context) -> Result<Overview> {
    let board = Board::load(store, ctx)?;
    let loop_dir = store.loop_dir()?;
    let running = running_sessions(&loop_dir, ctx);
    let mut walkers = Vec::new();
    let mut dead_walkers = Vec::new();
    let mut claims = Vec::new();
    let mut watcher = Watcher::load(store, ctx);
    let mut watched = HashSet::new();
    for listed in claim::list(store, "")? {
        if let Listed::Claim { key, held } = listed {
            let lease = watcher.judge(&key, &held);
            watched.insert(crate::refs::claim(&key));
            if lease.is_stale() {
                continue;
            }
            if key.kind() != claim::LOCAL_KIND {
                claims.push((key, *held, lease));
            } else if lease.holder_gone {
                // A walk killed before it could release its singleton (SIGKILL, a crash): its
                // lease says nothing about whether it runs, this machine's process table does.
                dead_walkers.push((*held, lease));
            } else {
                walkers.push((*held, lease));
            }
        }
    }
    watcher.keep_only(crate::refs::CLAIMS, &watched);
    watcher.save();
    // A task claimed by a walk of this machine that is gone is not being worked either.
    let abandoned_tasks: Vec<&str> =
        claims.iter().filter(|(_, _, lease)| lease.holder_gone).map(|(key, _, _)| key.name()).collect();
    let ready: Vec<Task> = board.ready(&[]).take(50).map(|r| r.task()).collect::<Result<_>>()?;
    let ready_count = board.ready(&[]).count();
    let parked: Vec<Task> =
        board.tasks.iter().filter(|r| r.state == State::Parked).map(|r| r.task()).collect::<Result<_>>()?;
    let waiting: Vec<Task> = board
        .tasks
        .iter()
        .filter(|r| matches!(r.state, State::NeedsDecision | State::NeedsYou | State::TakenOver | State::Failed))
        .map(|r| r.task())
        .collect::<Result<_>>()?;
    let worked_ids: Vec<String> = board
        .tasks
        .iter()
        .filter(|r| board.shown_state(r.id(), r.state) == "running" && !abandoned_tasks.contains(&r.id()))
        .map(|r| r.id().to_owned())
        .collect();
    let worked = worked_ids.len();
    // The last walk's events, newest first: a paused walk journals why (walk_paused), then
    // that it ended (walk_ended, stop "paused"); the reason is in the first.
    let mut walk_events = journal::timeline(store, &Filter::default())?.entries.into_iter().rev().filter_map(|e| {
        match Recorded::of(&e.event) {
            walk @ (Recorded::WalkPaused(_) | Recorded::WalkEnded(_) | Recorded::WalkStarted(_)) => Some((e, walk)),
            _ => None,
        }
    });
    let last_walk = walk_events.next();
    let paused = match &last_walk {
        Some((e, Recorded::WalkPaused(p))) => Some((e.clone(), p.clone())),
        Some((e, Recorded::WalkEnded(ended))) if ended.stop == "paused" => {
            let why = walk_events.next().and_then(|(_, walk)| match walk {
                Recorded::WalkPaused(p) => Some(p),
                _ => None,
            });
            Some((e.clone(), why.unwrap_or_default()))
        }
        _ => None,
    };
    // The review rounds of the tasks being worked and of those waiting for a person.
    let mut reviews = Vec::new();
    let reviewed: Vec<String> = claims
        .iter()
        .filter(|(key, _, lease)| key.kind() == "node" && !lease.holder_gone)
        .map(|(key, _, _)| key.name().to_owned())
        .chain(waiting.iter().map(|t| t.id.clone()))
        .collect();
    // How to answer each task waiting for you, and what failed last.
    let mut answers = Answers::new();
    let mut taken = std::collections::BTreeMap::new();
    for id in reviewed {
        let history = journal::timeline(store, &Filter { task: Some(id.clone()), session: None })?.entries;
        if let Some(state) = crate::walk::review::state_of(&history) {
            reviews.push((id.clone(), state));
        }
        if let Some(t) = waiting.iter().find(|t| t.id == id) {
            let standing = super::answer::Standing::of(store, &t.task_id(), t.state, &history)?;
            let ways = super::answer::ways(&t.id, t.state, &standing);
            if t.state == State::TakenOver {
                let last = history.iter().rev().find_map(|e| match Recorded::of(&e.event) {
                    Recorded::TakenOver(over) => Some((over.worktree, over.by)),
                    _ => None,
                });
                if let Some(found) = last {
                    taken.insert(id.clone(), found);
                }
            }
            answers.insert(id, (ways, super::answer::last_failure(&loop_dir, &history)));
        }
    }
    let mut mission_list = Vec::new();
    let mut mission_corrupt = Vec::new();
    for listed in missions::list(store)? {
        match listed {
            missions::Listed::Mission(s) if s.mission.state != MissionState::Cancelled => mission_list.push(s.mission),
            missions::Listed::Mission(_) => {}
            missions::Listed::Corrupt { name, problem } => mission_corrupt.push((name, problem)),
        }
    }
    let landing = crate::landing::view(store, ctx)?;
    // Who is resolving what, and who writes a landing's message, on this machine.
    let at_work = crate::walk::resolve::roles_at_work(store, ctx)?;
    let blocked = board.tasks.iter().filter(|r| matches!(board.readiness(r), Readiness::Blocked(_))).count();
    let mut spent = crate::store::usage::Total::default();
    for s in crate::store::ledger::ledger(store)? {
        spent.add(s.usage.as_ref());
    }
    Ok(Overview {
        board,
        loop_dir,
        running,
        walkers,
        dead_walkers,
        claims,
        ready,
        ready_count,
        parked,
        waiting,
        worked,
        worked_ids,
        last_walk,
        paused,
        answers,
        taken,
        reviews,
        mission_list,
        mission_corrupt,
        landing,
        at_work,
        blocked,
        spent,
    })
}
