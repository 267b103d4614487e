//! Tasks as operation chains: `refs/loop/tasks/<id>` points at a chain of commits, one per
//! operation (create, edit, state change). Each operation commit's tree holds `op.json` (the
//! operation) and `task.json` (the task folded up to and including it), so reading a task is
//! one blob.
//!
//! Two clones that change a task offline end with divergent tips. `merge` folds the union of
//! both sides' operations in one total order — Lamport clock, then the writer's clone id, then
//! the operation's commit id — and writes a merge commit whose content and signature are a
//! function of its parents alone, so two clones merging the same pair make the same commit.
//! Nothing conflicts and nothing is lost: for a plain field the later operation in that order
//! wins; list fields (dependencies, labels, agents) change by add/remove, so concurrent
//! additions both survive; the state is a field like any other, and an edit never touches it
//! (so a task marked done on one clone and re-titled on another ends done, re-titled).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::cas::{self, Cas, Expect};
use super::Store;
use crate::context::Context;
use crate::error::{corrupt, Refusal};
use crate::git;
use crate::ids::{Priority, TaskId};
use crate::refs;

/// The newest version of `task.json` this build reads; readers refuse newer ones. A task is
/// written at the lowest version that holds it: 1, or 2 once it has a parent, is an epic or
/// has links (which a reader of version 1 would drop, and would then send an agent to do an
/// epic), so that clones of an earlier release refuse those tasks and read every other one.
pub const TASK_VERSION: u32 = 2;
/// The newest version of `op.json` this build reads; readers refuse newer ones. Version 2: an
/// operation that sets a parent or the epic mark, or adds or removes links.
pub const OP_VERSION: u32 = 2;

/// The task folded up to a commit of its chain, in that commit's tree.
pub const TASK_FILE: &str = "task.json";
/// The operation a commit of a task's chain records, in its tree.
pub const OP_FILE: &str = "op.json";

/// Where a task stands, as recorded. Kebab-case in JSON and on the command line.
///
/// `running` is not recorded: it is an open task whose claim a walker holds (docs/states.md
/// draws the machine). Every state but `open` keeps the loop away until a person acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Open,
    Done,
    Parked,
    Cancelled,
    /// A person must choose: a session was stopped, or a race's judge gave no usable answer.
    NeedsDecision,
    /// The agent needs something it does not have, or its work cannot land without a person.
    NeedsYou,
    /// A person took the task over from the loop.
    TakenOver,
    /// The agent tried and failed, or never reached a verdict within its sessions.
    Failed,
}

impl State {
    pub const ALL: [State; 8] = [
        State::Open,
        State::NeedsDecision,
        State::NeedsYou,
        State::TakenOver,
        State::Failed,
        State::Done,
        State::Parked,
        State::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Open => "open",
            State::Done => "done",
            State::Parked => "parked",
            State::Cancelled => "cancelled",
            State::NeedsDecision => "needs-decision",
            State::NeedsYou => "needs-you",
            State::TakenOver => "taken-over",
            State::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Every state but open is closed to the loop: nothing works on it until a person acts.
    pub fn is_closed(self) -> bool {
        self != State::Open
    }

    /// The journal event kind for entering this state.
    pub fn event_kind(self) -> &'static str {
        match self {
            State::Open => "task_reopened",
            State::Done => "task_done",
            State::Parked => "task_parked",
            State::Cancelled => "task_cancelled",
            State::NeedsDecision => "task_needs_decision",
            State::NeedsYou => "task_needs_you",
            State::TakenOver => "task_taken_over",
            State::Failed => "task_failed",
        }
    }
}

/// Which agent a person assigned the task to (`git loop reassign`); it overrides the walk's
/// agent and the task's preferred agents. Each reassignment has a fresh nonce, so the loop
/// sees a reassignment to the same agent too (a restart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub agent: String,
    pub nonce: String,
    /// Why a rule forbidding this agent was overridden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#override: Option<String>,
}

/// What completed a task: the evidence also written as a note on `commit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "try")]
    pub try_number: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<serde_json::Value>,
    /// The reviews that approved the work, each for the tree it read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviews: Vec<Approval>,
    pub at: DateTime<Utc>,
    pub by: String,
    /// True when a walk counted it done on its agent's word alone: no checks were configured.
    /// Added later: absent (false) before, and whenever checks ran or a person said done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
    /// An epic's children when it was done: finished, every one (`backlog::graph::settle`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
}

/// A reviewer's approval of a try's work: who (role, agent, session), in which round, and the
/// tree it read. It holds for that tree only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub role: String,
    pub agent: String,
    pub session: String,
    pub tree: String,
    pub round: u32,
}

/// Where an imported task came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    pub format: String,
    pub id: String,
    /// The line it was imported from, as it was (a beads export's: `export` writes it back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// A task, folded from its operations: the content of `task.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub version: u32,
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub priority: Priority,
    pub state: State,
    /// Ids of the tasks that must be done first.
    #[serde(default)]
    pub after: Vec<String>,
    #[serde(default)]
    pub labels: Vec<String>,
    /// Preferred agent presets, in order.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Agents to race on this task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub together: Vec<String>,
    /// How a race picks its winner: `first` or `judge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pick: Option<String>,
    /// Agents that take over when its agent is unreachable (else `loop.fallback`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
    /// Agents that must not work on it (a reassignment can override this with a reason).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbid: Vec<String>,
    /// Reviewers (roles or agents) that must approve its work (else `loop.reviewer`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviewers: Vec<String>,
    /// The agent a person assigned it to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned: Option<Assignment>,
    /// Why the task is in its state (any state but open and done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// The task this one is part of (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// An epic: never handed to an agent; done when all its children are (version 2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub epic: bool,
    /// Links to other tasks, here or elsewhere, as `<kind>:<target>` (`related:t-…`,
    /// `discovered-from:t-…`); kept and shown, never acted on (version 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub updated_at: DateTime<Utc>,
    /// The highest Lamport clock among the operations folded in.
    pub lamport: u64,
}

impl Task {
    fn blank(id: &str) -> Task {
        Task {
            version: 1,
            id: id.to_owned(),
            title: String::new(),
            body: String::new(),
            priority: Priority::default(),
            state: State::Open,
            after: Vec::new(),
            labels: Vec::new(),
            agents: Vec::new(),
            together: Vec::new(),
            pick: None,
            fallback: Vec::new(),
            forbid: Vec::new(),
            reviewers: Vec::new(),
            assigned: None,
            reason: None,
            completion: None,
            origin: None,
            parent: None,
            epic: false,
            links: Vec::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            created_by: String::new(),
            updated_at: DateTime::<Utc>::UNIX_EPOCH,
            lamport: 0,
        }
    }

