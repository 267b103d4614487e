//! `git loop doctor`: check every loop ref and record, and this clone's machine-local state,
//! and repair what can be repaired without losing data. Nothing here prints: the command line
//! renders the [`Report`] and decides the exit code from it.
//!
//! A finding is **corrupt** when a record or a history cannot be read as it is (a reader
//! reports it with exit 3), and a **leftover** when a crashed or interrupted process left
//! something behind that nothing reads but that can block or mislead (a stale lock, a dangling
//! worktree registration, a temporary object file, a stale cache, a session that died).
//!
//! A repair never rewrites history and never deletes a ref that holds data: a task chain is
//! mended by a commit on top (`task::repair`); locks are removed only when abandoned (see
//! `locks`), and only on refs git-loop owns; a worktree goes only after whatever is left in it
//! is committed to its try branch.

mod local;
mod locks;
mod records;

use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use crate::context::Context;
use crate::error::Refusal;
use crate::ids::TaskId;
use crate::store::{task, Store};
use crate::tries::{self, Try};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A record or history that cannot be read as it is.
    Corrupt,
    /// Something a crash left behind.
    Leftover,
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
    /// Commit what is left in a try's worktree to its branch, then remove the worktree.
    RemoveWorktree(Box<Try>),
    /// Remove a temporary file or a stale cache file.
    RemoveFile(PathBuf),
    /// Remove a stale cache directory.
    RemoveDir(PathBuf),
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
    pub worktrees: usize,
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
    /// The worst severity found (`None`: clean).
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).min()
    }
}

/// What `check` and `repair` need to know of where they run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The main working tree: paths are shown relative to it.
    pub workdir: PathBuf,
    /// Where the command runs: a worktree it runs in is never removed.
    pub cwd: PathBuf,
}

/// Check every loop ref and record and the machine-local state.
pub fn check(store: &Store, ctx: &Context, opts: &Options) -> Result<Report> {
    let mut findings = Vec::new();
    let mut checked = Checked::default();
    let states = records::check(store, &mut findings, &mut checked)?;
    local::check(store, ctx, opts, &states, &mut findings, &mut checked)?;
    // Corrupt records first, each group in the order found (refs in name order).
    findings.sort_by_key(|f| f.severity);
    Ok(Report { findings, checked })
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
    // Abandoned locks first: a lock on a task's ref would block the repair of its chain.
    let mut order: Vec<&Finding> = report.findings.iter().filter(|f| f.action.is_some()).collect();
    order.sort_by_key(|f| !matches!(f.action, Some(Action::RemoveLock(_))));
    for finding in order {
        let Some(action) = &finding.action else { continue };
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
                    "task_repaired",
                    Some(id),
                    serde_json::json!({ "tip": snapshot.tip.to_string(), "skipped": skipped }),
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
        Action::RemoveLock(path) => match locks::judge(path) {
            locks::Verdict::Abandoned(_) if locks::remove(store.repo.common_dir(), path)? => {
                Ok(format!("removed the abandoned lock '{}'", shown(path)))
            }
            _ => Err(format!("left '{}': a writer holds it now", shown(path))),
        },
        Action::PruneRegistration(admin) => {
            // Checked again: the worktree may have come back (or been locked) since.
            let gitdir = std::fs::read_to_string(admin.join("gitdir")).unwrap_or_default();
            if std::path::Path::new(gitdir.trim()).exists() || admin.join("locked").exists() {
                Err(format!("left '{}': its worktree is back, or it is locked", shown(admin)))
            } else {
                std::fs::remove_dir_all(admin)?;
                Ok(format!("removed the registration '{}' of a worktree that is gone", shown(admin)))
            }
        }
        Action::RemoveWorktree(try_) => {
            let author = store.signature();
            let message = format!(
                "loop: leftovers of {} try {}, saved by git loop doctor --repair\n\nIts worktree was left behind: {}\n",
                try_.task,
                try_.number,
                try_.worktree.display()
            );
            let committed = tries::commit::commit_on_stop(store, try_, &author, &message)?;
            tries::remove_worktree(store, try_)?;
            let kept = match committed {
                tries::commit::Committed::Commit { id, paths } => {
                    let files =
                        if paths == 1 { "1 changed file is".to_owned() } else { format!("{paths} changed files are") };
                    format!("; its {files} committed as {}", &id.to_string()[..12])
                }
                tries::commit::Committed::Adopted(id) => format!("; its commits are kept ({})", &id.to_string()[..12]),
                _ => String::new(),
            };
            Ok(format!(
                "removed the worktree '{}'{kept} (branch '{}' stays)",
                shown(&try_.worktree),
                crate::refs::short_branch(&try_.branch)
            ))
        }
        Action::RemoveFile(path) => match std::fs::remove_file(path) {
            Ok(()) => Ok(format!("removed '{}'", shown(path))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(format!("'{}' was gone already", shown(path))),
            Err(err) => return Err(anyhow::Error::from(err).context(format!("could not remove '{}'", path.display()))),
        },
        Action::RemoveDir(path) => match std::fs::remove_dir_all(path) {
            Ok(()) => Ok(format!("removed '{}'", shown(path))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(format!("'{}' was gone already", shown(path))),
            Err(err) => return Err(anyhow::Error::from(err).context(format!("could not remove '{}'", path.display()))),
        },
    })
}
