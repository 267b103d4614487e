//! `git loop hand-back`: give a task you took over back to the loop, or land it yourself.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::ops::people::{self, HandBack};
use git_loop::refs;

/// Hand back a task you took over.
///
/// Your changes in its worktree are committed to its try branch. --continue lets the agent
/// go on from there, told what you changed; --keep makes the work yours: the checks run in
/// the worktree and, if they pass, the task branch moves to your commit and the task is done.
///
/// Example: git loop hand-back t-4f2a --continue --message "fixed the parser's off-by-one"
#[derive(Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["continue", "keep"])))]
pub struct HandBackArgs {
    /// The task (id or unique prefix).
    id: String,
    /// Let the agent go on, told what you changed.
    #[arg(long)]
    r#continue: bool,
    /// Keep the work as yours: done when the checks pass.
    #[arg(long)]
    keep: bool,
    /// A note for the agent (with --continue) or the completion (with --keep).
    #[arg(long, short, value_name = "TEXT")]
    message: Option<String>,
    /// With --keep, the checks to run (default: loop.checks).
    #[arg(long, value_name = "COMMAND")]
    checks: Option<String>,
    /// Print what happened as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: HandBackArgs) -> Result<u8> {
    let store = env.open()?;
    let mode = if args.keep { HandBack::Keep } else { HandBack::Continue };
    let back = people::hand_back(&store, &env.ctx, &env.exe, &args.id, mode, args.message, args.checks)?;
    let id = &back.task;
    if mode == HandBack::Keep && !env.cwd.starts_with(&back.try_.worktree) {
        // The work has landed; the worktree is not needed (its branch stays).
        let _ = git_loop::tries::remove_worktree(&store, &back.try_);
    }
    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "task": id.to_string(), "mode": if args.keep { "keep" } else { "continue" }, "try": back.try_.number,
            "commit": back.commit.map(|c| c.to_string()), "changes": back.changes,
            "landed": back.landed.map(|c| c.to_string()),
            "merge": back.merged.as_ref().map(|(m, concluded)| json!({
                "into": m.into, "from": m.from, "paths": m.paths, "concluded": concluded,
            })),
        }))?;
        return Ok(0);
    }
    let saved = match back.commit {
        Some(c) => format!(
            "your changes ({}) are committed on {} as {}",
            super::human::count(back.changes.len() as u64, "file", "files"),
            refs::short_branch(&back.try_.branch),
            git_loop::ids::short_commit(&c)
        ),
        None => "you changed nothing".to_owned(),
    };
    out.line(format!("{id} · {saved}"))?;
    if let Some((m, concluded)) = &back.merged {
        out.line(if *concluded {
            format!("{id} · the merge of {} into {} is concluded: its conflicts are resolved", m.from, m.into)
        } else {
            format!("{id} · the merge of {} into {} is still in progress: the agent finishes it", m.from, m.into)
        })?;
    }
    match (back.landed, &back.merged) {
        (Some(c), Some((m, _))) => out.line(format!(
            "{id} done · loop/{id} moved to {}: it lands on {} without a conflict (git loop land)",
            git_loop::ids::short_commit(&c),
            m.into
        ))?,
        (Some(c), None) => out.line(format!("{id} done · loop/{id} moved to {}", git_loop::ids::short_commit(&c)))?,
        (None, _) => out.line(format!("{id} is open again: the next walk's agent goes on, told what you changed"))?,
    }
    Ok(0)
}
