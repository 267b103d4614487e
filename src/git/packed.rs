//! Reading `packed-refs` around lines that cannot be parsed.
//!
//! git refuses to run at all while `packed-refs` holds a line it cannot parse ("unexpected
//! line in .git/packed-refs"). gix keeps going, but a lookup whose binary search lands on the
//! bad line fails, and a listing yields an error for that line. Which healthy refs fail depends
//! on where the search happens to land, so without care a garbage line is reported as some
//! healthy task or claim being corrupt. This module finds the bad lines (so they can be
//! reported as what they are, by line number) and looks a ref up by reading every line, so a
//! healthy ref still reads as itself while the file is damaged.

use std::path::Path;

use gix::ObjectId;

use crate::error::{corrupt, Refusal};

/// The name reports file packed-refs problems under, beside ref names.
pub const NAME: &str = "packed-refs";

/// A line of `packed-refs` that git and gix cannot parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based, as `sed -n <number>p` counts.
    pub number: usize,
    /// The line, lossily decoded and cut to 80 characters.
    pub text: String,
}

impl BadLine {
    /// One line saying what is wrong, naming the file, for errors and reports.
    pub fn describe(&self, path: &Path) -> String {
        format!("'{}' has a bad line {}: {:?}", path.display(), self.number, self.text)
    }
}

/// How `packed-refs` reads, line by line.
struct Parsed {
    /// (ref name, object id) of every line that parses.
    refs: Vec<(String, ObjectId)>,
    bad: Vec<BadLine>,
}

fn parse(bytes: &[u8], hash: gix::hash::Kind) -> Parsed {
    let mut parsed = Parsed { refs: Vec::new(), bad: Vec::new() };
    let hex_len = hash.len_in_hex();
    let mut after_ref = false;
    let mut rest = bytes;
    let mut number = 0;
    while !rest.is_empty() {
        number += 1;
        let (line, terminated) = match rest.iter().position(|b| *b == b'\n') {
            Some(end) => {
                let line = &rest[..end];
                rest = &rest[end + 1..];
                (line, true)
            }
            None => {
                let line = rest;
                rest = &[];
                (line, false)
            }
        };
        let oid = |hex: &[u8]| (hex.len() == hex_len).then(|| ObjectId::from_hex(hex).ok()).flatten();
        let readable = if number == 1 && line.starts_with(b"# pack-refs with:") {
            true
        } else if let Some(peeled) = line.strip_prefix(b"^") {
            // A peeled line belongs to the ref line before it.
            std::mem::replace(&mut after_ref, false) && oid(peeled).is_some()
        } else {
            let entry = line.iter().position(|b| *b == b' ').and_then(|space| {
                let id = oid(&line[..space])?;
                let name = std::str::from_utf8(&line[space + 1..]).ok()?;
                gix::refs::FullName::try_from(name).ok()?;
                Some((name.to_owned(), id))
            });
            after_ref = entry.is_some();
            entry.map(|entry| parsed.refs.push(entry)).is_some()
        };
        // git refuses a last line without its newline; its content is still worth reading.
        if !(readable && terminated) {
            after_ref = false;
            let text: String = String::from_utf8_lossy(line).chars().take(80).collect();
            parsed.bad.push(BadLine { number, text });
        }
    }
    parsed
}

fn read(repo: &gix::Repository) -> Option<Parsed> {
    let bytes = std::fs::read(repo.common_dir().join("packed-refs")).ok()?;
    Some(parse(&bytes, repo.object_hash()))
}

/// The path of the repository's `packed-refs`.
pub fn path(repo: &gix::Repository) -> std::path::PathBuf {
    repo.common_dir().join("packed-refs")
}

/// Whether `packed-refs` has a line that would throw gix's binary search off: one that is
/// neither the header, a peeled line, nor an object id and a space. Cheaper than `bad_lines`
/// (no ref name is validated), so every listing can afford it; a line it misses (a bad name
/// after a good id) is still reported by gix, and then found by `bad_lines`.
///
/// A walk lists refs many times a step, and at 100,000 refs the file is megabytes: the answer
/// is kept for the file as it was (its inode, size, and change and modification times, to the
/// nanosecond), and read again once any of them moves. Git and gix replace `packed-refs` by
/// renaming a new file over it (a new inode); a hand edit in place changes its times. A whole
/// file's key is also kept in `.git/loop/packed-refs-whole` for the processes that come after
/// (a claim or a `next` is a process of its own, and reading megabytes is most of its time), once
/// its times are over a second old: an edit after that gets a change time of its own, which
/// nobody can set back, so a key never vouches for content it was not taken from.
pub fn looks_damaged(repo: &gix::Repository) -> bool {
    use std::os::unix::fs::MetadataExt;
    use std::sync::Mutex;
    type Key = (std::path::PathBuf, u64, u64, i64, i64, i64, i64);
    static SEEN: Mutex<Option<(Key, bool)>> = Mutex::new(None);
    let file = path(repo);
    let Ok(meta) = std::fs::metadata(&file) else { return false };
    let key: Key =
        (file.clone(), meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ctime(), meta.ctime_nsec());
    if let Some((seen, damaged)) = SEEN.lock().ok().as_deref().and_then(Option::as_ref) {
        if *seen == key {
            return *damaged;
        }
    }
    let whole = repo.common_dir().join("loop").join("packed-refs-whole");
    let stamp = format!("{} {} {} {} {} {}\n", key.1, key.2, key.3, key.4, key.5, key.6);
    let damaged = std::fs::read_to_string(&whole).ok().as_deref() != Some(stamp.as_str()) && {
        let damaged = scan_for_damage(repo, &file);
        let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
        let settled =
            |secs: i64, nanos: i64| now.saturating_sub(secs.saturating_mul(1_000_000_000) + nanos) > 1_000_000_000;
        if !damaged && settled(key.3, key.4) && settled(key.5, key.6) && whole.parent().is_some_and(Path::is_dir) {
            // Best effort: a verdict not kept only costs the next process the scan.
            let aside = whole.with_extension(format!("tmp-{}", std::process::id()));
            if std::fs::write(&aside, &stamp).is_ok() && std::fs::rename(&aside, &whole).is_err() {
                let _ = std::fs::remove_file(&aside);
            }
        }
        damaged
    };
    if let Ok(mut seen) = SEEN.lock() {
        *seen = Some((key, damaged));
    }
    damaged
}

