//! The session guard: a small process between the loop and an agent.
//!
//! The loop can die in ways it cannot clean up after (`kill -9`, a crash, the machine's OOM
//! killer). The guard asks the kernel to send it SIGTERM when its parent dies
//! (`PR_SET_PDEATHSIG`), so the agent never outlives the loop: on SIGTERM, SIGINT or SIGHUP
//! (from the loop stopping the session, or from the loop's death) it stops the agent's
//! process group — SIGTERM, the grace period, SIGKILL — and kills every process left with
//! the session marker. When the agent exits on its own, whatever it left running in the
//! background is killed the same way. The guard exits with the agent's code (128 + signal
//! when a signal ended it).
//!
//! The guard is its agent's subreaper (`PR_SET_CHILD_SUBREAPER`): a descendant orphaned by a
//! double fork or `setsid` becomes the guard's child, not init's. So when the agent has exited
//! and the guard has no child left, no descendant is left anywhere, and the sweep through
//! every process's environment is skipped: most sessions end that way.
//!
//! SIGUSR1 asks the agent to wrap up: the guard passes it on as one SIGINT to the agent's
//! process group (what an interactive CLI takes as "stop what you are doing"), and goes on
//! watching; the loop stops the session for good if it has not ended after a while.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;

use super::process::{Exit, Running, Spec};

/// The (internal) subcommand that runs the guard: `git-loop session-guard …`, parsed by the
/// command line before anything else.
pub const SUBCOMMAND: &str = "session-guard";

static STOP: AtomicBool = AtomicBool::new(false);
static INTERRUPT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int) {
    // Only atomic stores: async-signal-safe.
    if signal == libc::SIGUSR1 {
        INTERRUPT.store(true, Ordering::SeqCst);
    } else {
        STOP.store(true, Ordering::SeqCst);
    }
}

/// Run `spec` guarded; `parent` is the loop's pid (if it is already gone, stop at once).
pub fn run(parent: u32, grace: Duration, spec: &Spec) -> Result<i32> {
    // SAFETY: the handler only stores to an atomic; prctl and getppid have no memory effects
    // on this process beyond their documented ones.
    unsafe {
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1] {
            libc::signal(signal, on_signal as *const () as libc::sighandler_t);
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
        if libc::getppid() as u32 != parent {
            STOP.store(true, Ordering::SeqCst);
        }
    }
    let mut running = Running::spawn(spec)?;
    loop {
        if let Some(exit) = running.poll()? {
            running.sweep_as_subreaper();
            return Ok(code(exit));
        }
        if STOP.load(Ordering::SeqCst) {
            let exit = running.stop_as_subreaper(grace)?;
            return Ok(code(exit));
        }
        if INTERRUPT.swap(false, Ordering::SeqCst) {
            running.interrupt();
        }
        running.reap_orphans();
        // Wakes when the agent exits, or when a signal arrives.
        running.wait_for(Duration::from_millis(50))?;
    }
}

fn code(exit: Exit) -> i32 {
    match exit {
        Exit::Code(c) => c,
        Exit::Signal(s) => 128 + s,
    }
}
