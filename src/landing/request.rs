//! Landing through the forge (`loop.land = pr`, `land --via pr`, `run --land --via pr`): where
//! the target is protected and work reaches it only through a pull request (GitHub,
//! Forgejo/Gitea) or a merge request (GitLab), gated by the forge's CI and reviews.
//!
//! One run, under the same lander claim as the queue's own landing (one lander per target):
//! 1. The forge of the remote (`loop.remote`, else `origin`) and its token, before anything.
//! 2. With `loop.remote`, sync; read the remote's target. The queue: done tasks whose work is
//!    not in it and that no completion note says landed.
//! 3. For each, in the queue's order: its request — the one the journal names (`pr_opened`),
//!    else one the forge has from its branch (`loop.forge.branch`, default `loop/<id>`: opened
//!    by a run that stopped, or by another clone; journaled as found), else a new one: the task
//!    branch's head pushed there (a push with a lease; a branch a person pushed commits of their
//!    own to is left alone, and said), and the request opened with its summarizer's title and
//!    body (else the task's), the task's id, its tries, the checks' verdict and its cost.
//! 4. Read back: a merged request lands its task (`pr_merged`, `task_landed`, the completion
//!    note's landing); a closed one parks it with why (`pr_closed`); on an open one, the
//!    forge's CI verdict on its head (`pr_checks`, once per head and verdict) and each new review
//!    (`pr_review`, once per review). Failing CI or changes requested send the task back to its
//!    agent, the forge's words the next session's note (as a review round does), up to
//!    `loop.reviewRounds`; after that it goes to needs-you with them. A task done again has its
//!    new head pushed to the same request.
//! 5. A dependency whose request is not merged: the task waits (`loop.forge.stack = wait`), or
//!    (`stack`) its request opens on the dependency's branch and is retargeted onto the target
//!    once that one merged.
//!
//! Nothing is half-done by a failure: each step is journaled after the forge confirmed it, and
//! the next run finds what the forge has (by branch) before it opens anything.

use anyhow::Result;
use gix::ObjectId;

use super::{queue, Failed, Landed, LanderClaim, Options, Outcome, Queued, Report, Seen};
use crate::backlog;
use crate::context::Context;
use crate::error::{usage, Class, Refusal};
use crate::forge::{self, Forge, NewRequest, Request, RequestState, ReviewState, Verdict};
use crate::ids::TaskId;
use crate::refs;
use crate::store::cas::{Cas, Expect};
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, Entry};
use crate::store::notes;
use crate::store::task::State;
use crate::store::{remote, sync, Store};

/// A request as one landing run saw it: as the journal will know it, and more.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Requested {
    #[serde(flatten)]
    pub known: Known,
    /// The branch it merges into (short name).
    pub base: String,
    /// Opened by this run (else found, or known from the journal).
    pub opened: bool,
}

/// The remote requests are opened on: `loop.remote`, else `origin`.
pub fn remote_of(store: &Store) -> Result<String> {
    if let Some(name) = store.arbiter() {
        return Ok(name);
    }
    if store.config("remote.origin.url").is_some() {
        return Ok("origin".into());
    }
    Err(usage("landing through a pull request needs a remote, and this repository has none")
        .hint("add the forge's repository: git remote add origin <url> (or set loop.remote)")
        .into())
}

