//! The landing queue: done task branches land on a target branch (`git loop land`, and the
//! walk's `run --land`), and the target only ever moves to a commit whose checks passed on the
//! merged result.
//!
//! One landing, start to end:
//! 1. The target: `--into`, else `loop.mergeInto`, else the main worktree's branch.
//! 2. Take the claim `lander:<target>` (one lander per target across clones; refreshed while
//!    checks run). Held by a live lander elsewhere → `Outcome::Busy`, nothing done.
//! 3. With `loop.remote`: sync (the fleet's tasks and task branches), and read the remote's
//!    target; the landing is on that one.
//! 4. The queue: done tasks whose task branch is not in the target, in dependency order, then
//!    priority, then when they were done; a task whose dependency has not landed (nor lands
//!    before it in this run) waits.
//! 5. Batches of up to `batch`: merge each branch onto the target in turn, with the message
//!    its `Summarizer` wrote (asked once per task; one that cannot fails that task), a
//!    conflict going to the `Resolver` (a conflict-resolver session; one that cannot resolve
//!    it fails that task with the paths named), check the batch's result
//!    once in the landing worktree, and on a failure bisect (check the first half, …) until
//!    the failing tasks are isolated; every passing part moves the target by compare-and-swap
//!    (locally) or a push with a lease (the remote), and a lost swap reads the target again
//!    and rebuilds on it.
//! 6. A task that cannot land goes to needs-you with why; one that landed has a `task_landed`
//!    event and its completion note says where.
//!
//! A worktree that has the (local) target checked out follows it when it is clean
//! (`git read-tree -m -u`, before the ref moves, so a failure moves nothing), and a dirty one
//! is never touched: the landing is refused.

pub mod conflict;
pub mod epic;
pub mod request;
pub mod summary;
mod worktree;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::ObjectId;

use crate::backlog::{self, Board};
use crate::context::Context;
use crate::error::{refused, usage, Class, Refusal};
use crate::git;
use crate::ids::{ClaimKey, Priority, TaskId};
use crate::refs;
use crate::store::cas::Cas;
use crate::store::claim::{self, AcquireOptions, Held};
use crate::store::events::{self, Recorded};
use crate::store::notes;
use crate::store::task::State;
use crate::store::{remote, sync, Store};
use crate::tries::{self, checks, Merged};

pub use conflict::{Conflict, NoResolver, Resolution, Resolver};
pub use summary::{Landing, NoSummarizer, Summarizer, Summary};

/// The way done work reaches the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Via {
    /// The landing queue merges, checks and moves the target itself.
    #[default]
    Merge,
    /// A pull or merge request per task on the forge, merged there (`request`).
    Request,
}

impl Via {
    pub fn parse(text: &str) -> Option<Via> {
        match text.trim().to_ascii_lowercase().as_str() {
            "merge" | "push" => Some(Via::Merge),
            "pr" | "mr" | "request" => Some(Via::Request),
            _ => None,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Via::Merge => "merge",
            Via::Request => "pr",
        }
    }
}

/// How to land.
pub struct Options<'o> {
    /// Merge here, or through the forge's requests.
    pub via: Via,
    /// The target branch (short or full name; default `loop.mergeInto`, else the current branch).
    pub into: Option<String>,
    /// Only these tasks (empty: every done task not yet on the target).
    pub only: Vec<TaskId>,
    /// How many branches to merge before checking the result once.
    pub batch: usize,
    /// The checks (none: a landing is the merge alone).
    pub checks: Option<String>,
    pub checks_timeout: Duration,
    /// Between SIGTERM and SIGKILL when the checks are stopped.
    pub grace: Duration,
    /// This program (the checks run under its session guard).
    pub exe: PathBuf,
    /// Who lands: the holder of the lander claim, named in the journal.
    pub holder: String,
    /// Asked while checks run and between batches: true stops the landing.
    pub cancelled: &'o dyn Fn() -> bool,
    /// Called on a merge that conflicts (see `conflict`).
    pub resolver: &'o dyn Resolver,
    /// Writes each landing's message (see `summary`).
    pub summarizer: &'o dyn Summarizer,
    /// Where the checks run confined (they run the merged code), as the caller decided.
    pub sandbox: Option<&'o crate::sandbox::Sandbox>,
}

/// One task waiting to land.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Queued {
    pub task: String,
    pub title: String,
    pub priority: String,
    /// The task branch's head.
    pub head: String,
    pub done_at: Option<DateTime<Utc>>,
    /// Dependencies that have not landed and do not land before it: it waits for them.
    pub waiting_for: Vec<String>,
    /// All its dependencies.
    #[serde(skip)]
    pub after: Vec<String>,
    /// The commit it was done with (its completion note is there).
    #[serde(skip)]
    pub completed_on: Option<String>,
}

/// A task that landed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Landed {
    pub task: String,
    /// The target's commit holding its work.
    pub commit: String,
    /// How many tasks moved the target with it.
    pub batch: usize,
    /// The epic's branch it landed on, when not the target (`loop.epicBranch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on: Option<String>,
}

/// A task that could not land.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Failed {
    pub task: String,
    /// `conflict`, `checks` or `summary` (its summarizer wrote no message).
    pub cause: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The epic's branch it failed to land on, when not the target (`loop.epicBranch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on: Option<String>,
}

