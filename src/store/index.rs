//! A derived cache of tasks and task claims, so `next` over thousands of tasks reads one file
//! instead of three objects per task and one per claim.
//!
//! Two files, each stamped on its own: `.git/loop/index-v6` for the task refs and
//! `.git/loop/claims-v1` for the `node:` claim refs, so that a claim taken, refreshed or
//! released (what a fleet does most) neither lists a hundred thousand task refs again nor
//! rewrites the large file. Both have one layout: a stamp line, the ready set (empty in the
//! claims' file), then one line per ref (tab-separated; no field can hold a tab or a newline):
//!
//! ```text
//! stamp <packed-refs ino:size:mtime> <the refs' directory ino:mtime>   (or "stamp racy")
//! ready <offset,…>        the open tasks whose dependencies are all done (`ready`), in `next`'s order: where their T rows start, counted from the first row
//! rows <length in bytes of the rows that follow> <length in bytes of the T rows, which come first>
//! T <task id> <tip> <state> <priority> <created, unix ns> <after,…> <label␟…> <parent> <epic: 1 or 0> <json offset> <json length>
//! C <task id> <claim blob> <holder> <holder's expiry, unix ns; 0: released> <json offset> <json length>
//! X <ref> <problem>
//! <every record's JSON, back to back; offsets count from the start of this section>
//! ```
//!
//! Task rows are sorted by id (a file whose are not is not trusted). The records come last so
//! that reading the rows touches only the small part of the file; a record's page is read only
//! when that task is shown. The ready set is derived from the rows (see `ready`): `next` reads
//! its first rows, and the rows of the tasks they come after (a binary search of the sorted
//! rows), instead of parsing every row and checking every task's dependencies (`front`).
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
//! The stamp lets a reader skip listing the refs at all: any ref change renames a file in the
//! refs' directory or replaces packed-refs, which changes the stamp. File times tick
//! coarsely (every few milliseconds), so a stamp taken while any of them is less than a second
//! old is "racy": the cache is written but not trusted without listing the refs, as git treats
//! racily clean index entries. The stamp is always taken before the refs are read.
//! (Version 4 had no ready set, and one file and stamp for both: hence version 5. Version 5
//! had no parent or epic mark, which the task graph reads for every task: hence version 6.)
//!
//! A walk keeps the rows and the ready set current through its watch (`Live`); each row it
//! reads again holds its own text on the heap, so every few hundred of them it writes the
//! files again (racy stamp: its rows are as current as its watch, which is no stamp's promise)
//! and maps them, and its memory stays flat however many units it works.
//!
//! A file is mapped, not read, and rows are ranges into it: parsing ten thousand rows then
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
use super::ready::{Before, Dependents, Ready};
use super::task::{self, State, Task};
use super::watch::{Changes, Watch};
use super::Store;
use crate::ids::{random_base32, ClaimKey, Priority};
use crate::refs;

/// What a cache file holds, for `doctor` to hold against the refs: the tip each task row
/// was checked at, and the refs it lists as unreadable.
pub struct Cached {
    pub tasks: Vec<(String, ObjectId)>,
    pub corrupt: Vec<String>,
}

/// The cache files there are (the tasks' and the claims'), each with its content, `None` when
/// it cannot be parsed (readers then ignore it and rebuild it).
pub fn cached(store: &Store) -> Vec<(std::path::PathBuf, Option<Cached>)> {
    let layout = super::layout::Layout::of(store.common_dir());
    [layout.index(), layout.claims_index()]
        .into_iter()
        .filter(|path| path.exists())
        .map(|path| {
            let cache = Mapped::open(&path).and_then(|m| parse(Arc::new(Text::Map(m))));
            let cached = cache.map(|c| Cached {
                tasks: c.tasks.iter().map(|r| (r.id().to_owned(), r.tip)).collect(),
                corrupt: c.corrupt.into_iter().map(|(name, _)| name).collect(),
            });
            (path, cached)
        })
        .collect()
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
    /// Empty: no parent.
    parent: Range<usize>,
    /// An epic: never handed out (`ready`).
    pub epic: bool,
    json: Range<usize>,
}

/// What a listing shows of a task besides its row: `Row::title`.
#[derive(Debug, serde::Deserialize)]
struct Brief {
    title: String,
}

