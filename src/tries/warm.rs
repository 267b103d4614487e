//! Warm tries: a new try's worktree starts with the ignored build state (`target/`,
//! `node_modules/`, `.venv/`) of a warm source, so its first build is not a cold one.
//!
//! - What is warmed: the paths `loop.warm` names (repeatable) and the lines of a
//!   `.worktreeinclude` at the main checkout's root (a path or a glob of `*`, `?` and `[…]`
//!   within one component per line; `#` comments). A path is warmed only when git ignores it
//!   both in the source and in the try, and it is tracked in neither: tracked and
//!   untracked-but-not-ignored files are the work, never build state.
//! - The source: the task's previous try's worktree if it still exists (its build state is
//!   the closest to this try's), else the main checkout. The source is only read.
//! - How: each file is cloned (the `FICLONE` ioctl: copy-on-write, where the file system has
//!   it — btrfs, XFS, bcachefs) or else copied; never hard-linked, because cargo rewrites files
//!   of its target directory in place and a hard link would write through into the source.
//!   Modification times are kept. In a worktree checked out afresh for the try (not one from
//!   the pool, whose own build state stays), every tracked file whose content and mode are the
//!   source's, and whose source file is as the source's index last saw it, then takes the
//!   source file's modification time (and the try's index the file's new stat): a build tool
//!   sees the try's sources as the source's build saw them, and rebuilds only what differs.
//!   Without it, every freshly written source is newer than the build state, and cargo rebuilds
//!   the workspace's crates however warm the try.
//! - Symlinks are never followed: a link is copied as a link, unless it points into the source
//!   checkout or (relative) out of the try, which a try must not write through; those are left
//!   out and counted. A path whose parent in the source or the try is a symlink is not warmed.
//! - A path the try already has is left as it is (a try checked out again keeps its own).

use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use super::{worktrees_root, Try};
use crate::error::{usage, Refusal};
use crate::git;
use crate::store::events;
use crate::store::Store;

/// The file at the repository's root whose lines name more paths to warm.
pub const INCLUDE_FILE: &str = ".worktreeinclude";

/// What is warmed when neither `loop.warm` nor a `.worktreeinclude` names anything: the build
/// directories of cargo and npm, where git ignores them (`.venv` is not among them: its scripts
/// name the interpreter of the checkout they were made in, which a try must not write through).
pub const DEFAULTS: [&str; 2] = ["target", "node_modules"];

/// The origin of a path warmed by default.
const DEFAULT_ORIGIN: &str = "default";

/// One path (or glob) to warm, and where it was named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Relative to the repository's root, `/`-separated, no trailing `/`.
    pub path: String,
    /// `loop.warm`, or `.worktreeinclude:<line>`.
    pub origin: String,
}

/// What a walk warms each new try with (empty: nothing).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub wanted: Vec<Wanted>,
    /// `.worktreeinclude` lines that cannot be taken (a `**`, a negation, `..`), each with why:
    /// the file may have been written for another tool, so they are said, not refused.
    pub skipped: Vec<String>,
    /// Paths `loop.sandbox.hide` keeps from sessions, relative to the repository's root: never
    /// warmed, nor anything that holds one (else a `.worktreeinclude` an agent landed would
    /// copy a hidden `secret.env` into every try, where the next session reads it).
    pub hidden: Vec<String>,
}

