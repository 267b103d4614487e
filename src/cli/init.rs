//! `git loop init`: prepare a repository and choose the remote that arbitrates claims.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
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

/// How long `init --remote` waits for the remote to answer.
const REACH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why `remote` cannot be reached from `dir` (one line), or `None` when it answered. A
/// remote that does not answer within [`REACH_TIMEOUT`] counts as unreachable; the `git
/// ls-remote` asking it is left to end by itself.
fn unreachable(dir: &std::path::Path, remote: &str) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (dir, name) = (dir.to_owned(), remote.to_owned());
    std::thread::spawn(move || {
        let _ = tx.send(git_loop::git::program::ls_remote(&dir, &name, &["refs/loop/".to_owned()], REACH_TIMEOUT));
    });
    match rx.recv_timeout(REACH_TIMEOUT) {
        Ok(Ok(_)) => None,
        Ok(Err(err)) => Some(
            super::remote_error::summarize(&format!("{err:#}"))
                .unwrap_or_else(|| format!("could not read the remote '{remote}': {err:#}")),
        ),
        Err(_) => Some(format!(
            "the remote '{remote}' did not answer within {} s: check the URL or the network",
            REACH_TIMEOUT.as_secs()
        )),
    }
}

pub fn run(env: &Env, args: InitArgs) -> Result<u8> {
    let mut store = if args.remote.is_some() { env.open_as_configured()? } else { env.open()? };
    let clone_id = store.clone_id()?;
    let mut taken = None;
    if let Some(remote) = &args.remote {
        if !store.has_remote(remote.as_str()) {
            return Err(usage(format!("remote '{remote}' is not configured"))
                .hint("add it first with 'git remote add <name> <url>'")
                .into());
        }
        store.set_local_config("loop.remote", remote)?;
        // Said now rather than at the first claim: the setting stands either way (the remote
        // may be down for a moment), but a wrong URL should not wait to be found.
        if let Some(why) = unreachable(store.workdir(), remote) {
            super::output::stderr_line(format!("warning: {why}"));
            super::output::stderr_line(format!(
                "hint: loop.remote is set to '{remote}' all the same; claims need it reachable ('git loop sync' tries it again)"
            ));
        } else {
            // Following a remote starts from its state: a fresh clone's board is the remote's
            // backlog from the first command, not an empty one until a sync.
            match git_loop::store::sync::take_remote_state(&store, &env.ctx, remote) {
                Ok(changes) => taken = Some(changes),
                Err(err) => {
                    let text = format!("{err:#}").replace('\n', " ");
                    super::output::stderr_line(format!("warning: could not take the remote's loop state: {text}"));
                    super::output::stderr_line("hint: 'git loop sync' takes it once the remote answers");
                }
            }
        }
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
                "taken_from_remote": taken,
            }))
            .map(|()| 0);
    }
    out.line(format!("git-loop is ready in {}", store.workdir().display()))?;
    match &arbiter {
        Some(remote) => {
            out.line(format!("  claims are decided by remote '{remote}'"))?;
            match taken {
                Some(0) => out.line(format!("  this clone holds everything remote '{remote}' holds of the loop"))?,
                Some(n) => out.line(format!("  took the loop's state from remote '{remote}' ({n} refs)"))?,
                None => {}
            }
        }
        None => out.line("  claims are decided in this clone (share them with 'git loop init --remote <name>')")?,
    }
    if configured {
        out.line(format!("  loop writes are made as {identity}"))?;
    } else {
        out.line(format!("  loop writes are made as {identity} (set user.name and user.email to use your own)"))?;
    }
    Ok(0)
}
