//! The walker: what the workers of one walk share — its options, its observer, the board
//! and journal it keeps current between steps, what it has to land — and the steps they take
//! through it (recording, warming, landing, notifying, waiting patiently on the remote).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result};
use chrono::Utc;
use gix::ObjectId;

use crate::agent::presets::Agent;
use crate::backlog::Board;
use crate::context::Context;
use crate::engine;
use crate::ids::{TaskId, WriterId};
use crate::refs;
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, NewEvent};
use crate::store::layout::Layout;
use crate::store::watch::Watch;
use crate::store::{index, Store};

use super::{resolve, steering, summarize, Event, Observer, Options, NOTIFY_TIMEOUT, NOTIFY_VERSION, WAIT_STEP};

/// How long a walk that ends waits for another clone's lander to let it land its done tasks.
const LAND_WAIT: Duration = Duration::from_secs(10 * 60);

/// Everything the workers of one walk share.
pub struct Walker<'a> {
    /// This walk's key: holder of its claims, writer of its journal chain.
    pub key: String,
    pub opts: Options,
    pub ctx: Context,
    pub cwd: PathBuf,
    /// This program, for the session guard and the demo agent.
    pub exe: PathBuf,
    pub base: ObjectId,
    pub observer: &'a dyn Observer,
    pub cancel: &'a AtomicBool,
    started: chrono::DateTime<Utc>,
    /// Agents found unreachable, with why and until when they are left alone.
    unreachable: std::sync::Mutex<std::collections::HashMap<String, (&'static str, std::time::Instant)>>,
    /// The board and the journal's chains, kept current between steps.
    seen: std::sync::Mutex<Seen>,
    /// Held while a worker publishes a closing unit, or the heartbeat syncs: the walk's workers
    /// share its journal chain, and two of them pushing it at once would fail each other's
    /// pushes.
    pub(super) publishing: std::sync::Mutex<()>,
    /// Done tasks of this walk not landed yet (`--land`), queued by the workers for the lander
    /// (the only one that lands while they work; the walk's end lands the rest after it).
    pub(super) to_land: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Tells the walk's lander (`--land`) that `to_land` has tasks, or that the walk ends.
    lander_wake: std::sync::Condvar,
    /// Set (under `to_land`'s lock) when the workers are done: the lander lands what is left
    /// and ends.
    lander_stop: AtomicBool,
    /// Whether the walk said that it lands without checks (it says so once).
    said_no_checks: AtomicBool,
    /// Tasks this walk closed done whose landing then failed (they need a person now): their
    /// close counted them done, the walk's end counts them not done.
    landing_failed: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Why tasks were not landed yet, as said: each said once, not at every try again.
    said_not_landed: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The try worktrees this walk ran the setup command in (`opts.setup`).
    pub(super) set_up: std::sync::Mutex<std::collections::HashSet<PathBuf>>,
    /// The walk's run, which counts what its sessions spend (none for a recovery or a one-off
    /// role session).
    pub run: Option<&'a engine::Run>,
    /// The settings it started with, looked at again after each session (`steering`).
    pub steering: steering::Steering,
}

/// How one landing attempt of the walk went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Went {
    /// The queue ran: what could land landed, what could not was said.
    Landed,
    /// Another lander holds the target: its tasks wait for it.
    Busy,
    /// Refused (a dirty checkout of the target, an error): its tasks wait for the next close.
    Kept,
}

/// What a walk keeps current between steps instead of listing every ref again: its watch
/// names the task, claim and journal refs that changed (see `store::watch`).
struct Seen {
    watch: Watch,
    board: index::Live,
    chains: journal::LiveChains,
}

impl Seen {
    fn new(store: &Store) -> Seen {
        Seen {
            watch: Watch::new(store.common_dir(), &[refs::TASKS, "refs/loop/claims/node/", refs::JOURNAL]),
            board: index::Live::default(),
            chains: journal::LiveChains::default(),
        }
    }
}

