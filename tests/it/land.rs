//! The landing queue: `git loop land` and `run --land`. Done tasks are made directly (a commit
//! on their task branch, then `git loop done`), or by a scripted agent for the walk; the
//! target's history, its worktree, the tasks' states and the journal say what happened.

use std::path::Path;

use crate::harness::{Repo, TestEnv};

/// Add a task (with `args`, e.g. `--after`, `--priority`), put a commit writing `file` with
/// `content` on its task branch (from main), and mark it done: its id.
pub(crate) fn done_task(repo: &Repo<'_>, title: &str, args: &[&str], file: &str, content: &str) -> String {
    let mut all = vec![title];
    all.extend_from_slice(args);
    let id = repo.add(&all);
    let branch = format!("loop/{id}");
    let wt = repo.env.path(&format!("wt-{id}"));
    let wt_str = wt.to_str().expect("utf-8");
    repo.git(&["worktree", "add", "-q", "-b", &branch, wt_str, "main"]);
    std::fs::write(wt.join(file), content).expect("write the task's file");
    repo.env.git(&wt, &["add", "-A"]);
    repo.env.git(&wt, &["commit", "-q", "-m", &format!("work of {title}")]);
    repo.git(&["worktree", "remove", wt_str]);
    repo.run(&["done", &id]).ok();
    id
}

fn head(repo: &Repo<'_>, rev: &str) -> String {
    repo.git(&["rev-parse", rev])
}

pub(crate) fn contains(repo: &Repo<'_>, ancestor: &str, rev: &str) -> bool {
    let out = repo
        .env
        .seal(
            std::process::Command::new("git")
                .args(["merge-base", "--is-ancestor", ancestor, rev])
                .current_dir(&repo.dir),
        )
        .output()
        .expect("git");
    out.status.success()
}

fn state(repo: &Repo<'_>, id: &str) -> serde_json::Value {
    repo.run(&["show", id, "--json"]).ok().json()
}

/// The tasks each landing merge on main's first-parent history names, oldest first.
fn landing_order(repo: &Repo<'_>, git_dir: &Path) -> Vec<String> {
    let log = repo.env.git(git_dir, &["log", "--first-parent", "--reverse", "--format=%B%x00", "main"]);
    log.split('\0')
        .filter_map(|msg| msg.lines().find_map(|l| l.strip_prefix("Loop-Task: ")).map(str::to_owned))
        .collect()
}

#[test]
fn landing_on_a_checked_out_clean_target_brings_its_worktree_along() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let a = done_task(&repo, "Add a", &[], "a.txt", "a\n");
    let b = done_task(&repo, "Add b", &[], "b.txt", "b\n");
    let before = head(&repo, "main");
    let out = repo.run(&["land", "--checks", "test -f a.txt && test -f b.txt", "--json"]).ok();
    let report = &out.json()["landing"];
    assert_eq!(report["into"], "main");
    assert_eq!(report["landed"].as_array().expect("landed").len(), 2, "{report}");
    let main = head(&repo, "main");
    assert_ne!(main, before, "the target moved");
    assert_eq!(report["target"], main.as_str());
    for id in [&a, &b] {
        assert!(contains(&repo, &format!("loop/{id}"), "main"), "{id}'s work is on main");
    }
    // The worktree that has main checked out followed it: its files, and a clean status.
    assert_eq!(std::fs::read_to_string(repo.dir.join("a.txt")).expect("a.txt"), "a\n");
    assert_eq!(std::fs::read_to_string(repo.dir.join("b.txt")).expect("b.txt"), "b\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "", "git status is clean after the landing");
    // The completion note says where it landed; the journal has the landing.
    let task_head = head(&repo, &format!("loop/{a}"));
    let note = repo.git(&["notes", "--ref=loop", "show", &task_head]);
    assert!(note.contains("\"landed\"") && note.contains(&main), "the note records the landing: {note}");
    let log = repo.run(&["log", "--json"]).ok().json();
    let landed: Vec<&serde_json::Value> =
        log["events"].as_array().expect("events").iter().filter(|e| e["kind"] == "task_landed").collect();
    assert_eq!(landed.len(), 2);
    assert_eq!(landed[0]["data"]["into"], "refs/heads/main");
    assert_eq!(landed[0]["data"]["commit"], main.as_str());
    assert_eq!(landed[0]["data"]["batch"], 2);
    // Nothing is left to land.
    let again = repo.run(&["land"]).ok();
    assert_eq!(again.stdout.trim(), "nothing to land on main");
}