/// Where the title's value starts in a record as the index writes it,
/// `{"version":N,"id":"<id>","title":…` (the order `Task` serializes in); `None` for any other.
fn title_at(json: &[u8], id: &str) -> Option<usize> {
    let rest = json.strip_prefix(b"{\"version\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let rest = rest[digits..].strip_prefix(b",\"id\":\"")?;
    let rest = rest.strip_prefix(id.as_bytes())?;
    let rest = rest.strip_prefix(b"\",\"title\":")?;
    Some(json.len() - rest.len())
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

    /// The task this one is part of.
    pub fn parent(&self) -> Option<&str> {
        Some(as_str(&self.text.bytes()[self.parent.clone()])).filter(|p| !p.is_empty())
    }

    pub fn has_label(&self, label: &str) -> bool {
        as_str(&self.text.bytes()[self.labels.clone()]).split('\u{1f}').any(|l| l == label)
    }

    /// Its labels, as the row keeps them.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        as_str(&self.text.bytes()[self.labels.clone()]).split('\u{1f}').filter(|l| !l.is_empty())
    }

    /// Its title alone, read from its record without building the whole task (what a listing of
    /// a hundred thousand tasks shows of each): the one string read where the index's records
    /// hold it (`title_at`), else the record parsed for it.
    pub fn title(&self) -> Result<String> {
        let json = &self.text.bytes()[self.json.clone()];
        if let Some(at) = title_at(json, self.id()) {
            if let Some(Ok(title)) = serde_json::Deserializer::from_slice(&json[at..]).into_iter::<String>().next() {
                return Ok(title);
            }
        }
        serde_json::from_slice::<Brief>(json)
            .map(|b| b.title)
            .map_err(|err| task::corrupt_task(&format!("{}{}", refs::TASKS, self.id()), err).into())
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
        let parent = task.parent.as_deref().map(clean).unwrap_or_default();
        let (text, ranges) = owned(&[&task.id, &task.after.join(","), &labels.join("\u{1f}"), &parent, &json]);
        Ok(Row {
            text,
            id: ranges[0].clone(),
            tip,
            state: task.state,
            priority: task.priority,
            created_at: task.created_at,
            after: ranges[1].clone(),
            labels: ranges[2].clone(),
            parent: ranges[3].clone(),
            epic: task.epic,
            json: ranges[4].clone(),
        })
    }
}

