//! Folding finished tasks into the archive (`git loop gc`): refs shrink to live work, and every
//! reader — list, show, log, cost, the notes, plain git — still reads each finished task; a
//! folded task changed is live again; a gc killed at any write leaves duplicates, never a hole.

use serde_json::Value;

use crate::harness::{Repo, TestEnv};

fn refs_under(repo: &Repo<'_>, prefix: &str) -> Vec<String> {
    repo.git(&["for-each-ref", "--format=%(refname)", prefix]).lines().map(str::to_owned).collect()
}

/// Four tasks: one done by hand, one cancelled, one done by a walk, one left open.
fn backlog(env: &TestEnv) -> (Repo<'_>, [String; 4]) {
    let repo = env.repo("r");
    let by_hand = repo.add(&["by hand"]);
    let dropped = repo.add(&["dropped"]);
    let walked = repo.add(&["walked"]);
    repo.run(&["done", &by_hand, "-m", "done by hand", "--commit", "HEAD"]).ok();
    repo.run(&["cancel", &dropped, "--reason", "not needed"]).ok();
    let agent = env.agent("w", "echo work > work.txt\ngit loop finish done --message walked");
    repo.run(&["run", "--agent-cmd", &agent, "--task", &walked, "--grace", "1"]).ok();
    let open = repo.add(&["still open"]);
    (repo, [by_hand, dropped, walked, open])
}

/// What readers say of the whole backlog: states, events, costs, notes.
fn readings(repo: &Repo<'_>) -> (Value, usize, Value, String) {
    let mut list = repo.run(&["list", "--json"]).ok().json()["tasks"].clone();
    if let Some(tasks) = list.as_array_mut() {
        tasks.sort_by_key(|t| t["id"].as_str().unwrap_or_default().to_owned());
    }
    let events = repo.run(&["log", "--json"]).ok().json()["events"].as_array().map(Vec::len).unwrap_or(0);
    let cost = repo.run(&["cost", "--json"]).ok().json();
    let notes = repo.git(&["notes", "--ref=loop", "list"]);
    (list, events, cost, notes)
}

