//! `git loop mission run`: command a mission, one child walk per project.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::env::Env;
use crate::cli::run::AgentArgs;
use crate::cli::text;
use git_loop::error::usage;
use git_loop::ids::Span;
use git_loop::mission::record::Status;
use git_loop::mission::{self, Event, MissionId, Observer, Stop};

/// Command a mission: walk each project of the current wave with a child 'git loop run',
/// wave after wave, until every project is done.
///
/// Each child walk is limited to the mission's tasks in its project, and its lines appear here
/// prefixed with the project's name. When it ends, its journaled end is read and the
/// mission's tasks there are checked; a project whose tasks are not all done pauses the
/// mission with the reason. A child that ends without journaling how it ended is run again,
/// three times at most, then the project fails. Run it again to resume where it stopped.
///
/// Exit codes: 0 mission complete, 1 budget spent or failure, 2 usage, 3 another commander
/// runs this mission, 4 paused (a project failed or is incomplete), 77 agent program missing,
/// 130 interrupted or cancelled.
///
/// Example: git loop mission run v2 --agent claude --max-iterations 50
#[derive(Args)]
pub struct RunArgs {
    /// The mission's id.
    id: MissionId,
    #[command(flatten)]
    agent: AgentArgs,
    /// Stop after closing this many tasks in all projects together.
    #[arg(long, value_name = "N")]
    max_units: Option<u32>,
    /// Stop after this many sessions in all projects together.
    #[arg(long, value_name = "N")]
    max_iterations: Option<u32>,
    /// Stop once the sessions of every project's walks have spent this many dollars together;
    /// each child walk is given what is left (default: loop.budgetUsd, else none).
    #[arg(long, value_name = "USD")]
    budget_usd: Option<String>,
    /// Stop once they have spent this many tokens together; each child walk is given what is left.
    #[arg(long, value_name = "N")]
    budget_tokens: Option<u64>,
    /// Sessions per task before it fails (passed to each child walk).
    #[arg(long, value_name = "N")]
    per_unit_dispatches: Option<u32>,
    /// Stop a session after this long (passed to each child walk).
    #[arg(long, value_name = "DURATION")]
    session_timeout: Option<Span>,
    /// Between asking a session to stop and killing it (passed to each child walk).
    #[arg(long, value_name = "DURATION")]
    grace: Option<Span>,
    /// Tasks worked at once in each project (passed to each child walk).
    #[arg(long, value_name = "N")]
    parallel: Option<u32>,
    /// Stream events as JSON lines (the children's too, wrapped).
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: RunArgs) -> Result<u8> {
    if args.max_units == Some(0) || args.max_iterations == Some(0) || args.budget_tokens == Some(0) {
        return Err(usage("a budget of 0 would do nothing").hint("leave it out for no limit").into());
    }
    if args.parallel == Some(0) {
        return Err(usage("--parallel must be at least 1").hint("--parallel 1 runs one session at a time").into());
    }
    if args.per_unit_dispatches == Some(0) {
        return Err(usage("--per-unit-dispatches must be at least 1")
            .hint("it is how many sessions a task may have; leave it out for the default")
            .into());
    }
    let store = env.open()?;
    let agent = args.agent.choose(&store, None)?;
    let budget_usd = git_loop::ops::config::budget_usd(&store, args.budget_usd.as_deref())?;
    let seconds = |span: Option<Span>| span.map(|s| s.0.num_seconds().max(1) as u64);
    let opts = mission::Options {
        agent,
        max_units: args.max_units,
        max_iterations: args.max_iterations,
        budget_usd,
        budget_tokens: args.budget_tokens,
        per_unit_dispatches: args.per_unit_dispatches,
        session_timeout_s: seconds(args.session_timeout),
        grace_s: seconds(args.grace),
        parallel: args.parallel,
        json: args.json,
    };
    let observer = Progress { json: args.json, ctx: env.ctx.clone(), width: AtomicUsize::new(0) };
    let cancel = AtomicBool::new(false);
    let ended = mission::run(&store, &env.ctx, env.exe.clone(), &args.id, opts, &observer, &cancel)?;
    if let Stop::Paused { .. } = ended.stop {
        if !args.json {
            crate::cli::output::stderr_line(format!(
                "hint: see 'git loop mission show {}'; fix what is named, then resume with 'git loop mission run {}'",
                args.id, args.id
            ));
        }
    }
    Ok(crate::cli::exit::of_mission(&ended.stop))
}

/// Prints what the commander does, one line per event, and the children's lines prefixed
/// with their project; or JSON lines.
struct Progress {
    json: bool,
    ctx: git_loop::context::Context,
    /// The longest project name, to align the children's lines.
    width: AtomicUsize,
}

impl Progress {
    /// One line of the commander's: what it quotes (reasons, a project's walk's words) is
    /// escaped as every line for people is.
    fn say(&self, said: String) {
        let now = self.ctx.now().with_timezone(&chrono::Local).format("%H:%M:%S");
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{now}  {}", text::line(&said));
        let _ = out.flush();
    }

