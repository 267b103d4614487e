//! Failures that explain themselves (issue 15): what a new user runs into, said in one line
//! with a hint and the right exit code, and the task left as it was.

use crate::harness::{Repo, Run};

fn run(repo: &Repo<'_>, agent_cmd: &str, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--agent-cmd", agent_cmd, "--grace", "1", "--session-timeout", "60s"];
    args.extend_from_slice(extra);
    repo.run(&args)
}

fn sessions(repo: &Repo<'_>) -> usize {
    repo.session_records().len()
}

#[test]
fn an_agent_command_naming_a_missing_program_is_refused_before_any_session() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    let out = run(&repo, "/nonexistent/agent --yes", &[]).code(77);
    assert!(
        out.stderr.contains("error: the agent's program '/nonexistent/agent' was not found")
            && out.stderr.contains("hint:"),
        "names the program, with a hint: {}",
        out.stderr
    );
    assert_eq!(sessions(&repo), 0, "no session ran");
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(
        (task["state"].as_str(), task["ready"].as_bool(), task["claim"].is_null()),
        (Some("open"), Some(true), true),
        "untouched"
    );
}

#[test]
fn a_session_the_shell_cannot_run_stops_the_walk_with_its_message_and_gives_the_task_back() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    // The shell finds `sh` but not what the command runs: it says so and exits 127 at once.
    let out = run(&repo, "exec /nonexistent/agent", &[]).code(77);
    assert_eq!(sessions(&repo), 1, "one session, not the task's fifteen: {}", out.stdout);
    let error = out.stderr.lines().find(|l| l.starts_with("error:")).unwrap_or_default();
    assert!(
        error.contains("could not run") && error.contains("/nonexistent/agent") && error.contains("not found"),
        "the error carries the shell's message: {}",
        out.stderr
    );
    assert!(out.stderr.contains("hint: correct --agent-cmd"), "a hint: {}", out.stderr);
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(
        (task["state"].as_str(), task["ready"].as_bool(), task["claim"].is_null()),
        (Some("open"), Some(true), true),
        "released, not failed: {task}"
    );
    // 126 too (found but not executable), and from a named agent as well as --agent-cmd.
    let script = env.path("not-executable");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").expect("write");
    let out = run(&repo, &format!("exec {}", script.display()), &[]).code(77);
    assert!(out.stderr.contains("Permission denied"), "the shell's own words: {}", out.stderr);
    assert_eq!(sessions(&repo), 2);
}

#[test]
fn stop_all_with_no_walk_running_says_there_is_nothing_to_stop() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["A task"]);
    let out = repo.run(&["stop", "--all"]).code(1);
    assert!(out.stderr.starts_with("error: no walk is running here: nothing to stop\nhint: "), "{}", out.stderr);
    assert!(!repo.dir.join(".git/loop/cancel").exists(), "no marker left for a later walk to trip over");
    // As `stop <task>` for a task nothing works on: the same class of answer.
    let id = repo.add(&["Another"]);
    repo.run(&["stop", &id]).code(1);
}

#[test]
fn log_follow_shows_the_last_n_then_only_what_comes() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let ids: Vec<String> = ["one", "two", "three", "four"].iter().map(|t| repo.add(&[t])).collect();
    let file = env.path("follow.out");
    let mut follow = repo
        .command(&["log", "--follow", "-n", "2"])
        .stdout(std::fs::File::create(&file).expect("create"))
        .spawn()
        .expect("start log --follow");
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    crate::harness::wait_for("the last two events", || read().lines().count() >= 2);
    // Past a poll or two of the journal: nothing older may appear.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let late = repo.add(&["five"]);
    crate::harness::wait_for("the new event", || read().contains(&late));
    std::thread::sleep(std::time::Duration::from_millis(700));
    let _ = follow.kill();
    let _ = follow.wait();
    let shown: Vec<String> = read().lines().map(|l| l.split_whitespace().nth(1).unwrap_or("").to_owned()).collect();
    assert_eq!(shown, [ids[2].clone(), ids[3].clone(), late], "the last two, then the new one:\n{}", read());
}

