//! `git loop journal append`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::output::Out;
use crate::cli::Env;
use git_loop::backlog;
use git_loop::error::usage;
use git_loop::store::journal::{self, NewEvent};

/// Append one event to the journal (plumbing for sessions and hooks).
///
/// Run inside a session ($GIT_LOOP_SESSION set), the event goes to that session's own chain.
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
