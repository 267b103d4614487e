//! Races and fallbacks end to end with scripted agents: first and judge modes, a judge that
//! answers nonsense, try numbers never reused, a race killed and taken up again, a race won
//! but not yet landed, the reliability rows for tries (W2, W3, W4), and agents that cannot be
//! reached.

use std::path::PathBuf;
use std::process::Command;

use super::people::{finish, journal, kinds_of, live, named, show, spawn, state_dir};
use crate::harness::{wait_for, Repo, TestEnv};

fn head(repo: &Repo<'_>, rev: &str) -> String {
    repo.git(&["rev-parse", rev])
}

fn sessions_of(repo: &Repo<'_>, id: &str) -> Vec<(String, u64)> {
    journal(repo, id)
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .map(|e| (e["data"]["agent"].as_str().unwrap_or("").to_owned(), e["data"]["try"].as_u64().unwrap_or(0)))
        .collect()
}

const RACE: [&str; 4] = ["--grace", "1", "--session-timeout", "60s"];

fn race<'a>(id: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["race", id];
    args.extend_from_slice(&RACE);
    args.extend_from_slice(extra);
    args
}

#[test]
fn first_mode_one_winner_the_loser_is_stopped_and_its_work_kept() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["race me"]);
    let s = state_dir(&env);
    named(
        &repo,
        &env,
        "slow",
        &format!("echo slow > slow.txt\ntouch {}/slow-started\nwhile true; do sleep 0.05; done", s.display()),
    );
    named(
        &repo,
        &env,
        "fast",
        &format!(
            "while [ ! -f {}/slow-started ]; do sleep 0.05; done\necho fast > fast.txt\ngit loop finish done --message 'fast wins'",
            s.display()
        ),
    );
    let out = live(&repo, &race(&id, &["--together", "slow,fast", "--checks", "test -f fast.txt"])).ok();
    assert!(
        out.stdout.contains(&format!("slow and fast both take {id} · the first to pass the checks wins")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("{id} · fast passed first · slow's try stopped")), "{}", out.stdout);
    assert_eq!(head(&repo, &format!("loop/{id}")), head(&repo, &format!("loop-try/{id}/2")), "the winner landed");
    assert_eq!(repo.git(&["show", &format!("loop-try/{id}/1:slow.txt")]), "slow", "the loser's work is committed");
    let slow = repo.session_records().into_iter().find(|r| r["agent"] == "slow").expect("slow's record");
    let pid = slow["pid"].as_u64().expect("pid");
    assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "the loser's process group is gone");
    let (left, pooled) = repo.worktrees();
    assert_eq!((left.len(), pooled), (0, 2), "no try worktree is left, both are pooled: {left:?}");
    let task = show(&repo, &id);
    assert_eq!((task["state"].as_str(), task["completion"]["try"].as_u64()), (Some("done"), Some(2)));
    let kinds = kinds_of(&journal(&repo, &id));
    for kind in ["race_started", "entrant_ended", "race_won", "unit_closed"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind}: {kinds:?}");
    }
}

#[test]
fn judge_mode_runs_every_try_and_the_judge_picks() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["judge us"]);
    let s = state_dir(&env);
    named(&repo, &env, "a", "echo a > a.txt\ngit loop finish done --message 'a is fine'");
    named(
        &repo,
        &env,
        "b",
        "sleep 0.3\necho b > b.txt\necho b2 >> b.txt\ngit loop finish done --message 'b is better'",
    );
    let judge = env.path("judge.sh");
    std::fs::write(
        &judge,
        format!(
            "cat > {s}/judge-input.json\nfor n in 1 2 3; do git show loop-try/$GIT_LOOP_TASK/$n:b.txt >/dev/null 2>&1 && echo \"try $n\"; done | tail -1\n",
            s = s.display()
        ),
    )
    .expect("write judge");
    let judge_cmd = format!("sh {}", judge.display());
    let out = live(
        &repo,
        &race(&id, &["--together", "a,b", "--pick", "judge", "--judge-cmd", &judge_cmd, "--checks", "true"]),
    )
    .ok();
    assert!(
        out.stdout.contains(&format!("a and b both take {id} · a judge picks among the tries that pass")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("{id} · the judge picked b's try (2 passed)")), "{}", out.stdout);
    assert_eq!(head(&repo, &format!("loop/{id}")), head(&repo, &format!("loop-try/{id}/2")));
    let input: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.join("judge-input.json")).expect("the judge's input")).expect("JSON");
    let tries = input["tries"].as_array().expect("tries");
    assert_eq!(tries.len(), 2);
    assert_eq!(tries[1]["branch"], format!("loop-try/{id}/2"));
    assert_eq!(tries[1]["head"], head(&repo, &format!("loop-try/{id}/2")));
    assert_eq!(tries[1]["diffstat"][0]["path"], "b.txt");
    assert_eq!(tries[1]["diffstat"][0]["added"], 2);
    assert!(tries[0]["checks_log"].as_str().is_some_and(|p| p.ends_with("checks.log")), "{input}");
    assert_eq!(input["task"]["id"], id.as_str());
}

