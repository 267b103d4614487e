//! The records of other repositories' tasks this clone reads (`backlog::foreign`, the
//! dependencies across repositories): fetched into refs of its own, `refs/loop-foreign/<place
//! key>/tasks/<id>`, never pushed, and read from there.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use anyhow::Result;
use gix::ObjectId;

use super::task::{State, Task};
use super::{archive, remote, Store};
use crate::error::{Class, Refusal};
use crate::git;
use crate::ids::TaskId;
use crate::refs;

/// Where the records read from other repositories are kept (this clone's own: never pushed).
pub const MIRRORS: &str = refs::FOREIGN;

/// Whether a dependency names a task of another repository.
pub fn is_foreign(dep: &str) -> bool {
    dep.contains('#')
}

/// A dependency on a task of another repository: where, and the task's id there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dep {
    pub place: String,
    pub id: String,
}

impl Dep {
    /// `<place>#<id>`, if it is one.
    pub fn parse(dep: &str) -> Option<Dep> {
        let (place, id) = dep.rsplit_once('#')?;
        (!place.is_empty() && id.parse::<TaskId>().is_ok()).then(|| Dep { place: place.to_owned(), id: id.to_owned() })
    }

    /// Its mirror ref here.
    fn mirror(&self) -> String {
        format!("{MIRRORS}{}/tasks/{}", key(&self.place), self.id)
    }
}

impl std::fmt::Display for Dep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.place, self.id)
    }
}

/// A place's name in refs: its readable part and a hash of the whole, so two places that read
/// alike keep apart.
fn key(place: &str) -> String {
    let readable: String = place
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c.to_ascii_lowercase() } else { '-' })
        .collect::<String>()
        .trim_matches('-')
        .chars()
        .rev()
        .take(32)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let hash = place.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("{}-{:08x}", readable.trim_matches('-'), hash as u32)
}

/// What this clone last read of each task of another repository: their states by dependency
/// (`<place>#<id>`, as the mirror's place key holds it).
#[derive(Debug, Default, Clone)]
pub struct Read {
    by_mirror: HashMap<String, Task>,
}

impl Read {
    /// Every mirror this clone holds (nothing to read, and no cost beyond one listing, when no
    /// task has such a dependency).
    pub fn load(store: &Store) -> Read {
        let mut by_mirror = HashMap::new();
        for listed in store.refs_prefixed(MIRRORS).unwrap_or_default() {
            let git::Listed::Ref { name, target: git::Found::Direct(tip) } = listed else { continue };
            if let Ok(task) = read_task(&store.repo, &name, tip) {
                by_mirror.insert(name, task);
            }
        }
        Read { by_mirror }
    }

    /// The task `dep` names, as last read (`None`: never read, or found nowhere).
    pub fn task(&self, dep: &str) -> Option<&Task> {
        self.by_mirror.get(&Dep::parse(dep)?.mirror())
    }

    /// Whether `dep`, a dependency on another repository's task, is met: done when last read.
    pub fn done(&self, dep: &str) -> bool {
        self.task(dep).is_some_and(|t| t.state == State::Done)
    }
}

/// The task record at commit `tip` (of a mirror named `name`).
fn read_task(repo: &gix::Repository, name: &str, tip: ObjectId) -> Result<Task> {
    let file = crate::store::task::TASK_FILE;
    match git::read_commit_file_within(repo, tip, file, crate::store::limits::RECORD)? {
        Some(Ok(bytes)) => crate::store::task::decode_task(None, &bytes)
            .map_err(|why| anyhow::anyhow!("the record read into '{name}' cannot be read: {why}")),
        _ => anyhow::bail!("the record read into '{name}' has no {file}"),
    }
}

/// Whether `place` may be fetched from: no whitespace or control characters, no option (`-`),
/// no list separator, and no transport helper (`<helper>::<address>`, such as `ext::`, which
/// runs a command): a place written into a task by any clone of the fleet is fetched from by
/// every clone that syncs.
pub fn valid_place(place: &str) -> bool {
    !place.is_empty()
        && !place.starts_with('-')
        && !place.contains("::")
        && !place.chars().any(|c| c == ',' || c == '#' || c.is_whitespace() || c.is_control())
}

/// How `place` is reached from here: a remote of this clone by name, else a URL or an absolute
/// path, as git takes it.
pub fn is_remote(store: &Store, place: &str) -> bool {
    store.repo.find_remote(place).is_ok()
}

pub fn looks_like_url(place: &str) -> bool {
    place.contains("://") || (place.contains(':') && !place.starts_with('/') && !place.contains(":/"))
}

pub fn unreachable(place: &str, err: anyhow::Error) -> anyhow::Error {
    Refusal::new(Class::Failure, format!("could not read the tasks of '{place}': {err:#}"))
        .hint("check that it is a repository git can fetch from (git ls-remote <it>), then try again")
        .into()
}

