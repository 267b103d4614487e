//! The only module that runs the `git` program, used where gix cannot do the job: pushing
//! (gix 0.90 has no push), fetching over http, repacking, the landing queue's worktree
//! updates (a two-tree checkout of a worktree that follows its branch, the landing worktree's
//! reset, and whether a worktree is clean), and writing a person's adopted settings into the
//! repository's configuration file. One function per invocation;
//! stdin closed; hooks, fsmonitor and prompts disabled; errors name the argv, the exit status
//! and stderr.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result};
use gix::ObjectId;

use crate::error::{Class, Refusal};

/// One ref to push: `src` (None deletes) to `dst`, with the lease `expect`
/// (`Some(None)`: must not exist on the remote; `Some(Some(id))`: must hold `id`).
#[derive(Debug, Clone)]
pub struct PushUpdate {
    pub dst: String,
    pub src: Option<ObjectId>,
    pub expect: Option<Option<ObjectId>>,
}

/// What the remote said about one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefStatus {
    /// Updated, created, deleted, or already up to date.
    Ok,
    /// Refused because the lease did not hold or it was not a fast-forward: someone else
    /// changed it first. Read the remote again.
    Stale(String),
    /// Refused by the remote's policy (a hook, a locked ref, denyDeletes...).
    Refused(String),
}

/// The outcome of one push.
#[derive(Debug, Clone)]
pub struct PushReport {
    pub refs: Vec<(String, RefStatus)>,
    /// What the remote's hooks printed (git's `remote:` lines), control characters escaped.
    pub remote_lines: Vec<String>,
}

impl PushReport {
    pub fn all_ok(&self) -> bool {
        self.refs.iter().all(|(_, s)| *s == RefStatus::Ok)
    }

    /// The ref the remote refused by policy, why, and what to do when the remote said. Its
    /// status comes first (`[remote rejected] (pre-receive hook declined)`), then what the hook
    /// said: git-loop's own pre-receive prints one line per ref it refuses (`git-loop: refusing
    /// '<ref>': <why>; hint: <hint>`, docs/hooks.md) and the first ref it names is the one
    /// reported (in an atomic push every ref is "rejected", the guilty one with the rest),
    /// with the reasons for any other it refused; another hook's lines are quoted as they are
    /// (the first few).
    pub fn refusal(&self) -> Option<RemoteRefusal> {
        let (dst, status) = self.refs.iter().find_map(|(dst, s)| match s {
            RefStatus::Refused(why) => Some((dst, why)),
            _ => None,
        })?;
        let ours: Vec<(&str, &str, Option<&str>)> = self
            .remote_lines
            .iter()
            .filter_map(|l| {
                let (name, said) = l.strip_prefix("git-loop: refusing '")?.split_once("': ")?;
                // The hint is ours, the reason may quote the pusher: split at the last one.
                Some(match said.rsplit_once("; hint: ") {
                    Some((why, hint)) => (name, why, Some(hint)),
                    None => (name, said, None),
                })
            })
            .collect();
        if let Some(((first, why, hint), rest)) = ours.split_first() {
            let mut text = format!("{status}: {why}");
            for (other, why, _) in rest {
                text.push_str(&format!("; and '{other}': {why}"));
            }
            return Some(RemoteRefusal { dst: (*first).to_owned(), why: text, hint: hint.map(str::to_owned) });
        }
        let said: Vec<&str> = self.remote_lines.iter().map(String::as_str).filter(|l| !l.is_empty()).take(3).collect();
        let why =
            if said.is_empty() { status.clone() } else { format!("{status}: the remote says: {}", said.join(" / ")) };
        Some(RemoteRefusal { dst: dst.clone(), why, hint: None })
    }
}

/// A ref update a remote refused by policy (a hook, a setting), as its pusher is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRefusal {
    /// The ref refused.
    pub dst: String,
    /// git's status for it, and what the remote said.
    pub why: String,
    /// What to do, when the remote's git-loop hook said.
    pub hint: Option<String>,
}

/// Run the git program in `dir` with hooks and fsmonitor off, no prompts, C locale.
fn git(dir: &Path, args: &[String]) -> Result<std::process::Output> {
    command(dir, args).output().with_context(|| format!("could not run 'git {}'", args.join(" ")))
}

