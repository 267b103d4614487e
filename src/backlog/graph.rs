//! The task graph beyond dependencies: parents, epics and links (docs/storage.md, "Tasks").
//!
//! A task may have a parent (`add --parent`, `edit --parent`, an import's `parent-child`). The
//! parent becomes an epic first, then the child names it: an epic is never handed to an agent
//! (`store::ready`), and it is done when every child is finished — done or cancelled, at least
//! one done — with its children listed as the evidence (`settle`, called whenever a child is
//! done or cancelled or leaves it). Parents never make a cycle: a new parent is refused when
//! the task is one of its ancestors. Links (`related:t-…`, `discovered-from:t-…`) are kept and
//! shown, never acted on.

use std::collections::HashMap;

use anyhow::Result;

use super::{record, refused, resolve, Board, DoneOptions};
use crate::context::Context;
use crate::error::{usage, Refusal};
use crate::ids::TaskId;
use crate::store::events::{self, Recorded};
use crate::store::task::{self, Change, Fields, State, Task};
use crate::store::Store;

/// The longest link kind and target.
const KIND_MAX: usize = 40;
const TARGET_MAX: usize = 200;

/// Check a link `<kind>:<target>`: a kind of lowercase letters, digits, `-` and `_`; a target
/// without spaces or control characters (a task id here, or anything naming one elsewhere).
pub fn check_link(link: &str) -> Result<String, Refusal> {
    let bad = |why: &str| {
        usage(format!("link '{}' is not valid: {why}", link.escape_debug()))
            .hint("a link is <kind>:<target>, e.g. related:t-4f2a9k3m or discovered-from:t-8k2m1x0a")
    };
    let Some((kind, target)) = link.split_once(':') else { return Err(bad("it has no ':'")) };
    let kind_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if kind.is_empty() || kind.len() > KIND_MAX || !kind.chars().all(kind_ok) {
        return Err(bad("its kind is 1 to 40 lowercase letters, digits, '-' or '_'"));
    }
    if target.is_empty() || target.len() > TARGET_MAX || target.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("its target is 1 to 200 characters, without spaces"));
    }
    Ok(format!("{kind}:{target}"))
}

/// Check links given on the command line; a target that is a unique prefix of a task here is
/// written out in full.
pub fn check_links(store: &Store, links: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for link in links {
        let link = check_link(link)?;
        let (kind, target) = link.split_once(':').expect("checked");
        let target = match resolve(store, target) {
            Ok(id) => id.to_string(),
            Err(_) => target.to_owned(),
        };
        let full = format!("{kind}:{target}");
        if !out.contains(&full) {
            out.push(full);
        }
    }
    Ok(out)
}

/// The parent a task may be added under: an existing task that is not finished (a child under
/// a done or cancelled task would never be worked), and that no walk is working on as a task.
pub fn check_parent(store: &Store, ctx: &Context, given: &str) -> Result<TaskId> {
    let id = resolve(store, given)?;
    let Some(parent) = task::read(store, &id)? else {
        return Err(usage(format!("task '{id}' does not exist")).into());
    };
    if matches!(parent.task.state, State::Done | State::Cancelled) {
        return Err(refused(format!(
            "task '{id}' is {}: a child under it would never be worked",
            parent.task.state.as_str()
        ))
        .hint(format!("reopen it first: git loop reopen {id}"))
        .into());
    }
    if !parent.task.epic {
        let board = Board::load(store, ctx)?;
        if board.shown_state(id.as_str(), parent.task.state) == "running" {
            return Err(refused(format!("a walk is working on task '{id}' itself; it cannot become a parent now"))
                .hint(format!("stop its session first (git loop stop {id}), or add the child when it finishes"))
                .into());
        }
    }
    Ok(id)
}

/// `check_parent` for a task that exists: not itself, and not one of its own descendants
/// (which would make a cycle, named).
pub fn check_new_parent(store: &Store, ctx: &Context, id: &TaskId, given: &str) -> Result<TaskId> {
    let parent = check_parent(store, ctx, given)?;
    if parent == *id {
        return Err(usage(format!("task '{id}' cannot be its own parent")).into());
    }
    let board = Board::load(store, ctx)?;
    let mut chain = vec![parent.to_string()];
    while let Some(up) = board.get(chain.last().expect("never empty")).and_then(|r| r.parent()) {
        if chain.iter().any(|c| c == up) {
            break;
        }
        chain.push(up.to_owned());
        if up == id.as_str() {
            chain.reverse();
            return Err(usage(format!(
                "'{parent}' is part of '{id}' already ({}); making it the parent would make a cycle",
                chain.join(" → ")
            ))
            .hint(format!("take '{parent}' out first: git loop edit {parent} --no-parent"))
            .into());
        }
    }
    Ok(parent)
}

