//! `git loop watch`: a session's output as it is written, in any terminal.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::env::Env;
use super::output::stderr_line;
use git_loop::agent::record::{self, Record};
use git_loop::backlog;
use git_loop::context::Context;
use git_loop::error::usage;

/// Follow a session's output live.
///
/// Prints the last lines of the session's log, then what it writes, until the session ends
/// (like tail -f, in any terminal). Given a task: its session running on this machine, or its
/// last one here, with a note that it ended. Sessions of other machines have no log here.
///
/// Example: git loop watch t-4f2a
#[derive(Args)]
pub struct WatchArgs {
    /// A session key (s-…) or a task (id or unique prefix).
    #[arg(value_name = "SESSION|TASK")]
    target: String,
    /// How many lines of what is already written to show first.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10)]
    lines: usize,
}

/// The session of a task on this machine: the running one if there is one, else the last to
/// start; and whether it runs.
pub fn session_of(loop_dir: &Path, ctx: &Context, task: &str) -> Option<(Record, bool)> {
    let mine: Vec<Record> = record::all(loop_dir).into_iter().filter(|r| r.task == task).collect();
    let running = mine
        .iter()
        .filter(|r| is_running(r, ctx))
        .filter(|r| r.role.is_none())
        .max_by_key(|r| r.started_at)
        .or_else(|| mine.iter().filter(|r| is_running(r, ctx)).max_by_key(|r| r.started_at));
    match running {
        Some(r) => Some((r.clone(), true)),
        None => mine.into_iter().max_by_key(|r| r.started_at).map(|r| (r, false)),
    }
}

/// Whether a session still runs: not recorded as ended, and its guard alive.
pub fn is_running(r: &Record, ctx: &Context) -> bool {
    r.ended_at.is_none() && record::is_alive(r.pid, r.pid_start, &r.boot_id, &ctx.boot_id)
}

pub fn run(env: &Env, args: WatchArgs) -> Result<u8> {
    let store = env.open()?;
    let loop_dir = store.loop_dir()?;
    let given = if args.target.starts_with("s-") { record::read(&loop_dir, &args.target) } else { None };
    let (session, running) = match given {
        Some(r) => {
            let running = is_running(&r, &env.ctx);
            (r, running)
        }
        None => {
            let id = backlog::resolve(&store, &args.target).map_err(|err| {
                if args.target.starts_with("s-") {
                    usage(format!("no session '{}' ran on this machine", args.target))
                        .hint("'git loop status' lists the running sessions; 'git loop log' every session's events")
                        .into()
                } else {
                    err
                }
            })?;
            session_of(&loop_dir, &env.ctx, id.as_str()).ok_or_else(|| {
                git_loop::error::refused(format!("no session of {id} ran on this machine"))
                    .hint(format!("'git loop show {id}' says where it stands; 'git loop run --task {id}' starts one"))
            })?
        }
    };
    let log = record::dir(&loop_dir, &session.session).join("log");
    if !running {
        stderr_line(format!(
            "{} · session {} ({}, try {}) ended{}; its last output:",
            session.task,
            session.session,
            session.agent,
            session.try_number,
            session.ended.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
        ));
    } else {
        stderr_line(format!(
            "{} · session {} ({}, try {}) · following its output until it ends (Ctrl-C to stop watching)",
            session.task, session.session, session.agent, session.try_number
        ));
    }
    let mut out = std::io::stdout().lock();
    let mut at = print_tail(&log, args.lines, &mut out)?;
    if !running {
        return Ok(super::exit::OK);
    }
    loop {
        // Read what came, then look whether it has ended: what it wrote before ending is read
        // by the next round, which is the last.
        let now = record::read(&loop_dir, &session.session).unwrap_or_else(|| session.clone());
        let ended = !is_running(&now, &env.ctx);
        at = print_from(&log, at, ended, &mut out)?;
        if ended {
            let r = record::read(&loop_dir, &session.session).unwrap_or(session);
            stderr_line(format!(
                "{} · session {} ended{}",
                r.task,
                r.session,
                r.ended.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
            ));
            return Ok(super::exit::OK);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Print the last `n` lines of what the log holds now; returns where they end.
fn print_tail(log: &Path, n: usize, out: &mut impl std::io::Write) -> Result<u64> {
    let Ok(mut file) = std::fs::File::open(log) else { return Ok(0) };
    let len = file.metadata()?.len();
    let from = len.saturating_sub(64 * 1024);
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(len - from).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let text = if from > 0 { text.split_once('\n').map_or("", |(_, rest)| rest) } else { &text };
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(n)..] {
        writeln!(out, "{}", super::text::body_line(line))?;
    }
    out.flush()?;
    Ok(len)
}

/// Print the whole lines written since `at` (with `all`, the last one too, ended or not);
/// returns where they end.
fn print_from(log: &Path, at: u64, all: bool, out: &mut impl std::io::Write) -> Result<u64> {
    let Ok(mut file) = std::fs::File::open(log) else { return Ok(at) };
    let len = file.metadata()?.len();
    if len < at {
        return Ok(len);
    }
    file.seek(SeekFrom::Start(at))?;
    let mut bytes = Vec::new();
    file.take(len - at).read_to_end(&mut bytes)?;
    // A line still being written waits for its end.
    let end = match bytes.iter().rposition(|b| *b == b'\n') {
        _ if all && !bytes.is_empty() => bytes.len(),
        Some(end) => end,
        None => return Ok(at),
    };
    for line in String::from_utf8_lossy(&bytes[..end]).trim_end_matches('\n').split('\n') {
        writeln!(out, "{}", super::text::body_line(line))?;
    }
    out.flush()?;
    Ok((at + end as u64 + 1).min(len))
}
