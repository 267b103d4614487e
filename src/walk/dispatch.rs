//! The dispatcher side of the walk: one agent session on a unit.
//!
//! A session: a fresh session key; its files in `.git/loop/sessions/<key>/` (prompt, log,
//! result, record); the agent started under the session guard in the try's worktree; its
//! claim's lease refreshed while it runs, and the session stopped if the claim is lost, the
//! timeout passes or the walk is cancelled. Whatever way it ends, its work is committed to
//! the try branch (commit-on-stop). Then the evidence: the `termination` event the session
//! journaled with `git loop finish`, else a complete and valid `$GIT_LOOP_RESULT` file. A
//! `done` counts only if the checks pass in the worktree; failing checks, or no verdict at
//! all, continue the unit with a note for the next session.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use gix::ObjectId;
use serde::Deserialize;
use serde_json::json;

use super::queue::WorkUnit;
use super::{prompt, Event, Walker};
use crate::backlog::{self, TaskFields};
use crate::git;
use crate::ids::{random_base32, ClaimKey, Priority, TaskId};
use crate::refs;
use crate::runloop::{self, Dispatched, Verdict};
use crate::session::presets::PromptVia;
use crate::session::process::{Running, Spec};
use crate::session::record;
use crate::store::claim::{self, Acquire, AcquireOptions};
use crate::store::journal;
use crate::store::task::Task;
use crate::store::Store;
use crate::tries::{self, commit::Committed, Try};

pub struct GitDispatcher<'a> {
    store: &'a Store,
    walker: &'a Walker<'a>,
}

/// A command to run under the session guard.
struct Guarded<'c> {
    program: &'c str,
    args: &'c [String],
    cwd: &'c Path,
    env: &'c [(String, String)],
    stdin: Option<PathBuf>,
    log: &'c Path,
    marker: &'c str,
    timeout: Option<Duration>,
}

/// Why a session's process ended.
enum Ending {
    Exited(String),
    TimedOut,
    Cancelled,
    Lost(String),
}

