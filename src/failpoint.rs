//! A failpoint for crash tests: in debug builds (the ones the tests run), a process can be told
//! to kill itself with SIGKILL at its n-th write — a ref update about to happen or just made, an
//! object, a note, a push, a worktree — so a test can stop a command between any two of its
//! writes and check that nothing it left behind blocks the next command. The command line arms
//! it from `GIT_LOOP_KILL_AT=<command>:<n>` (only for that command, so the processes it starts
//! are not killed too); release builds compile every write point to nothing.

#[cfg(debug_assertions)]
mod armed {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The write to die at (0: never).
    static AT: AtomicU64 = AtomicU64::new(0);
    /// Writes so far.
    static SEEN: AtomicU64 = AtomicU64::new(0);

    pub fn arm(at: u64) {
        AT.store(at, Ordering::SeqCst);
    }

    pub fn write_point() {
        let at = AT.load(Ordering::SeqCst);
        if at != 0 && SEEN.fetch_add(1, Ordering::SeqCst) + 1 == at {
            // SAFETY: kill with our own pid and a fixed signal touches no memory of ours.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}

/// Die (SIGKILL) at the `at`-th write of this process, counting from 1 (debug builds only).
#[cfg(debug_assertions)]
pub fn arm(at: u64) {
    armed::arm(at);
}

/// Release builds have no failpoint.
#[cfg(not(debug_assertions))]
pub fn arm(_at: u64) {}

/// A write is about to happen, or has just happened: the process dies here if armed for it.
#[inline]
pub fn write_point() {
    #[cfg(debug_assertions)]
    armed::write_point();
}
