//! People in the loop, end to end from the command line with scripted agents: stop,
//! reassign (another agent, the same agent, a forbidden one), take-over with the agent's
//! resume command, hand-back (continue and keep), and a stop written on another clone.
//!
//! These run with the real clock (the journal orders a person's word and the walk's events
//! by time).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{wait_for, Repo, Run, TestEnv};

/// Define agent `name` in the repository's config: a script run by `sh`.
pub fn named(repo: &Repo<'_>, env: &TestEnv, name: &str, script: &str) {
    let file = format!("{name}-{}", repo.dir.file_name().and_then(|n| n.to_str()).unwrap_or("r"));
    repo.git(&["config", &format!("loop.agent.{name}.command"), &env.agent(&file, script)]);
}

/// `git loop <args>` with the real clock.
pub fn live(repo: &Repo<'_>, args: &[&str]) -> Run {
    repo.run_with(args, &[("GIT_LOOP_NOW", "")])
}

/// A walk in the background, with the real clock.
pub fn spawn(repo: &Repo<'_>, args: &[&str], path: Option<&Path>) -> Child {
    let mut cmd = repo.command(args);
    cmd.env("GIT_LOOP_NOW", "").stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(dir) = path {
        let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
        cmd.env("PATH", path);
    }
    cmd.spawn().expect("start the walk")
}

pub fn finish(child: Child) -> Run {
    Run::from(child.wait_with_output().expect("wait for the walk"))
}

pub fn state_dir(env: &TestEnv) -> PathBuf {
    let dir = env.path("state");
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

pub fn show(repo: &Repo<'_>, id: &str) -> serde_json::Value {
    repo.run(&["show", id, "--json"]).ok().json()
}

/// Journal events about a task, in order.
pub fn journal(repo: &Repo<'_>, id: &str) -> Vec<serde_json::Value> {
    repo.run(&["log", "--task", id, "--json"]).ok().json()["events"].as_array().expect("events").clone()
}

pub fn kinds_of(events: &[serde_json::Value]) -> Vec<String> {
    events.iter().map(|e| e["kind"].as_str().unwrap_or("").to_owned()).collect()
}

fn live_claims(repo: &Repo<'_>) -> Vec<serde_json::Value> {
    live(repo, &["claim", "list", "--json"]).ok().json()["claims"]
        .as_array()
        .expect("claims")
        .iter()
        .filter(|c| c["status"] == "live" && c["key"].as_str().is_some_and(|k| k.starts_with("node:")))
        .cloned()
        .collect()
}

fn gone(pid: u64) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
        || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

const WALK: [&str; 6] = ["--grace", "1", "--session-timeout", "60s", "--wrap-up", "10s"];

fn walk_args<'a>(agent: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--agent", agent];
    args.extend_from_slice(&WALK);
    args.extend_from_slice(extra);
    args
}

