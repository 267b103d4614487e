//! `git loop log`: the journal timeline.

use std::collections::HashSet;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::human::clock;
use super::output::Out;
use git_loop::backlog;
use git_loop::store::journal::{self, Entry, Filter};

/// Show the journal: every clone's and session's events in one timeline.
///
/// Example: git loop log --task t-4f2a --follow
#[derive(Args)]
pub struct LogArgs {
    /// Only events about this task (id or unique prefix).
    #[arg(long, value_name = "ID")]
    task: Option<String>,
    /// Only events of this session.
    #[arg(long, value_name = "KEY")]
    session: Option<String>,
    /// Show only the last N events (with --follow: the last N, then what comes).
    #[arg(long, short = 'n', value_name = "N")]
    limit: Option<usize>,
    /// Keep running and print new events as they are journaled (Ctrl-C to stop).
    #[arg(long, short)]
    follow: bool,
    /// Print {"events": [...]} as JSON (with --follow: one event per line).
    #[arg(long)]
    json: bool,
}

fn event_json(entry: &Entry) -> serde_json::Value {
    let mut value = serde_json::to_value(&entry.event).expect("events serialize");
    value["id"] = json!(entry.id.to_string());
    value
}

pub fn run(env: &Env, args: LogArgs) -> Result<u8> {
    let store = env.open()?;
    let task = match &args.task {
        Some(given) => Some(backlog::resolve(&store, given)?.to_string()),
        None => None,
    };
    let filter = Filter { task, session: args.session.clone() };
    let timeline = journal::timeline(&store, &filter)?;
    for problem in &timeline.problems {
        super::output::stderr_line(format!("warning: {problem}"));
    }
    let mut entries = timeline.entries;
    // Everything already journaled counts as seen, shown or not: following prints only what
    // comes after (-n shows the last n of what was there).
    let mut seen: HashSet<_> = entries.iter().map(|e| e.id).collect();
    if let Some(n) = args.limit {
        entries.drain(..entries.len().saturating_sub(n));
    }
    let mut out = Out::new();
    let now = env.ctx.now();
    if args.json && !args.follow {
        let events: Vec<_> = entries.iter().map(event_json).collect();
        out.json(&json!({ "events": events }))?;
        return Ok(0);
    }
    let print = |out: &mut Out, entry: &Entry| -> Result<()> {
        if args.json {
            return out.json_line(&event_json(entry));
        }
        let e = &entry.event;
        let summary = journal::summary(e).map(|s| format!("  {s}")).unwrap_or_default();
        out.line(format!(
            "{:<11} {:<12} {:<18} {}{summary}",
            clock(e.at, now),
            e.task.as_deref().unwrap_or("-"),
            e.kind,
            e.session.as_deref().or(e.data.get("session").and_then(|s| s.as_str())).unwrap_or(e.writer.as_str())
        ))
    };
    for entry in &entries {
        print(&mut out, entry)?;
    }
    if !args.follow {
        return Ok(0);
    }
    // Poll: the journal is refs, so there is nothing to subscribe to.
    loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let store = env.open()?;
        for entry in journal::timeline(&store, &filter)?.entries {
            if seen.insert(entry.id) {
                print(&mut out, &entry)?;
            }
        }
    }
}