    pub fn task_id(&self) -> TaskId {
        self.id.parse().expect("ids are validated before a task is stored or read")
    }

    /// The lowest `task.json` version that holds this task.
    fn version_needed(&self) -> u32 {
        if self.parent.is_some() || self.epic || !self.links.is_empty() {
            2
        } else {
            1
        }
    }
}

/// Plain fields an operation sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// `Some("")` clears the pick mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pick: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned: Option<Assignment>,
    /// `Some("")` clears the parent (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Marks the task an epic, or not (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epic: Option<bool>,
}

/// List fields an operation adds to or removes from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lists {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub together: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbid: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviewers: Vec<String>,
    /// `<kind>:<target>` (version 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
}

impl Lists {
    fn is_empty(&self) -> bool {
        self.after.is_empty()
            && self.labels.is_empty()
            && self.agents.is_empty()
            && self.together.is_empty()
            && self.fallback.is_empty()
            && self.forbid.is_empty()
            && self.reviewers.is_empty()
            && self.links.is_empty()
    }
}

/// A change of state, with its reason and evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateChange {
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
}

/// Marks the operation that creates a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Create {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// When the task was really created, if before this operation (imports keep it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

/// What an operation changes; the caller's part of an [`Op`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Change {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<Create>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub set: Fields,
    #[serde(default, skip_serializing_if = "Lists::is_empty")]
    pub add: Lists,
    #[serde(default, skip_serializing_if = "Lists::is_empty")]
    pub remove: Lists,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<StateChange>,
    /// Marks a repair operation (`git loop doctor --repair`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
}

/// What a repair operation records: the operations of the chain below it that cannot be
/// read, which every reader then folds as if absent (their commits stay in the history), and
/// why the repair was made. It changes no field itself; its commit's `task.json` is the task
/// folded from the operations that parse.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Repair {
    /// Full ids of the operation commits skipped.
    #[serde(default)]
    pub skipped: Vec<String>,
    pub reason: String,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl Change {
    /// Refuse a change whose texts or lists are past the size limits (`store::limits`): what
    /// every writer of a task checks before anything is written.
    pub fn check_sizes(&self) -> Result<(), Refusal> {
        use super::limits::{self, check, check_list};
        let set = &self.set;
        check("the title", set.title.as_deref().unwrap_or(""), limits::TITLE)?;
        check("the body", set.body.as_deref().unwrap_or(""), limits::BODY)?;
        if let Some(assigned) = &set.assigned {
            check("the override's reason", assigned.r#override.as_deref().unwrap_or(""), limits::MESSAGE)?;
        }
        for (what, list) in [
            ("the dependencies", &self.add.after),
            ("the labels", &self.add.labels),
            ("the agents", &self.add.agents),
            ("the racing agents", &self.add.together),
            ("the fallback agents", &self.add.fallback),
            ("the forbidden agents", &self.add.forbid),
            ("the reviewers", &self.add.reviewers),
            ("the links", &self.add.links),
        ] {
            check_list(what, list.len())?;
            for item in list {
                check(&what.replacen("the ", "an item of the ", 1), item, limits::MESSAGE)?;
            }
        }
        if let Some(state) = &self.state {
            check("the reason", state.reason.as_deref().unwrap_or(""), limits::MESSAGE)?;
            if let Some(completion) = &state.completion {
                check("the message", completion.message.as_deref().unwrap_or(""), limits::MESSAGE)?;
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        *self == Change::default()
    }

    /// The lowest `op.json` version that holds this change.
    fn version_needed(&self) -> u32 {
        let graph = self.set.parent.is_some()
            || self.set.epic.is_some()
            || !self.add.links.is_empty()
            || !self.remove.links.is_empty();
        if graph {
            2
        } else {
            1
        }
    }

    /// A one-line description for the operation commit's subject.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.create.is_some() {
            parts.push("create".to_owned());
        }
        if let Some(title) = &self.set.title {
            if self.create.is_none() {
                parts.push(format!("title {:?}", title));
            }
        }
        if self.set.body.is_some() && self.create.is_none() {
            parts.push("body".into());
        }
        if let Some(p) = self.set.priority {
            parts.push(format!("priority {p}"));
        }
        if let Some(assigned) = &self.set.assigned {
            parts.push(format!("assign {}", assigned.agent));
        }
        match self.set.parent.as_deref() {
            Some("") => parts.push("no parent".into()),
            Some(parent) => parts.push(format!("parent {parent}")),
            None => {}
        }
        match self.set.epic {
            Some(true) => parts.push("epic".into()),
            Some(false) => parts.push("not an epic".into()),
            None => {}
        }
        for (what, list) in [
            ("after", &self.add.after),
            ("label", &self.add.labels),
            ("agent", &self.add.agents),
            ("together", &self.add.together),
            ("fallback", &self.add.fallback),
            ("forbid", &self.add.forbid),
            ("reviewer", &self.add.reviewers),
            ("link", &self.add.links),
        ] {
            if !list.is_empty() {
                parts.push(format!("+{what} {}", list.join(",")));
            }
        }
        for (what, list) in [
            ("after", &self.remove.after),
            ("label", &self.remove.labels),
            ("agent", &self.remove.agents),
            ("together", &self.remove.together),
            ("fallback", &self.remove.fallback),
            ("forbid", &self.remove.forbid),
            ("reviewer", &self.remove.reviewers),
            ("link", &self.remove.links),
        ] {
            if !list.is_empty() {
                parts.push(format!("-{what} {}", list.join(",")));
            }
        }
        if let Some(state) = &self.state {
            parts.push(state.state.as_str().to_owned());
        }
        if let Some(repair) = &self.repair {
            parts.push(match repair.skipped.len() {
                0 => "repair".to_owned(),
                1 => "repair, 1 unreadable operation skipped".to_owned(),
                n => format!("repair, {n} unreadable operations skipped"),
            });
        }
        if parts.is_empty() {
            parts.push("edit".into());
        }
        parts.join(", ")
    }
}

/// One operation on a task: the content of `op.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    pub version: u32,
    /// The clone's Lamport clock when written: one more than the highest of the operations it
    /// follows and every clock the clone had seen (`lamport`).
    pub lamport: u64,
    /// The clone that wrote it (ties in the order are broken by this, then the commit id).
    pub writer: String,
    pub at: DateTime<Utc>,
    pub by: String,
    #[serde(flatten)]
    pub change: Change,
}

