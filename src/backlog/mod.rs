//! The backlog verbs: add, edit, state changes, the board and `next`. They compose the store's
//! records into what a person or an agent asks for, and never print.

pub mod export;
pub mod foreign;
pub mod graph;
pub mod import;

use std::collections::HashMap;

use anyhow::Result;
use chrono::{DateTime, Utc};
use gix::ObjectId;

use crate::context::Context;
use crate::error::{refused, usage, Refusal};
use crate::ids::{ClaimKey, Priority, TaskId, WriterId};
use crate::refs;
use crate::store::claim::{self, Held};
use crate::store::events::{self, Recorded};
use crate::store::index::{ClaimRow, Row};
use crate::store::journal::{self, NewEvent};
use crate::store::lease::{self, Lease};
use crate::store::task::{self, Change, Completion, Create, Fields, Lists, Snapshot, State, StateChange, Task};
use crate::store::watch::Watch;
use crate::store::{clone_writer, index, notes, Store};

/// Find the task a user means: an exact id, or a unique prefix of one (with or without
/// the `t-`).
pub fn resolve(store: &Store, given: &str) -> Result<TaskId> {
    if let Ok(id) = given.parse::<TaskId>() {
        // An unreadable ref still names the task: let the reader report it as corrupt. A folded
        // task is found in the archive, without listing every task.
        if task::tip_of(store, &refs::task(&id)).map_or(true, |tip| tip.is_some()) {
            return Ok(id);
        }
    }
    let mut matches: Vec<String> = task::list_refs(store)?
        .into_iter()
        .filter_map(|r| refs::task_id_of(&r.name).map(ToOwned::to_owned))
        .filter(|id| {
            !given.is_empty() && (id.starts_with(given) || id.strip_prefix("t-").is_some_and(|s| s.starts_with(given)))
        })
        .collect();
    matches.sort();
    match matches.len() {
        0 => Err(usage(format!("no task matches '{}'", given.escape_debug()))
            .hint("list tasks with 'git loop list'")
            .into()),
        1 => Ok(matches.remove(0).parse()?),
        n => Err(usage(format!(
            "'{}' matches {n} tasks: {}{}",
            given.escape_debug(),
            matches.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
            if n > 5 { format!(" and {} more", n - 5) } else { String::new() }
        ))
        .hint("type more of the id")
        .into()),
    }
}

/// The journal writer for this invocation: the agent session when run inside one, else one
/// of this clone's shards.
pub fn writer(store: &Store, ctx: &Context) -> Result<WriterId> {
    if let Some(session) = &ctx.session.session {
        if let Ok(writer) = session.parse() {
            return Ok(writer);
        }
    }
    clone_writer(store, ctx)
}

/// Journal an event, attributing it to this invocation's writer.
pub fn record(store: &Store, ctx: &Context, task: Option<&TaskId>, event: Recorded) -> Result<()> {
    let (kind, data) = event.into_parts();
    let event = NewEvent { kind, task: task.map(ToString::to_string), session: ctx.session.session.clone(), data };
    journal::append(store, ctx, &writer(store, ctx)?, event)?;
    Ok(())
}

/// Journal several events at once (one move of the writer's chain), as `record` does each.
pub fn record_all(store: &Store, ctx: &Context, events: Vec<(Option<&TaskId>, Recorded)>) -> Result<()> {
    let new = events
        .into_iter()
        .map(|(task, event)| {
            let (kind, data) = event.into_parts();
            NewEvent { kind, task: task.map(ToString::to_string), session: ctx.session.session.clone(), data }
        })
        .collect();
    journal::append_all(store, ctx, &writer(store, ctx)?, new)?;
    Ok(())
}

/// The fields `add` and `edit` take.
#[derive(Debug, Clone, Default)]
pub struct TaskFields {
    pub title: Option<String>,
    pub body: Option<String>,
    pub priority: Option<Priority>,
    pub after: Vec<String>,
    pub labels: Vec<String>,
    pub agents: Vec<String>,
    pub together: Vec<String>,
    pub pick: Option<String>,
    pub fallback: Vec<String>,
    pub forbid: Vec<String>,
    pub reviewers: Vec<String>,
    /// The task this one is part of (an id or a unique prefix).
    pub parent: Option<String>,
    /// Make it an epic (`Some(true)`), or not.
    pub epic: Option<bool>,
    /// Links `<kind>:<target>` (`graph::check_link`).
    pub links: Vec<String>,
}

/// Check a label or agent name given on the command line.
fn check_word(what: &str, value: &str) -> Result<(), Refusal> {
    if value.trim().is_empty() || value.len() > 100 || value.chars().any(|c| c.is_control() || c == ',') {
        return Err(usage(format!("{what} '{}' is not valid", value.escape_debug())).hint(format!(
            "{} {what} is 1 to 100 characters, without commas or control characters",
            if what.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
        )));
    }
    Ok(())
}

/// Check an agent name given on the command line.
pub fn check_agent_name(name: &str) -> Result<(), Refusal> {
    check_word("agent", name)
}

fn check_pick(pick: &str) -> Result<(), Refusal> {
    if matches!(pick, "first" | "judge" | "") {
        Ok(())
    } else {
        Err(usage(format!("pick mode '{}' is not valid", pick.escape_debug())).hint("use 'first' or 'judge'"))
    }
}

/// Resolve dependency ids (unique prefixes allowed) to existing tasks.
/// Each dependency as given: a task here (`resolve`), or one of another repository, read there
/// (`foreign::check`).
fn resolve_all(store: &Store, given: &[String]) -> Result<Vec<String>> {
    given
        .iter()
        .map(|g| match foreign::is_foreign(g) {
            true => foreign::check(store, g),
            false => resolve(store, g).map(|id| id.to_string()),
        })
        .collect()
}

