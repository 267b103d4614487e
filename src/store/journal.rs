//! The journal: an append-only, mergeable event log.
//!
//! Each writer (an agent session, a loop process, or a shard of the commands run by hand in
//! one clone) appends to its own chain `refs/loop/journal/<writer>`, so appends never contend
//! across writers. An event is one commit over the empty tree whose message is a readable
//! subject line, a blank line, and the event as one line of JSON, so `git log` on a journal
//! ref reads as a timeline too. The global timeline is the union of every chain, ordered
//! causally: by (Lamport clock, writer, sequence number, commit id), where each event's clock
//! is one more than the highest this clone had seen (`lamport`), so an event written after
//! seeing another sorts after it whatever the machines' wall clocks say; times are shown, never
//! ordered by. Events written before clocks existed have none: they come first, ordered among
//! themselves as they always were, by (time, writer, sequence number). Chains only ever grow,
//! so merging two clones' journals is taking the union of commits, and nothing is lost or
//! duplicated whatever order clones sync in. A session's termination is found by reading its
//! own short chain.

use std::collections::{BTreeMap, HashSet, VecDeque};

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::cas::{self, Cas, Expect};
use super::layout::Layout;
use super::watch::{Changes, Watch};
use super::Store;
use crate::context::Context;
use crate::error::usage;
use crate::git;
use crate::ids::WriterId;
use crate::refs;

/// Version of an event record; readers skip (and report) newer ones.
pub const EVENT_VERSION: u32 = 1;

/// One event, as stored in the commit message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub version: u32,
    pub kind: String,
    /// When it was written, by the writer's clock: for reading only (clocks disagree).
    pub at: DateTime<Utc>,
    pub writer: String,
    /// Position in its writer's chain, from 1.
    pub seq: u64,
    /// The writer's Lamport clock (see `lamport`); absent on events written before clocks
    /// existed. Added to version 1: earlier readers ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lamport: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub by: String,
    #[serde(default)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// An event with the id of the commit that holds it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: ObjectId,
    pub event: Event,
}

impl Entry {
    /// Where the event stands in the timeline: events without a clock first, by time as
    /// before; then by clock. Writer, sequence and commit id make the order total (the same in
    /// every clone).
    #[allow(clippy::type_complexity)]
    pub fn order(&self) -> (Option<u64>, Option<DateTime<Utc>>, &str, u64, ObjectId) {
        let e = &self.event;
        (e.lamport, e.lamport.is_none().then_some(e.at), e.writer.as_str(), e.seq, self.id)
    }
}

/// What a caller appends; the store fills in time, writer, sequence and identity.
#[derive(Debug, Clone, Default)]
pub struct NewEvent {
    pub kind: String,
    pub task: Option<String>,
    pub session: Option<String>,
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// Check an event kind: lowercase letters, digits and `_`, starting with a letter.
pub fn check_kind(kind: &str) -> Result<(), crate::error::Refusal> {
    let ok = !kind.is_empty()
        && kind.len() <= 64
        && kind.starts_with(|c: char| c.is_ascii_lowercase())
        && kind.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(usage(format!("event kind '{}' is not valid", kind.escape_debug()))
            .hint("use lowercase letters, digits and '_', such as 'termination' or 'note'"))
    }
}

/// How many chains' tips a store handle remembers between appends (see `append`).
const REMEMBERED_CHAINS: usize = 64;

/// Append `new` to `writer`'s chain.
pub fn append(store: &Store, ctx: &Context, writer: &WriterId, new: NewEvent) -> Result<Entry> {
    Ok(append_all(store, ctx, writer, vec![new])?.pop().expect("one event appended"))
}

