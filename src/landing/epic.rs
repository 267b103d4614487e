//! An epic's integration branch (`loop.epicBranch`): an epic's children land on the epic's
//! own task branch (`loop/<epic>`) through the landing queue, checks and all, and the epic,
//! once done and holding every child's work, lands on the target like any other task.
//!
//! - The branch is made when the first child lands: from its parent epic's branch (epics
//!   nest), else from the target, as this landing reads it.
//! - A landing run lands children first, deepest epics first, each epic's branch under its
//!   own lander claim; an epic a run lands children of comes along to the target when it is
//!   done, though only its children were asked for.
//! - On the target's queue an epic waits for each child not cancelled whose work is not on
//!   its branch (one that failed to land there, one not done).
//! - A child's new task branch starts from its epic's branch (`start_after`), so it builds on
//!   its siblings' landed work.

use std::collections::HashSet;

use anyhow::Result;
use gix::ObjectId;

use super::{Lander, LanderClaim, Options, Report, LEASE};
use crate::backlog::Board;
use crate::context::Context;
use crate::ids::TaskId;
use crate::refs;
use crate::store::cas::{self, Cas, Expect};
use crate::store::index::Row;
use crate::store::task::{State, Task};
use crate::store::{remote, Store};

/// Whether `loop.epicBranch` is on; a bad value is off for readers (`status`), and refused by
/// the landing itself.
pub fn on(store: &Store) -> bool {
    store.settings().epic_branch().unwrap_or(false)
}

/// The branch `row` lands on when it is not the target: its parent's, when the parent is an
/// epic and `on`.
pub fn home(board: &Board, row: &Row, on: bool) -> Option<String> {
    let parent = row.parent().filter(|_| on)?;
    board.get(parent).filter(|p| p.epic).map(|_| format!("{}{parent}", refs::TASK_BRANCHES))
}

/// The task branches a new branch of `task` merges in when it is made: its dependencies', and
/// with `loop.epicBranch` its epic's (the siblings' landed work).
pub fn start_after(store: &Store, task: &Task) -> Vec<TaskId> {
    let mut deps: Vec<TaskId> = task.after.iter().filter_map(|d| d.parse().ok()).collect();
    if let Some(parent) = task.parent.as_deref().filter(|_| on(store)).and_then(|p| p.parse::<TaskId>().ok()) {
        let is_epic = crate::store::task::read(store, &parent).ok().flatten().is_some_and(|s| s.task.epic);
        if is_epic {
            deps.push(parent);
        }
    }
    deps
}

/// How deep `id` is in the tree (a top-level task is 0); a parent chain that loops stops.
fn depth(board: &Board, id: &str) -> usize {
    let mut seen = HashSet::new();
    let mut at = id;
    while let Some(parent) = board.get(at).and_then(|r| r.parent()) {
        if !seen.insert(parent) {
            break;
        }
        at = parent;
    }
    seen.len()
}