/// What one landing run did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// The target (short name).
    pub into: String,
    /// Where it landed: `local`, or the remote's name.
    pub on: String,
    /// The checks run on merged results (`None`: landed on the merge alone).
    pub checks: Option<String>,
    pub landed: Vec<Landed>,
    pub failed: Vec<Failed>,
    /// Tasks left in the queue, waiting for a dependency.
    pub waiting: Vec<Queued>,
    /// The target's commit at the end.
    pub target: Option<String>,
    /// What became of the local branch and its worktree, when it was not simply moved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Through the forge: each task's request as this run left it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<request::Requested>,
}

/// How a landing run went.
#[derive(Debug, Clone)]
pub enum Outcome {
    Ran(Box<Report>),
    /// Another lander holds the target's claim.
    Busy(Box<Held>),
}

/// The target branch (full ref name): `into`, else `loop.mergeInto`, else the main
/// worktree's branch.
pub fn target(store: &Store, into: Option<&str>) -> Result<String> {
    let named = into.map(ToOwned::to_owned).or_else(|| store.settings().merge_into());
    let full = match named {
        Some(name) if name.starts_with("refs/") => name,
        Some(name) => format!("refs/heads/{name}"),
        None => store.head_branch().ok_or_else(|| {
            usage("there is no branch to land on: the main worktree is not on a branch")
                .hint("pass --into <branch>, or set loop.mergeInto")
        })?,
    };
    if gix::refs::FullName::try_from(full.as_str()).is_err() || !full.starts_with("refs/heads/") {
        return Err(usage(format!("'{}' is not a branch to land on", full.escape_debug()))
            .hint("name a local branch, e.g. --into main")
            .into());
    }
    Ok(full)
}

/// The claim one lander of `target` holds: `lander:<name>`, the branch's short name where it is
/// a valid claim name, else a readable form of it with a hash that keeps it unique.
pub fn lander_key(target: &str) -> ClaimKey {
    let short = refs::short_branch(target);
    if let Ok(key) = ClaimKey::new("lander", short) {
        return key;
    }
    let mut name: String = short
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .replace("..", "-");
    name.truncate(40);
    // FNV-1a of the full name: two names that read alike keep apart.
    let hash = target.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let name = format!("{}{}{:08x}", name, if name.is_empty() { "" } else { "-" }, hash as u32);
    ClaimKey::new("lander", &name).expect("made of valid characters")
}

/// Who holds the lander claim of `target`, if anyone.
pub fn lander(store: &Store, target: &str) -> Result<Option<Held>> {
    claim::read(store, &lander_key(target))
}

/// The target's commit as this clone knows it: the remote's (last fetched) with
/// `loop.remote`, else the local branch.
pub fn known_tip(store: &Store, target: &str) -> Result<Option<ObjectId>> {
    if let Some(remote_name) = store.arbiter() {
        let mirrored = remote::mirrored(store, &remote_name, &[target.to_owned()])?;
        if let Some(id) = mirrored.get(target) {
            return Ok(Some(*id));
        }
    }
    store.ref_target(target)
}

/// Whether `task`'s completion note says its work landed on `target` (full ref name): how a
/// clone knows of a landing by another clone before it fetches the target again.
pub fn noted_landed(store: &Store, task: &crate::store::task::Task, target: &str) -> Result<bool> {
    let completed_on = task.completion.as_ref().and_then(|c| c.commit.as_deref()).and_then(|c| c.parse().ok());
    let Some(commit) = completed_on else { return Ok(false) };
    Ok(notes::landed(store, commit, &task.id)?.is_some_and(|l| l.into == target))
}

/// How current the target's tip given to `queue` is.
#[derive(Debug, Clone, Copy)]
pub enum Seen {
    /// Just read from where it lives (the lander's): what it contains is what has landed.
    Fetched,
    /// As this clone last saw it (`status`, `show`): a task another clone landed on the target
    /// since is known by its completion note, which every sync brings.
    Synced,
}

/// Every task branch's head, in one listing rather than a lookup per task (a third of 100,000
/// tasks done was 33,000 opens of loose ref files that are not there). A ref the listing could
/// not read is looked up alone, which says what is wrong with it.
pub(crate) struct Heads {
    branches: HashMap<String, ObjectId>,
    unreadable: bool,
}

impl Heads {
    pub(crate) fn list(store: &Store) -> Result<Heads> {
        let mut branches = HashMap::new();
        let mut unreadable = false;
        for listed in store.refs_prefixed(refs::TASK_BRANCHES)? {
            match listed {
                git::Listed::Ref { name, target: git::Found::Direct(id) } => {
                    branches.insert(name, id);
                }
                git::Listed::Ref { .. } => {}
                git::Listed::Unreadable(_) => unreadable = true,
            }
        }
        Ok(Heads { branches, unreadable })
    }

    /// Task `id`'s branch head, if it has a branch.
    pub(crate) fn of(&self, store: &Store, id: &str) -> Result<Option<ObjectId>> {
        let name = format!("{}{id}", refs::TASK_BRANCHES);
        Ok(match self.branches.get(&name) {
            Some(head) => Some(*head),
            None if self.unreadable => store.ref_target(&name)?,
            None => None,
        })
    }
}

/// The queue of `target` (full ref name) at `tip`: done tasks (of `only`, if given) whose task
/// branch is not in `tip` (nor, as `seen` allows, landed by another clone), in the order they
/// land. With `loop.epicBranch`, an epic's children are its branch's queue, not the target's,
/// and an epic waits for every child whose work is not on its branch (`epic`).
pub fn queue(
    store: &Store,
    ctx: &Context,
    target: &str,
    tip: Option<ObjectId>,
    only: &[TaskId],
    seen: Seen,
) -> Result<Vec<Queued>> {
    let board = Board::load(store, ctx)?;
    let heads = Heads::list(store)?;
    queue_of(store, &board, &heads, target, tip, only, seen)
}

