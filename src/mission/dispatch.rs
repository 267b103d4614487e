//! The mission's dispatcher: one dispatch is one child walk, `git-loop -C <project> run ...
//! --termination-key <key>`, run by this very program. Its output lines are passed to the
//! observer as they come; when it ends, its `walk_terminated` event is read under that key
//! from the project's journal, and the mission's tasks there are checked (a drained walk is
//! not proof). A child that ends without journaling how it ended is a dispatch that came to
//! nothing: the engine dispatches again, up to its cap.
//!
//! The child runs in its own process group, so a Ctrl-C at the terminal reaches the commander
//! only, which then stops the child itself (SIGTERM: the walk stops its sessions, commits their
//! work, journals its end and exits). It is also asked to get SIGTERM should the commander die
//! (`PR_SET_PDEATHSIG`), so no walk outlives its commander.
//!
//! A project known by URL is cloned once (gix) under the commander's `.git/loop/missions/`,
//! with `loop.remote` set to its origin; each dispatch there is `sync`, `run`, `sync`.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use super::queue::{ProjectUnit, Terminated};
use super::record::{self, Selection, Status};
use super::{verify, AgentChoice, Commander, Event, Observer};
use crate::context::Context;
use crate::engine::{self, Dispatched, Verdict};
use crate::error::Refusal;
use crate::ids::WriterId;
use crate::refs;
use crate::store::events::{self, Recorded};
use crate::store::journal;
use crate::store::Store;

/// Variables that would point a child at the commander's repository instead of its project.
const REPOSITORY_VARS: &[&str] =
    &["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE"];

/// Runs child walks.
pub struct ChildDispatcher<'a> {
    store: &'a Store,
    commander: &'a Commander<'a>,
}

/// How a child process ended.
struct ChildEnd {
    /// "exit 0", "killed by signal 9".
    exit: String,
    success: bool,
    /// The commander stopped it (interrupted, or the mission was cancelled).
    stopped: bool,
}

impl<'a> ChildDispatcher<'a> {
    pub fn new(store: &'a Store, commander: &'a Commander<'a>) -> Self {
        ChildDispatcher { store, commander }
    }

    /// The child walk's command line.
    fn walk_args(&self, unit: &ProjectUnit, key: &str) -> Vec<String> {
        let opts = &self.commander.opts;
        let mut args: Vec<String> = vec!["-C".into(), unit.dir.display().to_string(), "run".into()];
        match &opts.agent {
            AgentChoice::Named { name, model } => {
                args.extend(["--agent".into(), name.clone()]);
                if let Some(model) = model {
                    args.extend(["--model".into(), model.clone()]);
                }
            }
            AgentChoice::Command(cmd) => args.extend(["--agent-cmd".into(), cmd.clone()]),
        }
        match &unit.selection {
            Selection::Label(label) => args.extend(["--label".into(), label.clone()]),
            Selection::Tasks(ids) => {
                for id in ids {
                    args.extend(["--task".into(), id.clone()]);
                }
            }
        }
        args.extend(["--termination-key".into(), key.to_owned()]);
        args.extend(["--mission".into(), self.commander.mission.to_string()]);
        // What is left of the mission's budgets in money and tokens: the child stops before a
        // session that would start past it, as any walk does.
        let (usd, tokens) = self.commander.money_left();
        if let Some(usd) = usd {
            args.extend(["--budget-usd".into(), format!("{usd:.6}")]);
        }
        let (units, sessions) = self.commander.remaining();
        let numbers = [
            ("--max-units", units.map(u64::from)),
            ("--max-iterations", sessions.map(u64::from)),
            ("--budget-tokens", tokens),
            ("--per-unit-dispatches", opts.per_unit_dispatches.map(u64::from)),
            ("--session-timeout", opts.session_timeout_s),
            ("--grace", opts.grace_s),
            ("--parallel", opts.parallel.map(u64::from)),
        ];
        for (flag, value) in numbers {
            if let Some(value) = value {
                args.extend([flag.to_owned(), value.to_string()]);
            }
        }
        if opts.json {
            args.push("--json".into());
        }
        args
    }

    /// Run this program with `args` for `unit`, passing its lines on, until it ends.
    fn run_child(&self, unit: &ProjectUnit, args: &[String]) -> Result<ChildEnd> {
        let mut cmd = Command::new(&self.commander.exe);
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        for var in REPOSITORY_VARS {
            cmd.env_remove(var);
        }
        let parent = self.commander.ctx.pid;
        // The death signal fires when the *thread* that forked exits: children are spawned from
        // the thread that runs the commander's engine, which lives as long as the run.
        // SAFETY: between fork and exec only async-signal-safe calls (prctl, getppid) and no
        // allocation; they touch nothing but the child's own process state.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The commander died before the request took effect: do not start at all.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let child = cmd.spawn().with_context(|| format!("could not start '{}'", self.commander.exe.display()))?;
        let mut child = Running { child, reaped: false };
        let stdout = child.child.stdout.take().expect("stdout is piped");
        let stderr = child.child.stderr.take().expect("stderr is piped");
        let observer = self.commander.observer;
        std::thread::scope(|scope| {
            scope.spawn(|| forward(observer, &unit.name, stdout, false));
            scope.spawn(|| forward(observer, &unit.name, stderr, true));
            let ended = self.wait(&mut child);
            if ended.is_err() {
                // Stop it, or the readers above would wait for its output for ever.
                child.stop();
            }
            ended
        })
    }

