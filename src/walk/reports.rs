//! A confined session, from outside: what it reported through its box, and what it left in its
//! private git directory and its home.
//!
//! While the session runs and once more when it ends, the walker reads the reports it appended
//! (`sandbox::channel`) and does for it what `git loop finish` and `git loop hook …` do outside
//! a sandbox — journal its verdict, record its CLI's session id, commit a turn's work, journal
//! an overreach — in the session's own journal chain, after checking each report as those
//! commands would have. A report speaks only for this session and this task: it names no
//! other, and one that does not read, or says what `finish` would refuse, is itself journaled
//! as an `agent_overreach`.
//!
//! When it has ended: its own commits are adopted (`sandbox::private_git::adopt`) so that
//! commit-on-stop builds on them, its CLI's transcript is copied to where the CLI keeps it in
//! the real home (so `claude --resume <id>` after a take-over, and the next agent's handoff,
//! find it), and its home and git directory are removed from its box.

use std::path::{Path, PathBuf};

use anyhow::Result;
use gix::ObjectId;

use super::unit::{GitDispatcher, Launch};
use super::Event;
use crate::agent::role::{self, Contract};
use crate::hooks::agent::{self as hook, AgentEvent, Source};
use crate::refs;
use crate::sandbox::channel::{self, Read, Report};
use crate::sandbox::{safe, Adopted, Prepared};
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, NewEvent};
use crate::store::task::Task;
use crate::store::usage::Usage;

/// What the walker has read of one confined session's reports.
pub struct Inbox {
    reader: channel::Reader,
    box_dir: PathBuf,
    /// When it last looked (it looks at most every 200 ms while the session runs).
    last: Option<std::time::Instant>,
    /// Unreadable lines so far, and what was wrong with the first: only the first is journaled
    /// as it is read, the rest are counted and said once when the session ends.
    garbled: usize,
    first_garbled: Option<String>,
}

impl Inbox {
    pub fn new(prepared: &Prepared) -> Inbox {
        Inbox {
            reader: channel::Reader::default(),
            box_dir: prepared.box_dir.clone(),
            last: None,
            garbled: 0,
            first_garbled: None,
        }
    }
}

/// The longest text kept of what an overreach tried.
const ARG_CHARS: usize = 200;

