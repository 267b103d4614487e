//! `git loop finish`: a session reports its verdict, in the words of its role's contract.

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde_json::json;

use super::output::Out;
use super::Env;
use git_loop::agent::record;
use git_loop::agent::role::{self, Contract};
use git_loop::error::usage;
use git_loop::sandbox::channel::{self, Report};
use git_loop::store::events::{self, Recorded};
use git_loop::store::journal::{self, NewEvent};

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
    let Some(session) = env.ctx.session.session.clone() else {
        return Err(usage("'git loop finish' runs inside a session: GIT_LOOP_SESSION is not set")
            .hint("the loop sets it for its agents; to close a task by hand use 'git loop done <id>' or 'git loop park <id>'")
            .into());
    };
    let writer = git_loop::ids::session_writer(&session)?;
    // A confined session cannot reach the repository: it reports through its box, and the walk
    // journals what it said (having checked it again).
    let store = match &env.ctx.session.confined {
        Some(_) => None,
        None => Some(env.open()?),
    };
    // The session's role: its record says, else its environment; neither: a worker.
    let said = store
        .as_ref()
        .and_then(|store| record::read(&store.loop_dir().ok()?, &session))
        .and_then(|r| r.contract)
        .or_else(|| env.ctx.session.contract.clone());
    let contract = match said.as_deref() {
        None => Contract::Worker,
        Some(id) => id.split('/').next().and_then(Contract::parse).ok_or_else(|| {
            usage(format!("this session's contract '{id}' is not one this git-loop knows"))
                .hint("report with a result file ($GIT_LOOP_RESULT) instead")
        })?,
    };
    let word = args.verdict.word();
    if let Err(violation) = role::from_finish(contract, word, &args.message, args.subject.as_deref()) {
        let example = match contract {
            Contract::Worker => "git loop finish done --message \"<what you did>\"",
            Contract::Reviewer => "git loop finish approve|changes --message \"<your comments>\"",
            Contract::ConflictResolver => "git loop finish resolved|unresolved --message \"<what you did>\"",
            Contract::Summarizer => "git loop finish summary --subject \"<subject>\" --message \"<body>\"",
        };
        return Err(usage(format!("this session is a {} ({}): {violation}", contract.name(), contract.id()))
            .hint(format!("report as its contract says: {example}"))
            .into());
    }
    let reported = match args.usage.as_deref() {
        None => None,
        Some(text) => {
            let read = serde_json::from_str::<serde_json::Value>(text)
                .map_err(|e| format!("it is not valid JSON: {e}"))
                .and_then(|v| git_loop::store::usage::Usage::reported(&v));
            Some(read.map_err(|problem| {
                usage(format!("--usage: {problem}")).hint(
                    r#"e.g. --usage '{"input": 1200, "output": 340, "cached": 0, "model": "my-model", "usd": 0.012}'"#,
                )
            })?)
        }
    };
    let id = match &store {
        None => {
            let box_dir = env.ctx.session.confined.as_ref().expect("the store is not opened only when confined");
            let usage = args.usage.as_deref().and_then(|text| serde_json::from_str(text).ok());
            let report = Report::Finish { verdict: word.into(), message: args.message, subject: args.subject, usage };
            channel::write(box_dir, &report)?;
            None
        }
        Some(store) => {
            let (kind, data) = Recorded::Termination(events::Termination {
                verdict: word.into(),
                message: Some(args.message),
                contract: (contract != Contract::Worker).then(|| contract.id()),
                subject: args.subject,
                usage: reported,
            })
            .into_parts();
            let entry = journal::append(
                store,
                &env.ctx,
                &writer,
                NewEvent { kind, task: env.ctx.session.task.clone(), session: Some(session.clone()), data },
            )?;
            Some(entry.id.to_string())
        }
    };
    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "id": id, "verdict": word, "session": session, "contract": contract.id(),
            "confined": env.ctx.session.confined.is_some(),
        }))?;
    } else {
        let task = env.ctx.session.task.as_deref().unwrap_or("the task");
        out.line(format!("recorded '{word}' for {task} (session {session})"))?;
    }
    Ok(0)
}
