//! `git loop run` end to end with scripted agents: closing, policies, budgets, exit codes,
//! and the reliability rows for sessions (P1, P2, P4, P7, W1, S3, S4).

use std::process::Stdio;

use crate::harness::{path_with, wait_for, Repo, Run, TestEnv};

fn run(repo: &Repo<'_>, agent_cmd: &str, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--agent-cmd", agent_cmd, "--grace", "1", "--session-timeout", "60s"];
    args.extend_from_slice(extra);
    repo.run(&args)
}

/// Events of a `run --json` output, as (event, task) pairs.
fn events(out: &Run) -> Vec<serde_json::Value> {
    out.stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"))).collect()
}

fn kinds(repo: &Repo<'_>) -> Vec<String> {
    repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind").to_owned())
        .collect()
}

/// Live processes carrying `marker` in their environment.
fn marked(marker: &str) -> Vec<u32> {
    let needle = format!("GIT_LOOP_MARKER={marker}");
    std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        })
        .collect()
}

#[test]
fn a_done_task_moves_its_branch_gets_a_note_and_releases_its_claim() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Write hello", "--body", "create hello.txt"]);
    let cmd = env.agent("hello", "echo hello > hello.txt\ngit loop finish done --message 'wrote hello'");
    let out = run(&repo, &cmd, &["--checks", "test -f hello.txt", "--json"]).ok();
    let names: Vec<String> = events(&out).iter().map(|e| e["event"].as_str().unwrap_or("").to_owned()).collect();
    assert_eq!(
        names,
        [
            "walk_started",
            "claimed",
            "try_opened",
            "session_started",
            "session_ended",
            "checks",
            "branch_moved",
            "unit_closed",
            "walk_ended"
        ],
        "the walk's events, in order"
    );
    let branch = format!("loop/{id}");
    assert_eq!(repo.git(&["show", &format!("{branch}:hello.txt")]), "hello", "the task branch holds the agent's work");
    let note: serde_json::Value =
        serde_json::from_str(&repo.git(&["notes", "--ref=loop", "show", &branch])).expect("note");
    let note = &note["completions"][0];
    assert_eq!((note["task"].as_str(), note["message"].as_str()), (Some(id.as_str()), Some("wrote hello")));
    assert_eq!(note["checks"]["passed"], true, "the checks' verdict is part of the evidence");
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(
        (task["state"].as_str(), task["claim"].is_null()),
        (Some("done"), true),
        "done, and the claim is released"
    );
    assert_eq!(repo.worktrees(), (vec![], 1), "the try's worktree is gone, into the pool for the next try");
    assert!(repo.git(&["status", "--porcelain"]).is_empty(), "the main working tree is untouched");
    let author = repo.git(&["log", "-1", "--format=%an <%ae>", &format!("loop-try/{id}/1")]);
    assert_eq!(author, "custom <custom@agent.invalid>", "the work is authored as the agent");
}

#[test]
fn three_consecutive_failures_pause_the_walk_with_exit_4_and_hold_the_claims() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let ids: Vec<String> = (0..4).map(|i| repo.add(&[&format!("task {i}")])).collect();
    let cmd = env.agent("fail", "git loop finish failed --message 'cannot do it'");
    let out = run(&repo, &cmd, &["--json"]).code(4);
    let last = events(&out).pop().expect("a finished event");
    assert_eq!((last["stop"].as_str(), last["policy"].as_str()), (Some("paused"), Some("3_consecutive_failures")));
    let parked: Vec<String> = repo.run(&["list", "--state", "failed", "--json"]).ok().json()["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(parked.len(), 3, "three tasks failed");
    assert_eq!(last["units"].as_array().map(Vec::len), Some(3));
    let claims = repo.run(&["claim", "list", "--json"]).ok().json();
    assert_eq!(claims["claims"].as_array().map(Vec::len), Some(3), "failed tasks keep their claims (park exclusion)");
    let untouched: Vec<&String> = ids.iter().filter(|id| !parked.contains(id)).collect();
    assert_eq!(
        repo.run(&["next", "--json"]).ok().json()["id"],
        untouched[0].as_str(),
        "next moves on to the untouched task"
    );
    assert!(kinds(&repo).contains(&"walk_paused".to_owned()), "the pause is journaled");
    let status = repo.run(&["status"]).ok();
    assert!(status.stdout.contains("the last walk paused"), "{}", status.stdout);
}

