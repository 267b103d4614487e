//! One agent session on one try — a "seat" — from its prompt to what it came to.
//!
//! A session: a fresh session key; its files in `.git/loop/sessions/<key>/` (prompt, log,
//! result, record); the agent started under the session guard in the try's worktree. While
//! it runs, its claim's lease is refreshed, and the task is watched: a person who stops it,
//! takes it over or reassigns it is obeyed (a stop at once; a take-over or reassignment after
//! a wrap-up request: the file `$GIT_LOOP_WRAP_UP` appears, CLIs that take an interrupt get
//! one, and the session is stopped if it has not ended within the wrap-up time). Whatever way
//! it ends, its work is committed to the try branch (commit-on-stop). Then the evidence: the
//! `termination` event it journaled with `git loop finish`, else a complete and valid
//! `$GIT_LOOP_RESULT` file. A try passes when the verdict is done, the checks pass in its
//! worktree and the review (if any) approves; failing checks, a rejecting review or no
//! verdict continue it with a note for the next session, unless the agent's output says it
//! could not be reached at all.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use super::review::Reviewed;
use super::unit::{
    first_line, human_duration, BudgetSpent, Ending, GitDispatcher, Launch, Launched, Ran, Seat, Step, Unrunnable,
    Withdrawal,
};
use super::{handoff, prompt, Event};
use crate::agent::guard;
use crate::agent::presets::{Agent, PromptVia};
use crate::agent::process::{Exit, Running};
use crate::agent::reach;
use crate::agent::record::{self, tail};
use crate::agent::role::{self, Contract, Report, Role, WorkVerdict};
use crate::backlog::{self, TaskFields};
use crate::engine::Verdict;
use crate::ids::{random_base32, ClaimKey};
use crate::refs;
use crate::store::claim::{self, Acquire, AcquireOptions};
use crate::store::events::{self, Recorded};
use crate::store::journal;
use crate::store::task::{self, State, Task};
use crate::store::usage::{Prices, Usage};
use crate::tries::checks;
use crate::tries::{self, commit::Committed, Try};

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
    /// `program` is bubblewrap, confining the command after its `--`.
    confined: bool,
    /// The directory of its network policy, whose proxy its guard serves (`sandbox::net`).
    net: Option<&'c Path>,
}

/// A wrap-up in progress: asked at `since`, stopped for good after the wrap-up time.
struct WrapUp {
    why: Withdrawal,
    since: Instant,
}

/// A session that exits 126 or 127 (the shell's "cannot execute", "not found") sooner than
/// this never ran the agent: its command is wrong, and another session would fare no better.
const CANNOT_RUN_WITHIN: Duration = Duration::from_secs(2);
/// How many times a claim that could not be read is read again before it is called
/// unconfirmed (a remote that does not answer is waited for apart from these).
const CONFIRM_ATTEMPTS: u32 = 4;

/// How many of its last lines a failed session or failed checks show the person watching.
pub const FAILURE_TAIL: usize = 10;

