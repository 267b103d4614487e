//! What a push brings, read as clients will read it: the objects of a push (still in git's
//! quarantine directory while pre-receive runs), the new commits of a pushed range, and each
//! loop record in them checked by the very decoder its readers use (`store::task::check_commit`,
//! `store::journal::decode_commit`, `store::notes::decode`, `tries::NumberRecord::decode`,
//! `mission::record::decode`; claims: `store::claim::decode`, in `receive`). `receive` decides
//! which rule applies to which ref; this module says whether an object is what that rule
//! needs.
//!
//! Only the new part of a pushed history is read: the commits reachable from the new value and
//! not from the old one (`git rev-list old..new`), found by walking both sides newest first
//! and stopping once nothing reachable only from the new value is left. A fast-forward of a
//! chain reads the commits it adds and the old tip; a rewrite or an unrelated history is
//! refused at its first commit that is not a loop record (or after a bounded walk).

use std::collections::{BinaryHeap, HashMap};
use std::path::Path;

use anyhow::{Context as _, Result};
use gix::bstr::ByteSlice as _;
use gix::objs::Find as _;
use gix::ObjectId;

use crate::ids::TaskId;
use crate::mission::record as mission;
use crate::refs;
use crate::store::{journal, notes, task};
use crate::tries::NumberRecord;

/// How many commits one ref's walk may read before giving up (and refusing).
const MAX_WALK: usize = 200_000;

/// The objects a push can refer to: its own (quarantined) and the repository's.
pub struct Objects {
    /// The server's repository, opened by the hook itself: no store is opened on a server.
    server: gix::Repository,
    quarantine: Option<gix::odb::Handle>,
}

/// A commit, decoded.
pub struct Commit {
    pub id: ObjectId,
    pub tree: ObjectId,
    pub parents: Vec<ObjectId>,
    /// The committer's time, in seconds: only the order of the walk depends on it.
    pub time: i64,
    pub message: String,
}

/// One entry of a tree.
pub struct Entry {
    pub name: String,
    pub mode: gix::objs::tree::EntryMode,
    pub id: ObjectId,
}

impl Objects {
    /// Open the repository at `git_dir`; `quarantine` is the push's object directory
    /// (`$GIT_QUARANTINE_PATH` while pre-receive runs), if any.
    pub fn open(git_dir: &Path, quarantine: Option<&Path>) -> Result<Objects> {
        let repo = gix::open_opts(git_dir, gix::open::Options::isolated())
            .with_context(|| format!("could not open the repository at '{}'", git_dir.display()))?;
        let quarantine = match quarantine {
            Some(dir) => Some(
                gix::odb::at(dir, repo.object_hash())
                    .with_context(|| format!("could not open the pushed objects at '{}'", dir.display()))?,
            ),
            None => None,
        };
        Ok(Objects { server: repo, quarantine })
    }

    /// The server's repository (for its configuration: `receive::Policy`).
    pub fn server(&self) -> &gix::Repository {
        &self.server
    }

    /// An object's kind and bytes, from the push or the repository.
    pub fn find(&self, id: ObjectId) -> Option<(gix::objs::Kind, Vec<u8>)> {
        let mut buf = Vec::new();
        if let Some(q) = &self.quarantine {
            if let Ok(Some(data)) = q.try_find(&id, &mut buf) {
                return Some((data.kind, data.data.to_vec()));
            }
        }
        let data = self.server.objects.try_find(&id, &mut buf).ok()??;
        Some((data.kind, data.data.to_vec()))
    }

    pub fn kind(&self, id: ObjectId) -> Option<gix::objs::Kind> {
        self.find(id).map(|(kind, _)| kind)
    }

    /// The bytes of blob `id`.
    pub fn blob(&self, id: ObjectId) -> Result<Vec<u8>, String> {
        match self.find(id) {
            Some((gix::objs::Kind::Blob, data)) => Ok(data),
            Some((kind, _)) => Err(format!("{id} is a {kind}, not a blob")),
            None => Err(format!("object {id} is missing")),
        }
    }

    pub fn commit(&self, id: ObjectId) -> Result<Commit, String> {
        let data = match self.find(id) {
            Some((gix::objs::Kind::Commit, data)) => data,
            Some((kind, _)) => return Err(format!("{id} is a {kind}, not a commit")),
            None => return Err(format!("commit {id} is missing")),
        };
        let commit = gix::objs::CommitRef::from_bytes(&data, self.server.object_hash())
            .map_err(|err| format!("commit {id} cannot be decoded: {err}"))?;
        Ok(Commit {
            id,
            tree: commit.tree(),
            parents: commit.parents().collect(),
            time: commit.time().map_or(0, |t| t.seconds),
            message: commit.message.to_str_lossy().into_owned(),
        })
    }