impl super::ready::Entry for Row {
    fn id(&self) -> &str {
        Row::id(self)
    }
    fn state(&self) -> State {
        self.state
    }
    fn priority(&self) -> Priority {
        self.priority
    }
    fn created_at(&self) -> DateTime<Utc> {
        self.created_at
    }
    fn after(&self) -> impl Iterator<Item = &str> {
        Row::after(self)
    }
    fn is_epic(&self) -> bool {
        self.epic
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
        Ok(Held {
            record: claim::parse(&key, &self.text.bytes()[self.json.clone()])?,
            oid: self.oid,
            watched: self.oid,
        })
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

/// Every task (sorted by id) and node claim (sorted by task id), the ready set of those tasks,
/// and the refs that could not be read: (ref name, problem). The tasks and the ready set are
/// shared, so that a walk handing out its board each step copies neither.
#[derive(Clone)]
pub struct Loaded {
    pub tasks: Arc<Vec<Row>>,
    pub claims: Vec<ClaimRow>,
    pub corrupt: Vec<(String, String)>,
    pub ready: Arc<Ready>,
}

/// Read every task and node claim, through the cache files: the tasks' (`index-v6`) and the
/// claims' (`claims-v1`), each stamped on its own, so that the claims changing (a claim taken,
/// refreshed or released: what a fleet does most) neither lists the task refs again nor
/// rewrites the large file.
pub fn load(store: &Store) -> Result<Loaded> {
    let layout = super::layout::Layout::of(store.repo.common_dir());
    let common = store.repo.common_dir();
    // Both stamps before any listing (see the module's comment).
    let (task_stamp, claim_stamp) = (stamp(common, refs::TASKS), stamp(common, CLAIM_PREFIX));
    store.fresh_refs();
    let (tasks, ready, mut corrupt) = load_tasks(store, &layout.index(), task_stamp)?;
    let (claims, claims_corrupt) = load_claims(store, &layout.claims_index(), claim_stamp)?;
    for (name, problem) in claims_corrupt {
        note_corrupt(&mut corrupt, name, problem);
    }
    Ok(Loaded { tasks: Arc::new(tasks), claims, corrupt, ready: Arc::new(ready) })
}

/// How many ready tasks beyond the live claims `load_front` reads: a walk tries the first 64.
const FRONT: usize = 64;

/// The first ready tasks (and the tasks they come after), with every node claim, as `next`
/// needs them, read without parsing every task row (see `front`): the first `FRONT` ready tasks
/// more than there are live claims, so that at least `FRONT` of them are not claimed if that
/// many are ready. `None` when the tasks' cache file is not current: then `load` reads it all.
pub fn load_front(store: &Store) -> Result<Option<Loaded>> {
    let layout = super::layout::Layout::of(store.repo.common_dir());
    let common = store.repo.common_dir();
    let (task_stamp, claim_stamp) = (stamp(common, refs::TASKS), stamp(common, CLAIM_PREFIX));
    store.fresh_refs();
    let (claims, claims_corrupt) = load_claims(store, &layout.claims_index(), claim_stamp)?;
    let live = claims.iter().filter(|c| !c.is_released()).count();
    let Some((tasks, mut corrupt)) = front(&layout.index(), task_stamp.as_deref(), FRONT + live) else {
        return Ok(None);
    };
    for (name, problem) in claims_corrupt {
        note_corrupt(&mut corrupt, name, problem);
    }
    let ready = Ready::of(&tasks);
    Ok(Some(Loaded { tasks: Arc::new(tasks), claims, corrupt, ready: Arc::new(ready) }))
}

/// The cache file at `path`, if there is one that parses.
fn open_cache(path: &Path) -> Cache {
    Mapped::open(path).and_then(|m| parse(Arc::new(Text::Map(m)))).unwrap_or_default()
}

type Corrupt = Vec<(String, String)>;

/// Every task (sorted by id), their ready set, and the task refs that cannot be read.
fn load_tasks(store: &Store, path: &Path, stamp: Option<String>) -> Result<(Vec<Row>, Ready, Corrupt)> {
    let cached = open_cache(path);
    if stamp.is_some() && cached.stamp == stamp {
        return Ok((cached.tasks, cached.ready, cached.corrupt));
    }
    let by_task: HashMap<(&str, ObjectId), &Row> = cached.tasks.iter().map(|r| ((r.id(), r.tip), r)).collect();
    // The tips whose histories were checked: a new tip's check stops at its task's old one.
    let checked: HashMap<&str, ObjectId> = cached.tasks.iter().map(|r| (r.id(), r.tip)).collect();
    let mut tasks = Vec::with_capacity(cached.tasks.len());
    let mut corrupt = Vec::new();
    let mut changed = false;
    // The archive whose folded tasks' records a task never read here is built from.
    let archive = crate::git::ref_target(&store.repo, super::archive::REF).ok().flatten();
    for entry in task::list_refs(store)? {
        let tip = match entry.tip {
            Ok(tip) => tip,
            Err(problem) => {
                note_corrupt(&mut corrupt, entry.name, problem);
                continue;
            }
        };
        let Some(id) = refs::task_id_of(&entry.name) else {
            corrupt.push((entry.name.clone(), format!("'{}' is not a task ref", entry.name)));
            continue;
        };
        if let Some(row) = by_task.get(&(id, tip)) {
            tasks.push((*row).clone());
            continue;
        }
        changed = true;
        // Folded, and never read here: its record as the archive holds it (`archive::snapshot`).
        if let (false, Some(archive)) = (checked.contains_key(id), archive) {
            if let Ok(Some(json)) = super::archive::snapshot(&store.repo, archive, id, tip) {
                if let Ok(row) = task::parse_task(&entry.name, json.as_bytes()).and_then(|t| Row::fresh(tip, &t)) {
                    tasks.push(row);
                    continue;
                }
            }
        }
        match read_row(store, &entry.name, tip, checked.get(id).copied()) {
            Ok(row) => tasks.push(row),
            Err(err) => corrupt.push((entry.name, problem_of(&err))),
        }
    }
    // Listed in ref order, which is id order; sorted again only if a ref store ever lists
    // otherwise.
    if !tasks.is_sorted_by(|a, b| a.id() < b.id()) {
        tasks.sort_unstable_by(|a, b| a.id().cmp(b.id()));
    }
    // The same rows as the file's (every one found there, as many): its ready set holds.
    let same = !changed && tasks.len() == cached.tasks.len();
    let ready = if same { cached.ready } else { Ready::of(&tasks) };
    if !same || cached.stamp != stamp || cached.corrupt != corrupt {
        // Best effort: a cache that cannot be written only costs speed.
        let _ =
            write(path, stamp.as_deref(), &Content { tasks: &tasks, claims: &[], corrupt: &corrupt, ready: &ready });
    }
    Ok((tasks, ready, corrupt))
}

/// Every node claim (sorted by task id), and the claim refs that cannot be read.
fn load_claims(store: &Store, path: &Path, stamp: Option<String>) -> Result<(Vec<ClaimRow>, Corrupt)> {
    let cached = open_cache(path);
    if stamp.is_some() && cached.stamp == stamp {
        return Ok((cached.claims, cached.corrupt));
    }
    let by_claim: HashMap<(&str, ObjectId), &ClaimRow> =
        cached.claims.iter().map(|c| ((c.task_id(), c.oid), c)).collect();
    let mut claims = Vec::with_capacity(cached.claims.len());
    let mut corrupt = Vec::new();
    let mut changed = false;
    for listed in claim_refs(store)? {
        match listed {
            Listed::Corrupt { name, problem } => note_corrupt(&mut corrupt, name, problem),
            Listed::Ref { name, key, oid } => {
                if let Some(row) = by_claim.get(&(key.name(), oid)) {
                    claims.push((*row).clone());
                    continue;
                }
                changed = true;
                match claim::read_at(store, &key, oid) {
                    // A tombstone is cached like a claim that expired at its release.
                    Ok(held) => claims.push(ClaimRow::fresh(&key, &held)?),
                    Err(refusal) => corrupt.push((name, refusal.message)),
                }
            }
        }
    }
    claims.sort_unstable_by(|a, b| a.task_id().cmp(b.task_id()));
    if changed || cached.stamp != stamp || cached.claims.len() != claims.len() || cached.corrupt != corrupt {
        let ready = Ready::default();
        let _ =
            write(path, stamp.as_deref(), &Content { tasks: &[], claims: &claims, corrupt: &corrupt, ready: &ready });
    }
    Ok((claims, corrupt))
}

/// Enter tasks this process has just created, each as its first operation at `tip`, into the
/// cache file (best effort, like every write of it): their histories are the commits just
/// written, so there is nothing to check, and the first reader after an import of a hundred
/// thousand tasks then finds every row instead of reading every task back. The file is written
/// with a racy stamp: its rows are used by tip, and the next reader still lists the refs.
pub fn add_created(store: &Store, created: impl Iterator<Item = (ObjectId, Task)>) {
    let path = super::layout::Layout::of(store.repo.common_dir()).index();
    // Best effort: a cache not written only costs the first reader its time.
    let _ = (|| -> Result<()> {
        let cached = open_cache(&path);
        let mut tasks = created.map(|(tip, task)| Row::fresh(tip, &task)).collect::<Result<Vec<Row>>>()?;
        tasks.extend(cached.tasks);
        // Stable, so of one id twice the new row (first) is the one kept.
        tasks.sort_by(|a, b| a.id().cmp(b.id()));
        tasks.dedup_by(|later, first| later.id() == first.id());
        let ready = Ready::of(&tasks);
        write(&path, None, &Content { tasks: &tasks, claims: &[], corrupt: &cached.corrupt, ready: &ready })
    })();
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
    /// Which tasks wait for which, built at the first change: what keeps the ready set current.
    dependents: Option<Dependents>,
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
                if !tasks.is_empty() {
                    let dependents = self.dependents.get_or_insert_with(|| Dependents::of(&loaded.tasks));
                    for name in &tasks {
                        self.fresh += refresh_task(store, &mut loaded, dependents, name)?;
                    }
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
                let loaded = load(store)?;
                // Built with the rows (once a walk, not at its first change), so that a step
                // after the first costs what any other does.
                self.dependents = Some(Dependents::of(&loaded.tasks));
                loaded
            }
        };
        Ok(self.loaded.insert(loaded))
    }
}