/// The task `change` creates, as its first operation would fold it (no clock, no writer).
pub fn made_by(id: &str, change: &Change) -> Task {
    let op = Op {
        version: change.version_needed(),
        lamport: 0,
        writer: String::new(),
        at: DateTime::<Utc>::UNIX_EPOCH,
        by: String::new(),
        change: change.clone(),
    };
    let mut task = Task::blank(id);
    fold(&mut task, &op);
    task
}

/// Fold one operation into a task.
fn fold(task: &mut Task, op: &Op) {
    if let Some(create) = &op.change.create {
        task.created_at = create.created_at.unwrap_or(op.at);
        task.created_by = op.by.clone();
        if create.origin.is_some() {
            task.origin = create.origin.clone();
        }
    }
    let set = &op.change.set;
    if let Some(title) = &set.title {
        task.title = title.clone();
    }
    if let Some(body) = &set.body {
        task.body = body.clone();
    }
    if let Some(priority) = set.priority {
        task.priority = priority;
    }
    if let Some(pick) = &set.pick {
        task.pick = (!pick.is_empty()).then(|| pick.clone());
    }
    if let Some(assigned) = &set.assigned {
        task.assigned = Some(assigned.clone());
    }
    if let Some(parent) = &set.parent {
        task.parent = (!parent.is_empty()).then(|| parent.clone());
    }
    if let Some(epic) = set.epic {
        task.epic = epic;
    }
    add_all(&mut task.after, &op.change.add.after);
    add_all(&mut task.labels, &op.change.add.labels);
    add_all(&mut task.agents, &op.change.add.agents);
    add_all(&mut task.together, &op.change.add.together);
    add_all(&mut task.fallback, &op.change.add.fallback);
    add_all(&mut task.forbid, &op.change.add.forbid);
    add_all(&mut task.reviewers, &op.change.add.reviewers);
    add_all(&mut task.links, &op.change.add.links);
    remove_all(&mut task.after, &op.change.remove.after);
    remove_all(&mut task.labels, &op.change.remove.labels);
    remove_all(&mut task.agents, &op.change.remove.agents);
    remove_all(&mut task.together, &op.change.remove.together);
    remove_all(&mut task.fallback, &op.change.remove.fallback);
    remove_all(&mut task.forbid, &op.change.remove.forbid);
    remove_all(&mut task.reviewers, &op.change.remove.reviewers);
    remove_all(&mut task.links, &op.change.remove.links);
    if let Some(change) = &op.change.state {
        task.state = change.state;
        task.reason = change.reason.clone();
        task.completion = match change.state {
            State::Done => change.completion.clone(),
            _ => None,
        };
    }
    task.updated_at = task.updated_at.max(op.at);
    task.lamport = task.lamport.max(op.lamport);
    task.version = task.version_needed();
}

fn add_all(list: &mut Vec<String>, items: &[String]) {
    for item in items {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
}

fn remove_all(list: &mut Vec<String>, items: &[String]) {
    list.retain(|x| !items.contains(x));
}

/// A task as read from its ref.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub task: Task,
    /// The commit the task ref pointed to when read.
    pub tip: ObjectId,
}

/// How the hint of a corrupt task record starts: `doctor` itself leaves it out.
pub const ASK_DOCTOR: &str = "'git loop doctor' says whether '--repair' can mend it; else ";

/// The refusal for an unreadable task record, naming its ref.
pub fn corrupt_task(name: &str, why: impl std::fmt::Display) -> Refusal {
    corrupt(format!("task record '{name}' is corrupt: {why}")).hint(format!(
        "{ASK_DOCTOR}see its history with 'git log {name}' and point it at a good commit with 'git update-ref {name} <commit>', or delete it with 'git update-ref -d {name}'"
    ))
}

/// Read the task at commit `tip` of ref `name`; a bad record is a corrupt-class error.
pub fn read_at(store: &Store, name: &str, tip: ObjectId) -> Result<Task> {
    let bytes = match git::read_commit_file_within(&store.repo, tip, TASK_FILE, super::limits::RECORD) {
        Ok(Some(Ok(bytes))) => bytes,
        Ok(Some(Err(len))) => {
            let problem =
                super::limits::record_problem(TASK_FILE, len).expect("only a record past the limit is left unread");
            return Err(corrupt_task(name, problem).into());
        }
        Ok(None) => return Err(corrupt_task(name, format!("commit {tip} has no {TASK_FILE}")).into()),
        Err(err) => return Err(corrupt_task(name, format!("{err:#}")).into()),
    };
    parse_task(name, &bytes)
}

/// Parse and check a `task.json` of ref `name`.
pub fn parse_task(name: &str, bytes: &[u8]) -> Result<Task> {
    decode_task(refs::task_id_of(name), bytes).map_err(|why| corrupt_task(name, why).into())
}

/// Decode a `task.json` and check it: its version is known, it holds a valid task id, and
/// that id is `id` when given. `Err` says what is wrong, for a message naming the record.
/// The one definition of a readable `task.json` (the server's pre-receive hook uses it too).
pub fn decode_task(id: Option<&str>, bytes: &[u8]) -> Result<Task, String> {
    if let Some(problem) = super::limits::record_problem(TASK_FILE, bytes.len()) {
        return Err(problem);
    }
    let task: Task = serde_json::from_slice(bytes).map_err(|err| format!("{TASK_FILE}: {err}"))?;
    if task.version > TASK_VERSION {
        return Err(format!("{TASK_FILE} has version {}, written by a newer git-loop", task.version));
    }
    if id.is_some_and(|id| id != task.id) || task.id.parse::<TaskId>().is_err() {
        return Err(format!("{TASK_FILE} holds task '{}'", task.id.escape_debug()));
    }
    Ok(task)
}

