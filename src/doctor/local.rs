//! This clone's machine-local state: what crashed or interrupted processes leave behind (ref
//! locks, worktrees, temporary object files, caches, session records). None of it is shared
//! and none of it holds data the refs do not, except uncommitted work in a worktree, which a
//! repair commits to its try branch before the worktree goes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use super::records::TaskStates;
use super::{locks, Action, Checked, Finding, Kind, Options};
use crate::context::Context;
use crate::git;
use crate::ids::TaskId;
use crate::refs;
use crate::session::record;
use crate::store::task::State;
use crate::store::{index, task, Store};
use crate::tries::{self, Try};

/// How old a temporary file must be before it counts as left by a process that is gone: a
/// pack being received or an index being written takes seconds, an hour is far beyond any.
pub const TEMP_AGE: Duration = Duration::from_secs(3600);

pub(super) fn check(
    store: &Store,
    ctx: &Context,
    opts: &Options,
    states: &TaskStates,
    out: &mut Vec<Finding>,
    checked: &mut Checked,
) -> Result<()> {
    check_locks(store, opts, out);
    check_worktrees(store, opts, out, checked)?;
    check_temp_objects(store, opts, out);
    check_caches(store, opts, states, out);
    check_sessions(store, ctx, out, checked);
    Ok(())
}

/// A path as people read it: relative to the working tree when under it.
pub(super) fn shown(opts: &Options, path: &Path) -> String {
    path.strip_prefix(&opts.workdir).unwrap_or(path).display().to_string()
}

/// The age of `path` by its file system's clock (`None`: it cannot be told).
fn age(path: &Path) -> Option<Duration> {
    let meta = std::fs::metadata(path).ok()?;
    crate::store::locks::age(path, &meta)
}

fn seconds(age: Duration) -> String {
    format!("{} s", age.as_secs())
}

/// Every `*.lock` file below `dir`, recursively.
fn lock_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => lock_files(&path, found),
            Ok(t) if t.is_file() && path.extension().is_some_and(|e| e == "lock") => found.push(path),
            _ => {}
        }
    }
}

/// Ref locks on the refs git-loop owns (and the files `cas` names a lock it moves aside or
/// the clock probe it makes), the notes lock, and `packed-refs.lock`.
fn check_locks(store: &Store, opts: &Options, out: &mut Vec<Finding>) {
    let common = store.repo.common_dir();
    let mut found = Vec::new();
    for prefix in [refs::LOOP, refs::TASK_BRANCHES, refs::TRY_BRANCHES, refs::KEPT_BRANCHES, refs::REMOTES] {
        lock_files(&common.join(prefix), &mut found);
    }
    found.push(common.join(format!("{}.lock", refs::NOTES)));
    found.retain(|p| p.is_file());
    for path in found {
        let locks::Verdict::Abandoned(age) = locks::judge(&path) else { continue };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let what = if name.starts_with('.') {
            format!("'{}' was left by a crashed lock recovery {} ago", shown(opts, &path), seconds(age))
        } else {
            let rel = path.strip_prefix(common).unwrap_or(&path).display().to_string();
            let ref_name = rel.strip_suffix(".lock").unwrap_or(&rel);
            format!(
                "ref '{ref_name}' is locked by '{}', left {} ago by a writer that is gone (no process holds it)",
                shown(opts, &path),
                seconds(age)
            )
        };
        out.push(
            Finding::leftover(Kind::Lock, &shown(opts, &path), what)
                .fix("'git loop doctor --repair' removes it (if no writer has taken it again meanwhile)")
                .repair(Action::RemoveLock(path)),
        );
    }
    let packed = common.join("packed-refs.lock");
    if packed.is_file() {
        if let locks::Verdict::Abandoned(age) = locks::judge(&packed) {
            // git's lock, on git's file: reported, never removed by us.
            out.push(
                Finding::leftover(
                    Kind::Lock,
                    &shown(opts, &packed),
                    format!(
                        "'{}' was left {} ago by a git or git-loop process that is gone; every ref write fails while it stays",
                        shown(opts, &packed),
                        seconds(age)
                    ),
                )
                .fix(format!("if no git command is running, remove it with 'rm {}'", packed.display())),
            );
        }
    }
}

