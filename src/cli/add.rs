//! `git loop add`: put a task in the backlog.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::backlog::{self, TaskFields};
use git_loop::ids::Priority;

/// The fields shared by `add` and `edit`.
#[derive(Args, Default)]
pub struct FieldArgs {
    /// Priority, p0 (most urgent) to p3.
    #[arg(short, long, value_name = "P")]
    pub priority: Option<Priority>,
    /// A task that must be done first; repeat for several (ids or unique prefixes). A task of
    /// another repository is <remote-or-path>#<id>: read through its refs on sync.
    #[arg(long, value_name = "ID")]
    pub after: Vec<String>,
    /// The plan: what the agent should do.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the body from a file ('-' for standard input).
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    /// A label; repeat for several.
    #[arg(long, value_name = "LABEL")]
    pub label: Vec<String>,
    /// A preferred agent preset (claude, codex, ...); repeat for several, in order.
    #[arg(long, value_name = "PRESET")]
    pub agent: Vec<String>,
    /// Agents to race on this task, comma-separated (e.g. claude,codex).
    #[arg(long, value_delimiter = ',', value_name = "PRESETS")]
    pub together: Vec<String>,
    /// How a race picks its winner: first or judge.
    #[arg(long, value_name = "MODE")]
    pub pick: Option<String>,
    /// An agent to turn to when its agent is unreachable; repeat for several (they race).
    #[arg(long, value_name = "PRESET")]
    pub fallback: Vec<String>,
    /// An agent that must not work on this task; repeat for several.
    #[arg(long, value_name = "PRESET")]
    pub forbid: Vec<String>,
    /// A reviewer that must approve its work (a role or an agent); repeat for several (default:
    /// loop.reviewer).
    #[arg(long, value_name = "ROLE")]
    pub reviewer: Vec<String>,
    /// The epic this task is part of (id or unique prefix): it becomes an epic, never handed to
    /// an agent, and is done when all its children are.
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
    /// Make it an epic: a task never handed to an agent, done when all its children are.
    #[arg(long)]
    pub epic: bool,
    /// A link to another task, kept and shown (related:ID, discovered-from:ID, or any
    /// KIND:TARGET); repeat for several.
    #[arg(long, value_name = "KIND:TARGET")]
    pub link: Vec<String>,
}

impl FieldArgs {
    /// The body from --body or --body-file.
    pub fn body(&self) -> Result<Option<String>> {
        match (&self.body, &self.body_file) {
            (Some(body), _) => Ok(Some(body.clone())),
            (None, Some(path)) if path.as_os_str() == "-" => {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                    .context("could not read the body from standard input")?;
                Ok(Some(text))
            }
            (None, Some(path)) => std::fs::read_to_string(path).map(Some).map_err(|err| {
                git_loop::error::usage(format!("cannot read body file '{}': {err}", path.display())).into()
            }),
            (None, None) => Ok(None),
        }
    }

    pub fn into_fields(self, title: Option<String>) -> Result<TaskFields> {
        let body = self.body()?;
        Ok(TaskFields {
            title,
            body,
            priority: self.priority,
            after: self.after,
            labels: self.label,
            agents: self.agent,
            together: self.together,
            pick: self.pick,
            fallback: self.fallback,
            forbid: self.forbid,
            reviewers: self.reviewer,
            parent: self.parent,
            epic: self.epic.then_some(true),
            links: self.link,
        })
    }
}

/// Add a task to the backlog and print its id.
///
/// Example: git loop add "Write the parser" -p p1 --after t-4f2a --label parser --parent t-8k2m
#[derive(Args)]
pub struct AddArgs {
    /// The task's title, stored exactly as given.
    title: String,
    #[command(flatten)]
    fields: FieldArgs,
    /// Print {"id": ...} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: AddArgs) -> Result<u8> {
    let store = env.open()?;
    let fields = args.fields.into_fields(Some(args.title))?;
    let snapshot = backlog::add(&store, &env.ctx, fields)?;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({ "id": snapshot.task.id }))?;
    } else {
        out.line(&snapshot.task.id)?;
    }
    Ok(0)
}
