//! `git loop status`: the board at a glance.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::human::{relative, short};
use super::output::{at_work_line, claim_json, resolving_json, review_json, review_line, summarizing_json, Out};
use super::paint;
use git_loop::agent::record;
use git_loop::mission::record::MissionState;
use git_loop::ops::status::{overview, Overview};
use git_loop::store::task::State;

/// The board at a glance.
///
/// The walk and its running sessions (a walk of this machine whose process is gone is shown as
/// ended, whatever its lease says), claims, what is ready next, what is parked, the missions
/// commanded from here with their waves and projects, whether the last walk paused, and counts.
///
/// Example: git loop status --json
#[derive(Args)]
pub struct StatusArgs {
    /// Print the board as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: StatusArgs) -> Result<u8> {
    let store = env.open()?;
    let now = env.ctx.now();
    let Overview {
        board,
        loop_dir,
        running,
        walkers,
        dead_walkers,
        claims,
        ready,
        ready_count,
        parked,
        waiting,
        worked,
        paused,
        answers,
        taken,
        reviews,
        mission_list,
        mission_corrupt,
        landing,
        at_work,
        blocked,
        spent,
        ..
    } = overview(&store, &env.ctx)?;
    let count = |st: State| board.tasks.iter().filter(|r| r.state == st).count();
    // Open epics and how far each is (one pass over the tasks for their children).
    let epics: Vec<(&git_loop::store::index::Row, git_loop::backlog::graph::Progress)> =
        board.tasks.iter().filter(|r| r.epic && r.state == State::Open).map(|r| (r, board.progress(r.id()))).collect();
    // How a walk started here now would confine its sessions (tried, as a walk tries it).
    let sandbox = match git_loop::sandbox::Policy::read(&store, &env.ctx, None) {
        Ok(policy) => {
            let mode = policy.mode;
            match git_loop::sandbox::Confinement::decide(policy, &env.ctx, &env.exe) {
                Ok(c) => json!({ "mode": mode.word(), "state": c.word(), "line": c.describe() }),
                Err(refusal) => json!({ "mode": mode.word(), "state": "refused", "line": refusal.message }),
            }
        }
        Err(refusal) => json!({ "mode": null, "state": "invalid", "line": refusal.message }),
    };
    // The pool of finished tries' worktrees, by the disk use measured as each was kept.
    let (pooled, pooled_bytes) = git_loop::tries::pool::usage(&store).unwrap_or((0, 0));
    let pool_cap = git_loop::tries::pool::max_bytes(&store).ok().flatten();
    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "sandbox": sandbox,
            "pool": {
                "worktrees": pooled, "bytes": pooled_bytes,
                "max": git_loop::tries::pool::size(&store).ok(), "max_bytes": pool_cap,
            },
            "spent": super::cost::total_json(&spent),
            "walkers": walkers.iter().map(|(h, lease)| claim_json(h, lease)).collect::<Vec<_>>(),
            "dead_walkers": dead_walkers.iter().map(|(h, lease)| claim_json(h, lease)).collect::<Vec<_>>(),
            "sessions": running.iter().map(|r| json!({
                "session": r.session, "task": r.task, "try": r.try_number, "agent": r.agent, "walker": r.walker,
                "role": r.role.as_deref().unwrap_or("worker"),
                "started_at": r.started_at, "elapsed_s": (now - r.started_at).num_seconds(), "worktree": r.worktree,
                "log_tail": git_loop::agent::record::tail(&record::dir(&loop_dir, &r.session).join("log"), 5),
            })).collect::<Vec<_>>(),
            "claims": claims.iter().map(|(_, h, lease)| claim_json(h, lease)).collect::<Vec<_>>(),
            "ready": ready.iter().map(|t| json!({ "id": t.id, "priority": t.priority, "title": t.title })).collect::<Vec<_>>(),
            "parked": parked.iter().map(|t| json!({ "id": t.id, "title": t.title, "reason": t.reason })).collect::<Vec<_>>(),
            "needs_you": waiting.iter().map(|t| {
                let (answers, failure) = answers.get(&t.id).map_or((json!([]), serde_json::Value::Null), |(w, f)| super::answer::json(w, f.as_ref()));
                let (worktree, by) = taken.get(&t.id).map_or((None, None), |(w, b)| (Some(w), Some(b)));
                json!({ "id": t.id, "state": t.state, "title": t.title, "reason": t.reason, "answers": answers, "failure": failure,
                        "worktree": worktree, "taken_by": by })
            }).collect::<Vec<_>>(),
            "reviews": reviews.iter().map(|(id, r)| review_json(id, r)).collect::<Vec<_>>(),
            "resolving": at_work.iter().filter(|w| w.resolving.is_some()).map(resolving_json).collect::<Vec<_>>(),
            "summarizing": at_work.iter().filter(|w| w.resolving.is_none()).map(summarizing_json).collect::<Vec<_>>(),
            "paused": paused.as_ref().map(|(e, p)| json!({ "at": e.event.at, "reason": p.policy, "tasks": p.units })),
            "counts": {
                "open": count(State::Open), "ready": ready_count, "blocked": blocked, "running": worked,
                "sessions": running.len(),
                "needs_decision": count(State::NeedsDecision), "needs_you": count(State::NeedsYou),
                "taken_over": count(State::TakenOver), "failed": count(State::Failed),
                "done": count(State::Done), "parked": count(State::Parked), "cancelled": count(State::Cancelled),
            },
            "landing": landing.as_ref().map(super::output::landing_json),
            "epics": epics.iter().map(|(r, p)| json!({
                "id": r.id(), "title": r.task().map(|t| t.title).unwrap_or_default(),
                "done": p.done, "total": p.total, "cancelled": p.cancelled,
            })).collect::<Vec<_>>(),
            "corrupt": board.corrupt.iter().map(|(n, p)| json!({ "ref": n, "problem": p })).collect::<Vec<_>>(),
            "missions": mission_list.iter().map(|m| json!({
                "id": m.id, "title": m.title, "state": m.state.as_str(), "reason": m.reason,
                "current_wave": m.current_wave(),
                "commander": super::mission::commander(&store, &env.ctx, m).map(|h| h.record.holder),
                "waves": m.waves().iter().map(|(n, ps)| json!({
                    "wave": n,
                    "projects": ps.iter().map(|p| json!({ "name": p.name, "status": p.status.as_str() })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }))?;
        return Ok(0);
    }
    match walkers.first().map(|(w, _)| w) {
        Some(w) => out.line(format!(
            "walk {} running since {} (pid {} on {})",
            w.record.holder,
            relative(w.record.acquired_at, now),
            w.record.pid,
            w.record.host
        ))?,
        None => out.line("no walk running here")?,
    }
    // Confined is how sessions run; anything else is said.
    if sandbox["state"] != "confined" {
        out.line(format!("sandbox: {}", sandbox["line"].as_str().unwrap_or_default()))?;
    }
    if pooled > 0 {
        let cap = pool_cap.map(|c| format!(", of at most {} (loop.pool.maxSize)", git_loop::tries::warm::bytes(c)));
        out.line(format!(
            "pool: {} kept for the next tries, {}{}",
            super::human::count(pooled as u64, "finished worktree", "finished worktrees"),
            git_loop::tries::warm::bytes(pooled_bytes),
            cap.unwrap_or_default()
        ))?;
    }
    if spent.sessions > 0 && spent.unknown == spent.sessions {
        out.line(format!(
            "spent: unknown, none of {} reported what it used (git loop cost)",
            super::human::count(spent.sessions, "session", "sessions")
        ))?;
    } else if spent.sessions > 0 {
        out.line(format!(
            "spent: {} over {} (git loop cost)",
            spent.describe(),
            super::human::count(spent.sessions, "session", "sessions")
        ))?;
    }
    if let (None, Some((dead, _))) = (walkers.first(), dead_walkers.first()) {
        out.line(format!(
            "the last walk ({}, pid {}) ended without a trace; its sessions are recovered by the next 'git loop run'",
            dead.record.holder, dead.record.pid
        ))?;
    }
    if !running.is_empty() {
        out.section("sessions:")?;
        for r in &running {
            let last = git_loop::agent::record::tail(&record::dir(&loop_dir, &r.session).join("log"), 1);
            out.line(format!(
                "  {:<11} {:<10} {:<8} try {:<3} {:>9}  {}",
                r.task,
                r.session,
                r.agent,
                r.try_number,
                relative(r.started_at, now).trim_end_matches(" ago"),
                short(&last, 60)
            ))?;
        }
    }
    if !claims.is_empty() {
        out.section("claims:")?;
        for (key, held, lease) in &claims {
            let r = &held.record;
            // A claim the walk keeps on a task it closed (failed, needs-you, needs-decision)
            // holds it away from the loop until a person answers: its walk having ended is
            // how it should be, not a crash.
            if git_loop::backlog::is_hold(r) {
                let why = r.reason.as_deref().map(|x| short(x, 60)).unwrap_or_default();
                out.line(format!(
                    "  {:<24} {:<12} kept until a person answers the task · {why}",
                    key.to_string(),
                    r.holder
                ))?;
                continue;
            }
            let why = if lease.holder_gone {
                "  its walk ended without a trace".to_owned()
            } else {
                r.reason.as_deref().map(|x| format!("  {}", short(x, 50))).unwrap_or_default()
            };
            out.line(format!("  {:<24} {:<12} {}{why}", key.to_string(), r.holder, super::human::lease(lease)))?;
        }
    }
    if !reviews.is_empty() {
        out.section("reviews:")?;
        for (id, r) in &reviews {
            out.line(format!("  {:<11} try {:<3} {}", id, r.number, short(&review_line(r), 90)))?;
        }
    }
    if !at_work.is_empty() {
        out.section("resolving:")?;
        for w in &at_work {
            out.line(format!("  {:<11} {}", w.task, short(&at_work_line(w), 100)))?;
        }
    }
    if !ready.is_empty() {
        out.section("ready next:")?;
        for t in ready.iter().take(5) {
            out.line(format!("  {:<11} {}  {}", t.id, t.priority, short(&t.title, 70)))?;
        }
        if ready_count > 5 {
            out.line(format!("  … and {} more", ready_count - 5))?;
        }
    }
    if !waiting.is_empty() {
        out.section("waiting for you:")?;
        for t in &waiting {
            out.line(format!(
                "  {:<11} {:<14} {}  {}",
                t.id,
                paint::state(t.state.as_str()),
                short(&t.title, 36),
                short(t.reason.as_deref().unwrap_or(""), 50)
            ))?;
            if let Some((worktree, by)) = taken.get(&t.id) {
                out.line(format!("      worked by hand by {by} in {worktree}"))?;
            }
            if let Some((ways, failure)) = answers.get(&t.id) {
                if let Some(f) = failure {
                    let last = f.tail.last().map(|l| format!(": {}", short(l, 60))).unwrap_or_default();
                    out.line(format!("      {}{last}", f.what))?;
                    out.line(format!("      its output: {}", f.log.display()))?;
                }
                if !ways.is_empty() {
                    out.line(format!("      answer: {}", super::answer::summary(&t.id, ways)))?;
                }
            }
        }
    }
    if !parked.is_empty() {
        out.section("parked:")?;
        for t in &parked {
            out.line(format!(
                "  {:<11} {}  {}",
                t.id,
                short(&t.title, 40),
                short(t.reason.as_deref().unwrap_or(""), 60)
            ))?;
        }
    }
    if !epics.is_empty() {
        out.section("epics:")?;
        const SHOWN: usize = 10;
        for (row, progress) in epics.iter().take(SHOWN) {
            let title = row.task().map(|t| t.title).unwrap_or_default();
            out.line(format!("  {}  {} done  {}", row.id(), progress, short(&title, 60)))?;
        }
        if epics.len() > SHOWN {
            out.line(format!("  and {} more (git loop list --tree)", epics.len() - SHOWN))?;
        }
    }
    if !mission_list.is_empty() {
        out.section("missions:")?;
        for m in &mission_list {
            let state = match (super::mission::commander(&store, &env.ctx, m), &m.reason) {
                (Some(held), _) => super::mission::commander_line(&held, now),
                (None, Some(reason)) => format!("{}: {}", m.state.as_str(), short(reason, 70)),
                (None, None) => m.state.as_str().to_owned(),
            };
            out.line(format!("  {}  {} · {state}", m.id, short(&m.title, 40)))?;
            if m.state == MissionState::Complete {
                continue;
            }
            for (wave, projects) in m.waves() {
                let projects: Vec<String> =
                    projects.iter().map(|p| format!("{} {}", p.name, p.status.as_str())).collect();
                out.line(format!("    wave {wave}  {}", projects.join(" · ")))?;
            }
        }
    }
    if let Some(view) = &landing {
        let into = git_loop::refs::short_branch(&view.into);
        if let Some(held) = &view.lander {
            out.line(format!(
                "lander {} at work on {into} since {} (pid {} on {})",
                held.record.holder,
                relative(held.record.acquired_at, now),
                held.record.pid,
                held.record.host
            ))?;
        }
        queue_lines(&mut out, into, &view.queue)?;
        for (branch, queue) in &view.epics {
            queue_lines(&mut out, git_loop::refs::short_branch(branch), queue)?;
        }
        if !view.requests.is_empty() {
            out.section(format!("requests open for {into}:"))?;
            for k in view.requests.iter().take(10) {
                out.line(format!("  {:<11} {}", k.task, super::text::line(&k.line())))?;
            }
            if view.requests.len() > 10 {
                out.line(format!("  … and {} more", view.requests.len() - 10))?;
            }
        }
        if let Some((task, at, failed)) = &view.last_failure {
            out.section(format!(
                "last landing failure on {into}: {task} {}: {}",
                relative(*at, now),
                short(&failed.reason, 100)
            ))?;
        }
    }
    if let Some((e, p)) = paused {
        let why = if p.policy.is_empty() { "it did not say why".to_owned() } else { p.policy.clone() };
        let tasks = if p.units.is_empty() { String::new() } else { format!(" ({})", p.units.join(", ")) };
        out.section(format!("the last walk paused {}: {why}{tasks}", relative(e.event.at, now)))?;
        out.line("  start it again with 'git loop run' once that is seen to")?;
    }
    let waiting_count =
        if waiting.is_empty() { String::new() } else { format!(" · {} waiting for you", waiting.len()) };
    out.section(format!(
        "{} open ({} ready, {} blocked, {} running){waiting_count} · {} done · {} parked · {} cancelled",
        count(State::Open),
        ready_count,
        blocked,
        worked,
        count(State::Done),
        count(State::Parked),
        count(State::Cancelled)
    ))?;
    super::output::warn_corrupt(&board.corrupt);
    super::output::warn_corrupt(&mission_corrupt);
    Ok(0)
}

/// A landing queue's section: "waiting to land on <into>:", ten tasks at most.
fn queue_lines(out: &mut super::output::Out, into: &str, queue: &[git_loop::landing::Queued]) -> Result<()> {
    if queue.is_empty() {
        return Ok(());
    }
    out.section(format!("waiting to land on {into}:"))?;
    for q in queue.iter().take(10) {
        let waits =
            if q.waiting_for.is_empty() { String::new() } else { format!("  (after {})", q.waiting_for.join(", ")) };
        out.line(format!("  {:<11} {}  {}{waits}", q.task, q.priority, short(&q.title, 50)))?;
    }
    if queue.len() > 10 {
        out.line(format!("  … and {} more", queue.len() - 10))?;
    }
    Ok(())
}
