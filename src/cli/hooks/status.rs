//! `git loop hooks status`.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::{claude_settings, codex_config};
use crate::cli::env::Env;
use crate::cli::output::Out;
use git_loop::hooks::install::{self, State, Target};

/// Say which hooks are installed where: the agent CLIs' user configuration, this clone's
/// pre-push (when run in a clone), and a remote's pre-receive (with --server).
///
/// "outdated" means installed for another path of git-loop: install again to update it.
///
/// Example: git loop hooks status --server /srv/git/project.git
#[derive(Args)]
pub struct StatusArgs {
    /// Also the pre-receive hook of the repository at this path.
    #[arg(long, value_name = "REPO")]
    server: Option<PathBuf>,
    /// Print {"hooks": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: StatusArgs) -> Result<u8> {
    let mut targets = vec![Target::ClaudeCode(claude_settings()?), Target::Codex(codex_config()?)];
    // Outside a clone there is no pre-push to show.
    if let Ok(store) = env.open() {
        targets.push(Target::PrePush(install::pre_push_path(&store)));
    }
    if let Some(repo) = &args.server {
        targets.push(Target::PreReceive(install::pre_receive_path(&super::absolute(env, repo))?));
    }
    let mut out = Out::new();
    let mut rows = Vec::new();
    for target in &targets {
        let (word, key) = match install::status(target, &env.exe)? {
            State::Installed => ("installed", "installed"),
            State::Outdated => ("outdated", "outdated"),
            State::Absent { .. } => ("not installed", "not_installed"),
        };
        rows.push(json!({ "hook": target.name(), "path": target.path().display().to_string(), "state": key }));
        if !args.json {
            out.line(format!("{:<12} {:<14} {}", target.name(), word, target.path().display()))?;
        }
    }
    if args.json {
        out.json(&json!({ "hooks": rows }))?;
    }
    Ok(0)
}
