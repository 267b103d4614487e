//! `next --claim` under contention: agents taking work from one backlog at the same time
//! never get the same task, and losing a task to another agent moves on to the next one.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Instant;

use crate::harness::{Repo, TestEnv};

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
