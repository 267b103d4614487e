//! `git loop cancel`.

use anyhow::Result;
use clap::Args;

use serde_json::json;

use super::env::Env;
use super::output::{task_json, Out};
use git_loop::backlog::{self, Board};
use git_loop::store::index::Row;
use git_loop::store::task::State;

/// Cancel a task: it will not be done.
///
/// The open tasks that wait for it (list it with --after) are named: they stay blocked until
/// the dependency is dropped or the task is reopened.
///
/// Example: git loop cancel t-4f2a --reason "superseded by t-9k2m"
#[derive(Args)]
pub struct CancelArgs {
    /// The task (id or unique prefix).
    id: String,
    /// Why it is cancelled.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Print the task's new state as JSON (as 'show --json' does), with the tasks it leaves
    /// blocked (leaves_blocked).
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: CancelArgs) -> Result<u8> {
    let store = env.open()?;
    let id = backlog::resolve(&store, &args.id)?;
    let snapshot = backlog::set_state(&store, &env.ctx, &id, State::Cancelled, args.reason)?;
    let board = Board::load(&store, &env.ctx)?;
    let waiting: Vec<&Row> = board.waiting_for(id.as_str());
    if args.json {
        let mut value = task_json(&board, &snapshot);
        value["leaves_blocked"] = json!(waiting.iter().map(|r| r.id()).collect::<Vec<_>>());
        Out::new().json(&value)?;
        return Ok(0);
    }
    let mut out = Out::new();
    out.line(format!("{id} cancelled"))?;
    if !waiting.is_empty() {
        let them: Vec<&str> = waiting.iter().map(|r| r.id()).collect();
        let (they, wait) = if them.len() == 1 { ("it", "waits") } else { ("they", "wait") };
        out.line(format!(
            "  it leaves blocked {}: {they} {wait} for {id} (git loop edit <task> --remove-after {id}, or git loop reopen {id})",
            them.join(", ")
        ))?;
    }
    Ok(0)
}
