//! A derived cache of tasks and task claims, so `next` over thousands of tasks reads one file
//! instead of three objects per task and one per claim.
//!
//! `.git/loop/index-v4` holds a stamp line, then one line per task ref and per `node:` claim
//! ref (tab-separated; no field can hold a tab or a newline):
//!
//! ```text
//! stamp <packed-refs ino:size:mtime> <tasks dir ino:mtime> <claims/node dir ino:mtime>   (or "stamp racy")
//! rows <length in bytes of the rows that follow>
//! T <task id> <tip> <state> <priority> <created, unix ns> <after,…> <label␟…> <json offset> <json length>
//! C <task id> <claim blob> <holder> <holder's expiry, unix ns; 0: released> <json offset> <json length>
//! X <ref> <problem>
//! <every record's JSON, back to back; offsets count from the start of this section>
//! ```
//!
//! The records come last so that reading the rows touches only the small part of the file;
//! a record's page is read only when that task is shown.
//!
//! Every entry is keyed by the object id its ref pointed to (tasks by tip, claims by blob,
//! which is content-addressed), so an entry is used only while its ref still points there: the
//! cache can never disagree with the refs, and deleting it loses nothing.
//!
//! A task row is added only once the task's history was checked (`task::check_history`): every
//! commit, tree and operation present and readable. The check of a new tip reads only what was
//! added since the row's previous tip — a commit or two — so a history that arrives incomplete
//! (an object lost in a copy, a fetch, a hostile push) is reported as corrupt, at the cost of
//! one or two object reads per changed task. An object lost later, under a tip already
//! checked, is not looked for on every call (that would read every history every time): the
//! commands that act on one task read its whole history, and `doctor` reads them all. (Version
//! 3 rows were not checked: hence version 4.)
//!
//! The stamp lets a reader skip listing the refs at all: any ref change renames a file in one
//! of those directories or replaces packed-refs, which changes the stamp. File times tick
//! coarsely (every few milliseconds), so a stamp taken while any of them is less than a second
//! old is "racy": the cache is written but not trusted without listing the refs, as git treats
//! racily clean index entries. The stamp is always taken before the refs are read.
//!
//! A walk keeps the rows current through its watch (`Live`); each row it reads again holds its
//! own text on the heap, so every few hundred of them it writes the file again (racy stamp:
//! its rows are as current as its watch, which is no stamp's promise) and maps it, and its
//! memory stays flat however many units it works.
//!
//! The file is mapped, not read, and rows are ranges into it: parsing ten thousand rows then
//! allocates next to nothing. It is only ever replaced by rename, never changed in place, so a
//! mapping stays valid while another process rewrites the cache.

use std::collections::HashMap;
use std::io::Write as _;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use chrono::{DateTime, Utc};
use gix::ObjectId;

use super::claim::{self, Held};
use super::task::{self, State, Task};
use super::watch::{Changes, Watch};
use super::Store;
use crate::ids::{random_base32, ClaimKey, Priority};
use crate::refs;

/// What the cache file holds, for `doctor` to hold against the refs: the tip each task row
/// was checked at, and the refs it lists as unreadable.
pub struct Cached {
    pub tasks: Vec<(String, ObjectId)>,
    pub corrupt: Vec<String>,
}

/// The cache file's content: `None` when there is none, `Some(None)` when it cannot be parsed
/// (readers then ignore it and rebuild it).
pub fn cached(store: &Store) -> Option<Option<Cached>> {
    let path = super::layout::Layout::of(store.common_dir()).index();
    if !path.exists() {
        return None;
    }
    let cache = Mapped::open(&path).and_then(|m| parse(Arc::new(Text::Map(m))));
    Some(cache.map(|c| Cached {
        tasks: c.tasks.iter().map(|r| (r.id().to_owned(), r.tip)).collect(),
        corrupt: c.corrupt.into_iter().map(|(name, _)| name).collect(),
    }))
}

/// The bytes rows point into: the mapped cache file, or a line made for a fresh entry.
#[derive(Debug)]
enum Text {
    Map(Mapped),
    Owned(Vec<u8>),
}

impl Text {
    fn bytes(&self) -> &[u8] {
        match self {
            Text::Map(m) => m.bytes(),
            Text::Owned(v) => v,
        }
    }
}