#[test]
fn a_judge_that_answers_nonsense_leaves_the_task_needing_a_decision() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["judge badly"]);
    named(&repo, &env, "a", "echo a > a.txt\ngit loop finish done");
    named(&repo, &env, "b", "echo b > b.txt\ngit loop finish done");
    let out = live(
        &repo,
        &race(&id, &["--together", "a,b", "--pick", "judge", "--judge-cmd", "echo 'the second one, obviously'"]),
    )
    .code(1);
    let problem = "the judge answered 'the second one, obviously', which is none of the tries that passed (1, 2)";
    assert!(out.stdout.contains(problem), "{}", out.stdout);
    let task = show(&repo, &id);
    assert_eq!(task["state"], "needs-decision");
    assert!(task["reason"].as_str().is_some_and(|r| r.contains(problem)), "{task}");
    assert!(repo.git(&["branch", "--list", &format!("loop/{id}")]).contains(&format!("loop/{id}")));
    let before = head(&repo, &format!("loop/{id}"));
    assert_ne!(before, head(&repo, &format!("loop-try/{id}/1")), "nothing landed");
    live(&repo, &["done", &id, "--try", "2"]).ok();
    assert_eq!(head(&repo, &format!("loop/{id}")), head(&repo, &format!("loop-try/{id}/2")), "the person decided");
    // A judge that fails is no answer either.
    let other = repo.add(&["judge fails"]);
    let out = live(&repo, &race(&other, &["--together", "a,b", "--pick", "judge", "--judge-cmd", "exit 3"])).code(1);
    assert!(out.stdout.contains("the judge failed (exit 3)"), "{}", out.stdout);
    assert_eq!(show(&repo, &other)["state"], "needs-decision");
    // Judge mode without a judge is refused before anything runs.
    let third = repo.add(&["no judge"]);
    let out = repo.run(&["race", &third, "--together", "a,b", "--pick", "judge"]).code(2);
    assert!(out.stderr.starts_with("error: judge mode needs a judge\nhint: pass --judge-cmd"), "{}", out.stderr);
    let out = repo.run(&["race", &third, "--together", "a"]).code(2);
    assert!(out.stderr.starts_with("error: a race needs at least two agents"), "{}", out.stderr);
}

/// W2: sixteen tries created at once: no failed or orphaned worktree.
#[test]
fn w2_sixteen_entrants_at_once_leave_no_orphaned_worktree() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["sixteen"]);
    named(&repo, &env, "w", "echo $GIT_LOOP_TRY > mine.txt\nsleep 0.2\ngit loop finish done");
    let together = vec!["w"; 16].join(",");
    let out = live(&repo, &race(&id, &["--together", &together, "--per-unit-dispatches", "40"])).ok();
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let branches = repo.git(&["branch", "--list", &format!("loop-try/{id}/*")]);
    assert_eq!(branches.lines().count(), 16, "{branches}");
    let (left, pooled) = repo.worktrees();
    assert_eq!((left.len(), pooled), (0, 4), "no try worktree is left, loop.pool's 4 are kept: {left:?}");
    assert_eq!(repo.git(&["worktree", "prune", "--dry-run", "--verbose"]), "", "nothing to prune");
    let opened = journal(&repo, &id).iter().filter(|e| e["kind"] == "try_opened" && e["data"]["race"] == true).count();
    assert_eq!(opened, 16);
    assert_eq!(show(&repo, &id)["state"], "done");
    let winner = show(&repo, &id)["completion"]["try"].as_u64().expect("try");
    assert_eq!(repo.git(&["show", &format!("loop/{id}:mine.txt")]), winner.to_string());
}