const CLAIM_PREFIX: &str = "refs/loop/claims/node/";

/// Bring one task ref's row up to date (added, changed, deleted or unreadable), and the ready
/// set with it; 1 if a row was read fresh, else 0.
fn refresh_task(store: &Store, loaded: &mut Loaded, dependents: &mut Dependents, name: &str) -> Result<usize> {
    loaded.corrupt.retain(|(n, _)| n != name);
    let Some(id) = refs::task_id_of(name) else {
        loaded.corrupt.push((name.to_owned(), format!("'{name}' is not a task ref")));
        return Ok(0);
    };
    let at = loaded.tasks.binary_search_by(|r| r.id().cmp(id));
    let row = match task::tip_of(store, name) {
        Ok(None) => None,
        Ok(Some(tip)) if at.is_ok_and(|at| loaded.tasks[at].tip == tip) => return Ok(0),
        Ok(Some(tip)) => match read_row(store, name, tip, at.ok().map(|at| loaded.tasks[at].tip)) {
            Ok(row) => Some(row),
            Err(err) => {
                loaded.corrupt.push((name.to_owned(), problem_of(&err)));
                None
            }
        },
        Err(err) => {
            loaded.corrupt.push((name.to_owned(), problem_of(&err)));
            None
        }
    };
    let fresh = usize::from(row.is_some());
    let before = at.ok().map(|at| Before::of(&loaded.tasks[at]));
    if before.is_none() && row.is_none() {
        return Ok(0);
    }
    put(Arc::make_mut(&mut loaded.tasks), at, row);
    Arc::make_mut(&mut loaded.ready).changed(&loaded.tasks, dependents, id, before);
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

/// The stamp of the ref storage under `prefix` (`packed-refs` and the prefix's directory of
/// loose refs); `None` when it is racy (a part changed less than a second ago) or cannot be
/// read.
fn stamp(common: &Path, prefix: &str) -> Option<String> {
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
        "{} {}",
        part(&common.join("packed-refs"), true)?,
        part(&common.join(prefix.trim_end_matches('/')), false)?
    ))
}

