//! Clocks may disagree (issue 10, point 6; reliability C6): clones whose clocks run an hour
//! fast and an hour slow share one bare remote served by `git daemon` on 127.0.0.1. No live
//! claim is taken over, no task is handed out twice, every clone's journal reads in causal
//! order, and a ref lock's age is judged by the file system's clock.
//!
//! Every git-loop process here reads the real clock (`GIT_LOOP_NOW` unset); a skewed clone's
//! processes get libfaketime through `LD_PRELOAD`, with `FAKETIME="+1h"` or `"-1h"`. Only the
//! wall clock is shifted (`FAKETIME_DONT_FAKE_MONOTONIC=1`): a machine whose time is set wrong
//! still counts seconds at the right pace, and a faked monotonic clock makes threaded programs
//! hang (libfaketime's README). `libfaketimeMT` is the build that is safe in threaded processes
//! (a walk); it serves one-shot commands as well. Without libfaketime these tests print why and
//! pass, unless `CI` is set: then they fail (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{wait_for, Daemon, Repo, Run, TestEnv};

const HOUR: i64 = 3600;

/// Where distributions put the thread-safe libfaketime (`GIT_LOOP_LIBFAKETIME` says otherwise).
const LIBFAKETIME: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib64/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
];

/// The libfaketime to preload, if there is one.
fn libfaketime() -> Option<PathBuf> {
    match std::env::var_os("GIT_LOOP_LIBFAKETIME") {
        Some(path) => Some(PathBuf::from(path)).filter(|p| p.exists()),
        None => LIBFAKETIME.iter().map(PathBuf::from).find(|p| p.exists()),
    }
}

/// Whether libfaketime can be used; when it cannot, say so, and fail under CI.
fn faketime_available() -> bool {
    if libfaketime().is_some() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "libfaketime is missing ({LIBFAKETIME:?}); CI must run the clock tests");
    eprintln!("skipped: libfaketime is not installed (looked for {LIBFAKETIME:?}); install the libfaketime package");
    false
}

/// What makes a process read the real clock, shifted by `skew` seconds (0: not shifted).
fn clock_vars(skew: i64) -> Vec<(&'static str, String)> {
    let mut vars = vec![("GIT_LOOP_NOW", String::new())];
    if skew != 0 {
        let lib = libfaketime().expect("checked by faketime_available");
        vars.push(("LD_PRELOAD", lib.display().to_string()));
        vars.push(("FAKETIME", format!("{skew:+}s")));
        vars.push(("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()));
    }
    vars
}

/// A clone whose git-loop processes read a clock `skew` seconds off.
struct Clone<'e> {
    name: &'static str,
    repo: Repo<'e>,
    skew: i64,
}

impl Clone<'_> {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.repo.command(args);
        cmd.envs(clock_vars(self.skew));
        cmd
    }

    fn run(&self, args: &[&str]) -> Run {
        Run::from(self.command(args).output().expect("run git-loop"))
    }

    /// Add a task (by this clone's clock) and return its id.
    fn add(&self, title: &str) -> String {
        self.run(&["add", title]).ok().stdout.trim().to_owned()
    }

    /// The time this clone's clock reads now, as `date` under the same clock says it.
    fn now(&self) -> i64 {
        let mut cmd = Command::new("date");
        self.repo.env.seal(&mut cmd).arg("+%s").envs(clock_vars(self.skew));
        let out = cmd.output().expect("run date");
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("seconds since the epoch")
    }
}

/// A bare remote served by `git daemon`, and clones of it (`init --remote origin`), each with
/// its clock skew. The first clone's clock must be right.
struct Fleet<'e> {
    bare: PathBuf,
    clones: Vec<Clone<'e>>,
    _daemon: Daemon,
}

