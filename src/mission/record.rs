//! The mission record: `refs/loop/missions/<id>` points at a chain of commits, one per change,
//! each tree holding `mission.json` — the whole mission as it stands after that change (docs/
//! storage.md, "Mission record"). So `git log refs/loop/missions/<id>` is the mission's
//! history, and reading it is one blob.
//!
//! Every write is a compare-and-swap (`store::cas`) from the tip it read. A change is a
//! function of the record (`&dyn Fn(&mut Mission)`), so when another writer got there first
//! — a person adding a project while the commander records an outcome — it is simply applied
//! again to what is there now. Missions live in the clone they are commanded from: `sync`
//! does not exchange them.

use anyhow::Result;
use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::{corrupt, Refusal};
use crate::ids::TaskId;
use crate::ids::{MissionId, ProjectName};
use crate::refs;
use crate::store::cas::{self, Cas, Expect};
use crate::store::objects::PlainRef;
use crate::store::Store;

/// Version of `mission.json`; readers refuse newer ones.
pub const MISSION_VERSION: u32 = 1;

/// The mission record, in the tree of each commit of its chain.
pub const FILE: &str = "mission.json";

/// Where a mission stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissionState {
    /// Not run yet, or stopped by a budget or an interruption: `mission run` goes on.
    Open,
    /// A project failed or was incomplete; `reason` says which and why. `mission run` resumes.
    Paused,
    /// Every project is done.
    Complete,
    /// It will not be run again.
    Cancelled,
}

impl MissionState {
    pub fn as_str(self) -> &'static str {
        match self {
            MissionState::Open => "open",
            MissionState::Paused => "paused",
            MissionState::Complete => "complete",
            MissionState::Cancelled => "cancelled",
        }
    }
}

/// Where a project stands within its mission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not worked yet (or its last walk was interrupted or ran out of budget).
    Pending,
    /// A child walk was dispatched and has not been accounted for yet.
    Running,
    /// Every one of the mission's tasks in it is done (or cancelled).
    Done,
    /// Its walk drained, but some of the mission's tasks in it are not done.
    Incomplete,
    /// Its walk failed, paused, or never journaled how it ended.
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Done => "done",
            Status::Incomplete => "incomplete",
            Status::Failed => "failed",
        }
    }
}

/// How a project's last child walk went, as the commander recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub at: DateTime<Utc>,
    /// The termination key of the last child walk (its journal chain in the project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// How that walk ended (`no_work`, `done`, `budget`, `paused`, `interrupted`), if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walker: Option<String>,
    /// Tasks that walk closed, and of those how many succeeded and failed.
    #[serde(default)]
    pub closed: u32,
    #[serde(default)]
    pub succeeded: u32,
    #[serde(default)]
    pub failed: u32,
    /// Sessions that walk ran, when it journaled them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u32>,
    /// The mission's tasks in the project, and how many of them are done (or cancelled).
    #[serde(default)]
    pub tasks_done: u32,
    #[serde(default)]
    pub tasks_total: u32,
    /// Why the project is not done, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One project: a repository, the wave it belongs to, which of its tasks are the mission's,
/// and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Project {
    pub name: String,
    pub wave: u32,
    /// A local repository (absolute path) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// ... or a URL the commander clones (under `<git-common-dir>/loop/missions/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The mission's tasks are those with this label ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// ... or exactly these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    pub status: Status,
    /// Child walks dispatched for it, over every run of the mission.
    #[serde(default)]
    pub dispatches: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
}

/// Where a project's repository is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Path(String),
    Url(String),
}

/// Which of a project's tasks belong to the mission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    Label(String),
    Tasks(Vec<String>),
}

impl Project {
    pub fn source(&self) -> Source {
        match (&self.path, &self.url) {
            (Some(path), _) => Source::Path(path.clone()),
            (None, Some(url)) => Source::Url(url.clone()),
            (None, None) => unreachable!("checked when the record is read or written"),
        }
    }

    pub fn selection(&self) -> Selection {
        match &self.label {
            Some(label) => Selection::Label(label.clone()),
            None => Selection::Tasks(self.tasks.clone()),
        }
    }

    /// "label m1" or "tasks t-1, t-2", for people.
    pub fn describe_selection(&self) -> String {
        match self.selection() {
            Selection::Label(label) => format!("label {label}"),
            Selection::Tasks(ids) => format!("task{} {}", if ids.len() == 1 { "" } else { "s" }, ids.join(", ")),
        }
    }

    /// The path or URL, for people.
    pub fn location(&self) -> String {
        match self.source() {
            Source::Path(p) | Source::Url(p) => p,
        }
    }
}

