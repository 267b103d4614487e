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

use super::Store;

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
        .filter_map(|(name, tip)| store.clock_of_tip(name, *tip))
        .max();
    highest.map_or(Ok(()), |seen| witness(store, seen))
}

/// Run `change` on the counter under the file's lock; it returns the new value and a result.
fn with_counter<T>(store: &Store, change: impl FnOnce(u64) -> (u64, T)) -> Result<T> {
    let path = store.layout()?.lamport();
    let held = super::flock::FileLock::exclusive(&path, "counting", std::time::Duration::from_secs(60))?;
    let mut file = held.file();
    let mut text = String::new();
    let current = match file.read_to_string(&mut text).ok().and_then(|_| text.trim().parse::<u64>().ok()) {
        Some(current) => current,
        None => store.highest_clock_in_refs(),
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
}