    /// Wait for the child; stop it if the commander is interrupted or the mission cancelled.
    fn wait(&self, child: &mut Running) -> Result<ChildEnd> {
        let mut stopped = false;
        let mut looked = Instant::now();
        loop {
            if let Some(status) = child.child.try_wait().context("could not wait for the child walk")? {
                child.reaped = true;
                return Ok(ChildEnd { exit: describe(status), success: status.success(), stopped });
            }
            if !stopped {
                let mut cancelled = false;
                if looked.elapsed() >= Duration::from_secs(1) {
                    looked = Instant::now();
                    cancelled = self.commander.cancelled(self.store)?;
                }
                if cancelled || self.commander.interrupted() {
                    child.signal(libc::SIGTERM);
                    stopped = true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A dispatch that came to nothing: note it, and let the engine dispatch again.
    fn unfinished(&self, unit: &mut ProjectUnit, attempt: u32, note: String) -> Result<Dispatched> {
        unit.unfinished.push(note.clone());
        self.commander.observer.event(&Event::Unfinished { project: unit.name.clone(), attempt, note: note.clone() });
        Ok(Dispatched::Continue { note })
    }

    /// Make sure the clone of a URL project exists and holds the remote's loop state; what
    /// went wrong, if something did.
    fn sync_clone(&self, unit: &ProjectUnit, url: &str) -> Result<Option<String>> {
        let dir = unit.dir.display().to_string();
        if !unit.dir.join(".git").exists() {
            if let Some(parent) = unit.dir.parent() {
                std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
            }
            if let Err(err) = clone(url, &unit.dir, &self.commander.ctx.host) {
                return Ok(Some(format!("could not clone {url}: {err:#}")));
            }
            let end =
                self.run_child(unit, &["-C".into(), dir.clone(), "init".into(), "--remote".into(), "origin".into()])?;
            if !end.success {
                return Ok(Some(format!("'git loop init' in the clone of {url} failed ({})", end.exit)));
            }
        }
        let end = self.run_child(unit, &["-C".into(), dir, "sync".into()])?;
        if !end.success {
            return Ok(Some(format!("'git loop sync' with {url} failed ({})", end.exit)));
        }
        Ok(None)
    }

    /// Mark the project running under `key` in the mission.
    fn mark_running(&self, unit: &ProjectUnit) -> Result<()> {
        let change = |m: &mut record::Mission| -> Result<(), Refusal> {
            if let Some(p) = m.project_mut(&unit.name) {
                p.status = Status::Running;
                p.dispatches += 1;
            }
            Ok(())
        };
        record::update(
            self.store,
            &self.commander.ctx,
            &self.commander.mission,
            &format!("{} running", unit.name),
            &change,
        )?;
        Ok(())
    }
}

impl engine::Dispatcher<ProjectUnit> for ChildDispatcher<'_> {
    fn dispatch(&mut self, unit: &mut ProjectUnit, attempt: u32, _carry: Option<&str>) -> Result<Dispatched> {
        if self.commander.interrupted() || self.commander.cancelled(self.store)? {
            return Ok(Dispatched::Interrupted);
        }
        let key = self.commander.next_key();
        unit.key = Some(key.clone());
        unit.terminated = None;
        unit.check = None;
        self.mark_running(unit)?;
        self.commander.journal(
            self.store,
            Recorded::ProjectDispatched(events::ProjectDispatched {
                mission: self.commander.mission.to_string(),
                summary: format!("{} (dispatch {attempt}, key {key})", unit.name),
                project: unit.name.clone(),
                key: key.clone(),
                attempt,
                dir: unit.dir.display().to_string(),
            }),
        )?;
        self.commander.observer.event(&Event::Dispatched {
            project: unit.name.clone(),
            wave: unit.wave,
            attempt,
            key: key.clone(),
            dir: unit.dir.clone(),
        });
        if let Some(url) = unit.url.clone() {
            if let Some(note) = self.sync_clone(unit, &url)? {
                return self.unfinished(unit, attempt, note);
            }
        }
        let end = self.run_child(unit, &self.walk_args(unit, &key))?;
        let Some(terminated) = read_termination(&self.commander.ctx, &unit.dir, &key) else {
            if end.stopped || self.commander.interrupted() {
                return Ok(Dispatched::Interrupted);
            }
            return self.unfinished(
                unit,
                attempt,
                format!("its walk ended ({}) without journaling how it ended", end.exit),
            );
        };
        self.commander.spend(&terminated);
        unit.terminated = Some(terminated.clone());
        if end.stopped || terminated.stop == "interrupted" {
            return Ok(Dispatched::Interrupted);
        }
        if let Some(url) = unit.url.clone() {
            if let Some(note) = self.sync_clone(unit, &url)? {
                return self.unfinished(unit, attempt, note);
            }
        }
        let project = Store::open(&self.commander.ctx, &unit.dir)?;
        let check = verify::check(&project, &self.commander.ctx, &unit.selection)?;
        unit.check = Some(check.clone());
        let verdict = |verdict, message: String| Ok(Dispatched::Verdict { verdict, message });
        if let Some(error) = &terminated.error {
            return verdict(Verdict::Failed, format!("its walk failed: {error}"));
        }
        if terminated.stop == "paused" {
            let detail = if check.is_done() { String::new() } else { format!(": {}", check.reason()) };
            return verdict(Verdict::Failed, format!("its walk paused{detail}"));
        }
        if check.is_done() {
            return verdict(Verdict::Done, String::new());
        }
        if terminated.stop == "budget" || terminated.stop == "units" || self.commander.budget_spent().is_some() {
            let why = self.commander.budget_spent().unwrap_or_else(|| match terminated.stop.as_str() {
                "units" => "its walk reached its --max-units".into(),
                _ => "its walk's budget ran out".into(),
            });
            return Ok(Dispatched::Lost { reason: format!("the budget ran out ({why})") });
        }
        verdict(Verdict::Blocked, check.reason())
    }
}

/// A started child, stopped if it is dropped before it was reaped (an error, a panic).
struct Running {
    child: Child,
    reaped: bool,
}

impl Running {
    fn signal(&self, signal: libc::c_int) {
        // SAFETY: signalling our own child, whose pid cannot be reused before we reap it.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    fn stop(&mut self) {
        if !self.reaped {
            self.signal(libc::SIGTERM);
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Pass a child's lines to the observer as they come.
fn forward(observer: &dyn Observer, project: &str, from: impl Read, stderr: bool) {
    let mut reader = BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_owned();
                observer.event(&Event::Output { project: project.to_owned(), line, stderr });
            }
        }
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "ended".to_owned(),
    }
}

/// The `walk_terminated` event a child journaled under `key` in the project at `dir`, if it
/// did (anything unreadable counts as not journaled).
pub fn read_termination(ctx: &Context, dir: &Path, key: &str) -> Option<Terminated> {
    let store = Store::open(ctx, dir).ok()?;
    let writer: WriterId = key.parse().ok()?;
    let last = |writer: &WriterId, kind: &str| -> Option<journal::Entry> {
        let tip = store.ref_target(&refs::journal(writer)).ok()??;
        let mut problems = Vec::new();
        journal::read_chain(&store, tip, &mut problems).into_iter().rev().find(|e| e.event.kind == kind)
    };
    let Recorded::WalkTerminated(t) = Recorded::of(&last(&writer, "walk_terminated")?.event) else {
        return None;
    };
    let ended =
        t.walker.as_ref().and_then(|w| w.parse::<WriterId>().ok()).and_then(|w| last(&w, "walk_ended")).and_then(|e| {
            match Recorded::of(&e.event) {
                Recorded::WalkEnded(ended) => Some(ended),
                _ => None,
            }
        });
    let sessions = ended.as_ref().map(|e| e.dispatches);
    let spent_micro_usd = ended.as_ref().and_then(|e| e.spent_usd).map(crate::store::usage::micro_usd);
    let spent_tokens = ended.as_ref().and_then(|e| e.spent_tokens);
    Some(Terminated {
        stop: t.stop,
        walker: t.walker,
        closed: t.closed,
        succeeded: t.succeeded,
        failed: t.failed,
        error: t.error,
        sessions,
        spent_micro_usd,
        spent_tokens,
    })
}

/// Clone `url` into `dir` (gix), with the fallback identity `git::open` uses.
fn clone(url: &str, dir: &Path, host: &str) -> Result<()> {
    use gix::sec::trust::DefaultForLevel;
    let overrides = [
        "gitoxide.committer.nameFallback=git-loop".to_owned(),
        format!("gitoxide.committer.emailFallback=loop@{host}"),
        "gitoxide.author.nameFallback=git-loop".to_owned(),
        format!("gitoxide.author.emailFallback=loop@{host}"),
    ];
    let open = gix::open::Options::default_for_level(gix::sec::Trust::Full).config_overrides(overrides);
    let mut fetch = gix::clone::PrepareFetch::new(url, dir, gix::create::Kind::WithWorktree, Default::default(), open)
        .with_context(|| format!("could not prepare a clone of '{url}'"))?;
    let (mut checkout, _) = fetch
        .fetch_then_checkout(gix::progress::Discard, &gix::interrupt::IS_INTERRUPTED)
        .with_context(|| format!("could not fetch '{url}'"))?;
    checkout
        .main_worktree(gix::progress::Discard, &gix::interrupt::IS_INTERRUPTED)
        .with_context(|| format!("could not check out '{url}'"))?;
    Ok(())
}
