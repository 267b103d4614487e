//! Picking up after a walk of this clone that crashed (`kill -9`, power loss): stop the
//! sessions it left running, commit what they left in their worktrees, and release the task
//! claims it held, so those tasks are worked again (continuing their tries).
//!
//! Only what is provably this machine's and dead is touched: session records without an end
//! whose walker is not this walk (we hold the clone's walker singleton, so no other walker of
//! this clone is alive), and node claims held by a walker key whose record names this host
//! and boot and a process that no longer exists.

use std::collections::{HashMap, HashSet};

use anyhow::Result;

use super::{Event, Walker};
use crate::agent::role::Contract;
use crate::agent::{process, record};
use crate::ids::TaskId;
use crate::store::claim::{self, Listed};
use crate::store::events::{self, Recorded};
use crate::store::task::State;
use crate::store::Store;
use crate::tries::{self, commit::Committed, Try};

/// What a crashed confined session committed in its private git directory: adopted onto its
/// try (see `sandbox::private_git`), then its home and git directory removed from its box.
/// Best effort: a failure is said, and its files' work is still committed from the worktree.
fn adopt_confined(store: &Store, walker: &Walker<'_>, loop_dir: &std::path::Path, rec: &record::Record, try_: &Try) {
    let box_dir = crate::sandbox::box_of(&record::dir(loop_dir, &rec.session));
    let dir = box_dir.join(crate::sandbox::private_git::DIR);
    if !dir.is_dir() {
        return;
    }
    let start = match store.ref_target(&try_.branch) {
        Ok(Some(tip)) => tip,
        _ => return,
    };
    let git = crate::sandbox::PrivateGit { dir, box_dir: box_dir.clone(), start };
    let taken = crate::sandbox::private_git::adopt(store, &git).and_then(|adopted| match adopted {
        crate::sandbox::Adopted::Commit { id, merge_concluded, .. } => {
            tries::commit::take_commits(store, try_, &rec.worktree, id, merge_concluded).map(|_| ())
        }
        crate::sandbox::Adopted::Refused(why) => anyhow::bail!("{why}"),
        crate::sandbox::Adopted::Unmoved => Ok(()),
    });
    if let Err(err) = taken {
        walker.observer.event(&Event::Warning {
            message: format!("the commits of crashed session {} are not taken: {err:#}", rec.session),
        });
    }
    for leftover in [crate::sandbox::home_of(&box_dir), git.dir] {
        let _ = std::fs::remove_dir_all(leftover);
    }
}

/// Mark a crashed session's record ended, and journal and report what became of it.
fn close_crashed(
    store: &Store,
    walker: &Walker<'_>,
    loop_dir: &std::path::Path,
    rec: &mut record::Record,
    detail: String,
) -> Result<()> {
    rec.ended_at = Some(walker.ctx.now());
    rec.ended = Some("recovered after its walk crashed".into());
    record::write(loop_dir, rec)?;
    walker.record(
        store,
        Some(&rec.task),
        Recorded::Recovered(events::Recovered {
            session: Some(rec.session.clone()),
            walker: Some(rec.walker.clone()),
            detail: detail.clone(),
            ..Default::default()
        }),
    )?;
    walker.observer.event(&Event::Recovered { task: rec.task.clone(), detail });
    Ok(())
}