#[test]
fn a_dirty_checkout_of_the_target_is_refused_and_nothing_moves() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = done_task(&repo, "Add a", &[], "a.txt", "a\n");
    std::fs::write(repo.dir.join("README"), "my own edit\n").expect("edit");
    let before = head(&repo, "main");
    let out = repo.run(&["land", "--checks", "true"]).code(1);
    assert!(
        out.stderr.contains("'main' is checked out in") && out.stderr.contains("uncommitted changes"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("hint: commit or stash them there"), "{}", out.stderr);
    assert_eq!(head(&repo, "main"), before, "the target did not move");
    assert_eq!(std::fs::read_to_string(repo.dir.join("README")).expect("README"), "my own edit\n", "untouched");
    assert!(!repo.dir.join("a.txt").exists());
    assert_eq!(state(&repo, &id)["state"], "done", "the task still waits to land");
}

#[test]
fn a_batch_of_eight_with_one_bad_change_is_bisected_and_seven_land() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let mut ids = Vec::new();
    for n in 0..8 {
        let (file, content) = if n == 5 { ("BAD".to_owned(), "bad\n") } else { (format!("f{n}.txt"), "ok\n") };
        ids.push(done_task(&repo, &format!("Change {n}"), &[], &file, content));
    }
    let checks = "echo checking; test ! -f BAD";
    let out = repo.run(&["land", "--batch", "8", "--checks", checks, "--json"]).code(1);
    let report = &out.json()["landing"];
    let landed: Vec<&str> =
        report["landed"].as_array().expect("landed").iter().map(|l| l["task"].as_str().expect("task")).collect();
    assert_eq!(landed.len(), 7, "{report}");
    assert!(!landed.contains(&ids[5].as_str()));
    let failed = &report["failed"][0];
    assert_eq!((failed["task"].as_str(), failed["cause"].as_str()), (Some(ids[5].as_str()), Some("checks")));
    // The bad one needs you, with the checks' output and where it is kept.
    let bad = state(&repo, &ids[5]);
    assert_eq!(bad["state"], "needs-you");
    let reason = bad["reason"].as_str().expect("a reason");
    assert!(reason.contains("the checks fail on its merge into main") && reason.contains("checking"), "{reason}");
    let log = failed["log"].as_str().expect("a log");
    assert!(reason.contains(log) && Path::new(log).exists(), "{reason}");
    // The target holds the seven, not the bad one, and its checks pass.
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(contains(&repo, &format!("loop/{id}"), "main"), n != 5, "task {n}");
    }
    assert!(!repo.dir.join("BAD").exists());
    let checked = env.seal(std::process::Command::new("sh").args(["-c", checks]).current_dir(&repo.dir)).status();
    assert!(checked.expect("sh").success(), "the target's checks pass");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    let events = repo.run(&["log", "--json"]).ok().json();
    let failures: Vec<&serde_json::Value> =
        events["events"].as_array().expect("events").iter().filter(|e| e["kind"] == "landing_failed").collect();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0]["task"], ids[5].as_str());
}

#[test]
fn dependencies_land_before_their_dependants_then_priority_decides() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let base = done_task(&repo, "Base", &["--priority", "p2"], "base.txt", "1\n");
    let urgent = done_task(&repo, "Urgent on base", &["--priority", "p0", "--after", &base], "urgent.txt", "1\n");
    let middle = done_task(&repo, "Middle", &["--priority", "p1"], "middle.txt", "1\n");
    // One that waits: its dependency is not done.
    let open = repo.add(&["Not done yet"]);
    let waits = done_task(&repo, "Waits", &["--after", &open], "waits.txt", "1\n");
    let out = repo.run(&["land", "--checks", "true", "--json"]).ok();
    let report = &out.json()["landing"];
    assert_eq!(landing_order(&repo, &repo.dir), [middle.clone(), base.clone(), urgent.clone()]);
    assert_eq!(report["waiting"][0]["task"], waits.as_str());
    assert_eq!(report["waiting"][0]["waiting_for"][0], open.as_str());
    assert!(!contains(&repo, &format!("loop/{waits}"), "main"));
    let status = repo.run(&["status", "--json"]).ok().json();
    assert_eq!(status["landing"]["queue"][0]["task"], waits.as_str(), "{status}");
    // An explicit id that is not done is a usage error naming its state.
    let refused = repo.run(&["land", &open]).code(2);
    assert!(refused.stderr.contains(&format!("task '{open}' is open, not done")), "{}", refused.stderr);
    // Asked to land a task that cannot land yet, it lands nothing: exit 1, saying so (issue
    // 31: it exited 0 having landed nothing).
    let nothing = repo.run(&["land", &waits, "--checks", "true"]).code(1);
    assert!(nothing.stdout.contains(&format!("{waits}  waits for {open} to land first")), "{}", nothing.stdout);
    assert_eq!(
        nothing.stderr,
        "error: 1 task asked to land is not on main\nhint: 'git loop show <id>' says why; land its dependencies first, or answer it\n"
    );
    assert_eq!(repo.run(&["land", &base, "--checks", "true"]).ok().stdout.trim(), "nothing to land on main");
}