impl GitDispatcher<'_> {
    /// The refs a session's private git directory shows besides its own branch: the task
    /// branch, and the branch of the main checkout (what the work will land on).
    pub(super) fn context_refs(&self, task: &Task) -> Result<Vec<(String, ObjectId)>> {
        let mut out = Vec::new();
        let branch = refs::task_branch(&task.task_id());
        if let Some(id) = self.store.ref_target(&branch)? {
            out.push((branch, id));
        }
        if let Some(target) = self.store.head_branch() {
            if let Some(id) = self.store.ref_target(&target)? {
                out.push((target, id));
            }
        }
        Ok(out)
    }

    /// Act on what the session reported since the last look; `now` looks whatever the time.
    pub(super) fn take_reports(&self, l: &Launch<'_>, session: &str, inbox: &mut Inbox, now: bool) -> Result<()> {
        if !now && inbox.last.is_some_and(|at| at.elapsed() < std::time::Duration::from_millis(200)) {
            return Ok(());
        }
        inbox.last = Some(std::time::Instant::now());
        for read in inbox.reader.next_batch(&inbox.box_dir) {
            match read {
                Read::Report(report) => self.take_report(l, session, report)?,
                Read::Garbled(why) => {
                    inbox.garbled += 1;
                    if inbox.garbled == 1 {
                        inbox.first_garbled = Some(why.clone());
                        self.overreach(l, session, "report", None, Vec::new(), Some(why))?;
                    }
                }
                Read::TooLong => self.overreach(
                    l,
                    session,
                    "report",
                    None,
                    Vec::new(),
                    Some(format!("its reports ran past {} bytes; the rest was not read", channel::MAX_BYTES)),
                )?,
            }
        }
        Ok(())
    }

    /// Once the session has ended and its last reports were read: the unreadable lines after
    /// the first, said in one overreach with their count (garbage costs the journal one record
    /// however much of it there is).
    pub(super) fn sum_up_garbage(&self, l: &Launch<'_>, session: &str, inbox: &Inbox) -> Result<()> {
        if inbox.garbled < 2 {
            return Ok(());
        }
        let first = inbox.first_garbled.as_deref().unwrap_or("");
        let detail = format!("{} unreadable lines in its reports in all (the first: {first})", inbox.garbled);
        self.overreach(l, session, "report", None, Vec::new(), Some(detail))
    }

    /// Once the session has ended, under `loop.sandbox.network = allow`: each host its proxy
    /// refused, journaled once (the proxy writes each host once; a flood of hosts is said in
    /// one record past the first 20).
    pub(super) fn journal_refused_hosts(&self, l: &Launch<'_>, session: &str, net_dir: &std::path::Path) -> Result<()> {
        const SAID_ONE_BY_ONE: usize = 20;
        let file = net_dir.join(crate::sandbox::net::BLOCKED_FILE);
        let mut text = String::new();
        if let Ok(f) = std::fs::File::open(&file) {
            use std::io::Read as _;
            let _ = f.take(64 * 1024).read_to_string(&mut text);
        }
        let hosts: Vec<&str> = text.lines().filter(|h| !h.trim().is_empty()).collect();
        for host in hosts.iter().take(SAID_ONE_BY_ONE) {
            let detail = format!(
                "it is not on the network's allow-list (loop.sandbox.network = allow); to let it through: git config --add loop.sandbox.allow {host}"
            );
            self.overreach(l, session, "network", Some((*host).to_owned()), Vec::new(), Some(detail))?;
        }
        if hosts.len() > SAID_ONE_BY_ONE {
            let detail = format!("{} more hosts refused by the network policy", hosts.len() - SAID_ONE_BY_ONE);
            self.overreach(l, session, "network", None, Vec::new(), Some(detail))?;
        }
        Ok(())
    }

    fn take_report(&self, l: &Launch<'_>, session: &str, report: Report) -> Result<()> {
        let task = Some(l.task.id.clone());
        let writer = crate::ids::session_writer(session)?;
        match report {
            Report::Finish { verdict, message, subject, usage } => {
                let contract = l.role.map_or(Contract::Worker, |r| r.contract);
                if let Err(violation) = role::from_finish(contract, &verdict, &message, subject.as_deref()) {
                    let detail = format!("a 'git loop finish' its contract refuses: {}", violation.0);
                    return self.overreach(l, session, "finish", None, vec![verdict], Some(detail));
                }
                let usage = match usage.map(|u| Usage::reported(&u)) {
                    Some(Err(problem)) => {
                        let detail = format!("a 'git loop finish --usage' that does not read: {problem}");
                        return self.overreach(l, session, "finish", None, vec![verdict], Some(detail));
                    }
                    Some(Ok(usage)) => Some(usage),
                    None => None,
                };
                let (kind, data) = Recorded::Termination(events::Termination {
                    verdict,
                    message: Some(message),
                    contract: (contract != Contract::Worker).then(|| contract.id()),
                    subject,
                    usage,
                })
                .into_parts();
                journal::append(
                    self.store,
                    &self.walker.ctx,
                    &writer,
                    NewEvent { kind, task, session: Some(session.to_owned()), data },
                )?;
            }
            Report::Hook { source, event, agent_session, transcript, cwd, detail, digest } => {
                let Some(source) = Source::from_name(&source) else {
                    return self.overreach(l, session, "hook", None, Vec::new(), Some(no_such_hook(&source)));
                };
                // The digest names a marker file: only what a digest looks like.
                if digest.is_empty() || digest.len() > 64 || !digest.chars().all(|c| c.is_ascii_alphanumeric()) {
                    return self.overreach(
                        l,
                        session,
                        "hook",
                        None,
                        Vec::new(),
                        Some("a hook report without a digest".into()),
                    );
                }
                let event = AgentEvent { source, event: short(&event), agent_session, transcript, cwd, detail, digest };
                let at = hook::Session { key: session.to_owned(), task, try_number: Some(l.try_.number) };
                if let Err(err) = hook::handle(self.store, &self.walker.ctx, &at, &event) {
                    self.walker.observer.event(&Event::Warning {
                        message: format!("session {session}'s {} hook could not be handled: {err:#}", source.name()),
                    });
                }
            }
            Report::HookFailed { source, error } => {
                let Some(source) = Source::from_name(&source) else {
                    return self.overreach(l, session, "hook", None, Vec::new(), Some(no_such_hook(&source)));
                };
                let at = hook::Session { key: session.to_owned(), task, try_number: Some(l.try_.number) };
                let error = short(&error);
                if let Ok(dir) = hook::session_dir(self.store, session) {
                    hook::log(&dir, self.walker.ctx.now(), &format!("{}: {error}", source.name()));
                }
                hook::journal_failure(self.store, &self.walker.ctx, &at, source, &error)?;
            }
            Report::Event { kind, data } => {
                // Only what `journal append` lets a session write: a kind the loop never reads.
                if journal::check_kind(&kind).is_err() || Recorded::KINDS.contains(&kind.as_str()) {
                    let detail = format!("an event of kind '{}', which a session may not journal", short(&kind));
                    return self.overreach(l, session, "journal append", None, Vec::new(), Some(detail));
                }
                journal::append(
                    self.store,
                    &self.walker.ctx,
                    &writer,
                    NewEvent { kind, task, session: Some(session.to_owned()), data },
                )?;
            }
            Report::Overreach { command, target, argv } => {
                self.overreach(l, session, &command, target, argv, None)?;
            }
        }
        Ok(())
    }

    /// Journal that `session` tried what it may not, in its own chain, and say so.
    fn overreach(
        &self,
        l: &Launch<'_>,
        session: &str,
        command: &str,
        target: Option<String>,
        argv: Vec<String>,
        detail: Option<String>,
    ) -> Result<()> {
        let record = events::AgentOverreach {
            session: session.to_owned(),
            command: short(command),
            target: target.map(|t| short(&t)),
            argv: argv.iter().take(20).map(|a| short(a)).collect(),
            detail: detail.map(|d| short(&d)),
            confined: true,
        };
        self.walker.observer.event(&Event::Warning { message: describe_overreach(&l.task.id, &record) });
        let (kind, data) = Recorded::AgentOverreach(record).into_parts();
        journal::append(
            self.store,
            &self.walker.ctx,
            &crate::ids::session_writer(session)?,
            NewEvent { kind, task: Some(l.task.id.clone()), session: Some(session.to_owned()), data },
        )?;
        Ok(())
    }

    /// After a confined session that commits has ended: adopt the commits of its private git
    /// directory into the real repository and put its worktree's `HEAD` on them (detached), so
    /// that commit-on-stop builds on them and attaches it to the try branch again.
    /// Returns why its commits were refused, if they were.
    pub(super) fn adopt_commits(&self, l: &Launch<'_>, session: &str, prepared: &Prepared) -> Result<Option<String>> {
        let Some(git) = &prepared.git else { return Ok(None) };
        match crate::sandbox::private_git::adopt(self.store, git)? {
            Adopted::Unmoved => Ok(None),
            Adopted::Commit { id, merge_concluded, .. } => {
                if !crate::tries::commit::take_commits(self.store, l.try_, l.worktree, id, merge_concluded)? {
                    let why = format!(
                        "its worktree is gone and its commits ({id}) do not build on its try branch; they are kept in the repository, unreferenced"
                    );
                    self.walker.observer.event(&Event::Warning { message: format!("session {session}: {why}") });
                }
                Ok(None)
            }
            Adopted::Refused(why) => {
                self.overreach(l, session, "git", None, Vec::new(), Some(why.clone()))?;
                Ok(Some(why))
            }
        }
    }

    /// After a confined session: copy its CLI's transcript to where the CLI keeps it in the real
    /// home, and remove what of its box is no longer needed (its home and git directory; its
    /// result file and reports stay, as the record of what it said).
    pub(super) fn tidy_box(&self, l: &Launch<'_>, prepared: &Prepared, agent_session: Option<&str>) {
        if let (Some((real_home, box_home)), Some(id)) = (&prepared.home, agent_session) {
            copy_transcript_back(
                &l.agent.name,
                id,
                l.worktree,
                box_home,
                real_home,
                self.walker.ctx.codex_home.as_deref(),
            );
        }
        for dir in [crate::sandbox::home_of(&prepared.box_dir), prepared.box_dir.join(crate::sandbox::private_git::DIR)]
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Copy the transcript a confined CLI wrote in its own home (`box_home`) to the same place in
/// the real home, read without following any link the agent left there.
fn copy_transcript_back(
    agent: &str,
    id: &str,
    worktree: &Path,
    box_home: &Path,
    real_home: &Path,
    codex_home: Option<&Path>,
) {
    let inside_codex = box_home.join(".codex");
    let Some(found) = crate::agent::reach::transcript(agent, id, worktree, box_home, Some(&inside_codex)) else {
        return;
    };
    let Ok(rel) = found.strip_prefix(box_home) else { return };
    let Ok(Some(bytes)) = safe::read(box_home, rel, 256 << 20) else { return };
    let to = match (agent, rel.strip_prefix(".codex")) {
        ("codex", Ok(under)) => crate::sandbox::home::codex_home(real_home, codex_home).join(under),
        _ => real_home.join(rel),
    };
    if let Some(parent) = to.parent() {
        if std::fs::create_dir_all(parent).is_ok() {
            let _ = std::fs::write(&to, bytes);
        }
    }
}

/// An overreach, in a line for the person watching.
pub fn describe_overreach(task: &str, o: &events::AgentOverreach) -> String {
    let what = match (&o.target, o.argv.is_empty()) {
        (Some(target), _) if o.command == "network" => format!("a connection to {target}"),
        (Some(target), _) => format!("'git loop {}' on {target}", o.command),
        (None, false) => format!("'git loop {} {}'", o.command, o.argv.join(" ")),
        (None, true) => format!("'{}'", o.command),
    };
    let detail = o.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
    format!("session {} of {task} tried {what}, which it may not{detail}; refused, nothing changed", o.session)
}

/// `text` made one line of at most [`ARG_CHARS`] characters.
fn short(text: &str) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(ARG_CHARS).collect();
    if text.chars().count() > ARG_CHARS {
        format!("{line}…")
    } else {
        line
    }
}

/// What a report naming a hook git-loop does not have is journaled as.
fn no_such_hook(source: &str) -> String {
    format!("a hook report from '{}', which is no hook git-loop has", short(source))
}
