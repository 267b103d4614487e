//! `git loop demo`: the whole product in one command, with no keys and no network.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Args;

use super::env::Env;
use super::run::Progress;
use git_loop::agent::presets;
use git_loop::backlog::{self, TaskFields};
use git_loop::engine::Limits;
use git_loop::error::usage;
use git_loop::git;
use git_loop::ids::Priority;
use git_loop::walk;

/// See it all work: a scratch project walked by the built-in demo agent.
///
/// Makes a scratch repository with a small project and a backlog of six tasks, and walks it
/// with the built-in demo agent (deterministic: no keys, no network). One task fails its
/// checks first and passes on continuation; one needs you (its agent asks a question only a
/// person can answer). Then shows the board, the journal, and how to look at it all with plain
/// git.
///
/// Example: git loop demo --dir /tmp/calc
#[derive(Args)]
pub struct DemoArgs {
    /// Where to make the demo repository (must not exist, or be empty); default: a new
    /// directory under the system's temporary directory, kept afterwards.
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
}

const CALC: &str = r#"#!/bin/sh
# Usage: sh calc.sh <operation> <a> <b>
op="$1"; shift
if [ ! -f "ops/$op.sh" ]; then
  echo "unknown operation: $op" >&2
  exit 2
fi
. "ops/$op.sh"
"#;

const TESTS: &str = r#"#!/bin/sh
# The checks: every operation that exists must compute the right answer.
fail=0
expect() {
  got=$(sh calc.sh "$1" "$2" "$3" 2>&1)
  if [ "$got" = "$4" ]; then echo "ok   $1 $2 $3 = $4"; else echo "FAIL $1 $2 $3: expected $4, got $got"; fail=1; fi
}
[ -f ops/add.sh ] && expect add 2 3 5
[ -f ops/sub.sh ] && expect sub 7 2 5
[ -f ops/mul.sh ] && expect mul 3 4 12
[ -f ops/div.sh ] && expect div 8 2 4
exit $fail
"#;

const README: &str =
    "# calc\n\nA tiny calculator in sh, built task by task by git-loop's demo agent.\n\n    sh calc.sh add 2 3\n";

/// (title, priority, indexes of tasks it comes after, body)
const TASKS: &[(&str, Priority, &[usize], &str)] = &[
    (
        "Add an add operation",
        Priority::P1,
        &[],
        "Add `ops/add.sh` so that `sh calc.sh add 2 3` prints 5.\n\ndemo: write ops/add.sh\necho $(( $1 + $2 ))\ndemo: end\ndemo: message ops/add.sh adds two numbers\n",
    ),
    (
        "Add a sub operation",
        Priority::P1,
        &[],
        "Add `ops/sub.sh` so that `sh calc.sh sub 7 2` prints 5.\n\n(The demo agent gets it wrong the first time; the checks catch it and the next session fixes it.)\n\ndemo: first-write ops/sub.sh\necho $(( $1 + $2 ))\ndemo: end\ndemo: retry-write ops/sub.sh\necho $(( $1 - $2 ))\ndemo: end\ndemo: message ops/sub.sh subtracts, fixed after the checks failed\n",
    ),
    (
        "Add a mul operation",
        Priority::P2,
        &[0],
        "Add `ops/mul.sh` so that `sh calc.sh mul 3 4` prints 12, in the style of add.\n\ndemo: write ops/mul.sh\necho $(( $1 * $2 ))\ndemo: end\ndemo: message ops/mul.sh multiplies\n",
    ),
    (
        "Document the operations",
        Priority::P2,
        &[0, 1, 2],
        "List every operation in README.md.\n\ndemo: write README.md\n# calc\n\nA tiny calculator in sh, built task by task by git-loop's demo agent.\n\n    sh calc.sh add 2 3    # 5\n    sh calc.sh sub 7 2    # 5\n    sh calc.sh mul 3 4    # 12\ndemo: end\ndemo: message README lists add, sub and mul\n",
    ),
    (
        "Add a div operation",
        Priority::P3,
        &[],
        "Add `ops/div.sh` so that `sh calc.sh div 8 2` prints 4.\n\ndemo: verdict blocked dividing by zero needs a decision: refuse with an error, or print infinity?\n",
    ),
    (
        "Start a changelog",
        Priority::P3,
        &[3],
        "Write CHANGELOG.md with what this release adds.\n\ndemo: write CHANGELOG.md\n# Changelog\n\n- add, sub and mul operations, documented in the README\ndemo: end\ndemo: message CHANGELOG.md started\n",
    ),
];