/// Issue 31: `show` said a task had landed on main when its completing commit was not on main.
/// It says "landed" only when the target holds the work; a completion note that says it landed
/// while the target does not hold it (the target was moved back) is said as such.
#[test]
fn a_task_is_shown_as_landed_only_while_the_target_holds_its_work() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = done_task(&repo, "Ship it", &[], "ship.txt", "1\n");
    let before = head(&repo, "main");
    repo.run(&["land", "--checks", "true"]).ok();
    assert_eq!(state(&repo, &id)["landing"]["state"], "landed");
    assert!(repo.run(&["show", &id]).ok().stdout.contains("  landing: on main\n"));
    // main is moved back past the landing: its note still says it landed.
    repo.git(&["reset", "-q", "--hard", &before]);
    let shown = state(&repo, &id);
    assert_eq!(shown["landing"]["state"], "noted", "{shown}");
    let said = repo.run(&["show", &id]).ok().stdout;
    assert!(!said.contains("  landing: on main\n"), "{said}");
    assert!(
        said.contains(
            "  landing: its note says it landed on main, but main as this clone knows it does not hold its work"
        ),
        "{said}"
    );
}

#[test]
fn a_conflicting_landing_leaves_the_target_untouched_and_says_why() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let first = done_task(&repo, "One README", &["--priority", "p0"], "README", "one\n");
    let second = done_task(&repo, "Other README", &["--priority", "p1"], "README", "other\n");
    let dependant = done_task(&repo, "After the other", &["--priority", "p0", "--after", &second], "d.txt", "d\n");
    let out = repo.run(&["land", "--checks", "true"]).code(1);
    assert!(out.stdout.contains(&format!("{first}  landed on main")), "{}", out.stdout);
    assert!(out.stdout.contains(&format!("{dependant}  waits for {second} to land first")), "{}", out.stdout);
    let after_first = head(&repo, "main");
    assert!(contains(&repo, &format!("loop/{first}"), "main"));
    assert!(!contains(&repo, &format!("loop/{second}"), "main"));
    let task = state(&repo, &second);
    assert_eq!(task["state"], "needs-you");
    let reason = task["reason"].as_str().expect("reason");
    assert!(reason.contains("its merge into main conflicts in: README"), "{reason}");
    // Nothing more moves on a second try: the failed one is not queued again until reopened,
    // and its dependant, asked for with every done task, does not land (exit 1).
    repo.run(&["land", "--checks", "true"]).code(1);
    assert_eq!(head(&repo, "main"), after_first);
    // status and show say why.
    let status = repo.run(&["status"]).ok();
    assert!(status.stdout.contains("last landing failure") && status.stdout.contains(&second), "{}", status.stdout);
    let shown = repo.run(&["show", &second]).ok();
    assert!(shown.stdout.contains("conflicts in: README"), "{}", shown.stdout);
}