impl Plan {
    /// The plan the repository's settings and its `.worktreeinclude` make. A `loop.warm` path
    /// that is absolute, leaves the repository, names `.git`, or is tracked in the main checkout
    /// is a usage error naming it, with a hint; such a line of `.worktreeinclude` is skipped.
    /// Neither naming anything, [`DEFAULTS`] are warmed; `loop.warm = none` warms nothing.
    pub fn read(store: &Store) -> Result<Plan> {
        let (mut wanted, mut skipped) = (Vec::new(), Vec::new());
        let values = store.config_values("loop.warm");
        if values.iter().any(|v| v.trim() == "none") {
            return Ok(Plan::default());
        }
        for value in &values {
            if value.trim().is_empty() {
                continue;
            }
            wanted.push(parse(value, "loop.warm", false)?);
        }
        let file = store.workdir().join(INCLUDE_FILE);
        // Not followed if it is a link: the file is the repository's own.
        if std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file()) {
            let text =
                std::fs::read_to_string(&file).with_context(|| format!("could not read '{}'", file.display()))?;
            for (i, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                match parse(line, &format!("{INCLUDE_FILE}:{}", i + 1), true) {
                    Ok(w) => wanted.push(w),
                    Err(refusal) => skipped.push(refusal.message),
                }
            }
        }
        if wanted.is_empty() && values.is_empty() && skipped.is_empty() {
            wanted =
                DEFAULTS.iter().map(|p| Wanted { path: (*p).to_owned(), origin: DEFAULT_ORIGIN.to_owned() }).collect();
        }
        if !wanted.is_empty() {
            let main = open_worktree(store.workdir())?;
            let index = main.index_or_empty().context("could not read the main checkout's index")?;
            let mut kept = Vec::new();
            for w in wanted {
                if is_glob(&w.path) || !tracked_at(&index, &w.path) {
                    kept.push(w);
                    continue;
                }
                let message = format!("{} '{}' is tracked: only ignored build state is warmed", w.origin, w.path);
                if w.origin == DEFAULT_ORIGIN {
                    continue;
                }
                if w.origin != "loop.warm" {
                    skipped.push(message);
                    continue;
                }
                return Err(usage(message)
                    .hint("name a directory git ignores, e.g. target; 'git check-ignore -v <path>' says whether it is")
                    .into());
            }
            wanted = kept;
        }
        Ok(Plan { wanted, skipped, hidden: Vec::new() })
    }

    /// Keep the paths of `hide` (absolute, as `loop.sandbox.hide` is read) that lie in the
    /// repository at `root` out of every warming.
    pub fn hiding(mut self, root: &Path, hide: &[PathBuf]) -> Plan {
        self.hidden = hide
            .iter()
            .filter_map(|h| h.strip_prefix(root).ok())
            .map(|rel| rel.to_string_lossy().trim_end_matches('/').to_owned())
            .collect();
        self
    }

    /// Why `rel` (a path to warm) is never warmed, if a hidden path is it, holds it, or lies in it.
    fn hides(&self, rel: &str) -> Option<String> {
        let within = |p: &str, of: &str| p.len() > of.len() && p.starts_with(of) && p.as_bytes()[of.len()] == b'/';
        self.hidden.iter().find(|h| h.is_empty() || *h == rel || within(rel, h) || within(h, rel)).map(|h| {
            let h = if h.is_empty() { "." } else { h.as_str() };
            format!("loop.sandbox.hide covers '{h}': what sessions may not see is never warmed")
        })
    }

    pub fn is_empty(&self) -> bool {
        self.wanted.is_empty()
    }

    /// Whether it is the default plan (nothing named): then a try with nothing to warm says
    /// nothing of it.
    pub fn is_default(&self) -> bool {
        !self.wanted.is_empty() && self.wanted.iter().all(|w| w.origin == DEFAULT_ORIGIN)
    }
}

