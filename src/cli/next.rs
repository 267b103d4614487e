//! `git loop next`: the task to work on now, optionally claimed in the same call.

use anyhow::Result;
use clap::Args;
use serde_json::Value;

use super::env::Env;
use super::output::{claim_json, task_json, warn_corrupt, Out};
use git_loop::backlog::{self, Board, NextClaimed, Readiness};
use git_loop::error::usage;
use git_loop::ids::Span;
use git_loop::store::claim::AcquireOptions;
use git_loop::store::task::Snapshot;

/// Print the task to work on now, optionally claiming it.
///
/// The highest-priority, then oldest, open task whose dependencies are done and that nobody
/// holds a live claim on.
///
/// With --claim, claim it in the same call; when another agent wins that task first, move on
/// to the next ready one. This is how an agent outside the loop takes work.
///
/// Example: git loop next --claim --holder agent-7 --ttl 1h --json
#[derive(Args)]
pub struct NextArgs {
    /// Claim the task (node:<id>) for --holder.
    #[arg(long)]
    claim: bool,
    /// Who takes the claim (defaults to $GIT_LOOP_SESSION).
    #[arg(long, value_name = "NAME")]
    holder: Option<String>,
    /// How long the claim lasts unless refreshed.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    ttl: Span,
    /// Why the claim is taken, shown in 'claim list'.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Only tasks with this label; repeat to require several.
    #[arg(long, value_name = "LABEL")]
    label: Vec<String>,
    /// Print the task as JSON, or null when nothing is ready.
    #[arg(long)]
    json: bool,
}

impl NextArgs {
    /// Whether it takes a claim (and so writes).
    pub(super) fn claims(&self) -> bool {
        self.claim
    }
}

pub fn run(env: &Env, args: NextArgs) -> Result<u8> {
    let store = env.open()?;
    let mut out = Out::new();
    if args.claim {
        let holder = args.holder.clone().or_else(|| env.ctx.session.session.clone()).filter(|h| !h.trim().is_empty());
        let Some(holder) = holder else {
            return Err(usage("--claim needs a holder").hint("pass --holder <name>").into());
        };
        let opts = AcquireOptions {
            holder,
            ttl: args.ttl.0,
            reason: args.reason.clone(),
            session: env.ctx.session.session.clone(),
        };
        return match backlog::next_claim(&store, &env.ctx, &args.label, &opts)? {
            NextClaimed::Claimed { task, held } => {
                if args.json {
                    let mut value = serde_json::to_value(&task)?;
                    let key = git_loop::ids::ClaimKey::node(&task.task_id());
                    value["claim"] = claim_json(&held, &git_loop::store::lease::judge(&store, &env.ctx, &key, &held));
                    out.json(&value)?;
                } else {
                    out.line(format!("{}  {}  {}", task.id, task.priority, super::human::short(&task.title, 72)))?;
                }
                Ok(0)
            }
            NextClaimed::Nothing => {
                if args.json {
                    out.json(&Value::Null)?;
                } else {
                    eprintln!("nothing is ready to claim");
                }
                Ok(0)
            }
        };
    }
    let board = Board::for_next(&store, &env.ctx, &args.label)?;
    warn_corrupt(&board.corrupt);
    let first = board.ready(&args.label).next();
    match first {
        Some(row) => {
            let snapshot = Snapshot { task: row.task()?, tip: row.tip };
            if args.json {
                out.json(&task_json(&board, &snapshot))?;
            } else {
                let t = &snapshot.task;
                out.line(format!("{}  {}  {}", t.id, t.priority, super::human::short(&t.title, 72)))?;
            }
        }
        None => {
            if args.json {
                out.json(&Value::Null)?;
            } else {
                let open = board.tasks.iter().filter(|r| !r.state.is_closed()).count();
                let blocked =
                    board.tasks.iter().filter(|r| matches!(board.readiness(r), Readiness::Blocked(_))).count();
                let claimed = board.tasks.iter().filter(|r| board.readiness(r) == Readiness::Claimed).count();
                if open == 0 {
                    eprintln!("nothing is ready: no open tasks (add one with 'git loop add <title>')");
                } else {
                    eprintln!("nothing is ready: {open} open, {blocked} blocked by dependencies, {claimed} claimed");
                }
            }
        }
    }
    Ok(0)
}