fn scan_for_damage(repo: &gix::Repository, file: &std::path::Path) -> bool {
    let Ok(bytes) = std::fs::read(file) else { return false };
    let hex_len = repo.object_hash().len_in_hex();
    let is_hex = |b: &[u8]| b.iter().all(u8::is_ascii_hexdigit);
    bytes.split_inclusive(|b| *b == b'\n').enumerate().any(|(i, line)| {
        let Some(line) = line.strip_suffix(b"\n") else { return true };
        if i == 0 && line.starts_with(b"# pack-refs with:") {
            return false;
        }
        match line.strip_prefix(b"^") {
            Some(peeled) => peeled.len() != hex_len || !is_hex(peeled),
            None => line.len() <= hex_len + 1 || line[hex_len] != b' ' || !is_hex(&line[..hex_len]),
        }
    })
}

/// The refs of `packed-refs` whose names start with `prefix`, read line by line (bad lines
/// skipped), in name order.
pub fn refs_prefixed(repo: &gix::Repository, prefix: &str) -> Vec<(String, ObjectId)> {
    let mut refs: Vec<(String, ObjectId)> =
        read(repo).map(|p| p.refs).unwrap_or_default().into_iter().filter(|(n, _)| n.starts_with(prefix)).collect();
    refs.sort();
    refs
}

/// The refusal for a damaged `packed-refs`, naming its first bad line: what a write that gix
/// could not prepare (its lookup landed on the line) is reported as. `Ok` when it is whole.
pub fn check(repo: &gix::Repository) -> Result<(), Refusal> {
    let Some(line) = bad_lines(repo).into_iter().next() else { return Ok(()) };
    let file = path(repo);
    Err(corrupt(line.describe(&file)).hint(format!(
        "git reads no ref until it is gone: save a copy and delete the line ('cp {0} {0}.bak && sed -i {1}d {0}')",
        file.display(),
        line.number
    )))
}

/// Every line of `packed-refs` that cannot be parsed (none when there is no such file).
pub fn bad_lines(repo: &gix::Repository) -> Vec<BadLine> {
    read(repo).map(|p| p.bad).unwrap_or_default()
}

/// Look `name` up by reading every line of `packed-refs`, when the file has a bad line:
/// `Some(found)` then (`found` is `None` when no good line names it); `None` when the file is
/// whole or missing, so the caller's failure has another cause.
pub fn lookup_around_bad_lines(repo: &gix::Repository, name: &str) -> Option<Option<ObjectId>> {
    let parsed = read(repo)?;
    if parsed.bad.is_empty() {
        return None;
    }
    Some(parsed.refs.iter().find(|(n, _)| n == name).map(|(_, id)| *id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn good_lines_are_read_and_bad_ones_named_by_number() {
        let text = format!(
            "# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n^{B}\ngarbage\n{A} refs/loop/tasks/t-1\n^{B}\n^{B}\n{B} not a ref name\n{B} refs/loop/tasks/t-2"
        );
        let parsed = parse(text.as_bytes(), gix::hash::Kind::Sha1);
        let names: Vec<&str> = parsed.refs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["refs/heads/main", "refs/loop/tasks/t-1", "refs/loop/tasks/t-2"]);
        let numbers: Vec<usize> = parsed.bad.iter().map(|b| b.number).collect();
        assert_eq!(numbers, [4, 7, 8, 9], "garbage, an orphan peeled line, a bad name, an unterminated last line");
        assert_eq!(parsed.bad[0].text, "garbage");
    }

    #[test]
    fn a_whole_file_has_no_bad_lines() {
        let text = format!("# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n{B} refs/loop/x\n");
        assert!(parse(text.as_bytes(), gix::hash::Kind::Sha1).bad.is_empty());
        assert!(parse(b"", gix::hash::Kind::Sha1).bad.is_empty());
    }
}
