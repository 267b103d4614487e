//! The live board in a real terminal (a tmux pane of 100×30 on a socket of the test's own),
//! typed into an interactive shell as a person would: it shows the tasks in their columns,
//! follows what another process adds, stops a running session on its key, and gives the
//! terminal back (no alternate screen, the shell's prompt) on q and on Ctrl-C. And `watch`:
//! a session's output as it is written, ending when the session ends.
//!
//! Walks and the board run with the real clock (the journal orders a person's word and the
//! walk's events by time), as in `people`.

use std::io::Read as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{wait_for, Repo, TestEnv};
use crate::interrupt::{terminal_sized, wait_for_file, Tmux};
use crate::people::{finish, live, named, show, spawn, state_dir};

/// What the pane shows now (its visible lines only).
fn pane(tmux: &Tmux<'_>) -> String {
    tmux.command(&["capture-pane", "-p", "-t", "loop"])
}

/// Wait (bounded) until the pane shows all of `texts`.
#[track_caller]
fn wait_for_screen(tmux: &Tmux<'_>, what: &str, texts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let screen = pane(tmux);
        if texts.iter().all(|t| screen.contains(t)) {
            return screen;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what} ({texts:?}); the terminal shows:\n{screen}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn key(tmux: &Tmux<'_>, key: &str) {
    tmux.command(&["send-keys", "-t", "loop", key]);
}

/// After the board quit: the alternate screen is left, and the shell reads commands again
/// and says the board exited `code`.
fn assert_terminal_given_back(env: &TestEnv, tmux: &Tmux<'_>, code: &str, n: usize) {
    // Typed only once the shell runs in the foreground again: keys typed while the board still
    // holds the terminal in raw mode are the board's.
    let deadline = Instant::now() + Duration::from_secs(30);
    while tmux.command(&["display", "-p", "-t", "loop", "#{pane_current_command}"]).trim() != "sh" {
        assert!(Instant::now() < deadline, "the board did not exit; the terminal shows:\n{}", pane(tmux));
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = env.path(&format!("board-status-{n}"));
    tmux.type_line(&format!("echo $? > {}", status.display()));
    assert_eq!(wait_for_file("the shell to read commands again", &status, tmux), code, "the board's exit status");
    let alternate = tmux.command(&["display", "-p", "-t", "loop", "#{alternate_on}"]);
    assert_eq!(alternate.trim(), "0", "the alternate screen is left; the terminal shows:\n{}", pane(tmux));
    tmux.type_line("echo back-at-the-prompt");
    wait_for_screen(tmux, "the shell's own output", &["back-at-the-prompt"]);
}

#[test]
fn the_board_shows_the_tasks_follows_another_process_and_gives_the_terminal_back_on_q_and_ctrl_c() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["Write parser"]);
    let parked = repo.add(&["Port to BSD"]);
    repo.run(&["park", &parked, "--reason", "no machine"]).ok();
    let Some(tmux) = terminal_sized(&env, &repo, (100, 30)) else { return };

    tmux.type_line("GIT_LOOP_NOW= git loop board");
    let screen = wait_for_screen(&tmux, "the board", &["Write parser", "Port to BSD", "ready 1", "parked 1"]);
    let alternate = tmux.command(&["display", "-p", "-t", "loop", "#{alternate_on}"]);
    assert_eq!(alternate.trim(), "1", "the board draws on the alternate screen:\n{screen}");
    // Each task under its own column's title.
    let column_of = |screen: &str, text: &str| {
        let line = screen.lines().find(|l| l.contains(text)).expect("shown");
        line[..line.find(text).expect("in line")].chars().count()
    };
    assert!(column_of(&screen, "Port to BSD") > column_of(&screen, "ready 1"), "parked is right of ready");
    assert_eq!(column_of(&screen, "Port to BSD"), column_of(&screen, "parked 1") + 1, "under parked:\n{screen}");
    assert_eq!(column_of(&screen, "Write parser"), 1, "under ready:\n{screen}");

    // Another process adds a task: the board shows it without a key.
    let added = repo.add(&["Added later"]);
    let started = Instant::now();
    wait_for_screen(&tmux, "the added task", &[added.as_str(), "ready 2"]);
    let seen_in = started.elapsed();
    assert!(seen_in < Duration::from_secs(3), "seen in {seen_in:?}");

    // The detail pane of the selected task, then q.
    key(&tmux, "Enter");
    wait_for_screen(&tmux, "the task's detail", &["(esc closes)"]);
    key(&tmux, "Escape");
    key(&tmux, "q");
    assert_terminal_given_back(&env, &tmux, "0", 1);

    // Ctrl-C quits as cleanly.
    tmux.type_line("GIT_LOOP_NOW= git loop board");
    wait_for_screen(&tmux, "the board again", &["Added later"]);
    tmux.ctrl_c();
    assert_terminal_given_back(&env, &tmux, "0", 2);

    // And NO_COLOR draws the same board.
    tmux.type_line("NO_COLOR=1 GIT_LOOP_NOW= git loop board");
    wait_for_screen(&tmux, "the board without colour", &["Write parser", "ready 2"]);
    key(&tmux, "q");
    assert_terminal_given_back(&env, &tmux, "0", 3);
}

