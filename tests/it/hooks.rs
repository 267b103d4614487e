//! Hooks: installing them next to what users already have, the agent hooks inside a session
//! (record, commit, journal, never fail the agent), the client-side pre-push policy, and the
//! server-side pre-receive policy on a real bare repository served by `git daemon`:
//! reliability rows S6 (unauthorised claim or move on a self-hosted remote) and C8 (a remote
//! that rejects).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::harness::{bin, Daemon, Repo, Run, TestEnv};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn executable(path: &Path) {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
}

/// `git loop <args>` outside any repository, in the test's root.
fn run_at(env: &TestEnv, dir: &Path, args: &[&str]) -> Run {
    Run::from(env.seal(&mut Command::new(bin())).args(args).current_dir(dir).output().expect("run git-loop"))
}

// ----- installing -----

const USER_SETTINGS: &str = r#"{
  "model": "opus",
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "echo mine"
          }
        ]
      }
    ]
  },
  "env": {
    "ZETA": "1",
    "ALPHA": "2"
  }
}
"#;

const USER_CODEX: &str = "model = \"o3\"\n\n[profiles.fast]\nmodel = \"o4-mini\"\n";

#[test]
fn agent_hooks_install_beside_the_users_own_settings_idempotently_and_uninstall_cleanly() {
    let env = TestEnv::new();
    let claude = env.path("home/.claude/settings.json");
    let codex = env.path("home/.codex/config.toml");
    write(&claude, USER_SETTINGS);
    write(&codex, USER_CODEX);
    let root = env.root.path();
    let out = run_at(&env, root, &["hooks", "install", "--agent", "all"]).ok();
    assert_eq!(
        out.stdout,
        format!(
            "installed Claude Code's hooks in {}\ninstalled Codex's notify program in {}\n",
            claude.display(),
            codex.display()
        )
    );
    let settings: Value = serde_json::from_str(&read(&claude)).expect("still JSON");
    let command = format!("{} hook claude-code", bin());
    assert_eq!(settings["model"], "opus", "the user's settings stay");
    assert_eq!(
        settings["hooks"]["Stop"][0]["hooks"][0]["command"], "echo mine",
        "the user's own Stop hook stays first"
    );
    assert_eq!(settings["hooks"]["Stop"][1]["hooks"][0]["command"], command.as_str());
    for event in ["StopFailure", "SessionEnd"] {
        assert_eq!(settings["hooks"][event][0]["hooks"][0]["command"], command.as_str(), "{event}");
    }
    let text = read(&claude);
    assert!(
        text.find("\"model\"") < text.find("\"hooks\"") && text.find("\"ZETA\"") < text.find("\"ALPHA\""),
        "the user's key order is kept:\n{text}"
    );
    let config = read(&codex);
    assert!(
        config.starts_with("# >>> git-loop codex >>>\n")
            && config.contains(&format!("\nnotify = [\"{}\", \"hook\", \"codex\"]\n", bin()))
            && config.ends_with(&format!("# <<< git-loop codex <<<\n\n{USER_CODEX}")),
        "notify is a top-level key, above the user's tables:\n{config}"
    );

    let (before_claude, before_codex) = (read(&claude), read(&codex));
    let again = run_at(&env, root, &["hooks", "install", "--agent", "all"]).ok();
    assert!(again.stdout.contains("were already installed"), "{}", again.stdout);
    assert_eq!((read(&claude), read(&codex)), (before_claude, before_codex), "installing twice changes nothing");
    let status = run_at(&env, root, &["hooks", "status", "--json"]).ok().json();
    let states: Vec<(&str, &str)> = status["hooks"]
        .as_array()
        .expect("hooks")
        .iter()
        .map(|h| (h["hook"].as_str().unwrap_or(""), h["state"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(states, [("claude-code", "installed"), ("codex", "installed")], "outside a clone: no pre-push row");

    run_at(&env, root, &["hooks", "uninstall", "--agent", "all"]).ok();
    assert_eq!(read(&claude), USER_SETTINGS, "uninstalling gives the user's settings back, byte for byte");
    assert_eq!(read(&codex), USER_CODEX, "and the user's Codex config");
    let twice = run_at(&env, root, &["hooks", "uninstall", "--agent", "claude-code"]).ok();
    assert_eq!(twice.stdout, format!("Claude Code's hooks were not installed in {}\n", claude.display()));
}

#[test]
fn files_that_held_only_our_hooks_are_removed_and_a_users_notify_program_is_not_replaced() {
    let env = TestEnv::new();
    let root = env.root.path();
    run_at(&env, root, &["hooks", "install", "--agent", "all"]).ok();
    let (claude, codex) = (env.path("home/.claude/settings.json"), env.path("home/.codex/config.toml"));
    assert!(claude.is_file() && codex.is_file());
    run_at(&env, root, &["hooks", "uninstall", "--agent", "all"]).ok();
    assert!(!claude.exists() && !codex.exists(), "files that held only our hooks are removed");

    write(&codex, "notify = [\"my-notifier\"]\n");
    let out = run_at(&env, root, &["hooks", "install", "--agent", "codex"]).code(1);
    assert_eq!(
        out.stderr,
        format!(
            "error: '{}' already sets Codex's notify program: notify = [\"my-notifier\"]\nhint: Codex runs one notify program: remove that line, or have your program also run 'git-loop hook codex \"$1\"'\n",
            codex.display()
        )
    );
    assert_eq!(read(&codex), "notify = [\"my-notifier\"]\n", "the user's config is untouched");
    let none = run_at(&env, root, &["hooks", "install"]).code(2);
    assert!(none.stderr.starts_with("error: say which hooks:"), "{}", none.stderr);
}

#[test]
fn the_pre_push_hook_goes_into_an_existing_hook_which_still_sees_the_pushed_refs() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let repo = env.clone_of(bare.to_str().expect("utf-8"), "a");
    let hook = repo.dir.join(".git/hooks/pre-push");
    let seen = env.path("seen-by-user-hook");
    let mine = format!("#!/bin/sh\n# the user's own hook\ncat > '{}'\n", seen.display());
    write(&hook, &mine);
    executable(&hook);
    let out = repo.run(&["hooks", "install", "--git"]).ok();
    assert_eq!(out.stdout, format!("installed the pre-push hook in {}\n", hook.display()));
    let text = read(&hook);
    assert!(text.starts_with("#!/bin/sh\n# >>> git-loop pre-push >>>\n"), "{text}");
    assert!(text.ends_with(&mine["#!/bin/sh\n".len()..]), "the user's hook follows ours:\n{text}");
    repo.run(&["hooks", "install", "--git"]).ok();
    assert_eq!(read(&hook), text, "installing twice changes nothing");

    repo.git(&["push", "-q", "origin", "main:refs/heads/topic"]);
    let lines = read(&seen);
    assert!(lines.starts_with("refs/heads/main ") && lines.contains(" refs/heads/topic "), "{lines}");
    let status = repo.run(&["hooks", "status"]).ok();
    assert!(status.stdout.contains(&format!("pre-push     installed      {}", hook.display())), "{}", status.stdout);

    repo.run(&["hooks", "uninstall", "--git"]).ok();
    assert_eq!(read(&hook), mine, "uninstalling leaves the user's hook as it was");

    std::fs::remove_file(&hook).expect("rm");
    write(&hook, "#!/usr/bin/env python3\nprint('hi')\n");
    executable(&hook);
    let refused = repo.run(&["hooks", "install", "--git"]).code(1);
    assert!(refused.stderr.contains("exists and is not a shell script"), "{}", refused.stderr);
}

// ----- agent hooks in a session -----

fn events(repo: &Repo<'_>, kind: &str) -> Vec<Value> {
    repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

const STOP: &str = r#"{"session_id":"6f1c2d3e-0000-4000-8000-000000000001","transcript_path":"/nowhere/t.jsonl","cwd":"/w","hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"wrote it"}"#;

#[test]
fn the_claude_code_hook_records_the_session_id_commits_the_turn_and_journals_it_once() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Hooked"]);
    let payload = env.path("stop.json");
    write(&payload, STOP);
    // Delivered twice (installed for the user and passed by the loop): handled once.
    let cmd = env.agent("hooked",
        &format!(
            "printf 'turn one\\n' > turn.txt\ngit loop hook claude-code < {p}\ngit loop hook claude-code < {p}\ngit loop finish done --message ok",
            p = payload.display()
        ),
    );
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "60s"]).ok();
    let hooks = events(&repo, "agent_hook");
    assert_eq!(hooks.len(), 1, "one event for two deliveries: {hooks:?}");
    let data = &hooks[0]["data"];
    assert_eq!((data["agent"].as_str(), data["event"].as_str()), (Some("claude-code"), Some("Stop")));
    assert_eq!(data["agent_session"], "6f1c2d3e-0000-4000-8000-000000000001");
    assert_eq!(data["last_message"], "wrote it");
    let rec = &repo.session_records()[0];
    assert_eq!(hooks[0]["session"], rec["session"], "journaled in the session's own chain");
    assert_eq!(hooks[0]["writer"], rec["session"]);
    assert_eq!(rec["agent_session"], "6f1c2d3e-0000-4000-8000-000000000001", "the record names Claude's session");
    let commit = data["commit"].as_str().expect("the turn was committed");
    assert_eq!(repo.git(&["show", &format!("{commit}:turn.txt")]), "turn one");
    assert_eq!(repo.git(&["log", "-1", "--format=%an", commit]), "custom");
    assert_eq!(repo.git(&["rev-parse", &format!("loop/{id}")]), commit, "nothing was left to commit at the exit");
}