#[test]
fn gc_folds_finished_tasks_into_one_ref_and_every_reader_still_reads_them() {
    let env = TestEnv::new();
    let (repo, [by_hand, dropped, walked, open]) = backlog(&env);
    let before = readings(&repo);
    let all_loop_refs = || {
        let mut all = refs_under(&repo, "refs/loop/");
        all.extend(refs_under(&repo, "refs/heads/loop/"));
        all.extend(refs_under(&repo, "refs/heads/loop-try/"));
        all
    };
    let refs_before = all_loop_refs().len();

    // Not old enough: nothing folded (the clock is pinned at the tasks' time).
    let out = repo.run(&["gc", "--json"]).ok().json();
    assert_eq!(out["tasks"], 0, "{out}");
    // A dry run changes nothing.
    let out = repo.run(&["gc", "--older-than", "0", "--dry-run"]).ok();
    assert!(out.stdout.starts_with("would fold 3 finished tasks"), "{}", out.stdout);
    assert_eq!(all_loop_refs().len(), refs_before);

    let out = repo.run(&["gc", "--older-than", "0", "--json"]).ok().json();
    assert_eq!(out["tasks"], 3, "{out}");
    assert!(out["chains"].as_u64().unwrap() >= 1, "the walk's ended chains: {out}");
    // Live work keeps its refs; the finished tasks' are gone, the archive holds them.
    assert_eq!(refs_under(&repo, "refs/loop/tasks/"), vec![format!("refs/loop/tasks/{open}")]);
    for id in [&by_hand, &dropped, &walked] {
        assert!(refs_under(&repo, &format!("refs/loop/claims/node/{id}")).is_empty());
        assert!(refs_under(&repo, &format!("refs/loop/done/{id}")).is_empty());
        assert!(refs_under(&repo, &format!("refs/loop/tries/{id}/")).is_empty());
    }
    // Left: the open task, the archive, the clone's own journal shards and its walker claim.
    let left = all_loop_refs();
    let live = |r: &&String| {
        *r == &format!("refs/loop/tasks/{open}")
            // The walked task's work has not landed: its branches stay for the landing queue.
            || r.starts_with(&format!("refs/heads/loop/{walked}"))
            || r.starts_with(&format!("refs/heads/loop-try/{walked}/"))
            || *r == "refs/loop/archive"
            || r.starts_with("refs/loop/journal/c-")
            || r.starts_with("refs/loop/claims/walker/")
    };
    assert!(left.iter().all(|r| live(&r)), "{refs_before} refs before, after: {left:?}");
    let retired = out["refs"].as_u64().unwrap() as usize;
    assert!(retired >= 9, "{out}");
    assert_eq!(left.len(), refs_before - retired + 1, "{refs_before} refs before, after: {left:?}");
    // Every reader reads the same as before.
    assert_eq!(readings(&repo), before);
    let shown = repo.run(&["show", &walked, "--json"]).ok().json();
    assert_eq!(shown["state"], "done");
    assert_eq!(repo.run(&["show", &dropped, "--json"]).ok().json()["state"], "cancelled");
    // Plain git reads it: the index names each retired ref, its history is there.
    let shard = &walked[walked.len() - 2..];
    let index = repo.git(&["show", &format!("refs/loop/archive:index/{shard}")]);
    let line = index.lines().find(|l| l.ends_with(&format!("refs/loop/tasks/{walked}"))).expect("indexed");
    let tip = line.split(' ').next().unwrap();
    assert!(repo.git(&["log", "--format=%s", tip]).contains(": create"), "the task's chain is readable");
    assert_eq!(
        repo.git(&["log", "--first-parent", "--format=%s", "refs/loop/archive"]),
        "loop: fold 3 tasks, 2 journal chains\nloop: the archive begins"
    );
    // Nothing for doctor to find, and git's own check is clean (every object reachable).
    repo.run(&["doctor"]).ok();
    assert!(!repo.git(&["fsck", "--no-dangling", "--no-progress"]).contains("error"));
    // Folding again finds nothing new.
    assert_eq!(repo.run(&["gc", "--older-than", "0", "--json"]).ok().json()["tasks"], 0);
}

#[test]
fn a_landed_tasks_branches_fold_with_it_and_show_still_says_where_it_landed() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["landed"]);
    let agent = env.agent("w", "echo work > work.txt\ngit loop finish done --message walked");
    repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--land"]).ok();
    assert_eq!(refs_under(&repo, &format!("refs/heads/loop/{id}")).len(), 1);
    let before = repo.run(&["show", &id]).ok().stdout;
    assert!(before.contains("landing: on main"), "{before}");
    repo.run(&["gc", "--older-than", "0"]).ok();
    assert!(refs_under(&repo, "refs/heads/loop/").is_empty(), "its task branch folded");
    assert!(refs_under(&repo, "refs/heads/loop-try/").is_empty(), "its try branch folded");
    assert_eq!(repo.run(&["show", &id]).ok().stdout, before);
    repo.run(&["doctor"]).ok();
}

