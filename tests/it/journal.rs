//! The journal: appends from many processes at once lose and duplicate nothing (J1), clones
//! that append offline converge on the identical union whatever order they sync in (J2), and
//! `log` filters and prints the timeline.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Repo, TestEnv};

/// The environment that pins git-loop's clock to `t`.
fn at(t: &str) -> (&'static str, &str) {
    ("GIT_LOOP_NOW", t)
}

/// The events `log --json` shows.
fn events(repo: &Repo<'_>) -> Vec<Value> {
    let log = repo.run(&["log", "--json"]).ok();
    assert_eq!(log.stderr, "", "no journal record is unreadable");
    log.json()["events"].as_array().expect("an events list").clone()
}

/// Counts of the `note` events' `(p, n)` pairs: lost (expected but absent) and duplicated
/// (present more than once), over `procs` x `per` expected pairs.
fn lost_and_duplicated(events: &[Value], procs: u64, per: u64) -> (usize, usize) {
    let mut seen: HashMap<(u64, u64), usize> = HashMap::new();
    for event in events.iter().filter(|e| e["kind"] == "note") {
        let pair = (event["data"]["p"].as_u64().expect("p"), event["data"]["n"].as_u64().expect("n"));
        *seen.entry(pair).or_default() += 1;
    }
    let lost = (0..procs).flat_map(|p| (0..per).map(move |n| (p, n))).filter(|k| !seen.contains_key(k)).count();
    let duplicated = seen.values().map(|c| c - 1).sum();
    (lost, duplicated)
}

/// Each writer's events, by writer, in chain order: their `seq` must run 1, 2, 3... with no
/// gap and no repeat.
fn chains(events: &[Value]) -> BTreeMap<String, Vec<&Value>> {
    let mut by_writer: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for event in events {
        by_writer.entry(event["writer"].as_str().expect("writer").to_owned()).or_default().push(event);
    }
    for (writer, chain) in &mut by_writer {
        chain.sort_by_key(|e| e["seq"].as_u64());
        let seqs: Vec<u64> = chain.iter().filter_map(|e| e["seq"].as_u64()).collect();
        assert_eq!(seqs, (1..=chain.len() as u64).collect::<Vec<_>>(), "writer {writer}'s chain is numbered 1..n");
    }
    by_writer
}

const PROCS: usize = 32;
const APPENDS: usize = 100;