/// A path of `origin` checked: relative, inside the repository, not `.git`. `.worktreeinclude`
/// lines (`include`) may be anchored with a leading `/` and may hold globs.
fn parse(text: &str, origin: &str, include: bool) -> Result<Wanted, Refusal> {
    let raw = text.trim();
    let bad = |why: &str, hint: &str| usage(format!("{origin} '{}' {why}", raw.escape_debug())).hint(hint.to_owned());
    let relative_hint = "name it relative to the repository's root, e.g. git config --add loop.warm target";
    let path = match raw.strip_prefix('/') {
        Some(rest) if include => rest,
        Some(_) => return Err(bad("is an absolute path", relative_hint)),
        None => raw,
    };
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        return Err(bad("names no path", relative_hint));
    }
    if include && path.starts_with('!') {
        return Err(bad("is a negation, which warming does not take", "list only what to warm"));
    }
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) if name == ".git" => {
                return Err(bad("names the repository's .git", "name a build directory, e.g. target"))
            }
            Component::Normal(name) if name == "**" || name.to_string_lossy().contains("**") => {
                return Err(bad(
                    "has '**', which warming does not take",
                    "name each directory, or one glob per component: packages/*/node_modules",
                ))
            }
            Component::Normal(_) => {}
            Component::ParentDir => return Err(bad("has '..', which leaves the repository", relative_hint)),
            Component::CurDir => return Err(bad("has a '.' component", relative_hint)),
            Component::RootDir | Component::Prefix(_) => return Err(bad("is an absolute path", relative_hint)),
        }
    }
    if !include && is_glob(path) {
        return Err(bad("is a glob", "put globs in .worktreeinclude; loop.warm takes paths"));
    }
    Ok(Wanted { path: path.to_owned(), origin: origin.to_owned() })
}

fn is_glob(path: &str) -> bool {
    path.contains(['*', '?', '['])
}

/// What a command run in `worktree` (a session, checks, setup) is given so that it builds in
/// a directory of its own: a `CARGO_TARGET_DIR` of the environment that points outside it —
/// one directory every try would share, and wait on, since cargo locks it — is pointed at the
/// worktree's own `target/` instead. A relative one is already the worktree's.
pub fn own_build_dirs(worktree: &Path) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        if dir.is_absolute() && !dir.starts_with(worktree) {
            env.push(("CARGO_TARGET_DIR".to_owned(), worktree.join("target").display().to_string()));
        }
    }
    env
}

/// Where a try's warm state came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The worktree of this earlier try of the task.
    Try(u32),
    /// The main checkout.
    Checkout,
}

/// How the files were put in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Every file cloned copy-on-write.
    Reflink,
    /// Every file copied (the file system clones nothing).
    Copy,
    /// Some cloned, some copied.
    Mixed,
}

impl Method {
    pub fn word(self) -> &'static str {
        match self {
            Method::Reflink => "reflink",
            Method::Copy => "copy",
            Method::Mixed => "reflink and copy",
        }
    }
}

/// What warming a try did.
#[derive(Debug, Clone, PartialEq)]
pub struct Warmed {
    pub source: Source,
    /// The paths warmed, relative to the root, directories with a trailing `/`.
    pub paths: Vec<String>,
    pub method: Method,
    /// Bytes of the files put in place, and how many files.
    pub bytes: u64,
    pub files: u64,
    pub elapsed: Duration,
    /// Symlinks left out: they point into the source checkout or out of the try.
    pub links_left_out: u64,
    /// Paths that could not be warmed, and why (the try starts cold for them).
    pub failed: Vec<(String, String)>,
    /// Tracked files that took the source's modification times (their content is the
    /// source's): a build tool sees them as the source's build did.
    pub aligned: u64,
}

impl Warmed {
    /// One line for people: `warmed target/ from the main checkout, copied (1.2 GB, 0.4 s)`.
    pub fn describe(&self) -> String {
        let from = match self.source {
            Source::Try(n) => format!("try {n}"),
            Source::Checkout => "the main checkout".to_owned(),
        };
        let mut line = if self.paths.is_empty() {
            format!("nothing to warm from {from}")
        } else {
            let how = match self.method {
                Method::Reflink => " by reflink",
                Method::Copy => ", copied",
                Method::Mixed => " by reflink and copy",
            };
            let size = format!("{}, {:.1} s", bytes(self.bytes), self.elapsed.as_secs_f64());
            format!("warmed {} from {from}{how} ({size})", self.paths.join(", "))
        };
        if self.links_left_out > 0 {
            line.push_str(&format!("; {} symlink(s) pointing out of the try left out", self.links_left_out));
        }
        for (path, why) in &self.failed {
            line.push_str(&format!("; {path} not warmed ({why})"));
        }
        if self.aligned > 0 {
            line.push_str(&format!("; {} tracked files as old as in {from}", self.aligned));
        }
        line
    }

