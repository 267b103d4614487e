//! `git loop edit`: change a task's fields.

use anyhow::Result;
use clap::Args;

use super::add::FieldArgs;
use super::env::Env;
use super::output::{task_json, Out};
use git_loop::backlog::{self, Board, Removals};
use git_loop::store::task;

/// Change a task's title, priority, dependencies, labels, agents, race, body, parent or links.
///
/// Example: git loop edit t-4f2a -p p0 --after t-9k2m --remove-label later
#[derive(Args)]
pub struct EditArgs {
    /// The task (id or unique prefix).
    id: String,
    /// A new title, stored exactly as given.
    #[arg(long)]
    title: Option<String>,
    #[command(flatten)]
    fields: FieldArgs,
    /// Drop a dependency; repeat for several.
    #[arg(long, value_name = "ID")]
    remove_after: Vec<String>,
    /// Drop a label; repeat for several.
    #[arg(long, value_name = "LABEL")]
    remove_label: Vec<String>,
    /// Drop a preferred agent; repeat for several.
    #[arg(long, value_name = "PRESET")]
    remove_agent: Vec<String>,
    /// Drop an agent from the race; repeat for several.
    #[arg(long, value_name = "PRESET")]
    remove_together: Vec<String>,
    /// Drop a fallback agent; repeat for several.
    #[arg(long, value_name = "PRESET")]
    remove_fallback: Vec<String>,
    /// Allow a forbidden agent again; repeat for several.
    #[arg(long, value_name = "PRESET")]
    remove_forbid: Vec<String>,
    /// Drop a reviewer; repeat for several.
    #[arg(long, value_name = "ROLE")]
    remove_reviewer: Vec<String>,
    /// Take it out of its epic (its parent).
    #[arg(long, conflicts_with = "parent")]
    no_parent: bool,
    /// Make it an ordinary task again (refused while it has children).
    #[arg(long, conflicts_with = "epic")]
    no_epic: bool,
    /// Drop a link (KIND:TARGET); repeat for several.
    #[arg(long, value_name = "KIND:TARGET")]
    remove_link: Vec<String>,
    /// Print the task as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: EditArgs) -> Result<u8> {
    let store = env.open()?;
    let id = backlog::resolve(&store, &args.id)?;
    // A task whose history is damaged is reported (exit 3) before anything is added to it.
    task::read_whole(&store, &id)?;
    let remove_after = args
        .remove_after
        .iter()
        .map(|a| backlog::resolve(&store, a).map(|i| i.to_string()).or_else(|_| Ok::<_, anyhow::Error>(a.clone())))
        .collect::<Result<Vec<_>>>()?;
    let mut fields = args.fields.into_fields(args.title)?;
    if args.no_epic {
        fields.epic = Some(false);
    }
    let removals = Removals {
        after: remove_after,
        labels: args.remove_label,
        agents: args.remove_agent,
        together: args.remove_together,
        fallback: args.remove_fallback,
        forbid: args.remove_forbid,
        reviewers: args.remove_reviewer,
        links: args.remove_link,
        parent: args.no_parent,
    };
    let snapshot = backlog::edit(&store, &env.ctx, &id, fields, removals)?;
    let mut out = Out::new();
    if args.json {
        let board = Board::load(&store, &env.ctx)?;
        out.json(&task_json(&board, &snapshot))?;
    } else {
        out.line(&snapshot.task.id)?;
    }
    Ok(0)
}