#[test]
fn a_p0_task_that_asks_pauses_at_once_saying_so_and_one_that_fails_says_it_failed() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let urgent = repo.add(&["urgent", "-p", "p0"]);
    repo.add(&["later"]);
    let ask = env.agent("ask", "git loop finish blocked --message 'need a key'");
    let out = run(&repo, &ask, &["--json"]).code(4);
    let last = events(&out).pop().expect("finished");
    assert_eq!((last["policy"].as_str(), last["state"].as_str()), (Some("p0_waiting"), Some("needs-you")), "{last}");
    assert_eq!(repo.run(&["list", "--state", "open", "--json"]).ok().json()["tasks"].as_array().map(Vec::len), Some(1));
    let paused = repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .rev()
        .find(|e| e["kind"] == "walk_paused")
        .cloned()
        .expect("journaled");
    assert_eq!(paused["data"]["policy"], "a p0 task needs you");
    // The same, in words.
    let second = repo.add(&["urgent too", "-p", "p0"]);
    let human = run(&repo, &ask, &[]).code(4);
    assert!(human.stdout.contains(&format!("paused: p0 task {second} needs you")), "{}", human.stdout);
    assert!(!human.stdout.contains("failed"), "{}", human.stdout);
    // One that fails is a failure.
    let third = repo.add(&["urgent three", "-p", "p0"]);
    let fail = env.agent("fail", "git loop finish failed --message 'it broke'");
    let failed = run(&repo, &fail, &[]).code(4);
    assert!(failed.stdout.contains(&format!("paused: p0 task {third} failed")), "{}", failed.stdout);
    let _ = urgent;
}

#[test]
fn once_mode_closes_one_task_and_an_iteration_budget_stops_with_exit_1() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["a"]);
    repo.add(&["b"]);
    let done = env.agent("done", "git loop finish done");
    let out = run(&repo, &done, &["--max-units", "1", "--json"]).ok();
    assert_eq!(events(&out).pop().expect("finished")["stop"], "done", "once mode: one task, exit 0");
    assert_eq!(repo.run(&["list", "--state", "done", "--json"]).ok().json()["tasks"].as_array().map(Vec::len), Some(1));
    let silent = env.agent("silent", "true");
    let out = run(&repo, &silent, &["--max-iterations", "2", "--json"]).code(1);
    let last = events(&out).pop().expect("finished");
    assert_eq!((last["stop"].as_str(), last["sessions"].as_u64()), (Some("budget"), Some(2)));
    let left = repo.run(&["list", "--state", "open", "--json"]).ok().json();
    assert!(left["tasks"][0]["claim"].is_null(), "a task left open by the budget is free again");
}

#[test]
fn sessions_without_a_verdict_continue_with_a_note_then_the_task_fails() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["quiet"]);
    let prompts = env.path("prompts");
    std::fs::create_dir_all(&prompts).expect("mkdir");
    let cmd = env.agent(
        "quiet",
        &format!("cp \"$GIT_LOOP_PROMPT\" {}/$GIT_LOOP_SESSION.md\necho still thinking", prompts.display()),
    );
    run(&repo, &cmd, &["--per-unit-dispatches", "2"]).ok();
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(
        (task["state"].as_str(), task["reason"].as_str()),
        (Some("failed"), Some("failed: no verdict after 2 sessions"))
    );
    let texts: Vec<String> = std::fs::read_dir(&prompts)
        .expect("prompts")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).expect("read"))
        .collect();
    assert_eq!(texts.len(), 2);
    let continuation = texts.iter().find(|t| t.contains("## What happened before")).expect("a continuation prompt");
    assert!(
        continuation.contains("ended without reporting a verdict") && continuation.contains("still thinking"),
        "{continuation}"
    );
}

#[test]
fn failing_checks_are_continued_with_their_output_and_can_then_pass() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["fix it"]);
    let cmd = env.agent("twice",
        "if grep -q 'checks failed' \"$GIT_LOOP_PROMPT\"; then echo good > state; else echo bad > state; fi\ngit loop finish done",
    );
    let out = run(&repo, &cmd, &["--checks", "echo checking state; grep -q good state", "--json"]).ok();
    let checks: Vec<bool> =
        events(&out).iter().filter(|e| e["event"] == "checks").map(|e| e["passed"].as_bool().expect("bool")).collect();
    assert_eq!(checks, [false, true], "failed first, passed on continuation");
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done");
}

#[test]
fn a_second_walker_exits_3_and_a_missing_agent_exits_77_before_any_claim() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["slow"]);
    let flag = env.path("started");
    let cmd = env.agent("slow", &format!("touch {}\nsleep 30", flag.display()));
    let mut first = repo
        .command(&["run", "--agent-cmd", &cmd, "--grace", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the first walker");
    wait_for("the first session", || flag.exists());
    let second = run(&repo, &cmd, &[]).code(3);
    assert!(second.stderr.starts_with("error: another walker runs in this repository: w-"), "{}", second.stderr);
    repo.run(&["stop", "--all"]).ok();
    let status = first.wait().expect("first walker ends");
    assert_eq!(status.code(), Some(130), "a walk stopped by 'stop --all' exits 130");
    repo.add(&["other"]);
    let missing = repo.run_with(&["run", "--agent", "claude"], &[("PATH", &path_with(&env, &["git", "sh"]))]).code(77);
    assert!(missing.stderr.starts_with("error: the agent's program 'claude' was not found"), "{}", missing.stderr);
    assert_eq!(
        repo.run(&["claim", "list", "--json"]).ok().json()["claims"].as_array().map(Vec::len),
        Some(0),
        "no claim was taken"
    );
}

/// SIGINT: sessions are stopped, their work committed, claims released, exit 130; and P1:
/// nothing with the session's marker is left.
#[test]
fn sigint_commits_the_sessions_work_releases_the_claim_and_exits_130() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["long job"]);
    let flag = env.path("wrote");
    let cmd = env.agent(
        "long",
        &format!(
            "echo partial > partial.txt\n(setsid sleep 60 &)\nsleep 60 &\n\
             (env -u GIT_LOOP_MARKER setsid sleep 60 & echo $! > {f}.scrubbed)\n\
             n=0; while [ \"$(cat /proc/$(cat {f}.scrubbed)/comm)\" != sleep ] && [ $n -lt 3000 ]; do sleep 0.02; n=$((n+1)); done\ntouch {f}\nwait",
            f = flag.display()
        ),
    );
    let mut child = repo
        // Unconfined: this is the guard's own sweep (a confined session's pid namespace ends
        // with it: `confine::`).
        .command(&["run", "--agent-cmd", &cmd, "--grace", "1", "--sandbox", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("the agent's first write", || flag.exists());
    let marker = repo.session_records()[0]["marker"].as_str().expect("marker").to_owned();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        repo.git(&["show", &format!("loop-try/{id}/1:partial.txt")]),
        "partial",
        "the work is on the try branch"
    );
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!((task["state"].as_str(), task["claim"].is_null()), (Some("open"), true), "open and free again");
    assert_eq!(marked(&marker), Vec::<u32>::new(), "no process with the session's marker is left");
    let scrubbed = std::fs::read_to_string(env.path("wrote.scrubbed")).expect("pid");
    assert!(!alive(scrubbed.trim().parse().expect("pid")), "nor the one that dropped the marker");
}