#[test]
fn done_park_reopen_and_cancel_print_the_tasks_new_state_as_json() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    let state = |args: &[&str]| {
        let out = repo.run(args).ok();
        let value: serde_json::Value =
            serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", out.stdout));
        assert_eq!(value["id"].as_str(), Some(id.as_str()), "{args:?}: the task: {value}");
        assert!(value["tip"].is_string() && value.get("ready").is_some(), "{args:?}: as show --json has it: {value}");
        value
    };
    assert_eq!(state(&["park", &id, "--reason", "later", "--json"])["state"], "parked");
    assert_eq!(state(&["reopen", &id, "--json"])["state"], "open");
    let done = state(&["done", &id, "--commit", "HEAD", "-m", "it is done", "--json"]);
    assert_eq!((done["state"].as_str(), done["again"].as_bool()), (Some("done"), Some(false)), "{done}");
    assert_eq!(done["completion"]["message"], "it is done", "{done}");
    assert_eq!(state(&["reopen", &id, "--json"])["state"], "open");
    let cancelled = state(&["cancel", &id, "--json"]);
    assert_eq!(
        (cancelled["state"].as_str(), &cancelled["leaves_blocked"]),
        (Some("cancelled"), &serde_json::json!([]))
    );
}

#[test]
fn cancelling_a_task_others_wait_for_names_the_tasks_it_leaves_blocked() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let base = repo.add(&["Base"]);
    let first = repo.add(&["First", "--after", &base]);
    let second = repo.add(&["Second", "--after", &base]);
    let done_already = repo.add(&["Done already", "--after", &base]);
    repo.run(&["done", &done_already, "--commit", "HEAD"]).ok();
    let other = repo.add(&["Unrelated"]);
    let out = repo.run(&["cancel", &base]).ok();
    let mut blocked = vec![first.clone(), second.clone()];
    blocked.sort();
    assert!(
        out.stdout.contains(&format!("it leaves blocked {}: they wait for {base}", blocked.join(", "))),
        "names the open tasks that wait for it, and only those: {}",
        out.stdout
    );
    assert!(!out.stdout.contains(&other) && !out.stdout.contains(&done_already), "{}", out.stdout);
    repo.run(&["reopen", &base]).ok();
    let value = repo.run(&["cancel", &base, "--json"]).ok().json();
    assert_eq!(value["leaves_blocked"], serde_json::json!(blocked), "{value}");
    // Nothing waits for a task with no dependents: no note.
    let out = repo.run(&["cancel", &other]).ok();
    assert_eq!(out.stdout.trim(), format!("{other} cancelled"));
}

#[test]
fn counts_of_one_are_singular() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    let cmd = env.agent("quiet", "true");
    let out = run(&repo, &cmd, &["--per-unit-dispatches", "1", "--max-iterations", "1"]);
    assert!(out.stdout.contains("· at most 1 session · 1 session per task"), "{}", out.stdout);
    assert!(out.stdout.contains("· 1 session ·"), "the summary: {}", out.stdout);
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["reason"], "failed: no verdict after 1 session");
}

#[test]
fn an_ambiguous_prefix_says_how_many_it_did_not_list() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    for n in 0..7 {
        repo.add(&[&format!("task {n}")]);
    }
    let out = repo.run(&["show", "t"]).code(2);
    let error = out.stderr.lines().next().unwrap_or_default();
    assert!(error.starts_with("error: 't' matches 7 tasks: t-") && error.ends_with(" and 2 more"), "{}", out.stderr);
    assert_eq!(error.matches("t-").count(), 5, "five listed: {error}");
}

#[test]
fn bad_input_on_the_command_line_says_what_is_expected() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let missing = env.path("nowhere");
    let out = repo.run(&["-C", missing.to_str().expect("utf-8"), "list"]).code(2);
    assert!(
        out.stderr.starts_with(&format!("error: '{}' does not exist\nhint: ", missing.display())),
        "{}",
        out.stderr
    );
    let out = repo.run(&["add", "A task", "--priority", "p9"]).code(2);
    assert!(
        out.stderr.contains("priority 'p9' is not valid\nhint: use p0 (most urgent), p1, p2 or p3"),
        "{}",
        out.stderr
    );
    let out = repo.run(&["run", "--agent-cmd", "true", "--lease", "5q"]).code(2);
    assert!(out.stderr.contains("duration '5q' is not valid\nhint: ") && out.stderr.contains("90s"), "{}", out.stderr);
    // A beads export imported as plain JSON lines: the hint names --format beads.
    let file = env.path("issues.jsonl");
    std::fs::write(
        &file,
        r#"{"id":"bd-1","title":"From beads","status":"open","priority":1,"issue_type":"task"}"#.to_owned() + "\n",
    )
    .expect("write");
    let out = repo.run(&["import", file.to_str().expect("utf-8")]).code(2);
    assert!(
        out.stderr.contains("hint: this looks like a beads export") && out.stderr.contains("--format beads"),
        "{}",
        out.stderr
    );
    repo.run(&["import", file.to_str().expect("utf-8"), "--format", "beads"]).ok();
}

