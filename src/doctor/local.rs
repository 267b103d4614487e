//! This clone's machine-local state: what crashed or interrupted processes leave behind (ref
//! locks, walks and their sessions, claims and worktrees, temporary object files, caches). None
//! of it is shared and none of it holds data the refs do not, except uncommitted work in a
//! worktree, which recovery commits to its try branch before the worktree goes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use super::records::TaskStates;
use super::{Action, Checked, Finding, Kind, Options};
use crate::agent::record;
use crate::context::Context;
use crate::git;
use crate::ids::TaskId;
use crate::refs;
use crate::store::claim::{self, Listed};
use crate::store::layout::Layout;
use crate::store::locks::{self, Standing};
use crate::store::{cas, index, journal, Store};
use crate::tries;
use crate::walk::{self, recover, ThisClonesWalk};

/// How old a temporary file must be before it counts as left by a process that is gone: a
/// pack being received or an index being written takes seconds, an hour is far beyond any.
pub const TEMP_AGE: Duration = Duration::from_secs(3600);

/// What `--repair` does about what a crashed walk left, and what a person can do instead.
const RECOVER_FIX: &str = "'git loop doctor --repair' recovers it as the next 'git loop run' would: it stops what was left running, commits what is left in the worktrees to their try branches, and releases the claims";

pub(super) fn check(
    store: &Store,
    ctx: &Context,
    opts: &Options,
    states: &TaskStates,
    out: &mut Vec<Finding>,
    checked: &mut Checked,
) -> Result<()> {
    check_locks(store, opts, out)?;
    check_walks(store, ctx, opts, out, checked)?;
    check_pool(store, ctx, opts, out, checked)?;
    check_temp_objects(store, opts, out);
    check_caches(store, opts, states, out);
    Ok(())
}

/// A pooled worktree nobody has taken for this long is left over: its build state is stale.
pub const POOL_IDLE: Duration = Duration::from_secs(14 * 24 * 3600);

/// The pool of finished tries' worktrees (`tries::pool`): each entry counted as kept for the
/// next try (the summary's "N pooled"), unless nobody uses it — it is not a sound worktree of
/// this clone any more, it is beyond `loop.pool` (or the pool is off), or nobody has taken it
/// for [`POOL_IDLE`] — when `--repair` removes it.
fn check_pool(
    store: &Store,
    ctx: &Context,
    opts: &Options,
    out: &mut Vec<Finding>,
    checked: &mut Checked,
) -> Result<()> {
    let size = tries::pool::size(store).unwrap_or(tries::pool::DEFAULT_SIZE);
    let cap = tries::pool::max_bytes(store).unwrap_or(None);
    let now_ms = ctx.now().timestamp_millis().max(0) as u64;
    let (mut kept, mut kept_bytes) = (0, 0u64);
    for (i, entry) in tries::pool::entries(store)?.iter().enumerate() {
        let place = shown(opts, &entry.path);
        let idle = Duration::from_millis(now_ms.saturating_sub(entry.kept_at_ms));
        let bytes = tries::pool::disk_use(&entry.path);
        let why = if entry.admin.is_none() {
            "it is no worktree this clone registers any more".to_owned()
        } else if i >= size {
            match size {
                0 => "the pool is off (loop.pool 0)".to_owned(),
                n => format!("loop.pool keeps {n}, and {n} newer ones are there"),
            }
        } else if let Some(cap) = cap.filter(|cap| kept_bytes + bytes > *cap) {
            format!(
                "loop.pool.maxSize is {}, and with the newer ones it would make {}",
                crate::tries::warm::bytes(cap),
                crate::tries::warm::bytes(kept_bytes + bytes)
            )
        } else if idle >= POOL_IDLE {
            format!("nobody has taken it for {} days", idle.as_secs() / 86_400)
        } else {
            kept += 1;
            kept_bytes += bytes;
            continue;
        };
        out.push(
            Finding::leftover(Kind::Worktree, &place, format!("pooled worktree '{place}' is left over: {why}"))
                .fix("'git loop doctor --repair' removes it and its registration")
                .repair(Action::ClearPooled(entry.path.clone())),
        );
    }
    checked.pooled = kept;
    checked.pooled_bytes = kept_bytes;
    Ok(())
}

