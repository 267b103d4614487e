//! `show`: one task read whole — its record and history, where its work stands with the landing
//! queue, its review, who works on it and how to answer it if it waits for a person, and what
//! it cost.

use anyhow::Result;
use chrono::{DateTime, Utc};

use super::answer::{self, Failure, Standing};
use crate::backlog::{self, Board};
use crate::context::Context;
use crate::error::usage;
use crate::ids::TaskId;
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, Entry};
use crate::store::task::{self, Snapshot, State, Task};
use crate::store::Store;
use crate::walk::resolve::AtWork;
use crate::walk::review::ReviewState;

/// Everything `show` says of one task.
pub struct Shown {
    pub id: TaskId,
    pub snapshot: Snapshot,
    pub board: Board,
    pub landing: Option<Landing>,
    /// Its journal, oldest first.
    pub history: Vec<Entry>,
    pub review: Option<ReviewState>,
    /// How to answer it (empty when it waits for nobody).
    pub ways: Vec<(String, &'static str)>,
    /// What failed last, when it waits for a person.
    pub failure: Option<Failure>,
    /// The conflict resolvers and summarizers at work on it on this machine.
    pub at_work: Vec<AtWork>,
    /// Where a person works it by hand, while it is theirs.
    pub taken: Option<events::TakenOver>,
    pub spent: crate::store::usage::Total,
    /// Its last pull or merge request on the forge, as the journal knows it.
    pub request: Option<crate::landing::request::Known>,
}

/// Where a task's work stands with the landing queue of the default target.
pub struct Landing {
    /// The target's short name.
    pub into: String,
    pub state: LandingState,
    /// Its place in the queue (from 1), if it is in it, and the tasks it waits for there.
    pub position: Option<usize>,
    pub waiting_for: Vec<String>,
    /// The target's last landing failure, when it was this task's: when, and what.
    pub failure: Option<(DateTime<Utc>, events::LandingFailed)>,
}

/// A task's work against its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LandingState {
    /// The target as this clone knows it holds its work.
    Landed,
    /// Its note says it landed, but the target as this clone knows it does not hold its work.
    Noted,
    /// In the queue, nothing to wait for.
    Queued,
    /// In the queue, waiting for other tasks to land first.
    Waiting,
    /// Not in the queue, its last landing failed.
    Failed,
    /// Not on the target and not queued: it lands once it is done.
    NotQueued,
}

impl LandingState {
    /// Its word in `show --json`'s `landing.state`.
    pub fn word(&self) -> &'static str {
        match self {
            LandingState::Landed => "landed",
            LandingState::Noted => "noted",
            LandingState::Queued => "queued",
            LandingState::Waiting => "waiting",
            LandingState::Failed => "failed",
            LandingState::NotQueued => "not_queued",
        }
    }
}

/// Read task `target` (an id or a unique prefix) whole. A corrupt record or a missing object is
/// reported as such.
pub fn show(store: &Store, ctx: &Context, target: &str) -> Result<Shown> {
    let id = backlog::resolve(store, target)?;
    let Some(snapshot) = task::read_whole(store, &id)? else {
        // Deleted since `resolve` found it.
        return Err(usage(format!("task '{id}' does not exist")).hint("list tasks with 'git loop list'").into());
    };
    let board = Board::load(store, ctx)?;
    let landing = landing_of(store, ctx, &id, &snapshot.task)?;
    let filter = journal::Filter { task: Some(id.to_string()), session: None };
    let history = journal::timeline(store, &filter)?.entries;
    let review = crate::walk::review::state_of(&history);
    let state = snapshot.task.state;
    let standing = Standing::of(store, &id, state, &history)?;
    let ways = answer::ways(id.as_str(), state, &standing);
    let failure = if answer::waits(state) { answer::last_failure(&store.loop_dir()?, &history) } else { None };
    let at_work: Vec<AtWork> =
        crate::walk::resolve::roles_at_work(store, ctx)?.into_iter().filter(|w| w.task == id.as_str()).collect();
    let taken = (state == State::TakenOver)
        .then(|| {
            history.iter().rev().find_map(|e| match Recorded::of(&e.event) {
                Recorded::TakenOver(over) => Some(over),
                _ => None,
            })
        })
        .flatten();
    let spent = crate::store::ledger::task_total(store, id.as_str())?;
    let request = crate::landing::request::known_in(&history).pop();
    Ok(Shown { id, snapshot, board, landing, history, review, ways, failure, at_work, taken, spent, request })
}

/// Where task `id`'s work stands with the landing queue of the default target; `None` without
/// a task branch or a target, and for a task that is not done and never failed to land (a
/// failed, parked or cancelled task has no work to land: its branch is where it started).
fn landing_of(store: &Store, ctx: &Context, id: &TaskId, task: &Task) -> Result<Option<Landing>> {
    let branch = crate::refs::task_branch(id);
    // A folded task's branch: as the archive holds it.
    let archived = || -> Result<Option<gix::ObjectId>> {
        Ok(store.archived(&branch)?.into_iter().find(|(n, _)| *n == branch).map(|(_, id)| id))
    };
    let Some(head) = store.ref_target(&branch)?.map_or_else(archived, |h| Ok(Some(h)))? else { return Ok(None) };
    // A child of an epic with its own branch lands there (`loop.epicBranch`).
    let home = match task.parent.as_deref().filter(|_| crate::landing::epic::on(store)) {
        Some(parent) => parent
            .parse::<TaskId>()
            .ok()
            .and_then(|p| crate::store::task::read(store, &p).ok().flatten())
            .filter(|p| p.task.epic)
            .map(|p| crate::refs::task_branch(&p.task.task_id())),
        None => None,
    };
    let view = match home {
        Some(branch) => crate::landing::view_of(store, ctx, branch)?,
        None => match crate::landing::view(store, ctx)? {
            Some(view) => view,
            None => return Ok(None),
        },
    };
    let into = crate::refs::short_branch(&view.into).to_owned();
    let failure = view.last_failure.filter(|(task, ..)| task == id.as_str()).map(|(_, at, failed)| (at, failed));
    let done = task.state == State::Done;
    if !done && failure.is_none() {
        return Ok(None);
    }
    let position = view.queue.iter().position(|q| q.task == id.as_str());
    // "Landed" only when the target as this clone knows it holds the completing commit (else the
    // task branch's head): a completion note that says it landed is not enough — it may name a
    // target this clone has not fetched since, or a landing that never reached it.
    let completing = task.completion.as_ref().and_then(|c| c.commit.as_deref()).and_then(|c| c.parse().ok());
    let landed = match view.tip {
        Some(tip) if done => store.is_ancestor(completing.unwrap_or(head), tip)?,
        _ => false,
    };
    let noted = done && !landed && crate::landing::noted_landed(store, task, &view.into)?;
    let state = match (landed, position) {
        (true, _) => LandingState::Landed,
        (false, _) if noted => LandingState::Noted,
        (false, Some(n)) if view.queue[n].waiting_for.is_empty() => LandingState::Queued,
        (false, Some(_)) => LandingState::Waiting,
        (false, None) if failure.is_some() => LandingState::Failed,
        (false, None) => LandingState::NotQueued,
    };
    let waiting_for = position.map(|n| view.queue[n].waiting_for.clone()).unwrap_or_default();
    Ok(Some(Landing { into, state, position: position.map(|n| n + 1), waiting_for, failure }))
}
