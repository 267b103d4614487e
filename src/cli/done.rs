//! `git loop done`.

use anyhow::Result;
use clap::Args;

use super::output::Out;
use super::Env;
use crate::backlog::{self, DoneOptions};
use crate::store::task;

/// Mark a task done, with its evidence.
///
/// The evidence (who, when, which commit, the message) is recorded in the task and as a note
/// on the completing commit: 'git notes --ref=loop show <commit>'.
///
/// With --try N, the decision between tries (after a stop, or a race that needs one): the task
/// branch moves to try N by compare-and-swap, never while it is checked out.
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
}

pub fn run(env: &Env, args: DoneArgs) -> Result<u8> {
    let store = env.open()?;
    // A task whose history is damaged is reported (exit 3) before anything is added to it.
    task::read_whole(&store, &backlog::resolve(&store, &args.id)?)?;
    if let Some(n) = args.try_number {
        let decided = crate::people::decide(&store, &env.ctx, &args.id, n, args.message)?;
        let commit = decided.commit.to_string();
        Out::new().line(format!(
            "{} done with try {n} · loop/{} moved to {}",
            decided.task,
            decided.task,
            &commit[..12]
        ))?;
        return Ok(0);
    }
    let id = backlog::resolve(&store, &args.id)?;
    let opts = DoneOptions { commit: args.commit, message: args.message, ..Default::default() };
    let snapshot = backlog::done(&store, &env.ctx, &id, opts)?;
    let commit = snapshot.task.completion.as_ref().and_then(|c| c.commit.clone());
    let mut out = Out::new();
    match commit {
        Some(commit) => out.line(format!("{id} done at {}", &commit[..12]))?,
        None => out.line(format!("{id} done"))?,
    }
    Ok(0)
}