/// What makes a walker, besides the store and the context: the one constructor's arguments.
pub(super) struct Setup<'a> {
    pub(super) key: String,
    pub(super) opts: Options,
    pub(super) cwd: PathBuf,
    pub(super) exe: PathBuf,
    pub(super) base: ObjectId,
    pub(super) observer: &'a dyn Observer,
    pub(super) cancel: &'a AtomicBool,
    pub(super) run: Option<&'a engine::Run>,
}

impl<'a> Walker<'a> {
    /// A walker as a walk, a recovery or a one-off role session starts it: nothing seen,
    /// nothing landed, no agent found unreachable yet.
    pub(super) fn new(store: &Store, ctx: &Context, s: Setup<'a>) -> Walker<'a> {
        Walker {
            key: s.key,
            opts: s.opts,
            ctx: ctx.clone(),
            cwd: s.cwd,
            exe: s.exe,
            base: s.base,
            observer: s.observer,
            cancel: s.cancel,
            started: ctx.now(),
            unreachable: Default::default(),
            seen: std::sync::Mutex::new(Seen::new(store)),
            publishing: Default::default(),
            to_land: Default::default(),
            lander_wake: Default::default(),
            lander_stop: AtomicBool::new(false),
            said_no_checks: AtomicBool::new(false),
            landing_failed: Default::default(),
            said_not_landed: Default::default(),
            set_up: Default::default(),
            run: s.run,
            steering: steering::Steering::none(),
        }
    }
}

impl Walker<'_> {
    pub fn writer(&self) -> WriterId {
        self.key.parse().expect("walker keys are valid writer ids")
    }

    /// Warm `try_`'s worktree by the walk's plan (`opts.warm`) from the task's latest try
    /// below `below` that still has its worktree, else the main checkout. A failure is said
    /// and the try starts cold: warming is never why a try does not run.
    /// `fresh`: its worktree was checked out afresh (not from the pool), so its tracked files
    /// may take the source's modification times.
    pub fn warm(
        &self,
        store: &Store,
        try_: &crate::tries::Try,
        below: u32,
        fresh: bool,
    ) -> Option<crate::tries::warm::Warmed> {
        match crate::tries::warm::warm(store, try_, &self.opts.warm, below, fresh) {
            Ok(warmed) => warmed,
            Err(err) => {
                self.observer.event(&Event::Warning {
                    message: format!("could not warm the worktree of try {} of {}: {err:#}", try_.number, try_.task),
                });
                None
            }
        }
    }

    /// Warm a reviewer's checkout of `try_`'s work by the walk's plan, from the try's worktree
    /// (else the main checkout), as `warm` does; a failure is said and it starts cold.
    pub fn warm_checkout(&self, store: &Store, checkout: &std::path::Path, try_: &crate::tries::Try) {
        if let Err(err) = crate::tries::warm::warm_checkout(store, checkout, try_, &self.opts.warm) {
            self.observer.event(&Event::Warning {
                message: format!(
                    "could not warm the reviewer's checkout of try {} of {}: {err:#}",
                    try_.number, try_.task
                ),
            });
        }
    }

    /// Journal a walk event in this walker's chain.
    pub fn record(&self, store: &Store, task: Option<&str>, event: Recorded) -> Result<()> {
        let (kind, data) = event.into_parts();
        journal::append(
            store,
            &self.ctx,
            &self.writer(),
            NewEvent { kind, task: task.map(Into::into), session: None, data },
        )?;
        Ok(())
    }

    /// Where this walk's sessions and checks run confined (none: unconfined).
    pub fn sandbox(&self) -> Option<&crate::sandbox::Sandbox> {
        self.opts.confinement.sandbox().map(|s| s.as_ref())
    }

