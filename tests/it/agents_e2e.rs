//! The real agent CLIs end to end: `git loop run --agent claude` (Claude Code) and `--agent
//! codex` (Codex CLI) against the scripted model server on 127.0.0.1 (`model_server`). The
//! CLI runs in the try worktree, edits files with its own tools, reports its verdict with
//! `git loop finish`, its hook fires and is journaled, the checks pass, the task branch moves
//! and the completion note is written; a session left without a verdict is continued; a
//! session that stalls is stopped by the timeout without losing a byte it wrote; the session
//! id the hook recorded is the CLI's real one (the CLI resumes it).
//!
//! The CLIs come from PATH (`.ci/run` installs them with npm). Without one, its tests are
//! ignored, with the reason (build.rs looks for each CLI on PATH when the tests are built), so
//! `cargo test` lists them as ignored rather than passing them; in CI (`CI` set) none is
//! ignored and a missing CLI fails the test. Each CLI's HOME and
//! configuration live in the test's own directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{Repo, Run, TestEnv};
use crate::model_server::{Api, ModelServer, Request, Turn};

/// One of the CLIs under test.
#[derive(Clone, Copy)]
pub(crate) struct Cli {
    /// The preset, and the program on PATH.
    pub(crate) name: &'static str,
    pub(crate) api: Api,
}

pub(crate) const CLAUDE: Cli = Cli { name: "claude", api: Api::Anthropic };
pub(crate) const CODEX: Cli = Cli { name: "codex", api: Api::Responses };

/// The CLI's program, or `None` (with a one-line reason) when it is not installed here.
pub(crate) fn installed(cli: Cli) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|d| d.join(cli.name)).find(|p| p.is_file()));
    if found.is_none() {
        if std::env::var_os("CI").is_some() {
            panic!("'{}' is not on PATH: CI must run this test (.ci/run installs it with npm)", cli.name);
        }
        eprintln!(
            "skipped: '{}' is not on PATH (npm install @anthropic-ai/claude-code @openai/codex, then put node_modules/.bin on PATH)",
            cli.name
        );
    }
    found
}

/// The environment a CLI needs to talk to `server` only, with its configuration in the test's
/// HOME.
pub(crate) fn cli_env(env: &TestEnv, cli: Cli, program: &Path, server: &ModelServer) -> Vec<(String, String)> {
    let dir = program.parent().expect("a directory").display().to_string();
    let path = format!("{dir}:{}", std::env::var("PATH").unwrap_or_default());
    // The CLIs keep state in the temporary directory too (Claude Code: claude-<uid>/).
    let tmp = env.path("tmp");
    std::fs::create_dir_all(&tmp).expect("create TMPDIR");
    let mut vars = vec![("PATH".to_owned(), path), ("TMPDIR".to_owned(), tmp.display().to_string())];
    match cli.api {
        Api::Anthropic => vars.extend(
            [
                ("ANTHROPIC_BASE_URL", server.url()),
                ("ANTHROPIC_API_KEY", "sk-ant-test-dummy".to_owned()),
                ("CLAUDE_CODE_MAX_RETRIES", "0".to_owned()),
                ("DISABLE_AUTOUPDATER", "1".to_owned()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        ),
        Api::Responses => {
            let home = env.path("home/.codex");
            std::fs::create_dir_all(&home).expect("create CODEX_HOME");
            let config = format!(
                "model_provider = \"loopback\"\n\n[model_providers.loopback]\nname = \"loopback\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
                server.url()
            );
            std::fs::write(home.join("config.toml"), config).expect("write Codex's config");
            vars.push(("CODEX_HOME".to_owned(), home.display().to_string()));
        }
    }
    vars
}

/// `git loop run --agent <cli> <extra>` against `server`, timed.
pub(crate) fn run(repo: &Repo<'_>, cli: Cli, program: &Path, server: &ModelServer, extra: &[&str]) -> (Run, Duration) {
    let mut args = vec!["run", "--agent", cli.name, "--grace", "2s"];
    args.extend_from_slice(extra);
    let mut cmd = repo.command(&args);
    cmd.envs(cli_env(repo.env, cli, program, server));
    let started = Instant::now();
    let out = Run::from(cmd.output().expect("run git-loop"));
    (out, started.elapsed())
}

/// What the sessions' logs and hook logs say, for failure messages.
pub(crate) fn diagnose(repo: &Repo<'_>) -> String {
    let mut out = String::new();
    for rec in records(repo) {
        let dir = session_dir(repo, &rec);
        for file in ["log", "hook.log"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(15)..].join("\n");
                out.push_str(&format!("--- {} {file}\n{tail}\n", rec["session"]));
            }
        }
    }
    out
}

