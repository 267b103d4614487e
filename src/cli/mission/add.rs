//! `git loop mission add`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::env::Env;
use crate::cli::output::Out;
use git_loop::mission::{plan, MissionId};

/// Add a mission: a goal worked across repositories, project by project, in waves.
///
/// Then give it projects with 'git loop mission project', and run it with 'git loop mission
/// run'.
///
/// Example: git loop mission add v2 --title "Ship the v2 API"
#[derive(Args)]
pub struct AddArgs {
    /// The mission's id: lowercase letters, digits, '.', '_' and '-'.
    id: MissionId,
    /// What the mission is for, in one line.
    #[arg(long, value_name = "TEXT")]
    title: String,
    /// Print {"id": ...} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: AddArgs) -> Result<u8> {
    let store = env.open()?;
    let added = plan::add(&store, &env.ctx, &args.id, &args.title)?;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({ "id": added.mission.id, "tip": added.tip.to_string() }))?;
    } else {
        out.line(format!("mission {} added: {}", added.mission.id, added.mission.title))?;
    }
    Ok(0)
}