#[test]
fn a_folded_task_changed_is_live_again_and_keeps_its_try_numbers() {
    let env = TestEnv::new();
    let (repo, [_, _, walked, _]) = backlog(&env);
    repo.run(&["gc", "--older-than", "0"]).ok();
    repo.run(&["reopen", &walked]).ok();
    assert_eq!(refs_under(&repo, &format!("refs/loop/tasks/{walked}")).len(), 1, "live again");
    assert_eq!(repo.run(&["show", &walked, "--json"]).ok().json()["state"], "open");
    let agent = env.agent("again", "echo more >> work.txt\ngit loop finish done --message again");
    let out = repo.run(&["run", "--agent-cmd", &agent, "--task", &walked, "--grace", "1"]).ok();
    assert!(out.stdout.contains(&format!("opened try 2 on loop-try/{walked}/2")), "{}", out.stdout);
    let log = repo.run(&["log", "--task", &walked, "--json"]).ok().json();
    let kinds: Vec<&str> = log["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "task_done").count(), 2, "its whole history: {kinds:?}");
    // Folded again, on top of the first fold.
    let folds = || repo.git(&["log", "--first-parent", "--format=%s", "refs/loop/archive"]).lines().count();
    let before = folds();
    assert_eq!(repo.run(&["gc", "--older-than", "0", "--json"]).ok().json()["tasks"], 1);
    assert_eq!(folds(), before + 1, "{}", repo.git(&["log", "--first-parent", "--format=%s", "refs/loop/archive"]));
    assert_eq!(repo.run(&["show", &walked, "--json"]).ok().json()["state"], "done");
}

#[test]
fn a_gc_killed_at_any_write_leaves_every_task_readable_and_the_next_one_finishes() {
    let env = TestEnv::new();
    let (repo, [_, _, walked, _]) = backlog(&env);
    let before = readings(&repo);
    let mut kills = 0;
    for n in 1..=60 {
        let out = repo.run_with(&["gc", "--older-than", "0"], &[("GIT_LOOP_KILL_AT", &format!("gc:{n}"))]);
        if out.code != -1 {
            out.code(0);
            break;
        }
        kills += 1;
        // Whatever the gc left, every task reads as before.
        assert_eq!(readings(&repo), before, "after kill {n}");
    }
    assert!(kills >= 2, "the gc was killed between its writes ({kills})");
    // What a kill between the fold and its deletes leaves — a ref live at exactly its archived
    // value — reads the same; doctor names it, and its repair deletes it.
    let index = repo.git(&["show", &format!("refs/loop/archive:index/{}", &walked[walked.len() - 2..])]);
    let (value, name) = index
        .lines()
        .find_map(|l| l.split_once(' ').filter(|(_, n)| *n == format!("refs/loop/tasks/{walked}")))
        .expect("the walked task is archived");
    repo.git(&["update-ref", name, value]);
    assert_eq!(readings(&repo), before);
    let report = repo.run(&["doctor", "--json"]).stdout;
    assert!(report.contains("1 refs are still live at exactly their archived value"), "{report}");
    let out = repo.run(&["doctor", "--repair"]);
    assert!(out.stdout.contains("deleted 1 refs the archive holds at that value"), "{}", out.stdout);
    assert!(!repo.run(&["doctor", "--json"]).stdout.contains("archived value"));
    assert_eq!(readings(&repo), before);
    assert_eq!(refs_under(&repo, "refs/loop/tasks/").len(), 1);
    repo.run(&["doctor"]).ok();
}

#[test]
fn gc_refuses_a_duration_it_cannot_read() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let out = repo.run(&["gc", "--older-than", "soon"]).code(2);
    assert!(out.stderr.contains("'soon' is not a duration"), "{}", out.stderr);
    assert!(out.stderr.contains("hint:"));
}

#[test]
fn a_fleets_fold_killed_at_any_write_loses_nothing_and_the_next_one_finishes() {
    let env = TestEnv::new();
    let (bare, a, b) = env.two_clones();
    for n in 0..3 {
        let id = a.add(&[&format!("task {n}")]);
        a.run(&["cancel", &id, "--reason", "done with"]).ok();
    }
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    let before = readings(&b);
    let mut kills = 0;
    for n in 1..=80 {
        let out = a.run_with(&["gc", "--older-than", "0"], &[("GIT_LOOP_KILL_AT", &format!("gc:{n}"))]);
        if out.code != -1 {
            out.code(0);
            break;
        }
        kills += 1;
        b.run(&["sync"]).ok();
        assert_eq!(readings(&b), before, "another clone after kill {n}");
    }
    assert!(kills >= 3, "killed between its writes ({kills})");
    a.run(&["gc", "--older-than", "0"]).ok();
    assert!(remote_refs(&bare, &env, "refs/loop/tasks/").is_empty());
    for clone in [&a, &b] {
        clone.run(&["sync"]).ok();
        assert_eq!(readings(clone), before);
        assert!(refs_under(clone, "refs/loop/tasks/").is_empty());
    }
}

