//! `git loop hooks install`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::{label, Selection};
use crate::cli::env::Env;
use crate::cli::output::Out;
use git_loop::hooks::install::{self, Installed};

/// Install hooks: agent CLIs' (so sessions you start yourself report too), this clone's
/// pre-push, or a remote's pre-receive.
///
/// Our part sits between '# >>> git-loop' and '# <<< git-loop' markers (in Claude Code's
/// settings: the hook entries that run 'git-loop hook claude-code'); whatever was there stays.
/// Installing again changes nothing. The hooks run this program by its absolute path.
///
/// Example: git loop hooks install --agent all --git
#[derive(Args)]
pub struct InstallArgs {
    #[command(flatten)]
    which: Selection,
    /// Print {"hooks": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: InstallArgs) -> Result<u8> {
    let targets = args.which.targets(env)?;
    let mut out = Out::new();
    let mut rows = Vec::new();
    for target in &targets {
        let done = install::install(target, &env.exe)?;
        let word = match done {
            Installed::Added => "installed",
            Installed::Updated => "updated",
            Installed::Unchanged => "unchanged",
        };
        rows.push(json!({ "hook": target.name(), "path": target.path().display().to_string(), "outcome": word }));
        if !args.json {
            let path = target.path().display();
            out.line(match done {
                Installed::Added => format!("installed {} in {path}", label(target)),
                Installed::Updated => format!("updated {} in {path}", label(target)),
                Installed::Unchanged => format!("{} in {path} were already installed", label(target)),
            })?;
        }
    }
    if args.json {
        out.json(&json!({ "hooks": rows }))?;
    }
    Ok(0)
}