/// The walk's session records, oldest first (in the order the walk journaled their start:
/// the clock is pinned, so their times are equal).
fn records(repo: &Repo<'_>) -> Vec<Value> {
    let log = repo.run(&["log", "--json"]).ok().json();
    let started: Vec<String> = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .filter_map(|e| e["data"]["session"].as_str().map(ToOwned::to_owned))
        .collect();
    let dir = repo.dir.join(".git/loop/sessions");
    let mut out: Vec<Value> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| std::fs::read(e.path().join("record.json")).ok())
                .filter_map(|b| serde_json::from_slice(&b).ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort_by_key(|r: &Value| started.iter().position(|s| r["session"] == s.as_str()));
    out
}

fn session_dir(repo: &Repo<'_>, record: &Value) -> PathBuf {
    repo.dir.join(".git/loop/sessions").join(record["session"].as_str().expect("a session key"))
}

/// The journal's events of one session (its own chain and the walk's events about it).
fn session_events(repo: &Repo<'_>, session: &str) -> Vec<Value> {
    let all = repo.run(&["log", "--json"]).ok().json();
    all["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["session"] == session || e["data"]["session"] == session)
        .cloned()
        .collect()
}

/// The agent_hook events of a session, as (event, data).
fn hook_events(repo: &Repo<'_>, session: &str) -> Vec<(String, Value)> {
    session_events(repo, session)
        .into_iter()
        .filter(|e| e["kind"] == "agent_hook")
        .map(|e| (e["data"]["event"].as_str().unwrap_or("").to_owned(), e["data"].clone()))
        .collect()
}

/// The CLI's own session id, as it printed it in its JSON output (the session's log).
fn id_in_log(cli: Cli, log: &str) -> Option<String> {
    log.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find_map(|v| match cli.api {
        Api::Anthropic => (v["type"] == "system" && v["subtype"] == "init")
            .then(|| v["session_id"].as_str().map(ToOwned::to_owned))
            .flatten(),
        Api::Responses => {
            (v["type"] == "thread.started").then(|| v["thread_id"].as_str().map(ToOwned::to_owned)).flatten()
        }
    })
}

/// The script of a model that writes `hello.txt`, reports done, and says so.
pub(crate) fn hello_script(content: &'static str) -> impl Fn(&Request) -> Turn + Send + Sync {
    move |req: &Request| match req.tool_results {
        0 => Turn::WriteFile { path: "hello.txt".into(), content: content.into() },
        1 => Turn::Shell("git loop finish done --message 'wrote hello.txt'".into()),
        _ => Turn::Say("Done: hello.txt is written and the task is reported.".into()),
    }
}

fn a_real_task_is_done_through_the_cli_and_its_hook(cli: Cli, network: &str) {
    let Some(program) = installed(cli) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.git(&["config", "loop.sandbox.network", network]);
    let content = "hello from the model\n";
    let server = ModelServer::start(cli.api, hello_script(content));
    let id = repo.add(&["Write hello", "--body", "Create hello.txt saying hello."]);
    let (out, took) = run(
        &repo,
        cli,
        &program,
        &server,
        &["--checks", "grep -qx 'hello from the model' hello.txt", "--session-timeout", "180s"],
    );
    eprintln!("{}: a real task, one session, done in {:.1} s", cli.name, took.as_secs_f64());
    let out = out.ok();
    assert!(out.stdout.contains("sessions and checks run confined ("), "the CLI ran in the sandbox: {}", out.stdout);
    if network == "allow" {
        // Its model's API (the loopback server its base URL names) is all it reaches.
        assert!(out.stdout.contains("network: each agent's API hosts only)"), "{}", out.stdout);
    }

    // The task is done, its branch holds the CLI's work (and nothing of the loop's), the
    // completion note is written.
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(task["state"], "done", "{}", diagnose(&repo));
    let branch = format!("loop/{id}");
    assert_eq!(
        repo.git(&["show", &format!("{branch}:hello.txt")]),
        content.trim_end(),
        "the CLI's file is on the task branch"
    );
    assert_eq!(
        repo.git(&["ls-tree", "-r", "--name-only", &branch]),
        "README\nhello.txt",
        "the session's hook configuration is kept out of the commits"
    );
    let note: Value = serde_json::from_str(&repo.git(&["notes", "--ref=loop", "show", &branch])).expect("a note");
    let note = &note["completions"][0];
    assert_eq!((note["task"].as_str(), note["message"].as_str()), (Some(id.as_str()), Some("wrote hello.txt")));
    assert_eq!(note["checks"]["passed"], true, "the checks passed");

    // The hook fired at the end of the turn: journaled, with the commit it made.
    let records = records(&repo);
    assert_eq!(records.len(), 1, "one session");
    let rec = &records[0];
    let session = rec["session"].as_str().expect("a session key");
    let hooks = hook_events(&repo, session);
    let stop = hooks.iter().find(|(e, _)| e == "Stop").unwrap_or_else(|| panic!("a Stop hook event: {hooks:?}"));
    let commit = stop.1["commit"].as_str().expect("the hook committed the turn's work");
    assert_eq!(repo.git(&["rev-parse", &branch]), commit, "the task branch is the commit the Stop hook made");
    assert_eq!(repo.git(&["log", "-1", "--format=%an <%ae>", commit]), format!("{0} <{0}@agent.invalid>", cli.name));
    assert!(repo.git(&["log", "-1", "--format=%s", commit]).contains("at its agent's Stop"));
    assert!(!session_dir(&repo, rec).join("hook.log").exists(), "the hook had no problems");

    // The recorded session id is the CLI's real one: its own output says so, its transcript
    // is named by it, and the CLI resumes it.
    let log = std::fs::read_to_string(session_dir(&repo, rec).join("log")).expect("the session's log");
    let real = id_in_log(cli, &log).unwrap_or_else(|| panic!("the CLI printed its session id:\n{log}"));
    assert_eq!(rec["agent_session"].as_str(), Some(real.as_str()), "the record holds the CLI's own session id");
    assert_eq!(stop.1["agent_session"].as_str(), Some(real.as_str()));
    let transcript = stop.1["transcript"].as_str().expect("the hook names the transcript");
    assert!(Path::new(transcript).is_file() && transcript.contains(&real), "{transcript}");
    resumes(&env, cli, &program, &server, rec, &real, "hello.txt");
}

/// The CLI takes the recorded session id back: resumed with it, it sends the earlier
/// conversation (with its file-writing call) to the model.
fn resumes(env: &TestEnv, cli: Cli, program: &Path, server: &ModelServer, rec: &Value, id: &str, file: &str) {
    // Claude Code keeps sessions per working directory; the worktree is gone once the task
    // is done, so make the directory again.
    let cwd = PathBuf::from(rec["worktree"].as_str().expect("a worktree"));
    std::fs::create_dir_all(&cwd).expect("recreate the session's directory");
    let before = server.bodies().len();
    let mut cmd = Command::new(program);
    match cli.api {
        Api::Anthropic => cmd.args(["-p", "--output-format", "json", "--resume", id]),
        Api::Responses => cmd.args(["exec", "--skip-git-repo-check", "--json", "resume", id, "-"]),
    };
    env.seal(&mut cmd).current_dir(&cwd).envs(cli_env(env, cli, program, server));
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start the CLI");
    use std::io::Write as _;
    child.stdin.take().expect("stdin").write_all(b"What did you write?\n").expect("write the prompt");
    let out = child.wait_with_output().expect("resume");
    assert!(out.status.success(), "the CLI resumed session {id}: {}", String::from_utf8_lossy(&out.stderr));
    let bodies = server.bodies();
    let resumed = bodies[before..].iter().any(|b| b.to_string().contains(file));
    assert!(resumed, "the resumed session sent the earlier conversation to the model");
}

fn a_session_without_a_verdict_is_continued(cli: Cli) {
    let Some(program) = installed(cli) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let server = ModelServer::start(cli.api, |req: &Request| {
        if req.user_text.contains("## What happened before") {
            match req.tool_results {
                0 => Turn::Shell("git loop finish done --message 'notes were already there'".into()),
                _ => Turn::Say("Reported.".into()),
            }
        } else {
            match req.tool_results {
                0 => Turn::WriteFile { path: "notes.txt".into(), content: "first draft\n".into() },
                _ => Turn::Say("I wrote a first draft and stopped here.".into()),
            }
        }
    });
    let id = repo.add(&["Write notes"]);
    let (out, took) = run(&repo, cli, &program, &server, &["--per-unit-dispatches", "3", "--session-timeout", "180s"]);
    eprintln!("{}: no verdict, then a continuation: {:.1} s", cli.name, took.as_secs_f64());
    out.ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done", "{}", diagnose(&repo));
    let records = records(&repo);
    assert_eq!(records.len(), 2, "a second session continued the first");
    let second = std::fs::read_to_string(session_dir(&repo, &records[1]).join("prompt.md")).expect("prompt");
    assert!(
        second.contains("## What happened before") && second.contains("ended without reporting a verdict"),
        "the continuation prompt says what happened:\n{second}"
    );
    assert!(second.contains("notes.txt"), "and what is already on the branch:\n{second}");
    assert_eq!(repo.git(&["show", &format!("loop/{id}:notes.txt")]), "first draft");
    for rec in &records {
        let session = rec["session"].as_str().expect("a key");
        assert!(
            hook_events(&repo, session).iter().any(|(e, _)| e == "Stop"),
            "session {session}'s turn ended through its hook"
        );
    }
}

fn a_stalled_session_is_stopped_and_keeps_every_byte(cli: Cli) {
    let Some(program) = installed(cli) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let content = "line one\nline two, ünïcödé — kept\nline three\n";
    let server = ModelServer::start(cli.api, move |req: &Request| match req.tool_results {
        0 => Turn::WriteFile { path: "partial.txt".into(), content: content.into() },
        _ => Turn::Stall,
    });
    let id = repo.add(&["Write partial"]);
    let (out, took) =
        run(&repo, cli, &program, &server, &["--per-unit-dispatches", "1", "--session-timeout", "20s", "--json"]);
    eprintln!("{}: stalled model, 20 s session timeout: {:.1} s", cli.name, took.as_secs_f64());
    out.ok();
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| r.tool_results == 1),
        "the CLI wrote the file and asked the model again before the timeout: {requests:?}"
    );
    let rec = &records(&repo)[0];
    let ended = session_events(&repo, rec["session"].as_str().expect("key"))
        .into_iter()
        .find(|e| e["kind"] == "session_ended")
        .expect("session_ended");
    assert!(ended["data"]["reason"].as_str().unwrap_or("").contains("timed out"), "{ended}");
    let kept = env
        .seal(&mut Command::new("git"))
        .args(["show", &format!("loop-try/{id}/1:partial.txt")])
        .current_dir(&repo.dir)
        .output()
        .expect("git show");
    assert_eq!(String::from_utf8_lossy(&kept.stdout), content, "every byte the CLI wrote is on the try branch");
}

