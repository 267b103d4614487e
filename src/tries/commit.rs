//! Commit-on-stop: whatever an agent left in its worktree becomes a commit on its try branch,
//! in-process through gix, on every way a session can end.
//!
//! The new tree is the `HEAD` tree with the index's staged changes and then the worktree's
//! changes applied — the tree `git add -A && git commit` would make: modified, new and
//! deleted files, exec bits and symlinks, `.gitignore` honoured, nested repositories left
//! out. Nothing runs while doing it: gix runs no hooks and no fsmonitor, and the repository
//! handle used here has every `filter.<driver>` removed from its configuration first, so a
//! clean filter an agent planted cannot execute (built-in conversions such as `text`/`eol`
//! still apply, so blobs match what git would store).
//!
//! If the agent moved `HEAD` (its own commits, or a detached `HEAD`), the commit builds on
//! that `HEAD`, with the try branch as a second parent if the try branch is not already in
//! its history; either way it lands on the try branch, and the worktree's `HEAD` is attached
//! to the try branch again. The index is rewritten from the new tree with fresh stat data, so
//! `git status` in the worktree is clean afterwards.

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use gix::bstr::{BString, ByteSlice};
use gix::ObjectId;

use super::Try;
use crate::git;
use crate::refs;
use crate::store::cas::{self, Cas, Expect};
use crate::store::Store;

/// What commit-on-stop did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// The try branch now points at this new commit, holding this many changed paths.
    Commit { id: ObjectId, paths: usize },
    /// The agent's own commits were taken as they are (the branch moved to them).
    Adopted(ObjectId),
    /// Nothing had changed.
    Clean,
    /// The worktree is gone (deleted under the loop); the try branch is as it was.
    NoWorktree,
}

/// One change to apply to the tree.
enum Edit {
    Upsert { path: BString, kind: gix::objs::tree::EntryKind, id: ObjectId },
    Remove { path: BString },
}

