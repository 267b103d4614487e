//! `warm` (issue 25): what a try's warm start buys on real projects, measured end to end
//! through `git loop run`, in one run. Four parts, each printing its rows:
//!
//! 1. **Rust**: a clone of this repository (its `Cargo.lock`'s ~240 packages, all in
//!    `~/.cargo`'s cache; `cargo build --offline -q`, debug), built cold once in its main
//!    checkout. Rows: two tries' first build with `loop.warm target` against the main checkout's
//!    incremental build after `touch src/lib.rs` (the mean of two; target ≤ 2×); the same with
//!    the warming itself added (`try_opened`'s `warmed.elapsed_ms`); the main checkout's cold
//!    and nothing-changed builds for scale. Bounded by what cargo rebuilds in the try: the
//!    workspace's own crate and its build script, in full — rustc ignores an incremental cache
//!    made in another directory (docs/performance.md) — while every dependency is kept. A cold
//!    try is not run: its first build is the main checkout's cold build again (minutes).
//! 2. **npm**: a small package (express, lodash, chalk; mocha and chai to test) whose
//!    `package-lock.json` is committed and `node_modules/` ignored. Rows: `npm ci && npm test`
//!    and `npm install && npm test`, each as a try's first command, warm (`loop.warm
//!    node_modules`) and cold, against the same command in the main checkout with its
//!    `node_modules/` there (the median of three). `npm ci` deletes `node_modules/` before it
//!    installs, so warming cannot speed it (its row says so); `npm install` keeps an up-to-date
//!    one, which is what warming is for.
//! 3. **Pool**: a repository of 3,200 files in nested directories. Five tasks walked one at a
//!    time with `loop.pool 4`; each `try_opened`'s `checkout` (`how`: `pooled` or `added`,
//!    `elapsed_ms`, git-loop's own clock) against `git worktree add <dir> -b <branch>` of the
//!    same repository, whole process (the median of five; target for pooled ≤ 0.5×), and
//!    `git worktree remove` for reference.
//! 4. **Disk**: in the Rust project, four tasks walked with `--parallel 4`, agents that wait
//!    until all four tries are open; while they are, the growth of the file system's used blocks
//!    (`statvfs`, after `sync`, from before the walk) and `du -sk` of the four worktrees, for
//!    four warm tries (`loop.warm target`) against four cold ones (`loop.warm none`). With the
//!    copy fallback (ext4) each warm try costs a whole `target/`; with reflinks (XFS, btrfs)
//!    next to nothing, which `du` does not see (it counts shared blocks in full). Other work writing to the same file
//!    system shows up in the `df` figure. `TMPDIR` picks the file system the scratch is on.
//!
//! Every timed command — the main checkout's and the agents' alike — runs through the same
//! shell snippet (`timed`) under `env -i` with the same variables: PATH, the scratch's HOME,
//! and the real user's `CARGO_HOME`, `RUSTUP_HOME` and npm cache (the scratch's HOME has none).
//! A session's own PATH has git-loop's directory in front, and this crate's build script reruns
//! when PATH changes: the clean environment keeps that out of the try's figure. Sessions run
//! with `loop.sandbox off` (so cargo and npm see the real caches) and, but for part 3,
//! `loop.pool 0`, so that each try is a new worktree that warming fills.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{mb, median, ms, time, Row, Scratch, BIN};

pub(super) fn bench_warm(s: &Scratch) -> Vec<Row> {
    let env = clean_env(s);
    let (mut rows, proj) = rust(s, &env);
    rows.extend(npm(s, &env));
    rows.extend(pool(s));
    rows.extend(disk(s, &proj));
    rows
}

/// Shell-quoted.
fn q(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn utf8(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}", a.as_secs_f64() / b.as_secs_f64())
}

fn info(name: String, ours: String, other: String, target: &str) -> Row {
    Row { name, ours, git: other, ratio: "-".into(), target: target.into() }
}

