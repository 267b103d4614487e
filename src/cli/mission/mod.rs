//! `git loop mission ...`: plan a mission across repositories and command it.

mod add;
mod cancel;
mod list;
mod project;
mod run;
mod show;

use anyhow::Result;
use clap::Subcommand;
use serde_json::{json, Value};

use super::human::relative;
use crate::cli::env::Env;
use git_loop::mission::record::{Mission, Project};
use git_loop::store::claim::{self, Held};
use git_loop::store::Store;

/// Missions: one walk per project, in waves, across repositories.
#[derive(Subcommand)]
pub enum MissionCommand {
    Add(add::AddArgs),
    Project(project::ProjectArgs),
    Show(show::ShowArgs),
    List(list::ListArgs),
    Run(run::RunArgs),
    Cancel(cancel::CancelArgs),
}

impl MissionCommand {
    /// Whether this command commands a mission (and so handles signals like `run`).
    pub fn is_run(&self) -> bool {
        matches!(self, MissionCommand::Run(_))
    }
}

pub fn run(env: &Env, cmd: MissionCommand) -> Result<u8> {
    match cmd {
        MissionCommand::Add(args) => add::run(env, args),
        MissionCommand::Project(args) => project::run(env, args),
        MissionCommand::Show(args) => show::run(env, args),
        MissionCommand::List(args) => list::run(env, args),
        MissionCommand::Run(args) => run::run(env, args),
        MissionCommand::Cancel(args) => cancel::run(env, args),
    }
}

/// The live commander of a mission, if one runs (one whose claim this clone has not seen
/// unchanged for a whole lease).
pub fn commander(store: &Store, ctx: &git_loop::context::Context, mission: &Mission) -> Option<Held> {
    let key = git_loop::refs::fleet_claim(&mission.mission_id());
    claim::read(store, &key)
        .ok()
        .flatten()
        .filter(|held| !git_loop::store::lease::judge(store, ctx, &key, held).is_stale())
}

/// "commanded by m-4f2a9k3m (pid 4121 on builder-3) since 3 min ago".
pub fn commander_line(held: &Held, now: chrono::DateTime<chrono::Utc>) -> String {
    let r = &held.record;
    format!("commanded by {} (pid {} on {}) since {}", r.holder, r.pid, r.host, relative(r.acquired_at, now))
}

/// A mission as JSON: the stored record, its tip, and its live commander.
pub fn mission_json(mission: &Mission, tip: &gix::ObjectId, commander: Option<&Held>) -> Value {
    let mut value = serde_json::to_value(mission).expect("missions serialize");
    value["tip"] = json!(tip.to_string());
    value["current_wave"] = json!(mission.current_wave());
    value["commander"] = commander.map_or(Value::Null, |h| {
        json!({ "holder": h.record.holder, "pid": h.record.pid, "host": h.record.host, "since": h.record.acquired_at })
    });
    value
}

/// One line for a project: "api   done · 2 of 2 tasks done · 1 walk".
pub fn project_line(p: &Project, width: usize) -> String {
    let mut parts = vec![p.status.as_str().to_owned()];
    if let Some(o) = &p.outcome {
        if o.tasks_total > 0 {
            parts.push(format!("{} of {} tasks done", o.tasks_done, o.tasks_total));
        }
    }
    if p.dispatches > 0 {
        parts.push(format!("{} walk{}", p.dispatches, if p.dispatches == 1 { "" } else { "s" }));
    }
    format!("{:<width$}  {}", p.name, parts.join(" · "))
}
