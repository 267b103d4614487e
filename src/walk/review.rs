//! Review rounds: agents that read a try's work and approve it or ask for changes.
//!
//! After a worker reports done and the checks (and the review command, if any) pass, each of
//! the task's reviewers (its own `reviewers`, else the walk's `--reviewer` / `loop.reviewer`) runs
//! one session in the `reviewer` contract, in order, until one asks for changes:
//! - Its checkout is its own: a worktree detached at the try's head, in its session's directory,
//!   removed when it ends. Nothing it changes there is committed, and no branch follows it. An
//!   approval names the tree it read; closing the task checks that the work's tree is still that
//!   tree (`approved_for`), so an approval never carries over to changed work.
//! - Changes: the worker goes on (a continuation, which counts as a session) with the
//!   comments; after `loop.reviewRounds` rounds without approval the task goes to needs-you with
//!   the last comments.
//! - Output that breaks the contract is sent back to the same role once (a new session told
//!   the parse error); a second violation sends the task to needs-you naming it.
//! - A reviewer must not share the worker's provider (`agent::role::provider`): refused before
//!   any session, unless a person overrode the rule with a reason (journaled).
//!
//! Every round is journaled: `review_started` and `review_verdict` (docs/storage.md); the round
//! number is counted from them, so a walk that stops and starts again goes on with the same
//! count.

use anyhow::Result;

use super::unit::{first_line, Ending, GitDispatcher, Launch, Launched, Seat, Step};
use super::Event;
use crate::agent::role::{self, Contract, Report, ReviewVerdict, Role, Violation};
use crate::ids::random_base32;
use crate::refs;
use crate::store::events::{self, Recorded};
use crate::store::journal;
use crate::store::task::{Approval, Task};
use crate::tries;

/// The pairs of the walk's own workers (its agent, `--together`, fallbacks) and reviewers
/// that break the provider rule: (worker, reviewer, why). A reviewer that names no usable role
/// or agent is a usage error.
pub fn walk_conflicts(
    store: &crate::store::Store,
    opts: &super::Options,
    exe: &std::path::Path,
) -> Result<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    if opts.reviewers.is_empty() {
        return Ok(out);
    }
    let agent = |name: &str| -> Result<crate::agent::presets::Agent> {
        if name == opts.agent.name {
            return Ok(opts.agent.clone());
        }
        crate::agent::presets::resolve(store, name, None, exe)
    };
    let mut workers = vec![opts.agent.name.clone()];
    for name in opts.together.iter().chain(&opts.fallback) {
        if !workers.contains(name) {
            workers.push(name.clone());
        }
    }
    for name in &opts.reviewers {
        let reviewer = role::reviewer(store, name)?;
        let r = agent(reviewer.agent.as_deref().unwrap_or_default())?;
        let rp = role::provider(store, &r);
        for worker in &workers {
            let w = agent(worker)?;
            if let Some(why) = role::shares_provider((worker, &role::provider(store, &w)), (&reviewer.label(), &rp)) {
                out.push((worker.clone(), reviewer.label(), why));
            }
        }
    }
    Ok(out)
}

/// What the review of a try's work came to.
#[derive(Debug, Clone)]
pub enum Reviewed {
    /// Every reviewer approved.
    Approved,
    /// A reviewer asked for changes: the worker goes on with this note.
    Changes { note: String },
    /// The task goes to a person: rounds ran out, or a reviewer broke its contract twice.
    ToPerson { message: String },
    /// The review was cut short (the walk interrupted, the claim lost, a person, the race over).
    Stopped(Step),
}

/// What one reviewer's sessions came to.
enum Said {
    Verdict { verdict: ReviewVerdict, comments: String, session: String },
    Broke { problem: String, session: String },
    Stopped(Step),
}

