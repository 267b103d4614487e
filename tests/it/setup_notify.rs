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
        &format!(
            "test -f .env || {{ echo 'no .env' >&2; exit 1; }}\n\
             if [ -f {first}-$GIT_LOOP_TASK ]; then git loop finish done; else touch {first}-$GIT_LOOP_TASK; fi",
            first = env.path("first-done").display()
        ),
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

fn told(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn loop_notify_is_told_of_a_task_that_needs_you_and_of_the_walks_end_as_json_on_stdin() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Asks"]);
    let events = env.path("events");
    repo.git(&["config", "loop.notify", &format!("cat >> {}", events.display())]);
    let agent = env.agent("asker", "git loop finish blocked --message 'which colour?'");
    repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).ok();
    let got = told(&events);
    let kinds: Vec<&str> = got.iter().map(|e| e["event"].as_str().unwrap_or("")).collect();
    assert_eq!(kinds, ["needs_you", "walk_ended"], "{got:?}");
    assert_eq!(
        (got[0]["version"].as_u64(), got[0]["task"].as_str(), got[0]["state"].as_str(), got[0]["reason"].as_str()),
        (Some(1), Some(id.as_str()), Some("needs-you"), Some("blocked: which colour?")),
        "{}",
        got[0]
    );
    assert!(got[0]["walker"].as_str().is_some_and(|w| w.starts_with("w-")) && got[0]["at"].is_string());
    assert_eq!((got[1]["stop"].as_str(), got[1]["not_done"].as_u64()), (Some("no_work"), Some(1)), "{}", got[1]);
    // A pause says why.
    std::fs::remove_file(&events).expect("rm");
    repo.add(&["Fails"]);
    let fail = env.agent("fail", "git loop finish failed --message 'no'");
    repo.run(&["run", "--agent-cmd", &fail, "--grace", "1", "--pause-after", "1"]).code(4);
    let got = told(&events);
    let paused = got.last().expect("told");
    assert_eq!(paused["event"], "walk_paused", "{got:?}");
    assert_eq!(paused["reason"], "1 consecutive failures", "{paused}");
}

#[test]
fn a_failing_notify_command_is_a_warning_never_the_walks_failure() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    repo.git(&["config", "loop.notify", "echo 'webhook down' >&2; exit 3"]);
    let done = env.agent("done", "git loop finish done");
    let out = repo.run(&["run", "--agent-cmd", &done, "--grace", "1"]).ok();
    assert!(
        out.stderr.contains("warning: the notify command failed: `echo 'webhook down' >&2; exit 3` on walk_ended (exit 3); its output: "),
        "{}",
        out.stderr
    );
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done");
}

/// `loop.notify.webhook`: the same documents posted as JSON to a URL (a listener of the test's
/// on 127.0.0.1); one that refuses is a warning, never the walk's failure; a bad URL is refused
/// before anything runs.
#[test]
fn loop_notify_webhook_posts_the_same_documents_and_a_refusal_is_a_warning() {
    use std::io::{BufRead, BufReader, Read, Write};
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Asks"]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let posted = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, serde_json::Value)>::new()));
    let seen = posted.clone();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            reader.read_line(&mut line).expect("request line");
            let (mut length, mut kind) = (0, String::new());
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).expect("header");
                let header = header.trim_end();
                if header.is_empty() {
                    break;
                }
                let (name, value) = header.split_once(':').expect("name: value");
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().expect("length"),
                    "content-type" => kind = value.trim().to_owned(),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("body");
            seen.lock().expect("lock").push((kind, serde_json::from_slice(&body).expect("JSON")));
            // The third post is refused.
            let status = if n == 2 { "500 Internal Server Error" } else { "204 No Content" };
            let _ = stream
                .write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
        }
    });
    repo.git(&["config", "loop.notify.webhook", &url]);
    let agent = env.agent("asker", "git loop finish blocked --message 'which colour?'");
    repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).ok();
    let got = posted.lock().expect("lock").clone();
    let kinds: Vec<&str> = got.iter().map(|(_, e)| e["event"].as_str().unwrap_or("")).collect();
    assert_eq!(kinds, ["needs_you", "walk_ended"], "{got:?}");
    assert!(got.iter().all(|(kind, _)| kind == "application/json"), "{got:?}");
    assert_eq!((got[0].1["task"].as_str(), got[0].1["state"].as_str()), (Some(id.as_str()), Some("needs-you")));
    // Refused: a warning, and the walk's work stands.
    let done = repo.add(&["Done"]);
    let agent = env.agent("done", "git loop finish done");
    let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--task", &done]).ok();
    assert!(
        out.stderr.contains("warning: the notify webhook failed: ") && out.stderr.contains("500"),
        "{}",
        out.stderr
    );
    assert_eq!(repo.run(&["show", &done, "--json"]).ok().json()["state"], "done");
    repo.git(&["config", "loop.notify.webhook", "ftp://nope"]);
    let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).code(2);
    assert!(out.stderr.contains("is not an http or https URL"), "{}", out.stderr);
}

#[test]
fn the_setup_copies_from_the_checkout_and_what_it_copied_is_never_committed() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    std::fs::write(repo.dir.join(".env"), "SECRET=1\n").expect("the checkout's .env, not ignored");
    let id = repo.add(&["A task"]);
    let setup = "cp \"$GIT_LOOP_CHECKOUT/.env\" . && mkdir -p deps && echo lib > deps/lib.txt";
    let agent = env.agent("worker", "test -f .env\necho work > work.txt\necho more >> .env\ngit loop finish done");
    let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--setup", setup]).ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done", "{}", out.stdout);
    let files = repo.git(&["ls-tree", "-r", "--name-only", &format!("loop/{id}")]);
    assert_eq!(files, "README\nwork.txt", "the work, and nothing the setup copied in");
    let log = std::fs::read_to_string(
        repo.dir.join(".git/loop/sessions").join(repo.session_records()[0]["session"].as_str().expect("s")).join("log"),
    )
    .expect("log");
    assert!(log.contains("git loop: never committed, as the setup's own: .env, deps"), "{log}");
}
