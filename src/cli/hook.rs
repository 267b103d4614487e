//! `git loop hook ...`: what the installed hooks run. Agent hooks (`claude-code`, `codex`,
//! `generic`) never fail their caller: they exit 0 whatever happens, and put what went wrong
//! in the session's `hook.log` and journal. Git hooks (`pre-push`, `pre-receive`) exit 1 to
//! refuse, saying why.

use std::io::{IsTerminal as _, Read as _};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::env::Env;
use git_loop::hooks::agent::{self, AgentEvent, Session, Source};
use git_loop::hooks::{push, receive};
use git_loop::store::Store;

/// What installed hooks run (agent CLIs' and git's).
///
/// An agent CLI's at the end of a turn or session; git's before a push and, on a remote,
/// before it accepts one. docs/hooks.md says what each does; 'git loop hooks install' sets
/// them up.
#[derive(Subcommand)]
pub enum HookCommand {
    ClaudeCode(ClaudeCodeArgs),
    Codex(CodexArgs),
    Generic(GenericArgs),
    PrePush(PrePushArgs),
    PreReceive(PreReceiveArgs),
}

/// Claude Code's Stop, StopFailure and SessionEnd hook: reads the hook's JSON on stdin.
///
/// In a loop session it records Claude's session id in the session's record, commits the
/// worktree at the end of each turn, and journals an 'agent_hook' event in the session's
/// chain. Outside a session it does nothing. Always exits 0 and prints nothing.
///
/// Example: "command": "git-loop hook claude-code"   (a Stop hook in ~/.claude/settings.json)
#[derive(Args)]
pub struct ClaudeCodeArgs {}

/// Codex's notify program (one JSON argument), or a Codex hook (JSON on stdin).
///
/// In a loop session it records Codex's thread id, commits the worktree after each turn, and
/// journals an 'agent_hook' event. Outside a session it does nothing. Always exits 0.
///
/// Example: notify = ["git-loop", "hook", "codex"]   (in ~/.codex/config.toml)
#[derive(Args)]
pub struct CodexArgs {
    /// The notification Codex passes (`{"type":"agent-turn-complete","thread-id":…}`);
    /// without it, a hook's JSON is read from stdin.
    #[arg(value_name = "JSON")]
    notification: Option<String>,
}

/// A hook for any agent CLI: records its session id, commits the worktree at a stop, journals.
///
/// A JSON payload on stdin shaped like Claude Code's hook input (session_id, …) fills in what
/// the options leave out. Outside a session it does nothing. Always exits 0.
///
/// Example: git loop hook generic --event stop --agent-session 6f1c2d3e
#[derive(Args)]
pub struct GenericArgs {
    /// What happened: "stop" (the end of a turn: the worktree is committed) or any other name.
    #[arg(long, value_name = "NAME", default_value = "stop")]
    event: String,
    /// The agent CLI's own session id, for its resume command.
    #[arg(long, value_name = "ID")]
    agent_session: Option<String>,
}

/// git's pre-push hook: refuses to push a task or try branch, or a claim, that this clone's
/// holders do not hold.
///
/// This clone's holders are the loop.holder values in git config, the walkers and sessions
/// that ran here, and the session this runs in. Exit 0 to let the push go, 1 to refuse.
///
/// Example: git loop hooks install --git   (installs .git/hooks/pre-push, which runs this)
#[derive(Args)]
pub struct PrePushArgs {
    /// The remote's name (git passes it).
    remote: Option<String>,
    /// The remote's URL (git passes it).
    url: Option<String>,
}

/// git's pre-receive hook on a remote: accepts claim updates only as the claim protocol makes
/// them, refuses rewriting or deleting the loop's history, and refuses records clients could
/// not read.
///
/// Settings, in the server repository's config: loop.maxLease (the longest lease a claim may
/// state, default 31d) and loop.bindHolders (claims are changed only by the user who pushes
/// them: GL_USER or REMOTE_USER). Exit 0 to accept the push, 1 to refuse all of it.
///
/// Example: git loop hooks install --server /srv/git/project.git
#[derive(Args)]
pub struct PreReceiveArgs {}

