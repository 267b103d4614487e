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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;

use super::process::{Exit, Running, Spec};

/// The (internal) subcommand that runs the guard: `git-loop session-guard …`, parsed by the
/// command line before anything else.
pub const SUBCOMMAND: &str = "session-guard";

/// A command to run under the guard: the guard is `exe session-guard …`, a child of the
/// process `parent`; it runs `program args` in `cwd` and stops it (SIGTERM, `grace`, SIGKILL)
/// when told to or when `parent` dies.
pub struct Guarded<'c> {
    pub exe: &'c Path,
    pub parent: u32,
    pub grace: Duration,
    pub program: &'c str,
    pub args: &'c [String],
    pub cwd: &'c Path,
    pub env: &'c [(String, String)],
    /// Fed to the command's standard input.
    pub stdin: Option<PathBuf>,
    /// The command's output (and the guard's own complaints, if any).
    pub log: &'c Path,
    /// Carried in the environment of every process of the command.
    pub marker: &'c str,
    /// `program` is bubblewrap, confining the command after its `--` (see `process::Spec`).
    pub confined: bool,
    /// Under `loop.sandbox.network = allow`: the directory of the run's network policy, whose
    /// filtering proxy the guard serves while the command runs (`sandbox::net`).
    pub net: Option<&'c Path>,
}

/// Start `cmd` under the guard.
pub fn spawn(cmd: &Guarded<'_>) -> Result<Running> {
    let mut args = vec![
        SUBCOMMAND.to_owned(),
        "--parent".to_owned(),
        cmd.parent.to_string(),
        "--grace-ms".to_owned(),
        cmd.grace.as_millis().to_string(),
        "--log".to_owned(),
        cmd.log.display().to_string(),
    ];
    if let Some(stdin) = &cmd.stdin {
        args.push("--stdin".into());
        args.push(stdin.display().to_string());
    }
    if cmd.confined {
        args.push("--confined".into());
    }
    if let Some(net) = cmd.net {
        args.push("--net".into());
        args.push(net.display().to_string());
    }
    args.push("--".into());
    args.push(cmd.program.to_owned());
    args.extend(cmd.args.iter().cloned());
    Running::spawn(&Spec {
        program: cmd.exe.display().to_string(),
        args,
        cwd: cmd.cwd.to_owned(),
        env: cmd.env.to_vec(),
        stdin: None,
        log: cmd.log.to_owned(),
        marker: cmd.marker.to_owned(),
        confined: false,
    })
}

/// Wait for `running` to end, stopping it (with `grace`) once `timeout` has passed or
/// `cancelled` says so; how it ended.
pub fn finish(
    running: &mut Running,
    timeout: Duration,
    grace: Duration,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Exit>> {
    let deadline = std::time::Instant::now() + timeout;
    while running.poll()?.is_none() && std::time::Instant::now() < deadline && !cancelled() {
        running
            .wait_for(deadline.saturating_duration_since(std::time::Instant::now()).min(Duration::from_millis(50)))?;
    }
    if running.poll()?.is_none() {
        running.stop(grace)?;
    }
    running.poll()
}

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
