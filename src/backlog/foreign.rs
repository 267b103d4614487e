//! Dependencies across repositories: `--after <place>#<task-id>` makes a task wait for a task of
//! another repository that uses git-loop. `<place>` is a remote of this clone (`git remote add
//! lib <url>`) or a URL or path git can fetch from (a relative path, from the checkout's root,
//! is made absolute when written). No server: the task's record is read through the other
//! repository's refs.
//!
//! - **Written as given**, `<place>#<id>` in the task's `after`, with an exact id (a unique
//!   prefix is looked up there when written). Every clone reads `<place>` in its own terms: a
//!   remote of that name, else a URL or path. Name the remote alike in every clone, or use a
//!   URL they all reach.
//! - **Read on sync**: `git loop sync`, a walk when it starts and on each sync, and `add`/`edit`
//!   when they write one fetch each place's task records named by open tasks (`git ls-remote`
//!   and `git fetch` of those refs alone; a task the other repository folded is read from its
//!   archive) into this clone's own refs, `refs/loop-foreign/<place-key>/tasks/<id>`, never
//!   pushed. The board reads their states from there: a dependency is met when the last read
//!   found it done. One never read, or found nowhere, waits. Each read drops the mirrors no open
//!   task waits for any more (`store::foreign::prune`).
//! - **Cycles**: `edit --after` follows the other task's own dependencies (fetched the same
//!   way, back into this repository when one names it by a path or URL this clone is reached
//!   by) and refuses a dependency that would close a cycle, naming it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use anyhow::Result;

use crate::error::{usage, Refusal};
use crate::refs;
use crate::store::foreign::{
    fetch, identities, is_remote, is_this_repository, looks_like_url, normal, read_mirror, unreachable,
};
use crate::store::task::State;
use crate::store::Store;

pub use crate::store::foreign::{is_foreign, Dep, Read, MIRRORS};

/// Check a dependency as given (`<place>#<id or unique prefix>`) and read the task there: its
/// written form, `<place>#<id>` with the place made absolute when it is a relative path.
pub fn check(store: &Store, given: &str) -> Result<String> {
    let hint = "name it <remote-or-path>#<task-id>, e.g. lib#t-4k2m9q7x or ../lib#t-4k2m9q7x";
    let Some((place, id)) = given.rsplit_once('#') else {
        return Err(usage(format!("'{}' does not name a task of another repository", given.escape_debug()))
            .hint(hint)
            .into());
    };
    if !crate::store::foreign::valid_place(place) || id.is_empty() {
        return Err(usage(format!("'{}' is not <remote-or-path>#<task-id>", given.escape_debug())).hint(hint).into());
    }
    let place = if is_remote(store, place) || looks_like_url(place) {
        place.to_owned()
    } else {
        let path = Path::new(place);
        // Relative to the checkout's root, as git reads it on every sync.
        let absolute = if path.is_absolute() { path.to_owned() } else { store.workdir().join(path) };
        let Ok(absolute) = absolute.canonicalize() else {
            return Err(usage(format!(
                "'{}' is neither a remote of this clone nor a path that exists",
                place.escape_debug()
            ))
            .hint("add the repository as a remote ('git remote add <name> <url>'), or give its URL or path")
            .into());
        };
        if is_this_repository(store, &absolute) {
            return Err(usage(format!("'{}' is this repository", place.escape_debug()))
                .hint(format!("name the task by its id alone: --after {id}"))
                .into());
        }
        absolute.to_string_lossy().into_owned()
    };
    let id = resolve_there(store, &place, id)?;
    let dep = Dep { place, id };
    let found = fetch(store, &dep.place, std::slice::from_ref(&dep.id))?;
    if found.get(&dep.id).copied().flatten().is_none() {
        return Err(Refusal::new(crate::error::Class::Usage, format!("'{}' has no task '{}'", dep.place, dep.id))
            .hint(format!("list its tasks with 'git -C <its checkout> loop list', or check the id ({given})"))
            .into());
    }
    Ok(dep.to_string())
}

/// An exact id at `place` for `given` (an id, or a unique prefix of one there).
fn resolve_there(store: &Store, place: &str, given: &str) -> Result<String> {
    let given = given.strip_prefix("t-").unwrap_or(given);
    let prefix = format!("{}t-{given}", refs::TASKS);
    let timeout = store.settings().transfer_timeout()?;
    let listed = crate::git::program::ls_remote(store.workdir(), place, std::slice::from_ref(&prefix), timeout)
        .map_err(|err| unreachable(place, err))?;
    let ids: BTreeSet<&str> = listed.iter().filter_map(|(name, _)| refs::task_id_of(name)).collect();
    match ids.len() {
        1 => Ok(ids.into_iter().next().unwrap_or_default().to_owned()),
        // Folded there (or not there at all): only an exact id can be looked up in its archive.
        0 => Ok(format!("t-{given}")),
        n => Err(usage(format!("'t-{given}' matches {n} tasks in '{place}'")).hint("type more of the id").into()),
    }
}

