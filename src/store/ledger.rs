//! The ledger: what every session spent, read from the journal's `session_ended` events (its
//! index of them for the whole ledger, a task's timeline for one task's total). Apart from
//! `usage`, which the events themselves carry, so that neither imports the other.

use serde::Deserialize;

use super::usage::{Total, Usage};
use super::{events, journal, Store};

/// One session's line in the ledger: a `session_ended` event.
#[derive(Debug, Clone)]
pub struct Spent {
    pub session: String,
    pub task: Option<String>,
    pub agent: String,
    /// The walk (or other writer) that ran it.
    pub walk: String,
    /// The mission whose walk ran it, if one did.
    pub mission: Option<String>,
    pub at: chrono::DateTime<chrono::Utc>,
    pub usage: Option<Usage>,
}

/// Every session every clone has journaled (as far as this one has synced), from the
/// journal's index of `session_ended` events (`journal::sessions_ended`).
pub fn ledger(store: &Store) -> anyhow::Result<Vec<Spent>> {
    /// A `session_ended` event as the index holds it, read in one pass (no event of another
    /// kind, nor of a newer version, is believed).
    #[derive(Deserialize)]
    struct Line {
        version: u32,
        kind: String,
        at: chrono::DateTime<chrono::Utc>,
        writer: String,
        #[serde(default)]
        task: Option<String>,
        data: events::SessionEnded,
    }
    let mut out = Vec::new();
    for (_, json) in journal::sessions_ended(store)? {
        let Ok(line) = serde_json::from_str::<Line>(&json) else { continue };
        if line.kind != "session_ended" || line.version > journal::EVENT_VERSION {
            continue;
        }
        let e = line.data;
        out.push(Spent {
            session: e.session,
            task: line.task,
            agent: e.agent,
            walk: line.writer,
            at: line.at,
            usage: e.usage,
            mission: e.mission,
        });
    }
    Ok(out)
}

fn spent(entry: &journal::Entry) -> Option<Spent> {
    match events::Recorded::of(&entry.event) {
        events::Recorded::SessionEnded(e) => Some(Spent {
            session: e.session,
            task: entry.event.task.clone(),
            agent: e.agent,
            walk: entry.event.writer.clone(),
            at: entry.event.at,
            usage: e.usage,
            mission: e.mission,
        }),
        _ => None,
    }
}

/// One task's total over every session of its history (workers, continuations, race
/// entrants, reviewers, resolvers, summarizers).
pub fn task_total(store: &Store, task: &str) -> anyhow::Result<Total> {
    let filter = journal::Filter { task: Some(task.to_owned()), session: None };
    Ok(total_of(&journal::timeline(store, &filter)?.entries))
}

/// The total of the sessions among `entries` (a task's history, as the walk keeps it).
pub fn total_of(entries: &[journal::Entry]) -> Total {
    let mut total = Total::default();
    for s in entries.iter().filter_map(spent) {
        total.add(s.usage.as_ref());
    }
    total
}
