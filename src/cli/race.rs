//! `git loop race`: race several agents on one task now.

use anyhow::Result;
use clap::Args;

use super::env::Env;
use super::run::{walk_and_report, walk_options, WalkArgs};
use git_loop::agent::presets;
use git_loop::backlog::{self, Board, Readiness};
use git_loop::error::{refused, usage};

/// Race several agents on one task now.
///
/// Each agent gets a try of its own (a number no earlier try of the task used), a worktree
/// started from the task branch, and its own sessions. With --pick first (the default) the
/// first try to pass the checks (and the review) wins and the others are stopped at once;
/// with --pick judge every try runs to its end and the judge command picks among those that
/// passed. The task branch moves to the winner; the others' work stays on their try branches.
/// A race interrupted and run again goes on with the same tries.
///
/// Exit codes as for 'git loop run'.
///
/// Example: git loop race t-4f2a --together claude,codex --checks "cargo test"
#[derive(Args)]
pub struct RaceArgs {
    /// The task (id or unique prefix).
    id: String,
    /// The agents, comma-separated; an agent may race itself (default: the task's own race, set
    /// with 'git loop edit <id> --together').
    #[arg(long, value_delimiter = ',', value_name = "PRESETS")]
    together: Vec<String>,
    #[command(flatten)]
    walk: WalkArgs,
}

pub fn run(env: &Env, args: RaceArgs) -> Result<u8> {
    let store = env.open()?;
    let id = backlog::resolve(&store, &args.id)?;
    let gone = || usage(format!("task '{id}' does not exist")).hint("list tasks with 'git loop list'");
    let task = git_loop::store::task::read(&store, &id)?.ok_or_else(gone)?.task;
    let together = if args.together.is_empty() { task.together.clone() } else { args.together };
    let unfinished = git_loop::walk::race::unfinished(&store, &task)?;
    if together.len() < 2 && unfinished.is_none() {
        return Err(usage(format!("a race needs at least two agents; {id} names {}", together.len()))
            .hint(format!("git loop race {id} --together claude,codex (or set the task's race: git loop edit {id} --together claude,codex)"))
            .into());
    }
    let board = Board::load(&store, &env.ctx)?;
    let row = board.get(id.as_str()).ok_or_else(gone)?;
    match board.readiness(row) {
        Readiness::Ready => {}
        Readiness::Closed => {
            return Err(refused(format!("{id} is {}", row.state.as_str()))
                .hint(format!("reopen it first: git loop reopen {id}"))
                .into())
        }
        Readiness::Blocked(deps) => {
            return Err(refused(format!("{id} waits for {}", deps.join(", ")))
                .hint("race it when they are done")
                .into())
        }
        Readiness::Epic => {
            return Err(refused(format!("{id} is an epic: it is done when its children are, never worked itself"))
                .hint(format!("race one of its children (git loop list --tree shows them), or make it a task again: git loop edit {id} --no-epic"))
                .into())
        }
        Readiness::Claimed => {
            // A walk of this machine that was killed left its claim: the walk recovers it.
            let held = board.claim(id.as_str());
            let dead = held
                .as_ref()
                .is_some_and(|h| git_loop::ids::is_walker_key(&h.record.holder) && h.record.holder_gone_here(&env.ctx));
            if !dead {
                let holder = held.map(|h| h.record.holder).unwrap_or_default();
                return Err(refused(format!("{id} is claimed by {holder}"))
                    .hint(format!("stop what works on it first: git loop stop {id}"))
                    .into());
            }
        }
    }
    // Taken up again, the race's own entrants run; the walk's agent is only its default.
    let first =
        together.first().or_else(|| unfinished.as_ref().and_then(|r| r.agents.first())).cloned().unwrap_or_default();
    let agent = presets::resolve(&store, &first, None, &env.exe)?;
    let json = args.walk.json();
    let mut opts = walk_options(env, &store, agent, together, args.walk)?;
    opts.together_first = true;
    opts.tasks = vec![id.to_string()];
    opts.limits.max_units = Some(1);
    walk_and_report(env, &store, opts, json)
}
