//! Claims in one repository: exit codes, leases, takeover, release, and the C1 race.

use std::process::Stdio;

use crate::harness::{Repo, TestEnv};

fn at(t: &str) -> [(&str, &str); 1] {
    [("GIT_LOOP_NOW", t)]
}

/// Tasks with these ids (imported), so that `node:` claims on them name real tasks.
fn tasks(repo: &Repo<'_>, ids: &[&str]) {
    let lines: String =
        ids.iter().map(|id| format!("{}\n", serde_json::json!({ "id": id, "title": format!("task {id}") }))).collect();
    let file = repo.env.path("tasks.jsonl");
    std::fs::write(&file, lines).expect("write tasks");
    repo.run(&["import", file.to_str().expect("utf-8")]).ok();
}

#[test]
fn acquire_refresh_refuse_and_release_with_their_exit_codes() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    tasks(&repo, &["t-1"]);
    let got = repo.run(&["claim", "acquire", "node:t-1", "--holder", "ann", "--ttl", "30m", "--reason", "parser"]).ok();
    assert_eq!(got.stdout, "acquired node:t-1, held until 12:30 (in 30 min)\n");
    let again = repo
        .run_with(&["claim", "acquire", "node:t-1", "--holder", "ann", "--ttl", "30m"], &at("2026-03-01T12:10:00Z"))
        .ok();
    assert_eq!(
        again.stdout, "refreshed node:t-1, held until 12:40 (in 30 min)\n",
        "a same-holder re-acquire refreshes the lease"
    );
    let refused =
        repo.run_with(&["claim", "acquire", "node:t-1", "--holder", "bob"], &at("2026-03-01T12:20:00Z")).code(1);
    assert_eq!(
        refused.stderr,
        "error: claim 'node:t-1' is held by ann (parser): unchanged for 10 min of its 30 min lease\nhint: pick another task with 'git loop next'\n"
    );
    let json = repo
        .run_with(&["claim", "acquire", "node:t-1", "--holder", "bob", "--json"], &at("2026-03-01T12:20:00Z"))
        .code(1)
        .json();
    assert_eq!((json["outcome"].as_str(), json["claim"]["holder"].as_str()), (Some("held"), Some("ann")));
    let not_yours = repo.run(&["claim", "release", "node:t-1", "--holder", "bob"]).code(1);
    assert_eq!(
        not_yours.stderr,
        "error: claim 'node:t-1' is held by ann, not bob\nhint: only its holder can release a live claim\n"
    );
    repo.run(&["claim", "release", "node:t-1", "--holder", "ann"]).ok();
    assert_eq!(repo.run(&["claim", "release", "node:t-1", "--holder", "ann"]).ok().stdout, "node:t-1 was not held\n");
    let record: serde_json::Value =
        serde_json::from_str(&repo.git(&["cat-file", "-p", "refs/loop/claims/node/t-1"])).expect("a record");
    assert!(
        record["released_at"].is_string(),
        "a release leaves a tombstone, never a deleted ref (pack-refs could resurrect it)"
    );
    assert_eq!(repo.run(&["claim", "list", "--include-stale", "--json"]).ok().json()["claims"], serde_json::json!([]));
    repo.run(&["claim", "acquire", "node:t-1", "--holder", "bob"]).ok();
}

/// A claim this clone has seen unchanged (not refreshed) for its whole lease, by its own
/// clock, is stale: hidden from `claim list`, listed as stale with --include-stale, and taken
/// over. This clone saw it from the moment it was written here (12:00).
#[test]
fn a_claim_seen_unchanged_for_its_lease_is_taken_over_and_listed_as_stale_until_then() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    tasks(&repo, &["t-9"]);
    repo.run(&["claim", "acquire", "node:t-9", "--holder", "old", "--ttl", "10m"]).ok();
    let live = repo.run_with(&["claim", "list"], &at("2026-03-01T12:05:00Z")).ok();
    assert_eq!(
        live.stdout,
        "node:t-9                 old              live   taken 5 min ago, unchanged for 5 min of its 10 min lease\n"
    );
    let later = at("2026-03-01T12:30:00Z");
    let hidden = repo.run_with(&["claim", "list"], &later).ok();
    assert_eq!(hidden.stdout, "", "stale claims are hidden by default");
    let listed = repo.run_with(&["claim", "list", "--include-stale", "--json"], &later).ok().json();
    let claim = &listed["claims"][0];
    assert_eq!(
        (claim["status"].as_str(), claim["lease_s"].as_u64(), claim["unchanged_s"].as_u64()),
        (Some("stale"), Some(600), Some(1800))
    );
    let taken = repo.run_with(&["claim", "acquire", "node:t-9", "--holder", "new"], &later).ok();
    assert_eq!(
        taken.stdout,
        "took over node:t-9 from old (unchanged for its whole 10 min lease), held until 13:30 (in 1 h)\n"
    );
    let json = repo.run_with(&["claim", "list", "--json"], &later).ok().json();
    assert_eq!(
        (json["claims"][0]["holder"].as_str(), json["claims"][0]["took_over_from"].as_str()),
        (Some("new"), Some("old"))
    );
}