    /// The journal's `warmed` field of `try_opened`.
    pub fn record(&self) -> events::Warmed {
        events::Warmed {
            from: match self.source {
                Source::Try(n) => format!("try {n}"),
                Source::Checkout => "checkout".to_owned(),
            },
            paths: self.paths.clone(),
            method: self.method.word().to_owned(),
            bytes: self.bytes,
            files: self.files,
            elapsed_ms: self.elapsed.as_millis() as u64,
        }
    }
}

/// `1.2 GB`, `340 MB`, `12 kB`.
pub fn bytes(n: u64) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.1} GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.0} MB", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.0} kB", n / 1e3)
    } else {
        format!("{n} B")
    }
}

/// The worktree `try_` is warmed from: the highest-numbered try of its task below `below`
/// whose worktree is there, else the main checkout.
pub fn source(store: &Store, try_: &Try, below: u32) -> Result<(Source, PathBuf)> {
    let root = worktrees_root(store)?;
    for n in (1..below).rev() {
        let earlier = Try::describe(&try_.task, n, &root);
        let dir_is_real = std::fs::symlink_metadata(&earlier.worktree).is_ok_and(|m| m.is_dir());
        if dir_is_real && std::fs::symlink_metadata(earlier.worktree.join(".git")).is_ok_and(|m| m.is_file()) {
            return Ok((Source::Try(n), earlier.worktree));
        }
    }
    Ok((Source::Checkout, store.workdir().to_owned()))
}

/// Warm `try_`'s worktree by `plan` from its source (see `source`, with tries below `below`).
/// `None` when the plan is empty. A path that cannot be warmed is said in `failed`, and what
/// was copied of it removed: warming never stops a try.
/// `fresh`: the worktree was checked out afresh for this try, so its tracked files may take the
/// source's modification times.
pub fn warm(store: &Store, try_: &Try, plan: &Plan, below: u32, fresh: bool) -> Result<Option<Warmed>> {
    if plan.is_empty() {
        return Ok(None);
    }
    let (source, from) = source(store, try_, below)?;
    warm_into(&try_.worktree, source, &from, plan, fresh)
}

/// Warm a reviewer's checkout of `try_`'s work (at `into`) from the try's worktree, where its
/// build is, else from the main checkout; `None` when the plan is empty.
pub fn warm_checkout(store: &Store, into: &Path, try_: &Try, plan: &Plan) -> Result<Option<Warmed>> {
    if plan.is_empty() {
        return Ok(None);
    }
    let (source, from) = source(store, try_, try_.number + 1)?;
    warm_into(into, source, &from, plan, false)
}