#[test]
fn a_failing_agent_hook_exits_0_and_says_why_in_the_session_log_and_the_journal() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["Broken hook input"]);
    let rc = env.path("rc");
    let cmd = env.agent("broken",
        &format!(
            "echo 'not json' | git loop hook claude-code 2>/dev/null; echo $? > {rc}\ngit loop hook codex '{{\"no\":1}}' 2>/dev/null; echo $? >> {rc}\ngit loop finish done",
            rc = rc.display()
        ),
    );
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "60s"]).ok();
    assert_eq!(read(&rc), "0\n0\n", "the agent's session never sees a hook fail");
    let failed = events(&repo, "agent_hook_failed");
    let errors: Vec<&str> = failed.iter().map(|e| e["data"]["error"].as_str().unwrap_or("")).collect();
    assert_eq!(
        errors,
        ["the hook's input is not JSON: expected ident at line 1 column 2", "the notification has no 'type'"]
    );
    let rec = &repo.session_records()[0];
    let log = read(&repo.dir.join(".git/loop/sessions").join(rec["session"].as_str().expect("key")).join("hook.log"));
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(log.lines().all(|l| l.contains(" claude-code: ") || l.contains(" codex: ")), "{log}");
}

#[test]
fn codex_notifications_and_generic_hooks_record_their_ids_and_outside_a_session_hooks_do_nothing() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["Codex turn"]);
    let cmd = env.agent("codex-like",
        "git loop hook codex '{\"type\":\"agent-turn-complete\",\"thread-id\":\"01a2-thread\",\"turn-id\":\"t1\",\"cwd\":\"/w\",\"last-assistant-message\":\"hi\"}'\n\
         git loop hook generic --event checkpoint --agent-session other-id </dev/null\n\
         git loop finish done",
    );
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "60s"]).ok();
    let hooks: Vec<(String, String, String)> = events(&repo, "agent_hook")
        .iter()
        .map(|e| {
            let d = &e["data"];
            (
                d["agent"].as_str().unwrap_or("").into(),
                d["event"].as_str().unwrap_or("").into(),
                d["agent_session"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(
        hooks,
        [
            ("codex".into(), "agent-turn-complete".into(), "01a2-thread".into()),
            ("generic".into(), "checkpoint".into(), "other-id".into())
        ]
    );
    assert_eq!(repo.session_records()[0]["agent_session"], "other-id", "the latest report wins");

    let before = repo.run(&["log", "--json"]).ok().stdout;
    let mut outside = repo.command(&["hook", "claude-code"]);
    outside.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = outside.spawn().expect("spawn");
    use std::io::Write as _;
    child.stdin.take().expect("stdin").write_all(STOP.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!((out.status.code(), out.stdout.is_empty(), out.stderr.is_empty()), (Some(0), true, true));
    assert_eq!(repo.run(&["log", "--json"]).ok().stdout, before, "outside a session nothing is journaled");
}

// ----- pre-push -----

#[test]
fn pre_push_refuses_what_another_holder_holds_and_names_the_holder() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let repo = env.clone_of(bare.to_str().expect("utf-8"), "a");
    repo.run(&["hooks", "install", "--git"]).ok();
    let task = env.path("task.jsonl");
    write(&task, "{\"id\": \"t-1\", \"title\": \"guarded\"}\n");
    repo.run(&["import", task.to_str().expect("utf-8")]).ok();
    repo.run(&["claim", "acquire", "node:t-1", "--holder", "agent-7", "--ttl", "1h"]).ok();
    repo.git(&["branch", "loop/t-1"]);
    repo.git(&["branch", "loop-try/t-1/2"]);
    let push = |args: &[&str], vars: &[(&str, &str)]| {
        let mut cmd = Command::new("git");
        env.seal(&mut cmd).args(["push", "-q", "origin"]).args(args).current_dir(&repo.dir).envs(vars.iter().copied());
        Run::from(cmd.output().expect("git push"))
    };
    let hint = "hint: if that holder is this clone's, add it with 'git config --add loop.holder <name>'; to push anyway, 'git push --no-verify'\n";
    let out = push(&["loop/t-1", "loop-try/t-1/2"], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let first = out.stderr.lines().take(2).collect::<Vec<_>>().join("\n");
    assert_eq!(
        first,
        "error: refusing to push 'refs/heads/loop/t-1' to origin: task 't-1' is claimed by 'agent-7' (seen unchanged for 0 s of its 1 h lease), not by this clone (this clone has no holders: set 'loop.holder')\n\
         error: refusing to push 'refs/heads/loop-try/t-1/2' to origin: task 't-1' is claimed by 'agent-7' (seen unchanged for 0 s of its 1 h lease), not by this clone (this clone has no holders: set 'loop.holder')"
    );
    assert!(out.stderr.contains(hint), "{}", out.stderr);
    let claim = "refs/loop/claims/node/t-1";
    assert_eq!(push(&[claim], &[]).code, 1, "nor its claim record");
    assert_eq!(env.git(&bare, &["for-each-ref", "refs/heads/loop", claim]), "", "nothing reached the remote");

    push(&["main:refs/heads/other"], &[]).ok();
    let later = [("GIT_LOOP_NOW", "2026-03-01T14:00:00Z")];
    push(&["loop/t-1"], &later).ok();
    repo.git(&["config", "--add", "loop.holder", "agent-7"]);
    push(&["loop-try/t-1/2", claim], &[]).ok();
    let deleted = push(&[&format!(":{claim}")], &[]);
    assert_eq!(deleted.code, 1);
    assert!(
        deleted.stderr.contains("claim 'node:t-1' would be deleted; claims are released with a tombstone"),
        "{}",
        deleted.stderr
    );
}

// ----- pre-receive, on a remote served by git daemon -----

/// A hooked remote, served at a clock of 12:00, and two clones of it using it for claims.
fn hooked_remote(env: &TestEnv) -> (PathBuf, Daemon, Repo<'_>, Repo<'_>) {
    let bare = env.remote("origin");
    let out = run_at(env, env.root.path(), &["hooks", "install", "--server", bare.to_str().expect("utf-8")]).ok();
    assert_eq!(out.stdout, format!("installed the pre-receive hook in {}\n", bare.join("hooks/pre-receive").display()));
    let daemon = Daemon::start(env);
    let url = daemon.url(&bare);
    let a = env.clone_of(&url, "alice");
    let b = env.clone_of(&url, "bob");
    for clone in [&a, &b] {
        clone.run(&["init", "--remote", "origin"]).ok();
    }
    (bare, daemon, a, b)
}

/// Every ref of the remote with its value.
fn remote_refs(env: &TestEnv, bare: &Path) -> String {
    env.git(bare, &["for-each-ref", "--format=%(objectname) %(refname)"])
}

fn push_raw(env: &TestEnv, repo: &Repo<'_>, args: &[&str]) -> Run {
    Run::from(
        env.seal(&mut Command::new("git"))
            .args(["push", "--porcelain", "origin"])
            .args(args)
            .current_dir(&repo.dir)
            .output()
            .expect("git push"),
    )
}

/// A valid claim record for `key` held by `holder` until `expires`, stored in `repo`.
fn forged_record(repo: &Repo<'_>, key: &str, holder: &str, expires: &str, released: bool) -> String {
    let record = serde_json::json!({
        "version": 1, "key": key, "holder": holder, "host": "h", "pid": 1, "boot_id": "b",
        "nonce": format!("forged{holder}{released}"), "acquired_at": "2026-03-01T12:00:00Z",
        "refreshed_at": "2026-03-01T12:00:00Z", "expires_at": expires,
        "released_at": if released { Value::from("2026-03-01T12:00:00Z") } else { Value::Null },
    });
    let file = repo.dir.join(".git/forged.json");
    std::fs::write(&file, record.to_string()).expect("write");
    repo.git(&["hash-object", "-w", file.to_str().expect("utf-8")])
}

/// S6: on a self-hosted remote with the pre-receive hook, what git-loop does passes (taking,
/// refreshing, releasing and taking over an expired claim, a whole walk and its sync) and
/// every unauthorised change is refused: taking over a live claim (through git-loop with a
/// skewed clock, and by a forged record), releasing or deleting someone else's claim, and
/// rewriting or deleting the loop's history and task branches. Unauthorised updates
/// accepted: 0.
#[test]
fn s6_a_self_hosted_remote_refuses_unauthorised_claims_and_moves() {
    let env = TestEnv::new();
    let (bare, _daemon, a, b) = hooked_remote(&env);
    let claim = "refs/loop/claims/lock/t-s6";
    // Authorised: create, refresh, release, claim a released one, take over an expired one.
    a.run(&["claim", "acquire", "lock:t-s6", "--holder", "alice", "--ttl", "1h"]).ok();
    a.run(&["claim", "acquire", "lock:t-s6", "--holder", "alice", "--ttl", "1h"]).ok();
    a.run(&["claim", "release", "lock:t-s6", "--holder", "alice"]).ok();
    b.run(&["claim", "acquire", "lock:t-s6", "--holder", "bob", "--ttl", "1h"]).ok();
    let early = [("GIT_LOOP_NOW", "2026-03-01T10:00:00Z")];
    b.run_with(&["claim", "acquire", "lock:t-old", "--holder", "bob", "--ttl", "1m"], &early).ok();
    // Alice first sees it (refused: live at first sight), then takes it over once she has seen
    // it unchanged for its minute; the server's clock (12:00) has it expired too.
    a.run(&["claim", "acquire", "lock:t-old", "--holder", "alice"]).code(1);
    let minute_later = [("GIT_LOOP_NOW", "2026-03-01T12:01:00Z")];
    let took =
        a.run_with(&["claim", "acquire", "lock:t-old", "--holder", "alice", "--json"], &minute_later).ok().json();
    assert_eq!((took["outcome"].as_str(), took["previous_holder"].as_str()), (Some("taken_over"), Some("bob")));

    // Authorised: a whole walk through the hooked remote, and its sync.
    let id = a.add(&["Hooked walk"]);
    let cmd = env.agent("walk", "echo done > result.txt\ngit loop finish done --message walked");
    a.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "60s"]).ok();
    a.run(&["sync"]).ok();
    assert_ne!(
        env.git(&bare, &["for-each-ref", &format!("refs/loop/done/{id}"), &format!("refs/heads/loop/{id}")]),
        ""
    );
    b.run(&["sync"]).ok();

    // Unauthorised, each refused; the remote does not change.
    let mut accepted = 0;
    let mut attempt = |what: &str, run: &dyn Fn() -> Run, message: &str| {
        let before = remote_refs(&env, &bare);
        let out = run();
        let after = remote_refs(&env, &bare);
        if before != after {
            accepted += 1;
        }
        assert_ne!(out.code, 0, "{what}: refused\n{}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(message), "{what}: says why ({message}):\n{}", out.stderr);
        assert_eq!(before, after, "{what}: the remote is unchanged");
    };
    // A clone whose clock jumps two hours between two looks at bob's claim believes it saw it
    // unchanged for its whole hour: the server, by its own clock, still refuses.
    a.run(&["claim", "acquire", "lock:t-s6", "--holder", "alice"]).code(1);
    let skewed = [("GIT_LOOP_NOW", "2026-03-01T14:00:00Z")];
    attempt(
        "git-loop taking over a live claim with a clock that jumped two hours",
        &|| a.run_with(&["claim", "acquire", "lock:t-s6", "--holder", "alice"], &skewed),
        "error: remote 'origin' refused the update of 'refs/loop/claims/lock/t-s6': [remote rejected] (pre-receive hook declined)",
    );
    let forged = forged_record(&a, "lock:t-s6", "alice", "2026-03-01T15:00:00Z", false);
    attempt(
        "a forged record over bob's live claim",
        &|| push_raw(&env, &a, &["--force", &format!("{forged}:{claim}")]),
        "'lock:t-s6' is held by 'bob' until 2026-03-01 13:00:00 UTC; 'alice' may take it over only once it expires",
    );
    let tombstone = forged_record(&a, "lock:t-s6", "alice", "2026-03-01T12:00:00Z", true);
    attempt(
        "releasing bob's claim with alice's tombstone",
        &|| push_raw(&env, &a, &["--force", &format!("{tombstone}:{claim}")]),
        "is held by 'bob'",
    );
    attempt(
        "deleting a claim",
        &|| push_raw(&env, &a, &[&format!(":{claim}")]),
        "claims are released with a tombstone, never deleted",
    );
    let junk = a.git(&["hash-object", "-w", "--stdin"]);
    attempt(
        "a claim ref pointing at junk",
        &|| push_raw(&env, &a, &["--force", &format!("{junk}:{claim}")]),
        "the new record is not valid",
    );
    let task_ref = format!("refs/loop/tasks/{id}");
    let base = a.git(&["rev-parse", "main"]);
    attempt(
        "rewriting a task's history",
        &|| push_raw(&env, &a, &["--force", &format!("{base}:{task_ref}")]),
        "that would rewrite history",
    );
    let journal = a.git(&["for-each-ref", "--count=1", "--format=%(refname)", "refs/loop/journal"]);
    attempt("deleting a journal chain", &|| push_raw(&env, &a, &[&format!(":{journal}")]), "never deleted");
    attempt(
        "moving a task branch back",
        &|| push_raw(&env, &a, &["--force", &format!("{base}:refs/heads/loop/{id}")]),
        "that would rewrite history",
    );
    attempt("deleting a task branch", &|| push_raw(&env, &a, &[&format!(":refs/heads/loop/{id}")]), "never deleted");
    attempt("deleting a try anchor", &|| push_raw(&env, &a, &[&format!(":refs/loop/tries/{id}/1")]), "never deleted");
    eprintln!("S6: unauthorised updates accepted: {accepted} of 10 attempts");
    assert_eq!(accepted, 0);
    // A stale try branch may be cleaned up; its work stays under refs/loop/tries.
    push_raw(&env, &a, &[&format!(":refs/heads/loop-try/{id}/1")]).ok();
}

/// C8: a remote whose hook rejects part of an atomic push applies none of it, and the
/// rejected clone's local claims equal the remote's afterwards.
#[test]
fn c8_a_refused_push_changes_nothing_and_leaves_local_claims_equal_to_the_remote() {
    let env = TestEnv::new();
    let (bare, _daemon, a, b) = hooked_remote(&env);
    a.run(&["claim", "acquire", "lock:t-c8", "--holder", "alice", "--ttl", "1h"]).ok();
    b.run(&["sync"]).ok();
    let id = b.add(&["A task of bob's"]);
    let before = remote_refs(&env, &bare);
    // One good update (a new task chain) and one refused (deleting alice's claim), atomically.
    let out = push_raw(&env, &b, &["--atomic", &format!("refs/loop/tasks/{id}"), ":refs/loop/claims/lock/t-c8"]);
    assert_ne!(out.code, 0);
    assert_eq!(remote_refs(&env, &bare), before, "partial remote updates: 0");

    // Bob's clone sees alice's claim, then its clock jumps two hours: it tries to take it over.
    b.run(&["claim", "acquire", "lock:t-c8", "--holder", "bob"]).code(1);
    let skewed = [("GIT_LOOP_NOW", "2026-03-01T14:00:00Z")];
    let taken = b.run_with(&["claim", "acquire", "lock:t-c8", "--holder", "bob"], &skewed).code(1);
    assert!(taken.stderr.contains("(pre-receive hook declined)"), "{}", taken.stderr);
    let claims = |dir: &Path| env.git(dir, &["for-each-ref", "--format=%(objectname) %(refname)", "refs/loop/claims"]);
    assert_eq!(claims(&b.dir), claims(&bare), "local claims equal the remote's after the refusal");
    let listed = b.run(&["claim", "list", "--json"]).ok().json();
    assert_eq!(listed["claims"][0]["holder"], "alice", "bob's clone knows alice holds it");
    assert_eq!(remote_refs(&env, &bare), before, "the remote is unchanged");
}
