//! `git loop hooks uninstall`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::{label, Selection};
use crate::cli::env::Env;
use crate::cli::output::Out;
use git_loop::hooks::install::{self, Removed};

/// Remove what 'git loop hooks install' added, and nothing else.
///
/// A file that held nothing but our hooks is removed.
///
/// Example: git loop hooks uninstall --agent claude-code
#[derive(Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    which: Selection,
    /// Print {"hooks": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: UninstallArgs) -> Result<u8> {
    let targets = args.which.targets(env)?;
    let mut out = Out::new();
    let mut rows = Vec::new();
    for target in &targets {
        let done = install::uninstall(target)?;
        let word = match done {
            Removed::Removed => "removed",
            Removed::NotInstalled => "not_installed",
        };
        rows.push(json!({ "hook": target.name(), "path": target.path().display().to_string(), "outcome": word }));
        if !args.json {
            let path = target.path().display();
            out.line(match done {
                Removed::Removed => format!("removed {} from {path}", label(target)),
                Removed::NotInstalled => format!("{} were not installed in {path}", label(target)),
            })?;
        }
    }
    if args.json {
        out.json(&json!({ "hooks": rows }))?;
    }
    Ok(0)
}