/// Warm the worktree at `into` by `plan` from the worktree at `from` (which is `source`).
fn warm_into(into: &Path, source: Source, from: &Path, plan: &Plan, fresh: bool) -> Result<Option<Warmed>> {
    let began = Instant::now();
    let from = from.to_owned();
    let mut candidates: Vec<String> = Vec::new();
    for w in &plan.wanted {
        for path in expand(&from, &w.path) {
            if !candidates.contains(&path) {
                candidates.push(path);
            }
        }
    }
    // A path inside another one warmed comes with it.
    let inside = |p: &str, of: &str| p.len() > of.len() && p.starts_with(of) && p.as_bytes()[of.len()] == b'/';
    let nested: Vec<String> = candidates.iter().filter(|p| candidates.iter().any(|q| inside(p, q))).cloned().collect();
    candidates.retain(|p| !nested.contains(p));
    // The defaults name what most repositories do not have: with none of it in the source, there
    // is nothing to say and no repository to open (every try of such a repository asks).
    if plan.is_default() && !candidates.iter().any(|rel| std::fs::symlink_metadata(from.join(rel)).is_ok()) {
        return Ok(None);
    }
    let source_repo = open_worktree(&from)?;
    let source_index = source_repo.index_or_empty().context("could not read the source's index")?;
    let try_repo = open_worktree(into)?;
    let try_index = try_repo.index_or_empty().context("could not read the try's index")?;
    let mut source_ignores = excludes(&source_repo, &source_index)?;
    let mut try_ignores = excludes(&try_repo, &try_index)?;
    let mut tally = Tally::default();
    let mut warmed = Vec::new();
    let mut failed = Vec::new();
    for rel in candidates {
        let src = from.join(&rel);
        let dst = into.join(&rel);
        let Ok(meta) = std::fs::symlink_metadata(&src) else { continue };
        if let Some(why) = plan.hides(&rel) {
            failed.push((rel, why));
            continue;
        }
        if meta.file_type().is_symlink() || !parents_are_real(&from, &rel) {
            tally.links_left_out += 1;
            continue;
        }
        // The try's own worktree is never a source of itself (a `loop.worktrees` inside the
        // checkout, warmed whole).
        if into.starts_with(&src) {
            continue;
        }
        if std::fs::symlink_metadata(&dst).is_ok() || tracked_at(&source_index, &rel) || tracked_at(&try_index, &rel) {
            continue;
        }
        if !ignored(&mut source_ignores, &rel, meta.is_dir())? || !ignored(&mut try_ignores, &rel, meta.is_dir())? {
            continue;
        }
        if !make_parents(into, &rel) {
            failed.push((rel.clone(), "a parent in the try is not a directory".to_owned()));
            continue;
        }
        let before = tally.clone();
        match copy_tree(&src, &dst, into, &from, &mut tally) {
            Ok(()) => warmed.push(if meta.is_dir() { format!("{rel}/") } else { rel }),
            Err(err) => {
                let _ = super::remove_tree(&dst);
                tally = Tally { reflink_works: tally.reflink_works, ..before };
                failed.push((rel, err.to_string()));
            }
        }
    }
    if warmed.is_empty() && failed.is_empty() && plan.is_default() {
        return Ok(None);
    }
    // The build state came from the source: the sources it was built from take its times.
    let aligned = if fresh && !warmed.is_empty() {
        drop(try_index);
        align_times(into, &from, &source_repo, &source_index, &try_repo).unwrap_or(0)
    } else {
        0
    };
    let method = match (tally.cloned, tally.copied) {
        (_, 0) if tally.cloned > 0 => Method::Reflink,
        (0, _) => Method::Copy,
        _ => Method::Mixed,
    };
    Ok(Some(Warmed {
        source,
        paths: warmed,
        method,
        bytes: tally.bytes,
        files: tally.cloned + tally.copied,
        elapsed: began.elapsed(),
        links_left_out: tally.links_left_out,
        failed,
        aligned,
    }))
}

