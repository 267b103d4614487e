//! Several clones as one team (issue "A fleet of clones"): clones of one bare remote, served by
//! a real `git daemon` on 127.0.0.1 and guarded by git-loop's own pre-receive hook (so
//! everything a fleet pushes is shown to pass it), each running its own walk over one shared
//! backlog. What
//! must hold: every task is worked exactly once, try branches never collide, every clone's
//! `sync` succeeds afterwards and every clone shows the same board and journal; a walker
//! killed mid-task loses its task to another clone only after its lease, and its work is kept.
//!
//! These tests are long; each one counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{wait_for, Daemon, Repo, Run, TestEnv};

/// The variables a fleet process runs with: the real clock (leases must be able to run out).
pub(crate) fn real_clock(cmd: &mut Command) -> &mut Command {
    cmd.env_remove("GIT_LOOP_NOW")
}

/// The fleet's bare remote, guarded by git-loop's pre-receive hook, and a `git daemon`
/// serving it on the real clock (the hook judges claims by the server's clock).
pub(crate) fn guarded(env: &TestEnv) -> (PathBuf, Daemon) {
    let bare = env.remote("fleet");
    env.install_receive_hook(&bare);
    (bare, Daemon::start_on_real_clock(env))
}

/// `git loop <args>` in `repo`, on the real clock.
pub(crate) fn loop_run(repo: &Repo<'_>, args: &[&str]) -> Run {
    let mut cmd = repo.command(args);
    Run::from(real_clock(&mut cmd).output().expect("run git-loop"))
}

/// A remote with `tasks` open tasks on it, and `n` clones that follow it (`loop.remote`).
fn fleet<'e>(env: &'e TestEnv, url: &str, n: usize, tasks: usize) -> Vec<Repo<'e>> {
    fleet_with(env, url, n, tasks, &[])
}

/// A clone of `url` at `<root>/<name>`, made with `git clone <args>` (a `--config` the clone
/// keeps: how to reach the remote).
fn clone_with<'e>(env: &'e TestEnv, url: &str, name: &str, args: &[&str]) -> Repo<'e> {
    let dir = env.path(name);
    let mut all = vec!["clone", "-q"];
    all.extend_from_slice(args);
    all.extend([url, dir.to_str().expect("utf-8 path")]);
    env.git(env.root.path(), &all);
    Repo { env, dir }
}

/// `fleet`, each clone made with `git clone <clone_args>`.
pub(crate) fn fleet_with<'e>(
    env: &'e TestEnv,
    url: &str,
    n: usize,
    tasks: usize,
    clone_args: &[&str],
) -> Vec<Repo<'e>> {
    let seed = clone_with(env, url, "seed", clone_args);
    loop_run(&seed, &["init", "--remote", "origin"]).ok();
    let lines: String = (0..tasks).map(|i| format!("{{\"title\": \"task {i:03}\"}}\n")).collect();
    let file = env.path("backlog.jsonl");
    std::fs::write(&file, lines).expect("write the backlog");
    if tasks > 0 {
        loop_run(&seed, &["import", file.to_str().expect("utf-8 path")]).ok();
    }
    loop_run(&seed, &["sync"]).ok();
    (0..n)
        .map(|i| {
            let clone = clone_with(env, url, &format!("clone-{i}"), clone_args);
            loop_run(&clone, &["init", "--remote", "origin"]).ok();
            clone.git(&["config", "loop.syncEvery", "5s"]);
            loop_run(&clone, &["sync"]).ok();
            clone
        })
        .collect()
}

/// An agent that does its task in one session: a file of its own, and the verdict.
pub(crate) fn one_shot_agent(env: &TestEnv) -> String {
    env.agent("once", "echo \"$GIT_LOOP_TASK\" > \"done-$GIT_LOOP_TASK.txt\"\ngit loop finish done --message ok")
}