/// Append the events of `new`, in order, to `writer`'s chain: one commit each, and one move of
/// the chain's ref for them all.
pub fn append_all(store: &Store, ctx: &Context, writer: &WriterId, new: Vec<NewEvent>) -> Result<Vec<Entry>> {
    for event in &new {
        check_kind(&event.kind)?;
    }
    if new.is_empty() {
        return Ok(Vec::new());
    }
    let name = refs::journal(writer);
    let empty = git::empty_tree(&store.repo)?;
    let by = store.identity.to_string();
    let remembered = store.journal_tips.lock().unwrap_or_else(|e| e.into_inner()).remove(&name);
    let mut last = remembered.map(|(tip, seq, lamport)| (Some(tip), seq, lamport));
    cas::until_settled(&format!("journal '{name}'"), ctx.pid, || {
        // `live`: what the ref holds, which the append is leased on.
        let (tip, live, first_seq, after) = match last.take() {
            Some((tip, seq, lamport)) => (tip, tip, seq + 1, lamport),
            None => {
                let live = git::ref_target(&store.repo, &name)?;
                // A chain folded into the archive goes on from its archived tip (its ref
                // written anew), so its events stay one chain.
                let tip = match live {
                    Some(tip) => Some(tip),
                    None => super::archive::lookup(&store.repo, &name)?,
                };
                let (seq, lamport) = match tip {
                    Some(tip) => (next_seq(store, tip), tip_lamport(&store.repo, tip).unwrap_or(0)),
                    None => (1, 0),
                };
                (tip, live, seq, lamport)
            }
        };
        let mut entries = Vec::with_capacity(new.len());
        let (mut parent, mut lamport) = (tip, after);
        for (i, one) in new.iter().enumerate() {
            // Above the chain's last event too, should the clone's counter have been lost.
            lamport = super::lamport::tick(store, lamport)?;
            let at = ctx.now();
            let event = Event {
                version: EVENT_VERSION,
                kind: one.kind.clone(),
                at,
                writer: writer.to_string(),
                seq: first_seq + i as u64,
                lamport: Some(lamport),
                task: one.task.clone(),
                session: one.session.clone(),
                by: by.clone(),
                data: one.data.clone(),
            };
            let message = format_message(&event)?;
            let parents: Vec<ObjectId> = parent.into_iter().collect();
            let commit = git::write_commit(&store.repo, empty, &parents, &message, &store.identity.signature(at))?;
            parent = Some(commit);
            entries.push(Entry { id: commit, event });
        }
        let commit = parent.expect("at least one event");
        let seq = first_seq + new.len() as u64 - 1;
        // Lost: the chain moved since this process last wrote it, or another process of the
        // same writer appended first; read it again.
        Ok(match cas::update(store, &name, Expect::from_current(live), commit, "loop: journal")? {
            Cas::Applied => {
                let mut tips = store.journal_tips.lock().unwrap_or_else(|e| e.into_inner());
                // A walk appends to a new session's chain every unit: remember the few
                // chains in use, not every chain ever written (a forgotten one is read again).
                if tips.len() >= REMEMBERED_CHAINS {
                    tips.clear();
                }
                tips.insert(name.clone(), (commit, seq, lamport));
                Some(entries)
            }
            Cas::Lost { .. } => None,
        })
    })
}

fn format_message(event: &Event) -> Result<String> {
    let mut subject = event.kind.clone();
    if let Some(task) = &event.task {
        subject.push(' ');
        subject.push_str(task);
    }
    if let Some(summary) = summary(event) {
        subject.push_str(": ");
        subject.push_str(&summary);
    }
    Ok(format!("{subject}\n\n{}\n", serde_json::to_string(event)?))
}

/// A short human summary of an event's data, for subjects and listings.
pub fn summary(event: &Event) -> Option<String> {
    let text = ["message", "summary", "verdict", "reason", "outcome"]
        .iter()
        .find_map(|k| event.data.get(*k).and_then(|v| v.as_str()))?;
    let line = text.lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(72).collect();
    if line.chars().count() > 72 {
        out.push('…');
    }
    Some(out)
}

