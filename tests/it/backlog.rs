//! The backlog commands, end to end: add, list, show, next, edit, done, park, reopen,
//! cancel, import; their outputs and exit codes.

use crate::harness::TestEnv;

#[test]
fn add_prints_the_new_id_and_list_shows_ready_and_blocked_tasks() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let a = repo.add(&["Write the parser", "-p", "p1"]);
    let b = repo.add(&["Test the parser", "--after", &a, "--label", "test"]);
    assert!(a.starts_with("t-") && a.len() == 10, "ids look like t-xxxxxxxx, got {a:?}");
    let list = repo.run(&["list"]).ok();
    assert_eq!(
        list.stdout_with(&[(&a, "<A>"), (&b, "<B>")]),
        "ID          PRI  STATE    TITLE\n\
         <A>  p1   ready    Write the parser\n\
         <B>  p2   blocked  Test the parser  [test]  (after <A>)\n"
    );
    let json = repo.run(&["add", "Third", "--json"]).ok().json();
    assert!(json["id"].as_str().is_some_and(|id| id.starts_with("t-")), "add --json prints {{\"id\": ...}}");
}

#[test]
fn titles_are_stored_verbatim_and_never_run() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let canary = env.path("canary");
    let title = format!("$(touch {0}) `touch {0}` \"quoted\" 'single'\nsecond line; rm -rf /", canary.display());
    let id = repo.add(&[&title]);
    let shown = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(shown["title"], title, "the title round-trips byte for byte");
    assert!(!canary.exists(), "nothing in a title is ever executed");
}

/// The environment that pins git-loop's clock to `t`.
fn at(t: &str) -> [(&str, &str); 1] {
    [("GIT_LOOP_NOW", t)]
}

#[test]
fn next_hands_out_priority_then_age_and_skips_blocked_claimed_and_closed_tasks() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let old_p2 = repo.run_with(&["add", "old p2"], &at("2026-03-01T10:00:00Z")).ok().stdout.trim().to_owned();
    let new_p1 =
        repo.run_with(&["add", "new p1", "-p", "p1"], &at("2026-03-01T11:00:00Z")).ok().stdout.trim().to_owned();
    let old_p1 =
        repo.run_with(&["add", "old p1", "-p", "1"], &at("2026-03-01T10:30:00Z")).ok().stdout.trim().to_owned();
    let blocked = repo
        .run_with(&["add", "blocked p0", "-p", "p0", "--after", &old_p2], &at("2026-03-01T09:00:00Z"))
        .ok()
        .stdout
        .trim()
        .to_owned();
    assert_eq!(
        repo.run(&["next"]).ok().stdout,
        format!("{old_p1}  p1  old p1\n"),
        "p1 before p2, older first; blocked p0 skipped"
    );
    repo.run(&["claim", "acquire", &format!("node:{old_p1}"), "--holder", "someone"]).ok();
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["id"], new_p1.as_str(), "claimed tasks are skipped");
    repo.run(&["park", &new_p1, "--reason", "waiting"]).ok();
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["id"], old_p2.as_str(), "parked tasks are skipped");
    repo.run(&["done", &old_p2]).ok();
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["id"], blocked.as_str(), "done dependencies unblock");
    repo.run(&["cancel", &blocked]).ok();
    let none = repo.run(&["next", "--json"]).ok();
    assert_eq!(none.stdout.trim(), "null", "--json prints null when nothing is ready");
    let human = repo.run(&["next"]).ok();
    assert_eq!(
        (human.stdout.as_str(), human.stderr.as_str()),
        ("", "nothing is ready: 1 open, 0 blocked by dependencies, 1 claimed\n")
    );
}

