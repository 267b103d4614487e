//! The journal's events as types: one enum, every event git-loop journals written and read
//! through it — crash recovery, race resumption, try numbering, status, `log --json` and the
//! `run --json` stream — so that renaming a field is a compile error rather than a silent
//! recovery bug, and the journal, the stream and the log speak one vocabulary.
//!
//! Each is stored as a journal event's `kind` and `data` (docs/storage.md, "Journal event"):
//! `Recorded` is serde's adjacently tagged form of exactly those two fields (`kind` names the
//! arm, `data` holds its fields). Fields added later are `#[serde(default)]`, so events
//! written by earlier versions still read; fields this version does not know (a later
//! version's) are ignored. An event of a kind this version does not know — a newer version's,
//! one added by `git loop journal append`, or a known kind whose data does not read — is
//! `Recorded::Other`, its kind and data kept as they were and written back unchanged: nothing
//! is dropped, and nothing below believes it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::journal::Event;

/// The data of an event this version does not read: kept and shown as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Unknown {
    pub kind: String,
    pub data: serde_json::Map<String, serde_json::Value>,
}

macro_rules! recorded {
    ($($(#[$doc:meta])* $arm:ident($ty:ty) = $kind:literal,)*) => {
        /// An event of the journal.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(remote = "Self", tag = "kind", content = "data")]
        pub enum Recorded {
            $($(#[$doc])* #[serde(rename = $kind)] $arm($ty),)*
            /// An event of a kind this version does not read (see the module's note).
            #[serde(skip)]
            Other(Unknown),
        }

        impl Recorded {
            /// The kind it is journaled as.
            pub fn kind(&self) -> &str {
                match self {
                    $(Recorded::$arm(_) => $kind,)*
                    Recorded::Other(unknown) => &unknown.kind,
                }
            }

            /// Every kind this version reads (for docs and tests).
            pub const KINDS: &'static [&'static str] = &[$($kind,)*];
        }
    };
}

recorded! {
    // Backlog.
    /// A task was added.
    TaskAdded(TaskAdded) = "task_added",
    /// A task's fields were edited.
    TaskEdited(TaskEdited) = "task_edited",
    /// Tasks were imported from another tracker.
    TasksImported(TasksImported) = "tasks_imported",
    /// A person assigned the task to an agent.
    TaskReassigned(TaskReassigned) = "task_reassigned",
    /// `doctor --repair` repaired a task's chain.
    TaskRepaired(TaskRepaired) = "task_repaired",
    // States.
    /// A task was reopened.
    TaskReopened(StateChanged) = "task_reopened",
    /// A task was done, by the loop or by hand.
    TaskDone(TaskDone) = "task_done",
    TaskParked(StateChanged) = "task_parked",
    TaskCancelled(StateChanged) = "task_cancelled",
    TaskNeedsDecision(StateChanged) = "task_needs_decision",
    TaskNeedsYou(StateChanged) = "task_needs_you",
    TaskTakenOver(StateChanged) = "task_taken_over",
    TaskFailed(StateChanged) = "task_failed",
    /// A person handed a task they had taken over back to the loop (`continue`), or landed
    /// its work themselves (`keep`).
    HandedBack(HandedBack) = "handed_back",
    /// A person acted on a task from the web board (`git loop serve`): the verb, who, and from
    /// where, after the verb's own events (or alone, when it was refused).
    BoardAction(BoardAction) = "board_action",
    // People.
    /// A person took a task over: its try is theirs.
    TakenOver(TakenOver) = "taken_over",
    /// The walk asked a session to wrap up.
    WrapUpRequested(WrapUpRequested) = "wrap_up_requested",
    /// The task went from one agent to another (reassigned, restarted, unreachable).
    HandedOver(HandedOver) = "handed_over",
    // Walks.
    /// A walk began.
    WalkStarted(WalkStarted) = "walk_started",
    /// A walk paused (a pause policy fired).
    WalkPaused(WalkPaused) = "walk_paused",
    /// A walk ended.
    WalkEnded(WalkEnded) = "walk_ended",
    /// How a walk ended, under the key its caller (a mission) gave it.
    WalkTerminated(WalkTerminated) = "walk_terminated",
    /// The walk claimed a task.
    Claimed(Claimed) = "claimed",
    /// The walk recovered what a crashed walk left.
    Recovered(Recovered) = "recovered",
    /// A done task's branch was not merged into the base (written by versions before the
    /// landing queue; still read).
    MergeSkipped(MergeSkipped) = "merge_skipped",
    // Landing.
    /// A done task's work landed on a target branch (the landing queue).
    TaskLanded(TaskLanded) = "task_landed",
    /// A done task's work could not land: its merge conflicts, or the checks fail on it.
    LandingFailed(LandingFailed) = "landing_failed",
    /// A conflict-resolver session began on a merge that conflicts (a landing's, or a
    /// dependency's merge into a new task branch).
    ConflictResolving(ConflictResolving) = "conflict_resolving",
    /// A conflict resolver resolved its merge: the resolved merge commit.
    ConflictResolved(ConflictResolved) = "conflict_resolved",
    /// A conflict resolver could not resolve its merge, and why.
    ConflictUnresolved(ConflictUnresolved) = "conflict_unresolved",
    /// A try of a task whose landing conflicted began as the merge of its task branch into the
    /// target, in progress (a person's take-over, or the walk's next try). Added later.
    MergeStarted(MergeStarted) = "merge_started",
    // Landing through the forge.
    /// A pull or merge request was opened for a done task (or found, opened before).
    PrOpened(PrOpened) = "pr_opened",
    /// The forge's CI on a request's head came to a verdict (said once per head and verdict).
    PrChecks(PrChecks) = "pr_checks",
    /// A review of a request (said once per review).
    PrReview(PrReview) = "pr_review",
    /// A request was merged: its task landed (a `task_landed` follows).
    PrMerged(PrMerged) = "pr_merged",
    /// A request was closed without merging: its task is parked.
    PrClosed(PrClosed) = "pr_closed",
    // Sync.
    /// Two clones' copies of a forward-only ref diverged.
    RefDiverged(RefDiverged) = "ref_diverged",
    // Tries.
    /// A try's branch and worktree are ready for an agent.
    TryOpened(TryOpened) = "try_opened",
    /// A try passed: its agent said done and its checks passed.
    TryPassed(TryPassed) = "try_passed",
    /// The checks ran on a try.
    Checks(Checks) = "checks",
    /// The setup command (`loop.setup`) ran in a new try worktree. Added later.
    SetUp(SetUp) = "worktree_set_up",
    /// The review command ran on a try.
    Review(Review) = "review",
    /// A reviewer session began on a try's work (one review round, one reviewer).
    ReviewStarted(ReviewStarted) = "review_started",
    /// A reviewer's verdict on a try's work, or that it gave none it could keep to.
    ReviewVerdict(ReviewVerdict) = "review_verdict",
    /// A walk lets reviewers review workers of the same (or an unknown) provider, and why.
    ReviewOverride(ReviewOverride) = "review_override",
    /// The walk closed its unit of work on a task.
    UnitClosed(UnitClosed) = "unit_closed",
    /// The walk left its unit of work on a task open.
    UnitAbandoned(UnitAbandoned) = "unit_abandoned",
    // Sessions.
    /// An agent session began on a try.
    SessionStarted(SessionStarted) = "session_started",
    /// An agent session ended.
    SessionEnded(SessionEnded) = "session_ended",
    /// An agent's verdict (`git loop finish`).
    Termination(Termination) = "termination",
    /// A session's result asked for a follow-up task, and it was added.
    FollowUp(FollowUp) = "follow_up",
    /// A session's result file did not read (written by earlier releases; now
    /// `contract_violation`).
    ResultInvalid(ResultInvalid) = "result_invalid",
    /// A role's session reported something its contract does not allow.
    ContractViolation(ContractViolation) = "contract_violation",
    /// An agent's CLI said it cannot be reached.
    AgentUnreachable(AgentUnreachable) = "agent_unreachable",
    /// An agent CLI's hook ran.
    AgentHook(AgentHook) = "agent_hook",
    /// An agent CLI's hook failed before it could handle its event.
    AgentHookFailed(AgentHookFailed) = "agent_hook_failed",
    /// A session tried what it may not: a write naming another task, a command the loop runs
    /// itself, a report git-loop would not write. Refused; the task it named is unchanged.
    AgentOverreach(AgentOverreach) = "agent_overreach",
    /// A setting that steers walks changed since the last walk, or while a session ran.
    SettingsChanged(SettingsChanged) = "settings_changed",
    // Races.
    /// A race began: each agent on its own try, all from `start`.
    RaceStarted(RaceStarted) = "race_started",
    /// One entrant of a race ended.
    EntrantEnded(EntrantEnded) = "entrant_ended",
    /// The judge ran on a race's passing tries.
    Judged(Judged) = "judged",
    /// A race has its winner.
    RaceWon(RaceWon) = "race_won",
    /// A race ended without a winner to close it with.
    RaceEnded(RaceEnded) = "race_ended",
    // Missions.
    MissionStarted(MissionStarted) = "mission_started",
    ProjectDispatched(ProjectDispatched) = "project_dispatched",
    ProjectClosed(ProjectClosed) = "project_closed",
    MissionEnded(MissionEnded) = "mission_ended",
}

impl Serialize for Recorded {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Recorded::Other(unknown) => {
                use serde::ser::SerializeStruct as _;
                let mut tagged = serializer.serialize_struct("Recorded", 2)?;
                tagged.serialize_field("kind", &unknown.kind)?;
                tagged.serialize_field("data", &unknown.data)?;
                tagged.end()
            }
            known => Recorded::serialize(known, serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Recorded {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Recorded, D::Error> {
        let mut value = serde_json::Value::deserialize(deserializer)?;
        if let Ok(known) = Recorded::deserialize(&value) {
            return Ok(known);
        }
        let kind = match value.get_mut("kind").map(serde_json::Value::take) {
            Some(serde_json::Value::String(kind)) => kind,
            _ => return Err(serde::de::Error::missing_field("kind")),
        };
        let data = match value.get_mut("data").map(serde_json::Value::take) {
            Some(serde_json::Value::Object(data)) => data,
            _ => serde_json::Map::new(),
        };
        Ok(Recorded::Other(Unknown { kind, data }))
    }
}

impl Recorded {
    /// The event `event` is: of its kind if it reads as one, else `Other`.
    pub fn of(event: &Event) -> Recorded {
        Recorded::from_parts(&event.kind, &event.data)
    }

    /// The event journaled as `kind` with `data`.
    pub fn from_parts(kind: &str, data: &serde_json::Map<String, serde_json::Value>) -> Recorded {
        let tagged = serde_json::json!({ "kind": kind, "data": data });
        Recorded::deserialize(&tagged)
            .unwrap_or_else(|_| Recorded::Other(Unknown { kind: kind.to_owned(), data: data.clone() }))
    }

    /// The kind and data to journal it as.
    pub fn into_parts(self) -> (String, serde_json::Map<String, serde_json::Value>) {
        if let Recorded::Other(unknown) = self {
            return (unknown.kind, unknown.data);
        }
        let mut tagged = match serde_json::to_value(self).expect("events serialize") {
            serde_json::Value::Object(map) => map,
            _ => unreachable!("an adjacently tagged enum serializes to an object"),
        };
        let kind = tagged.remove("kind").and_then(|k| k.as_str().map(ToOwned::to_owned)).expect("a kind");
        let data = match tagged.remove("data") {
            Some(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        (kind, data)
    }

    /// A task's change of state, as the event of entering `state` (`task_parked`, …).
    pub fn entered(state: crate::store::task::State, change: StateChanged) -> Recorded {
        use crate::store::task::State;
        match state {
            State::Open => Recorded::TaskReopened(change),
            State::Done => Recorded::TaskDone(TaskDone {
                from: Some(change.from),
                to: Some(change.to),
                reason: change.reason,
                by: Some(change.by),
                ..Default::default()
            }),
            State::Parked => Recorded::TaskParked(change),
            State::Cancelled => Recorded::TaskCancelled(change),
            State::NeedsDecision => Recorded::TaskNeedsDecision(change),
            State::NeedsYou => Recorded::TaskNeedsYou(change),
            State::TakenOver => Recorded::TaskTakenOver(change),
            State::Failed => Recorded::TaskFailed(change),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskAdded {
    #[serde(default)]
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskEdited {}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TasksImported {
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub added: usize,
    #[serde(default)]
    pub skipped: usize,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskReassigned {
    /// The agent that had it, if any.
    #[serde(default)]
    pub from: Option<String>,
    pub to: String,
    /// Why a person overrode the task's agents, if they did.
    #[serde(default, rename = "override")]
    pub override_reason: Option<String>,
    #[serde(default)]
    pub by: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskRepaired {
    #[serde(default)]
    pub tip: String,
    #[serde(default)]
    pub skipped: Vec<String>,
}

/// A task's change of state (`task_parked`, `task_failed`, …).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StateChanged {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub by: String,
    /// The session it stopped (`stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The walk that moved it, or whose session was stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walker: Option<String>,
    /// The try the walk closed it on.
    #[serde(default, rename = "try", skip_serializing_if = "Option::is_none")]
    pub number: Option<u32>,
    /// Who took it over (`take-over`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
}

/// What a task's completion replaced (`done` again on a done task).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Replaced {
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskDone {
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Replaced>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TakenOver {
    #[serde(rename = "try")]
    pub number: u32,
    #[serde(default)]
    pub head: Option<String>,
    #[serde(default)]
    pub worktree: String,
    #[serde(default)]
    pub by: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WrapUpRequested {
    #[serde(default)]
    pub session: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub interrupted: bool,
    #[serde(default)]
    pub within_s: u64,
}

/// One agent, or the agents of a race.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Agents {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandedOver {
    pub from: String,
    pub to: Agents,
    #[serde(default)]
    pub why: String,
    #[serde(default)]
    pub session: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WalkStarted {
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub parallel: u32,
    #[serde(default)]
    pub labels: Vec<String>,
    /// The walk's key (also its journal chain's writer). Added later: absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walker: Option<String>,
    /// Its limits. Added later: absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_units: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_unit_dispatches: Option<u32>,
    /// Its budgets in money and tokens (`--budget-usd`, `--budget-tokens`). Added later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u64>,
    /// The mission it works for (`--mission`). Added later: absent before, and for a walk of
    /// no mission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission: Option<String>,
    /// How its sessions and checks run: `confined`, `unconfined` (the machine could not), or
    /// `off` (`loop.sandbox = off`). Added later: absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WalkPaused {
    /// Why, in words.
    #[serde(default)]
    pub policy: String,
    /// The tasks whose failures paused it.
    #[serde(default)]
    pub units: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WalkEnded {
    /// How it stopped (`done`, `paused`, `interrupted`, …).
    #[serde(default)]
    pub stop: String,
    #[serde(default)]
    pub closed: u32,
    #[serde(default)]
    pub succeeded: u32,
    #[serde(default)]
    pub failed: u32,
    /// Units left open. Added later: absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned: Option<u32>,
    #[serde(default)]
    pub dispatches: u32,
    #[serde(default)]
    pub error: Option<String>,
    /// What the walk's sessions spent: dollars (reported and estimated), tokens, and how many
    /// sessions' spend is unknown. Added later: absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_unknown: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WalkTerminated {
    #[serde(default)]
    pub stop: String,
    #[serde(default)]
    pub walker: Option<String>,
    #[serde(default)]
    pub closed: u32,
    #[serde(default)]
    pub succeeded: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Claimed {
    #[serde(default)]
    pub title: String,
    /// Added later: absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
}

/// What a walk recovered: a crashed session, a dead walk's claim, or a try's worktree.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Recovered {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walker: Option<String>,
    #[serde(default, rename = "try", skip_serializing_if = "Option::is_none")]
    pub number: Option<u32>,
    #[serde(default)]
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MergeSkipped {
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskLanded {
    /// The target branch (full ref name).
    pub into: String,
    /// The commit the target moved to, holding the task's work.
    pub commit: String,
    /// The task branch's head that landed.
    #[serde(default)]
    pub head: String,
    /// The target's commit before (the batch was merged onto it).
    #[serde(default)]
    pub from: Option<String>,
    /// How many tasks landed in the same move of the target.
    #[serde(default)]
    pub batch: usize,
    /// The checks that passed on the merged result (none: landed on the merge alone).
    #[serde(default)]
    pub checks: Option<String>,
    /// Who landed it (the lander's holder name).
    #[serde(default)]
    pub lander: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PrOpened {
    /// `github`, `gitlab` or `forgejo`.
    pub forge: String,
    pub number: u64,
    #[serde(default)]
    pub url: String,
    /// The branch it merges (short name on the remote) and into (full ref name).
    #[serde(default)]
    pub branch: String,
    #[serde(default)]
    pub into: String,
    /// The task branch's head pushed for it.
    #[serde(default)]
    pub head: String,
    /// Found on the forge, opened before (by a run that stopped, or another clone).
    #[serde(default)]
    pub found: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PrChecks {
    pub number: u64,
    /// The request's head the verdict is on.
    pub head: String,
    /// `pending`, `passing`, `failing` or `none`.
    pub verdict: String,
    /// The failing checks and what each said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
    /// The task went back to its agent with these words.
    #[serde(default)]
    pub sent_back: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PrReview {
    pub number: u64,
    /// The forge's id of the review.
    pub id: String,
    /// `approved`, `changes_requested` or `commented`.
    pub state: String,
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub body: String,
    /// The task went back to its agent with these words.
    #[serde(default)]
    pub sent_back: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PrMerged {
    pub number: u64,
    /// The commit the merge made on the target.
    #[serde(default)]
    pub commit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PrClosed {
    pub number: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LandingFailed {
    /// The target branch (full ref name).
    pub into: String,
    /// `conflict`, `checks` or `summary` (its summarizer wrote no message).
    pub cause: String,
    /// Why, in words (the conflicting paths, or the checks' exit and the tail of their output).
    #[serde(default)]
    pub reason: String,
    /// The conflicting paths (`conflict`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The checks' output (`checks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The task branch's head that could not land.
    #[serde(default)]
    pub head: String,
    /// The target's commit it was merged onto.
    #[serde(default)]
    pub onto: String,
    #[serde(default)]
    pub lander: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RefDiverged {
    #[serde(rename = "ref")]
    pub name: String,
    #[serde(default)]
    pub kept_as: String,
    #[serde(default)]
    pub ours: Option<String>,
    #[serde(default)]
    pub theirs: Option<String>,
    #[serde(default)]
    pub rule: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TryOpened {
    #[serde(rename = "try")]
    pub number: u32,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub branch: String,
    #[serde(default)]
    pub worktree: String,
    /// An unfinished try taken up again.
    #[serde(default)]
    pub resumed: bool,
    /// A race entrant's try (a race finds its own tries again; the walk's unit does not).
    #[serde(default)]
    pub race: bool,
    /// How its new worktree was warmed (`loop.warm`). Added later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmed: Option<Warmed>,
    /// How its worktree was made: added, or a pooled one checked out in place (`loop.pool`).
    /// Added later; absent when the worktree was there already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<Checkout>,
}

/// How a try's worktree was made (`try_opened`'s `checkout`, docs/storage.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkout {
    /// `added` (made from nothing) or `pooled` (a finished try's worktree checked out in place).
    pub how: String,
    pub elapsed_ms: u64,
    /// Pooled from another task's try (`loop.pool.share`): what git ignores in it came along.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    /// Pooled: the worktree it was (`<task>-<n>`), and the files written, removed and kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<u64>,
}

/// How a try's new worktree was warmed (`try_opened`'s `warmed`, docs/storage.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warmed {
    /// `checkout` (the main checkout), or `try <n>` (an earlier try's worktree).
    pub from: String,
    /// The paths warmed, directories with a trailing `/`.
    pub paths: Vec<String>,
    /// `reflink`, `copy`, or `reflink and copy`.
    pub method: String,
    pub bytes: u64,
    pub files: u64,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaceStarted {
    pub agents: Vec<String>,
    pub tries: Vec<u32>,
    /// How the winner is picked (`first`, `judge`).
    #[serde(default)]
    pub pick: String,
    /// The commit every entrant starts from.
    #[serde(default)]
    pub start: Option<String>,
    /// The unit's own try the race grew from, if any.
    #[serde(default)]
    pub from_try: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntrantEnded {
    #[serde(rename = "try")]
    pub number: u32,
    #[serde(default)]
    pub agent: String,
    /// `passed`, `failed`, `blocked`, `stopped`, `unreachable`.
    pub outcome: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub checks: Option<serde_json::Value>,
    #[serde(default)]
    pub head: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaceWon {
    #[serde(rename = "try")]
    pub number: u32,
    #[serde(default)]
    pub agent: String,
    /// `first` or `judge`.
    #[serde(default)]
    pub how: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaceEnded {
    /// Why: `reassigned`, `unreachable`.
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitClosed {
    /// The state the task went to (`done`, `failed`, `needs-you`, …).
    pub verdict: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default, rename = "try")]
    pub number: Option<u32>,
    /// What the agent said of its work (a done unit). Added later: absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStarted {
    pub session: String,
    #[serde(default)]
    pub agent: String,
    #[serde(rename = "try")]
    pub number: u32,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default)]
    pub worktree: String,
    /// The session's role when it is not the worker's (`reviewer`, a role of one's own, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEnded {
    pub session: String,
    /// Why it ended, in words.
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub elapsed_ms: u64,
    /// What its work was committed as, if anything was left to commit.
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default)]
    pub agent: String,
    #[serde(rename = "try")]
    pub number: u32,
    /// The agent CLI's own session id, if it told one.
    #[serde(default)]
    pub agent_session: Option<String>,
    /// What it used, from its CLI's output or its own report; absent: unknown (and absent in
    /// events written before usage was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<super::usage::Usage>,
    /// The mission whose walk ran it (`run --mission`, as a mission commander starts its
    /// child walks). Added later: absent before, and for a walk of no mission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoardAction {
    /// `stop`, `reassign`, `take-over`, `hand-back`, `reopen`, `park`.
    #[serde(default)]
    pub verb: String,
    /// Who: the person the server runs as (`backlog::person`), through the board.
    #[serde(default)]
    pub by: String,
    /// The address the request came from.
    #[serde(default)]
    pub from: String,
    /// What came of it, in words (its first line), or why it was refused.
    #[serde(default)]
    pub outcome: String,
    /// Whether the verb was done.
    #[serde(default)]
    pub done: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandedBack {
    /// `continue` or `keep`.
    pub mode: String,
    #[serde(default, rename = "try")]
    pub number: Option<u32>,
    #[serde(default)]
    pub commit: Option<String>,
    /// What the person changed, as lines for the agent.
    #[serde(default)]
    pub changes: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub by: Option<String>,
    /// The state change, when handing back reopened the task (`continue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TryPassed {
    #[serde(rename = "try")]
    pub number: u32,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub head: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Checks {
    #[serde(rename = "try")]
    pub number: u32,
    pub passed: bool,
    #[serde(default)]
    pub elapsed_ms: u64,
    /// How the command ended (`None`: it had to be stopped).
    #[serde(default)]
    pub exit: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SetUp {
    #[serde(rename = "try")]
    pub number: u32,
    /// The session it ran for (its output is at the head of that session's log).
    pub session: String,
    pub passed: bool,
    #[serde(default)]
    pub elapsed_ms: u64,
    /// How the command ended (`None`: it had to be stopped).
    #[serde(default)]
    pub exit: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Review {
    #[serde(rename = "try")]
    pub number: u32,
    pub approved: bool,
    #[serde(default)]
    pub elapsed_ms: u64,
    #[serde(default)]
    pub exit: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UnitAbandoned {
    #[serde(default)]
    pub reason: String,
    #[serde(default, rename = "try")]
    pub number: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Termination {
    /// `done`, `blocked` or `failed`; for other roles, a word of their contract (`approve`,
    /// `changes`, `resolved`, `unresolved`, `summary`).
    pub verdict: String,
    #[serde(default)]
    pub message: Option<String>,
    /// The contract the session kept (`reviewer/1`, …); absent: the worker's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    /// A summarizer's subject line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// What the session used, as it reported it (`finish --usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<super::usage::Usage>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ConflictResolving {
    /// The resolver's session, role and agent, and its try.
    pub session: String,
    pub role: String,
    pub agent: String,
    #[serde(rename = "try")]
    pub number: u32,
    /// What merges into what: `landing` (a task onto a target) or `dependency` (a done
    /// dependency into a new task branch).
    pub kind: String,
    /// The target (a branch name), and the task whose work merges into it.
    pub into: String,
    pub from: String,
    /// The two sides' commits.
    pub ours: String,
    pub theirs: String,
    pub paths: Vec<String>,
}

/// A try that begins as a merge in progress: what merges into what, and where it conflicts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MergeStarted {
    #[serde(rename = "try")]
    pub number: u32,
    /// The target (a branch name) and the task whose work merges into it.
    pub into: String,
    pub from: String,
    /// The two sides' commits: the target's tip (where the try branch starts) and the task
    /// branch's head (the worktree's `MERGE_HEAD`).
    pub ours: String,
    pub theirs: String,
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ConflictResolved {
    pub session: String,
    #[serde(rename = "try")]
    pub number: u32,
    /// The resolved merge commit (parents: ours, theirs).
    pub commit: String,
    pub paths: Vec<String>,
    /// What the resolver said it did.
    #[serde(default)]
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ConflictUnresolved {
    pub session: String,
    #[serde(rename = "try")]
    pub number: u32,
    pub paths: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReviewStarted {
    #[serde(rename = "try")]
    pub number: u32,
    pub round: u32,
    #[serde(default)]
    pub rounds: u32,
    /// The reviewer's role and agent.
    pub role: String,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub session: String,
    /// The commit and tree under review, and the commit it is compared with.
    #[serde(default)]
    pub head: String,
    #[serde(default)]
    pub tree: String,
    #[serde(default)]
    pub base: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReviewVerdict {
    #[serde(rename = "try")]
    pub number: u32,
    pub round: u32,
    #[serde(default)]
    pub rounds: u32,
    pub role: String,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub session: String,
    /// The tree the verdict is about: an approval holds for this tree only.
    #[serde(default)]
    pub tree: String,
    /// `approve`, `changes`, or `none` (no verdict its contract allows, after one send-back).
    pub verdict: String,
    #[serde(default)]
    pub comments: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReviewOverride {
    /// The reviewer and the worker the rule was about.
    pub reviewer: String,
    #[serde(default)]
    pub worker: String,
    /// What the rule said.
    #[serde(default)]
    pub rule: String,
    /// The person's reason.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ContractViolation {
    #[serde(default)]
    pub session: String,
    pub role: String,
    #[serde(default)]
    pub contract: String,
    #[serde(default)]
    pub problem: String,
    /// Sent back to the same role (its first violation), or the task went to a person.
    #[serde(default)]
    pub sent_back: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FollowUp {
    #[serde(default)]
    pub session: String,
    /// The task added.
    pub added: String,
    #[serde(default)]
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResultInvalid {
    #[serde(default)]
    pub session: String,
    #[serde(default)]
    pub problem: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentUnreachable {
    pub agent: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub retry_after_s: u64,
}

/// An agent CLI's hook event, and what the hook did with it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentHook {
    #[serde(default)]
    pub agent: String,
    /// The CLI's name for its event (`Stop`, `agent-turn-complete`, …).
    #[serde(default)]
    pub event: String,
    #[serde(default)]
    pub agent_session: Option<String>,
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// What else the CLI said (its `reason`, `last_message`, `turn_id`, …), as it said it.
    #[serde(flatten)]
    pub detail: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentHookFailed {
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub error: String,
}

/// What a session tried and was refused.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentOverreach {
    #[serde(default)]
    pub session: String,
    /// The command tried (`done`, `park`, `report`, …).
    #[serde(default)]
    pub command: String,
    /// The task it named, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Its arguments, as given (shortened).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// What was wrong, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Whether the session ran confined (it reported through its box) or not (it wrote the
    /// journal itself).
    #[serde(default)]
    pub confined: bool,
}

/// Settings that steer walks, changed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SettingsChanged {
    /// Each changed key: `{key, from, to}` (`null` for unset).
    #[serde(default)]
    pub changes: Vec<SettingChange>,
    /// The sessions that were running when the walk saw the change (empty: it came between
    /// walks, from a person).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub during: Vec<String>,
    /// Whether the walk obeys the new values (false: it refuses them, as planted).
    #[serde(default)]
    pub obeyed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SettingChange {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Judged {
    #[serde(default)]
    pub tries: Vec<u32>,
    #[serde(default)]
    pub exit: Option<String>,
    #[serde(default)]
    pub log: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MissionStarted {
    #[serde(default)]
    pub mission: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub wave: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProjectDispatched {
    #[serde(default)]
    pub mission: String,
    #[serde(default)]
    pub summary: String,
    pub project: String,
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default)]
    pub dir: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProjectClosed {
    #[serde(default)]
    pub mission: String,
    #[serde(default)]
    pub summary: String,
    pub project: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MissionEnded {
    #[serde(default)]
    pub mission: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub stop: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// What its child walks' sessions spent in this run: dollars (reported and estimated) and
    /// tokens. Added later: absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, data: serde_json::Value) -> Event {
        let serde_json::Value::Object(data) = data else { panic!("an object") };
        Event {
            version: 1,
            kind: kind.into(),
            at: "2026-03-01T12:00:00Z".parse().expect("time"),
            writer: "w-test".into(),
            seq: 1,
            lamport: None,
            task: Some("t-1".into()),
            session: None,
            by: "T <t@e>".into(),
            data,
        }
    }

    /// What the previous release wrote (json! literals at each call site) reads as types.
    #[test]
    fn events_written_by_the_previous_release_read_as_types() {
        let opened = event(
            "try_opened",
            serde_json::json!({ "try": 3, "agent": "claude", "branch": "loop-try/t-1/3", "worktree": "/w", "race": true }),
        );
        let Recorded::TryOpened(t) = Recorded::of(&opened) else { panic!("a try_opened") };
        assert_eq!((t.number, t.race, t.resumed), (3, true, false));
        // A person's take-over wrote neither `resumed` nor `race`.
        let by_hand =
            event("try_opened", serde_json::json!({ "try": 1, "agent": "p-x", "branch": "b", "worktree": "w" }));
        assert!(matches!(Recorded::of(&by_hand), Recorded::TryOpened(TryOpened { number: 1, race: false, .. })));
        let started = event(
            "race_started",
            serde_json::json!({ "agents": ["a", "b"], "tries": [4, 5], "pick": "first", "start": "abc", "from_try": null }),
        );
        assert!(
            matches!(Recorded::of(&started), Recorded::RaceStarted(RaceStarted { ref tries, .. }) if tries == &[4, 5])
        );
        let closed = event("unit_closed", serde_json::json!({ "verdict": "failed", "reason": "r", "try": null }));
        assert!(matches!(Recorded::of(&closed), Recorded::UnitClosed(UnitClosed { number: None, .. })));
        // A walk's close, a person's stop and the events whose data had `null`s in it.
        let stopped = event(
            "task_needs_decision",
            serde_json::json!({ "from": "open", "to": "needs-decision", "reason": "you stopped its session", "by": "T <t@e>", "session": null, "walker": "w-1" }),
        );
        assert!(matches!(Recorded::of(&stopped), Recorded::TaskNeedsDecision(StateChanged { session: None, .. })));
        let over =
            event("handed_over", serde_json::json!({ "from": "a", "to": ["b", "c"], "why": "w", "session": "s-1" }));
        assert!(matches!(Recorded::of(&over), Recorded::HandedOver(HandedOver { to: Agents::Many(_), .. })));
        let hook = event(
            "agent_hook",
            serde_json::json!({ "agent": "codex", "event": "agent-turn-complete", "agent_session": null, "commit": null, "turn_id": "7" }),
        );
        let Recorded::AgentHook(hook) = Recorded::of(&hook) else { panic!("an agent_hook") };
        assert_eq!(hook.detail.get("turn_id"), Some(&serde_json::json!("7")));
    }

    /// Writing and reading back give the same event, under the same kind and keys as before.
    #[test]
    fn an_event_round_trips_through_kind_and_data() {
        let won = Recorded::RaceWon(RaceWon { number: 2, agent: "codex".into(), how: "judge".into() });
        let (kind, data) = won.clone().into_parts();
        assert_eq!(kind, won.kind());
        assert_eq!(
            serde_json::Value::Object(data.clone()),
            serde_json::json!({ "try": 2, "agent": "codex", "how": "judge" })
        );
        assert_eq!(Recorded::of(&event(&kind, serde_json::Value::Object(data))), won);
    }

    /// Other kinds, and a known kind whose data does not read, are `Other`: kept as they were
    /// and written back unchanged, not believed.
    #[test]
    fn other_kinds_are_kept_unchanged() {
        for (kind, data) in [
            ("note", serde_json::json!({ "text": "hi", "nested": { "n": [1, 2] } })),
            ("race_won", serde_json::json!({ "try": "two" })),
            ("a_kind_from_a_newer_version", serde_json::json!({})),
        ] {
            let recorded = Recorded::of(&event(kind, data.clone()));
            let serde_json::Value::Object(map) = data.clone() else { unreachable!() };
            assert_eq!(recorded, Recorded::Other(Unknown { kind: kind.into(), data: map }));
            assert_eq!(recorded.kind(), kind);
            // Through serde (`log --json`, the stream) and back.
            let text = serde_json::to_string(&recorded).expect("serializes");
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&text).expect("json"),
                serde_json::json!({ "kind": kind, "data": data })
            );
            assert_eq!(serde_json::from_str::<Recorded>(&text).expect("reads"), recorded);
            // Into a journal event's parts, unchanged.
            let (k, d) = recorded.into_parts();
            assert_eq!((k.as_str(), serde_json::Value::Object(d)), (kind, data));
        }
    }

    /// Every arm's kind is a valid journal kind, and the kinds are distinct.
    #[test]
    fn kinds_are_valid_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for kind in Recorded::KINDS {
            assert!(super::super::journal::check_kind(kind).is_ok(), "{kind}");
            assert!(seen.insert(kind), "{kind} twice");
        }
    }
}
