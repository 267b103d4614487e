//! Sync (`store::sync`) between two temporary clones of a bare remote on the local file
//! system, with the remote arbitrating claims (`loop.remote`).

use git_loop::backlog::{self, TaskFields};
use git_loop::ids::{ClaimKey, Priority};
use git_loop::store::claim::{self, Acquire, AcquireOptions};
use git_loop::store::sync;
use git_loop::store::task;

use super::{add, ctx, git_ref, open};
use crate::harness::{Repo, TestEnv};

/// A bare remote and two clones of it, each following it for claims.
fn clones(env: &TestEnv) -> (std::path::PathBuf, Repo<'_>, Repo<'_>) {
    let remote = env.remote("origin");
    let url = remote.to_str().expect("utf-8");
    let (a, b) = (env.clone_of(url, "a"), env.clone_of(url, "b"));
    for clone in [&a, &b] {
        clone.git(&["config", "loop.remote", "origin"]);
    }
    (remote, a, b)
}

fn opts(holder: &str) -> AcquireOptions {
    AcquireOptions { holder: holder.into(), ttl: chrono::Duration::minutes(30), reason: None, session: None }
}

#[test]
fn a_task_added_in_one_clone_appears_in_the_other_and_concurrent_edits_merge() {
    let env = TestEnv::new();
    let (remote, a, b) = clones(&env);
    let (sa, sb) = (open(&a.dir), open(&b.dir));
    let id = add(&sa, &ctx(), "Shared", TaskFields::default());
    let name = format!("refs/loop/tasks/{id}");
    sync::sync(&sa, &ctx(), "origin").expect("sync a");
    assert_eq!(git_ref(&env, &remote, &name), git_ref(&env, &a.dir, &name), "pushed to the remote");

    assert!(task::read(&sb, &id).expect("read").is_none(), "not yet in b");
    let report = sync::sync(&sb, &ctx(), "origin").expect("sync b");
    assert!(report.incoming() >= 1, "{:?}", report.changes);
    assert_eq!(task::read(&sb, &id).expect("read").expect("in b now").task.title, "Shared");

    // Both edit the task before syncing again: the two edits are merged, not one lost.
    let retitle = TaskFields { title: Some("Shared, renamed".into()), ..Default::default() };
    backlog::edit(&sa, &ctx(), &id, retitle, Default::default()).expect("edit in a");
    let urgent = TaskFields { priority: Some(Priority::P0), ..Default::default() };
    backlog::edit(&sb, &ctx(), &id, urgent, Default::default()).expect("edit in b");
    sync::sync(&sa, &ctx(), "origin").expect("sync a");
    sync::sync(&sb, &ctx(), "origin").expect("sync b");
    sync::sync(&sa, &ctx(), "origin").expect("sync a again");
    let (ta, tb) = (task::read(&sa, &id).expect("read").expect("a"), task::read(&sb, &id).expect("read").expect("b"));
    assert_eq!((ta.task.title.as_str(), ta.task.priority), ("Shared, renamed", Priority::P0));
    assert_eq!(ta.tip, tb.tip, "both clones hold the same record");
    assert_eq!(git_ref(&env, &remote, &name), Some(ta.tip.to_string()));
}

#[test]
fn a_claim_held_through_the_remote_is_refused_in_the_other_clone_until_released() {
    let env = TestEnv::new();
    let (remote, a, b) = clones(&env);
    let (sa, sb) = (open(&a.dir), open(&b.dir));
    let id = add(&sa, &ctx(), "Contended", TaskFields::default());
    sync::sync(&sa, &ctx(), "origin").expect("sync a");
    sync::sync(&sb, &ctx(), "origin").expect("sync b");
    let key = ClaimKey::node(&id);
    let claim_ref = format!("refs/loop/claims/node/{id}");

    let held = match claim::acquire(&sa, &ctx(), &key, &opts("holder-a")).expect("acquire in a") {
        Acquire::Acquired(held) => held,
        other => panic!("a free claim: {other:?}"),
    };
    assert_eq!(git_ref(&env, &remote, &claim_ref), Some(held.oid.to_string()), "decided by the remote");
    // b never synced since: its claim is refused all the same, by the remote.
    match claim::acquire(&sb, &ctx(), &key, &opts("holder-b")).expect("acquire in b") {
        Acquire::HeldByOther(other) => assert_eq!(other.record.holder, "holder-a"),
        other => panic!("held in a: {other:?}"),
    }
    assert_eq!(git_ref(&env, &remote, &claim_ref), Some(held.oid.to_string()), "b's attempt changed nothing");
    assert_eq!(claim::read(&sb, &key).expect("read").map(|h| h.record.holder), Some("holder-a".into()));

    assert!(matches!(
        claim::release(&sa, &ctx(), &key, "holder-a", false).expect("release"),
        claim::Release::Released(_)
    ));
    // (The same handle would trust its read of a moment ago for `MIRROR_FRESH`, and lose the
    // race to the release: a new command is a new handle.)
    let sb = open(&b.dir);
    match claim::acquire(&sb, &ctx(), &key, &opts("holder-b")).expect("acquire in b") {
        Acquire::Acquired(mine) => {
            assert_eq!(git_ref(&env, &remote, &claim_ref), Some(mine.oid.to_string()));
        }
        other => panic!("released in a, free for b: {other:?}"),
    }
    assert_eq!(claim::read_confirmed(&sa, &key).expect("read").map(|h| h.record.holder), Some("holder-b".into()));
}