/// Land done work on `target` through the forge's requests (see the module's note).
pub fn land(store: &Store, ctx: &Context, opts: &Options<'_>, target: String) -> Result<Outcome> {
    let remote_name = remote_of(store)?;
    let forge = forge::connect(store, &remote_name)?;
    let settings = store.settings();
    let rounds = settings.review_rounds()?.max(1);
    let stack = settings.forge_stack()?;
    let reason =
        format!("landing on {} through {} (pid {})", refs::short_branch(&target), forge.place().kind.word(), ctx.pid);
    // Refreshed between requests; long enough to outlast a rate-limit wait in one call.
    let wait = chrono::Duration::from_std(settings.forge_wait()?).unwrap_or_default();
    let claim = match LanderClaim::take(store, ctx, &target, &opts.holder, reason, super::LEASE + wait)? {
        Ok(claim) => claim,
        Err(other) => return Ok(Outcome::Busy(Box::new(other))),
    };
    let arbiter = store.arbiter();
    if let Some(name) = &arbiter {
        sync::sync(store, ctx, name)?;
    }
    let tip = remote::read_branch(store, &remote_name, &target)?.ok_or_else(|| {
        usage(format!("remote '{remote_name}' has no branch '{}' to open requests on", refs::short_branch(&target)))
            .hint("push it first, or land on another with --into <branch>")
    })?;
    let mut run = Run {
        store,
        ctx,
        opts,
        forge: forge.as_ref(),
        remote: remote_name,
        target: target.clone(),
        tip,
        rounds,
        stack,
        claim,
        report: Report {
            into: refs::short_branch(&target).to_owned(),
            on: forge.place().kind.word().to_owned(),
            checks: opts.checks.clone(),
            landed: Vec::new(),
            failed: Vec::new(),
            waiting: Vec::new(),
            target: Some(tip.to_string()),
            notes: Vec::new(),
            requests: Vec::new(),
        },
    };
    let mut queued = queue(store, ctx, &target, Some(tip), &opts.only, Seen::Synced)?;
    // A request merged since the last run put the task's work in the target, which takes it
    // out of the queue: it is read back all the same, first (its dependants see it landed).
    let listed: std::collections::HashSet<String> = queued.iter().map(|q| q.task.clone()).collect();
    let wanted = |id: &TaskId| opts.only.is_empty() || opts.only.contains(id);
    let merged_since: Vec<TaskId> =
        open_requests(store)?.into_iter().filter(|id| !listed.contains(id.as_str()) && wanted(id)).collect();
    if !merged_since.is_empty() {
        let mut first = queue(store, ctx, &target, None, &merged_since, Seen::Synced)?;
        first.append(&mut queued);
        queued = first;
    }
    let mut unlanded: std::collections::HashSet<String> = queued.iter().map(|q| q.task.clone()).collect();
    for entry in &queued {
        if (opts.cancelled)() {
            return Err(Refusal::new(Class::Interrupted, "the landing was interrupted")
                .hint("what the forge has stays; run 'git loop land' again")
                .into());
        }
        // Through the forge nothing lands before its request merges: a dependency done but
        // not merged holds its dependants back (or under them, stacked).
        run.claim.keep(store, ctx)?;
        let mut entry = entry.clone();
        for dep in &entry.after {
            if unlanded.contains(dep) && !entry.waiting_for.contains(dep) {
                entry.waiting_for.push(dep.clone());
            }
        }
        run.one(&entry)?;
        for landed in &run.report.landed {
            unlanded.remove(&landed.task);
        }
    }
    if let Some(name) = &arbiter {
        sync::sync(store, ctx, name)?;
    }
    Ok(Outcome::Ran(Box::new(run.report)))
}

struct Run<'r> {
    store: &'r Store,
    ctx: &'r Context,
    opts: &'r Options<'r>,
    forge: &'r dyn Forge,
    remote: String,
    target: String,
    tip: ObjectId,
    rounds: u32,
    stack: bool,
    claim: LanderClaim<'r>,
    report: Report,
}

/// The tasks whose request the journal says is open (opened, and neither merged nor closed).
pub fn open_requests(store: &Store) -> Result<Vec<TaskId>> {
    let timeline = journal::timeline(store, &journal::Filter::default())?;
    Ok(known_in(&timeline.entries)
        .into_iter()
        .filter(|k| k.state == "open")
        .filter_map(|k| k.task.parse().ok())
        .collect())
}

/// A task's request as the journal knows it (`status`, `show`, the board).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Known {
    pub task: String,
    pub forge: String,
    pub number: u64,
    pub url: String,
    /// `open`, `merged` or `closed`.
    pub state: String,
    /// The last CI verdict said on it: `none`, `pending`, `passing` or `failing`.
    pub checks: String,
    /// The last review that counts: `approved` or `changes_requested`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<String>,
}

impl Known {
    /// "pull request #12 open · checks failing · changes requested · <url>".
    pub fn line(&self) -> String {
        let (what, sign) = if self.forge == "gitlab" { ("merge request", "!") } else { ("pull request", "#") };
        let mut parts = vec![format!("{what} {sign}{} {}", self.number, self.state)];
        if self.state == "open" {
            parts.push(format!("checks {}", self.checks));
            if let Some(review) = &self.review {
                parts.push(review.replace('_', " "));
            }
        }
        if !self.url.is_empty() {
            parts.push(self.url.clone());
        }
        parts.join(" · ")
    }
}

