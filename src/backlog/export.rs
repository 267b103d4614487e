//! `export`: the backlog written in the formats `import` reads, so that what goes out comes
//! back in unchanged.
//!
//! Beads: a task imported from a beads export kept its line (`Origin::line`); a task that is
//! still what that line made is written back as the line, byte for byte, so a round trip of an
//! export changes nothing. A task changed since has the fields git-loop owns written over the
//! line's (title, body, priority, status, labels, epic, dependencies), every field it does not
//! know kept; a task made here is written anew. JSON lines: the fields of `add` and of the graph,
//! with the task's id and state.

use std::io::Write;

use anyhow::Result;
use serde_json::{json, Map, Value};

use super::import::{beads_task, Format, BLOCKING, PARENT};
use super::Board;
use crate::context::Context;
use crate::store::task::{State, Task};
use crate::store::Store;

/// Write every task of the backlog (folded ones too), by id, one line each; returns how many.
pub fn export(store: &Store, ctx: &Context, format: Format, out: &mut dyn Write) -> Result<usize> {
    let board = Board::load(store, ctx)?;
    let mut written = 0;
    for row in board.tasks.iter() {
        let task = row.task()?;
        let line = match format {
            Format::Beads => beads_line(&task)?,
            Format::Jsonl => serde_json::to_string(&plain(&task))?,
        };
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
        written += 1;
    }
    out.flush()?;
    Ok(written)
}

/// A task as a line of the plain format (`import --format jsonl` reads it back).
fn plain(task: &Task) -> Value {
    let mut obj = Map::new();
    obj.insert("id".into(), json!(task.id));
    obj.insert("title".into(), json!(task.title));
    obj.insert("priority".into(), json!(task.priority));
    let mut put = |key: &str, value: Value, empty: bool| {
        if !empty {
            obj.insert(key.into(), value);
        }
    };
    put("body", json!(task.body), task.body.is_empty());
    put("after", json!(task.after), task.after.is_empty());
    put("labels", json!(task.labels), task.labels.is_empty());
    put("agents", json!(task.agents), task.agents.is_empty());
    put("together", json!(task.together), task.together.is_empty());
    put("pick", json!(task.pick), task.pick.is_none());
    put("parent", json!(task.parent), task.parent.is_none());
    put("epic", json!(true), !task.epic);
    put("links", json!(task.links), task.links.is_empty());
    put("state", json!(task.state.as_str()), task.state == State::Open);
    Value::Object(obj)
}

fn sorted(list: &[String]) -> Vec<&String> {
    let mut out: Vec<&String> = list.iter().collect();
    out.sort();
    out.dedup();
    out
}

/// What git-loop owns of a task, as a beads line makes it.
fn owned_fields_equal(made: &Task, task: &Task) -> [bool; 6] {
    [
        made.title == task.title,
        made.body == task.body,
        made.priority == task.priority,
        made.state == task.state,
        sorted(&made.labels) == sorted(&task.labels) && made.epic == task.epic,
        sorted(&made.after) == sorted(&task.after)
            && made.parent == task.parent
            && sorted(&made.links) == sorted(&task.links),
    ]
}

/// The beads line of `task`.
fn beads_line(task: &Task) -> Result<String> {
    let kept = task.origin.as_ref().filter(|o| o.format == "beads").and_then(|o| o.line.as_deref());
    if let Some(line) = kept {
        if let (Some(made), Ok(Value::Object(mut obj))) = (beads_task(line), serde_json::from_str::<Value>(line)) {
            let same = owned_fields_equal(&made, task);
            if same.iter().all(|s| *s) {
                return Ok(line.to_owned());
            }
            overlay(&mut obj, task, same);
            return Ok(serde_json::to_string(&obj)?);
        }
    }
    let mut obj = Map::new();
    obj.insert("id".into(), json!(task.id));
    obj.insert("created_at".into(), json!(task.created_at.to_rfc3339()));
    overlay(&mut obj, task, [false; 6]);
    Ok(serde_json::to_string(&obj)?)
}

/// Write the fields of `task` whose `same` is false over `obj`.
fn overlay(obj: &mut Map<String, Value>, task: &Task, same: [bool; 6]) {
    let [title, body, priority, state, labels, graph] = same;
    if !title {
        obj.insert("title".into(), json!(task.title));
    }
    if !body {
        obj.insert("description".into(), json!(task.body));
        for folded in ["design", "acceptance_criteria", "notes"] {
            obj.remove(folded);
        }
    }
    if !priority {
        obj.insert("priority".into(), json!(task.priority.rank()));
    }
    if !state {
        let status = match task.state {
            State::Open => "open",
            State::Done | State::Cancelled => "closed",
            State::Parked => "deferred",
            State::NeedsDecision | State::NeedsYou | State::TakenOver | State::Failed => "blocked",
        };
        obj.insert("status".into(), json!(status));
        match (task.state, &task.completion) {
            (State::Done, Some(c)) => {
                obj.insert("closed_at".into(), json!(c.at.to_rfc3339()));
                obj.insert("close_reason".into(), json!(c.message.clone().unwrap_or_else(|| "done".into())));
            }
            (State::Cancelled, _) => {
                obj.insert("closed_at".into(), json!(task.updated_at.to_rfc3339()));
                let why = task.reason.as_deref().unwrap_or("no reason given");
                obj.insert("close_reason".into(), json!(format!("cancelled: {why}")));
            }
            _ => {
                obj.remove("closed_at");
                obj.remove("close_reason");
            }
        }
    }
    if !labels {
        // The issue type import made a label of stays the issue type.
        let kind = obj.get("issue_type").and_then(Value::as_str).map(str::to_owned);
        let kind = match (task.epic, kind.as_deref()) {
            (true, _) => "epic".to_owned(),
            (false, Some("epic")) | (false, None) => "task".to_owned(),
            (false, Some(other)) => other.to_owned(),
        };
        let labels: Vec<&String> = task.labels.iter().filter(|l| **l != kind).collect();
        obj.insert("issue_type".into(), json!(kind));
        if labels.is_empty() {
            obj.remove("labels");
        } else {
            obj.insert("labels".into(), json!(labels));
        }
    }
    if !graph {
        // Each dependency as the line had it when it is still there (beads keeps who made it
        // and when), else a new one.
        let before: Vec<Value> = obj.get("dependencies").and_then(Value::as_array).cloned().unwrap_or_default();
        let entry = |kinds: &[&str], target: &str| -> Value {
            before
                .iter()
                .find(|d| {
                    d.get("depends_on_id").and_then(Value::as_str) == Some(target)
                        && kinds.contains(&d.get("type").and_then(Value::as_str).unwrap_or("blocks"))
                })
                .cloned()
                .unwrap_or_else(|| json!({ "issue_id": task.id, "depends_on_id": target, "type": kinds[0] }))
        };
        let mut deps: Vec<Value> = task.after.iter().map(|a| entry(BLOCKING, a)).collect();
        deps.extend(task.parent.iter().map(|p| entry(&[PARENT], p)));
        deps.extend(task.links.iter().filter_map(|l| l.split_once(':')).map(|(kind, target)| entry(&[kind], target)));
        if deps.is_empty() {
            obj.remove("dependencies");
        } else {
            obj.insert("dependencies".into(), Value::Array(deps));
        }
    }
    obj.insert("updated_at".into(), json!(task.updated_at.to_rfc3339()));
}