#[test]
fn the_board_stops_a_running_session_on_its_key_after_asking() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A long one"]);
    let state = state_dir(&env);
    named(
        &repo,
        &env,
        "slow",
        &format!(
            "echo working on it\necho work > work.txt\ntouch {}/started\nwhile true; do sleep 0.05; done",
            state.display()
        ),
    );
    let Some(tmux) = terminal_sized(&env, &repo, (100, 30)) else { return };
    let walk = spawn(&repo, &["run", "--agent", "slow", "--grace", "1", "--session-timeout", "60s"], None);
    wait_for("the session", || state.join("started").exists());
    tmux.type_line("GIT_LOOP_NOW= git loop board");
    wait_for_screen(&tmux, "the running task and its session", &["running 1", "A long one", "sessions 1", "slow"]);
    // The selection starts in ready (empty); the running column is the next.
    key(&tmux, "Right");
    // Its session's output, followed live.
    key(&tmux, "f");
    wait_for_screen(&tmux, "the followed output", &["· running (esc closes)", "working on it"]);
    key(&tmux, "Escape");
    key(&tmux, "x");
    wait_for_screen(&tmux, "the question", &["(y/n)"]);
    key(&tmux, "n");
    wait_for_screen(&tmux, "the answer taken", &["cancelled"]);
    assert_eq!(show(&repo, &id)["state"], "open", "no stop without a yes");
    key(&tmux, "x");
    wait_for_screen(&tmux, "the question", &["(y/n)"]);
    key(&tmux, "y");
    wait_for_screen(&tmux, "the stop's outcome", &["stopped", "needs you 1"]);
    let task = show(&repo, &id);
    assert_eq!(
        (task["state"].as_str(), task["reason"].as_str()),
        (Some("needs-decision"), Some("you stopped its session"))
    );
    assert_eq!(repo.git(&["show", &format!("loop-try/{id}/1:work.txt")]), "work", "its work is committed");
    key(&tmux, "q");
    assert_terminal_given_back(&env, &tmux, "0", 1);
    let walked = finish(walk);
    assert!(walked.stdout.contains("you stopped it"), "{}\n{}", walked.stdout, walked.stderr);
}

#[test]
fn the_board_needs_a_terminal() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let out = repo.run(&["board"]).code(2);
    assert_eq!(
        out.stderr.lines().collect::<Vec<_>>(),
        [
            "error: the board needs a terminal, and stdout is not one",
            "hint: 'git loop status' prints the board (--json for scripts); 'git loop watch <task>' follows a session"
        ]
    );
    assert_eq!(out.stdout, "");
}

/// An agent that says a line, waits for the test's go, says another and finishes.
fn stepping_agent(env: &TestEnv, repo: &Repo<'_>) -> std::path::PathBuf {
    let state = state_dir(env);
    named(
        repo,
        env,
        "stepper",
        &format!(
            "echo first line\ntouch {s}/started\nwhile [ ! -e {s}/go ]; do sleep 0.05; done\necho second line\n\
             git loop finish done --message stepped",
            s = state.display()
        ),
    );
    state
}

