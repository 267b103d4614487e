//! A large backlog and large texts: an import writes one pack and packed refs, not a loose
//! object per record and a loose file per ref, and changes nothing when a line is refused;
//! `list --json` streams its tasks and still prints the document it always printed; every
//! writer refuses a text past its size limit (exit 2, nothing written), and a record past the
//! limit that arrives from elsewhere is read as corrupt, not loaded.

use std::path::Path;

use serde_json::Value;

use crate::harness::{Repo, TestEnv};

/// A beads export of `n` tasks: the first third closed, chains of ten.
fn beads(n: usize) -> String {
    (0..n)
        .map(|i| {
            let deps = if i % 10 == 0 {
                String::new()
            } else {
                format!(r#","dependencies":[{{"issue_id":"t-{i:05}","depends_on_id":"t-{:05}","type":"blocks"}}]"#, i - 1)
            };
            let status = if i < n.div_ceil(3) { r#""status":"closed""# } else { r#""status":"open""# };
            format!(
                r#"{{"id":"t-{i:05}","title":"task {i}","priority":{},{status},"created_at":"2026-01-01T00:00:00Z"{deps}}}"#,
                i % 4
            ) + "\n"
        })
        .collect()
}

/// `git count-objects -v` as (loose objects, objects in packs).
fn objects(repo: &Repo<'_>) -> (u64, u64) {
    let counts = repo.git(&["count-objects", "-v"]);
    let field = |name: &str| {
        counts
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|n| n.trim().parse().ok())
            .expect("count-objects prints the field")
    };
    (field("count:"), field("in-pack:"))
}

/// The loose ref files under `refs/loop/tasks/`.
fn loose_task_refs(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(".git/refs/loop/tasks")).map(|d| d.count()).unwrap_or(0)
}

fn write(env: &TestEnv, name: &str, text: &str) -> String {
    let path = env.path(name);
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

#[test]
fn an_import_of_2000_tasks_writes_one_pack_and_packed_refs_not_loose_files() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let (loose_before, _) = objects(&repo);
    let file = write(&env, "export.jsonl", &beads(2000));
    let imported = repo.run(&["import", &file, "--format", "beads", "--json"]).ok().json();
    assert_eq!(imported["added"].as_array().map(Vec::len), Some(2000));
    let (loose, packed) = objects(&repo);
    // The import's journal event (a blob, a tree, a commit) may be loose; no task object is.
    assert!(loose - loose_before <= 3, "the tasks' objects are packed: {loose} loose objects, {loose_before} before");
    assert!(packed >= 8000, "four objects per task are in a pack: {packed}");
    assert_eq!(loose_task_refs(&repo.dir), 0, "no task ref is a loose file: they are in packed-refs");
    let refs = repo.git(&["for-each-ref", "--format=%(refname)", "refs/loop/tasks"]);
    assert_eq!(refs.lines().count(), 2000, "every task has its ref");
    repo.git(&["fsck", "--strict", "--no-dangling"]);
    // The records read as any other: a closed task, and an open one after it in its chain.
    let done = repo.run(&["show", "t-00005", "--json"]).ok().json();
    assert_eq!((done["state"].as_str(), done["after"][0].as_str()), (Some("done"), Some("t-00004")));
    let ready = repo.run(&["next", "--json"]).ok().json();
    assert!(ready["id"].as_str().is_some_and(|id| id.ends_with('0')), "a chain's head is ready first: {ready}");
    assert_eq!(repo.run(&["list", "--json"]).ok().json()["tasks"].as_array().map(Vec::len), Some(2000));
    // Importing the same export again adds nothing and writes no pack.
    let again = repo.run(&["import", &file, "--format", "beads", "--json"]).ok().json();
    assert_eq!(
        (again["added"].as_array().map(Vec::len), again["skipped"].as_array().map(Vec::len)),
        (Some(0), Some(2000))
    );
}

