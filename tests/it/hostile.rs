//! What agents and other clones write, read back by people: text with terminal escape
//! sequences and right-to-left overrides arrives by every door (`add`, `import`, a claim's
//! holder and reason, an agent's `finish --message`, a sync from another clone, a ref name,
//! a mission's title) and every human output shows it escaped, one line per line, while
//! `--json` gives it back exactly. An agent that reports a shell command as its session id
//! gets nothing run: the id is not recorded, and the resume line `take-over` prints is quoted
//! word by word.

use serde_json::Value;

use crate::harness::{Run, TestEnv};

/// What must never reach a terminal from a record: ESC, CSI (U+009B, two bytes in UTF-8),
/// BEL, a carriage return, the right-to-left override and a bidirectional isolate.
const RAW: &[char] = &['\u{1b}', '\u{9b}', '\u{7}', '\r', '\u{202e}', '\u{2066}'];

#[track_caller]
fn assert_escaped(what: &str, run: &Run) {
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        if let Some(raw) = text.chars().find(|c| RAW.contains(c)) {
            panic!("{what}: {stream} holds a raw {raw:?}, which a terminal would act on:\n{text:?}");
        }
    }
}

const ADDED: &str = "add \u{1b}[31mred\u{1b}[0m \u{202e}gnp.exe\u{9b}2J\nsecond line\rover";
const BODY: &str = "plan line 1\n\tcode \u{1b}]0;pwned\u{7}\nisolated \u{2066}text\u{2069}";
const IMPORTED: &str = "import \u{1b}[2J\u{202e}cleared";
const LABEL: &str = "lab\u{202e}el";
const HOLDER: &str = "agent\u{202e}\u{2066}evil";
const REASON: &str = "why \u{1b}[1mbold\rx";
const DONE: &str = "finished \u{1b}[31mred\u{9b}0m \u{202e}ok";
const BLOCKED: &str = "blocked \u{1b}[2J\r\u{202e}need\nsecond";
const SYNCED: &str = "from b \u{1b}[41m\u{202e}bg";
const MISSION: &str = "mission \u{1b}[31m\u{202e}red";

