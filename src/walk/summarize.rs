//! Summarizer sessions: an agent writes a landing commit's message from the task and its
//! sessions (the landing queue's `landing::Summarizer`, for `git loop land --summarizer` and
//! `run --land`).
//!
//! One summary, start to end:
//! 1. Its checkout: a worktree detached at the task branch's head, in its session's directory,
//!    removed when it ends (a reviewer's kind: nothing it does there is kept). The session is
//!    the task's (its `session_started` names the role), about the task's last try.
//! 2. Its prompt (`summarizer/1`): the task's title and body; what its sessions said, from the
//!    task's journal (each session's end, its verdicts, review verdicts, resolutions, the
//!    units closed); the diffstat of the task branch against its merge base with the target.
//! 3. Its report (`git loop finish summary --subject … --message …`, or the result file) is
//!    parsed strictly; the subject is made one bounded line without control characters
//!    (`landing::summary::clean_subject`). A report that breaks the contract is sent back once
//!    with the parse error; a second violation, or a session that stopped, fails the task's
//!    landing: the task goes to needs-you and the target is not moved for it.

use anyhow::{Context as _, Result};

use super::unit::{first_line, Ending, GitDispatcher, Launch, Launched};
use super::{Event, Walker};
use crate::agent::role::{self, Contract, Report, Role, Violation};
use crate::ids::{random_base32, TaskId};
use crate::landing::{self, summary, Summary};
use crate::refs;
use crate::store::events::Recorded;
use crate::store::journal;
use crate::store::task::{self, Task};
use crate::store::Store;
use crate::tries;

/// The summarizer role: `name` (`--summarizer`, else `loop.summarizer`, as
/// `ops::config::summarizer` decided: a role of the summarizer contract, or an agent that plays
/// the built-in one), else the built-in role when `loop.role.summarizer.agent` names its agent;
/// `None` when there is neither (the loop's own landing message).
pub fn role_of(store: &Store, name: Option<&str>) -> Result<Option<Role>> {
    if let Some(name) = name {
        return Ok(Some(role::of_contract(store, name, Contract::Summarizer, "--summarizer")?));
    }
    Ok(role::find(store, Contract::Summarizer.name())?.filter(|r| r.agent.is_some()))
}

/// The landing queue's summarizer: a summarizer session per task landing.
pub struct AgentSummarizer<'w> {
    pub walker: &'w Walker<'w>,
    pub role: Role,
}

impl landing::Summarizer for AgentSummarizer<'_> {
    fn summarize(&self, store: &Store, landing: &landing::Landing, keep: &dyn Fn() -> bool) -> Result<Summary> {
        let id: TaskId = landing.task.parse()?;
        let snapshot = task::read(store, &id)?.with_context(|| format!("task '{id}' is gone"))?;
        GitDispatcher::new(store, self.walker).summarize(&snapshot.task, landing, &self.role, keep)
    }
}

