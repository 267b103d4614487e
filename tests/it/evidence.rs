//! Completion evidence is never replaced silently: `done` on a task done already is refused
//! unless `--amend`, which keeps the old evidence in the record's history and says what it
//! replaced; tasks completed by one commit each keep their entry in its note, through a sync
//! between clones too, and notes of version 1 are still read.

use serde_json::Value;

use crate::harness::{Repo, TestEnv};

/// The completions the loop's note on `rev` holds, as plain git shows it.
fn note(repo: &Repo<'_>, rev: &str) -> Value {
    let text = repo.git(&["notes", "--ref=loop", "show", rev]);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("the note on {rev} is not JSON ({e}):\n{text}"))
}

/// (task, message) of each completion in a note, in its order.
fn completions(note: &Value) -> Vec<(String, String)> {
    assert_eq!(note["version"], 2, "{note}");
    note["completions"]
        .as_array()
        .expect("a list of completions")
        .iter()
        .map(|c| (c["task"].as_str().unwrap_or("").to_owned(), c["message"].as_str().unwrap_or("").to_owned()))
        .collect()
}

fn pair(task: &str, message: &str) -> (String, String) {
    (task.to_owned(), message.to_owned())
}

#[test]
fn done_twice_is_refused_and_amend_keeps_the_old_evidence_in_the_tasks_history() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["land the parser"]);
    let first = repo.git(&["rev-parse", "HEAD"]);
    repo.run(&["done", &id, "--commit", "HEAD", "-m", "first"]).ok();

    let again = repo.run(&["done", &id, "-m", "second"]).code(1);
    assert_eq!(
        again.stderr,
        format!(
            "error: task '{id}' is done already at {}\n\
             hint: to replace its evidence (the old stays in its history): git loop done {id} --amend\n",
            &first[..12]
        )
    );
    assert_eq!(again.stdout, "");
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(task["completion"]["message"], "first", "the refused done changed nothing");

    repo.git(&["commit", "-q", "--allow-empty", "-m", "the real fix"]);
    let second = repo.git(&["rev-parse", "HEAD"]);
    let amended = repo.run(&["done", &id, "--commit", "HEAD", "-m", "second", "--amend"]).ok();
    assert_eq!(
        amended.stdout,
        format!(
            "{id} done at {}\n  replaced: done at {} just now by Tess Ter <tess@example.com>: first\n  \
             (the old evidence stays in its history: git log -p refs/loop/tasks/{id})\n",
            &second[..12],
            &first[..12]
        )
    );
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(
        (task["completion"]["message"].as_str(), task["completion"]["commit"].as_str()),
        (Some("second"), Some(second.as_str()))
    );
    // The old evidence is one operation back in the record's history.
    let history = repo.git(&["log", "--format=%s", &format!("refs/loop/tasks/{id}")]);
    assert_eq!(history.lines().filter(|s| s.contains("done")).count(), 2, "two done operations:\n{history}");
    let before: Value =
        serde_json::from_str(&repo.git(&["show", &format!("refs/loop/tasks/{id}~1:task.json")])).expect("JSON");
    assert_eq!(
        (before["completion"]["message"].as_str(), before["completion"]["commit"].as_str()),
        (Some("first"), Some(first.as_str()))
    );
    // Each commit keeps its note; the journal says what was replaced.
    assert_eq!(completions(&note(&repo, &first)), [pair(&id, "first")]);
    assert_eq!(completions(&note(&repo, &second)), [pair(&id, "second")]);
    let events = repo.run(&["log", "--task", &id, "--json"]).ok().json();
    let done: Vec<&Value> =
        events["events"].as_array().expect("events").iter().filter(|e| e["kind"] == "task_done").collect();
    assert_eq!(done.len(), 2);
    assert_eq!(done[1]["data"]["replaced"]["commit"], first.as_str());
    assert_eq!(done[1]["data"]["replaced"]["message"], "first");

    let open = repo.add(&["not done yet"]);
    let nothing = repo.run(&["done", &open, "--amend"]).code(1);
    assert_eq!(
        nothing.stderr,
        format!(
            "error: task '{open}' is open, not done: there is no evidence to amend\n\
             hint: mark it done without --amend: git loop done {open}\n"
        )
    );
}