impl GitDispatcher<'_> {
    /// The reviewers of `task`, as roles: its own, else the walk's.
    pub fn reviewers_of(&self, task: &Task) -> Result<Vec<Role>> {
        let names = if task.reviewers.is_empty() { &self.walker.opts.reviewers } else { &task.reviewers };
        Ok(names.iter().map(|n| role::reviewer(self.store, n)).collect::<Result<Vec<_>, _>>()?)
    }

    /// Why `workers` may not be reviewed by `task`'s reviewers (none: they may, or a person
    /// overrode the rule). Checked before a task's first session, so a refused pairing costs
    /// nothing.
    pub fn review_refusal(&self, task: &Task, workers: &[String]) -> Result<Option<String>> {
        let reviewers = match self.reviewers_of(task) {
            Ok(reviewers) => reviewers,
            Err(err) => return Ok(Some(format!("its reviewers cannot be used: {err:#}"))),
        };
        for worker in workers {
            for reviewer in &reviewers {
                if let Some(why) = self.provider_rule(worker, reviewer)? {
                    if let Some(reason) = &self.walker.opts.review_override {
                        self.walker.record(
                            self.store,
                            Some(&task.id),
                            Recorded::ReviewOverride(events::ReviewOverride {
                                reviewer: reviewer.label(),
                                worker: worker.clone(),
                                rule: why,
                                reason: reason.clone(),
                            }),
                        )?;
                        continue;
                    }
                    return Ok(Some(format!(
                        "{why}; a reviewer must not share the worker's provider (override with run --reviewer-override \"<reason>\", or set loop.agent.<name>.provider)"
                    )));
                }
            }
        }
        Ok(None)
    }

    /// What the provider rule says of `worker` reviewed by `reviewer`.
    pub fn provider_rule(&self, worker: &str, reviewer: &Role) -> Result<Option<String>> {
        let reviewer_agent = reviewer.agent.as_deref().unwrap_or_default();
        let w = self.walker.agent(self.store, worker)?;
        let r = self.walker.agent(self.store, reviewer_agent)?;
        let (wp, rp) = (role::provider(self.store, &w), role::provider(self.store, &r));
        Ok(role::shares_provider((worker, &wp), (&reviewer.label(), &rp)))
    }

    /// Review the work `seat`'s worker reported done; `None` when the task has no reviewers.
    pub fn agent_review(&self, seat: &Seat<'_>) -> Result<Option<Reviewed>> {
        let (task, try_) = (seat.task, seat.try_);
        let roles = match self.reviewers_of(task) {
            Ok(roles) if roles.is_empty() => return Ok(None),
            Ok(roles) => roles,
            Err(err) => return Ok(Some(Reviewed::ToPerson { message: format!("review: {err:#}") })),
        };
        let head = self
            .store
            .ref_target(&try_.branch)?
            .ok_or_else(|| anyhow::anyhow!("try branch '{}' is missing", try_.branch))?;
        let tree = self.store.commit_tree(head).map(|t| t.to_string()).unwrap_or_default();
        let base = self.store.ref_target(&refs::task_branch(&task.task_id()))?.unwrap_or(head);
        let history = self.walker.task_history(self.store, &task.id)?;
        let (done_rounds, previous) = rounds_so_far(&history, try_.number);
        let round = done_rounds + 1;
        let rounds = self.walker.opts.review_rounds.max(1);
        let mut diffstat = tries::describe_changes(&self.store.diffstat(base, head)?);
        if diffstat.lines().count() > 200 {
            diffstat = diffstat.lines().take(200).collect::<Vec<_>>().join("\n") + "\n  … and more";
        }
        let review =
            Review { seat, round, rounds, head: head.to_string(), tree, base: base.to_string(), diffstat, previous };
        for reviewer in &roles {
            match self.review_by(&review, reviewer)? {
                Said::Stopped(step) => return Ok(Some(Reviewed::Stopped(step))),
                Said::Broke { problem, session } => {
                    self.verdict_event(&review, reviewer, &session, "none", &problem)?;
                    return Ok(Some(Reviewed::ToPerson {
                        message: format!(
                            "review: the reviewer {} broke its contract twice ({problem})",
                            reviewer.label()
                        ),
                    }));
                }
                Said::Verdict { verdict: ReviewVerdict::Approve, comments, session } => {
                    self.verdict_event(&review, reviewer, &session, "approve", &comments)?;
                }
                Said::Verdict { verdict: ReviewVerdict::Changes, comments, session } => {
                    self.verdict_event(&review, reviewer, &session, "changes", &comments)?;
                    if round >= rounds {
                        return Ok(Some(Reviewed::ToPerson {
                            message: format!(
                                "review: {rounds} round{} without approval; {} asked last for:\n{}",
                                if rounds == 1 { "" } else { "s" },
                                reviewer.label(),
                                comments.trim_end()
                            ),
                        }));
                    }
                    return Ok(Some(Reviewed::Changes {
                        note: format!(
                            "The previous session reported done and the checks passed, but the reviewer {} asked for changes (review round {round} of {rounds}):\n\n{}\n\nMake these changes, then report done again.",
                            reviewer.label(),
                            comments.trim_end()
                        ),
                    }));
                }
            }
        }
        Ok(Some(Reviewed::Approved))
    }

    /// One reviewer on the work: a session, and one more if its first broke the contract.
    fn review_by(&self, review: &Review<'_>, reviewer: &Role) -> Result<Said> {
        let seat = review.seat;
        let agent = self.walker.agent(self.store, reviewer.agent.as_deref().unwrap_or_default())?;
        let head: gix::ObjectId = review.head.parse().map_err(|_| anyhow::anyhow!("bad head {}", review.head))?;
        let mut sent_back: Option<String> = None;
        for attempt in 1..=2u32 {
            if let Err(spent) = self.role_may_start(reviewer) {
                return Ok(Said::Stopped(Step::Spent { why: spent.why }));
            }
            let session = format!("s-{}", random_base32(8));
            let checkout = self.store.layout()?.review_checkout(&session);
            tries::add_detached_worktree(self.store, &checkout, head)?;
            // The try's build state, so a reviewer that builds or tests does not start cold.
            self.walker.warm_checkout(self.store, &checkout, seat.try_);
            self.walker.record(
                self.store,
                Some(&seat.task.id),
                Recorded::ReviewStarted(events::ReviewStarted {
                    number: seat.try_.number,
                    round: review.round,
                    rounds: review.rounds,
                    role: reviewer.name.clone(),
                    agent: agent.name.clone(),
                    session: session.clone(),
                    head: review.head.clone(),
                    tree: review.tree.clone(),
                    base: review.base.clone(),
                }),
            )?;
            let launch = Launch {
                session: &session,
                task: seat.task,
                try_: seat.try_,
                worktree: &checkout,
                agent: &agent,
                attempt,
                halt: seat.halt,
                role: Some(reviewer),
                handoff: None,
                commits: false,
                keep: None,
            };
            let launched = self.launch(&launch, &|dir| {
                Ok(review.prompt(reviewer, &crate::agent::record::result_file(dir), sent_back.as_deref()))
            });
            // Whatever it did in its checkout goes with it.
            if let Err(err) = tries::remove_worktree_at(self.store, &checkout) {
                self.walker.observer.event(&Event::Warning {
                    message: format!("could not remove the reviewer's checkout '{}': {err:#}", checkout.display()),
                });
            }
            let Launched { dir, ending, .. } = launched?;
            match ending {
                Ending::Cancelled => return Ok(Said::Stopped(Step::Interrupted)),
                Ending::Lost(reason) => return Ok(Said::Stopped(Step::Lost { reason })),
                Ending::Withdrawn(w) => return Ok(Said::Stopped(Step::Withdrawn(w))),
                Ending::Halted => return Ok(Said::Stopped(Step::Halted)),
                Ending::Exited(_) | Ending::CannotRun(_) | Ending::TimedOut => {}
            }
            let problem = match self.role_report(&session, &dir, reviewer.contract)? {
                Ok(Some(Report::Review(r))) => {
                    return Ok(Said::Verdict { verdict: r.verdict, comments: r.comments, session })
                }
                Ok(Some(_)) => "it reported in another role's contract".to_owned(),
                Ok(None) => format!(
                    "it reported no verdict: neither 'git loop finish approve|changes' nor a {} result file",
                    reviewer.contract.id()
                ),
                Err(Violation(problem)) => problem,
            };
            self.violation(seat.task, &session, reviewer, &problem, attempt == 1)?;
            if attempt == 2 {
                return Ok(Said::Broke { problem, session });
            }
            sent_back = Some(problem);
        }
        unreachable!("the loop returns on its second pass")
    }

    fn verdict_event(
        &self,
        review: &Review<'_>,
        reviewer: &Role,
        session: &str,
        verdict: &str,
        comments: &str,
    ) -> Result<()> {
        let agent = reviewer.agent.clone().unwrap_or_default();
        self.walker.record(
            self.store,
            Some(&review.seat.task.id),
            Recorded::ReviewVerdict(events::ReviewVerdict {
                number: review.seat.try_.number,
                round: review.round,
                rounds: review.rounds,
                role: reviewer.name.clone(),
                agent: agent.clone(),
                session: session.to_owned(),
                tree: review.tree.clone(),
                verdict: verdict.to_owned(),
                comments: comments.to_owned(),
            }),
        )?;
        self.walker.observer.event(&Event::ReviewVerdict {
            task: review.seat.task.id.clone(),
            round: review.round,
            rounds: review.rounds,
            reviewer: reviewer.label(),
            verdict: verdict.to_owned(),
            comments: comments.to_owned(),
        });
        Ok(())
    }

    /// Journal a role's contract violation, and warn.
    pub(super) fn violation(
        &self,
        task: &Task,
        session: &str,
        role: &Role,
        problem: &str,
        sent_back: bool,
    ) -> Result<()> {
        self.walker.record(
            self.store,
            Some(&task.id),
            Recorded::ContractViolation(events::ContractViolation {
                session: session.to_owned(),
                role: role.name.clone(),
                contract: role.contract.id(),
                problem: problem.to_owned(),
                sent_back,
            }),
        )?;
        let then = if sent_back { "it is sent back once" } else { "the task goes to you" };
        self.walker.observer.event(&Event::Warning {
            message: format!(
                "{}: session {session} ({}) broke the {} contract: {}; {then}",
                task.id,
                role.label(),
                role.contract.id(),
                first_line(problem)
            ),
        });
        Ok(())
    }

    /// What a role's session reported, read as its contract: its `git loop finish` (journaled),
    /// else its result file. `Ok(None)`: it reported nothing.
    pub fn role_report(
        &self,
        session: &str,
        dir: &std::path::Path,
        contract: Contract,
    ) -> Result<Result<Option<Report>, Violation>> {
        let termination = journal::find_termination(self.store, &crate::ids::session_writer(session)?)?;
        if let Some(entry) = termination {
            if let Recorded::Termination(t) = Recorded::of(&entry.event) {
                let message = t.message.unwrap_or_default();
                return Ok(role::from_finish(contract, &t.verdict, &message, t.subject.as_deref()).map(Some));
            }
        }
        match crate::agent::record::read_result(dir) {
            None => Ok(Ok(None)),
            Some(bytes) => Ok(role::parse(contract, &bytes).map(Some)),
        }
    }
}

