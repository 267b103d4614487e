//! The claim store (`store::claim`, `store::lease`) on a temporary repository: who holds a
//! claim, what a second claimant is told, releases as tombstones, takeovers after a lease
//! watched by this clone, and records that cannot be read.

use chrono::Duration;
use git_loop::context::Context;
use git_loop::error::{find_refusal, Class};
use git_loop::ids::ClaimKey;
use git_loop::store::claim::{self, Acquire, AcquireOptions, Listed, Release};
use git_loop::store::lease;

use super::{ctx, ctx_at, git_ref, open};
use crate::harness::TestEnv;

fn opts(holder: &str, minutes: i64) -> AcquireOptions {
    AcquireOptions { holder: holder.into(), ttl: Duration::minutes(minutes), reason: None, session: None }
}

fn key(text: &str) -> ClaimKey {
    text.parse().expect("a claim key")
}

/// Another process of this machine (its own pid), at `time`.
fn other(time: &str) -> Context {
    Context { pid: 1, ..ctx_at(time) }
}

const REF: &str = "refs/loop/claims/node/t-one";

#[test]
fn a_claim_is_held_by_one_holder_refreshed_by_it_and_refused_to_another() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let k = key("node:t-one");
    assert!(claim::read(&store, &k).expect("read").is_none(), "never claimed");

    let first =
        match claim::acquire(&store, &ctx(), &k, &AcquireOptions { reason: Some("why".into()), ..opts("a", 30) }) {
            Ok(Acquire::Acquired(held)) => held,
            other => panic!("a free claim is acquired: {other:?}"),
        };
    assert_eq!(git_ref(&env, &repo.dir, REF), Some(first.oid.to_string()), "git sees the claim ref");
    let read = claim::read(&store, &k).expect("read").expect("held");
    assert_eq!((read.record.holder.as_str(), read.oid), ("a", first.oid));
    assert_eq!(read.record.expires_at - read.record.refreshed_at, Duration::minutes(30));

    match claim::acquire(&store, &other("2026-03-01T12:05:00Z"), &k, &opts("b", 30)).expect("acquire") {
        Acquire::HeldByOther(held) => assert_eq!((held.record.holder.as_str(), held.oid), ("a", first.oid)),
        other => panic!("a live claim is refused to another holder: {other:?}"),
    }
    assert_eq!(git_ref(&env, &repo.dir, REF), Some(first.oid.to_string()), "the refusal wrote nothing");

    let later = ctx_at("2026-03-01T12:10:00Z");
    match claim::acquire(&store, &later, &k, &opts("a", 30)).expect("refresh") {
        Acquire::Refreshed(held) => {
            assert_ne!(held.oid, first.oid, "a refresh writes a new record");
            assert_eq!(held.record.acquired_at, first.record.acquired_at, "acquired when first taken");
            assert_eq!(held.record.refreshed_at, later.now());
            assert_eq!(held.record.reason.as_deref(), Some("why"), "a refresh without a reason keeps it");
        }
        other => panic!("the holder refreshes its own claim: {other:?}"),
    }
}

#[test]
fn a_release_leaves_a_tombstone_that_counts_as_free() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let k = key("node:t-one");
    claim::acquire(&store, &ctx(), &k, &opts("a", 30)).expect("acquire");

    match claim::release(&store, &ctx(), &k, "b", false).expect("release") {
        Release::HeldByOther(record) => assert_eq!(record.holder, "a"),
        other => panic!("only the holder releases a live claim: {other:?}"),
    }
    assert!(claim::read(&store, &k).expect("read").is_some(), "still held");

    assert!(
        matches!(claim::release(&store, &ctx(), &k, "a", false).expect("release"), Release::Released(r) if r.holder == "a")
    );
    assert!(claim::read(&store, &k).expect("read").is_none(), "released: nobody holds it");
    let tombstone = claim::read_record(&store, &k).expect("read").expect("the ref is kept");
    assert!(tombstone.record.is_released());
    assert_eq!(git_ref(&env, &repo.dir, REF), Some(tombstone.oid.to_string()), "released by a tombstone, not a delete");
    assert!(claim::list(&store, "node:").expect("list").is_empty(), "a tombstone is not listed");
    assert!(matches!(claim::release(&store, &ctx(), &k, "a", false).expect("release"), Release::NotHeld));

    match claim::acquire(&store, &other(crate::harness::NOW), &k, &opts("b", 30)).expect("acquire") {
        Acquire::Acquired(held) => assert_eq!(held.record.holder, "b"),
        other => panic!("a released claim is free for anyone: {other:?}"),
    }
}

