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
    /// Draw epics with their children beneath them (with --json: in that order, each task
    /// with its "depth").
    #[arg(long)]
    tree: bool,
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
        (Readiness::Blocked(_) | Readiness::Epic, _) => 2,
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
    // The tree: each shown task under its parent when the parent is shown too, siblings in
    // the order above; a task whose parent is not shown stands at the top.
    let depths: Vec<usize> = if args.tree {
        let order = tree_order(&rows.iter().map(|(r, _)| *r).collect::<Vec<_>>());
        let (sorted, depths): (Vec<usize>, Vec<usize>) = order.into_iter().unzip();
        let mut taken: Vec<Option<_>> = rows.into_iter().map(Some).collect();
        rows = sorted.into_iter().filter_map(|i| taken[i].take()).collect();
        depths
    } else {
        Vec::new()
    };
    let mut out = Out::bulk();
    if args.json {
        // Each task is read and written in turn (a hundred thousand of them would take
        // hundreds of megabytes as one value); the fields in the order `json!` sorts them.
        #[derive(serde::Serialize)]
        struct Listing<T> {
            corrupt: Vec<serde_json::Value>,
            tasks: T,
        }
        let tasks = Streamed::new(rows.iter().enumerate().map(|(i, (row, _))| {
            let mut value = task_json(&board, &Snapshot { task: row.task()?, tip: row.tip });
            if let Some(depth) = depths.get(i) {
                value["depth"] = json!(depth);
            }
            Ok(value)
        }));
        let corrupt = board.corrupt.iter().map(|(n, p)| json!({ "ref": n, "problem": p })).collect();
        out.json(&Listing { corrupt, tasks: &tasks })?;
        out.finish()?;
        return Ok(0);
    }
    // Columns as wide as what they hold (a state may be "needs-decision"), under a header;
    // nothing at all for an empty list.
    let mut lines = Vec::with_capacity(rows.len());
    let prefixes = tree_prefixes(&depths);
    for (i, (row, readiness)) in rows.into_iter().enumerate() {
        let title = row.title()?;
        let labels: Vec<&str> = row.labels().collect();
        let id = row.id();
        let (status, note) = match &readiness {
            Readiness::Ready => ("ready", String::new()),
            Readiness::Claimed => {
                let holder = board.claims.get(id).map(|c| c.holder()).unwrap_or("?");
                let word = if board.shown_state(id, row.state) == "running" { "running" } else { "claimed" };
                (word, format!("  ({holder})"))
            }
            Readiness::Blocked(deps) => ("blocked", format!("  (after {})", deps.join(", "))),
            Readiness::Epic => ("epic", String::new()),
            Readiness::Closed => (row.state.as_str(), String::new()),
        };
        let done = if row.epic { format!("  ({} done)", board.progress(id)) } else { String::new() };
        let labels = if labels.is_empty() { String::new() } else { format!("  [{}]", labels.join(", ")) };
        let tree = prefixes.get(i).map(String::as_str).unwrap_or_default();
        lines.push((
            id.to_owned(),
            row.priority.to_string(),
            status,
            format!("{tree}{}{done}{labels}{note}", short(&title, 72)),
        ));
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
    out.finish()?;
    Ok(0)
}

/// The order of a tree over `rows` (already in the order siblings take): (index in `rows`,
/// depth), each parent followed by its children. A row whose parent is not among `rows` is a
/// root; a loop of parents (which writes refuse, but two clones could make) is cut where it
/// comes back.
fn tree_order(rows: &[&git_loop::store::index::Row]) -> Vec<(usize, usize)> {
    let at: std::collections::HashMap<&str, usize> = rows.iter().enumerate().map(|(i, r)| (r.id(), i)).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); rows.len()];
    let mut roots = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        match row.parent().and_then(|p| at.get(p)) {
            Some(&parent) if parent != i => children[parent].push(i),
            _ => roots.push(i),
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut seen = vec![false; rows.len()];
    let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        out.push((i, depth));
        stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
    }
    // What only a loop of parents reaches: shown at the top.
    for (i, seen) in seen.into_iter().enumerate() {
        if !seen {
            out.push((i, 0));
        }
    }
    out
}

/// The drawing before each title of a tree of `depths` (in tree order): `├─ `, `└─ ` and `│  `.
fn tree_prefixes(depths: &[usize]) -> Vec<String> {
    let mut out = Vec::with_capacity(depths.len());
    for (i, &depth) in depths.iter().enumerate() {
        let mut prefix = String::new();
        for level in 1..=depth {
            // Whether another task at `level` follows before the tree climbs above it.
            let more = depths[i + 1..].iter().take_while(|&&d| d >= level).any(|&d| d == level);
            prefix.push_str(match (level == depth, more) {
                (true, true) => "├─ ",
                (true, false) => "└─ ",
                (false, true) => "│  ",
                (false, false) => "   ",
            });
        }
        out.push(prefix);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::tree_prefixes;

    #[test]
    fn a_tree_is_drawn_with_its_branches() {
        // a, its children b (with child c) and d; then e.
        let drawn = tree_prefixes(&[0, 1, 2, 1, 0]);
        assert_eq!(drawn, ["", "├─ ", "│  └─ ", "└─ ", ""]);
    }
}
