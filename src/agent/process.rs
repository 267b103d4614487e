//! Running an agent as a supervised process: its own process group, a per-session marker in
//! its environment, output to a log file, and a stop that cannot be dodged.
//!
//! Stopping: SIGTERM to the group, a grace period, SIGKILL to the group; then every process
//! that still carries the session's marker in its environment is killed, which catches
//! children that left the group (setsid, double fork). A process is only ever signalled by
//! marker after checking its environment, so an unrelated process that reused a pid is never
//! touched.

use std::fs::File;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

/// The environment variable that carries a session's marker.
pub const MARKER_VAR: &str = "GIT_LOOP_MARKER";

/// What to run.
#[derive(Debug, Clone)]
pub struct Spec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// Fed to the process's standard input (the prompt, for CLIs that read it there).
    pub stdin: Option<PathBuf>,
    /// Standard output and error are appended here.
    pub log: PathBuf,
    pub marker: String,
    /// The program is bubblewrap confining the command (`sandbox`): its command runs in a pid
    /// namespace of its own, whose first process leads the command's process group.
    pub confined: bool,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit {c}"),
            Exit::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// A started process.
pub struct Running {
    child: Child,
    pub pid: u32,
    pub started: Instant,
    pub marker: String,
    exit: Option<Exit>,
    /// A pidfd for the child (Linux 5.3+): readable once it exits, so a wait wakes at once.
    pidfd: Option<std::os::fd::OwnedFd>,
    /// The child is bubblewrap (see `Spec::confined`).
    confined: bool,
}

