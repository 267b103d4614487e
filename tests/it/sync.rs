//! `sync` between clones of one remote: tasks merged without conflicts, in either order.

use crate::harness::TestEnv;

/// Two clones edit the same task offline (one changes the priority, the other adds a
/// dependency) and sync in either order: both edits survive, both clones end identical.
#[test]
fn offline_edits_of_one_task_merge_the_same_way_whatever_the_sync_order() {
    for a_first in [true, false] {
        let env = TestEnv::new();
        let remote = env.remote("origin");
        let url = remote.to_str().expect("utf-8");
        let a = env.clone_of(url, "a");
        let b = env.clone_of(url, "b");
        a.run(&["init", "--remote", "origin"]).ok();
        b.run(&["init", "--remote", "origin"]).ok();
        let task = a.add(&["shared"]);
        let dep = a.add(&["dependency"]);
        a.run(&["sync"]).ok();
        b.run(&["sync"]).ok();
        a.run(&["edit", &task, "-p", "p0"]).ok();
        b.run_with(&["edit", &task, "--after", &dep], &[("GIT_LOOP_NOW", "2026-03-01T12:05:00Z")]).ok();
        let order = if a_first { [&a, &b, &a] } else { [&b, &a, &b] };
        for clone in order {
            clone.run(&["sync"]).ok();
        }
        let name = format!("refs/loop/tasks/{task}");
        let (tip_a, tip_b) = (a.git(&["rev-parse", &name]), b.git(&["rev-parse", &name]));
        assert_eq!(tip_a, tip_b, "both clones hold the same merged tip");
        assert_eq!(env.git(&remote, &["rev-parse", &name]), tip_a, "and so does the remote");
        let merged = a.run(&["show", &task, "--json"]).ok().json();
        assert_eq!(merged["priority"], "p0", "the priority edit survived");
        assert_eq!(merged["after"], serde_json::json!([dep]), "the dependency edit survived");
        assert_eq!(b.run(&["sync"]).ok().stdout, "", "a second sync has nothing left to do");
    }
}

/// A mirror ref whose object this clone lacks (seen once in a fleet of four walks: every fetch
/// then failed to negotiate) is dropped and refilled from the remote: sync succeeds.
#[test]
fn a_mirror_pointing_at_a_missing_object_is_refilled_by_the_next_fetch() {
    let env = TestEnv::new();
    let remote = env.remote("origin");
    let url = remote.to_str().expect("utf-8");
    let a = env.clone_of(url, "a");
    a.run(&["init", "--remote", "origin"]).ok();
    let id = a.add(&["shared"]);
    a.run(&["sync"]).ok();
    let mirror = a.dir.join(format!(".git/refs/loop-remotes/origin/loop/tasks/{id}"));
    assert!(mirror.exists(), "sync mirrors the task's record");
    std::fs::write(&mirror, format!("{}\n", "1".repeat(40))).expect("break the mirror");
    let out = a.run(&["sync"]).ok();
    assert!(!out.stderr.contains("could not"), "{}", out.stderr);
    let healed = std::fs::read_to_string(&mirror).unwrap_or_default();
    assert_eq!(
        healed.trim(),
        a.git(&["rev-parse", &format!("refs/loop/tasks/{id}")]),
        "the mirror holds the remote's record again"
    );
}

#[test]
fn sync_offers_to_fast_forward_a_clean_checked_out_target_and_ff_does_it_never_over_changes() {
    let env = TestEnv::new();
    let (_remote, a, b) = env.two_clones();
    let advance = |file: &str| {
        std::fs::write(a.dir.join(file), "new\n").expect("write");
        a.git(&["add", file]);
        a.git(&["commit", "-q", "-m", file]);
        a.git(&["push", "-q", "origin", "main"]);
        a.git(&["rev-parse", "main"])
    };
    let first = advance("one.txt");
    let before = b.git(&["rev-parse", "main"]);
    // Sync brings the remote's target into its mirror (never into main): it knows main is
    // behind, and says the checkout is clean.
    let offered = b.run(&["sync"]).ok();
    assert!(
        offered.stderr.contains(&format!(
            "main is behind origin's ({}) and its checkout is clean: 'git loop sync --ff' fast-forwards it",
            &first[..12]
        )),
        "{}",
        offered.stderr
    );
    assert_eq!(b.git(&["rev-parse", "main"]), before, "nothing moves unless asked");
    let json = b.run(&["sync", "--json"]).ok().json();
    assert_eq!(json["target"]["state"], "behind", "{json}");
    let done = b.run(&["sync", "--ff"]).ok();
    assert!(done.stderr.contains("main fast-forwarded to origin's"), "{}", done.stderr);
    assert_eq!(b.git(&["rev-parse", "main"]), first);
    assert_eq!(std::fs::read_to_string(b.dir.join("one.txt")).expect("the checkout followed"), "new\n");
    assert_eq!(b.git(&["status", "--porcelain"]), "");
    // A checkout with changes is never touched: said, and --ff fails.
    let second = advance("two.txt");
    std::fs::write(b.dir.join("README"), "my edit\n").expect("edit");
    let refused = b.run(&["sync", "--ff"]).code(1);
    assert!(refused.stderr.contains("with changes: it is left where it is"), "{}", refused.stderr);
    assert_eq!(b.git(&["rev-parse", "main"]), first, "main stays under a dirty checkout");
    assert_ne!(first, second);
    assert_eq!(std::fs::read_to_string(b.dir.join("README")).expect("README"), "my edit\n");
}

