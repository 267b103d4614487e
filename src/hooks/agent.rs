//! What an agent CLI's hook reports, and what the loop does with it: `git loop hook
//! claude-code` (Claude Code's Stop, StopFailure and SessionEnd hooks, JSON on stdin), `git
//! loop hook codex` (Codex's `notify` program, one JSON argument; or a Codex hook, JSON on
//! stdin) and `git loop hook generic` (any agent).
//!
//! Inside a loop session (found by `$GIT_LOOP_SESSION`) an event:
//! 1. records the CLI's own session id in the session's record (`agent_session`), which is
//!    what a resume command needs — only a plausible id (`ids::AgentSessionId`): another is
//!    dropped, and the problem logged and journaled;
//! 2. at the end of a turn (Stop, StopFailure, Codex's turn-complete, a generic stop), commits
//!    the worktree to the try branch (commit-on-stop), so a turn's work is safe before the
//!    process even exits;
//! 3. journals an `agent_hook` event in the session's own chain.
//!
//! The same event delivered twice (the hook installed for the user and passed by the loop
//! too) is handled once: the first delivery leaves `hook-events/<digest>` in the session's
//! directory. Nothing here may break an agent's session, so a step that fails is reported in
//! the outcome (and journaled) while the others go on; the caller logs and exits 0.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde_json::{json, Map, Value};

use crate::agent::record;
use crate::context::Context;
use crate::ids::{AgentSessionId, TaskId};
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, NewEvent};
use crate::store::Store;
use crate::tries::commit::{self, Committed};
use crate::tries::{self, Try};

/// Which kind of hook reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    ClaudeCode,
    Codex,
    Generic,
}

impl Source {
    /// The source a name says (`claude-code`, `codex`, `generic`).
    pub fn from_name(name: &str) -> Option<Source> {
        [Source::ClaudeCode, Source::Codex, Source::Generic].into_iter().find(|s| s.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Source::ClaudeCode => "claude-code",
            Source::Codex => "codex",
            Source::Generic => "generic",
        }
    }
}

/// One event an agent CLI reported through its hook.
#[derive(Debug, Clone)]
pub struct AgentEvent {
    pub source: Source,
    /// `Stop`, `StopFailure`, `SessionEnd`, `agent-turn-complete`, or what a generic hook said.
    pub event: String,
    /// The CLI's own session (or thread) id.
    pub agent_session: Option<String>,
    pub transcript: Option<String>,
    pub cwd: Option<String>,
    /// Whatever else is worth keeping: the end reason, the error, the turn id, the last
    /// message (shortened).
    pub detail: Map<String, Value>,
    /// Identifies this delivery's payload, so a second delivery of the same event is skipped.
    pub digest: String,
}

impl AgentEvent {
    /// Whether this event ends a turn (and so the worktree is committed).
    pub fn ends_turn(&self) -> bool {
        matches!(self.event.as_str(), "Stop" | "StopFailure" | "SubagentStop" | "AfterAgent" | "agent-turn-complete")
            || (self.source == Source::Generic && self.event.eq_ignore_ascii_case("stop"))
    }
}

/// The longest payload read (a hook's JSON is a few hundred bytes).
const MAX_PAYLOAD: usize = 1 << 20;

/// Parse a Claude-Code-shaped hook payload (Claude Code; Codex and Gemini hooks send the
/// same fields): `session_id`, `transcript_path`, `cwd`, `hook_event_name`, …
pub fn parse_hook_payload(source: Source, bytes: &[u8]) -> Result<AgentEvent> {
    anyhow::ensure!(bytes.len() <= MAX_PAYLOAD, "the hook's input is larger than {MAX_PAYLOAD} bytes");
    let value: Value = serde_json::from_slice(bytes).context("the hook's input is not JSON")?;
    let text = |k: &str| value.get(k).and_then(Value::as_str).map(ToOwned::to_owned);
    let event = text("hook_event_name").context("the hook's input has no 'hook_event_name'")?;
    let mut detail = Map::new();
    for key in ["reason", "error", "turn_id", "prompt_id", "source", "model"] {
        if let Some(v) = value.get(key).filter(|v| !v.is_null()) {
            detail.insert(key.into(), v.clone());
        }
    }
    if let Some(last) = text("last_assistant_message").or_else(|| text("prompt_response")) {
        detail.insert("last_message".into(), json!(shorten(&last, 200)));
    }
    let agent_session = text("session_id").filter(|s| !s.is_empty());
    let digest = match (&agent_session, text("turn_id")) {
        // Codex's Stop hook and its notify program report the same turn differently.
        (Some(session), Some(turn)) if event == "Stop" => turn_digest(session, &turn),
        _ => digest(bytes),
    };
    Ok(AgentEvent {
        source,
        event,
        agent_session,
        transcript: text("transcript_path"),
        cwd: text("cwd"),
        detail,
        digest,
    })
}