/// The refusal for a task ref whose file cannot be parsed. git only ignores it ("broken
/// ref"): neither `git log` nor `git update-ref -d` works on it, so the hint names the file.
pub fn corrupt_unparsable(store: &Store, name: &str) -> Refusal {
    let path = store.common_dir().join(name);
    corrupt(format!("task record '{name}' is corrupt: the ref file cannot be parsed")).hint(format!(
        "git ignores it as broken: remove it ('rm {}'), then 'git loop sync' brings the task back if a remote has it, or point the ref at its last operation ('git fsck --unreachable' lists it) with 'git update-ref {name} <commit>'",
        path.display()
    ))
}

/// The refusal for a symbolic task ref: a task ref holds its chain's tip, never another ref.
/// The hint must say `--no-deref`: `git update-ref -d` on a symbolic ref deletes the ref it
/// points to (the user's branch), not the symbolic ref.
pub fn corrupt_symbolic(name: &str, to: impl std::fmt::Display) -> Refusal {
    corrupt(format!("task record '{name}' is corrupt: it is a symbolic ref (to '{to}'), not a commit"))
        .hint(format!("delete the symbolic ref itself with 'git update-ref --no-deref -d {name}'"))
}

/// The tip task ref `name` points to: `None` if there is no such ref; a corrupt-class error
/// for a ref file that cannot be parsed or a symbolic ref.
pub fn tip_of(store: &Store, name: &str) -> Result<Option<ObjectId>> {
    match store.find_ref_settled(name).map_err(|_| corrupt_unparsable(store, name))? {
        // Folded: the archive holds its chain's tip (`store::archive`).
        None => super::archive::lookup(&store.repo, name),
        Some(git::Found::Direct(tip)) => Ok(Some(tip)),
        Some(git::Found::Symbolic(to)) => Err(corrupt_symbolic(name, to).into()),
    }
}

/// Decode an `op.json` and check its version. `Err` says what is wrong.
pub fn decode_op(bytes: &[u8]) -> Result<Op, String> {
    if let Some(problem) = super::limits::record_problem(OP_FILE, bytes.len()) {
        return Err(problem);
    }
    let op: Op = serde_json::from_slice(bytes).map_err(|err| format!("{OP_FILE}: {err}"))?;
    if op.version > OP_VERSION {
        return Err(format!("{OP_FILE} has version {}, written by a newer git-loop", op.version));
    }
    Ok(op)
}

/// Check one commit of task `id`'s chain from its files: an operation holds `op.json` and the
/// task folded up to it in `task.json`; the first commit of a chain (no parents) creates the
/// task, with a title; a merge of two histories (two parents or more) may hold `task.json`
/// alone. What every reader of a chain can rely on, and what a server accepts into one.
pub fn check_commit(
    id: &TaskId,
    parents: usize,
    task_json: Option<&[u8]>,
    op_json: Option<&[u8]>,
) -> Result<(), String> {
    let Some(task_json) = task_json else {
        return Err(format!("it has no {TASK_FILE}"));
    };
    let task = decode_task(Some(id.as_str()), task_json)?;
    let Some(op_json) = op_json else {
        return match parents {
            0 => Err(format!("it starts the chain but does not create the task: it has no {OP_FILE}")),
            1 => Err(format!("it has no {OP_FILE} (only a merge of two histories has none)")),
            _ => Ok(()),
        };
    };
    let op = decode_op(op_json)?;
    if parents == 0 {
        if op.change.create.is_none() {
            return Err(format!("it starts the chain but does not create the task ({OP_FILE} has no 'create')"));
        }
        if task.title.trim().is_empty() {
            return Err("it creates a task without a title".into());
        }
    }
    Ok(())
}

/// Read a task; `None` if no such task exists.
pub fn read(store: &Store, id: &TaskId) -> Result<Option<Snapshot>> {
    let name = refs::task(id);
    let Some(tip) = tip_of(store, &name)? else {
        return Ok(None);
    };
    Ok(Some(Snapshot { task: read_at(store, &name, tip)?, tip }))
}

/// One entry of the task refs: its id and tip, or why the ref itself cannot be read.
pub struct TaskRef {
    pub name: String,
    pub tip: Result<ObjectId, String>,
}