#[test]
fn two_clones_landing_on_one_remote_target_at_once_land_each_task_once_in_order_without_force() {
    let env = TestEnv::new();
    let (bare, a, b) = env.two_clones();
    env.git(&bare, &["config", "core.logAllRefUpdates", "always"]);
    let mut ids = Vec::new();
    for (n, (clone, priority)) in [(&a, "p0"), (&b, "p1"), (&a, "p2"), (&b, "p3")].into_iter().enumerate() {
        ids.push(done_task(clone, &format!("Task {n}"), &["--priority", priority], &format!("f{n}.txt"), "x\n"));
    }
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    let spawn = |clone: &Repo<'_>| {
        clone
            .command(&["land", "--checks", "true"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let (one, two) = (spawn(&a), spawn(&b));
    for child in [one, two] {
        let out = child.wait_with_output().expect("wait");
        let code = out.status.code();
        assert!(code == Some(0) || code == Some(3), "landed, or another lander was at work: {out:?}");
        if code == Some(3) {
            assert!(String::from_utf8_lossy(&out.stderr).contains("another lander is at work"), "{out:?}");
        }
    }
    // Whatever a busy clone left, a second pass lands; then nothing is left.
    a.run(&["land", "--checks", "true"]).ok();
    b.run(&["land", "--checks", "true"]).ok();
    assert_eq!(landing_order(&a, &bare), ids, "each task landed once, by priority");
    // Every update of the remote's main was a fast-forward: nothing was force-pushed.
    let reflog = std::fs::read_to_string(bare.join("logs/refs/heads/main")).expect("the remote's reflog of main");
    let updates: Vec<(&str, &str)> = reflog
        .lines()
        .map(|line| {
            let mut ids = line.split(' ');
            (ids.next().expect("old"), ids.next().expect("new"))
        })
        .collect();
    assert!(!updates.is_empty(), "main was updated");
    for (old, new) in updates {
        let ff = env
            .seal(std::process::Command::new("git").args(["merge-base", "--is-ancestor", old, new]).current_dir(&bare))
            .status()
            .expect("git");
        assert!(ff.success(), "{old} -> {new} is a fast-forward");
    }
    // The local mains followed the remote's (each clone's checkout clean).
    a.git(&["fetch", "-q", "origin"]);
    assert_eq!(head(&a, "main"), env.git(&bare, &["rev-parse", "main"]));
    assert_eq!(a.git(&["status", "--porcelain"]), "");
}

#[test]
fn run_with_land_lands_each_done_task_through_the_queue() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let first = repo.add(&["Write one"]);
    let second = repo.add(&["Write two"]);
    let cmd =
        env.agent("writer", "echo \"$GIT_LOOP_TASK\" > \"$GIT_LOOP_TASK.txt\"\ngit loop finish done --message wrote");
    let out = repo
        .run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--checks", "test -n \"$(ls t-*.txt)\"", "--land", "--json"])
        .ok();
    let events: Vec<serde_json::Value> =
        out.stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let landed: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "landed").collect();
    assert_eq!(landed.len(), 2, "{}", out.stdout);
    for id in [&first, &second] {
        assert!(contains(&repo, &format!("loop/{id}"), "main"), "{id} landed");
        assert!(repo.dir.join(format!("{id}.txt")).exists(), "the checkout followed");
        assert!(landed.iter().any(|e| e["task"] == id.as_str() && e["into"] == "main"));
    }
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    // --merge is the same path.
    let third = repo.add(&["Write three"]);
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--merge"]).ok();
    assert!(contains(&repo, &format!("loop/{third}"), "main"));
    assert_eq!(landing_order(&repo, &repo.dir).len(), 3);
}

#[test]
fn a_lost_lease_on_the_remote_target_rebuilds_on_the_new_target_and_checks_again() {
    let env = TestEnv::new();
    let (bare, a, _b) = env.two_clones();
    env.git(&bare, &["config", "core.logAllRefUpdates", "always"]);
    let id = done_task(&a, "Task", &[], "task.txt", "x\n");
    // Someone pushes to the remote's main while the lander's checks run (the first time).
    let other = env.clone_of(bare.to_str().expect("utf-8"), "other");
    std::fs::write(other.dir.join("outside.txt"), "outside\n").expect("write");
    other.git(&["add", "-A"]);
    other.git(&["commit", "-q", "-m", "outside the loop"]);
    let outside = head(&other, "HEAD");
    let marker = env.path("pushed");
    let checks = format!(
        "echo run >> {log}; if [ ! -e {marker} ]; then touch {marker}; git -C {other} push -q origin HEAD:main; fi",
        log = env.path("runs").display(),
        marker = marker.display(),
        other = other.dir.display()
    );
    let out = a.run(&["land", "--checks", &checks, "--json"]).ok();
    assert_eq!(out.json()["landing"]["landed"][0]["task"], id.as_str(), "{}", out.stdout);
    let runs = std::fs::read_to_string(env.path("runs")).expect("the checks ran");
    assert_eq!(runs.lines().count(), 2, "checked again on the new target");
    let main = env.git(&bare, &["rev-parse", "main"]);
    assert!(contains(&a, &outside, &main) && contains(&a, &format!("loop/{id}"), &main), "built on the new target");
    assert_eq!(landing_order(&a, &bare), [id]);
    let reflog = std::fs::read_to_string(bare.join("logs/refs/heads/main")).expect("reflog");
    for line in reflog.lines() {
        let mut ids = line.split(' ');
        let (old, new) = (ids.next().expect("old"), ids.next().expect("new"));
        let ff = env
            .seal(std::process::Command::new("git").args(["merge-base", "--is-ancestor", old, new]).current_dir(&bare))
            .status()
            .expect("git");
        assert!(ff.success(), "{old} -> {new} is a fast-forward");
    }
}