/// Every task's last request in `entries` (a journal's, oldest first), by task.
pub fn known_in(entries: &[Entry]) -> Vec<Known> {
    let mut by_task: std::collections::BTreeMap<String, Known> = std::collections::BTreeMap::new();
    for entry in entries {
        let Some(task) = entry.event.task.clone() else { continue };
        match Recorded::of(&entry.event) {
            Recorded::PrOpened(o) => {
                let known = Known {
                    task: task.clone(),
                    forge: o.forge,
                    number: o.number,
                    url: o.url,
                    state: "open".into(),
                    checks: "none".into(),
                    review: None,
                };
                by_task.insert(task, known);
            }
            Recorded::PrChecks(c) => {
                if let Some(k) = by_task.get_mut(&task).filter(|k| k.number == c.number) {
                    k.checks = c.verdict;
                }
            }
            Recorded::PrReview(r) if r.state != "commented" => {
                if let Some(k) = by_task.get_mut(&task).filter(|k| k.number == r.number) {
                    k.review = Some(r.state);
                }
            }
            Recorded::PrMerged(m) => {
                if let Some(k) = by_task.get_mut(&task).filter(|k| k.number == m.number) {
                    k.state = "merged".into();
                }
            }
            Recorded::PrClosed(c) => {
                if let Some(k) = by_task.get_mut(&task).filter(|k| k.number == c.number) {
                    k.state = "closed".into();
                }
            }
            Recorded::TaskLanded(_) => {
                if let Some(k) = by_task.get_mut(&task).filter(|k| k.state == "open") {
                    k.state = "merged".into();
                }
            }
            _ => {}
        }
    }
    by_task.into_values().collect()
}

/// The last request the journal names for a task, and whether it was closed since.
fn known(history: &[Entry]) -> Option<(u64, bool)> {
    let mut out = None;
    for entry in history {
        match Recorded::of(&entry.event) {
            Recorded::PrOpened(opened) => out = Some((opened.number, false)),
            Recorded::PrClosed(closed) if out.is_some_and(|(n, _)| n == closed.number) => {
                out = Some((closed.number, true))
            }
            _ => {}
        }
    }
    out
}