/// Add a task; returns it as stored.
pub fn add(store: &Store, ctx: &Context, fields: TaskFields) -> Result<Snapshot> {
    let title = fields.title.clone().unwrap_or_default();
    if title.trim().is_empty() {
        return Err(usage("a task needs a title").hint("git loop add \"Write the parser\"").into());
    }
    let change = creation_change(store, ctx, &fields)?;
    // The parent becomes an epic before its first child exists: killed in between, it is an
    // epic with no children yet, never a parent an agent could be sent to.
    if let Some(parent) = &change.set.parent {
        graph::make_epic(store, ctx, &parent.parse()?)?;
    }
    for _ in 0..16 {
        let id = TaskId::generate();
        if let task::Created::Stored(snapshot) = task::create(store, ctx, &id, change.clone())? {
            record(
                store,
                ctx,
                Some(&id),
                Recorded::TaskAdded(events::TaskAdded { title: snapshot.task.title.clone() }),
            )?;
            return Ok(*snapshot);
        }
    }
    anyhow::bail!("could not find a free task id after 16 attempts")
}

/// The creating operation for `fields` (dependencies resolved and checked).
pub(crate) fn creation_change(store: &Store, ctx: &Context, fields: &TaskFields) -> Result<Change> {
    for label in &fields.labels {
        check_word("label", label)?;
    }
    for agent in fields.agents.iter().chain(&fields.together).chain(&fields.fallback).chain(&fields.forbid) {
        check_word("agent", agent)?;
    }
    for reviewer in &fields.reviewers {
        check_word("reviewer", reviewer)?;
    }
    if let Some(pick) = &fields.pick {
        check_pick(pick)?;
    }
    let links = graph::check_links(store, &fields.links)?;
    let parent = match &fields.parent {
        Some(given) => Some(graph::check_parent(store, ctx, given)?.to_string()),
        None => None,
    };
    Ok(Change {
        create: Some(Create { origin: None, created_at: None }),
        set: Fields {
            title: fields.title.clone(),
            body: Some(fields.body.clone().unwrap_or_default()),
            priority: Some(fields.priority.unwrap_or_default()),
            pick: fields.pick.clone(),
            assigned: None,
            parent,
            epic: fields.epic.filter(|e| *e),
        },
        add: Lists {
            after: resolve_all(store, &fields.after)?,
            labels: fields.labels.clone(),
            agents: fields.agents.clone(),
            together: fields.together.clone(),
            fallback: fields.fallback.clone(),
            forbid: fields.forbid.clone(),
            reviewers: fields.reviewers.clone(),
            links,
        },
        ..Default::default()
    })
}

/// What `edit` removes, besides what it sets and adds.
#[derive(Debug, Clone, Default)]
pub struct Removals {
    pub after: Vec<String>,
    pub labels: Vec<String>,
    pub agents: Vec<String>,
    pub together: Vec<String>,
    pub fallback: Vec<String>,
    pub forbid: Vec<String>,
    pub reviewers: Vec<String>,
    pub links: Vec<String>,
    /// Take the task out of its parent.
    pub parent: bool,
}

/// Edit a task's fields.
pub fn edit(store: &Store, ctx: &Context, id: &TaskId, fields: TaskFields, remove: Removals) -> Result<Snapshot> {
    if let Some(title) = &fields.title {
        if title.trim().is_empty() {
            return Err(usage("a task's title cannot be empty").into());
        }
    }
    for label in &fields.labels {
        check_word("label", label)?;
    }
    for agent in fields.agents.iter().chain(&fields.together).chain(&fields.fallback).chain(&fields.forbid) {
        check_word("agent", agent)?;
    }
    for reviewer in &fields.reviewers {
        check_word("reviewer", reviewer)?;
    }
    if let Some(pick) = &fields.pick {
        check_pick(pick)?;
    }
    let links = graph::check_links(store, &fields.links)?;
    let current = task::read(store, id)?.map(|s| s.task);
    let (had_parent, was_epic) = current.as_ref().map_or((false, false), |t| (t.parent.is_some(), t.epic));
    // What would change nothing is not written: an operation that sets a parent or the epic
    // mark is written at version 2, which clones of an earlier release refuse.
    let mut fields = fields;
    fields.epic = fields.epic.filter(|e| *e != was_epic);
    let parent = match (&fields.parent, remove.parent) {
        (Some(_), true) => {
            return Err(usage("--parent and --no-parent contradict each other").hint("give one of them").into())
        }
        (Some(given), false) => Some(graph::check_new_parent(store, ctx, id, given)?.to_string()),
        (None, true) if had_parent => Some(String::new()),
        (None, _) => None,
    };
    if fields.epic == Some(false) {
        graph::check_not_epic(store, ctx, id)?;
    }
    let after = resolve_all(store, &fields.after)?;
    if after.iter().any(|a| a == id.as_str()) {
        return Err(usage(format!("task '{id}' cannot depend on itself")).into());
    }
    // Refuse a dependency that would close a cycle.
    if !after.is_empty() {
        let board = Board::load(store, ctx)?;
        for dep in &after {
            if let Some(path) = board.dependency_path(dep, id.as_str()) {
                return Err(usage(format!(
                    "'{dep}' already depends on '{id}'; adding it would make a cycle: {id} → {}",
                    path.join(" → ")
                ))
                .into());
            }
            foreign::check_cycle(store, &board, id.as_str(), dep)?;
        }
    }
    let change = Change {
        set: Fields {
            title: fields.title,
            body: fields.body,
            priority: fields.priority,
            pick: fields.pick,
            assigned: None,
            parent: parent.clone(),
            epic: fields.epic,
        },
        add: Lists {
            after,
            labels: fields.labels,
            agents: fields.agents,
            together: fields.together,
            fallback: fields.fallback,
            forbid: fields.forbid,
            reviewers: fields.reviewers,
            links,
        },
        remove: Lists {
            after: remove.after,
            labels: remove.labels,
            agents: remove.agents,
            together: remove.together,
            fallback: remove.fallback,
            forbid: remove.forbid,
            reviewers: remove.reviewers,
            links: remove.links,
        },
        ..Default::default()
    };
    if change.is_empty() {
        return Err(usage(format!("nothing to change in task '{id}'"))
            .hint("give at least one option, e.g. -p p1 or --label bug")
            .into());
    }
    if let Some(parent) = parent.as_deref().filter(|p| !p.is_empty()) {
        graph::make_epic(store, ctx, &parent.parse()?)?;
    }
    let before = current.and_then(|t| t.parent);
    let snapshot = task::update(store, ctx, id, change, &|_| Ok(()))?;
    record(store, ctx, Some(id), Recorded::TaskEdited(events::TaskEdited {}))?;
    // The parent it left may have only finished children now; the one it joined, if it is
    // finished itself, is not open to it (`check_new_parent`).
    if let Some(left) = before.filter(|b| snapshot.task.parent.as_ref() != Some(b)) {
        graph::settle(store, ctx, &left)?;
    }
    Ok(snapshot)
}