/// A path as people read it: relative to the working tree when under it.
pub(super) fn shown(opts: &Options, path: &Path) -> String {
    path.strip_prefix(&opts.workdir).unwrap_or(path).display().to_string()
}

/// The age of `path` by its file system's clock (`None`: it cannot be told).
fn age(path: &Path) -> Option<Duration> {
    let meta = std::fs::metadata(path).ok()?;
    locks::age(path, &meta)
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

/// The locks writers recover (see `store::locks`), judged the way they judge them: on the refs
/// git-loop owns (and the files a lock recovery moves aside or its clock probe), and
/// `packed-refs.lock`. Abandoned ones are leftovers; one in use is said to be, and left.
fn check_locks(store: &Store, opts: &Options, out: &mut Vec<Finding>) -> Result<()> {
    let common = store.common_dir();
    let mut found = Vec::new();
    lock_files(&common.join("refs"), &mut found);
    found.retain(|path| {
        let rel = path.strip_prefix(common).unwrap_or(path).to_string_lossy().into_owned();
        cas::owned_by_loop(rel.strip_suffix(".lock").unwrap_or(&rel))
    });
    found.sort();
    if let Ok(entries) = std::fs::read_dir(common) {
        let mut top: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n == "packed-refs.lock" || (n.starts_with('.') && n.ends_with(".lock") && n.len() > 5)
                })
            })
            .collect();
        top.sort();
        found.extend(top);
    }
    for path in found {
        let place = shown(opts, &path);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let what = if name == "packed-refs.lock" {
            "packed-refs".to_owned()
        } else if name.starts_with('.') {
            String::new()
        } else {
            let rel = path.strip_prefix(common).unwrap_or(&path).display().to_string();
            format!("ref '{}'", rel.strip_suffix(".lock").unwrap_or(&rel))
        };
        match locks::standing(common, &path)? {
            Standing::Gone => {}
            Standing::Abandoned(age) => {
                let problem = if what.is_empty() {
                    format!("'{place}' was left by a lock recovery that was killed, {} s ago", age.as_secs())
                } else {
                    format!(
                        "{what} is locked by '{place}', left {} s ago by a writer that is gone (no process has it open, no git-loop write is in flight); every write of it fails while it stays",
                        age.as_secs()
                    )
                };
                out.push(
                    Finding::leftover(Kind::Lock, &place, problem)
                        .fix("'git loop doctor --repair' removes it (the next git-loop write would too)")
                        .repair(Action::RemoveLock(path)),
                );
            }
            Standing::Open => out.push(
                Finding::info(Kind::Lock, &place, format!("'{place}' is held by a live process (a git command has it open); left alone"))
                    .fix("nothing to do: it goes when its holder finishes"),
            ),
            Standing::InFlight => out.push(
                Finding::info(
                    Kind::Lock,
                    &place,
                    format!("'{place}' is held by a live process: a git-loop write is in flight in this clone (or a git-loop process is stopped in the middle of one); left alone"),
                )
                .fix("nothing to do: if it stays once no git-loop runs, run 'git loop doctor --repair' again"),
            ),
            Standing::Young => out.push(
                Finding::info(
                    Kind::Lock,
                    &place,
                    format!("'{place}' was taken less than {} s ago: its writer may be at work; left alone", locks::SETTLED.as_secs()),
                )
                .fix("nothing to do: if it stays, 'git loop doctor' says so"),
            ),
        }
    }
    Ok(())
}

/// What a worktree registration (`<common-dir>/worktrees/<name>/`) says.
struct Registration {
    admin: PathBuf,
    /// The worktree's directory.
    worktree: PathBuf,
    on_try: bool,
    locked: bool,
    gone: bool,
}

fn registrations(store: &Store) -> Vec<Registration> {
    let Ok(entries) = std::fs::read_dir(store.worktree_registrations()) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let admin = entry.path();
        let Ok(gitdir) = std::fs::read_to_string(admin.join("gitdir")) else { continue };
        let gitfile = PathBuf::from(gitdir.trim());
        let head = std::fs::read_to_string(admin.join("HEAD")).unwrap_or_default();
        out.push(Registration {
            worktree: gitfile.parent().map(Path::to_owned).unwrap_or_else(|| gitfile.clone()),
            gone: !gitfile.exists(),
            locked: admin.join("locked").exists(),
            on_try: head.trim().strip_prefix("ref: ").is_some_and(|r| r.starts_with(refs::TRY_BRANCHES)),
            admin,
        });
    }
    out.sort_by(|a, b| a.admin.cmp(&b.admin));
    out
}

