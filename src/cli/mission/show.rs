//! `git loop mission show`.

use anyhow::Result;
use clap::Args;

use super::{commander, commander_line, mission_json, project_line};
use crate::cli::env::Env;
use crate::cli::human::relative;
use crate::cli::output::Out;
use git_loop::mission::{record, MissionId};

/// Show a mission: its state, its waves and projects, and how each project's last walk went.
///
/// Example: git loop mission show v2
#[derive(Args)]
pub struct ShowArgs {
    /// The mission's id.
    id: MissionId,
    /// Print the mission as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ShowArgs) -> Result<u8> {
    let store = env.open()?;
    let snapshot = record::require(&store, &args.id)?;
    let m = &snapshot.mission;
    let now = env.ctx.now();
    let held = commander(&store, &env.ctx, m);
    let mut out = Out::new();
    if args.json {
        out.json(&mission_json(m, &snapshot.tip, held.as_ref()))?;
        return Ok(0);
    }
    out.line(format!("{}  {}", m.id, m.title))?;
    let state = match (&m.reason, m.state) {
        (Some(reason), _) => format!("{}: {reason}", m.state.as_str()),
        (None, state) => state.as_str().to_owned(),
    };
    out.line(format!("  state:    {state}"))?;
    if let Some(held) = &held {
        out.line(format!("  running:  {}", commander_line(held, now)))?;
    }
    out.line(format!("  created:  {} by {}", relative(m.created_at, now), m.created_by))?;
    let width = m.projects.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for (wave, projects) in m.waves() {
        out.section(format!("wave {wave}"))?;
        for p in projects {
            out.line(format!("  {}", project_line(p, width)))?;
            out.line(format!("  {:width$}  {} in {}", "", p.describe_selection(), p.location()))?;
            if let Some(reason) = p.outcome.as_ref().and_then(|o| o.reason.as_deref()) {
                out.line(format!("  {:width$}  {reason}", ""))?;
            }
        }
    }
    if m.projects.is_empty() {
        out.section(format!(
            "no projects yet: add one with 'git loop mission project {} <name> --path <dir> --wave 1 --label <label>'",
            m.id
        ))?;
    }
    Ok(0)
}
