//! `next --claim` under contention: agents taking work from one backlog at the same time
//! never get the same task, and losing a task to another agent moves on to the next one.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{Daemon, Repo, TestEnv};

/// A backlog of `n` ready tasks t-0001..., added in one import.
fn backlog(env: &TestEnv, repo: &Repo<'_>, n: usize) {
    let lines: String = (1..=n).map(|i| format!("{{\"id\":\"t-{i:04}\",\"title\":\"task {i}\"}}\n")).collect();
    let file = env.path("tasks.jsonl");
    std::fs::write(&file, lines).expect("write tasks");
    let imported = repo.run(&["import", file.to_str().expect("utf-8")]).ok();
    assert_eq!(imported.stdout, format!("imported {n} tasks, skipped 0 already present\n"));
}

/// Run `agents` agents at once, each making `calls` calls of `git loop <args> --json` one
/// after another (`{agent}` in an argument is replaced by `agent-<i>`). Returns, per agent,
/// the task id each call printed (None for `null`).
fn agents(repo: &Repo<'_>, agents: usize, calls: usize, args: &[&str]) -> Vec<Vec<Option<String>>> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..agents)
            .map(|i| {
                scope.spawn(move || {
                    let holder = format!("agent-{i}");
                    let args: Vec<String> = args.iter().map(|a| a.replace("{agent}", &holder)).collect();
                    (0..calls)
                        .map(|call| {
                            let out = repo
                                .command(&args)
                                .stdout(Stdio::piped())
                                .stderr(Stdio::piped())
                                .output()
                                .expect("run an agent's call");
                            let stderr = String::from_utf8_lossy(&out.stderr);
                            assert!(out.status.success(), "{holder} call {call} failed: {stderr}");
                            let json: serde_json::Value = serde_json::from_slice(&out.stdout)
                                .unwrap_or_else(|_| panic!("{holder} call {call} printed no JSON: {stderr}"));
                            if args.iter().any(|a| a == "--claim") && !json.is_null() {
                                assert_eq!(json["claim"]["holder"], holder.as_str(), "the claim is the caller's");
                            }
                            json["id"].as_str().map(ToOwned::to_owned)
                        })
                        .collect()
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("agent thread")).collect()
    })
}

/// Tasks handed to more than one call: id -> the agents that got it.
fn handed_out_twice(got: &[Vec<Option<String>>]) -> BTreeMap<String, Vec<String>> {
    let mut by_task: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, calls) in got.iter().enumerate() {
        for id in calls.iter().flatten() {
            by_task.entry(id.clone()).or_default().push(format!("agent-{i}"));
        }
    }
    by_task.retain(|_, agents| agents.len() > 1);
    by_task
}

/// 8 agents call `next --claim` 50 times each, all at once, over 420 ready tasks: no task is
/// claimed twice, at least 95% of the calls get a task, and every task handed out is on
/// record as claimed by the agent that got it.
#[test]
fn eight_agents_claiming_at_once_never_get_the_same_task() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    backlog(&env, &repo, 420);
    let started = Instant::now();
    let got = agents(&repo, 8, 50, &["next", "--claim", "--holder", "{agent}", "--json"]);
    let took = started.elapsed();
    let calls = 8 * 50;
    let served = got.iter().flatten().flatten().count();
    let twice = handed_out_twice(&got);
    eprintln!(
        "next --claim: 8 agents x 50 calls over 420 tasks: {served}/{calls} calls got a task ({:.1}%), \
         tasks claimed twice: {}, wall time {took:.1?}",
        served as f64 * 100.0 / calls as f64,
        twice.len()
    );
    assert!(twice.is_empty(), "no task is claimed by two calls: {twice:?}");
    assert!(served * 100 >= calls * 95, "at least 95% of the calls get a task ({served}/{calls})");
    let listed = repo.run(&["claim", "list", "--prefix", "node:", "--json"]).ok().json();
    let on_record: BTreeMap<String, String> = listed["claims"]
        .as_array()
        .expect("claims")
        .iter()
        .map(|c| {
            let key = c["key"].as_str().expect("key").trim_start_matches("node:").to_owned();
            (key, c["holder"].as_str().expect("holder").to_owned())
        })
        .collect();
    let handed_out: BTreeMap<String, String> = got
        .iter()
        .enumerate()
        .flat_map(|(i, calls)| calls.iter().flatten().map(move |id| (id.clone(), format!("agent-{i}"))))
        .collect();
    assert_eq!(on_record, handed_out, "the claims on record are exactly the tasks handed out, to those agents");
}

/// The control: the same agents calling plain `next` (no claim) are handed the same tasks,
/// so the duplicate count above can catch a task given to two agents.
#[test]
fn control_agents_that_do_not_claim_get_the_same_tasks() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    backlog(&env, &repo, 20);
    let got = agents(&repo, 8, 5, &["next", "--json"]);
    let twice = handed_out_twice(&got);
    let colliding: usize = twice.values().map(Vec::len).sum();
    eprintln!("next without --claim: 8 agents x 5 calls: {} tasks handed to {colliding} calls", twice.len());
    assert!(!twice.is_empty(), "without claims, agents must collide, or the count above proves nothing");
}