    fn json_line(&self, mut value: serde_json::Value) {
        value["at"] = json!(self.ctx.now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    }
}

fn plural(n: u32, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

impl Observer for Progress {
    fn event(&self, event: &Event) {
        if let Event::Started { waves, .. } = event {
            let width = waves.iter().flat_map(|(_, ps)| ps.iter().map(String::len)).max().unwrap_or(0);
            self.width.store(width, Ordering::SeqCst);
        }
        if self.json {
            self.json_line(event_json(event));
            return;
        }
        match event {
            Event::Started { mission, commander, waves, agent } => {
                let projects: usize = waves.iter().map(|(_, ps)| ps.len()).sum();
                self.say(format!(
                    "mission {mission} · commander {commander} · agent {agent} · {projects} project{} in {} wave{}",
                    if projects == 1 { "" } else { "s" },
                    waves.len(),
                    if waves.len() == 1 { "" } else { "s" }
                ))
            }
            Event::Wave { wave, projects } => self.say(format!("wave {wave}: {}", projects.join(", "))),
            Event::Dispatched { project, attempt, key, dir, .. } => {
                let again = if *attempt > 1 { format!(" (dispatch {attempt})") } else { String::new() };
                self.say(format!("{project}: walking {}{again} · termination key {key}", dir.display()))
            }
            Event::Output { project, line, stderr } => {
                // A child's line, passed on: its stderr may hold whatever its agents printed.
                let width = self.width.load(Ordering::SeqCst);
                let line = text::line(line);
                let project = text::line(project);
                if *stderr {
                    eprintln!("{project:<width$} | {line}");
                } else {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{project:<width$} | {line}");
                    let _ = out.flush();
                }
            }
            Event::Unfinished { project, note, .. } => self.say(format!("{project}: {note}")),
            Event::Closed { project, status, outcome } => {
                let mut parts = vec![status.as_str().to_owned()];
                if outcome.tasks_total > 0 {
                    parts.push(format!("{} of {} tasks done", outcome.tasks_done, outcome.tasks_total));
                }
                if let Some(sessions) = outcome.sessions {
                    parts.push(plural(sessions, "session"));
                }
                let reason = match (&outcome.reason, status) {
                    (Some(reason), Status::Incomplete | Status::Failed) => format!(": {reason}"),
                    _ => String::new(),
                };
                self.say(format!("{project}: {}{reason}", parts.join(" · ")))
            }
            Event::Left { project, why } => self.say(format!("{project}: left pending: {why}")),
            Event::Finished { stop } => {
                let text = match stop {
                    Stop::Complete => "complete: every project is done".to_owned(),
                    Stop::Budget { reason } => format!("stopped: a budget ran out ({reason})"),
                    Stop::Paused { reason, .. } => format!("paused: {reason}"),
                    Stop::Interrupted => "interrupted; the running walk was stopped and its work committed".to_owned(),
                    Stop::Cancelled { reason: Some(reason) } => format!("cancelled: {reason}"),
                    Stop::Cancelled { reason: None } => "cancelled".to_owned(),
                };
                self.say(format!("mission {text}"))
            }
        }
    }
}

/// An event as a JSON object (`event` names its kind).
fn event_json(event: &Event) -> serde_json::Value {
    match event {
        Event::Started { mission, commander, waves, agent } => json!({
            "event": "mission_started", "mission": mission, "commander": commander, "agent": agent,
            "waves": waves.iter().map(|(n, ps)| json!({ "wave": n, "projects": ps })).collect::<Vec<_>>(),
        }),
        Event::Wave { wave, projects } => json!({ "event": "wave", "wave": wave, "projects": projects }),
        Event::Dispatched { project, wave, attempt, key, dir } => json!({
            "event": "project_dispatched", "project": project, "wave": wave, "attempt": attempt, "key": key, "dir": dir,
        }),
        Event::Output { project, line, stderr } => {
            let line = serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|_| json!(line));
            json!({ "event": "output", "project": project, "stream": if *stderr { "stderr" } else { "stdout" }, "line": line })
        }
        Event::Unfinished { project, attempt, note } => {
            json!({ "event": "unfinished", "project": project, "attempt": attempt, "note": note })
        }
        Event::Closed { project, status, outcome } => {
            json!({ "event": "project_closed", "project": project, "status": status.as_str(), "outcome": outcome })
        }
        Event::Left { project, why } => json!({ "event": "project_left", "project": project, "reason": why }),
        Event::Finished { stop } => {
            let reason = match stop {
                Stop::Budget { reason } | Stop::Paused { reason, .. } => Some(reason.clone()),
                Stop::Cancelled { reason } => reason.clone(),
                Stop::Complete | Stop::Interrupted => None,
            };
            let project = match stop {
                Stop::Paused { project, .. } => Some(project.clone()),
                _ => None,
            };
            json!({ "event": "mission_ended", "stop": stop.word(), "exit_code": crate::cli::exit::of_mission(stop), "reason": reason, "project": project })
        }
    }
}
