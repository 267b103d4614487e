//! Claims arbitrated by a shared remote that a real `git daemon --enable=receive-pack` serves
//! on 127.0.0.1: the race across clones (C2) with its forced-push control, the race to take
//! over a stale claim (C3), a push whose outcome the client never learns (C4), a server
//! without atomic pushes (C7), and a server that refuses (C8). C2 and a sync round trip run
//! through smart HTTP too (`git http-backend` behind lighttpd), where git-loop fetches and
//! pushes with the git program.

use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Daemon, HttpServer, Repo, TestEnv};

/// `n` clones of the remote at `url`, each with `loop.remote = origin`.
fn clones<'e>(env: &'e TestEnv, url: &str, n: usize) -> Vec<Repo<'e>> {
    (0..n)
        .map(|i| {
            let clone = env.clone_of(url, &format!("clone-{i}"));
            clone.run(&["init", "--remote", "origin"]).ok();
            clone
        })
        .collect()
}

/// What a ref holds in repository `dir` (bare or not), or "" when it does not exist.
fn ref_value(env: &TestEnv, dir: &Path, name: &str) -> String {
    env.git(dir, &["for-each-ref", "--format=%(objectname)", name])
}

/// The claim record a remote's ref points to.
fn remote_record(env: &TestEnv, bare: &Path, name: &str) -> Value {
    let oid = env.git(bare, &["rev-parse", "--verify", name]);
    serde_json::from_str(&env.git(bare, &["cat-file", "-p", &oid])).expect("a claim record is JSON")
}

/// A small deterministic generator (splitmix64), so jitter differs between rounds but every
/// run of the test sees the same sequence.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// When each of `n` racers starts in round `round`: even rounds all at once, odd rounds
/// spread over 0-300 ms, so the racers also interleave with each other's pushes and fetches
/// (and arrive one after another, which is what lets blind writers overwrite each other).
fn jitter(round: usize, n: usize) -> Vec<Duration> {
    if round.is_multiple_of(2) {
        return vec![Duration::ZERO; n];
    }
    let mut state = round as u64;
    (0..n).map(|_| Duration::from_millis(splitmix(&mut state) % 301)).collect()
}

/// One claimant's result in a race.
#[derive(Debug)]
struct Claimant {
    holder: String,
    code: i32,
    outcome: String,
    /// The holder the answer names (ours when we won, the winner's when told it is held).
    claim_holder: String,
    /// The claim object the answer names.
    object: String,
    previous_holder: Option<String>,
}

/// Every clone claims `key` at the same time, clone `i` as `clone-i`, each after waiting
/// `jitter[i]` (no jitter: all are spawned at once).
fn race(clones: &[Repo<'_>], key: &str, vars: &[(&str, &str)], jitter: &[Duration]) -> Vec<Claimant> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = clones
            .iter()
            .zip(jitter)
            .enumerate()
            .map(|(i, (clone, pause))| {
                scope.spawn(move || {
                    let holder = format!("clone-{i}");
                    if !pause.is_zero() {
                        std::thread::sleep(*pause);
                    }
                    let mut cmd = clone.command(&["claim", "acquire", key, "--holder", &holder, "--json"]);
                    cmd.envs(vars.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped());
                    let out = cmd.output().expect("run a claimant");
                    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
                        panic!("{holder} printed no JSON: {}", String::from_utf8_lossy(&out.stderr))
                    });
                    Claimant {
                        holder,
                        code: out.status.code().unwrap_or(-1),
                        outcome: json["outcome"].as_str().unwrap_or("?").to_owned(),
                        claim_holder: json["claim"]["holder"].as_str().unwrap_or("?").to_owned(),
                        object: json["claim"]["object"].as_str().unwrap_or("?").to_owned(),
                        previous_holder: json["previous_holder"].as_str().map(ToOwned::to_owned),
                    }
                })
            })
            .collect();
        runs.into_iter().map(|run| run.join().expect("claimant thread")).collect()
    })
}