/// A read-only private mapping of a whole file.
#[derive(Debug)]
struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and never changed or unmapped while shared.
unsafe impl Send for Mapped {}
unsafe impl Sync for Mapped {}

impl Mapped {
    fn open(path: &Path) -> Option<Mapped> {
        use std::os::unix::io::AsRawFd;
        let file = std::fs::File::open(path).ok()?;
        let len = file.metadata().ok()?.len() as usize;
        if len == 0 {
            return None;
        }
        // SAFETY: mapping a file we opened read-only, privately; the cache file is only ever
        // replaced by rename, never truncated in place, so the mapped pages stay valid.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        (ptr != libc::MAP_FAILED).then_some(Mapped { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `open` mapped.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

/// A task as the index holds it: what ordering and readiness need, and its record unparsed.
#[derive(Debug, Clone)]
pub struct Row {
    text: Arc<Text>,
    id: Range<usize>,
    pub tip: ObjectId,
    pub state: State,
    pub priority: Priority,
    pub created_at: DateTime<Utc>,
    after: Range<usize>,
    labels: Range<usize>,
    json: Range<usize>,
}

/// A field of a row. Every range handed to this lies inside text checked to be UTF-8 (the rows
/// section of a mapped file is validated once in `parse`; owned texts are built from `str`s)
/// and is cut at ASCII separators, so it is valid UTF-8 itself.
fn as_str(bytes: &[u8]) -> &str {
    debug_assert!(std::str::from_utf8(bytes).is_ok());
    // SAFETY: see above: the bytes are a char-boundary slice of validated UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

impl Row {
    pub fn id(&self) -> &str {
        as_str(&self.text.bytes()[self.id.clone()])
    }

    /// The tasks this one comes after.
    pub fn after(&self) -> impl Iterator<Item = &str> {
        as_str(&self.text.bytes()[self.after.clone()]).split(',').filter(|s| !s.is_empty())
    }

    pub fn has_label(&self, label: &str) -> bool {
        as_str(&self.text.bytes()[self.labels.clone()]).split('\u{1f}').any(|l| l == label)
    }

    /// The full task.
    pub fn task(&self) -> Result<Task> {
        let name = format!("{}{}", refs::TASKS, self.id());
        task::parse_task(&name, &self.text.bytes()[self.json.clone()])
    }

    /// A row for a task read from git.
    fn fresh(tip: ObjectId, task: &Task) -> Result<Row> {
        let json = serde_json::to_string(task)?;
        let labels: Vec<String> = task.labels.iter().map(|l| clean(l)).collect();
        let (text, ranges) = owned(&[&task.id, &task.after.join(","), &labels.join("\u{1f}"), &json]);
        Ok(Row {
            text,
            id: ranges[0].clone(),
            tip,
            state: task.state,
            priority: task.priority,
            created_at: task.created_at,
            after: ranges[1].clone(),
            labels: ranges[2].clone(),
            json: ranges[3].clone(),
        })
    }
}

/// An owned text holding `parts` back to back, and their ranges.
fn owned(parts: &[&str]) -> (Arc<Text>, Vec<Range<usize>>) {
    let mut bytes = Vec::new();
    let mut ranges = Vec::with_capacity(parts.len());
    for part in parts {
        let start = bytes.len();
        bytes.extend_from_slice(part.as_bytes());
        ranges.push(start..bytes.len());
    }
    (Arc::new(Text::Owned(bytes)), ranges)
}

/// A `node:` claim as the index holds it. Whether it is live is not the index's to say: that
/// is how long this clone has watched it (`lease`), which no cache can hold.
#[derive(Debug, Clone)]
pub struct ClaimRow {
    text: Arc<Text>,
    task: Range<usize>,
    pub oid: ObjectId,
    holder: Range<usize>,
    /// The holder's `expires_at` (by its clock, so it decides nothing); the epoch marks a
    /// tombstone.
    expires_at: DateTime<Utc>,
    json: Range<usize>,
}

impl ClaimRow {
    /// The task the claim is on.
    pub fn task_id(&self) -> &str {
        as_str(&self.text.bytes()[self.task.clone()])
    }

    pub fn holder(&self) -> &str {
        as_str(&self.text.bytes()[self.holder.clone()])
    }

    /// A tombstone: the claim was released, nobody holds it.
    pub fn is_released(&self) -> bool {
        self.expires_at == DateTime::<Utc>::UNIX_EPOCH
    }

    /// The full claim.
    pub fn held(&self) -> Result<Held> {
        let key: ClaimKey = format!("node:{}", self.task_id()).parse()?;
        Ok(Held { record: claim::parse(&key, &self.text.bytes()[self.json.clone()])?, oid: self.oid })
    }

    fn fresh(key: &ClaimKey, held: &Held) -> Result<ClaimRow> {
        let json = serde_json::to_string(&held.record)?;
        let (text, ranges) = owned(&[key.name(), &clean(&held.record.holder), &json]);
        // A released claim holds nothing: it is marked by an expiry at the epoch.
        let expires_at = if held.record.is_released() { DateTime::<Utc>::UNIX_EPOCH } else { held.record.expires_at };
        Ok(ClaimRow {
            text,
            task: ranges[0].clone(),
            oid: held.oid,
            holder: ranges[1].clone(),
            expires_at,
            json: ranges[2].clone(),
        })
    }
}

/// Every task and node claim, and the refs that could not be read: (ref name, problem).
#[derive(Clone)]
pub struct Loaded {
    pub tasks: Vec<Row>,
    pub claims: Vec<ClaimRow>,
    pub corrupt: Vec<(String, String)>,
}

/// Read every task and node claim, through the cache.
pub fn load(store: &Store) -> Result<Loaded> {
    let layout = super::layout::Layout::of(store.repo.common_dir());
    let stamp = stamp(store.repo.common_dir());
    store.fresh_refs();
    let cached = Mapped::open(&layout.index()).and_then(|m| parse(Arc::new(Text::Map(m)))).unwrap_or_default();
    if stamp.is_some() && cached.stamp == stamp {
        return Ok(Loaded { tasks: cached.tasks, claims: cached.claims, corrupt: cached.corrupt });
    }
    let by_task: HashMap<(&str, ObjectId), &Row> = cached.tasks.iter().map(|r| ((r.id(), r.tip), r)).collect();
    let by_claim: HashMap<(&str, ObjectId), &ClaimRow> =
        cached.claims.iter().map(|c| ((c.task_id(), c.oid), c)).collect();
    // The tips whose histories were checked: a new tip's check stops at its task's old one.
    let checked: HashMap<&str, ObjectId> = cached.tasks.iter().map(|r| (r.id(), r.tip)).collect();
    let mut loaded = Loaded { tasks: Vec::new(), claims: Vec::new(), corrupt: Vec::new() };
    let mut changed = false;
    for entry in task::list_refs(store)? {
        let tip = match entry.tip {
            Ok(tip) => tip,
            Err(problem) => {
                note_corrupt(&mut loaded.corrupt, entry.name, problem);
                continue;
            }
        };
        let Some(id) = refs::task_id_of(&entry.name) else {
            loaded.corrupt.push((entry.name.clone(), format!("'{}' is not a task ref", entry.name)));
            continue;
        };
        if let Some(row) = by_task.get(&(id, tip)) {
            loaded.tasks.push((*row).clone());
            continue;
        }
        changed = true;
        match read_row(store, &entry.name, tip, checked.get(id).copied()) {
            Ok(row) => loaded.tasks.push(row),
            Err(err) => loaded.corrupt.push((entry.name, problem_of(&err))),
        }
    }
    for listed in claim_refs(store)? {
        match listed {
            Listed::Corrupt { name, problem } => note_corrupt(&mut loaded.corrupt, name, problem),
            Listed::Ref { name, key, oid } => {
                if let Some(row) = by_claim.get(&(key.name(), oid)) {
                    loaded.claims.push((*row).clone());
                    continue;
                }
                changed = true;
                match claim::read_at(store, &key, oid) {
                    // A tombstone is cached like a claim that expired at its release.
                    Ok(held) => loaded.claims.push(ClaimRow::fresh(&key, &held)?),
                    Err(refusal) => loaded.corrupt.push((name, refusal.message)),
                }
            }
        }
    }
    if changed
        || cached.stamp != stamp
        || cached.tasks.len() != loaded.tasks.len()
        || cached.claims.len() != loaded.claims.len()
    {
        // Best effort: a cache that cannot be written only costs speed.
        let _ = write(&layout, stamp.as_deref(), &loaded);
    }
    Ok(loaded)
}

/// The tasks and node claims kept current in a long-running process (a walk): after the first
/// full load, each load re-reads only the refs its watch names as changed (see `watch`).
#[derive(Default)]
pub struct Live {
    /// Tasks sorted by id, claims by task id.
    loaded: Option<Loaded>,
    /// Rows read since the rows were last all in a mapped file: each holds its own text on the
    /// heap until `compact` writes them out.
    fresh: usize,
}

/// Compact once this many rows were read fresh, or an eighth of all rows if more: a walk over
/// a large backlog then holds at most about that many rows on its heap, and writes the cache
/// file about once per that many units.
const COMPACT_AFTER: usize = 256;

impl Live {
    /// Every task and node claim, as `load` gives them.
    pub fn load(&mut self, store: &Store, watch: &mut Watch) -> Result<&Loaded> {
        store.fresh_refs();
        let tasks = watch.changes(refs::TASKS);
        let claims = watch.changes(CLAIM_PREFIX);
        let loaded = match (self.loaded.take(), tasks, claims) {
            (Some(mut loaded), Changes::Names(tasks), Changes::Names(claims)) => {
                for name in &tasks {
                    self.fresh += refresh_task(store, &mut loaded, name)?;
                }
                for name in &claims {
                    self.fresh += refresh_claim(store, &mut loaded, name)?;
                }
                if self.fresh > COMPACT_AFTER.max((loaded.tasks.len() + loaded.claims.len()) / 8) {
                    self.fresh = 0;
                    // Best effort, like every write of the cache: it only costs memory.
                    if let Some(compacted) = compact(store, &loaded) {
                        loaded = compacted;
                    }
                }
                loaded
            }
            _ => {
                self.fresh = 0;
                let mut loaded = load(store)?;
                loaded.tasks.sort_unstable_by(|a, b| a.id().cmp(b.id()));
                loaded.claims.sort_unstable_by(|a, b| a.task_id().cmp(b.task_id()));
                loaded
            }
        };
        Ok(self.loaded.insert(loaded))
    }
}

const CLAIM_PREFIX: &str = "refs/loop/claims/node/";

/// Bring one task ref's row up to date (added, changed, deleted or unreadable); 1 if a row
/// was read fresh, else 0.
fn refresh_task(store: &Store, loaded: &mut Loaded, name: &str) -> Result<usize> {
    loaded.corrupt.retain(|(n, _)| n != name);
    let Some(id) = refs::task_id_of(name) else {
        loaded.corrupt.push((name.to_owned(), format!("'{name}' is not a task ref")));
        return Ok(0);
    };
    let at = loaded.tasks.binary_search_by(|r| r.id().cmp(id));
    let tip = match task::tip_of(store, name) {
        Ok(tip) => tip,
        Err(err) => {
            put(&mut loaded.tasks, at, None);
            loaded.corrupt.push((name.to_owned(), problem_of(&err)));
            return Ok(0);
        }
    };
    let row = match tip {
        None => None,
        Some(tip) if at.is_ok_and(|at| loaded.tasks[at].tip == tip) => return Ok(0),
        Some(tip) => match read_row(store, name, tip, at.ok().map(|at| loaded.tasks[at].tip)) {
            Ok(row) => Some(row),
            Err(err) => {
                loaded.corrupt.push((name.to_owned(), problem_of(&err)));
                None
            }
        },
    };
    let fresh = usize::from(row.is_some());
    put(&mut loaded.tasks, at, row);
    Ok(fresh)
}

/// Bring one node claim ref's row up to date; 1 if a row was read fresh, else 0.
fn refresh_claim(store: &Store, loaded: &mut Loaded, name: &str) -> Result<usize> {
    loaded.corrupt.retain(|(n, _)| n != name);
    let Some(key) = refs::claim_key_of(name) else {
        loaded.corrupt.push((name.to_owned(), format!("claim ref '{name}' is not a valid claim")));
        return Ok(0);
    };
    let at = loaded.claims.binary_search_by(|c| c.task_id().cmp(key.name()));
    let oid = match crate::git::find_ref(&store.repo, name) {
        Ok(None) => None,
        Ok(Some(crate::git::Found::Direct(oid))) => Some(oid),
        Ok(Some(crate::git::Found::Symbolic(to))) => {
            put(&mut loaded.claims, at, None);
            loaded.corrupt.push((name.to_owned(), claim::corrupt_claim(&key, claim::symbolic(&to)).message));
            return Ok(0);
        }
        Err(_) => {
            put(&mut loaded.claims, at, None);
            loaded.corrupt.push((name.to_owned(), claim::corrupt_claim(&key, "the ref file cannot be parsed").message));
            return Ok(0);
        }
    };
    let row = match oid {
        None => None,
        Some(oid) if at.is_ok_and(|at| loaded.claims[at].oid == oid) => return Ok(0),
        Some(oid) => match claim::read_at(store, &key, oid) {
            Ok(held) => Some(ClaimRow::fresh(&key, &held)?),
            Err(refusal) => {
                loaded.corrupt.push((name.to_owned(), refusal.message));
                None
            }
        },
    };
    let fresh = usize::from(row.is_some());
    put(&mut loaded.claims, at, row);
    Ok(fresh)
}

/// The row of task ref `name` at `tip`, once its history is checked down to `checked` (the
/// tip it had when last checked, if any).
fn read_row(store: &Store, name: &str, tip: ObjectId, checked: Option<ObjectId>) -> Result<Row> {
    let task = task::read_at(store, name, tip)?;
    task::check_history(&store.repo, name, tip, checked)?;
    Row::fresh(tip, &task)
}

/// Put `row` where a binary search found its place (`at`), or remove what is there.
fn put<T>(rows: &mut Vec<T>, at: std::result::Result<usize, usize>, row: Option<T>) {
    match (at, row) {
        (Ok(at), Some(row)) => rows[at] = row,
        (Ok(at), None) => {
            rows.remove(at);
        }
        (Err(at), Some(row)) => rows.insert(at, row),
        (Err(_), None) => {}
    }
}

/// Note a record that cannot be read, once: a bad line of packed-refs is met by the task and
/// the claim listings alike.
fn note_corrupt(corrupt: &mut Vec<(String, String)>, name: String, problem: String) {
    if !corrupt.iter().any(|(n, p)| *n == name && *p == problem) {
        corrupt.push((name, problem));
    }
}

fn problem_of(err: &anyhow::Error) -> String {
    crate::error::find_refusal(err).map_or_else(|| format!("{err:#}"), |r| r.message.clone())
}

enum Listed {
    Ref { name: String, key: ClaimKey, oid: ObjectId },
    Corrupt { name: String, problem: String },
}

/// The `node:` claim refs and what they point to, without reading the records.
fn claim_refs(store: &Store) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    for listed in crate::git::refs_prefixed(&store.repo, CLAIM_PREFIX)? {
        use crate::git::{Found, Listed as L, Unreadable};
        out.push(match listed {
            L::Ref { name, target } => match (refs::claim_key_of(&name), target) {
                (Some(key), Found::Direct(oid)) => Listed::Ref { name, key, oid },
                (Some(key), Found::Symbolic(to)) => {
                    Listed::Corrupt { problem: claim::corrupt_claim(&key, claim::symbolic(&to)).message, name }
                }
                (None, _) => Listed::Corrupt { problem: format!("claim ref '{name}' is not a valid claim"), name },
            },
            L::Unreadable(Unreadable::Ref(name)) => {
                let problem = match refs::claim_key_of(&name) {
                    Some(key) => claim::corrupt_claim(&key, "the ref file cannot be parsed").message,
                    None => format!("claim ref '{name}' cannot be parsed"),
                };
                Listed::Corrupt { name, problem }
            }
            L::Unreadable(Unreadable::PackedRefs(line)) => Listed::Corrupt {
                name: crate::git::packed::NAME.to_owned(),
                problem: line.describe(&crate::git::packed::path(&store.repo)),
            },
        });
    }
    Ok(out)
}

/// The stamp of the ref storage the index depends on; `None` when it is racy (a part changed
/// less than a second ago) or cannot be read.
fn stamp(common: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let now = SystemTime::now();
    let part = |path: &Path, whole_file: bool| -> Option<String> {
        match std::fs::metadata(path) {
            Ok(meta) => {
                let modified = meta.modified().ok()?;
                if now.duration_since(modified).map_or(true, |age| age < Duration::from_secs(1)) {
                    return None;
                }
                let ns = modified.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_nanos();
                Some(if whole_file {
                    format!("{}:{}:{ns}", meta.ino(), meta.size())
                } else {
                    format!("{}:{ns}", meta.ino())
                })
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some("-".into()),
            Err(_) => None,
        }
    };
    Some(format!(
        "{} {} {}",
        part(&common.join("packed-refs"), true)?,
        part(&common.join("refs/loop/tasks"), false)?,
        part(&common.join("refs/loop/claims/node"), false)?
    ))
}

#[derive(Default)]
struct Cache {
    stamp: Option<String>,
    tasks: Vec<Row>,
    claims: Vec<ClaimRow>,
    corrupt: Vec<(String, String)>,
}

enum Entry {
    Task(Row),
    Claim(ClaimRow),
    Corrupt(String, String),
}

fn parse(text: Arc<Text>) -> Option<Cache> {
    let bytes = text.bytes();
    let line = |from: usize| -> Option<(&str, usize)> {
        let end = bytes[from..].iter().position(|b| *b == b'\n')? + from;
        Some((std::str::from_utf8(&bytes[from..end]).ok()?, end + 1))
    };
    let (first, next) = line(0)?;
    let stamp = first.strip_prefix("stamp ")?;
    let mut cache = Cache { stamp: (stamp != "racy").then(|| stamp.to_owned()), ..Default::default() };
    let (second, rows_start) = line(next)?;
    let rows_end = rows_start + second.strip_prefix("rows ")?.parse::<usize>().ok()?;
    // The rows are checked once here; every field is a slice of them (see `as_str`).
    std::str::from_utf8(bytes.get(rows_start..rows_end)?).ok()?;
    let records = rows_end;
    let mut start = rows_start;
    while start < rows_end {
        let end = bytes[start..rows_end].iter().position(|b| *b == b'\n').map_or(rows_end, |p| start + p);
        // A line we cannot read: distrust the whole file.
        match parse_line(&text, start..end, records)? {
            Entry::Task(row) => cache.tasks.push(row),
            Entry::Claim(row) => cache.claims.push(row),
            Entry::Corrupt(name, problem) => cache.corrupt.push((name, problem)),
        }
        start = end + 1;
    }
    Some(cache)
}

/// Parse the row at `line` of `text`; record offsets count from `records`.
fn parse_line(text: &Arc<Text>, line: Range<usize>, records: usize) -> Option<Entry> {
    let all = text.bytes();
    let bytes = &all[line.clone()];
    let mut fields: [Range<usize>; 10] = Default::default();
    let mut count = 0;
    let mut at = 0;
    loop {
        if count == fields.len() {
            return None;
        }
        match bytes[at..].iter().position(|b| *b == b'\t') {
            Some(p) => {
                fields[count] = line.start + at..line.start + at + p;
                count += 1;
                at += p + 1;
            }
            None => {
                fields[count] = line.start + at..line.end;
                count += 1;
                break;
            }
        }
    }
    let field = |i: usize| as_str(&all[fields[i].clone()]);
    let nanos = |s: &str| s.parse::<i64>().ok().map(DateTime::<Utc>::from_timestamp_nanos);
    let oid = |s: &str| ObjectId::from_hex(s.as_bytes()).ok();
    let record = |offset: &str, len: &str| -> Option<Range<usize>> {
        let start = records + offset.parse::<usize>().ok()?;
        let end = start + len.parse::<usize>().ok()?;
        (end <= all.len()).then_some(start..end)
    };
    Some(match (field(0), count) {
        ("T", 10) => Entry::Task(Row {
            text: Arc::clone(text),
            id: fields[1].clone(),
            tip: oid(field(2))?,
            state: State::parse(field(3))?,
            priority: field(4).parse().ok()?,
            created_at: nanos(field(5))?,
            after: fields[6].clone(),
            labels: fields[7].clone(),
            json: record(field(8), field(9))?,
        }),
        ("C", 7) => Entry::Claim(ClaimRow {
            text: Arc::clone(text),
            task: fields[1].clone(),
            oid: oid(field(2))?,
            holder: fields[3].clone(),
            expires_at: nanos(field(4))?,
            json: record(field(5), field(6))?,
        }),
        ("X", 3) => Entry::Corrupt(field(1).to_owned(), String::from_utf8_lossy(&all[fields[2].clone()]).into_owned()),
        _ => return None,
    })
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n'], " ")
}

/// `loaded` with every row's text in one mapped file instead of on the heap: the cache file,
/// written with a racy stamp (`loaded` is as current as the walk's watch, which is not a
/// stamp's promise), so that other readers use its rows by tip but still list the refs.
/// `None` if the file could not be written or read back.
fn compact(store: &Store, loaded: &Loaded) -> Option<Loaded> {
    let layout = super::layout::Layout::of(store.repo.common_dir());
    let written = write_aside(&layout, None, loaded).ok()?;
    // Map the file written before it is published: another process may replace it at once.
    let mapped = Mapped::open(&written);
    if std::fs::rename(&written, layout.index()).is_err() {
        let _ = std::fs::remove_file(&written);
    }
    let cache = parse(Arc::new(Text::Map(mapped?)))?;
    // The file holds `loaded`'s rows in its order; anything else is a bug, not worth a walk.
    let same = cache.tasks.len() == loaded.tasks.len()
        && cache.claims.len() == loaded.claims.len()
        && cache.tasks.iter().zip(&loaded.tasks).all(|(a, b)| a.tip == b.tip && a.id() == b.id())
        && cache.claims.iter().zip(&loaded.claims).all(|(a, b)| a.oid == b.oid && a.task_id() == b.task_id());
    same.then(|| Loaded { tasks: cache.tasks, claims: cache.claims, corrupt: loaded.corrupt.clone() })
}

fn write(layout: &super::layout::Layout, stamp: Option<&str>, loaded: &Loaded) -> Result<()> {
    let aside = write_aside(layout, stamp, loaded)?;
    std::fs::rename(&aside, layout.index()).inspect_err(|_| {
        let _ = std::fs::remove_file(&aside);
    })?;
    Ok(())
}

/// Write the cache file for `loaded` beside its place, and say where.
fn write_aside(layout: &super::layout::Layout, stamp: Option<&str>, loaded: &Loaded) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(layout.root())?;
    let path = layout.index();
    // Only the rows are built in memory (their length heads the file); the records are
    // written straight from the rows' texts, in the order their offsets were counted.
    let mut rows = Vec::with_capacity(loaded.tasks.len() * 120);
    let mut at = 0;
    let mut record = |json: &Range<usize>| -> (usize, usize) {
        let (start, len) = (at, json.len());
        at += len;
        (start, len)
    };
    for row in &loaded.tasks {
        let bytes = row.text.bytes();
        let (at, len) = record(&row.json);
        write!(
            rows,
            "T\t{}\t{}\t{}\t{}\t{}\t",
            row.id(),
            row.tip,
            row.state.as_str(),
            row.priority,
            row.created_at.timestamp_nanos_opt().unwrap_or(0)
        )?;
        rows.extend_from_slice(&bytes[row.after.clone()]);
        rows.push(b'\t');
        rows.extend_from_slice(&bytes[row.labels.clone()]);
        writeln!(rows, "\t{at}\t{len}")?;
    }
    for c in &loaded.claims {
        let bytes = c.text.bytes();
        let (at, len) = record(&c.json);
        write!(rows, "C\t{}\t{}\t", c.task_id(), c.oid)?;
        rows.extend_from_slice(&bytes[c.holder.clone()]);
        writeln!(rows, "\t{}\t{at}\t{len}", c.expires_at.timestamp_nanos_opt().unwrap_or(0))?;
    }
    for (name, problem) in &loaded.corrupt {
        writeln!(rows, "X\t{}\t{}", clean(name), clean(problem))?;
    }
    let aside = path.with_extension(format!("tmp-{}", random_base32(6)));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::io::BufWriter::with_capacity(64 * 1024, std::fs::File::create(&aside)?);
        write!(file, "stamp {}\nrows {}\n", stamp.unwrap_or("racy"), rows.len())?;
        file.write_all(&rows)?;
        let texts =
            loaded.tasks.iter().map(|r| (&r.text, &r.json)).chain(loaded.claims.iter().map(|c| (&c.text, &c.json)));
        for (text, json) in texts {
            file.write_all(&text.bytes()[json.clone()])?;
        }
        file.flush()
    })();
    if let Err(err) = written {
        let _ = std::fs::remove_file(&aside);
        return Err(err.into());
    }
    Ok(aside)
}