/// Parse the event held by journal commit `id`.
pub fn parse_commit(store: &Store, id: ObjectId) -> Result<Entry> {
    let (parents, message) = git::read_commit(&store.repo, id)?;
    match decode_commit(&message, parents.len()) {
        Ok(Some(event)) => Ok(Entry { id, event }),
        Ok(None) => anyhow::bail!("journal commit {id} is a merge; it holds no event"),
        Err(why) => anyhow::bail!("journal commit {id}: {why}"),
    }
}

/// Decode a journal commit from its message and its number of parents: an event (a subject,
/// a blank line, the event's JSON, of a known version), or the merge of two copies of a chain
/// (two parents or more, no event: `None`). `Err` says what is wrong. The one definition of a
/// readable journal commit (the server's pre-receive hook uses it too).
pub fn decode_commit(message: &str, parents: usize) -> Result<Option<Event>, String> {
    let json = message.split_once("\n\n").map(|(_, rest)| rest.trim());
    match json.map(serde_json::from_str::<Event>) {
        Some(Ok(event)) if event.version <= EVENT_VERSION => Ok(Some(event)),
        Some(Ok(event)) => Err(format!("its event has version {}, written by a newer git-loop", event.version)),
        _ if parents > 1 => Ok(None),
        Some(Err(err)) => Err(format!("its event is not valid: {err}")),
        None => Err("it holds no event (its message has no JSON after a blank line)".into()),
    }
}

/// Every event of one chain (including chains merged into it), oldest first.
pub fn read_chain(store: &Store, tip: ObjectId, problems: &mut Vec<String>) -> Vec<Entry> {
    let repo = &store.repo;
    let mut cache = Cache::default();
    let mut out = Vec::new();
    walk(repo, tip, &mut cache, &mut HashSet::new(), problems, &mut |id, info| {
        if let Some(event) = info.event() {
            out.push(Entry { id, event });
        }
    });
    out.sort_by_key(|e| e.event.seq);
    out
}

/// What the journal cache knows of one commit. Commits never change, so neither does this.
#[derive(Debug, Clone)]
struct Info {
    parents: Vec<ObjectId>,
    task: Option<String>,
    session: Option<String>,
    /// The event's JSON (`None` for a merge of two copies of a chain).
    json: Option<String>,
}

/// A journal commit that holds no readable event: why, and its parents when the commit itself
/// could be read (the events below it are read on).
#[derive(Debug)]
struct Unreadable {
    problem: String,
    parents: Vec<ObjectId>,
}

impl Info {
    fn event(&self) -> Option<Event> {
        serde_json::from_str::<Event>(self.json.as_deref()?).ok().filter(|e| e.version <= EVENT_VERSION)
    }

    fn read(repo: &gix::Repository, id: ObjectId) -> Result<Info, Unreadable> {
        let (parents, message) = git::read_commit(repo, id).map_err(|err| Unreadable {
            problem: format!("journal commit {id} cannot be read: {err:#}"),
            parents: Vec::new(),
        })?;
        match decode_commit(&message, parents.len()) {
            Ok(Some(event)) => {
                let json = message.split_once("\n\n").map(|(_, rest)| rest.trim().to_owned());
                Ok(Info { parents, task: event.task, session: event.session, json })
            }
            Ok(None) => Ok(Info { parents, task: None, session: None, json: None }),
            Err(why) => Err(Unreadable { problem: format!("journal commit {id}: {why}"), parents }),
        }
    }
}

/// `.git/loop/journal-v1`: one line per journal commit seen,
/// `<commit>\t<parent,…>\t<task or ->\t<session or ->\t<event JSON, or -> `. Keyed by commit id,
/// so an entry never goes stale; lines are appended whole; an unreadable line is ignored.
/// Reading the journal then costs one file read instead of one object per event.
#[derive(Default)]
struct Cache {
    known: std::collections::HashMap<ObjectId, Info>,
    fresh: Vec<(ObjectId, Info)>,
}