/// Check one round: exactly one claimant reports `winning` (exit 0), every other one is told
/// (exit 1) that the winner holds it, and the remote's ref holds the winner's record.
fn check_round(env: &TestEnv, bare: &Path, round: usize, key: &str, winning: &str, results: &[Claimant]) -> usize {
    let winners: Vec<&Claimant> = results.iter().filter(|r| r.outcome == winning).collect();
    assert_eq!(winners.len(), 1, "round {round}: exactly one claimant reports '{winning}': {results:#?}");
    let winner = winners[0];
    assert_eq!((winner.code, winner.claim_holder.as_str()), (0, winner.holder.as_str()), "{results:#?}");
    for loser in results.iter().filter(|r| r.holder != winner.holder) {
        assert_eq!(
            (loser.code, loser.outcome.as_str(), loser.claim_holder.as_str(), loser.object.as_str()),
            (1, "held", winner.holder.as_str(), winner.object.as_str()),
            "round {round}: a loser exits 1 and is shown the winner's claim: {results:#?}"
        );
    }
    let name = format!("refs/loop/claims/{}", key.replacen(':', "/", 1));
    assert_eq!(
        env.git(bare, &["rev-parse", "--verify", &name]),
        winner.object,
        "round {round}: the remote's ref holds the winner's record"
    );
    assert_eq!(remote_record(env, bare, &name)["holder"], winner.holder.as_str());
    winners.len()
}

/// `rounds` rounds of C2: every clone claims a fresh key at once (or spread over 0-300 ms
/// every other round), and each round is checked. Returns the winners of each round.
fn c2_rounds(env: &TestEnv, bare: &Path, clones: &[Repo<'_>], rounds: usize) -> Vec<usize> {
    (0..rounds)
        .map(|round| {
            let key = format!("lock:c2-{round}");
            let results = race(clones, &key, &[], &jitter(round, clones.len()));
            check_round(env, bare, round, &key, "acquired", &results)
        })
        .collect()
}

/// C2: 8 clones claim the same key through the daemon, 20 rounds (all at once, or spread
/// over 0-300 ms every other round): each round exactly one acquires it, the other seven are
/// told who holds it, and the remote holds the winner's record.
#[test]
fn c2_eight_clones_racing_through_a_git_daemon_get_exactly_one_winner_per_round() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let daemon = Daemon::start(&env);
    let clones = clones(&env, &daemon.url(&bare), 8);
    let winners_per_round = c2_rounds(&env, &bare, &clones, 20);
    eprintln!("C2: 20 rounds x 8 clones (odd rounds spread over 0-300 ms): winners per round {winners_per_round:?}");
}

/// C2 through smart HTTP: the same race, 8 rounds, where every claim is a `git push` to
/// `git http-backend` behind lighttpd and every read of the remote a `git ls-remote`/`fetch`
/// over HTTP (git-loop's gix has no http transport): exactly one winner per round.
#[test]
fn c2_eight_clones_racing_through_smart_http_get_exactly_one_winner_per_round() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let Some(server) = HttpServer::start(&env) else { return };
    let clones = clones(&env, &server.url(&bare), 8);
    let winners_per_round = c2_rounds(&env, &bare, &clones, 8);
    eprintln!(
        "C2 over HTTP: 8 rounds x 8 clones (odd rounds spread over 0-300 ms): winners per round {winners_per_round:?}"
    );
}