impl Running {
    /// Start `spec` in a new process group.
    pub fn spawn(spec: &Spec) -> Result<Running> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .with_context(|| format!("could not open the session log '{}'", spec.log.display()))?;
        let stdin = match &spec.stdin {
            Some(path) => {
                Stdio::from(File::open(path).with_context(|| format!("could not open '{}'", path.display()))?)
            }
            None => Stdio::null(),
        };
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .current_dir(&spec.cwd)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env(MARKER_VAR, &spec.marker)
            .stdin(stdin)
            .stdout(log.try_clone().context("could not share the session log")?)
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().with_context(|| format!("could not start '{}'", spec.program))?;
        let pid = child.id();
        Ok(Running {
            child,
            pid,
            started: Instant::now(),
            marker: spec.marker.clone(),
            exit: None,
            pidfd: pidfd(pid),
            confined: spec.confined,
        })
    }

    /// Wait until the process exits or `limit` passes, whichever comes first; then as `poll`.
    /// With a pidfd the wait ends the moment the process exits; without one it sleeps in short
    /// steps. A signal to this process ends the wait early too.
    pub fn wait_for(&mut self, limit: Duration) -> Result<Option<Exit>> {
        if let Some(exit) = self.poll()? {
            return Ok(Some(exit));
        }
        match &self.pidfd {
            Some(fd) => {
                use std::os::fd::AsRawFd as _;
                let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                let ms = limit.as_millis().clamp(1, i32::MAX as u128) as i32;
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe {
                    libc::poll(&mut pfd, 1, ms);
                }
            }
            None => std::thread::sleep(limit.min(Duration::from_millis(2))),
        }
        self.poll()
    }

    /// The exit, if the process has ended (never blocks).
    pub fn poll(&mut self) -> Result<Option<Exit>> {
        if self.exit.is_none() {
            if let Some(status) = self.child.try_wait().context("could not wait for the session")? {
                self.exit = Some(exit_of(status));
            }
        }
        Ok(self.exit)
    }

    /// Stop it: SIGTERM to its group, up to `grace` to finish, then SIGKILL; then kill every
    /// process left with its marker. Returns how it ended.
    pub fn stop(&mut self, grace: Duration) -> Result<Exit> {
        if self.poll()?.is_none() {
            signal_group(self.command_group(), libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
                if self.wait_for(left.min(Duration::from_millis(50)))?.is_some() {
                    break;
                }
            }
            if self.poll()?.is_none() {
                self.kill_namespace();
                signal_group(self.pid, libc::SIGKILL);
                let status = self.child.wait().context("could not wait for the session")?;
                self.exit = Some(exit_of(status));
            }
        }
        // The leader is gone; whatever escaped the group still carries the marker.
        kill_marked(&self.marker);
        Ok(self.exit.expect("set above"))
    }

    /// Send one SIGINT to its group: "stop what you are doing" to an interactive CLI.
    pub fn interrupt(&mut self) {
        if matches!(self.poll(), Ok(None)) {
            signal_group(self.command_group(), libc::SIGINT);
        }
    }

    /// The process group the command runs in: the child's own, or, when it is bubblewrap, the
    /// group its pid namespace's first process leads (bubblewrap's `--new-session`), so the
    /// command is signalled and bubblewrap is not (it would die, and take the sandbox with it
    /// before the command could finish its step).
    fn command_group(&self) -> u32 {
        if !self.confined {
            return self.pid;
        }
        children_of(self.pid).into_iter().next().unwrap_or(self.pid)
    }

    /// When confined: SIGKILL the first process of the command's pid namespace, which ends
    /// every process in it, however it left its group.
    fn kill_namespace(&self) {
        if self.confined {
            for init in children_of(self.pid) {
                // SAFETY: kill only sends a signal, to bubblewrap's own child.
                unsafe {
                    libc::kill(init as libc::pid_t, libc::SIGKILL);
                }
            }
        }
    }

    /// Ask the session guard running as this process to pass a SIGINT on to its agent.
    pub fn ask_guard_to_interrupt(&mut self) {
        if matches!(self.poll(), Ok(None)) {
            // SAFETY: kill only sends a signal to our own child, which we have not reaped.
            unsafe {
                libc::kill(self.pid as libc::pid_t, libc::SIGUSR1);
            }
        }
    }

    /// After a normal exit: kill whatever the agent left running in the background.
    pub fn sweep(&mut self) {
        if self.exit.is_some() {
            // The group may still hold background children of the agent.
            self.kill_namespace();
            signal_group(self.pid, libc::SIGKILL);
        }
        kill_marked(&self.marker);
    }

    /// For a subreaper while its agent runs: reap the orphans the agent left that have ended
    /// (they became our children), leaving the agent itself to `poll`. Without this, every
    /// short-lived process an agent double-forks would stay a zombie until the session ends.
    pub fn reap_orphans(&self) {
        loop {
            // SAFETY: siginfo_t is plain old data; all zeroes is a valid value.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: WNOWAIT only looks at which child ended, into the struct we own.
            let found =
                unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
            // SAFETY: waitid filled in si_pid (0 when no child has ended).
            let pid = unsafe { info.si_pid() };
            if found != 0 || pid == 0 || pid as u32 == self.pid {
                return;
            }
            let mut status = 0;
            // SAFETY: reaping one ended child that is not the agent.
            unsafe {
                libc::waitpid(pid, &mut status, libc::WNOHANG);
            }
        }
    }

    /// As `stop`, for a caller that is its agent's subreaper (see `sweep_as_subreaper`).
    pub fn stop_as_subreaper(&mut self, grace: Duration) -> Result<Exit> {
        let exit = self.stop(grace)?;
        kill_children();
        Ok(exit)
    }

    /// As `sweep`, for a caller that is its agent's subreaper (see `session::guard`): with
    /// the agent reaped and no child left, nothing it started can be running, so the look
    /// through every process is skipped. Otherwise, after the sweep by marker, every child
    /// left is killed too: as a subreaper, all its children are the agent's descendants, even
    /// one that dropped the marker from its environment.
    pub fn sweep_as_subreaper(&mut self) {
        if self.exit.is_some() && self.confined {
            // Bubblewrap has exited, so its namespace's first process has ended or is ending
            // (it is our child now, as the subreaper), and the kernel ends every process of the
            // namespace with it: wait for it rather than look through every process.
            reap_children_within(Duration::from_millis(500));
        }
        if self.exit.is_some() && !has_children() {
            return;
        }
        self.sweep();
        kill_children();
    }
}

/// Whether this process has a child, running or not yet reaped.
fn has_children() -> bool {
    // SAFETY: siginfo_t is plain old data; all zeroes is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WSTOPPED | libc::WCONTINUED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: waitid with WNOWAIT only inspects, into the struct we own.
    let found = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, flags) };
    // ECHILD: none at all. Otherwise there is one, whether or not it has changed state.
    found == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ECHILD)
}