impl Cache {
    fn load(repo: &gix::Repository) -> Cache {
        let text = std::fs::read_to_string(Layout::of(repo.common_dir()).journal_cache()).unwrap_or_default();
        let mut known = std::collections::HashMap::new();
        let opt = |s: &str| (s != "-").then(|| s.to_owned());
        for line in text.lines() {
            let fields: Vec<&str> = line.splitn(5, '\t').collect();
            let [id, parents, task, session, json] = fields.as_slice() else { continue };
            let Ok(id) = ObjectId::from_hex(id.as_bytes()) else { continue };
            let Ok(parents) = parents
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| ObjectId::from_hex(p.as_bytes()))
                .collect::<Result<Vec<_>, _>>()
            else {
                continue;
            };
            known.insert(id, Info { parents, task: opt(task), session: opt(session), json: opt(json) });
        }
        Cache { known, fresh: Vec::new() }
    }

    fn get(&mut self, repo: &gix::Repository, id: ObjectId) -> Result<Info, Unreadable> {
        if let Some(info) = self.known.get(&id) {
            return Ok(info.clone());
        }
        let info = Info::read(repo, id)?;
        self.known.insert(id, info.clone());
        self.fresh.push((id, info.clone()));
        Ok(info)
    }

    /// Append what was read from objects this time (best effort: it is only a cache).
    fn save(self, repo: &gix::Repository) {
        use std::io::Write as _;
        if self.fresh.is_empty() {
            return;
        }
        let layout = Layout::of(repo.common_dir());
        let mut out = String::new();
        for (id, info) in &self.fresh {
            let parents: Vec<String> = info.parents.iter().map(ToString::to_string).collect();
            let field = |v: &Option<String>| v.as_deref().map_or("-".to_owned(), |s| s.replace(['\t', '\n'], " "));
            out.push_str(&format!(
                "{id}\t{}\t{}\t{}\t{}\n",
                parents.join(","),
                field(&info.task),
                field(&info.session),
                info.json.as_deref().unwrap_or("-")
            ));
        }
        let _ = std::fs::create_dir_all(layout.root());
        if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(layout.journal_cache()) {
            // One write of whole lines: concurrent appenders do not interleave within it.
            let _ = file.write_all(out.as_bytes());
        }
    }
}

/// Visit every commit reachable from `tip` once.
fn walk(
    repo: &gix::Repository,
    tip: ObjectId,
    cache: &mut Cache,
    seen: &mut HashSet<ObjectId>,
    problems: &mut Vec<String>,
    visit: &mut dyn FnMut(ObjectId, &Info),
) {
    let mut queue = VecDeque::new();
    if seen.insert(tip) {
        queue.push_back(tip);
    }
    while let Some(id) = queue.pop_front() {
        let parents = match cache.get(repo, id) {
            Ok(info) => {
                visit(id, &info);
                info.parents
            }
            Err(unreadable) => {
                problems.push(unreadable.problem);
                unreadable.parents
            }
        };
        for parent in &parents {
            if seen.insert(*parent) {
                queue.push_back(*parent);
            }
        }
    }
}

/// The `seq` of the next event on the chain at `tip`: one above the last event readable on its
/// first-parent line, counting the commits above it (an unreadable tip or a merge of two
/// copies), so that a chain's numbers never repeat.
fn next_seq(store: &Store, tip: ObjectId) -> u64 {
    let mut at = Some(tip);
    let mut above = 0;
    while let Some(id) = at {
        if let Ok(entry) = parse_commit(store, id) {
            return entry.event.seq + above + 1;
        }
        above += 1;
        at = git::read_commit(&store.repo, id).ok().and_then(|(parents, _)| parents.first().copied());
    }
    above + 1
}