/// `env -i` and what every timed command runs with (see the module's comment).
fn clean_env(s: &Scratch) -> String {
    let home = std::env::var("HOME").expect("HOME");
    let var = |names: &[&str], default: String| {
        names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty())).unwrap_or(default)
    };
    let mut vars = vec![
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", utf8(&s.path("home")).to_owned()),
        ("CARGO_HOME", var(&["CARGO_HOME"], format!("{home}/.cargo"))),
        ("RUSTUP_HOME", var(&["RUSTUP_HOME"], format!("{home}/.rustup"))),
        ("npm_config_cache", var(&["npm_config_cache", "NPM_CONFIG_CACHE"], format!("{home}/.npm"))),
        // No audit request, funding note or update check: the install alone.
        ("npm_config_audit", "false".into()),
        ("npm_config_fund", "false".into()),
        ("npm_config_update_notifier", "false".into()),
    ];
    // The toolchain `cargo bench` itself runs with, when rustup chose it.
    if let Ok(toolchain) = std::env::var("RUSTUP_TOOLCHAIN") {
        vars.push(("RUSTUP_TOOLCHAIN", toolchain));
    }
    let mut line = "env -i".to_owned();
    for (name, value) in vars {
        line.push_str(&format!(" {name}={}", q(&value)));
    }
    line
}

/// A shell script that runs `command` (`sh -c`, under `env`) where it is started, writes its
/// wall time in milliseconds to `out`, then runs `then`; it stops at the first failure.
fn timed(env: &str, command: &str, out: &Path, then: &str) -> String {
    format!(
        "set -e\nstarted=$(date +%s%N)\n{env} sh -c {}\nended=$(date +%s%N)\n\
         echo $(( (ended - started) / 1000000 )) > {}\n{then}\n",
        q(command),
        q(utf8(out))
    )
}

/// The time a `timed` script wrote (the file is removed, so a stale one is never read).
fn read_ms(out: &Path) -> Option<Duration> {
    let text = std::fs::read_to_string(out).ok()?;
    std::fs::remove_file(out).expect("remove the time");
    text.trim().parse().ok().map(Duration::from_millis)
}

/// `command` timed in `dir` (the main checkout).
fn timed_here(s: &Scratch, dir: &Path, env: &str, command: &str) -> Duration {
    let out = s.path("warm-here.ms");
    s.run("sh", dir, &["-c", &timed(env, command, &out, "")]);
    read_ms(&out).expect("the command's time")
}

/// `git loop run <args>` in `repo` to its end; panics with its output if it fails.
fn walk(s: &Scratch, repo: &Path, args: &[&str]) -> String {
    let out = s.cmd(BIN, repo).arg("run").args(args).output().expect("spawn git-loop");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "git loop run {args:?}: {}\n{stdout}\n{stderr}", out.status);
    stdout.into_owned()
}

/// The data of `task`'s last `try_opened` in the journal.
fn try_opened(s: &Scratch, repo: &Path, task: &str) -> serde_json::Value {
    let log: serde_json::Value =
        serde_json::from_str(&s.run(BIN, repo, &["log", "--task", task, "--json"])).expect("log --json");
    let opened = log["events"].as_array().and_then(|events| events.iter().rev().find(|e| e["kind"] == "try_opened"));
    opened.map(|e| e["data"].clone()).unwrap_or_else(|| panic!("no try_opened for {task}: {log}"))
}