/// Whether process `pid` is running (a zombie waiting for a parent that does not reap is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rfind(')').and_then(|at| stat.get(at + 2..at + 3)).is_some_and(|state| state != "Z"))
}

/// The walk keeps its board current through a watch on the refs: a task added and a task
/// cancelled by someone else while a session runs are seen before the walk picks its next
/// task, and so is a task deleted by hand with git.
#[test]
fn tasks_added_cancelled_or_deleted_during_a_walk_are_seen_at_its_next_step() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let first = repo.add(&["first", "-p", "p1"]);
    let cancelled = repo.add(&["to be cancelled", "-p", "p2"]);
    let deleted = repo.add(&["to be deleted", "-p", "p2"]);
    let (started, go) = (env.path("started"), env.path("go"));
    let cmd = env.agent(
        "waiter",
        &format!(
            "if [ \"$GIT_LOOP_TASK\" = {first} ]; then touch {s}; while [ ! -f {g} ]; do sleep 0.05; done; fi\n\
             echo '{{\"verdict\":\"done\"}}' > \"$GIT_LOOP_RESULT\"",
            s = started.display(),
            g = go.display()
        ),
    );
    let walk = repo
        .command(&["run", "--agent-cmd", &cmd, "--grace", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("the first session", || started.exists());
    let urgent = repo.add(&["urgent", "-p", "p0"]);
    repo.run(&["cancel", &cancelled]).ok();
    repo.git(&["update-ref", "-d", &format!("refs/loop/tasks/{deleted}")]);
    std::fs::write(&go, "").expect("go");
    let out = walk.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    let claimed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "claimed")
        .filter_map(|e| e["task"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(claimed, vec![first, urgent], "the urgent task next; never the cancelled or the deleted one");
}

/// P1 for a session that ends on its own: whatever it left running in the background —
/// forked, setsid'd, double-forked, or with the marker scrubbed from its environment — is
/// gone by the time the walk goes on.
#[test]
fn an_agent_that_exits_leaving_background_processes_leaves_none_of_them() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["leave things behind"]);
    let pids = env.path("pids");
    let cmd = env.agent(
        "leaver",
        &format!(
            "sleep 120 & echo $! >> {p}\n\
             (setsid sleep 120 & echo $! >> {p})\n\
             (sleep 120 & echo $! >> {p})\n\
             (env -u GIT_LOOP_MARKER setsid sleep 120 & echo $! >> {p}; echo $! > {p}.scrubbed)\n\
             while [ \"$(cat /proc/$(cat {p}.scrubbed)/comm)\" != sleep ]; do sleep 0.02; done\n\
             echo '{{\"verdict\":\"done\"}}' > \"$GIT_LOOP_RESULT\"",
            p = pids.display()
        ),
    );
    // Unconfined: the guard's own sweep by marker and as subreaper (`confine::` checks that a
    // confined session's pid namespace takes everything with it).
    let out = run(&repo, &cmd, &["--json", "--sandbox", "off"]).ok();
    assert!(events(&out).iter().any(|e| e["event"] == "unit_closed" && e["verdict"] == "done"), "the task is done");
    let left: Vec<u32> = std::fs::read_to_string(&pids)
        .expect("pids")
        .split_whitespace()
        .map(|p| p.parse().expect("pid"))
        .filter(|pid| alive(*pid))
        .collect();
    assert_eq!(left, Vec::<u32>::new(), "no background process of the session is left");
    let marker = repo.session_records()[0]["marker"].as_str().expect("marker").to_owned();
    assert_eq!(marked(&marker), Vec::<u32>::new(), "no process with the session's marker is left");
}

