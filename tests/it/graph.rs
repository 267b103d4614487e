//! The task graph beyond dependencies (issue 29): epics and their children, links, and what a
//! beads export holding them becomes.

use serde_json::{json, Value};

use crate::harness::{Repo, TestEnv};

fn show(repo: &Repo<'_>, id: &str) -> Value {
    repo.run(&["show", id, "--json"]).ok().json()
}

fn state(repo: &Repo<'_>, id: &str) -> String {
    show(repo, id)["state"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn an_epic_is_never_handed_out_and_is_done_when_its_children_are() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let epic = repo.add(&["Ship the parser", "-p", "p0"]);
    let lexer = repo.add(&["Lexer", "--parent", &epic, "-p", "p2"]);
    let grammar = repo.add(&["Grammar", "--parent", &epic, "-p", "p2"]);
    let docs = repo.add(&["Docs", "--parent", &grammar, "-p", "p2", "--link", &format!("related:{lexer}")]);
    assert_eq!(show(&repo, &epic)["epic"], true, "a parent becomes an epic");
    assert_eq!(show(&repo, &epic)["status"], "open");
    assert_eq!(show(&repo, &epic)["ready"], false);

    // `next` hands out children only, however urgent the epic.
    let ready: Vec<String> = repo.run(&["list", "--ready", "--json"]).ok().json()["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(ready.contains(&lexer) && ready.contains(&docs), "{ready:?}");
    assert!(!ready.contains(&epic) && !ready.contains(&grammar), "{ready:?}");

    // The tree, drawn and as JSON.
    let tree = repo.run(&["list", "--tree"]).ok().stdout;
    let line = |id: &str| tree.lines().find(|l| l.starts_with(id)).unwrap_or_default().to_owned();
    assert!(line(&epic).contains("epic") && line(&epic).contains("Ship the parser  (0/2 done)"), "{tree}");
    assert!(line(&docs).contains("│  └─ Docs") || line(&docs).contains("   └─ Docs"), "{tree}");
    let depths: Vec<(String, u64)> = repo.run(&["list", "--tree", "--json"]).ok().json()["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| (t["id"].as_str().unwrap_or_default().to_owned(), t["depth"].as_u64().unwrap_or(99)))
        .collect();
    assert_eq!(depths[0], (epic.clone(), 0), "{depths:?}");
    assert!(depths.contains(&(docs.clone(), 2)), "{depths:?}");

    // Children done: the grammar epic first, then the whole, each with its children as evidence.
    repo.run(&["done", &lexer, "-m", "lexed", "--commit", "HEAD"]).ok();
    assert_eq!(show(&repo, &epic)["children"]["done"], 1);
    assert_eq!(state(&repo, &epic), "open");
    repo.run(&["done", &docs, "-m", "written", "--commit", "HEAD"]).ok();
    assert_eq!(state(&repo, &grammar), "done");
    let whole = show(&repo, &epic);
    assert_eq!(whole["state"], "done", "{whole}");
    let mut children = whole["completion"]["children"].as_array().expect("children listed").clone();
    children.sort_by_key(|c| c.as_str().unwrap_or_default().to_owned());
    let mut expected = vec![json!(lexer), json!(grammar)];
    expected.sort_by_key(|c| c.as_str().unwrap_or_default().to_owned());
    assert_eq!(children, expected);
    let shown = repo.run(&["show", &epic]).ok().stdout;
    assert!(shown.contains("children: 2/2 done"), "{shown}");
    assert!(repo.run(&["show", &docs]).ok().stdout.contains(&format!("related: {lexer} (done)")));
    let status = repo.run(&["status", "--json"]).ok().json();
    assert_eq!(status["epics"], json!([]), "no open epic left");

    // A child reopened: the epics its work closed are open again.
    repo.run(&["reopen", &docs]).ok();
    assert_eq!(state(&repo, &grammar), "open");
    assert_eq!(state(&repo, &epic), "open");
    let status = repo.run(&["status"]).ok().stdout;
    assert!(status.contains("epics:") && status.contains("1/2 done  Ship the parser"), "{status}");

    // Records: a task in the graph is written at version 2 (an older release refuses it rather
    // than send an agent to an epic); a plain task stays at version 1.
    let plain = repo.add(&["Plain"]);
    let version = |id: &str| -> Value {
        serde_json::from_str::<Value>(&repo.git(&["show", &format!("refs/loop/tasks/{id}:task.json")])).expect("json")
            ["version"]
            .clone()
    };
    assert_eq!((version(&epic), version(&docs), version(&plain)), (json!(2), json!(2), json!(1)));
}

#[test]
fn parents_never_make_a_cycle_and_a_finished_task_takes_no_child() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let top = repo.add(&["Top"]);
    let middle = repo.add(&["Middle", "--parent", &top]);
    let low = repo.add(&["Low", "--parent", &middle]);
    let out = repo.run(&["edit", &top, "--parent", &low]).code(2);
    assert!(out.stderr.contains(&format!("({top} → {middle} → {low})")), "{}", out.stderr);
    assert!(out.stderr.contains("make a cycle") && out.stderr.contains("hint:"), "{}", out.stderr);
    let out = repo.run(&["edit", &top, "--parent", &top]).code(2);
    assert!(out.stderr.contains("cannot be its own parent"), "{}", out.stderr);

    // An epic keeps its mark while it has children; a finished task takes none.
    let out = repo.run(&["edit", &middle, "--no-epic"]).code(1);
    assert!(out.stderr.contains("has 1 children") && out.stderr.contains("--no-parent"), "{}", out.stderr);
    let closed = repo.add(&["Closed"]);
    repo.run(&["cancel", &closed, "--reason", "not needed"]).ok();
    let out = repo.run(&["add", "Orphan", "--parent", &closed]).code(1);
    assert!(out.stderr.contains("is cancelled") && out.stderr.contains("git loop reopen"), "{}", out.stderr);
    let out = repo.run(&["add", "Orphan", "--link", "no kind"]).code(2);
    assert!(out.stderr.contains("is not valid") && out.stderr.contains("hint:"), "{}", out.stderr);

    // Moving the last open child out settles what is left: Middle's only child leaves, Top's
    // children are Middle alone; nothing is finished, nothing moves.
    repo.run(&["edit", &low, "--no-parent"]).ok();
    // Taking out a task that has no parent, or unmarking one that is no epic, changes nothing
    // (and writes nothing at version 2, which older clones would refuse).
    let out = repo.run(&["edit", &low, "--no-parent", "--no-epic"]).code(2);
    assert!(out.stderr.contains("nothing to change"), "{}", out.stderr);
    assert_eq!(show(&repo, &low)["parent"], Value::Null);
    repo.run(&["edit", &middle, "--no-epic"]).ok();
    assert_eq!(show(&repo, &middle)["epic"], Value::Null, "an ordinary task again");
    assert_eq!(state(&repo, &top), "open");
}

#[test]
fn a_walk_works_an_epics_children_and_never_the_epic() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let epic = repo.add(&["The epic", "-p", "p0"]);
    let first = repo.add(&["First part", "--parent", &epic]);
    let second = repo.add(&["Second part", "--parent", &epic, "--after", &first]);
    let agent = env.agent("w", "echo work >> work.txt\ngit loop finish done --message worked");
    repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--max-units", "5"]).ok();
    assert_eq!((state(&repo, &first), state(&repo, &second)), ("done".into(), "done".into()));
    assert_eq!(state(&repo, &epic), "done");
    let events = repo.run(&["log", "--json"]).ok().json()["events"].clone();
    let sessions_on_epic = events
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "session_started" && e["task"] == epic.as_str())
        .count();
    assert_eq!(sessions_on_epic, 0, "no session ever worked the epic");
}