/// A mission: the content of `mission.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mission {
    pub version: u32,
    pub id: String,
    pub title: String,
    pub state: MissionState,
    /// Why it is paused, cancelled, or stopped early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// In the order they were added; `waves()` groups them.
    #[serde(default)]
    pub projects: Vec<Project>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub updated_at: DateTime<Utc>,
}

impl Mission {
    /// The waves, lowest first, each with its projects in the order they were added.
    pub fn waves(&self) -> Vec<(u32, Vec<&Project>)> {
        let mut numbers: Vec<u32> = self.projects.iter().map(|p| p.wave).collect();
        numbers.sort_unstable();
        numbers.dedup();
        numbers.into_iter().map(|n| (n, self.projects.iter().filter(|p| p.wave == n).collect())).collect()
    }

    /// The lowest wave with a project that is not done: the wave being worked.
    pub fn current_wave(&self) -> Option<u32> {
        self.projects.iter().filter(|p| p.status != Status::Done).map(|p| p.wave).min()
    }

    pub fn project(&self, name: &str) -> Option<&Project> {
        self.projects.iter().find(|p| p.name == name)
    }

    pub fn project_mut(&mut self, name: &str) -> Option<&mut Project> {
        self.projects.iter_mut().find(|p| p.name == name)
    }

    pub fn is_complete(&self) -> bool {
        !self.projects.is_empty() && self.projects.iter().all(|p| p.status == Status::Done)
    }

    pub fn mission_id(&self) -> MissionId {
        self.id.parse().expect("ids are validated before a mission is stored or read")
    }

    /// Check what a reader relies on; the problem, if any.
    fn check(&self) -> Result<(), String> {
        self.id.parse::<MissionId>().map_err(|r| r.message)?;
        let mut names = std::collections::HashSet::new();
        for p in &self.projects {
            p.name.parse::<ProjectName>().map_err(|r| r.message)?;
            if !names.insert(p.name.as_str()) {
                return Err(format!("project '{}' appears twice", p.name));
            }
            if p.path.is_some() == p.url.is_some() {
                return Err(format!("project '{}' needs exactly one of path and url", p.name));
            }
            if p.label.is_some() != p.tasks.is_empty() {
                return Err(format!("project '{}' needs exactly one of label and tasks", p.name));
            }
            if let Some(bad) = p.tasks.iter().find(|t| t.parse::<TaskId>().is_err()) {
                return Err(format!(
                    "project '{}' names task '{}', which is not a task id",
                    p.name,
                    bad.escape_debug()
                ));
            }
            if p.wave == 0 {
                return Err(format!("project '{}' is in wave 0; waves count from 1", p.name));
            }
        }
        Ok(())
    }
}

/// A mission as read from its ref.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub mission: Mission,
    /// The commit the ref pointed to when read.
    pub tip: ObjectId,
}

/// The refusal for an unreadable mission record, naming its ref and the repair.
pub fn corrupt_mission(name: &str, why: impl std::fmt::Display) -> Refusal {
    corrupt(format!("mission record '{name}' is corrupt: {why}")).hint(format!(
        "see its history with 'git log {name}'; point it at a good commit with 'git update-ref {name} <commit>'"
    ))
}

/// Read the mission at commit `tip` of ref `name`.
fn read_at(store: &Store, name: &str, tip: ObjectId) -> Result<Mission, Refusal> {
    let bytes = match store.read_commit_file(tip, FILE) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(corrupt_mission(name, format!("commit {tip} has no {FILE}"))),
        Err(err) => return Err(corrupt_mission(name, format!("{err:#}"))),
    };
    parse(name, &bytes)
}

/// Parse and check the `mission.json` of ref `name`.
fn parse(name: &str, bytes: &[u8]) -> Result<Mission, Refusal> {
    decode(refs::mission_id_of(name), bytes).map_err(|why| corrupt_mission(name, why))
}

/// Decode a `mission.json` and check it: its version is known, it is whole, and it holds
/// mission `id` when given. `Err` says what is wrong. The one definition of a readable mission
/// record (the server's pre-receive hook uses it too).
pub fn decode(id: Option<&str>, bytes: &[u8]) -> Result<Mission, String> {
    let mission: Mission = serde_json::from_slice(bytes).map_err(|err| format!("{FILE}: {err}"))?;
    if mission.version > MISSION_VERSION {
        return Err(format!("record version {} was written by a newer git-loop", mission.version));
    }
    if id.is_some_and(|id| id != mission.id) {
        return Err(format!("it holds mission '{}'", mission.id.escape_debug()));
    }
    mission.check()?;
    Ok(mission)
}