/// One review round of a try's work, as every reviewer of it is told.
struct Review<'s> {
    seat: &'s Seat<'s>,
    round: u32,
    rounds: u32,
    head: String,
    tree: String,
    base: String,
    diffstat: String,
    /// What the previous round asked for.
    previous: Option<String>,
}

impl Review<'_> {
    fn prompt(&self, reviewer: &Role, result: &std::path::Path, sent_back: Option<&str>) -> String {
        let task = self.seat.task;
        let mut previous = String::new();
        if let Some(comments) = &self.previous {
            previous.push_str(&format!(
                "\n## The previous round\n\nThe last review asked for these changes; check that they were made:\n\n{}\n",
                comments.trim_end()
            ));
        }
        if let Some(problem) = sent_back {
            previous.push_str(&format!(
                "\n## Your last report could not be read\n\nThe previous reviewer session's report broke the {} contract: {problem}\nReport exactly as below.\n",
                reviewer.contract.id()
            ));
        }
        let body =
            if task.body.trim().is_empty() { "(No description: the title is the task.)" } else { task.body.trim_end() };
        let (round, rounds) = (self.round.to_string(), self.rounds.to_string());
        role::prompt(
            reviewer,
            &[
                ("task", &task.id),
                ("title", first_line(&task.title)),
                ("body", body),
                ("round", &round),
                ("rounds", &rounds),
                ("head", &self.head),
                ("tree", &self.tree),
                ("base", &self.base),
                ("diffstat", &self.diffstat),
                ("previous", &previous),
            ],
            result,
        )
    }
}

