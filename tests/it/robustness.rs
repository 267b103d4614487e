//! Bad state and bad input: corrupt records (D2), stale locks (L1, L2), reftable and bare
//! repositories (L5), and text that tries to run code (S2).

use std::time::{Duration, SystemTime};

use crate::harness::TestEnv;

/// D2: garbage, empty and missing-object task and claim refs are reported by name with exit
/// 3 for that record; every other task keeps working.
#[test]
fn d2_corrupt_records_are_named_and_healthy_tasks_are_unaffected() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let good = repo.add(&["healthy"]);
    let refs = repo.dir.join(".git/refs/loop");
    std::fs::create_dir_all(refs.join("claims/node")).expect("mkdir");
    std::fs::create_dir_all(refs.join("claims/lock")).expect("mkdir");
    let junk_blob = repo.git(&["hash-object", "-w", "--stdin", "--no-filters", "README"]);
    let missing = "1234567890123456789012345678901234567890";
    for (name, content) in
        [("t-garbage", "garbage\n"), ("t-empty", ""), ("t-missing", missing), ("t-blob", junk_blob.as_str())]
    {
        std::fs::write(refs.join("tasks").join(name), format!("{content}\n").trim_start()).expect("write ref");
    }
    // Corrupt claims: on tasks' keys (which the board reads), and on keys of another kind
    // (which `claim acquire` reads without a task to resolve).
    for kind in ["node", "lock"] {
        std::fs::write(refs.join(format!("claims/{kind}/c-garbage")), "garbage\n").expect("write ref");
        std::fs::write(refs.join(format!("claims/{kind}/c-blob")), format!("{junk_blob}\n")).expect("write ref");
    }

    let list = repo.run(&["list"]).ok();
    assert_eq!(
        list.stdout_with(&[(&good, "<G>")]),
        "ID          PRI  STATE  TITLE\n<G>  p2   ready  healthy\n",
        "healthy tasks are listed"
    );
    for name in ["t-garbage", "t-empty", "t-missing", "t-blob"] {
        assert!(
            list.stderr.contains(&format!("task record 'refs/loop/tasks/{name}' is corrupt")),
            "{name} named in:\n{}",
            list.stderr
        );
    }
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["id"], good.as_str(), "next still works");
    let listed = repo.run(&["list", "--json"]).ok().json();
    assert_eq!(listed["corrupt"].as_array().map(Vec::len), Some(6), "four tasks and two claims");
    for name in ["t-garbage", "t-empty", "t-missing", "t-blob"] {
        let shown = repo.run(&["show", name]).code(3);
        assert!(
            shown.stderr.starts_with(&format!("error: task record 'refs/loop/tasks/{name}' is corrupt")),
            "{}",
            shown.stderr
        );
        assert!(shown.stderr.contains("hint: "), "a corrupt record comes with a repair hint");
    }
    let claim = repo.run(&["claim", "acquire", "lock:c-blob", "--holder", "h"]).code(3);
    assert_eq!(
        claim.stderr.lines().last(),
        Some("hint: remove it with 'git loop claim release lock:c-blob --force'"),
        "{}",
        claim.stderr
    );
    repo.run(&["claim", "acquire", "lock:c-garbage", "--holder", "h"]).code(3);
    let removed = repo.run(&["claim", "release", "lock:c-garbage", "--force"]).ok();
    assert_eq!(removed.stdout, "removed the corrupt record of lock:c-garbage\n");
    repo.run(&["claim", "release", "lock:c-blob", "--force"]).ok();
    repo.run(&["claim", "acquire", "lock:c-blob", "--holder", "h"]).ok();
    // A title past its limit is refused, with the limit named (issue 16: one record must not
    // make every clone slow); one at the limit is stored.
    let oversized = "x".repeat(100_000);
    let big = repo.run(&["add", &oversized]).code(2);
    assert!(big.stderr.starts_with("error: the title is 100000 bytes, over the limit of 1 KiB\n"), "{}", big.stderr);
    assert!(repo.add(&[&oversized[..1024]]).starts_with("t-"), "a title at the limit is stored");
}

