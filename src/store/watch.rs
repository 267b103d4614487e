//! Which refs changed, as the kernel says (inotify), so a long walk re-reads only those
//! instead of listing every task, claim and journal ref before each step.
//!
//! A watch covers flat ref directories (`refs/loop/tasks/`, `refs/loop/claims/node/`,
//! `refs/loop/journal/`) and `packed-refs`. Every write of a loose ref ends in a rename into,
//! a create in, or a delete from its directory — by this process, another git-loop or git
//! itself — and the kernel queues the event before that call returns. So a reader that drains
//! the queue and then reads the refs named in it sees every change made before the drain;
//! later changes wait in the queue for the next one.
//!
//! Whenever the watch cannot vouch for that it says `All`, and the caller lists everything,
//! as it would without a watch: on the first look, while a directory does not exist (or after
//! it was removed), after packed-refs was replaced, when a subdirectory appeared, when the
//! queue overflowed, and where inotify is not available. A repository on a network or FUSE
//! file system is never watched: inotify hears only this machine's writes, and another
//! machine sharing the directory would go unseen.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};

/// What changed under one prefix since it was last asked.
#[derive(Debug, PartialEq, Eq)]
pub enum Changes {
    /// Anything may have: list them all.
    All,
    /// Only these refs (full names) may have.
    Names(BTreeSet<String>),
}

struct Dir {
    /// The ref prefix, ending in `/`.
    prefix: &'static str,
    /// The inotify watch on the directory, while there is one.
    wd: Option<i32>,
    /// Whether everything must be listed at the next ask.
    all: bool,
    /// A subdirectory appeared: this flat watch can no longer vouch for anything.
    nested: bool,
    names: BTreeSet<String>,
}

/// An inotify watch on some ref directories of one repository.
pub struct Watch {
    fd: Option<OwnedFd>,
    common: PathBuf,
    /// The watch on the common directory, for packed-refs.
    packed: Option<i32>,
    dirs: Vec<Dir>,
}

const DIR_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_CLOSE_WRITE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;
const PACKED_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_CLOSE_WRITE
    | libc::IN_ONLYDIR;

impl Watch {
    /// A watch on `prefixes` (each a flat directory of refs, ending in `/`) under the
    /// repository's common directory. Every prefix starts out as `All`.
    pub fn new(common: &Path, prefixes: &[&'static str]) -> Watch {
        let raw = if local(common) {
            // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1.
            unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) }
        } else {
            -1
        };
        // SAFETY: a non-negative return is a descriptor we now own.
        let fd = (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw) });
        let mut watch = Watch {
            fd,
            common: common.to_owned(),
            packed: None,
            dirs: prefixes
                .iter()
                .map(|prefix| Dir { prefix, wd: None, all: true, nested: false, names: BTreeSet::new() })
                .collect(),
        };
        watch.packed = watch.add(common, PACKED_EVENTS);
        watch
    }

    /// What changed under `prefix` (one of those watched) since the last ask.
    pub fn changes(&mut self, prefix: &str) -> Changes {
        self.drain();
        if self.fd.is_none() || self.packed.is_none() {
            return Changes::All;
        }
        let Some(at) = self.dirs.iter().position(|d| d.prefix == prefix) else {
            return Changes::All;
        };
        if self.dirs[at].wd.is_none() {
            // Watch first, then the caller lists: nothing can slip between the two.
            let path = self.common.join(prefix.trim_end_matches('/'));
            self.dirs[at].wd = self.add(&path, DIR_EVENTS);
            self.dirs[at].all = true;
        }
        let dir = &mut self.dirs[at];
        let names = std::mem::take(&mut dir.names);
        if dir.wd.is_none() || dir.nested || std::mem::replace(&mut dir.all, false) {
            return Changes::All;
        }
        Changes::Names(names)
    }

    fn add(&self, path: &Path, mask: u32) -> Option<i32> {
        use std::os::unix::ffi::OsStrExt as _;
        let fd = self.fd.as_ref()?;
        let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: a valid descriptor and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
        (wd >= 0).then_some(wd)
    }

    /// Read every queued event.
    fn drain(&mut self) {
        let Some(fd) = self.fd.as_ref().map(|f| f.as_raw_fd()) else { return };
        // inotify_event is 4-byte aligned; a u32 buffer keeps every record aligned.
        let mut buf = [0u32; 4096];
        loop {
            // SAFETY: reading into a buffer we own, of the length we pass.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf)) };
            if n <= 0 {
                // EAGAIN: the queue is empty. Any other error: trust nothing from now on.
                if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock {
                    self.fd = None;
                }
                return;
            }
            // SAFETY: the kernel wrote `n` bytes of whole records into `buf`.
            let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
            let mut at = 0;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= bytes.len() {
                // SAFETY: a whole record starts at `at`; read_unaligned copies its header.
                let event: libc::inotify_event = unsafe { std::ptr::read_unaligned(bytes[at..].as_ptr().cast()) };
                let name_bytes = &bytes[at + header..(at + header + event.len as usize).min(bytes.len())];
                let name = name_bytes.split(|b| *b == 0).next().unwrap_or_default();
                self.note(event.wd, event.mask, name);
                at += header + event.len as usize;
            }
        }
    }

    fn note(&mut self, wd: i32, mask: u32, name: &[u8]) {
        if mask & libc::IN_Q_OVERFLOW != 0 {
            self.dirs.iter_mut().for_each(|d| d.all = true);
            return;
        }
        if Some(wd) == self.packed {
            if mask & libc::IN_IGNORED != 0 {
                self.packed = None;
            }
            if name == b"packed-refs" || mask & libc::IN_IGNORED != 0 {
                self.dirs.iter_mut().for_each(|d| d.all = true);
            }
            return;
        }
        let Some(dir) = self.dirs.iter_mut().find(|d| d.wd == Some(wd)) else { return };
        if mask & (libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
            // The directory went away: watch it again (and list it all) at the next ask.
            dir.wd = None;
            dir.all = true;
            return;
        }
        if mask & libc::IN_ISDIR != 0 {
            dir.nested = true;
            return;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            dir.all = true;
            return;
        };
        if !name.is_empty() && !name.ends_with(".lock") {
            dir.names.insert(format!("{}{name}", dir.prefix));
        }
    }
}

