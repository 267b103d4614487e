//! Conflict-resolver sessions: an agent resolves a merge that conflicts — a landing's (a task
//! branch onto its target) or a dependency's (a done dependency into a new task branch).
//!
//! One resolution, start to end:
//! 1. The merge in progress: a new try of the task (`loop-try/<id>/<n>`, a worktree of its
//!    own; its number is the task's, like any try's) whose branch starts at the target's side
//!    and whose worktree holds the other side's merge as `git merge` leaves one that conflicts
//!    (`tries::merge`): markers naming both sides, the index's stages, `MERGE_HEAD`.
//! 2. A session of the resolver role (`conflict-resolver/1`) in that worktree, told the paths
//!    and both sides' tasks (the incoming task; on the target's side, the tasks whose work is
//!    in it and not in the incoming side). What it leaves is committed to the try branch, as
//!    a worker's is. A report that breaks the contract is sent back once.
//! 3. Its result is kept only if it says resolved, no conflict marker is left in the paths,
//!    the merge was not aborted (the try is concluded as the merge of the two), and (for a
//!    dependency's merge) the walk's checks pass in its worktree; a landing's result
//!    is checked with its batch by the landing queue. The resolved merge is a commit of the
//!    try's tree with both sides as parents.
//! 4. Journaled: `conflict_resolving` before the session, then `conflict_resolved` or
//!    `conflict_unresolved` (docs/storage.md). The try's worktree is removed; its branch stays.

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::unit::{first_line, Ending, GitDispatcher, Launch, Launched};
use super::Walker;
use crate::agent::role::{self, Contract, Report, Role, Violation};
use crate::backlog::Board;
use crate::ids::random_base32;
use crate::landing::{self, Resolution};
use crate::refs;
use crate::store::events::{self, Recorded};
use crate::store::task::{self, Task};
use crate::store::Store;
use crate::tries::{self, checks};

/// The conflict-resolver role: `name` (`--resolver`, else `loop.resolver`, as
/// `ops::config::resolver` decided: a role of the conflict-resolver contract, or an agent that
/// plays the built-in one), else the built-in role played by `loop.role.conflict-resolver.agent`,
/// else by `fallback` (the walk's agent); `None` when there is neither.
pub fn role_of(store: &Store, name: Option<&str>, fallback: Option<&str>) -> Result<Option<Role>> {
    if let Some(name) = name {
        return Ok(Some(role::of_contract(store, name, Contract::ConflictResolver, "--resolver")?));
    }
    let Some(mut builtin) = role::find(store, Contract::ConflictResolver.name())? else { return Ok(None) };
    if builtin.agent.is_none() {
        builtin.agent = fallback.map(ToOwned::to_owned);
    }
    Ok(builtin.agent.is_some().then_some(builtin))
}

/// A merge that conflicts, as a resolver is given it.
pub struct Merge<'m> {
    /// The task whose session and try it is (the task landing; the task whose branch is made).
    pub task: &'m Task,
    /// `landing` or `dependency`.
    pub kind: &'static str,
    /// The target's short name.
    pub into: String,
    /// The task whose work merges in.
    pub from: &'m Task,
    pub ours: ObjectId,
    pub theirs: ObjectId,
    pub paths: &'m [String],
    /// The resolved merge commit's message.
    pub message: String,
    /// Run the walk's checks on the result (a landing's are run with its batch).
    pub checks: bool,
    /// In place of the task's claim (see `Launch::keep`).
    pub keep: Option<&'m dyn Fn() -> bool>,
}

/// What one resolver session said.
enum Said {
    Resolved { summary: String },
    Unresolved(String),
}

