//! The server-side pre-receive hook against hostile pushes (reliability S6 and the hostile-push
//! rows): every record clients could not read or could never undo is refused, pushed with plain
//! `git push` to a bare remote with the installed hook, and the remote is left unchanged; what
//! git-loop writes — its merges and the previous release's records included — still passes; and
//! a server that knows who pushes binds claims to them, through smart HTTP with basic
//! authentication.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::harness::{HttpServer, Repo, Run, TestEnv};

/// A bare remote with the pre-receive hook installed, and a clone of it (by path) that uses it
/// for claims.
fn guarded(env: &TestEnv) -> (PathBuf, Repo<'_>) {
    let bare = env.remote("origin");
    env.install_receive_hook(&bare);
    let a = env.clone_of(bare.to_str().expect("utf-8"), "a");
    a.run(&["init", "--remote", "origin"]).ok();
    (bare, a)
}

/// Tasks with these ids, imported in `repo` and synced to its remote: a task's claim names a
/// task that exists.
fn tasks(env: &TestEnv, repo: &Repo<'_>, ids: &[&str]) {
    let lines: String =
        ids.iter().map(|id| format!("{}\n", serde_json::json!({ "id": id, "title": format!("task {id}") }))).collect();
    let path = env.path(&format!("tasks-{}.jsonl", ids.join("-")));
    std::fs::write(&path, lines).expect("write the import");
    repo.run(&["import", path.to_str().expect("utf-8")]).ok();
    repo.run(&["sync"]).ok();
}

/// Every ref of the remote with its value.
fn remote_refs(env: &TestEnv, bare: &Path) -> String {
    env.git(bare, &["for-each-ref", "--format=%(objectname) %(refname)"])
}

fn blob(repo: &Repo<'_>, text: &str) -> String {
    repo.git_with_stdin(&["hash-object", "-w", "--stdin"], text)
}

/// A commit of a tree holding `files` (name, content), with `parents` and `message`.
fn commit(repo: &Repo<'_>, files: &[(&str, &str)], parents: &[&str], message: &str) -> String {
    let entries: String =
        files.iter().map(|(name, text)| format!("100644 blob {}\t{name}\n", blob(repo, text))).collect();
    let tree = repo.git_with_stdin(&["mktree"], &entries);
    let mut args = vec!["commit-tree", tree.as_str()];
    for p in parents {
        args.extend(["-p", p]);
    }
    repo.git_with_stdin(&args, message)
}

/// A file of commit `rev`, as git shows it.
fn show(repo: &Repo<'_>, rev: &str, file: &str) -> String {
    repo.git(&["show", &format!("{rev}:{file}")])
}

/// `git push --force origin <args>`, as anyone can type it.
fn push(repo: &Repo<'_>, args: &[&str]) -> Run {
    Run::from(
        repo.env
            .seal(&mut Command::new("git"))
            .args(["push", "--force", "origin"])
            .args(args)
            .current_dir(&repo.dir)
            .output()
            .expect("git push"),
    )
}

/// Push `src` to `dst`: refused, the pusher told why on one line naming the ref (the line
/// starts with `said[0]` after the ref and contains every other part of `said`), and the remote
/// unchanged.
#[track_caller]
fn refused(bare: &Path, repo: &Repo<'_>, src: &str, dst: &str, said: &[&str]) {
    let before = remote_refs(repo.env, bare);
    let out = push(repo, &[&format!("{src}:{dst}")]);
    assert_ne!(out.code, 0, "{dst} is refused:\n{}", out.stderr);
    let prefix = format!("remote: git-loop: refusing '{dst}': {}", said[0]);
    let line = out.stderr.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| {
        panic!("the pusher is told why, naming the ref ({prefix}):\n{}", out.stderr);
    });
    assert!(line.contains("; hint: "), "the line ends with a hint: {line}");
    for part in &said[1..] {
        assert!(line.contains(part), "'{part}' in: {line}");
    }
    assert_eq!(remote_refs(repo.env, bare), before, "{dst}: the remote is unchanged");
}

/// Push `src` to `dst` and expect it accepted.
#[track_caller]
fn accepted(repo: &Repo<'_>, src: &str, dst: &str) {
    let out = push(repo, &[&format!("{src}:{dst}")]);
    assert_eq!(out.code, 0, "{dst} is accepted:\n{}", out.stderr);
}

/// A claim record for `key`, held by `holder` from `refreshed` until `expires` (a valid one of
/// the previous release: no `lamport`, no `user`), with `changes` applied.
fn claim_record(key: &str, holder: &str, refreshed: &str, expires: &str, changes: Value) -> String {
    let mut record = json!({
        "version": 1, "key": key, "holder": holder, "host": "h", "pid": 1, "boot_id": "b",
        "nonce": format!("n{key}{holder}{expires}"), "acquired_at": refreshed,
        "refreshed_at": refreshed, "expires_at": expires,
    });
    for (k, v) in changes.as_object().expect("an object") {
        if v.is_null() {
            record.as_object_mut().expect("an object").remove(k);
        } else {
            record[k] = v.clone();
        }
    }
    record.to_string()
}