/// The git program as every call here runs it (see `git`).
fn command(dir: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"])
        // git's own upkeep after a fetch (`gc --auto`, `maintenance run --auto`, a commit
        // graph) would repack and prune beside other git-loop processes reading and fetching:
        // git-loop consolidates at moments of its own choosing instead.
        .args(["-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "fetch.writeCommitGraph=false"])
        .args(args)
        .current_dir(dir)
        // Every call names its repository by `dir` (or `--git-dir`): what an outer git set for
        // its own process must not redirect a checkout or a status to another worktree.
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
    cmd
}

/// What this module says of a call to a remote that `timeout` cut off: the last line of the
/// error it returns (see `TimedOut`).
pub const TIMED_OUT: &str = "no answer within the transfer timeout";

/// What this module says of a call that moved data and then nothing for its transfer timeout.
pub const STALLED: &str = "stalled: nothing moved within the transfer timeout";

/// A call to a remote that was stopped because nothing moved for its transfer timeout
/// (`loop.transferTimeout`): a server that never answered, or a connection that stalled.
#[derive(Debug)]
pub struct TimedOut {
    pub argv: String,
    /// The transfer timeout: how long nothing moved.
    pub after: Duration,
    /// Bytes its processes read and wrote before it stalled (0: it never got going), and for
    /// how long it ran in all.
    pub moved: u64,
    pub ran: Duration,
}

/// Less than this moved is git starting up (its configuration, its refs) and waiting for a
/// remote that never answered: a push or fetch that got an answer moves a ref advertisement
/// and a pack, and reads the objects it sends.
const ANSWERED: u64 = 64 << 10;

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.moved < ANSWERED {
            return write!(f, "'git {}' was stopped: {TIMED_OUT} ({} s)", self.argv, self.after.as_secs());
        }
        write!(
            f,
            "'git {}' was stopped: {STALLED} ({} s), after moving {} in {} s",
            self.argv,
            self.after.as_secs(),
            bytes(self.moved),
            self.ran.as_secs()
        )
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// What the processes of group `group` have read and written so far (`rchar` + `wchar` of
/// each one's `/proc/<pid>/io`: sockets, pipes and files alike), for telling a call that moves
/// data from one that waits. Processes gone are no longer counted: callers look for a change,
/// not a growth.
fn group_io(group: libc::pid_t) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    let mut total = 0u64;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // Fields after the command (which may hold spaces): state, ppid, pgrp.
        let Some((_, rest)) = stat.rsplit_once(") ") else { continue };
        if rest.split(' ').nth(2).and_then(|g| g.parse::<libc::pid_t>().ok()) != Some(group) {
            continue;
        }
        let Ok(io) = std::fs::read_to_string(format!("/proc/{pid}/io")) else { continue };
        for line in io.lines() {
            if let Some(n) = line.strip_prefix("rchar: ").or_else(|| line.strip_prefix("wchar: ")) {
                total = total.saturating_add(n.trim().parse().unwrap_or(0));
            }
        }
    }
    total
}

impl std::error::Error for TimedOut {}

/// Run a git call that talks to a remote, stopping it (its whole process group: git's
/// transport helpers, `ssh`, `pack-objects`) once **nothing has moved** for `timeout`: git has
/// no timeout of its own for a connection that stalls (`git://`, and `ssh` without
/// keep-alives), and a walk must never hang on one — but a transfer that is still moving data
/// (a large first push, a week's history) is never cut, however long it takes. Moving is any
/// byte its processes read or write (the socket, the pack they read from disk, their output),
/// looked at about once a second. A call stopped so is a [`TimedOut`] error: an unknown outcome
/// for a push, whose caller reads the remote back.
fn git_within(dir: &Path, args: &[String], timeout: Duration) -> Result<std::process::Output> {
    let argv = shown_argv(args);
    run_stalled_after(command(dir, args), timeout).map_err(|err| match err {
        Within::Spawn(err) => anyhow::Error::from(err).context(format!("could not run 'git {argv}'")),
        Within::Wait(err) => anyhow::Error::from(err).context(format!("could not wait for 'git {argv}'")),
        Within::Stalled { moved, ran } => TimedOut { argv: argv.clone(), after: timeout, moved, ran }.into(),
        Within::Stopped { moved, ran } => Stopped { argv: argv.clone(), moved, ran }.into(),
    })
}