/// Land the done children of epics on their epics' branches, deepest epics first, into
/// `report`. `only` (the run's tasks; empty: every one): a child lands when it, or its epic, is
/// in it, and an epic done by then joins it. True when a branch moved.
pub(super) fn land_children(
    store: &Store,
    ctx: &Context,
    opts: &Options<'_>,
    target_tip: ObjectId,
    remote_name: Option<&String>,
    only: &mut Vec<TaskId>,
    report: &mut Report,
) -> Result<bool> {
    let board = Board::load(store, ctx)?;
    let asked = |id: &str| only.is_empty() || only.iter().any(|o| o.as_str() == id);
    let mut epics: Vec<(usize, String, Vec<TaskId>)> = Vec::new();
    for row in board.tasks.iter().filter(|r| r.epic) {
        let children: Vec<TaskId> = board
            .children(row.id())
            .into_iter()
            .filter(|c| c.state == State::Done && (asked(c.id()) || asked(row.id())))
            .filter_map(|c| c.id().parse().ok())
            .collect();
        if !children.is_empty() {
            epics.push((depth(&board, row.id()), row.id().to_owned(), children));
        }
    }
    epics.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut moved = false;
    for (_, epic, mut children) in epics {
        let branch = format!("{}{epic}", refs::TASK_BRANCHES);
        let short = refs::short_branch(&branch).to_owned();
        // A child epic that came along in this run lands on this one too.
        for id in only.iter() {
            if board.get(id.as_str()).and_then(|r| r.parent()) == Some(epic.as_str()) && !children.contains(id) {
                children.push(id.clone());
            }
        }
        let reason = format!("landing {epic}'s children on {short} (pid {})", ctx.pid);
        let claim = match LanderClaim::take(store, ctx, &branch, &opts.holder, reason, LEASE)? {
            Ok(claim) => claim,
            Err(other) => {
                report.notes.push(format!(
                    "{short} has another lander at work ({}): {epic}'s children land on it later",
                    other.record.holder
                ));
                continue;
            }
        };
        let base = match board.get(&epic).and_then(|r| r.parent()) {
            Some(parent) => branch_tip(store, remote_name, &format!("{}{parent}", refs::TASK_BRANCHES))?,
            None => None,
        };
        make_branch(store, remote_name, &branch, base.unwrap_or(target_tip))?;
        let mut lander = Lander::new(store, ctx, opts, branch.clone(), remote_name.cloned(), claim);
        lander.only = children;
        lander.read_tip()?;
        let result = lander.run();
        lander.drop_worktree();
        result?;
        moved |= !lander.report.landed.is_empty();
        for mut landed in lander.report.landed {
            landed.on = Some(short.clone());
            report.landed.push(landed);
        }
        for mut failed in lander.report.failed {
            failed.on = Some(short.clone());
            report.failed.push(failed);
        }
        report.notes.extend(lander.report.notes);
        // The epic comes along to the target (or its own epic's branch) once it is done.
        if !only.is_empty() && !only.iter().any(|o| o.as_str() == epic) {
            let done = crate::store::task::read(store, &epic.parse()?)?.is_some_and(|s| s.task.state == State::Done);
            if done {
                only.push(epic.parse()?);
            }
        }
    }
    Ok(moved)
}

/// Each epic's branch (full ref name) with the done children waiting to land on it, with
/// `loop.epicBranch`: epics with a done child whose work is not on the branch as this clone
/// knows it.
pub fn queues(store: &Store, ctx: &Context) -> Result<Vec<(String, Vec<super::Queued>)>> {
    if !on(store) {
        return Ok(Vec::new());
    }
    let board = Board::load(store, ctx)?;
    let heads = super::Heads::list(store)?;
    let mut out = Vec::new();
    for row in board.tasks.iter().filter(|r| r.epic) {
        let mut done = Vec::new();
        for child in board.children(row.id()).into_iter().filter(|c| c.state == State::Done) {
            done.extend(heads.of(store, child.id())?);
        }
        if done.is_empty() {
            continue;
        }
        let branch = format!("{}{}", refs::TASK_BRANCHES, row.id());
        let tip = super::known_tip(store, &branch)?;
        let on_branch = match tip {
            Some(tip) => store.contained_in(tip, &done)?,
            None => HashSet::new(),
        };
        if done.iter().all(|h| on_branch.contains(h)) {
            continue;
        }
        let queue = super::queue_of(store, &board, &heads, &branch, tip, &[], super::Seen::Synced)?;
        if !queue.is_empty() {
            out.push((branch, queue));
        }
    }
    Ok(out)
}

/// A branch's commit where the landing reads it: the remote's, else the local one.
fn branch_tip(store: &Store, remote_name: Option<&String>, branch: &str) -> Result<Option<ObjectId>> {
    match remote_name {
        Some(remote_name) => remote::read_branch(store, remote_name, branch),
        None => store.ref_target(branch),
    }
}

/// Make the epic's branch at `base` where the landing reads it, unless it is there.
fn make_branch(store: &Store, remote_name: Option<&String>, branch: &str, base: ObjectId) -> Result<()> {
    if branch_tip(store, remote_name, branch)?.is_some() {
        return Ok(());
    }
    // Made by another lander meanwhile: theirs stands (the landing reads it next).
    let _: Cas = match remote_name {
        Some(remote_name) => remote::push_branch(store, remote_name, branch, Expect::Absent, base)?,
        None => cas::update(store, branch, Expect::Absent, base, "loop: make the epic's branch")?,
    };
    Ok(())
}
