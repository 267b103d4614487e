//! The pool: finished tries' worktrees kept (up to `loop.pool`, default 4 per clone) and reused
//! for the next try, checked out in place, instead of being deleted and made again. A worktree
//! that comes back from the pool keeps what git ignores in it (its `target/`, `node_modules/`:
//! the build state) and nothing else of the try before it.
//!
//! - Kept: a try's worktree that is finished goes to `<worktrees root>/.pool/<stamp>-<nonce>`
//!   (ids are ref components, which never start with `.`, so no try's worktree is named so), its
//!   `HEAD` detached at the commit it had, so no branch stays checked out in it. With the pool
//!   full, the entry kept longest goes first (its build state is the oldest).
//! - Reused: the newest entry is checked out in place at the new try's start commit, still in
//!   the pool and detached — every untracked file that is not ignored removed, every tracked
//!   file of the try before that the new tree does not have removed, every file the new tree
//!   has that differs (or was changed on disk) written, the rest left as they are, with their
//!   modification times, so a build tool rebuilds only what differs — then verified clean by a
//!   status, renamed to the try's worktree and attached to its branch. A crash at any step
//!   leaves a pool entry (checked out again from scratch at its next use) or a clean worktree
//!   on the try's start commit, never a try holding another try's files.
//! - Entries are taken and given back under the clone's worktree lock (`tries::WorktreeLock`),
//!   so two walks of one clone never take the same one. An entry that is not a worktree this
//!   clone registers (its registration pruned, its `.git` rewritten) is removed, not used.
//! - Per task: an entry is taken only by a later try of the task whose try gave it back, since
//!   what git ignores in it (build state, but also any file an agent left there that the
//!   project ignores: a `local.mk` the Makefile includes, a poisoned build output) was written
//!   by that task's agent. With `loop.pool.share` on, any task's try takes any entry — faster
//!   for trusted agents — and its line and `try_opened` name the other task it inherits from.
//! - Not pooled: worktrees of a repository with sparse checkout (a checkout in place would have
//!   to apply its patterns), and with `loop.pool = 0`.
//! - Disk: each worktree's disk use is measured when it is given back (its blocks, links not
//!   followed) and kept beside its registration (`loop-pool-bytes`), so `status` and `doctor`
//!   say what the pool holds without walking it. `loop.pool.maxSize` caps the total: the
//!   entries kept longest go until the new one fits, and one larger than the cap alone is not
//!   kept.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::{registration_of, remove_tree, worktrees_root, Try};
use crate::git;
use crate::store::Store;

/// How many finished worktrees a clone keeps when `loop.pool` is unset.
pub const DEFAULT_SIZE: usize = 4;

/// The pool's directory under the worktrees root.
pub const DIR: &str = ".pool";

/// How a try's worktree was made (`try_opened`'s `checkout`, docs/storage.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    pub how: How,
    pub elapsed: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    /// Added from nothing (`git worktree add`).
    Added,
    /// A pooled worktree checked out in place.
    Pooled(Reused),
}

/// What checking a pooled worktree out in place did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reused {
    /// The worktree it was: `<task>-<n>` of the try that used it last.
    pub from: String,
    /// Tracked files written (new or different), removed (tracked before, not now; untracked
    /// and not ignored), and left as they were.
    pub written: usize,
    pub removed: usize,
    pub kept: usize,
    /// The worktree was another task's (`loop.pool.share`): what git ignores in it came with it.
    pub other_task: bool,
}

impl Checkout {
    /// The opened line's part: `reused the worktree of t-4f2a-1 (12 files written, 3 removed, 0.04 s)`.
    pub fn describe(&self) -> Option<String> {
        let How::Pooled(r) = &self.how else { return None };
        Some(format!(
            "reused the pooled worktree of {}{} ({} written, {} removed, {} kept, {:.2} s)",
            r.from,
            if r.other_task { ", another task's, with what git ignores in it (loop.pool.share)" } else { "" },
            files(r.written),
            r.removed,
            r.kept,
            self.elapsed.as_secs_f64()
        ))
    }