/// The guard adopts what the agent orphans, so it also reaps those that end while the agent
/// runs: an agent that double-forks many short-lived processes leaves no zombies behind.
#[test]
fn short_lived_processes_an_agent_orphans_are_reaped_while_it_runs() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["fork a lot"]);
    let count = env.path("zombies");
    let cmd = env.agent(
        "forker",
        &format!(
            "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do (sh -c 'exit 0' &); done\n\
             sleep 0.5\n\
             guard=$PPID; while [ \"$(cat /proc/$guard/comm)\" != git-loop ]; do \
             set -- $(cat /proc/$guard/stat); guard=$4; done\n\
             z=0; for s in /proc/[0-9]*/stat; do set -- $(cat $s 2>/dev/null); \
             if [ \"$4\" = \"$guard\" ] && [ \"$3\" = Z ]; then z=$((z+1)); fi; done\n\
             echo $z > {}\n\
             echo '{{\"verdict\":\"done\"}}' > \"$GIT_LOOP_RESULT\"",
            count.display()
        ),
    );
    // Unconfined: it looks for the guard among its ancestors, which a confined session cannot see.
    let out = run(&repo, &cmd, &["--json", "--sandbox", "off"]).ok();
    assert!(events(&out).iter().any(|e| e["event"] == "unit_closed" && e["verdict"] == "done"), "the task is done");
    assert_eq!(std::fs::read_to_string(&count).expect("count").trim(), "0", "zombies under the guard mid-session");
}

/// P1 and P4: the walk is killed with SIGKILL mid-session. Its guard stops the agent and every
/// child it forked, setsid'd or double-forked; the next walk recovers the leftovers, releases
/// the dead walk's claim, and finishes the task.
#[test]
fn a_walk_killed_mid_session_leaves_no_process_and_the_next_walk_recovers_its_work() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["survive a crash"]);
    let flag = env.path("wrote");
    let script = format!(
        "if [ -f first-done ]; then git loop finish done --message 'resumed'; exit 0; fi\n\
         echo from-the-first-session > first-done\n(setsid sleep 120 &)\n(sleep 120 &)\ntouch {}\nsleep 120",
        flag.display()
    );
    let cmd = env.agent("crash", &script);
    let mut child = repo
        .command(&["run", "--agent-cmd", &cmd, "--grace", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("the agent's first write", || flag.exists());
    let marker = repo.session_records()[0]["marker"].as_str().expect("marker").to_owned();
    child.kill().expect("SIGKILL the walk");
    child.wait().expect("reap");
    wait_for("every marked process to be gone", || marked(&marker).is_empty());
    let claims = repo.run(&["claim", "list", "--json"]).ok().json();
    assert_eq!(claims["claims"][0]["key"], format!("node:{id}"), "the dead walk's claim is still there");
    let out = run(&repo, &cmd, &["--json"]).ok();
    let evs = events(&out);
    assert!(evs.iter().any(|e| e["event"] == "recovered"), "the crash is reported");
    assert!(evs.iter().any(|e| e["event"] == "try_opened" && e["resumed"] == true), "the same try continues");
    assert_eq!(repo.git(&["show", &format!("loop/{id}:first-done")]), "from-the-first-session", "no work was lost");
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done");
}

/// P2: an agent that ignores SIGTERM is killed within grace + 1 s of the timeout.
#[test]
fn an_agent_ignoring_sigterm_is_killed_within_grace_plus_one_second() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["stubborn"]);
    let cmd = env.agent("stubborn", "trap '' TERM\nwhile true; do sleep 1; done");
    let out = repo
        .run(&[
            "run",
            "--agent-cmd",
            &cmd,
            "--grace",
            "1",
            "--session-timeout",
            "2",
            "--per-unit-dispatches",
            "1",
            "--json",
        ])
        .ok();
    let ended = events(&out).into_iter().find(|e| e["event"] == "session_ended").expect("session_ended");
    let elapsed = ended["elapsed_ms"].as_u64().expect("elapsed");
    assert!(ended["reason"].as_str().expect("reason").starts_with("it timed out"), "{ended}");
    assert!(elapsed < 2_000 + 1_000 + 1_000, "killed within timeout + grace + 1 s, took {elapsed} ms");
}

/// P7: a torn result file is reported and counts as no verdict; a valid one is read, and its
/// follow-ups become tasks.
#[test]
fn result_files_are_read_only_when_complete_and_valid() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let torn = repo.add(&["torn"]);
    let cmd = env.agent("torn", "printf '{\"verdict\": \"do' > \"$GIT_LOOP_RESULT\"");
    let out = run(&repo, &cmd, &["--per-unit-dispatches", "1", "--json"]).ok();
    assert!(events(&out)
        .iter()
        .any(|e| e["event"] == "warning" && e["message"].as_str().is_some_and(|m| m.contains("torn or invalid"))));
    assert_eq!(repo.run(&["show", &torn, "--json"]).ok().json()["reason"], "failed: no verdict after 1 session");
    let good = repo.add(&["good"]);
    let cmd = env.agent("good",
        "printf '{\"verdict\":\"done\",\"summary\":\"all set\",\"follow_ups\":[{\"title\":\"write the docs\",\"priority\":\"p1\"}]}' > \"$GIT_LOOP_RESULT\"",
    );
    let out = run(&repo, &cmd, &["--max-units", "1", "--json"]).ok();
    assert!(events(&out).iter().any(|e| e["event"] == "follow_up" && e["title"] == "write the docs"));
    let shown = repo.run(&["show", &good, "--json"]).ok().json();
    assert_eq!((shown["state"].as_str(), shown["completion"]["message"].as_str()), (Some("done"), Some("all set")));
}