/// W3: a try's worktree deleted mid-run: the try branch survives and the next session checks
/// it out again (no "already checked out" deadlock).
#[test]
fn w3_a_worktree_deleted_mid_run_is_checked_out_again() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["lose my worktree"]);
    let s = state_dir(&env);
    named(
        &repo,
        &env,
        "w",
        &format!(
            "if [ ! -f {s}/once ]; then touch {s}/once; echo a > a.txt; git add a.txt; git -c user.name=a -c user.email=a@a commit -qm a; touch {s}/ready; n=0; while [ $n -lt 1200 ] && {{ [ -d \"$GIT_LOOP_WORKTREE/.git\" ] || [ -f \"$GIT_LOOP_WORKTREE/.git\" ]; }}; do sleep 0.05; n=$((n+1)); done; exit 0; fi\ntest -f a.txt\ngit loop finish done",
            s = s.display()
        ),
    );
    let walk = spawn(&repo, &["run", "--agent", "w", "--grace", "1"], None);
    wait_for("the first session", || s.join("ready").exists());
    let worktree = repo.dir.join(format!(".git/loop/worktrees/{id}-1"));
    std::fs::remove_dir_all(&worktree).expect("delete the worktree");
    let out = finish(walk).ok();
    assert!(!out.stderr.contains("already checked out"), "{}", out.stderr);
    assert_eq!(show(&repo, &id)["state"], "done");
    assert_eq!(sessions_of(&repo, &id).iter().map(|(_, n)| *n).collect::<Vec<_>>(), [1, 1], "the same try went on");
    assert_eq!(repo.git(&["show", &format!("loop/{id}:a.txt")]), "a", "the try branch kept the work");
    assert_eq!(repo.git(&["worktree", "prune", "--dry-run", "--verbose"]), "");
}

/// W4: eight movers with different winners: exactly one moves the task branch; a checked-out
/// task branch is never moved.
#[test]
fn w4_eight_movers_one_move_and_a_checked_out_branch_is_never_moved() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["eight movers"]);
    let tree = repo.git(&["rev-parse", "main^{tree}"]);
    for n in 1..=8 {
        let commit = repo.git(&["commit-tree", "-p", "main", "-m", &format!("try {n}"), &tree]);
        repo.git(&["update-ref", &format!("refs/heads/loop-try/{id}/{n}"), &commit]);
    }
    let movers: Vec<_> = (1..=8)
        .map(|n| {
            repo.command(&["done", &id, "--try", &n.to_string()])
                .env("GIT_LOOP_NOW", "")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let outs: Vec<_> = movers.into_iter().map(finish).collect();
    let winners: Vec<_> = outs.iter().filter(|o| o.code == 0).collect();
    assert_eq!(winners.len(), 1, "{outs:#?}");
    for loser in outs.iter().filter(|o| o.code != 0) {
        assert_eq!(loser.code, 1, "{loser:?}");
        assert!(loser.stderr.contains("decided meanwhile") || loser.stderr.contains("is done already"), "{loser:?}");
    }
    let n: u32 = winners[0]
        .stdout
        .split("done with try ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("winner");
    assert_eq!(head(&repo, &format!("loop/{id}")), head(&repo, &format!("loop-try/{id}/{n}")));
    assert_eq!(show(&repo, &id)["completion"]["try"].as_u64(), Some(u64::from(n)));
    // A task branch checked out in a worktree is not moved.
    let other = repo.add(&["checked out"]);
    let commit = repo.git(&["commit-tree", "-p", "main", "-m", "try", &tree]);
    repo.git(&["update-ref", &format!("refs/heads/loop-try/{other}/1"), &commit]);
    repo.git(&["branch", &format!("loop/{other}"), "main"]);
    let wt = env.path("wt");
    repo.git(&["worktree", "add", "-q", wt.to_str().expect("utf-8"), &format!("loop/{other}")]);
    let out = live(&repo, &["done", &other, "--try", "1"]).code(1);
    assert!(out.stderr.starts_with(&format!("error: loop/{other} is checked out in")), "{}", out.stderr);
    assert_eq!(head(&repo, &format!("loop/{other}")), head(&repo, "main"), "not moved");
    assert_eq!(show(&repo, &other)["state"], "open");
}

#[test]
fn try_numbers_are_never_reused_after_branches_and_worktrees_are_deleted() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["numbered"]);
    named(&repo, &env, "no", "git loop finish failed --message 'not today'");
    live(&repo, &["run", "--agent", "no"]).ok();
    repo.git(&["branch", "-D", &format!("loop-try/{id}/1")]);
    repo.git(&["update-ref", "-d", &format!("refs/loop/tries/{id}/1")]);
    live(&repo, &["reopen", &id]).ok();
    live(&repo, &["run", "--agent", "no"]).ok();
    assert_eq!(sessions_of(&repo, &id).iter().map(|(_, n)| *n).collect::<Vec<_>>(), [1, 2]);
    live(&repo, &["reopen", &id]).ok();
    let race_ids = ["no"; 2].join(",");
    live(&repo, &race(&id, &["--together", &race_ids])).code(1);
    let mut numbers: Vec<u64> = sessions_of(&repo, &id).iter().map(|(_, n)| *n).collect();
    numbers.sort();
    assert_eq!(numbers, [1, 2, 3, 4], "the race's entrants took 3 and 4");
}

