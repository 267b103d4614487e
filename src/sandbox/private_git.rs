//! The git directory a confined run works with: a small repository of its own in its box, in
//! place of the real one, which the sandbox hides.
//!
//! Inside the sandbox, the worktree's `.git` file says `gitdir: <box>/git`. That directory
//! holds only what committing on the try's own branch needs: `HEAD` on that branch, its tip,
//! the task branch and the target as read-only context (in `packed-refs`), a copy of the index
//! (so `git status` is fast and right) and of a merge in progress (`MERGE_HEAD`, `MERGE_MSG`),
//! the repository's `info/exclude` and `shallow`, a
//! configuration naming the agent as the author, and `objects/` whose alternates are the real
//! object database — read-only inside the sandbox, so nothing the agent does can change an
//! existing object. Its commits land in `<box>/git/objects`. No other branch, no `refs/loop`,
//! no notes, no `.git/config`, no hooks of the real repository are in it.
//!
//! When the run has ended, [`adopt`] takes its `HEAD` from outside: the objects reachable from
//! it that the real repository lacks are copied in (each checked to be what its name says), and
//! commit-on-stop then builds on it. A directory the agent laced with symbolic links, or a
//! `HEAD` that names nothing readable, is not adopted: the work in the worktree's files is
//! still committed, without the agent's own commits.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::safe;
use crate::store::Store;

/// The directory's name in a box.
pub const DIR: &str = "git";

/// A file every private git directory holds, saying what it is (inside the sandbox, git-loop
/// reads it to know it runs confined even if the environment was cleared).
pub const MARKER: &str = "git-loop-box";

/// What the run starts from, and where.
#[derive(Debug, Clone)]
pub struct PrivateGit {
    /// `<box>/git`.
    pub dir: PathBuf,
    /// The box it is in.
    pub box_dir: PathBuf,
    /// The commit `HEAD` was at when the run started.
    pub start: ObjectId,
}

/// Where the worktree's `HEAD` is: on a branch, or detached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    Branch { name: String, at: ObjectId },
    Detached(ObjectId),
}

impl Head {
    pub fn commit(&self) -> ObjectId {
        match self {
            Head::Branch { at, .. } | Head::Detached(at) => *at,
        }
    }
}

/// The `HEAD` of the linked worktree whose registration is `admin`, as the real repository has it.
pub fn worktree_head(store: &Store, admin: &Path) -> Result<Head> {
    let text = std::fs::read_to_string(admin.join("HEAD"))
        .with_context(|| format!("could not read the HEAD of '{}'", admin.display()))?;
    let text = text.trim();
    match text.strip_prefix("ref: ") {
        Some(name) => {
            let at = store.ref_target(name)?.with_context(|| format!("branch '{name}' is missing"))?;
            Ok(Head::Branch { name: name.to_owned(), at })
        }
        None => Ok(Head::Detached(ObjectId::from_hex(text.as_bytes()).context("HEAD is not a commit id")?)),
    }
}

/// Make `<box_dir>/git` for a run in the worktree registered at `admin`, starting at `head`,
/// with `context` refs (name, commit) the run may read; commits authored as `author`.
pub fn make(
    store: &Store,
    admin: &Path,
    head: &Head,
    context: &[(String, ObjectId)],
    box_dir: &Path,
    author: &str,
) -> Result<PrivateGit> {
    let dir = box_dir.join(DIR);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("could not clear '{}'", dir.display()))?;
    }
    for sub in ["refs/heads", "refs/tags", "objects/info", "objects/pack", "info", "hooks"] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path).with_context(|| format!("could not create '{}'", path.display()))?;
    }
    let write = |rel: &str, text: &[u8]| -> Result<()> {
        let path = dir.join(rel);
        std::fs::write(&path, text).with_context(|| format!("could not write '{}'", path.display()))
    };
    let mut refs: Vec<(String, ObjectId)> = context.to_vec();
    match head {
        Head::Branch { name, at } => {
            write("HEAD", format!("ref: {name}\n").as_bytes())?;
            refs.push((name.clone(), *at));
        }
        Head::Detached(at) => write("HEAD", format!("{at}\n").as_bytes())?,
    }
    refs.sort();
    refs.dedup_by(|a, b| a.0 == b.0);
    let mut packed = String::from("# pack-refs with: peeled fully-peeled sorted \n");
    for (name, id) in &refs {
        packed.push_str(&format!("{id} {name}\n"));
    }
    write("packed-refs", packed.as_bytes())?;
    write("objects/info/alternates", format!("{}\n", store.objects_dir().display()).as_bytes())?;
    write("config", config(store, author).as_bytes())?;
    write(MARKER, b"the git directory of a confined git-loop session: its own branch, the real objects read-only\n")?;
    // What makes `git status` right and fast: the index as it is, the repository's own
    // excludes, and where a shallow clone's history ends.
    // And a merge in progress (a conflict resolver's try): the agent's own `git commit` then
    // makes the merge of both sides.
    for (from, to) in [
        (admin.join("index"), "index"),
        (store.common_dir().join("info/exclude"), "info/exclude"),
        (store.common_dir().join("shallow"), "shallow"),
        (admin.join("MERGE_HEAD"), "MERGE_HEAD"),
        (admin.join("MERGE_MSG"), "MERGE_MSG"),
        (admin.join("MERGE_MODE"), "MERGE_MODE"),
    ] {
        if from.is_file() {
            std::fs::copy(&from, dir.join(to)).with_context(|| format!("could not copy '{}'", from.display()))?;
        }
    }
    Ok(PrivateGit { dir, box_dir: box_dir.to_owned(), start: head.commit() })
}