/// `sync` through smart HTTP with basic authentication, alice and bob each cloning with their
/// own credentials: alice's task and claim reach bob, bob's claim attempt is refused because
/// alice holds it, both edit the task offline and sync in turn, and both clones and the remote
/// end on the same merged tip. The server's pre-receive hook sees who pushed (REMOTE_USER),
/// and a clone without credentials is refused without a prompt.
#[test]
fn sync_round_trips_between_two_clones_through_smart_http_with_basic_auth() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let Some(server) = HttpServer::start_with_users(&env, &[("alice", "pw-a"), ("bob", "pw-b")]) else { return };
    let pushers = env.path("pushers");
    let hook = bare.join("hooks/pre-receive");
    std::fs::write(&hook, format!("#!/bin/sh\necho \"$REMOTE_USER\" >> '{}'\n", pushers.display()))
        .expect("write hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod hook");
    let alice = env.clone_of(&server.url_as(&bare, "alice"), "alice");
    let bob = env.clone_of(&server.url_as(&bare, "bob"), "bob");
    for clone in [&alice, &bob] {
        clone.run(&["init", "--remote", "origin"]).ok();
    }

    let task = alice.add(&["shared over http"]);
    let dep = alice.add(&["its dependency"]);
    let key = format!("node:{task}");
    alice.run(&["claim", "acquire", &key, "--holder", "alice"]).ok();
    alice.run(&["sync"]).ok();
    bob.run(&["sync"]).ok();
    let listed = bob.run(&["list", "--json"]).ok().json();
    let mut titles: Vec<&str> =
        listed["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["title"].as_str()).collect();
    titles.sort_unstable();
    assert_eq!(titles, ["its dependency", "shared over http"], "alice's tasks reached bob");
    let refused = bob.run(&["claim", "acquire", &key, "--holder", "bob", "--json"]).code(1).json();
    assert_eq!(
        (refused["outcome"].as_str(), refused["claim"]["holder"].as_str()),
        (Some("held"), Some("alice")),
        "the remote says alice holds it"
    );

    alice.run(&["edit", &task, "-p", "p0"]).ok();
    bob.run_with(&["edit", &task, "--after", &dep], &[("GIT_LOOP_NOW", "2026-03-01T12:05:00Z")]).ok();
    for clone in [&alice, &bob, &alice] {
        clone.run(&["sync"]).ok();
    }
    let name = format!("refs/loop/tasks/{task}");
    let (tip_a, tip_b) = (alice.git(&["rev-parse", &name]), bob.git(&["rev-parse", &name]));
    assert_eq!(tip_a, tip_b, "both clones hold the same merged tip");
    assert_eq!(env.git(&bare, &["rev-parse", &name]), tip_a, "and so does the remote");
    let merged = bob.run(&["show", &task, "--json"]).ok().json();
    assert_eq!((&merged["priority"], &merged["after"]), (&serde_json::json!("p0"), &serde_json::json!([dep])));
    assert_eq!(bob.run(&["sync"]).ok().stdout, "", "a second sync has nothing left to do");

    let mut who: Vec<String> =
        std::fs::read_to_string(&pushers).expect("the hook ran").lines().map(ToOwned::to_owned).collect();
    who.sort_unstable();
    who.dedup();
    assert_eq!(who, ["alice", "bob"], "the server's hook saw each pusher's user");
    let anonymous = env
        .seal(&mut Command::new("git"))
        .args(["ls-remote", &server.url(&bare)])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("run git ls-remote");
    assert!(!anonymous.status.success(), "a request without credentials is refused");
}

/// The control for C2: the same 8 clones, on the same schedule, write the claim ref with a
/// plain forced push of a distinct record each. Several of them "win" (exit 0 having written
/// their own record); if this ever found a single winner per round, the race above would
/// prove nothing. (Pushes that start at the same instant mostly fail even with --force:
/// receive-pack checks the value it advertised under the ref lock. Those that arrive one
/// after another overwrite each other.)
#[test]
fn c2_control_forced_pushes_through_the_daemon_let_several_clones_win() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let daemon = Daemon::start(&env);
    let clones = clones(&env, &daemon.url(&bare), 8);
    let rounds = 6;
    let mut winners_per_round = Vec::new();
    for round in 0..rounds {
        let name = format!("refs/loop/claims/lock/forced-{round}");
        let blobs: Vec<String> = clones
            .iter()
            .enumerate()
            .map(|(i, clone)| {
                let file = clone.dir.join(format!("record-{round}"));
                std::fs::write(&file, format!("{{\"holder\":\"clone-{i}\",\"round\":{round}}}\n")).expect("write");
                clone.git(&["hash-object", "-w", file.to_str().expect("utf-8 path")])
            })
            .collect();
        let winners = std::thread::scope(|scope| {
            let pushes: Vec<_> = clones
                .iter()
                .zip(&blobs)
                .zip(jitter(round, 8))
                .map(|((clone, blob), pause)| {
                    let env = &env;
                    let name = &name;
                    scope.spawn(move || {
                        std::thread::sleep(pause);
                        env.seal(&mut Command::new("git"))
                            .args(["push", "-q", "--force", "origin", &format!("{blob}:{name}")])
                            .current_dir(&clone.dir)
                            .stdout(Stdio::null())
                            .stderr(Stdio::null())
                            .status()
                            .expect("run a forced push")
                            .success()
                    })
                })
                .collect();
            pushes.into_iter().map(|p| p.join().expect("pusher thread")).filter(|won| *won).count()
        });
        winners_per_round.push(winners);
    }
    let double_claims: usize = winners_per_round.iter().map(|w| w.saturating_sub(1)).sum();
    eprintln!("C2 control: forced pushes, winners per round {winners_per_round:?}, double claims {double_claims}");
    assert!(
        double_claims > 0,
        "forced pushes must produce double claims, or the C2 count could never catch one ({winners_per_round:?})"
    );
}

