//! `git loop list`: the backlog, filtered.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::human::short;
use super::output::{task_json, warn_corrupt, Out, Streamed};
use super::paint;
use git_loop::backlog::{Board, Readiness};
use git_loop::error::usage;
use git_loop::store::task::{Snapshot, State};

/// List tasks, ready ones first.
///
/// Open tasks first (ready, then claimed, then blocked), then parked, done and cancelled.
///
/// Example: git loop list --ready --label api
#[derive(Args)]
pub struct ListArgs {
    /// Only tasks that `next` could hand out now.
    #[arg(long)]
    ready: bool,
    /// Only tasks in this state: open, needs-decision, needs-you, taken-over, failed, done,
    /// parked or cancelled.
    #[arg(long, value_name = "STATE")]
    state: Option<String>,
    /// Only tasks with this label; repeat to require several.
    #[arg(long, value_name = "LABEL")]
    label: Vec<String>,
    /// Print {"tasks": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ListArgs) -> Result<u8> {
    let state = match &args.state {
        Some(s) => Some(State::parse(s).ok_or_else(|| {
            usage(format!("state '{s}' is not valid"))
                .hint(format!("use one of: {}", State::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")))
        })?),
        None => None,
    };
    let store = env.open()?;
    let board = Board::load(&store, &env.ctx)?;
    warn_corrupt(&board.corrupt);
    let mut rows: Vec<_> = board
        .tasks
        .iter()
        .filter(|r| state.is_none_or(|st| r.state == st))
        .filter(|r| args.label.iter().all(|l| r.has_label(l)))
        .map(|r| (r, board.readiness(r)))
        .filter(|(_, r)| !args.ready || *r == Readiness::Ready)
        .collect();
    let rank = |r: &Readiness, st: State| match (r, st) {
        (Readiness::Ready, _) => 0,
        (Readiness::Claimed, _) => 1,
        (Readiness::Blocked(_), _) => 2,
        (_, State::NeedsDecision | State::NeedsYou | State::TakenOver | State::Failed) => 3,
        (_, State::Parked) => 4,
        (_, State::Done) => 5,
        _ => 6,
    };
    rows.sort_by(|(a, ra), (b, rb)| {
        (rank(ra, a.state), a.priority, a.created_at, a.id()).cmp(&(
            rank(rb, b.state),
            b.priority,
            b.created_at,
            b.id(),
        ))
    });
    let mut out = Out::new();
    if args.json {
        // Each task is read and written in turn (a hundred thousand of them would take
        // hundreds of megabytes as one value); the fields in the order `json!` sorts them.
        #[derive(serde::Serialize)]
        struct Listing<T> {
            corrupt: Vec<serde_json::Value>,
            tasks: T,
        }
        let tasks = Streamed::new(
            rows.iter().map(|(row, _)| Ok(task_json(&board, &Snapshot { task: row.task()?, tip: row.tip }))),
        );
        let corrupt = board.corrupt.iter().map(|(n, p)| json!({ "ref": n, "problem": p })).collect();
        out.json(&Listing { corrupt, tasks: &tasks })?;
        return Ok(0);
    }
    // Columns as wide as what they hold (a state may be "needs-decision"), under a header;
    // nothing at all for an empty list.
    let mut lines = Vec::with_capacity(rows.len());
    for (row, readiness) in rows {
        let t = row.task()?;
        let (status, note) = match &readiness {
            Readiness::Ready => ("ready", String::new()),
            Readiness::Claimed => {
                let holder = board.claims.get(&t.id).map(|c| c.holder()).unwrap_or("?");
                let word = if board.shown_state(&t.id, t.state) == "running" { "running" } else { "claimed" };
                (word, format!("  ({holder})"))
            }
            Readiness::Blocked(deps) => ("blocked", format!("  (after {})", deps.join(", "))),
            Readiness::Closed => (t.state.as_str(), String::new()),
        };
        let labels = if t.labels.is_empty() { String::new() } else { format!("  [{}]", t.labels.join(", ")) };
        lines.push((t.id.clone(), t.priority.to_string(), status, format!("{}{labels}{note}", short(&t.title, 72))));
    }
    if lines.is_empty() {
        return Ok(0);
    }
    let id_width = lines.iter().map(|l| l.0.chars().count()).max().unwrap_or(0).max(2);
    let state_width = lines.iter().map(|l| l.2.len()).max().unwrap_or(0).max(5);
    out.line(format!("{:<id_width$}  PRI  {:<state_width$}  TITLE", "ID", "STATE"))?;
    for (id, priority, status, rest) in lines {
        out.line(format!("{id:<id_width$}  {priority:<3}  {:<state_width$}  {rest}", paint::state(status)))?;
    }
    Ok(0)
}