    pub fn tree(&self, id: ObjectId) -> Result<Vec<Entry>, String> {
        let data = match self.find(id) {
            Some((gix::objs::Kind::Tree, data)) => data,
            Some((kind, _)) => return Err(format!("{id} is a {kind}, not a tree")),
            None => return Err(format!("tree {id} is missing")),
        };
        gix::objs::TreeRefIter::from_bytes(&data, self.server.object_hash())
            .map(|entry| {
                let entry = entry.map_err(|err| format!("tree {id} cannot be decoded: {err}"))?;
                Ok(Entry {
                    name: entry.filename.to_str_lossy().into_owned(),
                    mode: entry.mode,
                    id: entry.oid.to_owned(),
                })
            })
            .collect()
    }

    /// The blob named `name` at the top of commit `commit`'s tree, if there is one.
    fn file(&self, commit: &Commit, name: &str) -> Result<Option<Vec<u8>>, String> {
        let entries = self.tree(commit.tree)?;
        match entries.iter().find(|e| e.name == name) {
            Some(entry) if entry.mode.is_blob() => self.blob(entry.id).map(Some),
            Some(_) => Err(format!("{name} in commit {} is not a file", commit.id)),
            None => Ok(None),
        }
    }
}

const NEW: u8 = 1;
const OLD: u8 = 2;

struct Node {
    commit: Commit,
    flags: u8,
    queued: bool,
}

/// The walk of `old..new`: every commit carries the sides it is reachable from.
struct Walk<'o> {
    objects: &'o Objects,
    nodes: HashMap<ObjectId, Node>,
    /// Newest first; at equal times the new side goes first (clocks tick in seconds, and a
    /// chain's commits are often made within one).
    queue: BinaryHeap<(i64, bool, ObjectId)>,
    /// Queued commits reachable from the new value only: the walk ends when there are none.
    pending: usize,
    old: Option<ObjectId>,
    /// The old value was reached from the new one.
    descends: bool,
}

