//! `git loop finish`: a session reports its verdict.

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde_json::json;

use super::output::Out;
use super::Env;
use git_loop::error::usage;
use git_loop::store::events::{self, Recorded};
use git_loop::store::journal::{self, NewEvent};

#[derive(Clone, Copy, ValueEnum)]
enum VerdictArg {
    /// The task is done (it counts once the checks pass).
    Done,
    /// The task cannot go on without something the agent does not have.
    Blocked,
    /// The agent tried and failed.
    Failed,
}

/// Report this session's verdict (for agents, inside a session).
///
/// It journals a termination event in the session's own journal chain, which the loop reads
/// when the session ends.
///
/// Example: git loop finish done --message "parser and tests added"
#[derive(Args)]
pub struct FinishArgs {
    #[arg(value_enum)]
    verdict: VerdictArg,
    /// What was done, what is needed, or what went wrong.
    #[arg(long, short, value_name = "TEXT", default_value = "")]
    message: String,
    /// Print {"id": ...} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: FinishArgs) -> Result<u8> {
    let Some(session) = env.ctx.session.session.clone() else {
        return Err(usage("'git loop finish' runs inside a session: GIT_LOOP_SESSION is not set")
            .hint("the loop sets it for its agents; to close a task by hand use 'git loop done <id>' or 'git loop park <id>'")
            .into());
    };
    let writer = git_loop::ids::session_writer(&session)?;
    let store = env.open()?;
    let word = match args.verdict {
        VerdictArg::Done => "done",
        VerdictArg::Blocked => "blocked",
        VerdictArg::Failed => "failed",
    };
    let (kind, data) =
        Recorded::Termination(events::Termination { verdict: word.into(), message: Some(args.message) }).into_parts();
    let entry = journal::append(
        &store,
        &env.ctx,
        &writer,
        NewEvent { kind, task: env.ctx.session.task.clone(), session: Some(session.clone()), data },
    )?;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({ "id": entry.id.to_string(), "verdict": word, "session": session }))?;
    } else {
        let task = env.ctx.session.task.as_deref().unwrap_or("the task");
        out.line(format!("recorded '{word}' for {task} (session {session})"))?;
    }
    Ok(0)
}