/// C3: a claim left unrefreshed is taken over by 8 clones, 10 rounds (all at once, or spread
/// over 0-300 ms every other round): exactly one takes it over each round. Each clone first
/// sees the claim (its attempt at 12:00 is refused: held), and races for it at 13:00 by its
/// own clock, having seen the same record for an hour of a 1-minute lease.
#[test]
fn c3_eight_clones_taking_over_one_stale_claim_get_exactly_one_takeover_per_round() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let daemon = Daemon::start(&env);
    let clones = clones(&env, &daemon.url(&bare), 8);
    let later = [("GIT_LOOP_NOW", "2026-03-01T13:00:00Z")];
    let mut takeovers_per_round = Vec::new();
    for round in 0..10 {
        let key = format!("lock:c3-{round}");
        clones[0].run(&["claim", "acquire", &key, "--holder", "old", "--ttl", "1m"]).ok();
        let seen = race(&clones, &key, &[], &[Duration::ZERO; 8]);
        assert!(
            seen.iter().all(|r| r.outcome == "held" && r.claim_holder == "old"),
            "round {round}: at first sight the claim is live in every clone: {seen:#?}"
        );
        let results = race(&clones, &key, &later, &jitter(round, 8));
        takeovers_per_round.push(check_round(&env, &bare, round, &key, "taken_over", &results));
        let winner = results.iter().find(|r| r.outcome == "taken_over").expect("checked above");
        assert_eq!(winner.previous_holder.as_deref(), Some("old"), "round {round}: the winner took it from 'old'");
    }
    eprintln!(
        "C3: 10 rounds x 8 clones (odd rounds spread over 0-300 ms): takeovers per round {takeovers_per_round:?}"
    );
}

/// Make the remote's `post-receive` hook note that it started (in `marker`) and then sleep:
/// the ref is already updated on the server, but the client hears nothing until it ends.
fn slow_post_receive(bare: &Path, marker: &Path) -> PathBuf {
    let hook = bare.join("hooks/post-receive");
    std::fs::write(&hook, format!("#!/bin/sh\n: > '{}'\nsleep 3\n", marker.display())).expect("write hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod hook");
    hook
}

/// Poll (bounded) until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Start `claim acquire <key> --holder <holder>` in `clone` and SIGKILL the git-loop process
/// (only it: its `git push` child is left to finish) once the server has applied the push
/// and is still in its post-receive hook, so the client never learns the outcome.
fn acquire_and_kill_mid_push(env: &TestEnv, bare: &Path, clone: &Repo<'_>, key: &str, holder: &str) {
    let marker = env.path("post-receive-started");
    let hook = slow_post_receive(bare, &marker);
    let mut child = clone
        .command(&["claim", "acquire", key, "--holder", holder])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the claimant");
    wait_until("the server runs post-receive for the claim", || marker.exists());
    child.kill().expect("SIGKILL the claimant");
    let status = child.wait().expect("reap the claimant");
    assert_eq!(status.signal(), Some(9), "the claimant was killed before it heard back ({status})");
    std::fs::remove_file(&hook).expect("remove the slow hook");
}