#[test]
fn watch_streams_a_running_sessions_output_and_ends_when_it_ends() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["stepwise"]);
    let state = stepping_agent(&env, &repo);
    let walk = spawn(&repo, &["run", "--agent", "stepper", "--grace", "1"], None);
    wait_for("the session", || state.join("started").exists());
    let mut watch = repo.command(&["watch", &id]);
    watch.env("GIT_LOOP_NOW", "").stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut watch = watch.spawn().expect("start watch");
    let _deadline = crate::harness::Watchdog::new(watch.id(), Duration::from_secs(60), "git loop watch");
    let mut stdout = watch.stdout.take().expect("stdout");
    // Read until the first line is there: the session runs, the watch keeps going.
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("first line") {
        let n = stdout.read(&mut buf).expect("read watch");
        assert!(n > 0, "watch ended before its session did: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(watch.try_wait().expect("poll").is_none(), "watch goes on while the session runs");
    std::fs::write(state.join("go"), "").expect("go");
    stdout.read_to_end(&mut seen).expect("read the rest");
    let status = watch.wait().expect("watch ends");
    let mut stderr = String::new();
    watch.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("stderr");
    let seen = String::from_utf8_lossy(&seen);
    assert_eq!(status.code(), Some(0), "{seen}\n{stderr}");
    assert!(seen.contains("first line\n") && seen.contains("second line\n"), "{seen}");
    assert!(stderr.contains(&format!("{id} · session s-")) && stderr.contains("ended"), "{stderr}");
    finish(walk);
    assert_eq!(show(&repo, &id)["state"], "done");

    // After the session: its last output, with a note that it ended.
    let after = live(&repo, &["watch", &id]).ok();
    assert!(after.stdout.contains("second line"), "{}", after.stdout);
    assert!(after.stderr.contains("ended") && after.stderr.contains("its last output"), "{}", after.stderr);
    // By session key, too.
    let session = repo.session_records().pop().expect("a record")["session"].as_str().expect("key").to_owned();
    let by_key = live(&repo, &["watch", &session, "-n", "1"]).ok();
    assert!(!by_key.stdout.contains("first line") && !by_key.stdout.is_empty(), "{}", by_key.stdout);
}

#[test]
fn watch_refuses_what_it_does_not_know() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["never run"]);
    let out = repo.run(&["watch", "s-nosuch"]).code(2);
    assert_eq!(
        out.stderr.lines().collect::<Vec<_>>(),
        [
            "error: no session 's-nosuch' ran on this machine",
            "hint: 'git loop status' lists the running sessions; 'git loop log' every session's events"
        ]
    );
    let out = repo.run(&["watch", &id]).code(1);
    assert_eq!(
        out.stderr.lines().collect::<Vec<_>>(),
        [
            format!("error: no session of {id} ran on this machine"),
            format!("hint: 'git loop show {id}' says where it stands; 'git loop run --task {id}' starts one"),
        ]
    );
    let out = repo.run(&["watch", "t-zzzzzz"]).code(2);
    assert_eq!(out.stderr.lines().count(), 2, "one error and its hint: {}", out.stderr);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
}

#[test]
fn the_board_ends_when_its_terminal_hangs_up() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["Write parser"]);
    let Some(tmux) = terminal_sized(&env, &repo, (100, 30)) else { return };
    let pid_file = env.path("board.pid");
    tmux.type_line(&format!("sh -c 'echo $$ > {}; GIT_LOOP_NOW= exec git loop board'", pid_file.display()));
    wait_for_screen(&tmux, "the board", &["Write parser"]);
    let pid = wait_for_file("the board's pid", &pid_file, &tmux);
    // The terminal goes away under it, as when an ssh connection drops.
    tmux.command(&["kill-server"]);
    let proc = std::path::PathBuf::from(format!("/proc/{pid}"));
    let gone = || !proc.exists() || std::fs::read_to_string(proc.join("stat")).is_ok_and(|s| s.contains(") Z "));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone() {
        assert!(Instant::now() < deadline, "the board (pid {pid}) still runs 10 s after its terminal hung up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_board_parks_and_reopens_on_its_keys() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Write parser"]);
    let Some(tmux) = terminal_sized(&env, &repo, (100, 30)) else { return };
    tmux.type_line("GIT_LOOP_NOW= git loop board");
    wait_for_screen(&tmux, "the board", &["Write parser", "ready 1"]);
    key(&tmux, "p");
    wait_for_screen(&tmux, "the reason asked", &[&format!("park {id}, why:")]);
    tmux.command(&["send-keys", "-t", "loop", "-l", "waits for the spec"]);
    key(&tmux, "Enter");
    wait_for_screen(&tmux, "the question", &["waits for the spec)? (y/n)"]);
    key(&tmux, "y");
    wait_for_screen(&tmux, "the task parked", &[&format!("{id} parked"), "parked 1", "ready 0"]);
    let task = show(&repo, &id);
    assert_eq!((task["state"].as_str(), task["reason"].as_str()), (Some("parked"), Some("waits for the spec")));
    // The selection went with the task to the parked column: reopen it there.
    key(&tmux, "o");
    wait_for_screen(&tmux, "the task reopened", &[&format!("{id} reopened"), "ready 1", "parked 0"]);
    assert_eq!(show(&repo, &id)["state"], "open");
    key(&tmux, "q");
    assert_terminal_given_back(&env, &tmux, "0", 1);
}

