//! Tests that call the library (`git_loop`) directly, not the `git-loop` executable: the
//! engine's decisions with in-memory fakes, and the stores against temporary repositories made
//! by the real git in the sealed environment of `harness`.
//!
//! They use only `Store`'s methods and the functions of the store's modules that take a
//! `&Store`, never the store's repository, and assert on what the stores decide — states,
//! claims, ref targets, counts — rather than on the JSON of records.

mod board;
mod claims;
mod engine;
mod index;
mod journal;
mod sync;
mod worktrees;

use std::path::Path;

use git_loop::backlog::{self, TaskFields};
use git_loop::context::{Clock, Context, GitIdentityEnv, SessionEnv};
use git_loop::ids::TaskId;
use git_loop::store::Store;

use crate::harness::NOW;

/// The context of a command run at the tests' pinned instant, by this test process.
pub fn ctx() -> Context {
    ctx_at(NOW)
}

/// The same, with the clock pinned at `time` (RFC 3339).
pub fn ctx_at(time: &str) -> Context {
    Context {
        clock: Clock::Fixed(time.parse().expect("an RFC 3339 time")),
        host: "lib-host".into(),
        pid: std::process::id(),
        boot_id: "lib-boot".into(),
        session: SessionEnv::default(),
        git_identity: GitIdentityEnv {
            name: Some("Tess Ter".into()),
            email: Some("tess@example.com".into()),
            fallback_email: None,
        },
        path_var: std::env::var_os("PATH"),
        home: None,
        codex_home: None,
    }
}

/// A store on the repository at `dir`, opened as the command line would.
pub fn open(dir: &Path) -> Store {
    Store::open(&ctx(), dir).expect("open the repository")
}

/// Add a task titled `title` with `fields`; its id.
pub fn add(store: &Store, ctx: &Context, title: &str, fields: TaskFields) -> TaskId {
    let fields = TaskFields { title: Some(title.into()), ..fields };
    backlog::add(store, ctx, fields).expect("add a task").task.task_id()
}

/// `git rev-parse --verify -q <name>` in `dir`: what git itself says a ref holds.
pub fn git_ref(env: &crate::harness::TestEnv, dir: &Path, name: &str) -> Option<String> {
    let out = env
        .seal(std::process::Command::new("git").args(["rev-parse", "--verify", "-q", name]).current_dir(dir))
        .output()
        .expect("run git");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