/// A walk started in the background; its output goes to files (a pipe nobody reads would
/// fill up and stop it).
pub(crate) struct Walk {
    pub(crate) child: Child,
    pub(crate) out: std::path::PathBuf,
    pub(crate) err: std::path::PathBuf,
}

/// Start `git loop run` in `repo`.
pub(crate) fn start_walk(repo: &Repo<'_>, agent: &str, extra: &[&str]) -> Walk {
    start_walk_on(repo, agent, extra, None)
}

/// Start `git loop run` in `repo`, as if on another machine (a host name of its own, in a UTS
/// namespace) when `host` is given: all clones of these tests share one machine, where a walk
/// whose process is gone is recognised at once; on another machine only its lease tells.
pub(crate) fn start_walk_on(repo: &Repo<'_>, agent: &str, extra: &[&str], host: Option<&str>) -> Walk {
    let mut args = vec!["run", "--agent-cmd", agent, "--grace", "1", "--session-timeout", "120s"];
    if !extra.contains(&"--parallel") {
        args.extend(["--parallel", "2"]);
    }
    args.extend_from_slice(extra);
    let n = WALKS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let out = repo.env.path(&format!("walk-{n}.out"));
    let err = repo.env.path(&format!("walk-{n}.err"));
    let file = |p: &Path| Stdio::from(std::fs::File::create(p).expect("create a walk's output file"));
    let mut cmd = match host {
        None => repo.command(&args),
        Some(host) => {
            let mut cmd = Command::new("unshare");
            repo.env.seal(&mut cmd).current_dir(&repo.dir).args([
                "--uts",
                "sh",
                "-c",
                "hostname \"$0\" && exec \"$@\"",
                host,
            ]);
            cmd.arg(crate::harness::bin()).args(&args);
            cmd
        }
    };
    let child = real_clock(&mut cmd).stdout(file(&out)).stderr(file(&err)).spawn().expect("start a walk");
    Walk { child, out, err }
}