    /// The journal's `checkout` field of `try_opened`.
    pub fn record(&self) -> crate::store::events::Checkout {
        let elapsed_ms = self.elapsed.as_millis() as u64;
        match &self.how {
            How::Added => crate::store::events::Checkout {
                how: "added".to_owned(),
                elapsed_ms,
                shared: None,
                from: None,
                written: None,
                removed: None,
                kept: None,
            },
            How::Pooled(r) => crate::store::events::Checkout {
                how: "pooled".to_owned(),
                elapsed_ms,
                shared: r.other_task.then_some(true),
                from: Some(r.from.clone()),
                written: Some(r.written as u64),
                removed: Some(r.removed as u64),
                kept: Some(r.kept as u64),
            },
        }
    }
}

fn files(n: usize) -> String {
    if n == 1 {
        "1 file".to_owned()
    } else {
        format!("{n} files")
    }
}

/// `loop.pool`: how many finished worktrees to keep (0: none).
pub fn size(store: &Store) -> Result<usize, crate::error::Refusal> {
    match store.config_values("loop.pool").last() {
        None => Ok(DEFAULT_SIZE),
        Some(v) => v.trim().parse::<usize>().ok().filter(|n| *n <= 64).ok_or_else(|| {
            crate::error::usage(format!("loop.pool '{}' is not a number from 0 to 64", v.escape_debug()))
                .hint("it is how many finished try worktrees to keep for reuse, e.g. git config loop.pool 4 (0: none)")
        }),
    }
}

/// `loop.pool.maxSize`: the most disk the pool's worktrees may use together, in bytes (`None`:
/// no cap but `loop.pool`'s count).
pub fn max_bytes(store: &Store) -> Result<Option<u64>, crate::error::Refusal> {
    let Some(v) = store.config_values("loop.pool.maxSize").last().cloned() else { return Ok(None) };
    crate::store::settings::parse_size(&v).filter(|n| *n > 0).map(Some).ok_or_else(|| {
        crate::error::usage(format!("loop.pool.maxSize '{}' is not a size", v.escape_debug()))
            .hint("the most disk the pool's worktrees may use together, e.g. git config loop.pool.maxSize 5g")
    })
}

/// The file beside a pooled worktree's registration that holds its disk use, in bytes.
const BYTES_FILE: &str = "loop-pool-bytes";

/// The disk `path` uses: the blocks of every file below it, links not followed, other file
/// systems not entered.
pub fn disk_use(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(top) = std::fs::symlink_metadata(path) else { return 0 };
    let device = top.dev();
    let mut total = top.blocks() * 512;
    let mut stack = vec![path.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.dev() != device {
                continue;
            }
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

/// The pool's worktrees and the disk they use together, as measured when each was given back
/// (one without a measure is measured now).
pub fn usage(store: &Store) -> Result<(usize, u64)> {
    let kept = entries(store)?;
    let bytes = kept.iter().map(|e| e.bytes.unwrap_or_else(|| disk_use(&e.path))).sum();
    Ok((kept.len(), bytes))
}

/// `loop.pool.share`: whether a pooled worktree may go to another task's try (off by default).
pub fn share(store: &Store) -> bool {
    store
        .config_values("loop.pool.share")
        .last()
        .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "yes" | "on" | "1"))
}

/// The pool's directory of `store`.
pub fn dir(store: &Store) -> Result<PathBuf> {
    Ok(worktrees_root(store)?.join(DIR))
}

/// One worktree in the pool.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
    /// Its registration, when it is a worktree this clone registers (else it is broken).
    pub admin: Option<PathBuf>,
    /// When it was given back (from its name).
    pub kept_at_ms: u64,
    /// The disk it used when it was given back, where that was measured.
    pub bytes: Option<u64>,
}