const NOON: &str = "2026-03-01T12:00:00Z";
const ONE: &str = "2026-03-01T13:00:00Z";

/// The first row: a claim with an empty holder expiring 9999-12-31 was accepted, and no
/// client could ever release it. Every claim record a client could not read or release is
/// refused, with its reason on one line; the key stays free; a lease longer than
/// `loop.maxLease` is refused through git-loop too, which says why and keeps its state equal
/// to the remote's; a server whose policy cannot be read refuses everything.
#[test]
fn claims_no_client_could_read_or_release_are_refused() {
    let env = TestEnv::new();
    let (bare, a) = guarded(&env);
    tasks(&env, &a, &["t-empty", "t-escape", "t-2h", "t-long", "t-any"]);
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "t-empty",
            claim_record("node:t-empty", "", NOON, "9999-12-31T00:00:00Z", json!({})),
            vec!["the new record is not valid: its holder '' is empty"],
        ),
        (
            "t-blank",
            claim_record("node:t-blank", " \t", NOON, ONE, json!({})),
            vec!["the new record is not valid: its holder ' \\t' is empty"],
        ),
        (
            "t-escape",
            claim_record("node:t-escape", "bob\u{1b}[2J", NOON, ONE, json!({})),
            vec!["the new record is not valid: its holder 'bob\\u{1b}[2J' contains a control character"],
        ),
        (
            "t-forever",
            claim_record("node:t-forever", "alice", NOON, "9999-12-31T00:00:00Z", json!({})),
            vec!["the new record is not valid: its lease of ", "is longer than this server allows (loop.maxLease: 31 d)"],
        ),
        (
            "t-ahead",
            claim_record("node:t-ahead", "alice", "9999-12-30T00:00:00Z", "9999-12-31T00:00:00Z", json!({})),
            vec!["the new record is not valid: it expires at 9999-12-31 00:00:00 UTC, beyond the longest lease this server allows from now (loop.maxLease: 31 d; the server's clock reads 2026-03-01 12:00:00 UTC)"],
        ),
        (
            "t-past",
            claim_record("node:t-past", "alice", "2026-02-27T11:00:00Z", "2026-02-27T12:00:00Z", json!({})),
            vec!["the new record is not valid: it expired at 2026-02-27 12:00:00 UTC, before it was pushed (the server's clock reads 2026-03-01 12:00:00 UTC); hint: check the pushing machine's clock"],
        ),
        (
            "t-backwards",
            claim_record("node:t-backwards", "alice", ONE, NOON, json!({})),
            vec!["the new record is not valid: its lease is not positive"],
        ),
        (
            "t-key",
            claim_record("node:t-other", "alice", NOON, ONE, json!({})),
            vec!["the new record is not valid: it records key 'node:t-other'"],
        ),
        (
            "t-unversioned",
            claim_record("node:t-unversioned", "alice", NOON, ONE, json!({ "version": null })),
            vec!["the new record is not valid: ", "missing field `version`"],
        ),
        (
            "t-newer",
            claim_record("node:t-newer", "alice", NOON, ONE, json!({ "version": 3 })),
            vec!["the new record is not valid: ", "record version 3 was written by a newer git-loop"],
        ),
        (
            "t-far-year",
            claim_record("node:t-far-year", "alice", NOON, "+262142-12-31T00:00:00Z", json!({})),
            vec!["the new record is not valid: "],
        ),
    ];
    for (name, record, said) in &cases {
        let id = blob(&a, record);
        refused(&bare, &a, &id, &format!("refs/loop/claims/node/{name}"), said);
    }
    // Nothing got in: the keys are free for anyone.
    a.run(&["claim", "acquire", "node:t-empty", "--holder", "alice"]).ok();
    // git-loop itself refuses such a holder before it writes anything.
    let out = a.run(&["claim", "acquire", "node:t-escape", "--holder", "bob\u{1b}[2J"]).code(2);
    assert_eq!(
        out.stderr,
        "error: holder 'bob\\u{1b}[2J' contains a control character\nhint: pass a printable name, such as --holder agent-7\n"
    );

    // A shorter longest lease, set on the server, refuses a client's longer one: git-loop
    // says which ref, why (the hook's own words) and what to do, and mirrors the remote.
    env.git(&bare, &["config", "loop.maxLease", "2h"]);
    let three = blob(&a, &claim_record("node:t-3h", "alice", NOON, "2026-03-01T15:00:00Z", json!({})));
    refused(
        &bare,
        &a,
        &three,
        "refs/loop/claims/node/t-3h",
        &["the new record is not valid: its lease of 3 h is longer than this server allows (loop.maxLease: 2 h)"],
    );
    a.run(&["claim", "acquire", "node:t-2h", "--holder", "alice", "--ttl", "2h"]).ok();
    let out = a.run(&["claim", "acquire", "node:t-long", "--holder", "alice", "--ttl", "3h"]).code(1);
    assert_eq!(
        out.stderr,
        "error: remote 'origin' refused the update of 'refs/loop/claims/node/t-long': [remote rejected] (pre-receive hook declined): the new record is not valid: its lease of 3 h is longer than this server allows (loop.maxLease: 2 h)\n\
         hint: claim for at most 2 h ('--ttl'), or ask the server's administrator to raise loop.maxLease\n"
    );
    let claims = |dir: &Path| env.git(dir, &["for-each-ref", "--format=%(objectname) %(refname)", "refs/loop/claims"]);
    assert_eq!(claims(&a.dir), claims(&bare), "the clone's claims equal the remote's after the refusal");

    // A policy the server cannot read refuses every push, saying why.
    env.git(&bare, &["config", "loop.maxLease", "forever"]);
    let out = a.run(&["claim", "acquire", "node:t-any", "--holder", "alice"]).code(1);
    assert!(
        out.stderr.contains(
            "the remote says: error: loop.maxLease 'forever' in the server's configuration is not a duration"
        ),
        "{}",
        out.stderr
    );
}