/// C4: a claimant killed while the server runs post-receive pushed a claim it never heard
/// about. The same holder's next acquire finds it is its own ("refreshed"), another clone is
/// told it is held, and after sync the holder's clone lists it: claims held at the remote
/// that their holder does not know of, after reconcile: 0.
#[test]
fn c4_a_claim_pushed_by_a_killed_client_is_its_holders_on_the_next_acquire() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let daemon = Daemon::start(&env);
    let clones = clones(&env, &daemon.url(&bare), 2);
    let (a, b) = (&clones[0], &clones[1]);
    let name = "refs/loop/claims/lock/c4";
    acquire_and_kill_mid_push(&env, &bare, a, "lock:c4", "h1");
    let pushed = remote_record(&env, &bare, name);
    assert_eq!(pushed["holder"], "h1", "the server applied the push");
    assert_eq!(ref_value(&env, &a.dir, name), "", "the killed client never mirrored it: h1 does not know yet");

    let again = a.run(&["claim", "acquire", "lock:c4", "--holder", "h1", "--json"]).ok().json();
    assert_eq!(
        (again["outcome"].as_str(), again["claim"]["holder"].as_str(), &again["claim"]["acquired_at"]),
        (Some("refreshed"), Some("h1"), &pushed["acquired_at"]),
        "the holder learns from the remote that the claim is its own"
    );
    assert_eq!(ref_value(&env, &bare, name), again["claim"]["object"].as_str().expect("an object id"));

    let other = b.run(&["claim", "acquire", "lock:c4", "--holder", "h2", "--json"]).code(1).json();
    assert_eq!((other["outcome"].as_str(), other["claim"]["holder"].as_str()), (Some("held"), Some("h1")));

    a.run(&["sync"]).ok();
    let listed = a.run(&["claim", "list", "--json"]).ok().json();
    let holders: Vec<&str> =
        listed["claims"].as_array().expect("claims").iter().filter_map(|c| c["holder"].as_str()).collect();
    assert_eq!(holders, ["h1"], "h1's clone lists the claim");
    let unknown =
        usize::from(ref_value(&env, &a.dir, "refs/loop/claims") != ref_value(&env, &bare, "refs/loop/claims"));
    eprintln!("C4: claims held at the remote that their holder does not know of, after reconcile: {unknown}");
    assert_eq!(unknown, 0, "the holder's clone mirrors exactly the remote's claims");
}

/// C4, reconciled by sync alone: after the kill, `sync` shows the holder its claim, and the
/// holder can release it.
#[test]
fn c4_a_claim_pushed_by_a_killed_client_is_learned_by_sync_and_can_be_released() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let daemon = Daemon::start(&env);
    let clones = clones(&env, &daemon.url(&bare), 1);
    let a = &clones[0];
    let name = "refs/loop/claims/lock/c4";
    acquire_and_kill_mid_push(&env, &bare, a, "lock:c4", "h1");
    assert_eq!(ref_value(&env, &a.dir, name), "", "the killed client never mirrored it");
    a.run(&["sync"]).ok();
    assert_eq!(ref_value(&env, &a.dir, name), ref_value(&env, &bare, name), "sync mirrors the remote's claim");
    let listed = a.run(&["claim", "list", "--json"]).ok().json();
    assert_eq!(listed["claims"][0]["holder"], "h1");
    assert_eq!(
        a.run(&["claim", "release", "lock:c4", "--holder", "h1"]).ok().stdout,
        "released lock:c4 (taken just now)\n"
    );
    let (remote_value, local_value) = (ref_value(&env, &bare, name), ref_value(&env, &a.dir, name));
    assert_eq!(remote_value, local_value, "the release reached the remote and the mirror alike");
    let tombstone: serde_json::Value =
        serde_json::from_str(&env.git(&bare, &["cat-file", "-p", &remote_value])).expect("a claim record");
    assert!(tombstone["released_at"].is_string(), "released as a tombstone: {tombstone}");
    assert_eq!(a.run(&["claim", "list", "--include-stale", "--json"]).ok().json()["claims"], serde_json::json!([]));
}

/// C7: a server that does not advertise atomic pushes gets a clear error, never a silent
/// non-atomic push: the claim is not taken and a sync pushes nothing.
#[test]
fn c7_a_server_without_atomic_push_is_refused_with_a_clear_error() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    env.git(&bare, &["config", "receive.advertiseAtomic", "false"]);
    let daemon = Daemon::start(&env);
    let clones = clones(&env, &daemon.url(&bare), 1);
    let a = &clones[0];
    let out = a.run(&["claim", "acquire", "lock:c7", "--holder", "h"]).code(1);
    assert_eq!(
        out.stderr,
        "error: remote 'origin' does not support atomic pushes, which git-loop needs to arbitrate claims\n\
         hint: enable it on the server with 'git config receive.advertiseAtomic true' (git's default)\n"
    );
    a.add(&["a task to sync"]);
    let synced = a.run(&["sync"]).code(1);
    assert!(synced.stderr.contains("does not support atomic pushes"), "sync says why: {}", synced.stderr);
    assert_eq!(ref_value(&env, &bare, "refs/loop"), "", "nothing reached the remote without --atomic");
    assert_eq!(ref_value(&env, &a.dir, "refs/loop/claims"), "", "and no claim is mirrored locally");
}

