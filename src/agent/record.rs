//! Per-session records, `.git/loop/sessions/<session>/record.json`: enough for a later run
//! to tell a live session from a crashed one and to stop what it left behind.
//!
//! The record names the guard's pid with its start time (clock ticks since boot) and the
//! boot id, so a reused pid is never mistaken for the session; and the marker, which every
//! process of the session carries in its environment. Machine-local runtime state: deleting
//! it loses nothing the refs hold.

use std::path::{Path, PathBuf};

use crate::store::layout::Layout;

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Version of a session record; newer ones are ignored.
pub const RECORD_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    pub session: String,
    pub walker: String,
    pub task: String,
    #[serde(rename = "try")]
    pub try_number: u32,
    pub agent: String,
    pub worktree: PathBuf,
    pub pid: u32,
    #[serde(default)]
    pub pid_start: Option<u64>,
    pub boot_id: String,
    pub marker: String,
    pub started_at: DateTime<Utc>,
    #[serde(default)]
    pub ended_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub ended: Option<String>,
    /// The agent CLI's own session id, when a hook reported it (needed to resume it).
    #[serde(default)]
    pub agent_session: Option<String>,
    /// The session's role when it is not the worker's (a reviewer works in a checkout of its
    /// own, which is discarded, never committed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The contract the role keeps (`reviewer/1`, …); absent: the worker's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
}

/// The directory of one session's files (prompt, log, result, record).
pub fn dir(loop_dir: &Path, session: &str) -> PathBuf {
    Layout::at(loop_dir).session(session)
}

/// The session's result file (`$GIT_LOOP_RESULT`), in its box: where a session may write even
/// when it runs confined.
pub fn result_file(session_dir: &Path) -> PathBuf {
    crate::store::layout::box_in(session_dir).join("result.json")
}

/// The largest result file read: a result is a few KiB of JSON.
const MAX_RESULT: u64 = 4 << 20;

/// What the session's result file holds, if it holds something to read. The file is the
/// agent's: a symbolic link in its place (to a secret elsewhere) is never followed, anything
/// but a regular file reads as nothing, and so does one past 4 MiB. (The box it is in is the
/// walker's, and a mount point inside the sandbox, so it cannot itself be replaced.)
pub fn read_result(session_dir: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(result_file(session_dir))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_RESULT {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_RESULT).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

pub fn write(loop_dir: &Path, record: &Record) -> Result<()> {
    let path = dir(loop_dir, &record.session).join("record.json");
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(record)?)
        .with_context(|| format!("could not write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("could not write '{}'", path.display()))
}

pub fn read(loop_dir: &Path, session: &str) -> Option<Record> {
    let bytes = std::fs::read(dir(loop_dir, session).join("record.json")).ok()?;
    serde_json::from_slice::<Record>(&bytes).ok().filter(|r| r.version <= RECORD_VERSION)
}

/// How much of the end of a log `tail` reads: a session's log can run to many megabytes.
const TAIL_BYTES: u64 = 64 * 1024;

/// The last `n` lines of a log (empty if unreadable), read from its last 64 KiB only.
pub fn tail(path: &Path, n: usize) -> String {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return String::new() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(TAIL_BYTES);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    // Started mid-file: the first line read may be a fragment.
    let text = if from > 0 { text.split_once('\n').map_or("", |(_, rest)| rest) } else { &text };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The first `n` lines of a log, read from its first 64 KiB only.
pub fn head(path: &Path, n: usize) -> String {
    use std::io::Read as _;
    let Ok(file) = std::fs::File::open(path) else { return String::new() };
    let mut bytes = Vec::new();
    if file.take(TAIL_BYTES).read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&bytes).lines().take(n).collect::<Vec<_>>().join("\n")
}

/// Every readable session record.
pub fn all(loop_dir: &Path) -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(Layout::at(loop_dir).sessions()) else {
        return Vec::new();
    };
    entries.flatten().filter_map(|e| read(loop_dir, e.file_name().to_str()?)).collect()
}

/// Whether the process a record names is still that process (same boot, same start time).
pub fn is_alive(pid: u32, pid_start: Option<u64>, boot_id: &str, this_boot: &str) -> bool {
    if boot_id != this_boot {
        return false;
    }
    match (super::process::start_time(pid), pid_start) {
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_head_read_only_the_ends_of_a_large_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("log");
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!("line {i} of a long session\n"));
        }
        std::fs::write(&log, &text).expect("write");
        assert!(text.len() as u64 > TAIL_BYTES * 4);
        assert_eq!(tail(&log, 2), "line 19998 of a long session\nline 19999 of a long session");
        let many = tail(&log, 100_000);
        assert!(many.lines().all(|l| l.starts_with("line ") && l.ends_with("session")), "no fragment of a line");
        assert_eq!(many.lines().last(), Some("line 19999 of a long session"));
        assert_eq!(head(&log, 2), "line 0 of a long session\nline 1 of a long session");
        assert_eq!(tail(&dir.path().join("missing"), 5), "");
        std::fs::write(&log, "one\ntwo\n").expect("write");
        assert_eq!(tail(&log, 5), "one\ntwo");
    }
}