/// The highest Lamport clock on a chain whose tip is `tip`: its last event's, or the highest
/// of the last events a merge joined. `None` when no clock is found (events written before
/// clocks existed, or unreadable commits).
pub fn tip_lamport(repo: &gix::Repository, tip: ObjectId) -> Option<u64> {
    let mut queue = VecDeque::from([tip]);
    let mut seen = HashSet::from([tip]);
    let mut highest = None;
    // Clocks only grow along a chain, so the first event on each path back is its highest;
    // only merges (two copies of one chain, joined) are walked through.
    while let Some(id) = queue.pop_front() {
        match Info::read(repo, id) {
            Ok(info) => match info.event() {
                Some(event) => highest = highest.max(event.lamport),
                None => queue.extend(info.parents.into_iter().filter(|p| seen.insert(*p))),
            },
            // Below a record that holds no event, the clocks read on.
            Err(unreadable) => queue.extend(unreadable.parents.into_iter().filter(|p| seen.insert(*p))),
        }
    }
    highest
}

/// The journal refs: (writer ref name, tip).
pub fn chains(repo: &gix::Repository) -> Result<Vec<(String, ObjectId)>> {
    let mut out = Vec::new();
    // An unreadable or symbolic ref is no chain (`doctor` reports it).
    for listed in git::refs_prefixed(repo, refs::JOURNAL).context("could not list journal refs")? {
        if let git::Listed::Ref { name, target: git::Found::Direct(id) } = listed {
            out.push((name, id));
        }
    }
    // Folded chains (`store::archive`), where no live ref shadows them.
    let archived = super::archive::under(repo, refs::JOURNAL)?;
    if !archived.is_empty() {
        let live: HashSet<String> = out.iter().map(|(n, _)| n.clone()).collect();
        out.extend(archived.into_iter().filter(|(n, _)| !live.contains(n)));
    }
    Ok(out)
}

/// One task's events, as `timeline` gives them, with the chains a long-running process keeps
/// current (see `LiveChains`) instead of listing every journal ref.
pub fn task_timeline(store: &Store, task: &str, live: &mut LiveChains, watch: &mut Watch) -> Result<Timeline> {
    store.fresh_refs();
    live.refresh(&store.repo, watch)?;
    let LiveChains { tips, indexed } = live;
    by_task::timeline(store, task, tips.as_ref().expect("refreshed just now"), indexed)
}

/// The journal's chains and their tips, kept current through a watch: after the first full
/// listing only the chains the watch names are read again. With them, what the task index
/// (`by_task`) last said it covers. A walk asks for a task's history four times a unit, and
/// each session adds a chain: nothing here is copied or read again per chain, so a step costs
/// the same at the 10,000th unit as at the first (copying every chain's name per read made a
/// long walk's memory creep up with its sessions).
#[derive(Default)]
pub struct LiveChains {
    tips: Option<BTreeMap<String, ObjectId>>,
    indexed: by_task::Indexed,
}

impl LiveChains {
    /// Bring the tips up to date.
    fn refresh(&mut self, repo: &gix::Repository, watch: &mut Watch) -> Result<&BTreeMap<String, ObjectId>> {
        let tips = match (self.tips.take(), watch.changes(refs::JOURNAL)) {
            (Some(mut tips), Changes::Names(names)) => {
                for name in names {
                    // As `chains`: an unreadable or symbolic ref is no chain.
                    match git::ref_target(repo, &name) {
                        Ok(Some(tip)) => tips.insert(name, tip),
                        _ => tips.remove(&name),
                    };
                }
                tips
            }
            _ => chains(repo)?.into_iter().collect(),
        };
        Ok(self.tips.insert(tips))
    }
}

/// Which events a timeline read keeps.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub task: Option<String>,
    pub session: Option<String>,
}

/// The merged timeline of every chain, in causal order (see `Entry::order`), and any records
/// that could not be read (reported, never fatal).
pub struct Timeline {
    pub entries: Vec<Entry>,
    pub problems: Vec<String>,
}