/// Parse what Codex passes its `notify` program: one JSON argument,
/// `{"type":"agent-turn-complete","thread-id":…,"turn-id":…,"cwd":…,"last-assistant-message":…}`.
pub fn parse_codex_notify(arg: &str) -> Result<AgentEvent> {
    anyhow::ensure!(arg.len() <= MAX_PAYLOAD, "the notification is larger than {MAX_PAYLOAD} bytes");
    let value: Value = serde_json::from_str(arg).context("the notification is not JSON")?;
    let text = |k: &str| value.get(k).and_then(Value::as_str).map(ToOwned::to_owned);
    let event = text("type").context("the notification has no 'type'")?;
    let mut detail = Map::new();
    let agent_session = text("thread-id").filter(|s| !s.is_empty());
    let digest = match (&agent_session, text("turn-id")) {
        (Some(session), Some(turn)) => turn_digest(session, &turn),
        _ => digest(arg.as_bytes()),
    };
    if let Some(turn) = text("turn-id") {
        detail.insert("turn_id".into(), json!(turn));
    }
    if let Some(client) = text("client") {
        detail.insert("client".into(), json!(client));
    }
    if let Some(last) = text("last-assistant-message") {
        detail.insert("last_message".into(), json!(shorten(&last, 200)));
    }
    Ok(AgentEvent { source: Source::Codex, event, agent_session, transcript: None, cwd: text("cwd"), detail, digest })
}

/// A generic hook's event: its name, the CLI's session id if the caller knows it, and an
/// optional Claude-shaped JSON payload (whose fields fill in what was not given).
pub fn generic(event: &str, agent_session: Option<String>, payload: Option<&[u8]>, nonce: &str) -> AgentEvent {
    let parsed = payload.filter(|p| !p.trim_ascii().is_empty()).and_then(|p| {
        let mut with_name: Value = serde_json::from_slice(p).ok()?;
        if with_name.get("hook_event_name").is_none() {
            with_name.as_object_mut()?.insert("hook_event_name".into(), json!(event));
        }
        parse_hook_payload(Source::Generic, &serde_json::to_vec(&with_name).ok()?).ok()
    });
    match parsed {
        Some(mut e) => {
            e.event = event.to_owned();
            e.agent_session = agent_session.or(e.agent_session);
            e
        }
        // Without a payload nothing tells two deliveries apart but the call itself.
        None => AgentEvent {
            source: Source::Generic,
            event: event.to_owned(),
            agent_session,
            transcript: None,
            cwd: None,
            detail: Map::new(),
            digest: digest(format!("{event}\0{nonce}").as_bytes()),
        },
    }
}

/// The loop session a hook runs in, from the session contract's environment.
#[derive(Debug, Clone)]
pub struct Session {
    pub key: String,
    pub task: Option<String>,
    pub try_number: Option<u32>,
}

/// What handling an event did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The same event was handled already (the hook is installed twice).
    pub duplicate: bool,
    /// The CLI's session id now in the session's record.
    pub recorded: Option<String>,
    /// The commit made on the try branch, if any.
    pub commit: Option<String>,
    /// Steps that failed (each also journaled with the event).
    pub problems: Vec<String>,
}

/// The session directory of `session` in `store`'s loop state.
pub fn session_dir(store: &Store, session: &str) -> Result<PathBuf> {
    Ok(record::dir(&store.loop_dir()?, session))
}