/// Evidence for `done`.
#[derive(Debug, Clone, Default)]
pub struct DoneOptions {
    /// A revision naming the completing commit; defaults to the task branch's head.
    pub commit: Option<String>,
    pub message: Option<String>,
    pub try_number: Option<u32>,
    pub checks: Option<serde_json::Value>,
    /// The reviews that approved the work (the walk's review rounds).
    pub reviews: Vec<crate::store::task::Approval>,
    /// Done on the agent's word alone: the walk had no checks to run.
    pub unchecked: bool,
    /// What the task's sessions spent, when the caller keeps its history (a walk does): else
    /// it is added up from the journal, which lists every chain.
    pub spent: Option<crate::store::usage::Total>,
    /// An epic's children, its evidence (`graph::settle`).
    pub children: Vec<String>,
}

/// Mark a task done, with a completion note on the commit that completed it. A task done
/// already is done again with the new evidence (the walk's way: it only completes tasks it
/// holds the claim of); a person's word goes through `mark_done`, which refuses that.
pub fn done(store: &Store, ctx: &Context, id: &TaskId, opts: DoneOptions) -> Result<Snapshot> {
    done_with(store, ctx, id, opts, None).map(|(snapshot, _)| snapshot)
}

/// `done`, only if `check` allows it against the task as it is when the record is written.
/// Of several callers racing, the one whose record lands writes the evidence; the others
/// write nothing.
pub fn done_if(
    store: &Store,
    ctx: &Context,
    id: &TaskId,
    opts: DoneOptions,
    check: task::Precondition<'_>,
) -> Result<Snapshot> {
    done_with(store, ctx, id, opts, Some(check)).map(|(snapshot, _)| snapshot)
}

/// What a person's `done` does with a task that is done already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redo {
    /// Refuse: evidence is never replaced without being asked to.
    Refuse,
    /// Record the new evidence as a new operation: the old stays in the record's history
    /// (`git log refs/loop/tasks/<id>`), and in the note on its commit.
    Amend,
}

/// What a person's `done` recorded.
pub struct Marked {
    pub snapshot: Snapshot,
    /// The evidence an amendment replaced.
    pub replaced: Option<Completion>,
    /// The same `done` had been recorded already: only what it had left unwritten was written.
    pub again: bool,
}

/// Mark a task done by a person's word. A task done already is refused (exit 1) unless
/// `Redo::Amend`; amending a task that is not done is refused too (there is nothing to amend).
/// Decided against the record as it is when the new operation is written, so of a `done` and
/// an amendment racing, each sees the other.
pub fn mark_done(store: &Store, ctx: &Context, id: &TaskId, opts: DoneOptions, redo: Redo) -> Result<Marked> {
    let check = |t: &Task| -> Result<(), Refusal> {
        match (t.state, redo) {
            (State::Done, Redo::Refuse) => {
                let at = t
                    .completion
                    .as_ref()
                    .and_then(|c| c.commit.as_deref())
                    .map(|c| format!(" at {}", &c[..c.len().min(12)]));
                Err(refused(format!("task '{}' is done already{}", t.id, at.unwrap_or_default())).hint(format!(
                    "to replace its evidence (the old stays in its history): git loop done {} --amend",
                    t.id
                )))
            }
            (State::Done, Redo::Amend) | (_, Redo::Refuse) => Ok(()),
            (state, Redo::Amend) => {
                Err(refused(format!("task '{}' is {}, not done: there is no evidence to amend", t.id, state.as_str()))
                    .hint(format!("mark it done without --amend: git loop done {}", t.id)))
            }
        }
    };
    if redo == Redo::Refuse {
        if let Some(snapshot) = done_again(store, id, &opts)? {
            return Ok(Marked { snapshot, replaced: None, again: true });
        }
    }
    let (snapshot, replaced) = done_with(store, ctx, id, opts, Some(&check))?;
    Ok(Marked { snapshot, replaced, again: false })
}