/// One walk of `task` in `repo` whose agent times `command` (see `timed`) and finishes done:
/// the command's time and the try's `try_opened`. The try must be a new worktree.
fn timed_try(
    s: &Scratch,
    repo: &Path,
    env: &str,
    name: &str,
    task: &str,
    command: &str,
) -> (Duration, serde_json::Value) {
    let out = s.path(&format!("warm-{name}.ms"));
    let script = s.path(&format!("warm-{name}.sh"));
    std::fs::write(&script, timed(env, command, &out, "git loop finish done")).expect("write the agent");
    let agent = format!("sh {}", q(utf8(&script)));
    let stdout = walk(s, repo, &["--agent-cmd", &agent, "--grace", "1", "--task", task]);
    if let Some(line) = stdout.lines().find(|l| l.contains("opened try")) {
        eprintln!("    {name}: {}", line.trim());
    }
    let took = read_ms(&out).unwrap_or_else(|| panic!("{name}'s agent wrote no time; the walk said:\n{stdout}"));
    let opened = try_opened(s, repo, task);
    if opened["checkout"]["how"] == "pooled" {
        eprintln!("    note: {name}'s try reused a pooled worktree despite loop.pool 0: {opened}");
    }
    eprintln!("    {name}: {command}: {}", secs(took));
    (took, opened)
}

/// A try's `warmed`: its time, and how it is described (`copy, 1234.5 MB, 5,678 files`).
fn warming(opened: &serde_json::Value) -> (Duration, String) {
    let warmed = &opened["warmed"];
    let elapsed = warmed["elapsed_ms"].as_u64().unwrap_or_else(|| panic!("the try was not warmed: {opened}"));
    let how = format!(
        "{}, {}, {} files",
        warmed["method"].as_str().unwrap_or("?"),
        mb(warmed["bytes"].as_u64().unwrap_or(0)),
        warmed["files"].as_u64().unwrap_or(0)
    );
    (Duration::from_millis(elapsed), how)
}

/// `du -sk` of `path`, in bytes.
fn du(s: &Scratch, path: &Path) -> u64 {
    let out = s.run("du", s.dir.path(), &["-sk", utf8(path)]);
    let kib: u64 = out.split_whitespace().next().and_then(|k| k.parse().ok()).expect("du's figure");
    kib * 1024
}

/// The bytes in use on the file system holding `path`, after a `sync`.
fn df_used(path: &Path) -> u64 {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: sync takes nothing and cannot fail.
    unsafe { libc::sync() };
    // SAFETY: an all-zero statvfs is a valid value, filled in by statvfs for a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut st) };
    assert_eq!(rc, 0, "statvfs {}", path.display());
    (st.f_blocks - st.f_bfree) * st.f_frsize
}

fn config(s: &Scratch, repo: &Path, settings: &[(&str, &str)]) {
    for (key, value) in settings {
        s.run("git", repo, &["config", key, value]);
    }
}