/// The second row: a fast-forward whose history buries a commit with a garbage
/// `op.json` was accepted, and then every clone's sync failed for good. Every commit a push
/// adds to a task chain must be an operation or a merge its readers accept — not only the
/// tip — and a clone that syncs afterwards is unaffected.
#[test]
fn a_fast_forward_that_buries_a_garbage_operation_is_refused() {
    let env = TestEnv::new();
    let (bare, a) = guarded(&env);
    let id = a.add(&["Parse the input"]);
    let task_ref = format!("refs/loop/tasks/{id}");
    let tip = a.git(&["rev-parse", &task_ref]);
    assert_eq!(env.git(&bare, &["rev-parse", &task_ref]), tip, "published");
    let (op, task) = (show(&a, &tip, "op.json"), show(&a, &tip, "task.json"));
    let edit = op.replace("\"create\"", "\"unused\"");

    let garbage = commit(&a, &[("op.json", "{\"garbage\": true}"), ("task.json", &task)], &[&tip], "garbage\n");
    let buried = commit(&a, &[("op.json", &edit), ("task.json", &task)], &[&garbage], "looks fine\n");
    refused(&bare, &a, &buried, &task_ref, &[&format!("commit {garbage}: op.json: missing field `version`")]);

    let unversioned = op.replace("\"version\": 1,", "");
    let newer = edit.replace("\"version\": 1", "\"version\": 3");
    let elsewhere = task.replace(&id, "t-else");
    let cases = [
        (
            vec![("op.json", unversioned.as_str()), ("task.json", task.as_str())],
            "commit {c}: op.json: missing field `version`",
        ),
        (
            vec![("op.json", newer.as_str()), ("task.json", &task)],
            "commit {c}: op.json has version 3, written by a newer git-loop",
        ),
        (vec![("op.json", &edit), ("task.json", "not json")], "commit {c}: task.json: expected ident"),
        (vec![("op.json", &edit), ("task.json", &elsewhere)], "commit {c}: task.json holds task 't-else'"),
        (vec![("task.json", &task)], "commit {c}: it has no op.json (only a merge of two histories has none)"),
        (vec![("op.json", &edit)], "commit {c}: it has no task.json"),
    ];
    for (files, said) in cases {
        let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, &**t)).collect();
        let c = commit(&a, &files, &[&tip], "bad\n");
        refused(&bare, &a, &c, &task_ref, &[&said.replace("{c}", &c)]);
    }
    // A blob or a tree is not a chain at all.
    refused(&bare, &a, &blob(&a, "x"), &task_ref, &["", "is a blob, not a commit"]);

    // The remote still reads: another clone syncs, and the task is whole.
    let b = env.clone_of(bare.to_str().expect("utf-8"), "b");
    b.run(&["sync"]).ok();
    assert_eq!(b.run(&["show", &id, "--json"]).ok().json()["title"], "Parse the input");
}

