//! `archive` (issue 27): what the archive (`git loop gc`, docs/storage.md "Archive") keeps
//! small, at 100,000 finished tasks against 100, on a remote served by `git daemon`.
//!
//! Three fleets, each a bare remote, a clone that imported that many finished tasks (a beads
//! export, every task closed: one task ref each, where a walked task leaves about seven) and
//! published them, and a second clone following it: 100 and 100,000 folded before they were
//! published (what a fleet whose walks fold as they go holds), and 10,000 not folded, then folded
//! on the remote by `gc` from the first clone (the migration of a remote that never folded).
//! Measured: the loop's refs on the remote and per finished task, the bytes a push receives
//! before it sends (`git receive-pack --advertise-refs`, what every claim's push reads first),
//! the second clone's `sync` of one task the first added (the median of five), its
//! `next --claim`, and a fresh clone's `clone` + `init --remote` + first `status`.

use std::path::{Path, PathBuf};

use super::{daemon, median, ms, time, Row, Scratch, BIN};

/// A beads export of `n` closed tasks.
fn finished(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                r#"{{"id":"t-{i:06}","title":"finished task {i}","priority":{},"status":"closed","closed_at":"2026-01-01T00:00:00Z","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}}"#,
                i % 4
            ) + "\n"
        })
        .collect()
}

struct Fleet {
    _daemon: DaemonGuard,
    bare: PathBuf,
    url: String,
    root: PathBuf,
    first: PathBuf,
    second: PathBuf,
    added: usize,
}

/// Stops the daemon when the fleet goes.
struct DaemonGuard(std::process::Child);

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Fleet {
    /// A fleet whose remote holds `n` finished tasks, folded first (`gc` in the first clone
    /// before it published: the state a fleet whose walks fold as they go is in) or not. The
    /// remote is seeded with a plain `git push` of `refs/loop/*`: publishing 100,000 refs
    /// through leased pushes is another benchmark (`git push` matches each explicit refspec
    /// against every ref the remote has).
    fn new(s: &Scratch, name: &str, n: usize, folded: bool) -> Fleet {
        let root = s.path(name);
        std::fs::create_dir_all(&root).expect("mkdir");
        let seed = s.repo(&format!("{name}/seed"));
        s.run("git", &root, &["clone", "-q", "--bare", seed.to_str().expect("utf-8"), "r.git"]);
        let (daemon, url) = daemon(s, &root, "r.git");
        let fleet = Fleet {
            _daemon: DaemonGuard(daemon),
            bare: root.join("r.git"),
            first: root.join("c0"),
            second: root.join("c1"),
            url,
            root,
            added: 0,
        };
        s.run("git", &fleet.root, &["clone", "-q", &fleet.url, fleet.first.to_str().expect("utf-8")]);
        let file = fleet.root.join("finished.jsonl");
        std::fs::write(&file, finished(n)).expect("write");
        s.run(BIN, &fleet.first, &["import", file.to_str().expect("utf-8"), "--format", "beads"]);
        if folded {
            s.run(BIN, &fleet.first, &["gc", "--older-than", "0"]);
        }
        s.run("git", &fleet.first, &["push", "-q", "origin", "refs/loop/*:refs/loop/*"]);
        s.run(BIN, &fleet.first, &["init", "--remote", "origin"]);
        fleet.join(s, &fleet.second);
        s.run(BIN, &fleet.second, &["sync"]);
        fleet
    }

    fn join(&self, s: &Scratch, dir: &Path) -> std::time::Duration {
        let clone = time(s.cmd("git", &self.root).args(["clone", "-q", &self.url, dir.to_str().expect("utf-8")]));
        clone + time(s.cmd(BIN, dir).args(["init", "--remote", "origin"]))
    }

    fn loop_refs(&self, s: &Scratch) -> usize {
        s.run("git", &self.bare, &["for-each-ref", "refs/loop"]).lines().count()
    }

    fn advertisement(&self, s: &Scratch) -> usize {
        let out = s.cmd("git", &self.bare).args(["receive-pack", "--advertise-refs", "."]).output().expect("spawn");
        assert!(out.status.success(), "receive-pack --advertise-refs");
        out.stdout.len()
    }

    /// The second clone's sync of one task the first added and published (the median of five).
    fn sync_one(&mut self, s: &Scratch) -> std::time::Duration {
        let mut times = Vec::new();
        for _ in 0..5 {
            self.added += 1;
            s.run(BIN, &self.first, &["add", &format!("new task {}", self.added)]);
            s.run(BIN, &self.first, &["sync"]);
            times.push(time(s.cmd(BIN, &self.second).args(["sync"])));
        }
        median(times)
    }

    /// The second clone's `next --claim` of one of the new tasks, the claim released after.
    fn next_claim(&self, s: &Scratch) -> std::time::Duration {
        let mut times = Vec::new();
        for _ in 0..3 {
            times.push(time(s.cmd(BIN, &self.second).args(["next", "--claim", "--holder", "bench", "--json"])));
        }
        median(times)
    }
}