/// D2: a task ref that is a symbolic ref (`ref: refs/heads/main`) is a corrupt record for
/// every command that acts on it (exit 3, the ref named, no panic, never "does not exist"),
/// with a hint that removes the symbolic ref and not the branch it points to; the rest of
/// the backlog works on.
#[test]
fn d2_a_symbolic_task_ref_is_a_corrupt_record_and_the_backlog_works_on() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let good = repo.add(&["healthy"]);
    let main = repo.git(&["rev-parse", "refs/heads/main"]);
    std::fs::write(repo.dir.join(".git/refs/loop/tasks/t-sym"), "ref: refs/heads/main\n").expect("write ref");
    let expected = "error: task record 'refs/loop/tasks/t-sym' is corrupt: it is a symbolic ref (to 'refs/heads/main'), not a commit\n\
                    hint: delete the symbolic ref itself with 'git update-ref --no-deref -d refs/loop/tasks/t-sym'\n";
    for args in
        [&["show", "t-sym"][..], &["show", "t-sym", "--json"], &["edit", "t-sym", "--title", "x"], &["done", "t-sym"]]
    {
        let out = repo.run(args).code(3);
        assert_eq!(out.stderr, expected, "git loop {args:?}");
    }
    let list = repo.run(&["list"]).ok();
    assert_eq!(
        list.stdout_with(&[(&good, "<G>")]),
        "ID          PRI  STATE  TITLE\n<G>  p2   ready  healthy\n",
        "healthy tasks are listed"
    );
    assert!(
        list.stderr.contains("task record 'refs/loop/tasks/t-sym' is corrupt: it is a symbolic ref"),
        "{}",
        list.stderr
    );
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["id"], good.as_str(), "next hands out the healthy task");
    repo.git(&["update-ref", "--no-deref", "-d", "refs/loop/tasks/t-sym"]);
    assert_eq!(repo.git(&["rev-parse", "refs/heads/main"]), main, "following the hint leaves the branch alone");
    assert_eq!(repo.run(&["list"]).ok().stderr, "", "nothing corrupt left");
}

/// D2: `refs/notes/loop` pointing at a blob is a corrupt record (exit 3, named, with the way
/// back), not a failure to write a note.
#[test]
fn d2_a_notes_ref_pointing_at_a_blob_is_a_corrupt_record() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["land me"]);
    let other = repo.add(&["other"]);
    let blob = repo.git(&["hash-object", "-w", "README"]);
    repo.git(&["update-ref", "refs/notes/loop", &blob]);
    let out = repo.run(&["done", &id, "--commit", "HEAD"]).code(3);
    assert_eq!(
        out.stderr,
        format!(
            "error: notes ref 'refs/notes/loop' is corrupt: it points to a blob ({blob}), not a commit\n\
             hint: find the notes commit it held with 'git reflog refs/notes/loop' and point it back with 'git update-ref refs/notes/loop <commit>'\n"
        )
    );
    repo.run(&["done", &other]).ok();
    assert_eq!(
        repo.run(&["show", &other, "--json"]).ok().json()["state"],
        "done",
        "tasks without a note are unaffected"
    );
}

/// D2, kept across processes: a `packed-refs` found whole is not read again by the next
/// process while it is the same file, but the same file changed in place, its size kept, is.
#[test]
fn d2_a_packed_refs_damaged_in_place_after_it_was_found_whole_is_read_again() {
    use std::io::{Seek as _, SeekFrom, Write as _};
    let env = TestEnv::new();
    let repo = env.repo("r");
    let a = repo.add(&["first"]);
    repo.add(&["second"]);
    repo.git(&["pack-refs", "--all"]);
    std::thread::sleep(Duration::from_millis(1_100));
    repo.run(&["list"]).ok();
    let whole = repo.dir.join(".git/loop/packed-refs-whole");
    assert!(whole.exists(), "the verdict is kept once the file has settled");
    // Spoil the first task's line where its object id starts: same size, same inode.
    let packed = repo.dir.join(".git/packed-refs");
    let text = std::fs::read_to_string(&packed).expect("packed-refs");
    let at = text.find(&format!(" refs/loop/tasks/{a}\n")).expect("the task's line") - 40;
    let number = text[..at].matches('\n').count() + 1;
    let mut file = std::fs::OpenOptions::new().write(true).open(&packed).expect("open");
    file.seek(SeekFrom::Start(at as u64)).expect("seek");
    file.write_all(b"zz").expect("write in place");
    drop(file);
    let list = repo.run(&["list"]);
    assert!(
        list.stderr.contains(&format!("has a bad line {number}")),
        "the damage is found, not vouched for by the old verdict:\n{}",
        list.stderr
    );
}