/// A record whose holder's clock runs an hour slow "expired" long before this clone first
/// saw it: it is live all the same until this clone has watched it for its lease.
#[test]
fn a_claim_written_by_a_clock_an_hour_slow_is_live_until_watched_for_its_whole_lease() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    tasks(&repo, &["t-1"]);
    repo.run_with(&["claim", "acquire", "node:t-1", "--holder", "slow", "--ttl", "30m"], &at("2026-03-01T11:00:00Z"))
        .ok();
    // As if written on another clone: this one has never seen it.
    std::fs::remove_file(repo.dir.join(".git/loop/leases")).expect("the writer's sight is kept here");
    let first = repo.run(&["claim", "acquire", "node:t-1", "--holder", "bob"]).code(1);
    assert_eq!(
        first.stderr,
        "error: claim 'node:t-1' is held by slow: unchanged for 0 s of its 30 min lease\nhint: pick another task with 'git loop next'\n",
        "its expiry (11:30 by the holder's clock) is no reason to take it"
    );
    repo.run_with(&["claim", "acquire", "node:t-1", "--holder", "bob"], &at("2026-03-01T12:29:59Z")).code(1);
    let shown = repo.run_with(&["claim", "list", "--include-stale"], &at("2026-03-01T12:30:00Z")).ok();
    assert!(shown.stdout.contains(" stale  taken 1 h ago, unchanged for 30 min"), "{}", shown.stdout);
    let taken =
        repo.run_with(&["claim", "acquire", "node:t-1", "--holder", "bob", "--json"], &at("2026-03-01T12:30:00Z")).ok();
    assert_eq!(taken.json()["previous_holder"], "slow");
}

#[test]
fn bad_keys_and_holders_are_usage_errors_before_any_work() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    for key in
        ["node", "node:", "Node:x", "node:A", "node:a/b", "node:..", "node:x.lock", "node:-x", "node:a b", "node:é"]
    {
        let out = repo.run(&["claim", "acquire", key, "--holder", "h"]).code(2);
        assert!(out.stderr.starts_with("error: "), "{key}: {}", out.stderr);
    }
    repo.run(&["claim", "acquire", "node:x"]).code(2);
    repo.run(&["claim", "acquire", "node:x", "--holder", "h", "--ttl", "soon"]).code(2);
    assert!(repo.git(&["for-each-ref", "refs/loop"]).is_empty(), "nothing was written");
}

