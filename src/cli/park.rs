//! `git loop park`.

use anyhow::Result;
use clap::Args;

use super::env::Env;
use super::output::Out;
use git_loop::backlog;
use git_loop::store::task::State;

/// Park a task: set it aside with a reason; `next` skips it until it is reopened.
///
/// Example: git loop park t-4f2a --reason "needs a design decision"
#[derive(Args)]
pub struct ParkArgs {
    /// The task (id or unique prefix).
    id: String,
    /// Why it is parked.
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Print the task's new state as JSON (as 'show --json' does).
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ParkArgs) -> Result<u8> {
    if args.reason.trim().is_empty() {
        return Err(git_loop::error::usage("a parked task needs a reason")
            .hint("--reason \"waiting for the API spec\"")
            .into());
    }
    let store = env.open()?;
    let id = backlog::resolve(&store, &args.id)?;
    let snapshot = backlog::set_state(&store, &env.ctx, &id, State::Parked, Some(args.reason))?;
    if args.json {
        return super::output::print_task(&store, env, &snapshot, |_| {});
    }
    Out::new().line(format!("{id} parked"))?;
    Ok(0)
}