/// The third row, anchors: a try anchor holds its try-number record or a commit, the
/// record is replaced only by the try's head (a number is taken once), and a done or kept
/// anchor holds what it anchors; anything else is refused.
#[test]
fn garbage_try_done_and_kept_anchors_are_refused() {
    let env = TestEnv::new();
    let (bare, a) = guarded(&env);
    let id = a.add(&["Anchor me"]);
    let anchor = format!("refs/loop/tries/{id}/1");
    let junk = blob(&a, "junk");
    refused(&bare, &a, &junk, &anchor, &["it is not a try-number record: expected value"]);
    // Through git-loop: sync says which ref, the hook's reason and its hint.
    a.git(&["update-ref", &anchor, &junk]);
    let out = a.run(&["sync"]).code(1);
    assert_eq!(
        out.stderr,
        format!(
            "error: remote 'origin' refused '{anchor}': [remote rejected] (pre-receive hook declined): it is not a try-number record: expected value at line 1 column 1\n\
             hint: push only what git-loop writes (records of a newer git-loop need a newer git-loop on this server too); local state is unchanged and complete\n"
        )
    );
    a.git(&["update-ref", "-d", &anchor]);
    let tree = a.git(&["rev-parse", "HEAD^{tree}"]);
    refused(
        &bare,
        &a,
        &tree,
        &anchor,
        &["it points to a tree; a try anchor holds its try-number record or the try's head"],
    );
    let record = |task: &str, n: u32, taker: &str| {
        blob(&a, &json!({ "task": task, "try": n, "taker": taker, "nonce": format!("{task}{n}{taker}") }).to_string())
    };
    refused(
        &bare,
        &a,
        &record(&id, 2, "w-1"),
        &anchor,
        &[&format!("its record takes try 2 of task '{id}', not try 1 of '{id}'")],
    );
    refused(&bare, &a, &record("t-else", 1, "w-1"), &anchor, &["its record takes try 1 of task 't-else'"]);
    refused(&bare, &a, &record(&id, 1, " "), &anchor, &["its try-number record names no taker"]);

    // What the walk does passes: take the number, replace the record by the try's head, move on.
    accepted(&a, &record(&id, 1, "w-1"), &anchor);
    refused(
        &bare,
        &a,
        &record(&id, 1, "w-2"),
        &anchor,
        &["a try-number record is replaced only by the try's head (a commit)"],
    );
    let head = a.git(&["rev-parse", "HEAD"]);
    accepted(&a, &head, &anchor);
    refused(&bare, &a, &junk, &anchor, &[&format!("{junk} is a blob, not a commit")]);

    let done = format!("refs/loop/done/{id}");
    refused(&bare, &a, &junk, &done, &["it points to a blob; a done anchor holds the commit that completed the task"]);
    let kept = format!("refs/loop/kept/abcd2345-x9k2/tries/{id}/1");
    refused(&bare, &a, &junk, &kept, &["it is not a try-number record"]);
    accepted(&a, &head, &done);
    accepted(&a, &record(&id, 1, "w-1"), &kept);
}

/// The last row: a new task ref that is not a task was accepted. A new chain of any
/// kind is read whole: a task's starts with the task's creation, under its own id; a journal
/// chain's commits hold events; notes are completion notes; a mission's commits hold its record.
#[test]
fn a_new_chain_that_its_readers_could_not_read_is_refused() {
    let env = TestEnv::new();
    let (bare, a) = guarded(&env);
    let id = a.add(&["Model task"]);
    let tip = a.git(&["rev-parse", &format!("refs/loop/tasks/{id}")]);
    let (op, task) = (show(&a, &tip, "op.json"), show(&a, &tip, "task.json"));
    let main = a.git(&["rev-parse", "HEAD"]);

    let new = "refs/loop/tasks/t-new";
    refused(&bare, &a, &main, new, &[&format!("commit {main}: it has no task.json")]);
    let other = commit(&a, &[("op.json", &op), ("task.json", &task)], &[], "copied\n");
    refused(&bare, &a, &other, new, &[&format!("commit {other}: task.json holds task '{id}'")]);
    let renamed = task.replace(&id, "t-new");
    let edit =
        commit(&a, &[("op.json", &op.replace("\"create\"", "\"unused\"")), ("task.json", &renamed)], &[], "edit\n");
    refused(
        &bare,
        &a,
        &edit,
        new,
        &[&format!("commit {edit}: it starts the chain but does not create the task (op.json has no 'create')")],
    );
    let untitled = renamed.replace("\"title\": \"Model task\"", "\"title\": \" \"");
    let blank = commit(&a, &[("op.json", &op), ("task.json", &untitled)], &[], "create\n");
    refused(&bare, &a, &blank, new, &[&format!("commit {blank}: it creates a task without a title")]);
    let no_op = commit(&a, &[("task.json", &renamed)], &[], "create\n");
    refused(
        &bare,
        &a,
        &no_op,
        new,
        &[&format!("commit {no_op}: it starts the chain but does not create the task: it has no op.json")],
    );
    let created = commit(&a, &[("op.json", &op), ("task.json", &renamed)], &[], "t-new: create\n");
    accepted(&a, &created, new);

    let journal = "refs/loop/journal/w-hostile1";
    let hello = commit(&a, &[], &[], "hello\n");
    refused(&bare, &a, &hello, journal, &[&format!("commit {hello}: it holds no event")]);
    let event = |version: u32| {
        json!({ "version": version, "kind": "note", "at": NOON, "writer": "w-hostile1", "seq": 1, "by": "x" })
            .to_string()
    };
    let newer = commit(&a, &[], &[], &format!("note\n\n{}\n", event(2)));
    refused(
        &bare,
        &a,
        &newer,
        journal,
        &[&format!("commit {newer}: its event has version 2, written by a newer git-loop")],
    );
    let broken = commit(&a, &[], &[], "note\n\n{\"kind\": \"note\"}\n");
    refused(
        &bare,
        &a,
        &broken,
        journal,
        &[&format!("commit {broken}: its event is not valid: missing field `version`")],
    );

    let notes = commit(&a, &[(main.as_str(), "{\"not\": \"a note\"}")], &[], "notes\n");
    refused(
        &bare,
        &a,
        &notes,
        "refs/notes/loop",
        &[&format!("commit {notes}: the note on {main}: it is not a completion note")],
    );

    let mission = commit(&a, &[("mission.json", "{\"version\": 1}")], &[], "m\n");
    refused(&bare, &a, &mission, "refs/loop/missions/m1", &[&format!("commit {mission}: mission.json: missing field")]);
}

