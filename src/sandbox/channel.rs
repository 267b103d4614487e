//! How a confined session speaks to its walk: reports appended to `reports.jsonl` in its box,
//! which the walker — outside the sandbox, with the repository in reach — reads as they come
//! and acts on (journals a verdict, records the CLI's session id, commits a turn's work,
//! journals an overreach). Inside, `git loop finish`, `git loop hook …` and any refused command
//! write here instead of into the repository, which they cannot see.
//!
//! Nothing in the file is trusted: the agent can write any bytes to it. A report speaks only
//! for the session whose box it is in (it names no session and no task), the walker checks
//! each against the session's contract as `finish` itself would, and a line that is not a
//! report git-loop writes is itself journaled as an overreach. The format is docs/storage.md's
//! "Session reports" (version 1): one JSON object a line, `{"version": 1, "kind": …}`.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The report file, in a session's box.
pub const REPORTS: &str = "reports.jsonl";

/// The version of the report format written here; lines of another version are not read.
pub const VERSION: u32 = 1;

/// How much of the report file is ever read (a session that writes more is overreaching).
pub const MAX_BYTES: u64 = 16 << 20;

/// The longest line read; a longer one is not a report.
const MAX_LINE: usize = 1 << 20;

/// One thing a confined session said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    /// `git loop finish <verdict>`: what `finish` journals outside a sandbox.
    Finish {
        verdict: String,
        #[serde(default)]
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        /// `--usage`, as given (checked again by the walker).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Value>,
    },
    /// An agent CLI's hook fired (`git loop hook …`): the event as the hook parsed it.
    Hook {
        source: String,
        event: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_session: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transcript: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        #[serde(default)]
        detail: Map<String, Value>,
        digest: String,
    },
    /// An agent CLI's hook could not handle what its CLI gave it (`git loop hook …` inside).
    HookFailed { source: String, error: String },
    /// `git loop journal append` of a kind git-loop does not read (a note, a progress mark).
    Event {
        #[serde(rename = "event")]
        kind: String,
        #[serde(default)]
        data: Map<String, Value>,
    },
    /// A command the session may not run was refused: what it was, and the task it named.
    Overreach {
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
        #[serde(default)]
        argv: Vec<String>,
    },
}

#[derive(Serialize, Deserialize)]
struct Line {
    version: u32,
    #[serde(flatten)]
    report: Report,
}

/// Append `report` to the box's report file (inside the sandbox): one line, written by one
/// `write` on a file opened for appending, so two reports written at once never interleave.
pub fn write(box_dir: &Path, report: &Report) -> Result<()> {
    let mut line = serde_json::to_vec(&Line { version: VERSION, report: report.clone() })?;
    line.push(b'\n');
    let path = box_dir.join(REPORTS);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("could not open '{}'", path.display()))?;
    file.write_all(&line).with_context(|| format!("could not write '{}'", path.display()))
}

/// What one line of the report file held.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    Report(Report),
    /// Not a report of this version: what was wrong with it.
    Garbled(String),
    /// The file is past [`MAX_BYTES`]: the rest is not read.
    TooLong,
}

/// Reads a box's report file as it grows, each complete line once.
#[derive(Debug, Default)]
pub struct Reader {
    offset: u64,
    said_too_long: bool,
}

impl Reader {
    /// The reports appended since the last call (complete lines only; a line being written is
    /// read next time). Reading never fails the walk: what cannot be read is a `Garbled` line.
    pub fn next_batch(&mut self, box_dir: &Path) -> Vec<Read> {
        if self.offset >= MAX_BYTES {
            if self.said_too_long {
                return Vec::new();
            }
            self.said_too_long = true;
            return vec![Read::TooLong];
        }
        let bytes = match super::safe::read_from(box_dir, Path::new(REPORTS), self.offset, MAX_BYTES - self.offset) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Vec::new(),
            Err(err) => {
                // A link or a directory in its place: said once, then nothing more is read.
                self.offset = MAX_BYTES;
                self.said_too_long = true;
                return vec![Read::Garbled(format!("{err:#}"))];
            }
        };
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
            if bytes.len() >= MAX_LINE {
                self.offset += bytes.len() as u64;
                return vec![Read::Garbled(format!("a line longer than {MAX_LINE} bytes"))];
            }
            return Vec::new();
        };
        self.offset += end as u64 + 1;
        bytes[..end].split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).map(parse).collect()
    }
}

fn parse(line: &[u8]) -> Read {
    if line.len() > MAX_LINE {
        return Read::Garbled(format!("a line longer than {MAX_LINE} bytes"));
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) => return Read::Garbled(format!("not JSON: {err}")),
    };
    match value.get("version").and_then(Value::as_u64) {
        Some(v) if v == VERSION as u64 => {}
        Some(v) => return Read::Garbled(format!("a report of version {v}, not {VERSION}")),
        None => return Read::Garbled("a line without a version".into()),
    }
    match serde_json::from_value::<Line>(value) {
        Ok(line) => Read::Report(line.report),
        Err(err) => Read::Garbled(format!("not a report: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_read_once_each_as_they_are_written_and_garbage_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let finish = Report::Finish { verdict: "done".into(), message: "m".into(), subject: None, usage: None };
        write(dir.path(), &finish).expect("write");
        let mut reader = Reader::default();
        assert_eq!(reader.next_batch(dir.path()), vec![Read::Report(finish.clone())]);
        assert_eq!(reader.next_batch(dir.path()), vec![], "each line once");
        let mut file = std::fs::OpenOptions::new().append(true).open(dir.path().join(REPORTS)).expect("open");
        file.write_all(b"not json\n{\"version\":2,\"kind\":\"finish\"}\n{\"version\":1,\"kind\":\"finish\",\"verd")
            .expect("write");
        let batch = reader.next_batch(dir.path());
        assert_eq!(batch.len(), 2, "the half-written last line waits: {batch:?}");
        assert!(batch.iter().all(|r| matches!(r, Read::Garbled(_))));
        file.write_all(b"ict\":\"failed\"}\n").expect("write");
        assert_eq!(
            reader.next_batch(dir.path()),
            vec![Read::Report(Report::Finish {
                verdict: "failed".into(),
                message: String::new(),
                subject: None,
                usage: None
            })]
        );
    }
}