impl GitDispatcher<'_> {
    /// Have `summarizer` write `landing`'s message.
    pub fn summarize(
        &self,
        task: &Task,
        landing: &landing::Landing,
        summarizer: &Role,
        keep: &dyn Fn() -> bool,
    ) -> Result<Summary> {
        let (store, walker) = (self.store, self.walker);
        let id = task.task_id();
        let agent = walker.agent(store, summarizer.agent.as_deref().unwrap_or_default())?;
        let history = walker.task_history(store, &task.id)?;
        let number = tries::highest_number(store, &id, &history)?.max(1);
        let try_ = tries::Try::describe(&id, number, &tries::worktrees_root(store)?);
        let sessions = sessions_said(&history);
        let base = store.merge_base(landing.onto, landing.head)?.unwrap_or(landing.onto);
        let mut changes = store.diffstat(base, landing.head)?;
        let more = changes.len().saturating_sub(200);
        changes.truncate(200);
        let mut diffstat = tries::describe_changes(&changes);
        if diffstat.trim().is_empty() {
            diffstat = "(no file changes against the target)".into();
        }
        if more > 0 {
            diffstat.push_str(&format!("\n  … and {more} more files"));
        }
        let body =
            if task.body.trim().is_empty() { "(No description: the title is the task.)" } else { task.body.trim_end() };
        let into = refs::short_branch(&landing.target).to_owned();
        let head = landing.head.to_string();
        let mut sent_back: Option<String> = None;
        for attempt in 1..=2u32 {
            self.role_may_start(summarizer)?;
            let session = format!("s-{}", random_base32(8));
            let checkout = store.layout()?.review_checkout(&session);
            tries::add_detached_worktree(store, &checkout, landing.head)?;
            let launch = Launch {
                session: &session,
                task,
                try_: &try_,
                worktree: &checkout,
                agent: &agent,
                attempt,
                halt: None,
                role: Some(summarizer),
                handoff: None,
                commits: false,
                keep: Some(keep),
            };
            let launched = self.launch(&launch, &|dir| {
                let mut text = role::prompt(
                    summarizer,
                    &[
                        ("task", &task.id),
                        ("title", first_line(&task.title)),
                        ("body", body),
                        ("sessions", &sessions),
                        ("diffstat", &diffstat),
                        ("target", &into),
                        ("head", &head),
                    ],
                    &crate::agent::record::result_file(dir),
                );
                if let Some(problem) = &sent_back {
                    text.push_str(&format!(
                        "\n## Your last report could not be read\n\nThe previous summarizer session's report broke the {} contract: {problem}\nReport exactly as above.\n",
                        summarizer.contract.id()
                    ));
                }
                Ok(text)
            });
            if let Err(err) = tries::remove_worktree_at(store, &checkout) {
                walker.observer.event(&Event::Warning {
                    message: format!("could not remove the summarizer's checkout '{}': {err:#}", checkout.display()),
                });
            }
            let Launched { dir, ending, why, .. } = launched?;
            match ending {
                Ending::Cancelled => {
                    return Err(crate::error::Refusal::new(
                        crate::error::Class::Refused,
                        "the summarizer was stopped: the walk or the landing was interrupted",
                    )
                    .hint("what landed before stays; run 'git loop land' again")
                    .into());
                }
                Ending::Lost(_) | Ending::Withdrawn(_) | Ending::Halted => {
                    return Ok(Summary::Failed(format!(
                        "the summarizer {} (session {session}) stopped: {why}",
                        summarizer.label()
                    )));
                }
                Ending::Exited(_) | Ending::CannotRun(_) | Ending::TimedOut => {}
            }
            let problem = match self.role_report(&session, &dir, summarizer.contract)? {
                Ok(Some(Report::Summary(s))) => {
                    let subject = summary::clean_subject(&s.subject);
                    if subject.is_empty() {
                        "its \"subject\" has nothing but control characters and spaces".to_owned()
                    } else {
                        return Ok(Summary::Written { subject, body: summary::clean_body(&s.body), by: session });
                    }
                }
                Ok(Some(_)) => "it reported in another role's contract".to_owned(),
                Ok(None) => format!(
                    "it reported nothing: neither 'git loop finish summary' nor a {} result file (it ended: {why})",
                    summarizer.contract.id()
                ),
                Err(Violation(problem)) => problem,
            };
            self.violation(task, &session, summarizer, &problem, attempt == 1)?;
            if attempt == 2 {
                return Ok(Summary::Failed(format!(
                    "the summarizer {} (session {session}) broke the {} contract twice ({problem})",
                    summarizer.label(),
                    summarizer.contract.id()
                )));
            }
            sent_back = Some(problem);
        }
        unreachable!("the loop returns on its second pass")
    }
}

/// The longest account of a task's sessions a summarizer is given (characters).
const SESSIONS_MAX: usize = 12_000;

/// What a task's sessions said, from its journal, oldest first: each session's end, the
/// verdicts reported (with their messages), review verdicts, resolutions and the units closed.
/// The newest are kept when it is long.
pub fn sessions_said(history: &[journal::Entry]) -> String {
    let mut lines: Vec<String> = Vec::new();
    let indent = |text: &str| text.trim_end().lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n");
    for entry in history {
        let said = match Recorded::of(&entry.event) {
            Recorded::SessionStarted(s) => Some(format!(
                "- session {} ({}{}) started on try {}",
                s.session,
                s.agent,
                s.role.map(|r| format!(", as {r}")).unwrap_or_default(),
                s.number
            )),
            Recorded::SessionEnded(e) => Some(format!("- session {} ended: {}", e.session, e.reason)),
            Recorded::Termination(t) => {
                let subject = t.subject.map(|s| format!(" \"{s}\"")).unwrap_or_default();
                let message = t.message.filter(|m| !m.trim().is_empty()).map(|m| format!(":\n{}", indent(&m)));
                Some(format!("- {} reported {}{subject}{}", entry.event.writer, t.verdict, message.unwrap_or_default()))
            }
            Recorded::ReviewVerdict(v) => Some(format!(
                "- review round {} of {} by {}: {}{}",
                v.round,
                v.rounds,
                v.role,
                v.verdict,
                if v.comments.trim().is_empty() { String::new() } else { format!(":\n{}", indent(&v.comments)) }
            )),
            Recorded::ConflictResolved(r) => Some(format!(
                "- session {} resolved a conflict in {}:\n{}",
                r.session,
                r.paths.join(", "),
                indent(&r.summary)
            )),
            Recorded::UnitClosed(u) => Some(format!(
                "- the work closed as {}{}",
                u.verdict,
                u.message
                    .or(u.reason)
                    .filter(|m| !m.trim().is_empty())
                    .map(|m| format!(":\n{}", indent(&m)))
                    .unwrap_or_default()
            )),
            _ => None,
        };
        lines.extend(said);
    }
    if lines.is_empty() {
        return "(The journal holds nothing its sessions said.)".into();
    }
    let mut kept = 0;
    let mut size = 0;
    for line in lines.iter().rev() {
        if size + line.len() + 1 > SESSIONS_MAX {
            break;
        }
        size += line.len() + 1;
        kept += 1;
    }
    let dropped = lines.len() - kept;
    let mut out = lines[dropped..].iter().map(|l| format!("{l}\n")).collect::<String>();
    if dropped > 0 {
        out.insert_str(0, &format!("({dropped} earlier entries left out)\n"));
    }
    out
}