fn text_file(env: &TestEnv, name: &str, text: &str) -> String {
    let path = env.path(name);
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

#[test]
fn hostile_text_from_every_source_is_escaped_for_people_and_exact_in_json() {
    let env = TestEnv::new();
    let (_remote, a, b) = env.two_clones();

    // By `add` (title and body), by `import` (title, body, label).
    let added = a.add(&[ADDED, "-p", "p0", "--body", BODY]);
    let line = serde_json::json!({ "id": "imp-1", "title": IMPORTED, "body": BODY, "labels": [LABEL] });
    let jsonl = text_file(&env, "import.jsonl", &format!("{line}\n"));
    assert_escaped("import", &a.run(&["import", &jsonl]).ok());
    // A claim's holder and reason; another holder is refused, quoting them.
    a.run(&["claim", "acquire", "node:imp-1", "--holder", HOLDER, "--reason", REASON]).ok();
    let refused = a.run(&["claim", "acquire", "node:imp-1", "--holder", "other"]).code(1);
    assert_escaped("claim acquire, refused", &refused);
    assert!(
        refused.stderr.starts_with("error: claim 'node:imp-1' is held by agent\\u{202e}\\u{2066}evil"),
        "{}",
        refused.stderr
    );
    // An agent's verdicts: one done with a message, one blocked with a reason.
    let walked = a.add(&["walked"]);
    let blocked = a.add(&["blocked"]);
    let (done_msg, blocked_msg) = (text_file(&env, "done.txt", DONE), text_file(&env, "blocked.txt", BLOCKED));
    let agent = env.agent(
        "hostile",
        &format!(
            "echo work > work.txt\n\
             if [ \"$GIT_LOOP_TASK\" = {walked} ]; then git loop finish done --message \"$(cat {done_msg})\"; \
             else git loop finish blocked --message \"$(cat {blocked_msg})\"; fi"
        ),
    );
    let run = a.run(&[
        "run",
        "--agent-cmd",
        &agent,
        "--task",
        &walked,
        "--task",
        &blocked,
        "--grace",
        "1",
        "--session-timeout",
        "60s",
    ]);
    assert_escaped("run", &run);
    assert!(run.stdout.contains("done: finished \\u{1b}[31mred\\u{9b}0m \\u{202e}ok"), "{}", run.stdout);
    // A task and a try branch with a right-to-left override in its name, from another clone.
    let synced = b.add(&[SYNCED]);
    b.git(&["update-ref", "refs/heads/loop-try/x\u{202e}y/1", "HEAD"]);
    b.run(&["sync"]).ok();
    let sync = a.run(&["sync"]).ok();
    assert_escaped("sync", &sync);
    assert!(sync.stdout.contains("refs/heads/loop-try/x\\u{202e}y/1"), "{}", sync.stdout);
    a.run(&["mission", "add", "m1", "--title", MISSION]).ok();

    let ids = [added.as_str(), "imp-1", &walked, &blocked, &synced];
    let mut human: Vec<(String, Run)> = vec![
        ("list".into(), a.run(&["list"]).ok()),
        ("status".into(), a.run(&["status"]).ok()),
        ("log".into(), a.run(&["log"]).ok()),
        ("claim list".into(), a.run(&["claim", "list"]).ok()),
        ("next".into(), a.run(&["next"]).ok()),
        ("mission show".into(), a.run(&["mission", "show", "m1"]).ok()),
        ("mission list".into(), a.run(&["mission", "list"]).ok()),
    ];
    for id in ids {
        human.push((format!("show {id}"), a.run(&["show", id]).ok()));
    }
    for (what, run) in &human {
        assert_escaped(what, run);
    }
    let out = |what: &str| &human.iter().find(|(w, _)| w == what).expect("ran").1.stdout;

    // A title or a holder never breaks a line: one line per task, each starting with its id.
    let list = out("list");
    assert!(list.starts_with("ID "), "a header first: {list}");
    assert_eq!(list.lines().skip(1).count(), ids.len(), "{list}");
    assert!(list.lines().skip(1).all(|l| ids.iter().any(|id| l.starts_with(id))), "{list}");
    assert!(list.contains("(agent\\u{202e}\\u{2066}evil)"), "the holder, escaped: {list}");
    let show = out(&format!("show {added}"));
    assert_eq!(
        show.lines().next(),
        Some(
            format!("{added}  p0  add \\u{{1b}}[31mred\\u{{1b}}[0m \\u{{202e}}gnp.exe\\u{{9b}}2J\\nsecond line\\rover")
                .as_str()
        ),
        "{show}"
    );
    assert!(show.lines().nth(1).is_some_and(|l| l.starts_with("  state:")), "{show}");
    // A body keeps its lines and tabs readable.
    assert!(
        show.ends_with("\n  plan line 1\n  \tcode \\u{1b}]0;pwned\\u{7}\n  isolated \\u{2066}text\\u{2069}\n"),
        "{show}"
    );
    // A multi-line reason stays readable too: its second line beneath the first.
    let show_blocked = out(&format!("show {blocked}"));
    assert!(show_blocked.contains("\\u{1b}[2J\\r\\u{202e}need\n           second\n"), "{show_blocked}");
    // A one-line field shows the newline in its text as `\n` (whole, since it fits).
    assert_eq!(
        out("next"),
        &format!("{added}  p0  add \\u{{1b}}[31mred\\u{{1b}}[0m \\u{{202e}}gnp.exe\\u{{9b}}2J\\nsecond line\\rover\n")
    );

    // JSON is exact.
    let task = |id: &str| a.run(&["show", id, "--json"]).ok().json();
    assert_eq!((task(&added)["title"].as_str(), task(&added)["body"].as_str()), (Some(ADDED), Some(BODY)));
    assert_eq!(task("imp-1")["title"], IMPORTED);
    assert_eq!(task("imp-1")["labels"], serde_json::json!([LABEL]));
    assert_eq!(task(&walked)["completion"]["message"], DONE);
    assert_eq!(task(&blocked)["reason"].as_str().map(|r| r.contains(BLOCKED)), Some(true), "{}", task(&blocked));
    assert_eq!(task(&synced)["title"], SYNCED);
    let claims = a.run(&["claim", "list", "--json"]).ok().json();
    assert_eq!(
        (claims["claims"][0]["holder"].as_str(), claims["claims"][0]["reason"].as_str()),
        (Some(HOLDER), Some(REASON))
    );
    let listed = a.run(&["list", "--json"]).ok().json();
    assert!(listed["tasks"].as_array().expect("tasks").iter().any(|t| t["title"] == ADDED));
    let events = a.run(&["log", "--json"]).ok().json();
    let said = |kind: &str| -> Vec<Value> {
        events["events"].as_array().expect("events").iter().filter(|e| e["kind"] == kind).cloned().collect()
    };
    assert!(said("task_done").iter().any(|e| e["data"]["message"] == DONE), "{events}");
    assert!(said("task_added").iter().any(|e| e["data"]["title"] == ADDED), "{events}");
    assert_eq!(a.run(&["mission", "show", "m1", "--json"]).ok().json()["title"], MISSION);
}

/// An agent reports a shell command as its session id (`hook generic --agent-session`), and
/// its try's worktree lies under a path with spaces, quotes and a command substitution:
/// nothing runs, the id is not recorded (the journal says why), and the resume line
/// `take-over` prints, run as it is by a real `sh`, resumes the last plausible id in the
/// worktree and creates no canary.
#[test]
fn an_agents_hostile_session_id_is_dropped_and_the_resume_line_runs_nothing_else() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let worktrees = env.path("work trees $(touch canary-path) 'quoted' `touch canary-tick`");
    repo.git(&["config", "loop.worktrees", worktrees.to_str().expect("utf-8")]);
    let script = env.agent(
        "evil",
        "git loop hook generic --agent-session good-id.1 </dev/null\n\
         git loop hook generic --agent-session 'x; touch canary-id; :' </dev/null\n\
         echo work > work.txt\n\
         git loop finish blocked --message 'over to a person'",
    );
    repo.git(&["config", "loop.agent.evil.command", &script]);
    repo.git(&["config", "loop.agent.evil.resume", "evil-cli --resume {session}"]);
    let id = repo.add(&["resume me"]);
    repo.run(&["run", "--agent", "evil", "--grace", "1", "--session-timeout", "60s"]);
    let record = repo.session_records().pop().expect("a session ran");
    assert_eq!(record["agent_session"], "good-id.1", "the hostile id was not recorded");
    let hooks: Vec<Value> = repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "agent_hook")
        .cloned()
        .collect();
    assert_eq!(hooks.len(), 2, "{hooks:?}");
    assert_eq!(hooks[1]["data"]["agent_session"], Value::Null);
    assert_eq!(
        hooks[1]["data"]["problems"][0],
        "not recorded: agent session id 'x; touch canary-id; :' is not valid: it contains ';'"
    );

    let taken = repo.run(&["take-over", &id]).ok();
    let line = taken
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("  resume    "))
        .unwrap_or_else(|| panic!("a resume line:\n{}", taken.stdout))
        .to_owned();
    let worktree = worktrees.join(format!("{id}-1"));
    assert!(worktree.is_dir(), "the try's worktree is where loop.worktrees says");
    assert_eq!(repo.run(&["take-over", &id, "--json"]).ok().json()["resume"], line.as_str(), "the same line as JSON");

    // Run the line as a person pasting it would, in a sealed directory, with a stand-in for
    // the agent's CLI that says where it ran and with what.
    let sealed = env.path("sealed");
    let bin = env.path("bin");
    std::fs::create_dir_all(&sealed).expect("mkdir");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let said = env.path("evil-cli.out");
    std::fs::write(
        bin.join("evil-cli"),
        format!("#!/bin/sh\npwd > '{}'\nprintf '%s\\n' \"$@\" >> '{}'\n", said.display(), said.display()),
    )
    .expect("write the stand-in");
    std::process::Command::new("chmod")
        .args(["+x", bin.join("evil-cli").to_str().expect("utf-8")])
        .status()
        .expect("chmod");
    let sh = |args: &[&str]| {
        let mut cmd = std::process::Command::new("sh");
        env.seal(&mut cmd)
            .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
            .env("HOME", &sealed)
            .args(args)
            .current_dir(&sealed)
            .output()
            .expect("run sh")
    };
    let checked = sh(&["-n", "-c", &line]);
    assert!(checked.status.success(), "sh -n accepts it: {}", String::from_utf8_lossy(&checked.stderr));
    let ran = sh(&["-c", &line]);
    assert!(ran.status.success(), "{line}\n{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(
        std::fs::read_to_string(&said).expect("the stand-in ran"),
        format!("{}\n--resume\ngood-id.1\n", worktree.display()),
        "it ran in the worktree with exactly the recorded id: {line}"
    );
    for dir in [&sealed, &repo.dir, &worktree, &env.root.path().to_path_buf()] {
        for canary in ["canary-path", "canary-tick", "canary-id"] {
            assert!(!dir.join(canary).exists(), "{canary} appeared in {}: {line}", dir.display());
        }
    }
}