pub fn run(env: &Env, cmd: HookCommand) -> Result<u8> {
    match cmd {
        HookCommand::ClaudeCode(_) => {
            let payload = read_stdin_bounded();
            agent_hook(env, Source::ClaudeCode, |_| {
                let bytes = payload.as_deref().ok_or_else(|| anyhow::anyhow!("no hook input on stdin"))?;
                agent::parse_hook_payload(Source::ClaudeCode, bytes)
            })
        }
        HookCommand::Codex(args) => {
            let payload = if args.notification.is_none() { read_stdin_bounded() } else { None };
            agent_hook(env, Source::Codex, |_| match &args.notification {
                Some(arg) => agent::parse_codex_notify(arg),
                None => {
                    let bytes =
                        payload.as_deref().ok_or_else(|| anyhow::anyhow!("no notification argument or hook input"))?;
                    agent::parse_hook_payload(Source::Codex, bytes)
                }
            })
        }
        HookCommand::Generic(args) => {
            let payload = if std::io::stdin().is_terminal() { None } else { read_stdin_bounded() };
            agent_hook(env, Source::Generic, |ctx| {
                let nonce = format!("{}-{}", ctx.pid, ctx.now().timestamp_nanos_opt().unwrap_or(0));
                Ok(agent::generic(&args.event, args.agent_session.clone(), payload.as_deref(), &nonce))
            })
        }
        HookCommand::PrePush(args) => pre_push(env, args),
        HookCommand::PreReceive(_) => pre_receive(env),
    }
}

/// Read stdin to its end, but give up after a few seconds (a hook runner that never closes
/// it must not hang the agent).
fn read_stdin_bounded() -> Option<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let read = std::io::stdin().lock().take(1 << 20).read_to_end(&mut buf);
        let _ = tx.send(read.ok().map(|_| buf));
    });
    rx.recv_timeout(Duration::from_secs(5)).ok().flatten()
}

/// Handle one agent hook call; whatever happens, exit 0.
fn agent_hook(
    env: &Env,
    source: Source,
    parse: impl FnOnce(&git_loop::context::Context) -> Result<AgentEvent>,
) -> Result<u8> {
    let Some(key) = env.ctx.session.session.clone() else {
        // Not in a loop session (the hook is installed for the user's own runs too).
        return Ok(0);
    };
    let session = Session { key, task: env.ctx.session.task.clone(), try_number: env.ctx.session.try_number };
    if let Some(box_dir) = &env.ctx.session.confined {
        return Ok(confined_hook(env, box_dir, source, parse));
    }
    // The session's directory holds `hook.log`; the prompt file's directory is it, and is
    // known even when the repository cannot be opened.
    let prompt_dir = std::env::var_os("GIT_LOOP_PROMPT").map(PathBuf::from).and_then(|p| p.parent().map(Into::into));
    let store = open_session_store(env);
    let dir = prompt_dir.or_else(|| store.as_ref().ok().and_then(|s| agent::session_dir(s, &session.key).ok()));
    let now = env.ctx.now();
    let failed = |what: String, store: Option<&Store>| {
        if let Some(dir) = &dir {
            agent::log(dir, now, &format!("{}: {what}", source.name()));
        }
        if let Some(store) = store {
            if let Err(err) = agent::journal_failure(store, &env.ctx, &session, source, &what) {
                if let Some(dir) = &dir {
                    agent::log(dir, now, &format!("{}: could not journal that: {err:#}", source.name()));
                }
            }
        }
        super::output::stderr_line(format!(
            "git-loop: the {} hook failed (the session goes on): {what}",
            source.name()
        ));
    };
    let store = match store {
        Ok(store) => store,
        Err(err) => {
            failed(format!("could not open the repository: {err:#}"), None);
            return Ok(0);
        }
    };
    let event = match parse(&env.ctx) {
        Ok(event) => event,
        Err(err) => {
            failed(format!("{err:#}"), Some(&store));
            return Ok(0);
        }
    };
    match agent::handle(&store, &env.ctx, &session, &event) {
        Ok(outcome) => {
            if let Some(dir) = &dir {
                for problem in &outcome.problems {
                    agent::log(dir, now, &format!("{} {}: {problem}", source.name(), event.event));
                }
            }
        }
        Err(err) => failed(format!("{} {}: {err:#}", source.name(), event.event), Some(&store)),
    }
    Ok(0)
}