#[test]
fn stop_by_session_commits_its_work_and_the_task_needs_a_decision() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["a long one"]);
    let state = state_dir(&env);
    named(
        &repo,
        &env,
        "slow",
        &format!("echo work > work.txt\ntouch {}/started\nwhile true; do sleep 0.05; done", state.display()),
    );
    let walk = spawn(&repo, &walk_args("slow", &[]), None);
    wait_for("the session", || state.join("started").exists());
    let rec = repo.session_records().pop().expect("a session record");
    let session = rec["session"].as_str().expect("session").to_owned();
    let out = live(&repo, &["stop", &session]).ok();
    assert!(out.stdout.contains(&format!("{id} · session {session} stopped")), "{}", out.stdout);
    assert!(out.stdout.contains(&format!("{id} needs a decision")), "{}", out.stdout);
    let walked = finish(walk).ok();
    assert!(walked.stdout.contains("you stopped it"), "{}", walked.stdout);
    let task = show(&repo, &id);
    assert_eq!(
        (task["state"].as_str(), task["reason"].as_str()),
        (Some("needs-decision"), Some("you stopped its session"))
    );
    assert_eq!(repo.git(&["show", &format!("loop-try/{id}/1:work.txt")]), "work", "its work is committed");
    assert!(gone(rec["pid"].as_u64().expect("pid")), "the session's process is gone");
    let events = journal(&repo, &id);
    let stop = events.iter().find(|e| e["kind"] == "task_needs_decision").expect("the stop is journaled");
    assert_eq!(stop["data"]["by"], "Tess Ter <tess@example.com>", "with who did it");
    assert_eq!(stop["data"]["session"].as_str(), Some(session.as_str()));
    assert!(live_claims(&repo).is_empty(), "the walk gave up its claim");
    // The walk that let it go took its worktree along: the next walk finds nothing left over,
    // and says nothing of a crash.
    assert!(!rec["worktree"].as_str().is_some_and(|w| Path::new(w).exists()), "its worktree is gone");
    let next = live(&repo, &walk_args("slow", &[])).ok();
    assert!(!next.stdout.contains("crash") && !next.stdout.contains("recovered"), "{}", next.stdout);
    let status = live(&repo, &["status"]).ok();
    assert!(status.stdout.contains("waiting for you:"), "{}", status.stdout);
    assert!(status.stdout.contains("needs-decision"), "{}", status.stdout);
    // Nothing runs on it now: a second stop says so.
    let again = live(&repo, &["stop", &id]).code(1);
    assert!(
        again.stderr.starts_with(&format!("error: nothing is working on {id} (it is needs-decision)")),
        "{}",
        again.stderr
    );
    // The person decides: accept the try.
    let decided = live(&repo, &["done", &id, "--try", "1"]).ok();
    assert!(decided.stdout.contains(&format!("{id} done with try 1")), "{}", decided.stdout);
    assert_eq!(repo.git(&["rev-parse", &format!("loop/{id}")]), repo.git(&["rev-parse", &format!("loop-try/{id}/1")]));
}

#[test]
fn reassign_asks_for_a_wrap_up_then_the_new_agent_goes_on_with_a_note() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["reassign me"]);
    let state = state_dir(&env);
    named(
        &repo,
        &env,
        "first",
        &format!(
            "echo from-first > first.txt\ntouch {s}/started\nwhile [ ! -f \"$GIT_LOOP_WRAP_UP\" ]; do sleep 0.05; done\necho 'wrapping up as asked'",
            s = state.display()
        ),
    );
    named(
        &repo,
        &env,
        "second",
        &format!(
            "cp \"$GIT_LOOP_PROMPT\" {}/second.md\ntest -f first.txt\necho two > second.txt\ngit loop finish done --message 'second finished'",
            state.display()
        ),
    );
    let walk = spawn(&repo, &walk_args("first", &[]), None);
    wait_for("the first session", || state.join("started").exists());
    let out = live(&repo, &["reassign", &id, "second"]).ok();
    assert!(out.stdout.contains(&format!("{id} · reassigned from first to second")), "{}", out.stdout);
    assert!(out.stdout.contains("first's session s-"), "{}", out.stdout);
    let walked = finish(walk).ok();
    assert!(
        walked.stdout.contains(&format!("{id} · reassigned from first to second · its work so far is kept")),
        "{}",
        walked.stdout
    );
    assert_eq!(show(&repo, &id)["state"], "done");
    let events = journal(&repo, &id);
    let agents: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .map(|e| e["data"]["agent"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(agents, ["first", "second"]);
    let tries: Vec<u64> = events
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .map(|e| e["data"]["try"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(tries, [1, 1], "the new agent goes on with the same try");
    let kinds = kinds_of(&events);
    for kind in ["task_reassigned", "wrap_up_requested", "handed_over"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} is journaled: {kinds:?}");
    }
    let reassigned = events.iter().find(|e| e["kind"] == "task_reassigned").expect("journaled");
    assert_eq!(
        (reassigned["data"]["to"].as_str(), reassigned["data"]["by"].as_str()),
        (Some("second"), Some("Tess Ter <tess@example.com>"))
    );
    let prompt = std::fs::read_to_string(state.join("second.md")).expect("second's prompt");
    assert!(prompt.contains("This task was with first until now: a person reassigned the task to second"), "{prompt}");
    assert!(prompt.contains("A first.txt (+1 -0)"), "the note says what changed: {prompt}");
    assert!(prompt.contains("wrapping up as asked"), "and the end of the last session's output: {prompt}");
    let log = repo.git(&["log", "--format=%an", &format!("loop/{id}")]);
    assert!(log.contains("first") && log.contains("second"), "both agents' work is on the branch:\n{log}");
}

#[test]
fn reassigning_to_the_same_agent_restarts_it() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["restart me"]);
    let state = state_dir(&env);
    named(
        &repo,
        &env,
        "again",
        &format!(
            "s={s}\nn=$(cat $s/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > $s/count\nif [ $n -eq 1 ]; then echo one > one.txt; touch $s/started; while [ ! -f \"$GIT_LOOP_WRAP_UP\" ]; do sleep 0.05; done; exit 0; fi\ncp \"$GIT_LOOP_PROMPT\" $s/restarted.md\ngit loop finish done",
            s = state.display()
        ),
    );
    let walk = spawn(&repo, &walk_args("again", &[]), None);
    wait_for("the first session", || state.join("started").exists());
    let out = live(&repo, &["reassign", &id, "again"]).ok();
    assert!(out.stdout.contains(&format!("{id} · again restarts")), "{}", out.stdout);
    finish(walk).ok();
    assert_eq!(std::fs::read_to_string(state.join("count")).expect("count").trim(), "2");
    let prompt = std::fs::read_to_string(state.join("restarted.md")).expect("prompt");
    assert!(prompt.contains("a person restarted it"), "{prompt}");
    assert_eq!(show(&repo, &id)["state"], "done");
    assert_eq!(repo.git(&["show", &format!("loop/{id}:one.txt")]), "one", "the first session's work is kept");
}