/// Reap this process's children as they end, for up to `limit` or until none is left.
fn reap_children_within(limit: Duration) {
    let deadline = Instant::now() + limit;
    while has_children() && Instant::now() < deadline {
        let mut status = 0;
        // SAFETY: waitpid writes only the status we pass.
        let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if reaped <= 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Kill and reap every child of this process, until none is left (a child killed may leave
/// children of its own, which then become ours) or a few seconds have passed.
fn kill_children() {
    let me = std::process::id();
    let deadline = Instant::now() + Duration::from_secs(3);
    while has_children() && Instant::now() < deadline {
        for pid in children_of(me) {
            // SAFETY: kill only sends a signal; these are our own children, not yet reaped.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes only the status we pass.
            let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if reaped <= 0 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The processes whose parent is `parent` (field 4 of /proc/<pid>/stat).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
            // The command name may contain spaces and parentheses: fields start after the last ')'.
            stat.rfind(')')
                .and_then(|at| stat[at + 2..].split(' ').nth(1)?.parse::<u32>().ok())
                .is_some_and(|ppid| ppid == parent)
        })
        .collect()
}

/// A pidfd for `pid`, where the kernel has them.
fn pidfd(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative return is a descriptor we now own.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(-1),
    }
}

fn signal_group(pgid: u32, signal: i32) {
    // SAFETY: killpg only sends a signal; an invalid or vanished group yields ESRCH.
    unsafe {
        libc::killpg(pgid as libc::pid_t, signal);
    }
}

/// Every live process whose environment holds `GIT_LOOP_MARKER=<marker>`.
pub fn find_marked(marker: &str) -> Vec<u32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| environ_has(*pid, needle.as_bytes()))
        .collect()
}

fn environ_has(pid: u32, needle: &[u8]) -> bool {
    let mut buf = Vec::new();
    let read = File::open(format!("/proc/{pid}/environ")).and_then(|mut f| f.read_to_end(&mut buf));
    read.is_ok() && buf.split(|b| *b == 0).any(|var| var == needle)
}

/// SIGKILL every process carrying `marker`, re-checking each one's environment right before
/// (so a pid reused meanwhile by an unrelated process is left alone). Returns how many.
pub fn kill_marked(marker: &str) -> usize {
    let needle = format!("{MARKER_VAR}={marker}");
    let mut killed = 0;
    // Killing a parent can let a child fork again before it dies: sweep until quiet.
    for _round in 0..10 {
        let pids = find_marked(marker);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if environ_has(pid, needle.as_bytes()) {
                // SAFETY: kill only sends a signal to a process we just identified by marker.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
                killed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    killed
}

/// Sleeps between polls: 1 ms at first, doubling to 50 ms, so a quick process is seen to
/// end within a millisecond and a long one costs almost nothing to watch.
pub struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    pub fn new() -> Backoff {
        Backoff(Duration::from_millis(1))
    }

    pub fn wait(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(Duration::from_millis(50));
    }
}

/// When process `pid` started, in clock ticks since boot (field 22 of /proc/<pid>/stat).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// Whether `program` can be run: a path that exists, or a name found on PATH.
pub fn find_program(program: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    std::env::split_paths(path_var?).map(|dir| dir.join(program)).find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_that_ignores_sigterm_and_leaves_children_is_stopped_with_all_of_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = format!("test-{}", crate::ids::random_base32(12));
        let spec = Spec {
            program: "sh".into(),
            args: vec![
                "-c".into(),
                // Ignore TERM; leave a child in a new session (setsid), and a double-forked one.
                "trap '' TERM; setsid sleep 300 & (sleep 300 &) ; sleep 300".into(),
            ],
            cwd: dir.path().to_owned(),
            env: vec![],
            stdin: None,
            log: dir.path().join("log"),
            marker: marker.clone(),
            confined: false,
        };
        let mut running = Running::spawn(&spec).expect("spawn");
        // sh, its setsid'd child, its double-forked child and its own sleep: four, once the
        // transient subshells are gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = 0;
        while seen < 4 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            seen = find_marked(&marker).len();
        }
        assert!(seen >= 4, "the session and its escaped children are running (saw {seen})");
        let started = Instant::now();
        let exit = running.stop(Duration::from_millis(300)).expect("stop");
        assert_eq!(exit, Exit::Signal(libc::SIGKILL), "TERM was ignored, so KILL ended it");
        assert!(started.elapsed() < Duration::from_millis(1300), "stopped within grace + 1 s");
        assert_eq!(find_marked(&marker), Vec::<u32>::new(), "no process with the marker is left");
    }

    #[test]
    fn start_time_reads_this_process() {
        assert!(start_time(std::process::id()).is_some());
    }
}
