//! Machine-local mutual exclusion that can never go stale: an exclusive `flock` on a file under
//! `.git/loop/` that is never deleted. The kernel drops the lock when its holder exits, however
//! it exits, so a crashed holder never leaves it behind, and no file is created or removed per
//! use. Locks are per open file description, so two threads of one process exclude each other
//! as two processes do.

use std::os::fd::AsRawFd as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

/// A held lock; dropping it (closing the file) releases it.
pub struct FileLock(std::fs::File);

impl FileLock {
    /// Take the lock on `path`, waiting up to `patience` for its holder; `what` names the
    /// holder's work in the error.
    pub fn exclusive(path: &Path, what: &str, patience: Duration) -> Result<FileLock> {
        wait(path, what, patience, libc::LOCK_EX)
    }

    /// Take the lock on `path` shared with other shared holders (excluding an exclusive one),
    /// waiting up to `patience`.
    pub fn shared(path: &Path, what: &str, patience: Duration) -> Result<FileLock> {
        wait(path, what, patience, libc::LOCK_SH)
    }

    /// Take the lock on `path` if nobody holds it (`None` if someone does).
    pub fn try_exclusive(path: &Path) -> Result<Option<FileLock>> {
        let file = open(path)?;
        Ok(try_lock(&file, path)?.then_some(FileLock(file)))
    }

    /// The locked file, for a lock that guards its own content (read and write).
    pub fn file(&self) -> &std::fs::File {
        &self.0
    }
}

fn open(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("could not open '{}'", path.display()))
}

/// Take the lock on `path` in `mode`, waiting up to `patience` for its holder.
fn wait(path: &Path, what: &str, patience: Duration, mode: libc::c_int) -> Result<FileLock> {
    let file = open(path)?;
    let deadline = Instant::now() + patience;
    loop {
        if try_flock(&file, path, mode)? {
            return Ok(FileLock(file));
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "another git-loop has been {what} for {} s ('{}' is locked)",
                patience.as_secs(),
                path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn try_lock(file: &std::fs::File, path: &Path) -> Result<bool> {
    try_flock(file, path, libc::LOCK_EX)
}

fn try_flock(file: &std::fs::File, path: &Path, mode: libc::c_int) -> Result<bool> {
    // SAFETY: flock on a descriptor we own; it only takes or refuses the lock.
    if unsafe { libc::flock(file.as_raw_fd(), mode | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.kind() == std::io::ErrorKind::WouldBlock {
        return Ok(false);
    }
    Err(err).with_context(|| format!("could not lock '{}'", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_even_within_one_process_and_released_on_drop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let held = FileLock::exclusive(&path, "testing", Duration::from_secs(1)).expect("free");
        assert!(FileLock::try_exclusive(&path).expect("try").is_none(), "a second open is refused");
        let err = FileLock::exclusive(&path, "testing", Duration::from_millis(20)).err().expect("times out");
        assert!(format!("{err}").contains("x.lock"), "the error names the file: {err}");
        drop(held);
        FileLock::exclusive(&path, "testing", Duration::from_millis(20)).expect("free again once dropped");
    }
}