/// Whether a person's interruption (the process's first SIGINT or SIGTERM, as
/// `gix::interrupt` records it) stops a call to a remote at once, its whole process group
/// killed: for `git loop sync`, whose person waits on it. A walk leaves it off: its last
/// publish after a Ctrl-C must finish.
static STOP_ON_INTERRUPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, a person's interruption stops a call to a remote that is still moving (see
/// [`Stopped`]).
pub fn stop_transfers_on_interrupt() {
    STOP_ON_INTERRUPT.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether a person asked this process to stop, where that stops its transfers.
pub fn stopped_by_person() -> bool {
    STOP_ON_INTERRUPT.load(std::sync::atomic::Ordering::SeqCst) && gix::interrupt::is_triggered()
}

/// A call to a remote a person stopped (Ctrl-C) while it ran, and how much it had moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub argv: String,
    pub moved: u64,
    pub ran: Duration,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "'git {}' was stopped by you after moving {} in {} s",
            self.argv,
            bytes(self.moved),
            self.ran.as_secs()
        )
    }
}

impl Stopped {
    /// How far it got: `'git push … (500 refs)': 1.2 MiB moved in 2 s`.
    pub fn progress(&self) -> String {
        format!("'git {}': {} moved in {} s", self.argv, bytes(self.moved), self.ran.as_secs())
    }
}

impl std::error::Error for Stopped {}

/// A call's arguments as an error names them: its refspecs and leases (a sync's push may carry
/// a thousand) counted, not listed — `push --porcelain --atomic origin (1000 refs)`.
fn shown_argv(args: &[String]) -> String {
    let listed = |a: &&String| !a.starts_with("--force-with-lease") && (!a.contains(':') || a.contains("://"));
    let kept: Vec<&String> = args.iter().filter(listed).collect();
    let refspecs = args.iter().filter(|a| !a.starts_with("--") && a.contains(':') && !a.contains("://")).count();
    let mut shown = kept.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(" ");
    if refspecs > 0 {
        shown.push_str(&format!(" ({refspecs} {})", if refspecs == 1 { "ref" } else { "refs" }));
    }
    shown
}

/// Why [`run_stalled_after`] returned no output.
#[derive(Debug)]
enum Within {
    Spawn(std::io::Error),
    Wait(std::io::Error),
    /// A person stopped it; `moved` bytes had moved, in `ran`.
    Stopped {
        moved: u64,
        ran: Duration,
    },
    /// Nothing moved for the timeout; `moved` bytes had before, in `ran` all told.
    Stalled {
        moved: u64,
        ran: Duration,
    },
}