/// A hook in a confined session, which cannot reach the repository: the event goes to the
/// session's box, and the walk handles it outside (records the session id, commits the turn,
/// journals it). What fails is said in the box's `hook.log` and on stderr; exits 0 either way.
fn confined_hook(
    env: &Env,
    box_dir: &std::path::Path,
    source: Source,
    parse: impl FnOnce(&git_loop::context::Context) -> Result<AgentEvent>,
) -> u8 {
    use git_loop::sandbox::channel::{self, Report};
    let parsed = parse(&env.ctx);
    if let Err(err) = &parsed {
        // Said to the walk, which journals it as a hook's failure in the session's chain.
        let report = Report::HookFailed { source: source.name().to_owned(), error: format!("{err:#}") };
        let _ = channel::write(box_dir, &report);
    }
    let written = parsed.and_then(|e| {
        let report = Report::Hook {
            source: e.source.name().to_owned(),
            event: e.event,
            agent_session: e.agent_session,
            transcript: e.transcript,
            cwd: e.cwd,
            detail: e.detail,
            digest: e.digest,
        };
        channel::write(box_dir, &report)
    });
    if let Err(err) = written {
        agent::log(box_dir, env.ctx.now(), &format!("{}: {err:#}", source.name()));
        super::output::stderr_line(format!(
            "git-loop: the {} hook failed (the session goes on): {err:#}",
            source.name()
        ));
    }
    0
}

/// The repository of the session: the main working tree the loop names, else where we are.
fn open_session_store(env: &Env) -> Result<Store> {
    match std::env::var_os("GIT_LOOP_REPO").filter(|r| !r.is_empty()) {
        Some(repo) => Store::open(&env.ctx, &PathBuf::from(repo)),
        None => env.open(),
    }
}

fn pre_push(env: &Env, args: PrePushArgs) -> Result<u8> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let lines = push::parse(&input)?;
    if lines.is_empty() {
        return Ok(0);
    }
    let store = env.open()?;
    let current: Vec<String> =
        ["GIT_LOOP_SESSION", "GIT_LOOP_WALKER"].iter().filter_map(|v| std::env::var(v).ok()).collect();
    let holders = push::holders(&store, &current)?;
    let refused = push::check(&store, &env.ctx, &holders, &lines)?;
    if refused.is_empty() {
        return Ok(0);
    }
    let remote = args.remote.or(args.url).unwrap_or_else(|| "the remote".into());
    for r in &refused {
        super::output::stderr_line(format!("error: refusing to push '{}' to {remote}: {}", r.remote_ref, r.reason));
    }
    super::output::stderr_line(
        "hint: if that holder is this clone's, add it with 'git config --add loop.holder <name>'; to push anyway, 'git push --no-verify'",
    );
    Ok(1)
}

fn pre_receive(env: &Env) -> Result<u8> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let updates = receive::parse(&input)?;
    let git_dir = std::env::var_os("GIT_DIR").map(PathBuf::from).map_or_else(|| env.cwd.clone(), |d| env.cwd.join(d));
    // While pre-receive runs, the pushed objects are in git's quarantine directory.
    let quarantine = std::env::var_os("GIT_QUARANTINE_PATH")
        .or_else(|| std::env::var_os("GIT_OBJECT_DIRECTORY"))
        .filter(|q| !q.is_empty())
        .map(PathBuf::from);
    let server = receive::Server::open(&git_dir, quarantine.as_deref())?;
    // Who pushes, as the server authenticated them: gitolite says GL_USER; a web server that
    // asked for a password, REMOTE_USER.
    let pusher = ["GL_USER", "REMOTE_USER"].iter().find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()));
    let rejected = receive::check(&server, &receive::Options { now: env.ctx.now(), pusher }, &updates);
    if rejected.is_empty() {
        return Ok(0);
    }
    // One line per refused ref (git prefixes each with "remote: "); clients read them back
    // (`PushReport::refusal`).
    for r in &rejected {
        // The pusher's terminal shows this ("remote: ..."); the names are what they pushed.
        super::output::stderr_line(format!("git-loop: refusing '{}': {}; hint: {}", r.name, r.reason, r.hint));
    }
    eprintln!("git-loop: the whole push is refused; nothing was changed (docs/hooks.md)");
    Ok(1)
}