#[test]
fn an_import_with_a_line_past_a_limit_names_the_line_and_writes_nothing() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let (loose_before, packed_before) = objects(&repo);
    let mut lines = beads(50);
    lines.push_str(&format!("{}\n", serde_json::json!({ "id": "t-long", "title": "x".repeat(1025) })));
    lines.push_str(&beads(3).replace("t-0000", "t-1000"));
    let file = write(&env, "export.jsonl", &lines);
    let refused = repo.run(&["import", &file, "--format", "beads"]).code(2);
    assert_eq!(
        refused.stderr.lines().next(),
        Some("error: line 51: the title is 1025 bytes, over the limit of 1 KiB"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("hint:"), "{}", refused.stderr);
    assert_eq!(repo.git(&["for-each-ref", "refs/loop"]), "", "no task, no journal event");
    assert_eq!(objects(&repo), (loose_before, packed_before), "no object was written");
    // A body past its limit in the plain format: refused the same way.
    let body = serde_json::json!({ "title": "fine", "body": "b".repeat(256 * 1024 + 1) });
    let file = write(&env, "plain.jsonl", &format!("{{\"title\":\"first\"}}\n{body}\n"));
    let refused = repo.run(&["import", &file]).code(2);
    assert!(
        refused.stderr.starts_with("error: line 2: the body is 262145 bytes, over the limit of 256 KiB\n"),
        "{}",
        refused.stderr
    );
    assert_eq!(repo.git(&["for-each-ref", "refs/loop/tasks"]), "");
}

#[test]
fn every_writer_refuses_a_text_past_its_limit_with_exit_2_and_writes_nothing() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&[&"t".repeat(1024)]);
    let before = repo.git(&["for-each-ref", "refs/loop", "refs/notes"]);
    let message = "m".repeat(64 * 1024 + 1);
    let (title, long_title, key) = ("t".repeat(1025), "t".repeat(2000), format!("node:{id}"));
    let body = env.path("body.txt");
    std::fs::write(&body, "b".repeat(256 * 1024 + 1)).expect("write");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["add", &title], "error: the title is 1025 bytes, over the limit of 1 KiB"),
        (
            vec!["add", "fine", "--body-file", body.to_str().expect("utf-8")],
            "error: the body is 262145 bytes, over the limit of 256 KiB",
        ),
        (vec!["edit", &id, "--title", &long_title], "error: the title is 2000 bytes, over the limit of 1 KiB"),
        (vec!["park", &id, "--reason", &message], "error: the reason is 65537 bytes, over the limit of 64 KiB"),
        (vec!["done", &id, "-m", &message], "error: the message is 65537 bytes, over the limit of 64 KiB"),
        (
            vec!["claim", "acquire", &key, "--holder", "me", "--reason", &message],
            "error: the claim's reason is 65537 bytes, over the limit of 64 KiB",
        ),
    ];
    for (args, error) in cases {
        let refused = repo.run(&args).code(2);
        assert_eq!(refused.stderr.lines().next(), Some(error), "{:?}: {}", args[0], refused.stderr);
        assert!(refused.stderr.lines().nth(1).is_some_and(|h| h.starts_with("hint: shorten it")), "{}", refused.stderr);
        assert_eq!(repo.git(&["for-each-ref", "refs/loop", "refs/notes"]), before, "{:?} wrote nothing", args[0]);
    }
    // At the limit, accepted.
    repo.run(&["done", &id, "-m", &"m".repeat(64 * 1024)]).ok();
}