/// The entry a completion note holds for `task` (titled `title`) completed by `commit`.
fn completed(
    store: &Store,
    task: &TaskId,
    title: &str,
    commit: ObjectId,
    done: &Completion,
    spent: Option<&crate::store::usage::Total>,
) -> Result<notes::Completed> {
    let cost = match spent {
        Some(spent) => spent.clone(),
        None => crate::store::ledger::task_total(store, task.as_str())?,
    };
    Ok(notes::Completed {
        task: task.to_string(),
        title: title.to_owned(),
        state: "done".into(),
        commit: commit.to_string(),
        session: done.session.clone(),
        try_number: done.try_number,
        checks: done.checks.clone(),
        message: done.message.clone(),
        reviews: done.reviews.clone(),
        at: done.at,
        by: done.by.clone(),
        landed: None,
        cost: (cost.sessions > 0).then_some(cost),
        unchecked: done.unchecked,
    })
}

/// The same `done` again (same commit, same message) on a task it made done: a `done` killed
/// after its record was written may have left the anchor or the note unwritten, so this one
/// writes what is missing, and changes nothing else. None when it is not the same `done`.
fn done_again(store: &Store, id: &TaskId, opts: &DoneOptions) -> Result<Option<Snapshot>> {
    let Some(current) = task::read(store, id)? else { return Ok(None) };
    let Some(done) = current.task.completion.as_ref().filter(|_| current.task.state == State::Done) else {
        return Ok(None);
    };
    let commit = match &opts.commit {
        Some(rev) => Some(store.resolve_commit(rev)?),
        None => store.ref_target(&refs::task_branch(id))?,
    };
    let Some(commit) = commit else { return Ok(None) };
    if done.commit.as_deref() != Some(commit.to_string().as_str()) || done.message != opts.message {
        return Ok(None);
    }
    if store.ref_target(&refs::done_anchor(id))? != Some(commit) {
        crate::store::remote::set_local(store, &refs::done_anchor(id), Some(commit))?;
    }
    if !notes::holds(store, commit, id.as_str())? {
        notes::add(store, commit, &completed(store, id, &current.task.title, commit, done, opts.spent.as_ref())?)?;
    }
    Ok(Some(current))
}

/// `done`; also returns the evidence the new operation replaced, when the task was done
/// already.
fn done_with(
    store: &Store,
    ctx: &Context,
    id: &TaskId,
    opts: DoneOptions,
    check: Option<task::Precondition<'_>>,
) -> Result<(Snapshot, Option<Completion>)> {
    let Some(current) = task::read(store, id)? else {
        return Err(usage(format!("task '{id}' does not exist")).into());
    };
    if let Some(check) = check {
        check(&current.task)?;
    }
    let commit = match &opts.commit {
        Some(rev) => Some(store.resolve_commit(rev)?),
        None => store.ref_target(&refs::task_branch(id))?,
    };
    let at = ctx.now();
    let by = store.identity.to_string();
    let completion = Completion {
        commit: commit.map(|c| c.to_string()),
        session: ctx.session.session.clone(),
        try_number: opts.try_number.or(ctx.session.try_number),
        message: opts.message.clone(),
        checks: opts.checks.clone(),
        reviews: opts.reviews.clone(),
        at,
        by: by.clone(),
        unchecked: opts.unchecked,
        children: opts.children.clone(),
    };
    // Before the evidence: a message past its limit must leave nothing written.
    crate::store::limits::check(
        "the message",
        completion.message.as_deref().unwrap_or(""),
        crate::store::limits::MESSAGE,
    )?;
    let evidence = |commit: ObjectId| -> Result<()> {
        // The anchor keeps the commit alive through gc.
        crate::store::remote::set_local(store, &refs::done_anchor(id), Some(commit))?;
        let spent = opts.spent.as_ref();
        notes::add(store, commit, &completed(store, id, &current.task.title, commit, &completion, spent)?)
    };
    // Unconditional: evidence first, so if we stop after it the task is simply not done yet,
    // and doing it again replaces this task's entry in the note. Conditional: only the caller
    // whose record lands writes evidence, so a loser never leaves a note claiming its commit
    // completed the task.
    if let (Some(commit), None) = (commit, check) {
        evidence(commit)?;
    }
    let change = Change {
        state: Some(StateChange { state: State::Done, reason: None, completion: Some(completion.clone()) }),
        ..Default::default()
    };
    // What the new operation replaces, as the record was when it was written.
    let replaced = std::cell::RefCell::new(None);
    let guard = |t: &Task| -> Result<(), Refusal> {
        check.map_or(Ok(()), |check| check(t))?;
        *replaced.borrow_mut() = t.completion.clone().filter(|_| t.state == State::Done);
        Ok(())
    };
    let snapshot = task::update(store, ctx, id, change, &guard)?;
    if let (Some(commit), Some(_)) = (commit, check) {
        evidence(commit)?;
    }
    let replaced = replaced.into_inner();
    let done = events::TaskDone {
        commit: commit.map(|c| c.to_string()),
        message: opts.message.clone(),
        replaced: replaced.as_ref().map(|old| events::Replaced {
            commit: old.commit.clone(),
            message: old.message.clone(),
            at: Some(old.at),
            by: Some(old.by.clone()),
        }),
        ..Default::default()
    };
    record(store, ctx, Some(id), Recorded::TaskDone(done))?;
    if let Some(parent) = &snapshot.task.parent {
        graph::settle(store, ctx, parent)?;
    }
    Ok((snapshot, replaced))
}