impl GitDispatcher<'_> {
    /// Have `resolver` resolve `merge`: the resolved merge commit, or why not. An interrupted
    /// walk or landing is an error (nothing is decided about the task).
    pub fn resolve_merge(&self, merge: &Merge<'_>, resolver: &Role) -> Result<Resolution> {
        let store = self.store;
        let walker = self.walker;
        let id = merge.task.task_id();
        let from_branch = refs::short_branch(&refs::task_branch(&merge.from.task_id())).to_owned();
        self.role_may_start(resolver)?;
        let agent = walker.agent(store, resolver.agent.as_deref().unwrap_or_default())?;
        let history = walker.task_history(store, &merge.task.id)?;
        // A try of its own, never the walk's unit's: no `try_opened` names it. Its worktree
        // holds the merge in progress, the markers naming both sides.
        let begin = tries::merge::Merge {
            ours: merge.ours,
            theirs: merge.theirs,
            labels: (&merge.into, &from_branch),
            message: &merge.message,
        };
        let try_ = match tries::merge::open(store, &id, &walker.key, &history, &begin)? {
            tries::merge::Begun::Conflicts { opened, .. } => opened.try_,
            // It does not conflict (after all): the plain merge.
            tries::merge::Begun::Clean(commit) => return Ok(Resolution::Resolved { commit, by: None }),
        };
        // The resolver's checks build in it as a worker's do: warmed the same way.
        // (Its worktree may come from the pool: its files keep their own times.)
        let _ = walker.warm(store, &try_, try_.number, false);
        let ours_side = target_side(store, walker, merge)?;
        let theirs_side = describe(merge.from);
        let paths_list = merge.paths.iter().map(|p| format!("- {p}")).collect::<Vec<_>>().join("\n");
        let mut sent_back: Option<String> = None;
        let mut last_session = String::new();
        let mut said = None;
        for attempt in 1..=2u32 {
            if attempt > 1 {
                self.role_may_start(resolver)?;
            }
            let session = format!("s-{}", random_base32(8));
            last_session = session.clone();
            walker.record(
                store,
                Some(&merge.task.id),
                Recorded::ConflictResolving(events::ConflictResolving {
                    session: session.clone(),
                    role: resolver.name.clone(),
                    agent: agent.name.clone(),
                    number: try_.number,
                    kind: merge.kind.to_owned(),
                    into: merge.into.clone(),
                    from: merge.from.id.clone(),
                    ours: merge.ours.to_string(),
                    theirs: merge.theirs.to_string(),
                    paths: merge.paths.to_vec(),
                }),
            )?;
            let launch = Launch {
                session: &session,
                task: merge.task,
                try_: &try_,
                worktree: &try_.worktree,
                agent: &agent,
                attempt,
                halt: None,
                role: Some(resolver),
                handoff: None,
                commits: true,
                keep: merge.keep,
            };
            let Launched { dir, ending, why, .. } = self.launch(&launch, &|dir| {
                let mut text = role::prompt(
                    resolver,
                    &[
                        ("task", &merge.from.id),
                        ("title", first_line(&merge.from.title)),
                        ("target", &merge.into),
                        ("paths", &paths_list),
                        ("ours", &ours_side),
                        ("theirs", &theirs_side),
                    ],
                    &crate::agent::record::result_file(dir),
                );
                if let Some(problem) = &sent_back {
                    text.push_str(&format!(
                        "\n## Your last report could not be read\n\nThe previous resolver session's report broke the {} contract: {problem}\nReport exactly as above.\n",
                        resolver.contract.id()
                    ));
                }
                Ok(text)
            })?;
            match ending {
                Ending::Cancelled => {
                    let _ = tries::remove_worktree(store, &try_);
                    return Err(crate::error::Refusal::new(
                        crate::error::Class::Refused,
                        "the conflict resolver was stopped: the walk or the landing was interrupted",
                    )
                    .hint(format!(
                        "its work so far is on {}; run again to resolve anew",
                        refs::short_branch(&try_.branch)
                    ))
                    .into());
                }
                Ending::Lost(_) | Ending::Withdrawn(_) | Ending::Halted => {
                    said = Some(Said::Unresolved(format!("its session stopped: {why}")));
                    break;
                }
                Ending::Exited(_) | Ending::CannotRun(_) | Ending::TimedOut => {}
            }
            let problem = match self.role_report(&session, &dir, resolver.contract)? {
                Ok(Some(Report::Resolution(r))) if r.resolved => {
                    said = Some(Said::Resolved { summary: r.summary });
                    break;
                }
                Ok(Some(Report::Resolution(r))) => {
                    said = Some(Said::Unresolved(format!("it reports it could not resolve it: {}", r.summary.trim())));
                    break;
                }
                Ok(Some(_)) => "it reported in another role's contract".to_owned(),
                Ok(None) => format!(
                    "it reported nothing: neither 'git loop finish resolved|unresolved' nor a {} result file (it ended: {why})",
                    resolver.contract.id()
                ),
                Err(Violation(problem)) => problem,
            };
            self.violation(merge.task, &session, resolver, &problem, attempt == 1)?;
            if attempt == 2 {
                said = Some(Said::Unresolved(format!(
                    "it broke the {} contract twice ({problem})",
                    resolver.contract.id()
                )));
            }
            sent_back = Some(problem);
        }
        let said = said.expect("every pass decides or sends back once");
        let outcome = match said {
            Said::Unresolved(why) => Err(why),
            Said::Resolved { summary } => {
                self.check_resolution(merge, &try_).map(|result| result.map(|c| (c, summary)))?
            }
        };
        let _ = tries::remove_worktree(store, &try_);
        match outcome {
            Ok((commit, summary)) => {
                walker.record(
                    store,
                    Some(&merge.task.id),
                    Recorded::ConflictResolved(events::ConflictResolved {
                        session: last_session.clone(),
                        number: try_.number,
                        commit: commit.to_string(),
                        paths: merge.paths.to_vec(),
                        summary,
                    }),
                )?;
                Ok(Resolution::Resolved { commit, by: Some(last_session) })
            }
            Err(reason) => {
                let reason = format!("the conflict resolver {} (session {last_session}): {reason}", resolver.label());
                walker.record(
                    store,
                    Some(&merge.task.id),
                    Recorded::ConflictUnresolved(events::ConflictUnresolved {
                        session: last_session,
                        number: try_.number,
                        paths: merge.paths.to_vec(),
                        reason: reason.clone(),
                    }),
                )?;
                Ok(Resolution::Unresolved(reason))
            }
        }
    }

    /// A resolver's result as a merge commit, or why it is not one: no conflict marker left
    /// in the paths, and the walk's checks passing when `merge.checks`.
    fn check_resolution(&self, merge: &Merge<'_>, try_: &tries::Try) -> Result<Result<ObjectId, String>> {
        let store = self.store;
        let head = match tries::merge::conclude(store, try_, (merge.ours, merge.theirs), merge.paths, &merge.message)? {
            tries::merge::Concluded::Merged(head) => head,
            tries::merge::Concluded::MarkersLeft(marked) => {
                return Ok(Err(format!("it left conflict markers in: {}", marked.join(", "))))
            }
            tries::merge::Concluded::NotMerged => {
                return Ok(Err("it aborted the merge: its try does not hold the merge of the two sides".to_owned()))
            }
        };
        if let (true, Some(command)) = (merge.checks, &self.walker.opts.checks) {
            let dir = crate::agent::record::dir(&store.loop_dir()?, &format!("resolve-{}-{}", try_.task, try_.number));
            std::fs::create_dir_all(&dir).with_context(|| format!("could not create '{}'", dir.display()))?;
            let cancelled = || self.walker.cancelled(store);
            let runner = self.walker.runner(&cancelled);
            tries::add_worktree(store, try_)?;
            let ran = checks::run(store, &runner, "checks", command, &try_.worktree, &[], &dir.join("checks.log"))?;
            if !ran.passed {
                let text = std::fs::read(&ran.log).unwrap_or_default();
                let text = String::from_utf8_lossy(&text);
                let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
                let tail = lines[lines.len().saturating_sub(5)..].join(" / ");
                let exit = ran.exit.map(|e| e.to_string()).unwrap_or_else(|| "stopped".into());
                return Ok(Err(format!(
                    "the checks fail on its resolution ({exit}): {}; output: {}",
                    if tail.is_empty() { "no output".to_owned() } else { tail },
                    ran.log.display()
                )));
            }
        }
        let tree = store.commit_tree(head).context("the resolution's tree")?;
        let message =
            format!("{}Resolved-By: {}\n", ensure_trailer_gap(&merge.message), refs::short_branch(&try_.branch));
        Ok(Ok(store.commit_tree_with(tree, &[merge.ours, merge.theirs], &message)?))
    }
}