fn remote_refs(bare: &std::path::Path, env: &TestEnv, prefix: &str) -> Vec<String> {
    env.git(bare, &["for-each-ref", "--format=%(refname)", prefix]).lines().map(str::to_owned).collect()
}

#[test]
fn a_fleet_folds_on_its_hooked_remote_and_every_clone_follows_without_pushing_anything_back() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    env.install_receive_hook(&bare);
    let url = bare.to_str().unwrap();
    let (a, b, old) = (env.clone_of(url, "a"), env.clone_of(url, "b"), env.clone_of(url, "old"));
    for clone in [&a, &b, &old] {
        clone.run(&["init", "--remote", "origin"]).ok();
    }
    let done = a.add(&["done by hand"]);
    let dropped = a.add(&["dropped"]);
    let open = a.add(&["still open"]);
    a.run(&["done", &done, "-m", "by hand", "--commit", "HEAD"]).ok();
    a.run(&["cancel", &dropped, "--reason", "not needed"]).ok();
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    old.run(&["sync"]).ok();
    let before = readings(&b);
    let refs_before = remote_refs(&bare, &env, "refs/loop/").len();

    let out = a.run(&["gc", "--older-than", "0", "--json"]).ok().json();
    assert_eq!(out["tasks"], 2, "{out}");
    // The remote keeps live work and the archive; the folded tasks' refs are gone there.
    assert_eq!(remote_refs(&bare, &env, "refs/loop/tasks/"), vec![format!("refs/loop/tasks/{open}")]);
    assert_eq!(remote_refs(&bare, &env, "refs/loop/archive").len(), 1);
    assert!(remote_refs(&bare, &env, "refs/loop/").len() < refs_before, "{refs_before} before");
    // Another clone syncs: its copies go too, and it reads everything as before.
    b.run(&["sync"]).ok();
    assert_eq!(refs_under(&b, "refs/loop/tasks/"), vec![format!("refs/loop/tasks/{open}")]);
    assert_eq!(readings(&b), before);
    // A clone that has not synced since: nothing it holds is pushed back, and it follows.
    old.run(&["sync"]).ok();
    old.run(&["sync"]).ok();
    assert_eq!(remote_refs(&bare, &env, "refs/loop/tasks/"), vec![format!("refs/loop/tasks/{open}")]);
    assert_eq!(refs_under(&old, "refs/loop/tasks/"), vec![format!("refs/loop/tasks/{open}")]);
    assert_eq!(readings(&old), before);
    // A clone of an older release pushing a folded ref back at its folded value is refused.
    let folded_tip = env.git(&bare, &["show", &format!("refs/loop/archive:index/{}", &done[done.len() - 2..])]);
    let tip = folded_tip
        .lines()
        .find(|l| l.ends_with(&format!("refs/loop/tasks/{done}")))
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    let push = env
        .seal(
            std::process::Command::new("git")
                .args(["push", "origin", &format!("{tip}:refs/loop/tasks/{done}")])
                .current_dir(&a.dir),
        )
        .output()
        .unwrap();
    assert!(!push.status.success());
    assert!(
        String::from_utf8_lossy(&push.stderr).contains("folded into refs/loop/archive"),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );
    // A folded task reopened anywhere is live again everywhere.
    b.run(&["reopen", &dropped]).ok();
    b.run(&["sync"]).ok();
    a.run(&["sync"]).ok();
    assert_eq!(a.run(&["show", &dropped, "--json"]).ok().json()["state"], "open");
    assert_eq!(remote_refs(&bare, &env, "refs/loop/tasks/").len(), 2);
}