/// Part 1: the Rust project. Returns its rows and the project (part 4 uses it again).
fn rust(s: &Scratch, env: &str) -> (Vec<Row>, PathBuf) {
    let proj = s.path("warm-rust");
    s.run("git", s.dir.path(), &["clone", "-q", env!("CARGO_MANIFEST_DIR"), utf8(&proj)]);
    // Nothing the walks do may reach the repository it was cloned from.
    s.run("git", &proj, &["remote", "remove", "origin"]);
    let ignored = s.cmd("git", &proj).args(["check-ignore", "-q", "target/"]).status().expect("git");
    if !ignored.success() {
        let exclude = proj.join(".git/info/exclude");
        let old = std::fs::read_to_string(&exclude).unwrap_or_default();
        std::fs::write(&exclude, format!("{old}/target/\n")).expect("ignore target/");
    }
    let lock = std::fs::read_to_string(proj.join("Cargo.lock")).expect("Cargo.lock");
    let packages = lock.lines().filter(|l| *l == "[[package]]").count();
    let source = if proj.join("src/lib.rs").exists() { "src/lib.rs" } else { "src/main.rs" };
    let build = "cargo build --offline -q";
    eprint!("  Rust, {packages} packages: the main checkout's cold build… ");
    let cold = timed_here(s, &proj, env, build);
    eprintln!("{}", secs(cold));
    let unchanged = timed_here(s, &proj, env, build);
    let incremental: Vec<Duration> = (0..2)
        .map(|_| {
            s.run("touch", &proj, &[source]);
            timed_here(s, &proj, env, build)
        })
        .collect();
    let incr = incremental.iter().sum::<Duration>() / incremental.len() as u32;
    let target_size = du(s, &proj.join("target"));
    eprintln!(
        "  nothing changed {}; incremental (touch {source}) {}; target/ {} by du",
        secs(unchanged),
        incremental.iter().map(|d| secs(*d)).collect::<Vec<_>>().join(", "),
        mb(target_size)
    );
    config(s, &proj, &[("loop.sandbox", "off"), ("loop.pool", "0"), ("loop.warm", "target")]);
    let (mut builds, mut warmings, mut hows) = (Vec::new(), Vec::new(), Vec::new());
    for n in 1..=2 {
        let task = s.run(BIN, &proj, &["add", &format!("warm build {n}")]);
        let (took, opened) = timed_try(s, &proj, env, &format!("rust-warm-{n}"), &task, build);
        let (warmed, how) = warming(&opened);
        builds.push(took);
        warmings.push(warmed);
        hows.push(how);
    }
    let each = |xs: &[Duration]| xs.iter().map(|d| secs(*d)).collect::<Vec<_>>().join(", ");
    let ratios = |xs: &[Duration]| xs.iter().map(|d| ratio(*d, incr)).collect::<Vec<_>>().join(", ");
    let with: Vec<Duration> = builds.iter().zip(&warmings).map(|(b, w)| *b + *w).collect();
    let other = format!("other: the main checkout's build after touch {source} (mean of 2)");
    let rows = vec![
        Row {
            name: format!("Rust ({packages} packages): a warm try's first cargo build (two tries)"),
            ours: each(&builds),
            git: secs(incr),
            ratio: ratios(&builds),
            target: format!("≤ 2; {other}"),
        },
        Row {
            name: "… with its warming (loop.warm target) added".into(),
            ours: each(&with),
            git: secs(incr),
            ratio: ratios(&with),
            target: other.clone(),
        },
        info("… its warming alone".into(), each(&warmings), "-".into(), &hows.join("; ")),
        Row {
            name: "… the main checkout's cold build (a cold try's first build is the same; not run)".into(),
            ours: secs(cold),
            git: secs(incr),
            ratio: ratio(cold, incr),
            target: other.clone(),
        },
        Row {
            name: "… the main checkout's build, nothing changed".into(),
            ours: secs(unchanged),
            git: secs(incr),
            ratio: ratio(unchanged, incr),
            target: other,
        },
    ];
    (rows, proj)
}

const PACKAGE_JSON: &str = r#"{
  "name": "warm-bench",
  "version": "1.0.0",
  "private": true,
  "scripts": { "test": "mocha --reporter dot" },
  "dependencies": { "chalk": "^4.1.2", "express": "^4.21.2", "lodash": "^4.17.21" },
  "devDependencies": { "chai": "^4.5.0", "mocha": "^10.8.2" }
}
"#;

const TEST_JS: &str = r#"const assert = require('assert');
const { expect } = require('chai');
const _ = require('lodash');
const express = require('express');
const chalk = require('chalk');

describe('warm bench', () => {
  it('chunks with lodash', () => expect(_.chunk([1, 2, 3, 4], 2)).to.deep.equal([[1, 2], [3, 4]]));
  it('makes an express app', () => {
    const app = express();
    app.get('/', (req, res) => res.send('ok'));
    assert.strictEqual(typeof app.listen, 'function');
  });
  it('colours with chalk', () => assert.ok(chalk.red('x').includes('x')));
});
"#;