#[derive(Default)]
struct Cache {
    stamp: Option<String>,
    tasks: Vec<Row>,
    claims: Vec<ClaimRow>,
    corrupt: Vec<(String, String)>,
    ready: Ready,
}

enum Entry {
    Task(Row),
    Claim(ClaimRow),
    Corrupt(String, String),
}

/// A cache file's first three lines, and where its rows are.
struct Head {
    stamp: Option<String>,
    /// The ready set: where each ready task's row starts (from the first row), in `next`'s
    /// order.
    ready: Vec<usize>,
    /// All rows, and the task rows (which come first), as byte ranges of the file.
    rows: Range<usize>,
    task_rows: Range<usize>,
}

fn parse_head(bytes: &[u8]) -> Option<Head> {
    let line = |from: usize| -> Option<(&str, usize)> {
        let end = memchr::memchr(b'\n', bytes.get(from..)?)? + from;
        Some((std::str::from_utf8(&bytes[from..end]).ok()?, end + 1))
    };
    let (first, next) = line(0)?;
    let stamp = first.strip_prefix("stamp ")?;
    let (ready, next) = line(next)?;
    let ready = ready.strip_prefix("ready ")?;
    let (rows, start) = line(next)?;
    let mut numbers = rows.strip_prefix("rows ")?.split(' ').map(|n| n.parse::<usize>().ok());
    let (length, tasks_length) = (numbers.next()??, numbers.next()??);
    let (end, tasks_end) = (start.checked_add(length)?, start.checked_add(tasks_length)?);
    if numbers.next().is_some() || end > bytes.len() || tasks_end > end {
        return None;
    }
    Some(Head {
        stamp: (stamp != "racy").then(|| stamp.to_owned()),
        ready: ready.split(',').filter(|p| !p.is_empty()).map(|p| p.parse().ok()).collect::<Option<_>>()?,
        rows: start..end,
        task_rows: start..tasks_end,
    })
}