/// Every ref under `refs/loop/tasks/`, without reading the tasks.
pub fn list_refs(store: &Store) -> Result<Vec<TaskRef>> {
    let repo = &store.repo;
    let mut out = Vec::new();
    for listed in git::refs_prefixed(repo, refs::TASKS).context("could not list task refs")? {
        let (name, tip) = match listed {
            git::Listed::Ref { name, target: git::Found::Direct(tip) } => (name, Ok(tip)),
            git::Listed::Ref { name, target: git::Found::Symbolic(to) } => {
                let problem = corrupt_symbolic(&name, to).message;
                (name, Err(problem))
            }
            git::Listed::Unreadable(git::Unreadable::Ref(name)) => {
                let problem = corrupt_unparsable(store, &name).message;
                (name, Err(problem))
            }
            // Not a task's fault: reported as what it is.
            git::Listed::Unreadable(git::Unreadable::PackedRefs(line)) => {
                (git::packed::NAME.to_owned(), Err(line.describe(&git::packed::path(repo))))
            }
        };
        out.push(TaskRef { name, tip });
    }
    // Folded tasks, where no live ref shadows them, in the same (name) order.
    let archived = super::archive::under(repo, refs::TASKS)?;
    if !archived.is_empty() {
        let live: HashSet<String> = out.iter().map(|r| r.name.clone()).collect();
        out.extend(
            archived.into_iter().filter(|(n, _)| !live.contains(n)).map(|(name, tip)| TaskRef { name, tip: Ok(tip) }),
        );
        out.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Ok(out)
}

/// How a new task came to be stored.
pub enum Created {
    Stored(Box<Snapshot>),
    /// A task with that id already exists (kept untouched).
    Exists,
}

/// Store a new task `id` made by `change` (which must carry `create`).
pub fn create(store: &Store, ctx: &Context, id: &TaskId, change: Change) -> Result<Created> {
    debug_assert!(change.create.is_some());
    let name = refs::task(id);
    // gix's create-if-absent succeeds when the ref already holds exactly the new commit,
    // which an identical re-import would produce: look first.
    if git::ref_target(&store.repo, &name)?.is_some() {
        return Ok(Created::Exists);
    }
    let op = new_op(store, ctx, super::lamport::tick(store, 0)?, change)?;
    let mut task = Task::blank(id.as_str());
    fold(&mut task, &op);
    let commit = write_op_commit(store, ctx, &task, &op, &[])?;
    match cas::update(store, &name, Expect::Absent, commit, "loop: create task")? {
        Cas::Applied => Ok(Created::Stored(Box::new(Snapshot { task, tip: commit }))),
        Cas::Lost { .. } => Ok(Created::Exists),
    }
}

/// Store many new tasks at once (`import`): each `(id, change)` as `create` would, but the
/// objects written by `git fast-import` into one pack and the refs created in one transaction
/// straight into `packed-refs`, so a hundred thousand tasks leave neither loose objects nor
/// loose refs, and are all stored or none is. Ids that exist already are left untouched
/// (`Created::Exists`), as `create` does; every operation shares one tick of the clock (each
/// is the first of its own chain). Returns what happened to each, in the order given: the task
/// as stored, or `None` when it existed already.
pub fn create_all(
    store: &Store,
    ctx: &Context,
    tasks: Vec<(TaskId, Change)>,
) -> Result<Vec<(TaskId, Option<Snapshot>)>> {
    for (_, change) in &tasks {
        debug_assert!(change.create.is_some());
        change.check_sizes()?;
    }
    let layout = super::layout::Layout::of(store.common_dir());
    std::fs::create_dir_all(layout.root())?;
    let marks = layout.import_marks(ctx.pid);
    let settled = cas::until_settled("the imported tasks", ctx.pid, || {
        let existing: HashSet<String> = git::refs_prefixed(&store.repo, refs::TASKS)?
            .into_iter()
            .filter_map(|listed| match listed {
                git::Listed::Ref { name, .. } => Some(name),
                git::Listed::Unreadable(_) => None,
            })
            .collect();
        let absent: Vec<usize> = (0..tasks.len()).filter(|i| !existing.contains(&refs::task(&tasks[*i].0))).collect();
        if absent.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let lamport = super::lamport::tick(store, 0)?;
        let scratch = refs::import_scratch(ctx.pid);
        // What every operation of the import shares, read once (not a file read per task).
        let (writer, by, at) = (store.clone_id()?, store.identity.to_string(), ctx.now());
        let mut signature = Vec::new();
        store.identity.signature(at).write_to(&mut signature)?;
        let mut folded = Vec::with_capacity(absent.len());
        let marked = git::program::fast_import(store.common_dir(), &marks, |out| {
            for (n, i) in absent.iter().enumerate() {
                let (id, change) = &tasks[*i];
                let op = Op {
                    version: change.version_needed(),
                    lamport,
                    writer: writer.clone(),
                    at,
                    by: by.clone(),
                    change: change.clone(),
                };
                let mut task = Task::blank(id.as_str());
                fold(&mut task, &op);
                let mark = 3 * n as u64;
                for (offset, bytes) in [(1, serde_json::to_vec_pretty(&op)?), (2, serde_json::to_vec_pretty(&task)?)] {
                    write!(out, "blob\nmark :{}\ndata {}\n", mark + offset, bytes.len())?;
                    out.write_all(&bytes)?;
                    out.write_all(b"\n")?;
                }
                let message = format!("{}: {}\n", task.id, op.change.describe());
                write!(out, "reset {scratch}\ncommit {scratch}\nmark :{}\nauthor ", mark + 3)?;
                out.write_all(&signature)?;
                out.write_all(b"\ncommitter ")?;
                out.write_all(&signature)?;
                write!(out, "\ndata {}\n{message}\n", message.len())?;
                write!(out, "M 100644 :{} {OP_FILE}\nM 100644 :{} {TASK_FILE}\n\n", mark + 1, mark + 2)?;
                folded.push(task);
            }
            write!(out, "reset {scratch}\n\ndone\n")?;
            Ok(())
        });
        let _ = std::fs::remove_file(&marks);
        let ids: HashMap<u64, ObjectId> = marked?.into_iter().collect();
        let mut creates = Vec::with_capacity(absent.len());
        for (n, i) in absent.iter().enumerate() {
            let commit = ids.get(&(3 * n as u64 + 3)).copied().context("'git fast-import' gave no id to a commit")?;
            creates.push((refs::task(&tasks[*i].0), commit));
        }
        Ok(match cas::create_all(store, &creates, "loop: import tasks")? {
            cas::Batch::Applied => Some(
                absent
                    .into_iter()
                    .zip(creates.into_iter().zip(folded))
                    .map(|(i, ((_, tip), task))| (i, Snapshot { task, tip }))
                    .collect::<Vec<_>>(),
            ),
            cas::Batch::Lost => None,
        })
    })?;
    let mut stored: HashMap<usize, Snapshot> = settled.into_iter().collect();
    Ok(tasks.into_iter().enumerate().map(|(i, (id, _))| (id, stored.remove(&i))).collect())
}

/// Why an operation cannot be applied to the task as it stands now.
pub type Precondition<'a> = &'a dyn Fn(&Task) -> Result<(), Refusal>;

/// Append an operation to task `id`, retrying when another writer got there first.
/// `check` decides against the task as it is at that moment (it runs again on each retry).
pub fn update(store: &Store, ctx: &Context, id: &TaskId, change: Change, check: Precondition<'_>) -> Result<Snapshot> {
    let name = refs::task(id);
    cas::until_settled(&format!("task '{id}'"), ctx.pid, || {
        let Some(current) = read(store, id)? else {
            return Err(crate::error::usage(format!("task '{id}' does not exist"))
                .hint("list tasks with 'git loop list'")
                .into());
        };
        check(&current.task)?;
        // Above the task's own operations and everything else this clone has seen (another
        // task's operations, another clone's events it fetched): causal across tasks too.
        let op = new_op(store, ctx, super::lamport::tick(store, current.task.lamport)?, change.clone())?;
        let mut task = current.task.clone();
        fold(&mut task, &op);
        let commit = write_op_commit(store, ctx, &task, &op, &[current.tip])?;
        // A folded task changed is live again: its ref written anew on its archived tip.
        let expect =
            if git::ref_target(&store.repo, &name)?.is_some() { Expect::Is(current.tip) } else { Expect::Absent };
        Ok(match cas::update(store, &name, expect, commit, "loop: update task")? {
            Cas::Applied => Some(Snapshot { task, tip: commit }),
            Cas::Lost { .. } => None,
        })
    })
}

fn new_op(store: &Store, ctx: &Context, lamport: u64, change: Change) -> Result<Op> {
    change.check_sizes()?;
    Ok(Op {
        version: change.version_needed(),
        lamport,
        writer: store.clone_id()?,
        at: ctx.now(),
        by: store.identity.to_string(),
        change,
    })
}

fn write_op_commit(store: &Store, ctx: &Context, task: &Task, op: &Op, parents: &[ObjectId]) -> Result<ObjectId> {
    let repo = &store.repo;
    let task_blob = git::write_blob(repo, &serde_json::to_vec_pretty(task)?)?;
    let op_blob = git::write_blob(repo, &serde_json::to_vec_pretty(op)?)?;
    let tree = git::write_tree(repo, &[(OP_FILE, op_blob), (TASK_FILE, task_blob)])?;
    let message = format!("{}: {}\n", task.id, op.change.describe());
    git::write_commit(repo, tree, parents, &message, &store.identity.signature(ctx.now()))
}

/// How two tips of one task ref relate, and what the merged tip is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// Both sides are the same commit.
    Same,
    /// The local tip already contains the other side.
    LocalAhead,
    /// The other side contains the local tip: fast-forward to it.
    FastForward(ObjectId),
    /// Both sides had operations the other lacked: this merge commit holds them all.
    Merged(ObjectId),
}

