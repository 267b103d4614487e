//! The clone's Lamport clock: one counter shared by every writer of this clone (sessions,
//! walks, commands run by hand, every worktree), in `<git-common-dir>/loop/lamport`.
//!
//! Journal events, task operations and claim records carry a clock: one more than the highest
//! this clone had seen when it was written. What another clone wrote counts as seen when it
//! arrives here: `sync` witnesses the journal and task tips it fetched, reading a claim record
//! witnesses that record's clock. So whatever is written after seeing another clone's event
//! carries a higher clock and sorts after it, in every clone, whatever either machine's wall
//! clock says: the journal is ordered by (lamport, writer, seq), and wall times are only read.
//!
//! The file holds the counter as 20 decimal digits and a newline, rewritten in place under an
//! exclusive `flock` on the file itself. The file is never deleted nor renamed, so the lock can
//! neither be left behind (the kernel drops it when its holder exits) nor go stale. A missing,
//! empty or unreadable counter (a new clone, a deleted `.git/loop`) starts from the highest
//! clock on the journal chains' tips and the task records, so it never goes back below what
//! the refs hold.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::FileExt as _;

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::{journal, task, Store};
use crate::refs;

/// 20 digits (every u64) and a newline: every write replaces the whole content in place.
const WIDTH: usize = 21;

/// The clock for something written now, after `after` (the clock of what it follows: the
/// task's last operation, the chain's last event, the claim record it replaces): one more than
/// the highest of `after` and every clock this clone has seen.
pub fn tick(store: &Store, after: u64) -> Result<u64> {
    with_counter(store, |seen| {
        let next = seen.max(after) + 1;
        (next, next)
    })
}

/// Note that this clone has seen clock `seen` (written by another clone, or before a crash).
pub fn witness(store: &Store, seen: u64) -> Result<()> {
    if seen == 0 {
        return Ok(());
    }
    with_counter(store, |current| (current.max(seen), ()))
}

/// Witness what a fetch brought: the clocks of the journal chains' and tasks' tips in
/// `theirs` (ref name → tip, as the remote advertised them) that differ from `ours`. Tips that
/// cannot be read are left to the merge, which reports them.
pub fn witness_fetched(
    store: &Store,
    theirs: &BTreeMap<String, ObjectId>,
    ours: &BTreeMap<String, ObjectId>,
) -> Result<()> {
    let highest = theirs
        .iter()
        .filter(|(name, tip)| ours.get(*name) != Some(*tip))
        .filter_map(|(name, tip)| clock_of_tip(&store.repo, name, *tip))
        .max();
    highest.map_or(Ok(()), |seen| witness(store, seen))
}

/// The highest clock of a journal chain's or a task's tip, if `name` is either.
fn clock_of_tip(repo: &gix::Repository, name: &str, tip: ObjectId) -> Option<u64> {
    if name.starts_with(refs::JOURNAL) {
        journal::tip_lamport(repo, tip)
    } else if name.starts_with(refs::TASKS) {
        task::read_at(repo, name, tip).ok().map(|t| t.lamport)
    } else {
        None
    }
}

/// The highest clock the refs hold: where a lost counter starts again.
fn highest_in_refs(store: &Store) -> u64 {
    let repo = &store.repo;
    let chains = journal::chains(repo).unwrap_or_default();
    let tasks = task::list_refs(repo).unwrap_or_default();
    let chain_clocks = chains.into_iter().filter_map(|(name, tip)| clock_of_tip(repo, &name, tip));
    let task_clocks = tasks.into_iter().filter_map(|t| clock_of_tip(repo, &t.name, t.tip.ok()?));
    chain_clocks.chain(task_clocks).max().unwrap_or(0)
}