fn parse(text: Arc<Text>) -> Option<Cache> {
    let bytes = text.bytes();
    let head = parse_head(bytes)?;
    let mut cache = Cache { stamp: head.stamp, ..Default::default() };
    let (rows_start, rows_end) = (head.rows.start, head.rows.end);
    // The rows are checked once here; every field is a slice of them (see `as_str`).
    std::str::from_utf8(&bytes[head.rows.clone()]).ok()?;
    // Where each task row starts, to find the ready set's rows by. A task row is at least 60
    // bytes long, so this reserves enough and not much more.
    let mut starts = Vec::with_capacity(head.task_rows.len() / 60);
    cache.tasks.reserve_exact(head.task_rows.len() / 60);
    let mut start = rows_start;
    while start < rows_end {
        let end = memchr::memchr(b'\n', &bytes[start..rows_end]).map_or(rows_end, |p| start + p);
        // A line we cannot read: distrust the whole file.
        match parse_line(&text, start..end, rows_end)? {
            // Out of order (or twice), or out of its place: not a file this writer wrote.
            Entry::Task(row) if cache.tasks.last().is_some_and(|last| last.id() >= row.id()) => return None,
            Entry::Task(_) if end >= head.task_rows.end => return None,
            Entry::Task(row) => {
                starts.push(start - rows_start);
                cache.tasks.push(row)
            }
            Entry::Claim(row) => cache.claims.push(row),
            Entry::Corrupt(name, problem) => cache.corrupt.push((name, problem)),
        }
        start = end + 1;
    }
    let positions = head.ready.iter().map(|at| starts.binary_search(at).unwrap_or(usize::MAX));
    cache.ready = Ready::at_positions(&cache.tasks, positions)?;
    // Read whole, the set is held against its rows: `front` trusts it, so a file whose set
    // does not fit (edited, or written by a broken build) is rebuilt here.
    if cache.ready != Ready::of(&cache.tasks) {
        return None;
    }
    Some(cache)
}

/// The first ready tasks of the tasks' cache file, read without parsing the rest, when the
/// file is current (its stamp holds): the first `ready` rows of its ready set (`next` wants
/// only the first task nobody holds, and a walk's first 64), each with the rows of the tasks
/// it comes after, and the rows it lists as unreadable. `None` when the file is not current or
/// not readable, or nothing in it is ready: then the whole board is read.
fn front(path: &Path, stamp: Option<&str>, ready: usize) -> Option<(Vec<Row>, Corrupt)> {
    let text = Arc::new(Text::Map(Mapped::open(path)?));
    let bytes = text.bytes();
    let head = parse_head(bytes)?;
    if stamp.is_none() || head.stamp.as_deref() != stamp || head.ready.is_empty() {
        return None;
    }
    let records = head.rows.end;
    // The row at `start` (a line start), its text checked as `parse` checks all of it.
    // The row at `start` (a line start), its text checked as `parse` checks all of it, and
    // where its line ends.
    let row_at = |start: usize| -> Option<(Row, usize)> {
        let end = memchr::memchr(b'\n', bytes.get(start..head.task_rows.end)?)? + start;
        std::str::from_utf8(&bytes[start..end]).ok()?;
        match parse_line(&text, start..end, records)? {
            Entry::Task(row) => Some((row, end)),
            _ => None,
        }
    };
    // A task's row by its id: a binary search over the sorted task rows, by bytes.
    let find = |id: &str| -> Option<Row> {
        let (mut low, mut high) = (head.task_rows.start, head.task_rows.end);
        while low < high {
            let middle = low + (high - low) / 2;
            let start = memchr::memrchr(b'\n', &bytes[low..middle]).map_or(low, |p| low + p + 1);
            let end = memchr::memchr(b'\n', &bytes[start..high]).map_or(high, |p| start + p);
            // Only the id is compared on the way ("T", the id, then a tab).
            let line = &bytes[start..end];
            let probe = line.strip_prefix(b"T\t").and_then(|rest| rest.split(|b| *b == b'\t').next())?;
            match probe.cmp(id.as_bytes()) {
                std::cmp::Ordering::Equal => return row_at(start).map(|(row, _)| row),
                std::cmp::Ordering::Less => low = end + 1,
                std::cmp::Ordering::Greater => high = start,
            }
        }
        None
    };
    let mut rows = Vec::new();
    for at in head.ready.iter().take(ready) {
        let (row, _) = row_at(head.rows.start.checked_add(*at)?)?;
        for dep in row.after() {
            // A dependency the file does not hold: the set does not fit its rows.
            rows.push(find(dep)?);
        }
        rows.push(row);
    }
    rows.sort_by(|a, b| a.id().cmp(b.id()));
    rows.dedup_by(|a, b| a.id() == b.id());
    // The rows the file holds as unreadable come after every task's.
    let mut corrupt = Vec::new();
    let rest = head.task_rows.end..head.rows.end;
    std::str::from_utf8(&bytes[rest.clone()]).ok()?;
    for line in bytes[rest.clone()].split(|b| *b == b'\n').scan(rest.start, |at, line| {
        let range = *at..*at + line.len();
        *at += line.len() + 1;
        Some(range)
    }) {
        match parse_line(&text, line.clone(), records) {
            Some(Entry::Corrupt(name, problem)) => corrupt.push((name, problem)),
            _ if line.is_empty() => {}
            _ => return None,
        }
    }
    Some((rows, corrupt))
}