#[test]
fn ids_are_accepted_by_unique_prefix_and_unknown_ones_are_usage_errors() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Only task"]);
    let shown = repo.run(&["show", &id[2..6], "--json"]).ok().json();
    assert_eq!(shown["id"], id.as_str(), "a unique prefix without 't-' resolves");
    let missing = repo.run(&["show", "t-zzzzzzzz"]).code(2);
    assert_eq!(missing.stderr, "error: no task matches 't-zzzzzzzz'\nhint: list tasks with 'git loop list'\n");
    let bad = repo.run(&["add", "x", "-p", "p9"]).code(2);
    assert!(bad.stderr.contains("priority 'p9' is not valid"), "{}", bad.stderr);
    repo.run(&["add", "  "]).code(2);
}

#[test]
fn edits_change_fields_and_refuse_dependency_cycles() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let a = repo.add(&["A"]);
    let b = repo.add(&["B", "--after", &a, "--label", "x"]);
    let edited = repo
        .run(&["edit", &b, "-p", "p0", "--title", "B2", "--label", "y", "--remove-label", "x", "--json"])
        .ok()
        .json();
    assert_eq!((edited["title"].as_str(), edited["priority"].as_str()), (Some("B2"), Some("p0")));
    assert_eq!(edited["labels"], serde_json::json!(["y"]));
    let cycle = repo.run(&["edit", &a, "--after", &b]).code(2);
    assert_eq!(
        cycle.stderr_with(&[(&a, "<A>"), (&b, "<B>")]),
        "error: '<B>' already depends on '<A>'; adding it would make a cycle: <A> → <B> → <A>\n"
    );
    repo.run(&["edit", &a]).code(2);
    let log = repo.git(&["log", "--format=%s", &format!("refs/loop/tasks/{b}")]);
    assert_eq!(
        log.replace(&b, "<B>").replace(&a, "<A>"),
        "<B>: title \"B2\", priority p0, +label y, -label x\n<B>: create, priority p2, +after <A>, +label x",
        "every operation is one commit, readable with plain git log"
    );
}

#[test]
fn done_records_a_completion_note_that_plain_git_reads() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Ship it"]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let done = repo.run(&["done", &id, "--commit", "HEAD", "-m", "shipped"]).ok();
    assert_eq!(done.stdout, format!("{id} done at {}\n", &head[..12]));
    let note: serde_json::Value =
        serde_json::from_str(&repo.git(&["notes", "--ref=loop", "show", "HEAD"])).expect("the note is JSON");
    assert_eq!(note["version"], 2, "a note of version 2 holds every task the commit completed");
    let note = &note["completions"][0];
    assert_eq!(
        (note["task"].as_str(), note["state"].as_str(), note["message"].as_str()),
        (Some(id.as_str()), Some("done"), Some("shipped"))
    );
    assert_eq!(repo.git(&["rev-parse", &format!("refs/loop/done/{id}")]), head, "the completing commit is anchored");
    let shown = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(shown["state"], "done");
    assert_eq!(shown["completion"]["commit"], head.as_str());
    repo.run(&["done", &id, "--commit", "no-such-rev"]).code(2);
}

#[test]
fn state_changes_follow_the_rules_and_say_why_they_refuse() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    // Distinct times: the timeline orders events by time first.
    let id = repo.run_with(&["add", "T"], &at("2026-03-01T12:00:01Z")).ok().stdout.trim().to_owned();
    repo.run_with(&["park", &id, "--reason", "needs a decision"], &at("2026-03-01T12:00:02Z")).ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["reason"], "needs a decision");
    let again = repo.run(&["park", &id, "--reason", "x"]).code(1);
    assert_eq!(again.stderr_with(&[(&id, "<T>")]), "error: task '<T>' is already parked\n");
    repo.run_with(&["reopen", &id], &at("2026-03-01T12:00:03Z")).ok();
    repo.run_with(&["done", &id], &at("2026-03-01T12:00:04Z")).ok();
    let cancel = repo.run(&["cancel", &id]).code(1);
    assert_eq!(
        cancel.stderr_with(&[(&id, "<T>")]),
        "error: task '<T>' is done\nhint: reopen it first with 'git loop reopen <T>'\n"
    );
    repo.run(&["park", &id, "--reason", ""]).code(2);
    let kinds: Vec<String> = repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind").to_owned())
        .collect();
    assert_eq!(kinds, ["task_added", "task_parked", "task_reopened", "task_done"], "every transition is journaled");
}

