//! `git loop done`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::human::{relative, short};
use super::output::Out;
use git_loop::backlog::{self, DoneOptions, Redo};
use git_loop::store::task;

/// A commit id as shown to people: its first 12 characters.
fn short_id(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// Mark a task done, with its evidence.
///
/// The evidence (who, when, which commit, the message) is recorded in the task and as a note
/// on the completing commit: 'git notes --ref=loop show <commit>'.
///
/// With --try N, the decision between tries (after a stop, or a race that needs one): the task
/// branch moves to try N by compare-and-swap, never while it is checked out.
///
/// A task done already is refused (exit 1): its evidence is replaced only with --amend, which
/// records the new evidence as a new change, so the old stays in the task's history. The same
/// done again (same commit and message) exits 0 and writes only what an interrupted one left
/// unwritten (its note, its anchor).
///
/// Example: git loop done t-4f2a --commit HEAD --message "parser lands"
#[derive(Args)]
pub struct DoneArgs {
    /// The task (id or unique prefix).
    id: String,
    /// The commit that completed it (default: the head of its task branch loop/<id>, if any).
    #[arg(long, value_name = "REV")]
    commit: Option<String>,
    /// What was done.
    #[arg(long, short, value_name = "TEXT")]
    message: Option<String>,
    /// Accept try N: move the task branch to it (fast-forward, else a merge) and mark it done.
    #[arg(long = "try", value_name = "N", conflicts_with = "commit")]
    try_number: Option<u32>,
    /// Replace the evidence of a task done already (the old stays in its history).
    #[arg(long, conflicts_with = "try_number")]
    amend: bool,
    /// Print the task's new state as JSON (as 'show --json' does), with again (the same done
    /// was recorded already) and replaced (the evidence --amend replaced, or null).
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: DoneArgs) -> Result<u8> {
    let store = env.open()?;
    // A task whose history is damaged is reported (exit 3) before anything is added to it.
    task::read_whole(&store, &backlog::resolve(&store, &args.id)?)?;
    if let Some(n) = args.try_number {
        let decided = git_loop::ops::people::decide(&store, &env.ctx, &args.id, n, args.message)?;
        if args.json {
            let snapshot = task::read(&store, &decided.task)?
                .ok_or_else(|| anyhow::anyhow!("task '{}' vanished after it was done", decided.task))?;
            return super::output::print_task(&store, env, &snapshot, |v| {
                v["again"] = json!(false);
                v["replaced"] = serde_json::Value::Null;
            });
        }
        let commit = decided.commit.to_string();
        Out::new().line(format!(
            "{} done with try {n} · loop/{} moved to {}",
            decided.task,
            decided.task,
            git_loop::ids::short_commit(&commit)
        ))?;
        return Ok(0);
    }
    let id = backlog::resolve(&store, &args.id)?;
    let opts = DoneOptions { commit: args.commit, message: args.message, ..Default::default() };
    let redo = if args.amend { Redo::Amend } else { Redo::Refuse };
    let marked = backlog::mark_done(&store, &env.ctx, &id, opts, redo)?;
    if args.json {
        return super::output::print_task(&store, env, &marked.snapshot, |v| {
            v["again"] = json!(marked.again);
            v["replaced"] = json!(marked.replaced);
        });
    }
    let commit = marked.snapshot.task.completion.as_ref().and_then(|c| c.commit.clone());
    let mut out = Out::new();
    match commit {
        Some(commit) if marked.again => {
            out.line(format!("{id} was done at {} already: its evidence is complete", short_id(&commit)))?
        }
        Some(commit) => out.line(format!("{id} done at {}", short_id(&commit)))?,
        None => out.line(format!("{id} done"))?,
    }
    if let Some(old) = &marked.replaced {
        let at = old.commit.as_deref().map(|c| format!(" at {}", short_id(c))).unwrap_or_default();
        let said = old.message.as_deref().map(|m| format!(": {}", short(m, 60))).unwrap_or_default();
        out.line(format!("  replaced: done{at} {} by {}{said}", relative(old.at, env.ctx.now()), old.by))?;
        out.line(format!("  (the old evidence stays in its history: git log -p refs/loop/tasks/{id})"))?;
    }
    Ok(0)
}