/// A change of a task's state, as a person or the loop makes it.
#[derive(Debug, Clone)]
pub struct Transition {
    pub state: State,
    pub reason: Option<String>,
    /// More for the journal event: who or what moved it (`session`, `walker`, `try`,
    /// `holder`); `from`, `to`, `reason` and `by` are filled in.
    pub about: events::StateChanged,
    /// The event to journal instead of the state's own, when it says more than entering the
    /// state does (`handed_back`); its `from`, `to` and `reason` are filled in.
    pub instead: Option<events::HandedBack>,
    /// Only from these states (empty: from any state but the rules below).
    pub from: Vec<State>,
}

impl Transition {
    pub fn to(state: State, reason: Option<String>) -> Transition {
        Transition { state, reason, about: Default::default(), instead: None, from: Vec::new() }
    }
}

/// Park, cancel or reopen a task.
pub fn set_state(store: &Store, ctx: &Context, id: &TaskId, state: State, reason: Option<String>) -> Result<Snapshot> {
    transition(store, ctx, id, Transition::to(state, reason))
}

/// Move a task to another state and journal it with who did it. A task in a state cannot
/// enter it again, and a done task can only be reopened. Reopening also releases a claim the
/// loop kept on the closed task (park exclusion) or a person held, so it is ready at once; so
/// does cancelling: a cancelled task is closed for good, and holds no claim.
pub fn transition(store: &Store, ctx: &Context, id: &TaskId, t: Transition) -> Result<Snapshot> {
    let (state, from) = (t.state, t.from.clone());
    let previous = std::cell::Cell::new(State::Open);
    let check = |task: &Task| -> Result<(), Refusal> {
        previous.set(task.state);
        match (task.state, state) {
            (now, to) if now == to => Err(refused(format!("task '{}' is already {}", task.id, to.as_str()))),
            // Leaving done for anything but open is only for a caller that says so (`from`
            // names done): the landing queue, when a done task's work cannot land.
            (State::Done, to) if to != State::Open && !from.contains(&State::Done) => {
                Err(refused(format!("task '{}' is done", task.id))
                    .hint(format!("reopen it first with 'git loop reopen {}'", task.id)))
            }
            (now, _) if !from.is_empty() && !from.contains(&now) => Err(refused(format!(
                "task '{}' is {}, not {}",
                task.id,
                now.as_str(),
                from.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" or ")
            ))),
            _ => Ok(()),
        }
    };
    let change =
        Change { state: Some(StateChange { state, reason: t.reason.clone(), completion: None }), ..Default::default() };
    let snapshot = task::update(store, ctx, id, change, &check)?;
    if matches!(state, State::Open | State::Cancelled) {
        release_hold(store, ctx, id)?;
    }
    let (from, to, by) = (previous.get().as_str().to_owned(), state.as_str().to_owned(), store.identity.to_string());
    let event = match t.instead {
        Some(back) => Recorded::HandedBack(events::HandedBack {
            from: Some(from),
            to: Some(to),
            reason: t.reason,
            by: Some(by),
            ..back
        }),
        None => Recorded::entered(state, events::StateChanged { from, to, reason: t.reason, by, ..t.about }),
    };
    record(store, ctx, Some(id), event)?;
    match (state, &snapshot.task.parent) {
        (State::Cancelled, Some(parent)) => graph::settle(store, ctx, parent)?,
        (State::Open, Some(parent)) => graph::unsettle(store, ctx, parent, id)?,
        _ => {}
    }
    Ok(snapshot)
}

/// The reason a claim kept on a closed task starts with (park exclusion).
pub use crate::store::claim::HOLD_REASON;

/// Whether a claim only keeps a closed task away from the loop (park exclusion).
pub fn is_hold(record: &claim::Record) -> bool {
    record.reason.as_deref().is_some_and(|why| why.starts_with(HOLD_REASON))
}

/// Release a claim that only kept a closed task away from the loop, or that a person held
/// (`take-over`). A claim a walker works the task under is left to that walker.
pub fn release_hold(store: &Store, ctx: &Context, id: &TaskId) -> Result<()> {
    let key = ClaimKey::node(id);
    let Some(held) = claim::read(store, &key)? else { return Ok(()) };
    let r = &held.record;
    if (is_hold(r) || r.holder.starts_with(PERSON_PREFIX)) && !lease::judge(store, ctx, &key, &held).is_stale() {
        // The task's new state goes to the remote with the release: nobody sees the claim
        // free and the task still closed.
        let riders = crate::store::sync::task_scope(store, id)?;
        claim::release_with(store, ctx, &key, &r.holder.clone(), true, &riders)?;
    }
    Ok(())
}

/// After winning the claim on task `id`: the task as it is now, or `None` unless it is still
/// open. With `loop.remote`, the remote's record is fetched and merged into ours first: a claim
/// is free again when its last holder finished the task, and the result travels in the same
/// push as the release, so this read sees it even when our copy of the board is old.
pub fn open_after_claim(store: &Store, ctx: &Context, id: &TaskId) -> Result<Option<Task>> {
    if let Some(remote) = store.arbiter() {
        let name = refs::task(id);
        let names = std::collections::BTreeSet::from([name.clone()]);
        if store.take_confirmed(&name) {
            // The claim's push was leased on our mirror of the record: it is the remote's.
            crate::store::sync::merge_mirrored(store, ctx, &remote, names)?;
        } else {
            crate::store::sync::pull(store, ctx, &remote, names)?;
        }
    }
    Ok(task::read(store, id)?.map(|s| s.task).filter(|t| t.state == State::Open))
}

/// Claim holders that are people (`take-over`) start with this.
pub use crate::store::claim::PERSON_PREFIX;