    /// Who runs this walk's commands (checks, the review command, setup) and for how long:
    /// under the session guard, confined as its sessions are.
    pub fn runner<'s>(&'s self, cancelled: &'s dyn Fn() -> bool) -> crate::tries::checks::Runner<'s> {
        crate::tries::checks::Runner {
            exe: &self.exe,
            parent: self.ctx.pid,
            grace: self.opts.grace,
            timeout: self.opts.checks_timeout,
            cancelled,
            sandbox: self.sandbox(),
        }
    }

    /// Journal and say that settings changed (see `steering`).
    pub fn settings_changed(
        &self,
        store: &Store,
        changes: Vec<events::SettingChange>,
        during: Vec<String>,
        obeyed: bool,
    ) -> Result<()> {
        self.observer.event(&Event::SettingsChanged { changes: changes.clone(), during: during.clone(), obeyed });
        self.record(store, None, Recorded::SettingsChanged(events::SettingsChanged { changes, during, obeyed }))
    }

    /// After session `session` (`confined` or not): the settings changed while it ran,
    /// journaled and said, and kept as possibly planted when it ran unconfined. A failure to
    /// look is a warning: the walk goes on with the settings it started with either way.
    pub fn settings_after(&self, store: &Store, session: &str, confined: bool) {
        let planted_by = (!confined).then_some(session);
        match self.steering.look_again(&self.ctx, &self.cwd, planted_by) {
            Ok(changes) if changes.is_empty() => {}
            Ok(changes) => {
                if let Err(err) = self.settings_changed(store, changes, vec![session.to_owned()], false) {
                    self.observer.event(&Event::Warning { message: format!("{err:#}") });
                }
            }
            Err(err) => self.observer.event(&Event::Warning {
                message: format!("could not read the settings again after session {session}: {err:#}"),
            }),
        }
    }