/// Run `change` on the counter under the file's lock; it returns the new value and a result.
fn with_counter<T>(store: &Store, change: impl FnOnce(u64) -> (u64, T)) -> Result<T> {
    let path = store.layout()?.lamport();
    let held = super::flock::FileLock::exclusive(&path, "counting", std::time::Duration::from_secs(60))?;
    let mut file = held.file();
    let mut text = String::new();
    let current = match file.read_to_string(&mut text).ok().and_then(|_| text.trim().parse::<u64>().ok()) {
        Some(current) => current,
        None => highest_in_refs(store),
    };
    let (next, out) = change(current);
    if next != current || text.len() != WIDTH {
        file.write_all_at(format!("{next:020}\n").as_bytes(), 0)
            .and_then(|()| file.set_len(WIDTH as u64))
            .with_context(|| format!("could not write '{}'", path.display()))?;
    }
    // Closing the file drops the lock.
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Context;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).output().expect("git");
        assert!(out.status.success());
        let store = Store::open(&Context::for_tests(), dir.path()).expect("open");
        (dir, store)
    }

    #[test]
    fn a_tick_is_above_everything_seen_and_what_it_follows() {
        let (_dir, store) = store();
        assert_eq!(tick(&store, 0).expect("tick"), 1);
        assert_eq!(tick(&store, 0).expect("tick"), 2);
        assert_eq!(tick(&store, 7).expect("tick"), 8, "after a task whose last operation had 7");
        witness(&store, 40).expect("witness");
        witness(&store, 3).expect("an older clock changes nothing");
        assert_eq!(tick(&store, 0).expect("tick"), 41, "after seeing another clone's 40");
        let text = std::fs::read_to_string(store.layout().expect("dir").lamport()).expect("read");
        assert_eq!(text, "00000000000000000041\n");
    }

    #[test]
    fn concurrent_ticks_of_one_clone_never_repeat_a_clock() {
        let (dir, _store) = store();
        let clocks: Vec<u64> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        let store = Store::open(&Context::for_tests(), dir.path()).expect("open");
                        (0..50).map(|_| tick(&store, 0).expect("tick")).collect::<Vec<_>>()
                    })
                })
                .collect();
            workers.into_iter().flat_map(|w| w.join().expect("worker")).collect()
        });
        let distinct: std::collections::HashSet<u64> = clocks.iter().copied().collect();
        assert_eq!((clocks.len(), distinct.len(), clocks.iter().max()), (400, 400, Some(&400)));
    }

    /// An operation on a task made after seeing another clone's clock 50 (say, a fetched
    /// event) sorts after it, though the task's own operations were at 1.
    #[test]
    fn a_task_operation_is_above_every_clock_the_clone_has_seen() {
        let (_dir, store) = store();
        let ctx = Context::for_tests();
        let id: crate::ids::TaskId = "t-1".parse().expect("id");
        let create = task::Change {
            create: Some(task::Create { origin: None, created_at: None }),
            set: task::Fields { title: Some("t".into()), ..Default::default() },
            ..Default::default()
        };
        let task::Created::Stored(added) = task::create(&store, &ctx, &id, create).expect("create") else {
            panic!("a new task is created")
        };
        assert_eq!(added.task.lamport, 1);
        witness(&store, 50).expect("witness");
        let change = task::Change {
            set: task::Fields { priority: Some(crate::ids::Priority::P0), ..Default::default() },
            ..Default::default()
        };
        let edited = task::update(&store, &ctx, &id, change, &|_| Ok(())).expect("update");
        assert_eq!(edited.task.lamport, 51);
    }

    /// A claim record carries its writer's clock (a tombstone, its releaser's): whoever reads
    /// it next writes after it.
    #[test]
    fn reading_a_claim_record_witnesses_its_writers_clock() {
        let (_dir, store) = store();
        let ctx = Context::for_tests();
        let key: crate::ids::ClaimKey = "node:t-1".parse().expect("key");
        let opts = crate::store::claim::AcquireOptions {
            holder: "h".into(),
            ttl: chrono::Duration::minutes(1),
            reason: None,
            session: None,
        };
        witness(&store, 30).expect("the releaser's clone has seen 30");
        crate::store::claim::acquire(&store, &ctx, &key, &opts).expect("acquire");
        crate::store::claim::release(&store, &ctx, &key, "h", false).expect("release");
        // Another clone, whose clock is far behind, reads the tombstone.
        let path = store.layout().expect("dir").lamport();
        std::fs::write(&path, format!("{:020}\n", 2)).expect("a clone that has seen little");
        let tombstone = crate::store::claim::read_record(&store, &key).expect("read").expect("a tombstone");
        assert_eq!(tombstone.record.lamport, Some(32), "the releaser's clock: after its acquire at 31");
        assert_eq!(tick(&store, 0).expect("tick"), 33);
    }

    #[test]
    fn a_lost_counter_starts_again_above_the_refs() {
        let (_dir, store) = store();
        let ctx = Context::for_tests();
        let writer: crate::ids::WriterId = "c-test".parse().expect("writer");
        for _ in 0..3 {
            journal::append(&store, &ctx, &writer, journal::NewEvent { kind: "note".into(), ..Default::default() })
                .expect("append");
        }
        std::fs::remove_file(store.layout().expect("dir").lamport()).expect("lose the counter");
        assert_eq!(tick(&store, 0).expect("tick"), 4, "above the chain's last event (3)");
    }
}