/// W1: everything an agent wrote before being stopped is on its try branch — modified, new,
/// deleted, executable, symlinked files and its own commits on a detached HEAD — ignored files
/// are not, and `git status` in the worktree is clean afterwards.
#[test]
fn w1_commit_on_stop_captures_every_kind_of_change_and_leaves_a_clean_worktree() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    std::fs::write(repo.dir.join(".gitignore"), "*.log\n").expect("write");
    std::fs::write(repo.dir.join("gone.txt"), "bye\n").expect("write");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "more"]);
    let id = repo.add(&["all kinds"]);
    let script = "echo changed >> README\necho new > new.txt\nmkdir -p deep/er && echo nested > deep/er/n.txt\nrm gone.txt\n\
                  printf '#!/bin/sh\\n' > tool.sh && chmod +x tool.sh\nln -s README link\necho noise > debug.log\n\
                  git -c user.name=a -c user.email=a@b commit -q --allow-empty -m 'agent commit' && git checkout -q --detach\n\
                  echo staged > staged.txt && git add staged.txt\nsleep 60";
    let cmd = env.agent("kinds", script);
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "3", "--max-iterations", "1"]).code(1);
    let branch = format!("loop-try/{id}/1");
    let files = repo.git(&["ls-tree", "-r", "--format=%(objectmode) %(path)", &branch]);
    assert_eq!(
        files,
        "100644 .gitignore\n100644 README\n100644 deep/er/n.txt\n120000 link\n100644 new.txt\n100644 staged.txt\n100755 tool.sh",
        "every change is captured, ignored files are not"
    );
    assert_eq!(repo.git(&["show", &format!("{branch}:README")]), "hello\nchanged");
    assert!(repo.git(&["log", "--format=%s", &branch]).contains("agent commit"), "the agent's own commit is kept");
    let worktree = repo.dir.join(format!(".git/loop/worktrees/{id}-1"));
    assert!(worktree.exists(), "a task left open keeps its worktree");
    let status = env.git(&worktree, &["status", "--porcelain"]);
    assert_eq!(status, "", "git status is clean after commit-on-stop");
    assert_eq!(
        env.git(&worktree, &["symbolic-ref", "HEAD"]),
        format!("refs/heads/{branch}"),
        "HEAD is back on the try branch"
    );
}

/// S4: hooks, fsmonitor, filters and an ssh command planted by an agent never run during the
/// loop's own git work (commit-on-stop, worktree creation, branch moves).
#[test]
fn s4_planted_hooks_fsmonitor_and_filters_never_run() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["plant"]);
    repo.add(&["next one"]);
    let canary = env.path("canary");
    let evil = env.path("evil.sh");
    std::fs::write(&evil, format!("#!/bin/sh\necho ran \"$0\" \"$@\" >> {}\ncat\n", canary.display())).expect("write");
    std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let script = format!(
        "common=$(git rev-parse --git-common-dir)\n\
         for h in pre-commit post-commit post-checkout reference-transaction pre-push; do cp {e} \"$common/hooks/$h\"; done\n\
         git config core.fsmonitor {e}\ngit config core.sshCommand {e}\n\
         git config filter.evil.clean {e}\ngit config filter.evil.smudge {e}\ngit config filter.evil.required true\n\
         echo '* filter=evil' > .gitattributes\necho data > file.txt\n\
         git loop finish done",
        e = evil.display()
    );
    let cmd = env.agent("plant", &script);
    let out = run(&repo, &cmd, &["--json"]);
    assert!(!canary.exists(), "planted code ran: {}", std::fs::read_to_string(&canary).unwrap_or_default());
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// S3: ids that could escape the worktree root are refused before any work.
#[test]
fn s3_ids_that_could_escape_their_root_are_refused() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = env.path("in.jsonl");
    for id in ["../up", "/abs", "a/b", "..", ".hidden", "x/../../y"] {
        std::fs::write(&file, format!("{{\"id\":{},\"title\":\"t\"}}\n", serde_json::json!(id))).expect("write");
        repo.run(&["import", file.to_str().expect("utf-8")]).code(2);
    }
    assert!(repo.git(&["for-each-ref", "refs/loop/tasks"]).is_empty(), "nothing was written");
}

