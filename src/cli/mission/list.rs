//! `git loop mission list`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::{commander, mission_json};
use crate::cli::env::Env;
use crate::cli::human::short;
use crate::cli::output::{warn_corrupt, Out};
use git_loop::mission::record::{self, Listed, Status};

/// List missions: each one's state, waves and projects at a glance.
///
/// Example: git loop mission list --json
#[derive(Args)]
pub struct ListArgs {
    /// Print {"missions": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ListArgs) -> Result<u8> {
    let store = env.open()?;
    let mut missions = Vec::new();
    let mut corrupt = Vec::new();
    for listed in record::list(&store)? {
        match listed {
            Listed::Mission(snapshot) => missions.push(*snapshot),
            Listed::Corrupt { name, problem } => corrupt.push((name, problem)),
        }
    }
    warn_corrupt(&corrupt);
    let mut out = Out::new();
    if args.json {
        let list: Vec<_> = missions
            .iter()
            .map(|s| mission_json(&s.mission, &s.tip, commander(&store, &env.ctx, &s.mission).as_ref()))
            .collect();
        out.json(&json!({ "missions": list }))?;
        return Ok(0);
    }
    if missions.is_empty() {
        eprintln!("no missions yet: add one with 'git loop mission add <id> --title <text>'");
    }
    let width = missions.iter().map(|s| s.mission.id.len()).max().unwrap_or(0);
    for s in &missions {
        let m = &s.mission;
        let done = m.projects.iter().filter(|p| p.status == Status::Done).count();
        let state = if commander(&store, &env.ctx, m).is_some() { "running" } else { m.state.as_str() };
        out.line(format!(
            "{:<width$}  {:<9}  {} of {} projects done, {} wave{}  {}",
            m.id,
            state,
            done,
            m.projects.len(),
            m.waves().len(),
            if m.waves().len() == 1 { "" } else { "s" },
            short(&m.title, 60)
        ))?;
    }
    Ok(0)
}