/// Give each tracked file of the worktree `into` whose content and mode are those of the same
/// path in the source worktree `from` — and whose source file is as the source's index last
/// saw it, not edited since, nor written in the second that index was — the source file's
/// modification time, and the try's index its new stat (so git sees it unchanged). Returns how
/// many files took the source's time.
fn align_times(
    into: &Path,
    from: &Path,
    source_repo: &gix::Repository,
    source_index: &gix::index::State,
    try_repo: &gix::Repository,
) -> Result<u64> {
    use gix::index::entry::{stat, Mode, Stat};
    use gix::index::fs::Metadata;
    let options = stat::Options::default();
    // An entry written in the second of its index, or after, may be racily clean: not trusted.
    let index_written = std::fs::metadata(source_repo.index_path())
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let source: std::collections::HashMap<&gix::bstr::BStr, &gix::index::Entry> =
        source_index.entries().iter().map(|e| (e.path(source_index), e)).collect();
    let mut index = try_repo.open_index().context("could not read the try's index")?;
    let mut aligned = 0u64;
    {
        let (entries, paths) = index.entries_mut_and_pathbacking();
        for entry in entries.iter_mut() {
            if !matches!(entry.mode, Mode::FILE | Mode::FILE_EXECUTABLE) || entry.stage_raw() != 0 {
                continue;
            }
            let rel = entry.path_in(paths);
            let Some(theirs) = source.get(rel) else { continue };
            if theirs.id != entry.id || theirs.mode != entry.mode || u64::from(theirs.stat.mtime.secs) >= index_written
            {
                continue;
            }
            let Ok(rel) = std::str::from_utf8(rel) else { continue };
            let (src, dst) = (from.join(rel), into.join(rel));
            let (Ok(src_meta), Ok(dst_meta)) =
                (Metadata::from_path_no_follow(&src), Metadata::from_path_no_follow(&dst))
            else {
                continue;
            };
            let as_indexed = |meta: &Metadata, indexed: &Stat| {
                meta.is_file() && Stat::from_fs(meta).is_ok_and(|now| indexed.matches(&now, options))
            };
            if !as_indexed(&src_meta, &theirs.stat) || !as_indexed(&dst_meta, &entry.stat) {
                continue;
            }
            let Some(mtime) = src_meta.modified() else { continue };
            if set_mtime(&dst, mtime).is_err() {
                continue;
            }
            if let Some(now) = Metadata::from_path_no_follow(&dst).ok().and_then(|m| Stat::from_fs(&m).ok()) {
                entry.stat = now;
                aligned += 1;
            }
        }
    }
    if aligned > 0 {
        index.write(Default::default()).context("could not write the try's index")?;
    }
    Ok(aligned)
}

/// Set `path`'s modification time (never through a symlink), leaving its access time.
fn set_mtime(path: &Path, mtime: std::time::SystemTime) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let since = mtime.duration_since(std::time::UNIX_EPOCH).map_err(std::io::Error::other)?;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let times = [
        libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        libc::timespec { tv_sec: since.as_secs() as libc::time_t, tv_nsec: since.subsec_nanos() as libc::c_long },
    ];
    // SAFETY: a NUL-terminated path and two timespecs we own; the call only reads them.
    let done = unsafe { libc::utimensat(libc::AT_FDCWD, c_path.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Open a worktree's repository for reading its index and excludes, hardened (no filters).
fn open_worktree(dir: &Path) -> Result<gix::Repository> {
    let mut repo = gix::open(dir).with_context(|| format!("could not open the worktree '{}'", dir.display()))?;
    git::harden(&mut repo)?;
    Ok(repo)
}

fn excludes<'r>(repo: &'r gix::Repository, index: &gix::index::State) -> Result<gix::AttributeStack<'r>> {
    repo.excludes(index, None, gix::worktree::stack::state::ignore::Source::WorktreeThenIdMappingIfNotSkipped)
        .context("could not read the ignore rules")
}

