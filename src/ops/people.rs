//! People in the loop: stop a session, reassign a task, take it over by hand, hand it back,
//! and decide between tries. Each is a change to the task's record (a state, an assignment)
//! and a journal event with who made it, so it works from any clone: the walk obeys it when
//! it sees the record change — at once on this clone, after its next sync on another.
//!
//! These functions never print; when the session concerned runs on this machine they wait
//! for the walk to act on their word, and say what came of it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use gix::ObjectId;

use crate::agent::{presets, process, record};
use crate::backlog::{self, DoneOptions, Transition};
use crate::context::Context;
use crate::error::{refused, usage};
use crate::ids::{random_base32, AgentSessionId, ClaimKey, TaskId};
use crate::refs;
use crate::store::claim::{self, Acquire, AcquireOptions};
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, Filter};
use crate::store::task::{self, Assignment, Change, Fields, State, Task};
use crate::store::Store;
use crate::tries::{self, commit::Committed, Try};

/// How long a person's claim on a task they took over lasts.
const PERSON_LEASE: chrono::Duration = chrono::Duration::days(30);

/// A session that ran here, as its record says.
#[derive(Debug, Clone)]
pub struct LocalSession {
    pub session: String,
    pub agent: String,
    pub try_number: u32,
    pub ended: Option<String>,
    pub agent_session: Option<String>,
}

fn running_here(store: &Store, ctx: &Context, task: &str) -> Result<Vec<record::Record>> {
    let loop_dir = store.loop_dir()?;
    Ok(record::all(&loop_dir)
        .into_iter()
        .filter(|r| r.task == task && r.ended_at.is_none())
        .filter(|r| record::is_alive(r.pid, r.pid_start, &r.boot_id, &ctx.boot_id))
        .collect())
}

/// Wait (up to `limit`) for the sessions of `task` running on this machine to end; returns
/// the last of them as ended.
fn wait_for_local(store: &Store, ctx: &Context, task: &str, limit: Duration) -> Result<Option<LocalSession>> {
    let loop_dir = store.loop_dir()?;
    let running = running_here(store, ctx, task)?;
    let Some(last) = running.iter().max_by_key(|r| r.started_at).cloned() else {
        return Ok(None);
    };
    let deadline = Instant::now() + limit;
    let mut backoff = process::Backoff::new();
    loop {
        let now = record::read(&loop_dir, &last.session);
        let ended = now.as_ref().is_some_and(|r| r.ended_at.is_some());
        if ended || Instant::now() >= deadline {
            let r = now.unwrap_or(last);
            return Ok(Some(LocalSession {
                session: r.session,
                agent: r.agent,
                try_number: r.try_number,
                ended: r.ended.clone().filter(|_| ended),
                agent_session: r.agent_session,
            }));
        }
        backoff.wait();
    }
}

/// The task a session key or a task id names.
pub fn task_of(store: &Store, target: &str) -> Result<TaskId> {
    if target.starts_with("s-") {
        if let Some(rec) = record::read(&store.loop_dir()?, target) {
            return Ok(rec.task.parse()?);
        }
        for entry in journal::timeline(store, &Filter::default())?.entries.iter().rev() {
            let e = &entry.event;
            if let (Recorded::SessionStarted(started), Some(task)) = (Recorded::of(e), &e.task) {
                if started.session == target {
                    return Ok(task.parse()?);
                }
            }
        }
        if backlog::resolve(store, target).is_err() {
            return Err(usage(format!("no session or task '{target}' is known here"))
                .hint("see running sessions with 'git loop status'")
                .into());
        }
    }
    backlog::resolve(store, target)
}

/// The walker holding a live claim on the task, if one does.
fn worked_by(store: &Store, ctx: &Context, id: &TaskId) -> Result<Option<claim::Held>> {
    Ok(claim::read(store, &ClaimKey::node(id))?.filter(|h| {
        crate::ids::is_walker_key(&h.record.holder)
            && !crate::store::lease::judge(store, ctx, &ClaimKey::node(id), h).is_stale()
    }))
}

fn read_task(store: &Store, id: &TaskId) -> Result<crate::store::task::Snapshot> {
    task::read(store, id)?.ok_or_else(|| usage(format!("task '{id}' does not exist")).into())
}

