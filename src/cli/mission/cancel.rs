//! `git loop mission cancel`.

use anyhow::Result;
use clap::Args;

use crate::cli::env::Env;
use crate::cli::output::Out;
use git_loop::mission::{plan, MissionId};

/// Cancel a mission: it will not be run again.
///
/// A commander running it stops its child walk (whose sessions are stopped and their work
/// committed) and exits 130. The projects' tasks are left as they are.
///
/// Example: git loop mission cancel v2 --reason "superseded by v3"
#[derive(Args)]
pub struct CancelArgs {
    /// The mission's id.
    id: MissionId,
    /// Why it is cancelled.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

pub fn run(env: &Env, args: CancelArgs) -> Result<u8> {
    let store = env.open()?;
    plan::cancel(&store, &env.ctx, &args.id, args.reason)?;
    Out::new().line(format!("mission {} cancelled", args.id))?;
    Ok(0)
}
