//! Writing to stdout: data only (everything else goes to stderr). A closed pipe surfaces as
//! an `io::Error` of kind BrokenPipe, which the reporter turns into exit 0.

use std::fmt::Display;
use std::io::{self, Write};

use anyhow::Result;
use serde::Serialize;
use serde_json::{json, Value};

use crate::backlog::{Board, Readiness};
use crate::store::claim::Held;
use crate::store::lease::Lease;
use crate::store::task::Snapshot;

/// Locked stdout.
pub struct Out {
    out: io::StdoutLock<'static>,
}

impl Out {
    pub fn new() -> Out {
        Out { out: io::stdout().lock() }
    }

    pub fn line(&mut self, text: impl Display) -> Result<()> {
        writeln!(self.out, "{text}")?;
        Ok(())
    }

    /// One JSON document, pretty-printed.
    pub fn json(&mut self, value: &impl Serialize) -> Result<()> {
        // serde_json wraps io errors; unwrap them so a closed pipe is seen as one.
        serde_json::to_writer_pretty(&mut self.out, value).map_err(io::Error::from)?;
        writeln!(self.out)?;
        Ok(())
    }

    /// One JSON value on one line (for streams of events).
    pub fn json_line(&mut self, value: &impl Serialize) -> Result<()> {
        serde_json::to_writer(&mut self.out, value).map_err(io::Error::from)?;
        writeln!(self.out)?;
        self.out.flush()?;
        Ok(())
    }
}

/// A claim record as JSON, with what this clone has watched of its lease: `status` (`live`,
/// or `stale` once seen unchanged for a whole lease), `lease_s` (the holder's lease),
/// `unchanged_s` (how long this clone has seen this very record) and `holder_gone`.
pub fn claim_json(held: &Held, lease: &Lease) -> Value {
    let mut value = serde_json::to_value(&held.record).expect("claim records serialize");
    value["status"] = json!(if lease.is_stale() { "stale" } else { "live" });
    value["object"] = json!(held.oid.to_string());
    value["lease_s"] = json!(lease.length.as_secs());
    value["unchanged_s"] = json!(lease.unchanged_for.as_secs());
    value["holder_gone"] = json!(lease.holder_gone);
    value
}

/// A task as JSON: the stored record plus what the board says about it.
pub fn task_json(board: &Board, snapshot: &Snapshot) -> Value {
    let mut value = serde_json::to_value(&snapshot.task).expect("tasks serialize");
    value["tip"] = json!(snapshot.tip.to_string());
    let t = &snapshot.task;
    let (ready, blocked_by) = match board.readiness_of(&t.id, t.state, t.after.iter().map(String::as_str)) {
        Readiness::Ready => (true, Vec::new()),
        Readiness::Blocked(deps) => (false, deps),
        Readiness::Closed | Readiness::Claimed => (false, Vec::new()),
    };
    value["ready"] = json!(ready);
    value["status"] = json!(board.shown_state(&t.id, t.state));
    value["blocked_by"] = json!(blocked_by);
    value["claim"] = match (board.claim(&t.id), board.lease(&t.id)) {
        (Some(held), Some(lease)) => claim_json(&held, &lease),
        _ => Value::Null,
    };
    value
}

/// Corrupt records found while reading, one warning line each on stderr (the problem text
/// names the ref).
pub fn warn_corrupt(corrupt: &[(String, String)]) {
    for (name, problem) in corrupt {
        if problem.contains(name.as_str()) {
            eprintln!("warning: skipped: {problem}");
        } else {
            eprintln!("warning: skipped '{name}': {problem}");
        }
    }
}