/// What crashed walks of this clone left, judged as the next walk's recovery judges it
/// (`walk::recover`): the walk itself (it holds the clone's walker claim), its sessions, the
/// task claims it held, worktrees of tasks closed since or of tries never journaled as opened,
/// and registrations of loop worktrees whose directory is gone. While a walk runs, all of that
/// is its own, and only said to be.
fn check_walks(
    store: &Store,
    ctx: &Context,
    opts: &Options,
    out: &mut Vec<Finding>,
    checked: &mut Checked,
) -> Result<()> {
    let loop_dir = Layout::of(store.common_dir()).root().to_owned();
    let root = tries::worktrees_root(store)?;
    let regs = registrations(store);
    let pool = tries::pool::dir(store)?;
    checked.worktrees =
        regs.iter().filter(|r| (r.on_try || r.worktree.starts_with(&root)) && !r.worktree.starts_with(&pool)).count();
    let walk_key = || format!("walker:{}", store.clone_id().unwrap_or_default());
    let mut found = Vec::new();
    match walk::this_clones_walk(store, ctx)? {
        ThisClonesWalk::Running(held) => {
            let r = &held.record;
            out.push(
                Finding::info(
                    Kind::Walk,
                    &walk_key(),
                    format!("a walk of this clone is at work ({}, pid {} on {}): its sessions, claims and worktrees are its own, and are not judged", r.holder, r.pid, r.host),
                )
                .fix("nothing to do: run 'git loop doctor' again once it has ended"),
            );
            return Ok(());
        }
        ThisClonesWalk::Gone(held) => {
            let r = &held.record;
            found.push((
                None,
                Finding::leftover(
                    Kind::Walk,
                    &walk_key(),
                    format!(
                        "walk {} (pid {} on {}) ended without a trace: it still holds this clone's walker claim",
                        r.holder, r.pid, r.host
                    ),
                ),
            ));
        }
        ThisClonesWalk::None => {}
    }
    // Sessions whose record says they run but whose guard is gone.
    let mut dead_walkers = std::collections::HashSet::new();
    let mut names: Vec<String> = std::fs::read_dir(loop_dir.join("sessions"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(ToOwned::to_owned))
        .collect();
    names.sort();
    for name in names {
        let path = record::dir(&loop_dir, &name).join("record.json");
        if !path.exists() {
            continue;
        }
        checked.sessions += 1;
        let Some(rec) = record::read(&loop_dir, &name) else {
            out.push(
                Finding::info(Kind::Session, &name, format!("the record of session {name} cannot be read (or a newer git-loop wrote it); recovery leaves it alone"))
                    .fix(format!("nothing to do: the session's commits and journal are in the refs; '{}' is only its machine-local record", shown(opts, &path))),
            );
            continue;
        };
        if rec.ended_at.is_some() || record::is_alive(rec.pid, rec.pid_start, &rec.boot_id, &ctx.boot_id) {
            continue;
        }
        dead_walkers.insert(rec.walker.clone());
        found.push((
            None,
            Finding::leftover(
                Kind::Session,
                &name,
                format!(
                    "session {name} (walk {}, try {} of {}) ended without a trace: its walk is gone",
                    rec.walker, rec.try_number, rec.task
                ),
            ),
        ));
    }
    // Task claims a walk of this machine that is gone still holds (not a hold kept for a
    // closed task: that one stays).
    for listed in claim::list(store, "node:")? {
        let Listed::Claim { key, held } = listed else { continue };
        let r = &held.record;
        let dead = crate::ids::is_walker_key(&r.holder)
            && (dead_walkers.contains(&r.holder) || r.holder_gone_here(ctx))
            && !crate::backlog::is_hold(r);
        if dead {
            found.push((
                None,
                Finding::leftover(
                    Kind::Claim,
                    &key.to_string(),
                    format!("claim '{key}' is held by walk {}, which is gone: no walk works the task until its lease lapses", r.holder),
                ),
            ));
        }
    }
    let history = |task: &TaskId| -> Result<Vec<journal::Entry>> {
        let filter = journal::Filter { task: Some(task.to_string()), session: None };
        Ok(journal::timeline(store, &filter)?.entries)
    };
    for try_ in recover::worktrees_in(&root) {
        // A task whose record cannot be read is reported with the records.
        let Ok(Some(why)) = recover::left_over(store, &try_, || history(&try_.task)) else { continue };
        let place = shown(opts, &try_.worktree);
        found.push((
            Some(try_.worktree.clone()),
            Finding::leftover(
                Kind::Worktree,
                &place,
                format!(
                    "worktree '{place}' of try {} of {} is left over: {why}, and no walk works in it",
                    try_.number, try_.task
                ),
            ),
        ));
    }
    // Recovery removes those worktrees: never while this command runs inside one of them.
    let inside = found.iter().find_map(|(dir, _)| dir.as_ref().filter(|d| opts.cwd.starts_with(d)));
    let fix = match inside {
        Some(dir) => format!(
            "leave '{}', then run 'git loop doctor --repair' (its recovery removes that worktree)",
            shown(opts, dir)
        ),
        None => RECOVER_FIX.to_owned(),
    };
    let repairable = inside.is_none();
    for (_, finding) in found {
        let finding = finding.fix(fix.clone());
        out.push(if repairable { finding.repair(Action::Recover) } else { finding });
    }
    // Registrations of loop worktrees deleted under the loop (other tools' are theirs).
    for reg in &regs {
        if reg.locked || !reg.gone || !(reg.on_try || reg.worktree.starts_with(&root)) {
            continue;
        }
        let place = shown(opts, &reg.worktree);
        out.push(
            Finding::leftover(Kind::Worktree, &place, format!("worktree '{place}' is registered but its directory is gone"))
                .fix("'git loop doctor --repair' removes its registration (as 'git worktree prune' does), so its branch can be checked out again")
                .repair(Action::PruneRegistration(reg.admin.clone())),
        );
    }
    Ok(())
}

/// Temporary object files (`tmp_obj_*`, `tmp_pack_*`, `tmp_idx_*`) older than an hour: what an
/// object or pack write killed midway, or out of space, leaves.
fn check_temp_objects(store: &Store, opts: &Options, out: &mut Vec<Finding>) {
    let objects = store.objects_dir();
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
    let layout = Layout::of(store.common_dir());
    let loop_dir = layout.root().to_owned();
    let stale = |path: &Path, why: String| {
        let place = shown(opts, path);
        Finding::leftover(Kind::Cache, &place, format!("cache '{place}' {why}"))
            .fix("'git loop doctor --repair' deletes it; it is rebuilt from the refs when next needed")
    };
    for path in layout.old_indexes() {
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
    let journal_tasks = layout.journal_tasks();
    let caches = [layout.index(), layout.claims_index()];
    let cache_names: Vec<String> =
        caches.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
    let leftovers = cache_names
        .iter()
        .map(String::as_str)
        .chain(["packed-refs-whole"])
        .flat_map(|name| aside(&loop_dir, &format!("{name}.tmp-")));
    for path in leftovers.chain(aside(&journal_tasks, "tips.")) {
        out.push(stale(&path, "was being written by a process that is gone".into()).repair(Action::RemoveFile(path)));
    }
    for (path, cached) in index::cached(store) {
        let Some(cached) = cached else {
            out.push(stale(&path, "cannot be parsed".into()).repair(Action::RemoveFile(path.clone())));
            continue;
        };
        let wrong_row = cached.tasks.iter().find(|(id, tip)| {
            states.get(&format!("{}{id}", refs::TASKS)).is_some_and(|(now, healthy)| now == tip && !healthy)
        });
        let wrong_mark = cached.corrupt.iter().find(|name| match states.get(*name) {
            Some((_, healthy)) => *healthy,
            None => name.as_str() == git::packed::NAME && store.packed_refs_bad_lines().is_empty(),
        });
        let why = match (wrong_row, wrong_mark) {
            (Some((id, _)), _) => Some(format!("holds {id} as readable, but its history is not (see above)")),
            (None, Some(name)) => Some(format!("holds '{name}' as unreadable, but it reads now")),
            (None, None) => None,
        };
        if let Some(why) = why {
            out.push(stale(&path, why).repair(Action::RemoveFile(path.clone())));
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
