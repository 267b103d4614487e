//! The soak (issue "Hardening"): one walk of 2,000 units with a flaky agent — a tenth killed, a
//! tenth timing out, a tenth failing — while `git gc`, `git pack-refs --all` and `git worktree
//! prune` run every few seconds beside it. Nothing may be lost, no process may be left, no lock
//! may stay behind, and the walk's memory must stay flat. It takes minutes, so it runs on
//! demand: `cargo test --release --test it soak -- --ignored --nocapture`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::TestEnv;

/// Units in the walk (`GIT_LOOP_SOAK_UNITS` overrides, for a shorter run).
fn units() -> usize {
    std::env::var("GIT_LOOP_SOAK_UNITS").ok().and_then(|n| n.parse().ok()).unwrap_or(2_000)
}

/// Resident memory of process `pid`, in KiB: (anonymous, file-backed). The anonymous part is
/// the process's own (heap, stacks); the file-backed part is pages of mapped files — the
/// binary, the packs, the index — shared with the page cache, which the kernel takes back
/// when it needs them, and which grows with the repository, not with the process.
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
    };
    Some((field("RssAnon:")?, field("RssFile:")? + field("RssShmem:").unwrap_or(0)))
}

/// Live processes that carry a session marker of this test's walk in their environment.
fn marked_processes(root: &std::path::Path) -> Vec<u32> {
    let needle = root.display().to_string();
    std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                let env = String::from_utf8_lossy(&env);
                env.contains("GIT_LOOP_MARKER=") && env.contains(&needle)
            })
        })
        .collect()
}