#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_does_a_real_task_in_the_worktree_and_its_hook_is_journaled() {
    a_real_task_is_done_through_the_cli_and_its_hook(CLAUDE, "on");
}

#[test]
#[cfg_attr(not(has_codex), ignore = "codex is not on PATH: npm install @openai/codex")]
fn codex_does_a_real_task_in_the_worktree_and_its_hook_is_journaled() {
    a_real_task_is_done_through_the_cli_and_its_hook(CODEX, "on");
}

/// The same under `loop.sandbox.network = allow` with nothing listed: the loopback model
/// server, which `ANTHROPIC_BASE_URL` and Codex's `config.toml` name, is reached through the
/// filtering proxy, and nothing else is.
#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_under_the_network_allow_list_does_a_real_task() {
    a_real_task_is_done_through_the_cli_and_its_hook(CLAUDE, "allow");
}

#[test]
#[cfg_attr(not(has_codex), ignore = "codex is not on PATH: npm install @openai/codex")]
fn codex_under_the_network_allow_list_does_a_real_task() {
    a_real_task_is_done_through_the_cli_and_its_hook(CODEX, "allow");
}

#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_left_without_a_verdict_is_continued() {
    a_session_without_a_verdict_is_continued(CLAUDE);
}

#[test]
#[cfg_attr(not(has_codex), ignore = "codex is not on PATH: npm install @openai/codex")]
fn codex_left_without_a_verdict_is_continued() {
    a_session_without_a_verdict_is_continued(CODEX);
}