/// What a worktree registration (`<common-dir>/worktrees/<name>/`) says.
struct Registration {
    admin: PathBuf,
    /// The worktree's directory.
    worktree: PathBuf,
    /// The try its HEAD is on, if it is a loop try branch.
    on_try: Option<(TaskId, u32)>,
    locked: bool,
    gone: bool,
}

fn registrations(store: &Store) -> Vec<Registration> {
    let Ok(entries) = std::fs::read_dir(store.repo.common_dir().join("worktrees")) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let admin = entry.path();
        let Ok(gitdir) = std::fs::read_to_string(admin.join("gitdir")) else { continue };
        let gitfile = PathBuf::from(gitdir.trim());
        let head = std::fs::read_to_string(admin.join("HEAD")).unwrap_or_default();
        let on_try = head
            .trim()
            .strip_prefix("ref: ")
            .and_then(|r| r.strip_prefix(refs::TRY_BRANCHES))
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(id, n)| Some((id.parse().ok()?, n.parse().ok()?)));
        out.push(Registration {
            worktree: gitfile.parent().map(Path::to_owned).unwrap_or_else(|| gitfile.clone()),
            gone: !gitfile.exists(),
            locked: admin.join("locked").exists(),
            admin,
            on_try,
        });
    }
    out.sort_by(|a, b| a.admin.cmp(&b.admin));
    out
}

/// Loop worktrees only (on a try branch, or under the worktrees root): a registration whose
/// directory is gone, and a worktree of a task that is done or cancelled (or gone) in which no
/// session works.
fn check_worktrees(store: &Store, opts: &Options, out: &mut Vec<Finding>, checked: &mut Checked) -> Result<()> {
    let root = tries::worktrees_root(store)?;
    let loop_dir = git::loop_dir(&store.repo);
    let sessions = record::all(&loop_dir);
    for reg in registrations(store) {
        if reg.on_try.is_none() && !reg.worktree.starts_with(&root) {
            continue;
        }
        checked.worktrees += 1;
        if reg.locked {
            continue;
        }
        let place = shown(opts, &reg.worktree);
        if reg.gone {
            out.push(
                Finding::leftover(
                    Kind::Worktree,
                    &place,
                    format!("worktree '{place}' is registered but its directory is gone"),
                )
                .fix("'git loop doctor --repair' removes its registration (as 'git worktree prune' does), so its branch can be checked out again")
                .repair(Action::PruneRegistration(reg.admin)),
            );
            continue;
        }
        let Some((id, number)) = reg.on_try else { continue };
        // A session's worktree, live or crashed: the walk looks after it (`run` recovers it).
        if sessions.iter().any(|s| s.worktree == reg.worktree && s.ended_at.is_none()) {
            continue;
        }
        let state = match task::read(store, &id) {
            Ok(Some(snapshot)) => Some(snapshot.task.state),
            Ok(None) => None,
            // Reported with the records.
            Err(_) => continue,
        };
        if matches!(state, Some(s) if s != State::Done && s != State::Cancelled) {
            continue;
        }
        let why = match state {
            Some(s) => format!("its task is {}", s.as_str()),
            None => "its task does not exist".to_owned(),
        };
        let finding = Finding::leftover(
            Kind::Worktree,
            &place,
            format!("worktree '{place}' of try {number} of {id} is left over: {why} and no session works in it"),
        );
        if opts.cwd.starts_with(&reg.worktree) {
            out.push(finding.fix("leave it (this command runs inside it), then run 'git loop doctor --repair'"));
            continue;
        }
        let try_ =
            Try { task: id.clone(), number, branch: refs::try_branch(&id, number), worktree: reg.worktree.clone() };
        out.push(
            finding
                .fix(format!(
                    "'git loop doctor --repair' commits anything left in it to '{}' and removes it (the branch stays)",
                    refs::short_branch(&try_.branch)
                ))
                .repair(Action::RemoveWorktree(Box::new(try_))),
        );
    }
    Ok(())
}