/// A walk still running when its test ends (a failed assertion) is stopped with it: it would
/// otherwise go on asking a remote that is gone.
impl Drop for Walk {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

static WALKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many sessions each task had, over every clone's session records.
pub(crate) fn sessions_per_task(clones: &[&Repo<'_>]) -> BTreeMap<String, usize> {
    let mut per_task = BTreeMap::new();
    for clone in clones {
        for record in clone.session_records() {
            let task = record["task"].as_str().expect("a session record names its task").to_owned();
            *per_task.entry(task).or_insert(0) += 1;
        }
    }
    per_task
}

/// Every shared loop ref of a repository (bare or not), as `name value` lines: what sync
/// exchanges. Mirrors and the clone-local walker singleton are not shared.
pub(crate) fn shared_refs(env: &TestEnv, dir: &Path) -> BTreeSet<String> {
    let out = env.git(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/loop/",
            "refs/notes/loop",
            "refs/heads/loop/",
            "refs/heads/loop-try/",
            "refs/heads/loop-kept/",
        ],
    );
    out.lines().filter(|l| !l.starts_with("refs/loop/claims/walker/")).map(ToOwned::to_owned).collect()
}

/// The board as `list --all --json` shows it, without what is only true of one clone's view
/// at one instant (nothing is running after the walks).
pub(crate) fn board(repo: &Repo<'_>) -> Value {
    loop_run(repo, &["list", "--json"]).ok().json()
}

/// A board without what changes with the clock alone (how long a claim has been seen
/// unchanged, which each clone counts from its own read).
fn steady(mut board: Value) -> Value {
    for task in board["tasks"].as_array_mut().into_iter().flatten() {
        if let Some(claim) = task["claim"].as_object_mut() {
            claim.remove("unchanged_s");
        }
    }
    board
}

/// The journal as a set of (writer, seq, kind, task): every clone must hold the same events.
pub(crate) fn journal(repo: &Repo<'_>) -> BTreeSet<String> {
    let log = loop_run(repo, &["log", "--json"]).ok().json();
    log["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| format!("{} {} {} {}", e["writer"], e["seq"], e["kind"], e["task"]))
        .collect()
}

/// After the walks: one sync per clone succeeds with nothing diverged, every clone then
/// holds exactly the remote's loop refs, the same board and the same journal.
pub(crate) fn assert_converged(env: &TestEnv, bare: &Path, clones: &[&Repo<'_>]) {
    for clone in clones {
        let out = loop_run(clone, &["sync"]);
        assert_eq!(out.code, 0, "every clone's sync succeeds after the walks:\n{}{}", out.stdout, out.stderr);
        assert!(!out.stdout.contains("diverged"), "nothing diverged:\n{}", out.stdout);
    }
    // A second round: what one clone merged and pushed reaches the others.
    for clone in clones {
        loop_run(clone, &["sync"]).ok();
    }
    let remote = shared_refs(env, bare);
    let first = board(clones[0]);
    let events = journal(clones[0]);
    for clone in clones {
        let mine = shared_refs(env, &clone.dir);
        let missing: Vec<_> = remote.difference(&mine).take(5).collect();
        let extra: Vec<_> = mine.difference(&remote).take(5).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{}: refs equal the remote's; missing {missing:?}, extra {extra:?}",
            clone.dir.display()
        );
        assert_eq!(
            steady(board(clone)),
            steady(first.clone()),
            "{}: the same board as the first clone",
            clone.dir.display()
        );
        assert_eq!(journal(clone), events, "{}: the same journal as the first clone", clone.dir.display());
    }
}

/// Wait for a walk and return its exit code and output.
pub(crate) fn finish(mut walk: Walk, what: &str) -> Run {
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = walk.child.try_wait().expect("poll a walk") {
            break status;
        }
        assert!(Instant::now() < deadline, "{what} did not finish within 10 minutes");
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Run { code: status.code().unwrap_or(-1), stdout: read(&walk.out), stderr: read(&walk.err) }
}

/// Tasks in the four-clone fleet: 24 in CI (three for each of the eight workers, so every worker
/// claims against the others more than once; 40 took 37 s beside the rest of the suite, 19 s alone);
/// `GIT_LOOP_FLEET_TASKS=200` for the full row of docs/reliability.md (F1), which takes minutes.
fn fleet_tasks() -> usize {
    std::env::var("GIT_LOOP_FLEET_TASKS").ok().and_then(|n| n.parse().ok()).unwrap_or(24)
}

/// Four clones each walking with two workers over one backlog on one remote. Every sync of
/// every walk gets through: none gives up because the remote "kept changing" (it did, now
/// and then, while a sync's atomic push carried refs other clones change all the time — the
/// notes ref, and every task and journal ref a wildcard refspec swept in).
fn four_clones_do_every_task_once(env: &TestEnv, url: &str, bare: &Path) {
    let tasks = fleet_tasks();
    clones_do_every_task_once(env, fleet(env, url, 4, tasks), bare, tasks);
}

/// `clones` (of one remote holding `tasks` open tasks) each walk with two workers: every task
/// is worked once, every sync gets through, and the clones converge on the remote.
pub(crate) fn clones_do_every_task_once(env: &TestEnv, clones: Vec<Repo<'_>>, bare: &Path, tasks: usize) {
    let agent = one_shot_agent(env);
    let started = Instant::now();
    let walks: Vec<Walk> = clones.iter().map(|c| start_walk(c, &agent, &[])).collect();
    for (i, walk) in walks.into_iter().enumerate() {
        let out = finish(walk, "a walk");
        assert_eq!(out.code, 0, "walk {i} ends with no work left:\n{}{}", out.stdout, out.stderr);
        let failed: Vec<&str> = out.stderr.lines().filter(|l| l.contains("could not sync")).collect();
        assert!(failed.is_empty(), "walk {i}'s syncs all get through: {failed:?}");
    }
    let elapsed = started.elapsed();
    let all: Vec<&Repo<'_>> = clones.iter().collect();
    let per_task = sessions_per_task(&all);
    let twice: Vec<_> = per_task.iter().filter(|(_, n)| **n > 1).collect();
    let sessions: usize = per_task.values().sum();
    assert!(twice.is_empty(), "no task is worked twice; worked more than once: {twice:?}");
    assert_eq!((per_task.len(), sessions), (tasks, tasks), "a session for each task (in {elapsed:?})");
    assert_converged(env, bare, &all);
    let done = board(&clones[0])["tasks"].as_array().expect("tasks").iter().filter(|t| t["state"] == "done").count();
    assert_eq!(done, tasks, "every task is done");
}

/// Through a remote guarded by git-loop's pre-receive hook (judging claims by the real
/// clock, as the clones do): everything the fleet pushes passes it.
#[test]
fn four_clones_over_a_git_daemon_do_every_task_exactly_once_and_converge() {
    let _one_fleet_at_a_time = crate::harness::fleet();
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    four_clones_do_every_task_once(&env, &daemon.url(&bare), &bare);
}

/// A walker killed with SIGKILL in the middle of a session: the other clones finish the
/// rest and leave its task alone while its lease runs; once the lease has run out unrefreshed
/// another clone takes the task over and does it, once; the killed session's work is kept on
/// its try branch once its clone walks again. The remote is guarded by git-loop's
/// pre-receive hook, which lets the takeover through once the lease has run out by its clock.
#[test]
fn a_walker_killed_midway_loses_its_task_only_after_its_lease_and_keeps_its_work() {
    let _one_at_a_time = crate::harness::heavy();
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    // Enough tasks that the other clones are still walking when the victim is killed.
    const TASKS: usize = 15;
    let clones = fleet(&env, &daemon.url(&bare), 3, TASKS);
    let agent = one_shot_agent(&env);
    // The victim's agent writes its file and then waits to be killed with its walk.
    let stuck = env.agent(
        "stuck",
        &format!(
            "echo half > \"half-$GIT_LOOP_TASK.txt\"\ntouch {}\nwhile :; do sleep 1; done",
            env.path("victim-started").display()
        ),
    );
    let lease = "8s";
    let elsewhere = Some("victim-host");
    let victim =
        start_walk_on(&clones[0], &stuck, &["--parallel", "1", "--lease", lease, "--max-units", "1"], elsewhere);
    let started = env.path("victim-started");
    wait_for("the victim's session to start", || started.exists());
    let victim_task = clones[0].session_records()[0]["task"].as_str().expect("task").to_owned();
    // SIGKILL the walk alone: its session guard stops the agent (parent-death signal).
    let pid = victim.child.id() as i32;
    kill9(pid);
    let out = finish(victim, "the killed walk");
    assert_ne!(out.code, 0, "the victim was killed");
    let killed_wall = chrono::Utc::now();

    let others: Vec<Walk> = clones[1..].iter().map(|c| start_walk(c, &agent, &["--lease", lease])).collect();
    for walk in others {
        let out = finish(walk, "a walk");
        assert_eq!(out.code, 0, "the other walks end with no work left:\n{}{}", out.stdout, out.stderr);
    }
    let worked: Vec<&Repo<'_>> = clones[1..].iter().collect();
    // Once the lease has run out unrefreshed (as another clone sees it), a walk takes the task
    // over; walk again until one has.
    let deadline = Instant::now() + Duration::from_secs(90);
    while !sessions_per_task(&worked).contains_key(&victim_task) {
        assert!(Instant::now() < deadline, "the victim's task was never taken over");
        let again = finish(start_walk(&clones[1], &agent, &["--lease", lease]), "a walk that may take over");
        assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    }
    let taker = worked
        .iter()
        .flat_map(|c| c.session_records())
        .find(|r| r["task"] == victim_task.as_str())
        .expect("the taker's session record");
    let taken_at: chrono::DateTime<chrono::Utc> =
        taker["started_at"].as_str().and_then(|t| t.parse().ok()).expect("a start time");
    assert!(
        taken_at >= killed_wall + chrono::Duration::seconds(8),
        "taken over only after the lease: killed at {killed_wall}, taken at {taken_at}"
    );
    // The victim's clone walks again: it recovers its killed session's work, and works nothing
    // that another clone did.
    let recovered = finish(start_walk_on(&clones[0], &agent, &["--lease", lease], elsewhere), "the victim's next walk");
    assert_eq!(recovered.code, 0, "{}{}", recovered.stdout, recovered.stderr);
    assert_eq!(clones[0].session_records().len(), 1, "the victim's clone ran only the killed session");

    let per_task = sessions_per_task(&worked);
    assert_eq!(per_task.get(&victim_task), Some(&1), "the victim's task is done once by another clone");
    assert_eq!(per_task.values().sum::<usize>(), TASKS - 1 + 1, "every other task once, and the victim's once");
    assert!(per_task.values().all(|n| *n == 1), "no task twice: {per_task:?}");
    let victim_try = format!("refs/heads/loop-try/{victim_task}/1");
    let files = clones[0].git(&["ls-tree", "-r", "--name-only", &victim_try]);
    assert!(
        files.lines().any(|f| f == format!("half-{victim_task}.txt")),
        "the killed session's work is on its try branch: {files}"
    );
    let all: Vec<&Repo<'_>> = clones.iter().collect();
    assert_converged(&env, &bare, &all);
}

fn kill9(pid: i32) {
    let status = Command::new("kill").args(["-9", &pid.to_string()]).status().expect("run kill");
    assert!(status.success(), "kill -9 {pid}");
}

/// The smart-HTTP half of the fleet row: the same four clones, through `git http-backend`
/// behind a real web server.
#[test]
fn four_clones_over_smart_http_do_every_task_exactly_once_and_converge() {
    let _one_fleet_at_a_time = crate::harness::fleet();
    let env = TestEnv::new();
    let bare = env.remote("fleet");
    let Some(server) = crate::harness::HttpServer::start(&env) else { return };
    four_clones_do_every_task_once(&env, &server.url(&bare), &bare);
}

/// A person's word written on one clone — stop, reassign, take-over — reaches a walk on
/// another clone within `loop.syncEvery` and a few seconds, while both clones are busy: the
/// command publishes it at once, and the walk's next sync brings it.
#[test]
fn a_persons_word_from_another_clone_reaches_a_busy_walk_within_its_sync_interval() {
    let _one_at_a_time = crate::harness::heavy();
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    let url = daemon.url(&bare);
    let clones = fleet(&env, &url, 2, 0);
    let (here, there) = (&clones[0], &clones[1]);
    for repo in [here, there] {
        repo.git(&["config", "loop.syncEvery", "3s"]);
    }
    let long: Vec<String> = (0..3)
        .map(|i| loop_run(here, &["add", &format!("long {i}"), "--label", "long"]).ok().stdout.trim().to_owned())
        .collect();
    for i in 0..40 {
        loop_run(there, &["add", &format!("busy {i}"), "--label", "busy"]).ok();
    }
    // The agent that works on: it says when it started, then waits (a wrap-up request or a
    // stop ends it).
    let started = env.path("started");
    std::fs::create_dir_all(&started).expect("mkdir");
    let slow = env.agent(
        "slow",
        &format!(
            "touch {}/$GIT_LOOP_SESSION\nwhile [ ! -e \"$GIT_LOOP_WRAP_UP\" ]; do sleep 0.1; done",
            started.display()
        ),
    );
    for repo in [here, there] {
        repo.git(&["config", "loop.agent.other.command", &slow]);
    }
    let walk = start_walk(here, &slow, &["--parallel", "3", "--label", "long", "--wrap-up", "2s"]);
    wait_for("three sessions", || std::fs::read_dir(&started).map(|d| d.count()).unwrap_or(0) == 3);
    // Load on the other clone: its own walk over forty quick tasks.
    let busy = start_walk(there, &one_shot_agent(&env), &["--label", "busy"]);
    loop_run(there, &["sync"]).ok();

    let within = Duration::from_secs(3 + 5);
    let session_of = |task: &str| {
        here.session_records().into_iter().rev().find(|r| r["task"] == task).expect("a session of the task")
    };
    // stop: the session ends and the task needs a decision, here.
    let asked = Instant::now();
    loop_run(there, &["stop", &long[0]]).ok();
    wait_for_within(within, "the stop to reach the walk", || session_of(&long[0])["ended_at"].is_string());
    let stopped = asked.elapsed();
    // reassign: the walk's next session of the task runs the new agent.
    let asked = Instant::now();
    loop_run(there, &["reassign", &long[1], "other"]).ok();
    wait_for_within(within, "the reassignment to reach the walk", || session_of(&long[1])["agent"] == "other");
    let reassigned = asked.elapsed();
    // take-over: the session ends, and the walk leaves the task to the person.
    let asked = Instant::now();
    loop_run(there, &["take-over", &long[2], "--json"]).ok();
    wait_for_within(within, "the take-over to reach the walk", || session_of(&long[2])["ended_at"].is_string());
    let taken = asked.elapsed();

    // The busy walk has done its part (load while the words travel): stopped, not waited out.
    loop_run(there, &["stop", "--all"]).ok();
    let out = finish(busy, "the busy walk");
    assert_eq!(out.code, 130, "a walk stopped by 'stop --all' exits 130: {}{}", out.stdout, out.stderr);
    loop_run(here, &["stop", "--all"]).ok();
    finish(walk, "the long walk");
    eprintln!("obeyed after: stop {stopped:?}, reassign {reassigned:?}, take-over {taken:?}");
}

/// Wait (up to `limit`) until `cond` holds.
#[track_caller]
fn wait_for_within(limit: Duration, what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A clone made with a plain `git clone` of a repository whose remote holds loop state shows
/// the remote's board from its first command, and decides claims through the remote.
#[test]
fn a_fresh_clone_follows_a_remote_that_holds_loop_state() {
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    let url = daemon.url(&bare);
    let clones = fleet(&env, &url, 1, 3);
    let held = loop_run(&clones[0], &["next", "--claim", "--holder", "agent-a", "--json"]).ok().json();
    let held_id = held["id"].as_str().expect("a claimed task").to_owned();

    let fresh = env.clone_of(&url, "fresh");
    let out = loop_run(&fresh, &["list", "--json"]).ok();
    assert!(out.stderr.contains("this clone now follows it (loop.remote = origin)"), "{}", out.stderr);
    assert_eq!(out.json()["tasks"].as_array().expect("tasks").len(), 3, "the remote's board, not an empty one");
    assert_eq!(fresh.git(&["config", "loop.remote"]), "origin");
    // Its claims are the remote's: the task another clone holds is not handed out here.
    let mine = loop_run(&fresh, &["next", "--claim", "--holder", "agent-b", "--json"]).ok().json();
    assert_ne!(mine["id"], held_id.as_str(), "a task held on the remote is not claimed again");
    let again = loop_run(&fresh, &["list"]).ok();
    assert!(!again.stderr.contains("follows it"), "said once: {}", again.stderr);
}

/// A task done in one clone is never worked in another, even one that never synced: a
/// claimer that wins checks the remote's record, which the release brought with it.
#[test]
fn a_task_done_in_one_clone_is_not_worked_again_by_a_clone_that_never_synced() {
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    let clones = fleet(&env, &daemon.url(&bare), 2, 6);
    let agent = one_shot_agent(&env);
    let out = finish(start_walk(&clones[0], &agent, &[]), "the first walk");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(clones[0].session_records().len(), 6);
    // The second clone's board still shows six open tasks: it synced before they were done.
    // Its walk must not redo them.
    clones[1].git(&["config", "loop.syncEvery", "never"]);
    let out = finish(start_walk(&clones[1], &agent, &[]), "the second walk");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(clones[1].session_records().len(), 0, "no task done elsewhere is worked again:\n{}", out.stdout);
    let board = board(&clones[1]);
    let done = board["tasks"].as_array().expect("tasks").iter().filter(|t| t["state"] == "done").count();
    assert_eq!(done, 6, "and its board shows them done");
}

/// Two clones each work a try of one task (the first fails it, a person reopens it on the
/// other): the second is try 2, and both try branches reach every clone without a conflict.
/// (That a number is taken on the remote, even by a clone that knows nothing of the first try,
/// is `tries::tests::two_clones_never_take_the_same_try_number`.)
#[test]
fn two_clones_tries_of_one_task_reach_every_clone_without_a_conflict() {
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    let clones = fleet(&env, &daemon.url(&bare), 2, 1);
    let fail = env.agent("fail", "echo one > one.txt\ngit loop finish failed --message 'not today'");
    let out = finish(start_walk(&clones[0], &fail, &[]), "the failing walk");
    assert!(out.stdout.contains("1 not done"), "{}{}", out.stdout, out.stderr);
    let id = clones[0].session_records()[0]["task"].as_str().expect("task").to_owned();
    loop_run(&clones[1], &["sync"]).ok();
    loop_run(&clones[1], &["reopen", &id]).ok();
    let out = finish(start_walk(&clones[1], &one_shot_agent(&env), &[]), "the second walk");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let record = &clones[1].session_records()[0];
    assert_eq!(record["try"], 2, "the second clone opened try 2, not a second try 1");
    let all: Vec<&Repo<'_>> = clones.iter().collect();
    assert_converged(&env, &bare, &all);
    for n in [1, 2] {
        clones[0].git(&["rev-parse", "--verify", &format!("refs/heads/loop-try/{id}/{n}")]);
    }
}

/// When two clones' copies of a branch truly diverge, one sync decides: the remote's copy
/// (published first) stays, ours is kept under `loop-kept/…` on both sides, the journal says
/// so, and the sync succeeds.
#[test]
fn a_diverged_branch_keeps_both_sides_and_sync_succeeds() {
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    let clones = fleet(&env, &daemon.url(&bare), 2, 1);
    let (a, b) = (&clones[0], &clones[1]);
    let id = board(a)["tasks"][0]["id"].as_str().expect("a task").to_owned();
    let branch = format!("refs/heads/loop/{id}");
    for (repo, word) in [(a, "alpha"), (b, "beta")] {
        std::fs::write(repo.dir.join("side.txt"), word).expect("write");
        repo.git(&["add", "side.txt"]);
        repo.git(&["commit", "-q", "-m", word]);
        repo.git(&["update-ref", &branch, "HEAD"]);
    }
    let theirs = a.git(&["rev-parse", &branch]);
    let ours = b.git(&["rev-parse", &branch]);
    loop_run(a, &["sync"]).ok();
    let out = loop_run(b, &["sync"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("kept both"), "{}", out.stdout);
    assert_eq!(b.git(&["rev-parse", &branch]), theirs, "the remote's side stays");
    let kept = b.git(&["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/loop-kept/"]);
    assert!(kept.ends_with(&format!("/loop/{id} {ours}")), "ours is kept: {kept}");
    let kept_name = kept.split(' ').next().expect("a kept ref").to_owned();
    assert_eq!(env.git(&bare, &["rev-parse", &kept_name]), ours, "and published");
    let events = loop_run(b, &["log", "--json"]).ok().json();
    let diverged: Vec<&Value> =
        events["events"].as_array().expect("events").iter().filter(|e| e["kind"] == "ref_diverged").collect();
    assert_eq!(diverged.len(), 1, "the journal says so once");
    assert_eq!(diverged[0]["data"]["kept_as"], kept_name.as_str());
    assert_eq!(loop_run(b, &["sync"]).ok().stderr.trim(), "already in sync with 'origin'");
    let all: Vec<&Repo<'_>> = clones.iter().collect();
    assert_converged(&env, &bare, &all);
}