/// D2: a line of packed-refs that cannot be parsed is reported as what it is — packed-refs
/// and its line number — wherever it falls, and every healthy task and claim keeps reading and
/// writing as itself (gix's lookups fail when their binary search lands on the line).
#[test]
fn d2_a_bad_line_in_packed_refs_is_named_and_healthy_refs_stay_healthy() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let a = repo.add(&["first"]);
    let b = repo.add(&["second"]);
    repo.run(&["claim", "acquire", &format!("node:{a}"), "--holder", "h"]).ok();
    repo.git(&["pack-refs", "--all"]);
    let packed = repo.dir.join(".git/packed-refs");
    let whole = std::fs::read_to_string(&packed).expect("packed-refs");
    let lines: Vec<&str> = whole.lines().collect();
    let ids = [(a.as_str(), "<A>"), (b.as_str(), "<B>")];
    for at in 1..=lines.len() {
        let mut damaged: Vec<&str> = lines.clone();
        damaged.insert(at, "this is garbage");
        std::fs::write(&packed, format!("{}\n", damaged.join("\n"))).expect("write packed-refs");
        let _ = std::fs::remove_file(repo.dir.join(".git/loop/index-v6"));
        let named = format!("'{}' has a bad line {}: \"this is garbage\"", packed.display(), at + 1);
        let list = repo.run(&["list"]).ok();
        // `edit --label` below gives <B> labels as the loop goes: list shows what it has.
        let labels: Vec<String> = repo.run(&["show", &b, "--json"]).ok().json()["labels"]
            .as_array()
            .map(|l| l.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let labels = if labels.is_empty() { String::new() } else { format!("  [{}]", labels.join(", ")) };
        assert_eq!(
            list.stdout_with(&ids),
            format!(
                "ID          PRI  STATE    TITLE\n<B>  p2   ready    second{labels}\n<A>  p2   claimed  first  (h)\n"
            ),
            "line {}: every task listed as itself",
            at + 1
        );
        assert!(
            list.stderr.is_empty() || list.stderr == format!("warning: skipped: {named}\n"),
            "line {}: only packed-refs is blamed:\n{}",
            at + 1,
            list.stderr
        );
        for id in [&a, &b] {
            assert_eq!(repo.run(&["show", id, "--json"]).ok().json()["id"], id.as_str(), "line {}", at + 1);
        }
        let claims = repo.run(&["claim", "list", "--json"]).ok().json();
        assert_eq!(claims["claims"][0]["key"], format!("node:{a}"), "line {}: the claim reads", at + 1);
        // Writes go through gix, which looks the ref up in packed-refs first: one that lands on
        // the bad line is refused as what it is (git itself refuses every command meanwhile).
        let refused = format!(
            "error: {named}\nhint: git reads no ref until it is gone: save a copy and delete the line ('cp {0} {0}.bak && sed -i {1}d {0}')\n",
            packed.display(),
            at + 1
        );
        for args in [
            vec!["edit".to_owned(), b.clone(), "--label".into(), format!("l{at}")],
            vec!["claim".into(), "acquire".into(), format!("node:{b}"), "--holder".into(), "h".into()],
        ] {
            let out = repo.run(&args);
            assert!(
                out.code == 0 || (out.code == 3 && out.stderr == refused),
                "line {}: git loop {args:?} works or names packed-refs:\n{out:?}",
                at + 1
            );
        }
        std::fs::write(&packed, &whole).expect("restore packed-refs");
        repo.run(&["edit", &b, "--label", &format!("l{at}")]).ok();
        repo.run(&["claim", "release", &format!("node:{b}"), "--holder", "h"]).ok();
    }
}