/// Commit what is in `try_`'s worktree to its try branch. `author` is who the commit is
/// authored as (the agent); `message` says which session and why it stopped.
pub fn commit_on_stop(store: &Store, try_: &Try, author: &gix::actor::Signature, message: &str) -> Result<Committed> {
    if !try_.worktree.join(".git").exists() {
        return Ok(Committed::NoWorktree);
    }
    let mut wt = gix::open(&try_.worktree)
        .with_context(|| format!("could not open the worktree '{}'", try_.worktree.display()))?;
    git::harden(&mut wt)?;
    let branch_tip =
        store.ref_target(&try_.branch)?.with_context(|| format!("try branch '{}' is missing", try_.branch))?;
    let head = wt.head_id().map(|id| id.detach()).unwrap_or(branch_tip);
    let edits = collect_edits(&wt, &setup_leftovers(store, try_))?;
    let head_reattach = !head_is(&wt, &try_.branch);
    if edits.is_empty() {
        if head == branch_tip {
            if head_reattach {
                attach_head(&wt, &try_.branch)?;
            }
            return Ok(Committed::Clean);
        }
        if store.is_ancestor(branch_tip, head)? {
            // The agent committed everything itself, on a detached HEAD or another branch.
            set_branch(store, try_, branch_tip, head)?;
            attach_head(&wt, &try_.branch)?;
            return Ok(Committed::Adopted(head));
        }
    }
    let head_tree = wt.find_commit(head).context("could not read the worktree's HEAD commit")?.tree_id()?.detach();
    let mut editor = wt.edit_tree(head_tree).context("could not edit the HEAD tree")?;
    let paths = edits.len();
    for edit in edits {
        match edit {
            Edit::Upsert { path, kind, id } => {
                editor.upsert(path.as_bstr(), kind, id).with_context(|| format!("could not stage '{path}'"))?;
            }
            Edit::Remove { path } => {
                editor.remove(path.as_bstr()).with_context(|| format!("could not remove '{path}'"))?;
            }
        }
    }
    let tree = git::retry_vanished(|| editor.write()).context("could not write the worktree's tree")?.detach();
    if tree == head_tree && store.is_ancestor(branch_tip, head)? {
        // What looked changed (against a stale index) is what HEAD already holds: no commit
        // that changes nothing.
        git::write_index(&wt, tree)?;
        if head == branch_tip {
            if head_reattach {
                attach_head(&wt, &try_.branch)?;
            }
            return Ok(Committed::Clean);
        }
        set_branch(store, try_, branch_tip, head)?;
        attach_head(&wt, &try_.branch)?;
        return Ok(Committed::Adopted(head));
    }
    let parents: Vec<ObjectId> = if store.is_ancestor(branch_tip, head)? { vec![head] } else { vec![head, branch_tip] };
    let mut committer = store.signature();
    committer.time = author.time;
    let commit = gix::objs::Commit {
        tree,
        parents: parents.into_iter().collect(),
        author: author.clone(),
        committer,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    let id = store.write_commit_object(&commit).context("could not write the stop commit")?;
    set_branch(store, try_, branch_tip, id)?;
    if head_reattach {
        attach_head(&wt, &try_.branch)?;
    }
    git::write_index(&wt, tree)?;
    Ok(Committed::Commit { id, paths })
}

/// Point the try branch (and its anchor, which keeps the commit alive) at `to`.
fn set_branch(store: &Store, try_: &Try, from: ObjectId, to: ObjectId) -> Result<()> {
    match cas::update(store, &try_.branch, Expect::Is(from), to, "loop: commit on stop")? {
        Cas::Applied => {}
        Cas::Lost { actual } => anyhow::bail!(
            "try branch '{}' moved while its work was being committed (now {actual:?}); the work is in commit {to}",
            try_.branch
        ),
    }
    crate::store::remote::set_local(store, &refs::try_anchor(&try_.task, try_.number), Some(to))
}

/// Whether the worktree's HEAD is attached to `branch`.
fn head_is(wt: &gix::Repository, branch: &str) -> bool {
    wt.head_name().ok().flatten().is_some_and(|name| name.as_bstr() == branch)
}

/// Take a confined session's own commits, adopted at `commit` (see `sandbox::private_git`),
/// onto `try_`: its worktree's `HEAD` is put on them for commit-on-stop to build on; when the
/// worktree is gone (deleted under the loop), the try branch moves to them itself, if they
/// build on it. What happened: whether they are on the try branch (or will be).
pub fn take_commits(
    store: &Store,
    try_: &Try,
    worktree: &Path,
    commit: ObjectId,
    merge_concluded: bool,
) -> Result<bool> {
    if worktree.join(".git").exists() {
        detach_head(worktree, commit, merge_concluded)?;
        return Ok(true);
    }
    let Some(tip) = store.ref_target(&try_.branch)? else { return Ok(false) };
    if !store.is_ancestor(tip, commit)? {
        return Ok(false);
    }
    set_branch(store, try_, tip, commit)?;
    Ok(true)
}

/// Put the `HEAD` of the worktree at `worktree` on `commit`, detached: where a confined
/// session's own commits end (adopted from its private git directory), for commit-on-stop to
/// build on and attach to the try branch again. The index becomes `commit`'s tree, with no
/// file's stat in it, so that every file is compared with what the session committed by its
/// content: the index the session staged its commits with was its private one. A merge the
/// session concluded there (`merge_concluded`) is concluded here too.
pub fn detach_head(worktree: &Path, commit: ObjectId, merge_concluded: bool) -> Result<()> {
    let wt = gix::open(worktree).with_context(|| format!("could not open the worktree '{}'", worktree.display()))?;
    let tree = wt.find_commit(commit).context("could not read the session's commit")?.tree_id()?.detach();
    let mut index = wt.index_from_tree(&tree).context("could not build the index")?;
    index.write(Default::default()).context("could not write the index")?;
    if merge_concluded {
        for name in ["MERGE_HEAD", "MERGE_MSG", "MERGE_MODE"] {
            let _ = std::fs::remove_file(wt.git_dir().join(name));
        }
    }
    let path = wt.git_dir().join("HEAD");
    let tmp = path.with_extension("lock");
    std::fs::write(&tmp, format!("{commit}\n")).with_context(|| format!("could not write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("could not update '{}'", path.display()))
}

/// Attach the worktree's HEAD to `branch` (it was detached or on another branch).
fn attach_head(wt: &gix::Repository, branch: &str) -> Result<()> {
    let path = wt.git_dir().join("HEAD");
    let tmp = path.with_extension("lock");
    std::fs::write(&tmp, format!("ref: {branch}\n")).with_context(|| format!("could not write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("could not update '{}'", path.display()))
}

/// Everything that differs between HEAD and the worktree, as tree edits.
fn collect_edits(wt: &gix::Repository, left_by_setup: &[BString]) -> Result<Vec<Edit>> {
    use gix::status::index_worktree::Item as Iw;
    use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
    let workdir = wt.workdir().context("the worktree has no working directory")?.to_owned();
    let items = status(wt, gix::status::UntrackedFiles::Files)?;
    // What the setup command put there (copied in, not the work): never committed.
    let from_setup = |path: &BString| {
        left_by_setup.iter().any(|p| path == p || (path.starts_with(p.as_slice()) && path.get(p.len()) == Some(&b'/')))
    };
    let (mut pipeline, index) = wt.filter_pipeline(None).context("could not set up the content conversion")?;
    // Staged changes first, then the worktree's, so the worktree wins for a path in both.
    let mut staged = Vec::new();
    let mut unstaged = Vec::new();
    for item in items {
        let item = item.context("could not read the worktree status")?;
        match item {
            gix::status::Item::TreeIndex(change) => {
                use gix::diff::index::ChangeRef;
                match change {
                    ChangeRef::Deletion { location, .. } => staged.push(Edit::Remove { path: location.into_owned() }),
                    ChangeRef::Addition { location, entry_mode, id, .. }
                    | ChangeRef::Modification { location, entry_mode, id, .. } => {
                        if let Some(kind) = entry_mode.to_tree_entry_mode().map(|m| m.kind()) {
                            staged.push(Edit::Upsert { path: location.into_owned(), kind, id: id.into_owned() });
                        }
                    }
                    ChangeRef::Rewrite { .. } => {}
                }
            }
            gix::status::Item::IndexWorktree(item) => match item {
                Iw::Modification { rela_path, status, .. } => match status {
                    EntryStatus::Change(Change::Removed) => unstaged.push(Edit::Remove { path: rela_path }),
                    EntryStatus::Change(Change::SubmoduleModification(_)) | EntryStatus::NeedsUpdate(_) => {}
                    _ => {
                        if let Some(edit) = read_file(wt, &mut pipeline, &index, &workdir, rela_path)? {
                            unstaged.push(edit);
                        }
                    }
                },
                Iw::DirectoryContents { entry, .. } => {
                    if entry.status == gix::dir::entry::Status::Untracked
                        && !from_setup(&entry.rela_path)
                        && !matches!(
                            entry.disk_kind,
                            Some(gix::dir::entry::Kind::Repository) | Some(gix::dir::entry::Kind::Directory)
                        )
                    {
                        if let Some(edit) = read_file(wt, &mut pipeline, &index, &workdir, entry.rela_path)? {
                            unstaged.push(edit);
                        }
                    }
                }
                Iw::Rewrite { .. } => {}
            },
        }
    }
    staged.extend(unstaged);
    Ok(staged)
}

/// The worktree's status against its `HEAD`, untracked files listed as `untracked` says.
fn status(wt: &gix::Repository, untracked: gix::status::UntrackedFiles) -> Result<gix::status::Iter> {
    let status = wt
        .status(gix::progress::Discard)
        .context("could not prepare the worktree status")?
        .untracked_files(untracked)
        .index_worktree_rewrites(None)
        .index_worktree_submodules(gix::status::Submodule::Given {
            ignore: gix::submodule::config::Ignore::All,
            check_dirty: false,
        })
        .tree_index_track_renames(gix::status::tree_index::TrackRenames::Disabled);
    status.into_iter(Vec::<BString>::new()).context("could not read the worktree status")
}

/// What the setup command left in `try_`'s worktree that is neither tracked nor ignored (a
/// copied `.env`, a directory it filled): recorded so that commit-on-stop never commits it
/// (`.git/loop/setup/<id>-<n>`, one path a line; a directory stands for all under it).
pub fn note_setup_leftovers(store: &Store, try_: &Try) -> Result<Vec<String>> {
    let mut wt = gix::open(&try_.worktree)
        .with_context(|| format!("could not open the worktree '{}'", try_.worktree.display()))?;
    git::harden(&mut wt)?;
    let mut paths = Vec::new();
    for item in status(&wt, gix::status::UntrackedFiles::Collapsed)? {
        if let gix::status::Item::IndexWorktree(gix::status::index_worktree::Item::DirectoryContents {
            entry, ..
        }) = item.context("could not read the worktree status")?
        {
            if entry.status == gix::dir::entry::Status::Untracked {
                paths.push(entry.rela_path.to_string().trim_end_matches('/').to_owned());
            }
        }
    }
    let file = store.layout()?.setup_leftovers(try_.task.as_str(), try_.number);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
    }
    let mut text = paths.join("\n");
    text.push('\n');
    std::fs::write(&file, text).with_context(|| format!("could not write '{}'", file.display()))?;
    Ok(paths)
}

/// The paths `note_setup_leftovers` recorded for `try_` (none when its setup left nothing).
fn setup_leftovers(store: &Store, try_: &Try) -> Vec<BString> {
    let Ok(layout) = store.layout() else { return Vec::new() };
    std::fs::read_to_string(layout.setup_leftovers(try_.task.as_str(), try_.number))
        .map(|t| t.lines().filter(|l| !l.is_empty()).map(BString::from).collect())
        .unwrap_or_default()
}

/// The tree edit for the file at `rela_path` as it is on disk now (`None` if it vanished).
fn read_file(
    wt: &gix::Repository,
    pipeline: &mut gix::filter::Pipeline<'_>,
    index: &gix::index::State,
    workdir: &Path,
    rela_path: BString,
) -> Result<Option<Edit>> {
    use std::os::unix::fs::PermissionsExt;
    let rela =
        gix::path::from_bstr(rela_path.as_bstr()).context("a path in the worktree is not valid here")?.into_owned();
    let path = workdir.join(&rela);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(Some(Edit::Remove { path: rela_path }));
    };
    let (kind, bytes) = if meta.file_type().is_symlink() {
        let target =
            std::fs::read_link(&path).with_context(|| format!("could not read the link '{}'", path.display()))?;
        (
            gix::objs::tree::EntryKind::Link,
            gix::path::into_bstr(target).context("a link target is not valid here")?.into_owned().into(),
        )
    } else if meta.is_file() {
        let file = std::fs::File::open(&path).with_context(|| format!("could not read '{}'", path.display()))?;
        let mut converted = pipeline
            .convert_to_git(file, &rela, index)
            .with_context(|| format!("could not convert '{}'", path.display()))?;
        let mut bytes = Vec::new();
        converted.read_to_end(&mut bytes).with_context(|| format!("could not read '{}'", path.display()))?;
        let kind = if meta.permissions().mode() & 0o111 != 0 {
            gix::objs::tree::EntryKind::BlobExecutable
        } else {
            gix::objs::tree::EntryKind::Blob
        };
        (kind, bytes)
    } else {
        return Ok(None);
    };
    let id = git::retry_vanished(|| wt.write_blob(&bytes))
        .with_context(|| format!("could not store '{}'", path.display()))?
        .detach();
    Ok(Some(Edit::Upsert { path: rela_path, kind, id }))
}