#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_stalled_by_its_model_is_stopped_by_the_timeout_and_loses_nothing() {
    a_stalled_session_is_stopped_and_keeps_every_byte(CLAUDE);
}

#[test]
#[cfg_attr(not(has_codex), ignore = "codex is not on PATH: npm install @openai/codex")]
fn codex_stalled_by_its_model_is_stopped_by_the_timeout_and_loses_nothing() {
    a_stalled_session_is_stopped_and_keeps_every_byte(CODEX);
}

/// Every preset's command line as docs/agents.md states it (a unit test in
/// `session::presets` keeps that equal to the presets): (program, flags).
fn documented_presets() -> Vec<(String, Vec<String>)> {
    let docs = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/agents.md")).expect("docs");
    let programs = ["claude", "codex", "opencode", "gemini", "aider"];
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in docs.lines() {
        let words: Vec<&str> = line.split_whitespace().skip_while(|w| w.contains('=') && !w.starts_with('-')).collect();
        let Some(program) = words.first().filter(|p| programs.contains(p)) else { continue };
        if out.iter().any(|(p, _)| p == program) || !words.iter().any(|w| w.starts_with("--")) {
            continue;
        }
        let mut flags: Vec<String> = words
            .iter()
            .filter(|w| w.starts_with('-') && w.len() > 1)
            .map(|w| w.split('=').next().unwrap_or(w).to_owned())
            .collect();
        flags.push("--model".into());
        out.push(((*program).to_owned(), flags));
    }
    out
}