/// The claim holder name of the person running this command.
pub fn person(store: &Store) -> String {
    let who = if store.identity.email.trim().is_empty() { &store.identity.name } else { &store.identity.email };
    format!("{PERSON_PREFIX}{who}")
}

/// Why a task is or is not ready to work on.
#[derive(Debug, Clone, PartialEq)]
pub enum Readiness {
    Ready,
    /// Not open.
    Closed,
    /// These dependencies are not done (or do not exist).
    Blocked(Vec<String>),
    /// Someone holds a live claim on it.
    Claimed,
    /// An epic: done when its children are, never handed to an agent.
    Epic,
}

/// Every task and every task claim, read once through the index: what `next`, `list`,
/// `show` and `status` see. Rows carry what ordering and readiness need; a task's full record
/// is parsed only when it is shown.
pub struct Board {
    /// Every task, sorted by id (shared with the walk that keeps them).
    pub tasks: std::sync::Arc<Vec<Row>>,
    /// The open tasks whose dependencies are all done, in `next`'s order (see `store::ready`).
    ready_set: std::sync::Arc<crate::store::ready::Ready>,
    /// `node:` claims (tombstones included), by task id.
    pub claims: HashMap<String, ClaimRow>,
    /// What this clone has watched of each held claim's lease (`lease`), by task id.
    leases: HashMap<String, Lease>,
    /// Records that could not be read: (ref name, problem).
    pub corrupt: Vec<(String, String)>,
    pub now: DateTime<Utc>,
    /// Each parent's children, as positions in `tasks`: made by the first `children` call.
    by_parent: std::sync::OnceLock<HashMap<String, Vec<usize>>>,
    /// What was last read of the tasks of other repositories tasks here wait for (`foreign`).
    pub foreign: foreign::Read,
}

impl Board {
    pub fn load(store: &Store, ctx: &Context) -> Result<Board> {
        Ok(Board::of(store, index::load(store)?, ctx))
    }

    /// The board `next` reads: when the index is current, only its first ready tasks, the
    /// tasks they come after, and every claim (`index::load_front`), if a ready task with
    /// `labels` is among them; else the whole board. Only what `ready` hands out, and those
    /// tasks' readiness, state and claim, are whole on the first kind.
    pub fn for_next(store: &Store, ctx: &Context, labels: &[String]) -> Result<Board> {
        if let Some(loaded) = index::load_front(store)? {
            let front = Board::of(store, loaded, ctx);
            if front.ready(labels).next().is_some() {
                return Ok(front);
            }
        }
        Board::load(store, ctx)
    }

    /// The board as a long-running process keeps it (see `index::Live`).
    pub fn load_live(store: &Store, ctx: &Context, live: &mut index::Live, watch: &mut Watch) -> Result<Board> {
        Ok(Board::of(store, live.load(store, watch)?.clone(), ctx))
    }

    /// The board of `loaded`, with every held claim's lease judged by this clone's watch (and
    /// what it saw for the first time remembered; claims gone or released forgotten).
    fn of(store: &Store, loaded: index::Loaded, ctx: &Context) -> Board {
        let mut watcher = lease::Watcher::load(store, ctx);
        let mut leases = HashMap::new();
        let mut watched = std::collections::HashSet::new();
        for row in loaded.claims.iter() {
            let Ok(held) = row.held() else { continue };
            let key = ClaimKey::new("node", row.task_id()).expect("the index holds valid claim refs only");
            // A release this clone does not believe (made without the holder's capability)
            // leaves the claim held by the record seen before it (`claim::vouch`).
            let held = if row.is_released() { claim::vouch(store, &key, held) } else { held };
            if held.record.is_released() {
                continue;
            }
            leases.insert(row.task_id().to_owned(), watcher.judge(&key, &held));
            watched.insert(refs::claim(&key));
        }
        watcher.keep_only(&lease::ref_prefix("node:"), &watched);
        watcher.save();
        Board {
            tasks: loaded.tasks,
            ready_set: loaded.ready,
            claims: loaded.claims.into_iter().map(|c| (c.task_id().to_owned(), c)).collect(),
            leases,
            corrupt: loaded.corrupt,
            now: ctx.now(),
            by_parent: std::sync::OnceLock::new(),
            foreign: foreign::Read::load(store),
        }
    }

    /// The open tasks that wait for `id` (list it in their `after`), by id: what closing it
    /// other than done leaves blocked.
    pub fn waiting_for(&self, id: &str) -> Vec<&Row> {
        self.tasks.iter().filter(|r| r.state == State::Open && r.after().any(|dep| dep == id)).collect()
    }

    /// The task with this id.
    pub fn get(&self, id: &str) -> Option<&Row> {
        self.tasks.binary_search_by(|r| r.id().cmp(id)).ok().map(|i| &self.tasks[i])
    }

    /// Whether a live claim is held on a task: one this clone has not yet seen unchanged for
    /// a whole lease.
    pub fn is_claimed(&self, id: &str) -> bool {
        self.leases.get(id).is_some_and(|l| !l.is_stale())
    }

    /// The claim on a task (live or stale), read in full.
    pub fn claim(&self, id: &str) -> Option<Held> {
        self.claims.get(id).and_then(|c| c.held().ok()).filter(|h| !h.record.is_released())
    }

    /// What this clone has watched of the lease of the claim on a task, if one is held.
    pub fn lease(&self, id: &str) -> Option<Lease> {
        self.leases.get(id).copied()
    }

