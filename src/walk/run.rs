//! `walk()`, start to end (the steps of walk/mod.rs's note): the walker singleton, recovery,
//! the workers and the heartbeat that syncs and keeps the claims alive; and the other ways a
//! walker is made — `recover_crashed` for `doctor --repair`, `one_off` for a verb's role
//! sessions.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Result;
use gix::ObjectId;

use crate::context::Context;
use crate::engine::{self, Stop};
use crate::error::{Class, Refusal};
use crate::ids::ClaimKey;
use crate::store::claim::{self, AcquireOptions, Singleton};
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, NewEvent};
use crate::store::layout::Layout;
use crate::store::Store;

use super::walker::{Setup, Walker};
use super::{queue, recover, review, steering, unit, Event, Observer, Options, Sandboxing, ThisClonesWalk, WalkEnd};

/// The walk's observer as the walk talks to it: an outage of the shared remote is said once
/// (`RemoteSilent` for the first warning that says it did not answer, `RemoteBack` when it
/// answers again, see `heard`), not once for every call of every thread that meets it.
struct Quiet<'a> {
    inner: &'a dyn Observer,
    /// The outage said, if one is: which remote, since when.
    said: std::sync::Mutex<Option<(String, std::time::Instant)>>,
}

impl Observer for Quiet<'_> {
    fn event(&self, event: &Event) {
        if let Event::Warning { message } = event {
            if message.contains(crate::store::remote::NO_ANSWER) {
                let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
                if said.is_none() {
                    let remote = message
                        .split_once("remote '")
                        .and_then(|(_, rest)| rest.split_once('\''))
                        .map_or_else(|| "the remote".to_owned(), |(name, _)| name.to_owned());
                    let why = message
                        .split_once(crate::store::remote::NO_ANSWER)
                        .map(|(_, rest)| rest.trim_start_matches([' ', '(']))
                        .and_then(|rest| rest.split_once("); nothing was lost").map(|(why, _)| why.to_owned()))
                        .unwrap_or_default();
                    // Since the first call that met it, not since it was said.
                    let since = match crate::store::remote::health(&remote) {
                        crate::store::remote::Health::Silent { since, .. } => since,
                        crate::store::remote::Health::Answering => std::time::Instant::now(),
                    };
                    *said = Some((remote.clone(), since));
                    drop(said);
                    self.inner.event(&Event::RemoteSilent { remote, why });
                }
                return;
            }
        }
        self.inner.event(event);
    }
}

impl Quiet<'_> {
    /// Say that the remote answers again, if an outage was said and this process's last call
    /// to that remote was answered (`remote::health`).
    fn heard(&self) {
        let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((remote, since)) = said.as_ref() {
            if crate::store::remote::health(remote) == crate::store::remote::Health::Answering {
                let back = Event::RemoteBack { remote: remote.clone(), after: since.elapsed() };
                *said = None;
                drop(said);
                self.inner.event(&back);
            }
        }
    }
}
/// The walker singleton's key: one walker per clone (linked worktrees share it).
fn singleton(store: &Store) -> Result<ClaimKey> {
    Ok(ClaimKey::new("walker", &store.clone_id()?)?)
}