/// Temporary object files (`tmp_obj_*`, `tmp_pack_*`, `tmp_idx_*`) older than an hour: what an
/// object or pack write killed midway, or out of space, leaves.
fn check_temp_objects(store: &Store, opts: &Options, out: &mut Vec<Finding>) {
    let objects = store.repo.objects.store_ref().path().to_owned();
    let mut dirs = vec![objects.clone(), objects.join("pack")];
    if let Ok(entries) = std::fs::read_dir(&objects) {
        dirs.extend(
            entries
                .flatten()
                .filter(|e| {
                    e.file_name().to_str().is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()))
                })
                .map(|e| e.path()),
        );
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        found.extend(
            entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| ["tmp_obj_", "tmp_pack_", "tmp_idx_"].iter().any(|p| n.starts_with(p)))
                })
                .map(|e| e.path()),
        );
    }
    found.sort();
    for path in found {
        let Some(age) = age(&path).filter(|a| *a >= TEMP_AGE) else { continue };
        let place = shown(opts, &path);
        out.push(
            Finding::leftover(
                Kind::TempFile,
                &place,
                format!(
                    "'{place}' is a temporary object file left {} min ago by a write that never finished",
                    age.as_secs() / 60
                ),
            )
            .fix("'git loop doctor --repair' removes it (no object is in it: a finished write renames its file)")
            .repair(Action::RemoveFile(path)),
        );
    }
}

/// The task index and the journal caches: files of an earlier version, half-written ones,
/// ones that cannot be parsed, and an index that disagrees with what the refs hold now.
fn check_caches(store: &Store, opts: &Options, states: &TaskStates, out: &mut Vec<Finding>) {
    let loop_dir = git::loop_dir(&store.repo);
    let stale = |path: &Path, why: String| {
        let place = shown(opts, path);
        Finding::leftover(Kind::Cache, &place, format!("cache '{place}' {why}"))
            .fix("'git loop doctor --repair' deletes it; it is rebuilt from the refs when next needed")
    };
    for old in index::OLD_FILES {
        let path = loop_dir.join(old);
        if path.is_file() {
            out.push(
                stale(&path, "is of an earlier version: nothing reads it".into()).repair(Action::RemoveFile(path)),
            );
        }
    }
    let aside = |dir: &Path, prefix: &str| -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)))
            .map(|e| e.path())
            .filter(|p| age(p).is_some_and(|a| a >= TEMP_AGE))
            .collect();
        found.sort();
        found
    };
    let index_path = loop_dir.join(index::FILE);
    let journal_tasks = loop_dir.join("journal-tasks");
    for path in aside(&loop_dir, &format!("{}.tmp-", index::FILE)).into_iter().chain(aside(&journal_tasks, "tips.")) {
        out.push(stale(&path, "was being written by a process that is gone".into()).repair(Action::RemoveFile(path)));
    }
    match index::cached(&store.repo) {
        None => {}
        Some(None) => {
            out.push(stale(&index_path, "cannot be parsed".into()).repair(Action::RemoveFile(index_path.clone())))
        }
        Some(Some(cached)) => {
            let wrong_row = cached.tasks.iter().find(|(id, tip)| {
                states.get(&format!("{}{id}", refs::TASKS)).is_some_and(|(now, healthy)| now == tip && !healthy)
            });
            let wrong_mark = cached.corrupt.iter().find(|name| match states.get(*name) {
                Some((_, healthy)) => *healthy,
                None => name.as_str() == git::packed::NAME && git::packed::bad_lines(&store.repo).is_empty(),
            });
            let why = match (wrong_row, wrong_mark) {
                (Some((id, _)), _) => Some(format!("holds {id} as readable, but its history is not (see above)")),
                (None, Some(name)) => Some(format!("holds '{name}' as unreadable, but it reads now")),
                (None, None) => None,
            };
            if let Some(why) = why {
                out.push(stale(&index_path, why).repair(Action::RemoveFile(index_path.clone())));
            }
        }
    }
    let journal = loop_dir.join("journal-v1");
    let unreadable = lines_not_matching(&journal, |line| {
        let fields: Vec<&str> = line.splitn(5, '\t').collect();
        fields.len() == 5
            && gix::ObjectId::from_hex(fields[0].as_bytes()).is_ok()
            && fields[1].split(',').filter(|p| !p.is_empty()).all(|p| gix::ObjectId::from_hex(p.as_bytes()).is_ok())
    });
    if unreadable > 0 {
        out.push(stale(&journal, lines(unreadable)).repair(Action::RemoveFile(journal)));
    }
    let mut torn = lines_not_matching(&journal_tasks.join("tips"), |line| {
        line.split_once('\t').is_some_and(|(name, tip)| {
            name.starts_with(refs::JOURNAL) && gix::ObjectId::from_hex(tip.as_bytes()).is_ok()
        })
    });
    if let Ok(entries) = std::fs::read_dir(&journal_tasks) {
        for entry in entries.flatten() {
            // "tips" is a valid task id too (imported ids are kept as they were).
            if entry.file_name().to_str().is_some_and(|n| n != "tips" && n.parse::<TaskId>().is_ok()) {
                torn += lines_not_matching(&entry.path(), |line| {
                    line.split_once('\t').is_some_and(|(id, json)| {
                        gix::ObjectId::from_hex(id.as_bytes()).is_ok()
                            && serde_json::from_str::<serde_json::Value>(json).is_ok()
                    })
                });
            }
        }
    }
    if torn > 0 {
        out.push(stale(&journal_tasks, lines(torn)).repair(Action::RemoveDir(journal_tasks)));
    }
}

