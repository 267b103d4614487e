//! Writing to stdout: data only (everything else goes to stderr). A closed pipe surfaces as
//! an `io::Error` of kind BrokenPipe, which the reporter turns into exit 0.
//!
//! Human output goes through `text::line` here, whatever it holds: a line is one line, and
//! nothing in it acts on the terminal (see `text`). JSON is written exactly.

use std::fmt::Display;
use std::io::{self, Write};

use anyhow::Result;
use serde::Serialize;
use serde_json::{json, Value};

use super::{paint, remote_error, text};
use git_loop::backlog::{Board, Readiness};
use git_loop::error::find_refusal;
use git_loop::store::claim::Held;
use git_loop::store::lease::Lease;
use git_loop::store::task::Snapshot;

/// Locked stdout.
pub struct Out {
    out: Box<dyn Write>,
}

impl Out {
    pub fn new() -> Out {
        Out { out: Box::new(io::stdout().lock()) }
    }

    /// For a long listing: lines go out in blocks rather than a write each (stdout flushes every
    /// line: 100,000 tasks were 100,000 writes). `finish` flushes what is left.
    pub fn bulk() -> Out {
        Out { out: Box::new(io::BufWriter::with_capacity(64 * 1024, io::stdout().lock())) }
    }

    /// Flush what a `bulk` listing holds, its error said.
    pub fn finish(mut self) -> Result<()> {
        self.out.flush()?;
        Ok(())
    }

    /// One line for people: everything in it that could act on a terminal or break the line
    /// (a newline included) is escaped, so a blank line is `line("")`, never a `\n` inside.
    /// What [`paint`] painted in it (a state) is coloured when stdout gets colour.
    pub fn line(&mut self, text: impl Display) -> Result<()> {
        writeln!(self.out, "{}", paint::render(&text.to_string(), paint::Stream::Stdout, text::line))?;
        Ok(())
    }

    /// A blank line, then a heading.
    pub fn section(&mut self, heading: impl Display) -> Result<()> {
        self.line("")?;
        self.line(heading)
    }

    /// A multi-line body (a plan, a message), each of its lines after `indent`: its newlines
    /// and tabs stay readable, anything else that could act on a terminal is escaped.
    pub fn body(&mut self, indent: &str, body: &str) -> Result<()> {
        for line in body.lines() {
            writeln!(self.out, "{indent}{}", text::body_line(line))?;
        }
        Ok(())
    }

    /// One JSON document, pretty-printed. Buffered: stdout is line-buffered, and a long
    /// document (a list of 100,000 tasks) would otherwise cost a write per line.
    pub fn json(&mut self, value: &impl Serialize) -> Result<()> {
        let mut out = io::BufWriter::with_capacity(64 * 1024, &mut self.out);
        // serde_json wraps io errors; unwrap them so a closed pipe is seen as one (an error a
        // streamed list met while producing an item is not an io error: kept as it is).
        serde_json::to_writer_pretty(&mut out, value).map_err(|err| match err.is_io() {
            true => anyhow::Error::from(io::Error::from(err)),
            false => anyhow::anyhow!("{err}"),
        })?;
        writeln!(out)?;
        out.flush()?;
        Ok(())
    }

    /// One JSON value on one line (for streams of events).
    pub fn json_line(&mut self, value: &impl Serialize) -> Result<()> {
        serde_json::to_writer(&mut self.out, value).map_err(io::Error::from)?;
        writeln!(self.out)?;
        self.out.flush()?;
        Ok(())
    }
}

/// A JSON array written item by item as the document is written, so a list of a hundred
/// thousand tasks never stands whole in memory: the output is the same as a `Vec`'s. An item
/// that fails to be made stops the document (its error is the one reported).
pub struct Streamed<I>(std::cell::RefCell<Option<I>>);

impl<I> Streamed<I> {
    pub fn new(items: I) -> Streamed<I> {
        Streamed(std::cell::RefCell::new(Some(items)))
    }
}

impl<I, T> Serialize for Streamed<I>
where
    I: Iterator<Item = Result<T>>,
    T: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeSeq as _};
        let items = self.0.borrow_mut().take().expect("a streamed list is written once");
        let mut seq = serializer.serialize_seq(None)?;
        for item in items {
            seq.serialize_element(&item.map_err(|err| S::Error::custom(format!("{err:#}")))?)?;
        }
        seq.end()
    }
}