/// Whether git ignores `rel` (or a directory it is in).
fn ignored(stack: &mut gix::AttributeStack<'_>, rel: &str, is_dir: bool) -> Result<bool> {
    let parts: Vec<&str> = rel.split('/').collect();
    for end in 1..=parts.len() {
        let prefix = parts[..end].join("/");
        let dir = end < parts.len() || is_dir;
        let mode = if dir { gix::index::entry::Mode::DIR } else { gix::index::entry::Mode::FILE };
        let platform = stack.at_path(Path::new(&prefix), Some(mode)).context("could not match the ignore rules")?;
        if platform.is_excluded() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the index tracks `rel` or anything below it.
fn tracked_at(index: &gix::index::State, rel: &str) -> bool {
    let rel = rel.as_bytes();
    index.entries().iter().any(|e| {
        let path: &[u8] = e.path(index);
        path == rel || (path.len() > rel.len() && path.starts_with(rel) && path[rel.len()] == b'/')
    })
}

/// The paths under `root` that `pattern` names: itself, or for a glob, what matches it
/// component by component (never through a symlinked directory).
fn expand(root: &Path, pattern: &str) -> Vec<String> {
    if !is_glob(pattern) {
        return vec![pattern.to_owned()];
    }
    let mut found = vec![String::new()];
    for part in pattern.split('/') {
        let mut next = Vec::new();
        for base in &found {
            if !is_glob(part) {
                next.push(join(base, part));
                continue;
            }
            let dir = root.join(base);
            if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n != ".git")
                .filter(|n| {
                    gix::glob::wildmatch(
                        part.into(),
                        n.as_str().into(),
                        gix::glob::wildmatch::Mode::NO_MATCH_SLASH_LITERAL,
                    )
                })
                .collect();
            names.sort();
            next.extend(names.iter().map(|n| join(base, n)));
        }
        found = next;
    }
    found
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else {
        format!("{base}/{name}")
    }
}

/// Whether every parent of `rel` under `root` is a directory, not a symlink.
fn parents_are_real(root: &Path, rel: &str) -> bool {
    let mut at = root.to_owned();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        at.push(part);
        if !std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
            return false;
        }
    }
    true
}

/// Make the parents of `rel` under `root` as directories; false if one is there as anything
/// else (a symlink the try would write through).
fn make_parents(root: &Path, rel: &str) -> bool {
    let mut at = root.to_owned();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return false,
            Err(_) => {
                if std::fs::create_dir(&at).is_err() {
                    return false;
                }
            }
        }
    }
    true
}

#[derive(Debug, Clone)]
struct Tally {
    bytes: u64,
    cloned: u64,
    copied: u64,
    links_left_out: u64,
    /// Cleared at the first clone the file system refuses: the rest are copied.
    reflink_works: bool,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally { bytes: 0, cloned: 0, copied: 0, links_left_out: 0, reflink_works: true }
    }
}

/// Copy `src` to `dst` (which is not there): directories made, files cloned or copied with
/// their permissions and modification times, symlinks copied as links unless they point into
/// `source_root` or (relative) out of `try_root`. A file that vanished under the copy (a
/// source in use) is passed over.
fn copy_tree(src: &Path, dst: &Path, try_root: &Path, source_root: &Path, tally: &mut Tally) -> std::io::Result<()> {
    let meta = match std::fs::symlink_metadata(src) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    let kind = meta.file_type();
    if kind.is_dir() {
        std::fs::create_dir(dst)?;
        for entry in std::fs::read_dir(src)? {
            let entry = entry?;
            copy_tree(&entry.path(), &dst.join(entry.file_name()), try_root, source_root, tally)?;
        }
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(meta.permissions().mode() | 0o700))?;
        let times = std::fs::FileTimes::new().set_modified(meta.modified()?);
        std::fs::File::open(dst)?.set_times(times)?;
    } else if kind.is_file() {
        copy_file(src, dst, &meta, tally)?;
    } else if kind.is_symlink() {
        let target = std::fs::read_link(src)?;
        if link_stays_in_try(&target, dst, try_root, source_root) {
            std::os::unix::fs::symlink(&target, dst)?;
        } else {
            tally.links_left_out += 1;
        }
    } else if kind.is_fifo() || kind.is_socket() || kind.is_block_device() || kind.is_char_device() {
        // Not build state anyone copies.
    }
    Ok(())
}