/// Part 2: the npm project.
fn npm(s: &Scratch, env: &str) -> Vec<Row> {
    let repo = s.repo("warm-npm");
    std::fs::write(repo.join("package.json"), PACKAGE_JSON).expect("package.json");
    std::fs::create_dir_all(repo.join("test")).expect("mkdir");
    std::fs::write(repo.join("test/app.test.js"), TEST_JS).expect("test");
    std::fs::write(repo.join(".gitignore"), "node_modules/\n").expect(".gitignore");
    eprint!("  npm: npm install (writes the lock file)… ");
    eprintln!("{}", secs(timed_here(s, &repo, env, "npm install")));
    s.run("git", &repo, &["add", "package.json", "package-lock.json", "test", ".gitignore"]);
    s.run("git", &repo, &["commit", "-q", "-m", "an npm package"]);
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join("package-lock.json")).expect("lock")).expect("json");
    let packages = lock["packages"].as_object().map_or(0, |p| p.keys().filter(|k| !k.is_empty()).count());
    let modules = du(s, &repo.join("node_modules"));
    config(s, &repo, &[("loop.sandbox", "off"), ("loop.pool", "0")]);
    let (ci, install) = ("npm ci && npm test", "npm install && npm test");
    let here = |command: &str| {
        let runs: Vec<Duration> = (0..3).map(|_| timed_here(s, &repo, env, command)).collect();
        eprintln!("    main checkout: {command}: {}", runs.iter().map(|d| secs(*d)).collect::<Vec<_>>().join(", "));
        median(runs)
    };
    let (ci_here, install_here, test_here) = (here(ci), here(install), here("npm test"));
    let mut tried = Vec::new();
    for (n, (warm, command)) in [(true, ci), (true, install), (false, ci), (false, install)].into_iter().enumerate() {
        if warm {
            config(s, &repo, &[("loop.warm", "node_modules")]);
        } else {
            config(s, &repo, &[("loop.warm", "none")]);
        }
        let task = s.run(BIN, &repo, &["add", &format!("npm {n}")]);
        let kind = if warm { "warm" } else { "cold" };
        let (took, opened) = timed_try(s, &repo, env, &format!("npm-{kind}-{n}"), &task, command);
        tried.push((took, warm.then(|| warming(&opened))));
    }
    let here_of = |n: usize| if n.is_multiple_of(2) { ci_here } else { install_here };
    let mut rows = Vec::new();
    for (n, (label, command, target)) in [
        ("warm try", ci, "npm ci deletes node_modules/ first: warming cannot help"),
        ("warm try", install, "≤ 2"),
        ("cold try", ci, "-"),
        ("cold try", install, "-"),
    ]
    .into_iter()
    .enumerate()
    {
        rows.push(Row {
            name: format!("npm ({packages} packages, node_modules/ {}): {command}, {label}", mb(modules)),
            ours: secs(tried[n].0),
            git: secs(here_of(n)),
            ratio: ratio(tried[n].0, here_of(n)),
            target: format!("{target}; other: the same in the main checkout, node_modules/ there (median of 3)"),
        });
    }
    let warmings: Vec<String> =
        tried.iter().filter_map(|(_, w)| w.as_ref()).map(|(d, how)| format!("{} ({how})", secs(*d))).collect();
    rows.push(info("… the warm tries' warming (loop.warm node_modules)".into(), warmings.join(", "), "-".into(), "-"));
    rows.push(info("… npm test alone in the main checkout".into(), secs(test_here), "-".into(), "-"));
    rows
}