#[test]
fn a_paused_walk_says_why_in_status() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let mut ids: Vec<String> = ["one", "two"].iter().map(|t| repo.add(&[t])).collect();
    ids.sort();
    let agent = env.agent("fail", "git loop finish failed --message 'not today'");
    run(&repo, &agent, &["--pause-after", "2"]).code(4);
    let out = repo.run(&["status"]).ok();
    let line = out.stdout.lines().find(|l| l.starts_with("the last walk paused")).unwrap_or_default();
    assert!(
        line.ends_with(&format!(": 2 consecutive failures ({})", ids.join(", "))),
        "the reason and the tasks, not '(: )': {}",
        out.stdout
    );
    let paused = &repo.run(&["status", "--json"]).ok().json()["paused"];
    assert_eq!(paused["reason"], "2 consecutive failures", "{paused}");
    let mut tasks: Vec<String> =
        paused["tasks"].as_array().expect("tasks").iter().map(|t| t.as_str().unwrap_or("").to_owned()).collect();
    tasks.sort();
    assert_eq!(tasks, ids, "{paused}");
}

#[test]
fn failing_checks_show_the_end_of_their_output_and_where_the_rest_is() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    let agent = env.agent("doer", "echo work > work.txt\ngit loop finish done --message 'did it'");
    let checks = r"for n in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line-$n; done; printf '\033[31mFAIL: expected 4, got 5\n'; exit 1";
    let out = run(&repo, &agent, &["--checks", checks, "--per-unit-dispatches", "1"]).ok();
    let log_line = out.stdout.lines().find(|l| l.contains("checks failed (")).unwrap_or_default();
    assert!(
        log_line.contains(" · their output: ") && log_line.ends_with("/checks.log"),
        "the path of the full log: {}",
        out.stdout
    );
    let log = log_line.rsplit(" · their output: ").next().unwrap_or_default();
    assert!(std::path::Path::new(log).is_file(), "the log is there: {log}");
    let quoted: Vec<&str> = out.stdout.lines().filter(|l| l.trim_start().starts_with("│ ")).collect();
    assert_eq!(quoted.len(), 10, "the last ten lines: {}", out.stdout);
    assert!(quoted[0].ends_with("│ line-4") && !out.stdout.contains("│ line-3\n"), "{}", out.stdout);
    assert!(
        quoted[9].ends_with("│ \\u{1b}[31mFAIL: expected 4, got 5"),
        "the last line, its control characters escaped: {}",
        out.stdout
    );
    let show = repo.run(&["show", &id]).ok().stdout;
    assert!(show.contains("  last:    the checks failed on try 1 (exit 1)\n"), "{show}");
    assert!(show.contains(&format!("           its output: {log}\n")), "{show}");
    assert!(show.contains("           │ \\u{1b}[31mFAIL: expected 4, got 5\n"), "{show}");
    let json = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(json["failure"]["log"], log, "{json}");
    assert_eq!(json["failure"]["tail"].as_array().map(Vec::len), Some(10), "{json}");
    let status = repo.run(&["status"]).ok().stdout;
    assert!(
        status.contains("      the checks failed on try 1 (exit 1): \\u{1b}[31mFAIL: expected 4, got 5\n")
            && status.contains(&format!("      its output: {log}\n")),
        "{status}"
    );
}

#[test]
fn a_failed_session_shows_the_end_of_its_log_and_where_it_is() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    let agent = env.agent("crash", "echo 'working'\necho 'boom: cannot parse config.toml' >&2\nexit 3");
    let out = run(&repo, &agent, &["--per-unit-dispatches", "1"]).ok();
    let ended = out.stdout.lines().find(|l| l.contains("the agent exited (exit 3)")).unwrap_or_default();
    assert!(ended.contains(" · its output: ") && ended.ends_with("/log"), "{}", out.stdout);
    assert!(out.stdout.contains("│ boom: cannot parse config.toml\n"), "{}", out.stdout);
    let show = repo.run(&["show", &id]).ok().stdout;
    assert!(show.contains("(try 1) ended: the agent exited (exit 3)\n"), "{show}");
    assert!(show.contains("           │ boom: cannot parse config.toml\n"), "{show}");
    // A session that ended well quotes nothing.
    let id = repo.add(&["Another"]);
    let fine = env.agent("fine", "echo fine\ngit loop finish done");
    let out = run(&repo, &fine, &[]).ok();
    assert!(!out.stdout.contains("│") && !out.stdout.contains("its output"), "{}", out.stdout);
    let show = repo.run(&["show", &id]).ok().stdout;
    assert!(!show.contains("  last:") && !show.contains("answer:"), "a done task needs no answer: {show}");
}