impl Run<'_> {
    fn history(&self, task: &str) -> Result<Vec<Entry>> {
        let filter = journal::Filter { task: Some(task.to_owned()), session: None };
        Ok(journal::timeline(self.store, &filter)?.entries)
    }

    fn record(&self, id: &TaskId, event: Recorded) -> Result<()> {
        backlog::record(self.store, self.ctx, Some(id), event)
    }

    /// Open, or read back, the request of one queued task.
    fn one(&mut self, entry: &Queued) -> Result<()> {
        let id: TaskId = entry.task.parse()?;
        let history = self.history(&entry.task)?;
        let branch = self.store.settings().forge_branch(id.as_str())?;
        let target_short = refs::short_branch(&self.target).to_owned();
        let base = match self.base_for(entry)? {
            Some(base) => base,
            None => {
                self.report.waiting.push(entry.clone());
                return Ok(());
            }
        };
        let found = match known(&history) {
            // Closed, and the task done again since: a new request.
            Some((_, true)) => self.forge.find(&branch)?.filter(|r| r.state != RequestState::Closed),
            Some((number, false)) => Some(self.forge.get(number)?),
            None => self.forge.find(&branch)?,
        };
        let head = ObjectId::from_hex(entry.head.as_bytes())?;
        let (request, opened) = match found {
            Some(request) => {
                if known(&history).is_none_or(|(n, _)| n != request.number) {
                    self.record(&id, self.opened_event(&request, &branch, head, true))?;
                }
                (request, false)
            }
            None => {
                if !self.push(&id, &branch, head)? {
                    return Ok(());
                }
                let (title, body) = self.describe(entry, head, &history)?;
                let request =
                    self.forge.open(&NewRequest { branch: &branch, base: &base, title: &title, body: &body })?;
                // The forge has it now: a crash before it is journaled is found again by branch.
                crate::failpoint::write_point();
                self.record(&id, self.opened_event(&request, &branch, head, false))?;
                (request, true)
            }
        };
        self.read_back(entry, &id, request, &branch, &target_short, opened, &history)
    }

    /// The branch `entry`'s request merges into: the target, or (stacked) the branch of the
    /// one dependency it waits for whose request is open. `None`: it waits.
    fn base_for(&self, entry: &Queued) -> Result<Option<String>> {
        let target = refs::short_branch(&self.target).to_owned();
        if entry.waiting_for.is_empty() {
            return Ok(Some(target));
        }
        if !self.stack || entry.waiting_for.len() != 1 {
            return Ok(None);
        }
        let dep = &entry.waiting_for[0];
        match known(&self.history(dep)?) {
            Some((_, false)) => Ok(Some(self.store.settings().forge_branch(dep)?)),
            _ => Ok(None),
        }
    }

    fn opened_event(&self, request: &Request, branch: &str, head: ObjectId, found: bool) -> Recorded {
        Recorded::PrOpened(events::PrOpened {
            forge: self.forge.place().kind.word().to_owned(),
            number: request.number,
            url: request.url.clone(),
            branch: branch.to_owned(),
            into: self.target.clone(),
            head: head.to_string(),
            found,
        })
    }

    /// Push `head` to the request branch on the remote, unless it is there. False (and said):
    /// the branch has commits the task's does not (a person pushed to it): left alone.
    fn push(&mut self, id: &TaskId, branch: &str, head: ObjectId) -> Result<bool> {
        let full = format!("refs/heads/{branch}");
        let listed =
            remote::list(self.store, &self.remote, &full)?.into_iter().find(|(n, _)| *n == full).map(|(_, id)| id);
        if listed == Some(head) {
            return Ok(true);
        }
        if let Some(there) = listed {
            let ours = self.store.has_object(there) && self.store.is_ancestor(there, head)?;
            if !ours {
                self.branch_taken(id, branch);
                return Ok(false);
            }
        }
        let expect = listed.map_or(Expect::Absent, Expect::Is);
        match remote::push_branch(self.store, &self.remote, &full, expect, head)? {
            Cas::Applied => Ok(true),
            Cas::Lost { .. } => {
                self.branch_taken(id, branch);
                Ok(false)
            }
        }
    }

    /// `task` did not land, and why (`cause`: `branch`, `closed`, `sent_back`, `forge`).
    fn failed(&mut self, task: String, cause: &str, reason: String) {
        self.report.failed.push(Failed {
            task,
            cause: cause.to_owned(),
            reason,
            paths: Vec::new(),
            log: None,
            on: None,
        });
    }

    fn branch_taken(&mut self, id: &TaskId, branch: &str) {
        let reason = format!(
            "the request branch '{branch}' on {} has commits the task's branch does not: it was left as it is",
            self.remote
        );
        self.failed(id.to_string(), "branch", reason);
    }

    /// The request's title and body: the summarizer's (else the loop's own) message, and what
    /// the task took.
    fn describe(&self, entry: &Queued, head: ObjectId, history: &[Entry]) -> Result<(String, String)> {
        let landing = super::Landing { task: entry.task.clone(), target: self.target.clone(), head, onto: self.tip };
        let keep = || self.claim.keep(self.store, self.ctx).is_err() || (self.opts.cancelled)();
        // Its summarizer's subject and body; without one (or one that could not write), the
        // task's title.
        let (subject, mut body) = match self.opts.summarizer.summarize(self.store, &landing, &keep)? {
            super::Summary::Written { subject, body, .. } if !subject.is_empty() => (subject, body.trim().to_owned()),
            _ => (entry.title.lines().next().unwrap_or_default().to_owned(), String::new()),
        };
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        let tries = history
            .iter()
            .filter(|e| matches!(Recorded::of(&e.event), Recorded::TryOpened(t) if !t.resumed && !t.race))
            .count();
        let sessions = history.iter().filter(|e| matches!(Recorded::of(&e.event), Recorded::SessionStarted(_))).count();
        let checks = history.iter().rev().find_map(|e| match Recorded::of(&e.event) {
            Recorded::Checks(c) => Some(c),
            _ => None,
        });
        let checks = match (checks, &self.opts.checks) {
            (Some(c), Some(cmd)) if c.passed => format!("passed on try {} (`{}`)", c.number, cell(cmd)),
            (Some(c), None) if c.passed => format!("passed on try {}", c.number),
            (Some(c), _) => format!("failed on try {} ({})", c.number, c.exit.unwrap_or_default()),
            (None, _) => "none ran".into(),
        };
        let spent = crate::store::ledger::total_of(history);
        let cost = if spent.sessions == 0 { "nothing recorded".into() } else { spent.describe() };
        body.push_str(&format!(
            "| git-loop | |\n|---|---|\n| Task | `{}` {} |\n| Tries | {} ({} session{}) |\n| Checks | {} |\n| Cost | {} |\n\nMerging this request lands the task; closing it parks the task.\n<!-- git-loop task={} -->\n",
            entry.task,
            cell(&entry.title),
            tries.max(1),
            sessions,
            if sessions == 1 { "" } else { "s" },
            checks,
            cell(&cost),
            entry.task
        ));
        Ok((subject.trim().to_owned(), body))
    }

    /// What the forge says of `request` now, journaled once each, and acted on.
    #[allow(clippy::too_many_arguments)]
    fn read_back(
        &mut self,
        entry: &Queued,
        id: &TaskId,
        mut request: Request,
        branch: &str,
        target_short: &str,
        opened: bool,
        history: &[Entry],
    ) -> Result<()> {
        let kind = self.forge.place().kind;
        let name = format!("{} {}{}", kind.request_word(), kind.sign(), request.number);
        let mut seen = Requested {
            known: Known {
                task: entry.task.clone(),
                forge: kind.word().to_owned(),
                number: request.number,
                url: request.url.clone(),
                state: request.state.word().to_owned(),
                checks: Verdict::None.word().to_owned(),
                review: None,
            },
            base: request.base.clone(),
            opened,
        };
        match request.state {
            RequestState::Merged => {
                let commit = request.merge_commit.clone().unwrap_or_default();
                self.record(
                    id,
                    Recorded::PrMerged(events::PrMerged {
                        number: request.number,
                        commit: commit.clone(),
                        by: request.by.clone(),
                    }),
                )?;
                self.landed(entry, id, &commit, &format!("{name} {}", request.url))?;
                self.report.requests.push(seen);
                return Ok(());
            }
            RequestState::Closed => {
                let by = request.by.clone().map(|b| format!(" by {b}")).unwrap_or_default();
                let reason = format!("its {name} was closed{by} without merging: {}", request.url);
                self.record(
                    id,
                    Recorded::PrClosed(events::PrClosed {
                        number: request.number,
                        by: request.by.clone(),
                        reason: reason.clone(),
                    }),
                )?;
                self.to_state(id, State::Parked, &reason)?;
                self.failed(entry.task.clone(), "closed", reason);
                self.report.requests.push(seen);
                return Ok(());
            }
            RequestState::Open => {}
        }
        // A task done again since: its new head goes to the same request.
        let head = ObjectId::from_hex(entry.head.as_bytes())?;
        if request.head != entry.head {
            if !self.push(id, branch, head)? {
                self.report.requests.push(seen);
                return Ok(());
            }
            request.head = entry.head.clone();
        }
        // Stacked on a dependency that merged since: onto the target now.
        if request.base != target_short && entry.waiting_for.is_empty() {
            self.forge.retarget(&request, target_short)?;
            seen.base = target_short.to_owned();
        }
        let checks = self.forge.checks(&request)?;
        let reviews = self.forge.reviews(&request)?;
        seen.known.checks = checks.verdict.word().to_owned();
        seen.known.review =
            reviews.iter().rev().find(|r| r.state != ReviewState::Commented).map(|r| r.state.word().to_owned());
        // What was said already: reviews by id, verdicts by head.
        let mut said_reviews = std::collections::HashSet::new();
        let mut said_verdict = None;
        let mut sent_back = 0u32;
        for e in history {
            match Recorded::of(&e.event) {
                Recorded::PrReview(r) => {
                    said_reviews.insert(r.id.clone());
                    sent_back += u32::from(r.sent_back);
                }
                Recorded::PrChecks(c) => {
                    sent_back += u32::from(c.sent_back);
                    if c.head == request.head {
                        said_verdict = Some(c.verdict.clone());
                    }
                }
                _ => {}
            }
        }
        let mut words = Vec::new();
        let fresh: Vec<_> = reviews.iter().filter(|r| !said_reviews.contains(&r.id)).collect();
        let changes: Vec<_> = fresh.iter().filter(|r| r.state == ReviewState::ChangesRequested).collect();
        let failing = checks.verdict == Verdict::Failing && said_verdict.as_deref() != Some("failing");
        if failing {
            words.push(format!(
                "The forge's checks fail on {name}:\n{}",
                checks.failing.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n")
            ));
        }
        for r in &changes {
            let body = if r.body.trim().is_empty() { "(no words)".to_owned() } else { r.body.trim().to_owned() };
            words.push(format!("{} asked for changes on {name}:\n{body}", r.by));
        }
        let send_back = !words.is_empty();
        if said_verdict.as_deref() != Some(checks.verdict.word()) {
            self.record(
                id,
                Recorded::PrChecks(events::PrChecks {
                    number: request.number,
                    head: request.head.clone(),
                    verdict: checks.verdict.word().to_owned(),
                    failing: checks.failing.clone(),
                    sent_back: failing,
                }),
            )?;
        }
        for r in &fresh {
            let back = r.state == ReviewState::ChangesRequested;
            self.record(
                id,
                Recorded::PrReview(events::PrReview {
                    number: request.number,
                    id: r.id.clone(),
                    state: r.state.word().to_owned(),
                    by: r.by.clone(),
                    body: r.body.clone(),
                    sent_back: back && !failing,
                }),
            )?;
        }
        if send_back {
            let round = sent_back + 1;
            let said = words.join("\n\n");
            if round > self.rounds {
                let reason = format!(
                    "{} round{} on the forge without merging; last: {said}",
                    self.rounds,
                    if self.rounds == 1 { "" } else { "s" }
                );
                self.to_state(id, State::NeedsYou, &reason)?;
                self.failed(entry.task.clone(), "forge", reason);
            } else {
                let reason = format!("sent back from {name} (round {round} of {}): {said}", self.rounds);
                self.to_state(id, State::Open, &reason)?;
                self.failed(entry.task.clone(), "sent_back", reason);
            }
        }
        self.report.requests.push(seen);
        Ok(())
    }

    /// Record that `entry` landed with `commit`: the journal's `task_landed`, and the
    /// completion note's landing (which tells every clone, before it fetches the target).
    fn landed(&mut self, entry: &Queued, id: &TaskId, commit: &str, request: &str) -> Result<()> {
        self.record(
            id,
            Recorded::TaskLanded(events::TaskLanded {
                into: self.target.clone(),
                commit: commit.to_owned(),
                head: entry.head.clone(),
                from: None,
                batch: 1,
                checks: Some(format!("{} CI", self.forge.place().kind.word())),
                lander: self.opts.holder.clone(),
            }),
        )?;
        let completed_on = entry.completed_on.as_deref().and_then(|c| ObjectId::from_hex(c.as_bytes()).ok());
        if let Some(on) = completed_on {
            let landed = notes::Landed {
                into: self.target.clone(),
                commit: commit.to_owned(),
                at: self.ctx.now(),
                request: Some(request.to_owned()),
            };
            notes::set_landed(self.store, &[(on, entry.task.clone(), landed)])?;
        }
        self.report.landed.push(Landed { task: entry.task.clone(), commit: commit.to_owned(), batch: 1, on: None });
        Ok(())
    }

    /// Move a done task to `state` with `reason`; a person's change meanwhile stands.
    fn to_state(&self, id: &TaskId, state: State, reason: &str) -> Result<()> {
        let mut transition = backlog::Transition::to(state, Some(reason.to_owned()));
        transition.from = vec![State::Done];
        match backlog::transition(self.store, self.ctx, id, transition) {
            Ok(_) => Ok(()),
            Err(err) if crate::error::find_refusal(&err).is_some_and(|r| r.class == Class::Refused) => Ok(()),
            Err(err) => Err(err),
        }
    }
}

/// `text` fit for one cell of a Markdown table: one line, its pipes escaped.
fn cell(text: &str) -> String {
    text.lines().next().unwrap_or_default().replace('|', "\\|").chars().take(200).collect()
}

/// The words the forge sent a task back with, for its next session: the reason of the last
/// state change that sent it back from a request, if no session started since.
pub fn sent_back_note_in(entries: &[Entry]) -> Option<String> {
    let mut note = None;
    for entry in entries {
        match Recorded::of(&entry.event) {
            Recorded::TaskReopened(changed)
                if changed.reason.as_deref().is_some_and(|r| r.starts_with("sent back from ")) =>
            {
                let reason = changed.reason.unwrap_or_default();
                note = Some(format!(
                    "Your work went to the forge as a request, and it came back: {}\n\nMake these changes on your branch, then report done again; the request follows your branch.\n",
                    reason.trim_start_matches("sent back from ")
                ));
            }
            Recorded::SessionStarted(_) => note = None,
            _ => {}
        }
    }
    note
}