/// Merge two tips of task ref `name` (see the module docs for the rule).
pub fn merge(repo: &gix::Repository, name: &str, local: ObjectId, other: ObjectId) -> Result<Merge> {
    if local == other {
        return Ok(Merge::Same);
    }
    let local_ops = collect_ops(repo, name, local)?;
    if local_ops.contains_key(&other) {
        return Ok(Merge::LocalAhead);
    }
    let other_ops = collect_ops(repo, name, other)?;
    if other_ops.contains_key(&local) {
        return Ok(Merge::FastForward(other));
    }
    let id = refs::task_id_of(name).context("not a task ref")?;
    let mut ops: Vec<(ObjectId, Op)> = local_ops
        .into_iter()
        .chain(other_ops)
        .filter_map(|(commit, op)| op.map(|op| (commit, op)))
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    ops.sort_by(|(a_id, a), (b_id, b)| (a.lamport, &a.writer, a_id).cmp(&(b.lamport, &b.writer, b_id)));
    let mut task = Task::blank(id);
    for (_, op) in &ops {
        fold(&mut task, op);
    }
    let task_blob = git::write_blob(repo, &serde_json::to_vec_pretty(&task)?)?;
    let tree = git::write_tree(repo, &[(TASK_FILE, task_blob)])?;
    // Deterministic: same parents give the same commit on every clone.
    let mut parents = [local, other];
    parents.sort();
    let seconds = parents
        .iter()
        .map(|p| repo.find_commit(*p).ok().and_then(|c| c.time().ok()).map_or(0, |t| t.seconds))
        .max()
        .unwrap_or(0);
    let sig = gix::actor::Signature {
        name: "git-loop".into(),
        email: "merge@git-loop".into(),
        time: gix::date::Time { seconds, offset: 0 },
    };
    let message = format!("{id}: merge\n");
    Ok(Merge::Merged(git::write_commit(repo, tree, &parents, &message, &sig)?))
}

/// Every commit reachable from `tip`, with its operation (merge commits, and operations a
/// repair skipped, have none). Any operation that cannot be read makes the chain corrupt.
fn collect_ops(repo: &gix::Repository, name: &str, tip: ObjectId) -> Result<HashMap<ObjectId, Option<Op>>> {
    let chain = read_chain(repo, name, tip, None)?;
    if let Some((commit, why)) = chain.unreadable.first() {
        return Err(corrupt_op(name, *commit, why).into());
    }
    Ok(chain.ops)
}

/// A task's operation chain as read back from a tip.
struct Chain {
    /// Every commit read, with its operation (`None`: a merge commit, or an operation that
    /// cannot be read).
    ops: HashMap<ObjectId, Option<Op>>,
    /// Operation commits whose `op.json` cannot be read and that no repair skips: (commit,
    /// why), in the order met.
    unreadable: Vec<(ObjectId, String)>,
    /// The commit without parents, if the walk reached it.
    root: Option<ObjectId>,
}

/// What a missing or unreadable object is, for a message.
fn object_problem(repo: &gix::Repository, id: ObjectId) -> String {
    if repo.has_object(id) {
        format!("object {id} cannot be read")
    } else {
        format!("object {id} is missing")
    }
}

/// One commit of a chain: its parents and its `op.json` (`None`: it has none; `Some(Err)`:
/// present but not an operation this build reads). `Err`: an object of it is missing or
/// unreadable.
#[allow(clippy::type_complexity)]
fn read_op_commit(repo: &gix::Repository, id: ObjectId) -> Result<(Vec<ObjectId>, Option<Result<Op, String>>), String> {
    let commit = repo.find_commit(id).map_err(|_| object_problem(repo, id))?;
    let decoded = commit.decode().map_err(|_| format!("commit {id} cannot be decoded"))?;
    let parents: Vec<ObjectId> = decoded.parents().collect();
    let tree_id = decoded.tree();
    let tree = repo.find_tree(tree_id).map_err(|_| object_problem(repo, tree_id))?;
    let Some(entry) = tree.find_entry(OP_FILE) else {
        return Ok((parents, None));
    };
    let blob_id = entry.object_id();
    // A record past the size limit is not read at all (a hostile push must not cost every
    // reader its size in memory).
    if let Ok(header) = repo.find_header(blob_id) {
        if let Some(problem) = super::limits::record_problem(OP_FILE, header.size() as usize) {
            return Ok((parents, Some(Err(problem))));
        }
    }
    let blob = repo.find_blob(blob_id).map_err(|_| object_problem(repo, blob_id))?;
    let op = serde_json::from_slice::<Op>(&blob.data).map_err(|err| format!("{OP_FILE}: {err}"));
    Ok((parents, Some(op)))
}

/// The refusal for a history with an object missing or unreadable: no commit on top can mend
/// it (the remote would refuse a push missing it), only the object itself.
pub fn corrupt_history(name: &str, why: &str) -> Refusal {
    corrupt(format!("task record '{name}' is corrupt: its history is incomplete: {why}")).hint(
        "copy the object back from a clone that has it ('git fetch --refetch <remote>' fetches every object again), then check with 'git loop doctor'",
    )
}