/// One `next --claim` call of the fleet test: what it printed and how long it took.
struct FleetCall {
    code: i32,
    task: Option<String>,
    stderr: String,
    took: Duration,
}

/// The pack files in a repository's object database.
fn packs(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(".git/objects/pack"))
        .map(|entries| entries.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "pack")).count())
        .unwrap_or(0)
}

/// The fleet: 8 clones of one remote served by `git daemon` on 127.0.0.1, each with one agent
/// calling `next --claim` 30 times one after another (`GIT_LOOP_FLEET_CALLS` for more: 50 was
/// the size before the suite had to finish in minutes), all clones at once, over 20 more ready
/// tasks than calls. No task is claimed twice; at least 99% of the calls succeed (with 20 tasks more than
/// calls, success is a task); no call waits behind the others' for long (the p95 under 5 s:
/// before the fleet's fixes it was 6.3 s, and calls failed); and no clone gathers more packs
/// than docs/performance.md allows for its few thousand objects. The latency figure itself
/// (p95 ≤ 1 s) is a benchmark's, measured in a release build with the machine to itself:
/// `cargo bench -- claims-fleet` (docs/performance.md).
#[test]
fn eight_clones_claiming_through_a_git_daemon_get_distinct_tasks_quickly() {
    let _one_fleet_at_a_time = crate::harness::fleet();
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let daemon = Daemon::start(&env);
    let url = daemon.url(&bare);
    let seed = env.clone_of(&url, "seed");
    seed.run(&["init", "--remote", "origin"]).ok();
    let per_clone: usize = std::env::var("GIT_LOOP_FLEET_CALLS").ok().and_then(|n| n.parse().ok()).unwrap_or(30);
    backlog(&env, &seed, 8 * per_clone + 20);
    seed.run(&["sync"]).ok();
    let clones: Vec<Repo<'_>> = (0..8)
        .map(|i| {
            let clone = env.clone_of(&url, &format!("clone-{i}"));
            clone.run(&["init", "--remote", "origin"]).ok();
            clone.run(&["sync"]).ok();
            clone
        })
        .collect();
    let started = Instant::now();
    let calls: Vec<Vec<FleetCall>> = std::thread::scope(|scope| {
        let runs: Vec<_> = clones
            .iter()
            .enumerate()
            .map(|(i, clone)| {
                scope.spawn(move || {
                    let holder = format!("agent-{i}");
                    (0..per_clone)
                        .map(|_| {
                            let began = Instant::now();
                            let out = clone
                                .command(&["next", "--claim", "--holder", &holder, "--json"])
                                .stdout(Stdio::piped())
                                .stderr(Stdio::piped())
                                .output()
                                .expect("run an agent's call");
                            let took = began.elapsed();
                            let json: Option<serde_json::Value> = serde_json::from_slice(&out.stdout).ok();
                            FleetCall {
                                code: out.status.code().unwrap_or(-1),
                                task: json.as_ref().and_then(|j| j["id"].as_str()).map(ToOwned::to_owned),
                                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                                took,
                            }
                        })
                        .collect()
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("agent thread")).collect()
    });
    let wall = started.elapsed();
    let all: Vec<&FleetCall> = calls.iter().flatten().collect();
    let failed: Vec<&&FleetCall> = all.iter().filter(|c| c.code != 0 || c.task.is_none()).collect();
    let mut times: Vec<Duration> = all.iter().map(|c| c.took).collect();
    times.sort();
    let p = |q: f64| times[((times.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    let got: Vec<Vec<Option<String>>> = calls.iter().map(|c| c.iter().map(|c| c.task.clone()).collect()).collect();
    let twice = handed_out_twice(&got);
    let packs: Vec<usize> = clones.iter().map(|c| packs(&c.dir)).collect();
    eprintln!(
        "fleet next --claim: 8 clones x {per_clone} calls over {} tasks through git daemon: {} of {} calls failed, \
         tasks claimed twice: {}, call time p50 {:.0?} p95 {:.0?} max {:.1?}, wall {wall:.1?}; \
         packs per clone {packs:?}",
        8 * per_clone + 20,
        failed.len(),
        all.len(),
        twice.len(),
        p(0.5),
        p(0.95),
        p(1.0),
    );
    for call in failed.iter().take(5) {
        eprintln!("  a failed call (exit {}): {}", call.code, call.stderr.trim());
    }
    assert!(twice.is_empty(), "no task is claimed by two calls: {twice:?}");
    assert!(failed.len() * 100 <= all.len(), "at least 99% of the calls succeed ({} failed)", failed.len());
    assert!(p(0.95) <= Duration::from_secs(5), "the 95th percentile of a call is under 5 s ({:?})", p(0.95));
    // Up to 8,191 objects: at most 7 packs beside a geometric progression of at most 13.
    assert!(packs.iter().all(|&n| n <= 20), "no clone gathers packs: {packs:?}");
}