pub fn timeline(store: &Store, filter: &Filter) -> Result<Timeline> {
    if let (Some(task), None) = (&filter.task, &filter.session) {
        let tips = chains(&store.repo)?.into_iter().collect();
        return by_task::timeline(store, task, &tips, &mut by_task::Indexed::default());
    }
    let repo = &store.repo;
    let mut problems = Vec::new();
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    let mut cache = Cache::load(repo);
    for (_, tip) in chains(repo)? {
        walk(repo, tip, &mut cache, &mut seen, &mut problems, &mut |id, info| {
            // Filter before parsing: most reads want one task's or one session's events.
            let wanted = filter.task.as_ref().is_none_or(|t| info.task.as_ref() == Some(t))
                && filter.session.as_ref().is_none_or(|s| info.session.as_ref() == Some(s));
            if wanted {
                if let Some(event) = info.event() {
                    entries.push(Entry { id, event });
                }
            }
        });
    }
    cache.save(repo);
    // The commit id breaks the last ties (two copies of one writer's chain, merged).
    entries.sort_by(|a, b| a.order().cmp(&b.order()));
    Ok(Timeline { entries, problems })
}

/// Every `session_ended` event of every chain, as JSON, from the task index's directory
/// (`by_task` keeps them in `.sessions-ended` as it keeps a task's events): the cost ledger,
/// read without walking the journal.
pub fn sessions_ended(store: &Store) -> Result<Vec<(ObjectId, String)>> {
    let tips = chains(&store.repo)?.into_iter().collect();
    Ok(by_task::lines(store, by_task::SESSIONS, &tips, &mut by_task::Indexed::default())?.0)
}

/// One task's events without reading the whole journal: what the walk asks before every
/// dispatch (an unfinished try, a race to take up again, a hand-back note, try numbers).
///
/// `.git/loop/journal-tasks/<task>` holds, per task, the events of that task as lines
/// `<commit>\t<event JSON>`; `journal-tasks/tips` says up to which tip each chain was indexed
/// (`<ref>\t<tip>`). A read walks only the commits added to each chain since (a few, between
/// two dispatches), appends their events to their tasks' files, and then reads one small file.
/// Appends are whole lines in one write; the tips file is replaced by rename after the events
/// it covers were appended. A stale or lost tips file only makes a read walk again; events
/// met twice are appended twice and read once (by commit id). Deleting the directory loses
/// nothing: the next read indexes every chain again.
mod by_task {
    use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
    use std::io::Write as _;

    use anyhow::Result;
    use gix::ObjectId;

    use super::{Entry, Info, Timeline};
    use crate::store::Store;

    const TIPS: &str = "tips";
    /// Every chain's `session_ended` events, whatever their task: the cost ledger's index
    /// (no task id starts with a dot).
    pub const SESSIONS: &str = ".sessions-ended";

    /// The tips file as this process last read or wrote it: read again only once another
    /// process replaced it (a new file: another inode, or another size or time).
    #[derive(Default)]
    pub struct Indexed {
        stamp: Option<(u64, u64, std::time::SystemTime)>,
        tips: HashMap<String, ObjectId>,
    }

