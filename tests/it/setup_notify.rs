//! Worktree set-up and notifications (issue 15): `loop.setup` runs in each new try worktree
//! before its first session, its output heading the session's log and its failure a clear stop
//! of that try.

use crate::harness::TestEnv;

#[test]
fn the_setup_command_runs_once_in_each_new_worktree_before_its_first_session() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    // What the setup writes is kept out of the try's commits the usual way.
    std::fs::write(repo.dir.join(".git/info/exclude"), ".env\n").expect("exclude");
    let id = repo.add(&["A task"]);
    let count = env.path("setups");
    let setup = format!("echo \"setting up $GIT_LOOP_TASK\"; echo SECRET=1 > .env; echo x >> {}", count.display());
    // The first session finds .env and leaves without a verdict; the second finishes.
    let agent = env.agent(
        "needs-env",
        "test -f .env || { echo 'no .env' >&2; exit 1; }\n\
         if [ -f ../first-done-$GIT_LOOP_TASK ]; then git loop finish done; else touch ../first-done-$GIT_LOOP_TASK; fi",
    );
    let out =
        repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--setup", &setup, "--checks", "test -f .env"]).ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done", "{}", out.stdout);
    assert_eq!(std::fs::read_to_string(&count).expect("the setup ran").lines().count(), 1, "once per worktree");
    let records = repo.session_records();
    assert_eq!(records.len(), 2, "two sessions");
    let logs: Vec<String> = records
        .iter()
        .map(|r| {
            std::fs::read_to_string(
                repo.dir.join(".git/loop/sessions").join(r["session"].as_str().unwrap_or("")).join("log"),
            )
            .unwrap_or_default()
        })
        .collect();
    let with_setup: Vec<&String> = logs.iter().filter(|l| l.contains("git loop: setting up the worktree:")).collect();
    assert_eq!(with_setup.len(), 1, "one session log holds the setup: {logs:?}");
    assert!(
        with_setup[0].starts_with(&format!("git loop: setting up the worktree: {setup}\nsetting up {id}\n")),
        "its output heads the log: {}",
        with_setup[0]
    );
    assert!(with_setup[0].contains("git loop: the worktree is set up"), "{}", with_setup[0]);
    let tip = repo.git(&["show", "--stat", "--format=", &format!("loop/{id}")]);
    assert!(!tip.contains(".env"), "the excluded file is not in the work: {tip}");
    // loop.setup is the default.
    let marker = env.path("setup-config");
    repo.git(&["config", "loop.setup", &format!("touch {}", marker.display())]);
    repo.add(&["Another"]);
    let done = env.agent("done", "git loop finish done");
    repo.run(&["run", "--agent-cmd", &done, "--grace", "1"]).ok();
    assert!(marker.exists(), "loop.setup ran");
}

#[test]
fn a_failing_setup_stops_that_try_and_the_task_needs_you_with_the_reason_and_the_log() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    let ran = env.path("agent-ran");
    let agent = env.agent("a", &format!("touch {}\ngit loop finish done", ran.display()));
    let out = repo
        .run(&["run", "--agent-cmd", &agent, "--grace", "1", "--setup", "echo 'npm ERR! missing package.json'; exit 1"])
        .ok();
    assert!(!ran.exists(), "no session of the agent ran: {}", out.stdout);
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(task["state"], "needs-you", "{task}");
    let reason = task["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("the worktree's setup failed (exit 1)") && reason.contains("its output: "), "{reason}");
    let log = reason.rsplit("its output: ").next().unwrap_or_default();
    assert!(
        std::fs::read_to_string(log).is_ok_and(|l| l.contains("npm ERR! missing package.json")),
        "the log holds the setup's output: {log}"
    );
    let show = repo.run(&["show", &id]).ok().stdout;
    assert!(show.contains("answer:"), "{show}");
}