/// `message` ending so that a trailer can follow: a trailer block already there, or a blank line.
fn ensure_trailer_gap(message: &str) -> String {
    let trimmed = message.trim_end();
    let last = trimmed.lines().last().unwrap_or("");
    let has_trailers = trimmed.lines().count() > 1 && last.contains(": ") && !last.starts_with(' ');
    if has_trailers {
        format!("{trimmed}\n")
    } else {
        format!("{trimmed}\n\n")
    }
}

/// A task for a prompt: its id, title and body.
fn describe(task: &Task) -> String {
    let body =
        if task.body.trim().is_empty() { "(No description: the title is the task.)" } else { task.body.trim_end() };
    format!("### {}: {}\n\n{body}\n", task.id, first_line(&task.title))
}

/// The target's side of a merge, for the resolver's prompt: the tasks whose work is in `ours`
/// and not in `theirs` (what landed on the target since the two parted), newest done first.
fn target_side(store: &Store, walker: &Walker<'_>, merge: &Merge<'_>) -> Result<String> {
    let board = Board::load(store, &walker.ctx)?;
    let mut heads = Vec::new();
    for row in board.tasks.iter() {
        if row.id() == merge.from.id || row.id() == merge.task.id {
            continue;
        }
        let Ok(id) = row.id().parse::<crate::ids::TaskId>() else { continue };
        if let Some(head) = store.ref_target(&refs::task_branch(&id))? {
            heads.push((row, head));
        }
    }
    let all: Vec<ObjectId> = heads.iter().map(|(_, h)| *h).collect();
    let in_ours = store.contained_in(merge.ours, &all)?;
    let in_theirs = store.contained_in(merge.theirs, &all)?;
    let mut tasks: Vec<Task> = Vec::new();
    for (row, head) in heads {
        if in_ours.contains(&head) && !in_theirs.contains(&head) {
            tasks.push(row.task()?);
        }
    }
    tasks.sort_by(|a, b| {
        let at = |t: &Task| t.completion.as_ref().map(|c| c.at);
        at(b).cmp(&at(a))
    });
    if tasks.is_empty() {
        return Ok(format!(
            "No task's work on {} is known to the loop: its side is the branch's own history (`git log {}`).\n",
            merge.into, merge.ours
        ));
    }
    let mut out = format!("The tasks whose work is on {} and not on the other side:\n\n", merge.into);
    for t in tasks.iter().take(20) {
        out.push_str(&describe(t));
        out.push('\n');
    }
    if tasks.len() > 20 {
        out.push_str(&format!("… and {} more\n", tasks.len() - 20));
    }
    Ok(out)
}

