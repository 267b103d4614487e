//! `git loop mission project`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::env::Env;
use crate::cli::output::Out;
use git_loop::error::usage;
use git_loop::mission::plan::{self, ProjectSpec, SetProject};
use git_loop::mission::record::{Selection, Source};
use git_loop::mission::{MissionId, ProjectName};

/// Add a project to a mission, or change one: a repository, its wave, and which of its tasks
/// belong to the mission.
///
/// Projects of wave 1 are worked first, then wave 2 once all of wave 1 is done, and so on. In a
/// wave, a project whose tasks wait for another's (--after <path>#<id>) is walked after it.
/// Changing a project's path, URL or tasks makes it pending again.
///
/// Example: git loop mission project v2 api --path ../api --wave 1 --label v2
#[derive(Args)]
pub struct ProjectArgs {
    /// The mission's id.
    id: MissionId,
    /// The project's name within the mission (it prefixes the project's output lines).
    name: ProjectName,
    /// The project's repository, a local directory.
    #[arg(long, value_name = "DIR", required_unless_present = "url", conflicts_with = "url")]
    path: Option<String>,
    /// Or a URL to clone it from (the clone lives under .git/loop/missions/ and syncs with it).
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The wave it belongs to, from 1.
    #[arg(long, value_name = "N")]
    wave: u32,
    /// The mission's tasks there are those with this label.
    #[arg(long, value_name = "LABEL", conflicts_with = "task")]
    label: Option<String>,
    /// Or exactly these tasks (ids, or unique prefixes for a local project); repeat for several.
    #[arg(long, value_name = "ID")]
    task: Vec<String>,
    /// Print the project as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ProjectArgs) -> Result<u8> {
    let selection = match (args.label, args.task.is_empty()) {
        (Some(label), _) => Selection::Label(label),
        (None, false) => Selection::Tasks(args.task),
        (None, true) => {
            return Err(usage("say which of the project's tasks belong to the mission")
                .hint("pass --label <label>, or --task <id> for each task")
                .into())
        }
    };
    let source = match (args.path, args.url) {
        (Some(path), _) => Source::Path(env.cwd.join(path).display().to_string()),
        (None, Some(url)) => Source::Url(url),
        (None, None) => unreachable!("clap requires one of --path and --url"),
    };
    let store = env.open()?;
    let spec = ProjectSpec { name: args.name.clone(), wave: args.wave, source, selection };
    let (snapshot, outcome) = plan::set_project(&store, &env.ctx, &args.id, spec)?;
    let project = snapshot.mission.project(args.name.as_str()).expect("just set");
    let mut out = Out::new();
    if args.json {
        let mut value = serde_json::to_value(project).expect("projects serialize");
        value["change"] = json!(match outcome {
            SetProject::Added => "added",
            SetProject::Updated => "updated",
            SetProject::Unchanged => "unchanged",
        });
        out.json(&value)?;
        return Ok(0);
    }
    let word = match outcome {
        SetProject::Added => "added to",
        SetProject::Updated => "changed in",
        SetProject::Unchanged => "unchanged in",
    };
    out.line(format!(
        "project {} {word} mission {}: wave {}, {} in {}",
        project.name,
        args.id,
        project.wave,
        project.describe_selection(),
        project.location()
    ))?;
    Ok(0)
}