/// Names: below the loop's namespaces only the loop's own names (docs/storage.md, "The namespace"), and
/// nothing that would block them.
#[test]
fn refs_that_are_not_loop_names_are_refused() {
    let env = TestEnv::new();
    let (bare, a) = guarded(&env);
    let main = a.git(&["rev-parse", "HEAD"]);
    for (name, said) in [
        ("refs/loop/tasks/T-1", "not a name the loop uses: task id 'T-1' is not valid: it contains 'T'"),
        ("refs/loop/tasks/a/b", "not a name the loop uses: task id 'a/b' is not valid"),
        ("refs/loop/claims/node", "not a name the loop uses: not a claim ref"),
        ("refs/loop/tries/t-1/01", "not a name the loop uses: '01' is not a try number"),
        ("refs/loop/secrets/x", "not a name the loop uses: 'secrets' is not one of the loop's refs"),
        ("refs/heads/loop/t-1/x", "not a name the loop uses: task id 't-1/x' is not valid"),
        ("refs/heads/loop-try/t-1/x", "not a name the loop uses: 'x' is not a try number"),
        ("refs/heads/loop", "not a name the loop uses: a ref of that name would block the loop's own refs below it"),
        ("refs/loop", "not a name the loop uses: a ref of that name would block the loop's own refs below it"),
    ] {
        refused(&bare, &a, &main, name, &[said]);
    }
    accepted(&a, &main, "refs/heads/anything-else");
}

/// What git-loop writes passes the hook: claims and tombstones, a whole walk and its sync,
/// edits from two clones (a task merge commit holding only `task.json`), two copies of one
/// journal chain (a merge commit with no event), notes from two clones (a notes merge commit),
/// a diverged branch kept by sync, and the previous release's records (no `lamport`).
#[test]
fn what_git_loop_writes_passes_the_hook_merges_and_the_previous_release_included() {
    let env = TestEnv::new();
    let (bare, a) = guarded(&env);
    let b = env.clone_of(bare.to_str().expect("utf-8"), "b");
    b.run(&["init", "--remote", "origin"]).ok();
    tasks(&env, &a, &["t-x"]);
    b.run(&["sync"]).ok();

    // Claims, refreshed and released.
    a.run(&["claim", "acquire", "node:t-x", "--holder", "alice", "--ttl", "30d"]).ok();
    a.run(&["claim", "acquire", "node:t-x", "--holder", "alice"]).ok();
    a.run(&["claim", "release", "node:t-x", "--holder", "alice"]).ok();

    // A walk and its sync.
    let walked = a.add(&["Walk me"]);
    let cmd = env.agent("walk", "echo done > result.txt\ngit loop finish done --message walked");
    a.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "60s"]).ok();
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    assert_eq!(b.run(&["show", &walked, "--json"]).ok().json()["state"], "done");

    // Two clones edit one task: the second publishes a merge commit.
    let id = a.add(&["Edit me"]);
    b.run(&["sync"]).ok();
    a.run(&["edit", &id, "--label", "from-a"]).ok();
    b.run(&["edit", &id, "--label", "from-b"]).ok();
    let merges = |r: &str| env.git(&bare, &["rev-list", "--merges", "--count", r]);
    assert_eq!(merges(&format!("refs/loop/tasks/{id}")), "1", "a task merge commit reached the remote");

    // Two copies of one journal chain (one session's writer in two clones) join in a merge.
    let session = [("GIT_LOOP_SESSION", "s-twocopy1")];
    a.run_with(&["journal", "append", "note", "--data", "{\"from\":\"a\"}"], &session).ok();
    b.run_with(&["journal", "append", "note", "--data", "{\"from\":\"b\"}"], &session).ok();
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    assert_eq!(merges("refs/loop/journal/s-twocopy1"), "1", "a journal merge commit reached the remote");

    // Notes from two clones join in a notes merge.
    let (x, y) = (a.add(&["Done in a"]), a.add(&["Done in b"]));
    b.run(&["sync"]).ok();
    for (repo, task) in [(&a, &x), (&b, &y)] {
        repo.git(&["commit", "-q", "--allow-empty", "-m", task]);
        repo.run(&["done", task, "--commit", "HEAD", "-m", "shipped"]).ok();
    }
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    assert_eq!(merges("refs/notes/loop"), "1", "a notes merge commit reached the remote");

    // A diverged task branch: sync keeps ours under loop-kept/ and pushes it.
    let branch = format!("refs/heads/loop/{id}");
    for (repo, word) in [(&a, "alpha"), (&b, "beta")] {
        repo.git(&["commit", "-q", "--allow-empty", "-m", word]);
        repo.git(&["update-ref", &branch, "HEAD"]);
    }
    a.run(&["sync"]).ok();
    assert!(b.run(&["sync"]).ok().stdout.contains("kept both"));
    assert_ne!(env.git(&bare, &["for-each-ref", "refs/heads/loop-kept/"]), "", "the kept branch reached the remote");

    // The previous release's records: a claim and an event without `lamport`.
    let old_claim = blob(&a, &claim_record("node:t-old", "alice", NOON, ONE, json!({})));
    accepted(&a, &old_claim, "refs/loop/claims/node/t-old");
    let event =
        json!({ "version": 1, "kind": "note", "at": NOON, "writer": "c-oldrel00-0", "seq": 1, "by": "x", "data": {} });
    let old_event = commit(&a, &[], &[], &format!("note\n\n{event}\n"));
    accepted(&a, &old_event, "refs/loop/journal/c-oldrel00-0");
    let old_tombstone = blob(&a, &claim_record("node:t-old", "alice", NOON, NOON, json!({ "released_at": NOON })));
    accepted(&a, &old_tombstone, "refs/loop/claims/node/t-old");
    b.run(&["sync"]).ok();
    assert_eq!(b.run(&["sync"]).ok().stderr.trim(), "already in sync with 'origin'");
}

