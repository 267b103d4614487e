//! The worktrees a landing touches: the landing worktree, where the checks run on a merged
//! result (detached at the candidate, under the worktrees root, reused from one candidate to
//! the next: tracked files reset and untracked ones removed, ignored build caches kept), and a
//! worktree that has the target checked out, which follows the target when it is clean and
//! is never touched when it is not.

use std::path::{Path, PathBuf};

use anyhow::Result;
use gix::ObjectId;

use crate::error::{Class, Refusal};
use crate::git::program;
use crate::refs;
use crate::store::cas::{self, Cas, Expect};
use crate::store::Store;
use crate::tries;

/// The landing worktree of `target`, at `candidate`: made the first time (`made` remembers
/// it), reset to the candidate after.
pub fn prepare(store: &Store, target: &str, candidate: ObjectId, made: &mut Option<PathBuf>) -> Result<PathBuf> {
    // In a folder of its own: a name `<x>-<n>` right under the root would read as a try's.
    let dir = tries::worktrees_root(store)?.join("landing").join(super::lander_key(target).name());
    if made.is_none() && !dir.join(".git").exists() {
        if dir.exists() {
            // A leftover of a landing that died: its registration may be gone with it.
            let _ = std::fs::remove_dir_all(&dir);
        }
        // Under the clone's worktree lock, as every worktree change.
        tries::add_detached_worktree(store, &dir, candidate)?;
    } else {
        program::checkout_detached(&dir, candidate)?;
        program::clean_untracked(&dir)?;
    }
    *made = Some(dir.clone());
    Ok(dir)
}

/// Remove the landing worktree (best effort: the next landing makes it again).
pub fn remove(store: &Store, dir: &Path) {
    let try_like = tries::Try {
        task: "land".parse().expect("a valid id"),
        number: 0,
        branch: String::new(),
        worktree: dir.to_owned(),
    };
    let _ = tries::remove_worktree(store, &try_like);
}

/// The worktree that has `target` checked out with changes, and those changes, if there is one.
pub fn dirty_checkout(store: &Store, target: &str) -> Result<Option<(PathBuf, Vec<String>)>> {
    let Some(path) = tries::checked_out_in(store, target)? else { return Ok(None) };
    let changed = program::changed_paths(&path)?;
    Ok((!changed.is_empty()).then_some((path, changed)))
}

/// Refuse to land while the target is checked out with changes: nothing is moved.
pub fn refuse_dirty(store: &Store, target: &str) -> Result<()> {
    if let Some((path, changed)) = dirty_checkout(store, target)? {
        let more = if changed.len() > 3 { format!(" and {} more", changed.len() - 3) } else { String::new() };
        return Err(Refusal::new(
            Class::Refused,
            format!(
                "'{}' is checked out in {} with uncommitted changes ({}{more}); nothing was landed",
                refs::short_branch(target),
                path.display(),
                changed.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            ),
        )
        .hint("commit or stash them there (git stash), then run 'git loop land' again")
        .into());
    }
    Ok(())
}

/// Move the local branch `target` from `from` to `to` by compare-and-swap. A worktree that has
/// it checked out is brought along first (index and files from `from` to `to`, refusing to
/// overwrite anything), and put back if the swap is lost; a dirty one is refused, nothing moved.
pub fn move_local(store: &Store, target: &str, from: ObjectId, to: ObjectId, why: &str) -> Result<Cas> {
    let checkout = tries::checked_out_in(store, target)?;
    if let Some(path) = &checkout {
        refuse_dirty(store, target)?;
        program::read_tree_update(path, from, to).map_err(|err| {
            Refusal::new(
                Class::Refused,
                format!(
                    "'{}' is checked out in {} and its files could not follow the landing ({err:#}); nothing was landed",
                    refs::short_branch(target),
                    path.display()
                ),
            )
            .hint("move untracked files in the way aside there, then run 'git loop land' again")
        })?;
    }
    let moved = cas::update(store, target, Expect::Is(from), to, why)?;
    if let (Cas::Lost { .. }, Some(path)) = (&moved, &checkout) {
        program::read_tree_update(path, to, from)?;
    }
    Ok(moved)
}
