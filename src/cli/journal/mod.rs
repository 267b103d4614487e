//! `git loop journal ...`: plumbing for sessions and hooks.

pub(super) mod append;

use anyhow::Result;
use clap::Subcommand;

use crate::cli::env::Env;

/// The journal's plumbing.
#[derive(Subcommand)]
pub enum JournalCommand {
    Append(append::AppendArgs),
}

pub fn run(env: &Env, cmd: JournalCommand) -> Result<u8> {
    match cmd {
        JournalCommand::Append(args) => append::run(env, args),
    }
}