/// The last `n` lines of a log that are not blank, as written (the caller escapes them).
pub fn last_lines(log: &Path, n: usize) -> Vec<String> {
    let text = tail(log, n * 4);
    let lines: Vec<String> = text.lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// The last line a log holds that is not blank: what the shell said when a command could not run.
fn last_said(log: &Path) -> String {
    tail(log, 5).lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned()
}

/// Presets whose CLIs take SIGINT as "stop what you are doing" and save their session first.
fn takes_interrupt(agent: &Agent) -> bool {
    matches!(agent.name.as_str(), "claude" | "codex" | "gemini" | "opencode" | "aider")
}

impl GitDispatcher<'_> {
    /// Run one worker session for `seat` to its end and say what it came to.
    pub fn session(&self, seat: &Seat<'_>) -> Result<Ran> {
        let (task, try_, agent) = (seat.task, seat.try_, seat.agent);
        if !try_.worktree.join(".git").exists() {
            // Deleted under the loop: the branch holds the work; check it out again.
            let checkout = tries::add_worktree(self.store, try_)?;
            self.walker.set_up.lock().unwrap_or_else(|p| p.into_inner()).remove(&try_.worktree);
            let fresh = checkout.as_ref().is_some_and(|c| matches!(c.how, tries::pool::How::Added));
            if let Some(warmed) = self.walker.warm(self.store, try_, try_.number, fresh) {
                self.walker.observer.event(&Event::TryOpened {
                    task: task.id.clone(),
                    number: try_.number,
                    branch: refs::short_branch(&try_.branch).to_owned(),
                    worktree: try_.worktree.clone(),
                    resumed: true,
                    warmed: Some(warmed),
                    checkout,
                });
            }
        }
        let session = format!("s-{}", random_base32(8));
        if let Some(step) = self.set_up(task, try_, agent, &session)? {
            return Ok(Ran { session, step, checks: None, summary: None });
        }
        let launch = Launch {
            session: &session,
            task,
            try_,
            worktree: &try_.worktree,
            agent,
            attempt: seat.attempt,
            halt: seat.halt,
            role: None,
            handoff: seat.handoff,
            commits: true,
            keep: None,
        };
        let launched = self.launch(&launch, &|dir| {
            prompt::build(
                self.store,
                &prompt::Input {
                    task,
                    try_,
                    attempt: seat.attempt,
                    carry: seat.carry,
                    checks: self.walker.opts.checks.as_deref(),
                    result_path: &crate::agent::record::result_file(dir),
                },
            )
        })?;
        let Launched { dir, log, env, why, ending, refused } = launched;
        let ran = |step: Step| Ran { session: session.clone(), step, checks: None, summary: None };
        match ending {
            Ending::Cancelled => return Ok(ran(Step::Interrupted)),
            Ending::Lost(reason) => return Ok(ran(Step::Lost { reason })),
            Ending::Withdrawn(w) => return Ok(ran(Step::Withdrawn(w))),
            Ending::Halted => return Ok(ran(Step::Halted)),
            Ending::CannotRun(_) => {
                return Ok(ran(Step::CannotRun { what: Unrunnable::Agent, said: last_said(&log), log }));
            }
            Ending::Exited(_) | Ending::TimedOut => {}
        }
        if let Some(why) = refused {
            // Whatever it said, the work it says it did was not taken.
            return Ok(ran(Step::Verdict {
                verdict: Verdict::Failed,
                message: format!("its commits were not taken: {why}"),
            }));
        }
        let Evidence { verdict: evidence, violation } = self.evidence(task, &session, &dir)?;
        // A holder paused past its lease (SIGSTOP, a laptop lid) may have been superseded
        // while it slept: confirm the claim is still ours before any verdict closes the task.
        if let Some(reason) = self.claim_lost(task)? {
            return Ok(ran(Step::Lost { reason }));
        }
        let Some((verdict, message)) = evidence else {
            if let Some(problem) = violation {
                // Sent back once with what was wrong; a second in a row goes to a person.
                let again = self.previous_broke(task, try_, &session)?;
                let worker = Role { name: "worker".into(), contract: Contract::Worker, agent: None, prompt: None };
                self.violation(task, &session, &worker, &problem, !again)?;
                if again {
                    return Ok(ran(Step::Verdict {
                        verdict: Verdict::Blocked,
                        message: format!("the worker broke its contract twice in a row ({problem})"),
                    }));
                }
                return Ok(ran(Step::Continue {
                    note: format!(
                        "The previous session ({session}) reported what the {} contract does not allow, so it counts as no verdict: {problem}\nReport exactly as described under \"When you are finished\".",
                        Contract::Worker.id()
                    ),
                }));
            }
            let log_tail = tail(&log, 60);
            let extra = self.walker.agent_phrases(self.store, agent);
            if let Some(reason) = reach::unreachable(&agent.name, &log_tail, &extra) {
                return Ok(ran(Step::Unreachable { reason }));
            }
            let lines: Vec<&str> = log_tail.lines().collect();
            let short_tail = lines[lines.len().saturating_sub(20)..].join("\n");
            return Ok(ran(Step::Continue {
                note: format!(
                    "The previous session ({session}) ended without reporting a verdict: {why}.\nThe last lines of its output were:\n{short_tail}"
                ),
            }));
        };
        let summary = (!message.trim().is_empty()).then(|| message.clone());
        if verdict != Verdict::Done {
            return Ok(Ran { summary, ..ran(Step::Verdict { verdict, message }) });
        }
        let mut checks_json = None;
        if let Some(checks) = self.checks(task, try_, &dir, &env)? {
            checks_json = Some(checks.json);
            if super::unit::never_ran(checks.exit) {
                // A checks command that is not there fails every try the same way: the walk stops.
                let what = Unrunnable::Command("checks");
                return Ok(ran(Step::CannotRun { what, said: last_said(&checks.log), log: checks.log }));
            }
            if !checks.passed {
                let command = self.walker.opts.checks.clone().unwrap_or_default();
                // Anything the checks wrote is the next session's to keep or clean up.
                return Ok(Ran {
                    summary,
                    checks: checks_json,
                    ..ran(Step::Continue {
                        note: format!(
                            "The previous session ({session}) {}: `{command}`.\nThe last lines of their output were:\n{}",
                            crate::engine::CHECKS_FAILED,
                            checks.tail
                        ),
                    })
                });
            }
        }
        if let Some((approved, review_tail, exit, log)) = self.review(task, try_, &dir, &env)? {
            if super::unit::never_ran(exit) {
                let what = Unrunnable::Command("review");
                return Ok(ran(Step::CannotRun { what, said: last_said(&log), log }));
            }
            if !approved {
                return Ok(Ran {
                    summary,
                    checks: checks_json,
                    ..ran(Step::Continue {
                        note: format!(
                            "The previous session ({session}) reported done and the checks passed, but the review did not approve. It said:\n{review_tail}"
                        ),
                    })
                });
            }
        }
        match self.agent_review(seat)? {
            None | Some(Reviewed::Approved) => {}
            Some(Reviewed::Changes { note }) => {
                return Ok(Ran { summary, checks: checks_json, ..ran(Step::Continue { note }) });
            }
            Some(Reviewed::ToPerson { message }) => {
                return Ok(Ran {
                    summary,
                    checks: checks_json,
                    ..ran(Step::Verdict { verdict: Verdict::Blocked, message })
                });
            }
            Some(Reviewed::Stopped(step)) => return Ok(Ran { summary, checks: checks_json, ..ran(step) }),
        }
        if let Some(reason) = self.claim_lost(task)? {
            return Ok(ran(Step::Lost { reason }));
        }
        Ok(Ran { summary, checks: checks_json, ..ran(Step::Passed { message }) })
    }

    /// Whether a session of `role` may start: not once the walk's budget in money or tokens is
    /// spent (every session counts against it, a role's as a worker's; asking stops the walk).
    pub(super) fn role_may_start(&self, role: &Role) -> std::result::Result<(), BudgetSpent> {
        match self.walker.run.and_then(|run| run.budget_spent()) {
            Some(why) => Err(BudgetSpent { role: role.name.clone(), why }),
            None => Ok(()),
        }
    }

    /// Start one session of a role (the worker's when `l.role` is none) and run it to its end:
    /// its files, the agent under the guard in `l.worktree`, the claim refreshed and the task
    /// watched while it runs, and, for the worker only, its work committed to the try branch.
    pub(super) fn launch(&self, l: &Launch<'_>, prompt_text: &dyn Fn(&Path) -> Result<String>) -> Result<Launched> {
        let (task, try_, agent) = (l.task, l.try_, l.agent);
        let session = l.session.to_owned();
        let loop_dir = self.store.loop_dir()?;
        let dir = record::dir(&loop_dir, &session);
        std::fs::create_dir_all(&dir).with_context(|| format!("could not create '{}'", dir.display()))?;
        let prompt_path = dir.join("prompt.md");
        let text = prompt_text(&dir)?;
        std::fs::write(&prompt_path, text).with_context(|| format!("could not write '{}'", prompt_path.display()))?;
        agent.write_session_files(&dir)?;
        if let Some(transcript) = l.handoff {
            handoff::place(try_, transcript);
        }
        let mut env = self.session_env(task, try_, &session, &dir, agent)?;
        let contract = l.role.map_or(Contract::Worker, |r| r.contract);
        env.push(("GIT_LOOP_ROLE".into(), l.role.map_or("worker", |r| r.name.as_str()).to_owned()));
        env.push(("GIT_LOOP_CONTRACT".into(), contract.id()));
        if l.worktree != try_.worktree {
            for (k, v) in env.iter_mut() {
                if k == "GIT_LOOP_WORKTREE" {
                    *v = l.worktree.display().to_string();
                }
            }
        }
        let marker = format!("{session}-{}", random_base32(12));
        let stdin = (agent.prompt == PromptVia::Stdin).then(|| prompt_path.clone());
        // The CLI's own session id, where the loop may choose it (so it can be resumed).
        let agent_session = crate::ids::uuid_v4();
        if agent.env.iter().any(|(_, v)| v.contains("{session_dir}")) {
            std::fs::create_dir_all(dir.join("tmp"))
                .with_context(|| format!("could not create '{}'", dir.join("tmp").display()))?;
        }
        let left = self.walker.run.and_then(|r| r.usd_left());
        let mut argv = agent.argv_within(&prompt_path, &agent_session, self.walker.opts.max_turns, left);
        let log = dir.join("log");
        let box_dir = crate::sandbox::box_of(&dir);
        std::fs::create_dir_all(&box_dir).with_context(|| format!("could not create '{}'", box_dir.display()))?;
        let mut program = agent.program.clone();
        let confined = match self.walker.sandbox() {
            Some(sandbox) => {
                let context = self.context_refs(task)?;
                let ctx = &self.walker.ctx;
                let codex_home = ctx.codex_home.clone().or_else(|| ctx.home.as_ref().map(|h| h.join(".codex")));
                let network = crate::agent::presets::network_entries(Some(&agent.name), codex_home.as_deref());
                let prepared = sandbox.prepare(
                    self.store,
                    &crate::sandbox::Request {
                        worktree: l.worktree,
                        cwd: l.worktree,
                        room: &dir,
                        readable: &[&dir],
                        agent: Some(&agent.name),
                        program: &agent.program,
                        command_line: &agent.args.join(" "),
                        context: &context,
                        author: &agent.name,
                        network: &network,
                    },
                )?;
                let mut args = prepared.args.clone();
                args.push(program);
                args.append(&mut argv);
                (program, argv) = (prepared.program.clone(), args);
                env.extend(agent.confined_env.iter().cloned());
                env.extend(prepared.env.iter().cloned());
                Some(prepared)
            }
            None => None,
        };
        // Where its try branch was: what its hooks commit while it runs counts as its work.
        let branch_before = self.store.ref_target(&try_.branch)?;
        let (mut running, _) = self.run_guarded(Guarded {
            program: &program,
            args: &argv,
            cwd: l.worktree,
            env: &env,
            stdin,
            log: &log,
            marker: &marker,
            timeout: None,
            confined: confined.is_some(),
            net: confined.as_ref().and_then(|p| p.net.as_deref()),
        })?;
        let started_at = self.walker.ctx.now();
        let mut rec = record::Record {
            version: record::RECORD_VERSION,
            session: session.clone(),
            walker: self.walker.key.clone(),
            task: task.id.clone(),
            try_number: try_.number,
            agent: agent.name.clone(),
            worktree: l.worktree.to_path_buf(),
            pid: running.pid,
            pid_start: crate::agent::process::start_time(running.pid),
            boot_id: self.walker.ctx.boot_id.clone(),
            marker: marker.clone(),
            started_at,
            ended_at: None,
            ended: None,
            agent_session: agent.presets_session_id().then(|| agent_session.clone()),
            role: l.role.map(|r| r.name.clone()),
            contract: l.role.map(|r| r.contract.id()),
        };
        record::write(&loop_dir, &rec)?;
        self.walker.record(
            self.store,
            Some(&task.id),
            Recorded::SessionStarted(events::SessionStarted {
                session: session.clone(),
                agent: agent.name.clone(),
                number: try_.number,
                attempt: l.attempt,
                worktree: l.worktree.display().to_string(),
                role: l.role.map(|r| r.name.clone()),
            }),
        )?;
        self.walker.observer.event(&Event::SessionStarted {
            task: task.id.clone(),
            session: session.clone(),
            agent: agent.name.clone(),
            number: try_.number,
            attempt: l.attempt,
            role: l.role.map(|r| r.name.clone()),
        });

        let mut inbox = confined.as_ref().map(super::reports::Inbox::new);
        let ending = self.supervise(l, &mut running, &session, &dir, inbox.as_mut())?;
        let elapsed = running.started.elapsed();
        if let Some(inbox) = inbox.as_mut() {
            // What it said last, before its work is committed and its verdict read.
            self.take_reports(l, &session, inbox, true)?;
            self.sum_up_garbage(l, &session, inbox)?;
        }
        if let Some(net) = confined.as_ref().and_then(|p| p.net.as_deref()) {
            self.journal_refused_hosts(l, &session, net)?;
        }
        let why = match &ending {
            Ending::Exited(exit) => format!("the agent exited ({exit})"),
            Ending::CannotRun(exit) => format!("the agent's command could not run ({exit})"),
            Ending::TimedOut => format!("it timed out after {}", human_duration(elapsed)),
            Ending::Cancelled => "the walk was interrupted".to_owned(),
            Ending::Lost(reason) => reason.clone(),
            Ending::Withdrawn(w) => w.describe(),
            Ending::Halted => "another try won the race".to_owned(),
        };
        // A reviewer's checkout is thrown away, never committed: nothing it did is the work.
        let mut refused = None;
        let committed = if l.commits {
            let author = gix::actor::Signature {
                name: agent.name.as_str().into(),
                email: format!("{}@agent.invalid", agent.name).as_str().into(),
                time: gix::date::Time { seconds: self.walker.ctx.now().timestamp(), offset: 0 },
            };
            let message = format!(
                "loop: work of session {session} on {}\n\nTask: {} ({})\nTry: {}\nSession: {session}\nAgent: {}\nStopped: {why}\n",
                task.id,
                task.id,
                first_line(&task.title),
                try_.number,
                agent.name
            );
            if let Some(prepared) = &confined {
                refused = self.adopt_commits(l, &session, prepared)?;
            }
            match tries::commit::commit_on_stop(self.store, try_, &author, &message)? {
                Committed::Commit { id, .. } => Some((id.to_string(), false)),
                Committed::Adopted(id) => Some((id.to_string(), true)),
                // Nothing was left uncommitted; but what it or its hooks committed turn by
                // turn is its work all the same.
                Committed::Clean | Committed::NoWorktree => {
                    let now = self.store.ref_target(&try_.branch)?;
                    now.filter(|now| Some(*now) != branch_before).map(|id| (id.to_string(), true))
                }
            }
        } else {
            None
        };
        let (commit, own) = match committed {
            Some((id, own)) => (Some(id), own),
            None => (None, false),
        };
        rec.ended_at = Some(self.walker.ctx.now());
        rec.ended = Some(why.clone());
        // A hook may have reported the CLI's own session id meanwhile; else its output may say.
        rec.agent_session =
            record::read(&loop_dir, &session).and_then(|r| r.agent_session).or(rec.agent_session).or_else(|| {
                reach::announces_session_id(&agent.name)
                    .then(|| reach::session_id_in_output(&agent.name, &record::head(&log, 200)))
                    .flatten()
            });
        let _ = std::fs::remove_dir_all(dir.join("tmp"));
        record::write(&loop_dir, &rec)?;
        if let Some(prepared) = &confined {
            self.tidy_box(l, prepared, rec.agent_session.as_deref());
        }
        self.walker.settings_after(self.store, &session, confined.is_some());
        let usage = self.usage(agent, &session, &dir, &log)?;
        if let Some(run) = self.walker.run {
            run.spend(usage.as_ref().map(Usage::tokens), usage.as_ref().and_then(|u| u.dollars()).map(|(d, _)| d));
        }
        self.walker.record(
            self.store,
            Some(&task.id),
            Recorded::SessionEnded(events::SessionEnded {
                session: session.clone(),
                reason: why.clone(),
                elapsed_ms: elapsed.as_millis() as u64,
                commit: commit.clone(),
                agent: agent.name.clone(),
                number: try_.number,
                agent_session: rec.agent_session.clone(),
                usage: usage.clone(),
                mission: self.walker.opts.mission.clone(),
            }),
        )?;
        self.walker.observer.event(&Event::SessionEnded {
            task: task.id.clone(),
            session: session.clone(),
            elapsed,
            why: why.clone(),
            commit: commit.clone(),
            own,
            commits: l.commits,
            usage,
            log: log.clone(),
            tail: match &ending {
                Ending::Exited(exit) if *exit == Exit::Code(0).to_string() => Vec::new(),
                Ending::Exited(_) | Ending::CannotRun(_) | Ending::TimedOut => last_lines(&log, FAILURE_TAIL),
                _ => Vec::new(),
            },
        });
        Ok(Launched { dir, log, env, why, ending, refused })
    }

    /// What a session used: its CLI's own report in its log, else what the agent reported
    /// (`finish --usage`, else `usage` in its result file); priced from the table when no
    /// dollars were reported. None: nobody said (unknown, never zero).
    fn usage(&self, agent: &Agent, session: &str, dir: &Path, log: &Path) -> Result<Option<Usage>> {
        let from_cli = std::fs::read(log)
            .ok()
            .and_then(|b| crate::agent::usage::from_log(&agent.name, &String::from_utf8_lossy(&b)));
        let reported = || -> Result<Option<Usage>> {
            let termination = journal::find_termination(self.store, &crate::ids::session_writer(session)?)?;
            if let Some(Recorded::Termination(t)) = termination.map(|e| Recorded::of(&e.event)) {
                if t.usage.is_some() {
                    return Ok(t.usage);
                }
            }
            let file = crate::agent::record::read_result(dir);
            let value = file.and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
            Ok(value.and_then(|v| v.get("usage").and_then(|u| Usage::reported(u).ok())))
        };
        let Some(mut usage) = (match from_cli {
            Some(u) => Some(u),
            None => reported()?,
        }) else {
            return Ok(None);
        };
        usage.usd_estimated = None;
        if usage.model.is_none() {
            usage.model = agent.model.clone();
        }
        let prices = match Prices::read(self.store) {
            Ok(prices) => prices,
            Err(refusal) => {
                self.walker.observer.event(&Event::Warning {
                    message: format!("session {session}'s usage is not priced: {}", refusal.message),
                });
                Prices::default()
            }
        };
        Ok(Some(usage.priced(&prices)))
    }

    fn claim_options(&self, session: &str) -> AcquireOptions {
        AcquireOptions {
            holder: self.walker.key.clone(),
            ttl: self.walker.opts.lease,
            reason: Some(format!("worked by {} (session {session})", self.walker.key)),
            session: Some(session.to_owned()),
        }
    }

    /// Run the session's process to its end: refresh the claim, watch the task for a
    /// person's word, and stop it when the walk, its timeout or the race says so.
    fn supervise(
        &self,
        seat: &Launch<'_>,
        running: &mut Running,
        session: &str,
        dir: &Path,
        mut inbox: Option<&mut super::reports::Inbox>,
    ) -> Result<Ending> {
        let task = seat.task;
        let key = ClaimKey::node(&task.task_id());
        // Well within the lease: other clones call it stale once they have seen one record
        // for a whole lease, by their own clocks (store::lease).
        let lease_ms = self.walker.opts.lease.num_milliseconds().max(0) as u64;
        let refresh_every = Duration::from_millis((lease_ms / 3).clamp(100, 120_000));
        let timeout = self.walker.opts.session_timeout;
        let grace = self.walker.opts.grace;
        let mut last_refresh = Instant::now();
        let mut watch = TaskWatch::new(task);
        let mut wrap: Option<WrapUp> = None;
        loop {
            if let Some(exit) = running.poll()? {
                // The guard sweeps the session's processes before it exits; if it did not
                // exit by itself (killed by a signal), sweep here.
                if matches!(exit, Exit::Signal(_)) {
                    running.sweep();
                }
                return Ok(match wrap {
                    Some(w) => Ending::Withdrawn(w.why),
                    None if matches!(exit, Exit::Code(126 | 127)) && running.started.elapsed() < CANNOT_RUN_WITHIN => {
                        Ending::CannotRun(exit.to_string())
                    }
                    None => Ending::Exited(exit.to_string()),
                });
            }
            if self.walker.cancelled(self.store) {
                running.stop(grace)?;
                return Ok(Ending::Cancelled);
            }
            if seat.keep.is_some_and(|keep| keep()) {
                running.stop(grace)?;
                return Ok(Ending::Cancelled);
            }
            if seat.halt.is_some_and(|h| h.load(Ordering::SeqCst)) {
                running.stop(grace)?;
                return Ok(Ending::Halted);
            }
            if timeout.is_some_and(|t| running.started.elapsed() >= t) {
                running.stop(grace)?;
                return Ok(Ending::TimedOut);
            }
            if let Some(w) = &wrap {
                if w.since.elapsed() >= self.walker.opts.wrap_up {
                    running.stop(grace)?;
                    return Ok(Ending::Withdrawn(w.why.clone()));
                }
            } else if let Some(word) = watch.poll(self.store)? {
                let wrap_first =
                    matches!(word, Withdrawal::Reassigned { .. } | Withdrawal::Closed { state: State::TakenOver, .. });
                if !wrap_first {
                    running.stop(grace)?;
                    return Ok(Ending::Withdrawn(word));
                }
                self.ask_to_wrap_up(seat, running, session, dir, &word)?;
                wrap = Some(WrapUp { why: word, since: Instant::now() });
            }
            if let Some(inbox) = inbox.as_deref_mut() {
                self.take_reports(seat, session, inbox, false)?;
            }
            if seat.keep.is_none() && last_refresh.elapsed() >= refresh_every {
                last_refresh = Instant::now();
                match claim::acquire(self.store, &self.walker.ctx, &key, &self.claim_options(session)) {
                    Ok(Acquire::HeldByOther(held)) => {
                        running.stop(grace)?;
                        return Ok(Ending::Lost(format!("its claim was taken by {}", held.record.holder)));
                    }
                    // Not ours to refresh any more: someone released it, or took it over and let
                    // it go (a clone that did the task meanwhile). What was taken back just now
                    // is let go again, and the session stops as one whose claim is lost.
                    Ok(Acquire::Acquired(_) | Acquire::TookOver { .. }) => {
                        running.stop(grace)?;
                        let _ = claim::release(self.store, &self.walker.ctx, &key, &self.walker.key, false);
                        return Ok(Ending::Lost("its claim was released by someone else while it ran".to_owned()));
                    }
                    Ok(_) => {}
                    Err(err) => self.walker.observer.event(&Event::Warning {
                        message: format!("could not refresh the claim on {}: {err:#}", task.id),
                    }),
                }
            }
            // Wakes the moment the session exits; else looks around every 50 ms.
            running.wait_for(Duration::from_millis(50))?;
        }
    }

    /// Tell the session to finish its step: the wrap-up file it can see, an interrupt for
    /// CLIs that take one, and a journal entry.
    fn ask_to_wrap_up(
        &self,
        seat: &Launch<'_>,
        running: &mut Running,
        session: &str,
        dir: &Path,
        why: &Withdrawal,
    ) -> Result<()> {
        let text = format!("{}: finish the step you are on, report your verdict and stop.\n", why.describe());
        std::fs::write(dir.join("wrap-up"), text)
            .with_context(|| format!("could not write '{}'", dir.join("wrap-up").display()))?;
        let interrupt = takes_interrupt(seat.agent);
        if interrupt {
            running.ask_guard_to_interrupt();
        }
        self.walker.record(
            self.store,
            Some(&seat.task.id),
            Recorded::WrapUpRequested(events::WrapUpRequested {
                session: session.to_owned(),
                reason: why.describe().to_owned(),
                interrupted: interrupt,
                within_s: self.walker.opts.wrap_up.as_secs(),
            }),
        )
    }

    /// Run a command under the session guard; with `timeout`, to its end or until then.
    fn run_guarded(&self, cmd: Guarded<'_>) -> Result<(Running, Option<Exit>)> {
        let Guarded { program, args, cwd, env, stdin, log, marker, timeout, confined, net } = cmd;
        let mut running = guard::spawn(&guard::Guarded {
            exe: &self.walker.exe,
            parent: self.walker.ctx.pid,
            grace: self.walker.opts.grace,
            program,
            args,
            cwd,
            env,
            stdin,
            log,
            marker,
            confined,
            net,
        })?;
        let exit = match timeout {
            Some(timeout) => {
                guard::finish(&mut running, timeout, self.walker.opts.grace, &|| self.walker.cancelled(self.store))?
            }
            None => None,
        };
        Ok((running, exit))
    }

    /// The environment every session gets (the agent contract, docs/agents.md).
    fn session_env(
        &self,
        task: &Task,
        try_: &Try,
        session: &str,
        dir: &Path,
        agent: &Agent,
    ) -> Result<Vec<(String, String)>> {
        let exe_dir = self.walker.exe.parent().map(|p| p.display().to_string()).unwrap_or_default();
        let path = match &self.walker.ctx.path_var {
            Some(p) => format!("{exe_dir}:{}", p.to_string_lossy()),
            None => exe_dir,
        };
        let mut env = vec![
            ("GIT_LOOP_SESSION".into(), session.to_owned()),
            ("GIT_LOOP_TASK".into(), task.id.clone()),
            ("GIT_LOOP_TRY".into(), try_.number.to_string()),
            ("GIT_LOOP_WORKTREE".into(), try_.worktree.display().to_string()),
            ("GIT_LOOP_PROMPT".into(), dir.join("prompt.md").display().to_string()),
            ("GIT_LOOP_RESULT".into(), crate::agent::record::result_file(dir).display().to_string()),
            ("GIT_LOOP_WRAP_UP".into(), dir.join("wrap-up").display().to_string()),
            ("GIT_LOOP_TASK_BRANCH".into(), refs::short_branch(&refs::task_branch(&task.task_id())).to_owned()),
            ("GIT_LOOP_REPO".into(), self.store.workdir().display().to_string()),
            // The main checkout, where `loop.setup` copies from (`cp "$GIT_LOOP_CHECKOUT/.env" .`).
            ("GIT_LOOP_CHECKOUT".into(), self.store.workdir().display().to_string()),
            ("GIT_LOOP_WALKER".into(), self.walker.key.clone()),
            ("PATH".into(), path),
        ];
        // What the walk may still spend, and the turns a session may take.
        if let Some(left) = self.walker.run.and_then(|r| r.usd_left()) {
            env.push(("GIT_LOOP_BUDGET_USD".into(), format!("{left:.6}")));
        }
        if let Some(turns) = self.walker.opts.max_turns {
            env.push(("GIT_LOOP_MAX_TURNS".into(), turns.to_string()));
        }
        // What the task's sessions before this one spent (every walk's, every role's): a
        // continuation or a fallback agent knows what went before it.
        let before = crate::store::ledger::total_of(&self.walker.task_history(self.store, &task.id)?);
        if before.sessions > 0 {
            env.push(("GIT_LOOP_SPENT_USD".into(), format!("{:.6}", before.dollars())));
            env.push(("GIT_LOOP_SPENT_TOKENS".into(), before.tokens().to_string()));
            env.push(("GIT_LOOP_SPENT_SESSIONS".into(), before.sessions.to_string()));
            env.push(("GIT_LOOP_SPENT_UNKNOWN".into(), before.unknown.to_string()));
        }
        env.extend(crate::tries::warm::own_build_dirs(&try_.worktree));
        env.extend(agent.session_env(dir));
        Ok(env)
    }

    /// Run `sh -c command` under the guard in `cwd`, to its end or the checks' timeout.
    pub(super) fn run_command(
        &self,
        name: &str,
        command: &str,
        cwd: &Path,
        env: &[(String, String)],
        stdin: Option<PathBuf>,
        log: &Path,
    ) -> Result<Option<Exit>> {
        let marker = format!("{name}-{}", random_base32(12));
        let args = vec!["-c".to_owned(), command.to_owned()];
        let (_running, exit) = self.run_guarded(Guarded {
            program: "sh",
            args: &args,
            cwd,
            env,
            stdin,
            log,
            marker: &marker,
            timeout: Some(self.walker.opts.checks_timeout),
            // The judge: the person's own command, in the main checkout, reading the tries'
            // numbers and diffstats; it runs none of their code.
            confined: false,
            net: None,
        })?;
        Ok(exit)
    }

    /// Run the setup command (`opts.setup`) in the try's worktree if this walk has not yet:
    /// before the first session in a new worktree. Its output goes to the session's log,
    /// ahead of the agent's. `Some(step)` when it failed: the try goes no further — the task to
    /// a person (blocked, with why), or, for a command that could not run at all, the walk stops.
    fn set_up(&self, task: &Task, try_: &Try, agent: &Agent, session: &str) -> Result<Option<Step>> {
        let Some(command) = self.walker.opts.setup.clone() else { return Ok(None) };
        if self.walker.set_up.lock().unwrap_or_else(|p| p.into_inner()).contains(&try_.worktree) {
            return Ok(None);
        }
        let dir = record::dir(&self.store.loop_dir()?, session);
        std::fs::create_dir_all(&dir).with_context(|| format!("could not create '{}'", dir.display()))?;
        let log = dir.join("log");
        std::fs::write(&log, format!("git loop: setting up the worktree: {command}\n"))
            .with_context(|| format!("could not write '{}'", log.display()))?;
        let env = self.session_env(task, try_, session, &dir, agent)?;
        let ran = self.run_logged("setup", &command, try_, &env, &log)?;
        self.walker.record(
            self.store,
            Some(&task.id),
            Recorded::SetUp(events::SetUp {
                number: try_.number,
                session: session.to_owned(),
                passed: ran.passed,
                elapsed_ms: ran.elapsed.as_millis() as u64,
                exit: ran.exit.map(|e| e.to_string()),
            }),
        )?;
        if super::unit::never_ran(ran.exit) {
            return Ok(Some(Step::CannotRun { what: Unrunnable::Command("setup"), said: last_said(&log), log }));
        }
        if !ran.passed {
            let how = ran.exit.map_or_else(|| "it was stopped".to_owned(), |e| e.to_string());
            let message = format!("the worktree's setup failed ({how}): `{command}`; its output: {}", log.display());
            return Ok(Some(Step::Verdict { verdict: Verdict::Blocked, message }));
        }
        // What it copied in (an `.env`, a directory it filled) is its own, not the work.
        let left = tries::commit::note_setup_leftovers(self.store, try_)?;
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().append(true).open(&log)?;
        if !left.is_empty() {
            writeln!(file, "git loop: never committed, as the setup's own: {}", left.join(", "))?;
        }
        writeln!(file, "git loop: the worktree is set up ({} s); the session starts", ran.elapsed.as_secs())?;
        self.walker.set_up.lock().unwrap_or_else(|p| p.into_inner()).insert(try_.worktree.clone());
        Ok(None)
    }

    /// Run a command of the walk's (checks, review) in the try's worktree.
    fn run_step(
        &self,
        name: &str,
        command: &str,
        try_: &Try,
        dir: &Path,
        env: &[(String, String)],
    ) -> Result<checks::Ran> {
        self.run_logged(name, command, try_, env, &dir.join(format!("{name}.log")))
    }

    /// Run a command of the walk's in the try's worktree, its output to `log`.
    fn run_logged(
        &self,
        name: &str,
        command: &str,
        try_: &Try,
        env: &[(String, String)],
        log: &Path,
    ) -> Result<checks::Ran> {
        let cancelled = || self.walker.cancelled(self.store);
        checks::run(self.store, &self.walker.runner(&cancelled), name, command, &try_.worktree, env, log)
    }

    /// Run the checks in the worktree; `None` when there are none.
    fn checks(&self, task: &Task, try_: &Try, dir: &Path, env: &[(String, String)]) -> Result<Option<Checked>> {
        let Some(command) = self.walker.opts.checks.clone() else {
            return Ok(None);
        };
        let run = self.run_step("checks", &command, try_, dir, env)?;
        let json = run.evidence(&command);
        self.walker.record(
            self.store,
            Some(&task.id),
            Recorded::Checks(events::Checks {
                number: try_.number,
                passed: run.passed,
                elapsed_ms: run.elapsed.as_millis() as u64,
                exit: run.exit.map(|e| e.to_string()),
            }),
        )?;
        self.walker.observer.event(&Event::Checks {
            task: task.id.clone(),
            passed: run.passed,
            elapsed: run.elapsed,
            log: run.log.clone(),
            tail: if run.passed { Vec::new() } else { last_lines(&run.log, FAILURE_TAIL) },
        });
        Ok(Some(Checked { passed: run.passed, tail: tail(&run.log, 40), json, exit: run.exit, log: run.log }))
    }

    /// Run the review command in the worktree (exit 0 approves); `None` when there is none.
    /// Whether it approved, the end of its output, how it exited and its log.
    #[allow(clippy::type_complexity)]
    fn review(
        &self,
        task: &Task,
        try_: &Try,
        dir: &Path,
        env: &[(String, String)],
    ) -> Result<Option<(bool, String, Option<Exit>, PathBuf)>> {
        let Some(command) = self.walker.opts.review.clone() else {
            return Ok(None);
        };
        let run = self.run_step("review", &command, try_, dir, env)?;
        self.walker.record(
            self.store,
            Some(&task.id),
            Recorded::Review(events::Review {
                number: try_.number,
                approved: run.passed,
                elapsed_ms: run.elapsed.as_millis() as u64,
                exit: run.exit.map(|e| e.to_string()),
            }),
        )?;
        self.walker.observer.event(&Event::Reviewed { task: task.id.clone(), approved: run.passed });
        Ok(Some((run.passed, tail(&run.log, 40), run.exit, run.log)))
    }

    /// Whether the task's claim is someone else's now (read only: a lease that merely ran out
    /// is still ours until someone takes it, and the next refresh renews it). With a shared
    /// remote it is the remote's record that counts: a walk paused past its lease learns here
    /// that another clone took the task over; one that cannot ask the remote goes no further.
    pub fn claim_lost(&self, task: &Task) -> Result<Option<String>> {
        let key = ClaimKey::node(&task.task_id());
        // A remote that does not answer is waited for inside `read_confirmed`; any other
        // failure (a ref lock another worker of this walk holds a moment, a transfer cut short)
        // is tried again a few times before the claim is called unconfirmed.
        let mut attempt = 0;
        let held = loop {
            match claim::read_confirmed(self.store, &key) {
                Ok(held) => break held,
                Err(_) if attempt < CONFIRM_ATTEMPTS && !gix::interrupt::is_triggered() => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(200 * u64::from(attempt)));
                }
                Err(err) => {
                    // Unconfirmed is not lost to someone else: what this walk may still hold is
                    // given back, so that the task is not left claimed by a walk that has gone
                    // on (its work stays on its try branch for whoever takes it next).
                    let _ = claim::release(self.store, &self.walker.ctx, &key, &self.walker.key, false);
                    return Ok(Some(format!("its claim could not be confirmed: {err:#}")));
                }
            }
        };
        Ok(match held {
            Some(held) if held.record.holder != self.walker.key => {
                Some(format!("its claim was taken by {}", held.record.holder))
            }
            Some(_) => None,
            None => Some("its claim was released by someone else".to_owned()),
        })
    }

    /// The session's verdict: its journaled termination, else its result file, each read as
    /// the worker's contract. Follow-up tasks in the result file are added either way. The
    /// second part is what broke the contract, when no verdict could be believed because of it.
    fn evidence(&self, task: &Task, session: &str, dir: &Path) -> Result<Evidence> {
        let termination = journal::find_termination(self.store, &crate::ids::session_writer(session)?)?;
        let from_journal = termination.and_then(|entry| match Recorded::of(&entry.event) {
            Recorded::Termination(t) => {
                Some(match role::from_finish(Contract::Worker, &t.verdict, t.message.as_deref().unwrap_or(""), None) {
                    Ok(Report::Work(w)) => Ok((verdict_of(w.verdict), w.summary.unwrap_or_default())),
                    Ok(_) => Err("it reported in another role's contract".to_owned()),
                    Err(v) => Err(v.0),
                })
            }
            _ => None,
        });
        let from_file = match crate::agent::record::read_result(dir) {
            None => None,
            Some(bytes) => Some(match role::parse(Contract::Worker, &bytes) {
                Ok(Report::Work(result)) => {
                    self.add_follow_ups(task, session, result.follow_ups)?;
                    Ok((verdict_of(result.verdict), result.summary.unwrap_or_default()))
                }
                Ok(_) => Err("it reported in another role's contract".to_owned()),
                Err(v) => Err(format!("its result file is torn or invalid: {}", v.0)),
            }),
        };
        let (verdict, violation) = match (from_journal, from_file) {
            (Some(Ok((verdict, message))), file) => {
                let file_message = match file {
                    Some(Ok((_, m))) => m,
                    Some(Err(problem)) => {
                        // The journaled verdict stands; the file is only reported.
                        self.walker.observer.event(&Event::Warning {
                            message: format!("session {session} left a result file that is torn or invalid ({problem}); its 'git loop finish' stands"),
                        });
                        String::new()
                    }
                    None => String::new(),
                };
                let message = if message.is_empty() { file_message } else { message };
                (Some((verdict, message)), None)
            }
            (Some(Err(problem)), _) => (None, Some(problem)),
            (None, Some(Ok(verdict))) => (Some(verdict), None),
            (None, Some(Err(problem))) => (None, Some(problem)),
            (None, None) => (None, None),
        };
        Ok(Evidence { verdict, violation })
    }

    /// Whether the worker session before `session` on `try_` broke its contract (so this one's
    /// violation is the second in a row).
    fn previous_broke(&self, task: &Task, try_: &Try, session: &str) -> Result<bool> {
        let history = self.walker.task_history(self.store, &task.id)?;
        let previous = history
            .iter()
            .filter_map(|e| match Recorded::of(&e.event) {
                Recorded::SessionStarted(s) if s.number == try_.number && s.role.is_none() && s.session != session => {
                    Some(s.session)
                }
                _ => None,
            })
            .next_back();
        let Some(previous) = previous else { return Ok(false) };
        Ok(history.iter().any(|e| {
            matches!(Recorded::of(&e.event), Recorded::ContractViolation(v) if v.session == previous && v.role == "worker")
        }))
    }

    fn add_follow_ups(&self, task: &Task, session: &str, follow_ups: Vec<role::FollowUp>) -> Result<()> {
        for follow in follow_ups {
            if follow.title.trim().is_empty() {
                continue;
            }
            let fields = TaskFields {
                title: Some(follow.title.clone()),
                body: follow.body,
                priority: follow.priority.or(Some(task.priority)),
                labels: follow.labels,
                ..Default::default()
            };
            match backlog::add(self.store, &self.walker.ctx, fields) {
                Ok(added) => {
                    self.walker.record(
                        self.store,
                        Some(&task.id),
                        Recorded::FollowUp(events::FollowUp {
                            session: session.to_owned(),
                            added: added.task.id.clone(),
                            title: follow.title.clone(),
                        }),
                    )?;
                    self.walker.observer.event(&Event::FollowUp {
                        task: task.id.clone(),
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

/// A worker session's verdict, if one can be believed, and what broke its contract when none
/// could because of it.
struct Evidence {
    verdict: Option<(Verdict, String)>,
    violation: Option<String>,
}

/// What the checks said.
struct Checked {
    passed: bool,
    tail: String,
    json: serde_json::Value,
    exit: Option<Exit>,
    log: PathBuf,
}

/// Watches a task's record while a session runs: a person's stop, take-over or reassignment
/// is a new operation on it. Reading the ref is a file read; the record is parsed only when
/// the ref moved.
pub struct TaskWatch {
    name: String,
    /// The tip last looked at (none yet: the first look reads the record).
    seen: Option<gix::ObjectId>,
    /// The assignment the session was started under.
    assigned: Option<String>,
    /// The state it was in (open for a worker; done for a landing's conflict resolver).
    state: State,
    last: Option<Instant>,
}

impl TaskWatch {
    /// Watch `task` as it was when the session's agent was chosen.
    pub fn new(task: &Task) -> TaskWatch {
        TaskWatch {
            name: refs::task(&task.task_id()),
            seen: None,
            assigned: task.assigned.as_ref().map(|a| a.nonce.clone()),
            state: task.state,
            last: None,
        }
    }

    /// A person's word since the last look (at most every 200 ms).
    pub fn poll(&mut self, store: &crate::store::Store) -> Result<Option<Withdrawal>> {
        if self.last.is_some_and(|at| at.elapsed() < Duration::from_millis(200)) {
            return Ok(None);
        }
        self.last = Some(Instant::now());
        let Some(tip) = store.ref_target(&self.name)? else {
            return Ok(Some(Withdrawal::Closed {
                state: State::Cancelled,
                reason: Some("the task was deleted".into()),
            }));
        };
        if self.seen == Some(tip) {
            return Ok(None);
        }
        self.seen = Some(tip);
        let now = task::read_at(store, &self.name, tip)?;
        if now.state != self.state {
            return Ok(Some(Withdrawal::Closed { state: now.state, reason: now.reason }));
        }
        let nonce = now.assigned.as_ref().map(|a| a.nonce.clone());
        if nonce != self.assigned {
            self.assigned = nonce;
            if let Some(assigned) = now.assigned {
                return Ok(Some(Withdrawal::Reassigned { agent: assigned.agent }));
            }
        }
        Ok(None)
    }
}

fn verdict_of(verdict: WorkVerdict) -> Verdict {
    match verdict {
        WorkVerdict::Done => Verdict::Done,
        WorkVerdict::Blocked => Verdict::Blocked,
        WorkVerdict::Failed => Verdict::Failed,
    }
}