fn fleet<'e>(env: &'e TestEnv, clones: &[(&'static str, i64)]) -> Fleet<'e> {
    let bare = env.remote("origin");
    let daemon = Daemon::start(env);
    let url = daemon.url(&bare);
    let clones: Vec<Clone<'e>> = clones
        .iter()
        .map(|&(name, skew)| {
            let clone = Clone { name, repo: env.clone_of(&url, name), skew };
            clone.run(&["init", "--remote", "origin"]).ok();
            clone.repo.git(&["config", "loop.syncEvery", "never"]);
            clone
        })
        .collect();
    let real = clones[0].now();
    for clone in &clones {
        let off = clone.now() - real;
        assert!(
            (off - clone.skew).abs() < 60,
            "{}'s clock runs {off} s off, not {} s: is libfaketime working?",
            clone.name,
            clone.skew
        );
    }
    Fleet { bare, clones, _daemon: daemon }
}

/// The claim record the remote holds for `key`, if any.
fn remote_record(env: &TestEnv, bare: &Path, key: &str) -> Option<Value> {
    let name = format!("refs/loop/claims/{}", key.replacen(':', "/", 1));
    let oid = env.git(bare, &["for-each-ref", "--format=%(objectname)", &name]);
    (!oid.is_empty()).then(|| serde_json::from_str(&env.git(bare, &["cat-file", "-p", &oid])).expect("a claim record"))
}

fn seconds(record: &Value, field: &str) -> i64 {
    let text = record[field].as_str().expect("a time");
    chrono::DateTime::parse_from_rfc3339(text).expect("RFC 3339").timestamp()
}

/// Signal `child` (a process this test spawned and still owns).
fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid; it touches no memory of ours.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Wait (bounded) for a walk to end; kill it if it does not.
fn finish(mut walk: Child, what: &str) -> Run {
    let deadline = Instant::now() + Duration::from_secs(60);
    while walk.try_wait().expect("poll the walk").is_none() {
        if Instant::now() > deadline {
            let _ = walk.kill();
            panic!("{what} did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Run::from(walk.wait_with_output().expect("the walk's output"))
}

/// (a) A walk refreshes its claim (lease 6 s: every 2 s) in the clone with the right clock and
/// in the clone an hour slow; for two leases, the clone an hour fast tries to take both
/// claims, and a third clone with the right clock tries to take the slow one's: every attempt
/// is refused. Then the slow clone's walk is paused (SIGSTOP, so it stops refreshing): one of
/// the others takes its claim over, about a lease after its last refresh; its agent finishes,
/// and the walk, resumed, does not close the task. Live claims taken over: 0.
///
/// (The attempts run in clones without a walk: every fetch writes a pack, and a walk that
/// opened its repository before them cannot see past its pack slots, issue 10 point 4.)
#[test]
fn a_live_claim_is_never_taken_over_by_a_clone_whose_clock_is_an_hour_off() {
    let _one_at_a_time = crate::harness::heavy();
    if !faketime_available() {
        return;
    }
    let env = TestEnv::new();
    let fleet = fleet(&env, &[("normal", 0), ("fast", HOUR), ("slow", -HOUR), ("other", 0)]);
    let [normal, fast, slow, other] = &fleet.clones[..] else { unreachable!("four clones") };
    let release = env.path("release");
    let lease = 6;
    let mut walks = Vec::new();
    let mut keys = Vec::new();
    for holder in [normal, slow] {
        let id = holder.add(&format!("worked in {}", holder.name));
        let started = env.path(&format!("started-{}", holder.name));
        let agent = env.agent(
            &format!("agent-{}", holder.name),
            &format!(
                "touch {}\ni=0\nwhile [ ! -f {} ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done\ngit loop finish done\ntouch {}",
                started.display(),
                release.display(),
                env.path(&format!("finished-{}", holder.name)).display()
            ),
        );
        let walk = holder
            .command(&[
                "run",
                "--agent-cmd",
                &agent,
                "--grace",
                "1",
                "--lease",
                &lease.to_string(),
                "--max-units",
                "1",
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a walk");
        wait_for("the agent to start", || started.exists());
        walks.push(walk);
        keys.push(format!("node:{id}"));
    }
    let (normal_key, slow_key) = (&keys[0], &keys[1]);
    let slow_record = remote_record(&env, &fleet.bare, slow_key).expect("the slow clone's claim is on the remote");
    let fast_now = fast.now();
    eprintln!(
        "C6 (a): the slow walk stamps its claim {} s behind the fast clone's clock; the normal one's expires {} s before the fast clone's now",
        fast_now - seconds(&slow_record, "refreshed_at"),
        fast_now - seconds(&remote_record(&env, &fleet.bare, normal_key).expect("claimed"), "expires_at")
    );
    let attempts: [(&Clone<'_>, &String); 3] = [(fast, normal_key), (fast, slow_key), (other, slow_key)];
    let watching = Instant::now();
    let (mut tries, mut taken) = (0, 0);
    while watching.elapsed() < Duration::from_secs(2 * lease) {
        for (clone, key) in attempts {
            let out = clone.run(&["claim", "acquire", key, "--holder", &format!("intruder-{}", clone.name), "--json"]);
            tries += 1;
            if out.code == 0 {
                taken += 1;
                eprintln!("{} took {key}: {}", clone.name, out.stdout);
            } else {
                assert_eq!(out.json()["outcome"], "held", "{}", out.stderr);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "C6 (a): live claims taken over by clones an hour off: {taken} of {tries} attempts over {} s (lease {lease} s)",
        2 * lease
    );
    assert_eq!(taken, 0, "a claim its holder refreshes is never taken over, whatever the clocks say");

    // The slow holder pauses: its claim goes unrefreshed, and is taken over after a lease.
    let slow_walk = walks.pop().expect("the slow walk");
    signal(&slow_walk, libc::SIGSTOP);
    let paused = Instant::now();
    let mut winner = None;
    while winner.is_none() {
        assert!(
            paused.elapsed() < Duration::from_secs(3 * lease),
            "a paused holder's claim is taken over within a lease or two"
        );
        for clone in [fast, other] {
            let out =
                clone.run(&["claim", "acquire", slow_key, "--holder", &format!("intruder-{}", clone.name), "--json"]);
            if out.code == 0 {
                assert_eq!(out.json()["outcome"], "taken_over");
                winner = Some(clone.name);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let waited = paused.elapsed();
    eprintln!(
        "C6 (a): the paused slow holder's claim was taken over by the {} clone {:.1} s after the pause",
        winner.expect("a winner"),
        waited.as_secs_f64()
    );
    assert!(waited >= Duration::from_secs(lease - lease / 3 - 1), "not before a lease without a refresh: {waited:?}");
    let holder = remote_record(&env, &fleet.bare, slow_key).expect("claimed")["holder"].clone();
    assert_eq!(holder, format!("intruder-{}", winner.expect("a winner")).as_str());

    // Its agent finishes while the walk is paused, so the walk's first step on waking is to
    // close the unit (no refresh comes first): it must find its claim taken on the remote.
    std::fs::write(&release, "").expect("release the agents");
    wait_for("the slow clone's agent to finish", || env.path("finished-slow").exists());
    signal(&slow_walk, libc::SIGCONT);
    let slow_out = finish(slow_walk, "the slow walk");
    assert!(
        slow_out.stdout.contains("\"event\":\"unit_abandoned\"") && slow_out.stdout.contains("taken by intruder-"),
        "the resumed walk sees its claim lost and leaves the task:\n{}",
        slow_out.stdout
    );
    let task = slow.run(&["show", slow_key.trim_start_matches("node:"), "--json"]).ok().json();
    assert_eq!(task["state"], "open", "changes accepted from the superseded holder: 0");
    let normal_out = finish(walks.pop().expect("the normal walk"), "the normal walk");
    assert_eq!(normal_out.code, 0, "{}", normal_out.stderr);
}

/// (b) Twelve tasks and one `next --claim` caller in each of four clones (two with the right
/// clock, one an hour fast, one an hour slow). The callers take turns until nothing is left
/// (so every clone holds some of the tasks), then all call at once, three times each: every
/// task is handed out exactly once, and nothing a caller holds is handed to another. (One
/// caller per clone: two processes of one clone fetching the same object at once trip over
/// gix's pack `.keep` file, a separate issue.)
#[test]
fn every_task_is_handed_out_once_to_callers_in_clones_an_hour_apart() {
    let _one_at_a_time = crate::harness::heavy();
    if !faketime_available() {
        return;
    }
    let env = TestEnv::new();
    let fleet = fleet(&env, &[("normal", 0), ("fast", HOUR), ("slow", -HOUR), ("other", 0)]);
    let tasks: Vec<String> = (0..12).map(|i| fleet.clones[0].add(&format!("task {i}"))).collect();
    for clone in &fleet.clones {
        clone.run(&["sync"]).ok();
    }
    let next = |clone: &Clone<'_>| -> Option<(String, String)> {
        let holder = format!("caller-{}", clone.name);
        let task = clone.run(&["next", "--claim", "--holder", &holder, "--ttl", "10m", "--json"]).ok().json();
        (!task.is_null()).then(|| (task["id"].as_str().expect("an id").to_owned(), holder))
    };
    let mut handed = Vec::new();
    for _round in 0..tasks.len() {
        let got: Vec<_> = fleet.clones.iter().filter_map(next).collect();
        if got.is_empty() {
            break;
        }
        handed.extend(got);
    }
    let in_turn = handed.len();
    let start = std::sync::Barrier::new(fleet.clones.len());
    std::thread::scope(|scope| {
        let callers: Vec<_> = fleet
            .clones
            .iter()
            .map(|clone| {
                let (start, next) = (&start, &next);
                scope.spawn(move || {
                    start.wait();
                    (0..3).filter_map(|_| next(clone)).collect::<Vec<_>>()
                })
            })
            .collect();
        handed.extend(callers.into_iter().flat_map(|c| c.join().expect("a caller")));
    });
    let mut per_task: std::collections::BTreeMap<&str, Vec<&str>> =
        tasks.iter().map(|t| (t.as_str(), Vec::new())).collect();
    for (task, holder) in &handed {
        per_task.get_mut(task.as_str()).expect("a task of the backlog").push(holder);
    }
    let twice = per_task.values().filter(|h| h.len() > 1).count();
    let never = per_task.values().filter(|h| h.is_empty()).count();
    let by_clone: Vec<String> = fleet
        .clones
        .iter()
        .map(|c| format!("{} {}", c.name, handed.iter().filter(|(_, h)| *h == format!("caller-{}", c.name)).count()))
        .collect();
    eprintln!(
        "C6 (b): {} tasks, callers in 4 clones (+0, +1 h, -1 h, +0): handed out {} in turn ({}), {} more at once; \
         handed out twice {twice}; never {never}",
        tasks.len(),
        in_turn,
        by_clone.join(", "),
        handed.len() - in_turn
    );
    assert_eq!((twice, never, handed.len()), (0, 0, tasks.len()), "every task handed out exactly once: {per_task:#?}");
    for (task, holders) in &per_task {
        let record = remote_record(&env, &fleet.bare, &format!("node:{task}")).expect("claimed on the remote");
        assert_eq!(record["holder"], holders[0], "the remote's claim is the one handed out");
    }
}

/// (c) A task added in the clone with the right clock, done in the clone an hour fast after a
/// sync, then (after a sync) noted and reopened in the clone an hour slow — which had journaled
/// before, so its clock was behind: every clone's `log` reads add, done, note, reopen, though
/// the writers' times say otherwise.
#[test]
fn every_clone_reads_the_journal_in_causal_order_whatever_the_writers_clocks() {
    if !faketime_available() {
        return;
    }
    let env = TestEnv::new();
    let fleet = fleet(&env, &[("normal", 0), ("fast", HOUR), ("slow", -HOUR)]);
    let [normal, fast, slow] = &fleet.clones[..] else { unreachable!("three clones") };
    slow.add("the slow clone's own, before it saw anything");
    let id = normal.add("causal");
    normal.run(&["sync"]).ok();
    fast.run(&["sync"]).ok();
    fast.run(&["done", &id, "--message", "done in the fast clone"]).ok();
    fast.run(&["sync"]).ok();
    slow.run(&["sync"]).ok();
    slow.run(&["journal", "append", "note", "--task", &id, "--data", r#"{"message":"seen done"}"#]).ok();
    slow.run(&["reopen", &id]).ok();
    slow.run(&["sync"]).ok();
    for clone in [normal, fast] {
        clone.run(&["sync"]).ok();
    }
    let mut figures = Vec::new();
    for clone in &fleet.clones {
        let events =
            clone.run(&["log", "--task", &id, "--json"]).ok().json()["events"].as_array().expect("events").clone();
        let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().expect("a kind")).collect();
        assert_eq!(
            kinds,
            ["task_added", "task_done", "note", "task_reopened"],
            "{}'s journal reads in causal order",
            clone.name
        );
        let at: Vec<i64> = events.iter().map(|e| seconds(e, "at")).collect();
        assert!(at[1] - at[3] > HOUR, "the writers' clocks disagree: done is stamped after the reopen ({at:?})");
        figures.push(format!("{}: {}", clone.name, kinds.join(" → ")));
        let task = clone.run(&["show", &id, "--json"]).ok().json();
        assert_eq!(task["state"], "open", "{}: the reopen, last in causal order, decides the state", clone.name);
    }
    eprintln!("C6 (c): {}", figures.join("; "));
}

/// (d) A ref lock younger than the stale threshold (30 s) is never removed by a process whose
/// clock runs an hour fast, and one left a minute ago is still recovered by a process whose
/// clock runs an hour slow: the lock's age is read off the file system's clock.
#[test]
fn a_ref_locks_age_is_judged_by_the_file_systems_clock() {
    if !faketime_available() {
        return;
    }
    let env = TestEnv::new();
    let repo = env.repo("r");
    let lock = repo.dir.join(".git/refs/loop/claims/lock/t-lock.lock");
    std::fs::create_dir_all(lock.parent().expect("a parent")).expect("mkdir");
    let clone = |skew| Clone { name: "r", repo: Repo { env: &env, dir: repo.dir.clone() }, skew };

    // A writer at work: git keeps a lock it holds open.
    let holder = crate::harness::Holder::open(&lock);
    let fast = clone(HOUR).run(&["claim", "acquire", "lock:t-lock", "--holder", "h"]).code(1);
    let age: u64 = fast
        .stderr
        .split_once("is locked by another writer (for ")
        .and_then(|(_, rest)| rest.split_once(" s)"))
        .and_then(|(age, _)| age.parse().ok())
        .unwrap_or_else(|| panic!("the refusal says how old the lock is: {}", fast.stderr));
    assert!(age < 30, "the lock's age by the file system's clock, not an hour: {age} s");
    assert!(lock.exists(), "a held lock is never removed, though this process's clock is an hour ahead");
    drop(holder);

    let minute_ago = std::time::SystemTime::now() - Duration::from_secs(60);
    std::fs::File::options().write(true).open(&lock).and_then(|f| f.set_modified(minute_ago)).expect("age the lock");
    let slow = clone(-HOUR).run(&["claim", "acquire", "lock:t-lock", "--holder", "h", "--json"]).ok();
    assert_eq!(slow.json()["outcome"], "acquired");
    assert!(!lock.exists(), "an abandoned lock is recovered, though this process's clock is an hour behind");
    let left: Vec<String> = std::fs::read_dir(lock.parent().expect("a parent"))
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["t-lock"], "no probe or aside file is left behind");
    eprintln!(
        "C6 (d): young locks removed by a clock 1 h fast: 0; abandoned locks recovered by a clock 1 h slow: 1 of 1"
    );
}