/// Whether `help` mentions `flag` as a whole option name.
fn mentions(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let before = help[..at].chars().next_back();
        let after = help[at + flag.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '-')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// Whether aider's option definitions (`aider/args.py`, what its `--help` is printed from)
/// define `flag`: as a string, or `--no-x` as `--x` with `BooleanOptionalAction`.
fn aider_defines(source: &str, flag: &str) -> bool {
    let quoted = |f: &str| format!("\"{f}\"");
    if source.contains(&quoted(flag)) {
        return true;
    }
    let Some(positive) = flag.strip_prefix("--no-") else { return false };
    source.match_indices(&quoted(&format!("--{positive}"))).any(|(at, _)| {
        let call = &source[at..];
        let end = call.find("add_argument(").unwrap_or(call.len());
        call[..end].contains("BooleanOptionalAction")
    })
}

/// The presets use only flags their CLIs offer: each installed CLI's real `--help` (of the
/// subcommand the preset runs) names every flag of the preset's documented command line,
/// and the model flag. aider's install is 687 MB: without it, CI checks its preset against
/// the option definitions its help is printed from (`GIT_LOOP_AIDER_ARGS`, aider/args.py from
/// the published wheel; see .ci/run), and the real `--help` with GIT_LOOP_CI_AIDER=1.
#[test]
fn every_flag_a_preset_uses_is_in_its_clis_real_help() {
    let presets = documented_presets();
    let names: Vec<&str> = presets.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["claude", "codex", "opencode", "gemini", "aider"], "docs/agents.md shows every preset");
    let env = TestEnv::new();
    let mut skipped = Vec::new();
    for (program, flags) in &presets {
        let required = std::env::var_os("CI").is_some();
        let found = std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file()));
        let aider_args = std::env::var_os("GIT_LOOP_AIDER_ARGS").filter(|_| program == "aider");
        if let (None, Some(args)) = (&found, aider_args) {
            let source = std::fs::read_to_string(&args).expect("aider's args.py");
            assert!(source.contains("add_argument"), "{} is aider's option definitions", args.to_string_lossy());
            assert!(!aider_defines(&source, "--no-such-flag"), "the check can fail");
            let missing: Vec<&String> = flags.iter().filter(|f| !aider_defines(&source, f)).collect();
            assert!(missing.is_empty(), "aider does not define {missing:?} ({})", args.to_string_lossy());
            eprintln!("aider: all {} flags of the preset are defined in its args.py", flags.len());
            continue;
        }
        let Some(path) = found else {
            assert!(
                !required,
                "'{program}' is not on PATH (nor, for aider, GIT_LOOP_AIDER_ARGS): CI must check its preset (.ci/run provides it)"
            );
            skipped.push(program.as_str());
            continue;
        };
        let sub: &[&str] = match program.as_str() {
            "codex" => &["exec"],
            "opencode" => &["run"],
            _ => &[],
        };
        let out = env
            .seal(&mut Command::new(&path))
            .args(sub)
            .arg("--help")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .expect("run --help");
        let help = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let missing: Vec<&String> = flags.iter().filter(|f| !mentions(&help, f)).collect();
        assert!(missing.is_empty(), "{program} {} --help does not offer {missing:?}:\n{help}", sub.join(" "));
        eprintln!("{program}: all {} flags of the preset are in its --help", flags.len());
    }
    if !skipped.is_empty() {
        eprintln!("skipped {}: not on PATH", skipped.join(", "));
    }
}

