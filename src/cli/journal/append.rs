//! `git loop journal append`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::env::Env;
use crate::cli::output::Out;
use git_loop::backlog;
use git_loop::error::usage;
use git_loop::store::journal::{self, NewEvent};

/// Append one event to the journal (plumbing for sessions and hooks).
///
/// Run inside a session ($GIT_LOOP_SESSION set), the event goes to that session's own chain;
/// a session may append only events of kinds git-loop does not read itself (a note, a
/// progress mark), about its own task (in a confined session, the walk journals it).
///
/// Example: git loop journal append note --data '{"message":"tests pass"}'
#[derive(Args)]
pub struct AppendArgs {
    /// The event kind: lowercase letters, digits and '_'.
    kind: String,
    /// The event's data: a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    data: String,
    /// The task it is about (default: $GIT_LOOP_TASK).
    #[arg(long, value_name = "ID")]
    task: Option<String>,
    /// The session it is about (default: $GIT_LOOP_SESSION).
    #[arg(long, value_name = "KEY")]
    session: Option<String>,
    /// Print {"id": ...} as JSON.
    #[arg(long)]
    json: bool,
}

impl AppendArgs {
    /// Whether, run inside a session, it speaks only for that session: a kind git-loop does not
    /// read (so nothing the loop decides can be forged with it), its own task and session.
    pub(in crate::cli) fn speaks_for_itself(&self, env: &Env) -> bool {
        // A session of a walk has its task; one that names none may name the task it is about.
        let own = |given: &Option<String>, mine: &Option<String>| given.is_none() || mine.is_none() || given == mine;
        !git_loop::store::events::Recorded::KINDS.contains(&self.kind.as_str())
            && own(&self.task, &env.ctx.session.task)
            && own(&self.session, &env.ctx.session.session)
    }
}

pub fn run(env: &Env, args: AppendArgs) -> Result<u8> {
    journal::check_kind(&args.kind)?;
    let data = match serde_json::from_str::<serde_json::Value>(&args.data) {
        Ok(serde_json::Value::Object(map)) => map,
        Ok(_) => {
            return Err(usage("--data must be a JSON object").hint("e.g. --data '{\"message\":\"hello\"}'").into())
        }
        Err(err) => {
            return Err(usage(format!("--data is not valid JSON: {err}"))
                .hint("e.g. --data '{\"message\":\"hello\"}'")
                .into())
        }
    };
    if let Some(box_dir) = &env.ctx.session.confined {
        let report = git_loop::sandbox::channel::Report::Event { kind: args.kind.clone(), data };
        git_loop::sandbox::channel::write(box_dir, &report)?;
        let mut out = Out::new();
        if args.json {
            out.json(&json!({ "id": null, "writer": env.ctx.session.session, "seq": null, "confined": true }))?;
        } else {
            out.line(format!("reported '{}': the walk journals it", args.kind))?;
        }
        return Ok(0);
    }
    let store = env.open()?;
    let task = match args.task.or_else(|| env.ctx.session.task.clone()) {
        Some(given) => Some(backlog::resolve(&store, &given)?.to_string()),
        None => None,
    };
    let session = args.session.or_else(|| env.ctx.session.session.clone());
    let writer = backlog::writer(&store, &env.ctx)?;
    let entry = journal::append(&store, &env.ctx, &writer, NewEvent { kind: args.kind, task, session, data })?;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({ "id": entry.id.to_string(), "writer": entry.event.writer, "seq": entry.event.seq }))?;
    } else {
        out.line(entry.id)?;
    }
    Ok(0)
}