/// C6, a paused holder: a claim is lost while a session runs. While the walk runs it
/// refreshes its claim (lease 3 s) and a person's attempts to take the task, over more than
/// one lease, are all refused; once the walk is paused (SIGSTOP: it stops refreshing), the
/// person takes the claim over after seeing it unchanged for a lease by their own clock. The
/// walk, resumed, stops the session, commits its work to its try branch and leaves the unit
/// open. Every process here reads the real clock.
#[test]
fn a_claim_lost_mid_session_stops_the_session_and_leaves_the_task_to_its_new_holder() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["contested"]);
    let flag = env.path("wrote");
    let cmd = env.agent("slow", &format!("echo mine > mine.txt\ntouch {}\nsleep 60", flag.display()));
    let real_clock = [("GIT_LOOP_NOW", "")];
    let mut walk = repo.command(&["run", "--agent-cmd", &cmd, "--grace", "1", "--lease", "3", "--json"]);
    let child = walk.envs(real_clock).stdout(Stdio::piped()).spawn().expect("spawn");
    wait_for("the agent's write", || flag.exists());
    let key = format!("node:{id}");
    let take = || repo.run_with(&["claim", "acquire", &key, "--holder", "person", "--json"], &real_clock);
    let watching = std::time::Instant::now();
    let mut refused = 0;
    while watching.elapsed() < std::time::Duration::from_secs(5) {
        let out = take().code(1);
        assert_eq!(out.json()["outcome"], "held", "a claim refreshed by its walk is never taken over");
        refused += 1;
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(refused > 1, "attempts spread over more than one lease");

    // Pause the walk (only it: the agent under its guard runs on) while it holds no ref lock.
    let walk_pid = child.id() as i32;
    let lock = repo.dir.join(format!(".git/refs/loop/claims/node/{id}.lock"));
    for attempt in 0.. {
        assert!(attempt < 1000, "the walk was never paused while it held no lock on {}", lock.display());
        // SAFETY: signalling the child this test spawned and still owns.
        unsafe { libc::kill(walk_pid, libc::SIGSTOP) };
        wait_for("the walk to stop", || {
            std::fs::read_to_string(format!("/proc/{walk_pid}/stat"))
                .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T')))
        });
        if !lock.exists() {
            break;
        }
        // SAFETY: as above.
        unsafe { libc::kill(walk_pid, libc::SIGCONT) };
    }
    let paused = std::time::Instant::now();
    let last: serde_json::Value =
        serde_json::from_str(&repo.git(&["cat-file", "-p", &format!("refs/loop/claims/node/{id}")])).expect("a record");
    let refreshed: chrono::DateTime<chrono::Utc> =
        last["refreshed_at"].as_str().expect("a time").parse().expect("RFC 3339");
    let mut taken = None;
    while taken.is_none() {
        assert!(paused.elapsed() < std::time::Duration::from_secs(20), "a paused holder's claim is taken over");
        let out = take();
        if out.code == 0 {
            taken = Some(out.json());
        } else {
            assert_eq!(out.json()["outcome"], "held");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // One clock on this machine: the walk's last refresh and the takeover can be compared.
    let unrefreshed = chrono::Utc::now() - refreshed;
    let waited = paused.elapsed();
    eprintln!(
        "C6: {refused} attempts refused over 5 s while the walk refreshed; taken over {:.1} s after its last refresh, \
         {:.1} s after the pause (lease 3 s)",
        unrefreshed.as_seconds_f64(),
        waited.as_secs_f64()
    );
    assert!(unrefreshed >= chrono::Duration::seconds(3), "not before a whole lease without a refresh: {unrefreshed}");
    assert!(waited < std::time::Duration::from_secs(6), "within a lease and a little of the pause: {waited:?}");
    assert_eq!(taken.expect("taken")["outcome"], "taken_over");
    // SAFETY: as above.
    unsafe { libc::kill(walk_pid, libc::SIGCONT) };
    let out = Run::from(child.wait_with_output().expect("walk ends"));
    let evs = events(&out);
    let left = evs.iter().find(|e| e["event"] == "unit_abandoned").expect("the unit is left, not closed");
    assert!(left["reason"].as_str().expect("reason").contains("taken by person"), "{left}");
    assert_eq!(repo.git(&["show", &format!("loop-try/{id}/1:mine.txt")]), "mine", "its work is committed");
    let task = repo.run_with(&["show", &id, "--json"], &real_clock).ok().json();
    assert_eq!(
        (task["state"].as_str(), task["claim"]["holder"].as_str()),
        (Some("open"), Some("person")),
        "the new holder keeps it"
    );
}

/// A task's branch starts from the base with its done dependencies' work merged in.
#[test]
fn a_task_builds_on_the_work_of_the_tasks_it_depends_on() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let a = repo.add(&["a", "--body", "a"]);
    let b = repo.add(&["b", "--body", "b"]);
    let c = repo.add(&["c", "--after", &a, "--after", &b, "--body", "c"]);
    let cmd = env.agent("writer", "if [ -f a.txt ] && [ -f b.txt ]; then echo ok > c.txt; else tail -1 \"$GIT_LOOP_PROMPT\" >/dev/null; fi\nbody=$(sed -n 3p \"$GIT_LOOP_PROMPT\")\necho done > \"$body.txt\"\ngit loop finish done");
    run(&repo, &cmd, &[]).ok();
    let files = repo.git(&["ls-tree", "--name-only", &format!("loop/{c}")]);
    assert_eq!(files, "README\na.txt\nb.txt\nc.txt", "c saw a's and b's work");
    let _ = (a, b);
}

/// --merge merges each done task branch into the base by compare-and-swap; a conflict parks
/// the task (needs-you) with the paths named and leaves the base untouched.
#[test]
fn merge_into_the_base_moves_it_or_needs_you_on_conflict_never_half_merged() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.git(&["checkout", "-q", "-b", "work"]);
    repo.git(&["branch", "-q", "integration", "main"]);
    repo.git(&["config", "loop.mergeInto", "integration"]);
    let one = repo.add(&["one"]);
    let cmd = env.agent("one", "echo one > README\ngit loop finish done");
    run(&repo, &cmd, &["--merge", "--base", "main"]).ok();
    assert_eq!(repo.git(&["show", "integration:README"]), "one", "the base holds the task's work");
    repo.git(&["checkout", "-q", "integration"]);
    repo.git(&["-c", "user.name=x", "-c", "user.email=x@y", "commit", "-q", "--allow-empty", "-m", "move"]);
    std::fs::write(repo.dir.join("README"), "theirs\n").expect("write");
    repo.git(&["-c", "user.name=x", "-c", "user.email=x@y", "commit", "-q", "-am", "theirs"]);
    repo.git(&["checkout", "-q", "work"]);
    let before = repo.git(&["rev-parse", "integration"]);
    let two = repo.add(&["two"]);
    let cmd = env.agent("two", "echo two > README\ngit loop finish done");
    run(&repo, &cmd, &["--merge", "--base", "main"]).ok();
    let task = repo.run(&["show", &two, "--json"]).ok().json();
    assert_eq!(task["state"], "needs-you");
    assert!(task["reason"].as_str().expect("reason").contains("conflicts in: README"), "{task}");
    assert_eq!(repo.git(&["rev-parse", "integration"]), before, "the base was not touched");
    let _ = one;
}