// ----- Fallbacks and people in the loop, with the real CLIs (issue 4) -----

/// A scripted fallback agent that finishes the task, noting what it was told.
fn fallback_agent(env: &TestEnv, repo: &Repo<'_>) -> PathBuf {
    let told = env.path("told.md");
    let script = env.path("fb.sh");
    std::fs::write(
        &script,
        format!("set -e\ncp \"$GIT_LOOP_PROMPT\" {}\necho fallback > fb.txt\ngit loop finish done", told.display()),
    )
    .expect("write the fallback agent");
    repo.git(&["config", "loop.agent.fb.command", &format!("sh {}", script.display())]);
    repo.git(&["config", "loop.fallback", "fb"]);
    told
}

fn an_unreachable_cli_hands_its_task_to_the_fallback(cli: Cli, status: u16, body: Value, reason: &str) {
    let Some(program) = installed(cli) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let server = ModelServer::start(cli.api, move |_: &Request| Turn::Refuse { status, body: body.clone() });
    let id = repo.add(&["Write something"]);
    let told = fallback_agent(&env, &repo);
    let (out, took) = run(&repo, cli, &program, &server, &["--session-timeout", "120s"]);
    eprintln!("{}: refused with {status}, handed to the fallback in {:.1} s", cli.name, took.as_secs_f64());
    let out = out.ok();
    let line = format!("{} is unreachable ({reason}) · fb takes {id}", cli.name);
    assert!(out.stdout.contains(&line), "{}\n{}", out.stdout, diagnose(&repo));
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done");
    let prompt = std::fs::read_to_string(told).expect("the fallback's prompt");
    assert!(
        prompt.contains(&format!("This task was with {} until now: it is unreachable ({reason})", cli.name)),
        "{prompt}"
    );
}

#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_at_its_rate_limit_hands_the_task_to_the_fallback() {
    let body = json!({"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}});
    an_unreachable_cli_hands_its_task_to_the_fallback(CLAUDE, 429, body, "rate limit");
}

#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_logged_out_hands_the_task_to_the_fallback() {
    let body = json!({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}});
    an_unreachable_cli_hands_its_task_to_the_fallback(CLAUDE, 401, body, "login expired");
}

#[test]
#[cfg_attr(not(has_codex), ignore = "codex is not on PATH: npm install @openai/codex")]
fn codex_at_its_usage_limit_hands_the_task_to_the_fallback() {
    let body = json!({"error":{"type":"usage_limit_reached","message":"You've hit your usage limit.","plan_type":"plus","resets_in_seconds":3600}});
    an_unreachable_cli_hands_its_task_to_the_fallback(CODEX, 429, body, "usage limit");
}