pub fn recover(store: &Store, walker: &Walker<'_>) -> Result<()> {
    let loop_dir = store.loop_dir()?;
    prune_old_sessions(&loop_dir, walker.ctx.now());
    let root = tries::worktrees_root(store)?;
    let mut dead_walkers = HashSet::new();
    // The journal chains of each dead walker's sessions, by (walker, task).
    let mut sessions_of: HashMap<(String, String), Vec<String>> = HashMap::new();
    for mut rec in record::all(&loop_dir) {
        if rec.ended_at.is_some() || rec.walker == walker.key {
            continue;
        }
        if let Ok(writer) = crate::ids::session_writer(&rec.session) {
            let chains = sessions_of.entry((rec.walker.clone(), rec.task.clone())).or_default();
            chains.push(crate::refs::journal(&writer));
        }
        dead_walkers.insert(rec.walker.clone());
        let killed = process::kill_marked(&rec.marker);
        // A reviewer's or a summarizer's checkout is never the work: it goes, uncommitted. A
        // conflict resolver's try is work, committed like a worker's.
        let reads_only = rec
            .contract
            .as_deref()
            .is_some_and(|c| [Contract::Reviewer, Contract::Summarizer].iter().any(|k| c == k.id()));
        if reads_only {
            if rec.worktree.starts_with(&loop_dir) {
                let _ = tries::remove_worktree_at(store, &rec.worktree);
            }
            let role = rec.role.clone().unwrap_or_default();
            let detail = format!("{role} session {} had crashed; its checkout is removed", rec.session);
            close_crashed(store, walker, &loop_dir, &mut rec, detail)?;
            continue;
        }
        let Ok(task) = rec.task.parse::<TaskId>() else { continue };
        let try_ = Try::describe(&task, rec.try_number, &root);
        let author = gix::actor::Signature {
            name: rec.agent.as_str().into(),
            email: format!("{}@agent.invalid", rec.agent).as_str().into(),
            time: gix::date::Time { seconds: walker.ctx.now().timestamp(), offset: 0 },
        };
        let message = format!(
            "loop: work of session {} on {task}, recovered\n\nIts walk ({}) ended without stopping it.\nSession: {}\nTry: {}\n",
            rec.session, rec.walker, rec.session, rec.try_number
        );
        // A confined session's own commits are in its box: taken first, as its walk would have.
        adopt_confined(store, walker, &loop_dir, &rec, &try_);
        let committed = match tries::commit::commit_on_stop(store, &try_, &author, &message) {
            Ok(c) => c,
            Err(err) => {
                walker.observer.event(&Event::Warning {
                    message: format!("could not commit the leftovers of session {}: {err:#}", rec.session),
                });
                Committed::Clean
            }
        };
        let detail = match &committed {
            Committed::Commit { id, paths } => format!(
                "session {} had crashed; its {paths} changed files are committed as {}",
                rec.session,
                crate::ids::short_commit(&id)
            ),
            Committed::Adopted(id) => {
                format!("session {} had crashed; its commits are kept ({})", rec.session, crate::ids::short_commit(&id))
            }
            _ => format!("session {} had crashed; it left nothing uncommitted", rec.session),
        };
        let detail = if killed > 0 { format!("{detail}; {killed} leftover processes stopped") } else { detail };
        close_crashed(store, walker, &loop_dir, &mut rec, detail)?;
    }
    for listed in claim::list(store, "node:")? {
        let Listed::Claim { key, held } = listed else { continue };
        let r = &held.record;
        let ours_and_dead = crate::ids::is_walker_key(&r.holder)
            && r.holder != walker.key
            && (dead_walkers.contains(&r.holder) || r.holder_gone_here(&walker.ctx));
        if !ours_and_dead || crate::backlog::is_hold(r) {
            continue;
        }
        // What the dead walk did with the task (and what its sessions journaled) goes to the
        // remote with the release.
        let mut riders = match key.name().parse::<TaskId>() {
            Ok(task) => crate::store::sync::task_scope(store, &task)?,
            Err(_) => Default::default(),
        };
        if let Ok(writer) = r.holder.parse::<crate::ids::WriterId>() {
            riders.insert(crate::refs::journal(&writer));
        }
        riders.extend(sessions_of.get(&(r.holder.clone(), key.name().to_owned())).into_iter().flatten().cloned());
        claim::release_with(store, &walker.ctx, &key, &r.holder, false, &riders)?;
        let detail = format!("released the claim its crashed walk {} held", r.holder);
        walker.record(
            store,
            Some(key.name()),
            Recorded::Recovered(events::Recovered {
                claim: Some(key.to_string()),
                walker: Some(r.holder.clone()),
                detail: detail.clone(),
                ..Default::default()
            }),
        )?;
        walker.observer.event(&Event::Recovered { task: key.name().to_owned(), detail });
    }
    remove_closed_worktrees(store, walker, &root)?;
    Ok(())
}

