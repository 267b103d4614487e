//! `import`: many tasks in one go, from JSON lines with the same fields as `add`, or from a
//! beads `issues.jsonl` export (ids, priorities, blocking dependencies, closed state, epics and
//! their children, and every other link kept).
//!
//! What cannot be kept (a dependency or a parent that is neither in the file nor in the backlog,
//! a second parent, a link kind that is not a word) is said line by line (`Prepared::lost`), and
//! the import refuses unless the caller accepts the loss (`--lossy`).
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
    /// Things left out on the way in (tombstones, and what `--lossy` let go), one line each.
    pub warnings: Vec<String>,
}

/// One task ready to be written, and the line it came from.
struct Planned {
    id: TaskId,
    change: Change,
    line: usize,
}

/// A file read and checked, not written yet.
pub struct Prepared {
    planned: Vec<Planned>,
    /// Tasks of the backlog (not of the file) that become epics: a task of the file names them
    /// as its parent.
    epics: Vec<TaskId>,
    /// Said, not written: tombstones and the like.
    pub warnings: Vec<String>,
    /// What the file holds that cannot be kept, one line each (`line N: ...`).
    pub lost: Vec<String>,
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
    /// The graph (`export` writes them).
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    epic: bool,
    #[serde(default)]
    links: Vec<String>,
    /// Its state when exported: open (the default), or closed as it was.
    #[serde(default)]
    state: Option<String>,
}

/// Read and check `text` and write its tasks, letting go of what cannot be kept (said in the
/// report's warnings).
pub fn import(store: &Store, ctx: &Context, text: &str, format: Format, source: &str) -> Result<Report> {
    let mut prepared = prepare(store, ctx, text, format)?;
    let lost = std::mem::take(&mut prepared.lost);
    prepared.warnings.extend(lost);
    write(store, ctx, prepared, source)
}

/// Read and check `text`: every line parsed and checked, dependencies and parents looked up in
/// the file and the backlog, cycles refused. Nothing is written.
pub fn prepare(store: &Store, ctx: &Context, text: &str, format: Format) -> Result<Prepared> {
    let mut warnings = Vec::new();
    let mut lost_early = Vec::new();
    let planned = match format {
        Format::Jsonl => plan_plain(text)?,
        Format::Beads => plan_beads(text, &mut warnings, &mut lost_early)?,
    };
    // Dependencies and parents must name a task in the file or one that exists already.
    let in_file: HashSet<String> = planned.iter().map(|p| p.id.to_string()).collect();
    // A task of the backlog, folded ones too (read through the archive).
    let exists = |id: &str| {
        in_file.contains(id)
            || id.parse().is_ok_and(|t| task::tip_of(store, &refs::task(&t)).is_ok_and(|r| r.is_some()))
    };
    let mut lost = lost_early;
    let mut seen = HashSet::new();
    let mut checked = Vec::with_capacity(planned.len());
    let mut parents: HashSet<String> = HashSet::new();
    for mut plan in planned {
        if !seen.insert(plan.id.clone()) {
            return Err(usage(format!("task id '{}' appears twice in the file", plan.id)).into());
        }
        let mut deps = Vec::new();
        for dep in std::mem::take(&mut plan.change.add.after) {
            if exists(&dep) || super::foreign::is_foreign(&dep) {
                deps.push(dep);
            } else if format == Format::Beads {
                lost.push(format!(
                    "line {}: {}: its dependency on '{dep}' (neither in the file nor in the backlog)",
                    plan.line, plan.id
                ));
            } else {
                return Err(usage(format!(
                    "task '{}' depends on '{dep}', which is neither in the file nor in the backlog",
                    plan.id
                ))
                .into());
            }
        }
        plan.change.add.after = deps;
        if let Some(parent) = plan.change.set.parent.clone() {
            if exists(&parent) && parent != plan.id.as_str() {
                parents.insert(parent);
            } else {
                lost.push(format!(
                    "line {}: {}: its parent '{parent}' (neither in the file nor in the backlog)",
                    plan.line, plan.id
                ));
                plan.change.set.parent = None;
            }
        }
        checked.push(plan);
    }
    for plan in &mut checked {
        if parents.contains(plan.id.as_str()) {
            plan.change.set.epic = Some(true);
        }
    }
    let epics: Vec<TaskId> = parents.iter().filter(|p| !in_file.contains(*p)).filter_map(|p| p.parse().ok()).collect();
    refuse_cycles(store, ctx, &checked)?;
    refuse_parent_cycles(&checked)?;
    Ok(Prepared { planned: checked, epics, warnings, lost })
}