/// --parallel N works N tasks at once, each with its own claim, try and worktree.
#[test]
fn parallel_walks_work_several_tasks_at_once() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    for i in 0..4 {
        repo.add(&[&format!("task {i}")]);
    }
    let gate = env.path("gate");
    std::fs::create_dir_all(&gate).expect("mkdir");
    // Each session waits until a second one is running, which only happens in parallel.
    let cmd = env.agent("par",
        &format!("touch {g}/$GIT_LOOP_SESSION\nn=0\nwhile [ $(ls {g} | wc -l) -lt 2 ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done\n[ $n -lt 200 ]\ngit loop finish done", g = gate.display()),
    );
    let out = run(&repo, &cmd, &["--parallel", "2", "--json"]).ok();
    let last = events(&out).pop().expect("finished");
    assert_eq!((last["done"].as_u64(), last["not_done"].as_u64()), (Some(4), Some(0)), "{last}");
}

/// Run from a linked worktree, the loop behaves as from the main one: same state, and one
/// walker per repository.
#[test]
fn a_walk_from_a_linked_worktree_is_the_same_walk_as_from_the_main_one() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["from a worktree"]);
    let linked = env.path("linked");
    repo.git(&["worktree", "add", "-q", "-b", "side", linked.to_str().expect("utf-8")]);
    let side = Repo { env: &env, dir: linked };
    let cmd = env.agent("done", "git loop finish done");
    run(&side, &cmd, &[]).ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done", "the main worktree sees it");
}

#[test]
fn status_shows_the_board_at_a_glance() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["ready one", "-p", "p1"]);
    let parked = repo.add(&["parked one"]);
    repo.run(&["park", &parked, "--reason", "waiting for review"]).ok();
    let out = repo.run(&["status"]).ok();
    let ready = repo.run(&["next", "--json"]).ok().json()["id"].as_str().expect("ready").to_owned();
    assert_eq!(
        out.stdout_with(&[(&parked, "<P>"), (&ready, "<R>")]),
        "no walk running here\n\nready next:\n  <R>  p1  ready one\n\nparked:\n  <P>  parked one  waiting for review\n\n1 open (1 ready, 0 blocked, 0 running) · 0 done · 1 parked · 0 cancelled\n"
    );
    let json = repo.run(&["status", "--json"]).ok().json();
    assert_eq!((json["counts"]["ready"].as_u64(), json["counts"]["parked"].as_u64()), (Some(1), Some(1)));
}

#[test]
fn the_demo_walks_its_backlog_to_the_end() {
    let env = TestEnv::new();
    let dir = env.path("demo");
    let out = Run::from(
        env.seal(&mut std::process::Command::new(crate::harness::bin()))
            .args(["demo", "--dir", dir.to_str().expect("utf-8")])
            .current_dir(env.root.path())
            .output()
            .expect("run the demo"),
    )
    .ok();
    assert!(
        out.stdout.contains("5 done, 1 not done, 0 left open · 7 sessions · spend unknown · nothing left to do"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("checks failed"), "one task fails its checks first");
    assert!(out.stdout.contains("needs-you · blocked: dividing by zero needs a decision"), "one task needs you");
    assert_eq!(env.git(&dir, &["status", "--porcelain"]), "", "the demo leaves its repository clean");
}

/// `--task` limits a walk to the given tasks; `--termination-key` journals how it ended under
/// that key, where a mission commander looks for it.
#[test]
fn a_walk_limited_to_some_tasks_journals_its_end_under_a_key() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let wanted = repo.add(&["wanted", "-p", "p3"]);
    let other = repo.add(&["other", "-p", "p0"]);
    let cmd = env.agent("done", "git loop finish done");
    run(&repo, &cmd, &["--task", &wanted, "--termination-key", "m-demo-api-1"]).ok();
    assert_eq!(repo.run(&["show", &wanted, "--json"]).ok().json()["state"], "done");
    assert_eq!(repo.run(&["show", &other, "--json"]).ok().json()["state"], "open", "tasks not named are left alone");
    let chain = repo.git(&["log", "--format=%B", "refs/loop/journal/m-demo-api-1"]);
    let event: serde_json::Value =
        serde_json::from_str(chain.lines().find(|l| l.starts_with('{')).expect("an event")).expect("json");
    assert_eq!(
        (event["kind"].as_str(), event["data"]["stop"].as_str(), event["data"]["succeeded"].as_u64()),
        (Some("walk_terminated"), Some("no_work"), Some(1))
    );
}