fn lines(n: usize) -> String {
    if n == 1 {
        "has 1 unreadable line".to_owned()
    } else {
        format!("has {n} unreadable lines")
    }
}

/// How many lines of a text file `ok` refuses (0 when it cannot be read).
fn lines_not_matching(path: &Path, ok: impl Fn(&str) -> bool) -> usize {
    let Ok(bytes) = std::fs::read(path) else { return 0 };
    String::from_utf8_lossy(&bytes).lines().filter(|l| !ok(l)).count()
}

/// Sessions whose record says they run but whose guard process is gone (their walk crashed),
/// and records that cannot be read.
fn check_sessions(store: &Store, ctx: &Context, out: &mut Vec<Finding>, checked: &mut Checked) {
    let loop_dir = git::loop_dir(&store.repo);
    let Ok(entries) = std::fs::read_dir(loop_dir.join("sessions")) else { return };
    let mut names: Vec<String> =
        entries.flatten().filter_map(|e| e.file_name().to_str().map(ToOwned::to_owned)).collect();
    names.sort();
    for name in names {
        let path = record::dir(&loop_dir, &name).join("record.json");
        if !path.exists() {
            continue;
        }
        checked.sessions += 1;
        let Some(rec) = record::read(&loop_dir, &name) else {
            out.push(
                Finding::leftover(Kind::Session, &name, format!("the record of session {name} cannot be read"))
                    .fix(format!("look at '{}'; the session's commits and journal are in the refs", path.display())),
            );
            continue;
        };
        if rec.ended_at.is_some() || record::is_alive(rec.pid, rec.pid_start, &rec.boot_id, &ctx.boot_id) {
            continue;
        }
        out.push(
            Finding::leftover(
                Kind::Session,
                &name,
                format!("session {name} (walk {}, try {} of {}) ended without a trace: its walk is gone", rec.walker, rec.try_number, rec.task),
            )
            .fix("run 'git loop run' (with nothing to do it only recovers): it stops what the session left running, commits its work to its try branch and releases its claim"),
        );
    }
}