/// 32 threads at once, each running 100 `journal append note` processes one after another;
/// `session(p)` is process `p`'s $GIT_LOOP_SESSION, if any. Returns the wall time.
fn append_storm(repo: &Repo<'_>, session: impl Fn(usize) -> Option<String> + Sync) -> Duration {
    let started = Instant::now();
    std::thread::scope(|scope| {
        for p in 0..PROCS {
            let session = session(p);
            scope.spawn(move || {
                for n in 0..APPENDS {
                    let data = format!("{{\"p\":{p},\"n\":{n}}}");
                    let mut cmd = repo.command(&["journal", "append", "note", "--data", &data]);
                    if let Some(session) = &session {
                        cmd.env("GIT_LOOP_SESSION", session);
                    }
                    let out = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output().expect("run an append");
                    assert!(
                        out.status.success(),
                        "append p={p} n={n} failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            });
        }
    });
    started.elapsed()
}

/// J1: 32 processes x 100 appends each into one clone's journal (commands run by hand share
/// four writer chains, so they contend): 3200 notes, every (p, n) exactly once.
#[test]
fn j1_thirty_two_processes_appending_at_once_lose_and_duplicate_nothing() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.run(&["init"]).ok();
    let took = append_storm(&repo, |_| None);
    let events = events(&repo);
    let notes = events.iter().filter(|e| e["kind"] == "note").count();
    let (lost, duplicated) = lost_and_duplicated(&events, PROCS as u64, APPENDS as u64);
    eprintln!("J1 (shared clone writers): {notes} notes, lost {lost}, duplicated {duplicated}, wall time {took:.1?}");
    assert_eq!((notes, lost, duplicated), (PROCS * APPENDS, 0, 0), "every append is in the log exactly once");
    let chains = chains(&events);
    assert!(chains.len() <= 4, "commands run by hand write to at most four shards: {:?}", chains.keys());
}

/// J1 with sessions: the same storm, each process in its own session, so each appends to its
/// own chain: 3200 notes, and each session's chain holds its 100 notes in append order.
#[test]
fn j1_thirty_two_sessions_appending_at_once_keep_every_event_in_order() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.run(&["init"]).ok();
    let took = append_storm(&repo, |p| Some(format!("s-{p}")));
    let events = events(&repo);
    let notes = events.iter().filter(|e| e["kind"] == "note").count();
    let (lost, duplicated) = lost_and_duplicated(&events, PROCS as u64, APPENDS as u64);
    eprintln!(
        "J1 (one session per process): {notes} notes, lost {lost}, duplicated {duplicated}, wall time {took:.1?}"
    );
    assert_eq!((notes, lost, duplicated), (PROCS * APPENDS, 0, 0), "every append is in the log exactly once");
    let chains = chains(&events);
    assert_eq!(chains.len(), PROCS, "one chain per session");
    for (writer, chain) in chains {
        let p: u64 = writer.trim_start_matches("s-").parse().expect("writer s-<p>");
        let order: Vec<(u64, u64)> =
            chain.iter().map(|e| (e["data"]["p"].as_u64().expect("p"), e["data"]["n"].as_u64().expect("n"))).collect();
        assert_eq!(
            order,
            (0..APPENDS as u64).map(|n| (p, n)).collect::<Vec<_>>(),
            "session {writer}'s chain holds its own notes in the order they were appended"
        );
        assert!(chain.iter().all(|e| e["session"] == writer.as_str()), "events carry their session");
    }
}

/// The control for J1: writers that append without compare-and-swap (read the tip, commit on
/// it, move the ref with `git update-ref` and no old value) lose acknowledged events. If this
/// ever lost none, the count above could not catch a lost append.
#[test]
fn j1_control_appends_without_compare_and_swap_lose_events() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let empty_tree = repo.git(&["hash-object", "-w", "-t", "tree", "/dev/null"]);
    let chain = "refs/loop/journal/blind";
    let (procs, per) = (32u64, 10u64);
    let acknowledged: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..procs)
            .map(|p| {
                let (env, repo, empty_tree) = (&env, &repo, &empty_tree);
                scope.spawn(move || {
                    let mut acknowledged = Vec::new();
                    for n in 0..per {
                        let tip = repo.git(&["for-each-ref", "--format=%(objectname)", chain]);
                        let event = serde_json::json!({
                            "version": 1, "kind": "note", "at": "2026-03-01T12:00:00Z", "writer": "blind",
                            "seq": 1, "by": "Tess Ter <tess@example.com>", "data": { "p": p, "n": n },
                        });
                        let message = format!("note\n\n{event}\n");
                        let mut args = vec!["commit-tree", empty_tree.as_str(), "-m", &message];
                        if !tip.is_empty() {
                            args.extend(["-p", tip.as_str()]);
                        }
                        let commit = repo.git(&args);
                        // A writer that finds the ref locked gives up on this event and says
                        // so; only the appends it reported done count.
                        let moved = env
                            .seal(&mut std::process::Command::new("git"))
                            .args(["update-ref", chain, &commit])
                            .current_dir(&repo.dir)
                            .stderr(Stdio::null())
                            .status()
                            .expect("run update-ref");
                        if moved.success() {
                            acknowledged.push((p, n));
                        }
                    }
                    acknowledged
                })
            })
            .collect();
        writers.into_iter().flat_map(|w| w.join().expect("writer thread")).collect()
    });
    let logged: std::collections::HashSet<(u64, u64)> = events(&repo)
        .iter()
        .map(|e| (e["data"]["p"].as_u64().expect("p"), e["data"]["n"].as_u64().expect("n")))
        .collect();
    let lost = acknowledged.iter().filter(|pair| !logged.contains(pair)).count();
    eprintln!("J1 control (no compare-and-swap): {} appends acknowledged, lost {lost}", acknowledged.len());
    assert!(lost > 0, "blind appends must lose acknowledged events, or J1 could never catch a lost one");
}