/// A claim record as JSON, with what this clone has watched of its lease: `status` (`live`,
/// or `stale` once seen unchanged for a whole lease), `lease_s` (the holder's lease),
/// `unchanged_s` (how long this clone has seen this very record) and `holder_gone`.
pub fn claim_json(held: &Held, lease: &Lease) -> Value {
    let mut value = serde_json::to_value(&held.record).expect("claim records serialize");
    value["status"] = json!(if lease.is_stale() { "stale" } else { "live" });
    value["object"] = json!(held.oid.to_string());
    value["lease_s"] = json!(lease.length.as_secs());
    value["unchanged_s"] = json!(lease.unchanged_for.as_secs());
    value["holder_gone"] = json!(lease.holder_gone);
    value
}

/// A task as JSON: the stored record plus what the board says about it.
pub fn task_json(board: &Board, snapshot: &Snapshot) -> Value {
    let mut value = serde_json::to_value(&snapshot.task).expect("tasks serialize");
    value["tip"] = json!(snapshot.tip.to_string());
    let t = &snapshot.task;
    let (ready, blocked_by) = match board.readiness_of(&t.id, t.state, t.after.iter().map(String::as_str)) {
        Readiness::Ready => (true, Vec::new()),
        Readiness::Blocked(deps) => (false, deps),
        Readiness::Closed | Readiness::Claimed | Readiness::Epic => (false, Vec::new()),
    };
    value["ready"] = json!(ready);
    if t.epic {
        let children = board.children(&t.id);
        let progress = git_loop::backlog::graph::Progress::of(&children);
        value["children"] = json!({
            "done": progress.done, "total": progress.total, "cancelled": progress.cancelled,
            "ids": children.iter().map(|c| c.id()).collect::<Vec<_>>(),
        });
    }
    value["status"] = json!(board.shown_state(&t.id, t.state));
    value["blocked_by"] = json!(blocked_by);
    value["claim"] = match (board.claim(&t.id), board.lease(&t.id)) {
        (Some(held), Some(lease)) => claim_json(&held, &lease),
        _ => Value::Null,
    };
    value
}

/// A writer's `--json`: the task's new state as `show --json` prints it (`task_json`), with
/// what `extra` adds.
pub fn print_task(
    store: &git_loop::store::Store,
    env: &super::Env,
    snapshot: &Snapshot,
    extra: impl FnOnce(&mut Value),
) -> anyhow::Result<u8> {
    let board = Board::load(store, &env.ctx)?;
    let mut value = task_json(&board, snapshot);
    extra(&mut value);
    Out::new().json(&value)?;
    Ok(0)
}

/// One line on stderr (a warning, a note, a hint), escaped as `Out::line` escapes stdout:
/// what it quotes may come from a record or a remote. Its label (`error:`, `warning:`,
/// `hint:`, `note:`) is coloured when stderr gets colour.
pub fn stderr_line(line: impl Display) {
    let line = line.to_string();
    eprintln!("{}", paint::render(&paint::label(&line), paint::Stream::Stderr, text::line));
}

/// Corrupt records found while reading, one warning line each on stderr (the problem text
/// names the ref).
pub fn warn_corrupt(corrupt: &[(String, String)]) {
    for (name, problem) in corrupt {
        if problem.contains(name.as_str()) {
            stderr_line(format!("warning: skipped: {problem}"));
        } else {
            stderr_line(format!("warning: skipped '{name}': {problem}"));
        }
    }
}

/// The landing queue of `status --json` and `show --json`.
pub fn landing_json(view: &git_loop::landing::View) -> serde_json::Value {
    serde_json::json!({
        "into": git_loop::refs::short_branch(&view.into),
        "target": view.tip.map(|t| t.to_string()),
        "queue": view.queue,
        "lander": view.lander.as_ref().map(|h| serde_json::json!({
            "holder": h.record.holder, "pid": h.record.pid, "host": h.record.host, "since": h.record.acquired_at,
        })),
        "last_failure": view.last_failure.as_ref().map(|(task, at, failed)| serde_json::json!({
            "task": task, "at": at, "cause": failed.cause, "reason": failed.reason, "paths": failed.paths, "log": failed.log,
        })),
        "requests": view.requests,
        "epics": view.epics.iter().map(|(branch, queue)| serde_json::json!({
            "into": git_loop::refs::short_branch(branch), "queue": queue,
        })).collect::<Vec<_>>(),
    })
}

