//! `git loop doctor`: check every loop ref and record, and this clone's machine-local state,
//! and repair what can be repaired without losing data. Nothing here prints: the command line
//! renders the [`Report`] and decides the exit code from it.
//!
//! A finding is **corrupt** when a record or a history cannot be read as it is (a reader
//! reports it with exit 3), a **leftover** when a crashed or interrupted process left
//! something behind that can block or mislead (an abandoned lock, a dangling worktree
//! registration, a temporary object file, a stale cache, a walk or session that died), and
//! **info** when something is in use and left alone (a lock a live process holds, a walk at
//! work).
//!
//! A repair never rewrites history and never deletes a ref that holds data: a task chain is
//! mended by a commit on top (`task::repair`); locks are judged and removed by `store::locks`
//! alone (abandoned: nobody has it open, no git-loop transaction in flight, old enough by the
//! file system's clock), and only on refs git-loop owns or `packed-refs.lock`, as writers do;
//! what a crashed walk left (its sessions, claims and worktrees) is recovered by the walk's own
//! recovery (`walk::recover_crashed`), which commits what is left in a worktree to its try
//! branch before removing it.

mod local;
mod records;

use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use crate::context::Context;
use crate::error::Refusal;
use crate::ids::TaskId;
use crate::store::events::{self, Recorded};
use crate::store::{locks, task, Store};
use crate::tries;
use crate::walk;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A record or history that cannot be read as it is.
    Corrupt,
    /// Something a crash left behind.
    Leftover,
    /// Tasks that can never be ready: their dependencies make a cycle.
    Stuck,
    /// In use, and left alone: nothing to do.
    Info,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    PackedRefs,
    /// A loop ref of no other kind.
    Ref,
    Task,
    Claim,
    Journal,
    Notes,
    /// A try or done anchor.
    Anchor,
    /// A task, try or kept branch.
    Branch,
    Mission,
    /// A mirror of a remote's ref, or a kept ref.
    Mirror,
    Lock,
    Worktree,
    TempFile,
    Cache,
    /// A walk of this clone.
    Walk,
    Session,
}

/// What `repair` does about a finding.
#[derive(Debug, Clone)]
pub enum Action {
    /// Append a repair commit to the task's chain.
    RepairTask(TaskId),
    /// Remove an abandoned lock on a ref git-loop owns.
    RemoveLock(PathBuf),
    /// Remove a worktree registration whose directory is gone (`git worktree prune`).
    PruneRegistration(PathBuf),
    /// Recover what crashed walks of this clone left (their sessions, task claims and
    /// worktrees), as the next walk would; done once for every finding that asks for it.
    Recover,
    /// Remove a temporary file or a stale cache file.
    RemoveFile(PathBuf),
    /// Remove a stale cache directory.
    RemoveDir(PathBuf),
    /// Remove a pooled worktree nobody uses, and its registration.
    ClearPooled(PathBuf),
    /// Delete the refs left live at exactly their archived value (`store::fold::tidy`).
    Tidy,
}

/// One problem found.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub kind: Kind,
    /// The ref, file or session it is about.
    pub subject: String,
    /// One line naming the object and what is wrong with it.
    pub problem: String,
    /// What to do about it.
    pub fix: String,
    #[serde(skip)]
    pub action: Option<Action>,
}

impl Finding {
    fn new(severity: Severity, kind: Kind, subject: &str, problem: impl Into<String>) -> Finding {
        Finding {
            severity,
            kind,
            subject: subject.to_owned(),
            problem: problem.into(),
            fix: String::new(),
            action: None,
        }
    }

    fn corrupt(kind: Kind, subject: &str, problem: impl Into<String>) -> Finding {
        Finding::new(Severity::Corrupt, kind, subject, problem)
    }

    fn leftover(kind: Kind, subject: &str, problem: impl Into<String>) -> Finding {
        Finding::new(Severity::Leftover, kind, subject, problem)
    }

    fn info(kind: Kind, subject: &str, problem: impl Into<String>) -> Finding {
        Finding::new(Severity::Info, kind, subject, problem)
    }

    fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = fix.into();
        self
    }

    /// The fix a reader's refusal gives.
    fn fix_from(self, refusal: &Refusal) -> Finding {
        let hint = refusal.hint.as_deref().unwrap_or_default();
        let fix = hint.strip_prefix(task::ASK_DOCTOR).unwrap_or(hint).to_owned();
        self.fix(fix)
    }

    fn repair(mut self, action: Action) -> Finding {
        self.action = Some(action);
        self
    }

    /// Whether `doctor --repair` fixes it.
    pub fn is_repairable(&self) -> bool {
        self.action.is_some()
    }
}