/// `queue`, of a board and task branches already read.
fn queue_of(
    store: &Store,
    board: &Board,
    branches: &Heads,
    target: &str,
    tip: Option<ObjectId>,
    only: &[TaskId],
    seen: Seen,
) -> Result<Vec<Queued>> {
    let epics = epic::on(store);
    let belongs = |row: &crate::store::index::Row| match epic::home(board, row, epics) {
        Some(home) => home == target,
        None => !epics || !target.starts_with(refs::TASK_BRANCHES),
    };
    let head_of = |id: &str| branches.of(store, id);
    let mut heads = Vec::new();
    for row in board.tasks.iter().filter(|r| r.state == State::Done && belongs(r)) {
        if let Ok(id) = row.id().parse::<TaskId>() {
            if let Some(head) = head_of(row.id())? {
                heads.push((row, id, head));
            }
        }
    }
    let in_tip = match tip {
        Some(tip) => store.contained_in(tip, &heads.iter().map(|(_, _, head)| *head).collect::<Vec<_>>())?,
        None => HashSet::new(),
    };
    struct Entry {
        queued: Queued,
        after: Vec<String>,
        priority: Priority,
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut landed: HashSet<String> = HashSet::new();
    for (row, _, head) in heads {
        if in_tip.contains(&head) {
            landed.insert(row.id().to_owned());
            continue;
        }
        let task = row.task()?;
        // Landed by another clone, on a target this clone has not fetched since: the completion
        // note, which every sync brings, says so.
        if let Seen::Synced = seen {
            if noted_landed(store, &task, target)? {
                landed.insert(row.id().to_owned());
                continue;
            }
        }
        // A task of another repository it waited for lands there, not here.
        let mut after: Vec<String> = task.after.iter().filter(|d| !backlog::foreign::is_foreign(d)).cloned().collect();
        if epics && row.epic {
            // Its children's work must be on its branch first.
            let mut waits = Vec::new();
            let mut child_heads = Vec::new();
            for child in board.children(row.id()).into_iter().filter(|c| c.state != State::Cancelled) {
                match head_of(child.id())? {
                    Some(h) => child_heads.push((child.id().to_owned(), h)),
                    None if child.state != State::Done => waits.push(child.id().to_owned()),
                    None => {}
                }
            }
            let on_branch = store.contained_in(head, &child_heads.iter().map(|(_, h)| *h).collect::<Vec<_>>())?;
            waits.extend(child_heads.into_iter().filter(|(_, h)| !on_branch.contains(h)).map(|(id, _)| id));
            after.extend(waits);
        }
        entries.push(Entry {
            queued: Queued {
                task: task.id.clone(),
                title: task.title.clone(),
                priority: task.priority.to_string(),
                head: head.to_string(),
                done_at: task.completion.as_ref().map(|c| c.at),
                waiting_for: Vec::new(),
                after: after.clone(),
                completed_on: task.completion.as_ref().and_then(|c| c.commit.clone()),
            },
            after,
            priority: task.priority,
        });
    }
    entries.sort_by(|a, b| {
        (a.priority, a.queued.done_at, &a.queued.task).cmp(&(b.priority, b.queued.done_at, &b.queued.task))
    });
    let wanted: HashSet<&str> = only.iter().map(TaskId::as_str).collect();
    let in_run = |id: &str| wanted.is_empty() || wanted.contains(id);
    // Dependency order: repeatedly the first entry whose queued dependencies are placed.
    let mut placed: Vec<Queued> = Vec::new();
    let mut placed_ids: HashSet<String> = HashSet::new();
    let mut waiting: Vec<Queued> = Vec::new();
    let queued_ids: HashSet<String> = entries.iter().map(|e| e.queued.task.clone()).collect();
    let mut left = entries;
    loop {
        let position = left.iter().position(|e| {
            e.after.iter().all(|dep| landed.contains(dep) || placed_ids.contains(dep) || !queued_ids.contains(dep))
        });
        let Some(i) = position else { break };
        let mut entry = left.remove(i);
        // A dependency that is neither landed nor landing first (not done, waiting, or left
        // out of this run) holds it back.
        entry.queued.waiting_for =
            entry.after.iter().filter(|dep| !landed.contains(*dep) && !placed_ids.contains(*dep)).cloned().collect();
        if entry.queued.waiting_for.is_empty() && in_run(&entry.queued.task) {
            placed_ids.insert(entry.queued.task.clone());
            placed.push(entry.queued);
        } else {
            if entry.queued.waiting_for.is_empty() {
                // Left out by `only`: it neither lands nor holds anyone back but its dependants.
                entry.queued.waiting_for = Vec::new();
            }
            if in_run(&entry.queued.task) {
                waiting.push(entry.queued);
            }
        }
    }
    // A cycle of dependencies: every one waits.
    for mut entry in left {
        entry.queued.waiting_for = entry.after.clone();
        if in_run(&entry.queued.task) {
            waiting.push(entry.queued);
        }
    }
    placed.extend(waiting);
    Ok(placed)
}

/// Check that each of `ids` can land: done (a task in any other state is a usage error naming
/// its state).
pub fn check_landable(store: &Store, ids: &[TaskId]) -> Result<()> {
    for id in ids {
        let Some(snapshot) = crate::store::task::read(store, id)? else {
            return Err(usage(format!("task '{id}' does not exist")).hint("list tasks with 'git loop list'").into());
        };
        if snapshot.task.state != State::Done {
            return Err(usage(format!(
                "task '{id}' is {}, not done: only done work lands",
                snapshot.task.state.as_str()
            ))
            .hint(format!("finish it first (git loop run --task {id}), or see it with 'git loop show {id}'"))
            .into());
        }
    }
    Ok(())
}

/// How long the lander's claim lasts unless refreshed, and how often it is refreshed.
const LEASE: chrono::Duration = chrono::Duration::minutes(2);
const REFRESH_EVERY: Duration = Duration::from_secs(30);

/// Land done work on the target.
pub fn land(store: &Store, ctx: &Context, opts: &Options<'_>) -> Result<Outcome> {
    let target = target(store, opts.into.as_deref())?;
    check_landable(store, &opts.only)?;
    let epics = store.settings().epic_branch()?;
    if epics && opts.via == Via::Request {
        return Err(usage("loop.epicBranch lands an epic's children on its branch by the landing queue's merge, not through the forge's requests")
            .hint("land with --via merge, or unset loop.epicBranch to open a request per task")
            .into());
    }
    if opts.via == Via::Request {
        return request::land(store, ctx, opts, target);
    }
    let reason = format!("landing on {} (pid {})", refs::short_branch(&target), ctx.pid);
    let claim = match LanderClaim::take(store, ctx, &target, &opts.holder, reason, LEASE)? {
        Ok(claim) => claim,
        Err(other) => return Ok(Outcome::Busy(Box::new(other))),
    };
    let arbiter = store.arbiter();
    if let Some(remote_name) = &arbiter {
        sync::sync(store, ctx, remote_name)?;
    }
    let mut lander = Lander::new(store, ctx, opts, target.clone(), arbiter.clone(), claim);
    lander.read_tip()?;
    if lander.remote.is_none() {
        worktree::refuse_dirty(store, &target)?;
    }
    if epics {
        // Children first, on their epics' branches; an epic done by then lands below.
        let tip = lander.tip.expect("read above");
        let moved = epic::land_children(store, ctx, opts, tip, arbiter.as_ref(), &mut lander.only, &mut lander.report)?;
        if moved {
            // The epics' branches moved on the remote: the local ones follow before the
            // target's queue reads them.
            if let Some(remote_name) = &arbiter {
                sync::sync(store, ctx, remote_name)?;
            }
        }
    }
    let result = lander.run();
    lander.drop_worktree();
    result?;
    if let Some(remote_name) = &arbiter {
        sync::sync(store, ctx, remote_name)?;
        lander.follow_locally()?;
    }
    lander.report.target = lander.tip.map(|t| t.to_string());
    Ok(Outcome::Ran(Box::new(lander.report)))
}

/// The lander claim of one target (`lander:<branch>`), held by one landing run and refreshed
/// as it works; released when dropped.
pub(super) struct LanderClaim<'s> {
    key: ClaimKey,
    opts: AcquireOptions,
    target: String,
    refreshed: std::cell::Cell<Instant>,
    _held: claim::Singleton<'s>,
}

