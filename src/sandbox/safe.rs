//! Reading what a confined session left in its box, from outside: every file the walker reads
//! there (a report, the result file, the private git directory, a transcript) was written by
//! the agent, which may have put a symbolic link where a file should be — to `~/.ssh/id_rsa`,
//! to another repository's objects. Such a link must never be followed by the walker, which
//! sees the whole file system.
//!
//! So a path under a box is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: no
//! component may be a symbolic link and the path may not leave the box; where the kernel has no
//! `openat2` (before 5.6) each component is opened in turn with `O_NOFOLLOW`. What is opened
//! must be a regular file (or, for [`open_dir`], a directory), and is read up to a limit.

use std::fs::File;
use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path};

use anyhow::{Context as _, Result};

/// Open `rel` (relative, no `..`) beneath the directory `root` without following any symbolic
/// link on the way; `directory` asks for a directory instead of a regular file.
fn open_beneath(root: &Path, rel: &Path, directory: bool) -> std::io::Result<File> {
    let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a plain relative path");
    if rel.is_absolute() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(invalid());
    }
    let root_fd = open_plain(None, root.as_os_str().as_bytes(), true)?;
    // O_NONBLOCK: an agent may have put a FIFO where a file should be, whose open would wait
    // for a writer for ever; opened without blocking, it is then refused as not a regular file.
    let flags = libc::O_RDONLY
        | libc::O_CLOEXEC
        | libc::O_NOFOLLOW
        | libc::O_NONBLOCK
        | if directory { libc::O_DIRECTORY } else { 0 };
    let name = std::ffi::CString::new(rel.as_os_str().as_bytes()).map_err(|_| invalid())?;
    // SAFETY: open_how is plain old data; all zeroes is a valid value, filled in below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    use std::os::fd::AsRawFd as _;
    // SAFETY: openat2 reads the path and the open_how struct we own, and returns a new
    // descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root_fd.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a non-negative return is a descriptor we now own.
        return Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) }));
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(err);
    }
    // No openat2: walk the components, each opened with O_NOFOLLOW beneath the last.
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let mut dir = root_fd;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        dir = open_plain(Some(&dir), part.as_bytes(), !last || directory)?;
    }
    Ok(File::from(dir))
}

/// `openat(dir, name, O_NOFOLLOW)` (from the current directory when `dir` is none).
fn open_plain(dir: Option<&OwnedFd>, name: &[u8], directory: bool) -> std::io::Result<OwnedFd> {
    use std::os::fd::AsRawFd as _;
    let name = std::ffi::CString::new(name)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a path holds a NUL byte"))?;
    let flags = libc::O_RDONLY
        | libc::O_CLOEXEC
        | libc::O_NOFOLLOW
        | libc::O_NONBLOCK
        | if directory { libc::O_DIRECTORY } else { 0 };
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: openat reads the NUL-terminated path and returns a new descriptor or -1.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a non-negative return is a descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The regular file `rel` beneath `root`, opened without following links, and what it is:
/// `Ok(None)` when it does not exist; an error when it is a link or anything but a regular file.
fn open_file(root: &Path, rel: &Path) -> Result<Option<(File, std::fs::Metadata)>> {
    let file = match open_beneath(root, rel, false) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => {
            return Err(err)
                .with_context(|| format!("'{}' in '{}' cannot be read safely", rel.display(), root.display()))
        }
    };
    let meta = file.metadata().with_context(|| format!("could not look at '{}'", rel.display()))?;
    anyhow::ensure!(meta.is_file(), "'{}' in '{}' is not a regular file", rel.display(), root.display());
    Ok(Some((file, meta)))
}

/// The bytes of the regular file `rel` beneath `root`, if there is one: `Ok(None)` when it does
/// not exist; an error when it is a link, a directory, anything but a regular file, or larger
/// than `limit`.
pub fn read(root: &Path, rel: &Path, limit: u64) -> Result<Option<Vec<u8>>> {
    let Some((file, meta)) = open_file(root, rel)? else { return Ok(None) };
    anyhow::ensure!(
        meta.len() <= limit,
        "'{}' in '{}' is larger than {limit} bytes ({})",
        rel.display(),
        root.display(),
        meta.len()
    );
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).with_context(|| format!("could not read '{}'", rel.display()))?;
    anyhow::ensure!(bytes.len() as u64 <= limit, "'{}' grew past {limit} bytes while it was read", rel.display());
    Ok(Some(bytes))
}