/// C8: a remote whose pre-receive hook rejects everything: taking, refreshing and releasing a
/// claim each fail naming the refusal and quoting the hook (exit 1), and the local claim refs
/// equal the remote's.
#[test]
fn c8_a_remote_that_rejects_leaves_local_claims_equal_to_the_remote() {
    let env = TestEnv::new();
    let bare = env.remote("origin");
    let daemon = Daemon::start(&env);
    let clones = clones(&env, &daemon.url(&bare), 1);
    let a = &clones[0];
    a.run(&["claim", "acquire", "lock:kept", "--holder", "h"]).ok();
    let hook = bare.join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'claims are frozen' >&2\nexit 1\n").expect("write hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod hook");
    let before = ref_value(&env, &bare, "refs/loop/claims");
    let hint = "hint: the remote's hooks or settings forbid it; ask its administrator, or see 'git loop sync'\n";
    for (args, name) in [
        (["claim", "acquire", "lock:c8", "--holder", "h"], "refs/loop/claims/lock/c8"),
        (["claim", "acquire", "lock:kept", "--holder", "h"], "refs/loop/claims/lock/kept"),
        (["claim", "release", "lock:kept", "--holder", "h"], "refs/loop/claims/lock/kept"),
    ] {
        let out = a.run(&args).code(1);
        assert_eq!(
            out.stderr,
            format!(
                "error: remote 'origin' refused the update of '{name}': [remote rejected] (pre-receive hook declined): the remote says: claims are frozen\n{hint}"
            ),
            "{args:?}"
        );
        assert_eq!(ref_value(&env, &bare, "refs/loop/claims"), before, "{args:?}: the remote is unchanged");
        assert_eq!(
            ref_value(&env, &a.dir, "refs/loop/claims"),
            before,
            "{args:?}: local claims equal the remote's after the error"
        );
    }
}

/// Issue 31, on the clients' side: a remote without git-loop's hook takes any push, so a
/// release forged in a live holder's name (without its capability) reaches every clone. A clone
/// that saw the live record does not believe it: it hands the task to nobody, and the holder's
/// next refresh puts a record that proves its own back.
#[test]
fn a_release_forged_in_a_live_holders_name_is_not_believed_by_the_clones() {
    let env = TestEnv::new();
    let (remote, a, b) = env.two_clones();
    let id = a.add(&["Held"]);
    a.run(&["sync"]).ok();
    a.run(&["claim", "acquire", &format!("node:{id}"), "--holder", "w-alice", "--ttl", "1h"]).ok();
    b.run(&["sync"]).ok();
    // b looks at the board: it has seen the live record.
    assert_eq!(b.run(&["list", "--json"]).ok().json()["tasks"][0]["state"], "open");
    let name = format!("refs/loop/claims/node/{id}");
    let live: serde_json::Value =
        serde_json::from_str(&env.git(&remote, &["cat-file", "-p", &name])).expect("the record is JSON");
    let mut forged = live.clone();
    forged["released_at"] = live["refreshed_at"].clone();
    forged["nonce"] = serde_json::json!("forged");
    forged.as_object_mut().expect("an object").remove("capability");
    let bare = Repo { env: &env, dir: remote.clone() };
    let blob = bare.git_with_stdin(&["hash-object", "-w", "--stdin"], &forged.to_string());
    env.git(&remote, &["update-ref", &name, &blob]);
    b.run(&["sync"]).ok();
    assert_eq!(b.git(&["rev-parse", &name]), blob, "b's copy of the claim is the remote's, the forgery");
    let next = b.run(&["next", "--claim", "--holder", "w-bob", "--json"]);
    assert!(!next.stdout.contains(&id), "the task is not handed out: {}{}", next.stdout, next.stderr);
    assert_eq!(env.git(&remote, &["rev-parse", &name]), blob, "nobody claimed it");
    // Its holder refreshes it: the remote holds a record that proves the live one again.
    a.run(&["claim", "acquire", &format!("node:{id}"), "--holder", "w-alice"]).ok();
    let restored: serde_json::Value =
        serde_json::from_str(&env.git(&remote, &["cat-file", "-p", &name])).expect("the record is JSON");
    assert_eq!(restored["holder"], "w-alice");
    assert!(restored["released_at"].is_null(), "{restored}");
    assert_eq!(
        (restored["capability"]["chain"].clone(), restored["capability"]["round"].clone()),
        (live["capability"]["chain"].clone(), serde_json::json!(1)),
        "the refresh continues the live record's chain"
    );
}
