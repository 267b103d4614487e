//! `import`: many tasks in one go, from JSON lines with the same fields as `add`, or from a
//! beads `issues.jsonl` export (ids, priorities, blocking dependencies and closed state kept).
//!
//! Every line is checked before anything is written (its fields within the size limits too),
//! so a bad file changes nothing. Tasks whose id already exists are skipped, so importing the
//! same export twice adds nothing. The tasks are written together (`task::create_all`): their
//! objects in one pack, their refs in `packed-refs`, all or none.

use std::collections::{BTreeSet, HashSet};

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::{check_pick, check_word, record};
use crate::context::Context;
use crate::error::usage;
use crate::ids::{Priority, TaskId};
use crate::refs;
use crate::store::task::{self, Change, Completion, Create, Fields, Lists, Origin, State, StateChange};
use crate::store::Store;

/// The input formats `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Beads,
}

/// What an import did.
#[derive(Debug, Default)]
pub struct Report {
    pub added: Vec<TaskId>,
    /// Ids already present, left untouched.
    pub skipped: Vec<TaskId>,
    /// Things dropped on the way in (unknown dependencies, tombstones...), one line each.
    pub warnings: Vec<String>,
}

/// One task ready to be written.
struct Planned {
    id: TaskId,
    change: Change,
}

/// A line of the plain JSON-lines format: the fields of `add`, and optionally an id.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainLine {
    #[serde(default)]
    id: Option<String>,
    title: String,
    #[serde(default)]
    priority: Option<Priority>,
    #[serde(default)]
    after: Vec<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    agents: Vec<String>,
    #[serde(default)]
    together: Vec<String>,
    #[serde(default)]
    pick: Option<String>,
}

pub fn import(store: &Store, ctx: &Context, text: &str, format: Format, source: &str) -> Result<Report> {
    let mut report = Report::default();
    let planned = match format {
        Format::Jsonl => plan_plain(text)?,
        Format::Beads => plan_beads(text, &mut report.warnings)?,
    };
    // Dependencies must name a task in the file or one that exists already.
    let in_file: HashSet<String> = planned.iter().map(|p| p.id.to_string()).collect();
    let mut seen = HashSet::new();
    let mut checked = Vec::with_capacity(planned.len());
    for mut plan in planned {
        if !seen.insert(plan.id.clone()) {
            return Err(usage(format!("task id '{}' appears twice in the file", plan.id)).into());
        }
        let mut deps = Vec::new();
        for dep in std::mem::take(&mut plan.change.add.after) {
            if in_file.contains(&dep) || store.ref_target(&refs::task(&dep.parse()?))?.is_some() {
                deps.push(dep);
            } else if format == Format::Beads {
                report.warnings.push(format!("{}: dependency on unknown '{dep}' dropped", plan.id));
            } else {
                return Err(usage(format!(
                    "task '{}' depends on '{dep}', which is neither in the file nor in the backlog",
                    plan.id
                ))
                .into());
            }
        }
        plan.change.add.after = deps;
        checked.push(plan);
    }
    refuse_cycles(store, ctx, &checked)?;
    let mut created = Vec::new();
    for (id, stored) in task::create_all(store, ctx, checked.into_iter().map(|p| (p.id, p.change)).collect())? {
        match stored {
            Some(snapshot) => {
                report.added.push(id);
                created.push(snapshot);
            }
            None => report.skipped.push(id),
        }
    }
    // The index learns them here, so the first reader after a large import does not read
    // every new task back.
    crate::store::index::add_created(store, created.into_iter().map(|s| (s.tip, s.task)));
    let imported = crate::store::events::TasksImported {
        source: source.to_owned(),
        added: report.added.len(),
        skipped: report.skipped.len(),
    };
    record(store, ctx, None, crate::store::events::Recorded::TasksImported(imported))?;
    Ok(report)
}