/// Write what `prepare` read (what it found lost is not written: the caller accepted that).
pub fn write(store: &Store, ctx: &Context, prepared: Prepared, source: &str) -> Result<Report> {
    let mut report = Report { warnings: prepared.warnings, ..Report::default() };
    // Parents outside the file become epics before their children exist (as `add` does).
    for epic in &prepared.epics {
        super::graph::make_epic(store, ctx, epic)?;
    }
    let checked = prepared.planned;
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

/// Refuse parents in the file that make a cycle (a task its own ancestor), naming it.
fn refuse_parent_cycles(planned: &[Planned]) -> Result<()> {
    let parent_of: std::collections::HashMap<&str, &str> =
        planned.iter().filter_map(|p| p.change.set.parent.as_deref().map(|parent| (p.id.as_str(), parent))).collect();
    for start in parent_of.keys() {
        let mut chain = vec![*start];
        while let Some(up) = parent_of.get(chain.last().expect("never empty")) {
            if let Some(at) = chain.iter().position(|c| c == up) {
                let mut cycle: Vec<&str> = chain[at..].to_vec();
                cycle.push(up);
                return Err(usage(format!("the parents make a cycle: {}", cycle.join(" → ")))
                    .hint("drop one of these parent-child links from the file, then import it again (nothing was imported)")
                    .into());
            }
            chain.push(up);
        }
    }
    Ok(())
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
            // A task of another repository, as `export` writes it: read there on sync.
            if super::foreign::is_foreign(dep) {
                if super::foreign::Dep::parse(dep).is_none_or(|d| !crate::store::foreign::valid_place(&d.place)) {
                    return Err(bad(format!("'{}' is not <remote-or-path>#<task-id>", dep.escape_debug())).into());
                }
                continue;
            }
            dep.parse::<TaskId>().map_err(|e| bad(e.message))?;
        }
        if let Some(parent) = &parsed.parent {
            parent.parse::<TaskId>().map_err(|e| bad(e.message))?;
        }
        let links = parsed
            .links
            .iter()
            .map(|l| super::graph::check_link(l).map_err(|e| bad(e.message)))
            .collect::<Result<Vec<_>, _>>()?;
        let state = match parsed.state.as_deref() {
            None | Some("open") => None,
            Some(word) => {
                let Some(state) = State::parse(word) else {
                    return Err(bad(format!("state '{}' is not one of git-loop's", word.escape_debug())).into());
                };
                let reason = format!("{word} when exported");
                Some(match state {
                    State::Done => StateChange {
                        state,
                        reason: None,
                        completion: Some(Completion {
                            commit: None,
                            session: None,
                            try_number: None,
                            message: Some(reason),
                            checks: None,
                            reviews: Vec::new(),
                            at: Utc::now(),
                            by: "import".into(),
                            unchecked: false,
                            children: Vec::new(),
                        }),
                    },
                    State::Cancelled => StateChange { state, reason: Some(reason), completion: None },
                    // Waiting for a person there: parked here, saying so.
                    _ => StateChange { state: State::Parked, reason: Some(reason), completion: None },
                })
            }
        };
        let planned = Planned {
            id,
            line: number,
            change: Change {
                create: Some(Create { origin: None, created_at: None }),
                set: Fields {
                    title: Some(parsed.title),
                    body: Some(parsed.body.unwrap_or_default()),
                    priority: Some(parsed.priority.unwrap_or_default()),
                    pick: parsed.pick,
                    parent: parsed.parent,
                    epic: parsed.epic.then_some(true),
                    ..Default::default()
                },
                add: Lists {
                    after: parsed.after,
                    labels: parsed.labels,
                    agents: parsed.agents,
                    together: parsed.together,
                    links,
                    ..Default::default()
                },
                state,
                ..Default::default()
            },
        };
        planned.change.check_sizes().map_err(|e| bad(e.message))?;
        out.push(planned);
    }
    Ok(out)
}

/// Dependency types of beads that mean "must finish first".
pub(super) const BLOCKING: &[&str] = &["blocks", "conditional-blocks", "waits-for"];

/// The longest beads line kept as it was, for `export` (a task's body is at most 256 KB).
const KEPT_LINE: usize = 512 * 1024;

/// The dependency type of beads that names a task's parent (its epic).
pub(super) const PARENT: &str = "parent-child";