#[test]
fn a_record_past_the_limit_from_elsewhere_is_corrupt_and_never_loaded() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let healthy = repo.add(&["healthy"]);
    // Another writer's chain: a valid creating operation, a 5 MB title in task.json.
    let op = serde_json::json!({
        "version": 1, "lamport": 1, "writer": "zzzzzzzz", "at": "2026-01-01T00:00:00Z", "by": "x <x@x>",
        "create": {}, "set": { "title": "huge", "priority": "p1" }
    });
    let task = serde_json::json!({
        "version": 1, "id": "t-huge", "title": "x".repeat(5 << 20), "priority": "p1", "state": "open",
        "created_at": "2026-01-01T00:00:00Z", "created_by": "x", "updated_at": "2026-01-01T00:00:00Z", "lamport": 1
    });
    let blob = |name: &str, value: &Value| {
        let path = write(&env, name, &value.to_string());
        repo.git(&["hash-object", "-w", &path])
    };
    let huge = task.to_string().len();
    let (op, task) = (blob("op.json", &op), blob("task.json", &task));
    let tree = repo.git_with_stdin(&["mktree"], &format!("100644 blob {op}\top.json\n100644 blob {task}\ttask.json\n"));
    let commit = repo.git(&["commit-tree", &tree, "-m", "t-huge: create"]);
    repo.git(&["update-ref", "refs/loop/tasks/t-huge", &commit]);

    let shown = repo.run(&["show", "t-huge"]).code(3);
    let error = format!(
        "error: task record 'refs/loop/tasks/t-huge' is corrupt: task.json is {huge} bytes, over the limit of 4 MiB for a record"
    );
    assert_eq!(shown.stderr.lines().next(), Some(error.as_str()), "{}", shown.stderr);
    let listed = repo.run(&["list", "--json"]).ok().json();
    let ids: Vec<&str> = listed["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["id"].as_str()).collect();
    assert_eq!(ids, [healthy.as_str()], "the healthy task is listed");
    assert_eq!(listed["corrupt"][0]["ref"], "refs/loop/tasks/t-huge", "the huge one is listed as corrupt");
}

#[test]
fn list_json_streams_the_same_document_it_always_printed() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = write(&env, "export.jsonl", &beads(30));
    repo.run(&["import", &file, "--format", "beads"]).ok();
    repo.add(&["with a body", "--body", "line one\nline two", "--label", "x"]);
    std::fs::write(repo.dir.join(".git/refs/loop/tasks/t-broken"), "not an id\n").expect("write");
    for args in [&["list", "--json"][..], &["list", "--ready", "--json"], &["list", "--json", "--state", "nothing"]] {
        let run = repo.run(args);
        if args.contains(&"nothing") {
            run.code(2);
            continue;
        }
        let run = run.ok();
        let document: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
        // The exact text serde_json prints for the whole value: what the list printed when it
        // held every task in memory.
        assert_eq!(run.stdout, serde_json::to_string_pretty(&document).expect("print") + "\n", "{args:?}");
        assert_eq!(document["corrupt"][0]["ref"], "refs/loop/tasks/t-broken");
        let tasks = document["tasks"].as_array().expect("tasks");
        assert!(!tasks.is_empty());
        for task in tasks {
            let id = task["id"].as_str().expect("id");
            let shown = repo.run(&["show", id, "--json"]).ok().json();
            for (key, value) in task.as_object().expect("object") {
                assert_eq!(&shown[key], value, "{id}: list and show agree on '{key}'");
            }
        }
    }
}

/// The task index's file, as text.
fn index_text(repo: &Repo<'_>) -> String {
    std::fs::read_to_string(repo.dir.join(".git/loop/index-v6")).expect("the task index exists")
}

/// The ids the task index's file holds rows for.
fn index_ids(repo: &Repo<'_>) -> Vec<String> {
    index_text(repo)
        .lines()
        .filter_map(|l| l.strip_prefix("T\t"))
        .map(|l| l.split('\t').next().unwrap_or("").to_owned())
        .collect()
}

/// `next --json`'s task id ("" when nothing is ready).
fn next_id(repo: &Repo<'_>, args: &[&str]) -> String {
    let next = repo.run(&[&["next", "--json"], args].concat()).ok().json();
    next["id"].as_str().unwrap_or("").to_owned()
}

/// Wait until the ref storage's times are over a second old, so the next reader stamps the
/// index (a stamp taken sooner is racy), and let one reader write it.
fn settle(repo: &Repo<'_>) {
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    repo.run(&["next", "--json"]).ok();
}