/// Refuse tasks whose dependencies — in the file, and on tasks of the backlog — make a cycle:
/// none of its tasks could ever be ready (as `edit --after` refuses one).
fn refuse_cycles(store: &Store, ctx: &Context, planned: &[Planned]) -> Result<()> {
    if planned.iter().all(|p| p.change.add.after.is_empty()) {
        return Ok(());
    }
    let board = super::Board::load(store, ctx)?;
    let in_file: std::collections::HashMap<&str, &Planned> = planned.iter().map(|p| (p.id.as_str(), p)).collect();
    let after = |id: &str| match in_file.get(id) {
        Some(p) => p.change.add.after.clone(),
        None => board.get(id).map(|r| r.after().map(ToOwned::to_owned).collect()).unwrap_or_default(),
    };
    if let Some(cycle) = super::cycles(planned.iter().map(|p| p.id.as_str()), &after).into_iter().next() {
        return Err(usage(format!(
            "the dependencies make a cycle: {}; none of those tasks could ever be ready",
            super::cycle_line(&cycle)
        ))
        .hint("drop one of these dependencies from the file, then import it again (nothing was imported)")
        .into());
    }
    Ok(())
}

fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty())
}

/// A line with the fields only a beads issue has (its status, its type, its dependencies).
fn looks_like_beads(line: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line)
        .is_ok_and(|o| ["status", "issue_type", "dependencies"].iter().any(|k| o.contains_key(*k)))
}

fn plan_plain(text: &str) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    for (number, line) in lines(text) {
        let bad = |why: String| {
            usage(format!("line {number}: {why}")).hint(if looks_like_beads(line) {
                "this looks like a beads export (.beads/issues.jsonl): pass --format beads"
            } else {
                "each line is one JSON object with at least a \"title\""
            })
        };
        let parsed: PlainLine = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if parsed.title.trim().is_empty() {
            return Err(bad("the title is empty".into()).into());
        }
        let id = match &parsed.id {
            Some(id) => id.parse::<TaskId>().map_err(|e| bad(e.message))?,
            None => TaskId::generate(),
        };
        for label in &parsed.labels {
            check_word("label", label).map_err(|e| bad(e.message))?;
        }
        for agent in parsed.agents.iter().chain(&parsed.together) {
            check_word("agent", agent).map_err(|e| bad(e.message))?;
        }
        if let Some(pick) = &parsed.pick {
            check_pick(pick).map_err(|e| bad(e.message))?;
        }
        for dep in &parsed.after {
            dep.parse::<TaskId>().map_err(|e| bad(e.message))?;
        }
        let planned = Planned {
            id,
            change: Change {
                create: Some(Create { origin: None, created_at: None }),
                set: Fields {
                    title: Some(parsed.title),
                    body: Some(parsed.body.unwrap_or_default()),
                    priority: Some(parsed.priority.unwrap_or_default()),
                    pick: parsed.pick,
                    ..Default::default()
                },
                add: Lists {
                    after: parsed.after,
                    labels: parsed.labels,
                    agents: parsed.agents,
                    together: parsed.together,
                    ..Default::default()
                },
                ..Default::default()
            },
        };
        planned.change.check_sizes().map_err(|e| bad(e.message))?;
        out.push(planned);
    }
    Ok(out)
}

/// Dependency types of beads that mean "must finish first".
const BLOCKING: &[&str] = &["blocks", "conditional-blocks", "waits-for"];