impl Walk<'_> {
    fn mark(&mut self, id: ObjectId, flags: u8) -> Result<(), String> {
        let mut stack = vec![(id, flags)];
        while let Some((id, flags)) = stack.pop() {
            if flags & NEW != 0 && self.old == Some(id) {
                self.descends = true;
            }
            match self.nodes.get_mut(&id) {
                None => {
                    if self.nodes.len() >= MAX_WALK {
                        return Err(format!("its history is longer than {MAX_WALK} commits"));
                    }
                    let commit = self.objects.commit(id)?;
                    self.queue.push((commit.time, flags == NEW, id));
                    if flags == NEW {
                        self.pending += 1;
                    }
                    self.nodes.insert(id, Node { commit, flags, queued: true });
                }
                Some(node) => {
                    if node.flags & flags == flags {
                        continue;
                    }
                    let was_new_only = node.flags == NEW;
                    node.flags |= flags;
                    if node.queued {
                        if was_new_only {
                            self.pending -= 1;
                        }
                    } else if flags & OLD != 0 {
                        // Found to be old after it was read: so are its ancestors.
                        stack.extend(node.commit.parents.iter().map(|p| (*p, OLD)));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Call `visit` on every commit reachable from `new` and not from `old` (the part of the
/// history this push adds), newest first; with `all` false, stop as soon as `old` is found to
/// be an ancestor of `new`. Returns whether it is. A commit reachable from both may be visited
/// when commit times disagree with the history (a clock that ran backwards): never one fewer.
pub fn walk(
    objects: &Objects,
    old: Option<ObjectId>,
    new: ObjectId,
    all: bool,
    visit: &mut dyn FnMut(&Commit) -> Result<(), String>,
) -> Result<bool, String> {
    let mut walk = Walk { objects, nodes: HashMap::new(), queue: BinaryHeap::new(), pending: 0, old, descends: false };
    walk.mark(new, NEW)?;
    if let Some(old) = old {
        walk.mark(old, OLD)?;
    }
    while walk.pending > 0 && (all || !walk.descends) {
        let Some((_, _, id)) = walk.queue.pop() else { break };
        let node = walk.nodes.get_mut(&id).expect("queued commits have a node");
        node.queued = false;
        let flags = node.flags;
        if flags == NEW {
            walk.pending -= 1;
            visit(&node.commit)?;
        }
        let parents = node.commit.parents.clone();
        for parent in parents {
            walk.mark(parent, flags)?;
        }
    }
    Ok(walk.descends)
}

/// Whether `new` descends from `old` (both commits); `Err` says why it cannot be told.
pub fn descends(objects: &Objects, old: ObjectId, new: ObjectId) -> Result<bool, String> {
    walk(objects, Some(old), new, false, &mut |_| Ok(()))
}

// ----- the records, each checked by its store's own decoder -----

/// One commit of task `id`'s operation chain (`refs/loop/tasks/<id>`), as `store::task`
/// defines it.
pub fn task_commit(objects: &Objects, id: &TaskId, commit: &Commit) -> Result<(), String> {
    let task_json = objects.file(commit, task::TASK_FILE)?;
    let op_json = objects.file(commit, task::OP_FILE)?;
    task::check_commit(id, commit.parents.len(), task_json.as_deref(), op_json.as_deref())
        .map_err(|why| format!("commit {}: {why}", commit.id))
}

/// One commit of a journal chain: an event, or the merge of two copies of the chain, as
/// `store::journal` defines it.
pub fn journal_commit(commit: &Commit) -> Result<(), String> {
    journal::decode_commit(&commit.message, commit.parents.len())
        .map(|_| ())
        .map_err(|why| format!("commit {}: {why}", commit.id))
}

/// One commit of mission `name`'s record chain: its `mission.json`, as `mission::record`
/// defines it.
pub fn mission_commit(objects: &Objects, name: &str, commit: &Commit) -> Result<(), String> {
    let Some(bytes) = objects.file(commit, mission::FILE)? else {
        return Err(format!("commit {}: it has no {}", commit.id, mission::FILE));
    };
    mission::decode(refs::mission_id_of(name), &bytes).map(|_| ()).map_err(|why| format!("commit {}: {why}", commit.id))
}

/// One commit of the shared settings chain (`refs/loop/settings`): a settings record of a
/// version this server reads, sharing only what clones share (`store::shared::decode`).
pub fn settings_commit(objects: &Objects, commit: &Commit) -> Result<crate::store::shared::Record, String> {
    let file = crate::store::shared::FILE;
    let Some(bytes) = objects.file(commit, file)? else {
        return Err(format!("commit {}: it has no {file}", commit.id));
    };
    crate::store::shared::decode(&bytes).map_err(|why| format!("commit {}: {why}", commit.id))
}

/// One commit of the notes ref: every note it adds or changes (a blob not in any parent at the
/// same path) must be a completion note (`store::notes`). Unchanged notes were checked when
/// they came.
pub fn notes_commit(objects: &Objects, commit: &Commit) -> Result<(), String> {
    let mut parents = Vec::with_capacity(commit.parents.len());
    for parent in &commit.parents {
        parents.push(objects.commit(*parent)?.tree);
    }
    let mut added = Vec::new();
    new_blobs(objects, commit.tree, &parents, String::new(), &mut added)?;
    for (path, blob) in added {
        let annotated = path.replace('/', "");
        if ObjectId::from_hex(annotated.as_bytes()).is_err() {
            // Not a note (git keeps such entries as they are); no reader looks at it.
            continue;
        }
        notes::decode(&objects.blob(blob)?)
            .map_err(|why| format!("commit {}: the note on {annotated}: {why}", commit.id))?;
    }
    Ok(())
}

/// The blobs of tree `tree` (at `prefix`) that no tree of `parents` has at the same path.
fn new_blobs(
    objects: &Objects,
    tree: ObjectId,
    parents: &[ObjectId],
    prefix: String,
    out: &mut Vec<(String, ObjectId)>,
) -> Result<(), String> {
    if parents.contains(&tree) {
        return Ok(());
    }
    let theirs: Vec<HashMap<String, (gix::objs::tree::EntryMode, ObjectId)>> = parents
        .iter()
        .map(|p| Ok(objects.tree(*p)?.into_iter().map(|e| (e.name, (e.mode, e.id))).collect()))
        .collect::<Result<_, String>>()?;
    for entry in objects.tree(tree)? {
        if theirs.iter().any(|t| t.get(&entry.name).is_some_and(|(_, id)| *id == entry.id)) {
            continue;
        }
        let path = format!("{prefix}{}", entry.name);
        if entry.mode.is_tree() {
            let below: Vec<ObjectId> = theirs
                .iter()
                .filter_map(|t| t.get(&entry.name).filter(|(m, _)| m.is_tree()).map(|(_, id)| *id))
                .collect();
            new_blobs(objects, entry.id, &below, format!("{path}/"), out)?;
        } else if entry.mode.is_blob() {
            out.push((path, entry.id));
        }
    }
    Ok(())
}

/// Whether blob `id` is the try-number record of try `number` of task `task`, as `tries`
/// defines it.
pub fn try_record(objects: &Objects, id: ObjectId, task: &TaskId, number: u32) -> Result<(), String> {
    NumberRecord::decode(&objects.blob(id)?, task, number).map(|_| ())
}