/// What `stop` did.
pub struct Stopped {
    pub task: TaskId,
    /// The walker that works it.
    pub walker: String,
    /// The session stopped here, with how it ended (it ran on another machine if `None`).
    pub session: Option<LocalSession>,
    /// Its try branch's head after the stop.
    pub head: Option<ObjectId>,
}

/// Stop the session working `target` (a session key or a task): the task goes to
/// needs-decision with the reason "you stopped its session"; the walk stops the session and
/// commits its work.
pub fn stop(store: &Store, ctx: &Context, target: &str) -> Result<Stopped> {
    let id = task_of(store, target)?;
    let snapshot = read_task(store, &id)?;
    let Some(held) = worked_by(store, ctx, &id)? else {
        return Err(refused(format!("nothing is working on {id} (it is {})", snapshot.task.state.as_str()))
            .hint(format!("to keep the loop away from it, park it: git loop park {id} --reason <why>"))
            .into());
    };
    let session = held.record.session.clone().or_else(|| target.starts_with("s-").then(|| target.to_owned()));
    let mut transition = Transition::to(State::NeedsDecision, Some("you stopped its session".into()));
    transition.from = vec![State::Open];
    transition.about.session = session.clone();
    transition.about.walker = Some(held.record.holder.clone());
    backlog::transition(store, ctx, &id, transition)?;
    let session = wait_for_local(store, ctx, id.as_str(), Duration::from_secs(45))?;
    let head = match &session {
        Some(s) => store.ref_target(&refs::try_branch(&id, s.try_number))?,
        None => None,
    };
    Ok(Stopped { task: id, walker: held.record.holder, session, head })
}

/// Agents forbidden for `task`: its own list and `loop.forbid`.
fn forbidden_by(store: &Store, task: &Task, agent: &str) -> Option<String> {
    if task.forbid.iter().any(|a| a == agent) {
        return Some(format!("the task forbids it (git loop edit {} --remove-forbid {agent})", task.id));
    }
    store.settings().forbid().iter().any(|a| a == agent).then(|| "loop.forbid names it".to_owned())
}

/// What `reassign` did.
pub struct Reassigned {
    pub task: TaskId,
    pub from: Option<String>,
    pub to: String,
    /// It was closed (needs-decision, needs-you, failed) and is open again.
    pub reopened: Option<State>,
    /// The session that was asked to wrap up here, as it ended.
    pub wrapped: Option<LocalSession>,
    /// A walk works it elsewhere and hands it over at its next sync.
    pub elsewhere: Option<String>,
}