/// How much was checked.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Checked {
    pub tasks: usize,
    pub claims: usize,
    pub journal_chains: usize,
    pub journal_events: usize,
    pub notes: usize,
    pub anchors: usize,
    pub branches: usize,
    pub missions: usize,
    /// Records held by the archive (`refs/loop/archive`), each one's object looked up.
    pub archived: usize,
    pub worktrees: usize,
    /// Finished tries' worktrees kept in the pool for the next tries (`tries::pool`).
    pub pooled: usize,
    /// The disk they use, measured now.
    pub pooled_bytes: u64,
    pub sessions: usize,
}

impl Checked {
    /// Count one ref of `kind`.
    fn count(&mut self, kind: Kind) {
        match kind {
            Kind::Task => self.tasks += 1,
            Kind::Claim => self.claims += 1,
            Kind::Journal => self.journal_chains += 1,
            Kind::Anchor => self.anchors += 1,
            Kind::Branch => self.branches += 1,
            Kind::Mission => self.missions += 1,
            _ => {}
        }
    }
}

/// What `check` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub checked: Checked,
}

impl Report {
    /// The worst problem found (`None`: clean; what is only in use is no problem).
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).filter(|s| *s != Severity::Info).min()
    }

    /// Nothing corrupt and nothing left over.
    pub fn is_clean(&self) -> bool {
        self.worst().is_none()
    }
}

/// What `check` and `repair` need to know of where they run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The main working tree: paths are shown relative to it.
    pub workdir: PathBuf,
    /// Where the command runs: a worktree it runs in is never removed.
    pub cwd: PathBuf,
    /// This program (recovery needs it as a walk does; it starts nothing).
    pub exe: PathBuf,
}

/// Check every loop ref and record and the machine-local state.
pub fn check(store: &Store, ctx: &Context, opts: &Options) -> Result<Report> {
    let mut findings = Vec::new();
    let mut checked = Checked::default();
    // First: reading the board brings the task index up to the refs as they are, which the
    // local checks then judge.
    stuck(store, ctx, &mut findings)?;
    let states = records::check(store, &mut findings, &mut checked)?;
    local::check(store, ctx, opts, &states, &mut findings, &mut checked)?;
    // Corrupt records first, each group in the order found (refs in name order).
    findings.sort_by_key(|f| f.severity);
    Ok(Report { findings, checked })
}

/// Dependency cycles among tasks not done: none of their tasks can ever be ready, and a walk
/// given one (`run --task`) refuses it. A person breaks them (`edit --remove-after`).
fn stuck(store: &Store, ctx: &Context, out: &mut Vec<Finding>) -> Result<()> {
    let board = crate::backlog::Board::load(store, ctx)?;
    for cycle in board.stuck_cycles() {
        let (first, second) = (&cycle[0], &cycle[1]);
        out.push(
            Finding::new(
                Severity::Stuck,
                Kind::Task,
                first,
                format!(
                    "tasks wait for each other: {}; none of them can ever be ready",
                    crate::backlog::cycle_line(&cycle)
                ),
            )
            .fix(format!("break it: git loop edit {first} --remove-after {second}")),
        );
    }
    Ok(())
}

/// What `repair` did about one finding.
#[derive(Debug, Clone, Serialize)]
pub struct Repaired {
    pub kind: Kind,
    pub subject: String,
    /// What was done, or why nothing was.
    pub outcome: String,
    pub done: bool,
}

/// Repair every repairable finding of `report`; each one's outcome, whether it worked or not
/// (a repair that fails leaves the finding for the next check to report).
pub fn repair(store: &Store, ctx: &Context, report: &Report, opts: &Options) -> Result<Vec<Repaired>> {
    let mut out = Vec::new();
    // Abandoned locks first (a lock on a task's ref would block the repair of its chain), the
    // chains next, then the walks' leftovers (recovery writes refs), and files last.
    let rank = |action: &Action| match action {
        Action::RemoveLock(_) => 0,
        Action::RepairTask(_) => 1,
        Action::Recover => 2,
        _ => 3,
    };
    let mut order: Vec<(&Finding, &Action)> =
        report.findings.iter().filter_map(|f| f.action.as_ref().map(|a| (f, a))).collect();
    order.sort_by_key(|(_, action)| rank(action));
    let mut recovered = false;
    for (finding, action) in order {
        if let Action::Recover = action {
            if !std::mem::replace(&mut recovered, true) {
                out.extend(recover(store, ctx, report, opts));
            }
            continue;
        }
        let outcome = match apply(store, ctx, action, opts) {
            Ok(Ok(done)) => (done, true),
            Ok(Err(why)) => (why, false),
            Err(err) => (format!("failed: {err:#}"), false),
        };
        out.push(Repaired {
            kind: finding.kind,
            subject: finding.subject.clone(),
            outcome: outcome.0,
            done: outcome.1,
        });
    }
    Ok(out)
}

/// Collects what recovery reports.
#[derive(Default)]
struct Recovered(std::sync::Mutex<Vec<Repaired>>);

