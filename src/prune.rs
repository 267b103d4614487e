//! Pruning the branches of finished tasks (`git loop prune`): the task branch `loop/<id>` and
//! the try branches `loop-try/<id>/<n>` of tasks that are done or cancelled, once nothing
//! needs them to find their work.
//!
//! - A branch of a task that is not finished (open, running, waiting for a person, parked) is
//!   never touched, nor one checked out in any worktree.
//! - A branch whose head is in the landing target (its work landed; `Seen::Synced`, as `status`
//!   judges it), or a try branch whose head is in its task branch (its work was accepted), is
//!   pruned.
//! - Any other — a done task's work not landed yet, a cancelled task's work, a try that lost a
//!   race or was never accepted — holds work found nowhere else on a branch: it is kept, and
//!   said, unless `unlanded` asks for it too. Its commits stay reachable all the same, from the
//!   try anchors (`refs/loop/tries/<id>/<n>`) and the done anchor (`refs/loop/done/<id>`).
//! - Each deletion is a compare-and-swap against the head judged (a branch moved meanwhile is
//!   kept); a dry run judges and deletes nothing. What is pruned is remembered
//!   (`store::pruned`), so that a sync does not bring it back from the remote.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Result;
use gix::ObjectId;

use crate::backlog::Board;
use crate::context::Context;
use crate::ids::TaskId;
use crate::refs;
use crate::store::cas::{self, Cas};
use crate::store::task::State;
use crate::store::Store;
use crate::tries;

/// How to prune.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Judge only: delete nothing.
    pub dry_run: bool,
    /// Prune branches whose work is on no other branch too (their commits stay anchored).
    pub unlanded: bool,
}

/// What became of one branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Deleted (or, in a dry run, would be): why it was not needed.
    Pruned(String),
    /// Kept: its work is on no other branch (`unlanded` prunes it), and where it is.
    Unlanded(String),
    /// Kept: it is checked out in this worktree.
    CheckedOut(PathBuf),
    /// Kept: it moved while it was judged.
    Moved,
}

/// One branch judged.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The branch's short name.
    pub branch: String,
    pub task: String,
    pub head: ObjectId,
    pub verdict: Verdict,
}

/// What a prune did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The target landed work is looked for on (short name), if there is one.
    pub into: Option<String>,
    pub dry_run: bool,
    /// Every branch of a finished task, judged.
    pub branches: Vec<Judged>,
}

/// Prune the branches of finished tasks (see the module's note).
pub fn prune(store: &Store, ctx: &Context, opts: Options) -> Result<Report> {
    let board = Board::load(store, ctx)?;
    let target = crate::landing::target(store, None).ok();
    let tip = match &target {
        Some(target) => crate::landing::known_tip(store, target)?,
        None => None,
    };
    let list = |prefix: &str| store.direct_refs(prefix);
    let finished = |id: &str| board.get(id).is_some_and(|r| matches!(r.state, State::Done | State::Cancelled));
    // (full name, task, head, is a task branch)
    let mut candidates: Vec<(String, String, ObjectId, bool)> = Vec::new();
    for (name, head) in list(refs::TASK_BRANCHES)? {
        let id = name[refs::TASK_BRANCHES.len()..].to_owned();
        if finished(&id) {
            candidates.push((name, id, head, true));
        }
    }
    let task_heads: HashMap<String, ObjectId> = candidates.iter().map(|(_, id, head, _)| (id.clone(), *head)).collect();
    for (name, head) in list(refs::TRY_BRANCHES)? {
        let Some((id, _number)) = name[refs::TRY_BRANCHES.len()..].rsplit_once('/') else { continue };
        if finished(id) {
            candidates.push((name.clone(), id.to_owned(), head, false));
        }
    }
    let in_tip = match tip {
        Some(tip) => store.contained_in(tip, &candidates.iter().map(|c| c.2).collect::<Vec<_>>())?,
        None => Default::default(),
    };
    let into = target.as_deref().map(|t| refs::short_branch(t).to_owned());
    let mut report = Report { into: into.clone(), dry_run: opts.dry_run, branches: Vec::new() };
    let mut pruned = Vec::new();
    for (name, task, head, is_task_branch) in candidates {
        let on = into.as_deref().unwrap_or("the target");
        let landed =
            in_tip.contains(&head) || (is_task_branch && landed_by_note(store, &board, &task, target.as_deref())?);
        let accepted = !is_task_branch
            && match task_heads.get(&task) {
                Some(task_head) => store.is_ancestor(head, *task_head)?,
                None => false,
            };
        let state = board.get(&task).map(|r| r.state);
        let needless = if landed {
            Some(format!("its work is on {on}"))
        } else if accepted {
            Some(format!("its work is on {}", refs::short_branch(&refs::task_branch(&task.parse::<TaskId>()?))))
        } else {
            None
        };
        let verdict = match (needless, tries::checked_out_in(store, &name)?) {
            (_, Some(path)) => Verdict::CheckedOut(path),
            (Some(why), None) => Verdict::Pruned(why),
            (None, None) => {
                let why = match (is_task_branch, state) {
                    (true, Some(State::Cancelled)) => format!("its task was cancelled with work not on {on}"),
                    (true, _) => format!("its work is not on {on} yet (git loop land)"),
                    (false, _) => "its work is on no other branch (a try never accepted)".to_owned(),
                };
                if opts.unlanded && anchored(store, &task, &name, head)? {
                    Verdict::Pruned(format!("{why}; its commits stay anchored"))
                } else if opts.unlanded {
                    Verdict::Unlanded(format!(
                        "{why}, and no anchor holds its commits: delete it by hand if you mean to"
                    ))
                } else {
                    Verdict::Unlanded(why)
                }
            }
        };
        let verdict = match verdict {
            Verdict::Pruned(why) if !opts.dry_run => match cas::delete(store, &name, head)? {
                Cas::Applied => {
                    pruned.push((name.clone(), head));
                    Verdict::Pruned(why)
                }
                Cas::Lost { .. } => Verdict::Moved,
            },
            other => other,
        };
        report.branches.push(Judged { branch: refs::short_branch(&name).to_owned(), task, head, verdict });
    }
    crate::store::pruned::add(store, &pruned)?;
    Ok(report)
}