#[test]
fn two_clones_folding_at_once_fold_each_task_once() {
    let env = TestEnv::new();
    let (bare, a, b) = env.two_clones();
    for n in 0..6 {
        let id = a.add(&[&format!("task {n}")]);
        a.run(&["cancel", &id, "--reason", "done with"]).ok();
    }
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    let before = readings(&b);
    let spawn = |repo: &Repo<'_>| {
        repo.command(&["gc", "--older-than", "0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("gc")
    };
    let (first, second) = (spawn(&a), spawn(&b));
    for child in [first, second] {
        let out = child.wait_with_output().expect("gc ends");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(remote_refs(&bare, &env, "refs/loop/tasks/").is_empty());
    let listed = env.git(&bare, &["ls-tree", "-r", "--name-only", "refs/loop/archive"]);
    let mut names = Vec::new();
    for shard in listed.lines().filter(|l| l.starts_with("index/")) {
        let blob = env.git(&bare, &["show", &format!("refs/loop/archive:{shard}")]);
        names.extend(blob.lines().filter_map(|l| l.split_once(' ').map(|(_, n)| n.to_owned())));
    }
    let tasks: Vec<&String> = names.iter().filter(|n| n.starts_with("refs/loop/tasks/")).collect();
    assert_eq!(tasks.len(), 6, "each task archived once: {tasks:?}");
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    assert_eq!(readings(&a), before);
    assert_eq!(readings(&b), before);
}

#[test]
fn a_walk_with_loop_fold_folds_the_fleets_finished_tasks_as_it_syncs() {
    let env = TestEnv::new();
    let (bare, a, b) = env.two_clones();
    // Sixty finished tasks (a beads export's closed issues): enough for a fold.
    let lines: String = (0..60)
        .map(|i| format!("{{\"id\":\"bd-{i:03}\",\"title\":\"old {i}\",\"status\":\"closed\",\"issue_type\":\"task\",\"priority\":2,\"created_at\":\"2026-01-01T00:00:00Z\",\"updated_at\":\"2026-01-01T00:00:00Z\"}}\n"))
        .collect();
    let file = env.path("closed.jsonl");
    std::fs::write(&file, lines).unwrap();
    a.run(&["import", "--format", "beads", file.to_str().unwrap()]).ok();
    a.run(&["sync"]).ok();
    assert_eq!(remote_refs(&bare, &env, "refs/loop/tasks/").len(), 60);
    b.run(&["sync"]).ok();
    // A walk that syncs every second, its one task slow enough for a sync or two.
    b.git(&["config", "loop.fold", "0"]);
    b.git(&["config", "loop.syncEvery", "1s"]);
    let slow = b.add(&["slow"]);
    let agent = env.agent("slow", "sleep 3\ngit loop finish done --message slow");
    let out = b.run(&["run", "--agent-cmd", &agent, "--task", &slow, "--grace", "1"]).ok();
    assert!(out.stdout.contains("folded 60 finished tasks"), "{}", out.stdout);
    assert!(
        remote_refs(&bare, &env, "refs/loop/tasks/").len() <= 1,
        "{:?}",
        remote_refs(&bare, &env, "refs/loop/tasks/")
    );
    a.run(&["sync"]).ok();
    let (list, ..) = readings(&a);
    assert_eq!(list.as_array().map(Vec::len), Some(61));
    assert_eq!(readings(&b).0.as_array().map(Vec::len), Some(61));
    let done = list.as_array().unwrap().iter().filter(|t| t["state"] == "done").count();
    assert_eq!(done, 61, "every folded task reads done, and the walked one");
    // A bad value stops a walk before it starts.
    b.git(&["config", "loop.fold", "sometimes"]);
    let out = b.run(&["run", "--agent-cmd", &agent]).code(2);
    assert!(out.stderr.contains("loop.fold 'sometimes' is neither off nor a duration"), "{}", out.stderr);
}

#[test]
fn a_fresh_clone_reads_folded_tasks_from_the_archives_records_and_the_hook_refuses_a_forged_one() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    env.install_receive_hook(&bare);
    let url = bare.to_str().unwrap();
    let a = env.clone_of(url, "a");
    a.run(&["init", "--remote", "origin"]).ok();
    let done = a.add(&["done by hand"]);
    let dropped = a.add(&["dropped"]);
    a.run(&["done", &done, "-m", "by hand", "--commit", "HEAD"]).ok();
    a.run(&["cancel", &dropped, "--reason", "not needed"]).ok();
    a.run(&["sync"]).ok();
    a.run(&["gc", "--older-than", "0"]).ok();
    let shard = &done[done.len() - 2..];
    let records = env.git(&bare, &["show", &format!("refs/loop/archive:tasks/{shard}")]);
    assert!(records.contains(&format!(" {done} {{")) && records.contains("\"state\":\"done\""), "{records}");

    // A fresh clone lists and shows them as the folding clone does, without reading their
    // chains for its index (the records are the archive's).
    let fresh = env.clone_of(url, "fresh");
    fresh.run(&["init", "--remote", "origin"]).ok();
    assert_eq!(readings(&fresh).0, readings(&a).0);
    assert_eq!(fresh.run(&["show", &done, "--json"]).ok().json()["completion"]["message"], "by hand");
    fresh.run(&["doctor"]).ok();

    // A fold whose record of a task is not the record at its tip is refused by the hook.
    let tip = a.git(&["rev-parse", "refs/loop/archive"]);
    let forged_records = records.replace("\"state\":\"done\"", "\"state\":\"open\"");
    std::fs::write(a.dir.join("forged"), &forged_records).unwrap();
    let blob = a.git(&["hash-object", "-w", "forged"]);
    let tree = a.git(&["rev-parse", "refs/loop/archive^{tree}"]);
    let script = format!("GIT_INDEX_FILE=idx git read-tree {tree} && GIT_INDEX_FILE=idx git update-index --cacheinfo 100644,{blob},tasks/{shard} && GIT_INDEX_FILE=idx git write-tree");
    let out = env.seal(std::process::Command::new("sh").args(["-c", &script]).current_dir(&a.dir)).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let new_tree = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let forged = a.git(&["commit-tree", &new_tree, "-p", &tip, "-m", "loop: fold 0 tasks, 0 journal chains"]);
    let push = env
        .seal(
            std::process::Command::new("git")
                .args(["push", "origin", &format!("{forged}:refs/loop/archive")])
                .current_dir(&a.dir),
        )
        .output()
        .unwrap();
    assert!(!push.status.success());
    let said = String::from_utf8_lossy(&push.stderr);
    assert!(said.contains(&format!("snapshot of refs/loop/tasks/{done} is not the record")), "{said}");
}

#[test]
fn a_fleets_fold_publishes_what_this_clone_changed_first_and_loses_none_of_it() {
    // Found with two walks folding as they went: a task a walk's worker marked done just before
    // the fold was folded at its new tip while the remote still held the old one, which came
    // back live over the archive's and showed the task open again. The fold's own sync
    // publishes what is here first; what is written after it waits for the next fold
    // (`store::fold`'s unit test `a_task_ahead_of_the_remote_waits_for_the_next_fold`).
    let env = TestEnv::new();
    let (_bare, a, b) = env.two_clones();
    let finished = a.add(&["finished and published"]);
    a.run(&["done", &finished, "-m", "published", "--commit", "HEAD"]).ok();
    let pending = a.add(&["done here, not published yet"]);
    a.run(&["sync"]).ok();
    // Done with no remote to publish to, as a walk's worker writes before its unit publishes.
    a.git(&["config", "--unset", "loop.remote"]);
    a.run(&["done", &pending, "-m", "not published", "--commit", "HEAD"]).ok();
    a.git(&["config", "loop.remote", "origin"]);
    let out = a.run(&["gc", "--older-than", "0", "--json"]).ok().json();
    assert_eq!(out["tasks"], 2, "{out}");
    for clone in [&a, &b] {
        clone.run(&["sync"]).ok();
        clone.run(&["sync"]).ok();
        assert_eq!(clone.run(&["show", &pending, "--json"]).ok().json()["state"], "done");
        assert_eq!(clone.run(&["show", &finished, "--json"]).ok().json()["state"], "done");
        assert_eq!(refs_under(clone, "refs/loop/tasks/"), Vec::<String>::new());
    }
}
