//! `git loop finish`: a session reports its verdict, in the words of its role's contract.

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::ops;

#[derive(Clone, Copy, ValueEnum)]
enum VerdictArg {
    /// A worker: the task is done (it counts once the checks pass).
    Done,
    /// A worker: the task cannot go on without something the agent does not have.
    Blocked,
    /// A worker: the agent tried and failed.
    Failed,
    /// A reviewer: the work does what the task asks.
    Approve,
    /// A reviewer: the work needs changes, said in --message.
    Changes,
    /// A conflict resolver: the conflicts are resolved in the worktree.
    Resolved,
    /// A conflict resolver: they cannot be resolved, and --message says why.
    Unresolved,
    /// A summarizer: the landing commit's message, --subject and --message (its body).
    Summary,
}

impl VerdictArg {
    fn word(self) -> &'static str {
        match self {
            VerdictArg::Done => "done",
            VerdictArg::Blocked => "blocked",
            VerdictArg::Failed => "failed",
            VerdictArg::Approve => "approve",
            VerdictArg::Changes => "changes",
            VerdictArg::Resolved => "resolved",
            VerdictArg::Unresolved => "unresolved",
            VerdictArg::Summary => "summary",
        }
    }
}

/// Report this session's verdict (for agents, inside a session).
///
/// The words are its role's: a worker says done, blocked or failed; a reviewer approve or
/// changes; a conflict resolver resolved or unresolved; a summarizer summary (with --subject).
/// It journals a termination event in the session's own journal chain, which the loop reads
/// when the session ends; in a confined session, which cannot reach the repository, the walk
/// journals it from the session's report (--json's id is then null).
///
/// Example: git loop finish done --message "parser and tests added"
#[derive(Args)]
pub struct FinishArgs {
    #[arg(value_enum)]
    verdict: VerdictArg,
    /// What was done, what is needed, what went wrong, what must change; a summary's body.
    #[arg(long, short, value_name = "TEXT", default_value = "")]
    message: String,
    /// A summarizer's subject line.
    #[arg(long, value_name = "TEXT")]
    subject: Option<String>,
    /// What this session used, as JSON: {"input":N,"output":N,"cached":N,"model":"…","turns":N,"usd":X}
    /// (every field optional); recorded with the session's end.
    #[arg(long, value_name = "JSON")]
    usage: Option<String>,
    /// Print {"id", "verdict", "session", "contract", "confined"} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: FinishArgs) -> Result<u8> {
    // A confined session cannot reach the repository: it reports through its box, and the walk
    // journals what it said (having checked it again). Outside a session nothing is opened.
    let store = match (&env.ctx.session.session, &env.ctx.session.confined) {
        (Some(_), None) => Some(env.open()?),
        _ => None,
    };
    let word = args.verdict.word();
    let verdict = ops::finish::Verdict { word, message: args.message, subject: args.subject, usage: args.usage };
    let finished = ops::finish::finish(store.as_ref(), &env.ctx, verdict)?;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "id": finished.id, "verdict": word, "session": finished.session, "contract": finished.contract.id(),
            "confined": env.ctx.session.confined.is_some(),
        }))?;
    } else {
        let task = env.ctx.session.task.as_deref().unwrap_or("the task");
        out.line(format!("recorded '{word}' for {task} (session {})", finished.session))?;
    }
    Ok(0)
}