/// Whether `path` is on a file system only this machine writes to (not NFS, SMB/CIFS, 9p,
/// Ceph, AFS or FUSE, any of which another machine may share).
fn local(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    const SHARED: [u32; 8] = [
        0x6969,      // NFS
        0x517b,      // SMB
        0xff53_4d42, // CIFS
        0xfe53_4d42, // SMB2
        0x0102_1997, // 9p
        0x00c3_6400, // Ceph
        0x5346_414f, // AFS
        0x6573_5546, // FUSE
    ];
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: statfs is plain old data; all zeroes is a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statfs we own.
    if unsafe { libc::statfs(path.as_ptr(), &mut fs) } != 0 {
        return false;
    }
    !SHARED.contains(&(fs.f_type as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Changes {
        Changes::Names(list.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn a_watch_names_the_refs_written_deleted_and_renamed_into_place_and_nothing_else() {
        let common = tempfile::tempdir().expect("tempdir");
        let tasks = common.path().join("refs/loop/tasks");
        std::fs::create_dir_all(&tasks).expect("mkdir");
        let mut watch = Watch::new(common.path(), &["refs/loop/tasks/", "refs/loop/claims/node/"]);
        assert_eq!(watch.changes("refs/loop/tasks/"), Changes::All, "the first look lists everything");
        assert_eq!(watch.changes("refs/loop/tasks/"), names(&[]));
        std::fs::write(tasks.join("t-a.lock"), "x").expect("write");
        std::fs::rename(tasks.join("t-a.lock"), tasks.join("t-a")).expect("rename");
        std::fs::write(tasks.join("t-b"), "y").expect("write");
        std::fs::remove_file(tasks.join("t-b")).expect("rm");
        assert_eq!(watch.changes("refs/loop/tasks/"), names(&["refs/loop/tasks/t-a", "refs/loop/tasks/t-b"]));
        assert_eq!(watch.changes("refs/loop/tasks/"), names(&[]), "asked once, told once");

        // A directory that does not exist yet: everything, until it does and is watched.
        assert_eq!(watch.changes("refs/loop/claims/node/"), Changes::All);
        assert_eq!(watch.changes("refs/loop/claims/node/"), Changes::All);
        let claims = common.path().join("refs/loop/claims/node");
        std::fs::create_dir_all(&claims).expect("mkdir");
        assert_eq!(watch.changes("refs/loop/claims/node/"), Changes::All, "watched from now on, listed once");
        std::fs::write(claims.join("t-a"), "z").expect("write");
        assert_eq!(watch.changes("refs/loop/claims/node/"), names(&["refs/loop/claims/node/t-a"]));

        // packed-refs replaced: every prefix is listed again.
        std::fs::write(common.path().join("packed-refs"), "").expect("write");
        assert_eq!(watch.changes("refs/loop/tasks/"), Changes::All);
        assert_eq!(watch.changes("refs/loop/claims/node/"), Changes::All);

        // The directory removed and made again: listed again, then watched again.
        std::fs::remove_dir_all(&tasks).expect("rm");
        std::fs::create_dir_all(&tasks).expect("mkdir");
        assert_eq!(watch.changes("refs/loop/tasks/"), Changes::All);
        std::fs::write(tasks.join("t-c"), "w").expect("write");
        assert_eq!(watch.changes("refs/loop/tasks/"), names(&["refs/loop/tasks/t-c"]));

        // A subdirectory: a flat watch cannot see into it, so it never vouches again.
        std::fs::create_dir(tasks.join("nested")).expect("mkdir");
        assert_eq!(watch.changes("refs/loop/tasks/"), Changes::All);
        assert_eq!(watch.changes("refs/loop/tasks/"), Changes::All);
    }
}