/// The README tour's first line on a fresh clone of a shared repository: `init --remote origin`
/// takes the remote's backlog at once, so `list` and `next` show it (they showed an empty
/// backlog until a sync, where a clone that skipped init followed the remote by itself).
#[test]
fn init_with_a_remote_on_a_fresh_clone_shows_the_remotes_backlog_at_once() {
    let env = TestEnv::new();
    let remote = env.remote("origin");
    let url = remote.to_str().expect("utf-8");
    let a = env.clone_of(url, "a");
    a.run(&["init", "--remote", "origin"]).ok();
    let ids: Vec<String> = (0..3).map(|i| a.add(&[&format!("shared task {i}")])).collect();
    a.run(&["sync"]).ok();

    let fresh = env.clone_of(url, "fresh");
    let init = fresh.run(&["init", "--remote", "origin"]).ok();
    assert!(init.stdout.contains("took the loop's state from remote 'origin' ("), "{}", init.stdout);
    let listed = fresh.run(&["list", "--json"]).ok().json();
    let mut seen: Vec<String> =
        listed["tasks"].as_array().expect("tasks").iter().map(|t| t["id"].as_str().expect("id").to_owned()).collect();
    seen.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(seen, want, "the remote's backlog, from the first command after init");
    let next = fresh.run(&["next", "--json"]).ok().json();
    assert!(ids.iter().any(|id| next["id"] == id.as_str()), "next offers a shared task: {next}");
    let again = fresh.run(&["init", "--remote", "origin", "--json"]).ok().json();
    assert_eq!(again["taken_from_remote"], 0, "a second init has nothing more to take: {again}");
}

/// A clone with a lot unpublished (1,200 task records, more than two pieces of
/// `sync::BATCH` refs) publishes it in pieces, each its own leased atomic push: a sync killed
/// after its first piece keeps what that piece published, and the next sync pushes only the
/// rest — it does not start again from nothing.
#[test]
fn a_large_sync_publishes_in_pieces_and_one_killed_half_way_keeps_what_it_published() {
    let env = TestEnv::new();
    let remote = env.remote("origin");
    let a = env.clone_of(remote.to_str().expect("utf-8"), "a");
    let n = 1200;
    let lines: String = (1..=n).map(|i| format!("{{\"id\":\"t-{i:04}\",\"title\":\"task {i}\"}}\n")).collect();
    let file = env.path("tasks.jsonl");
    std::fs::write(&file, lines).expect("write tasks");
    a.run(&["import", file.to_str().expect("utf-8")]).ok();
    let published = || env.git(&remote, &["for-each-ref", "refs/loop/tasks"]).lines().count();
    // Killed at its second write: the first piece's push has been made, the rest not yet.
    let killed = a.run_with(&["sync"], &[("GIT_LOOP_KILL_AT", "sync:2")]);
    assert_ne!(killed.code, 0, "the sync was killed");
    let kept = published();
    assert!(
        kept >= git_loop::store::sync::BATCH - 10 && kept < n,
        "the first piece is on the remote, not all of it: {kept} of {n}"
    );
    let again = a.run(&["sync", "--json"]).ok().json();
    let pushed = again["refs"].as_array().expect("refs").iter().filter(|r| r["change"] == "pushed").count();
    assert_eq!(published(), n, "every task record is published");
    assert!(pushed <= n + 10 - kept, "the retry pushed only what was not published ({pushed}, {kept} kept)");
}