/// D2: an object missing in the middle of a task's history is found by the commands that act
/// on the task (exit 3 naming the ref and the object), and by `list` whenever the task's tip
/// is new to it; the rest of the backlog works on.
#[test]
fn d2_a_missing_object_in_a_tasks_history_is_found() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let good = repo.add(&["healthy"]);
    let id = repo.add(&["v1"]);
    repo.run(&["list"]).ok();
    repo.run(&["edit", &id, "--title", "v2"]).ok();
    repo.run(&["edit", &id, "--title", "v3"]).ok();
    let name = format!("refs/loop/tasks/{id}");
    let tip = repo.git(&["rev-parse", &name]);
    let middle = repo.git(&["rev-parse", &format!("{name}~1")]);
    std::fs::remove_file(repo.dir.join(".git/objects").join(&middle[..2]).join(&middle[2..])).expect("a loose object");
    let expected = format!(
        "error: task record '{name}' is corrupt: its history is incomplete: object {middle} is missing\n\
         hint: copy the object back from a clone that has it ('git fetch --refetch <remote>' fetches every object again), then check with 'git loop doctor'\n"
    );
    for args in [&["show", &id][..], &["edit", &id, "--title", "v4"], &["done", &id]] {
        assert_eq!(repo.run(args).code(3).stderr, expected, "git loop {args:?}");
    }
    // The index last saw the task at its first operation: its new tip's history is read.
    let list = repo.run(&["list"]).ok();
    assert_eq!(list.stdout_with(&[(&good, "<G>")]), "ID          PRI  STATE  TITLE\n<G>  p2   ready  healthy\n");
    assert_eq!(
        list.stderr,
        format!("warning: skipped: {}", &expected["error: ".len()..expected.find("\nhint").expect("a hint")]) + "\n"
    );
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["id"], good.as_str());
    assert_eq!(repo.git(&["rev-parse", &name]), tip, "nothing was added to the damaged chain");
}

fn age(path: &std::path::Path, seconds: u64) {
    let file = std::fs::File::options().write(true).open(path).expect("open lock");
    file.set_modified(SystemTime::now() - Duration::from_secs(seconds)).expect("set mtime");
}

/// L1: a ref lock left by a writer killed with SIGKILL is recovered by the next writer (within
/// a second of its making); one a live process holds is never taken, and the error names it.
#[test]
fn l1_a_ref_lock_nobody_holds_is_recovered_and_a_held_one_is_named() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let dir = repo.dir.join(".git/refs/loop/claims/lock");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let lock = dir.join("t-1.lock");
    std::fs::write(&lock, "").expect("write lock");
    repo.run(&["claim", "acquire", "lock:t-1", "--holder", "h"]).ok();
    assert!(!lock.exists(), "the abandoned lock is gone");

    let holder = crate::harness::Holder::open(&dir.join("t-2.lock"));
    age(&dir.join("t-2.lock"), 120);
    let held = repo.run(&["claim", "acquire", "lock:t-2", "--holder", "h"]).code(1);
    assert!(
        held.stderr.starts_with("error: ref 'refs/loop/claims/lock/t-2' is locked by another writer (for ")
            && held.stderr.contains("hint: a git process holds it; wait for it to finish"),
        "{}",
        held.stderr
    );
    assert!(dir.join("t-2.lock").exists(), "a lock a live process holds is never removed, however old");
    drop(holder);
    let _ = std::fs::remove_file(dir.join("t-2.lock"));
}