#[test]
fn the_board_gives_the_terminal_back_on_a_panic() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["Write parser"]);
    let Some(tmux) = terminal_sized(&env, &repo, (100, 30)) else { return };
    tmux.type_line("GIT_LOOP_BOARD_PANIC=1 git loop board");
    // The message first: until the board has started, the shell is in front too, and keys
    // typed then would be the board's.
    wait_for_screen(&tmux, "the panic's message, readable", &["GIT_LOOP_BOARD_PANIC is set"]);
    assert_terminal_given_back(&env, &tmux, "101", 1);
}

#[test]
fn the_board_shows_what_another_clone_did_after_its_sync() {
    let env = TestEnv::new();
    let (_remote, a, b) = env.two_clones();
    a.git(&["config", "loop.syncEvery", "1s"]);
    let Some(tmux) = terminal_sized(&env, &a, (100, 30)) else { return };
    tmux.type_line("GIT_LOOP_NOW= git loop board");
    wait_for_screen(&tmux, "the board", &["ready 0", "synced with origin"]);
    // Added on the other clone, which sends it to the remote as it exits.
    let id = live(&b, &["add", "From clone b"]).ok().stdout.trim().to_owned();
    wait_for_screen(&tmux, "the other clone's task", &[id.as_str(), "ready 1"]);
    key(&tmux, "q");
    assert_terminal_given_back(&env, &tmux, "0", 1);
}

#[test]
fn the_board_takes_a_task_over_and_hands_it_back_on_its_keys() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Take me"]);
    let state = state_dir(&env);
    named(
        &repo,
        &env,
        "polite",
        &format!(
            "echo mine > mine.txt\ntouch {}/started\nwhile [ ! -f \"$GIT_LOOP_WRAP_UP\" ]; do sleep 0.05; done",
            state.display()
        ),
    );
    let Some(tmux) = terminal_sized(&env, &repo, (100, 30)) else { return };
    let walk = spawn(&repo, &["run", "--agent", "polite", "--grace", "1", "--max-units", "1"], None);
    wait_for("the session", || state.join("started").exists());
    tmux.type_line("GIT_LOOP_NOW= git loop board");
    wait_for_screen(&tmux, "the running task", &["running 1", "Take me"]);
    key(&tmux, "Right");
    key(&tmux, "t");
    wait_for_screen(&tmux, "the question", &["(y/n)"]);
    key(&tmux, "y");
    let screen = wait_for_screen(&tmux, "the worktree handed over", &["is yours", "worktree", "hand-back"]);
    assert!(screen.contains(&format!(".git/loop/worktrees/{id}-1")), "{screen}");
    assert_eq!(show(&repo, &id)["state"], "taken-over");
    finish(walk);
    key(&tmux, "Escape");
    wait_for_screen(&tmux, "the task waiting for its person", &["needs you 1"]);
    // Its record says where the person works it, long after the take-over's message.
    key(&tmux, "Enter");
    let shown = wait_for_screen(&tmux, "its record", &[&format!("show {id}"), "worktree"]);
    assert!(shown.contains(&format!(".git/loop/worktrees/{id}-1 (taken over by")), "{shown}");
    key(&tmux, "Escape");
    // The selection went with the task; hand it back for the agent to go on.
    key(&tmux, "b");
    wait_for_screen(&tmux, "the choice", &["c let the agent continue"]);
    key(&tmux, "c");
    wait_for_screen(&tmux, "the task handed back", &["is open again", "ready 1"]);
    assert_eq!(show(&repo, &id)["state"], "open");
    key(&tmux, "q");
    assert_terminal_given_back(&env, &tmux, "0", 1);
}

#[test]
fn the_board_reassigns_on_its_key_and_says_why_it_cannot() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Give me away"]);
    named(&repo, &env, "other", "true");
    let Some(tmux) = terminal_sized(&env, &repo, (100, 30)) else { return };
    tmux.type_line("GIT_LOOP_NOW= git loop board");
    wait_for_screen(&tmux, "the board", &["Give me away"]);
    key(&tmux, "r");
    tmux.command(&["send-keys", "-t", "loop", "-l", "nosuch"]);
    key(&tmux, "Enter");
    key(&tmux, "y");
    wait_for_screen(&tmux, "the refusal, on one line with its hint", &["error: no agent named 'nosuch' · hint:"]);
    key(&tmux, "r");
    tmux.command(&["send-keys", "-t", "loop", "-l", "other"]);
    key(&tmux, "Enter");
    wait_for_screen(&tmux, "the question", &[&format!("reassign {id} to other? (y/n)")]);
    key(&tmux, "y");
    wait_for_screen(&tmux, "the assignment", &[&format!("{id} · assigned to other")]);
    assert_eq!(show(&repo, &id)["assigned"]["agent"], "other");
    key(&tmux, "q");
    assert_terminal_given_back(&env, &tmux, "0", 1);
}