/// Read mission `id`; `None` if there is no such mission.
pub fn read(store: &Store, id: &MissionId) -> Result<Option<Snapshot>> {
    let name = refs::mission(id);
    let tip = store.ref_target(&name).map_err(|_| corrupt_mission(&name, "the ref file cannot be parsed"))?;
    let Some(tip) = tip else {
        return Ok(None);
    };
    Ok(Some(Snapshot { mission: read_at(store, &name, tip)?, tip }))
}

/// Read mission `id`, which must exist.
pub fn require(store: &Store, id: &MissionId) -> Result<Snapshot> {
    read(store, id)?.ok_or_else(|| {
        crate::error::usage(format!("there is no mission '{id}'"))
            .hint("list missions with 'git loop mission list', or add one with 'git loop mission add'")
            .into()
    })
}

/// One entry of `list`.
pub enum Listed {
    Mission(Box<Snapshot>),
    /// A mission ref whose record cannot be read.
    Corrupt {
        name: String,
        problem: String,
    },
}

/// Every mission, in id order.
pub fn list(store: &Store) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    for listed in store.refs_listed_plainly(refs::MISSIONS, "refs/loop/missions/(unreadable)")? {
        let (name, tip) = match listed {
            PlainRef::Direct { name, id } => (name, id),
            PlainRef::Unparsable { name } => {
                let problem = corrupt_mission(&name, "the ref file cannot be parsed").message;
                out.push(Listed::Corrupt { name, problem });
                continue;
            }
            PlainRef::Symbolic { name } => {
                out.push(Listed::Corrupt { problem: corrupt_mission(&name, "it is a symbolic ref").message, name });
                continue;
            }
        };
        match read_at(store, &name, tip) {
            Ok(mission) => out.push(Listed::Mission(Box::new(Snapshot { mission, tip }))),
            Err(refusal) => out.push(Listed::Corrupt { name, problem: refusal.message }),
        }
    }
    out.sort_by(|a, b| key(a).cmp(key(b)));
    Ok(out)
}

fn key(listed: &Listed) -> &str {
    match listed {
        Listed::Mission(s) => &s.mission.id,
        Listed::Corrupt { name, .. } => name,
    }
}

/// How `create` went.
pub enum Created {
    Stored(Box<Snapshot>),
    /// A mission with that id already exists (left untouched).
    Exists,
}

/// Store a new, empty mission.
pub fn create(store: &Store, ctx: &Context, id: &MissionId, title: &str) -> Result<Created> {
    let name = refs::mission(id);
    let now = ctx.now();
    let mission = Mission {
        version: MISSION_VERSION,
        id: id.to_string(),
        title: title.to_owned(),
        state: MissionState::Open,
        reason: None,
        projects: Vec::new(),
        created_at: now,
        created_by: store.identity.to_string(),
        updated_at: now,
    };
    let commit = write_commit(store, ctx, &mission, "add", &[])?;
    match cas::update(store, &name, Expect::Absent, commit, "loop: add mission")? {
        Cas::Applied => Ok(Created::Stored(Box::new(Snapshot { mission, tip: commit }))),
        Cas::Lost { .. } => Ok(Created::Exists),
    }
}

/// A change to a mission; it decides against the mission as it is at that moment, and runs
/// again when another writer got there first.
pub type Change<'a> = &'a dyn Fn(&mut Mission) -> Result<(), Refusal>;

/// Apply `change` to mission `id` by compare-and-swap; `what` is the commit's subject.
pub fn update(store: &Store, ctx: &Context, id: &MissionId, what: &str, change: Change<'_>) -> Result<Snapshot> {
    let name = refs::mission(id);
    cas::until_settled(&format!("mission '{id}'"), ctx.pid, || {
        let current = require(store, id)?;
        let mut mission = current.mission.clone();
        change(&mut mission)?;
        mission.check().map_err(|why| anyhow::anyhow!("this change would make mission '{id}' invalid: {why}"))?;
        if mission == current.mission {
            return Ok(Some(current));
        }
        mission.updated_at = ctx.now();
        let commit = write_commit(store, ctx, &mission, what, &[current.tip])?;
        Ok(match cas::update(store, &name, Expect::Is(current.tip), commit, "loop: update mission")? {
            Cas::Applied => Some(Snapshot { mission, tip: commit }),
            Cas::Lost { .. } => None,
        })
    })
}

fn write_commit(store: &Store, ctx: &Context, mission: &Mission, what: &str, parents: &[ObjectId]) -> Result<ObjectId> {
    let json = serde_json::to_vec_pretty(mission)?;
    let message = format!("{}: {what}\n", mission.id);
    store.write_file_commit(&[(FILE, &json)], parents, &message, &store.identity.signature(ctx.now()))
}