/// A small deterministic generator (splitmix64): the sync order differs between scenarios
/// but every run of the test sees the same ones.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A permutation of `0..n` drawn from `state` (Fisher-Yates).
fn shuffled(n: usize, state: &mut u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, (splitmix(state) % (i as u64 + 1)) as usize);
    }
    order
}

const CLONES: usize = 4;
const OFFLINE: usize = 20;

/// Four clones of one remote, each with 20 notes appended offline: 10 as the clone itself
/// and 10 in a session that every clone uses, so that chain has diverged four ways.
fn offline_clones(env: &TestEnv) -> (std::path::PathBuf, Vec<Repo<'_>>) {
    let remote = env.remote("origin");
    let url = remote.to_str().expect("utf-8").to_owned();
    let clones: Vec<Repo<'_>> = (0..CLONES).map(|c| env.clone_of(&url, &format!("clone-{c}"))).collect();
    for (c, clone) in clones.iter().enumerate() {
        clone.run(&["init"]).ok();
        for n in 0..OFFLINE {
            let data = format!("{{\"p\":{c},\"n\":{n}}}");
            let session = if n % 2 == 0 { "s-shared" } else { "" };
            let mut cmd = clone.command(&["journal", "append", "note", "--data", &data]);
            if !session.is_empty() {
                cmd.env("GIT_LOOP_SESSION", session);
            }
            let out = cmd.output().expect("run an append");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
    (remote, clones)
}

/// What J2 promises once every clone has synced: every clone's timeline lists the identical
/// events in the identical order, 80 notes, each (clone, n) once, and the remote's journal
/// refs equal each clone's.
fn check_converged(env: &TestEnv, remote: &std::path::Path, clones: &[Repo<'_>], scenario: &str) {
    let timelines: Vec<Vec<String>> =
        clones.iter().map(|c| events(c).iter().map(|e| e["id"].as_str().expect("id").to_owned()).collect()).collect();
    for (c, timeline) in timelines.iter().enumerate() {
        assert_eq!(timeline, &timelines[0], "{scenario}: clone-{c} lists the same events in the same order as clone-0");
    }
    let events = events(&clones[0]);
    let notes = events.iter().filter(|e| e["kind"] == "note").count();
    let (lost, duplicated) = lost_and_duplicated(&events, CLONES as u64, OFFLINE as u64);
    assert_eq!((notes, lost, duplicated), (CLONES * OFFLINE, 0, 0), "{scenario}: the union, nothing lost or doubled");
    let remote_refs = env.git(remote, &["for-each-ref", "refs/loop/journal"]);
    for (c, clone) in clones.iter().enumerate() {
        assert_eq!(clone.git(&["for-each-ref", "refs/loop/journal"]), remote_refs, "{scenario}: clone-{c} = remote");
    }
    eprintln!("J2 {scenario}: {} clones identical, {notes} notes, lost {lost}, duplicated {duplicated}", clones.len());
}

/// J2: four clones append offline, then sync one at a time in a random order, twice over:
/// every clone ends with the identical union. Three different orders.
#[test]
fn j2_clones_that_append_offline_converge_whatever_order_they_sync_in() {
    for seed in 0..3u64 {
        let env = TestEnv::new();
        let (remote, clones) = offline_clones(&env);
        let mut state = seed;
        let order: Vec<usize> = [shuffled(CLONES, &mut state), shuffled(CLONES, &mut state)].concat();
        for &c in &order {
            clones[c].run(&["sync"]).ok();
        }
        check_converged(&env, &remote, &clones, &format!("order {order:?}"));
    }
}

/// J2 with every clone syncing at the same moment: the atomic pushes collide, the losers
/// fetch and merge again (a sync loses at most once to each other clone's push, so four
/// clones need at most four of the five rounds a sync allows); after one more sync each, in
/// order, every clone has the union.
#[test]
fn j2_clones_that_sync_at_the_same_moment_converge() {
    let env = TestEnv::new();
    let (remote, clones) = offline_clones(&env);
    let runs: Vec<_> = clones
        .iter()
        .map(|c| c.command(&["sync"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn sync"))
        .collect();
    for (c, run) in runs.into_iter().enumerate() {
        let out = run.wait_with_output().expect("sync ends");
        assert!(
            out.status.success(),
            "clone-{c}: a sync that collides with others retries and succeeds: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for clone in &clones {
        clone.run(&["sync"]).ok();
    }
    check_converged(&env, &remote, &clones, "all at once, then in order");
}

/// The human `log`: a clone whose commands ran by hand, and two sessions, over two tasks.
fn journal_with_sessions(env: &TestEnv) -> (Repo<'_>, String) {
    let repo = env.repo("r");
    let clone_id = repo.run(&["init", "--json"]).ok().json()["clone_id"].as_str().expect("clone id").to_owned();
    let tasks = env.path("tasks.jsonl");
    std::fs::write(
        &tasks,
        "{\"id\":\"t-parser\",\"title\":\"Write the parser\"}\n{\"id\":\"t-lexer\",\"title\":\"Write the lexer\"}\n",
    )
    .expect("write tasks");
    repo.run_with(&["import", tasks.to_str().expect("utf-8")], &[at("2026-02-28T23:50:00Z")]).ok();
    let ann = [("GIT_LOOP_SESSION", "s-ann"), ("GIT_LOOP_TASK", "t-parser")];
    repo.run_with(
        &["journal", "append", "started", "--data", r#"{"message":"reading the grammar"}"#],
        &[ann[0], ann[1], at("2026-03-01T10:00:00Z")],
    )
    .ok();
    repo.run_with(
        &["journal", "append", "note", "--task", "t-lexer", "--data", r#"{"message":"tokens done\nkeywords next"}"#],
        &[("GIT_LOOP_SESSION", "s-bob"), at("2026-03-01T10:30:00Z")],
    )
    .ok();
    repo.run_with(&["done", "t-lexer", "--message", "lexer merged"], &[at("2026-03-01T11:00:00Z")]).ok();
    // Appended last, by a clock two hours slow: it still reads last (it was written after
    // everything else was seen), its time shown as its writer's clock had it.
    repo.run_with(
        &["journal", "append", "note", "--data", r#"{"reason":"written last by a slow clock"}"#],
        &[ann[0], ann[1], at("2026-03-01T09:00:00Z")],
    )
    .ok();
    (repo, clone_id)
}

/// `log` prints one line per event, in causal order (an event after every event its writer had
/// seen), whatever the writers' clocks said: time (with the date when not today), task, kind,
/// session (or the writer for commands run by hand) and the event's summary.
#[test]
fn log_prints_the_timeline_in_causal_order_one_line_per_event() {
    let env = TestEnv::new();
    let (repo, clone_id) = journal_with_sessions(&env);
    let writers: Vec<(String, &str)> = (0..4).map(|s| (format!("c-{clone_id}-{s}"), "<clone>")).collect();
    let writers: Vec<(&str, &str)> = writers.iter().map(|(w, p)| (w.as_str(), *p)).collect();
    let log = repo.run(&["log"]).ok();
    assert_eq!(
        log.stdout_with(&writers),
        "Feb 28 23:50 -            tasks_imported     <clone>\n\
         10:00       t-parser     started            s-ann  reading the grammar\n\
         10:30       t-lexer      note               s-bob  tokens done\n\
         11:00       t-lexer      task_done          <clone>  lexer merged\n\
         09:00       t-parser     note               s-ann  written last by a slow clock\n"
    );
    assert_eq!(log.stderr, "");
}

/// `log --task` (id or prefix), `--session` and `-n` narrow the timeline, and combine.
#[test]
fn log_filters_by_task_and_session_and_keeps_the_last_n() {
    let env = TestEnv::new();
    let (repo, clone_id) = journal_with_sessions(&env);
    let writers: Vec<(String, &str)> = (0..4).map(|s| (format!("c-{clone_id}-{s}"), "<clone>")).collect();
    let writers: Vec<(&str, &str)> = writers.iter().map(|(w, p)| (w.as_str(), *p)).collect();
    let log = |args: &[&str]| repo.run(&[&["log"], args].concat()).ok().stdout_with(&writers);
    assert_eq!(
        log(&["--task", "t-lexer"]),
        "10:30       t-lexer      note               s-bob  tokens done\n\
         11:00       t-lexer      task_done          <clone>  lexer merged\n",
        "--task keeps the events about that task"
    );
    assert_eq!(log(&["--task", "t-pa"]), log(&["--task", "t-parser"]), "--task takes a unique prefix");
    assert_eq!(
        log(&["--session", "s-ann"]),
        "10:00       t-parser     started            s-ann  reading the grammar\n\
         09:00       t-parser     note               s-ann  written last by a slow clock\n",
        "--session keeps that session's events"
    );
    assert_eq!(
        log(&["-n", "2"]),
        "11:00       t-lexer      task_done          <clone>  lexer merged\n\
         09:00       t-parser     note               s-ann  written last by a slow clock\n",
        "-n keeps the last n events"
    );
    assert_eq!(
        log(&["--session", "s-ann", "-n", "1"]),
        "09:00       t-parser     note               s-ann  written last by a slow clock\n",
        "-n applies after the filters"
    );
    assert_eq!(log(&["--session", "s-nobody"]), "", "a session with no events shows nothing");
    let json = repo.run(&["log", "--task", "t-lexer", "-n", "1", "--json"]).ok().json();
    let kinds: Vec<&str> =
        json["events"].as_array().expect("events").iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds, ["task_done"], "the filters apply to --json too");
    let unknown = repo.run(&["log", "--task", "t-nope"]).code(2);
    assert_eq!(unknown.stderr, "error: no task matches 't-nope'\nhint: list tasks with 'git loop list'\n");
}

/// One task's events are read through a per-task index (`.git/loop/journal-tasks/`): it must
/// always equal the full timeline filtered by that task — after events arrive from another
/// clone (a diverged chain merged by sync), after the index is deleted, and after its record
/// of indexed tips goes back in time (events met twice are listed once).
#[test]
fn a_tasks_events_read_through_its_index_equal_the_full_timeline() {
    let env = TestEnv::new();
    let remote = env.remote("origin");
    let url = remote.to_str().expect("utf-8").to_owned();
    let a = env.clone_of(&url, "a");
    let b = env.clone_of(&url, "b");
    let id = a.add(&["indexed"]);
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    let append = |repo: &Repo<'_>, n: usize, session: Option<&str>| {
        let data = format!("{{\"n\":{n}}}");
        let mut cmd = repo.command(&["journal", "append", "note", "--task", &id, "--data", &data]);
        if let Some(session) = session {
            cmd.env("GIT_LOOP_SESSION", session);
        }
        let out = cmd.output().expect("append");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let by_task = |repo: &Repo<'_>| -> Vec<String> {
        repo.run(&["log", "--task", &id, "--json"]).ok().json()["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let full = |repo: &Repo<'_>| -> Vec<String> {
        events(repo)
            .iter()
            .filter(|e| e["task"] == id.as_str())
            .map(|e| e["id"].as_str().expect("id").to_owned())
            .collect()
    };
    for n in 0..5 {
        append(&a, n, Some("s-shared"));
        append(&b, 10 + n, Some("s-shared"));
        append(&a, 20 + n, None);
    }
    assert_eq!(by_task(&a), full(&a), "before the sync");
    b.run(&["sync"]).ok();
    a.run(&["sync"]).ok();
    let merged = by_task(&a);
    assert_eq!(merged, full(&a), "after merging b's diverged chain");
    assert_eq!(merged.len(), 1 + 15, "task_added and 15 notes");
    let index = a.dir.join(".git/loop/journal-tasks");
    let old_tips = std::fs::read_to_string(index.join("tips")).expect("the index's tips");
    append(&a, 30, None);
    assert_eq!(by_task(&a), full(&a), "an event appended since");
    std::fs::write(index.join("tips"), old_tips).expect("tips back in time");
    assert_eq!(by_task(&a), full(&a), "events met twice are listed once");
    std::fs::remove_dir_all(&index).expect("delete the index");
    assert_eq!(by_task(&a), full(&a), "rebuilt from the chains");
}

/// Events written by the previous release carry no Lamport clock: they still read, ordered
/// among themselves by time as they always were, and before every event that has a clock
/// (written later, by this release), whatever the times say.
#[test]
fn events_without_a_clock_read_first_in_time_order_then_the_clocked_ones() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let empty = repo.git(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
    let mut parent: Option<String> = None;
    for (seq, (at, reason)) in
        [("2026-03-01T13:00:00Z", "old, later"), ("2026-03-01T12:30:00Z", "old, earlier")].into_iter().enumerate()
    {
        let event = serde_json::json!({
            "version": 1, "kind": "note", "at": at, "writer": "c-old00000-0", "seq": seq + 1, "by": "old <o@o>",
            "data": { "reason": reason },
        });
        let message = format!("note: {reason}\n\n{event}\n");
        let mut args = vec!["commit-tree", &empty, "-m", &message];
        if let Some(p) = &parent {
            args.extend(["-p", p]);
        }
        parent = Some(repo.git(&args));
    }
    repo.git(&["update-ref", "refs/loop/journal/c-old00000-0", parent.as_deref().expect("a tip")]);
    repo.run_with(&["journal", "append", "note", "--data", r#"{"reason":"new"}"#], &[at("2026-03-01T09:00:00Z")]).ok();
    let reasons: Vec<(String, Option<u64>)> = events(&repo)
        .iter()
        .map(|e| (e["data"]["reason"].as_str().expect("reason").to_owned(), e["lamport"].as_u64()))
        .collect();
    assert_eq!(
        reasons,
        [("old, earlier".to_owned(), None), ("old, later".to_owned(), None), ("new".to_owned(), Some(1))],
        "the old by time, then the new by clock"
    );
}

/// Events of kinds this version does not know (a newer version's), and a known kind whose
/// data does not read, are kept: a walk reads the task's journal through the typed events
/// (try numbering, an unfinished try or race) and goes on, and `log --json` shows them as
/// they were written.
#[test]
fn events_of_unknown_kinds_survive_a_walk_and_show_in_log_json() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Write hello", "--body", "create hello.txt"]);
    let newer = serde_json::json!({ "try": 9, "plan": { "steps": ["a", "b"] }, "cost_usd": 0.25 });
    repo.run(&["journal", "append", "cost_recorded", "--task", &id, "--data", &newer.to_string()]).ok();
    let unreadable = serde_json::json!({ "try": "two", "agent": 7 });
    repo.run(&["journal", "append", "race_won", "--task", &id, "--data", &unreadable.to_string()]).ok();
    let cmd = env.agent("hello", "echo hello > hello.txt\ngit loop finish done --message 'wrote hello'");
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "60s"]).ok();
    let all = events(&repo);
    let of = |kind: &str| all.iter().filter(|e| e["kind"] == kind).map(|e| e["data"].clone()).collect::<Vec<_>>();
    assert_eq!(of("cost_recorded"), [newer], "the newer version's event is shown unchanged");
    assert_eq!(of("race_won"), [unreadable], "the unreadable one too");
    // The walk numbered its try as if they were not there, and closed the task.
    let opened = of("try_opened");
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert_eq!(opened[0]["try"], 1);
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done");
}
