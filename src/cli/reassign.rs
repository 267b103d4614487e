//! `git loop reassign`: give a task to another agent (or restart its agent).

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::ops::people;

/// Give a task to another agent, or restart its agent.
///
/// A running session is asked to wrap up (it sees $GIT_LOOP_WRAP_UP; CLIs that take an
/// interrupt get one), given the wrap-up time (30 s unless the walk says otherwise), then
/// stopped; its work is committed; the next session starts with the new agent and a note of
/// the work so far (what changed, the last session's own summary). Reassigning to the same
/// agent restarts it. A task that needs a decision, needs you or failed is reopened. An agent
/// the task or loop.forbid forbids needs --override with the reason, which is recorded.
///
/// Example: git loop reassign t-4f2a codex
#[derive(Args)]
pub struct ReassignArgs {
    /// The task (id or unique prefix).
    id: String,
    /// The agent: a preset or a name defined with loop.agent.<name>.command.
    agent: String,
    /// Assign an agent a rule forbids, recording why.
    #[arg(long, value_name = "REASON")]
    r#override: Option<String>,
    /// Print what happened as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ReassignArgs) -> Result<u8> {
    let store = env.open()?;
    let done = people::reassign(&store, &env.ctx, &env.exe, &args.id, &args.agent, args.r#override)?;
    let id = &done.task;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "task": id.to_string(), "from": done.from, "to": done.to,
            "reopened_from": done.reopened.map(|s| s.as_str()),
            "wrapped_up": done.wrapped.as_ref().map(|s| json!({ "session": s.session, "agent": s.agent, "try": s.try_number, "ended": s.ended })),
            "elsewhere": done.elsewhere,
        }))?;
        return Ok(0);
    }
    let same = done.from.as_deref() == Some(done.to.as_str());
    let head = if same {
        format!("{id} · {} restarts", done.to)
    } else {
        match &done.from {
            Some(from) => format!("{id} · reassigned from {from} to {}", done.to),
            None => format!("{id} · assigned to {}", done.to),
        }
    };
    out.line(head)?;
    if let Some(state) = done.reopened {
        out.line(format!("{id} was {} and is open again", state.as_str()))?;
    }
    match (&done.wrapped, &done.elsewhere) {
        (Some(s), _) => {
            let how = match &s.ended {
                Some(why) => format!("ended ({why})"),
                None => "is still wrapping up".to_owned(),
            };
            out.line(format!(
                "{}'s session {} {how}; its work is committed on loop-try/{id}/{} and {} goes on from there",
                s.agent, s.session, s.try_number, done.to
            ))?;
        }
        (None, Some(walker)) => {
            out.line(format!("{walker} works on it and hands it over at its next sync"))?;
        }
        (None, None) => out.line(format!("the next walk gives it to {}", done.to))?,
    }
    Ok(0)
}
