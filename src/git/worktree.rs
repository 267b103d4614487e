//! Linked worktrees registered so that a concurrent git never reads a half-made one.
//!
//! A linked worktree is registered by a directory `<common-dir>/worktrees/<id>/` holding
//! `gitdir`, `commondir` and `HEAD`. Every git that looks at all worktrees (`git fetch`'s
//! connectivity check, `git worktree list`, `gc`, `prune`) reads each of these, and dies on a
//! `commondir` that exists but is empty ("failed to read …/commondir: Success"). gix's
//! `add_worktree` (like `git worktree add`) creates these files in place, one after the other,
//! so a git that scans the worktrees at that instant sees one empty and gives up; it happened to
//! a walk's `git fetch` in CI. Here the directory is filled under a name of its own, outside
//! `worktrees/`, and renamed into place whole; a registration is taken away the same way. A git
//! reader then sees no registration, an empty directory (skipped: git needs a readable `gitdir`),
//! or a whole one. gix then checks the files out into the registered worktree.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{Context as _, Result};
use gix::ObjectId;

/// What a new worktree has checked out.
#[derive(Debug, Clone)]
pub enum Head {
    /// A local branch (a full ref name, which must exist).
    Attached(String),
    /// A commit, on a detached `HEAD`.
    Detached(ObjectId),
}

/// A registration, or a new worktree's destination, that is not what `add` needs.
#[derive(Debug)]
pub enum Refused {
    /// The branch is checked out in that worktree.
    CheckedOut { branch: String, worktree: PathBuf },
    /// The destination exists and is not an empty directory.
    Occupied(PathBuf),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::CheckedOut { branch, worktree } => {
                write!(f, "the branch '{branch}' is checked out in '{}'", worktree.display())
            }
            Refused::Occupied(path) => write!(f, "'{}' exists and is not an empty directory", path.display()),
        }
    }
}

impl std::error::Error for Refused {}