/// Run `cmd` in a process group of its own to its end, or stop the group once nothing it does
/// has moved a byte for `timeout` (see [`git_within`]).
fn run_stalled_after(mut cmd: Command, timeout: Duration) -> Result<std::process::Output, Within> {
    use std::io::Read as _;
    use std::os::unix::process::CommandExt as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().map_err(Within::Spawn)?;
    // Bytes seen on its output pipes, for progress besides the group's own I/O counters.
    let piped = Arc::new(AtomicU64::new(0));
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        let piped = piped.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    piped.fetch_add(n as u64, Ordering::Relaxed);
                    bytes.extend_from_slice(&buf[..n]);
                }
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let group = child.id() as libc::pid_t;
    let started = std::time::Instant::now();
    // Every process of the group is new, and a process's counters start at zero: what moves
    // before the first look counts too, with no look at /proc for a call that ends before it
    // (nearly every one: a claim's push, a fetch of a few refs).
    let (mut last_io, mut last_piped, mut moved) = (0u64, 0u64, 0u64);
    let (mut last_move, mut last_look) = (started, started);
    let mut pause = Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(Within::Wait)? {
            break status;
        }
        if last_look.elapsed() >= Duration::from_secs(1).min(timeout / 4) {
            last_look = std::time::Instant::now();
            let (io, out) = (group_io(group), piped.load(Ordering::Relaxed));
            if io != last_io || out != last_piped {
                moved += io.abs_diff(last_io) + (out - last_piped);
                (last_io, last_piped, last_move) = (io, out, last_look);
            }
        }
        let stopped = stopped_by_person();
        if stopped || last_move.elapsed() >= timeout {
            // What moved since the last look counts too (a person may stop it before any).
            let (io, out) = (group_io(group), piped.load(Ordering::Relaxed));
            moved += io.saturating_sub(last_io) + out.saturating_sub(last_piped);
            // SAFETY: killpg only sends a signal; the group is the one this call started.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
            let _ = child.wait();
            let _ = (stdout.join(), stderr.join());
            return Err(match stopped {
                true => Within::Stopped { moved, ran: started.elapsed() },
                false => Within::Stalled { moved, ran: started.elapsed() },
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok(std::process::Output { status, stdout, stderr })
}

/// `git push --porcelain --atomic --force-with-lease=... <remote> <src>:<dst>... <pattern>...`,
/// run in `dir`. Never a `+` refspec: that would silently override the lease. `patterns` are
/// plain wildcard refspecs (`refs/loop/tasks/*:refs/loop/tasks/*`), pushed without force: the
/// server still checks each ref's old value under its lock, and git refuses anything that is
/// not a fast-forward. (git resolves explicit refspecs one by one against every ref; a
/// thousand of them cost a second of CPU, a wildcard almost nothing.)
///
/// Returns the per-ref report when git gave one. An error means the outcome is unknown (the
/// remote may or may not have applied the push): callers must read the remote back.
pub fn push(
    dir: &Path,
    remote: &str,
    updates: &[PushUpdate],
    patterns: &[String],
    timeout: Duration,
) -> Result<PushReport> {
    push_with(dir, remote, updates, patterns, timeout, true)
}

/// `push`, each ref on its own (`atomic` false): one whose lease fails is reported and the
/// others are applied (the archive's leased deletes, `store::archive`).
pub fn push_with(
    dir: &Path,
    remote: &str,
    updates: &[PushUpdate],
    patterns: &[String],
    timeout: Duration,
    atomic: bool,
) -> Result<PushReport> {
    let mut args: Vec<String> = vec!["push".into(), "--porcelain".into(), "--no-verify".into()];
    if atomic {
        args.insert(2, "--atomic".into());
    }
    for update in updates {
        if let Some(expect) = &update.expect {
            let value = expect.map(|id| id.to_string()).unwrap_or_default();
            args.push(format!("--force-with-lease={}:{value}", update.dst));
        }
    }
    args.push("--".into());
    args.push(remote.to_owned());
    for update in updates {
        let src = update.src.map(|id| id.to_string()).unwrap_or_default();
        args.push(format!("{src}:{}", update.dst));
    }
    args.extend(patterns.iter().cloned());
    let output = git_within(dir, &args, timeout)?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("does not support --atomic") {
        return Err(Refusal::new(
            Class::Failure,
            format!("remote '{remote}' does not support atomic pushes, which git-loop needs to arbitrate claims"),
        )
        .hint("enable it on the server with 'git config receive.advertiseAtomic true' (git's default)")
        .into());
    }
    let refs = parse_porcelain(&stdout);
    let remote_lines =
        stderr.lines().filter_map(|l| l.strip_prefix("remote: ")).map(|l| printable(l.trim_end())).collect();
    if refs.is_empty() {
        anyhow::bail!("'git {}' failed ({}): {}", args.join(" "), output.status, said(&output.stderr));
    }
    Ok(PushReport { refs, remote_lines })
}

/// `text` with control characters escaped: a remote's words must not drive our terminal.
fn printable(text: &str) -> String {
    text.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect()
}

/// Parse `git push --porcelain` status lines: `<flag>\t<src>:<dst>\t<summary> (<reason>)`.
fn parse_porcelain(stdout: &str) -> Vec<(String, RefStatus)> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        let mut fields = line.splitn(3, '\t');
        let (Some(flag), Some(spec), summary) = (fields.next(), fields.next(), fields.next().unwrap_or("")) else {
            continue;
        };
        if flag.len() != 1 {
            continue;
        }
        let dst = spec.rsplit_once(':').map_or(spec, |(_, dst)| dst).to_owned();
        let status = match flag {
            " " | "+" | "-" | "*" | "=" => RefStatus::Ok,
            "!" => {
                let stale = ["stale info", "fetch first", "non-fast-forward", "atomic push failed", "already exists"];
                if stale.iter().any(|s| summary.contains(s)) {
                    RefStatus::Stale(summary.to_owned())
                } else {
                    RefStatus::Refused(summary.to_owned())
                }
            }
            _ => continue,
        };
        out.push((dst, status));
    }
    out
}

/// Fetch through the git program, for transports this build of gix does not carry (http and
/// https: gix would need libcurl or a TLS stack; git brings the user's credential helpers).
/// Lists the remote's refs matching `prefixes` first (`git ls-remote`, the truth about what
/// it holds, deletions included), then fetches `refspecs` if anything matched.
pub fn fetch(
    dir: &Path,
    remote: &str,
    prefixes: &[String],
    refspecs: &[String],
    timeout: Duration,
) -> Result<Vec<(String, ObjectId)>> {
    let refs = ls_remote(dir, remote, prefixes, timeout)?;
    // git fails the whole fetch when an exact refspec (refs/notes/loop) names a ref the
    // remote lacks: ask only for what the listing found.
    let listed_source = |spec: &&String| {
        let src = spec.trim_start_matches('+').split(':').next().unwrap_or_default();
        refs.iter().any(|(name, _)| src.strip_suffix('*').map_or(name == src, |prefix| name.starts_with(prefix)))
    };
    let wanted: Vec<String> = refspecs.iter().filter(listed_source).cloned().collect();
    if !wanted.is_empty() {
        fetch_refspecs(dir, remote, &wanted, timeout)?;
    }
    Ok(refs)
}

