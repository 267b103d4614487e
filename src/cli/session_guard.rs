//! `git-loop session-guard` (hidden): the process between a walk and an agent. See
//! `session::guard`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::Env;
use crate::session::process::{Spec, MARKER_VAR};

/// Run an agent guarded (used by 'git loop run'; not for people).
#[derive(Args)]
pub struct GuardArgs {
    /// The walk's process id.
    #[arg(long)]
    parent: u32,
    /// Between SIGTERM and SIGKILL when stopping.
    #[arg(long, default_value = "10000")]
    grace_ms: u64,
    /// Where the agent's output goes.
    #[arg(long)]
    log: PathBuf,
    /// The agent's standard input.
    #[arg(long)]
    stdin: Option<PathBuf>,
    /// The agent's program and arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run(env: &Env, args: GuardArgs) -> Result<u8> {
    let marker = std::env::var(MARKER_VAR).unwrap_or_default();
    let (program, rest) = args.command.split_first().expect("clap requires a command");
    let spec = Spec {
        program: program.clone(),
        args: rest.to_vec(),
        cwd: env.cwd.clone(),
        env: Vec::new(),
        stdin: args.stdin,
        log: args.log,
        marker,
    };
    let code = crate::session::guard::run(args.parent, Duration::from_millis(args.grace_ms), &spec)?;
    Ok(code.clamp(0, 255) as u8)
}