/// A task's claim names a real task: a unique prefix claims the task it means (so `next`
/// skips that task), an unknown id or an ambiguous prefix is refused before anything is
/// written; other kinds of claims name whatever they like.
#[test]
fn a_tasks_claim_takes_a_unique_prefix_to_its_full_id_and_refuses_unknown_or_ambiguous_ones() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    tasks(&repo, &["bd-a1", "bd-a2", "t-4f2a9k3m"]);
    let got = repo.run(&["claim", "acquire", "node:4f2a", "--holder", "ann", "--json"]).ok().json();
    assert_eq!((got["outcome"].as_str(), got["key"].as_str()), (Some("acquired"), Some("node:t-4f2a9k3m")));
    assert_eq!(repo.run(&["claim", "list", "--json"]).ok().json()["claims"][0]["key"], "node:t-4f2a9k3m");
    assert_eq!(
        repo.run(&["list", "--json"]).ok().json()["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .find(|t| t["id"] == "t-4f2a9k3m")
            .map(|t| (t["ready"].clone(), t["claim"]["holder"].clone())),
        Some((serde_json::json!(false), serde_json::json!("ann"))),
        "the task the prefix means is claimed"
    );
    assert_eq!(
        repo.run(&["claim", "acquire", "node:t-4f2a", "--holder", "bob"]).code(1).stderr.lines().next(),
        Some("error: claim 'node:t-4f2a9k3m' is held by ann: unchanged for 0 s of its 1 h lease")
    );
    let before = repo.git(&["for-each-ref", "refs/loop/claims"]);
    let unknown = repo.run(&["claim", "acquire", "node:t-doesnotexist", "--holder", "ann"]).code(2);
    assert_eq!(unknown.stderr, "error: no task matches 't-doesnotexist'\nhint: list tasks with 'git loop list'\n");
    let ambiguous = repo.run(&["claim", "acquire", "node:bd-a", "--holder", "ann"]).code(2);
    assert_eq!(ambiguous.stderr, "error: 'bd-a' matches 2 tasks: bd-a1, bd-a2\nhint: type more of the id\n");
    assert_eq!(repo.git(&["for-each-ref", "refs/loop/claims"]), before, "nothing was written");
    // Release takes the prefix too; other kinds are free-form.
    assert_eq!(
        repo.run(&["claim", "release", "node:4f2a", "--holder", "ann"]).ok().stdout,
        "released node:t-4f2a9k3m (taken just now)\n"
    );
    repo.run(&["claim", "acquire", "deploy:prod-eu", "--holder", "ann"]).ok();
    repo.run(&["claim", "release", "deploy:prod-eu", "--holder", "ann"]).ok();
}

/// Run `n` claimants of `key` at once; returns how many report each outcome.
fn race(repo: &Repo<'_>, key: &str, holders: &[String]) -> (usize, usize, usize) {
    let children: Vec<_> = holders
        .iter()
        .map(|h| {
            repo.command(&["claim", "acquire", key, "--holder", h, "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a claimant")
        })
        .collect();
    let (mut acquired, mut refreshed, mut held) = (0, 0, 0);
    for child in children {
        let out = child.wait_with_output().expect("claimant finishes");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("claimant printed no JSON: {}", String::from_utf8_lossy(&out.stderr)));
        match json["outcome"].as_str() {
            Some("acquired") => acquired += 1,
            Some("refreshed") => refreshed += 1,
            Some("held") => held += 1,
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    (acquired, refreshed, held)
}

/// C1: 32 processes claim one key at once, 50 rounds, with distinct and with identical
/// holders: exactly one creates the claim each round.
#[test]
fn c1_thirty_two_claimants_get_exactly_one_winner_per_round() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let distinct: Vec<String> = (0..32).map(|i| format!("agent-{i}")).collect();
    let identical: Vec<String> = (0..32).map(|_| "same-agent".to_owned()).collect();
    for round in 0..50 {
        let key = format!("lock:round-{round}");
        let (acquired, _, held) = race(&repo, &key, &distinct);
        assert_eq!((acquired, held), (1, 31), "round {round}, distinct holders: exactly one winner");
        let key = format!("lock:same-{round}");
        let (acquired, refreshed, held) = race(&repo, &key, &identical);
        assert_eq!((acquired, refreshed + held), (1, 31), "round {round}, identical holders: exactly one creates it");
    }
}

/// The control for C1: claimants that write the ref without compare-and-swap (`git update-ref`
/// with no old value) all "win". If this ever found a single winner, the race above would not
/// be proving anything.
#[test]
fn c1_control_blind_writers_all_believe_they_won() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let blob = repo.git(&["hash-object", "-w", "README"]);
    let mut winners_over_rounds = 0;
    for round in 0..5 {
        let name = format!("refs/loop/claims/node/blind-{round}");
        let children: Vec<_> = (0..32)
            .map(|_| {
                let mut cmd = std::process::Command::new("git");
                env.seal(&mut cmd).args(["update-ref", &name, &blob]).current_dir(&repo.dir).spawn().expect("spawn")
            })
            .collect();
        let winners =
            children.into_iter().map(|c| c.wait_with_output().expect("wait")).filter(|o| o.status.success()).count();
        winners_over_rounds += winners;
    }
    assert!(
        winners_over_rounds > 5,
        "blind writers must produce double claims ({winners_over_rounds} winners in 5 rounds)"
    );
}