/// Whether a link at `dst` to `target` is safe in the try: an absolute target outside the
/// source checkout (`/usr/bin/python3`), or a relative one that stays inside the try.
fn link_stays_in_try(target: &Path, dst: &Path, try_root: &Path, source_root: &Path) -> bool {
    if target.is_absolute() {
        return !target.starts_with(source_root) && !target.starts_with(try_root);
    }
    let Some(dir) = dst.parent() else { return false };
    let Ok(mut depth) = dir.strip_prefix(try_root).map(|d| d.components().count() as i64) else { return false };
    for component in target.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

/// Clone `src` into a new `dst` (FICLONE), or copy it when the file system cannot.
fn copy_file(src: &Path, dst: &Path, meta: &std::fs::Metadata, tally: &mut Tally) -> std::io::Result<()> {
    let mut from = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(src) {
        Ok(f) => f,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(meta.permissions().mode() | 0o200)
        .open(dst)?;
    let mut cloned = false;
    if tally.reflink_works {
        // SAFETY: both descriptors are open files owned here; FICLONE reads the first and
        // replaces the (empty) contents of the second.
        let rc = unsafe { libc::ioctl(to.as_raw_fd(), libc::FICLONE, from.as_raw_fd()) };
        if rc == 0 {
            cloned = true;
        } else {
            let err = std::io::Error::last_os_error();
            // The file system (or this pair of them) clones nothing: copy from now on.
            if let Some(libc::EOPNOTSUPP | libc::EXDEV | libc::EINVAL | libc::ENOTTY | libc::ENOSYS) =
                err.raw_os_error()
            {
                tally.reflink_works = false;
            }
        }
    }
    if cloned {
        tally.cloned += 1;
    } else {
        std::io::copy(&mut from, &mut to)?;
        tally.copied += 1;
    }
    tally.bytes += meta.len();
    to.set_permissions(std::fs::Permissions::from_mode(meta.permissions().mode()))?;
    let mut times = std::fs::FileTimes::new().set_modified(meta.modified()?);
    if let Ok(accessed) = meta.accessed() {
        times = times.set_accessed(accessed);
    }
    to.set_times(times)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_paths_are_refused_with_a_hint_and_good_ones_kept() {
        for (text, why) in [
            ("/abs/target", "absolute"),
            ("../other/target", "'..'"),
            ("a/../b", "'..'"),
            (".git/objects", ".git"),
            ("target/*", "glob"),
        ] {
            let err = parse(text, "loop.warm", false).expect_err(text);
            assert!(err.message.contains(why), "{text}: {}", err.message);
            assert!(err.hint.is_some(), "{text} has a hint");
        }
        assert_eq!(parse("target/", "loop.warm", false).expect("ok").path, "target");
        assert_eq!(parse("/node_modules", ".worktreeinclude:1", true).expect("ok").path, "node_modules");
        assert!(parse("packages/*/node_modules", ".worktreeinclude:2", true).is_ok());
        assert!(parse("**/node_modules", ".worktreeinclude:3", true).is_err());
        assert!(parse("!keep", ".worktreeinclude:4", true).is_err());
    }

    #[test]
    fn links_are_kept_only_when_they_stay_in_the_try() {
        let (try_root, source) = (Path::new("/w/t-1-2"), Path::new("/repo"));
        let dst = Path::new("/w/t-1-2/node_modules/.bin/tool");
        assert!(link_stays_in_try(Path::new("../pkg/bin.js"), dst, try_root, source));
        assert!(link_stays_in_try(Path::new("../../packages/a"), dst, try_root, source));
        assert!(!link_stays_in_try(Path::new("../../../elsewhere"), dst, try_root, source));
        assert!(link_stays_in_try(Path::new("/usr/bin/python3"), dst, try_root, source));
        assert!(!link_stays_in_try(Path::new("/repo/src/main.rs"), dst, try_root, source));
    }

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(bytes(1_200_000_000), "1.2 GB");
        assert_eq!(bytes(340_000_000), "340 MB");
        assert_eq!(bytes(12_000), "12 kB");
        assert_eq!(bytes(12), "12 B");
    }
}