/// The pool's entries, newest first.
pub fn entries(store: &Store) -> Result<Vec<Entry>> {
    let dir = dir(store)?;
    let mut out: Vec<Entry> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let kept_at_ms = name.split_once('-').and_then(|(stamp, _)| stamp.parse().ok()).unwrap_or(0);
            let real_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
            let admin = if real_dir { registered(store, &path) } else { None };
            let bytes = admin
                .as_ref()
                .and_then(|a| std::fs::read_to_string(a.join(BYTES_FILE)).ok())
                .and_then(|t| t.trim().parse().ok());
            Entry { path, admin, kept_at_ms, bytes }
        })
        .collect();
    out.sort_by(|a, b| b.kept_at_ms.cmp(&a.kept_at_ms).then_with(|| b.path.cmp(&a.path)));
    Ok(out)
}

/// The registration of the worktree at `path` if it is a sound one of this clone: its
/// registration's `gitdir` names `path/.git`, and `path/.git` is a file naming that
/// registration back.
fn registered(store: &Store, path: &Path) -> Option<PathBuf> {
    let admin = registration_of(store, path)?;
    let gitfile = path.join(".git");
    if !std::fs::symlink_metadata(&gitfile).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let text = std::fs::read_to_string(&gitfile).ok()?;
    let named = text.trim().strip_prefix("gitdir:")?.trim();
    let same = |a: &Path, b: &Path| match (gix::path::realpath(a), gix::path::realpath(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    same(Path::new(named), &admin).then_some(admin)
}

fn sparse(store: &Store) -> bool {
    store.config_values("core.sparseCheckout").last().is_some_and(|v| matches!(v.trim(), "true" | "yes" | "on" | "1"))
}

/// Give `try_`'s finished worktree to the pool, if the pool takes it (it is on, not sparse, and
/// the worktree is a sound registered one): true. False: the caller removes it. Called under
/// the worktree lock.
pub(super) fn give_back(store: &Store, try_: &Try) -> Result<bool> {
    let size = size(store).unwrap_or(0);
    if size == 0 || sparse(store) {
        return Ok(false);
    }
    let Some(admin) = registered(store, &try_.worktree) else { return Ok(false) };
    let cap = max_bytes(store).unwrap_or(None);
    let bytes = disk_use(&try_.worktree);
    if cap.is_some_and(|cap| bytes > cap) {
        // Larger than the whole pool may be: not kept.
        return Ok(false);
    }
    // Room first: the entries kept longest go, until the count and the disk allow the new one.
    let mut kept = entries(store)?;
    let mut kept_bytes: u64 = kept.iter().map(|e| e.bytes.unwrap_or_else(|| disk_use(&e.path))).sum();
    while kept.len() >= size || cap.is_some_and(|cap| kept_bytes + bytes > cap) {
        let Some(oldest) = kept.pop() else { break };
        kept_bytes = kept_bytes.saturating_sub(oldest.bytes.unwrap_or(0));
        clear(store, &oldest)?;
    }
    // No branch stays checked out in a pooled worktree: its HEAD is detached where it was.
    let head = std::fs::read_to_string(admin.join("HEAD")).unwrap_or_default();
    let at = match head.trim().strip_prefix("ref: ") {
        Some(branch) => store.ref_target(branch)?,
        None => head.trim().parse::<ObjectId>().ok(),
    };
    let Some(at) = at else { return Ok(false) };
    write_atomically(&admin.join("HEAD"), &format!("{at}\n"))?;
    for name in ["MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "CHERRY_PICK_HEAD", "REVERT_HEAD", "ORIG_HEAD"] {
        let _ = std::fs::remove_file(admin.join(name));
    }
    let pool = dir(store)?;
    std::fs::create_dir_all(&pool).with_context(|| format!("could not create '{}'", pool.display()))?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let name = format!("{stamp}-{}", crate::ids::random_base32(6));
    let dest = pool.join(&name);
    // Moved first, then its registration told: a crash between leaves a registration naming a
    // worktree that is gone (pruned) and a pool entry that is not sound (cleared at its turn).
    crate::failpoint::write_point();
    std::fs::rename(&try_.worktree, &dest)
        .with_context(|| format!("could not move '{}' to the pool", try_.worktree.display()))?;
    write_atomically(&admin.join("gitdir"), &format!("{}\n", real(&dest)?.join(".git").display()))?;
    write_atomically(&admin.join("loop-pool-from"), &format!("{}-{}\n", try_.task, try_.number))?;
    write_atomically(&admin.join(BYTES_FILE), &format!("{bytes}\n"))?;
    Ok(true)
}

/// Take a pooled worktree for `try_` (whose branch exists and whose worktree is not there),
/// checked out in place on its branch: `None` when the pool has none that can be (the caller
/// adds one). Called under the worktree lock.
pub(super) fn take(store: &Store, try_: &Try) -> Result<Option<Reused>> {
    if size(store).unwrap_or(0) == 0 || sparse(store) {
        return Ok(None);
    }
    // An empty pool (the first tries, or one that is off) costs a directory listing, no more.
    let kept = entries(store)?;
    if kept.is_empty() {
        return Ok(None);
    }
    let Some(start) = store.ref_target(&try_.branch)? else { return Ok(None) };
    if super::checked_out_in(store, &try_.branch)?.is_some() {
        return Ok(None);
    }
    if std::fs::symlink_metadata(&try_.worktree).is_ok() {
        return Ok(None);
    }
    let share = share(store);
    for entry in kept {
        let Some(admin) = entry.admin.clone() else {
            clear(store, &entry)?;
            continue;
        };
        let from = std::fs::read_to_string(admin.join("loop-pool-from"))
            .map(|t| t.trim().to_owned())
            .unwrap_or_else(|_| admin.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        // `<task>-<n>`: another task's entry (or one whose task cannot be told) waits for its
        // own task's next try, unless the person shares the pool.
        let other_task = from.rsplit_once('-').is_none_or(|(task, _)| task != try_.task.as_str());
        if other_task && !share {
            continue;
        }
        // Checked out while still in the pool, detached: a crash here leaves a pool entry.
        write_atomically(&admin.join("HEAD"), &format!("{start}\n"))?;
        let counts = match check_out_in_place(&entry.path, start) {
            Ok(counts) => counts,
            Err(_) => {
                clear(store, &entry)?;
                continue;
            }
        };
        if let Some(parent) = try_.worktree.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
        }
        write_atomically(&admin.join("gitdir"), &format!("{}\n", real(&try_.worktree)?.join(".git").display()))?;
        crate::failpoint::write_point();
        std::fs::rename(&entry.path, &try_.worktree)
            .with_context(|| format!("could not move a pooled worktree to '{}'", try_.worktree.display()))?;
        // A `git worktree prune` beside the loop may have taken the registration while its
        // `gitdir` named a place not there yet: then this worktree is not one any more.
        if !admin.join("gitdir").exists() {
            let _ = remove_tree(&try_.worktree);
            continue;
        }
        write_atomically(&admin.join("HEAD"), &format!("ref: {}\n", try_.branch))?;
        let _ = std::fs::remove_file(admin.join("loop-pool-from"));
        return Ok(Some(Reused {
            from,
            written: counts.written,
            removed: counts.removed,
            kept: counts.kept,
            other_task,
        }));
    }
    Ok(None)
}

/// Remove a pool entry and its registration.
pub fn clear(store: &Store, entry: &Entry) -> Result<()> {
    remove_tree(&entry.path).with_context(|| format!("could not remove '{}'", entry.path.display()))?;
    match &entry.admin {
        Some(admin) => store.retire_worktree_registration(admin),
        None => super::prune_missing(store),
    }
}

/// Remove the pool entry at `path` if it is still there (`doctor --repair` of one nobody uses),
/// under the worktree lock: false when it was gone (taken for a try meanwhile, or cleared).
pub fn clear_entry(store: &Store, path: &Path) -> Result<bool> {
    let _guard = super::WorktreeLock::take(store)?;
    let Some(entry) = entries(store)?.into_iter().find(|e| e.path == path) else { return Ok(false) };
    clear(store, &entry)?;
    Ok(true)
}

#[derive(Debug, Default)]
struct Counts {
    written: usize,
    removed: usize,
    kept: usize,
}

/// Make the worktree at `dir` hold exactly `commit`'s tree with its index matching, keeping
/// what git ignores and the files that are already right (their stat data carried over).
fn check_out_in_place(dir: &Path, commit: ObjectId) -> Result<Counts> {
    use gix::status::index_worktree::Item as Iw;
    use gix::status::plumbing::index_as_worktree::EntryStatus;
    let mut wt = gix::open(dir).with_context(|| format!("could not open the pooled worktree '{}'", dir.display()))?;
    git::harden(&mut wt)?;
    let tree = wt.find_commit(commit).context("could not read the try's start commit")?.tree_id()?.detach();
    let old = wt.index_or_empty().context("could not read the pooled worktree's index")?;
    let mut counts = Counts::default();
    // What differs on disk from the old index, and what is there untracked and not ignored.
    // A file whose content is as indexed but whose stat is not (touched) is unchanged, with
    // the stat it has now.
    let mut changed = std::collections::HashSet::new();
    let mut restat = std::collections::HashMap::new();
    let mut untracked = Vec::new();
    for item in status(&wt)? {
        match item.context("could not read the pooled worktree's status")? {
            Iw::Modification { rela_path, status: EntryStatus::NeedsUpdate(stat), .. } => {
                restat.insert(rela_path, stat);
            }
            Iw::Modification { rela_path, .. } => {
                changed.insert(rela_path);
            }
            Iw::DirectoryContents { entry, .. } => {
                if entry.status == gix::dir::entry::Status::Untracked {
                    untracked.push(entry.rela_path);
                }
            }
            Iw::Rewrite { .. } => {}
        }
    }
    for rela in &untracked {
        remove_path(dir, rela.as_ref())?;
        counts.removed += 1;
    }
    let mut index = wt.index_from_tree(&tree).context("could not build the index of the try's start")?;
    let mut wanted = std::collections::HashSet::new();
    for (entry, path) in index.entries_mut_with_paths() {
        wanted.insert(path.to_owned());
        let same = old
            .entry_by_path(path)
            .filter(|o| o.id == entry.id && o.mode == entry.mode && !changed.contains(path))
            .map(|o| restat.get(path).copied().unwrap_or(o.stat));
        match same {
            Some(stat) => {
                entry.stat = stat;
                entry.flags.insert(gix::index::entry::Flags::SKIP_WORKTREE);
                counts.kept += 1;
            }
            None => counts.written += 1,
        }
    }
    for entry in old.entries() {
        let path = entry.path(&old);
        if !wanted.contains(path) && entry.mode != gix::index::entry::Mode::COMMIT {
            remove_path(dir, path)?;
            counts.removed += 1;
        }
    }
    let mut options = wt
        .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
        .context("could not read the checkout options")?;
    options.destination_is_initially_empty = false;
    options.overwrite_existing = true;
    let objects = wt.objects.clone().into_arc().context("could not open the object database")?;
    let interrupt = std::sync::atomic::AtomicBool::new(false);
    let outcome = gix::worktree::state::checkout(
        &mut index,
        dir,
        objects,
        &gix::progress::Discard,
        &gix::progress::Discard,
        &interrupt,
        options,
    )
    .context("could not check the pooled worktree out")?;
    if !outcome.errors.is_empty() || !outcome.collisions.is_empty() {
        anyhow::bail!(
            "{} file(s) of the try's start could not be written",
            outcome.errors.len() + outcome.collisions.len()
        );
    }
    for entry in index.entries_mut() {
        entry.flags.remove(gix::index::entry::Flags::SKIP_WORKTREE);
    }
    index.write(Default::default()).context("could not write the pooled worktree's index")?;
    // Verified: nothing tracked differs, and nothing untracked that the new ignore rules do
    // not ignore (a file the try before ignored and this one does not) is left.
    let wt = {
        let mut wt = gix::open(dir).context("could not open the pooled worktree again")?;
        git::harden(&mut wt)?;
        wt
    };
    for item in status(&wt)? {
        match item.context("could not read the pooled worktree's status")? {
            Iw::Modification { status: EntryStatus::NeedsUpdate(_), .. } => {}
            Iw::Modification { rela_path, .. } => {
                anyhow::bail!("'{rela_path}' differs from the try's start after the checkout")
            }
            Iw::DirectoryContents { entry, .. } if entry.status == gix::dir::entry::Status::Untracked => {
                remove_path(dir, entry.rela_path.as_ref())?;
                counts.removed += 1;
            }
            _ => {}
        }
    }
    Ok(counts)
}

/// The index-to-worktree status of `wt`: changed tracked files and every untracked file (not
/// collapsed into directories) that is not ignored; nested repositories as one entry.
fn status(wt: &gix::Repository) -> Result<gix::status::index_worktree::Iter> {
    wt.status(gix::progress::Discard)
        .context("could not prepare the pooled worktree's status")?
        .untracked_files(gix::status::UntrackedFiles::Files)
        .index_worktree_rewrites(None)
        .index_worktree_submodules(gix::status::Submodule::Given {
            ignore: gix::submodule::config::Ignore::All,
            check_dirty: false,
        })
        .into_index_worktree_iter(Vec::<gix::bstr::BString>::new())
        .context("could not read the pooled worktree's status")
}

/// Remove `rela` under `root` (a file, a link — never followed — or a directory with all in
/// it), and the directories it leaves empty up to `root`. What is not there is no error; a
/// path through a symlinked or non-directory parent is not followed (the link itself is what
/// the status named, and went first).
fn remove_path(root: &Path, rela: &gix::bstr::BStr) -> Result<()> {
    let rela = gix::path::from_bstr(rela).context("a path in the worktree is not valid here")?.into_owned();
    let rela = Path::new(rela.to_str().unwrap_or_default().trim_end_matches('/'));
    let mut at = root.to_owned();
    let parts: Vec<_> = rela.components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        if !std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
            return Ok(());
        }
    }
    let path = root.join(rela);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => remove_tree(&path).with_context(|| format!("could not remove '{}'", path.display()))?,
        Ok(_) => std::fs::remove_file(&path).with_context(|| format!("could not remove '{}'", path.display()))?,
        Err(_) => return Ok(()),
    }
    let mut dir = path.parent();
    while let Some(d) = dir.filter(|d| *d != root && d.starts_with(root)) {
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// `path` as a registration names it (as `git worktree add` does): its parent's real path
/// (symlinks resolved), with its own name, whether or not it exists yet.
fn real(path: &Path) -> Result<PathBuf> {
    let parent = path.parent().context("a worktree's path has no parent")?;
    let name = path.file_name().context("a worktree's path has no name")?;
    Ok(gix::path::realpath(parent).context("could not resolve the worktrees' directory")?.join(name))
}

fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension(format!("loop-{}", crate::ids::random_base32(6)));
    std::fs::write(&tmp, text).with_context(|| format!("could not write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("could not update '{}'", path.display()))
}

/// Time a worktree's making (for `Checkout`).
pub(super) fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, Duration)> {
    let began = Instant::now();
    let value = f()?;
    Ok((value, began.elapsed()))
}
