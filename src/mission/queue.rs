//! The mission's queue: hands out the projects of the current wave — the lowest wave with a
//! project not done — one at a time, and records each project's outcome in the mission when
//! the engine closes or leaves it. A wave advances when all its projects are done: a project
//! that is not pauses the mission first (the engine's pause rule, with a limit of one).

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::Result;

use super::record::{self, Outcome, Selection, Status};
use super::verify::Check;
use super::{Commander, Event};
use crate::engine::{self, Verdict};
use crate::error::Refusal;
use crate::store::events::{self, Recorded};
use crate::store::Store;

/// How a child walk ended, as it journaled it (`walk_terminated`), with the sessions it ran
/// (from its walker's `walk_ended`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    pub stop: String,
    pub walker: Option<String>,
    pub closed: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub error: Option<String>,
    pub sessions: Option<u32>,
    /// What its sessions spent (dollars in millionths, tokens), from its `walk_ended`.
    pub spent_micro_usd: Option<u64>,
    pub spent_tokens: Option<u64>,
}

/// One project being worked, and what its dispatches came to so far.
#[derive(Debug, Clone)]
pub struct ProjectUnit {
    pub name: String,
    pub wave: u32,
    /// Where its child walks run (its path, or the commander's clone of its URL).
    pub dir: PathBuf,
    pub url: Option<String>,
    pub selection: Selection,
    /// The last dispatch's termination key.
    pub key: Option<String>,
    /// How the last child walk ended, if it journaled it.
    pub terminated: Option<Terminated>,
    /// The mission's tasks there, as checked after the last child walk.
    pub check: Option<Check>,
    /// What each dispatch that came to nothing left, latest last.
    pub unfinished: Vec<String>,
}

impl engine::Unit for ProjectUnit {
    fn id(&self) -> String {
        self.name.clone()
    }

    fn is_p0(&self) -> bool {
        // Every project failure pauses the mission anyway (pause_after is 1).
        false
    }
}

/// Hands out projects in waves.
pub struct MissionQueue<'a> {
    store: &'a Store,
    commander: &'a Commander<'a>,
    /// Projects handed out in this run: each is worked once per run.
    taken: HashSet<String>,
    wave: Option<u32>,
}

impl<'a> MissionQueue<'a> {
    pub fn new(store: &'a Store, commander: &'a Commander<'a>) -> Self {
        MissionQueue { store, commander, taken: HashSet::new(), wave: None }
    }

    /// Record a project's status and outcome in the mission, and journal it.
    fn record(&self, unit: &ProjectUnit, status: Status, reason: Option<String>) -> Result<Outcome> {
        let t = unit.terminated.as_ref();
        let outcome = Outcome {
            at: self.commander.ctx.now(),
            key: unit.key.clone(),
            stop: t.map(|t| t.stop.clone()),
            walker: t.and_then(|t| t.walker.clone()),
            closed: t.map_or(0, |t| t.closed),
            succeeded: t.map_or(0, |t| t.succeeded),
            failed: t.map_or(0, |t| t.failed),
            sessions: t.and_then(|t| t.sessions),
            tasks_done: unit.check.as_ref().map_or(0, |c| c.done),
            tasks_total: unit.check.as_ref().map_or(0, |c| c.total),
            reason: reason.clone(),
        };
        let change = |m: &mut record::Mission| -> Result<(), Refusal> {
            if let Some(p) = m.project_mut(&unit.name) {
                p.status = status;
                p.outcome = Some(outcome.clone());
            }
            Ok(())
        };
        let what = format!("{} {}", unit.name, status.as_str());
        record::update(self.store, &self.commander.ctx, &self.commander.mission, &what, &change)?;
        self.commander.journal(
            self.store,
            Recorded::ProjectClosed(events::ProjectClosed {
                mission: self.commander.mission.to_string(),
                summary: format!("{} {}", unit.name, status.as_str()),
                project: unit.name.clone(),
                status: status.as_str().to_owned(),
                reason: reason.clone(),
                key: unit.key.clone(),
            }),
        )?;
        Ok(outcome)
    }
}

impl engine::Queue for MissionQueue<'_> {
    type Unit = ProjectUnit;

    fn next(&mut self) -> Result<Option<ProjectUnit>> {
        if self.commander.budget_spent().is_some() || self.commander.cancelled(self.store)? {
            return Ok(None);
        }
        let mission = record::require(self.store, &self.commander.mission)?.mission;
        let Some(wave) = mission.current_wave() else {
            return Ok(None);
        };
        let left: Vec<&record::Project> =
            mission.projects.iter().filter(|p| p.wave == wave && p.status != Status::Done).collect();
        let candidates: Vec<&&record::Project> = left.iter().filter(|p| !self.taken.contains(&p.name)).collect();
        // A project whose tasks wait for another's of this wave (`--after <path>#<id>`) goes
        // after it, when one that waits for none is left.
        let waits = |p: &record::Project| -> bool {
            let Ok(store) = Store::open(&self.commander.ctx, &self.commander.project_dir(p)) else { return false };
            let Ok(places) = super::verify::waits_on(&store, &self.commander.ctx, &p.selection()) else { return false };
            left.iter().filter(|o| o.name != p.name).any(|o| {
                let dir = self.commander.project_dir(o);
                let names = [Some(dir.to_string_lossy().into_owned()), o.url.clone()];
                names.into_iter().flatten().any(|n| places.contains(&crate::store::foreign::normal(&n)))
            })
        };
        let first_free = candidates.iter().find(|p| !waits(p)).or(candidates.first());
        let Some(project) = first_free.copied() else {
            return Ok(None);
        };
        if self.wave != Some(wave) {
            self.wave = Some(wave);
            self.commander
                .observer
                .event(&Event::Wave { wave, projects: left.iter().map(|p| p.name.clone()).collect() });
        }
        self.taken.insert(project.name.clone());
        Ok(Some(ProjectUnit {
            name: project.name.clone(),
            wave,
            dir: self.commander.project_dir(project),
            url: project.url.clone(),
            selection: project.selection(),
            key: None,
            terminated: None,
            check: None,
            unfinished: Vec::new(),
        }))
    }

    fn close(&mut self, unit: &mut ProjectUnit, verdict: Verdict, message: &str) -> Result<bool> {
        let (status, reason) = match verdict {
            Verdict::Done => (Status::Done, None),
            Verdict::Blocked | Verdict::Undecided | Verdict::Parked => (Status::Incomplete, Some(message.to_owned())),
            // The engine closes a unit whose every dispatch came to nothing as failed.
            Verdict::Failed if unit.terminated.is_none() && !unit.unfinished.is_empty() => {
                let last = unit.unfinished.last().expect("not empty");
                let n = unit.unfinished.len();
                (Status::Failed, Some(format!("{n} dispatches came to nothing; the last: {last}")))
            }
            Verdict::Failed => (Status::Failed, Some(message.to_owned())),
        };
        let outcome = self.record(unit, status, reason)?;
        self.commander.observer.event(&Event::Closed { project: unit.name.clone(), status, outcome });
        Ok(status == Status::Done)
    }

    fn abandon(&mut self, unit: &mut ProjectUnit, why: &str) -> Result<()> {
        self.record(unit, Status::Pending, Some(why.to_owned()))?;
        self.commander.observer.event(&Event::Left { project: unit.name.clone(), why: why.to_owned() });
        Ok(())
    }
}