    /// One worker at a time publishes (see `publishing`).
    pub fn publishing(&self) -> std::sync::MutexGuard<'_, ()> {
        self.publishing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `call`, which talks to the shared remote, until the remote answers: while it fails
    /// because the remote did not answer (`remote::NoAnswer`: every attempt met a fault that
    /// may heal), it is made again after a growing, jittered wait (at most [`WAIT_STEP`]),
    /// until the walk is cancelled. What the remote does not take now is not lost: the
    /// unit's work is committed here. Each failure is a warning, which the walk's observer
    /// says once per outage.
    pub fn patiently<T>(&self, store: &Store, mut call: impl FnMut() -> Result<T>) -> Result<T> {
        let mut attempt = 0;
        loop {
            match call() {
                Err(err) if crate::store::remote::no_answer(&err).is_some() && !self.cancelled(store) => {
                    self.observer.event(&Event::Warning { message: format!("{err:#}") });
                    attempt += 1;
                    let wait = crate::store::remote::backoff(attempt).min(WAIT_STEP);
                    let until = std::time::Instant::now() + wait;
                    while std::time::Instant::now() < until && !self.cancelled(store) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
                other => return other,
            }
        }
    }

    /// Hand `done` (a task this walk just closed done) to the walk's lander, which lands it
    /// beside the workers (`lander`): the worker goes on to its next task at once.
    pub fn queue_landing(&self, done: TaskId) {
        self.to_land.lock().unwrap_or_else(|p| p.into_inner()).insert(done.to_string());
        self.lander_wake.notify_all();
    }

    /// The walk's lander (`--land`), a thread of its own beside the workers: it lands what
    /// they closed done as it comes (what several finish meanwhile in one batch), so landing
    /// never takes a worker's slot. It ends once `stop_lander` is called and nothing it can
    /// land is left (what waits on another clone's lander or a dirty checkout is left to
    /// `land_the_rest`).
    /// Landing through the forge, it also reads back every open request each `forge_poll`.
    pub fn lander(&self, store: &Store) {
        let polls = self.opts.land_via == crate::landing::Via::Request;
        let mut polled = std::time::Instant::now();
        loop {
            {
                let mut queued = self.to_land.lock().unwrap_or_else(|p| p.into_inner());
                while queued.is_empty() && !self.lander_stop.load(Ordering::SeqCst) {
                    if polls && polled.elapsed() >= self.opts.forge_poll {
                        break;
                    }
                    queued = self
                        .lander_wake
                        .wait_timeout(queued, Duration::from_secs(1))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                if queued.is_empty() && self.lander_stop.load(Ordering::SeqCst) {
                    return;
                }
                if queued.is_empty() {
                    drop(queued);
                    polled = std::time::Instant::now();
                    self.read_back(store);
                    continue;
                }
            }
            let before = self.to_land.lock().unwrap_or_else(|p| p.into_inner()).clone();
            self.land(store);
            let after = self.to_land.lock().unwrap_or_else(|p| p.into_inner()).clone();
            // What could not land now (another lander, a dirty checkout) waits for the next
            // task closed, or for the walk's end; not a busy loop.
            if after == before || (self.lander_stop.load(Ordering::SeqCst) && !after.is_empty()) {
                let queued = self.to_land.lock().unwrap_or_else(|p| p.into_inner());
                if self.lander_stop.load(Ordering::SeqCst) {
                    return;
                }
                let _ = self
                    .lander_wake
                    .wait_timeout_while(queued, Duration::from_secs(5), |q| {
                        *q == after && !self.lander_stop.load(Ordering::SeqCst)
                    })
                    .unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    /// The workers are done: the lander lands what is queued and ends.
    pub fn stop_lander(&self) {
        let _queued = self.to_land.lock().unwrap_or_else(|p| p.into_inner());
        self.lander_stop.store(true, Ordering::SeqCst);
        self.lander_wake.notify_all();
    }

    /// Land every done task of this walk not landed yet (`to_land`) through the landing queue,
    /// and those queued meanwhile after them, in batches: the lander's work, and the walk's
    /// last as it ends. What stays unlanded (another clone's lander at work, a dirty checkout
    /// of the target) is tried again when another task is queued and when the walk ends.
    /// Never fails the walk: what went wrong is said. True when another lander held the target.
    pub fn land(&self, store: &Store) -> bool {
        let mut busy = false;
        loop {
            let ids: Vec<String> =
                std::mem::take(&mut *self.to_land.lock().unwrap_or_else(|p| p.into_inner())).into_iter().collect();
            let went = if ids.is_empty() { Went::Landed } else { self.land_now(store, ids, true) };
            busy |= went == Went::Busy;
            // Tasks the workers queued while it landed go next. What could not land (a dirty
            // checkout) waits for another task queued: trying it again at once would only fail
            // again.
            if went != Went::Landed || self.to_land.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
                return busy;
            }
        }
    }

    /// Read back every request the journal knows open (landing through the forge): a merge
    /// lands its task, failing CI or a review sends it back to be worked again by this walk.
    fn read_back(&self, store: &Store) {
        match crate::landing::request::open_requests(store) {
            Ok(open) if !open.is_empty() => {
                self.land_now(store, open.iter().map(ToString::to_string).collect(), false);
            }
            Ok(_) => {}
            Err(err) => self
                .observer
                .event(&Event::Warning { message: format!("the forge's requests were not read back: {err:#}") }),
        }
    }

    /// Land `ids` now; what cannot land now is queued again when `requeue` says.
    fn land_now(&self, store: &Store, ids: Vec<String>, requeue: bool) -> Went {
        let only: Vec<TaskId> = ids.iter().filter_map(|id| id.parse().ok()).collect();
        let checks = self.opts.checks.clone();
        // Through the forge its CI gates the merge: no local checks are missed there.
        let merges_here = self.opts.land_via == crate::landing::Via::Merge;
        if merges_here && checks.is_none() && !self.said_no_checks.swap(true, Ordering::SeqCst) {
            self.observer.event(&Event::Warning {
                message: "no checks are configured (--checks, loop.checks): done work lands on its merge alone".into(),
            });
        }
        let cancelled = || self.cancelled(store);
        let opts = crate::landing::Options {
            via: self.opts.land_via,
            into: None,
            only,
            batch: self.opts.land_batch,
            checks,
            checks_timeout: self.opts.checks_timeout,
            grace: self.opts.grace,
            exe: self.exe.clone(),
            holder: self.key.clone(),
            cancelled: &cancelled,
            resolver: &crate::landing::NoResolver,
            summarizer: &crate::landing::NoSummarizer,
            sandbox: self.sandbox(),
        };
        let agent_summarizer = match summarize::role_of(store, self.opts.summarizer.as_deref()) {
            Ok(role) => role.map(|role| summarize::AgentSummarizer { walker: self, role }),
            Err(err) => {
                self.observer.event(&Event::Warning { message: format!("no summarizer: {err:#}") });
                None
            }
        };
        let agent_resolver = match resolve::role_of(store, self.opts.resolver.as_deref(), Some(&self.opts.agent.name)) {
            Ok(role) => role.map(|role| resolve::AgentResolver { walker: self, role }),
            Err(err) => {
                self.observer.event(&Event::Warning { message: format!("no conflict resolver: {err:#}") });
                None
            }
        };
        let opts = crate::landing::Options {
            resolver: match &agent_resolver {
                Some(r) => r,
                None => &crate::landing::NoResolver,
            },
            summarizer: match &agent_summarizer {
                Some(s) => s,
                None => &crate::landing::NoSummarizer,
            },
            ..opts
        };
        let keep = |why: String| {
            if requeue {
                self.to_land.lock().unwrap_or_else(|p| p.into_inner()).extend(ids.iter().cloned());
            }
            self.not_landed(ids.clone(), why);
        };
        match crate::landing::land(store, &self.ctx, &opts) {
            Ok(crate::landing::Outcome::Ran(report)) => {
                let into = report.into.clone();
                for landed in &report.landed {
                    self.observer.event(&Event::Landed {
                        task: landed.task.clone(),
                        into: landed.on.clone().unwrap_or_else(|| into.clone()),
                        commit: landed.commit.clone(),
                        batch: landed.batch,
                    });
                }
                for seen in report.requests.iter().filter(|r| r.known.state == "open") {
                    self.not_landed(vec![seen.known.task.clone()], format!("its {}", seen.known.line()));
                }
                for failed in &report.failed {
                    // Sent back by the forge (worked again, maybe by this walk) or parked by a
                    // person's close: said, not a landing that failed.
                    if matches!(failed.cause.as_str(), "sent_back" | "closed") {
                        self.not_landed(vec![failed.task.clone()], failed.reason.clone());
                        continue;
                    }
                    self.landing_failed.lock().unwrap_or_else(|p| p.into_inner()).insert(failed.task.clone());
                    self.observer.event(&Event::LandingFailed {
                        task: failed.task.clone(),
                        into: failed.on.clone().unwrap_or_else(|| into.clone()),
                        cause: failed.cause.clone(),
                        reason: failed.reason.clone(),
                    });
                }
                for waiting in &report.waiting {
                    let why = format!("it waits for {} to land first", waiting.waiting_for.join(", "));
                    self.not_landed(vec![waiting.task.clone()], why);
                }
                for note in &report.notes {
                    self.observer.event(&Event::Warning { message: note.clone() });
                }
                Went::Landed
            }
            Ok(crate::landing::Outcome::Busy(held)) => {
                keep(format!(
                    "another lander is at work on the target: {} (pid {} on {})",
                    held.record.holder, held.record.pid, held.record.host
                ));
                Went::Busy
            }
            Err(err) => {
                let why = match crate::error::find_refusal(&err) {
                    Some(refusal) => match &refusal.hint {
                        Some(hint) => format!("{} ({hint})", refusal.message),
                        None => refusal.message.clone(),
                    },
                    None => format!("{err:#}"),
                };
                keep(why);
                Went::Kept
            }
        }
    }

    /// Say that `tasks` are not landed yet and why, unless that was said already.
    fn not_landed(&self, tasks: Vec<String>, why: String) {
        let said = format!("{}\n{why}", tasks.join(","));
        if self.said_not_landed.lock().unwrap_or_else(|p| p.into_inner()).insert(said) {
            self.observer.event(&Event::NotLanded { tasks, why });
        }
    }

    /// The tasks whose landing failed after their close counted them done (every landing is
    /// the lander's, beside the workers, or the one as the walk ends).
    pub(super) fn failed_after_counting(&self) -> u32 {
        self.landing_failed.lock().unwrap_or_else(|p| p.into_inner()).len() as u32
    }

    /// Land what this walk finished and has not landed yet, as the walk ends: waiting while
    /// another lander holds the target (up to `LAND_WAIT`), unless the walk is interrupted.
    pub(super) fn land_the_rest(&self, store: &Store) {
        let started = std::time::Instant::now();
        while self.land(store) && started.elapsed() < LAND_WAIT && !self.cancelled(store) {
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Every task and claim, as `Board::load` reads them, re-reading only what changed.
    pub fn board(&self, store: &Store) -> Result<Board> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let Seen { watch, board, .. } = &mut *seen;
        Board::load_live(store, &self.ctx, board, watch)
    }

    /// One task's journal events, as `journal::timeline` reads them.
    pub fn task_history(&self, store: &Store, task: &str) -> Result<Vec<journal::Entry>> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let Seen { watch, chains, .. } = &mut *seen;
        Ok(journal::task_timeline(store, task, chains, watch)?.entries)
    }

    /// The agent named `name`: the walk's own, or a preset or configured agent.
    pub fn agent(&self, store: &Store, name: &str) -> Result<Agent> {
        if name == self.opts.agent.name {
            return Ok(self.opts.agent.clone());
        }
        crate::agent::presets::resolve(store, name, None, &self.exe)
    }

    /// Whether agent `name` can be started here (its program is on PATH).
    pub fn installed(&self, store: &Store, name: &str) -> bool {
        self.agent(store, name).is_ok_and(|agent| {
            crate::agent::process::find_program(&agent.program, self.ctx.path_var.as_deref()).is_some()
        })
    }

    /// Why agent `name` is being left alone, if it is.
    pub fn unreachable_reason(&self, name: &str) -> Option<&'static str> {
        let mut map = self.unreachable.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(name) {
            Some((reason, until)) if std::time::Instant::now() < *until => Some(reason),
            Some(_) => {
                map.remove(name);
                None
            }
            None => None,
        }
    }

    pub fn reachable(&self, name: &str) -> bool {
        self.unreachable_reason(name).is_none()
    }

    /// Leave agent `name` alone for a while: its CLI said it cannot be reached.
    pub fn mark_unreachable(&self, store: &Store, name: &str, reason: &'static str, task: &str) -> Result<()> {
        let until = std::time::Instant::now() + self.opts.unreachable_for;
        self.unreachable.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_owned(), (reason, until));
        self.record(
            store,
            Some(task),
            Recorded::AgentUnreachable(events::AgentUnreachable {
                agent: name.to_owned(),
                reason: reason.to_owned(),
                retry_after_s: self.opts.unreachable_for.as_secs(),
            }),
        )
    }

    /// The user's own "unreachable" phrases for a named agent (`loop.agent.<name>.unreachable`).
    pub fn agent_phrases(&self, store: &Store, agent: &Agent) -> Vec<String> {
        store.settings().agent_unreachable(&agent.name)
    }

    /// Tell the notify command (`opts.notify`) of `event`: the document of docs/hooks.md,
    /// "Notifications", with `fields` beside the ones every event has, on its stdin. It may run
    /// for [`NOTIFY_TIMEOUT`]; its failure is a warning, never the walk's.
    pub fn notify(&self, store: &Store, event: &str, fields: serde_json::Value) {
        let mut doc = serde_json::json!({
            "version": NOTIFY_VERSION,
            "event": event,
            "at": self.ctx.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "repository": self.cwd,
            "walker": self.key,
        });
        if let (Some(doc), serde_json::Value::Object(fields)) = (doc.as_object_mut(), fields) {
            doc.extend(fields);
        }
        if let Some(command) = self.opts.notify.clone() {
            if let Err(err) = self.try_notify(store, event, &command, &doc) {
                self.observer.event(&Event::Warning { message: format!("the notify command failed: {err:#}") });
            }
        }
        if let Some(url) = &self.opts.notify_webhook {
            if let Err(err) = post_webhook(url, &doc) {
                self.observer.event(&Event::Warning { message: format!("the notify webhook failed: {err:#}") });
            }
        }
    }

    fn try_notify(&self, store: &Store, event: &str, command: &str, doc: &serde_json::Value) -> Result<()> {
        let dir = store.loop_dir()?.join("notify");
        std::fs::create_dir_all(&dir).with_context(|| format!("could not create '{}'", dir.display()))?;
        let input = dir.join(format!("{event}-{}.json", crate::ids::random_base32(8)));
        std::fs::write(&input, format!("{doc}\n")).with_context(|| format!("could not write '{}'", input.display()))?;
        let log = dir.join("log");
        let runner = crate::tries::checks::Runner {
            exe: &self.exe,
            parent: self.ctx.pid,
            grace: Duration::from_secs(1),
            timeout: NOTIFY_TIMEOUT,
            cancelled: &|| false,
            // The person's own command, in the main checkout: it runs no agent's code.
            sandbox: None,
        };
        let env = [("GIT_LOOP_EVENT".to_owned(), event.to_owned())];
        let ran = crate::tries::checks::run_fed(
            store,
            &runner,
            "notify",
            command,
            &self.cwd,
            &env,
            &log,
            Some(input.clone()),
        );
        let _ = std::fs::remove_file(&input);
        let ran = ran?;
        if !ran.passed {
            let how =
                ran.exit.map_or_else(|| format!("stopped after {} s", NOTIFY_TIMEOUT.as_secs()), |e| e.to_string());
            anyhow::bail!("`{command}` on {event} ({how}); its output: {}", log.display());
        }
        Ok(())
    }

    /// Whether the walk should stop: Ctrl-C / SIGTERM, or `git loop stop --all` since it began.
    pub fn cancelled(&self, store: &Store) -> bool {
        if self.cancel.load(Ordering::SeqCst) || gix::interrupt::is_triggered() {
            return true;
        }
        let marker = Layout::of(store.common_dir()).cancel();
        let fresh = std::fs::metadata(&marker)
            .and_then(|m| m.modified())
            .ok()
            .map(chrono::DateTime::<Utc>::from)
            .is_some_and(|at| at >= self.started - chrono::Duration::seconds(1));
        if fresh {
            self.cancel.store(true, Ordering::SeqCst);
        }
        fresh
    }
}

/// Post a notification document to `url` (`loop.notify.webhook`), at most [`NOTIFY_TIMEOUT`];
/// any answer but a 2xx is a failure, named with its status.
fn post_webhook(url: &str, doc: &serde_json::Value) -> Result<()> {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(NOTIFY_TIMEOUT))
        .user_agent(format!("git-loop/{}", env!("CARGO_PKG_VERSION")))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let response = agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(doc.to_string().as_bytes())
        .map_err(|err| anyhow::anyhow!("{url}: {err}"))?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        anyhow::bail!("{url} answered {status}");
    }
    Ok(())
}