/// Handle one event of the agent in loop session `session`.
pub fn handle(store: &Store, ctx: &Context, session: &Session, event: &AgentEvent) -> Result<Outcome> {
    let writer = crate::ids::session_writer(&session.key)?;
    let loop_dir = store.loop_dir()?;
    let dir = record::dir(&loop_dir, &session.key);
    anyhow::ensure!(
        dir.is_dir(),
        "session '{}' has no directory in this repository ('{}')",
        session.key,
        dir.display()
    );
    let mut outcome = Outcome::default();
    if !first_delivery(&dir, &event.digest)? {
        outcome.duplicate = true;
        return Ok(outcome);
    }
    // The id ends up in the resume command a person pastes and in transcript paths: one that
    // is not a plausible id is dropped (and said so), never recorded nor journaled.
    let mut event = event.clone();
    if let Some(Err(refusal)) = event.agent_session.as_deref().map(str::parse::<AgentSessionId>) {
        outcome.problems.push(format!("not recorded: {}", refusal.message));
        event.agent_session = None;
    }
    let event = &event;
    let mut agent_name = None;
    if let Some(id) = &event.agent_session {
        match record_agent_session(&loop_dir, &session.key, id) {
            Ok(name) => {
                outcome.recorded = Some(id.clone());
                agent_name = name;
            }
            Err(err) => outcome.problems.push(format!("could not record the agent's session id: {err:#}")),
        }
    }
    if agent_name.is_none() {
        agent_name = record::read(&loop_dir, &session.key).map(|r| r.agent);
    }
    if event.ends_turn() {
        match commit_turn(store, ctx, session, event, agent_name.as_deref().unwrap_or(event.source.name())) {
            Ok(Some(Committed::Commit { id, .. })) | Ok(Some(Committed::Adopted(id))) => {
                outcome.commit = Some(id.to_string())
            }
            Ok(_) => {}
            Err(err) => outcome.problems.push(format!("could not commit the worktree: {err:#}")),
        }
    }
    let (kind, data) = Recorded::AgentHook(events::AgentHook {
        agent: event.source.name().to_owned(),
        event: event.event.clone(),
        agent_session: event.agent_session.clone(),
        commit: outcome.commit.clone(),
        transcript: event.transcript.clone(),
        cwd: event.cwd.clone(),
        problems: outcome.problems.clone(),
        detail: event.detail.clone(),
    })
    .into_parts();
    journal::append(
        store,
        ctx,
        &writer,
        NewEvent { kind, task: session.task.clone(), session: Some(session.key.clone()), data },
    )?;
    Ok(outcome)
}

/// Journal that a hook failed before it could handle its event (in the session's chain).
pub fn journal_failure(store: &Store, ctx: &Context, session: &Session, source: Source, error: &str) -> Result<()> {
    let writer = crate::ids::session_writer(&session.key)?;
    let (kind, data) =
        Recorded::AgentHookFailed(events::AgentHookFailed { agent: source.name().to_owned(), error: error.to_owned() })
            .into_parts();
    journal::append(
        store,
        ctx,
        &writer,
        NewEvent { kind, task: session.task.clone(), session: Some(session.key.clone()), data },
    )?;
    Ok(())
}

/// Journal, in the session's own chain, that session `session` (unconfined: it writes the
/// journal itself) ran a command it may not, and that it was refused (`cli::inside`).
pub fn journal_overreach(
    store: &Store,
    ctx: &Context,
    session: &str,
    command: &str,
    target: Option<String>,
    argv: Vec<String>,
) -> Result<()> {
    let writer = crate::ids::session_writer(session)?;
    let (kind, data) = Recorded::AgentOverreach(events::AgentOverreach {
        session: session.to_owned(),
        command: shorten(command, 200),
        target: target.map(|t| shorten(&t, 200)),
        argv: argv.iter().take(20).map(|a| shorten(a, 200)).collect(),
        detail: None,
        confined: false,
    })
    .into_parts();
    journal::append(
        store,
        ctx,
        &writer,
        NewEvent { kind, task: ctx.session.task.clone(), session: Some(session.to_owned()), data },
    )?;
    Ok(())
}

/// Append one line to the session's `hook.log` (best effort: it is where failures go when
/// nothing else can take them).
pub fn log(dir: &Path, at: chrono::DateTime<chrono::Utc>, line: &str) {
    use std::io::Write as _;
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("hook.log")) {
        let _ =
            writeln!(file, "{} {}", at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), line.replace('\n', " "));
    }
}