impl<'a> GitDispatcher<'a> {
    pub fn new(store: &'a Store, walker: &'a Walker<'a>) -> GitDispatcher<'a> {
        GitDispatcher { store, walker }
    }

    /// Set up the unit's try: task branch (base + done dependencies), then an unfinished try
    /// of this task to continue, or a new one; and its worktree.
    fn prepare(&self, unit: &mut WorkUnit) -> Result<Option<Dispatched>> {
        let id = unit.id();
        let deps: Vec<TaskId> = unit.task.after.iter().filter_map(|d| d.parse().ok()).collect();
        let head = match tries::ensure_task_branch(self.store, &id, self.walker.base, &deps)? {
            tries::TaskBranch::Ready(head) => head,
            tries::TaskBranch::Conflict { dependency, paths } => {
                return Ok(Some(Dispatched::Verdict {
                    verdict: Verdict::Blocked,
                    message: format!("merging the work of '{dependency}' conflicts in: {}", paths.join(", ")),
                }));
            }
        };
        let root = tries::worktrees_root(self.store)?;
        let (try_, resumed) = match unfinished_try(self.store, &id)? {
            Some(n) if git::ref_target(&self.store.repo, &refs::try_branch(&id, n))?.is_some() => {
                (Try::describe(&id, n, &root), true)
            }
            _ => {
                let n = tries::take_number(self.store, &id, &self.walker.key)?;
                let try_ = Try::describe(&id, n, &root);
                crate::store::cas::update(
                    self.store,
                    &try_.branch,
                    crate::store::cas::Expect::Absent,
                    head,
                    "loop: open try",
                )?;
                (try_, false)
            }
        };
        tries::add_worktree(self.store, &try_)?;
        self.walker.journal(
            self.store,
            "try_opened",
            Some(&unit.task.id),
            json!({ "try": try_.number, "branch": refs::short_branch(&try_.branch), "worktree": try_.worktree.display().to_string(), "resumed": resumed }),
        )?;
        self.walker.observer.event(&Event::TryOpened {
            task: unit.task.id.clone(),
            number: try_.number,
            branch: refs::short_branch(&try_.branch).to_owned(),
            worktree: try_.worktree.clone(),
            resumed,
        });
        unit.try_ = Some(try_);
        Ok(None)
    }

    fn claim_options(&self, session: &str) -> AcquireOptions {
        AcquireOptions {
            holder: self.walker.key.clone(),
            ttl: self.walker.opts.lease,
            reason: Some(format!("worked by {} (session {session})", self.walker.key)),
            session: Some(session.to_owned()),
        }
    }

    /// Run the session's process to its end, refreshing the claim meanwhile.
    fn supervise(&self, unit: &WorkUnit, running: &mut Running, session: &str) -> Result<Ending> {
        let key = ClaimKey::node(&unit.id());
        let refresh_every = Duration::from_secs((self.walker.opts.lease.num_seconds() as u64 / 3).clamp(1, 120));
        let timeout = self.walker.opts.session_timeout;
        let mut last_refresh = Instant::now();
        let mut backoff = crate::session::process::Backoff::new();
        loop {
            if let Some(exit) = running.poll()? {
                // The guard sweeps the session's processes before it exits; if it did not
                // exit by itself (killed by a signal), sweep here.
                if matches!(exit, crate::session::process::Exit::Signal(_)) {
                    running.sweep();
                }
                return Ok(Ending::Exited(exit.to_string()));
            }
            if self.walker.cancelled(self.store) {
                running.stop(self.walker.opts.grace)?;
                return Ok(Ending::Cancelled);
            }
            if timeout.is_some_and(|t| running.started.elapsed() >= t) {
                running.stop(self.walker.opts.grace)?;
                return Ok(Ending::TimedOut);
            }
            if last_refresh.elapsed() >= refresh_every {
                last_refresh = Instant::now();
                match claim::acquire(self.store, &self.walker.ctx, &key, &self.claim_options(session)) {
                    Ok(Acquire::HeldByOther(held)) => {
                        running.stop(self.walker.opts.grace)?;
                        return Ok(Ending::Lost(format!("its claim was taken by {}", held.record.holder)));
                    }
                    Ok(_) => {}
                    Err(err) => self.walker.observer.event(&Event::Warning {
                        message: format!("could not refresh the claim on {}: {err:#}", unit.task.id),
                    }),
                }
            }
            backoff.wait();
        }
    }

    /// Run a command under the session guard; with `timeout`, to its end or until then.
    fn run_guarded(&self, cmd: Guarded<'_>) -> Result<(Running, Option<crate::session::process::Exit>)> {
        let Guarded { program, args, cwd, env, stdin, log, marker, timeout } = cmd;
        let mut guard_args = vec![
            "session-guard".to_owned(),
            "--parent".to_owned(),
            self.walker.ctx.pid.to_string(),
            "--grace-ms".to_owned(),
            self.walker.opts.grace.as_millis().to_string(),
            "--log".to_owned(),
            log.display().to_string(),
        ];
        if let Some(stdin) = &stdin {
            guard_args.push("--stdin".into());
            guard_args.push(stdin.display().to_string());
        }
        guard_args.push("--".into());
        guard_args.push(program.to_owned());
        guard_args.extend(args.iter().cloned());
        let spec = Spec {
            program: self.walker.exe.display().to_string(),
            args: guard_args,
            cwd: cwd.to_owned(),
            env: env.to_vec(),
            stdin: None,
            log: log.with_extension("guard.log"),
            marker: marker.to_owned(),
        };
        let mut running = Running::spawn(&spec)?;
        if let Some(timeout) = timeout {
            let deadline = Instant::now() + timeout;
            let mut backoff = crate::session::process::Backoff::new();
            while running.poll()?.is_none() && Instant::now() < deadline && !self.walker.cancelled(self.store) {
                backoff.wait();
            }
            if running.poll()?.is_none() {
                running.stop(self.walker.opts.grace)?;
            }
            let exit = running.poll()?;
            return Ok((running, exit));
        }
        Ok((running, None))
    }

    /// The environment every session gets (the agent contract, docs/agents.md).
    fn session_env(&self, unit: &WorkUnit, try_: &Try, session: &str, dir: &Path) -> Vec<(String, String)> {
        let exe_dir = self.walker.exe.parent().map(|p| p.display().to_string()).unwrap_or_default();
        let path = match &self.walker.ctx.path_var {
            Some(p) => format!("{exe_dir}:{}", p.to_string_lossy()),
            None => exe_dir,
        };
        let mut env = vec![
            ("GIT_LOOP_SESSION".into(), session.to_owned()),
            ("GIT_LOOP_TASK".into(), unit.task.id.clone()),
            ("GIT_LOOP_TRY".into(), try_.number.to_string()),
            ("GIT_LOOP_WORKTREE".into(), try_.worktree.display().to_string()),
            ("GIT_LOOP_PROMPT".into(), dir.join("prompt.md").display().to_string()),
            ("GIT_LOOP_RESULT".into(), dir.join("result.json").display().to_string()),
            ("GIT_LOOP_REPO".into(), self.store.workdir().display().to_string()),
            ("GIT_LOOP_WALKER".into(), self.walker.key.clone()),
            ("PATH".into(), path),
        ];
        env.extend(self.walker.opts.agent.session_env(dir));
        env
    }

    /// Run the checks in the worktree; `None` when there are none.
    fn checks(
        &self,
        unit: &mut WorkUnit,
        try_: &Try,
        dir: &Path,
        env: &[(String, String)],
    ) -> Result<Option<(bool, String)>> {
        let Some(command) = self.walker.opts.checks.clone() else {
            return Ok(None);
        };
        let log = dir.join("checks.log");
        let marker = format!("checks-{}", random_base32(12));
        let started = Instant::now();
        let args = vec!["-c".to_owned(), command.clone()];
        let (_running, exit) = self.run_guarded(Guarded {
            program: "sh",
            args: &args,
            cwd: &try_.worktree,
            env,
            stdin: None,
            log: &log,
            marker: &marker,
            timeout: Some(self.walker.opts.checks_timeout),
        })?;
        let passed = exit == Some(crate::session::process::Exit::Code(0));
        let elapsed = started.elapsed();
        let tail = tail(&log, 40);
        unit.checks = Some(json!({
            "command": command,
            "passed": passed,
            "exit": exit.map(|e| e.to_string()),
            "elapsed_ms": elapsed.as_millis() as u64,
            "log": log.display().to_string(),
        }));
        self.walker.journal(
            self.store,
            "checks",
            Some(&unit.task.id),
            json!({ "passed": passed, "elapsed_ms": elapsed.as_millis() as u64, "exit": exit.map(|e| e.to_string()) }),
        )?;
        self.walker.observer.event(&Event::Checks { task: unit.task.id.clone(), passed, elapsed });
        Ok(Some((passed, tail)))
    }
}

impl runloop::Dispatcher<WorkUnit> for GitDispatcher<'_> {
    fn dispatch(&mut self, unit: &mut WorkUnit, attempt: u32, carry: Option<&str>) -> Result<Dispatched> {
        if unit.try_.is_none() {
            if let Some(early) = self.prepare(unit)? {
                return Ok(early);
            }
        }
        let try_ = unit.try_.clone().expect("prepared above");
        if !try_.worktree.join(".git").exists() {
            // Deleted under the loop: the branch holds the work; check it out again.
            tries::add_worktree(self.store, &try_)?;
        }
        let session = format!("s-{}", random_base32(8));
        let loop_dir = self.store.loop_dir()?;
        let dir = record::dir(&loop_dir, &session);
        std::fs::create_dir_all(&dir).with_context(|| format!("could not create '{}'", dir.display()))?;
        let prompt_path = dir.join("prompt.md");
        let text = prompt::build(
            self.store,
            &prompt::Input {
                task: &unit.task,
                try_: &try_,
                attempt,
                carry,
                checks: self.walker.opts.checks.as_deref(),
                result_path: &dir.join("result.json"),
            },
        )?;
        std::fs::write(&prompt_path, text).with_context(|| format!("could not write '{}'", prompt_path.display()))?;
        self.walker.opts.agent.write_session_files(&dir)?;
        let env = self.session_env(unit, &try_, &session, &dir);
        let marker = format!("{session}-{}", random_base32(12));
        let agent = &self.walker.opts.agent;
        let stdin = (agent.prompt == PromptVia::Stdin).then(|| prompt_path.clone());
        // The CLI's own session id, where the loop may choose it (so it can be resumed).
        let agent_session = crate::ids::uuid_v4();
        if agent.env.iter().any(|(_, v)| v.contains("{session_dir}")) {
            std::fs::create_dir_all(dir.join("tmp"))
                .with_context(|| format!("could not create '{}'", dir.join("tmp").display()))?;
        }
        let argv = agent.argv(&prompt_path, &agent_session);
        let log = dir.join("log");
        let (mut running, _) = self.run_guarded(Guarded {
            program: &agent.program,
            args: &argv,
            cwd: &try_.worktree,
            env: &env,
            stdin,
            log: &log,
            marker: &marker,
            timeout: None,
        })?;
        let started_at = self.walker.ctx.now();
        let mut rec = record::Record {
            version: record::RECORD_VERSION,
            session: session.clone(),
            walker: self.walker.key.clone(),
            task: unit.task.id.clone(),
            try_number: try_.number,
            agent: agent.name.clone(),
            worktree: try_.worktree.clone(),
            pid: running.pid,
            pid_start: crate::session::process::start_time(running.pid),
            boot_id: self.walker.ctx.boot_id.clone(),
            marker: marker.clone(),
            started_at,
            ended_at: None,
            ended: None,
            agent_session: agent.presets_session_id().then(|| agent_session.clone()),
        };
        record::write(&loop_dir, &rec)?;
        unit.last_session = Some(session.clone());
        self.walker.journal(
            self.store,
            "session_started",
            Some(&unit.task.id),
            json!({ "session": session, "agent": agent.name, "try": try_.number, "attempt": attempt, "worktree": try_.worktree.display().to_string() }),
        )?;
        self.walker.observer.event(&Event::SessionStarted {
            task: unit.task.id.clone(),
            session: session.clone(),
            agent: agent.name.clone(),
            number: try_.number,
            attempt,
        });

        let ending = self.supervise(unit, &mut running, &session)?;
        let elapsed = running.started.elapsed();
        let why = match &ending {
            Ending::Exited(exit) => format!("the agent exited ({exit})"),
            Ending::TimedOut => format!("it timed out after {}", human_duration(elapsed)),
            Ending::Cancelled => "the walk was interrupted".to_owned(),
            Ending::Lost(reason) => reason.clone(),
        };
        let author = gix::actor::Signature {
            name: agent.name.as_str().into(),
            email: format!("{}@agent.invalid", agent.name).as_str().into(),
            time: gix::date::Time { seconds: self.walker.ctx.now().timestamp(), offset: 0 },
        };
        let message = format!(
            "loop: work of session {session} on {}\n\nTask: {} ({})\nTry: {}\nSession: {session}\nAgent: {}\nStopped: {why}\n",
            unit.task.id, unit.task.id, first_line(&unit.task.title), try_.number, agent.name
        );
        let committed = tries::commit::commit_on_stop(self.store, &try_, &author, &message)?;
        let commit = match &committed {
            Committed::Commit { id, .. } | Committed::Adopted(id) => Some(id.to_string()),
            Committed::Clean | Committed::NoWorktree => None,
        };
        rec.ended_at = Some(self.walker.ctx.now());
        rec.ended = Some(why.clone());
        // A hook may have reported the CLI's own session id meanwhile.
        rec.agent_session = record::read(&loop_dir, &session).and_then(|r| r.agent_session).or(rec.agent_session);
        let _ = std::fs::remove_dir_all(dir.join("tmp"));
        record::write(&loop_dir, &rec)?;
        self.walker.journal(
            self.store,
            "session_ended",
            Some(&unit.task.id),
            json!({ "session": session, "reason": why, "elapsed_ms": elapsed.as_millis() as u64, "commit": commit }),
        )?;
        self.walker.observer.event(&Event::SessionEnded {
            task: unit.task.id.clone(),
            session: session.clone(),
            elapsed,
            why: why.clone(),
            commit: commit.clone(),
        });

        match ending {
            Ending::Cancelled => return Ok(Dispatched::Interrupted),
            Ending::Lost(reason) => {
                unit.lost = true;
                return Ok(Dispatched::Lost { reason });
            }
            Ending::Exited(_) | Ending::TimedOut => {}
        }
        let evidence = self.evidence(unit, &session, &dir)?;
        // A holder paused past its lease (SIGSTOP, a laptop lid) may have been superseded
        // while it slept: confirm the claim is still ours before any verdict closes the task.
        if let Some(reason) = self.claim_lost(unit, &session)? {
            unit.lost = true;
            return Ok(Dispatched::Lost { reason });
        }
        let log_tail = tail(&dir.join("log"), 20);
        let Some((verdict, message)) = evidence else {
            return Ok(Dispatched::Continue {
                note: format!(
                    "The previous session ({session}) ended without reporting a verdict: {why}.\nThe last lines of its output were:\n{log_tail}"
                ),
            });
        };
        match verdict {
            Verdict::Done => match self.checks(unit, &try_, &dir, &env)? {
                None | Some((true, _)) => {
                    if let Some(reason) = self.claim_lost(unit, &session)? {
                        unit.lost = true;
                        return Ok(Dispatched::Lost { reason });
                    }
                    Ok(Dispatched::Verdict { verdict, message })
                }
                Some((false, tail)) => {
                    let command = self.walker.opts.checks.clone().unwrap_or_default();
                    // Anything the checks wrote is the next session's to keep or clean up.
                    Ok(Dispatched::Continue {
                        note: format!(
                            "The previous session ({session}) reported done, but the checks failed: `{command}`.\nThe last lines of their output were:\n{tail}"
                        ),
                    })
                }
            },
            other => Ok(Dispatched::Verdict { verdict: other, message }),
        }
    }
}