#[test]
fn import_reads_jsonl_checks_every_line_first_and_skips_ids_already_present() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = env.path("tasks.jsonl");
    std::fs::write(&file, "{\"id\":\"a1\",\"title\":\"first\",\"priority\":\"p1\"}\n{\"id\":\"a2\",\"title\":\"second\",\"after\":[\"a1\"],\"labels\":[\"x\"]}\n").expect("write");
    let out = repo.run(&["import", file.to_str().expect("utf-8")]).ok();
    assert_eq!(out.stdout, "imported 2 tasks, skipped 0 already present\n");
    let again = repo.run(&["import", file.to_str().expect("utf-8"), "--json"]).ok().json();
    assert_eq!(again["skipped"], serde_json::json!(["a1", "a2"]), "re-importing adds nothing");
    std::fs::write(&file, "{\"title\":\"fine\"}\n{\"title\":\"bad\",\"priority\":\"urgent\"}\n").expect("write");
    let bad = repo.run(&["import", file.to_str().expect("utf-8")]).code(2);
    assert!(bad.stderr.starts_with("error: line 2: priority 'urgent' is not valid"), "{}", bad.stderr);
    // A bare number is a priority too; one out of range is refused as a word is.
    std::fs::write(&file, "{\"title\":\"fine\"}\n{\"title\":\"bad\",\"priority\":7}\n").expect("write");
    let bad = repo.run(&["import", file.to_str().expect("utf-8")]).code(2);
    assert!(bad.stderr.starts_with("error: line 2: priority '7' is not valid"), "{}", bad.stderr);
    assert_eq!(
        repo.run(&["list", "--json"]).ok().json()["tasks"].as_array().map(Vec::len),
        Some(2),
        "a bad file writes nothing"
    );
    std::fs::write(&file, "{\"id\":\"a3\",\"title\":\"numbered\",\"priority\":0}\n").expect("write");
    repo.run(&["import", file.to_str().expect("utf-8")]).ok();
    assert_eq!(repo.run(&["show", "a3", "--json"]).ok().json()["priority"], "p0");
}

#[test]
fn import_keeps_beads_ids_priorities_dependencies_and_closed_state() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = env.path("issues.jsonl");
    let beads = r#"{"_schema":"beads"}
{"id":"bd-1hc40","title":"Blocking issue","status":"open","priority":1,"issue_type":"task","created_at":"2026-01-11T18:16:13.008593-08:00","updated_at":"2026-01-11T18:16:13-08:00"}
{"id":"bd-x9zf9","title":"Blocked issue","status":"open","priority":4,"issue_type":"bug","created_at":"2026-01-11T18:16:13.074821-08:00","updated_at":"2026-01-11T18:16:13-08:00","dependencies":[{"issue_id":"bd-x9zf9","depends_on_id":"bd-1hc40","type":"blocks"},{"issue_id":"bd-x9zf9","depends_on_id":"bd-zzz","type":"related"}]}
{"id":"bd-gn5r","title":"Implement bd lint","description":"New command","design":"Walk issues","status":"closed","priority":3,"created_at":"2026-01-01T19:19:08Z","updated_at":"2026-01-01T22:18:39Z","closed_at":"2026-01-01T22:18:39Z","close_reason":"landed"}
{"id":"bd-old","title":"gone","status":"tombstone","priority":2,"created_at":"2026-01-01T19:19:08Z","updated_at":"2026-01-01T22:18:39Z"}
{"_type":"memory","key":"k","value":"v"}
"#;
    std::fs::write(&file, beads).expect("write");
    let out = repo.run(&["import", file.to_str().expect("utf-8"), "--format", "beads", "--json"]).ok().json();
    assert_eq!(out["added"], serde_json::json!(["bd-1hc40", "bd-x9zf9", "bd-gn5r"]));
    assert_eq!(out["warnings"], serde_json::json!(["bd-old: deleted in beads (tombstone), not imported"]));
    let blocked = repo.run(&["show", "bd-x9zf9", "--json"]).ok().json();
    assert_eq!((blocked["priority"].as_str(), blocked["after"].clone()), (Some("p3"), serde_json::json!(["bd-1hc40"])));
    assert_eq!(blocked["labels"], serde_json::json!(["bug"]));
    assert_eq!(blocked["created_at"], "2026-01-12T02:16:13.074821Z", "creation time is kept");
    let closed = repo.run(&["show", "bd-gn5r", "--json"]).ok().json();
    assert_eq!((closed["state"].as_str(), closed["completion"]["message"].as_str()), (Some("done"), Some("landed")));
    assert_eq!(closed["body"], "New command\n\n## Design\n\nWalk issues");
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["id"], "bd-1hc40");
}