/// Add a linked worktree at `dest` (absent, or an empty directory) with `head` checked out:
/// its registration is made in `staging` (a directory on the same file system as the common
/// directory, which only the caller's serialized worktree changes use) and renamed into
/// `worktrees/` whole, then gix checks the tree out through `harden`ed handles. On failure
/// nothing of it is left registered, and a `dest` this call made is removed (one that existed
/// is emptied). An I/O "not found" on the way (a `git worktree prune` removing `worktrees/`
/// meanwhile) is in the error's causes, for `retry_vanished`.
pub fn add(repo: &gix::Repository, dest: &Path, head: &Head, staging: &Path) -> Result<()> {
    let existed = match std::fs::symlink_metadata(dest) {
        Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => {
            if std::fs::read_dir(dest)?.next().is_some() {
                return Err(Refused::Occupied(dest.to_owned()).into());
            }
            true
        }
        Ok(_) => return Err(Refused::Occupied(dest.to_owned()).into()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => false,
        Err(err) => return Err(err).with_context(|| format!("could not look at '{}'", dest.display())),
    };
    let head_file = match head {
        Head::Attached(branch) => {
            if let Some(worktree) = checked_out(repo, branch)? {
                return Err(Refused::CheckedOut { branch: branch.clone(), worktree }.into());
            }
            let mut reference =
                repo.find_reference(branch.as_str()).with_context(|| format!("no branch '{branch}'"))?;
            reference.peel_to_commit().with_context(|| format!("the branch '{branch}' names no commit"))?;
            format!("ref: {branch}\n")
        }
        Head::Detached(commit) => {
            repo.find_commit(*commit).with_context(|| format!("no commit {commit}"))?;
            format!("{commit}\n")
        }
    };
    if !existed {
        std::fs::create_dir(dest).with_context(|| format!("could not create '{}'", dest.display()))?;
    }
    let undo_dest = || {
        if existed {
            let _ = std::fs::remove_file(dest.join(".git"));
        } else {
            let _ = std::fs::remove_dir_all(dest);
        }
    };
    let registered = register(repo, dest, &head_file, staging);
    let admin = match registered {
        Ok(admin) => admin,
        Err(err) => {
            undo_dest();
            return Err(err);
        }
    };
    let checked = check_out(repo, &admin);
    if let Err(err) = checked {
        let _ = retire(&admin, staging);
        if existed {
            for entry in std::fs::read_dir(dest).into_iter().flatten().flatten() {
                let path = entry.path();
                let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
            }
        } else {
            let _ = std::fs::remove_dir_all(dest);
        }
        return Err(err);
    }
    Ok(())
}

/// Make the registration of `dest` and rename it into `worktrees/`; its directory there.
fn register(repo: &gix::Repository, dest: &Path, head_file: &str, staging: &Path) -> Result<PathBuf> {
    let common = gix::path::realpath(repo.common_dir()).context("could not resolve the git directory")?;
    let dest = gix::path::realpath(dest).context("could not resolve the worktree's path")?;
    let root = common.join("worktrees");
    std::fs::create_dir_all(&root).with_context(|| format!("could not create '{}'", root.display()))?;
    // The name is reserved by making an empty directory (git skips one without a readable
    // `gitdir`); the whole registration is later renamed over it, which replaces an empty
    // directory in one step.
    let admin = reserve(&root, dest.file_name().context("the worktree's path has no name")?)?;
    let stage = staging.join(format!(
        "{}-{}",
        admin.file_name().and_then(|n| n.to_str()).unwrap_or("worktree"),
        crate::ids::random_base32(8)
    ));
    let made = (|| -> Result<()> {
        std::fs::create_dir_all(&stage).with_context(|| format!("could not create '{}'", stage.display()))?;
        let write = |name: &str, text: &str| {
            std::fs::write(stage.join(name), text)
                .with_context(|| format!("could not write '{}'", stage.join(name).display()))
        };
        write("gitdir", &format!("{}\n", path_text(&dest.join(".git"))?))?;
        write("commondir", "../..\n")?;
        write("HEAD", head_file)?;
        copy_private_files(repo, &stage)?;
        // The worktree's `.git` file first: a `git worktree prune` that sees the registration
        // then finds what it names, and leaves it.
        let mut dot_git = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dest.join(".git"))
            .with_context(|| format!("could not create '{}'", dest.join(".git").display()))?;
        use std::io::Write as _;
        writeln!(dot_git, "gitdir: {}", path_text(&admin)?).context("could not write the worktree's .git file")?;
        std::fs::rename(&stage, &admin).with_context(|| format!("could not register '{}'", admin.display()))?;
        Ok(())
    })();
    if let Err(err) = made {
        let _ = std::fs::remove_dir_all(&stage);
        // Only the empty reservation can be there (a rename that failed left it empty).
        let _ = std::fs::remove_dir(&admin);
        return Err(err);
    }
    Ok(admin)
}

/// Take the first free name of `base`, `base1`, `base2`, … under `root`, as git and gix name
/// registrations, by making its (empty) directory.
fn reserve(root: &Path, base: &std::ffi::OsStr) -> Result<PathBuf> {
    let base = base.to_str().context("the worktree's name is not UTF-8")?;
    let base = gix::validate::reference::name_partial_or_sanitize(base.into()).to_string();
    for n in 0..10_000u32 {
        let name = if n == 0 { base.clone() } else { format!("{base}{n}") };
        let candidate = root.join(name);
        match std::fs::create_dir(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err).with_context(|| format!("could not create '{}'", candidate.display())),
        }
    }
    anyhow::bail!("no free name for a worktree registration under '{}'", root.display())
}

