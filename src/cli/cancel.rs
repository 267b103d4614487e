//! `git loop cancel`.

use anyhow::Result;
use clap::Args;

use super::output::Out;
use super::Env;
use git_loop::backlog;
use git_loop::store::task::State;

/// Cancel a task: it will not be done.
///
/// Example: git loop cancel t-4f2a --reason "superseded by t-9k2m"
#[derive(Args)]
pub struct CancelArgs {
    /// The task (id or unique prefix).
    id: String,
    /// Why it is cancelled.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

pub fn run(env: &Env, args: CancelArgs) -> Result<u8> {
    let store = env.open()?;
    let id = backlog::resolve(&store, &args.id)?;
    backlog::set_state(&store, &env.ctx, &id, State::Cancelled, args.reason)?;
    Out::new().line(format!("{id} cancelled"))?;
    Ok(0)
}