#[test]
fn a_lander_at_work_elsewhere_is_named_and_nothing_moves() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let first = done_task(&repo, "Add a", &[], "a.txt", "a\n");
    // A lander whose checks wait for a file: it holds main's lander claim until then.
    let go = env.path("go");
    let checks =
        format!("i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done", go = go.display());
    let mut busy = repo.command(&["land", "--checks", &checks]).spawn().expect("start a lander");
    let claim = repo.dir.join(".git/refs/loop/claims/lander/main");
    let started = std::time::Instant::now();
    while !claim.exists() && started.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = done_task(&repo, "Add b", &[], "b.txt", "b\n");
    let before = head(&repo, "main");
    let out = repo.run(&["land", "--checks", "true"]).code(3);
    assert!(out.stderr.contains("another lander is at work"), "{}", out.stderr);
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
    assert_eq!(head(&repo, "main"), before, "the second lander moved nothing");
    assert_eq!(state(&repo, &second)["state"], "done");
    std::fs::write(&go, "").expect("let the first lander's checks end");
    assert!(busy.wait().expect("the first lander").success(), "the first lander landed");
    assert!(contains(&repo, &format!("loop/{first}"), "main"));
    // Once it let go, the queue lands what is left.
    repo.run(&["land", "--checks", "true"]).ok();
    assert!(contains(&repo, &format!("loop/{second}"), "main"));
}

#[test]
fn loop_land_makes_every_walk_land_and_a_dirty_checkout_is_left_alone_with_why() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.git(&["config", "loop.land", "true"]);
    let first = repo.add(&["Write one"]);
    let cmd =
        env.agent("writer", "echo \"$GIT_LOOP_TASK\" > \"$GIT_LOOP_TASK.txt\"\ngit loop finish done --message wrote");
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1"]).ok();
    assert!(contains(&repo, &format!("loop/{first}"), "main"), "loop.land=true lands without --land");
    // A person's uncommitted edit in the checkout of main: the walk's task is done, not landed,
    // and the walk says why; nothing of the person's is touched.
    std::fs::write(repo.dir.join("README"), "my own edit\n").expect("edit");
    let second = repo.add(&["Write two"]);
    let before = head(&repo, "main");
    // Exit 1, the refusal said once, and the last line says the done work is not landed.
    let out = repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1"]).code(1);
    let said = out.stdout.matches("uncommitted changes").count() + out.stderr.matches("uncommitted changes").count();
    assert_eq!(said, 1, "the refusal is said once:\n{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("1 done task not landed, as said above"), "{}", out.stdout);
    assert_eq!(head(&repo, "main"), before, "main did not move under a dirty checkout");
    assert_eq!(std::fs::read_to_string(repo.dir.join("README")).expect("README"), "my own edit\n");
    assert_eq!(state(&repo, &second)["state"], "done", "its work waits to land");
}

#[test]
fn a_task_another_clone_landed_is_not_shown_as_queued_after_a_sync() {
    let env = TestEnv::new();
    let (_bare, a, b) = env.two_clones();
    // Landed by b, after a has seen the remote's main (a's view of it is now stale).
    let id = done_task(&a, "Task", &[], "task.txt", "x\n");
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    let queued = a.run(&["status", "--json"]).ok().json();
    assert_eq!(queued["landing"]["queue"][0]["task"], id.as_str(), "before: queued on a");
    b.run(&["land", "--checks", "true"]).ok();
    b.run(&["sync"]).ok();
    a.run(&["sync"]).ok();
    let status = a.run(&["status", "--json"]).ok().json();
    assert_eq!(status["landing"]["queue"], serde_json::json!([]), "a knows b landed it: {status}");
    assert!(!a.run(&["status"]).ok().stdout.contains("waiting to land"));
    assert_eq!(state(&a, &id)["landing"]["state"], "landed");
}