/// Assign `task` to `agent`: a running session is asked to wrap up, then stopped; its work
/// is committed; the next session starts with `agent` and a note of the work so far.
/// Reassigning to the same agent restarts it.
pub fn reassign(
    store: &Store,
    ctx: &Context,
    exe: &Path,
    target: &str,
    agent: &str,
    override_reason: Option<String>,
) -> Result<Reassigned> {
    backlog::check_agent_name(agent)?;
    presets::resolve(store, agent, None, exe)?;
    let id = backlog::resolve(store, target)?;
    let snapshot = read_task(store, &id)?;
    let t = &snapshot.task;
    if matches!(t.state, State::Done | State::Cancelled) {
        return Err(refused(format!("task '{id}' is {}", t.state.as_str()))
            .hint(format!("reopen it first: git loop reopen {id}"))
            .into());
    }
    if let Some(rule) = forbidden_by(store, t, agent) {
        if override_reason.is_none() {
            return Err(refused(format!("{agent} may not work on {id}: {rule}"))
                .hint(format!("to assign it anyway, say why: git loop reassign {id} {agent} --override \"<reason>\""))
                .into());
        }
    }
    if override_reason.as_deref().is_some_and(|r| r.trim().is_empty()) {
        return Err(usage("--override needs a reason").hint("e.g. --override \"the reviewer is a person\"").into());
    }
    let from = running_here(store, ctx, id.as_str())?
        .first()
        .map(|r| r.agent.clone())
        .or_else(|| t.assigned.as_ref().map(|a| a.agent.clone()));
    let change = Change {
        set: Fields {
            assigned: Some(Assignment {
                agent: agent.to_owned(),
                nonce: random_base32(12),
                r#override: override_reason.clone(),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    task::update(store, ctx, &id, change, &|_| Ok(()))?;
    backlog::record(
        store,
        ctx,
        Some(&id),
        Recorded::TaskReassigned(events::TaskReassigned {
            from: from.clone(),
            to: agent.to_owned(),
            override_reason: override_reason.clone(),
            by: store.identity.to_string(),
        }),
    )?;
    let mut reopened = None;
    if matches!(t.state, State::NeedsDecision | State::NeedsYou | State::Failed) {
        backlog::transition(store, ctx, &id, Transition::to(State::Open, Some(format!("reassigned to {agent}"))))?;
        reopened = Some(t.state);
    }
    let elsewhere = worked_by(store, ctx, &id)?
        .filter(|_| running_here(store, ctx, id.as_str()).map(|r| r.is_empty()).unwrap_or(true))
        .map(|h| format!("{} on {}", h.record.holder, h.record.host));
    let wrapped = wait_for_local(store, ctx, id.as_str(), Duration::from_secs(60))?;
    Ok(Reassigned { task: id, from, to: agent.to_owned(), reopened, wrapped, elsewhere })
}

/// What `take-over` gives the person.
pub struct TakenOver {
    pub task: TaskId,
    pub try_: Try,
    /// The session that was stopped here, as it ended.
    pub stopped: Option<LocalSession>,
    /// The agent's own command to resume its last session, ready to paste.
    pub resume: Option<String>,
    pub agent: Option<String>,
    /// The try was opened for you (nothing had worked on the task yet, or its landing
    /// conflicted).
    pub opened: bool,
    /// Its worktree holds the merge of the task branch into its target in progress: the merge
    /// its landing conflicted on, for you to resolve.
    pub merging: Option<events::MergeStarted>,
}

/// The latest try sessions worked on: its number, its last session's agent and CLI session id.
struct Worked {
    try_number: u32,
    agent: Option<String>,
    agent_session: Option<String>,
}

fn last_worked(store: &Store, id: &TaskId) -> Result<Option<Worked>> {
    let filter = Filter { task: Some(id.to_string()), session: None };
    let mut last = None;
    let named = |agent: String| (!agent.is_empty()).then_some(agent);
    for entry in journal::timeline(store, &filter)?.entries {
        match Recorded::of(&entry.event) {
            Recorded::SessionEnded(e) => {
                last = Some(Worked { try_number: e.number, agent: named(e.agent), agent_session: e.agent_session })
            }
            Recorded::SessionStarted(e) => {
                last = Some(Worked { try_number: e.number, agent: named(e.agent), agent_session: None })
            }
            Recorded::TryOpened(e) if last.is_none() => {
                last = Some(Worked { try_number: e.number, agent: named(e.agent), agent_session: None })
            }
            _ => {}
        }
    }
    Ok(last)
}

/// Take `task` over by hand: the loop stops its session after its current step and commits
/// its work; the claim passes to you; you get the worktree and the agent's resume command.
pub fn take_over(store: &Store, ctx: &Context, exe: &Path, target: &str) -> Result<TakenOver> {
    let id = backlog::resolve(store, target)?;
    let snapshot = read_task(store, &id)?;
    let me = backlog::person(store);
    let key = ClaimKey::node(&id);
    match snapshot.task.state {
        State::Done | State::Cancelled => {
            return Err(refused(format!("task '{id}' is {}", snapshot.task.state.as_str()))
                .hint(format!("reopen it first: git loop reopen {id}"))
                .into())
        }
        State::TakenOver => {
            let holder = claim::read(store, &key)?.map(|h| h.record.holder).unwrap_or_default();
            if holder != me {
                return Err(refused(format!("{id} is taken over by {} already", holder.trim_start_matches("person:")))
                    .hint("they hand it back with 'git loop hand-back'")
                    .into());
            }
        }
        _ => {
            let mut transition = Transition::to(State::TakenOver, Some(format!("taken over by {}", store.identity)));
            transition.about.holder = Some(me.clone());
            backlog::transition(store, ctx, &id, transition)?;
        }
    }
    // The claim passes to you: whoever held it (a walker, a hold on a closed task) loses it.
    let opts = AcquireOptions {
        holder: me.clone(),
        ttl: PERSON_LEASE,
        reason: Some(format!("taken over by {}", store.identity)),
        session: None,
    };
    for _ in 0..10 {
        match claim::acquire(store, ctx, &key, &opts)? {
            Acquire::HeldByOther(held) => {
                if let Acquire::TookOver { .. } = claim::take_over(store, ctx, &key, &held, &opts)? {
                    break;
                }
            }
            _ => break,
        }
    }
    let stopped = wait_for_local(store, ctx, id.as_str(), Duration::from_secs(60))?;
    let worked = last_worked(store, &id)?;
    let events = journal::timeline(store, &Filter { task: Some(id.to_string()), session: None })?.entries;
    let start = || -> Result<gix::ObjectId> {
        let base = tries::base(store, None)?;
        let deps = crate::landing::epic::start_after(store, &snapshot.task);
        match tries::ensure_task_branch(store, &id, base, &deps)? {
            tries::TaskBranch::Ready(head) => Ok(head),
            tries::TaskBranch::Conflict { dependency, paths, .. } => {
                Err(refused(format!("the work of '{dependency}' conflicts with the base in: {}", paths.join(", ")))
                    .into())
            }
        }
    };
    // A landing that conflicted: the try is that merge in progress, to resolve once (a merge
    // try open for it already is gone on with).
    let pending = crate::landing::conflict::pending(store, &id, &events)?;
    let merging_try = worked.as_ref().and_then(|w| {
        crate::landing::conflict::merge_of(&events, w.try_number)
            .filter(|m| pending.as_ref().is_some_and(|p| m.theirs.parse::<gix::ObjectId>().is_ok_and(|t| t == p.head)))
    });
    let mut merging = merging_try.clone();
    let (try_, resumed, checkout) = match (&pending, &merging_try) {
        (Some(pending), None) => {
            let answer = crate::landing::conflict::Answer::of(store, &id, pending)?;
            match tries::merge::open(store, &id, &me, &events, &answer.merge())? {
                tries::merge::Begun::Conflicts { opened, paths } => {
                    merging = Some(answer.started(opened.try_.number, paths));
                    (opened.try_, false, opened.checkout)
                }
                tries::merge::Begun::Clean(commit) => {
                    let opened = tries::open(store, &id, &me, None, &events, || Ok(commit))?;
                    (opened.try_, opened.resumed, opened.checkout)
                }
            }
        }
        _ => {
            let opened = tries::open(store, &id, &me, worked.as_ref().map(|w| w.try_number), &events, start)?;
            (opened.try_, opened.resumed, opened.checkout)
        }
    };
    let opened = !resumed;
    let head = store.ref_target(&try_.branch)?;
    if opened {
        backlog::record(
            store,
            ctx,
            Some(&id),
            Recorded::TryOpened(events::TryOpened {
                number: try_.number,
                agent: me.clone(),
                branch: refs::short_branch(&try_.branch).to_owned(),
                worktree: try_.worktree.display().to_string(),
                resumed: false,
                race: false,
                warmed: None,
                checkout: checkout.as_ref().map(|c| c.record()),
            }),
        )?;
        if let Some(started) = merging.clone().filter(|m| m.number == try_.number) {
            backlog::record(store, ctx, Some(&id), Recorded::MergeStarted(started))?;
        }
    }
    backlog::record(
        store,
        ctx,
        Some(&id),
        Recorded::TakenOver(events::TakenOver {
            number: try_.number,
            head: head.map(|h| h.to_string()),
            worktree: try_.worktree.display().to_string(),
            by: store.identity.to_string(),
        }),
    )?;
    let (agent, agent_session) = match (&stopped, &worked) {
        (Some(s), _) if s.agent_session.is_some() => (Some(s.agent.clone()), s.agent_session.clone()),
        (_, Some(w)) => (w.agent.clone(), w.agent_session.clone()),
        (Some(s), None) => (Some(s.agent.clone()), None),
        _ => (None, None),
    };
    // The id came from a session record or the journal, which an agent or another clone
    // wrote: only a plausible id makes a resume line (the hooks record no other).
    let session = agent_session.as_deref().and_then(|s| s.parse::<AgentSessionId>().ok());
    let resume = match (&agent, &session) {
        (Some(agent), Some(session)) => {
            presets::resolve(store, agent, None, exe).ok().and_then(|a| a.resume_line(&try_.worktree, session))
        }
        _ => None,
    };
    Ok(TakenOver { task: id, try_, stopped, resume, agent, opened, merging })
}

/// How `hand-back` hands the task back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandBack {
    /// The agent goes on, told what you changed.
    Continue,
    /// It is yours: done when the checks pass.
    Keep,
}

/// What `hand-back` did.
pub struct HandedBack {
    pub task: TaskId,
    pub try_: Try,
    /// The commit holding your changes, if you changed anything.
    pub commit: Option<ObjectId>,
    pub changes: Vec<tries::FileChange>,
    /// With `Keep`: the commit the task branch moved to.
    pub landed: Option<ObjectId>,
    /// The try began as the merge its landing conflicted on (see `take_over`), and whether that
    /// merge is concluded now (its head holds both sides).
    pub merged: Option<(events::MergeStarted, bool)>,
}

/// The try a person took over (from the journal's `taken_over` event).
fn taken_try(store: &Store, id: &TaskId) -> Result<Option<(u32, Option<ObjectId>)>> {
    let filter = Filter { task: Some(id.to_string()), session: None };
    let mut found = None;
    for entry in journal::timeline(store, &filter)?.entries {
        if let Recorded::TakenOver(taken) = Recorded::of(&entry.event) {
            found = Some((taken.number, taken.head.and_then(|h| h.parse().ok())));
        }
    }
    Ok(found)
}

/// Hand a task you took over back: your changes are committed; `Continue` lets the agent go
/// on, told what you changed; `Keep` lands your work (done) if the checks pass.
pub fn hand_back(
    store: &Store,
    ctx: &Context,
    exe: &Path,
    target: &str,
    mode: HandBack,
    message: Option<String>,
    checks: Option<String>,
) -> Result<HandedBack> {
    let id = backlog::resolve(store, target)?;
    let snapshot = read_task(store, &id)?;
    if snapshot.task.state != State::TakenOver {
        return Err(refused(format!("{id} is {}, not taken over", snapshot.task.state.as_str()))
            .hint(format!("take it over first: git loop take-over {id}"))
            .into());
    }
    let me = backlog::person(store);
    let key = ClaimKey::node(&id);
    if let Some(held) = claim::read(store, &key)? {
        if held.record.holder != me && !crate::store::lease::judge(store, ctx, &key, &held).is_stale() {
            return Err(refused(format!(
                "{id} was taken over by {}, not by you ({})",
                held.record.holder.trim_start_matches("person:"),
                me.trim_start_matches("person:")
            ))
            .hint("the person who took it over hands it back")
            .into());
        }
    }
    let Some((number, taken_at)) = taken_try(store, &id)? else {
        return Err(refused(format!("no try of {id} was taken over here"))
            .hint("sync first ('git loop sync') if it was taken over on another clone")
            .into());
    };
    let root = tries::worktrees_root(store)?;
    let try_ = Try::describe(&id, number, &root);
    let before = store
        .ref_target(&try_.branch)?
        .ok_or_else(|| refused(format!("try branch {} is missing", refs::short_branch(&try_.branch))))?;
    let author = store.signature();
    let subject = match &message {
        Some(m) => format!("loop: hand back {id}: {}\n\n{m}\n", m.lines().next().unwrap_or("")),
        None => format!("loop: hand back {id}\n"),
    };
    let committed = match tries::commit::commit_on_stop(store, &try_, &author, &subject)? {
        Committed::Commit { id, .. } | Committed::Adopted(id) => Some(id),
        Committed::Clean | Committed::NoWorktree => None,
    };
    let mut head = committed.unwrap_or(before);
    // A try that began as the merge its landing conflicted on: your resolution is that merge.
    let history = journal::timeline(store, &Filter { task: Some(id.to_string()), session: None })?.entries;
    let merged = crate::landing::conflict::merge_of(&history, number);
    let mut concluded = false;
    if let Some(started) = &merged {
        let conclusion = crate::landing::conflict::conclude(store, &try_, started)?;
        match (&conclusion, mode) {
            (crate::landing::conflict::Concluded::Merged(commit), _) => {
                head = *commit;
                concluded = true;
            }
            (_, HandBack::Continue) => {}
            (_, HandBack::Keep) => {
                let what = crate::landing::conflict::unconcluded(started, &conclusion).unwrap_or_default();
                return Err(refused(format!("{id} is not resolved yet in {}: {what}", try_.worktree.display()))
                    .hint(format!(
                        "hand it back again when it is, or let the agent finish it: git loop hand-back {id} --continue"
                    ))
                    .into());
            }
        }
    }
    // What you did since you took it over — committed by the loop just now, or by you.
    let start = taken_at.unwrap_or(before);
    let commit = (head != start).then_some(head);
    let changes = store.diffstat(start, head)?;
    match mode {
        HandBack::Continue => {
            let mut transition = Transition::to(State::Open, Some("handed back to the agent".into()));
            transition.from = vec![State::TakenOver];
            transition.instead = Some(events::HandedBack {
                mode: "continue".into(),
                number: Some(number),
                commit: commit.map(|c| c.to_string()),
                changes: Some(tries::describe_changes(&changes)),
                message,
                by: None,
                from: None,
                to: None,
                reason: None,
            });
            backlog::transition(store, ctx, &id, transition)?;
            Ok(HandedBack { task: id, try_, commit, changes, landed: None, merged: merged.map(|m| (m, concluded)) })
        }
        HandBack::Keep => {
            let checks_json = match super::config::checks(store, checks) {
                Some(command) => Some(run_checks(store, ctx, exe, &try_, &command)?),
                None => None,
            };
            let landed = land(store, &id, &try_, head)?;
            let opts = DoneOptions {
                commit: Some(landed.to_string()),
                message: message.clone().or_else(|| Some(format!("done by hand by {}", store.identity))),
                try_number: Some(number),
                checks: checks_json,
                reviews: Vec::new(),
                unchecked: false,
                spent: None,
                children: Vec::new(),
            };
            backlog::done(store, ctx, &id, opts)?;
            backlog::record(
                store,
                ctx,
                Some(&id),
                Recorded::HandedBack(events::HandedBack {
                    mode: "keep".into(),
                    number: Some(number),
                    commit: Some(landed.to_string()),
                    changes: Some(tries::describe_changes(&changes)),
                    message: None,
                    by: Some(store.identity.to_string()),
                    from: None,
                    to: None,
                    reason: None,
                }),
            )?;
            claim::release(store, ctx, &key, &me, true)?;
            Ok(HandedBack {
                task: id,
                try_,
                commit,
                changes,
                landed: Some(landed),
                merged: merged.map(|m| (m, concluded)),
            })
        }
    }
}

/// Run the checks in a try's worktree, as the walk does (`tries::checks`): under the guard,
/// for at most `loop.checksTimeout`; an error (with the log) if they fail.
fn run_checks(store: &Store, ctx: &Context, exe: &Path, try_: &Try, command: &str) -> Result<serde_json::Value> {
    let log = store.layout()?.kept_checks_log(try_.task.as_str(), try_.number);
    let _ = std::fs::remove_file(&log);
    // They run the agent's code as much as the person's: confined as a walk would run them.
    let confinement = crate::sandbox::Confinement::decide(crate::sandbox::Policy::read(store, ctx, None)?, ctx, exe)?;
    let runner = tries::checks::Runner {
        exe,
        parent: ctx.pid,
        grace: Duration::from_secs(5),
        timeout: super::config::checks_timeout(store, None)?,
        cancelled: &|| false,
        sandbox: confinement.sandbox().map(|s| s.as_ref()),
    };
    let env = [("GIT_LOOP_TASK".to_owned(), try_.task.to_string())];
    let ran = tries::checks::run(store, &runner, "checks", command, &try_.worktree, &env, &log)?;
    if !ran.passed {
        let how = match ran.exit {
            _ if ran.elapsed >= runner.timeout => {
                format!("stopped after {} s, loop.checksTimeout", runner.timeout.as_secs())
            }
            Some(exit) => exit.to_string(),
            None => "stopped".into(),
        };
        return Err(refused(format!("the checks failed ({how}) in {}; the task stays yours", try_.worktree.display()))
            .hint(format!(
                "see {}; fix it and hand back again, or use --continue to let the agent go on",
                log.display()
            ))
            .into());
    }
    Ok(ran.evidence(command))
}

/// The refusal for a landing that conflicts with what the task branch gained since try
/// `number` began.
fn conflict(id: &TaskId, number: u32, paths: &[String]) -> anyhow::Error {
    let branch = refs::short_branch(&refs::task_branch(id)).to_owned();
    refused(format!("{branch} moved since try {number} began and merging it conflicts in: {}", paths.join(", ")))
        .hint(format!("merge it into the try's worktree yourself (git merge {branch}), then try again"))
        .into()
}

/// The refusal for a task branch checked out in a worktree (moving it would be undone there).
fn checked_out(branch: &str, path: &Path) -> anyhow::Error {
    refused(format!("{} is checked out in {}, so it cannot be moved", refs::short_branch(branch), path.display()))
        .hint("switch that worktree to another branch, then try again")
        .into()
}

/// Land your work on the task branch (the walk's way: `tries::land`).
fn land(store: &Store, id: &TaskId, try_: &Try, head: ObjectId) -> Result<ObjectId> {
    match tries::land(store, try_, head, "loop: task done")? {
        tries::Landed::Moved(commit) => Ok(commit),
        tries::Landed::Conflict(paths) => Err(conflict(id, try_.number, &paths)),
        tries::Landed::CheckedOut(path) => Err(checked_out(&refs::task_branch(id), &path)),
    }
}

/// What `done --try` decided.
pub struct Decided {
    pub task: TaskId,
    pub commit: ObjectId,
}

/// Decide for try `number` of `task`: the task branch moves to it (fast-forward, else a merge
/// with what the branch gained meanwhile) and the task is done. Of any number of people
/// deciding at once for different tries, exactly one wins: the decision is the task record's
/// compare-and-swap to done, and only the winner moves the branch.
pub fn decide(store: &Store, ctx: &Context, target: &str, number: u32, message: Option<String>) -> Result<Decided> {
    let id = backlog::resolve(store, target)?;
    let snapshot = read_task(store, &id)?;
    if snapshot.task.state == State::Done {
        return Err(refused(format!("task '{id}' is done already"))
            .hint(format!("reopen it first to decide again: git loop reopen {id}"))
            .into());
    }
    let root = tries::worktrees_root(store)?;
    let try_ = Try::describe(&id, number, &root);
    let Some(head) = store.ref_target(&try_.branch)? else {
        return Err(usage(format!("{id} has no try {number}"))
            .hint(format!("its tries are the branches loop-try/{id}/<n>: git branch --list 'loop-try/{id}/*'"))
            .into());
    };
    let branch = refs::task_branch(&id);
    if let Some(path) = tries::checked_out_in(store, &branch)? {
        return Err(checked_out(&branch, &path));
    }
    let (current, target) = match tries::landing_target(store, &id, number, head)? {
        tries::Target::Move { from, to } => (from, to),
        tries::Target::Conflict(paths) => return Err(conflict(&id, number, &paths)),
    };
    let opts = DoneOptions {
        commit: Some(target.to_string()),
        message: message.or_else(|| Some(format!("try {number} chosen by {}", store.identity))),
        try_number: Some(number),
        checks: None,
        reviews: Vec::new(),
        unchecked: false,
        spent: None,
        children: Vec::new(),
    };
    backlog::done_if(store, ctx, &id, opts, &|t: &Task| {
        if t.state == State::Done {
            Err(refused(format!("task '{}' was decided meanwhile", t.id)))
        } else {
            Ok(())
        }
    })?;
    match tries::move_branch(store, &branch, current, target, "loop: try chosen")? {
        tries::Move::Moved => {}
        other => {
            return Err(anyhow::anyhow!(
                "{id} is done at {target}, but {} could not be moved there ({other:?}); move it with: git branch -f {} {target}",
                refs::short_branch(&branch),
                refs::short_branch(&branch)
            ))
        }
    }
    backlog::release_hold(store, ctx, &id)?;
    // The task is done: its tries' worktrees go (to the pool where it takes them), as a walk's
    // do when it closes a unit; left, doctor would call them leftovers. One this command runs
    // in stays, and one that cannot be removed now does not undo the decision: doctor names
    // what is left, for --repair.
    let here = std::env::current_dir().unwrap_or_default();
    for done in crate::walk::recover::worktrees_in(&root).into_iter().filter(|t| t.task == id) {
        if !here.starts_with(&done.worktree) {
            let _ = tries::remove_worktree(store, &done);
        }
    }
    Ok(Decided { task: id, commit: target })
}