#[test]
fn a_forbidden_agent_needs_an_override_with_a_reason() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["reviewed by codex", "--forbid", "codex"]);
    let out = repo.run(&["reassign", &id, "codex"]).code(1);
    assert_eq!(
        out.stderr_with(&[(&id, "<T>")]),
        "error: codex may not work on <T>: the task forbids it (git loop edit <T> --remove-forbid codex)\nhint: to assign it anyway, say why: git loop reassign <T> codex --override \"<reason>\"\n"
    );
    repo.git(&["config", "loop.forbid", "gemini,aider"]);
    let out = repo.run(&["reassign", &id, "aider"]).code(1);
    assert!(out.stderr.contains("loop.forbid names it"), "{}", out.stderr);
    repo.run(&["reassign", &id, "codex", "--override", "the reviewer is a person this time"]).ok();
    let task = show(&repo, &id);
    assert_eq!(task["assigned"]["agent"], "codex");
    assert_eq!(task["assigned"]["override"], "the reviewer is a person this time");
    let events = journal(&repo, &id);
    let reassigned = events.iter().find(|e| e["kind"] == "task_reassigned").expect("journaled");
    assert_eq!(reassigned["data"]["override"], "the reviewer is a person this time");
    let unknown = repo.run(&["reassign", &id, "nobody"]).code(2);
    assert!(unknown.stderr.starts_with("error: no agent named 'nobody'"), "{}", unknown.stderr);
    let missing = repo.run(&["reassign", "t-zzzz", "codex"]).code(2);
    assert!(missing.stderr.starts_with("error: no task"), "{}", missing.stderr);
}