fn plan_beads(text: &str, warnings: &mut Vec<String>, lost: &mut Vec<String>) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    for (number, line) in lines(text) {
        if let Some(planned) = read_beads(number, line, warnings, lost)? {
            out.push(planned);
        }
    }
    Ok(out)
}

/// The task a beads line makes as `import` writes it (`None`: a line that is no issue, or a
/// tombstone), its id and the change that creates it: what `export` holds a task against to
/// write back the line unchanged where the task is.
pub(super) fn beads_task(line: &str) -> Option<task::Task> {
    let planned = read_beads(0, line, &mut Vec::new(), &mut Vec::new()).ok()??;
    Some(task::made_by(planned.id.as_str(), &planned.change))
}

/// Read line `number` of a beads export (`line`, trimmed); what cannot be kept goes in `lost`.
fn read_beads(
    number: usize,
    line: &str,
    warnings: &mut Vec<String>,
    lost: &mut Vec<String>,
) -> Result<Option<Planned>> {
    {
        let bad = |why: String| {
            usage(format!("line {number}: {why}")).hint("expected a beads issues.jsonl export ('bd export')")
        };
        let value: Value = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        let Some(obj) = value.as_object() else {
            return Err(bad("not a JSON object".into()).into());
        };
        if obj.contains_key("_schema") || obj.get("_type").and_then(Value::as_str).is_some_and(|t| t != "issue") {
            return Ok(None);
        }
        let str_of = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_owned);
        let Some(raw_id) = str_of("id") else {
            return Err(bad("the issue has no \"id\"".into()).into());
        };
        let status = str_of("status").unwrap_or_else(|| "open".into());
        if status == "tombstone" {
            warnings.push(format!("{raw_id}: deleted in beads (tombstone), not imported"));
            return Ok(None);
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
        let mut parent: Option<String> = None;
        let mut links = Vec::new();
        for dep in obj.get("dependencies").and_then(Value::as_array).into_iter().flatten() {
            let kind = dep.get("type").and_then(Value::as_str).unwrap_or("blocks");
            let Some(target) = dep.get("depends_on_id").and_then(Value::as_str) else { continue };
            // A dependency recorded on the other task's line (its issue_id another) is that
            // task's to say.
            if dep.get("issue_id").and_then(Value::as_str).is_some_and(|i| i != raw_id) {
                continue;
            }
            if BLOCKING.contains(&kind) || kind == PARENT {
                let Ok(t) = target.parse::<TaskId>() else {
                    lost.push(format!(
                        "line {number}: {raw_id}: its {kind} link to '{target}', which is not a usable task id"
                    ));
                    continue;
                };
                let t = t.to_string();
                match (kind == PARENT, &parent) {
                    (false, _) if !after.contains(&t) => after.push(t),
                    (false, _) => {}
                    (true, None) => parent = Some(t),
                    (true, Some(first)) if *first == t => {}
                    (true, Some(first)) => lost.push(format!(
                        "line {number}: {raw_id}: its second parent '{t}' (a task has one parent; '{first}' is kept)"
                    )),
                }
                continue;
            }
            match super::graph::check_link(&format!("{kind}:{target}")) {
                Ok(link) if !links.contains(&link) => links.push(link),
                Ok(_) => {}
                Err(e) => lost.push(format!("line {number}: {raw_id}: {}", e.message)),
            }
        }
        let epic = str_of("issue_type").as_deref() == Some("epic");
        let kept_line = if line.len() <= KEPT_LINE {
            Some(line.to_owned())
        } else {
            lost.push(format!(
                "line {number}: {raw_id}: the line as it was (past {} KB; export writes it anew)",
                KEPT_LINE / 1024
            ));
            None
        };
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
                    children: Vec::new(),
                }),
            }),
            "deferred" | "blocked" => {
                Some(StateChange { state: State::Parked, reason: Some(format!("{status} in beads")), completion: None })
            }
            _ => None,
        };
        let planned = Planned {
            id,
            line: number,
            change: Change {
                create: Some(Create {
                    // The line itself, so `export` writes it back as it was where the task is.
                    origin: Some(Origin { format: "beads".into(), id: raw_id, line: kept_line }),
                    created_at: time_of("created_at"),
                }),
                set: Fields {
                    title: Some(title),
                    body: Some(body),
                    priority: Some(priority),
                    parent,
                    epic: epic.then_some(true),
                    ..Default::default()
                },
                add: Lists { after, labels, links, ..Default::default() },
                state,
                ..Default::default()
            },
        };
        planned.change.check_sizes().map_err(|e| bad(e.message))?;
        Ok(Some(planned))
    }
}