/// Whether the loop's anchors keep `head` (the head of branch `name`, of task `task`) reachable
/// without the branch: the try's anchor for a try branch, the done anchor for a task branch.
fn anchored(store: &Store, task: &str, name: &str, head: ObjectId) -> Result<bool> {
    let id: TaskId = task.parse()?;
    let anchor = match name.strip_prefix(refs::TRY_BRANCHES).and_then(|rest| rest.rsplit_once('/')) {
        Some((_, number)) => match number.parse::<u32>() {
            Ok(n) => refs::try_anchor(&id, n),
            Err(_) => return Ok(false),
        },
        None => refs::done_anchor(&id),
    };
    match store.ref_target(&anchor)? {
        // A try anchor holds its number's record (a blob) until the try has a commit.
        Some(kept) if store.object_kind(kept) == Ok(gix::object::Kind::Commit) => store.is_ancestor(head, kept),
        _ => Ok(false),
    }
}

/// Whether task `task`'s completion note says it landed on `target` (another clone landed it
/// on a target this clone has not fetched since).
fn landed_by_note(store: &Store, board: &Board, task: &str, target: Option<&str>) -> Result<bool> {
    let (Some(target), Some(row)) = (target, board.get(task)) else { return Ok(false) };
    if row.state != State::Done {
        return Ok(false);
    }
    crate::landing::noted_landed(store, &row.task()?, target)
}

/// What a fold retires (`store::fold::plan`), with the folded tasks' branches where nothing
/// needs them as branches any more: what a prune would delete (the work landed, or is in its
/// task branch), and a cancelled task's (its heads become the fold's parents, so nothing of
/// them is lost). One checked out, or a done task's work not landed yet, stays.
pub fn plan_fold(
    store: &Store,
    ctx: &Context,
    before: chrono::DateTime<chrono::Utc>,
) -> Result<crate::store::fold::Plan> {
    let mut plan = crate::store::fold::plan(store, before)?;
    if plan.tasks.is_empty() {
        return Ok(plan);
    }
    let board = Board::load(store, ctx)?;
    let folding: std::collections::HashSet<&str> = plan.tasks.iter().map(String::as_str).collect();
    let judged = prune(store, ctx, Options { dry_run: true, unlanded: false })?;
    for branch in judged.branches.iter().filter(|b| folding.contains(b.task.as_str())) {
        let cancelled = board.get(&branch.task).is_some_and(|r| r.state == State::Cancelled);
        let fold = match &branch.verdict {
            Verdict::Pruned(_) => true,
            Verdict::Unlanded(_) => cancelled,
            _ => false,
        };
        if fold {
            plan.refs.insert(format!("refs/heads/{}", branch.branch), branch.head);
        }
    }
    Ok(plan)
}