    /// The state as people read it: `running` for an open task a walker works on (its live
    /// claim), else the recorded state.
    pub fn shown_state(&self, id: &str, state: State) -> &'static str {
        let worked = self.is_claimed(id) && self.claims.get(id).is_some_and(|c| crate::ids::is_walker_key(c.holder()));
        if state == State::Open && worked {
            "running"
        } else {
            state.as_str()
        }
    }

    /// Readiness from a task's id, state and dependencies.
    pub fn readiness_of<'a>(&self, id: &str, state: State, after: impl IntoIterator<Item = &'a str>) -> Readiness {
        if state != State::Open {
            return Readiness::Closed;
        }
        if self.get(id).is_some_and(|r| r.epic) {
            return Readiness::Epic;
        }
        let blocked: Vec<String> = after.into_iter().filter(|dep| !self.met(dep)).map(ToOwned::to_owned).collect();
        if !blocked.is_empty() {
            return Readiness::Blocked(blocked);
        }
        if self.is_claimed(id) {
            return Readiness::Claimed;
        }
        Readiness::Ready
    }

    /// `readiness(row) == Ready`, without collecting what blocks it.
    fn is_ready(&self, row: &Row) -> bool {
        row.state == State::Open && !row.epic && row.after().all(|dep| self.met(dep)) && !self.is_claimed(row.id())
    }

    /// Dependency `dep` and where it stands, for a person: `t-1 (open)`, `lib#t-2 (done there:
    /// Its title)`, `lib#t-2 (not read: …)`, `t-3 (missing)`.
    pub fn dependency(&self, dep: &str) -> String {
        match (self.get(dep), foreign::is_foreign(dep)) {
            (Some(row), _) => format!("{dep} ({})", row.state.as_str()),
            (None, true) => match self.foreign.task(dep) {
                Some(t) => {
                    let title: String = t.title.chars().take(40).collect();
                    let more = if t.title.chars().count() > 40 { "…" } else { "" };
                    format!("{dep} ({} there: {title}{more})", t.state.as_str())
                }
                None => format!("{dep} (not read: 'git loop sync' reads it)"),
            },
            (None, false) => format!("{dep} (missing)"),
        }
    }

    /// Whether dependency `dep` is met: done here, or, a task of another repository, done there
    /// when last read (`foreign`).
    pub fn met(&self, dep: &str) -> bool {
        match self.get(dep) {
            Some(d) => d.state == State::Done,
            None => foreign::is_foreign(dep) && self.foreign.done(dep),
        }
    }

    pub fn readiness(&self, row: &Row) -> Readiness {
        self.readiness_of(row.id(), row.state, row.after())
    }

    /// Ready tasks with every one of `labels`, in the order `next` hands them out: priority,
    /// then age, then id. Read off the ready set as far as the caller goes, each task checked
    /// again (its dependencies, and that nobody holds a live claim on it).
    pub fn ready<'b>(&'b self, labels: &'b [String]) -> impl Iterator<Item = &'b Row> + 'b {
        self.ready_set
            .ids()
            .filter_map(|id| self.get(id))
            .filter(move |r| labels.iter().all(|l| r.has_label(l)))
            .filter(|r| self.is_ready(r))
    }

    /// Whether `from` depends, directly or not, on `to`.
    pub fn depends_on(&self, from: &str, to: &str) -> bool {
        self.dependency_path(from, to).is_some()
    }

    /// How `from` depends, directly or not, on `to`: the tasks from one to the other.
    pub fn dependency_path(&self, from: &str, to: &str) -> Option<Vec<String>> {
        // Each task reached, by the one it was first reached from.
        let mut came_from: HashMap<&str, &str> = HashMap::new();
        let mut stack = vec![from];
        while let Some(id) = stack.pop() {
            if id == to {
                let mut path = vec![id.to_owned()];
                let mut at = id;
                while at != from {
                    at = came_from[at];
                    path.push(at.to_owned());
                }
                path.reverse();
                return Some(path);
            }
            let Some(row) = self.get(id) else { continue };
            for dep in row.after() {
                if dep != from && !came_from.contains_key(dep) {
                    came_from.insert(dep, id);
                    stack.push(dep);
                }
            }
        }
        None
    }
}

/// The order in which to try claiming `ready` (in `next`'s order). Normally that order. Once a
/// claimer has lost a task to another (`contended`), everyone else is likely racing down the
/// same list, and trying the first task again would lose again: the first tasks that share the
/// first one's priority (up to 64: several times as many as claimers commonly race, since the
/// tasks others took since our board was read sit among them too) are tried in a random order,
/// so claimers spread out instead of queueing behind each other. Priority is never skipped.
pub fn claim_order<'r>(ready: &[&'r Row], contended: bool) -> Vec<&'r Row> {
    let mut order: Vec<&Row> = ready.to_vec();
    if contended && !order.is_empty() {
        let best = order[0].priority;
        let peers = order.iter().take(64).take_while(|r| r.priority == best).count();
        let random = crate::ids::random_bytes(peers);
        for i in (1..peers).rev() {
            order.swap(i, usize::from(random[i]) % (i + 1));
        }
    }
    order
}

/// What `next --claim` got.
pub enum NextClaimed {
    Claimed {
        task: Box<Task>,
        held: Box<Held>,
    },
    /// Nothing ready (or every ready task was taken by others first).
    Nothing,
}