#[test]
fn tasks_completed_by_one_commit_each_keep_their_entry_and_a_version_1_note_is_kept_too() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let head = repo.git(&["rev-parse", "HEAD"]);
    // A note the previous release wrote (version 1: one completion) is read and kept.
    let v1 = r#"{"version":1,"task":"bd-old","title":"Old","state":"done","commit":"C","message":"by v1","at":"2026-02-01T00:00:00Z","by":"Old <o@e>"}"#;
    repo.git(&["notes", "--ref=loop", "add", "-m", v1, "HEAD"]);
    let a = repo.add(&["first of two"]);
    let b = repo.add(&["second of two"]);
    repo.run(&["done", &a, "--commit", "HEAD", "-m", "one"]).ok();
    repo.run(&["done", &b, "--commit", "HEAD", "-m", "two"]).ok();
    let mut expected = vec![pair("bd-old", "by v1"), pair(&a, "one"), pair(&b, "two")];
    expected.sort();
    assert_eq!(completions(&note(&repo, &head)), expected, "every completion on the commit is kept");
}

#[test]
fn two_clones_completing_tasks_by_one_commit_keep_both_entries_through_a_sync() {
    let env = TestEnv::new();
    let (remote, a, b) = env.two_clones();
    let one = a.add(&["one"]);
    let two = a.add(&["two"]);
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    let head = a.git(&["rev-parse", "HEAD"]);
    assert_eq!(b.git(&["rev-parse", "HEAD"]), head, "both clones start from the remote's commit");
    // Each clone completes one task by that commit, neither having seen the other's note.
    a.run(&["done", &one, "--commit", "HEAD", "-m", "by a"]).ok();
    b.run_with(&["done", &two, "--commit", "HEAD", "-m", "by b"], &[("GIT_LOOP_NOW", "2026-03-01T12:05:00Z")]).ok();
    for clone in [&a, &b, &a] {
        clone.run(&["sync"]).ok();
    }
    let mut expected = vec![pair(&one, "by a"), pair(&two, "by b")];
    expected.sort();
    assert_eq!(completions(&note(&a, &head)), expected, "clone a keeps both");
    assert_eq!(completions(&note(&b, &head)), expected, "clone b keeps both");
    let (tip_a, tip_b) = (a.git(&["rev-parse", "refs/notes/loop"]), b.git(&["rev-parse", "refs/notes/loop"]));
    assert_eq!(tip_a, tip_b, "both clones hold the same notes");
    assert_eq!(env.git(&remote, &["rev-parse", "refs/notes/loop"]), tip_a, "and so does the remote");
    assert_eq!(b.run(&["sync"]).ok().stdout, "", "a second sync has nothing left to do");
}

/// Eight people mark eight tasks done by one commit at the same moment: every completion is in
/// the note (each write is a compare-and-swap on the notes tip it read, and a loser reads again).
#[test]
fn eight_tasks_marked_done_by_one_commit_at_once_all_keep_their_entry() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let head = repo.git(&["rev-parse", "HEAD"]);
    let ids: Vec<String> = (0..8).map(|i| repo.add(&[&format!("task {i}")])).collect();
    let children: Vec<_> = ids
        .iter()
        .map(|id| {
            repo.command(&["done", id, "--commit", "HEAD", "-m", id])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn done")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let mut expected: Vec<(String, String)> = ids.iter().map(|id| pair(id, id)).collect();
    expected.sort();
    assert_eq!(completions(&note(&repo, &head)), expected, "no completion lost to a concurrent one");
}