impl<'s> LanderClaim<'s> {
    /// Take the claim of `target` for `holder`, lasting `ttl` unless refreshed; `Err`: another
    /// lander holds it.
    pub(super) fn take(
        store: &'s Store,
        ctx: &'s Context,
        target: &str,
        holder: &str,
        reason: String,
        ttl: chrono::Duration,
    ) -> Result<Result<LanderClaim<'s>, Held>> {
        let key = lander_key(target);
        let opts = AcquireOptions { holder: holder.to_owned(), ttl, reason: Some(reason), session: None };
        Ok(claim::take_singleton(store, ctx, &key, opts.clone())?.map(|held| LanderClaim {
            key,
            opts,
            target: target.to_owned(),
            refreshed: std::cell::Cell::new(Instant::now()),
            _held: held,
        }))
    }

    /// Refresh it when it is due; an error when another lander took it over meanwhile.
    pub(super) fn keep(&self, store: &Store, ctx: &Context) -> Result<()> {
        if self.refreshed.get().elapsed() < REFRESH_EVERY {
            return Ok(());
        }
        self.refreshed.set(Instant::now());
        match claim::acquire(store, ctx, &self.key, &self.opts)? {
            claim::Acquire::HeldByOther(held) => Err(refused(format!(
                "the lander claim of '{}' was taken over by {} while landing",
                refs::short_branch(&self.target),
                held.record.holder
            ))
            .hint("what landed before stays; run 'git loop land' again")
            .into()),
            _ => Ok(()),
        }
    }
}

struct Lander<'l> {
    store: &'l Store,
    ctx: &'l Context,
    opts: &'l Options<'l>,
    /// The tasks of this run (`opts.only`, and epics that come along with their children).
    only: Vec<TaskId>,
    target: String,
    remote: Option<String>,
    claim: LanderClaim<'l>,
    /// The target's commit the next batch merges onto.
    tip: Option<ObjectId>,
    /// The landing worktree, once made.
    worktree: Option<PathBuf>,
    report: Report,
    failed_ids: HashSet<String>,
    /// Each task's landing message by its head, once written (a bisection or a lost swap
    /// merges it again; its summarizer is asked once).
    messages: HashMap<(String, String), String>,
    /// The resolver session whose resolution each task's merge is, in this run.
    resolved_by: HashMap<String, String>,
}

/// What moving the target did.
enum Advance {
    Moved,
    /// Someone else moved the target: it holds this now.
    Lost,
}