#[test]
#[ignore = "minutes long: run on demand (see the module docs)"]
fn soak_a_long_walk_with_a_flaky_agent_and_gc_beside_it_loses_nothing() {
    let units = units();
    let env = TestEnv::new();
    let repo = env.repo("r");
    let lines: String = (0..units).map(|i| format!("{{\"title\": \"unit {i:04}\"}}\n")).collect();
    let file = env.path("units.jsonl");
    std::fs::write(&file, lines).expect("write");
    repo.run(&["import", file.to_str().expect("utf-8")]).ok();
    // One in ten killed (no verdict: continued), one in ten outlives its timeout, one in ten
    // fails; the rest are done.
    let agent = env.agent(
        "flaky",
        "n=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')\n\
         echo \"$GIT_LOOP_TASK $n\" >> work.txt\n\
         if [ \"$n\" -lt 26 ]; then kill -9 $$; fi\n\
         if [ \"$n\" -lt 52 ]; then exec sleep 30; fi\n\
         if [ \"$n\" -lt 78 ]; then git loop finish failed --message flaky; exit 0; fi\n\
         git loop finish done --message ok",
    );
    let out = std::fs::File::create(env.path("walk.out")).expect("out");
    let err = std::fs::File::create(env.path("walk.err")).expect("err");
    let mut walk = repo
        .command(&[
            "run",
            "--agent-cmd",
            &agent,
            "--parallel",
            "2",
            "--session-timeout",
            "2s",
            "--grace",
            "1s",
            "--pause-after",
            "0",
        ])
        .env_remove("GIT_LOOP_NOW")
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("the walk");
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut housekeeping = 0;
    let mut last = Instant::now();
    while walk.try_wait().expect("poll").is_none() {
        assert!(started.elapsed() < Duration::from_secs(3 * 3600), "the soak did not end within 3 hours");
        if let Some(rss) = rss_kib(walk.id()) {
            samples.push(rss);
        }
        if last.elapsed() > Duration::from_secs(3) {
            last = Instant::now();
            housekeeping += 1;
            for args in [&["gc", "--quiet"][..], &["pack-refs", "--all"], &["worktree", "prune"]] {
                // git may find a lock of ours in its way for a moment; that is not a failure.
                let _ = env.seal(&mut Command::new("git")).args(args).current_dir(&repo.dir).output();
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let status = walk.wait().expect("wait");
    let elapsed = started.elapsed();
    let tail = std::fs::read_to_string(env.path("walk.out")).unwrap_or_default();
    let tail: Vec<&str> = tail.lines().rev().take(3).collect();
    let errors = std::fs::read_to_string(env.path("walk.err")).unwrap_or_default();
    let errors: Vec<&str> = errors.lines().rev().take(5).collect();
    let board = repo.run(&["list", "--json"]).ok().json();
    let tasks = board["tasks"].as_array().expect("tasks");
    let open: Vec<&serde_json::Value> = tasks.iter().filter(|t| t["state"] == "open").collect();
    let done = tasks.iter().filter(|t| t["state"] == "done").count();
    let failed = tasks.iter().filter(|t| t["state"] == "failed").count();
    // (`.git/loop/*.lock` are flock files, never deleted by design: not locks left behind.)
    let locks: Vec<String> = walkdir(&repo.dir.join(".git"))
        .into_iter()
        .filter(|p| p.ends_with(".lock") && !p.starts_with("loop/"))
        .collect();
    let orphans = marked_processes(env.root.path());
    let tenth = (samples.len() / 10).max(1);
    let curve = |part: fn(&(u64, u64)) -> u64| -> Vec<u64> {
        samples.chunks(tenth).map(|c| c.iter().map(part).sum::<u64>() / c.len() as u64 / 1024).collect()
    };
    eprintln!("soak: the walk's anonymous memory by tenths of the run, MiB: {:?}", curve(|s| s.0));
    eprintln!("soak: the walk's file-backed memory by tenths of the run, MiB: {:?}", curve(|s| s.1));
    let quarter = (samples.len() / 4).max(1);
    let mean = |part: &[(u64, u64)], f: fn(&(u64, u64)) -> u64| part.iter().map(f).sum::<u64>() / part.len() as u64;
    let (first, last) = (&samples[..quarter], &samples[samples.len() - quarter..]);
    let (early, late) = (mean(first, |s| s.0), mean(last, |s| s.0));
    let (early_file, late_file) = (mean(first, |s| s.1), mean(last, |s| s.1));
    let packs: u64 = std::fs::read_dir(repo.dir.join(".git/objects/pack"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len() / 1024)
        .sum();
    eprintln!(
        "soak: {units} units in {:.0} s ({housekeeping} rounds of gc, pack-refs and worktree prune): {done} done, \
         {failed} failed, {} open; exit {:?}; orphan processes {}, locks left {}; the walk's anonymous memory \
         {early} KiB in its first quarter, {late} KiB in its last; file-backed {early_file} KiB, then \
         {late_file} KiB (the packs are {packs} KiB at the end); last lines: {tail:?}; last errors: {errors:?}",
        elapsed.as_secs_f64(),
        open.len(),
        status.code(),
        orphans.len(),
        locks.len()
    );
    assert_eq!(done + failed, units, "every unit ends done or failed (lost: none): {} open", open.len());
    assert!(orphans.is_empty(), "no process of a session is left: {orphans:?}");
    assert!(locks.is_empty(), "no lock is left behind: {locks:?}");
    // Flat: what the walk itself holds does not grow with the units it worked (a quarter of
    // slack for the allocator's moods, and 2 MiB for the rows of a backlog this size).
    assert!(late <= early + early / 4 + 2 * 1024, "the walk's own memory stays flat ({early} KiB → {late} KiB)");
}

/// Every file under `dir`, as paths relative to it.
fn walkdir(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap_or(&path).display().to_string());
            }
        }
    }
    out
}

/// The full network scenario of issue 31 (`fleet_net`): three clones × 60 tasks behind their
/// proxies; every third connection reset until 15 tasks are done, then every new connection
/// stalled 20 s for 40 s (past the 10 s transfer timeout), then the last clone cut off for two
/// minutes while it holds a claim (lease 30 s), then healed. On demand:
/// `cargo test --test it soak::three_clones -- --ignored --nocapture` (about five minutes).
#[test]
#[ignore = "minutes long: run on demand"]
fn three_clones_ride_out_resets_twenty_second_stalls_and_two_minutes_cut_off() {
    let _one_at_a_time = crate::harness::heavy();
    let figures = crate::fleet_net::ride_out(&crate::fleet_net::Scenario {
        tasks: 60,
        agent_secs: 2,
        lease: "30s",
        sync_every: Duration::from_secs(10),
        transfer_timeout: Duration::from_secs(10),
        reset_until_done: 15,
        stall: Duration::from_secs(20),
        stall_for: Duration::from_secs(40),
        cut_for: Duration::from_secs(120),
    });
    eprintln!(
        "60 tasks: {} sessions ({:.2} per task), {} worked more than once, kept tries {:?}; converged {:?} after the heal; {:?} in all; said per clone (outages, ends) {:?}",
        figures.sessions,
        figures.sessions as f64 / figures.tasks as f64,
        figures.worked_twice,
        figures.kept_tries,
        figures.converged_after,
        figures.elapsed,
        figures.said
    );
}