/// Claim the first ready task that nobody else wins first. On losing a task to another
/// claimer (whose claims the lost push brought here), or winning one that turned out closed
/// (after which every task record is fetched), look at the board again and spread out among
/// the first ready tasks (`claim_order`): the others are racing down the same list.
pub fn next_claim(
    store: &Store,
    ctx: &Context,
    labels: &[String],
    opts: &claim::AcquireOptions,
) -> Result<NextClaimed> {
    // Each call is a process of its own: a loss by an earlier call of this clone says others
    // are racing down the same list now.
    let mut contended = recently_contended(store, ctx);
    for _round in 0..100 {
        let board = Board::for_next(store, ctx, labels)?;
        let first: Vec<&Row> = board.ready(labels).take(64).collect();
        if first.is_empty() {
            return Ok(NextClaimed::Nothing);
        }
        let mut lost = false;
        for row in claim_order(&first, contended) {
            let Ok(id) = row.id().parse::<TaskId>() else { continue };
            let key = ClaimKey::node(&id);
            match claim::acquire(store, ctx, &key, opts)? {
                claim::Acquire::Acquired(held)
                | claim::Acquire::TookOver { held, .. }
                | claim::Acquire::Refreshed(held) => {
                    // The claim is ours; make sure the task did not close meanwhile (anywhere).
                    if let Some(task) = open_after_claim(store, ctx, &id)? {
                        return Ok(NextClaimed::Claimed { task: Box::new(task), held: Box::new(held) });
                    }
                    claim::release(store, ctx, &key, &opts.holder, false)?;
                    if let Some(remote) = store.arbiter() {
                        let names = std::collections::BTreeSet::from([format!("{}*", refs::TASKS)]);
                        crate::store::sync::pull(store, ctx, &remote, names)?;
                    }
                }
                claim::Acquire::HeldByOther(_) => {}
            }
            lost = true;
            break;
        }
        if !lost {
            return Ok(NextClaimed::Nothing);
        }
        contended = true;
        note_contended(store, ctx);
    }
    Ok(NextClaimed::Nothing)
}

/// How long after losing a claim this clone's claimers keep spreading out (`claim_order`).
const CONTENDED_FOR: chrono::Duration = chrono::Duration::seconds(60);

/// `.git/loop/contended`: when a claimer of this clone last lost a task to another claimer.
fn contended_file(store: &Store) -> Option<std::path::PathBuf> {
    store.layout().ok().map(|layout| layout.contended())
}

/// Whether a claimer of this clone lost a task to another in the last minute.
fn recently_contended(store: &Store, ctx: &Context) -> bool {
    let Some(text) = contended_file(store).and_then(|f| std::fs::read_to_string(f).ok()) else { return false };
    let Ok(at) = DateTime::parse_from_rfc3339(text.trim()) else { return false };
    let since = ctx.now() - at.with_timezone(&Utc);
    since >= chrono::Duration::zero() && since < CONTENDED_FOR
}

/// Remember that a claimer of this clone just lost a task to another (best effort: a file
/// that cannot be written only makes the next call start at the top of the list again).
fn note_contended(store: &Store, ctx: &Context) {
    if let Some(file) = contended_file(store) {
        let _ = std::fs::write(file, format!("{}\n", ctx.now().to_rfc3339()));
    }
}

/// The dependency cycles among tasks whose dependencies `after` gives: at least one through
/// every group of tasks that wait for each other, each as the path that closes it (the first
/// task again at its end: `t-a → t-b → t-a`), from the starting tasks `starts` in order. A
/// cycle found from one start is not reported again from another. Iterative: a chain of
/// 100,000 tasks needs no deep stack.
pub fn cycles<'a>(starts: impl IntoIterator<Item = &'a str>, after: &dyn Fn(&str) -> Vec<String>) -> Vec<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        OnPath,
        Done,
    }
    let mut marks: HashMap<String, Mark> = HashMap::new();
    let mut found = Vec::new();
    for start in starts {
        if marks.contains_key(start) {
            continue;
        }
        // The path from `start`, each with the dependencies still to follow.
        let mut path: Vec<(String, Vec<String>)> = vec![(start.to_owned(), after(start))];
        marks.insert(start.to_owned(), Mark::OnPath);
        while let Some((_, next)) = path.last_mut() {
            let Some(dep) = next.pop() else {
                let (done, _) = path.pop().expect("not empty");
                marks.insert(done, Mark::Done);
                continue;
            };
            match marks.get(&dep) {
                Some(Mark::Done) => {}
                Some(Mark::OnPath) => {
                    let from = path.iter().position(|(id, _)| *id == dep).expect("on the path");
                    let mut cycle: Vec<String> = path[from..].iter().map(|(id, _)| id.clone()).collect();
                    cycle.push(dep);
                    found.push(cycle);
                }
                None => {
                    marks.insert(dep.clone(), Mark::OnPath);
                    let deps = after(&dep);
                    path.push((dep, deps));
                }
            }
        }
    }
    found
}

/// A cycle as people read it: `t-a → t-b → t-a`.
pub fn cycle_line(cycle: &[String]) -> String {
    cycle.join(" → ")
}

impl Board {
    /// The dependency cycles among tasks not done (a done task waits for nothing), which
    /// none of their tasks can leave (see `cycles`).
    pub fn stuck_cycles(&self) -> Vec<Vec<String>> {
        cycles(self.tasks.iter().map(|r| r.id()), &|id| self.waits_on(id))
    }

    /// The tasks `id` waits on: its dependencies, unless it is done.
    fn waits_on(&self, id: &str) -> Vec<String> {
        match self.get(id) {
            Some(r) if r.state != State::Done => r.after().map(ToOwned::to_owned).collect(),
            _ => Vec::new(),
        }
    }

    /// A dependency cycle task `id` is in or waits on, if there is one among tasks not done
    /// (a done task waits for nothing): it can never be ready.
    pub fn cycle_blocking(&self, id: &str) -> Option<Vec<String>> {
        cycles([id], &|id| self.waits_on(id)).into_iter().next()
    }
}