/// The result file a session may leave (`$GIT_LOOP_RESULT`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultFile {
    verdict: String,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    follow_ups: Vec<FollowUp>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FollowUp {
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    priority: Option<Priority>,
    #[serde(default)]
    labels: Vec<String>,
}

fn parse_verdict(word: &str) -> Option<Verdict> {
    match word {
        "done" => Some(Verdict::Done),
        "blocked" => Some(Verdict::Blocked),
        "failed" => Some(Verdict::Failed),
        _ => None,
    }
}

impl GitDispatcher<'_> {
    /// Whether the unit's claim is someone else's now (read only: a lease that merely ran out
    /// is still ours until someone takes it, and the next refresh renews it).
    fn claim_lost(&self, unit: &WorkUnit, _session: &str) -> Result<Option<String>> {
        let key = ClaimKey::node(&unit.id());
        Ok(match claim::read(self.store, &key)? {
            Some(held) if held.record.holder != self.walker.key => {
                Some(format!("its claim was taken by {}", held.record.holder))
            }
            Some(_) => None,
            None => Some("its claim was released by someone else".to_owned()),
        })
    }

    /// The session's verdict: its journaled termination, else its result file. Follow-up
    /// tasks in the result file are added either way.
    fn evidence(&self, unit: &WorkUnit, session: &str, dir: &Path) -> Result<Option<(Verdict, String)>> {
        let termination = journal::find_termination(self.store, &super::session_writer(session)?)?;
        let from_journal = termination.and_then(|entry| {
            let word = entry.event.data.get("verdict")?.as_str()?.to_owned();
            let message = entry.event.data.get("message").and_then(|m| m.as_str()).unwrap_or("").to_owned();
            Some((parse_verdict(&word)?, message))
        });
        let result_path = dir.join("result.json");
        let from_file = match std::fs::read(&result_path) {
            Err(_) => None,
            Ok(bytes) => match serde_json::from_slice::<ResultFile>(&bytes) {
                Ok(result) => match parse_verdict(&result.verdict) {
                    Some(verdict) => {
                        self.add_follow_ups(unit, session, result.follow_ups)?;
                        Some((verdict, result.summary.unwrap_or_default()))
                    }
                    None => {
                        self.invalid_result(unit, session, &format!("unknown verdict '{}'", result.verdict))?;
                        None
                    }
                },
                Err(err) => {
                    self.invalid_result(unit, session, &err.to_string())?;
                    None
                }
            },
        };
        Ok(match (from_journal, from_file) {
            (Some((verdict, message)), file) => {
                let message = if message.is_empty() { file.map(|(_, m)| m).unwrap_or_default() } else { message };
                Some((verdict, message))
            }
            (None, file) => file,
        })
    }

    fn invalid_result(&self, unit: &WorkUnit, session: &str, problem: &str) -> Result<()> {
        let message = format!(
            "session {session} left a result file that is torn or invalid ({problem}); it counts as no verdict"
        );
        self.walker.journal(
            self.store,
            "result_invalid",
            Some(&unit.task.id),
            json!({ "session": session, "problem": problem }),
        )?;
        self.walker.observer.event(&Event::Warning { message });
        Ok(())
    }

    fn add_follow_ups(&self, unit: &WorkUnit, session: &str, follow_ups: Vec<FollowUp>) -> Result<()> {
        for follow in follow_ups {
            if follow.title.trim().is_empty() {
                continue;
            }
            let fields = TaskFields {
                title: Some(follow.title.clone()),
                body: follow.body,
                priority: follow.priority.or(Some(unit.task.priority)),
                labels: follow.labels,
                ..Default::default()
            };
            match backlog::add(self.store, &self.walker.ctx, fields) {
                Ok(added) => {
                    self.walker.journal(
                        self.store,
                        "follow_up",
                        Some(&unit.task.id),
                        json!({ "session": session, "added": added.task.id, "title": follow.title }),
                    )?;
                    self.walker.observer.event(&Event::FollowUp {
                        task: unit.task.id.clone(),
                        added: added.task.id.clone(),
                        title: follow.title,
                    });
                }
                Err(err) => self
                    .walker
                    .observer
                    .event(&Event::Warning { message: format!("could not add follow-up '{}': {err:#}", follow.title) }),
            }
        }
        Ok(())
    }
}