/// Issue 31: through a remote with the hook but without `loop.bindHolders`, an agent released
/// another clone's live claim by pushing a tombstone in its holder's name, and the task was
/// worked twice. A claim record carries a capability now: a refresh, release or rewrite of a
/// live claim in its holder's name must continue its chain, which only the clone that took it
/// can make. Taking over an expired claim needs none.
#[test]
fn a_live_claim_is_refreshed_released_or_rewritten_in_its_holders_name_only_with_its_capability() {
    let env = TestEnv::new();
    let (bare, a) = guarded(&env);
    let b = env.clone_of(bare.to_str().expect("utf-8"), "b");
    tasks(&env, &a, &["t-cap"]);
    a.run(&["claim", "acquire", "node:t-cap", "--holder", "w-alice", "--ttl", "1h"]).ok();
    let name = "refs/loop/claims/node/t-cap";
    b.git(&["fetch", "-q", "origin", &format!("+{name}:{name}")]);
    let live: Value = serde_json::from_str(&b.git(&["cat-file", "-p", name])).expect("the record is JSON");
    assert_eq!(live["version"], 2);
    assert_eq!(live["capability"]["round"], 0, "{live}");
    let forge = |changes: Value| {
        let mut record = live.clone();
        for (k, v) in changes.as_object().expect("an object") {
            if v.is_null() {
                record.as_object_mut().expect("an object").remove(k);
            } else {
                record[k] = v.clone();
            }
        }
        blob(&b, &record.to_string())
    };
    let said =
        ["'node:t-cap' is held by 'w-alice' until 2026-03-01 13:00:00 UTC; this change in its name is refused: "];
    // What someone who knows only the record can write: a tombstone without a capability, one
    // that copies the live token, one a round on with a token of its own; a version 1 record (no
    // capability at all), a refresh that shortens the lease to a second (to take it over then).
    let copied = live["capability"].clone();
    let mut next_round = copied.clone();
    next_round["round"] = json!(1);
    next_round["token"] = json!("0".repeat(40));
    for forged in [
        forge(json!({ "released_at": NOON, "nonce": "f1", "capability": null })),
        forge(json!({ "released_at": NOON, "nonce": "f2", "capability": copied })),
        forge(json!({ "released_at": NOON, "nonce": "f3", "capability": next_round })),
        forge(json!({ "version": 1, "nonce": "f4", "capability": null })),
        forge(json!({ "nonce": "f5", "expires_at": "2026-03-01T12:00:01Z", "capability": null })),
    ] {
        refused(&bare, &b, &forged, name, &said);
    }
    // The holder's own clone refreshes and releases it.
    a.run(&["claim", "acquire", "node:t-cap", "--holder", "w-alice"]).ok();
    let out = a.run(&["claim", "release", "node:t-cap", "--holder", "w-alice"]).ok();
    assert!(out.stdout.contains("released") || out.stderr.is_empty(), "{}{}", out.stdout, out.stderr);
    b.git(&["fetch", "-q", "origin", &format!("+{name}:{name}")]);
    let tombstone: Value = serde_json::from_str(&b.git(&["cat-file", "-p", name])).expect("JSON");
    assert!(tombstone["released_at"].is_string() && tombstone["capability"]["round"] == 2, "{tombstone}");
    // The same name in another clone cannot refresh what it did not take: said on one line.
    a.run(&["claim", "acquire", "node:t-cap", "--holder", "w-alice", "--ttl", "1h"]).ok();
    b.run(&["init", "--remote", "origin"]).ok();
    let other = b.run(&["claim", "acquire", "node:t-cap", "--holder", "w-alice"]).code(1);
    assert_eq!(
        other.stderr,
        "error: claim 'node:t-cap' is held by 'w-alice' in another clone: only the clone that took it can refresh or release it\nhint: release it there, or once it is stale here take it over ('git loop claim release node:t-cap --force')\n"
    );
    // An expired claim (by the server's clock) may be taken over, capability or not.
    let locked = json!({ "version": 2, "capability": { "chain": "c1", "round": 0, "token": "1".repeat(40) } });
    let early = ("2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z");
    let gone = blob(&b, &claim_record("node:t-late", "w-bob", early.0, early.1, locked));
    accepted(&b, &gone, "refs/loop/claims/node/t-late");
    let taken = blob(&b, &claim_record("node:t-late", "mallory", NOON, ONE, json!({})));
    accepted(&b, &taken, "refs/loop/claims/node/t-late");
}

