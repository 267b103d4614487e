//! `git loop reopen`.

use anyhow::Result;
use clap::Args;

use super::env::Env;
use super::output::Out;
use git_loop::backlog;
use git_loop::store::task::State;

/// Reopen a task: done, parked or cancelled, or one that waits for you (needs-you,
/// needs-decision, failed): the next walk takes it up again.
///
/// Example: git loop reopen t-4f2a
#[derive(Args)]
pub struct ReopenArgs {
    /// The task (id or unique prefix).
    id: String,
    /// Why it is reopened.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Print the task's new state as JSON (as 'show --json' does).
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ReopenArgs) -> Result<u8> {
    let store = env.open()?;
    let id = backlog::resolve(&store, &args.id)?;
    let snapshot = backlog::set_state(&store, &env.ctx, &id, State::Open, args.reason)?;
    if args.json {
        return super::output::print_task(&store, env, &snapshot, |_| {});
    }
    Out::new().line(format!("{id} reopened"))?;
    Ok(0)
}