pub fn run(env: &Env, args: DemoArgs) -> Result<u8> {
    let dir = match args.dir {
        Some(dir) => {
            let dir = if dir.is_absolute() { dir } else { env.cwd.join(dir) };
            if dir.exists() && std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
                return Err(usage(format!("'{}' exists and is not empty", dir.display()))
                    .hint("pass a new directory with --dir, or leave --dir out")
                    .into());
            }
            dir
        }
        None => tempfile::Builder::new()
            .prefix("git-loop-demo-")
            .tempdir()
            .context("could not make a temporary directory")?
            .keep(),
    };
    println!("Making a demo project in {}", dir.display());
    make_repository(&dir)?;
    let denv = Env::new(env.ctx.clone(), dir.clone(), env.exe.clone());
    let store = denv.open()?;
    let mut ids: Vec<String> = Vec::new();
    for (title, priority, after, body) in TASKS {
        let fields = TaskFields {
            title: Some((*title).to_owned()),
            body: Some((*body).to_owned()),
            priority: Some(*priority),
            after: after.iter().map(|i| ids[*i].clone()).collect(),
            labels: vec!["demo".to_owned()],
            ..Default::default()
        };
        ids.push(backlog::add(&store, &denv.ctx, fields)?.task.id);
    }
    println!("Added {} tasks; walking them with the demo agent, checks 'sh test.sh':\n", ids.len());
    let mut opts = walk::Options::new(presets::resolve(&store, "demo", None, &env.exe)?);
    opts.checks = Some("sh test.sh".into());
    opts.session_timeout = Some(Duration::from_secs(120));
    opts.checks_timeout = Duration::from_secs(60);
    opts.grace = Duration::from_secs(2);
    opts.lease = chrono::Duration::minutes(10);
    opts.limits = Limits { per_unit_dispatches: 3, ..Default::default() };
    opts.sync_every = None;
    opts.confinement = super::run::walk_confinement(env, &store, None)?;
    let observer = Progress::new(false, denv.ctx.clone());
    let cancel = AtomicBool::new(false);
    let ended = walk::walk(&store, &denv.ctx, dir.clone(), env.exe.clone(), opts, &observer, &cancel)?;
    println!("\nThe board ('git loop list'):\n");
    show(&env.exe, &dir, &["list"])?;
    println!("\nThe journal ('git loop log', last 12 events):\n");
    show(&env.exe, &dir, &["log", "-n", "12"])?;
    println!(
        "\nAll of it is in the repository, readable with plain git:\n\n  cd {}\n  git for-each-ref refs/loop              # tasks, claims, journal, tries\n  git log --oneline --graph loop/{}      # the accepted work of one task\n  git notes --ref=loop show loop/{}      # its completion evidence\n  git log --oneline loop-try/{}/1        # a try that failed its checks, then passed\n  git log refs/loop/tasks/{}             # a task's history, one commit per change\n  git loop show {}                       # the task that needs you, and why",
        dir.display(),
        ids[3],
        ids[0],
        ids[1],
        ids[4],
        ids[4]
    );
    Ok(super::exit::of_walk(&ended.stop))
}

/// `git loop <args>` in the demo repository, output straight through.
fn show(exe: &Path, dir: &Path, args: &[&str]) -> Result<()> {
    Command::new(exe).arg("-C").arg(dir).args(args).status().context("could not run git-loop")?;
    Ok(())
}

/// A repository with the calculator's first commit on `main`, made through gix.
fn make_repository(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir.join("ops")).with_context(|| format!("could not create '{}'", dir.display()))?;
    let repo = gix::init(dir).with_context(|| format!("could not create a repository in '{}'", dir.display()))?;
    let files: [(&str, &str, bool); 4] =
        [("README.md", README, false), ("calc.sh", CALC, true), ("test.sh", TESTS, true), ("ops/.keep", "", false)];
    let mut editor =
        repo.edit_tree(gix::ObjectId::empty_tree(repo.object_hash())).context("could not start the first tree")?;
    for (path, content, exec) in files {
        let full = dir.join(path);
        std::fs::write(&full, content).with_context(|| format!("could not write '{}'", full.display()))?;
        if exec {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o755))?;
        }
        let blob = repo.write_blob(content.as_bytes())?.detach();
        let kind = if exec { gix::objs::tree::EntryKind::BlobExecutable } else { gix::objs::tree::EntryKind::Blob };
        editor.upsert(path, kind, blob)?;
    }
    let tree = editor.write()?.detach();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let sig = git::Identity::resolve(&repo, &Default::default(), host.trim()).signature(chrono::Utc::now());
    let commit = git::write_commit(&repo, tree, &[], "calc: a calculator with no operations yet\n", &sig)?;
    let head = std::fs::read_to_string(dir.join(".git/HEAD")).unwrap_or_default();
    let branch = head.strip_prefix("ref: ").map(|r| r.trim().to_owned()).unwrap_or_else(|| "refs/heads/main".into());
    let edit = gix::refs::transaction::RefEdit {
        change: gix::refs::transaction::Change::Update {
            log: Default::default(),
            expected: gix::refs::transaction::PreviousValue::MustNotExist,
            new: gix::refs::Target::Object(commit),
        },
        name: branch.as_str().try_into().context("invalid branch name")?,
        deref: false,
    };
    let mut time = gix::date::parse::TimeBuf::default();
    repo.edit_references_as([edit], Some(sig.to_ref(&mut time))).context("could not create the first branch")?;
    git::write_index(&repo, tree)
}