/// The review rounds try `number` has had without approval (since the task last left the
/// open state), and what the last of them asked for.
fn rounds_so_far(history: &[journal::Entry], number: u32) -> (u32, Option<String>) {
    let mut rounds = 0;
    let mut last = None;
    for entry in history {
        match Recorded::of(&entry.event) {
            Recorded::ReviewVerdict(v) if v.number == number && v.verdict == "changes" => {
                rounds = rounds.max(v.round);
                last = Some(v.comments);
            }
            Recorded::UnitClosed(_) | Recorded::TaskReopened(_) => {
                rounds = 0;
                last = None;
            }
            _ => {}
        }
    }
    (rounds, last)
}

/// The state of a task's review, from its journal: for `status` and `show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewState {
    pub number: u32,
    pub round: u32,
    pub rounds: u32,
    /// Who reviews (the last round's reviewer).
    pub reviewer: String,
    pub agent: String,
    /// `approve`, `changes`, `none`, or `reviewing` while its session runs.
    pub verdict: String,
    pub comments: String,
    pub tree: String,
}

/// The last review round of a task, if it has had one since it last left the open state.
pub fn state_of(history: &[journal::Entry]) -> Option<ReviewState> {
    let mut state: Option<ReviewState> = None;
    for entry in history {
        match Recorded::of(&entry.event) {
            Recorded::ReviewStarted(s) => {
                state = Some(ReviewState {
                    number: s.number,
                    round: s.round,
                    rounds: s.rounds,
                    reviewer: s.role,
                    agent: s.agent,
                    verdict: "reviewing".into(),
                    comments: String::new(),
                    tree: s.tree,
                })
            }
            Recorded::ReviewVerdict(v) => {
                state = Some(ReviewState {
                    number: v.number,
                    round: v.round,
                    rounds: v.rounds,
                    reviewer: v.role,
                    agent: v.agent,
                    verdict: v.verdict,
                    comments: v.comments,
                    tree: v.tree,
                })
            }
            Recorded::TaskReopened(_) => state = None,
            _ => {}
        }
    }
    state
}