/// The refusal for an operation that cannot be read.
fn corrupt_op(name: &str, commit: ObjectId, why: &str) -> Refusal {
    corrupt(format!("task record '{name}' is corrupt: operation {commit} cannot be read: {why}")).hint(format!(
        "'git loop doctor --repair' folds the task from the operations that parse, in a commit on top; see the history with 'git log {name}'"
    ))
}

/// Read the chain of task ref `name` from `tip` back to its root, or, when `known` is given
/// (a tip whose chain was checked before), to `known` only. A missing or unreadable commit,
/// tree or `op.json` blob, and an operation of a newer version, are errors; an `op.json` that
/// does not parse is listed in `unreadable` unless a repair operation read on the way skips it.
fn read_chain(repo: &gix::Repository, name: &str, tip: ObjectId, known: Option<ObjectId>) -> Result<Chain, Refusal> {
    let mut chain = Chain { ops: HashMap::new(), unreadable: Vec::new(), root: None };
    let mut skipped = HashSet::new();
    let mut queue = VecDeque::from([tip]);
    let mut queued = HashSet::from([tip]);
    while let Some(commit) = queue.pop_front() {
        if Some(commit) == known && commit != tip {
            continue;
        }
        let (parents, op) = read_op_commit(repo, commit).map_err(|why| corrupt_history(name, &why))?;
        let op = match op {
            None => None,
            Some(Ok(op)) if op.version > OP_VERSION => {
                return Err(corrupt_task(
                    name,
                    format!("operation {commit} has version {}, written by a newer git-loop", op.version),
                )
                .hint("upgrade git-loop to read it"))
            }
            Some(Ok(op)) => {
                if let Some(repair) = &op.change.repair {
                    skipped.extend(repair.skipped.iter().filter_map(|c| ObjectId::from_hex(c.as_bytes()).ok()));
                }
                Some(op)
            }
            Some(Err(why)) => {
                chain.unreadable.push((commit, why));
                None
            }
        };
        if parents.is_empty() {
            chain.root = Some(commit);
        }
        chain.ops.insert(commit, op);
        for parent in parents {
            if queued.insert(parent) {
                queue.push_back(parent);
            }
        }
    }
    chain.unreadable.retain(|(commit, _)| !skipped.contains(commit));
    Ok(chain)
}

/// Check the history of task ref `name` from `tip`: every commit, tree and operation is
/// present, and every operation is one this build reads (or one a repair skipped). With
/// `known`, a tip of this ref checked before, only what was added since is read — a commit or
/// two — unless something fails, when the whole chain is read before deciding (a repair below
/// `known` may skip what another path reaches).
pub fn check_history(
    repo: &gix::Repository,
    name: &str,
    tip: ObjectId,
    known: Option<ObjectId>,
) -> Result<(), Refusal> {
    let mut chain = read_chain(repo, name, tip, known)?;
    if known.is_some() && !chain.unreadable.is_empty() {
        chain = read_chain(repo, name, tip, None)?;
    }
    match chain.unreadable.first() {
        Some((commit, why)) => Err(corrupt_op(name, *commit, why)),
        None => Ok(()),
    }
}

/// Read a task and check its whole history (see `check_history`): what the commands that act
/// on one task (`show`, `edit`, `done`) read, so that a missing object is found before the
/// task is shown or changed. `None` if no such task exists.
pub fn read_whole(store: &Store, id: &TaskId) -> Result<Option<Snapshot>> {
    let Some(snapshot) = read(store, id)? else {
        return Ok(None);
    };
    check_history(&store.repo, &refs::task(id), snapshot.tip, None)?;
    Ok(Some(snapshot))
}

/// How a task's chain stands, for `doctor`.
pub enum Health {
    Healthy,
    /// It cannot be read as it stands, but every object of its history is present, every
    /// version known and its creating operation readable: a repair (see `repair`) folds the
    /// task from the operations that parse, without rewriting anything.
    Repairable(Refusal),
    /// It cannot be read and no repair can fix it without losing or inventing data.
    Corrupt(Refusal),
}

/// Check task ref `name` at `tip` in full: its record, its history, and that the chain is this
/// task's (its creating commit names it).
pub fn health(store: &Store, name: &str, tip: ObjectId) -> Health {
    let repo = &store.repo;
    let Some(id) = task_id_of_ref(name) else {
        return Health::Corrupt(corrupt_task(name, "its name is not a valid task id"));
    };
    match repo.find_header(tip) {
        Ok(header) if header.kind() != gix::object::Kind::Commit => {
            let why = format!("it points to a {} ({tip}), not a commit", header.kind());
            return Health::Corrupt(corrupt_task(name, why));
        }
        Ok(_) => {}
        Err(_) => return Health::Corrupt(corrupt_history(name, &object_problem(repo, tip))),
    }
    let chain = match read_chain(repo, name, tip, None) {
        Ok(chain) => chain,
        Err(refusal) => return Health::Corrupt(refusal),
    };
    // A chain of another task (a ref pointed at the wrong tip) would be refolded under this
    // id: a copy, not a repair.
    if let Some(root) = chain.root {
        let subject = git::read_commit(repo, root).map(|(_, message)| message).unwrap_or_default();
        if !subject.starts_with(&format!("{id}: ")) {
            let first = subject.lines().next().unwrap_or_default().escape_debug().to_string();
            return Health::Corrupt(corrupt_task(name, format!("its first operation is not this task's: \"{first}\"")));
        }
    }
    let record = match git::read_commit_file(repo, tip, TASK_FILE) {
        Ok(Some(bytes)) => {
            let newer = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("version").and_then(|v| v.as_u64()))
                .is_some_and(|v| v > u64::from(TASK_VERSION));
            match parse_task(name, &bytes) {
                Err(err) if newer => return Health::Corrupt(refusal_of(err, name)),
                other => other.map(|_| ()),
            }
        }
        Ok(None) => Err(corrupt_task(name, format!("commit {tip} has no {TASK_FILE}")).into()),
        Err(err) => Err(corrupt_task(name, format!("{err:#}")).into()),
    };
    let problem = match (record, chain.unreadable.first()) {
        (Ok(()), None) => return Health::Healthy,
        (Err(err), _) => refusal_of(err, name),
        (Ok(()), Some((commit, why))) => corrupt_op(name, *commit, why),
    };
    let created = chain.ops.values().flatten().any(|op| op.change.create.is_some());
    if created {
        Health::Repairable(problem)
    } else {
        let prefix = format!("task record '{name}' is corrupt: ");
        let what = problem.message.strip_prefix(&prefix).unwrap_or(&problem.message);
        Health::Corrupt(corrupt_task(
            name,
            format!("{what}; its creating operation cannot be read either, so it cannot be folded again"),
        ))
    }
}