/// Mark `id` an epic, unless it is one already.
pub fn make_epic(store: &Store, ctx: &Context, id: &TaskId) -> Result<()> {
    let Some(current) = task::read(store, id)? else {
        return Err(usage(format!("task '{id}' does not exist")).into());
    };
    if current.task.epic {
        return Ok(());
    }
    let change = Change { set: Fields { epic: Some(true), ..Default::default() }, ..Default::default() };
    task::update(store, ctx, id, change, &|t: &Task| match t.state {
        State::Done | State::Cancelled => Err(refused(format!("task '{id}' is {} now", t.state.as_str()))),
        _ => Ok(()),
    })?;
    record(store, ctx, Some(id), Recorded::TaskEdited(events::TaskEdited {}))
}

/// Refuse to unmark an epic that has children.
pub fn check_not_epic(store: &Store, ctx: &Context, id: &TaskId) -> Result<()> {
    let board = Board::load(store, ctx)?;
    let children = board.children(id.as_str());
    if let Some(first) = children.first() {
        return Err(refused(format!(
            "task '{id}' has {} children; it stays an epic while it has them",
            children.len()
        ))
        .hint(format!("move them out first: git loop edit {} --no-parent", first.id()))
        .into());
    }
    Ok(())
}

/// Mark `parent` done if it is open and every child of it is finished (done or cancelled, at
/// least one done), its children listed as the evidence; its own parent is settled in turn
/// (by `done`). Several clones settling at once: the first record lands, the others find it
/// done and write nothing.
pub fn settle(store: &Store, ctx: &Context, parent: &str) -> Result<()> {
    let Ok(id) = parent.parse::<TaskId>() else { return Ok(()) };
    let board = Board::load(store, ctx)?;
    if board.get(parent).is_none_or(|r| r.state != State::Open) {
        return Ok(());
    }
    let children = board.children(parent);
    let finished = |s: State| matches!(s, State::Done | State::Cancelled);
    if children.is_empty() || !children.iter().all(|c| finished(c.state)) {
        return Ok(());
    }
    let done: Vec<&str> = children.iter().filter(|c| c.state == State::Done).map(|c| c.id()).collect();
    if done.is_empty() {
        return Ok(());
    }
    let cancelled: Vec<&str> = children.iter().filter(|c| c.state == State::Cancelled).map(|c| c.id()).collect();
    let mut message = format!("all its children are finished: done {}", done.join(", "));
    if !cancelled.is_empty() {
        message.push_str(&format!("; cancelled {}", cancelled.join(", ")));
    }
    let opts = DoneOptions {
        message: Some(message),
        children: children.iter().map(|c| c.id().to_owned()).collect(),
        ..DoneOptions::default()
    };
    let open = |t: &Task| -> Result<(), Refusal> {
        match t.state {
            State::Open => Ok(()),
            other => Err(refused(format!("task '{}' is {} already", t.id, other.as_str()))),
        }
    };
    match super::done_if(store, ctx, &id, opts, &open) {
        Ok(_) => Ok(()),
        // Settled by another clone or process meanwhile.
        Err(err) if crate::error::find_refusal(&err).is_some() => Ok(()),
        Err(err) => Err(err),
    }
}

/// A child of `parent` was reopened: an epic its children made done is open again (and its
/// own parent in turn, by the reopen). One a person marked done stays done.
pub fn unsettle(store: &Store, ctx: &Context, parent: &str, child: &TaskId) -> Result<()> {
    let Ok(id) = parent.parse::<TaskId>() else { return Ok(()) };
    let Some(current) = task::read(store, &id)? else { return Ok(()) };
    let settled =
        current.task.state == State::Done && current.task.completion.as_ref().is_some_and(|c| !c.children.is_empty());
    if !settled {
        return Ok(());
    }
    let reason = Some(format!("its child {child} was reopened"));
    match super::set_state(store, ctx, &id, State::Open, reason) {
        Ok(_) => Ok(()),
        // Reopened by another clone or process meanwhile.
        Err(err) if crate::error::find_refusal(&err).is_some() => Ok(()),
        Err(err) => Err(err),
    }
}

impl Board {
    /// The tasks whose parent is `id`, by id. The first call groups every task under its
    /// parent (one pass); the others look it up.
    pub fn children(&self, id: &str) -> Vec<&crate::store::index::Row> {
        let by_parent = self.by_parent.get_or_init(|| {
            let mut out: HashMap<String, Vec<usize>> = HashMap::new();
            for (at, row) in self.tasks.iter().enumerate() {
                if let Some(parent) = row.parent() {
                    out.entry(parent.to_owned()).or_default().push(at);
                }
            }
            out
        });
        by_parent.get(id).map_or_else(Vec::new, |at| at.iter().map(|&i| &self.tasks[i]).collect())
    }

    /// How far epic `id` is.
    pub fn progress(&self, id: &str) -> Progress {
        Progress::of(&self.children(id))
    }
}

/// How far an epic is: children done of children counted (cancelled ones apart).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
    pub cancelled: usize,
}

impl Progress {
    /// The progress of an epic with these children.
    pub fn of(children: &[&crate::store::index::Row]) -> Progress {
        let mut p = Progress::default();
        for child in children {
            match child.state {
                State::Cancelled => p.cancelled += 1,
                State::Done => {
                    p.done += 1;
                    p.total += 1;
                }
                _ => p.total += 1,
            }
        }
        p
    }
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.done, self.total)
    }
}