    impl Indexed {
        fn stamp(path: &std::path::Path) -> Option<(u64, u64, std::time::SystemTime)> {
            use std::os::unix::fs::MetadataExt as _;
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.ino(), meta.len(), meta.modified().ok()?))
        }

        /// What the tips file at `path` says now.
        fn current(&mut self, path: &std::path::Path) -> &HashMap<String, ObjectId> {
            let stamp = Indexed::stamp(path);
            if stamp.is_none() || stamp != self.stamp {
                self.tips = read_tips(path);
                self.stamp = stamp;
            }
            &self.tips
        }
    }

    /// `tips`: every chain and its tip, as `chains` lists them.
    pub fn timeline(
        store: &Store,
        task: &str,
        tips: &BTreeMap<String, ObjectId>,
        indexed: &mut Indexed,
    ) -> Result<Timeline> {
        let mut entries = Vec::new();
        let (lines, problems) = lines(store, task, tips, indexed)?;
        for (id, json) in lines {
            let info = Info { parents: Vec::new(), task: None, session: None, json: Some(json) };
            if let Some(event) = info.event() {
                entries.push(Entry { id, event });
            }
        }
        entries.sort_by(|a, b| a.order().cmp(&b.order()));
        Ok(Timeline { entries, problems })
    }

    /// Events as (commit, JSON).
    pub type Lines = Vec<(ObjectId, String)>;

    /// The index file `name`'s events (a task's, or `SESSIONS`), brought up to date: each
    /// commit's event JSON once, unparsed, in the file's order; and the commits that could not
    /// be read while indexing.
    pub fn lines(
        store: &Store,
        name: &str,
        tips: &BTreeMap<String, ObjectId>,
        indexed: &mut Indexed,
    ) -> Result<(Lines, Vec<String>)> {
        let repo = &store.repo;
        let dir = super::Layout::of(repo.common_dir()).journal_tasks();
        let mut problems = Vec::new();
        catch_up(repo, &dir, tips, indexed, &mut problems)?;
        let text = if name.parse::<crate::ids::TaskId>().is_ok() || name == SESSIONS {
            std::fs::read_to_string(dir.join(name)).unwrap_or_default()
        } else {
            String::new()
        };
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for line in text.lines() {
            let Some((id, json)) = line.split_once('\t') else { continue };
            let Ok(id) = ObjectId::from_hex(id.as_bytes()) else { continue };
            if seen.insert(id) {
                out.push((id, json.to_owned()));
            }
        }
        Ok((out, problems))
    }

    /// Index what every chain gained since it was last indexed.
    fn catch_up(
        repo: &gix::Repository,
        dir: &std::path::Path,
        tips: &BTreeMap<String, ObjectId>,
        cache: &mut Indexed,
        problems: &mut Vec<String>,
    ) -> Result<()> {
        // An index written before it kept `session_ended` events is made again once (its
        // tasks' lines met twice are read once).
        let none = HashMap::new();
        let indexed = if dir.join(SESSIONS).exists() { cache.current(&dir.join(TIPS)) } else { &none };
        if tips.iter().all(|(name, tip)| indexed.get(name) == Some(tip)) {
            return Ok(());
        }
        let mut lines: HashMap<String, String> = HashMap::new();
        for (name, tip) in tips {
            let stop = indexed.get(name);
            if stop == Some(tip) {
                continue;
            }
            let mut queue = VecDeque::from([*tip]);
            let mut seen = HashSet::from([*tip]);
            while let Some(id) = queue.pop_front() {
                if Some(&id) == stop {
                    continue;
                }
                let parents = match Info::read(repo, id) {
                    Ok(info) => {
                        if let (Some(task), Some(json)) = (&info.task, &info.json) {
                            if task.parse::<crate::ids::TaskId>().is_ok() {
                                lines.entry(task.clone()).or_default().push_str(&format!("{id}\t{json}\n"));
                            }
                        }
                        if let Some(json) = info.json.as_ref().filter(|j| j.contains("\"session_ended\"")) {
                            lines.entry(SESSIONS.to_owned()).or_default().push_str(&format!("{id}\t{json}\n"));
                        }
                        info.parents
                    }
                    Err(unreadable) => {
                        problems.push(unreadable.problem);
                        unreadable.parents
                    }
                };
                for parent in parents {
                    if seen.insert(parent) {
                        queue.push_back(parent);
                    }
                }
            }
        }
        std::fs::create_dir_all(dir)?;
        lines.entry(SESSIONS.to_owned()).or_default();
        for (task, text) in lines {
            let mut file = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(task))?;
            // One write of whole lines: concurrent appenders do not interleave within it.
            file.write_all(text.as_bytes())?;
        }
        let mut text = String::with_capacity(tips.len() * 64);
        for (name, tip) in tips {
            use std::fmt::Write as _;
            let _ = writeln!(text, "{name}\t{tip}");
        }
        let tmp = dir.join(format!("{TIPS}.{}.{}", std::process::id(), crate::ids::random_base32(8)));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join(TIPS))?;
        // What the file says now, without reading it back: only the chains that moved change.
        cache.tips.retain(|name, _| tips.contains_key(name));
        for (name, tip) in tips {
            if cache.tips.get(name) != Some(tip) {
                cache.tips.insert(name.clone(), *tip);
            }
        }
        cache.stamp = Indexed::stamp(&dir.join(TIPS));
        Ok(())
    }

    fn read_tips(path: &std::path::Path) -> HashMap<String, ObjectId> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let (name, tip) = l.split_once('\t')?;
                Some((name.to_owned(), ObjectId::from_hex(tip.as_bytes()).ok()?))
            })
            .collect()
    }
}