/// The try of `task` that a previous walk opened and did not close, if any.
pub fn unfinished_try(store: &Store, task: &TaskId) -> Result<Option<u32>> {
    let filter = journal::Filter { task: Some(task.to_string()), session: None };
    let mut open = None;
    for entry in journal::timeline(store, &filter)?.entries {
        let number = entry.event.data.get("try").and_then(|v| v.as_u64()).map(|n| n as u32);
        match entry.event.kind.as_str() {
            "try_opened" => open = number,
            "unit_closed" | "task_done" | "task_reopened" => open = None,
            _ => {}
        }
    }
    Ok(open)
}

/// What `--merge` did with a done task's branch.
pub enum BaseMerge {
    Merged(ObjectId),
    Conflict(Vec<String>),
    Skipped(String),
}

/// Merge a done task branch into the base branch by compare-and-swap. Never a half-merged
/// base: a conflict changes nothing. The base branch is not moved while it is checked out
/// (the worktree would revert it); the walk says so and the task branch stays ready.
pub fn merge_into_base(store: &Store, walker: &Walker<'_>, task: &Task, commit: ObjectId) -> Result<BaseMerge> {
    let base_branch = match store.repo.head_name().ok().flatten() {
        Some(name) => name.as_bstr().to_string(),
        None => return Ok(BaseMerge::Skipped("the main worktree is not on a branch".into())),
    };
    let base_branch = store.config("loop.mergeInto").map(|b| format!("refs/heads/{b}")).unwrap_or(base_branch);
    let Some(base) = git::ref_target(&store.repo, &base_branch)? else {
        return Ok(BaseMerge::Skipped(format!("branch '{}' does not exist", refs::short_branch(&base_branch))));
    };
    if tries::is_ancestor(&store.repo, commit, base)? {
        return Ok(BaseMerge::Merged(base));
    }
    let target = if tries::is_ancestor(&store.repo, base, commit)? {
        commit
    } else {
        let message = format!(
            "loop: merge {} ({})\n",
            refs::short_branch(&refs::task_branch(&task.task_id())),
            first_line(&task.title)
        );
        match tries::merge(store, base, commit, &message)? {
            tries::Merged::Commit(c) => c,
            tries::Merged::Conflict(paths) => return Ok(BaseMerge::Conflict(paths)),
        }
    };
    let result = match tries::move_branch(store, &base_branch, Some(base), target, "loop: merge task branch")? {
        tries::Move::Moved => BaseMerge::Merged(target),
        tries::Move::CheckedOut(path) => BaseMerge::Skipped(format!(
            "{} is checked out in {}; merge it there with 'git merge {}'",
            refs::short_branch(&base_branch),
            path.display(),
            refs::short_branch(&refs::task_branch(&task.task_id()))
        )),
        tries::Move::Lost(_) => {
            BaseMerge::Skipped(format!("{} moved meanwhile; merge by hand", refs::short_branch(&base_branch)))
        }
    };
    if let BaseMerge::Merged(c) = &result {
        walker.observer.event(&Event::Merged {
            task: task.id.clone(),
            base: refs::short_branch(&base_branch).to_owned(),
            commit: c.to_string(),
        });
    }
    Ok(result)
}

/// The last `n` lines of a file (empty if unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// "42 s", "3 min 20 s", "1 h 5 min".
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}