/// A CLI taken over mid-session: the loop asks it to wrap up (SIGINT), commits what it wrote,
/// and prints its resume command; that command resumes the very conversation.
fn taken_over_mid_session_prints_a_resume_command_that_resumes_it(cli: Cli, resume: &str) {
    let Some(program) = installed(cli) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let released = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stalled = released.clone();
    let server = ModelServer::start(cli.api, move |req: &Request| match req.tool_results {
        0 => Turn::WriteFile { path: "half.txt".into(), content: "half done\n".into() },
        _ if !stalled.load(std::sync::atomic::Ordering::SeqCst) => Turn::Stall,
        _ => Turn::Say("I wrote half.txt.".into()),
    });
    let id = repo.add(&["Write half"]);
    let mut cmd = repo.command(&["run", "--agent", cli.name, "--grace", "2s", "--wrap-up", "10s"]);
    cmd.envs(cli_env(&env, cli, &program, &server)).env("GIT_LOOP_NOW", "");
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let walk = cmd.spawn().expect("start the walk");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !server.requests().iter().any(|r| r.tool_results == 1) {
        assert!(Instant::now() < deadline, "{} never wrote the file: {}", cli.name, diagnose(&repo));
        std::thread::sleep(Duration::from_millis(100));
    }
    let started = Instant::now();
    let mut take = repo.command(&["take-over", &id, "--json"]);
    take.env("GIT_LOOP_NOW", "");
    let taken = Run::from(take.output().expect("take over")).ok().json();
    eprintln!("{}: taken over mid-session in {:.1} s", cli.name, started.elapsed().as_secs_f64());
    released.store(true, std::sync::atomic::Ordering::SeqCst);
    let walked = Run::from(walk.wait_with_output().expect("the walk")).ok();
    assert!(walked.stdout.contains("taken-over"), "{}", walked.stdout);
    let rec = &records(&repo)[0];
    let real = rec["agent_session"].as_str().unwrap_or_else(|| panic!("{}'s session id: {rec}", cli.name)).to_owned();
    let worktree = PathBuf::from(taken["worktree"].as_str().expect("worktree"));
    assert_eq!(
        taken["resume"].as_str(),
        Some(format!("cd {} && {resume} {real}", worktree.display()).as_str()),
        "{taken}"
    );
    assert_eq!(std::fs::read_to_string(worktree.join("half.txt")).expect("the CLI's file").trim(), "half done");
    assert_eq!(repo.git(&["show", &format!("loop-try/{id}/1:half.txt")]), "half done", "committed");
    let events = repo.run(&["log", "--task", &id, "--json"]).ok().json();
    let wrap = events["events"].as_array().expect("events").iter().find(|e| e["kind"] == "wrap_up_requested").cloned();
    assert_eq!(wrap.as_ref().map(|w| w["data"]["interrupted"].clone()), Some(Value::Bool(true)), "{events}");
    resumes(&env, cli, &program, &server, rec, &real, "half.txt");
}

#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_taken_over_mid_session_prints_a_resume_command_that_resumes_it() {
    taken_over_mid_session_prints_a_resume_command_that_resumes_it(CLAUDE, "claude --resume");
}

#[test]
#[cfg_attr(not(has_codex), ignore = "codex is not on PATH: npm install @openai/codex")]
fn codex_taken_over_mid_session_prints_a_resume_command_that_resumes_it() {
    taken_over_mid_session_prints_a_resume_command_that_resumes_it(CODEX, "codex resume");
}