/// Remove the worktrees a crashed walk left behind (see `left_over`). Their work is committed
/// to their try branches first, in case anything was left.
fn remove_closed_worktrees(store: &Store, walker: &Walker<'_>, root: &std::path::Path) -> Result<()> {
    for try_ in worktrees_in(root) {
        let Some(why) = left_over(store, &try_, || walker.task_history(store, try_.task.as_str()))? else {
            continue;
        };
        let author = gix::actor::Signature {
            name: "git-loop".into(),
            email: "loop@git-loop.invalid".into(),
            time: gix::date::Time { seconds: walker.ctx.now().timestamp(), offset: 0 },
        };
        let (task, number) = (&try_.task, try_.number);
        let message = format!(
            "loop: leftovers of try {number} of {task}, recovered\n\nIts walk ended before removing its worktree.\n"
        );
        let committed = match tries::commit::commit_on_stop(store, &try_, &author, &message) {
            Ok(committed) => committed,
            Err(err) => {
                walker.observer.event(&Event::Warning {
                    message: format!("could not commit what is left in '{}': {err:#}", try_.worktree.display()),
                });
                continue;
            }
        };
        tries::remove_worktree(store, &try_)?;
        let kept = match committed {
            Committed::Commit { id, paths } => {
                let files = if paths == 1 { "1 changed file".to_owned() } else { format!("{paths} changed files") };
                format!("; its {files} committed as {}", crate::ids::short_commit(&id))
            }
            Committed::Adopted(id) => format!("; its commits are kept ({})", crate::ids::short_commit(&id)),
            _ => String::new(),
        };
        // Whether that walk crashed or ended is not known here: only that it left this behind.
        let detail = format!("removed the worktree of try {number}, which an earlier walk left ({why}){kept}");
        let recovered = events::Recovered { number: Some(number), detail: detail.clone(), ..Default::default() };
        walker.record(store, Some(task.as_str()), Recorded::Recovered(recovered))?;
        walker.observer.event(&Event::Recovered { task: task.to_string(), detail });
    }
    Ok(())
}

/// The try worktrees under `root` (named `<task>-<n>`, as `Try::describe` names them).
pub fn worktrees_in(root: &std::path::Path) -> Vec<Try> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut found: Vec<Try> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (task, number) = name.rsplit_once('-')?;
            let (task, number) = (task.parse::<TaskId>().ok()?, number.parse::<u32>().ok()?);
            let try_ = Try::describe(&task, number, root);
            (try_.worktree == entry.path()).then_some(try_)
        })
        .collect();
    found.sort_by(|a, b| a.worktree.cmp(&b.worktree));
    found
}

/// Why the worktree of `try_` is left over by a walk that crashed, if it is: its task is no
/// longer open (the walk was killed between closing the unit and removing its worktree), or its
/// try was never journaled as opened (killed between adding the worktree and saying so: the
/// next walk of the task opens a try of its own). A task a person took over keeps its worktree
/// (it is theirs now), and so does an open task's journaled try (it goes on), a race's, and a
/// task this clone does not have. Only for a clone no walk is running in: a live walk's
/// worktree is in one of those states for a moment. `history` reads the task's journal.
pub fn left_over(
    store: &Store,
    try_: &Try,
    history: impl FnOnce() -> Result<Vec<crate::store::journal::Entry>>,
) -> Result<Option<String>> {
    let state = crate::store::task::read(store, &try_.task)?.map(|s| s.task.state);
    Ok(match state {
        None | Some(State::TakenOver) => None,
        Some(State::Open) => {
            let history = history()?;
            let opened = history
                .iter()
                .any(|e| matches!(Recorded::of(&e.event), Recorded::TryOpened(opened) if opened.number == try_.number));
            (!opened && super::race::unfinished_in(&history).is_none())
                .then(|| "its try was never journaled as opened".to_owned())
        }
        Some(state) => Some(format!("its task is {}", state.as_str())),
    })
}

/// How long the files of an ended session (prompt, log, result) are kept.
const KEEP_SESSIONS: chrono::Duration = chrono::Duration::days(14);

/// Remove the files of sessions that ended more than two weeks ago. Their commits, journal
/// events and notes stay; only the machine-local prompt and log go.
fn prune_old_sessions(loop_dir: &std::path::Path, now: chrono::DateTime<chrono::Utc>) {
    for rec in record::all(loop_dir) {
        if rec.ended_at.is_some_and(|ended| now - ended > KEEP_SESSIONS) {
            let _ = std::fs::remove_dir_all(record::dir(loop_dir, &rec.session));
        }
    }
}