/// The landing queue's resolver: a conflict-resolver session per conflicting landing.
pub struct AgentResolver<'w> {
    pub walker: &'w Walker<'w>,
    pub role: Role,
}

impl landing::Resolver for AgentResolver<'_> {
    fn resolve(&self, store: &Store, conflict: &landing::Conflict, keep: &dyn Fn() -> bool) -> Result<Resolution> {
        let id: crate::ids::TaskId = conflict.task.parse()?;
        let snapshot = task::read(store, &id)?.with_context(|| format!("task '{id}' is gone"))?;
        let dispatcher = GitDispatcher::new(store, self.walker);
        let merge = Merge {
            task: &snapshot.task,
            kind: "landing",
            into: refs::short_branch(&conflict.target).to_owned(),
            from: &snapshot.task,
            ours: conflict.ours,
            theirs: conflict.theirs,
            paths: &conflict.paths,
            message: conflict.message.clone(),
            checks: false,
            keep: Some(keep),
        };
        dispatcher.resolve_merge(&merge, &self.role)
    }
}

/// Who is resolving what, from a task's journal: the last `conflict_resolving` not followed by
/// its end (`conflict_resolved`, `conflict_unresolved`), for `status` and `show`.
pub fn at_work(history: &[crate::store::journal::Entry]) -> Option<events::ConflictResolving> {
    let mut current: Option<events::ConflictResolving> = None;
    for entry in history {
        match Recorded::of(&entry.event) {
            Recorded::ConflictResolving(r) => current = Some(r),
            Recorded::ConflictResolved(r) if current.as_ref().is_some_and(|c| c.number == r.number) => current = None,
            Recorded::ConflictUnresolved(r) if current.as_ref().is_some_and(|c| c.number == r.number) => current = None,
            // Its session is over (what follows is checking its result, or sending it back).
            Recorded::SessionEnded(e) if current.as_ref().is_some_and(|c| c.session == e.session) => current = None,
            _ => {}
        }
    }
    current
}

/// A role's session at work on a task, live on this machine: a conflict resolver (with what it
/// resolves) or a summarizer. For `status` and `show`.
#[derive(Debug, Clone)]
pub struct AtWork {
    pub task: String,
    pub session: String,
    pub role: String,
    pub agent: String,
    /// The conflict a resolver resolves (`None`: a summarizer writing a landing's message).
    pub resolving: Option<events::ConflictResolving>,
}

/// Whether `session`'s record says it runs on this machine now.
fn live(loop_dir: &std::path::Path, ctx: &crate::context::Context, session: &str) -> bool {
    crate::agent::record::read(loop_dir, session).is_some_and(|r| {
        r.ended_at.is_none() && crate::agent::record::is_alive(r.pid, r.pid_start, &r.boot_id, &ctx.boot_id)
    })
}

/// The conflict resolvers and summarizers at work on this machine, by their session records.
pub fn roles_at_work(store: &Store, ctx: &crate::context::Context) -> Result<Vec<AtWork>> {
    let loop_dir = store.loop_dir()?;
    let mut out = Vec::new();
    for record in crate::agent::record::all(&loop_dir) {
        let Some(contract) = record.contract.as_deref() else { continue };
        let resolver = contract == Contract::ConflictResolver.id();
        if !(resolver || contract == Contract::Summarizer.id()) || !live(&loop_dir, ctx, &record.session) {
            continue;
        }
        let resolving = if resolver {
            let filter = crate::store::journal::Filter { task: Some(record.task.clone()), session: None };
            let history = crate::store::journal::timeline(store, &filter)?.entries;
            match at_work(&history).filter(|r| r.session == record.session) {
                Some(r) => Some(r),
                // Started before its `conflict_resolving` was read, or already past it.
                None => continue,
            }
        } else {
            None
        };
        out.push(AtWork {
            task: record.task.clone(),
            session: record.session.clone(),
            role: record.role.clone().unwrap_or_default(),
            agent: record.agent.clone(),
            resolving,
        });
    }
    out.sort_by(|a, b| (&a.task, &a.session).cmp(&(&b.task, &b.session)));
    Ok(out)
}