/// The private directory's configuration: a plain non-bare repository, the agent as author, no
/// automatic gc (its objects stay loose for [`adopt`]), no signing a key outside could do; and
/// the real repository's settings that change how files are read.
fn config(store: &Store, author: &str) -> String {
    let mut out = String::from("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tlogallrefupdates = true\n");
    for key in ["filemode", "autocrlf", "eol", "symlinks", "ignorecase", "precomposeunicode", "quotepath"] {
        if let Some(value) = store.config(&format!("core.{key}")) {
            if value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                out.push_str(&format!("\t{key} = {value}\n"));
            }
        }
    }
    let author: String = author.chars().filter(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c)).collect();
    out.push_str(&format!(
        "[user]\n\tname = {author}\n\temail = {author}@agent.invalid\n[gc]\n\tauto = 0\n[commit]\n\tgpgsign = false\n[tag]\n\tgpgsign = false\n"
    ));
    out
}

/// What a run's private git directory came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adopted {
    /// `HEAD` is where it started: nothing to take.
    Unmoved,
    /// `HEAD` moved to this commit, now in the real repository with what it needs;
    /// `merge_concluded`: no merge is in progress in the directory any more (one the run was
    /// given, it committed or aborted).
    Commit { id: ObjectId, copied: usize, merge_concluded: bool },
    /// Not taken, and why (a link in the directory, a `HEAD` that names nothing readable, an
    /// object that is not what its name says).
    Refused(String),
}

/// After the run: take its `HEAD` into the real repository (see the module's documentation).
/// Called only once the run's processes are gone, so nothing changes under it.
pub fn adopt(store: &Store, git: &PrivateGit) -> Result<Adopted> {
    if !git.dir.exists() {
        return Ok(Adopted::Unmoved);
    }
    if safe::holds_links(&git.dir) {
        return Ok(Adopted::Refused("its git directory holds a symbolic link or a special file".into()));
    }
    let Some(head) = read_head(&git.box_dir)? else {
        return Ok(Adopted::Refused("its HEAD names no commit that can be read".into()));
    };
    if head == git.start {
        return Ok(Adopted::Unmoved);
    }
    // Whatever the run wrote there, the objects it may lean on are the real repository's alone.
    let info = git.dir.join("objects/info");
    std::fs::write(info.join("alternates"), format!("{}\n", store.objects_dir().display()))
        .with_context(|| format!("could not write '{}'", info.display()))?;
    let _ = std::fs::remove_file(info.join("http-alternates"));
    match store.import_objects(&git.dir.join("objects"), head) {
        Ok(copied) => Ok(Adopted::Commit {
            id: head,
            copied,
            merge_concluded: std::fs::symlink_metadata(git.dir.join("MERGE_HEAD")).is_err(),
        }),
        Err(err) => Ok(Adopted::Refused(format!("its commits cannot be taken: {err:#}"))),
    }
}

/// The commit the private `HEAD` names (through one symbolic ref, loose or packed), read
/// without following links; `None` when it names nothing readable.
fn read_head(box_dir: &Path) -> Result<Option<ObjectId>> {
    let read = |rel: &str, limit: u64| safe::read(box_dir, &Path::new(DIR).join(rel), limit).ok().flatten();
    let Some(head) = read("HEAD", 4096) else { return Ok(None) };
    let head = String::from_utf8_lossy(&head).trim().to_owned();
    let Some(name) = head.strip_prefix("ref: ") else {
        return Ok(ObjectId::from_hex(head.as_bytes()).ok());
    };
    let name = name.trim();
    let plausible = name.starts_with("refs/")
        && name.split('/').all(|part| !part.is_empty() && part != "." && part != ".." && !part.starts_with('.'));
    if !plausible {
        return Ok(None);
    }
    if let Some(loose) = read(name, 4096) {
        return Ok(ObjectId::from_hex(String::from_utf8_lossy(&loose).trim().as_bytes()).ok());
    }
    let Some(packed) = read("packed-refs", 64 << 20) else { return Ok(None) };
    Ok(String::from_utf8_lossy(&packed)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(_, ref_name)| *ref_name == name)
        .and_then(|(id, _)| ObjectId::from_hex(id.as_bytes()).ok()))
}