/// Whether this is the first delivery of the event with `digest` to the session: the first
/// one creates its marker file (create-new is atomic, so of two concurrent deliveries exactly
/// one goes on).
fn first_delivery(dir: &Path, digest: &str) -> Result<bool> {
    let events = dir.join("hook-events");
    std::fs::create_dir_all(&events).with_context(|| format!("could not create '{}'", events.display()))?;
    match std::fs::OpenOptions::new().write(true).create_new(true).open(events.join(digest)) {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(err) => Err(err).with_context(|| format!("could not write in '{}'", events.display())),
    }
}

/// Put the CLI's session id in the session's record; returns the record's agent name. The
/// walk writes the record right after starting the agent, so a hook that fires sooner waits
/// for it a little.
fn record_agent_session(loop_dir: &Path, session: &str, id: &str) -> Result<Option<String>> {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut rec = loop {
        if let Some(rec) = record::read(loop_dir, session) {
            break rec;
        }
        anyhow::ensure!(Instant::now() < deadline, "session '{session}' has no record yet");
        std::thread::sleep(Duration::from_millis(25));
    };
    if rec.agent_session.as_deref() != Some(id) {
        rec.agent_session = Some(id.to_owned());
        record::write(loop_dir, &rec)?;
    }
    Ok(Some(rec.agent))
}

/// Commit what the worktree holds to the session's try branch.
fn commit_turn(
    store: &Store,
    ctx: &Context,
    session: &Session,
    event: &AgentEvent,
    agent: &str,
) -> Result<Option<Committed>> {
    let (Some(task), Some(number)) = (&session.task, session.try_number) else {
        return Ok(None);
    };
    let task: TaskId = task.parse()?;
    let try_ = Try::describe(&task, number, &tries::worktrees_root(store)?);
    let author = gix::actor::Signature {
        name: agent.into(),
        email: format!("{agent}@agent.invalid").as_str().into(),
        time: gix::date::Time { seconds: ctx.now().timestamp(), offset: 0 },
    };
    let message = format!(
        "loop: work of session {key} at its agent's {what} on {task}\n\nTask: {task}\nTry: {number}\nSession: {key}\nAgent: {agent}\nStopped: the agent's {what} hook ({source})\n",
        key = session.key,
        what = event.event,
        source = event.source.name(),
    );
    Ok(Some(commit::commit_on_stop(store, &try_, &author, &message)?))
}

/// The digest of the end of one turn, however it was reported.
fn turn_digest(session: &str, turn: &str) -> String {
    digest(format!("turn-end\0{session}\0{turn}").as_bytes())
}

/// A digest of a payload: its git blob id (no other hash is at hand, and this one is fine).
fn digest(bytes: &[u8]) -> String {
    gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, bytes)
        .map(|id| id.to_string())
        .unwrap_or_else(|_| crate::ids::random_base32(20))
}

fn shorten(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_stop_payload_is_read() {
        let payload = br#"{"session_id":"a84694c7-ecf9-421e-ac15-d61f519116bf","transcript_path":"/h/.claude/projects/-w/a8.jsonl","cwd":"/w","prompt_id":"p","permission_mode":"default","hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"DONE"}"#;
        let event = parse_hook_payload(Source::ClaudeCode, payload).expect("valid");
        assert_eq!(event.event, "Stop");
        assert_eq!(event.agent_session.as_deref(), Some("a84694c7-ecf9-421e-ac15-d61f519116bf"));
        assert!(event.ends_turn());
        assert_eq!(event.detail.get("last_message"), Some(&json!("DONE")));
    }

    #[test]
    fn a_codex_notification_is_read() {
        let arg = r#"{"type":"agent-turn-complete","thread-id":"01a22931-9b05","turn-id":"t1","cwd":"/w","client":"codex_exec","input-messages":["hi"],"last-assistant-message":"DONE"}"#;
        let event = parse_codex_notify(arg).expect("valid");
        assert_eq!(
            (event.event.as_str(), event.agent_session.as_deref()),
            ("agent-turn-complete", Some("01a22931-9b05"))
        );
        assert!(event.ends_turn());
    }

    #[test]
    fn session_end_does_not_end_a_turn() {
        let payload = br#"{"session_id":"x","hook_event_name":"SessionEnd","reason":"other"}"#;
        let event = parse_hook_payload(Source::ClaudeCode, payload).expect("valid");
        assert!(!event.ends_turn());
        assert_eq!(event.detail.get("reason"), Some(&json!("other")));
    }
}