/// L2: a leftover packed-refs.lock (which blocks every gix ref write) is recovered by the next
/// writer; one git holds is waited for, then named with what to do; nothing is half-written.
#[test]
fn l2_a_leftover_packed_refs_lock_is_recovered_and_a_held_one_is_named() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let lock = repo.dir.join(".git/packed-refs.lock");
    std::fs::write(&lock, "").expect("write lock");
    repo.run(&["add", "x"]).ok();
    assert!(!lock.exists(), "the abandoned lock is gone");
    let holder = crate::harness::Holder::open(&lock);
    let out = repo.run(&["add", "y"]).code(1);
    assert!(out.stderr.starts_with("error: packed-refs.lock is held"), "{}", out.stderr);
    assert!(out.stderr.contains("hint: a git process holds it; wait for it to finish"), "{}", out.stderr);
    drop(holder);
    let _ = std::fs::remove_file(&lock);
    assert_eq!(
        repo.run(&["list", "--json"]).ok().json()["tasks"].as_array().map(Vec::len),
        Some(1),
        "nothing half-written"
    );
}

/// L5: a reftable repository is refused (gix would write refs git never sees); so are bare
/// repositories and directories outside any repository.
#[test]
fn l5_reftable_bare_and_missing_repositories_are_refused_clearly() {
    let env = TestEnv::new();
    let reftable = env.path("reftable");
    env.git(env.root.path(), &["init", "-q", "--ref-format=reftable", reftable.to_str().expect("utf-8")]);
    let repo = crate::harness::Repo { env: &env, dir: reftable };
    let out = repo.run(&["add", "x"]).code(2);
    assert!(out.stderr.contains("stores its refs in reftable format"), "{}", out.stderr);
    assert!(out.stderr.contains("hint: use a repository with the files ref backend"), "{}", out.stderr);

    let bare = env.remote("bare");
    let repo = crate::harness::Repo { env: &env, dir: bare };
    let out = repo.run(&["list"]).code(2);
    assert!(out.stderr.contains("is a bare repository"), "{}", out.stderr);

    let nowhere = env.path("nowhere");
    std::fs::create_dir_all(&nowhere).expect("mkdir");
    let repo = crate::harness::Repo { env: &env, dir: nowhere };
    let out =
        repo.run_with(&["list"], &[("GIT_CEILING_DIRECTORIES", env.root.path().to_str().expect("utf-8"))]).code(2);
    assert!(out.stderr.contains("is not in a git repository"), "{}", out.stderr);
}

/// S2: titles and bodies with shell syntax, option-like text and newlines are stored verbatim
/// through every way in (add, --body-file, import) and never run.
#[test]
fn s2_injected_text_round_trips_and_runs_nothing() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let canary = env.path("canary");
    let nasty = format!(
        "$(touch {c}) `touch {c}` ; touch {c} | touch {c} && touch {c}\n--upload-pack=touch {c}\n\"'\\\n\u{7}",
        c = canary.display()
    );
    let body_file = env.path("body.txt");
    std::fs::write(&body_file, &nasty).expect("write body");
    let id = repo.add(&[
        "--body-file",
        body_file.to_str().expect("utf-8"),
        "--label",
        "$(x)",
        "--",
        "--upload-pack=touch x",
    ]);
    let shown = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(
        (shown["title"].as_str(), shown["body"].as_str()),
        (Some("--upload-pack=touch x"), Some(nasty.as_str()))
    );
    let line = serde_json::json!({ "title": nasty, "body": nasty }).to_string();
    let file = env.path("in.jsonl");
    std::fs::write(&file, format!("{line}\n")).expect("write");
    let added = repo.run(&["import", file.to_str().expect("utf-8"), "--json"]).ok().json();
    let imported = added["added"][0].as_str().expect("an id").to_owned();
    assert_eq!(repo.run(&["show", &imported, "--json"]).ok().json()["title"], nasty.as_str());
    repo.run(&["journal", "append", "note", "--data", &serde_json::json!({ "message": nasty }).to_string()]).ok();
    let events = repo.run(&["log", "--json"]).ok().json();
    assert!(events["events"].as_array().expect("events").iter().any(|e| e["data"]["message"] == nasty.as_str()));
    assert!(!canary.exists(), "no text from a task was ever executed");
}