impl<'l> Lander<'l> {
    fn new(
        store: &'l Store,
        ctx: &'l Context,
        opts: &'l Options<'l>,
        target: String,
        remote: Option<String>,
        claim: LanderClaim<'l>,
    ) -> Lander<'l> {
        Lander {
            store,
            ctx,
            opts,
            only: opts.only.clone(),
            report: Report {
                into: refs::short_branch(&target).to_owned(),
                on: remote.clone().unwrap_or_else(|| "local".into()),
                checks: opts.checks.clone(),
                landed: Vec::new(),
                failed: Vec::new(),
                waiting: Vec::new(),
                target: None,
                notes: Vec::new(),
                requests: Vec::new(),
            },
            target,
            remote,
            claim,
            tip: None,
            worktree: None,
            failed_ids: HashSet::new(),
            messages: HashMap::new(),
            resolved_by: HashMap::new(),
        }
    }

    /// Read the target's commit: the remote's with `loop.remote`, else the local branch's.
    fn read_tip(&mut self) -> Result<()> {
        self.tip = match &self.remote {
            Some(remote_name) => remote::read_branch(self.store, remote_name, &self.target)?,
            None => self.store.ref_target(&self.target)?,
        };
        if self.tip.is_none() {
            return Err(usage(format!("branch '{}' does not exist", refs::short_branch(&self.target)))
                .hint("create it, or land on another with --into <branch>")
                .into());
        }
        Ok(())
    }

    /// Refresh the lander claim when it is due (while checks run, between batches).
    fn keep_claim(&self) -> Result<()> {
        self.claim.keep(self.store, self.ctx)
    }

    fn run(&mut self) -> Result<()> {
        // The queue is read once, and again only when the target moved under us: otherwise
        // it changes only by what this run lands or fails.
        let mut read: Option<Vec<Queued>> = None;
        loop {
            if (self.opts.cancelled)() {
                return Err(Refusal::new(Class::Refused, "the landing was interrupted")
                    .hint("what landed before stays; run 'git loop land' again")
                    .into());
            }
            self.keep_claim()?;
            let queue = match read.take() {
                Some(mut queue) => {
                    let landed: HashSet<&str> = self.report.landed.iter().map(|l| l.task.as_str()).collect();
                    queue.retain(|q| !landed.contains(q.task.as_str()));
                    // A dependency that landed (or failed) in this run: its dependants wait no more
                    // (or for ever).
                    for q in &mut queue {
                        q.waiting_for.retain(|dep| !landed.contains(dep.as_str()));
                        for dep in &q.after {
                            if self.failed_ids.contains(dep) && !q.waiting_for.contains(dep) {
                                q.waiting_for.push(dep.clone());
                            }
                        }
                    }
                    queue
                }
                None => queue(self.store, self.ctx, &self.target, self.tip, &self.only, Seen::Fetched)?,
            };
            let ready: Vec<Queued> = queue
                .iter()
                .filter(|q| q.waiting_for.is_empty() && !self.failed_ids.contains(&q.task))
                .take(self.opts.batch.max(1))
                .cloned()
                .collect();
            if ready.is_empty() {
                self.report.waiting =
                    queue.into_iter().filter(|q| !self.failed_ids.contains(&q.task)).collect::<Vec<_>>();
                return Ok(());
            }
            if self.settle(&ready, false)? {
                read = Some(queue);
            } else {
                // The target moved under us: read it again and rebuild the queue on it.
                self.read_tip()?;
            }
        }
    }

    /// Land `entries` onto the tip: merge, check, and move the target; on failing checks,
    /// bisect. `known_bad`: these merged onto the tip are known to fail (no need to check
    /// again). False when the target moved under it (the caller starts over).
    fn settle(&mut self, entries: &[Queued], known_bad: bool) -> Result<bool> {
        let onto = self.tip.expect("read before landing");
        let mut candidate = onto;
        let mut merged: Vec<(Queued, ObjectId)> = Vec::new();
        let mut heads: Vec<ObjectId> = Vec::new();
        for entry in entries {
            if entry.after.iter().any(|dep| self.failed_ids.contains(dep)) {
                // Its dependency just failed to land: it waits (the run's queue says so next).
                continue;
            }
            let head = ObjectId::from_hex(entry.head.as_bytes()).context("a queued head")?;
            // Not in the target (the queue says), but maybe in a branch merged before it here
            // (a task built on another's branch, two tasks done by one commit).
            let mut already = false;
            for earlier in &heads {
                if self.store.is_ancestor(head, *earlier)? {
                    already = true;
                    break;
                }
            }
            heads.push(head);
            if already {
                merged.push((entry.clone(), candidate));
                continue;
            }
            let Some(message) = self.message(entry, head, candidate)? else {
                // Its summarizer could not write its message: it failed, and does not land.
                continue;
            };
            match self.store.merge(candidate, head, &message)? {
                Merged::Commit(commit) => {
                    candidate = commit;
                    merged.push((entry.clone(), commit));
                }
                Merged::Conflict(paths) => {
                    let conflict = Conflict {
                        task: entry.task.clone(),
                        target: self.target.clone(),
                        ours: candidate,
                        theirs: head,
                        paths: paths.clone(),
                        message: message.clone(),
                    };
                    let keep = || self.keep_claim().is_err() || (self.opts.cancelled)();
                    match self.opts.resolver.resolve(self.store, &conflict, &keep)? {
                        Resolution::Resolved { commit, by } => {
                            if let Some(session) = by {
                                self.resolved_by.insert(entry.task.clone(), session);
                            }
                            candidate = commit;
                            merged.push((entry.clone(), commit));
                        }
                        Resolution::Unresolved(why) => {
                            let reason = format!(
                                "its merge into {} conflicts in: {} ({why})",
                                refs::short_branch(&self.target),
                                paths.join(", ")
                            );
                            self.fail(entry, "conflict", reason, paths, None, candidate)?;
                        }
                    }
                }
            }
        }
        if merged.is_empty() {
            return Ok(true);
        }
        let passed = match (&self.opts.checks, known_bad) {
            (_, true) => Some(None),
            (None, false) => None,
            (Some(command), false) => {
                let command = command.clone();
                let ran = self.check(&command, candidate)?;
                if ran.passed {
                    None
                } else {
                    Some(Some(ran))
                }
            }
        };
        let Some(failure) = passed else {
            return Ok(match self.advance(onto, candidate, &merged)? {
                Advance::Moved => true,
                Advance::Lost => false,
            });
        };
        let batch: Vec<Queued> = merged.into_iter().map(|(q, _)| q).collect();
        if batch.len() == 1 {
            let ran = match failure {
                Some(ran) => ran,
                None => {
                    let command = self.opts.checks.clone().expect("known bad only with checks");
                    self.check(&command, candidate)?
                }
            };
            let (reason, log) = self.checks_failure(&batch[0], &ran)?;
            self.fail(&batch[0], "checks", reason, Vec::new(), Some(log), onto)?;
            return Ok(true);
        }
        // Bisect: the first half on the tip; the second on whatever the tip is then. When the
        // first half passes and lands, the second merged onto it is the whole that failed.
        let (first, second) = batch.split_at(batch.len() / 2);
        let before = self.tip;
        if !self.settle(first, false)? {
            return Ok(false);
        }
        let first_all_landed = first.iter().all(|q| self.report.landed.iter().any(|l| l.task == q.task));
        let second_known_bad = first_all_landed && self.tip != before;
        self.settle(second, second_known_bad)
    }

    /// `entry`'s landing message: its summarizer's (asked once per head), else the loop's own.
    /// `None`: the summarizer could not write one, and the task failed (the target is not
    /// moved for it).
    fn message(&mut self, entry: &Queued, head: ObjectId, onto: ObjectId) -> Result<Option<String>> {
        let cache = (entry.task.clone(), entry.head.clone());
        if let Some(message) = self.messages.get(&cache) {
            return Ok(Some(message.clone()));
        }
        let landing = Landing { task: entry.task.clone(), target: self.target.clone(), head, onto };
        let keep = || self.keep_claim().is_err() || (self.opts.cancelled)();
        let summary = self.opts.summarizer.summarize(self.store, &landing, &keep)?;
        if let Summary::Failed(why) = summary {
            let reason = format!("its landing message could not be written: {why}");
            self.fail(entry, "summary", reason, Vec::new(), None, onto)?;
            return Ok(None);
        }
        let branch = refs::short_branch(&refs::task_branch(&entry.task.parse()?)).to_owned();
        let message = summary::message(&summary, &entry.task, &branch, &entry.title);
        self.messages.insert(cache, message.clone());
        Ok(Some(message))
    }

    /// Run the checks on `candidate` in the landing worktree.
    fn check(&mut self, command: &str, candidate: ObjectId) -> Result<checks::Ran> {
        let dir = worktree::prepare(self.store, &self.target, candidate, &mut self.worktree)?;
        let log = self.store.layout()?.landing_log(lander_key(&self.target).name());
        if let Some(parent) = log.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
        }
        // One log per run: the guard appends, and a failure's tail must be its own.
        let _ = std::fs::remove_file(&log);
        let env = vec![
            ("GIT_LOOP_LANDING".to_owned(), refs::short_branch(&self.target).to_owned()),
            ("GIT_LOOP_CANDIDATE".to_owned(), candidate.to_string()),
        ];
        let refresh_failed = std::cell::Cell::new(false);
        let cancelled = || {
            if self.keep_claim().is_err() {
                refresh_failed.set(true);
                return true;
            }
            (self.opts.cancelled)()
        };
        let runner = checks::Runner {
            exe: &self.opts.exe,
            parent: self.ctx.pid,
            grace: self.opts.grace,
            timeout: self.opts.checks_timeout,
            cancelled: &cancelled,
            sandbox: self.opts.sandbox,
        };
        let ran = checks::run(self.store, &runner, "checks", command, &dir, &env, &log)?;
        if refresh_failed.get() {
            self.keep_claim()?;
        }
        if (self.opts.cancelled)() {
            return Err(Refusal::new(Class::Refused, "the landing was interrupted")
                .hint("what landed before stays; run 'git loop land' again")
                .into());
        }
        Ok(ran)
    }

    /// Why `entry` fails its checks, for a person: the exit, the tail of the output, and where
    /// the whole output is kept.
    fn checks_failure(&self, entry: &Queued, ran: &checks::Ran) -> Result<(String, String)> {
        let kept = self.store.layout()?.landing_failure_log(&entry.task);
        std::fs::copy(&ran.log, &kept)
            .with_context(|| format!("could not keep the checks' output at '{}'", kept.display()))?;
        let text = std::fs::read(&kept).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(5)..].join(" / ");
        let exit = ran.exit.map(|e| e.to_string()).unwrap_or_else(|| "stopped".into());
        let resolved = match self.resolved_by.get(&entry.task) {
            Some(session) => format!(" as resolved by session {session}"),
            None => String::new(),
        };
        let reason = format!(
            "the checks fail on its merge into {}{resolved} ({exit}): {}; output: {}",
            refs::short_branch(&self.target),
            if tail.is_empty() { "no output".to_owned() } else { tail },
            kept.display()
        );
        Ok((reason, kept.display().to_string()))
    }

    /// Record that `entry` cannot land: a `landing_failed` event, and the task to needs-you.
    fn fail(
        &mut self,
        entry: &Queued,
        cause: &str,
        reason: String,
        paths: Vec<String>,
        log: Option<String>,
        onto: ObjectId,
    ) -> Result<()> {
        let id: TaskId = entry.task.parse()?;
        backlog::record(
            self.store,
            self.ctx,
            Some(&id),
            Recorded::LandingFailed(events::LandingFailed {
                into: self.target.clone(),
                cause: cause.to_owned(),
                reason: reason.clone(),
                paths: paths.clone(),
                log: log.clone(),
                head: entry.head.clone(),
                onto: onto.to_string(),
                lander: self.opts.holder.clone(),
            }),
        )?;
        let mut transition = backlog::Transition::to(State::NeedsYou, Some(reason.clone()));
        transition.from = vec![State::Done];
        match backlog::transition(self.store, self.ctx, &id, transition) {
            Ok(_) => {}
            // A person changed it meanwhile: their word stands.
            Err(err) if crate::error::find_refusal(&err).is_some() => {}
            Err(err) => return Err(err),
        }
        self.failed_ids.insert(entry.task.clone());
        self.report.failed.push(Failed {
            task: entry.task.clone(),
            cause: cause.to_owned(),
            reason,
            paths,
            log,
            on: None,
        });
        Ok(())
    }

    /// Move the target from `from` to `to`, which holds `merged`: the local branch by
    /// compare-and-swap (its clean worktree brought along), or the remote's by a push with a
    /// lease. Then record each landing.
    fn advance(&mut self, from: ObjectId, to: ObjectId, merged: &[(Queued, ObjectId)]) -> Result<Advance> {
        self.keep_claim()?;
        let why = format!("loop: land {}", merged.iter().map(|(q, _)| q.task.as_str()).collect::<Vec<_>>().join(", "));
        let moved = match &self.remote {
            Some(remote_name) => remote::swap_branch(self.store, remote_name, &self.target, from, to)?,
            None => worktree::move_local(self.store, &self.target, from, to, &why)?,
        };
        if let Cas::Lost { .. } = moved {
            return Ok(Advance::Lost);
        }
        self.tip = Some(to);
        let at = self.ctx.now();
        let mut notes = Vec::new();
        let ids: Vec<TaskId> = merged.iter().map(|(q, _)| q.task.parse()).collect::<Result<_, _>>()?;
        let mut recorded = Vec::new();
        for ((entry, _), id) in merged.iter().zip(&ids) {
            recorded.push((
                Some(id),
                Recorded::TaskLanded(events::TaskLanded {
                    into: self.target.clone(),
                    commit: to.to_string(),
                    head: entry.head.clone(),
                    from: Some(from.to_string()),
                    batch: merged.len(),
                    checks: self.opts.checks.clone(),
                    lander: self.opts.holder.clone(),
                }),
            ));
            // The completion note is on the commit the task was done with.
            let completed_on = entry.completed_on.as_deref().and_then(|c| ObjectId::from_hex(c.as_bytes()).ok());
            if let Some(commit) = completed_on {
                let landed = notes::Landed { into: self.target.clone(), commit: to.to_string(), at, request: None };
                notes.push((commit, entry.task.clone(), landed));
            }
            self.report.landed.push(Landed {
                task: entry.task.clone(),
                commit: to.to_string(),
                batch: merged.len(),
                on: None,
            });
        }
        backlog::record_all(self.store, self.ctx, recorded)?;
        notes::set_landed(self.store, &notes)?;
        Ok(Advance::Moved)
    }

    /// With `loop.remote`: the local target branch follows the remote's when it is behind it
    /// (its clean worktree too); otherwise it is left alone, and the report says why.
    fn follow_locally(&mut self) -> Result<()> {
        let Some(tip) = self.tip else { return Ok(()) };
        let Some(local) = self.store.ref_target(&self.target)? else { return Ok(()) };
        if local == tip {
            return Ok(());
        }
        let name = refs::short_branch(&self.target).to_owned();
        if !self.store.is_ancestor(local, tip)? {
            self.report.notes.push(format!("the local {name} has commits of its own: it was left where it is"));
            return Ok(());
        }
        match worktree::dirty_checkout(self.store, &self.target)? {
            Some((path, _)) => self.report.notes.push(format!(
                "the local {name} is checked out with changes in {}: it was left behind the remote's",
                path.display()
            )),
            None => {
                if worktree::move_local(self.store, &self.target, local, tip, "loop: follow the landed target")?
                    != Cas::Applied
                {
                    self.report.notes.push(format!("the local {name} moved meanwhile: it was left where it is"));
                }
            }
        }
        Ok(())
    }

    fn drop_worktree(&mut self) {
        if let Some(dir) = self.worktree.take() {
            worktree::remove(self.store, &dir);
        }
    }
}

