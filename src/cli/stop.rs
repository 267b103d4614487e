//! `git loop stop --all`.

use anyhow::Result;
use clap::Args;

use super::output::Out;
use super::Env;
use crate::error::usage;

/// Ask the walk running here to stop.
///
/// Its sessions are stopped, their work committed, their claims released; it then exits 130.
///
/// Example: git loop stop --all
#[derive(Args)]
pub struct StopArgs {
    /// Stop the whole walk.
    #[arg(long)]
    all: bool,
}

pub fn run(env: &Env, args: StopArgs) -> Result<u8> {
    if !args.all {
        return Err(usage("say what to stop").hint("git loop stop --all").into());
    }
    let store = env.open()?;
    let marker = store.loop_dir()?.join("cancel");
    std::fs::write(&marker, format!("{}\n", env.ctx.now().to_rfc3339()))?;
    Out::new().line("asked the walk to stop; it stops its sessions and commits their work first")?;
    Ok(0)
}
