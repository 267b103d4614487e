//! Planning a mission: adding it, setting its projects, cancelling it. Each is one
//! compare-and-swap of the mission record (see `record`).

use std::path::Path;

use anyhow::Result;

use super::record::{self, Created, MissionState, Project, Selection, Snapshot, Source, Status};
use crate::context::Context;
use crate::error::{refused, usage, Refusal};
use crate::ids::TaskId;
use crate::ids::{MissionId, ProjectName};
use crate::store::Store;

/// Add a mission; refused if one with that id exists.
pub fn add(store: &Store, ctx: &Context, id: &MissionId, title: &str) -> Result<Snapshot> {
    if title.trim().is_empty() || title.contains('\n') {
        return Err(usage("a mission needs a one-line title")
            .hint("git loop mission add v2 --title \"Ship v2\"")
            .into());
    }
    match record::create(store, ctx, id, title)? {
        Created::Stored(snapshot) => Ok(*snapshot),
        Created::Exists => Err(refused(format!("mission '{id}' already exists"))
            .hint(format!("see it with 'git loop mission show {id}'"))
            .into()),
    }
}

/// A project as given on the command line.
#[derive(Debug, Clone)]
pub struct ProjectSpec {
    pub name: ProjectName,
    pub wave: u32,
    pub source: Source,
    pub selection: Selection,
}

/// What `set_project` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetProject {
    Added,
    /// It existed; its wave, source or tasks changed (a changed source or selection makes it
    /// pending again).
    Updated,
    Unchanged,
}

/// Add a project to a mission, or change one. A local path must be a repository: it is stored
/// as its working tree's absolute path, and task ids given for it are resolved there (unique
/// prefixes allowed). For a URL, task ids must be given in full.
pub fn set_project(store: &Store, ctx: &Context, id: &MissionId, spec: ProjectSpec) -> Result<(Snapshot, SetProject)> {
    if spec.wave == 0 {
        return Err(usage("waves count from 1").hint("pass --wave 1 for the first wave").into());
    }
    let (path, url) = match &spec.source {
        Source::Path(path) => (Some(repository_root(ctx, Path::new(path))?), None),
        Source::Url(url) => {
            if url.trim().is_empty() || url.chars().any(char::is_control) {
                return Err(usage(format!("url '{}' is not valid", url.escape_debug()))
                    .hint("pass a clone URL such as https://host/org/api.git or /srv/git/api.git")
                    .into());
            }
            (None, Some(url.clone()))
        }
    };
    let (label, tasks) = match &spec.selection {
        Selection::Label(label) => {
            check_label(label)?;
            (Some(label.clone()), Vec::new())
        }
        Selection::Tasks(given) => (None, resolve_tasks(ctx, path.as_deref(), given)?),
    };
    let new = Project {
        name: spec.name.to_string(),
        wave: spec.wave,
        path,
        url,
        label,
        tasks,
        status: Status::Pending,
        dispatches: 0,
        outcome: None,
    };
    let before = record::require(store, id)?;
    let what = match before.mission.project(new.name.as_str()) {
        Some(_) => format!("project {} (wave {}) changed", new.name, new.wave),
        None => format!("project {} added to wave {}", new.name, new.wave),
    };
    let change = |m: &mut record::Mission| -> Result<(), Refusal> {
        if m.state == MissionState::Cancelled {
            return Err(refused(format!("mission '{}' is cancelled", m.id))
                .hint("add a new mission with 'git loop mission add'"));
        }
        match m.project_mut(&new.name) {
            Some(old) => {
                let same_work =
                    old.path == new.path && old.url == new.url && old.label == new.label && old.tasks == new.tasks;
                old.wave = new.wave;
                if !same_work {
                    old.path = new.path.clone();
                    old.url = new.url.clone();
                    old.label = new.label.clone();
                    old.tasks = new.tasks.clone();
                    old.status = Status::Pending;
                }
            }
            None => m.projects.push(new.clone()),
        }
        if m.state == MissionState::Complete && !m.is_complete() {
            m.state = MissionState::Open;
        }
        Ok(())
    };
    let after = record::update(store, ctx, id, &what, &change)?;
    let outcome = match before.mission.project(&new.name) {
        None => SetProject::Added,
        Some(old) if Some(old) == after.mission.project(&new.name) => SetProject::Unchanged,
        Some(_) => SetProject::Updated,
    };
    Ok((after, outcome))
}

/// The working tree a local project path is in, as an absolute path.
fn repository_root(ctx: &Context, path: &Path) -> Result<String> {
    let canonical = path.canonicalize().map_err(|_| {
        usage(format!("project path '{}' does not exist", path.display()))
            .hint("pass the directory of a git repository with --path, or a clone URL with --url")
    })?;
    let project = Store::open(ctx, &canonical)?;
    Ok(project.workdir().display().to_string())
}

fn check_label(label: &str) -> Result<(), Refusal> {
    if label.trim().is_empty() || label.len() > 100 || label.chars().any(|c| c.is_control() || c == ',') {
        return Err(usage(format!("label '{}' is not valid", label.escape_debug()))
            .hint("a label is 1 to 100 characters, without commas or control characters"));
    }
    Ok(())
}

/// Task ids of a project: resolved in its repository when it is local, else taken as given.
fn resolve_tasks(ctx: &Context, path: Option<&str>, given: &[String]) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    match path {
        Some(path) => {
            let project = Store::open(ctx, Path::new(path))?;
            for g in given {
                let id =
                    crate::backlog::resolve(&project, g).map_err(|err| match crate::error::find_refusal(&err) {
                        Some(r) => anyhow::Error::from(
                            usage(format!("{} in '{path}'", r.message))
                                .hint(format!("list its tasks with 'git loop -C {path} list'")),
                        ),
                        None => err,
                    })?;
                ids.push(id.to_string());
            }
        }
        None => {
            for g in given {
                let id: TaskId = g.parse().map_err(|r: Refusal| {
                    r.hint("give full task ids for a project known by URL: it is not cloned yet")
                })?;
                ids.push(id.to_string());
            }
        }
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Cancel a mission: it will not be run again. A commander running it stops its child walk
/// and ends.
pub fn cancel(store: &Store, ctx: &Context, id: &MissionId, reason: Option<String>) -> Result<Snapshot> {
    let change = |m: &mut record::Mission| -> Result<(), Refusal> {
        match m.state {
            MissionState::Cancelled => Err(refused(format!("mission '{}' is already cancelled", m.id))
                .hint(format!("see it with 'git loop mission show {}'", m.id))),
            MissionState::Complete => {
                Err(refused(format!("mission '{}' is complete", m.id)).hint("there is nothing left to cancel"))
            }
            _ => {
                m.state = MissionState::Cancelled;
                m.reason = reason.clone();
                Ok(())
            }
        }
    };
    record::update(store, ctx, id, "cancelled", &change)
}