/// A walk whose claim someone released while its session ran does not quietly take it back:
/// the session stops as one whose claim is lost, and the claim stays free.
#[test]
fn a_claim_released_under_a_running_session_stops_it_as_lost() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["held"]);
    let flag = env.path("started");
    let cmd = env.agent("sleeper", &format!("touch {}\nsleep 30", flag.display()));
    let walk = repo
        .command(&["run", "--agent-cmd", &cmd, "--grace", "1", "--lease", "3s", "--max-iterations", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for("the session", || flag.exists());
    let claims = repo.run(&["claim", "list", "--json"]).ok().json();
    let holder = claims["claims"][0]["holder"].as_str().expect("the walk's claim").to_owned();
    repo.run(&["claim", "release", &format!("node:{id}"), "--holder", &holder]).ok();
    let out = crate::harness::Run::from(walk.wait_with_output().expect("wait"));
    let ended: Vec<serde_json::Value> = events(&out).into_iter().filter(|e| e["event"] == "session_ended").collect();
    assert_eq!(ended[0]["reason"], "its claim was released by someone else while it ran", "{}", out.stdout);
    assert!(repo.run(&["claim", "list", "--json"]).ok().json()["claims"].as_array().is_some_and(|c| c.is_empty()));
}

/// `--parallel 0` names itself, with a hint, not an option that was never given.
#[test]
fn parallel_zero_names_itself_with_a_hint() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let out = repo.run(&["run", "--agent-cmd", "true", "--parallel", "0"]).code(2);
    assert_eq!(out.stderr, "error: --parallel must be at least 1\nhint: --parallel 1 runs one session at a time\n");
}

/// A task whose agent says done every time and whose checks fail every time ends saying so,
/// not "no verdict".
#[test]
fn a_task_whose_checks_fail_after_every_session_says_so_when_it_fails() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["never passes"]);
    let agent = env.agent("eager", "echo x >> x.txt\ngit loop finish done --message done");
    repo.run(&["run", "--agent-cmd", &agent, "--checks", "false", "--per-unit-dispatches", "2"]);
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(
        (task["state"].as_str(), task["reason"].as_str()),
        (Some("failed"), Some("failed: the checks failed 2 times (each of its 2 sessions reported done)"))
    );
}

/// `--max-units` reached says so, with no budget named: exit 0 when every task it took is
/// done, exit 1 (`stop: units`) when one is not.
#[test]
fn max_units_reached_says_so_and_exits_by_whether_its_tasks_were_done() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["one", "-p", "p2"]);
    repo.add(&["two", "-p", "p2"]);
    let done = env.agent("done", "git loop finish done --message ok");
    let out = repo.run(&["run", "--agent-cmd", &done, "--max-units", "1"]).ok();
    assert!(out.stdout.contains("· --max-units reached, every task it took done"), "{}", out.stdout);
    let fails = env.agent("fails", "git loop finish failed --message no");
    let out = repo.run(&["run", "--agent-cmd", &fails, "--max-units", "1", "--json"]).code(1);
    let last: serde_json::Value =
        serde_json::from_str(out.stdout.lines().last().expect("a line")).expect("the last event is JSON");
    assert_eq!(last["stop"], "units", "{}", out.stdout);
    let said = repo.run(&["log", "--json"]).ok().json();
    let ended = said["events"].as_array().expect("events").iter().rev().find(|e| e["kind"] == "walk_ended").cloned();
    assert_eq!(ended.expect("walk_ended")["data"]["stop"], "units");
}

/// Issue 43: an agent that fails at once the same way every time (a cause of the environment:
/// exit 1, not 126 or 127) is asked about after three sessions, with the repeated line, instead
/// of burning every session of the task in seconds.
#[test]
fn the_same_quick_failure_three_times_asks_a_person_with_the_repeated_line() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["needs foo", "-p", "p2"]);
    let agent = env.agent("broken", "echo 'ModuleNotFoundError: No module named foo'\nexit 1");
    repo.run(&["run", "--agent-cmd", &agent]);
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(repo.session_records().len(), 3, "three sessions, not the task's fifteen");
    let reason = task["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(
            "the same failure 3 sessions in a row, each over within 5 s: ModuleNotFoundError: No module named foo"
        ),
        "{task}"
    );
    assert!(reason.contains(&format!("then 'git loop reopen {id}'")), "{reason}");
}