/// The task index is a cache: a ref changed behind git-loop's back (here, a task moved back
/// to an older operation with plain git, after the cache's stamp stopped being racy) is seen
/// at once, and deleting the cache loses nothing.
#[test]
fn the_task_index_never_disagrees_with_the_refs() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["original title"]);
    let name = format!("refs/loop/tasks/{id}");
    let first = repo.git(&["rev-parse", &name]);
    repo.run(&["edit", &id, "--title", "edited title"]).ok();
    repo.git(&["pack-refs", "--all"]);
    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(repo.run(&["list", "--json"]).ok().json()["tasks"][0]["title"], "edited title");
    assert_eq!(repo.run(&["list", "--json"]).ok().json()["tasks"][0]["title"], "edited title", "served from the cache");
    repo.git(&["update-ref", &name, &first]);
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["title"], "original title", "the moved ref is seen at once");
    std::fs::remove_file(repo.dir.join(".git/loop/index-v6")).expect("the cache exists");
    assert_eq!(repo.run(&["next", "--json"]).ok().json()["title"], "original title", "nothing lost without the cache");
}

/// J3: commits the journal and the notes refer to survive deleting every loop branch and
/// `git gc --prune=now`: the try and done anchors keep them.
#[test]
fn j3_gc_never_prunes_what_the_journal_and_notes_refer_to() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    for i in 0..3 {
        repo.add(&[&format!("task {i}")]);
    }
    let agent = env.path("agent.sh");
    std::fs::write(&agent, "echo work-$GIT_LOOP_TASK > work.txt\ngit loop finish done --message landed\n")
        .expect("write");
    repo.run(&["run", "--agent-cmd", &format!("sh {}", agent.display()), "--grace", "1"]).ok();
    let branches = repo.git(&["for-each-ref", "--format=%(refname)", "refs/heads/loop", "refs/heads/loop-try"]);
    for branch in branches.lines() {
        repo.git(&["update-ref", "-d", branch]);
    }
    repo.git(&["gc", "--prune=now", "--quiet"]);
    let events = repo.run(&["log", "--json"]).ok().json();
    let mut commits: Vec<String> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["data"]["commit"].as_str().map(ToOwned::to_owned))
        .collect();
    let notes = repo.git(&["notes", "--ref=loop", "list"]);
    commits.extend(notes.lines().filter_map(|l| l.split(' ').nth(1).map(ToOwned::to_owned)));
    assert!(commits.len() >= 6, "the journal and notes refer to the work ({commits:?})");
    for commit in &commits {
        let out = std::process::Command::new("git")
            .args(["cat-file", "-e", commit])
            .current_dir(&repo.dir)
            .status()
            .expect("git");
        assert!(out.success(), "commit {commit} referenced by the journal or a note was pruned");
    }
}

/// L4: `git pack-refs` running while claims are taken and released never brings a released
/// claim back (a delete removes the ref from packed-refs too).
#[test]
fn l4_pack_refs_under_concurrent_claimers_never_resurrects_a_released_claim() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = std::process::Command::new("git").args(["pack-refs", "--all"]).current_dir(&repo.dir).output();
            }
        });
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let repo = &repo;
                scope.spawn(move || {
                    for round in 0..15 {
                        let key = format!("lock:w{w}-{round}");
                        repo.run(&["claim", "acquire", &key, "--holder", "h"]).ok();
                        repo.run(&["claim", "release", &key, "--holder", "h"]).ok();
                    }
                })
            })
            .collect();
        // Stop the packer before looking at how the workers did, or a failed worker would
        // leave the scope waiting for it forever.
        let outcomes: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for outcome in outcomes {
            if let Err(panic) = outcome {
                std::panic::resume_unwind(panic);
            }
        }
    });
    repo.git(&["pack-refs", "--all"]);
    assert_eq!(
        repo.run(&["claim", "list", "--include-stale", "--json"]).ok().json()["claims"],
        serde_json::json!([]),
        "no released claim came back"
    );
    for line in repo.git(&["for-each-ref", "--format=%(objectname)", "refs/loop/claims"]).lines() {
        let record: serde_json::Value = serde_json::from_str(&repo.git(&["cat-file", "-p", line])).expect("a record");
        assert!(record["released_at"].is_string(), "every claim ref holds its tombstone: {record}");
    }
}
