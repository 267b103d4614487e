//! `git loop init`: prepare a repository and choose the remote that arbitrates claims.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::output::Out;
use super::Env;
use git_loop::error::usage;

/// Prepare this repository for git-loop.
///
/// Refuses bare and reftable repositories, makes sure loop writes have a committer identity,
/// and records the remote that arbitrates claims across clones (loop.remote).
///
/// Example: git loop init --remote origin
#[derive(Args)]
pub struct InitArgs {
    /// The remote whose refs decide who holds a claim (stored as loop.remote).
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: InitArgs) -> Result<u8> {
    let mut store = if args.remote.is_some() { env.open_as_configured()? } else { env.open()? };
    let clone_id = store.clone_id()?;
    if let Some(remote) = &args.remote {
        if !store.has_remote(remote.as_str()) {
            return Err(usage(format!("remote '{remote}' is not configured"))
                .hint("add it first with 'git remote add <name> <url>'")
                .into());
        }
        store.set_local_config("loop.remote", remote)?;
    }
    let identity = store.identity.to_string();
    let configured = store.identity.configured;
    let arbiter = store.arbiter();
    let mut out = Out::new();
    if args.json {
        return out
            .json(&json!({
                "repository": store.workdir().display().to_string(),
                "clone_id": clone_id,
                "remote": arbiter,
                "identity": identity,
                "identity_configured": configured,
            }))
            .map(|()| 0);
    }
    out.line(format!("git-loop is ready in {}", store.workdir().display()))?;
    match &arbiter {
        Some(remote) => out.line(format!("  claims are decided by remote '{remote}'"))?,
        None => out.line("  claims are decided in this clone (share them with 'git loop init --remote <name>')")?,
    }
    if configured {
        out.line(format!("  loop writes are made as {identity}"))?;
    } else {
        out.line(format!("  loop writes are made as {identity} (set user.name and user.email to use your own)"))?;
    }
    Ok(0)
}