#[test]
fn take_over_gives_the_worktree_and_the_agents_resume_command_then_hand_back_continues() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["take me over"]);
    let state = state_dir(&env);
    // A stand-in for Claude Code: the preset chooses its session id (--session-id <uuid>).
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let fake = bin.join("claude");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho from-claude > claude.txt\ntouch {s}/started\nwhile [ ! -f \"$GIT_LOOP_WRAP_UP\" ]; do sleep 0.05; done\n",
            s = state.display()
        ),
    )
    .expect("write fake claude");
    std::process::Command::new("chmod").args(["+x", fake.to_str().expect("utf-8")]).status().expect("chmod");
    let walk = spawn(&repo, &walk_args("claude", &[]), Some(&bin));
    wait_for("claude's session", || state.join("started").exists());
    let out = live(&repo, &["take-over", &id]).ok();
    let walked = finish(walk).ok();
    let rec = repo.session_records().pop().expect("a record");
    let uuid = rec["agent_session"].as_str().expect("the loop chose claude's session id");
    let worktree = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("  worktree  "))
        .map(PathBuf::from)
        .expect("the worktree is printed");
    assert!(worktree.ends_with(format!(".git/loop/worktrees/{id}-1")), "{}", worktree.display());
    assert!(
        out.stdout.contains(&format!("{id} is yours: the loop leaves it alone until you hand it back")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("  resume    cd {} && claude --resume {uuid}", worktree.display())),
        "{}",
        out.stdout
    );
    assert!(walked.stdout.contains("taken-over"), "{}", walked.stdout);
    assert_eq!(show(&repo, &id)["state"], "taken-over");
    let claims = live_claims(&repo);
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["holder"], "person:tess@example.com", "the claim passed to the person");
    assert_eq!(
        repo.git(&["show", &format!("loop-try/{id}/1:claude.txt")]),
        "from-claude",
        "the agent's work is committed"
    );
    assert_eq!(std::fs::read_to_string(worktree.join("claude.txt")).expect("in the worktree").trim(), "from-claude");
    // A walk leaves a taken-over task alone.
    named(
        &repo,
        &env,
        "other",
        &format!("cp \"$GIT_LOOP_PROMPT\" {}/other.md\ntest -f fix.txt\ngit loop finish done", state.display()),
    );
    let idle = live(&repo, &walk_args("other", &[])).ok();
    assert!(idle.stdout.contains("0 done, 0 not done, 0 left open · 0 sessions"), "{}", idle.stdout);
    // You fix something by hand, and hand it back.
    std::fs::write(worktree.join("fix.txt"), "by hand\n").expect("write");
    let back = live(&repo, &["hand-back", &id, "--continue", "-m", "fixed the thing"]).ok();
    assert!(
        back.stdout.contains(&format!("your changes (1 file) are committed on loop-try/{id}/1")),
        "{}",
        back.stdout
    );
    assert_eq!(show(&repo, &id)["state"], "open");
    assert!(live_claims(&repo).is_empty(), "the claim is released");
    live(&repo, &walk_args("other", &[])).ok();
    assert_eq!(show(&repo, &id)["state"], "done");
    let prompt = std::fs::read_to_string(state.join("other.md")).expect("prompt");
    assert!(prompt.contains("Tess Ter <tess@example.com> took this task over and handed it back to you"), "{prompt}");
    assert!(prompt.contains("A fix.txt (+1 -0)") && prompt.contains("fixed the thing"), "{prompt}");
    let tries: Vec<u64> = journal(&repo, &id)
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .map(|e| e["data"]["try"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(tries, [1, 1], "the agent went on with the same try");
    let kinds = kinds_of(&journal(&repo, &id));
    for kind in ["task_taken_over", "taken_over", "handed_back", "task_done"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind}: {kinds:?}");
    }
}

#[test]
fn hand_back_keep_lands_your_work_only_when_the_checks_pass() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["mine now"]);
    let taken = live(&repo, &["take-over", &id, "--json"]).ok().json();
    assert_eq!((taken["try"].as_u64(), taken["opened"].as_bool()), (Some(1), Some(true)), "a try is opened for you");
    let worktree = PathBuf::from(taken["worktree"].as_str().expect("worktree"));
    let failed = live(&repo, &["hand-back", &id, "--keep", "--checks", "test -f kept.txt"]).code(1);
    assert!(failed.stderr.starts_with("error: the checks failed (exit 1) in"), "{}", failed.stderr);
    assert!(failed.stderr.contains("the task stays yours"), "{}", failed.stderr);
    assert_eq!(show(&repo, &id)["state"], "taken-over");
    // The checks run as the walk's do: under the guard, stopped after loop.checksTimeout, and
    // nothing they started is left running.
    repo.git(&["config", "loop.checksTimeout", "1s"]);
    let started = std::time::Instant::now();
    let slow = live(&repo, &["hand-back", &id, "--keep", "--checks", "sleep 600 & sleep 600"]).code(1);
    assert!(
        slow.stderr.starts_with("error: the checks failed (stopped after 1 s, loop.checksTimeout) in"),
        "{}",
        slow.stderr
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "stopped after its timeout ({:?})",
        started.elapsed()
    );
    let sleeping = std::process::Command::new("pgrep").args(["-f", "sleep 600"]).output().expect("pgrep");
    assert!(sleeping.stdout.is_empty(), "no process of the checks outlives them");
    repo.git(&["config", "--unset", "loop.checksTimeout"]);
    std::fs::write(worktree.join("kept.txt"), "kept\n").expect("write");
    let out = live(&repo, &["hand-back", &id, "--keep", "--checks", "test -f kept.txt"]).ok();
    assert!(out.stdout.contains(&format!("{id} done · loop/{id} moved to")), "{}", out.stdout);
    let task = show(&repo, &id);
    assert_eq!(task["state"], "done");
    assert_eq!(task["completion"]["by"], "Tess Ter <tess@example.com>");
    assert_eq!(task["completion"]["checks"]["passed"], true);
    assert_eq!(repo.git(&["show", &format!("loop/{id}:kept.txt")]), "kept");
    assert!(!worktree.exists(), "the worktree is removed once the work landed");
    assert!(live_claims(&repo).is_empty());
    let not_yours = live(&repo, &["hand-back", &id, "--keep"]).code(1);
    assert!(not_yours.stderr.starts_with(&format!("error: {id} is done, not taken over")), "{}", not_yours.stderr);
}

