//! `git loop show`: one task in full.

use anyhow::Result;
use clap::Args;

use super::env::Env;
use super::human::{self, relative};
use super::output::{at_work_line, resolving_json, review_json, review_line, summarizing_json, task_json, Out};
use super::paint;
use git_loop::backlog::Readiness;
use git_loop::ops;

/// Show one task: its fields, dependencies, claim, completion and plan.
///
/// Example: git loop show t-4f2a
#[derive(Args)]
pub struct ShowArgs {
    /// The task (id or unique prefix).
    id: String,
    /// Print the task as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ShowArgs) -> Result<u8> {
    let store = env.open()?;
    let ops::show::Shown {
        id, snapshot, board, landing, review, ways, failure, at_work, taken, spent, request, ..
    } = ops::show::show(&store, &env.ctx, &args.id)?;
    let landing = landing.as_ref().map(landing_rendered);
    let resolving = at_work.iter().find(|w| w.resolving.is_some());
    let summarizing = at_work.iter().find(|w| w.resolving.is_none());
    let mut out = Out::new();
    if args.json {
        let mut value = task_json(&board, &snapshot);
        value["cost"] = super::cost::total_json(&spent);
        value["landing"] = landing.as_ref().map_or(serde_json::Value::Null, |(j, _)| j.clone());
        value["request"] = serde_json::to_value(&request)?;
        value["elsewhere"] = snapshot
            .task
            .after
            .iter()
            .filter_map(|d| git_loop::backlog::foreign::Dep::parse(d))
            .map(|dep| {
                let read = board.foreign.task(&dep.to_string());
                serde_json::json!({
                    "after": dep.to_string(), "place": dep.place, "id": dep.id,
                    "state": read.map(|t| t.state.as_str()), "title": read.map(|t| t.title.clone()),
                })
            })
            .collect();
        value["review"] = review.as_ref().map_or(serde_json::Value::Null, |r| review_json(&id.to_string(), r));
        value["resolving"] = resolving.map_or(serde_json::Value::Null, resolving_json);
        value["summarizing"] = summarizing.map_or(serde_json::Value::Null, summarizing_json);
        let (answers, failure) = super::answer::json(&ways, failure.as_ref());
        value["answers"] = answers;
        value["failure"] = failure;
        value["taken_over"] = taken.as_ref().map_or(
            serde_json::Value::Null,
            |t| serde_json::json!({ "worktree": t.worktree, "by": t.by, "try": t.number }),
        );
        out.json(&value)?;
        return Ok(0);
    }
    let t = &snapshot.task;
    let now = board.now;
    let status = match board.readiness_of(&t.id, t.state, t.after.iter().map(String::as_str)) {
        Readiness::Ready => "open, ready".to_owned(),
        Readiness::Blocked(_) => "open, blocked".to_owned(),
        Readiness::Claimed if board.shown_state(&t.id, t.state) == "running" => "running".to_owned(),
        Readiness::Claimed => "open, claimed".to_owned(),
        Readiness::Closed => t.state.as_str().to_owned(),
        Readiness::Epic => "open, an epic (done when its children are)".to_owned(),
    };
    out.line(format!("{}  {}  {}", t.id, t.priority, t.title))?;
    out.line(format!("  state:   {}", paint::state(&status)))?;
    if let Some(reason) = &t.reason {
        // A reason may run over several lines (an agent's message): the first on the field's
        // line, the rest beneath it.
        let mut lines = reason.lines();
        out.line(format!("  reason:  {}", lines.next().unwrap_or("")))?;
        out.body("           ", &lines.collect::<Vec<_>>().join("\n"))?;
    }
    if let Some(f) = &failure {
        out.line(format!("  last:    {}", f.what))?;
        out.line(format!("           its output: {}", f.log.display()))?;
        for l in &f.tail {
            out.line(format!("           │ {l}"))?;
        }
    }
    if let Some(t) = &taken {
        out.line(format!("  worktree: {} (try {}, taken over by {})", t.worktree, t.number, t.by))?;
    }
    for (n, l) in super::answer::lines("", &ways).into_iter().enumerate() {
        out.line(format!("  {:<9}{l}", if n == 0 { "answer:" } else { "" }))?;
    }
    if !t.after.is_empty() {
        let deps: Vec<String> = t.after.iter().map(|d| board.dependency(d)).collect();
        out.line(format!("  after:   {}", deps.join(", ")))?;
    }
    if let Some(parent) = &t.parent {
        let line = match board.get(parent) {
            Some(row) => {
                let title = row.task().map(|p| p.title).unwrap_or_default();
                format!("{parent} ({}) {}", row.state.as_str(), super::human::short(&title, 60))
            }
            None => format!("{parent} (missing)"),
        };
        out.line(format!("  parent:  {line}"))?;
    }
    if t.epic {
        let children = board.children(&t.id);
        let progress = git_loop::backlog::graph::Progress::of(&children);
        out.line(format!(
            "  children: {progress} done{}",
            match progress.cancelled {
                0 => String::new(),
                n => format!(", {n} cancelled"),
            }
        ))?;
        for child in &children {
            let title = child.task().map(|c| c.title).unwrap_or_default();
            let state = board.shown_state(child.id(), child.state);
            out.line(format!("           {}  {:<8} {}", child.id(), state, super::human::short(&title, 60)))?;
        }
    }
    for link in &t.links {
        let (kind, target) = link.split_once(':').unwrap_or(("link", link));
        let state = board.get(target).map(|r| format!(" ({})", r.state.as_str())).unwrap_or_default();
        out.line(format!("  {:<9}{target}{state}", format!("{kind}:")))?;
    }
    if !t.labels.is_empty() {
        out.line(format!("  labels:  {}", t.labels.join(", ")))?;
    }
    if !t.agents.is_empty() {
        out.line(format!("  agents:  {}", t.agents.join(", ")))?;
    }
    if let Some(assigned) = &t.assigned {
        let why = assigned.r#override.as_deref().map(|o| format!(" (rule overridden: {o})")).unwrap_or_default();
        out.line(format!("  agent:   {}{why}", assigned.agent))?;
    }
    if !t.together.is_empty() {
        out.line(format!("  race:    {} (pick {})", t.together.join(", "), t.pick.as_deref().unwrap_or("first")))?;
    }
    if !t.fallback.is_empty() {
        out.line(format!("  fallback: {}", t.fallback.join(", ")))?;
    }
    if !t.forbid.is_empty() {
        out.line(format!("  forbid:  {}", t.forbid.join(", ")))?;
    }
    if !t.reviewers.is_empty() {
        out.line(format!("  reviewers: {}", t.reviewers.join(", ")))?;
    }
    if let Some(r) = &review {
        out.line(format!("  review:  try {} · {}", r.number, review_line(r)))?;
        let mut comments = r.comments.lines().skip(1).peekable();
        if comments.peek().is_some() && r.verdict != "approve" {
            out.body("           ", &comments.collect::<Vec<_>>().join("\n"))?;
        }
    }
    if let (Some(held), Some(lease)) = (board.claim(&t.id), board.lease(&t.id)) {
        out.line(format!("  claim:   {}, {}", held.record.holder, human::lease(&lease)))?;
    }
    if let Some(c) = &t.completion {
        let commit =
            c.commit.as_deref().map(|c| format!(" at {}", git_loop::ids::short_commit(&c))).unwrap_or_default();
        out.line(format!("  done:    {} by {}{commit}", relative(c.at, now), c.by))?;
        if c.unchecked {
            out.line("           on its agent's word: no checks were set for the walk")?;
        }
        if let Some(message) = &c.message {
            out.body("           ", message)?;
        }
    }
    if let Some((_, line)) = &landing {
        out.line(format!("  landing: {line}"))?;
    }
    if let Some(request) = &request {
        out.line(format!("  request: {}", super::text::line(&request.line())))?;
    }
    for w in &at_work {
        out.line(format!("  at work: {}", at_work_line(w)))?;
    }
    if let Some(origin) = &t.origin {
        out.line(format!("  from:    {} {}", origin.format, origin.id))?;
    }
    if spent.sessions > 0 {
        out.line(format!(
            "  spent:   {} over {} session{}",
            spent.describe(),
            spent.sessions,
            if spent.sessions == 1 { "" } else { "s" }
        ))?;
    }
    out.line(format!("  created: {} by {}", relative(t.created_at, now), t.created_by))?;
    if !t.body.trim().is_empty() {
        out.line("")?;
        out.body("  ", &t.body)?;
    }
    Ok(0)
}

/// Where a task's work stands with the landing queue, as JSON and as a line for people.
fn landing_rendered(landing: &ops::show::Landing) -> (serde_json::Value, String) {
    use ops::show::LandingState;
    let into = &landing.into;
    let line = match &landing.state {
        LandingState::Landed => format!("on {into}"),
        LandingState::Noted => format!(
            "its note says it landed on {into}, but {into} as this clone knows it does not hold its work (fetch {into}, then look again)"
        ),
        LandingState::Queued => format!("number {} in the queue to {into}", landing.position.unwrap_or_default()),
        LandingState::Waiting => format!("waits for {} to land on {into} first", landing.waiting_for.join(", ")),
        LandingState::Failed => format!("its landing on {into} failed (see the reason above)"),
        LandingState::NotQueued => format!("not on {into}; it lands once it is done"),
    };
    let failure = landing.failure.as_ref().map(|(at, failed)| {
        serde_json::json!({ "at": at, "cause": failed.cause, "reason": failed.reason, "paths": failed.paths, "log": failed.log })
    });
    let json = serde_json::json!({
        "into": into, "state": landing.state.word(), "position": landing.position,
        "waiting_for": landing.waiting_for, "last_failure": failure,
    });
    (json, line)
}
