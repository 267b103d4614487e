//! `git loop claim ...`: take, release and list claims.

mod acquire;
mod list;
mod release;

use anyhow::Result;
use clap::Subcommand;

use crate::cli::env::Env;
use git_loop::error::usage;
use git_loop::store::claim;

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
    let holder = given
        .or_else(|| env.ctx.session.session.clone())
        .filter(|h| !h.trim().is_empty())
        .ok_or_else(|| usage("a claim needs a holder").hint("pass --holder <name>"))?;
    // What a claim record may name (the remote's hook refuses anything else, too).
    claim::check_holder(&holder).map_err(|why| {
        usage(format!("holder '{}' {why}", holder.escape_debug()))
            .hint("pass a printable name, such as --holder agent-7")
    })?;
    Ok(holder)
}