#[test]
fn a_race_killed_and_run_again_keeps_its_tries_and_does_not_restart_finished_entrants() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["interrupted race"]);
    let s = state_dir(&env);
    named(
        &repo,
        &env,
        "a",
        &format!(
            "c=$(cat {s}/a-count 2>/dev/null || echo 0); echo $((c+1)) > {s}/a-count\nif [ $c -eq 0 ]; then echo a1 > a.txt; touch {s}/a-started; while true; do sleep 0.05; done; fi\necho a2 >> a.txt\ngit loop finish done",
            s = s.display()
        ),
    );
    named(&repo, &env, "b", "echo b > b.txt\ngit loop finish failed --message 'b gives up'");
    let mut walk = spawn(&repo, &race(&id, &["--together", "a,b"]), None);
    wait_for("a's first session and b's end", || {
        s.join("a-started").exists() && kinds_of(&journal(&repo, &id)).iter().any(|k| k == "entrant_ended")
    });
    walk.kill().expect("kill -9 the walk");
    let _ = walk.wait();
    let out = live(&repo, &race(&id, &[])).ok();
    assert!(out.stdout.contains(&format!("{id} · back in the race: a on try 1 · b failed")), "{}", out.stdout);
    assert!(out.stdout.contains(&format!("{id} · a passed first · b's try failed")), "{}", out.stdout);
    assert_eq!(std::fs::read_to_string(s.join("a-count")).expect("count").trim(), "2");
    let sessions = sessions_of(&repo, &id);
    assert_eq!(sessions.iter().filter(|(a, _)| a == "b").count(), 1, "b finished before and was not restarted");
    assert!(sessions.iter().all(|(_, n)| *n == 1 || *n == 2), "no new try numbers: {sessions:?}");
    assert_eq!(head(&repo, &format!("loop/{id}")), head(&repo, &format!("loop-try/{id}/1")));
    assert_eq!(repo.git(&["show", &format!("loop/{id}:a.txt")]), "a1\na2", "the killed session's work was kept");
}