/// One review round with the real Claude Code as the reviewer: a scripted worker of another
/// provider (openai, as its named agent says) writes the work; Claude Code, reviewing in its own
/// checkout, is scripted by the model to ask for changes with `git loop finish changes` the
/// first time and approve the second. The verdicts are read from what the real CLI ran.
#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_reviews_a_scripted_workers_try_and_its_verdict_is_read_from_its_own_report() {
    let Some(program) = installed(CLAUDE) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Write hello", "--body", "Create hello.txt saying hello."]);
    let worker = env.agent(
        "worker",
        "n=$(cat hello.txt 2>/dev/null | wc -l); echo \"hello $n\" >> hello.txt\ngit loop finish done --message 'wrote hello.txt'",
    );
    repo.git(&["config", "loop.agent.w.command", &worker]);
    repo.git(&["config", "loop.agent.w.provider", "openai"]);
    let server = ModelServer::start(CLAUDE.api, |req: &Request| {
        // The reviewer's prompt says which round it is.
        let first = req.user_text.contains("Review round 1 of");
        match req.tool_results {
            0 if first => Turn::Shell("git loop finish changes --message 'say hello twice'".into()),
            0 => Turn::Shell("git loop finish approve --message 'hello.txt says hello twice'".into()),
            _ => Turn::Say("Reported.".into()),
        }
    });
    let mut cmd = repo.command(&[
        "run",
        "--agent",
        "w",
        "--reviewer",
        "claude",
        "--max-units",
        "1",
        "--grace",
        "2s",
        "--session-timeout",
        "180s",
    ]);
    cmd.envs(cli_env(&env, CLAUDE, &program, &server));
    let started = Instant::now();
    let out = Run::from(cmd.output().expect("run git-loop"));
    eprintln!("claude as a reviewer: two rounds in {:.1} s", started.elapsed().as_secs_f64());
    let out = out.ok();
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(task["state"], "done", "{}\n{}", out.stdout, diagnose(&repo));
    // The real CLI was given the reviewer's prompt, and its calls are what the loop read.
    let prompts: Vec<Request> =
        server.requests().into_iter().filter(|r| r.user_text.contains("Review of task")).collect();
    assert!(prompts.iter().any(|r| r.user_text.contains("git loop finish approve")), "the contract is in the prompt");
    let log = repo.run(&["log", "--task", &id, "--json"]).ok().json();
    let verdicts: Vec<(String, String)> = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "review_verdict")
        .map(|e| {
            (
                e["data"]["verdict"].as_str().unwrap_or("").to_owned(),
                e["data"]["agent"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(verdicts, [("changes".to_owned(), "claude".to_owned()), ("approve".to_owned(), "claude".to_owned())]);
    let branch = format!("loop/{id}");
    assert_eq!(
        repo.git(&["show", &format!("{branch}:hello.txt")]),
        "hello 0\nhello 1",
        "the worker went on with the comments"
    );
    let note: Value = serde_json::from_str(&repo.git(&["notes", "--ref=loop", "show", &branch])).expect("a note");
    let approval = &note["completions"][0]["reviews"][0];
    assert_eq!(approval["agent"], "claude");
    assert_eq!(approval["tree"].as_str(), Some(repo.git(&["rev-parse", &format!("{branch}^{{tree}}")]).as_str()));
}

/// Claude Code and Codex race on one task, each confined in its own try: the first whose work
/// passes the checks wins, the task branch moves to its try, the other is stopped and its work
/// kept on its own try branch.
#[test]
fn claude_and_codex_race_confined_and_the_first_to_pass_wins() {
    let (Some(claude), Some(codex)) = (installed(CLAUDE), installed(CODEX)) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Write hello", "--body", "Create hello.txt saying hello."]);
    let from_claude = ModelServer::start(CLAUDE.api, hello_script("hello from claude\n"));
    let from_codex = ModelServer::start(CODEX.api, hello_script("hello from codex\n"));
    let mut cmd = repo.command(&[
        "race",
        &id,
        "--together",
        "claude,codex",
        "--checks",
        "grep -q '^hello from' hello.txt",
        "--grace",
        "2s",
        "--session-timeout",
        "180s",
    ]);
    cmd.envs(cli_env(&env, CLAUDE, &claude, &from_claude));
    // Codex's own variables; PATH and TMPDIR are the same for both.
    cmd.envs(cli_env(&env, CODEX, &codex, &from_codex).into_iter().filter(|(k, _)| k == "CODEX_HOME"));
    let started = Instant::now();
    let out = Run::from(cmd.output().expect("run git-loop"));
    eprintln!("claude and codex raced in {:.1} s", started.elapsed().as_secs_f64());
    let out = out.ok();
    assert!(out.stdout.contains("sessions and checks run confined ("), "{}", out.stdout);
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(task["state"], "done", "{}\n{}", out.stdout, diagnose(&repo));
    let log = repo.run(&["log", "--task", &id, "--json"]).ok().json();
    let won = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "race_won")
        .unwrap_or_else(|| panic!("a race_won event: {log}"))
        .clone();
    let winner = won["data"]["agent"].as_str().expect("the winner's agent").to_owned();
    assert!(winner == "claude" || winner == "codex", "{won}");
    let branch = format!("loop/{id}");
    assert_eq!(repo.git(&["show", &format!("{branch}:hello.txt")]), format!("hello from {winner}"));
    // The winner's CLI was asked; each entrant had a session of its own in its own try (the
    // loser may be stopped before its first call), and every session ended.
    let asked = if winner == "claude" { from_claude.requests() } else { from_codex.requests() };
    assert!(!asked.is_empty(), "the winner's CLI called its model");
    let records = records(&repo);
    let agents: std::collections::BTreeSet<&str> = records.iter().filter_map(|r| r["agent"].as_str()).collect();
    assert_eq!(agents, ["claude", "codex"].into(), "one session each: {records:?}");
    assert!(records.iter().all(|r| !r["ended"].is_null()), "{records:?}");
}