/// Where the local landing target stands against the remote's (`sync`'s offer to bring it
/// along).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// The same commit, or ours is ahead (the remote's is in its history).
    UpToDate,
    /// The remote's is ahead and the local branch is in its history: it can fast-forward.
    /// `checkout`: the worktree that has it checked out, if one does, and whether it is clean.
    Behind { local: ObjectId, remote: ObjectId, checkout: Option<(PathBuf, bool)> },
    /// The remote's is a commit this clone has not fetched: whether ours is in its history is
    /// known once it is (`apply` fetches it).
    Unfetched { remote: ObjectId },
    /// Fast-forwarded to the remote's (its clean checkout brought along).
    FastForwarded { from: ObjectId, to: ObjectId },
    /// The local branch has commits of its own: it is left alone.
    Diverged,
    /// The remote has no such branch, or the local one does not exist.
    Absent,
}

/// The local landing target (`target(None)`) against the remote's: listed on `remote` (nothing
/// fetched, no ref written) to judge; with `apply`, fetched, and a branch that is behind
/// fast-forwarded by compare-and-swap, a worktree that has it checked out following it (`git
/// read-tree -m -u`) — unless that worktree has changes, which are never touched (then
/// `Behind` says so). The target's short name comes with it.
pub fn follow_remote(store: &Store, remote_name: &str, apply: bool) -> Result<(String, Standing)> {
    let target = target(store, None)?;
    let name = refs::short_branch(&target).to_owned();
    let listed = remote::list(store, remote_name, &target)?.into_iter().find(|(n, _)| *n == target).map(|(_, id)| id);
    let (Some(local), Some(listed)) = (store.ref_target(&target)?, listed) else {
        return Ok((name, Standing::Absent));
    };
    if local == listed {
        return Ok((name, Standing::UpToDate));
    }
    let theirs = if apply {
        match remote::read_branch(store, remote_name, &target)? {
            Some(theirs) => theirs,
            None => return Ok((name, Standing::Absent)),
        }
    } else if store.has_object(listed) {
        listed
    } else {
        return Ok((name, Standing::Unfetched { remote: listed }));
    };
    if store.is_ancestor(theirs, local)? {
        return Ok((name, Standing::UpToDate));
    }
    if !store.is_ancestor(local, theirs)? {
        return Ok((name, Standing::Diverged));
    }
    let checkout = match tries::checked_out_in(store, &target)? {
        Some(path) => {
            let clean = worktree::dirty_checkout(store, &target)?.is_none();
            Some((path, clean))
        }
        None => None,
    };
    let clean = checkout.as_ref().is_none_or(|(_, clean)| *clean);
    if !apply || !clean {
        return Ok((name, Standing::Behind { local, remote: theirs, checkout }));
    }
    Ok(match worktree::move_local(store, &target, local, theirs, "loop: sync: fast-forward")? {
        Cas::Applied => (name, Standing::FastForwarded { from: local, to: theirs }),
        // Moved meanwhile: judged again next time.
        Cas::Lost { .. } => (name, Standing::Behind { local, remote: theirs, checkout }),
    })
}