/// `git fetch` of exactly `refspecs` from `remote` (a remote's name, a URL or a path), each of
/// whose sources the remote holds; stopped after `timeout`.
pub fn fetch_refspecs(dir: &Path, remote: &str, refspecs: &[String], timeout: Duration) -> Result<()> {
    let mut args = vec![
        "fetch".to_owned(),
        "--quiet".to_owned(),
        "--no-tags".to_owned(),
        "--no-write-fetch-head".to_owned(),
        // Only the refspecs given: without it git also moves the remote-tracking refs
        // (refs/remotes/<remote>/*) the remote's configured refspec maps them to, and
        // another git process updating those at the same moment fails the fetch.
        "--refmap=".to_owned(),
        "--".to_owned(),
        remote.to_owned(),
    ];
    args.extend(refspecs.iter().cloned());
    run_within(dir, &args, timeout)?;
    Ok(())
}

/// Whether a failed `fetch` lost a race with a push (a ref moved or went away between git's
/// listing and its request for the objects, as can happen over stateless smart HTTP): worth
/// trying again.
pub fn moved_while_fetching(err: &anyhow::Error) -> bool {
    let text = format!("{err:#}");
    ["did not send all necessary objects", "couldn't find remote ref", "not our ref", "unadvertised object"]
        .iter()
        .any(|sign| text.contains(sign))
}

/// Whether a failed `fetch` died reading a linked worktree's registration that changed under it
/// (git's connectivity check reads every worktree's `HEAD` through `.git/worktrees/<id>/`, and
/// dies when one is removed between its listing and its reads, as a walk's workers do with
/// their try worktrees all the time): worth trying again.
pub fn worktree_changed_while_fetching(err: &anyhow::Error) -> bool {
    let text = format!("{err:#}");
    text.contains("/worktrees/") && ["failed to read", "Invalid path", "No such file"].iter().any(|s| text.contains(s))
}

/// `git ls-remote -- <remote> <prefix>*...`: the refs the remote holds under `prefixes`.
pub fn ls_remote(dir: &Path, remote: &str, prefixes: &[String], timeout: Duration) -> Result<Vec<(String, ObjectId)>> {
    let mut args = vec!["ls-remote".to_owned(), "--".to_owned(), remote.to_owned()];
    args.extend(prefixes.iter().map(|p| format!("{p}*")));
    let listed = run_within(dir, &args, timeout)?;
    Ok(listed
        .lines()
        .filter_map(|line| {
            let (id, name) = line.split_once('\t')?;
            let id = ObjectId::from_hex(id.trim().as_bytes()).ok()?;
            prefixes.iter().any(|p| name.starts_with(p.as_str())).then(|| (name.to_owned(), id))
        })
        .collect())
}

/// Run git in `dir` and return its stdout; an error names the argv, the exit status and the
/// last line of stderr.
fn run(dir: &Path, args: &[String]) -> Result<String> {
    checked(args, git(dir, args)?)
}

/// `run` for a call to a remote, stopped after `timeout` (see `git_within`).
fn run_within(dir: &Path, args: &[String], timeout: Duration) -> Result<String> {
    checked(args, git_within(dir, args, timeout)?)
}