fn task_id_of_ref(name: &str) -> Option<TaskId> {
    refs::task_id_of(name).and_then(|id| id.parse().ok())
}

fn refusal_of(err: anyhow::Error, name: &str) -> Refusal {
    crate::error::find_refusal(&err).cloned().unwrap_or_else(|| corrupt_task(name, format!("{err:#}")))
}

/// What `repair` did.
pub enum RepairOutcome {
    /// A repair commit now tops the chain, skipping these operation commits.
    Repaired { snapshot: Box<Snapshot>, skipped: Vec<ObjectId> },
    /// The chain reads as it is.
    NotNeeded,
    /// No repair can fix it (why).
    Unrepairable(Refusal),
}

/// Repair task `id` without rewriting its history: a commit whose parent is the current tip,
/// whose `op.json` is a repair operation naming the operations that cannot be read, and whose
/// `task.json` is the task folded from the operations that parse (in the order merges use).
/// The ref moves forward by compare-and-swap, so every clone and the remote take it as a
/// fast-forward; the unreadable commits stay in the history.
pub fn repair(store: &Store, ctx: &Context, id: &TaskId) -> Result<RepairOutcome> {
    let name = refs::task(id);
    for _attempt in 0..16 {
        let Some(tip) = tip_of(store, &name)? else {
            return Ok(RepairOutcome::NotNeeded);
        };
        let why = match health(store, &name, tip) {
            Health::Healthy => return Ok(RepairOutcome::NotNeeded),
            Health::Corrupt(refusal) => return Ok(RepairOutcome::Unrepairable(refusal)),
            Health::Repairable(refusal) => refusal.message,
        };
        let chain = read_chain(&store.repo, &name, tip, None)?;
        let mut skipped: Vec<ObjectId> = chain.unreadable.iter().map(|(c, _)| *c).collect();
        skipped.sort();
        let mut ops: Vec<(ObjectId, Op)> = chain.ops.into_iter().filter_map(|(c, op)| op.map(|op| (c, op))).collect();
        ops.sort_by(|(a_id, a), (b_id, b)| (a.lamport, &a.writer, a_id).cmp(&(b.lamport, &b.writer, b_id)));
        let mut task = Task::blank(id.as_str());
        for (_, op) in &ops {
            fold(&mut task, op);
        }
        let change = Change {
            repair: Some(Repair { skipped: skipped.iter().map(ToString::to_string).collect(), reason: why }),
            ..Default::default()
        };
        let op = new_op(store, ctx, super::lamport::tick(store, task.lamport)?, change)?;
        fold(&mut task, &op);
        let commit = write_op_commit(store, ctx, &task, &op, &[tip])?;
        match cas::update(store, &name, Expect::Is(tip), commit, "loop: repair task")? {
            Cas::Applied => {
                return Ok(RepairOutcome::Repaired { snapshot: Box::new(Snapshot { task, tip: commit }), skipped })
            }
            Cas::Lost { .. } => continue,
        }
    }
    anyhow::bail!("task '{id}' kept changing under its repair (16 attempts); try again")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(lamport: u64, writer: &str, change: Change) -> Op {
        Op {
            version: OP_VERSION,
            lamport,
            writer: writer.into(),
            at: DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(lamport as i64),
            by: "t <t@t>".into(),
            change,
        }
    }

    #[test]
    fn folding_applies_sets_adds_and_removes_in_order() {
        let mut task = Task::blank("t-1");
        let create = Change {
            create: Some(Create { origin: None, created_at: None }),
            set: Fields { title: Some("a".into()), priority: Some(Priority::P2), ..Default::default() },
            add: Lists { labels: vec!["x".into()], ..Default::default() },
            ..Default::default()
        };
        fold(&mut task, &op(1, "a", create));
        fold(
            &mut task,
            &op(
                2,
                "b",
                Change {
                    set: Fields { priority: Some(Priority::P0), ..Default::default() },
                    add: Lists { after: vec!["t-0".into()], labels: vec!["y".into()], ..Default::default() },
                    remove: Lists { labels: vec!["x".into()], ..Default::default() },
                    ..Default::default()
                },
            ),
        );
        assert_eq!(task.title, "a");
        assert_eq!(task.priority, Priority::P0);
        assert_eq!(task.after, vec!["t-0".to_owned()]);
        assert_eq!(task.labels, vec!["y".to_owned()]);
        assert_eq!(task.lamport, 2);
    }

    #[test]
    fn edits_never_change_the_state() {
        let mut task = Task::blank("t-1");
        fold(
            &mut task,
            &op(
                2,
                "a",
                Change {
                    state: Some(StateChange { state: State::Done, reason: None, completion: None }),
                    ..Default::default()
                },
            ),
        );
        fold(
            &mut task,
            &op(
                2,
                "b",
                Change { set: Fields { title: Some("renamed".into()), ..Default::default() }, ..Default::default() },
            ),
        );
        assert_eq!((task.state, task.title.as_str()), (State::Done, "renamed"));
    }

    /// An operation on a task made after seeing another clone's clock 50 (say, a fetched
    /// event) sorts after it, though the task's own operations were at 1.
    #[test]
    fn a_task_operation_is_above_every_clock_the_clone_has_seen() {
        let (_dir, store) = crate::store::scratch();
        let ctx = Context::for_tests();
        let id: crate::ids::TaskId = "t-1".parse().expect("id");
        let create = Change {
            create: Some(Create { origin: None, created_at: None }),
            set: Fields { title: Some("t".into()), ..Default::default() },
            ..Default::default()
        };
        let Created::Stored(added) = super::create(&store, &ctx, &id, create).expect("create") else {
            panic!("a new task is created")
        };
        assert_eq!(added.task.lamport, 1);
        crate::store::lamport::witness(&store, 50).expect("witness");
        let change = Change {
            set: Fields { priority: Some(crate::ids::Priority::P0), ..Default::default() },
            ..Default::default()
        };
        let edited = update(&store, &ctx, &id, change, &|_| Ok(())).expect("update");
        assert_eq!(edited.task.lamport, 51);
    }
}