/// Parse the row at `line` of `text`; record offsets count from `records`.
fn parse_line(text: &Arc<Text>, line: Range<usize>, records: usize) -> Option<Entry> {
    let all = text.bytes();
    let bytes = &all[line.clone()];
    let mut fields: [Range<usize>; 12] = Default::default();
    let mut count = 0;
    let mut at = 0;
    for tab in memchr::memchr_iter(b'\t', bytes) {
        if count == fields.len() - 1 {
            return None;
        }
        fields[count] = line.start + at..line.start + tab;
        count += 1;
        at = tab + 1;
    }
    fields[count] = line.start + at..line.end;
    count += 1;
    let field = |i: usize| as_str(&all[fields[i].clone()]);
    let nanos = |s: &str| decimal(s).map(DateTime::<Utc>::from_timestamp_nanos);
    let oid = |s: &str| ObjectId::from_hex(s.as_bytes()).ok();
    let record = |offset: &str, len: &str| -> Option<Range<usize>> {
        let start = records.checked_add(usize::try_from(decimal(offset)?).ok()?)?;
        let end = start.checked_add(usize::try_from(decimal(len)?).ok()?)?;
        (end <= all.len()).then_some(start..end)
    };
    Some(match (field(0), count) {
        ("T", 12) => Entry::Task(Row {
            text: Arc::clone(text),
            id: fields[1].clone(),
            tip: oid(field(2))?,
            state: State::parse(field(3))?,
            // As the writer spells it; anything else through the full parser.
            priority: match field(4) {
                "p0" => Priority::P0,
                "p1" => Priority::P1,
                "p2" => Priority::P2,
                "p3" => Priority::P3,
                other => other.parse().ok()?,
            },
            created_at: nanos(field(5))?,
            after: fields[6].clone(),
            labels: fields[7].clone(),
            parent: fields[8].clone(),
            epic: match field(9) {
                "1" => true,
                "0" => false,
                _ => return None,
            },
            json: record(field(10), field(11))?,
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

/// A decimal integer as the writer writes them (an optional minus, then digits), without
/// `str::parse`'s generality; `None` for anything else or out of range.
fn decimal(s: &str) -> Option<i64> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest.as_bytes()),
        None => (false, s.as_bytes()),
    };
    // Nineteen digits always fit in a u64; more would not fit in an i64 anyway.
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(d - b'0');
    }
    let n = i64::try_from(n).ok()?;
    Some(if negative { -n } else { n })
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n'], " ")
}

/// `loaded` with every row's text in mapped files instead of on the heap: the cache files,
/// written with a racy stamp (`loaded` is as current as the walk's watch, which is not a
/// stamp's promise), so that other readers use their rows by tip but still list the refs.
/// `None` if a file could not be written or read back.
fn compact(store: &Store, loaded: &Loaded) -> Option<Loaded> {
    let layout = super::layout::Layout::of(store.repo.common_dir());
    let (task_corrupt, claim_corrupt): (Corrupt, Corrupt) =
        loaded.corrupt.iter().cloned().partition(|(name, _)| !name.starts_with(CLAIM_PREFIX));
    let tasks = Content { tasks: &loaded.tasks, claims: &[], corrupt: &task_corrupt, ready: &loaded.ready };
    let tasks = rewrite(&layout.index(), &tasks)?;
    let none = Ready::default();
    let claims = rewrite(
        &layout.claims_index(),
        &Content { tasks: &[], claims: &loaded.claims, corrupt: &claim_corrupt, ready: &none },
    )?;
    // The files hold `loaded`'s rows in its order (and so its ready set); anything else is a
    // bug, not worth a walk.
    let same = tasks.tasks.len() == loaded.tasks.len()
        && claims.claims.len() == loaded.claims.len()
        && tasks.tasks.iter().zip(loaded.tasks.iter()).all(|(a, b)| a.tip == b.tip && a.id() == b.id())
        && claims.claims.iter().zip(&loaded.claims).all(|(a, b)| a.oid == b.oid && a.task_id() == b.task_id());
    same.then(|| Loaded {
        tasks: Arc::new(tasks.tasks),
        claims: claims.claims,
        corrupt: loaded.corrupt.clone(),
        ready: Arc::clone(&loaded.ready),
    })
}

/// Write these rows to the cache file at `path` with a racy stamp, and read them back mapped.
fn rewrite(path: &Path, content: &Content<'_>) -> Option<Cache> {
    let written = write_aside(path, None, content).ok()?;
    // Map the file written before it is published: another process may replace it at once.
    let mapped = Mapped::open(&written);
    if std::fs::rename(&written, path).is_err() {
        let _ = std::fs::remove_file(&written);
    }
    parse(Arc::new(Text::Map(mapped?)))
}

/// What a cache file holds: the tasks' file has no claims, the claims' no tasks (and so an
/// empty ready set).
struct Content<'a> {
    tasks: &'a [Row],
    claims: &'a [ClaimRow],
    corrupt: &'a Corrupt,
    ready: &'a Ready,
}