#[test]
fn an_import_leaves_the_index_holding_every_task_it_wrote() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = write(&env, "export.jsonl", &beads(300));
    repo.run(&["import", &file, "--format", "beads"]).ok();
    // Before any reader: the import wrote the rows itself, so nobody reads 300 tasks back.
    let ids = index_ids(&repo);
    assert_eq!(ids.len(), 300, "a row per imported task");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "sorted by id");
    assert!(index_text(&repo).starts_with("stamp racy\n"), "its rows are used by tip: the refs are still listed");
    assert_eq!(next_id(&repo, &[]), "t-00100", "the first open chain's head (p0) is ready first");
    // A second import adds its rows beside the first's.
    let more = write(&env, "more.jsonl", "{\"id\":\"u-1\",\"title\":\"one more\",\"priority\":\"p0\"}\n");
    repo.run(&["import", &more]).ok();
    assert_eq!(index_ids(&repo).len(), 301);
    assert_eq!(next_id(&repo, &[]), "t-00100", "older first among p0");
}

#[test]
fn next_from_the_front_of_a_current_index_says_what_the_whole_board_says() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = write(&env, "export.jsonl", &beads(300));
    repo.run(&["import", &file, "--format", "beads"]).ok();
    repo.run(&["edit", "t-00120", "--label", "ui"]).ok();
    settle(&repo);
    assert!(!index_text(&repo).starts_with("stamp racy"), "the index is current");
    let whole = |args: &[&str]| {
        std::fs::remove_file(repo.dir.join(".git/loop/index-v6")).expect("the task index exists");
        let id = next_id(&repo, args);
        settle(&repo);
        id
    };
    for args in [&[][..], &["--label", "ui"], &["--label", "nothing-has-this"]] {
        let front = next_id(&repo, args);
        assert_eq!(front, whole(args), "next {args:?}");
    }
    // Claims on the first ready tasks: the front skips them as the whole board does, and a
    // claim neither lists the task refs again nor rewrites their file.
    use std::os::unix::fs::MetadataExt;
    let inode = || std::fs::metadata(repo.dir.join(".git/loop/index-v6")).expect("index").ino();
    let before = inode();
    for _ in 0..3 {
        let first = next_id(&repo, &[]);
        repo.run(&["claim", "acquire", &format!("node:{first}"), "--holder", "someone"]).ok();
        let after = next_id(&repo, &[]);
        assert_ne!(after, first, "a claimed task is not handed out");
    }
    assert_eq!(inode(), before, "claims left the task index as it was");
    assert!(repo.dir.join(".git/loop/claims-v1").exists(), "the claims have their own file");
    let front = next_id(&repo, &[]);
    assert_eq!(front, whole(&[]), "with claims held");
    // `next --claim` takes what `next` offers.
    let claimed = repo.run(&["next", "--claim", "--holder", "agent", "--json"]).ok().json();
    assert_eq!(claimed["id"].as_str(), Some(front.as_str()));
}

#[test]
fn a_ready_set_that_does_not_fit_its_rows_is_not_believed() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let file = write(&env, "export.jsonl", &beads(60));
    repo.run(&["import", &file, "--format", "beads"]).ok();
    settle(&repo);
    let right = next_id(&repo, &[]);
    // Keep the stamp (so the file counts as current) but name other rows as ready: a closed
    // task's, or a place that is no row's start, or no place at all.
    let text = index_text(&repo);
    let rows_at = text.find("\nT\t").expect("rows") + 1;
    let closed_at = text.find("\nT\tt-00005\t").expect("a closed task's row") + 1 - rows_at;
    for ready in [format!("ready {closed_at}"), format!("ready {}", closed_at + 3), "ready 99999999".to_owned()] {
        let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
        let edited = format!("{ready}\n");
        lines[1] = &edited;
        std::fs::write(repo.dir.join(".git/loop/index-v6"), lines.concat()).expect("write");
        assert_eq!(next_id(&repo, &[]), right, "with {ready}");
        assert_eq!(next_id(&repo, &[]), right, "again, with the file rebuilt");
    }
}