/// Part 3: pooled worktrees against `git worktree add`.
fn pool(s: &Scratch) -> Vec<Row> {
    const FILES: usize = 3_200;
    const TASKS: usize = 5;
    let repo = s.repo("warm-pool");
    for i in 0..FILES {
        let path = repo.join(format!("src/m{:02}/s{}/f{:02}.txt", i / 160, (i / 16) % 10, i % 16));
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, format!("file {i}\n{}\n", "x".repeat(64 + i % 128))).expect("write");
    }
    s.run("git", &repo, &["add", "-A"]);
    s.run("git", &repo, &["commit", "-q", "-m", "3,200 files"]);
    config(s, &repo, &[("loop.sandbox", "off"), ("loop.pool", "4")]);
    let tasks: Vec<String> = (0..TASKS).map(|i| s.run(BIN, &repo, &["add", &format!("pool {i}")])).collect();
    eprint!("  pool: {TASKS} tasks one at a time, loop.pool 4… ");
    let started = Instant::now();
    walk(s, &repo, &["--agent-cmd", "git loop finish done", "--grace", "1"]);
    eprintln!("{:.1} s", started.elapsed().as_secs_f64());
    let checkouts: Vec<Option<(String, Duration)>> = tasks
        .iter()
        .map(|task| {
            let opened = try_opened(s, &repo, task);
            let checkout = &opened["checkout"];
            let how = checkout["how"].as_str()?.to_owned();
            let elapsed = checkout["elapsed_ms"].as_u64()?;
            eprintln!("    {task}: checkout {checkout}");
            Some((how, Duration::from_millis(elapsed)))
        })
        .collect();
    let (mut adds, mut removes) = (Vec::new(), Vec::new());
    for i in 0..5 {
        let dir = s.path(&format!("warm-pool-wt-{i}"));
        adds.push(time(s.cmd("git", &repo).args(["worktree", "add", "-q", utf8(&dir), "-b", &format!("x{i}")])));
        removes.push(time(s.cmd("git", &repo).args(["worktree", "remove", utf8(&dir)])));
        s.run("git", &repo, &["branch", "-q", "-D", &format!("x{i}")]);
    }
    let (add, remove) = (median(adds), median(removes));
    let other = "other: git worktree add <dir> -b <branch>, same repository (median of 5)";
    let figure = |how: &str| -> (String, String) {
        if checkouts.iter().any(Option::is_none) {
            return ("n/a (no checkout field: pool not built)".into(), "n/a".into());
        }
        let of: Vec<Duration> = checkouts.iter().flatten().filter(|(h, _)| h == how).map(|(_, d)| *d).collect();
        if of.is_empty() {
            return (format!("n/a (no try was {how})"), "n/a".into());
        }
        let n = of.len();
        let m = median(of);
        (format!("{} (median of {n})", ms(m)), ratio(m, add))
    };
    let ((pooled, pooled_ratio), (added, added_ratio)) = (figure("pooled"), figure("added"));
    vec![
        Row {
            name: format!("a try's worktree, {FILES} files: pooled (loop.pool 4, checkout.elapsed_ms)"),
            ours: pooled,
            git: ms(add),
            ratio: pooled_ratio,
            target: format!("≤ 0.5; {other}"),
        },
        Row {
            name: "… added (a new worktree, checkout.elapsed_ms)".into(),
            ours: added,
            git: ms(add),
            ratio: added_ratio,
            target: other.into(),
        },
        info(
            "… git worktree remove of the same (what a kept worktree also saves)".into(),
            "-".into(),
            ms(remove),
            "median of 5",
        ),
    ]
}