fn plan_beads(text: &str, warnings: &mut Vec<String>) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    for (number, line) in lines(text) {
        let bad = |why: String| {
            usage(format!("line {number}: {why}")).hint("expected a beads issues.jsonl export ('bd export')")
        };
        let value: Value = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        let Some(obj) = value.as_object() else {
            return Err(bad("not a JSON object".into()).into());
        };
        if obj.contains_key("_schema") || obj.get("_type").and_then(Value::as_str).is_some_and(|t| t != "issue") {
            continue;
        }
        let str_of = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_owned);
        let Some(raw_id) = str_of("id") else {
            return Err(bad("the issue has no \"id\"".into()).into());
        };
        let status = str_of("status").unwrap_or_else(|| "open".into());
        if status == "tombstone" {
            warnings.push(format!("{raw_id}: deleted in beads (tombstone), not imported"));
            continue;
        }
        let id = raw_id.parse::<TaskId>().map_err(|e| bad(format!("{} (beads id '{raw_id}')", e.message)))?;
        let title = str_of("title")
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| bad(format!("issue '{raw_id}' has no title")))?;
        // bd reads a missing priority as 0; its 4 ("backlog") is our lowest, p3.
        let priority = match obj.get("priority") {
            None | Some(Value::Null) => Priority::P0,
            Some(v) => Priority::from_rank(
                v.as_u64().ok_or_else(|| bad(format!("issue '{raw_id}' has priority {v}")))?.min(3) as u8,
            ),
        };
        let mut body = str_of("description").unwrap_or_default();
        for (key, heading) in [("design", "Design"), ("acceptance_criteria", "Acceptance criteria"), ("notes", "Notes")]
        {
            if let Some(text) = str_of(key).filter(|t| !t.trim().is_empty()) {
                if !body.is_empty() {
                    body.push_str("\n\n");
                }
                body.push_str(&format!("## {heading}\n\n{text}"));
            }
        }
        let mut labels: BTreeSet<String> = obj
            .get("labels")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        if let Some(kind) = str_of("issue_type") {
            labels.insert(kind);
        }
        let labels: Vec<String> = labels.into_iter().filter(|l| check_word("label", l).is_ok()).collect();
        let mut after = Vec::new();
        for dep in obj.get("dependencies").and_then(Value::as_array).into_iter().flatten() {
            let kind = dep.get("type").and_then(Value::as_str).unwrap_or("blocks");
            let Some(target) = dep.get("depends_on_id").and_then(Value::as_str) else { continue };
            if !BLOCKING.contains(&kind) {
                continue;
            }
            match target.parse::<TaskId>() {
                Ok(t) if !after.contains(&t.to_string()) => after.push(t.to_string()),
                Ok(_) => {}
                Err(_) => warnings.push(format!("{raw_id}: dependency on '{target}' is not a usable id, dropped")),
            }
        }
        let time_of =
            |k: &str| str_of(k).and_then(|t| DateTime::parse_from_rfc3339(&t).ok()).map(|t| t.with_timezone(&Utc));
        let state = match status.as_str() {
            "closed" => Some(StateChange {
                state: State::Done,
                reason: None,
                completion: Some(Completion {
                    commit: None,
                    session: None,
                    try_number: None,
                    message: str_of("close_reason").or_else(|| Some("closed in beads".into())),
                    checks: None,
                    reviews: Vec::new(),
                    at: time_of("closed_at").or_else(|| time_of("updated_at")).unwrap_or(DateTime::<Utc>::UNIX_EPOCH),
                    by: str_of("closed_by_session").or_else(|| str_of("assignee")).unwrap_or_else(|| "beads".into()),
                    unchecked: false,
                }),
            }),
            "deferred" | "blocked" => {
                Some(StateChange { state: State::Parked, reason: Some(format!("{status} in beads")), completion: None })
            }
            _ => None,
        };
        let planned = Planned {
            id,
            change: Change {
                create: Some(Create {
                    origin: Some(Origin { format: "beads".into(), id: raw_id }),
                    created_at: time_of("created_at"),
                }),
                set: Fields { title: Some(title), body: Some(body), priority: Some(priority), ..Default::default() },
                add: Lists { after, labels, ..Default::default() },
                state,
                ..Default::default()
            },
        };
        planned.change.check_sizes().map_err(|e| bad(e.message))?;
        out.push(planned);
    }
    Ok(out)
}