fn write(path: &Path, stamp: Option<&str>, content: &Content<'_>) -> Result<()> {
    let aside = write_aside(path, stamp, content)?;
    std::fs::rename(&aside, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&aside);
    })?;
    Ok(())
}

fn write_aside(path: &Path, stamp: Option<&str>, content: &Content<'_>) -> Result<std::path::PathBuf> {
    let Content { tasks, claims, corrupt, ready } = *content;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Only the rows are built in memory (their length heads the file); the records are
    // written straight from the rows' texts, in the order their offsets were counted.
    let mut rows = Vec::with_capacity(tasks.len() * 120);
    // Where each task row starts: the ready set is written as those offsets.
    let mut starts = Vec::with_capacity(tasks.len());
    let mut at = 0;
    let mut record = |json: &Range<usize>| -> (usize, usize) {
        let (start, len) = (at, json.len());
        at += len;
        (start, len)
    };
    for row in tasks.iter() {
        starts.push(rows.len());
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
        rows.push(b'\t');
        rows.extend_from_slice(&bytes[row.parent.clone()]);
        writeln!(rows, "\t{}\t{at}\t{len}", u8::from(row.epic))?;
    }
    let task_rows = rows.len();
    for c in claims {
        let bytes = c.text.bytes();
        let (at, len) = record(&c.json);
        write!(rows, "C\t{}\t{}\t", c.task_id(), c.oid)?;
        rows.extend_from_slice(&bytes[c.holder.clone()]);
        writeln!(rows, "\t{}\t{at}\t{len}", c.expires_at.timestamp_nanos_opt().unwrap_or(0))?;
    }
    for (name, problem) in corrupt {
        writeln!(rows, "X\t{}\t{}", clean(name), clean(problem))?;
    }
    let aside = path.with_extension(format!("tmp-{}", random_base32(6)));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::io::BufWriter::with_capacity(64 * 1024, std::fs::File::create(&aside)?);
        write!(file, "stamp {}\nready ", stamp.unwrap_or("racy"))?;
        for (i, at) in ready.positions(tasks).into_iter().enumerate() {
            write!(file, "{}{}", if i == 0 { "" } else { "," }, starts[at])?;
        }
        write!(file, "\nrows {} {task_rows}\n", rows.len())?;
        file.write_all(&rows)?;
        let texts = tasks.iter().map(|r| (&r.text, &r.json)).chain(claims.iter().map(|c| (&c.text, &c.json)));
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

#[cfg(test)]
mod tests {
    use super::title_at;

    /// The title is read in place from a record as the index writes it (escapes and all), and
    /// nowhere else: any other shape is parsed whole.
    #[test]
    fn a_title_is_found_only_where_the_index_writes_it() {
        let json = br#"{"version":2,"id":"t-1","title":"say \"hi\" \u00e9","body":"","title2":"x"}"#;
        let at = title_at(json, "t-1").expect("found");
        let title: String =
            serde_json::Deserializer::from_slice(&json[at..]).into_iter::<String>().next().expect("one").expect("read");
        assert_eq!(title, "say \"hi\" é");
        assert_eq!(title_at(json, "t-2"), None, "another task's id");
        assert_eq!(title_at(br#"{"id":"t-1","version":2,"title":"x"}"#, "t-1"), None, "another order");
        assert_eq!(title_at(b"{\n  \"version\": 2,\n  \"id\": \"t-1\"", "t-1"), None, "pretty");
        assert_eq!(title_at(br#"{"version":,"id":"t-1","title":"x"}"#, "t-1"), None);
    }
}