/// What the source worktree passes on, as `git worktree add` and gix do: its
/// `config.worktree` (without `core.worktree` and `core.bare`) with `extensions.worktreeConfig`,
/// and its sparse-checkout patterns with `core.sparseCheckout`.
fn copy_private_files(repo: &gix::Repository, stage: &Path) -> Result<()> {
    let config = repo.config_snapshot();
    if config.boolean("extensions.worktreeConfig").unwrap_or(false) {
        let source = repo.git_dir().join("config.worktree");
        match std::fs::read(&source) {
            Ok(mut bytes) => {
                let mut file = gix::config::File::from_bytes_owned(
                    &mut bytes,
                    gix::config::file::Metadata::from(gix::config::Source::Worktree),
                    Default::default(),
                )
                .with_context(|| format!("could not read '{}'", source.display()))?;
                for key in ["core.worktree", "core.bare"] {
                    if let Ok(mut values) = file.raw_values_mut(key) {
                        values.delete_all();
                    }
                }
                std::fs::write(stage.join("config.worktree"), file.to_bstring())
                    .context("could not write the new worktree's config.worktree")?;
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("could not read '{}'", source.display())),
        }
    }
    if config.boolean("core.sparseCheckout").unwrap_or(false) {
        let source = repo.git_dir().join("info").join("sparse-checkout");
        match std::fs::read(&source) {
            Ok(bytes) => {
                std::fs::create_dir_all(stage.join("info")).context("could not create the registration's info/")?;
                std::fs::write(stage.join("info").join("sparse-checkout"), bytes)
                    .context("could not copy the sparse-checkout patterns")?;
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("could not read '{}'", source.display())),
        }
    }
    Ok(())
}

/// Check out the registered worktree `admin`'s `HEAD`, with no filter driver configured.
fn check_out(repo: &gix::Repository, admin: &Path) -> Result<()> {
    let id = admin.file_name().and_then(|n| n.to_str()).context("a registration's name is not UTF-8")?;
    let proxy = repo
        .worktree_proxy_by_id(id)
        .context("could not open the new worktree")?
        .with_context(|| format!("the registration '{}' vanished", admin.display()))?;
    let mut worktree_repo = proxy.into_repo().context("could not open the new worktree")?;
    super::harden(&mut worktree_repo)?;
    let worktree = worktree_repo.worktree().context("the new worktree has no working directory")?;
    let interrupt = AtomicBool::new(false);
    worktree.checkout(gix::progress::Discard, &interrupt).context("could not check the new worktree out")?;
    Ok(())
}

/// Take the registration `admin` away whole: renamed into `staging` (so no git reader sees it
/// half-deleted), then deleted there.
pub fn retire(admin: &Path, staging: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(staging)?;
    let name = admin.file_name().and_then(|n| n.to_str()).unwrap_or("worktree");
    let aside = staging.join(format!("{name}-{}.gone", crate::ids::random_base32(8)));
    std::fs::rename(admin, &aside)?;
    std::fs::remove_dir_all(&aside)
}

/// Remove what an earlier process left in `staging` (it died between making a registration
/// and renaming it, or between retiring one and deleting it). Only callers that hold the
/// clone's worktree lock may call this: nothing else then uses `staging`.
pub fn clear_staging(staging: &Path) {
    for entry in std::fs::read_dir(staging).into_iter().flatten().flatten() {
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

/// The worktree (main or linked) that has `branch` checked out, if any.
fn checked_out(repo: &gix::Repository, branch: &str) -> Result<Option<PathBuf>> {
    let names = |git_dir: &Path| -> Option<String> {
        let text = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
        text.strip_prefix("ref: ").map(|r| r.trim().to_owned())
    };
    let common = repo.common_dir();
    if names(common).as_deref() == Some(branch) {
        return Ok(Some(common.parent().unwrap_or(common).to_owned()));
    }
    for proxy in repo.worktrees().context("could not list the worktrees")? {
        if names(proxy.git_dir()).as_deref() == Some(branch) {
            return Ok(Some(proxy.base().unwrap_or_else(|_| proxy.git_dir().to_owned())));
        }
    }
    Ok(None)
}

fn path_text(path: &Path) -> Result<&str> {
    path.to_str().with_context(|| format!("the path '{}' is not UTF-8", path.display()))
}
