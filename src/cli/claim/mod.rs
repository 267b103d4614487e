//! `git loop claim ...`: take, release and list claims.

mod acquire;
mod list;
mod release;

use anyhow::Result;
use clap::Subcommand;

use super::Env;
use git_loop::error::usage;

/// Claims: one per key, one holder, until released or left unrefreshed for its lease.
#[derive(Subcommand)]
pub enum ClaimCommand {
    Acquire(acquire::AcquireArgs),
    Release(release::ReleaseArgs),
    List(list::ListArgs),
}

pub fn run(env: &Env, cmd: ClaimCommand) -> Result<u8> {
    match cmd {
        ClaimCommand::Acquire(args) => acquire::run(env, args),
        ClaimCommand::Release(args) => release::run(env, args),
        ClaimCommand::List(args) => list::run(env, args),
    }
}

/// The holder from --holder, or the session this runs in.
fn holder(env: &Env, given: Option<String>) -> Result<String> {
    given
        .or_else(|| env.ctx.session.session.clone())
        .filter(|h| !h.trim().is_empty() && !h.contains('\n'))
        .ok_or_else(|| usage("a claim needs a holder").hint("pass --holder <name>").into())
}
