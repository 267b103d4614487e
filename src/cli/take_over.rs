//! `git loop take-over`: work a task by hand.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::ops::people;
use git_loop::refs;

/// Take a task over by hand.
///
/// The running session is stopped after its current step (a wrap-up request, then a stop),
/// its work is committed, and the claim passes to you: the loop will not dispatch the task.
/// You get the try's worktree and the agent's own command to resume its last session, ready
/// to paste. A task whose landing conflicted gets a new try whose worktree holds that merge in
/// progress (the task branch into the target's tip, the markers naming both sides, as `git
/// merge` leaves it): resolve it there once, and hand it back. When you are done: git loop hand-back <task> --keep (your work lands when the
/// checks pass) or --continue (the agent goes on, told what you changed).
///
/// Example: git loop take-over t-4f2a
#[derive(Args)]
pub struct TakeOverArgs {
    /// The task (id or unique prefix).
    id: String,
    /// Print the worktree and resume command as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: TakeOverArgs) -> Result<u8> {
    let store = env.open()?;
    let taken = people::take_over(&store, &env.ctx, &env.exe, &args.id)?;
    let id = &taken.task;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "task": id.to_string(), "try": taken.try_.number, "branch": refs::short_branch(&taken.try_.branch),
            "worktree": taken.try_.worktree, "resume": taken.resume, "agent": taken.agent, "opened": taken.opened,
            "stopped": taken.stopped.as_ref().map(|s| json!({ "session": s.session, "ended": s.ended })),
            "merging": taken.merging.as_ref().map(|m| json!({
                "into": m.into, "from": m.from, "ours": m.ours, "theirs": m.theirs, "paths": m.paths,
            })),
        }))?;
        return Ok(0);
    }
    if let Some(s) = &taken.stopped {
        let how = s.ended.as_deref().unwrap_or("still wrapping up");
        out.line(format!("{}'s session {} ended ({how}); its work is committed", s.agent, s.session))?;
    }
    out.line(format!("{id} is yours: the loop leaves it alone until you hand it back"))?;
    out.line(format!("  worktree  {}", taken.try_.worktree.display()))?;
    out.line(format!("  branch    {}", refs::short_branch(&taken.try_.branch)))?;
    if let Some(m) = &taken.merging {
        out.line(format!(
            "  merging   {} into {}, in progress: conflicts in {} (git status lists them; the markers name both sides)",
            m.from,
            m.into,
            m.paths.join(", ")
        ))?;
    }
    match (&taken.resume, &taken.agent) {
        (Some(resume), _) => out.line(format!("  resume    {resume}"))?,
        (None, Some(agent)) => out.line(format!("  resume    ({agent} left no session id to resume)"))?,
        (None, None) => {}
    }
    if taken.merging.is_some() {
        out.line(format!(
            "resolve them (commit the merge, or leave it to the loop), then: git loop hand-back {id} --keep   (or --continue to let the agent finish it)"
        ))?;
    } else {
        out.line(format!(
            "when you are done: git loop hand-back {id} --keep   (or --continue to let the agent go on)"
        ))?;
    }
    Ok(0)
}