/// Part 4: the disk four warm tries take against four cold ones, while they exist.
fn disk(s: &Scratch, proj: &Path) -> Vec<Row> {
    let target = du(s, &proj.join("target"));
    let measure = |warm: bool| -> (u64, u64, Vec<serde_json::Value>) {
        let kind = if warm { "warm" } else { "cold" };
        if warm {
            config(s, proj, &[("loop.warm", "target")]);
        } else {
            config(s, proj, &[("loop.warm", "none")]);
        }
        let tasks: Vec<String> = (0..4).map(|i| s.run(BIN, proj, &["add", &format!("disk {kind} {i}")])).collect();
        let dir = s.path(&format!("warm-disk-{kind}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let d = q(utf8(&dir));
        // Each agent says where its try is, then waits (up to 30 minutes) for the word to go.
        let script = format!(
            "set -e\npwd > {d}/ready-$GIT_LOOP_TASK.tmp\nmv {d}/ready-$GIT_LOOP_TASK.tmp {d}/ready-$GIT_LOOP_TASK\n\
             i=0\nwhile [ ! -e {d}/go ] && [ $i -lt 18000 ]; do sleep 0.1; i=$((i + 1)); done\ngit loop finish done\n"
        );
        std::fs::write(dir.join("agent.sh"), script).expect("write the agent");
        let agent = format!("sh {}", q(utf8(&dir.join("agent.sh"))));
        let mut args = vec!["run", "--agent-cmd", &agent, "--parallel", "4", "--grace", "1"];
        for task in &tasks {
            args.extend(["--task", task.as_str()]);
        }
        let before = df_used(s.dir.path());
        let (out, err) = (dir.join("walk.out"), dir.join("walk.err"));
        let mut child = s
            .cmd(BIN, proj)
            .args(&args)
            .stdout(std::fs::File::create(&out).expect("create"))
            .stderr(std::fs::File::create(&err).expect("create"))
            .spawn()
            .expect("spawn the walk");
        let said = || {
            format!(
                "{}\n{}",
                std::fs::read_to_string(&out).unwrap_or_default(),
                std::fs::read_to_string(&err).unwrap_or_default()
            )
        };
        let started = Instant::now();
        let ready = |t: &String| dir.join(format!("ready-{t}"));
        while !tasks.iter().all(|t| ready(t).exists()) {
            if let Some(status) = child.try_wait().expect("wait") {
                panic!("the walk ended ({status}) before its four tries were open:\n{}", said());
            }
            assert!(started.elapsed() < Duration::from_secs(1_800), "four tries not open in 30 minutes:\n{}", said());
            std::thread::sleep(Duration::from_millis(200));
        }
        let open = started.elapsed();
        let during = df_used(s.dir.path());
        let worktrees: Vec<PathBuf> =
            tasks.iter().map(|t| PathBuf::from(std::fs::read_to_string(ready(t)).expect("read").trim())).collect();
        let du_sum: u64 = worktrees.iter().map(|w| du(s, w)).sum();
        std::fs::write(dir.join("go"), "").expect("go");
        let status = child.wait().expect("wait");
        assert!(status.success(), "the walk failed ({status}):\n{}", said());
        let grown = during.saturating_sub(before);
        eprintln!(
            "  disk, 4 {kind} tries: open after {:.1} s; df grew {}, du of the worktrees {}",
            open.as_secs_f64(),
            mb(grown),
            mb(du_sum)
        );
        let opened: Vec<serde_json::Value> = tasks.iter().map(|t| try_opened(s, proj, t)).collect();
        (grown, du_sum, opened)
    };
    let (warm_df, warm_du, opened) = measure(true);
    let (cold_df, cold_du, _) = measure(false);
    let warmings: Vec<(Duration, String)> = opened.iter().map(warming).collect();
    let methods: Vec<&str> = opened.iter().filter_map(|o| o["warmed"]["method"].as_str()).collect();
    let method = if methods.iter().all(|m| *m == "reflink") {
        "reflink"
    } else if methods.iter().all(|m| *m == "copy") {
        "copy"
    } else {
        "mixed"
    };
    let bound = format!("reflink: ≈ 1; copy: + 4 × target/ ({} by du); other: 4 cold tries", mb(target));
    let ratio_of = |a: u64, b: u64| format!("{:.1}", a as f64 / b.max(1) as f64);
    vec![
        Row {
            name: format!("disk while 4 tries exist (--parallel 4), df growth: warm ({method}) | cold"),
            ours: mb(warm_df),
            git: mb(cold_df),
            ratio: ratio_of(warm_df, cold_df),
            target: bound.clone(),
        },
        Row {
            name: "… du -sk of their 4 worktrees (counts shared blocks in full)".into(),
            ours: mb(warm_du),
            git: mb(cold_du),
            ratio: ratio_of(warm_du, cold_du),
            target: bound,
        },
        info(
            "… the 4 warm tries' warming, at once".into(),
            warmings.iter().map(|(d, _)| secs(*d)).collect::<Vec<_>>().join(", "),
            "-".into(),
            &warmings.first().map(|(_, how)| how.clone()).unwrap_or_default(),
        ),
    ]
}