/// The termination event a session journaled (with `git loop finish`), read from the
/// session's own short chain.
pub fn find_termination(store: &Store, session: &WriterId) -> Result<Option<Entry>> {
    let Some(tip) = git::ref_target(&store.repo, &refs::journal(session))? else {
        return Ok(None);
    };
    let mut problems = Vec::new();
    Ok(read_chain(store, tip, &mut problems)
        .into_iter()
        .rev()
        .find(|e| e.event.kind == "termination" && e.event.session.as_deref() == Some(session.to_string().as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u8, at: &str, writer: &str, seq: u64, lamport: Option<u64>) -> Entry {
        let event = Event {
            version: EVENT_VERSION,
            kind: "note".into(),
            at: at.parse().expect("a time"),
            writer: writer.into(),
            seq,
            lamport,
            task: None,
            session: None,
            by: "t <t@t>".into(),
            data: Default::default(),
        };
        Entry { id: ObjectId::from_bytes_or_panic(&[id; 20]), event }
    }

    /// The timeline's order: events written before clocks existed first, by time as before;
    /// then by clock, whatever the writers' wall clocks said (an event written after seeing
    /// another has the higher clock, though its writer's clock is an hour slow).
    #[test]
    fn events_are_ordered_by_clock_after_the_clockless_ones_by_time() {
        let mut entries = [
            entry(1, "2026-03-01T11:00:00Z", "c-slow-0", 1, Some(3)),
            entry(2, "2026-03-01T13:00:00Z", "c-fast-0", 1, Some(2)),
            entry(3, "2026-03-01T12:00:00Z", "c-norm-0", 1, Some(1)),
            entry(4, "2026-02-01T12:00:00Z", "c-old-0", 2, None),
            entry(5, "2026-02-01T11:00:00Z", "c-old-1", 7, None),
            entry(6, "2026-03-01T10:00:00Z", "c-norm-0", 2, Some(3)),
        ];
        entries.sort_by(|a, b| a.order().cmp(&b.order()));
        let ids: Vec<u8> = entries.iter().map(|e| e.id.as_bytes()[0]).collect();
        assert_eq!(ids, [5, 4, 3, 2, 6, 1], "old by time; then by clock, then writer");
    }

    #[test]
    fn a_lost_counter_starts_again_above_the_refs() {
        let (_dir, store) = crate::store::scratch();
        let ctx = Context::for_tests();
        let writer: crate::ids::WriterId = "c-test".parse().expect("writer");
        for _ in 0..3 {
            append(&store, &ctx, &writer, NewEvent { kind: "note".into(), ..Default::default() }).expect("append");
        }
        std::fs::remove_file(store.layout().expect("dir").lamport()).expect("lose the counter");
        assert_eq!(crate::store::lamport::tick(&store, 0).expect("tick"), 4, "above the chain's last event (3)");
    }
}