#[test]
fn a_race_won_but_not_landed_is_landed_on_the_next_run() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["won, not landed", "--together", "a,b"]);
    named(&repo, &env, "a", "echo should not run; exit 3");
    named(&repo, &env, "b", "echo should not run; exit 3");
    let tree = repo.git(&["rev-parse", "main^{tree}"]);
    let main = head(&repo, "main");
    for n in 1..=2 {
        let commit = repo.git(&["commit-tree", "-p", "main", "-m", &format!("try {n}"), &tree]);
        repo.git(&["update-ref", &format!("refs/heads/loop-try/{id}/{n}"), &commit]);
    }
    repo.git(&["branch", &format!("loop/{id}"), "main"]);
    // What the journal holds when a walk dies between "passed" and "branch moved".
    let started = format!(r#"{{"agents":["a","b"],"tries":[1,2],"pick":"first","start":"{main}"}}"#);
    live(&repo, &["journal", "append", "race_started", "--task", &id, "--data", &started]).ok();
    live(
        &repo,
        &[
            "journal",
            "append",
            "entrant_ended",
            "--task",
            &id,
            "--data",
            r#"{"try":2,"agent":"b","outcome":"passed","message":"b passed"}"#,
        ],
    )
    .ok();
    live(&repo, &["journal", "append", "race_won", "--task", &id, "--data", r#"{"try":2,"agent":"b","how":"first"}"#])
        .ok();
    let out = live(&repo, &race(&id, &[])).ok();
    assert!(out.stdout.contains("back in the race"), "{}", out.stdout);
    assert_eq!(head(&repo, &format!("loop/{id}")), head(&repo, &format!("loop-try/{id}/2")));
    assert_eq!(show(&repo, &id)["state"], "done");
    assert!(sessions_of(&repo, &id).is_empty(), "no session ran");
}

#[test]
fn an_unreachable_agent_hands_its_task_to_the_fallback_which_continues_its_try() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["limited"]);
    let s = state_dir(&env);
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let fake = bin.join("claude");
    std::fs::write(&fake, "#!/bin/sh\ncat > /dev/null\necho started > claude.txt\necho \"You've hit your session limit · resets 3pm\"\nexit 1\n")
        .expect("write");
    Command::new("chmod").args(["+x", fake.to_str().expect("utf-8")]).status().expect("chmod");
    named(
        &repo,
        &env,
        "fb",
        &format!("cp \"$GIT_LOOP_PROMPT\" {}/fb.md\ntest -f claude.txt\ngit loop finish done", s.display()),
    );
    repo.git(&["config", "loop.fallback", "fb"]);
    let walk = spawn(&repo, &["run", "--agent", "claude", "--grace", "1"], Some(&bin));
    let out = finish(walk).ok();
    assert!(out.stdout.contains(&format!("claude is unreachable (usage limit) · fb takes {id}")), "{}", out.stdout);
    assert_eq!(show(&repo, &id)["state"], "done");
    assert_eq!(sessions_of(&repo, &id), [("claude".to_owned(), 1), ("fb".to_owned(), 1)]);
    let prompt = std::fs::read_to_string(s.join("fb.md")).expect("prompt");
    assert!(prompt.contains("This task was with claude until now: it is unreachable (usage limit)"), "{prompt}");
    assert!(prompt.contains("A claude.txt (+1 -0)"), "{prompt}");
    let events = journal(&repo, &id);
    let unreachable = events.iter().find(|e| e["kind"] == "agent_unreachable").expect("journaled");
    assert_eq!(
        (unreachable["data"]["agent"].as_str(), unreachable["data"]["reason"].as_str()),
        (Some("claude"), Some("usage limit"))
    );
}

#[test]
fn several_fallbacks_race_and_new_tasks_go_back_to_the_agent_once_it_is_reachable() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let first = repo.add(&["first", "-p", "p1"]);
    let second = repo.add(&["second", "-p", "p2"]);
    let s = state_dir(&env);
    named(
        &repo,
        &env,
        "lim",
        &format!(
            "c=$(cat {s}/lim 2>/dev/null || echo 0); echo $((c+1)) > {s}/lim\nif [ $c -eq 0 ]; then echo 'Error: usage limit reached, try later'; exit 1; fi\ngit loop finish done",
            s = s.display()
        ),
    );
    repo.git(&["config", "loop.agent.lim.unreachable", "usage limit reached"]);
    named(&repo, &env, "fb1", "sleep 1.5\necho one > one.txt\ngit loop finish done");
    named(&repo, &env, "fb2", "n=0; while [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done");
    repo.git(&["config", "loop.fallback", "fb1,fb2"]);
    repo.git(&["config", "loop.unreachableFor", "1s"]);
    let out = live(&repo, &["run", "--agent", "lim", "--grace", "1"]).ok();
    assert!(
        out.stdout.contains(&format!(
            "lim is unreachable (usage limit) · fb1 and fb2 both take {first} · the first to report done wins"
        )),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("{first} · fb1 passed first · fb2's try stopped")), "{}", out.stdout);
    assert_eq!(show(&repo, &first)["state"], "done");
    assert_eq!(sessions_of(&repo, &second), [("lim".to_owned(), 1)], "the next task went back to lim");
    assert_eq!(show(&repo, &second)["state"], "done");
}

#[test]
fn with_no_fallback_an_unreachable_agent_pauses_the_walk() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["nobody can"]);
    named(&repo, &env, "lim", "echo 'HTTP 429: rate limited'; exit 1");
    repo.git(&["config", "loop.agent.lim.unreachable", "429: rate limited"]);
    let out = live(&repo, &["run", "--agent", "lim", "--grace", "1", "--json"]).code(4);
    let last: serde_json::Value = serde_json::from_str(out.stdout.lines().last().expect("finished")).expect("json");
    assert_eq!(last["policy"], "unreachable");
    assert_eq!(last["reason"], "lim is unreachable (rate limit) and no fallback agent is set (loop.fallback)");
    let task = show(&repo, &id);
    assert_eq!(task["state"], "open", "the task is left for later, not failed");
    assert_eq!(task["status"], "open", "and nobody holds it");
}
