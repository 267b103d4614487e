//! `git loop stop`: stop one session (the task goes to needs-decision), or the whole walk.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::error::{refused, usage};
use git_loop::ops::people;

/// Stop a session, or the whole walk.
///
/// With a session key or a task: that session stops, its work is committed to its try
/// branch, and the task goes to needs-decision with the reason "you stopped its session".
/// Then continue it (git loop reopen), accept the try (git loop done <task> --try <n>), give it
/// to another agent (git loop reassign) or take it over (git loop take-over). A stop written
/// on another clone is obeyed by the walk at its next sync.
///
/// With --all: the walk running in this repository stops its sessions, commits their work,
/// releases their claims and exits 130; with no walk running, stop --all says so and exits 1.
///
/// Example: git loop stop t-4f2a
#[derive(Args)]
pub struct StopArgs {
    /// A session key (s-…) or a task (id or unique prefix).
    #[arg(value_name = "SESSION|TASK", conflicts_with = "all")]
    target: Option<String>,
    /// Stop the whole walk.
    #[arg(long)]
    all: bool,
    /// Print what happened as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: StopArgs) -> Result<u8> {
    let store = env.open()?;
    let mut out = Out::new();
    let Some(target) = args.target else {
        if !args.all {
            return Err(usage("say what to stop").hint("git loop stop <session|task>, or git loop stop --all").into());
        }
        let Some(running) = running_here(&store, env)? else {
            return Err(refused("no walk is running here: nothing to stop")
                .hint("git loop status shows what runs; to stop one task's session elsewhere: git loop stop <task>")
                .into());
        };
        let marker = store.layout()?.cancel();
        std::fs::write(&marker, format!("{}\n", env.ctx.now().to_rfc3339()))?;
        let (said, value) = running;
        if args.json {
            out.json(&json!({ "stopping": value }))?;
        } else {
            out.line(format!("asked {said} to stop; it stops its sessions and commits their work first"))?;
        }
        return Ok(0);
    };
    let stopped = people::stop(&store, &env.ctx, &target)?;
    let id = &stopped.task;
    if args.json {
        out.json(&json!({
            "task": id.to_string(), "state": "needs-decision", "walker": stopped.walker,
            "session": stopped.session.as_ref().map(|s| json!({ "session": s.session, "try": s.try_number, "ended": s.ended })),
            "head": stopped.head.map(|h| h.to_string()),
        }))?;
        return Ok(0);
    }
    match &stopped.session {
        Some(s) => {
            let saved = match stopped.head {
                Some(head) => {
                    format!(
                        " · its work is on loop-try/{id}/{} at {}",
                        s.try_number,
                        git_loop::ids::short_commit(&head)
                    )
                }
                None => String::new(),
            };
            let how = if s.ended.is_some() { "stopped" } else { "is stopping" };
            out.line(format!("{id} · session {} {how}{saved}", s.session))?;
        }
        None => {
            out.line(format!("{id} · {} works on it elsewhere and stops its session at its next sync", stopped.walker))?
        }
    }
    out.line(format!(
        "{id} needs a decision: continue it (git loop reopen {id}), accept its try (git loop done {id} --try <n>), \
         give it to another agent (git loop reassign {id} <agent>) or take it over (git loop take-over {id})"
    ))?;
    Ok(0)
}

/// The walk (its walker key) or mission commander that `stop --all` would stop here, if one
/// runs: the holder of this clone's walker singleton, or of a mission's command.
fn running_here(store: &git_loop::store::Store, env: &Env) -> Result<Option<(String, serde_json::Value)>> {
    use git_loop::mission::record::{self as missions, Listed};
    if let git_loop::walk::ThisClonesWalk::Running(held) = git_loop::walk::this_clones_walk(store, &env.ctx)? {
        let walker = held.record.holder;
        return Ok(Some((format!("the walk {walker}"), json!({ "walker": walker, "mission": null }))));
    }
    for listed in missions::list(store)? {
        if let Listed::Mission(s) = listed {
            if let Some(held) = super::mission::commander(store, &env.ctx, &s.mission) {
                let (mission, commander) = (s.mission.id, held.record.holder);
                return Ok(Some((
                    format!("mission {mission}'s commander {commander}"),
                    json!({ "walker": commander, "mission": mission }),
                )));
            }
        }
    }
    Ok(None)
}