/// The approvals try `number`'s work closes with: each reviewer's latest verdict on the tree
/// the last verdict was about, all of them approvals (empty when any of them is not). A round
/// taken up again after an interruption replaces a reviewer's earlier verdict; a verdict on an
/// earlier tree does not count.
pub fn approvals_in(history: &[journal::Entry], number: u32) -> Vec<Approval> {
    let mut latest: Vec<events::ReviewVerdict> = Vec::new();
    let mut tree = None;
    for entry in history {
        match Recorded::of(&entry.event) {
            Recorded::ReviewVerdict(v) if v.number == number => {
                tree = Some(v.tree.clone());
                latest.retain(|l| (l.role.as_str(), l.agent.as_str()) != (v.role.as_str(), v.agent.as_str()));
                latest.push(v);
            }
            Recorded::UnitClosed(_) | Recorded::TaskReopened(_) => {
                latest.clear();
                tree = None;
            }
            _ => {}
        }
    }
    let Some(tree) = tree else { return Vec::new() };
    let on_tree: Vec<events::ReviewVerdict> = latest.into_iter().filter(|v| v.tree == tree).collect();
    if on_tree.iter().any(|v| v.verdict != "approve") {
        return Vec::new();
    }
    on_tree
        .into_iter()
        .map(|v| Approval { role: v.role, agent: v.agent, session: v.session, tree: v.tree, round: v.round })
        .collect()
}