#[test]
fn another_holders_claim_is_taken_over_only_after_this_clone_watched_it_for_a_whole_lease() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let k = key("node:t-one");
    claim::acquire(&store, &other("2026-03-01T12:00:00Z"), &k, &opts("a", 30)).expect("acquire");
    let held = claim::read(&store, &k).expect("read").expect("held");
    let judged = lease::judge(&store, &ctx_at("2026-03-01T12:10:00Z"), &k, &held);
    assert_eq!(judged.length, std::time::Duration::from_secs(30 * 60));
    assert_eq!(judged.unchanged_for, std::time::Duration::from_secs(10 * 60), "seen since it was written here");
    assert!(!judged.is_stale());

    let at = |time: &str| claim::acquire(&store, &ctx_at(time), &k, &opts("b", 30)).expect("acquire");
    assert!(matches!(at("2026-03-01T12:29:59Z"), Acquire::HeldByOther(_)), "a second short of its lease");
    // A forced release of a live claim of another holder is refused too.
    let forced = claim::release(&store, &ctx_at("2026-03-01T12:29:59Z"), &k, "b", true).expect("release");
    assert!(matches!(forced, Release::HeldByOther(_)), "{forced:?}");
    match at("2026-03-01T12:30:00Z") {
        Acquire::TookOver { held, previous } => {
            assert_eq!((previous.holder.as_str(), held.record.holder.as_str()), ("a", "b"));
            assert_eq!(held.record.took_over_from.as_deref(), Some("a"));
        }
        other => panic!("a whole lease unchanged: stale, taken over: {other:?}"),
    }
    assert_eq!(claim::read(&store, &k).expect("read").expect("held").record.holder, "b");
}

#[test]
fn a_forced_release_frees_a_stale_claim_of_another_holder() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let k = key("node:t-one");
    claim::acquire(&store, &other("2026-03-01T12:00:00Z"), &k, &opts("a", 30)).expect("acquire");
    let released = claim::release(&store, &ctx_at("2026-03-01T13:00:00Z"), &k, "person:me", true).expect("release");
    assert!(matches!(released, Release::Released(ref r) if r.holder == "a"), "{released:?}");
    assert!(claim::read(&store, &k).expect("read").is_none());
}

#[test]
fn a_take_over_swaps_exactly_the_record_it_read() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let k = key("node:t-one");
    claim::acquire(&store, &other(crate::harness::NOW), &k, &opts("a", 30)).expect("acquire");
    let seen = claim::read(&store, &k).expect("read").expect("held");
    // The holder refreshes after we read its record: our takeover must not win.
    claim::acquire(&store, &other("2026-03-01T12:01:00Z"), &k, &opts("a", 30)).expect("refresh");
    match claim::take_over(&store, &ctx(), &k, &seen, &opts("person:me", 30)).expect("take over") {
        Acquire::HeldByOther(now) => assert_eq!(now.record.holder, "a"),
        other => panic!("the record changed since it was read: {other:?}"),
    }
    let current = claim::read(&store, &k).expect("read").expect("held");
    match claim::take_over(&store, &ctx(), &k, &current, &opts("person:me", 30)).expect("take over") {
        Acquire::TookOver { held, previous } => {
            assert_eq!((previous.holder.as_str(), held.record.holder.as_str()), ("a", "person:me"))
        }
        other => panic!("taken over whatever its lease: {other:?}"),
    }
}

