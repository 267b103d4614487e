//! `git loop sync`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::output::Out;
use super::Env;
use git_loop::refs;
use git_loop::store::sync::{self, Change};

/// Exchange loop state with a remote.
///
/// Fetches its tasks, journal, notes, claims and task branches, merges them with ours
/// (nothing is lost, nothing is forced), and pushes what it lacks, then lists each ref that
/// changed.
///
/// Example: git loop sync --remote origin
#[derive(Args)]
pub struct SyncArgs {
    /// The remote (default: loop.remote, else origin).
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// Print {"remote": ..., "refs": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

fn word(change: &Change) -> &'static str {
    match change {
        Change::Fetched => "fetched",
        Change::FastForwarded => "fast-forwarded",
        Change::Merged => "merged",
        Change::Pushed => "pushed",
        Change::Removed => "removed",
        Change::Kept { .. } => "kept both",
        Change::Problem(_) => "problem",
    }
}

pub fn run(env: &Env, args: SyncArgs) -> Result<u8> {
    let store = env.open()?;
    let remote = sync::choose_remote(&store, args.remote.as_deref())?;
    let report = sync::sync(&store, &env.ctx, &remote)?;
    let mut out = Out::new();
    let troubled = report.changes.iter().filter(|c| matches!(c.change, Change::Problem(_))).count();
    if args.json {
        let refs: Vec<_> = report
            .changes
            .iter()
            .map(|c| {
                let detail = match &c.change {
                    Change::Problem(d) => Some(d.clone()),
                    Change::Kept { kept_as } => Some(kept_as.clone()),
                    _ => None,
                };
                json!({ "ref": c.name, "change": word(&c.change), "detail": detail })
            })
            .collect();
        out.json(&json!({ "remote": report.remote, "refs": refs }))?;
    } else {
        for c in &report.changes {
            match &c.change {
                Change::Problem(d) => out.line(format!("{:<15} {}  ({d})", word(&c.change), c.name))?,
                Change::Kept { kept_as } => out.line(format!(
                    "{:<15} {}  (the two sides diverged: the remote's stays, ours is kept as {})",
                    word(&c.change),
                    c.name,
                    refs::short_branch(kept_as)
                ))?,
                other => out.line(format!("{:<15} {}", word(other), c.name))?,
            }
        }
        if report.changes.is_empty() {
            super::output::stderr_line(format!("already in sync with '{}'", report.remote));
        } else {
            super::output::stderr_line(format!(
                "synced with '{}': {} refs changed",
                report.remote,
                report.changes.len() - troubled
            ));
        }
    }
    if troubled > 0 {
        super::output::stderr_line(format!("warning: {troubled} refs could not be synced; see above"));
        return Ok(super::exit::FAILED);
    }
    Ok(0)
}