#[test]
fn a_walk_whose_done_task_fails_to_land_counts_it_not_done() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    // Both write the same file from the same base: the second's landing conflicts.
    let first = repo.add(&["Write one", "-p", "p1"]);
    let second = repo.add(&["Write two", "-p", "p2"]);
    let cmd = env.agent("writer", "echo \"$GIT_LOOP_TASK\" > f.txt\ngit loop finish done --message wrote");
    repo.git(&["config", "loop.agent.res.command", &env.agent("res", "git loop finish unresolved --message no")]);
    let out =
        repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--land", "--resolver", "res", "--base", "main"]).ok();
    assert!(contains(&repo, &format!("loop/{first}"), "main"), "{}", out.stdout);
    assert_eq!(state(&repo, &second)["state"], "needs-you");
    assert!(
        out.stdout.contains("1 done, 1 not done, 0 left open"),
        "the summary agrees with the board:\n{}",
        out.stdout
    );
}

/// With `loop.remote`, a dirty checkout of the target does not stop the landing: it goes to the
/// remote's target (one person's uncommitted edit must not stop a fleet's landing), the local
/// branch and its checkout are left where they were, and the lander says so (exit 0).
#[test]
fn with_a_remote_a_dirty_checkout_of_the_target_is_left_behind_and_the_landing_goes_on() {
    let env = TestEnv::new();
    let (remote, a, _b) = env.two_clones();
    let id = done_task(&a, "Add a", &[], "a.txt", "a\n");
    a.run(&["sync"]).ok();
    std::fs::write(a.dir.join("README"), "my own edit\n").expect("edit");
    let before = head(&a, "main");
    let out = a.run(&["land", "--checks", "true"]).ok();
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("the local main is checked out with changes in"), "{said}");
    assert!(said.contains("it was left behind the remote's"), "{said}");
    let landed = env.git(&remote, &["rev-parse", "main"]);
    assert_ne!(landed, before, "the remote's main moved");
    assert_eq!(env.git(&remote, &["show", "main:a.txt"]), "a", "the task's work is on the remote's main");
    assert_eq!(head(&a, "main"), before, "the local main did not move under the dirty checkout");
    assert_eq!(std::fs::read_to_string(a.dir.join("README")).expect("README"), "my own edit\n", "untouched");
    assert!(!a.dir.join("a.txt").exists(), "nothing written into the checkout");
    assert_eq!(state(&a, &id)["landing"]["state"], "landed", "{}", state(&a, &id));
}

/// `run --land` lands beside the workers: while the landing of the first task done runs its
/// (slow) checks on the merged result, the one worker has already started its next task's
/// session — the landing takes no worker's slot.
#[test]
fn a_walk_lands_beside_its_workers_not_in_a_workers_slot() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let marks = env.path("marks");
    std::fs::create_dir_all(&marks).expect("mkdir");
    let marks_at = marks.display();
    // Only the landing's checks are slow: they run in the landing worktree.
    let checks = format!(
        "case \"$PWD\" in */worktrees/landing/*) date +%s.%N >> {marks_at}/landing-start; sleep 4; date +%s.%N >> {marks_at}/landing-end;; esac; true"
    );
    let agent = env.agent(
        "quick",
        &format!(
            "date +%s.%N > {marks_at}/session-$GIT_LOOP_TASK\necho w > \"w-$GIT_LOOP_TASK.txt\"\ngit loop finish done"
        ),
    );
    let first = repo.add(&["first", "-p", "p0"]);
    let second = repo.add(&["second", "-p", "p1"]);
    let out = repo
        .run(&["run", "--agent-cmd", &agent, "--checks", &checks, "--land", "--grace", "1", "--sandbox", "off"])
        .ok();
    let read = |name: &str| -> Vec<f64> {
        std::fs::read_to_string(marks.join(name))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let first_landing_ended = read("landing-end").first().copied().expect("a landing ran its checks");
    let second_started = read(&format!("session-{second}")).first().copied().expect("the second task's session");
    assert!(
        second_started < first_landing_ended,
        "the worker started its next session ({second_started}) before the landing ended ({first_landing_ended}):\n{}",
        out.stdout
    );
    for id in [&first, &second] {
        assert_eq!(state(&repo, id)["landing"]["state"], "landed", "{}", out.stdout);
    }
    assert!(repo.git(&["show", &format!("main:w-{second}.txt")]) == "w", "both landed on main");
}