#[test]
fn of_many_concurrent_claimants_exactly_one_wins() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let k = key("node:t-race");
    let winners: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let (dir, k) = (&repo.dir, &k);
                scope.spawn(move || {
                    let store = open(dir);
                    let who = format!("h{i}");
                    let ctx = Context { pid: 100 + i, ..ctx() };
                    match claim::acquire(&store, &ctx, k, &opts(&who, 30)).expect("acquire") {
                        Acquire::Acquired(_) => Some(who),
                        Acquire::HeldByOther(_) => None,
                        other => panic!("nobody else held it: {other:?}"),
                    }
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().expect("a claimant")).collect()
    });
    assert_eq!(winners.len(), 1, "{winners:?}");
    let store = open(&repo.dir);
    assert_eq!(claim::read(&store, &k).expect("read").expect("held").record.holder, winners[0]);
}

#[test]
fn a_singleton_is_taken_from_a_gone_process_of_this_machine_and_released_when_dropped() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let k = key("walker:main");
    let mut child = std::process::Command::new("true").spawn().expect("spawn a process");
    let gone = child.id();
    child.wait().expect("wait for it");
    claim::acquire(&store, &Context { pid: gone, ..ctx() }, &k, &opts("w-gone", 2)).expect("acquire");

    // A live holder (this very process, another walk) keeps it.
    let live = Context { pid: std::process::id(), ..ctx() };
    claim::acquire(&store, &live, &key("walker:other"), &opts("w-live", 2)).expect("acquire");
    let me = ctx();
    let refused = claim::take_singleton(&store, &me, &key("walker:other"), opts("w-me", 2)).expect("singleton");
    assert_eq!(refused.err().map(|held| held.record.holder), Some("w-live".to_owned()));

    let singleton = claim::take_singleton(&store, &me, &k, opts("w-me", 2)).expect("singleton");
    assert!(singleton.is_ok(), "the holder's process is gone: taken over at once, without a lease");
    let held = claim::read(&store, &k).expect("read").expect("held");
    assert_eq!((held.record.holder.as_str(), held.record.took_over_from.as_deref()), ("w-me", Some("w-gone")));
    drop(singleton);
    assert!(claim::read(&store, &k).expect("read").is_none(), "released when dropped");
}

#[test]
fn a_corrupt_record_is_reported_listed_and_removed_only_by_force() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let k = key("node:t-bad");
    let blob = repo.git_with_stdin(&["hash-object", "-w", "--stdin"], "not a claim record");
    repo.git(&["update-ref", "refs/loop/claims/node/t-bad", &blob]);
    claim::acquire(&store, &ctx(), &key("node:t-good"), &opts("a", 30)).expect("acquire");

    let err = claim::read(&store, &k).expect_err("an unreadable record is an error, not a free claim");
    assert_eq!(find_refusal(&err).map(|r| r.class), Some(Class::Corrupt), "{err:#}");
    let listed = claim::list(&store, "node:").expect("listing goes on past it");
    let corrupt: Vec<&str> = listed
        .iter()
        .filter_map(|l| match l {
            Listed::Corrupt { name, .. } => Some(name.as_str()),
            Listed::Claim { .. } => None,
        })
        .collect();
    assert_eq!(corrupt, ["refs/loop/claims/node/t-bad"]);
    assert_eq!(listed.len(), 2, "the good claim is listed too");
    assert!(claim::acquire(&store, &ctx(), &k, &opts("a", 30)).is_err(), "nobody claims over it");
    assert!(claim::release(&store, &ctx(), &k, "a", false).is_err(), "not without force");
    assert!(matches!(claim::release(&store, &ctx(), &k, "a", true).expect("release"), Release::RemovedCorrupt));
    assert!(claim::read(&store, &k).expect("readable again").is_none());
    assert!(matches!(claim::acquire(&store, &ctx(), &k, &opts("a", 30)).expect("acquire"), Acquire::Acquired(_)));
}