impl walk::Observer for Recovered {
    fn event(&self, event: &walk::Event) {
        let repaired = match event {
            walk::Event::Recovered { task, detail } => {
                Repaired { kind: Kind::Walk, subject: task.clone(), outcome: format!("{task}: {detail}"), done: true }
            }
            walk::Event::Warning { message } => {
                Repaired { kind: Kind::Walk, subject: String::new(), outcome: message.clone(), done: false }
            }
            _ => return,
        };
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(repaired);
    }
}

/// Run the walk's recovery once, for every finding that asks for it.
/// (Never offered while this command runs inside a worktree recovery would remove: see `local`.)
fn recover(store: &Store, ctx: &Context, report: &Report, opts: &Options) -> Vec<Repaired> {
    let failed = |outcome: String| vec![Repaired { kind: Kind::Walk, subject: String::new(), outcome, done: false }];
    let observer = Recovered::default();
    let outcome = walk::recover_crashed(store, ctx, opts.cwd.clone(), opts.exe.clone(), &observer);
    let mut out = observer.0.into_inner().unwrap_or_else(|e| e.into_inner());
    match outcome {
        Ok(None) => {
            let walks = report.findings.iter().filter(|f| f.kind == Kind::Walk && f.action.is_some());
            for dead in walks {
                out.insert(
                    0,
                    Repaired {
                        kind: Kind::Walk,
                        subject: dead.subject.clone(),
                        outcome: format!("took over and released '{}', which a walk that is gone held", dead.subject),
                        done: true,
                    },
                );
            }
        }
        Ok(Some(live)) => out.extend(failed(format!(
            "left what crashed walks left: a walk of this clone started meanwhile ({}, pid {}) and recovers it",
            live.record.holder, live.record.pid
        ))),
        Err(err) => out.extend(failed(format!("recovery failed: {err:#}"))),
    }
    out
}

/// Carry out one action: `Ok(Ok(what was done))`, or `Ok(Err(why it was not))`.
fn apply(store: &Store, ctx: &Context, action: &Action, opts: &Options) -> Result<Result<String, String>> {
    let shown = |path: &std::path::Path| local::shown(opts, path);
    Ok(match action {
        Action::RepairTask(id) => match task::repair(store, ctx, id)? {
            task::RepairOutcome::Repaired { snapshot, skipped } => {
                let skipped: Vec<String> = skipped.iter().map(ToString::to_string).collect();
                crate::backlog::record(
                    store,
                    ctx,
                    Some(id),
                    Recorded::TaskRepaired(events::TaskRepaired {
                        tip: snapshot.tip.to_string(),
                        skipped: skipped.clone(),
                    }),
                )?;
                let which = match skipped.len() {
                    0 => String::new(),
                    1 => ", skipping 1 unreadable operation".to_owned(),
                    n => format!(", skipping {n} unreadable operations"),
                };
                Ok(format!("appended repair commit {} to {id}{which}", snapshot.tip))
            }
            task::RepairOutcome::NotNeeded => Ok(format!("{id} reads as it is now")),
            task::RepairOutcome::Unrepairable(refusal) => Err(refusal.message),
        },
        Action::Tidy => match crate::store::fold::tidy(store)? {
            0 => Err("no ref is left at its archived value now".to_owned()),
            n => Ok(format!("deleted {n} refs the archive holds at that value")),
        },
        Action::RemoveLock(path) => match locks::recover(store.common_dir(), path)? {
            locks::Recovery::Removed => Ok(format!("removed the abandoned lock '{}'", shown(path))),
            locks::Recovery::Gone => Ok(format!("'{}' was gone already", shown(path))),
            locks::Recovery::Open | locks::Recovery::Busy => {
                Err(format!("left '{}': a live process holds it now", shown(path)))
            }
        },
        Action::PruneRegistration(admin) => match tries::prune_registration(store, admin)? {
            true => Ok(format!("removed the registration '{}' of a worktree that is gone", shown(admin))),
            // Checked again under the worktree lock: the worktree came back, or was locked.
            false => Err(format!("left '{}': its worktree is back, or it is locked", shown(admin))),
        },
        // Carried out once, by `recover`.
        Action::Recover => Err("recovered with the walks".to_owned()),
        Action::RemoveFile(path) => match std::fs::remove_file(path) {
            Ok(()) => Ok(format!("removed '{}'", shown(path))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(format!("'{}' was gone already", shown(path))),
            Err(err) => return Err(anyhow::Error::from(err).context(format!("could not remove '{}'", path.display()))),
        },
        Action::ClearPooled(path) => match tries::pool::clear_entry(store, path)? {
            true => Ok(format!("removed the pooled worktree '{}'", shown(path))),
            false => Ok(format!("'{}' was gone already (taken for a try, or cleared)", shown(path))),
        },
        Action::RemoveDir(path) => match std::fs::remove_dir_all(path) {
            Ok(()) => Ok(format!("removed '{}'", shown(path))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(format!("'{}' was gone already", shown(path))),
            Err(err) => return Err(anyhow::Error::from(err).context(format!("could not remove '{}'", path.display()))),
        },
    })
}
