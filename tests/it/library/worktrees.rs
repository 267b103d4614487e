//! Worktrees as a concurrent git sees them: `git fetch`, `git worktree list` and `gc` read
//! every registration under `.git/worktrees/`, and die on one that is half-written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use git_loop::tries::{self, Try};

use super::open;
use crate::harness::TestEnv;

/// git reads a registration's `gitdir`, then its `commondir` and `HEAD`, and dies on a
/// `commondir` that exists but is still empty ("failed to read …/commondir: Success"). A walk's
/// `git fetch` stopped so in CI while another worker added a try's worktree. Before the
/// registration was renamed into place whole, this failed 1–4 times in every run.
#[test]
fn git_never_reads_a_half_written_worktree_registration_while_worktrees_are_added() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let head: gix::ObjectId = env.git(&repo.dir, &["rev-parse", "HEAD"]).parse().expect("an object id");
    let store = open(&repo.dir);
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let done = done.clone();
            let mut cmd = std::process::Command::new("git");
            env.seal(&mut cmd).args(["worktree", "list", "--porcelain"]).current_dir(&repo.dir);
            std::thread::spawn(move || {
                let (mut runs, mut failures) = (0, Vec::new());
                // At least a few runs, however fast the adds go.
                while !done.load(Ordering::Relaxed) || runs < 5 {
                    let out = cmd.output().expect("run git");
                    runs += 1;
                    if !out.status.success() {
                        failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
                    }
                }
                (runs, failures)
            })
        })
        .collect();
    // The readers stop once the adds are over, also when one of them failed.
    struct Done(Arc<AtomicBool>);
    impl Drop for Done {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let adds_over = Done(done.clone());
    for n in 0..200 {
        let path = env.path(&format!("wt/w-{n}"));
        tries::add_detached_worktree(&store, &path, head).expect("add a worktree");
    }
    drop(adds_over);
    for reader in readers {
        let (runs, failures) = reader.join().expect("a reader");
        assert!(
            failures.is_empty(),
            "git failed {} of {runs} times: {:?}",
            failures.len(),
            &failures[..failures.len().min(3)]
        );
    }
    let listed = env.git(&repo.dir, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("\nworktree ").count() + 1, 201, "the main worktree and 200 linked ones: {listed}");
    assert_eq!(listed.matches("detached").count(), 200, "each linked one detached at HEAD");
    let staging = repo.dir.join(".git/loop/worktree-staging");
    let left: Vec<_> = std::fs::read_dir(&staging).into_iter().flatten().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "nothing left in the staging directory: {left:?}");
}

/// A worktree removed is taken away whole, and a registration whose worktree is gone is pruned,
/// so the branch can be checked out again.
#[test]
fn a_removed_worktree_leaves_no_registration_and_its_branch_can_be_checked_out_again() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    env.git(&repo.dir, &["branch", "loop-try/t-1/1"]);
    let store = open(&repo.dir);
    let try_at = |dir: &str| Try {
        task: "t-1".parse().expect("a task id"),
        number: 1,
        branch: "refs/heads/loop-try/t-1/1".into(),
        worktree: env.path(dir),
    };
    let path = env.path("wt/t-1-1");
    tries::add_worktree(&store, &try_at("wt/t-1-1")).expect("add");
    assert_eq!(std::fs::read_to_string(path.join("README")).expect("checked out"), "hello\n");
    assert_eq!(env.git(&path, &["status", "--porcelain"]), "", "git sees a clean checkout");
    assert_eq!(env.git(&path, &["symbolic-ref", "HEAD"]), "refs/heads/loop-try/t-1/1");
    let again = tries::add_worktree(&store, &try_at("wt/other"));
    let err = format!("{:#}", again.expect_err("a branch checked out elsewhere is refused"));
    assert!(err.contains("is checked out in"), "{err}");
    assert!(!env.path("wt/other").exists(), "the refused worktree's directory is not left behind");
    tries::remove_worktree_at(&store, &path).expect("remove");
    assert!(!path.exists());
    assert_eq!(env.git(&repo.dir, &["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1);
    assert_eq!(env.git(&repo.dir, &["worktree", "prune", "-n", "-v"]), "", "nothing left to prune");
    // Deleted under the loop: the next add prunes the registration first.
    tries::add_worktree(&store, &try_at("wt/t-1-1")).expect("add again");
    std::fs::remove_dir_all(&path).expect("delete the worktree by hand");
    tries::add_worktree(&store, &try_at("wt/t-1-1b")).expect("the branch is free once its worktree is gone");
}