#[test]
fn a_stop_written_on_another_clone_is_obeyed_at_the_walks_next_sync() {
    let env = TestEnv::new();
    let remote = env.remote("origin");
    let url = remote.to_str().expect("utf-8");
    let here = env.clone_of(url, "here");
    let there = env.clone_of(url, "there");
    for repo in [&here, &there] {
        repo.git(&["config", "loop.remote", "origin"]);
        repo.git(&["config", "loop.syncEvery", "1s"]);
    }
    let id = here.add(&["stopped from afar"]);
    live(&here, &["sync"]).ok();
    live(&there, &["sync"]).ok();
    let state = state_dir(&env);
    named(
        &here,
        &env,
        "slow",
        &format!("echo far > far.txt\ntouch {}/started\nwhile true; do sleep 0.05; done", state.display()),
    );
    let walk = spawn(&here, &walk_args("slow", &[]), None);
    wait_for("the session", || state.join("started").exists());
    live(&there, &["sync"]).ok();
    let out = live(&there, &["stop", &id]).ok();
    assert!(out.stdout.contains("works on it elsewhere and stops its session at its next sync"), "{}", out.stdout);
    live(&there, &["sync"]).ok();
    let started = Instant::now();
    let walked = finish(walk).ok();
    assert!(started.elapsed() < Duration::from_secs(30), "the walk obeyed within a few syncs");
    assert!(walked.stdout.contains("you stopped it"), "{}", walked.stdout);
    assert_eq!(show(&here, &id)["state"], "needs-decision");
    assert_eq!(here.git(&["show", &format!("loop-try/{id}/1:far.txt")]), "far");
}

/// A failed task's claim is kept until a person answers it; cancelling it is an answer: the
/// claim is given back (it stayed held for ever, on every clone). Neither the failed nor the
/// cancelled task is said to have landed.
#[test]
fn cancelling_a_failed_task_gives_back_the_claim_the_walk_kept() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["doomed"]);
    let agent = env.agent("fails", "git loop finish failed --message 'cannot be done'");
    repo.run(&["run", "--agent-cmd", &agent, "--per-unit-dispatches", "1"]);
    let held = |repo: &Repo<'_>| -> usize {
        repo.run(&["claim", "list", "--json"]).ok().json()["claims"].as_array().map_or(0, Vec::len)
    };
    let shown = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(shown["state"], "failed");
    // A failed task has no work to land: show says nothing of landing (it said "landed").
    assert!(shown["landing"].is_null(), "no landing for a failed task: {}", shown["landing"]);
    assert!(!repo.run(&["show", &id]).ok().stdout.contains("landing:"), "nor a landing line");
    assert_eq!(held(&repo), 1, "the walk keeps the failed task's claim until a person answers");
    repo.run(&["cancel", &id, "--reason", "not worth it"]).ok();
    assert_eq!(held(&repo), 0, "a cancelled task holds no claim");
    assert!(!repo.run(&["show", &id]).ok().stdout.contains("landing:"), "nor for a cancelled one");
}