#[test]
fn the_claim_a_walk_keeps_on_a_task_it_failed_is_not_called_a_crash() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    let agent = env.agent("crash", "exit 3");
    run(&repo, &agent, &["--per-unit-dispatches", "1"]).ok();
    let status = repo.run(&["status"]).ok().stdout;
    let line = status.lines().find(|l| l.contains(&format!("node:{id}"))).unwrap_or_default();
    assert!(line.contains("kept until a person answers the task · closed (failed)"), "{status}");
    assert!(!status.contains("without a trace"), "the walk ended as walks do: {status}");
}

#[test]
fn a_task_that_needs_you_says_how_to_answer_it() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["A task"]);
    let agent = env.agent("asker", "echo half > half.txt\ngit loop finish blocked --message 'which colour?'");
    let out = run(&repo, &agent, &[]).ok();
    let answer = format!("git loop edit {id} --body '…' && git loop reopen {id}");
    assert!(out.stdout.contains("answer it with one of:\n"), "{}", out.stdout);
    for way in [answer.as_str(), &format!("git loop done {id} --try 1"), &format!("git loop take-over {id}")] {
        assert!(out.stdout.contains(way), "the walk's line names '{way}': {}", out.stdout);
    }
    let show = repo.run(&["show", &id]).ok().stdout;
    assert!(show.contains(&format!("  answer:  {answer}   answer in its plan")), "{show}");
    assert!(show.contains(&format!("           git loop reassign {id} <agent>")), "{show}");
    let json = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(json["answers"][1]["command"], format!("git loop done {id} --try 1"), "{json}");
    let status = repo.run(&["status"]).ok().stdout;
    assert!(
        status.contains(&format!(
            "      answer: edit + reopen · done --try 1 · reassign · take-over · park --reason (the commands: git loop show {id})"
        )),
        "{status}"
    );
    // What it says is true: the first way works, and the task is open again.
    repo.run(&["edit", &id, "--body", "blue"]).ok();
    repo.run(&["reopen", &id]).ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "open");
    let show = repo.run(&["show", &id]).ok().stdout;
    assert!(!show.contains("answer:"), "an open task waits for nobody: {show}");
}

#[test]
fn list_has_a_header_columns_that_fit_every_state_and_shows_labels() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let asked = repo.add(&["Asks a question", "--label", "api", "--label", "later"]);
    let agent = env.agent("asker", "git loop finish blocked --message 'which colour?'");
    run(&repo, &agent, &[]).ok();
    let ready = repo.add(&["Ready one"]);
    let out = repo.run(&["list"]).ok();
    assert_eq!(
        out.stdout_with(&[(&asked, "t-asked..."), (&ready, "t-ready...")]),
        "ID          PRI  STATE      TITLE\n\
         t-ready...  p2   ready      Ready one\n\
         t-asked...  p2   needs-you  Asks a question  [api, later]\n",
        "a header, the state column as wide as 'needs-you', the labels shown"
    );
    let empty = env.repo("empty");
    assert_eq!(empty.run(&["list"]).ok().stdout, "", "no header over an empty list");
}