fn kb(bytes: usize) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KB", bytes as f64 / 1024.0)
    }
}

fn text(name: &str, ours: String, target: &str) -> Row {
    Row { name: name.into(), ours, git: "-".into(), ratio: "-".into(), target: target.into() }
}

pub fn bench_archive(s: &Scratch) -> Vec<Row> {
    const BIG: usize = 100_000;
    const MIGRATED: usize = 10_000;
    let mut rows = Vec::new();
    eprint!("  100 finished tasks, folded… ");
    let mut small = Fleet::new(s, "archive-100", 100, true);
    let small_sync = small.sync_one(s);
    eprintln!("sync of one task {}", ms(small_sync));

    eprint!("  {BIG} finished tasks, folded… ");
    let mut big = Fleet::new(s, "archive-after", BIG, true);
    let (refs_after, advert_after) = (big.loop_refs(s), big.advertisement(s));
    let sync_after = big.sync_one(s);
    let claim_after = big.next_claim(s);
    let fresh = big.root.join("c2");
    let joined = big.join(s, &fresh);
    let status = time(s.cmd(BIN, &fresh).args(["status", "--json"]));
    let status_again = time(s.cmd(BIN, &fresh).args(["status", "--json"]));
    let listed = s.run(BIN, &fresh, &["list", "--json"]);
    let tasks: serde_json::Value = serde_json::from_str(&listed).expect("list --json");
    let count = tasks["tasks"].as_array().map_or(0, Vec::len);
    eprintln!("{refs_after} refs, {} advertised, sync {}", kb(advert_after), ms(sync_after));

    // A remote that never folded (a fresh clone of one of 100,000 takes minutes: see
    // docs/performance.md), then its first fold by `gc` from a clone, its deletes pushed.
    eprint!("  {MIGRATED} finished tasks, not folded… ");
    let mut migrated = Fleet::new(s, "archive-migrate", MIGRATED, false);
    let (refs_before, advert_before) = (migrated.loop_refs(s), migrated.advertisement(s));
    let sync_before = migrated.sync_one(s);
    let claim_before = migrated.next_claim(s);
    eprintln!("{refs_before} refs, {} advertised, sync {}", kb(advert_before), ms(sync_before));
    let gc = time(s.cmd(BIN, &migrated.first).args(["gc", "--older-than", "0"]));
    let absorb = time(s.cmd(BIN, &migrated.second).args(["sync"]));
    let (refs_migrated, advert_migrated) = (migrated.loop_refs(s), migrated.advertisement(s));
    let sync_migrated = migrated.sync_one(s);
    eprintln!("  gc on the remote {:.1} s, {refs_migrated} refs left", gc.as_secs_f64());

    rows.push(text(
        &format!("refs under refs/loop on the remote: {MIGRATED} finished tasks not folded / {BIG} folded"),
        format!("{refs_before} / {refs_after}"),
        "folded: ≤ 0.05 a finished task",
    ));
    rows.push(text(
        "refs per finished task on the remote, folded",
        format!("{:.5}", refs_after as f64 / (BIG + big.added) as f64),
        "≤ 0.05",
    ));
    rows.push(text(
        &format!("bytes a push receives before sending: {MIGRATED} finished tasks not folded / {BIG} folded"),
        format!("{} / {}", kb(advert_before), kb(advert_after)),
        "folded: ≤ 1 MB",
    ));
    rows.push(Row {
        name: format!(
            "a clone's sync of one new task: {BIG} finished tasks folded (ours) against 100 folded (git column)"
        ),
        ours: ms(sync_after),
        git: ms(small_sync),
        ratio: format!("{:.2}", sync_after.as_secs_f64() / small_sync.as_secs_f64()),
        target: format!("≤ 1.5 ({MIGRATED} not folded: {})", ms(sync_before)),
    });
    rows.push(text(
        &format!("next --claim: {MIGRATED} finished tasks not folded / {BIG} folded"),
        format!("{} / {}", ms(claim_before), ms(claim_after)),
        "no worse",
    ));
    rows.push(text(
        &format!(
            "a fresh clone's clone + init --remote / first status / second status, {BIG} finished tasks folded ({count} tasks listed)"
        ),
        format!("{} / {} / {}", ms(joined), ms(status), ms(status_again)),
        "first status ≤ 2 s",
    ));
    rows.push(text(
        &format!(
            "the first gc on a remote of {MIGRATED} finished tasks / the other clone's next sync / then its sync of one task"
        ),
        format!(
            "{:.1} s ({refs_migrated} refs, {} advertised after) / {} / {}",
            gc.as_secs_f64(),
            kb(advert_migrated),
            ms(absorb),
            ms(sync_migrated)
        ),
        "-",
    ));
    rows
}