/// Fetch the records of tasks `ids` of `place` into their mirrors here: each task's tip, or
/// `None` when the place has no such task (its mirror is dropped). A task folded there is read
/// from its archive.
pub fn fetch(store: &Store, place: &str, ids: &[String]) -> Result<BTreeMap<String, Option<ObjectId>>> {
    if !valid_place(place) {
        return Err(Refusal::new(
            Class::Usage,
            format!("'{}' is not a place to read tasks from", place.escape_debug()),
        )
        .hint("a remote's name, a URL or a path, without spaces, options or a transport helper (<helper>::)")
        .into());
    }
    let timeout = store.settings().transfer_timeout()?;
    let dir = store.workdir();
    let mut prefixes: Vec<String> = ids.iter().map(|id| format!("{}{id}", refs::TASKS)).collect();
    prefixes.push(archive::REF.to_owned());
    let listed =
        crate::git::program::ls_remote(dir, place, &prefixes, timeout).map_err(|err| unreachable(place, err))?;
    let listed: HashMap<&str, ObjectId> = listed.iter().map(|(n, id)| (n.as_str(), *id)).collect();
    let dep = |id: &str| Dep { place: place.to_owned(), id: id.to_owned() };
    let mut refspecs = Vec::new();
    let mut folded = Vec::new();
    for id in ids {
        match listed.get(format!("{}{id}", refs::TASKS).as_str()) {
            Some(_) => refspecs.push(format!("+{}{id}:{}", refs::TASKS, dep(id).mirror())),
            None => folded.push(id.clone()),
        }
    }
    let archive_mirror = format!("{MIRRORS}{}/archive", key(place));
    let with_archive = !folded.is_empty() && listed.contains_key(archive::REF);
    if with_archive {
        refspecs.push(format!("+{}:{archive_mirror}", archive::REF));
    }
    if !refspecs.is_empty() {
        crate::git::program::fetch_refspecs(dir, place, &refspecs, timeout).map_err(|err| unreachable(place, err))?;
    }
    // A handle of its own: the objects just fetched may be in a pack the store's has not seen.
    let repo = gix::open_opts(store.repo.git_dir(), store.repo.open_options().clone())?;
    let archived = match with_archive {
        true => git::ref_target(&repo, &archive_mirror)?.map(|tip| archive::at(&repo, tip)).transpose()?,
        false => None,
    };
    let mut out = BTreeMap::new();
    for id in ids {
        let name = format!("{}{id}", refs::TASKS);
        let tip = match listed.get(name.as_str()) {
            Some(tip) => Some(*tip),
            None => archived.as_ref().and_then(|a| a.refs.get(&name).copied()),
        };
        // A folded task's tip: its mirror points there (the archive's fetch brought it).
        remote::set_local(store, &dep(id).mirror(), tip)?;
        out.insert(id.clone(), tip);
    }
    Ok(out)
}

/// Drop the mirrors no dependency in `wanted` (every open task's, `backlog::foreign::refresh`)
/// reads any more: what this clone keeps of other repositories stays the size of what it waits
/// for, and the board reads no record it does not need.
pub fn prune(store: &Store, wanted: &[Dep]) -> Result<()> {
    let mut keep: HashSet<String> = wanted.iter().map(Dep::mirror).collect();
    keep.extend(wanted.iter().map(|d| format!("{MIRRORS}{}/archive", key(&d.place))));
    for listed in store.refs_prefixed(MIRRORS)? {
        let git::Listed::Ref { name, target: git::Found::Direct(tip) } = listed else { continue };
        if !keep.contains(&name) {
            // Changed meanwhile (a read of it): it is judged again at the next refresh.
            let _ = super::cas::delete(store, &name, tip)?;
        }
    }
    Ok(())
}

/// The task `dep` names as its mirror holds it now (read in a handle of its own: just fetched,
/// it may be in a pack the store's handle has not seen).
pub fn read_mirror(store: &Store, dep: &Dep) -> Result<Option<Task>> {
    let repo = gix::open_opts(store.repo.git_dir(), store.repo.open_options().clone())?;
    Ok(match git::ref_target(&repo, &dep.mirror())? {
        Some(tip) => read_task(&repo, &dep.mirror(), tip).ok(),
        None => None,
    })
}

/// The fetch URL of remote `name` of the repository at `path`, if it is one and has it.
pub fn remote_url(path: &Path, name: &str) -> Option<String> {
    let repo = gix::open(path).ok()?;
    let remote = repo.find_remote(name).ok()?;
    let url = remote.url(gix::remote::Direction::Fetch)?.to_bstring().to_string();
    Some(url)
}

/// Whether `path` is this repository (its checkout or its git directory).
pub fn is_this_repository(store: &Store, path: &Path) -> bool {
    let same = |p: &Path| p.canonicalize().is_ok_and(|p| p == path);
    same(store.workdir()) || same(store.common_dir())
}

/// The names this repository is reached by, as another repository's dependency could write
/// them: its paths, and its remotes' URLs (a clone of the same remote is the same repository).
pub fn identities(store: &Store) -> HashSet<String> {
    let mut out = HashSet::new();
    for path in [store.workdir(), store.common_dir()] {
        if let Ok(p) = path.canonicalize() {
            out.insert(normal(&p.to_string_lossy()));
        }
    }
    for name in store.repo.remote_names() {
        let name: &gix::bstr::BStr = name.as_ref();
        if let Ok(remote) = store.repo.find_remote(name) {
            if let Some(url) = remote.url(gix::remote::Direction::Fetch) {
                out.insert(normal(&url.to_bstring().to_string()));
            }
        }
    }
    out
}

/// A place as compared: no trailing slash or `.git`, paths made canonical when they exist.
pub fn normal(place: &str) -> String {
    let path = Path::new(place.trim_start_matches("file://"));
    let text = match path.canonicalize() {
        Ok(p) => p.to_string_lossy().into_owned(),
        Err(_) => place.to_owned(),
    };
    let text = text.trim_end_matches('/');
    let text = text.strip_suffix("/.git").or_else(|| text.strip_suffix(".git")).unwrap_or(text);
    text.to_owned()
}