/// The last landing failure recorded on `target` in `entries` (the journal's, oldest first): the
/// task, when, and the event; a failure whose task landed there since is answered, and not the
/// last.
pub fn last_failure(
    entries: &[crate::store::journal::Entry],
    target: &str,
) -> Option<(String, DateTime<Utc>, events::LandingFailed)> {
    let mut landed_since: HashSet<String> = HashSet::new();
    for entry in entries.iter().rev() {
        let task = entry.event.task.clone().unwrap_or_default();
        match Recorded::of(&entry.event) {
            Recorded::TaskLanded(landed) if landed.into == target => {
                landed_since.insert(task);
            }
            Recorded::LandingFailed(failed) if failed.into == target && !landed_since.contains(&task) => {
                return Some((task, entry.event.at, failed));
            }
            _ => {}
        }
    }
    None
}

/// The landing queue as `status` and `show` present it.
#[derive(Debug, Clone)]
pub struct View {
    /// The target (full ref name).
    pub into: String,
    /// The target's commit as this clone knows it.
    pub tip: Option<ObjectId>,
    /// Done tasks waiting to land, in order (those waiting for a dependency last).
    pub queue: Vec<Queued>,
    /// The lander at work on the target, if any.
    pub lander: Option<Held>,
    /// The last landing failure on the target: the task, when, and the event.
    pub last_failure: Option<(String, DateTime<Utc>, events::LandingFailed)>,
    /// Through the forge: the requests the journal knows open.
    pub requests: Vec<request::Known>,
    /// With `loop.epicBranch`: each epic's branch (full ref name) with the children waiting to
    /// land on it.
    pub epics: Vec<(String, Vec<Queued>)>,
}

/// The landing queue of the default target (`None`: there is no target to land on, such as a
/// detached `HEAD` without `loop.mergeInto`).
pub fn view(store: &Store, ctx: &Context) -> Result<Option<View>> {
    let Ok(into) = target(store, None) else { return Ok(None) };
    let mut view = view_of(store, ctx, into)?;
    view.epics = epic::queues(store, ctx)?;
    Ok(Some(view))
}

/// The landing queue of `into` (full ref name): the default target's, or an epic's branch.
pub fn view_of(store: &Store, ctx: &Context, into: String) -> Result<View> {
    let tip = known_tip(store, &into)?;
    let journal = crate::store::journal::timeline(store, &crate::store::journal::Filter::default())?;
    Ok(View {
        queue: queue(store, ctx, &into, tip, &[], Seen::Synced)?,
        lander: lander(store, &into)?,
        last_failure: last_failure(&journal.entries, &into),
        requests: request::known_in(&journal.entries).into_iter().filter(|k| k.state == "open").collect(),
        epics: Vec::new(),
        tip,
        into,
    })
}