#[test]
fn import_refuses_a_dependency_cycle_naming_it_and_writes_nothing() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = env.path("issues.jsonl");
    let issue = |id: &str, on: &str| {
        format!(
            r#"{{"id":"{id}","title":"{id}","status":"open","priority":2,"created_at":"2026-01-11T18:16:13Z","updated_at":"2026-01-11T18:16:13Z","dependencies":[{{"issue_id":"{id}","depends_on_id":"{on}","type":"blocks"}}]}}"#
        )
    };
    std::fs::write(&file, format!("{}\n{}\n", issue("bd-a", "bd-b"), issue("bd-b", "bd-a"))).expect("write");
    let out = repo.run(&["import", file.to_str().expect("utf-8"), "--format", "beads"]).code(2);
    assert_eq!(
        out.stderr,
        "error: the dependencies make a cycle: bd-a → bd-b → bd-a; none of those tasks could ever be ready\n\
         hint: drop one of these dependencies from the file, then import it again (nothing was imported)\n"
    );
    assert_eq!(repo.git(&["for-each-ref", "refs/loop/tasks"]), "", "nothing was written");
}

#[test]
fn a_cycle_two_clones_made_is_found_by_doctor_and_run_task_says_why_it_cannot_start() {
    let env = TestEnv::new();
    let (_remote, a, b) = env.two_clones();
    let x = a.add(&["Write x"]);
    let y = a.add(&["Write y"]);
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    // Each clone adds one edge, neither seeing the other's: together they close a cycle.
    a.run(&["edit", &x, "--after", &y]).ok();
    b.run(&["edit", &y, "--after", &x]).ok();
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    a.run(&["sync"]).ok();
    let doctor = a.run(&["doctor"]).code(1);
    let cycle = doctor
        .stdout
        .lines()
        .find(|l| l.starts_with("stuck: "))
        .unwrap_or_else(|| panic!("doctor names the cycle:\n{}", doctor.stdout));
    assert!(
        cycle == format!("stuck: tasks wait for each other: {x} → {y} → {x}; none of them can ever be ready")
            || cycle == format!("stuck: tasks wait for each other: {y} → {x} → {y}; none of them can ever be ready"),
        "{cycle}"
    );
    assert!(doctor.stdout.contains("  fix: break it: git loop edit "), "{}", doctor.stdout);
    let run = a.run(&["run", "--agent-cmd", "true", "--task", &x]).code(1);
    assert!(
        run.stderr.starts_with(&format!("error: task '{x}' can never be ready: it ")) && run.stderr.contains(" → "),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint: break it: git loop edit "), "{}", run.stderr);
    assert!(!run.stdout.contains("nothing left to do"), "{}", run.stdout);
}
