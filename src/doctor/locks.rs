//! The one place doctor decides whether a lock file was abandoned, and removes one.
//!
//! The policy is `store::locks`'s, whose helpers do the work.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::store::locks;

/// How old a lock must be before doctor calls it abandoned.
const STALE_LOCK: Duration = Duration::from_secs(30);

/// How a lock file stands.
pub(super) enum Verdict {
    /// Older than the threshold and held open by no process: its writer is gone.
    Abandoned(Duration),
    /// Young, held open, or of an age that cannot be told: a writer may be at work.
    MaybeHeld,
}

/// Judge the lock file at `path`.
pub(super) fn judge(path: &Path) -> Verdict {
    let Ok(meta) = std::fs::metadata(path) else { return Verdict::MaybeHeld };
    match locks::age(path, &meta) {
        Some(age) if age >= STALE_LOCK && !locks::is_open(path) => Verdict::Abandoned(age),
        _ => Verdict::MaybeHeld,
    }
}

/// Remove an abandoned lock (`store::locks` judges it again). True if it is gone.
pub(super) fn remove(common_dir: &Path, path: &Path) -> Result<bool> {
    Ok(matches!(locks::recover(common_dir, path)?, locks::Recovery::Removed | locks::Recovery::Gone))
}