#[test]
fn a_beads_export_keeps_its_epics_children_and_links_and_says_what_it_cannot_keep() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let line = |id: &str, kind: &str, deps: &str| {
        format!(
            r#"{{"id":"{id}","title":"{id} title","status":"open","priority":1,"issue_type":"{kind}","created_at":"2026-01-11T18:16:13Z","updated_at":"2026-01-11T18:16:13Z","dependencies":[{deps}]}}"#
        )
    };
    let dep =
        |id: &str, on: &str, kind: &str| format!(r#"{{"issue_id":"{id}","depends_on_id":"{on}","type":"{kind}"}}"#);
    let export = [
        line("bd-epic", "epic", ""),
        line("bd-a", "task", &dep("bd-a", "bd-epic", "parent-child")),
        line("bd-b", "task", &[dep("bd-b", "bd-epic", "parent-child"), dep("bd-b", "bd-a", "related")].join(",")),
        line(
            "bd-c",
            "bug",
            &[dep("bd-c", "bd-a", "discovered-from"), dep("bd-c", "bd-gone", "parent-child")].join(","),
        ),
    ]
    .join("\n");
    let file = env.path("issues.jsonl");
    std::fs::write(&file, format!("{export}\n")).expect("write");

    // The parent it cannot find: said by line, nothing imported, exit 1.
    let out = repo.run(&["import", file.to_str().expect("utf-8"), "--format", "beads"]).code(1);
    assert!(
        out.stderr.contains("cannot keep: line 4: bd-c: its parent 'bd-gone' (neither in the file nor in the backlog)"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--lossy"), "{}", out.stderr);
    assert_eq!(repo.git(&["for-each-ref", "refs/loop/tasks"]), "", "nothing was written");

    let out =
        repo.run(&["import", file.to_str().expect("utf-8"), "--format", "beads", "--lossy", "--json"]).ok().json();
    assert_eq!(out["added"].as_array().map(Vec::len), Some(4), "{out}");
    assert!(out["warnings"].to_string().contains("bd-gone"), "{out}");
    let epic = show(&repo, "bd-epic");
    assert_eq!((epic["epic"].clone(), epic["children"]["total"].clone()), (json!(true), json!(2)), "{epic}");
    assert_eq!(show(&repo, "bd-a")["parent"], "bd-epic");
    assert_eq!(show(&repo, "bd-b")["links"], json!(["related:bd-a"]));
    assert_eq!(show(&repo, "bd-c")["links"], json!(["discovered-from:bd-a"]));
    assert_eq!(show(&repo, "bd-c")["parent"], Value::Null);
    assert_ne!(repo.run(&["next", "--json"]).ok().json()["id"], "bd-epic");
}

/// The beads export `backlog::import_keeps_beads_ids_…` reads, with an epic and its child, a
/// field git-loop does not know, and a dependency's own fields.
const EXPORT: &str = r#"{"_schema":"beads"}
{"id":"bd-1hc40","title":"Blocking issue","status":"open","priority":1,"issue_type":"task","created_at":"2026-01-11T18:16:13.008593-08:00","updated_at":"2026-01-11T18:16:13-08:00"}
{"id":"bd-x9zf9","title":"Blocked issue","status":"open","priority":4,"issue_type":"bug","created_at":"2026-01-11T18:16:13.074821-08:00","updated_at":"2026-01-11T18:16:13-08:00","dependencies":[{"issue_id":"bd-x9zf9","depends_on_id":"bd-1hc40","type":"blocks","created_at":"2026-01-11T18:16:13Z","created_by":"ann"},{"issue_id":"bd-x9zf9","depends_on_id":"bd-zzz","type":"related"}],"assignee":"bob","estimated_minutes":30}
{"id":"bd-gn5r","title":"Implement bd lint","description":"New command","design":"Walk issues","status":"closed","priority":3,"created_at":"2026-01-01T19:19:08Z","updated_at":"2026-01-01T22:18:39Z","closed_at":"2026-01-01T22:18:39Z","close_reason":"landed"}
{"id":"bd-old","title":"gone","status":"tombstone","priority":2,"created_at":"2026-01-01T19:19:08Z","updated_at":"2026-01-01T22:18:39Z"}
{"id":"bd-ep","title":"Epic","status":"open","priority":2,"issue_type":"epic","created_at":"2026-01-01T19:19:08Z","updated_at":"2026-01-01T22:18:39Z"}
{"id":"bd-ch","title":"Child","status":"in_progress","priority":2,"issue_type":"task","created_at":"2026-01-01T19:19:08Z","updated_at":"2026-01-01T22:18:39Z","dependencies":[{"issue_id":"bd-ch","depends_on_id":"bd-ep","type":"parent-child"}]}
{"_type":"memory","key":"k","value":"v"}
"#;

#[test]
fn a_beads_export_comes_back_out_as_it_went_in_and_a_change_is_written_over_its_line() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = env.path("issues.jsonl");
    std::fs::write(&file, EXPORT).expect("write");
    repo.run(&["import", file.to_str().expect("utf-8"), "--format", "beads"]).ok();
    let issues = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.contains("_schema") && !l.contains("\"_type\"") && !l.contains("tombstone"))
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    };
    let out = repo.run(&["export", "--format", "beads"]).ok().stdout;
    assert_eq!(issues(&out), issues(EXPORT), "line for line");

    // Changed here: what git-loop holds is written over the line, the rest kept.
    repo.run(&["edit", "bd-x9zf9", "--title", "Renamed", "--link", "tracks:bd-gn5r"]).ok();
    repo.run(&["done", "bd-ch", "-m", "finished", "--commit", "HEAD"]).ok();
    let out = repo.run(&["export", "--format", "beads"]).ok().stdout;
    let line = |id: &str| -> Value {
        let found = out.lines().find(|l| l.contains(&format!("\"id\":\"{id}\""))).expect("exported");
        serde_json::from_str(found).expect("json")
    };
    let renamed = line("bd-x9zf9");
    assert_eq!((renamed["title"].clone(), renamed["assignee"].clone()), (json!("Renamed"), json!("bob")));
    let deps = renamed["dependencies"].as_array().expect("dependencies");
    assert!(deps.iter().any(|d| d["type"] == "blocks" && d["created_by"] == "ann"), "{renamed}");
    assert!(deps.iter().any(|d| d["type"] == "tracks" && d["depends_on_id"] == "bd-gn5r"), "{renamed}");
    assert_eq!(
        (line("bd-ch")["status"].clone(), line("bd-ch")["close_reason"].clone()),
        (json!("closed"), json!("finished"))
    );
    assert_eq!(line("bd-ep")["status"], "closed", "the epic its child finished");

    // Written to a file and read into another repository: the same backlog.
    let copy = env.path("copy.jsonl");
    repo.run(&["export", "--format", "beads", "-o", copy.to_str().expect("utf-8")]).ok();
    let other = env.repo("o");
    other.run(&["import", copy.to_str().expect("utf-8"), "--format", "beads", "--lossy"]).ok();
    let tree = |r: &Repo<'_>| {
        r.run(&["list", "--tree", "--json"]).ok().json()["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| (t["id"].clone(), t["state"].clone(), t["parent"].clone(), t["title"].clone(), t["links"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(tree(&other), tree(&repo));

    // The plain format goes round too.
    let plain = env.path("plain.jsonl");
    repo.run(&["export", "-o", plain.to_str().expect("utf-8")]).ok();
    let third = env.repo("p");
    third.run(&["import", plain.to_str().expect("utf-8")]).ok();
    let shape = |r: &Repo<'_>| {
        r.run(&["list", "--tree", "--json"]).ok().json()["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| (t["id"].clone(), t["state"].clone(), t["parent"].clone(), t["links"].clone(), t["epic"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&third), shape(&repo));
}

/// The ids of the tasks a landing report says landed on `on` (`None`: the target).
fn landed_on(report: &Value, on: Option<&str>) -> Vec<String> {
    report["landed"]
        .as_array()
        .expect("landed")
        .iter()
        .filter(|l| l["on"].as_str() == on)
        .map(|l| l["task"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn is_in(repo: &Repo<'_>, ancestor: &str, rev: &str) -> bool {
    crate::land::contains(repo, ancestor, rev)
}

/// `loop.epicBranch`: children land on the epic's branch with the checks run there; a child that
/// fails to land holds the epic back, and once every child's work is on its branch the epic lands
/// on main, checked on the merged result.
#[test]
fn with_epic_branches_children_land_on_the_epics_branch_and_the_epic_once_they_all_did() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.git(&["config", "loop.epicBranch", "true"]);
    let epic = repo.add(&["Ship the parser", "--epic"]);
    let grammar = repo.add(&["Grammar", "--parent", &epic]);
    let lexer = crate::land::done_task(&repo, "Lexer", &["--parent", &epic], "lexer.txt", "lex\n");
    let main_before = repo.git(&["rev-parse", "main"]);

    // One child done: it lands on the epic's branch, not on main; the epic is not done.
    let out = repo.run(&["land", "--checks", "test -f lexer.txt", "--json"]).ok();
    let report = &out.json()["landing"];
    assert_eq!(landed_on(report, Some(&format!("loop/{epic}"))), vec![lexer.clone()], "{report}");
    assert!(landed_on(report, None).is_empty(), "{report}");
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before, "main did not move");
    assert!(is_in(&repo, &format!("loop/{lexer}"), &format!("loop/{epic}")));
    assert!(show(&repo, &lexer)["landing"].to_string().contains(&format!("loop/{epic}")), "{}", show(&repo, &lexer));

    // The second child's work breaks the checks: done, it closes the epic, but cannot land on its
    // branch, and the epic waits for it rather than landing without it.
    let wt = env.path("wt-grammar");
    repo.git(&["worktree", "add", "-q", "-b", &format!("loop/{grammar}"), wt.to_str().expect("utf-8"), "main"]);
    std::fs::write(wt.join("grammar.txt"), "broken\n").expect("write");
    env.git(&wt, &["add", "-A"]);
    env.git(&wt, &["commit", "-qm", "the grammar"]);
    repo.git(&["worktree", "remove", wt.to_str().expect("utf-8")]);
    repo.run(&["done", &grammar]).ok();
    assert_eq!(state(&repo, &epic), "done");
    let status = repo.run(&["status"]).ok().stdout;
    assert!(status.contains(&format!("waiting to land on loop/{epic}:")) && status.contains(&grammar), "{status}");
    let after = format!("(after {grammar})");
    assert!(status.lines().any(|l| l.contains(epic.as_str()) && l.contains(&after)), "{status}");
    let out = repo.run(&["land", "--checks", "! grep -q broken grammar.txt 2>/dev/null", "--json"]).code(1);
    let report = &out.json()["landing"];
    let failed = &report["failed"][0];
    assert_eq!(failed["task"], grammar.as_str(), "{report}");
    assert_eq!(failed["on"], format!("loop/{epic}"), "{report}");
    assert_eq!(report["waiting"][0]["task"], epic.as_str(), "{report}");
    assert_eq!(report["waiting"][0]["waiting_for"], json!([grammar]), "{report}");
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before, "main did not move without the grammar");
    assert_eq!(state(&repo, &grammar), "needs-you");

    // Mended on its branch and done again: it lands on the epic's branch, and the epic on main.
    let wt = env.path("wt-fix");
    repo.git(&["worktree", "add", "-q", wt.to_str().expect("utf-8"), &format!("loop/{grammar}")]);
    std::fs::write(wt.join("grammar.txt"), "fixed\n").expect("write");
    env.git(&wt, &["commit", "-qam", "fix the grammar"]);
    repo.git(&["worktree", "remove", wt.to_str().expect("utf-8")]);
    repo.run(&["done", &grammar]).ok();
    let checks = "test -f lexer.txt && test -f grammar.txt && ! grep -q broken grammar.txt";
    let out = repo.run(&["land", "--checks", checks, "--json"]).ok();
    let report = &out.json()["landing"];
    assert_eq!(landed_on(report, Some(&format!("loop/{epic}"))), vec![grammar.clone()], "{report}");
    assert_eq!(landed_on(report, None), vec![epic.clone()], "{report}");
    for id in [&lexer, &grammar, &epic] {
        assert!(is_in(&repo, &format!("loop/{id}"), "main"), "{id}'s work is on main");
    }
    let log = repo.git(&["log", "--first-parent", "--format=%s", &format!("{main_before}..main")]);
    assert_eq!(log.lines().count(), 1, "main moved once, by the epic: {log}");
}

/// A walk over an epic with `loop.epicBranch` and `--land`: the second child's try starts from
/// the epic's branch (the first child's work in it), and the epic lands on main once done; with
/// a remote, a second clone's landing reads the same branches.
#[test]
fn a_walk_builds_each_child_on_its_epics_branch_and_lands_the_epic_through_the_remote() {
    let env = TestEnv::new();
    let (_remote, a, b) = env.two_clones();
    for clone in [&a, &b] {
        clone.git(&["config", "loop.epicBranch", "true"]);
    }
    let agent = env.agent(
        "w",
        "ls *.txt > seen.list 2>/dev/null || true\necho \"$GIT_LOOP_TASK\" > \"$GIT_LOOP_TASK.txt\"\ngit loop finish done --message 'wrote it'",
    );
    a.git(&["config", "loop.agent.w.command", &agent]);
    let epic = a.add(&["Ship the parser", "--epic"]);
    let lexer = a.add(&["Lexer", "--parent", &epic, "-p", "p0"]);
    let grammar = a.add(&["Grammar", "--parent", &epic, "-p", "p3"]);
    // The lexer alone first, landed on the epic's branch.
    a.run(&["run", "--agent", "w", "--task", &lexer, "--land", "--sandbox", "off", "--checks", "true"]).ok();
    assert_eq!(state(&a, &epic), "open");
    b.run(&["sync"]).ok();
    let remote_main = b.git(&["rev-parse", "origin/main"]);
    // The grammar from the other clone: its try sees the lexer's work, and the epic lands.
    b.git(&["config", "loop.agent.w.command", &agent]);
    b.run(&["run", "--agent", "w", "--task", &grammar, "--land", "--sandbox", "off", "--checks", "true"]).ok();
    let seen = b.git(&["show", &format!("loop/{grammar}:seen.list")]);
    assert!(seen.contains(&format!("{lexer}.txt")), "the grammar's try started from the epic's branch: {seen}");
    assert_eq!(state(&b, &epic), "done");
    b.git(&["fetch", "-q", "origin"]);
    let main = b.git(&["rev-parse", "origin/main"]);
    assert_ne!(main, remote_main, "the epic landed on the remote's main");
    for id in [&lexer, &grammar] {
        assert!(b.git(&["show", &format!("{main}:{id}.txt")]).contains(id.as_str()), "{id}'s work is on main");
    }
    let log = b.git(&["log", "--first-parent", "--format=%s", &format!("{remote_main}..{main}")]);
    assert_eq!(log.lines().count(), 1, "main moved once, by the epic: {log}");
    a.run(&["sync"]).ok();
    assert_eq!(state(&a, &epic), "done");
}

/// `--after <place>#<id>`: a task waits for a task of another repository, read through that
/// repository's refs on sync (by path or by a remote's name; a task folded there read from its
/// archive); `show` says where it is and its state; a cycle across the two is refused, named.
#[test]
fn a_task_waits_for_a_task_of_another_repository_read_on_sync() {
    let env = TestEnv::new();
    let lib = env.repo("lib");
    let app = env.repo("app");
    let dates = lib.add(&["Parse dates"]);
    let other = lib.add(&["Parse times"]);
    let short = &dates[2..6];
    let uses = app.add(&["Use the date parser", "--after", &format!("../lib#{short}")]);
    let lib_path = std::fs::canonicalize(&lib.dir).expect("lib's path");
    let dep = format!("{}#{dates}", lib_path.display());
    let shown = show(&app, &uses);
    assert_eq!(shown["after"], json!([dep]), "written with an absolute path and the whole id: {shown}");
    assert_eq!(shown["elsewhere"][0]["state"], "open", "{shown}");
    assert_eq!(shown["elsewhere"][0]["title"], "Parse dates", "{shown}");
    assert_eq!(shown["ready"], false);
    let text = app.run(&["show", &uses]).ok().stdout;
    assert!(text.contains(&format!("{dep} (open there: Parse dates)")), "{text}");
    let ready = app.run(&["list", "--ready", "--json"]).ok().json();
    assert_eq!(ready["tasks"], json!([]), "{ready}");

    // Done there: not ready here until read again, then ready.
    lib.run(&["done", &dates]).ok();
    assert_eq!(show(&app, &uses)["ready"], false, "not read yet");
    let out = app.run(&["sync"]).ok().stdout;
    assert!(out.contains(&format!("read            {dep}  (done there)")), "{out}");
    assert_eq!(show(&app, &uses)["ready"], true);

    // By a remote's name, and folded there: read from its archive.
    app.git(&["remote", "add", "lib", lib.dir.to_str().expect("utf-8")]);
    let times = app.add(&["Use the time parser", "--after", &format!("lib#{other}")]);
    lib.run(&["done", &other]).ok();
    lib.run(&["gc", "--older-than", "0"]).ok();
    assert_eq!(lib.git(&["for-each-ref", "refs/loop/tasks"]), "", "folded in lib");
    app.run(&["sync"]).ok();
    assert_eq!(show(&app, &times)["ready"], true, "{}", show(&app, &times));

    // A cycle across the two repositories is refused, named; nothing written.
    let back = lib.add(&["Needs the app"]);
    let app_path = std::fs::canonicalize(&app.dir).expect("app's path");
    let blocked = app.add(&["Waits for lib", "--after", &format!("lib#{back}")]);
    let out = lib.run(&["edit", &back, "--after", &format!("{}#{blocked}", app_path.display())]).code(2);
    assert!(
        out.stderr.contains(&format!("cycle: {back} → {}#{blocked} → lib#{back}", app_path.display()))
            || out.stderr.contains(&format!("cycle: {back} → {}#{blocked} → {back}", app_path.display())),
        "{}",
        out.stderr
    );
    assert_eq!(show(&lib, &back)["after"], json!([]), "nothing written");

    // What no open task waits for any more is not kept: the mirrors stay the size of the waits.
    let mirrors = || app.git(&["for-each-ref", "--format=%(refname)", "refs/loop-foreign"]);
    assert!(mirrors().contains(&dates) && mirrors().contains(&back), "{}", mirrors());
    app.run(&["edit", &uses, "--remove-after", &dep]).ok();
    app.run(&["sync"]).ok();
    assert!(!mirrors().contains(&dates) && mirrors().contains(&back), "{}", mirrors());

    // What cannot be a dependency: said, exit 2.
    let out = app.run(&["add", "x", "--after", "../lib#t-zzzzzzzz"]).code(2);
    assert!(out.stderr.contains("has no task 't-zzzzzzzz'"), "{}", out.stderr);
    let out = app.run(&["add", "x", "--after", "../nowhere#t-zzzzzzzz"]).code(2);
    assert!(out.stderr.contains("neither a remote of this clone nor a path"), "{}", out.stderr);
    let out = app.run(&["add", "x", "--after", ".#t-zzzzzzzz"]).code(2);
    assert!(out.stderr.contains("is this repository"), "{}", out.stderr);
}

/// A walk reads the tasks of other repositories when it starts: a task whose dependency there was
/// done since the last sync is worked.
#[test]
fn a_walk_reads_other_repositories_when_it_starts() {
    let env = TestEnv::new();
    let lib = env.repo("lib");
    let app = env.repo("app");
    let dates = lib.add(&["Parse dates"]);
    let uses = app.add(&["Use the date parser", "--after", &format!("../lib#{dates}")]);
    let agent = env.agent("w", "echo used > used.txt\ngit loop finish done --message 'used it'");
    app.git(&["config", "loop.agent.w.command", &agent]);
    let out = app.run(&["run", "--agent", "w", "--sandbox", "off"]);
    assert_eq!(state(&app, &uses), "open", "{}", out.stdout);
    lib.run(&["done", &dates]).ok();
    app.run(&["run", "--agent", "w", "--sandbox", "off"]).ok();
    assert_eq!(state(&app, &uses), "done");
}