/// The bytes of `rel` beneath `root` from byte `from` on (for a report file read as it grows),
/// at most `limit` of them; `Ok(None)` when it does not exist.
pub fn read_from(root: &Path, rel: &Path, from: u64, limit: u64) -> Result<Option<Vec<u8>>> {
    use std::io::{Seek as _, SeekFrom};
    let Some((mut file, meta)) = open_file(root, rel)? else { return Ok(None) };
    if meta.len() <= from {
        return Ok(Some(Vec::new()));
    }
    file.seek(SeekFrom::Start(from)).with_context(|| format!("could not read '{}'", rel.display()))?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).with_context(|| format!("could not read '{}'", rel.display()))?;
    Ok(Some(bytes))
}

/// Whether the tree under `dir` (itself included) holds anything but plain directories and
/// regular files: a symbolic link, a device, a socket. Walked without following links.
pub fn holds_links(dir: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return false };
    if meta.file_type().is_symlink() {
        return true;
    }
    if !meta.is_dir() {
        return !meta.is_file();
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return true };
    entries.flatten().any(|entry| match entry.file_type() {
        Ok(kind) if kind.is_dir() => holds_links(&entry.path()),
        Ok(kind) => !kind.is_file(),
        Err(_) => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_anywhere_on_the_way_is_never_followed() {
        let root = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("secret"), "key").expect("write");
        let inside = root.path();
        std::fs::create_dir_all(inside.join("git/refs")).expect("mkdir");
        std::fs::write(inside.join("git/HEAD"), "ref: x\n").expect("write");
        std::os::unix::fs::symlink(outside.path().join("secret"), inside.join("result.json")).expect("link");
        std::os::unix::fs::symlink(outside.path(), inside.join("git/objects")).expect("link");
        assert_eq!(read(inside, Path::new("git/HEAD"), 100).expect("read").as_deref(), Some(&b"ref: x\n"[..]));
        assert!(read(inside, Path::new("result.json"), 100).is_err(), "a link in place of the file is refused");
        assert!(read(inside, Path::new("git/objects/secret"), 100).is_err(), "a link on the way is refused");
        assert!(read(inside, Path::new("../secret"), 100).is_err(), "nothing outside the box");
        assert_eq!(read(inside, Path::new("missing"), 100).expect("absent is fine"), None);
        assert!(read(inside, Path::new("git/HEAD"), 3).is_err(), "past the limit");
        assert_eq!(read_from(inside, Path::new("git/HEAD"), 5, 100).expect("read").as_deref(), Some(&b"x\n"[..]));
        assert!(holds_links(inside) && holds_links(&inside.join("git")) && !holds_links(&inside.join("git/refs")));
    }

    /// A FIFO where a file should be is refused at once: its open would otherwise wait for a
    /// writer for ever, and the walker with it.
    #[test]
    fn a_fifo_in_place_of_a_file_is_refused_without_waiting() {
        let root = tempfile::tempdir().expect("tempdir");
        let fifo = std::ffi::CString::new(root.path().join("reports.jsonl").as_os_str().as_bytes()).expect("path");
        // SAFETY: mkfifo reads the NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = root.path().to_owned();
        std::thread::spawn(move || {
            let read = read(&dir, Path::new("reports.jsonl"), 100).map_err(|e| format!("{e:#}"));
            let from = read_from(&dir, Path::new("reports.jsonl"), 0, 100).map_err(|e| format!("{e:#}"));
            let _ = tx.send((read, from));
        });
        let (read, from) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the reads returned instead of waiting for a writer");
        assert!(read.is_err_and(|e| e.contains("not a regular file")), "read refuses it");
        assert!(from.is_err_and(|e| e.contains("not a regular file")), "read_from refuses it");
    }
}