/// The stdout of a call that succeeded, else an error naming the argv, the exit status and
/// the last line of stderr.
fn checked(args: &[String], output: std::process::Output) -> Result<String> {
    if !output.status.success() {
        anyhow::bail!("'git {}' failed ({}): {}", args.join(" "), output.status, said(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// What a failed git said, on one line: its `fatal:` and `error:` lines and any line that says
/// access was denied (ssh's reason comes before git's `fatal:`), else its last line.
fn said(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let telling: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("fatal:") || l.starts_with("error:") || l.contains("denied"))
        .collect();
    match (telling.is_empty(), lines.last()) {
        (false, _) => telling.join(" / "),
        (true, Some(last)) => (*last).to_owned(),
        (true, None) => "no output".to_owned(),
    }
}

/// `git read-tree -m -u <old> <new>` in the worktree `dir`: its index and files go from commit
/// `old` to commit `new` (a two-tree merge, as `git checkout` does when it switches), so a
/// worktree that has a branch checked out follows the branch when it is moved under it.
/// Refuses, changing nothing, where a file it would write differs from `old` or is an
/// untracked file in the way. Used by the landing queue after checking the worktree is clean:
/// gix 0.90 has no two-tree checkout that keeps the stat cache and refuses to overwrite.
pub fn read_tree_update(dir: &Path, old: ObjectId, new: ObjectId) -> Result<()> {
    let args: Vec<String> = vec!["read-tree".into(), "-m".into(), "-u".into(), old.to_string(), new.to_string()];
    run(dir, &args)?;
    Ok(())
}

/// The paths `git status --porcelain -z --untracked-files=no` lists in the worktree `dir`:
/// tracked files whose index or contents differ from `HEAD` (empty: clean). Untracked files
/// do not count (a two-tree update refuses to overwrite one that is in its way).
pub fn changed_paths(dir: &Path) -> Result<Vec<String>> {
    let args: Vec<String> =
        vec!["status".into(), "--porcelain".into(), "-z".into(), "--untracked-files=no".into(), "--no-renames".into()];
    let out = run(dir, &args)?;
    Ok(out.split('\0').filter(|entry| entry.len() > 3).map(|entry| entry[3..].to_owned()).collect())
}

/// `git checkout --quiet --force --detach <commit>` in the worktree `dir`: its `HEAD`, index
/// and tracked files become `commit`'s, whatever was changed there (the landing worktree,
/// reused from one candidate to the next).
pub fn checkout_detached(dir: &Path, commit: ObjectId) -> Result<()> {
    let args: Vec<String> =
        vec!["checkout".into(), "--quiet".into(), "--force".into(), "--detach".into(), commit.to_string()];
    run(dir, &args)?;
    Ok(())
}

/// `git clean -f -d -q` in the worktree `dir`: untracked files and directories go; ignored
/// ones (build caches) stay, so checks run again incrementally.
pub fn clean_untracked(dir: &Path) -> Result<()> {
    let args: Vec<String> = vec!["clean".into(), "-f".into(), "-d".into(), "-q".into()];
    run(dir, &args)?;
    Ok(())
}

/// `git config --file <file> --unset-all <key>`, then `git config --file <file> --add <key>
/// <value>` for each of `values`: `key` holds exactly `values` in the configuration file `file`
/// (a repository's `config`). Run through git, whose configuration writer keeps the file's
/// comments and layout and takes its lock.
pub fn config_replace(dir: &Path, file: &Path, key: &str, values: &[String]) -> Result<()> {
    let file = file.display().to_string();
    let unset: Vec<String> = vec!["config".into(), "--file".into(), file.clone(), "--unset-all".into(), key.into()];
    let output = git(dir, &unset)?;
    // Exit 5: the key was not set; nothing to unset.
    if !output.status.success() && output.status.code() != Some(5) {
        anyhow::bail!(
            "'git {}' failed ({}): {}",
            unset.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim().lines().last().unwrap_or("no output")
        );
    }
    for value in values {
        let add: Vec<String> =
            vec!["config".into(), "--file".into(), file.clone(), "--add".into(), key.into(), value.clone()];
        run(dir, &add)?;
    }
    Ok(())
}

/// `git repack -d -l -n -q --geometric=2` on the repository whose common directory is
/// `git_dir`: roll the loose objects and the packs that break a geometric progression (each
/// pack at least twice the objects of the next smaller one) into one new pack, then delete
/// the packs and loose objects it made redundant. It never looks at reachability, so it drops
/// no object — one a concurrent writer has written but not yet referenced stays — and packs
/// with a `.keep` (a fetch still in flight) are left alone. No bitmaps, no `info/packs`.
pub fn repack_geometric(git_dir: &Path) -> Result<()> {
    let args: Vec<String> = vec![
        format!("--git-dir={}", git_dir.display()),
        "repack".into(),
        "-d".into(),
        "-l".into(),
        "-n".into(),
        "-q".into(),
        "--geometric=2".into(),
        "--no-write-bitmap-index".into(),
    ];
    run(git_dir, &args)?;
    Ok(())
}

/// `git commit-graph write --reachable --split` in the repository whose common directory is
/// `git_dir`: the commits every ref reaches, in a graph file gix walks without inflating them.
pub fn write_commit_graph(git_dir: &Path) -> Result<()> {
    let args: Vec<String> = vec![
        format!("--git-dir={}", git_dir.display()),
        "commit-graph".into(),
        "write".into(),
        "--reachable".into(),
        "--split".into(),
        "--no-progress".into(),
    ];
    run(git_dir, &args)?;
    Ok(())
}

/// `git fast-import` into the repository whose common directory is `git_dir`: the objects
/// `stream` writes (fast-import's command language) go into one pack (a few objects, below
/// `fastimport.unpackLimit`, are stored loose), deltified against each other, and the marks
/// given to them are returned (mark → object id). `stream` must end with `done`. Refs are left
/// to the caller: the stream should name one scratch branch and `reset` it last, so that
/// fast-import, which would write each branch as a loose ref, writes none.
///
/// If the stream fails half-way, the objects already written stay, unreferenced (`git gc`
/// removes them); no ref changes.
pub fn fast_import(
    git_dir: &Path,
    marks: &Path,
    stream: impl FnOnce(&mut dyn std::io::Write) -> Result<()>,
) -> Result<Vec<(u64, ObjectId)>> {
    let args: Vec<String> = vec![
        format!("--git-dir={}", git_dir.display()),
        "fast-import".into(),
        "--quiet".into(),
        "--done".into(),
        "--date-format=raw".into(),
        format!("--export-marks={}", marks.display()),
    ];
    let mut child = Command::new("git")
        .args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "gc.auto=0"])
        .args(&args)
        .current_dir(git_dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not run 'git {}'", args.join(" ")))?;
    let written = {
        let stdin = child.stdin.take().expect("stdin was piped");
        let mut writer = std::io::BufWriter::with_capacity(1 << 20, stdin);
        stream(&mut writer).and_then(|()| std::io::Write::flush(&mut writer).map_err(anyhow::Error::from))
    };
    let output = child.wait_with_output().with_context(|| format!("could not run 'git {}'", args.join(" ")))?;
    if !output.status.success() {
        anyhow::bail!(
            "'git {}' failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim().lines().next().unwrap_or("no output")
        );
    }
    written?;
    let text = std::fs::read_to_string(marks).with_context(|| format!("could not read '{}'", marks.display()))?;
    text.lines()
        .map(|line| {
            let parsed = line
                .strip_prefix(':')
                .and_then(|rest| rest.split_once(' '))
                .and_then(|(mark, id)| Some((mark.parse::<u64>().ok()?, ObjectId::from_hex(id.as_bytes()).ok()?)));
            parsed.with_context(|| format!("'git fast-import' wrote a marks line that does not parse: {line:?}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// The transfer timeout cuts a call in which nothing moves, never one still moving data,
    /// however long it runs; the error says which, and how much had moved.
    #[test]
    fn a_calls_refspecs_are_counted_not_listed_in_what_is_said() {
        let args: Vec<String> = [
            "push",
            "--porcelain",
            "--atomic",
            "--force-with-lease=refs/a:",
            "https://h/r.git",
            "1:refs/a",
            "2:refs/b",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        assert_eq!(shown_argv(&args), "push --porcelain --atomic https://h/r.git (2 refs)");
        assert_eq!(shown_argv(&["fetch".to_string(), "origin".to_string()]), "fetch origin");
    }

    #[test]
    fn a_person_stops_a_call_that_is_still_moving_at_once_and_is_told_how_far_it_got() {
        // Moving all along, for 30 s; a person's Ctrl-C 0.5 s in stops it, where the command
        // said so (`sync`). (A test process of its own under nextest: the flag is global.)
        stop_transfers_on_interrupt();
        let stopper = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(500));
            gix::interrupt::trigger();
        });
        let started = std::time::Instant::now();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "for i in $(seq 300); do echo line $i; sleep 0.1; done"]);
        let err = run_stalled_after(cmd, Duration::from_secs(60)).expect_err("stopped by the person");
        stopper.join().expect("stopper");
        gix::interrupt::reset();
        assert!(started.elapsed() < Duration::from_secs(10), "stopped at once: {:?}", started.elapsed());
        let Within::Stopped { moved, ran } = err else { panic!("{err:?}") };
        assert!(moved > 0, "it had moved its lines");
        let said = Stopped { argv: "push origin".into(), moved, ran }.to_string();
        assert!(said.starts_with("'git push origin' was stopped by you after moving "), "{said}");
    }

    #[test]
    fn a_call_is_cut_when_nothing_moves_for_the_timeout_never_while_it_moves() {
        let timeout = Duration::from_millis(800);
        let sh = |script: &str| {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", script]);
            cmd
        };
        // Output every 0.3 s for 2.4 s: three times the timeout, moving all along.
        let started = std::time::Instant::now();
        let out = run_stalled_after(sh("for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.3; done"), timeout)
            .expect("a call that keeps moving is not cut");
        assert!(started.elapsed() > timeout * 2, "it ran past the timeout: {:?}", started.elapsed());
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 8);
        // No output, but a child of its group reading and writing (as pack-objects and the
        // transport do with the socket): moving too.
        let out = run_stalled_after(
            sh("for i in 1 2 3 4 5 6 7 8; do head -c 65536 /dev/zero | cat > /dev/null; sleep 0.3; done"),
            timeout,
        );
        assert!(out.is_ok(), "bytes moved by its processes count: {out:?}");
        // Something, then nothing: cut once nothing moved for the timeout, saying how much had.
        let started = std::time::Instant::now();
        let err = run_stalled_after(sh("echo hello; exec sleep 30"), timeout).expect_err("a stall is cut");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "cut after the timeout, not at the end: {:?}",
            started.elapsed()
        );
        let Within::Stalled { moved, .. } = err else { panic!("{err:?}") };
        assert!(moved > 0, "it had moved its greeting (and sh its start)");
        let said = TimedOut {
            argv: "push".into(),
            after: Duration::from_secs(60),
            moved: 3 << 20,
            ran: Duration::from_secs(95),
        };
        assert_eq!(
            said.to_string(),
            "'git push' was stopped: stalled: nothing moved within the transfer timeout (60 s), after moving 3.0 MiB in 95 s"
        );
        let never =
            TimedOut { argv: "fetch".into(), after: Duration::from_secs(60), moved: 0, ran: Duration::from_secs(60) };
        assert_eq!(never.to_string(), "'git fetch' was stopped: no answer within the transfer timeout (60 s)");
    }

    use super::*;

    #[test]
    fn porcelain_lines_are_read() {
        let out = "To ../r.git\n*\tabc:refs/loop/claims/node/t1\t[new reference]\n!\tdef:refs/loop/x\t[rejected] (stale info)\n!\t:refs/loop/y\t[remote rejected] (pre-receive hook declined)\nDone\n";
        let refs = parse_porcelain(out);
        assert_eq!(refs[0], ("refs/loop/claims/node/t1".into(), RefStatus::Ok));
        assert!(matches!(refs[1].1, RefStatus::Stale(_)));
        assert!(matches!(refs[2].1, RefStatus::Refused(_)));
    }

    #[test]
    fn a_fetch_that_died_on_a_worktree_changing_under_it_is_told_apart() {
        let died = |line: &str| anyhow::anyhow!("'git fetch --quiet -- origin' failed (exit status: 128): {line}");
        for line in [
            "fatal: failed to read .git/worktrees/t-4f2a-1/commondir: Success",
            "fatal: Invalid path '/r/.git/worktrees/w-153': No such file or directory",
            "fatal: failed to read .git/worktrees/w-262/commondir: No such file or directory",
        ] {
            assert!(worktree_changed_while_fetching(&died(line)), "{line}");
        }
        for line in ["fatal: Authentication failed for 'http://127.0.0.1/r.git/'", "fatal: bad object HEAD"] {
            assert!(!worktree_changed_while_fetching(&died(line)), "{line}");
        }
    }

    #[test]
    fn the_ref_our_hook_names_is_the_refused_one_with_its_reason_and_hint() {
        let declined = || RefStatus::Refused("[remote rejected] (pre-receive hook declined)".into());
        let report = PushReport {
            refs: vec![("refs/loop/tasks/t-1".into(), declined()), ("refs/loop/claims/node/t-1".into(), declined())],
            remote_lines: vec![
                "git-loop: refusing 'refs/loop/claims/node/t-1': its holder is empty; hint: claim with git loop".into(),
                "git-loop: refusing 'refs/loop/tries/t-1/1': 'x; hint: y' is odd; hint: sync".into(),
                "git-loop: the whole push is refused; nothing was changed (docs/hooks.md)".into(),
            ],
        };
        assert_eq!(
            report.refusal(),
            Some(RemoteRefusal {
                dst: "refs/loop/claims/node/t-1".into(),
                why: "[remote rejected] (pre-receive hook declined): its holder is empty; and 'refs/loop/tries/t-1/1': 'x; hint: y' is odd".into(),
                hint: Some("claim with git loop".into()),
            })
        );
        let other = PushReport { refs: report.refs.clone(), remote_lines: vec!["no pushes on Fridays".into()] };
        assert_eq!(
            other.refusal(),
            Some(RemoteRefusal {
                dst: "refs/loop/tasks/t-1".into(),
                why: "[remote rejected] (pre-receive hook declined): the remote says: no pushes on Fridays".into(),
                hint: None,
            })
        );
    }
}
