//! The journal events git-loop reads back — crash recovery, race resumption, try numbering,
//! who last worked a task and what a person handed back — as types: one enum, written and read
//! through it, so that renaming a field is a compile error rather than a silent recovery bug.
//!
//! Each is stored as a journal event's `kind` and `data` (docs/storage.md, "Journal event"):
//! `Recorded` is serde's adjacently tagged form of exactly those two fields. Fields added
//! later are `#[serde(default)]`, so events written by earlier versions still read; fields
//! this version does not know (a later version's) are ignored. Events of other kinds —
//! journaled for people, by agents, by a newer version — are kept as they are and read here as
//! `None`: nothing below depends on them.

use serde::{Deserialize, Serialize};

use super::journal::Event;

/// An event something reads back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum Recorded {
    /// A try's branch and worktree are ready for an agent.
    TryOpened(TryOpened),
    /// A race began: each agent on its own try, all from `start`.
    RaceStarted(RaceStarted),
    /// One entrant of a race ended.
    EntrantEnded(EntrantEnded),
    /// A race has its winner.
    RaceWon(RaceWon),
    /// A race ended without a winner to close it with.
    RaceEnded(RaceEnded),
    /// The walk closed its unit of work on a task.
    UnitClosed(UnitClosed),
    /// An agent session began on a try.
    SessionStarted(SessionStarted),
    /// An agent session ended.
    SessionEnded(SessionEnded),
    /// A person handed a task they had taken over back to the loop (`continue`), or landed
    /// its work themselves (`keep`).
    HandedBack(HandedBack),
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
}

impl Recorded {
    /// The event `event` is, if it is one of these kinds and its data reads as one.
    pub fn of(event: &Event) -> Option<Recorded> {
        let tagged = serde_json::json!({ "kind": event.kind, "data": event.data });
        serde_json::from_value(tagged).ok()
    }

    /// The kind and data to journal it as.
    pub fn into_parts(self) -> (String, serde_json::Map<String, serde_json::Value>) {
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

    /// The kind it is journaled as.
    pub fn kind(&self) -> &'static str {
        match self {
            Recorded::TryOpened(_) => "try_opened",
            Recorded::RaceStarted(_) => "race_started",
            Recorded::EntrantEnded(_) => "entrant_ended",
            Recorded::RaceWon(_) => "race_won",
            Recorded::RaceEnded(_) => "race_ended",
            Recorded::UnitClosed(_) => "unit_closed",
            Recorded::SessionStarted(_) => "session_started",
            Recorded::SessionEnded(_) => "session_ended",
            Recorded::HandedBack(_) => "handed_back",
        }
    }
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
        let Some(Recorded::TryOpened(t)) = Recorded::of(&opened) else { panic!("a try_opened") };
        assert_eq!((t.number, t.race, t.resumed), (3, true, false));
        // A person's take-over wrote neither `resumed` nor `race`.
        let by_hand =
            event("try_opened", serde_json::json!({ "try": 1, "agent": "p-x", "branch": "b", "worktree": "w" }));
        assert!(matches!(Recorded::of(&by_hand), Some(Recorded::TryOpened(TryOpened { number: 1, race: false, .. }))));
        let started = event(
            "race_started",
            serde_json::json!({ "agents": ["a", "b"], "tries": [4, 5], "pick": "first", "start": "abc", "from_try": null }),
        );
        assert!(
            matches!(Recorded::of(&started), Some(Recorded::RaceStarted(RaceStarted { ref tries, .. })) if tries == &[4, 5])
        );
        let closed = event("unit_closed", serde_json::json!({ "verdict": "failed", "reason": "r", "try": null }));
        assert!(matches!(Recorded::of(&closed), Some(Recorded::UnitClosed(UnitClosed { number: None, .. }))));
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
        assert_eq!(Recorded::of(&event(&kind, serde_json::Value::Object(data))), Some(won));
    }

    /// Other kinds, and a known kind whose data does not read, are `None`: kept, not believed.
    #[test]
    fn other_kinds_are_none() {
        assert_eq!(Recorded::of(&event("note", serde_json::json!({ "text": "hi" }))), None);
        assert_eq!(Recorded::of(&event("race_won", serde_json::json!({ "try": "two" }))), None);
    }
}