// ----- binding claims to the users who push them, through smart HTTP -----

/// A clone of `bare` served by `server`, pushing as `user`, that says so in its records.
fn clone_as<'e>(env: &'e TestEnv, server: &HttpServer, bare: &Path, user: &str, name: &str) -> Repo<'e> {
    let repo = env.clone_of(&server.url_as(bare, user), name);
    repo.run(&["init", "--remote", "origin"]).ok();
    repo.git(&["config", "loop.user", user]);
    repo
}

/// With `loop.bindHolders`, a real web server on 127.0.0.1 with basic authentication: bob
/// takes, refreshes and releases his claim; alice cannot take, release, refresh or rewrite it
/// — not by holder name, not by claiming to be bob, not with a clock two hours ahead — nor make
/// one for bob; a walk run by alice binds its `w-…` claims to her; a push the server cannot
/// name a pusher for is refused; and an unbound server still lets anyone claim.
#[test]
fn a_server_that_knows_who_pushes_binds_claims_to_them() {
    let env = TestEnv::new();
    let Some(server) = HttpServer::start_with_users(&env, &[("alice", "a-secret"), ("bob", "b-secret")]) else {
        return;
    };
    let bare = env.remote("bound");
    env.install_receive_hook(&bare);
    env.git(&bare, &["config", "loop.bindHolders", "true"]);
    let alice = clone_as(&env, &server, &bare, "alice", "alice");
    let bob = clone_as(&env, &server, &bare, "bob", "bob");
    let claim = "refs/loop/claims/node/t-1";
    tasks(&env, &bob, &["t-1"]);

    bob.run(&["claim", "acquire", "node:t-1", "--holder", "bob", "--ttl", "1h"]).ok();
    bob.run(&["claim", "acquire", "node:t-1", "--holder", "bob"]).ok();
    alice.run(&["sync"]).ok();
    let before = remote_refs(&env, &bare);
    let refusal = |out: Run, said: &str| {
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(out.stderr.contains(said), "says why ({said}):\n{}", out.stderr);
        assert_eq!(remote_refs(&env, &bare), before, "the remote is unchanged");
    };
    let prefix = format!(
        "error: remote 'origin' refused the update of '{claim}': [remote rejected] (pre-receive hook declined): "
    );
    // Alice's own client will not refresh it (it holds no capability for it: the remote is
    // not even asked), and the server refuses her release of it, even when she says she is bob.
    refusal(
        alice.run(&["claim", "acquire", "node:t-1", "--holder", "bob"]),
        "error: claim 'node:t-1' is held by 'bob' in another clone: only the clone that took it can refresh or release it",
    );
    let uncapable = format!("{prefix}'node:t-1' is held by 'bob' until 2026-03-01 13:00:00 UTC; this change in its name is refused: its capability does not continue the live record's");
    refusal(alice.run(&["claim", "release", "node:t-1", "--holder", "bob"]), &uncapable);
    alice.git(&["config", "loop.user", "bob"]);
    refusal(
        alice.run(&["claim", "release", "node:t-1", "--holder", "bob"]),
        &format!("{prefix}the record is user 'bob''s but user 'alice' pushed it (loop.bindHolders: a claim is changed only by its own user)"),
    );
    // Nor does the server take a release she makes by hand, in bob's name or in her own.
    let released = |user: &str| {
        let changes = json!({ "released_at": NOON, "expires_at": NOON, "user": user, "lamport": 99 });
        blob(&alice, &claim_record("node:t-1", "bob", NOON, NOON, changes))
    };
    refused(
        &bare,
        &alice,
        &released("bob"),
        claim,
        &["the record is user 'bob''s but user 'alice' pushed it (loop.bindHolders: a claim is changed only by its own user)"],
    );
    refused(
        &bare,
        &alice,
        &released("alice"),
        claim,
        &["'node:t-1' is held by 'bob' until", "it carries no capability"],
    );
    alice.git(&["config", "loop.user", "alice"]);
    let skewed = [("GIT_LOOP_NOW", "2026-03-01T14:00:00Z")];
    alice.run(&["claim", "acquire", "node:t-1", "--holder", "alice"]).code(1);
    refusal(
        alice.run_with(&["claim", "acquire", "node:t-1", "--holder", "alice"], &skewed),
        &format!("{prefix}'node:t-1' is held by 'bob' until 2026-03-01 13:00:00 UTC; 'alice' may take it over only once it expires"),
    );
    // A record made by hand for bob, on a free key, by alice.
    let forged = blob(&alice, &claim_record("node:t-2", "bob", NOON, ONE, json!({})));
    let out = push(&alice, &[&format!("{forged}:refs/loop/claims/node/t-2")]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("remote: git-loop: refusing 'refs/loop/claims/node/t-2': the record names no user and its holder 'bob' is not user 'alice''s"),
        "{}",
        out.stderr
    );
    assert_eq!(remote_refs(&env, &bare), before, "the remote is unchanged");

    // Shared settings: alice's record names her and passes; one naming bob, pushed by her,
    // does not; bob's clone shows who shared them.
    alice.git(&["config", "loop.checks", "true"]);
    alice.run(&["config", "--share"]).ok();
    bob.run(&["sync"]).ok();
    let shown = bob.run(&["config"]).ok();
    assert!(
        shown.stdout.contains("shared by Tess Ter <tess@example.com> (user 'alice': verified where the remote binds pushers to users, loop.bindHolders)"),
        "{}",
        shown.stdout
    );
    alice.git(&["config", "loop.user", "bob"]);
    alice.git(&["config", "loop.checks", "test -f ok"]);
    let settings_before = remote_refs(&env, &bare);
    let out = alice.run(&["config", "--share"]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("the settings record is user 'bob''s but user 'alice' pushed it (loop.bindHolders)"),
        "{}",
        out.stderr
    );
    assert_eq!(remote_refs(&env, &bare), settings_before, "the remote is unchanged");
    alice.git(&["config", "loop.user", "alice"]);
    alice.git(&["config", "loop.checks", "true"]);
    alice.git(&["update-ref", "refs/loop/settings", "refs/loop-remotes/origin/loop/settings"]);

    // Bob releases; then alice may claim it, as herself.
    bob.run(&["claim", "release", "node:t-1", "--holder", "bob"]).ok();
    alice.run(&["claim", "acquire", "node:t-1", "--holder", "alice"]).ok();
    alice.run(&["claim", "release", "node:t-1", "--holder", "alice"]).ok();

    // A walk run by alice: its claims are held by its w-… key, recorded as alice's.
    let id = alice.add(&["Alice's walk"]);
    let cmd = env.agent("walk", "echo done > result.txt\ngit loop finish done --message walked");
    alice.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "60s"]).ok();
    bob.run(&["sync"]).ok();
    assert_eq!(bob.run(&["show", &id, "--json"]).ok().json()["state"], "done");
    let record: Value =
        serde_json::from_str(&env.git(&bare, &["cat-file", "-p", &format!("refs/loop/claims/node/{id}")]))
            .expect("a claim record");
    assert!(record["holder"].as_str().is_some_and(|h| h.starts_with("w-")), "{record}");
    assert_eq!(record["user"], "alice", "{record}");

    // A push the server names no pusher for (here: by path, without the web server).
    let local = env.clone_of(bare.to_str().expect("utf-8"), "local");
    let own = blob(&local, &claim_record("node:t-3", "carol", NOON, ONE, json!({})));
    let out = push(&local, &[&format!("{own}:refs/loop/claims/node/t-3")]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("but was not told who pushes; hint: push through a server that authenticates you (it passes GL_USER or REMOTE_USER to the hook)"), "{}", out.stderr);

    // An unbound server lets anyone claim, in any name.
    let open = env.remote("open");
    env.install_receive_hook(&open);
    let anyone = env.clone_of(&server.url_as(&open, "alice"), "anyone");
    anyone.run(&["init", "--remote", "origin"]).ok();
    tasks(&env, &anyone, &["t-1"]);
    anyone.run(&["claim", "acquire", "node:t-1", "--holder", "bob"]).ok();
}