/// Walk the backlog. `cancel` is set by the caller's signal handling.
pub fn walk(
    store: &Store,
    ctx: &Context,
    cwd: PathBuf,
    exe: PathBuf,
    opts: Options,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Result<WalkEnd> {
    one_arena();
    let program_path = ctx.path_var.as_deref();
    if let Some(program) = opts.agent.missing_program(program_path) {
        return Err(Refusal::new(Class::AgentMissing, format!("the agent's program '{program}' was not found"))
            .hint(if opts.agent.name == "custom" {
                "install it or put it on PATH, or correct --agent-cmd; see docs/agents.md".to_owned()
            } else {
                format!("install it or put it on PATH (agent '{}'); see docs/agents.md", opts.agent.name)
            })
            .into());
    }
    // A reviewer of the worker's provider is refused before anything is claimed.
    let conflicts = review::walk_conflicts(store, &opts, &exe)?;
    if let (Some((_, _, why)), None) = (conflicts.first(), &opts.review_override) {
        return Err(Refusal::new(Class::Usage, format!("{why}: a reviewer must not share the worker's provider"))
            .hint("choose a reviewer of another provider (--reviewer codex), declare a named agent's with git config loop.agent.<name>.provider <provider>, or pass --reviewer-override \"<reason>\"")
            .into());
    }
    let base = crate::tries::base(store, opts.base.as_deref())?;
    let key = crate::ids::walker_key();
    let singleton = singleton(store)?;
    let _held = take_singleton(store, ctx, &singleton, &key)?;
    let (steering, changed) = steering::start(store, opts.accept_settings)?;
    let run = engine::Run::new(opts.limits);
    let quiet = Quiet { inner: observer, said: Default::default() };
    let observer: &dyn Observer = &quiet;
    let mut walker = Walker::new(store, ctx, Setup { key, opts, cwd, exe, base, observer, cancel, run: Some(&run) });
    walker.steering = steering;
    // Start from the remote's board, so the first picks are not tasks done elsewhere. The
    // remote must answer this once: a walk rides out an outage with the work it holds, but one
    // that never reached its remote holds nothing, and would only wait.
    if let Some(remote) = store.arbiter() {
        match crate::store::sync::sync(store, &walker.ctx, &remote) {
            Ok(report) if report.incoming() > 0 => observer.event(&Event::Synced { changes: report.incoming() }),
            Ok(_) => {}
            Err(err) if crate::store::remote::no_answer(&err).is_some() || stops_the_walk(&err) => return Err(err),
            Err(err) => observer.event(&Event::Warning { message: format!("could not sync with {remote}: {err:#}") }),
        }
    }
    read_elsewhere(store, &walker);
    walker.record(
        store,
        None,
        Recorded::WalkStarted(events::WalkStarted {
            agent: walker.opts.agent.name.clone(),
            parallel: walker.opts.parallel,
            labels: walker.opts.labels.clone(),
            walker: Some(walker.key.clone()),
            max_units: walker.opts.limits.max_units,
            max_iterations: walker.opts.limits.max_iterations,
            per_unit_dispatches: Some(walker.opts.limits.per_unit_dispatches),
            budget_usd: walker.opts.limits.budget_usd,
            budget_tokens: walker.opts.limits.budget_tokens,
            mission: walker.opts.mission.clone(),
            sandbox: Some(walker.opts.confinement.word().to_owned()),
        }),
    )?;
    if let Some(reason) = &walker.opts.review_override {
        for (worker, reviewer, rule) in &conflicts {
            walker.record(
                store,
                None,
                Recorded::ReviewOverride(events::ReviewOverride {
                    reviewer: reviewer.clone(),
                    worker: worker.clone(),
                    rule: rule.clone(),
                    reason: reason.clone(),
                }),
            )?;
        }
    }
    observer.event(&Event::Started {
        walker: walker.key.clone(),
        agent: walker.opts.agent.name.clone(),
        parallel: walker.opts.parallel,
        limits: walker.opts.limits,
        labels: walker.opts.labels.clone(),
        checks: walker.opts.checks.clone(),
        sandbox: Sandboxing::of(&walker.opts.confinement),
    });
    if !changed.is_empty() {
        walker.settings_changed(store, changed, Vec::new(), true)?;
    }
    walker.patiently(store, || recover::recover(store, &walker))?;
    let heartbeat_stop = engine::StopFlag::default();
    let errors: std::sync::Mutex<Vec<anyhow::Error>> = Default::default();
    // A handle of its own for every thread of the walk.
    let beat = Store::open(&walker.ctx, &walker.cwd)?;
    let handles =
        (0..walker.opts.parallel.max(1)).map(|_| Store::open(&walker.ctx, &walker.cwd)).collect::<Result<Vec<_>>>()?;
    let lands = if walker.opts.land { Some(Store::open(&walker.ctx, &walker.cwd)?) } else { None };
    let (walker_ref, run_ref, errors_ref) = (&walker, &run, &errors);
    std::thread::scope(|scope| {
        let beating = Beating { walker: walker_ref, quiet: &quiet, run: run_ref, errors: errors_ref };
        scope.spawn(|| heartbeat(beating, beat, &singleton, &heartbeat_stop));
        // `--land`: done work lands beside the workers, never in a worker's slot.
        let lander = lands.map(|store| scope.spawn(move || walker_ref.lander(&store)));
        let workers: Vec<_> = handles
            .into_iter()
            .map(|store| {
                let (walker, run, errors) = (walker_ref, run_ref, errors_ref);
                scope.spawn(move || {
                    let mut queue = queue::GitQueue::new(&store, walker);
                    let mut dispatcher = unit::GitDispatcher::new(&store, walker);
                    let outcome = engine::work(run, &mut queue, &mut dispatcher, &|| walker.cancelled(&store));
                    if let Err(err) = outcome {
                        errors.lock().unwrap_or_else(|p| p.into_inner()).push(err);
                    }
                })
            })
            .collect();
        for worker in workers {
            let _ = worker.join();
        }
        walker_ref.stop_lander();
        if let Some(lander) = lander {
            let _ = lander.join();
        }
        heartbeat_stop.stop();
    });
    if walker.opts.land {
        walker.land_the_rest(store);
    }
    let (mut stop, mut tally) = run.outcome();
    // A task closed done whose landing failed afterwards needs a person: not done, as the
    // board has it.
    let late = walker.failed_after_counting().min(tally.succeeded);
    tally.succeeded -= late;
    tally.failed += late;
    if late > 0 && stop == Stop::Done {
        stop = Stop::UnitLimit;
    }
    let unlanded: Vec<String> = if walker.opts.land {
        walker.to_land.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    } else {
        Vec::new()
    };
    // The workers ran out of tasks while the lander still had done work to land, and the
    // budget stopped that (no summarizer or resolver session may start past it): the budget
    // is why the walk ends with work not landed.
    if stop == Stop::NoWork && !unlanded.is_empty() && run.money_spent().is_some() {
        stop = Stop::Budget;
    }
    if walker.cancelled(store) {
        stop = Stop::Interrupted;
    }
    // A p0 task that did not fail but waits for a person (it asked a question) paused the walk
    // for that: it is named so.
    if let Stop::Paused { policy: engine::PausePolicy::P0Failure, units } = &stop {
        let id = units.first().and_then(|u| u.parse::<crate::ids::TaskId>().ok());
        let state = match id {
            Some(id) => crate::store::task::read(store, &id)?.map(|s| s.task.state),
            None => None,
        };
        if let Some(state) = state.filter(|s| *s != crate::store::task::State::Failed) {
            stop = Stop::Paused {
                policy: engine::PausePolicy::P0Waiting(state.as_str().to_owned()),
                units: units.clone(),
            };
        }
    }
    let mut paused_reason = None;
    if let Stop::Paused { policy, units } = &stop {
        let policy = match policy {
            engine::PausePolicy::ConsecutiveFailures(n) => format!("{n} consecutive failures"),
            engine::PausePolicy::P0Failure => "a p0 task failed".to_owned(),
            engine::PausePolicy::P0Waiting(state) => match state.as_str() {
                "needs-decision" => "a p0 task needs a decision".to_owned(),
                "parked" => "a p0 task was parked".to_owned(),
                _ => "a p0 task needs you".to_owned(),
            },
            engine::PausePolicy::Unreachable(why) => why.clone(),
        };
        paused_reason = Some(policy.clone());
        walker.record(store, None, Recorded::WalkPaused(events::WalkPaused { policy, units: units.clone() }))?;
    }
    let error = errors.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().next();
    let ended = events::WalkEnded {
        stop: stop_word(&stop).to_owned(),
        closed: tally.closed,
        succeeded: tally.succeeded,
        failed: tally.failed,
        abandoned: Some(tally.abandoned),
        dispatches: tally.dispatches,
        error: error.as_ref().map(|e| format!("{e:#}")),
        spent_usd: Some(tally.spent_usd()),
        spent_tokens: Some(tally.spent_tokens),
        spent_unknown: Some(tally.spent_unknown),
    };
    walker.record(store, None, Recorded::WalkEnded(ended.clone()))?;
    if let Some(key) = &walker.opts.termination_key {
        let (kind, data) = Recorded::WalkTerminated(events::WalkTerminated {
            stop: ended.stop.clone(),
            walker: Some(walker.key.clone()),
            closed: tally.closed,
            succeeded: tally.succeeded,
            failed: tally.failed,
            error: ended.error.clone(),
        })
        .into_parts();
        journal::append(store, ctx, key, NewEvent { kind, task: None, session: None, data })?;
    }
    if stop == Stop::Interrupted {
        let _ = std::fs::remove_file(Layout::of(store.common_dir()).cancel());
    }
    // Units published their results as they closed; this brings the rest (how the walk
    // ended, anything a failed publish left behind) to the remote before the walk ends.
    sync_with_remote(store, &walker);
    let mut told = serde_json::json!({
        "stop": ended.stop, "done": tally.succeeded, "not_done": tally.failed, "left_open": tally.abandoned,
        "sessions": tally.dispatches, "spent_usd": tally.spent_usd(), "spent_tokens": tally.spent_tokens,
        "error": ended.error,
    });
    let kind = match &stop {
        Stop::Paused { units, .. } => {
            told["reason"] = serde_json::json!(paused_reason.clone().unwrap_or_default());
            told["tasks"] = serde_json::json!(units);
            "walk_paused"
        }
        Stop::Budget => "budget_spent",
        _ => "walk_ended",
    };
    walker.notify(store, kind, told);
    observer.event(&Event::Finished { stop: stop.clone(), tally: tally.clone(), unlanded: unlanded.clone() });
    if let Some(err) = error {
        return Err(err);
    }
    Ok(WalkEnd { stop, unlanded })
}
/// Judge the walk of this clone (`git loop doctor`). Reads only: a clone without an id has
/// never walked.
pub fn this_clones_walk(store: &Store, ctx: &Context) -> Result<ThisClonesWalk> {
    if !Layout::of(store.common_dir()).clone_id().exists() {
        return Ok(ThisClonesWalk::None);
    }
    let key = singleton(store)?;
    let Some(held) = claim::read(store, &key)? else { return Ok(ThisClonesWalk::None) };
    let lease = crate::store::lease::judge(store, ctx, &key, &held);
    Ok(if lease.holder_gone || lease.is_stale() { ThisClonesWalk::Gone(held) } else { ThisClonesWalk::Running(held) })
}

/// Recover what crashed walks of this clone left, without walking (`git loop doctor
/// --repair`): take the clone's walker singleton as a walk does (taking over a dead walk's),
/// recover as a walk does when it starts, and let the singleton go. `Some` with the holder when
/// a live walk holds it: that walk recovered when it started, and what it has in hand is its own.
pub fn recover_crashed(
    store: &Store,
    ctx: &Context,
    cwd: PathBuf,
    exe: PathBuf,
    observer: &dyn Observer,
) -> Result<Option<claim::Held>> {
    let key = crate::ids::walker_key();
    let singleton = singleton(store)?;
    let _held = match claim::take_singleton(store, ctx, &singleton, singleton_options(ctx, &key))? {
        Ok(held) => held,
        Err(live) => return Ok(Some(live)),
    };
    let cancel = AtomicBool::new(false);
    // Recovery starts no session: the agent is never run.
    let opts = Options::new(crate::agent::presets::custom("recovery", "true"));
    let base = ObjectId::null(gix::hash::Kind::Sha1);
    let walker = Walker::new(store, ctx, Setup { key, opts, cwd, exe, base, observer, cancel: &cancel, run: None });
    recover::recover(store, &walker)?;
    Ok(None)
}

/// Run `f` with a walker of one command's own, for role sessions outside a walk (the
/// conflict resolver of `git loop land --resolver`): its own key and journal chain, and no
/// walk singleton (it starts no worker, and takes no task's claim).
pub fn one_off<R>(
    store: &Store,
    ctx: &Context,
    cwd: PathBuf,
    exe: PathBuf,
    opts: Options,
    observer: &dyn Observer,
    f: impl FnOnce(&Walker<'_>) -> R,
) -> R {
    let cancel = AtomicBool::new(false);
    let (key, base) = (crate::ids::walker_key(), ObjectId::null(gix::hash::Kind::Sha1));
    let walker = Walker::new(store, ctx, Setup { key, opts, cwd, exe, base, observer, cancel: &cancel, run: None });
    f(&walker)
}

/// The word the journal and `--json` use for a stop reason.
pub fn stop_word(stop: &Stop) -> &'static str {
    match stop {
        Stop::NoWork => "no_work",
        Stop::Done => "done",
        Stop::UnitLimit => "units",
        Stop::Budget => "budget",
        Stop::Paused { .. } => "paused",
        Stop::Interrupted => "interrupted",
        Stop::Failed => "failed",
    }
}

/// How a walk holds its clone's walker singleton (and refreshes it).
fn singleton_options(ctx: &Context, holder: &str) -> AcquireOptions {
    AcquireOptions {
        holder: holder.to_owned(),
        ttl: chrono::Duration::minutes(2),
        reason: Some(format!("git loop run (pid {})", ctx.pid)),
        session: None,
    }
}

fn take_singleton<'s>(store: &'s Store, ctx: &'s Context, key: &ClaimKey, holder: &str) -> Result<Singleton<'s>> {
    claim::take_singleton(store, ctx, key, singleton_options(ctx, holder))?.map_err(|held| {
        let r = &held.record;
        Refusal::new(
            Class::Busy,
            format!("another walker runs in this repository: {} (pid {} on {})", r.holder, r.pid, r.host),
        )
        .hint("stop it with 'git loop stop --all', or wait for it to finish")
        .into()
    })
}

/// Read the tasks of other repositories open tasks wait for (`backlog::foreign`); a place that
/// cannot be read is a warning (what was read before stands).
fn read_elsewhere(store: &Store, walker: &Walker<'_>) {
    let Ok(board) = crate::backlog::Board::load(store, &walker.ctx) else { return };
    // With nothing waiting, it reads nothing and drops what it kept (`store::foreign::prune`).
    match crate::backlog::foreign::refresh(store, &board) {
        Ok(read) => {
            for (_, why) in read.failed {
                walker.observer.event(&Event::Warning { message: why });
            }
        }
        Err(err) => walker.observer.event(&Event::Warning { message: format!("{err:#}") }),
    }
}

/// Sync with `loop.remote`, if there is one; a failure is a warning (what it would have sent
/// stays here for the next sync).
fn sync_with_remote(store: &Store, walker: &Walker<'_>) {
    let Some(remote) = store.arbiter() else { return };
    match crate::store::sync::sync(store, &walker.ctx, &remote) {
        Ok(report) if report.incoming() > 0 => walker.observer.event(&Event::Synced { changes: report.incoming() }),
        Ok(_) => {}
        // The walk's own error already says it.
        Err(err) if stops_the_walk(&err) => {}
        Err(err) => {
            walker.observer.event(&Event::Warning { message: format!("could not sync with {remote}: {err:#}") })
        }
    }
}

/// One malloc arena for the whole walk. A unit's work is done by several threads, and glibc
/// gives each its own arena: the few long-lived allocations a unit leaves (a session's journal
/// chain, in the maps that follow the chains) land between the short-lived ones, and each
/// worker's arena grew by about a KiB a unit of pages kept by them, which `malloc_trim` cannot
/// give back (2,000 units: 4 → 6 MiB anonymous; with one arena 2 → 4 MiB). The workers spend
/// their time waiting on agents and git, not in malloc, so sharing one arena costs nothing
/// measurable. Called when a walk begins: threads that have their arena already keep it.
pub(crate) fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a malloc parameter (under malloc's own lock).
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// What the heartbeat works with besides its store: the walk, the observer that says an
/// outage once, and where a fault that stops the walk goes.
struct Beating<'w, 'a> {
    walker: &'w Walker<'a>,
    quiet: &'w Quiet<'a>,
    run: &'w engine::Run,
    errors: &'w std::sync::Mutex<Vec<anyhow::Error>>,
}

/// Keep the singleton's lease fresh until told to stop; and with a shared remote, sync the
/// loop's refs with it now and then, so a person's word written on another clone (a stop, a
/// take-over, a reassignment) reaches this walk. After each refresh and sync, consolidate the
/// packs and loose objects if they have grown (here, beside the units, never in a claim).
///
/// A sync the remote did not answer is tried again at the next interval (the outage is said
/// once, and its end when the remote answers again); one that met a fault that cannot heal —
/// the remote refuses this clone's credentials, has no repository there, or its hook refuses
/// what this walk publishes — stops the walk with that fault: its units in flight finish,
/// nothing new is claimed. A sync is skipped while a worker publishes a closing unit (both
/// push the walk's journal chain, and would fail each other's atomic pushes): it is made at
/// the next look, 100 ms later.
fn heartbeat(beating: Beating<'_, '_>, store: Store, key: &ClaimKey, stop: &engine::StopFlag) {
    let Beating { walker, quiet, run, errors } = beating;
    let opts = singleton_options(&walker.ctx, &walker.key);
    let remote = store.arbiter();
    let mut last = std::time::Instant::now();
    let mut last_sync = std::time::Instant::now();
    // When the walk last looked for finished tasks to fold (`loop.fold`): first after its
    // first sync, then every FOLD_EVERY.
    let mut last_fold: Option<std::time::Instant> = None;
    while !stop.sleep(Duration::from_millis(100)) {
        quiet.heard();
        // Whether this round may have written objects or fetched a pack.
        let mut grown = false;
        if last.elapsed() >= Duration::from_secs(30) {
            let _ = claim::acquire(&store, &walker.ctx, key, &opts);
            last = std::time::Instant::now();
            grown = true;
        }
        if let (Some(remote), Some(every)) = (&remote, walker.opts.sync_every) {
            if last_sync.elapsed() >= every {
                let Ok(one_at_a_time) = walker.publishing.try_lock() else { continue };
                grown = true;
                last_sync = std::time::Instant::now();
                let synced = crate::store::sync::sync(&store, &walker.ctx, remote);
                drop(one_at_a_time);
                read_elsewhere(&store, walker);
                match synced {
                    Ok(report) => {
                        let incoming = report.incoming();
                        if incoming > 0 {
                            walker.observer.event(&Event::Synced { changes: incoming });
                        }
                        if let Some(after) = walker.opts.fold_after {
                            if last_fold.is_none_or(|at| at.elapsed() >= FOLD_EVERY) {
                                last_fold = Some(std::time::Instant::now());
                                fold_as_it_goes(walker, &store, remote, after);
                            }
                        }
                    }
                    Err(err) if stops_the_walk(&err) => {
                        run.stop(engine::Stop::Failed);
                        errors.lock().unwrap_or_else(|p| p.into_inner()).push(err);
                    }
                    Err(err) => walker
                        .observer
                        .event(&Event::Warning { message: format!("could not sync with {remote}: {err:#}") }),
                }
                quiet.heard();
            }
        }
        if grown {
            if let Err(err) = crate::store::maintenance::auto(store.common_dir()) {
                walker.observer.event(&Event::Warning { message: format!("{err:#}") });
            }
        }
    }
}

/// How often a walk with `loop.fold` looks for finished tasks to fold, and how many make a fold
/// worth its pushes.
const FOLD_EVERY: Duration = Duration::from_secs(600);
const FOLD_AT_LEAST: usize = 50;

/// Fold the fleet's finished tasks older than `after` on `remote` (`store::archive`), when at
/// least FOLD_AT_LEAST are: beside the units, holding the walk's publishing lock (its pushes
/// would fail a closing unit's atomic push). A fold that fails is said and tried at the next
/// look; nothing it did is lost (a stopped fold leaves duplicates the next one deletes).
fn fold_as_it_goes(walker: &Walker, store: &Store, remote: &str, after: chrono::Duration) {
    let before = walker.ctx.now() - after;
    let planner = || crate::prune::plan_fold(store, &walker.ctx, before);
    match planner() {
        Ok(plan) if plan.tasks.len() >= FOLD_AT_LEAST => {}
        Ok(_) => return,
        Err(err) => {
            walker.observer.event(&Event::Warning { message: format!("could not look for tasks to fold: {err:#}") });
            return;
        }
    }
    let _one_at_a_time = walker.publishing.lock().unwrap_or_else(|p| p.into_inner());
    match crate::store::fold::fold_remote(store, &walker.ctx, remote, &planner) {
        Ok(folded) if folded.tasks > 0 => {
            crate::store::maintenance::after_archive_moved(store.common_dir());
            walker.observer.event(&Event::Folded {
                remote: remote.to_owned(),
                tasks: folded.tasks,
                chains: folded.chains,
                refs: folded.deleted,
            })
        }
        Ok(_) => {}
        Err(err) => walker.observer.event(&Event::Warning { message: format!("could not fold on {remote}: {err:#}") }),
    }
}

/// Whether a failed sync stops the walk: a fault of the remote that cannot heal (it refuses
/// this clone, has no repository there, or its hook refuses what the walk publishes), which
/// every later sync would meet again. A remote that did not answer does not.
fn stops_the_walk(err: &anyhow::Error) -> bool {
    crate::store::remote::cannot_heal(err)
}