/// What one read of the other repositories found.
#[derive(Debug, Default)]
pub struct Refreshed {
    /// Each dependency read, with its state there (`None`: found nowhere).
    pub read: Vec<(String, Option<State>)>,
    /// Each place that could not be read, and why.
    pub failed: Vec<(String, String)>,
}

/// Read every task of another repository an open task here waits for (see the module docs).
/// A place that cannot be read is said in `failed`; what was read before stays.
pub fn refresh(store: &Store, board: &super::Board) -> Result<Refreshed> {
    let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in board.tasks.iter().filter(|r| r.state == State::Open) {
        for dep in row.after().filter_map(Dep::parse) {
            wanted.entry(dep.place).or_default().insert(dep.id);
        }
    }
    let all: Vec<Dep> = wanted
        .iter()
        .flat_map(|(place, ids)| ids.iter().map(|id| Dep { place: place.clone(), id: id.clone() }))
        .collect();
    crate::store::foreign::prune(store, &all)?;
    let mut out = Refreshed::default();
    for (place, ids) in wanted {
        let ids: Vec<String> = ids.into_iter().collect();
        match fetch(store, &place, &ids) {
            Ok(found) => {
                for id in found.into_keys() {
                    let dep = Dep { place: place.clone(), id };
                    let state = read_mirror(store, &dep)?.map(|t| t.state);
                    out.read.push((dep.to_string(), state));
                }
            }
            Err(err) => out.failed.push((place, format!("{err:#}"))),
        }
    }
    Ok(out)
}

/// Refuse `dep` (another repository's task) as a dependency of `id` here when that task waits,
/// through its own dependencies, for `id`: the cycle named. Each repository on the way is read
/// as `fetch` reads it; one that names this repository by a path or URL this clone is reached
/// by leads back into this board.
pub fn check_cycle(store: &Store, board: &super::Board, id: &str, dep: &str) -> Result<()> {
    // A dependency here may reach another repository, and come back, through its own.
    let start = Dep::parse(dep).unwrap_or_else(|| Dep { place: String::new(), id: dep.to_owned() });
    if start.place.is_empty() && !reaches_out(board, &start.id) {
        return Ok(());
    }
    let here = identities(store);
    // Depth-first over (place, id); a node of this repository has place "".
    let first = if start.place.is_empty() { start.id.clone() } else { start.to_string() };
    let mut stack: Vec<(Dep, Vec<String>)> = vec![(start, vec![id.to_owned(), first])];
    let mut seen: HashSet<Dep> = HashSet::new();
    let mut read_here: HashMap<Dep, Vec<String>> = HashMap::new();
    while let Some((node, path)) = stack.pop() {
        if seen.len() > 1_000 || !seen.insert(node.clone()) {
            continue;
        }
        let deps: Vec<String> = if node.place.is_empty() {
            if node.id == id {
                return Err(usage(format!("adding it would make a cycle: {}", path.join(" → "))).into());
            }
            board.get(&node.id).map(|r| r.after().map(ToOwned::to_owned).collect()).unwrap_or_default()
        } else {
            if !read_here.contains_key(&node) {
                // A place that cannot be read now leads nowhere: what it holds is not known.
                let task = match fetch(store, &node.place, std::slice::from_ref(&node.id)) {
                    Ok(_) => read_mirror(store, &node)?,
                    Err(_) => None,
                };
                read_here.insert(node.clone(), task.map(|t| t.after).unwrap_or_default());
            }
            read_here[&node].clone()
        };
        for next in deps {
            let next_node = match Dep::parse(&next).map(|d| seen_from(&node.place, d)) {
                // Named by a place: this repository, if that is how this clone is reached.
                Some(d) if here.contains(&normal(&d.place)) => Dep { place: String::new(), id: d.id },
                Some(d) => d,
                // Of the same repository as the node.
                None => Dep { place: node.place.clone(), id: next.clone() },
            };
            let mut path = path.clone();
            path.push(if next_node.place.is_empty() { next_node.id.clone() } else { next_node.to_string() });
            stack.push((next_node, path));
        }
    }
    Ok(())
}

/// `dep`, written in the repository at `place`, as this clone can reach it: a remote's name
/// there (when `place` is a path, whose configuration can be read) becomes that remote's URL.
fn seen_from(place: &str, dep: Dep) -> Dep {
    if place.is_empty() || looks_like_url(place) {
        return dep;
    }
    let url = crate::store::foreign::remote_url(Path::new(place), &dep.place);
    match url {
        Some(url) => Dep { place: url, id: dep.id },
        None => dep,
    }
}

/// Whether task `id` here waits, through its dependencies here, for a task of another repository.
fn reaches_out(board: &super::Board, id: &str) -> bool {
    let mut stack = vec![id.to_owned()];
    let mut seen = HashSet::new();
    while let Some(at) = stack.pop() {
        if !seen.insert(at.clone()) {
            continue;
        }
        let Some(row) = board.get(&at) else { continue };
        for dep in row.after() {
            if is_foreign(dep) {
                return true;
            }
            stack.push(dep.to_owned());
        }
    }
    false
}
