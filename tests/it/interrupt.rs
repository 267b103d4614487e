//! Ctrl-C in a real terminal on `git loop run` (issue 10, point 8). A terminal's Ctrl-C sends
//! SIGINT to the whole foreground process group — git's wrapper and the `git-loop` it runs as a
//! child — and git's wrapper then forwards SIGINT to its child again, so one keypress reaches
//! git-loop once or twice. Either way it must be one graceful interruption: sessions stopped,
//! their work committed, claims released, exit 130, and no walk left "running".
//!
//! A person who presses Ctrl-C again later (past the window in which deliveries count as one)
//! still ends the walk at once; `git loop status` then says the walk is gone, not running.
//!
//! The terminal is a tmux pane (on its own socket in the test's directory) running an
//! interactive `sh`, into which the test types `git loop run …` with the test binary's
//! directory on PATH, so that `git` finds `git-loop` and runs it as its child, as for a user.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{tool, wait_for, Repo, TestEnv};

/// A tmux server on a socket of its own, killed when dropped (a failed assertion included).
pub(crate) struct Tmux<'e> {
    env: &'e TestEnv,
    program: PathBuf,
    socket: PathBuf,
    path: String,
}

impl<'e> Tmux<'e> {
    /// A detached session running an interactive `sh` in `dir`, with `bin_dir` first on PATH,
    /// in a terminal of `size` (columns, lines).
    fn start(env: &'e TestEnv, program: PathBuf, dir: &Path, bin_dir: &Path, size: (u16, u16)) -> Tmux<'e> {
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        let tmux = Tmux { env, program, socket: env.path("tmux.sock"), path };
        let dir = dir.to_str().expect("utf-8 path");
        let (x, y) = (size.0.to_string(), size.1.to_string());
        tmux.command(&["new-session", "-d", "-s", "loop", "-x", &x, "-y", &y, "-c", dir, "sh", "-i"]);
        tmux
    }

    /// Run `tmux -S <socket> <args>`; panics with its stderr if it fails.
    pub(crate) fn command(&self, args: &[&str]) -> String {
        let out = self
            .env
            .seal(&mut Command::new(&self.program))
            .env("PATH", &self.path)
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("run tmux");
        assert!(out.status.success(), "tmux {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type `line` and Enter into the shell.
    pub(crate) fn type_line(&self, line: &str) {
        self.command(&["send-keys", "-t", "loop", "-l", line]);
        self.command(&["send-keys", "-t", "loop", "Enter"]);
    }

    /// Press Ctrl-C: the terminal sends SIGINT to its foreground process group.
    pub(crate) fn ctrl_c(&self) {
        self.command(&["send-keys", "-t", "loop", "C-c"]);
    }

    /// What the pane shows, for failure messages.
    pub(crate) fn screen(&self) -> String {
        self.command(&["capture-pane", "-p", "-t", "loop", "-S", "-60"])
    }
}

impl Drop for Tmux<'_> {
    fn drop(&mut self) {
        let _ = self
            .env
            .seal(&mut Command::new(&self.program))
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Wait (bounded) for `file` and return its trimmed content.
pub(crate) fn wait_for_file(what: &str, file: &Path, tmux: &Tmux<'_>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            if text.ends_with('\n') {
                return text.trim().to_owned();
            }
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}; the terminal shows:\n{}", tmux.screen());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the try branch `loop-try/<task>/1` holds as `partial.txt` ("" when it holds none).
fn committed(env: &TestEnv, repo: &Repo<'_>, task: &str) -> String {
    env.seal(&mut Command::new("git"))
        .args(["show", &format!("loop-try/{task}/1:partial.txt")])
        .current_dir(&repo.dir)
        .stderr(Stdio::null())
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .expect("run git show")
}

/// The tmux terminal for a test, or `None` (skipped) when tmux is missing and CI is unset.
fn terminal<'e>(env: &'e TestEnv, repo: &Repo<'_>) -> Option<Tmux<'e>> {
    terminal_sized(env, repo, (200, 50))
}

/// Likewise, of `size` (columns, lines).
pub(crate) fn terminal_sized<'e>(env: &'e TestEnv, repo: &Repo<'_>, size: (u16, u16)) -> Option<Tmux<'e>> {
    let program = tool("tmux", "tmux")?;
    let bin_dir = Path::new(crate::harness::bin()).parent().expect("the binary's directory");
    Some(Tmux::start(env, program, &repo.dir, bin_dir, size))
}

/// How one Ctrl-C went.
#[derive(Debug)]
struct Round {
    #[allow(dead_code, reason = "shown in the failure message")]
    task: String,
    /// `$?` of `git loop run` in the shell.
    status: String,
    /// What the try branch holds of the agent's file ("" when it was not committed).
    committed: String,
    /// The task's state and whether a claim is still on it.
    state: String,
    claimed: bool,
    /// `git loop status`'s first line and its `walkers`.
    status_line: String,
    walkers: usize,
}

impl Round {
    fn graceful(&self) -> bool {
        self.status == "130"
            && self.committed == "partial"
            && self.state == "open"
            && !self.claimed
            && self.status_line == "no walk running here"
            && self.walkers == 0
    }
}

/// One round: a fresh task, `git loop run` typed into the terminal, its agent writes a file and
/// sleeps; once it has written, Ctrl-C; then what the walk left.
fn round(env: &TestEnv, repo: &Repo<'_>, tmux: &Tmux<'_>, agent: &str, n: usize) -> Round {
    let task = repo.add(&[&format!("interrupted {n}")]);
    let status_file = env.path(&format!("status-{n}"));
    tmux.type_line(&format!("git loop run --agent-cmd '{agent}' --task {task} --grace 5 >/dev/null 2>&1"));
    wait_for("the agent to write its file", || env.path(&format!("wrote-{task}")).exists());
    tmux.ctrl_c();
    // A shell abandons the rest of a command line whose command died of SIGINT (as git's
    // wrapper does, re-raising it), so the status is asked for on the next line, which the
    // shell reads once the walk has ended. (Typed after the Ctrl-C: the terminal discards
    // what was typed before it.)
    tmux.type_line(&format!("echo $? > {}", status_file.display()));
    let status = wait_for_file("the walk to end", &status_file, tmux);
    let committed = committed(env, repo, &task);
    let shown = repo.run(&["show", &task, "--json"]).ok().json();
    let board = repo.run(&["status"]).ok();
    let walkers = repo.run(&["status", "--json"]).ok().json()["walkers"].as_array().map_or(0, Vec::len);
    Round {
        task,
        status,
        committed,
        state: shown["state"].as_str().unwrap_or("?").to_owned(),
        claimed: !shown["claim"].is_null(),
        status_line: board.stdout.lines().next().unwrap_or("").to_owned(),
        walkers,
    }
}

/// Ten Ctrl-Cs in a tmux terminal on `git loop run`, each while an agent's session runs: all
/// ten are graceful — exit 130, the agent's file committed on its try branch, the claim
/// released, and `git loop status` shows no walk running.
#[test]
fn ctrl_c_in_a_terminal_through_git_loop_run_is_always_graceful() {
    let _one_at_a_time = crate::harness::heavy();
    let env = TestEnv::new();
    let repo = env.repo("r");
    let Some(tmux) = terminal(&env, &repo) else { return };
    let agent = env.agent(
        "writer",
        &format!("echo partial > partial.txt\ntouch {}/wrote-$GIT_LOOP_TASK\nsleep 60", env.root.path().display()),
    );
    let rounds: Vec<Round> = (0..10).map(|n| round(&env, &repo, &tmux, &agent, n)).collect();
    let graceful = rounds.iter().filter(|r| r.graceful()).count();
    eprintln!("Ctrl-C through 'git loop run' in tmux: {graceful} of {} graceful", rounds.len());
    assert_eq!(graceful, rounds.len(), "every Ctrl-C is graceful: {rounds:#?}\nthe terminal shows:\n{}", tmux.screen());
}

/// A second Ctrl-C more than the window (1 s) after the first, while the walk waits for an
/// agent that ignores SIGTERM, ends the walk at once (exit 130, long before the 30 s grace)
/// and says so. `git loop status` then reports no walk running but what the dead walk left,
/// and the next `git loop run` recovers the session: the agent's file lands on its try branch.
#[test]
fn a_second_ctrl_c_after_the_window_exits_at_once_and_status_tells_what_the_walk_left() {
    let _one_at_a_time = crate::harness::heavy();
    let env = TestEnv::new();
    let repo = env.repo("r");
    let Some(tmux) = terminal(&env, &repo) else { return };
    let task = repo.add(&["stubborn"]);
    let (wrote, asked) = (env.path("wrote"), env.path("asked-to-stop"));
    // `exec`: the agent is the script's shell itself (`sh -c` would otherwise die of the
    // SIGTERM and end the session at once); `|| :` keeps `set -e` from ending the loop when
    // SIGTERM kills a `sleep`.
    let agent = "exec ".to_owned()
        + &env.agent(
            "stubborn",
            &format!(
                "trap 'touch {asked}' TERM\necho partial > partial.txt\ntouch {wrote}\nwhile :; do sleep 0.1 || :; done",
                asked = asked.display(),
                wrote = wrote.display()
            ),
        );
    let stderr = env.path("walk.stderr");
    tmux.type_line(&format!(
        "git loop run --agent-cmd '{agent}' --task {task} --grace 30 >/dev/null 2>{}",
        stderr.display()
    ));
    wait_for("the agent to write its file", || wrote.exists());
    tmux.ctrl_c();
    let first = Instant::now();
    wait_for("the session to be asked to stop", || asked.exists());
    // The behaviour under test is a window of time: the second press must come after it.
    wait_for("the window for duplicate deliveries to pass", || first.elapsed() > Duration::from_millis(1500));
    tmux.ctrl_c();
    let status_file = env.path("status");
    tmux.type_line(&format!("echo $? > {}", status_file.display()));
    assert_eq!(wait_for_file("the walk to end", &status_file, &tmux), "130");
    assert!(first.elapsed() < Duration::from_secs(20), "the second Ctrl-C did not wait for the 30 s grace");
    assert_eq!(
        std::fs::read_to_string(&stderr).expect("the walk's stderr").lines().rev().take(2).collect::<Vec<_>>(),
        [
            "hint: the next 'git loop run' commits what they left to their try branches",
            "error: interrupted again: exited at once, without waiting for the sessions to stop",
        ],
        "the walk says it left the work uncommitted"
    );
    assert_eq!(committed(&env, &repo, &task), "", "nothing was committed: the walk did not get that far");

    let board = repo.run(&["status", "--json"]).ok().json();
    assert_eq!(board["walkers"], serde_json::json!([]), "no walk is reported running");
    let dead = &board["dead_walkers"][0];
    let (walker, pid) = (dead["holder"].as_str().expect("a walker key"), dead["pid"].as_u64().expect("a pid"));
    assert_eq!(
        (board["claims"][0]["holder"].as_str(), &board["claims"][0]["holder_gone"], &board["counts"]["running"]),
        (Some(walker), &serde_json::json!(true), &serde_json::json!(0)),
        "its task claim is shown as its dead walk's, and the task is not counted as running"
    );
    let text = repo.run(&["status"]).ok().stdout;
    let lines: Vec<&str> = text.lines().take(2).collect();
    assert_eq!(
        lines,
        [
            "no walk running here".to_owned(),
            format!(
                "the last walk ({walker}, pid {pid}) ended without a trace; its sessions are recovered by the next 'git loop run'"
            ),
        ]
    );

    let done = env.agent("finisher", "echo '{\"verdict\":\"done\"}' > \"$GIT_LOOP_RESULT\"");
    repo.run(&["run", "--agent-cmd", &done, "--task", &task, "--grace", "1"]).ok();
    assert_eq!(committed(&env, &repo, &task), "partial", "the next walk committed the session's work");
    let after = repo.run(&["status"]).ok().stdout;
    assert!(!after.contains("without a trace"), "the recovered walk is no longer mentioned:\n{after}");
}