/// A task's review rounds as JSON (`status`, `show`).
pub fn review_json(task: &str, r: &git_loop::walk::review::ReviewState) -> Value {
    json!({
        "task": task, "try": r.number, "round": r.round, "rounds": r.rounds, "reviewer": r.reviewer,
        "agent": r.agent, "verdict": r.verdict, "comments": r.comments, "tree": r.tree,
    })
}

/// "round 2 of 3 · reviewer (codex) asks for changes: add a test".
pub fn review_line(r: &git_loop::walk::review::ReviewState) -> String {
    let who = if r.agent.is_empty() || r.agent == r.reviewer {
        r.reviewer.clone()
    } else {
        format!("{} ({})", r.reviewer, r.agent)
    };
    let first = r.comments.lines().next().unwrap_or("");
    let said = match r.verdict.as_str() {
        "approve" => "approved".to_owned(),
        "changes" => format!("asks for changes: {first}"),
        "reviewing" => "is reviewing".to_owned(),
        _ => format!("gave no verdict its contract allows: {first}"),
    };
    format!("round {} of {} · {who} {said}", r.round, r.rounds)
}

/// A conflict resolver at work, as `status --json` and `show --json` give it.
pub fn resolving_json(w: &git_loop::walk::resolve::AtWork) -> Value {
    let r = w.resolving.clone().unwrap_or_default();
    json!({
        "task": w.task, "session": w.session, "role": w.role, "agent": w.agent, "try": r.number,
        "kind": r.kind, "into": r.into, "from": r.from, "paths": r.paths,
    })
}

/// A summarizer at work, as `status --json` and `show --json` give it.
pub fn summarizing_json(w: &git_loop::walk::resolve::AtWork) -> Value {
    json!({ "task": w.task, "session": w.session, "role": w.role, "agent": w.agent })
}

/// "resolver (claude) session s-… resolves the landing of t1 on main: a.txt, b.txt", or
/// "summarizer (claude) session s-… writes the landing message".
pub fn at_work_line(w: &git_loop::walk::resolve::AtWork) -> String {
    let who =
        if w.agent.is_empty() || w.agent == w.role { w.role.clone() } else { format!("{} ({})", w.role, w.agent) };
    match &w.resolving {
        Some(r) if r.kind == "dependency" => format!(
            "{who} session {} resolves the merge of {} into {}: {}",
            w.session,
            r.from,
            r.into,
            r.paths.join(", ")
        ),
        Some(r) => format!("{who} session {} resolves its landing on {}: {}", w.session, r.into, r.paths.join(", ")),
        None => format!("{who} session {} writes its landing message", w.session),
    }
}

/// Print an error on one `<level>:` line, with a `hint:` line when it has one. Messages quote
/// what was given and what records hold: escaped like every other line for people.
pub(super) fn print_error(level: &str, err: &anyhow::Error) {
    match find_refusal(err) {
        Some(refusal) => {
            stderr_line(format!("{level}: {}", refusal.message));
            if let Some(hint) = &refusal.hint {
                stderr_line(format!("hint: {hint}"));
            }
        }
        None if git_loop::store::remote::no_answer(err).is_some() => {
            let silent = git_loop::store::remote::no_answer(err).expect("checked");
            stderr_line(format!("{level}: {silent}"));
            stderr_line(
                "hint: run it again once the remote answers; what this clone holds stays here, and 'git loop sync' publishes it",
            );
        }
        None => {
            let whole = format!("{err:#}");
            match remote_error::summarize(&whole) {
                Some(line) => {
                    stderr_line(format!("{level}: {line}"));
                    stderr_line("hint: `git loop sync` retries; `git remote -v` shows the URL");
                }
                None => stderr_line(format!("{level}: {}", whole.replace('\n', " "))),
            }
        }
    }
}