#[test]
fn without_checks_a_task_is_done_on_its_agents_word_and_says_so() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let ids = [repo.add(&["One"]), repo.add(&["Two"])];
    let agent = env.agent("doer", "echo work > \"work-$GIT_LOOP_TASK.txt\"\ngit loop finish done --message 'did it'");
    let out = run(&repo, &agent, &[]).ok();
    let said = "no checks are set (--checks, loop.checks): a task counts as done on its agent's word";
    assert_eq!(out.stdout.matches(said).count(), 1, "once per walk, not per task: {}", out.stdout);
    let walk_line = out.stdout.lines().position(|l| l.contains("  walk w-")).expect("the walk's first line");
    assert!(
        out.stdout.lines().skip(walk_line + 1).take(2).any(|l| l.ends_with(said)),
        "at the start (after how its sessions are confined): {}",
        out.stdout
    );
    for id in &ids {
        let task = repo.run(&["show", id, "--json"]).ok().json();
        assert_eq!(task["completion"]["unchecked"], true, "the task's evidence says so: {task}");
        let commit = task["completion"]["commit"].as_str().expect("a commit").to_owned();
        let note: serde_json::Value =
            serde_json::from_str(&repo.git(&["notes", "--ref=loop", "show", &commit])).expect("the note is JSON");
        let entry = note["completions"].as_array().and_then(|c| c.iter().find(|e| e["task"] == id.as_str()));
        assert_eq!(entry.map(|e| &e["unchecked"]), Some(&serde_json::json!(true)), "and its note: {note}");
        assert!(
            repo.run(&["show", id]).ok().stdout.contains("           on its agent's word: no checks were set"),
            "show says it"
        );
    }
    // With checks, neither the line nor the field.
    let checked = repo.add(&["Three"]);
    let out = run(&repo, &agent, &["--checks", "true"]).ok();
    assert!(!out.stdout.contains(said), "{}", out.stdout);
    let task = repo.run(&["show", &checked, "--json"]).ok().json();
    assert!(task["completion"].get("unchecked").is_none() && task["completion"]["checks"]["passed"] == true, "{task}");
}

#[test]
fn an_unreachable_remote_is_said_in_one_line_with_a_hint() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    // Port 9 (discard): nothing listens, the connection is refused at once.
    repo.git(&["remote", "add", "origin", "http://127.0.0.1:9/nowhere.git"]);
    let init = repo.run(&["init", "--remote", "origin"]).ok();
    assert!(
        init.stderr.starts_with("warning: cannot reach the remote 'origin' (")
            && init.stderr.contains("\nhint: loop.remote is set to 'origin' all the same"),
        "init checks the remote and warns: {}",
        init.stderr
    );
    assert_eq!(repo.git(&["config", "loop.remote"]).trim(), "origin", "and sets it all the same");
    repo.add(&["A task"]);
    let out = repo.run(&["next", "--claim", "--holder", "a"]).code(1);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("error:") || l.starts_with("hint:")).collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    // Tried again (a refused connection may be a server restarting), then said once.
    assert!(
        lines[0]
            .starts_with("error: remote 'origin' did not answer (unable to access 'http://127.0.0.1:9/nowhere.git/': ")
            && lines[0].ends_with("); nothing was lost")
            && lines[0].len() < 250,
        "one line naming the remote and git's reason: {}",
        out.stderr
    );
    assert_eq!(
        lines[1],
        "hint: run it again once the remote answers; what this clone holds stays here, and 'git loop sync' publishes it"
    );
    // A walk whose remote never answered stops, saying why (not that a budget ran out): it
    // holds no work to go on with. (One that reached it once rides an outage out: fleet_net.)
    let agent = env.agent("fine", "git loop finish done");
    let walk = repo.run(&["run", "--agent-cmd", &agent, "--max-units", "1"]).code(1);
    let said = format!("{}{}", walk.stdout, walk.stderr);
    assert!(said.contains("error: remote 'origin' did not answer (unable to access "), "{said}");
    assert!(!said.contains("a budget ran out"), "{said}");
}

#[test]
fn a_checks_command_that_is_not_there_stops_the_walk_at_once_and_gives_the_task_back() {
    let env = crate::harness::TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Test it"]);
    let agent = env.agent("doer", "echo work > work.txt\ngit loop finish done --message 'did it'");
    let out = repo.run(&["run", "--agent-cmd", &agent, "--checks", "pytset -q", "--grace", "1"]).code(77);
    let last: Vec<&str> = out.stderr.lines().rev().take(2).collect();
    assert_eq!(last[1], "error: the checks command could not run: sh: 1: pytset: not found", "{}", out.stderr);
    assert!(last[0].starts_with("hint: correct --checks or loop.checks"), "{}", out.stderr);
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!((task["state"].as_str(), task["claim"].is_null()), (Some("open"), true), "given back: {task}");
    assert_eq!(repo.session_records().len(), 1, "one session, not fifteen");
    // The same for a setup command that is not there.
    let out = repo.run(&["run", "--agent-cmd", &agent, "--setup", "npm-ci-typo", "--grace", "1"]).code(77);
    assert!(
        out.stderr.contains("error: the setup command could not run: sh: 1: npm-ci-typo: not found"),
        "{}",
        out.stderr
    );
}
