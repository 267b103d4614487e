//! The repository's refs, objects and files, as the rest of git-loop asks for them: what a ref
//! points to, whether one commit is in another's history, merges and diffstats of commits,
//! commits of records and of a worktree's work, a try's worktree, and the checks doctor runs
//! on objects. The repository handle itself stays in the store (and `git`, which the store
//! calls): code above the store says what it wants done, through these.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::Store;
use crate::git;

/// The result of merging two commits.
pub enum Merged {
    Commit(ObjectId),
    Conflict(Vec<String>),
}

/// One file's change between two commits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileChange {
    pub path: String,
    /// `added`, `modified`, `deleted` or `renamed`.
    pub kind: &'static str,
    /// Lines added and removed (`None` for binary files).
    pub added: Option<u32>,
    pub removed: Option<u32>,
}

/// One ref of a listing as gix makes it (no reading around a damaged packed-refs: see
/// `Store::refs_prefixed` for the listing that does).
pub enum PlainRef {
    /// A ref holding an object id.
    Direct { name: String, id: ObjectId },
    /// A symbolic ref.
    Symbolic { name: String },
    /// A ref file gix cannot parse: the name its error gives, else the listing's fallback.
    Unparsable { name: String },
}

impl Store {
    /// The repository's common directory (`.git`, shared by its worktrees).
    pub fn common_dir(&self) -> &Path {
        self.repo.common_dir()
    }

    /// The directory of the repository's objects (`.git/objects`).
    pub fn objects_dir(&self) -> PathBuf {
        self.repo.objects.store_ref().path().to_owned()
    }

    /// Where git registers linked worktrees: `<common-dir>/worktrees/`, one directory each.
    pub fn worktree_registrations(&self) -> PathBuf {
        self.repo.common_dir().join("worktrees")
    }

    /// What ref `name` points to, if it exists and holds an object id (see `git::ref_target`).
    pub fn ref_target(&self, name: &str) -> Result<Option<ObjectId>> {
        git::ref_target(&self.repo, name)
    }

    /// Every ref under `prefix` that holds an object id (what cannot be read, or is symbolic,
    /// left out: `doctor` reports those).
    pub fn direct_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        Ok(self
            .refs_prefixed(prefix)?
            .into_iter()
            .filter_map(|listed| match listed {
                git::Listed::Ref { name, target: git::Found::Direct(id) } => Some((name, id)),
                _ => None,
            })
            .collect())
    }

    /// Every folded ref under `prefix` and what it held (`store::archive`; a live ref of the
    /// same name shadows it).
    pub fn archived(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        super::archive::under(&self.repo, prefix)
    }

    /// Every ref whose name starts with `prefix`, with what could not be read, read around a
    /// damaged packed-refs (see `git::refs_prefixed`).
    pub fn refs_prefixed(&self, prefix: &str) -> Result<Vec<git::Listed>> {
        git::refs_prefixed(&self.repo, prefix)
    }

    /// Every ref whose name starts with `prefix`, as gix lists them; an unparsable ref file is
    /// named as gix's error names it, else `fallback`.
    pub fn refs_listed_plainly(&self, prefix: &str, fallback: &str) -> Result<Vec<PlainRef>> {
        let platform = self.repo.references().context("could not list refs")?;
        let mut out = Vec::new();
        for item in platform.prefixed(prefix).with_context(|| format!("could not list refs under '{prefix}'"))? {
            out.push(match item {
                Ok(reference) => {
                    let name = reference.name().as_bstr().to_string();
                    match reference.target().try_id() {
                        Some(id) => PlainRef::Direct { name, id: id.to_owned() },
                        None => PlainRef::Symbolic { name },
                    }
                }
                Err(err) => PlainRef::Unparsable { name: git::unreadable_ref_name(&err, fallback) },
            });
        }
        Ok(out)
    }

    /// The commit a revision such as `HEAD~2` or a branch name names.
    pub fn resolve_commit(&self, rev: &str) -> Result<ObjectId> {
        git::resolve_commit(&self.repo, rev)
    }

    /// The commit the main worktree's `HEAD` is at, if it is at one.
    pub fn head_commit(&self) -> Option<ObjectId> {
        self.repo.head_id().ok().map(|id| id.detach())
    }

    /// The branch the main worktree is on (a full ref name), if it is on one.
    pub fn head_branch(&self) -> Option<String> {
        self.repo.head_name().ok().flatten().map(|name| name.as_bstr().to_string())
    }

    /// Whether a remote called `name` is configured.
    pub fn has_remote(&self, name: &str) -> bool {
        self.repo.find_remote(name).is_ok()
    }

    /// Whether `ancestor` is reachable from `descendant` (a commit is its own ancestor).
    pub fn is_ancestor(&self, ancestor: ObjectId, descendant: ObjectId) -> Result<bool> {
        if ancestor == descendant {
            return Ok(true);
        }
        Ok(self
            .repo
            .merge_base(ancestor, descendant)
            .context("could not compare histories")?
            .is_some_and(|b| b.detach() == ancestor))
    }

    /// The best common ancestor of `a` and `b`, if they share history.
    pub fn merge_base(&self, a: ObjectId, b: ObjectId) -> Result<Option<ObjectId>> {
        Ok(self.repo.merge_base(a, b).context("could not compare histories")?.map(|base| base.detach()))
    }

    /// Which of `heads` are in the history of `tip` (`tip` included): one walk of that history,
    /// which ends as soon as every head was met — asking `is_ancestor` of each head would walk
    /// it once per head.
    pub fn contained_in(&self, tip: ObjectId, heads: &[ObjectId]) -> Result<HashSet<ObjectId>> {
        let wanted: HashSet<ObjectId> = heads.iter().copied().collect();
        let mut found = HashSet::new();
        if wanted.is_empty() {
            return Ok(found);
        }
        let walk = self.repo.rev_walk([tip]).all().context("could not walk the history")?;
        for info in walk {
            let id = info.context("could not walk the history")?.id;
            if wanted.contains(&id) {
                found.insert(id);
                if found.len() == wanted.len() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// Merge `theirs` into `ours` as a new commit made as this store's signature, with
    /// `message` (no ref is touched); a conflict writes no commit and names its paths.
    pub fn merge(&self, ours: ObjectId, theirs: ObjectId, message: &str) -> Result<Merged> {
        let repo = &self.repo;
        let mut outcome = self.merge_trees(ours, theirs, Default::default())?;
        let how = gix::merge::tree::TreatAsUnresolved::default();
        if outcome.tree_merge.has_unresolved_conflicts(how) {
            return Ok(Merged::Conflict(conflicted_paths(&outcome.tree_merge)));
        }
        let tree = git::retry_vanished(|| outcome.tree_merge.tree.write())
            .context("could not write the merged tree")?
            .detach();
        let commit = git::write_commit(repo, tree, &[ours, theirs], message, &self.signature())?;
        Ok(Merged::Commit(commit))
    }

    fn merge_trees(
        &self,
        ours: ObjectId,
        theirs: ObjectId,
        labels: gix::merge::blob::builtin_driver::text::Labels<'_>,
    ) -> Result<gix::merge::commit::Outcome<'_>> {
        let repo = &self.repo;
        let options = repo.tree_merge_options().context("could not read the merge options")?;
        git::retry_vanished(|| repo.merge_commits(ours, theirs, labels, options.clone().into()))
            .with_context(|| format!("could not merge {theirs} into {ours}"))
    }

    /// Begin the merge of `theirs` into `ours` in the worktree `worktree`, which has `ours`
    /// checked out and nothing changed, as `git merge` leaves a merge that conflicts: its files
    /// become the merged ones, with conflict markers naming both sides (`labels`: ours, theirs)
    /// in the files that conflict; its index holds the merged tree with those files' three
    /// stages (base, ours, theirs); and `MERGE_HEAD` (theirs) and `MERGE_MSG` (`message`, with
    /// the conflicts listed as git lists them) are written. `git status` then lists the
    /// conflicts and `git commit` makes the merge of the two. Done in-process through a handle
    /// with every filter driver removed (`git::harden`): nothing in the worktree runs.
    /// Returns the paths that conflict; `None`, touching nothing, when the merge does not
    /// conflict.
    pub fn begin_merge(
        &self,
        worktree: &Path,
        ours: ObjectId,
        theirs: ObjectId,
        labels: (&str, &str),
        message: &str,
    ) -> Result<Option<Vec<String>>> {
        use gix::bstr::ByteSlice as _;
        let names = gix::merge::blob::builtin_driver::text::Labels {
            ancestor: Some("merge base".as_bytes().as_bstr()),
            current: Some(labels.0.as_bytes().as_bstr()),
            other: Some(labels.1.as_bytes().as_bstr()),
        };
        let mut outcome = self.merge_trees(ours, theirs, names)?;
        let how = gix::merge::tree::TreatAsUnresolved::default();
        if !outcome.tree_merge.has_unresolved_conflicts(how) {
            return Ok(None);
        }
        let paths = conflicted_paths(&outcome.tree_merge);
        let tree = git::retry_vanished(|| outcome.tree_merge.tree.write())
            .context("could not write the conflicted tree")?
            .detach();
        let ours_tree = self.commit_tree(ours).context("the tree of our side")?;
        let mut wt =
            gix::open(worktree).with_context(|| format!("could not open the worktree '{}'", worktree.display()))?;
        git::harden(&mut wt)?;
        git::checkout_changes(&wt, ours_tree, tree)?;
        let mut index = wt.index_from_tree(&tree).context("could not build the index")?;
        let workdir = worktree.to_owned();
        for (entry, path) in index.entries_mut_with_paths() {
            let Ok(rela) = gix::path::from_bstr(path) else { continue };
            if let Ok(meta) = gix::index::fs::Metadata::from_path_no_follow(&workdir.join(rela)) {
                if let Ok(stat) = gix::index::entry::Stat::from_fs(&meta) {
                    entry.stat = stat;
                }
            }
        }
        outcome.tree_merge.index_changed_after_applying_conflicts(
            &mut index,
            how,
            gix::merge::tree::apply_index_entries::RemovalMode::Prune,
        );
        index.write(Default::default()).context("could not write the index")?;
        let admin = wt.git_dir().to_owned();
        let listed: String = paths.iter().map(|p| format!("#\t{p}\n")).collect();
        let files = [
            (crate::refs::MERGE_MSG, format!("{}\n\n# Conflicts:\n{listed}", message.trim_end())),
            (crate::refs::MERGE_HEAD, format!("{theirs}\n")),
        ];
        for (name, text) in files {
            let path = admin.join(name);
            std::fs::write(&path, text).with_context(|| format!("could not write '{}'", path.display()))?;
        }
        Ok(Some(paths))
    }

    /// The merge in progress in `worktree`: what its `MERGE_HEAD` names, if it has one.
    pub fn merge_in_progress(&self, worktree: &Path) -> Option<ObjectId> {
        let wt = gix::open(worktree).ok()?;
        let text = std::fs::read_to_string(wt.git_dir().join(crate::refs::MERGE_HEAD)).ok()?;
        ObjectId::from_hex(text.trim().as_bytes()).ok()
    }

    /// End the merge in progress in `worktree` (its `MERGE_HEAD` and `MERGE_MSG` go), once its
    /// result is committed; with `tree`, its index is written again from that tree (the merge's,
    /// whose files are the worktree's), so `git status` is clean.
    pub fn end_merge(&self, worktree: &Path, tree: Option<ObjectId>) -> Result<()> {
        let wt =
            gix::open(worktree).with_context(|| format!("could not open the worktree '{}'", worktree.display()))?;
        if let Some(tree) = tree {
            git::write_index(&wt, tree)?;
        }
        for name in [crate::refs::MERGE_HEAD, crate::refs::MERGE_MSG] {
            let path = wt.git_dir().join(name);
            match std::fs::remove_file(&path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(err).with_context(|| format!("could not remove '{}'", path.display()))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A commit of `tree` with `parents`, made as this store's signature (no ref is touched).
    pub fn commit_tree_with(&self, tree: ObjectId, parents: &[ObjectId], message: &str) -> Result<ObjectId> {
        git::write_commit(&self.repo, tree, parents, message, &self.signature())
    }

    /// The blob at `path` in commit `commit`'s tree, if there is one.
    pub fn read_path(&self, commit: ObjectId, path: &str) -> Result<Option<Vec<u8>>> {
        let tree = self
            .repo
            .find_commit(commit)
            .context("could not read a commit")?
            .tree()
            .context("could not read a tree")?;
        let Some(entry) = tree.lookup_entry_by_path(path).context("could not look a path up")? else { return Ok(None) };
        let object = entry.object().context("could not read a blob")?;
        if object.kind != gix::object::Kind::Blob {
            return Ok(None);
        }
        Ok(Some(object.data.clone()))
    }

    /// What changed from commit `from` to commit `to`, file by file, with line counts.
    pub fn diffstat(&self, from: ObjectId, to: ObjectId) -> Result<Vec<FileChange>> {
        use gix::prelude::TreeDiffChangeExt as _;
        let repo = &self.repo;
        let tree_of = |commit: ObjectId| -> Result<gix::Tree<'_>> {
            repo.find_commit(commit)
                .context("could not read a commit to compare")?
                .tree()
                .context("could not read a tree")
        };
        let (old, new) = (tree_of(from)?, tree_of(to)?);
        let changes = repo.diff_tree_to_tree(Some(&old), Some(&new), None).context("could not compare the trees")?;
        let mut cache = repo.diff_resource_cache_for_tree_diff().context("could not prepare a diff")?;
        let mut out = Vec::new();
        for detached in &changes {
            let change = detached.attach(repo, repo);
            if !change.entry_mode().is_blob_or_symlink() {
                continue;
            }
            let kind = match &change {
                gix::object::tree::diff::Change::Addition { .. } => "added",
                gix::object::tree::diff::Change::Deletion { .. } => "deleted",
                gix::object::tree::diff::Change::Modification { .. } => "modified",
                gix::object::tree::diff::Change::Rewrite { .. } => "renamed",
            };
            let counts = change.diff(&mut cache).ok().and_then(|mut platform| platform.line_counts().ok().flatten());
            cache.clear_resource_cache_keep_allocation();
            out.push(FileChange {
                path: change.location().to_string(),
                kind,
                added: counts.as_ref().map(|c| c.insertions),
                removed: counts.as_ref().map(|c| c.removals),
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Write `bytes` as a blob.
    pub fn write_blob(&self, bytes: &[u8]) -> Result<ObjectId> {
        git::write_blob(&self.repo, bytes)
    }

    /// Write a commit made elsewhere (a worktree's work, committed on stop) into the
    /// repository's object database.
    pub fn write_commit_object(&self, commit: &gix::objs::Commit) -> Result<ObjectId> {
        Ok(git::retry_vanished(|| self.repo.write_object(commit)).map_err(anyhow::Error::from)?.detach())
    }

    /// Write a commit of a record: a tree of the plain files `files` (name, contents), on
    /// `parents`, with `message`, authored and committed as `sig`.
    pub fn write_file_commit(
        &self,
        files: &[(&str, &[u8])],
        parents: &[ObjectId],
        message: &str,
        sig: &gix::actor::Signature,
    ) -> Result<ObjectId> {
        let mut blobs = Vec::with_capacity(files.len());
        for (name, bytes) in files {
            blobs.push((*name, git::write_blob(&self.repo, bytes)?));
        }
        let tree = git::write_tree(&self.repo, &blobs)?;
        git::write_commit(&self.repo, tree, parents, message, sig)
    }

    /// One file of a commit's tree (top level only), if it has it.
    pub fn read_commit_file(&self, commit: ObjectId, file: &str) -> Result<Option<Vec<u8>>> {
        git::read_commit_file(&self.repo, commit, file)
    }

    /// A blob's bytes.
    pub fn read_blob(&self, id: ObjectId) -> Result<Vec<u8>> {
        git::read_blob(&self.repo, id)
    }

    /// A commit's parents and message.
    pub fn read_commit(&self, id: ObjectId) -> Result<(Vec<ObjectId>, String)> {
        git::read_commit(&self.repo, id)
    }

    /// The tree of commit `id`, if it can be read.
    pub fn commit_tree(&self, id: ObjectId) -> Option<ObjectId> {
        self.repo.find_commit(id).ok().and_then(|c| c.tree_id().ok()).map(|tree| tree.detach())
    }

    /// Add a linked worktree at `path` with `branch` (a full ref name, which must exist)
    /// checked out, through handles with every `filter.<driver>` removed (see `git::harden`),
    /// its registration renamed into place whole (see `git::worktree`). When a file or
    /// directory it made vanished under it, `undo` is called and it is tried again (see
    /// `git::retry_vanished`). Callers hold the clone's worktree lock.
    pub fn add_worktree(&self, path: &Path, branch: &str, undo: &dyn Fn()) -> Result<()> {
        self.add_worktree_at(path, git::worktree::Head::Attached(branch.to_owned()), undo)
    }

    /// Add a linked worktree at `path` with `commit` checked out on a detached HEAD (the landing
    /// queue's worktree, a reviewer's checkout: no branch follows them), as `add_worktree` does.
    pub fn add_detached_worktree(&self, path: &Path, commit: ObjectId, undo: &dyn Fn()) -> Result<()> {
        self.add_worktree_at(path, git::worktree::Head::Detached(commit), undo)
    }

    fn add_worktree_at(&self, path: &Path, head: git::worktree::Head, undo: &dyn Fn()) -> Result<()> {
        let mut repo = self.repo.clone();
        git::harden(&mut repo)?;
        let staging = self.layout()?.worktree_staging();
        git::worktree::clear_staging(&staging);
        crate::failpoint::write_point();
        let mut tries = 0;
        loop {
            match git::worktree::add(&repo, path, &head, &staging) {
                Ok(()) => break,
                Err(err) => {
                    undo();
                    if tries < 10 && err.chain().any(git::is_not_found) {
                        tries += 1;
                        continue;
                    }
                    return Err(err.context(format!("could not add the worktree '{}'", path.display())));
                }
            }
        }
        crate::failpoint::write_point();
        Ok(())
    }

    /// The registration (`<common-dir>/worktrees/<name>/`) of the linked worktree at
    /// `worktree`: the one whose `gitdir` names the worktree's `.git` file — never the one that
    /// file points at, which whoever works in the worktree could have rewritten.
    pub fn worktree_admin(&self, worktree: &Path) -> Option<PathBuf> {
        let root = self.worktree_registrations();
        let gitfile = worktree.join(".git");
        let names =
            |dir: &Path| std::fs::read_to_string(dir.join("gitdir")).is_ok_and(|g| Path::new(g.trim()) == gitfile);
        // The registration is named after the worktree's directory, unless that name was taken.
        let likely = root.join(worktree.file_name()?);
        if names(&likely) {
            return Some(likely);
        }
        std::fs::read_dir(&root).ok()?.flatten().map(|e| e.path()).find(|dir| names(dir))
    }

    /// Copy into this repository every object reachable from `tip` that it lacks, read from the
    /// object directory `from` (a confined session's own, whose alternates name this one's):
    /// its commits, their trees and files. Each object is written anew, so its id is computed
    /// here; one whose content is not what its name says fails the copy, and so does a graph
    /// that reaches an object neither repository has. Nothing refers to what was copied until
    /// the caller moves a ref, so a failure leaves only unreferenced objects. Returns how many.
    pub fn import_objects(&self, from: &Path, tip: ObjectId) -> Result<usize> {
        use gix::objs::{Find as _, Write as _};
        /// More than any session's work; past it the copy stops (and fails).
        const MAX_OBJECTS: usize = 2_000_000;
        let foreign = gix::odb::at(from, gix::hash::Kind::Sha1)
            .with_context(|| format!("could not open the objects of '{}'", from.display()))?;
        let (mut stack, mut seen, mut copied) = (vec![tip], HashSet::new(), 0usize);
        let mut buf = Vec::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) || self.repo.has_object(id) {
                continue;
            }
            let data = foreign
                .try_find(&id, &mut buf)
                .map_err(|err| anyhow::anyhow!("object {id} cannot be read: {err}"))?
                .with_context(|| format!("object {id} is missing"))?;
            let kind = data.kind;
            let bad = |err: &dyn std::fmt::Display| anyhow::anyhow!("object {id} cannot be decoded: {err}");
            match kind {
                gix::object::Kind::Commit => {
                    let commit =
                        gix::objs::CommitRef::from_bytes(data.data, gix::hash::Kind::Sha1).map_err(|e| bad(&e))?;
                    stack.push(commit.tree());
                    stack.extend(commit.parents());
                }
                gix::object::Kind::Tree => {
                    let tree = gix::objs::TreeRef::from_bytes(data.data, gix::hash::Kind::Sha1).map_err(|e| bad(&e))?;
                    if let Some(entry) =
                        tree.entries.iter().find(|e| git::refused_path_component(e.filename, e.mode.is_link()))
                    {
                        anyhow::bail!(
                            "tree {id} holds '{}', a path git refuses to check out",
                            String::from_utf8_lossy(entry.filename)
                        );
                    }
                    // A submodule's commit is not this repository's to hold.
                    stack.extend(tree.entries.iter().filter(|e| !e.mode.is_commit()).map(|e| e.oid.to_owned()));
                }
                gix::object::Kind::Tag => {
                    stack.push(
                        gix::objs::TagRef::from_bytes(data.data, gix::hash::Kind::Sha1).map_err(|e| bad(&e))?.target(),
                    );
                }
                gix::object::Kind::Blob => {}
            }
            let written = self
                .repo
                .write_buf(kind, data.data)
                .map_err(|err| anyhow::anyhow!("could not write object {id}: {err}"))?;
            anyhow::ensure!(written == id, "object {id} holds the content of {written}: it is not what its name says");
            copied += 1;
            anyhow::ensure!(copied <= MAX_OBJECTS, "more than {MAX_OBJECTS} new objects: the copy stops");
        }
        Ok(copied)
    }

    /// Take the worktree registration `admin` (a directory under `worktree_registrations`) away
    /// whole (see `git::worktree::retire`). Callers hold the clone's worktree lock.
    pub fn retire_worktree_registration(&self, admin: &Path) -> Result<()> {
        let staging = self.layout()?.worktree_staging();
        git::worktree::retire(admin, &staging)
            .with_context(|| format!("could not remove the registration '{}'", admin.display()))
    }

    /// Where the repository's packed-refs file is.
    pub fn packed_refs_path(&self) -> PathBuf {
        git::packed::path(&self.repo)
    }

    /// The lines of packed-refs that cannot be parsed (see `git::packed`).
    pub fn packed_refs_bad_lines(&self) -> Vec<git::packed::BadLine> {
        git::packed::bad_lines(&self.repo)
    }

    /// Whether object `id` is in the object database.
    pub fn has_object(&self, id: ObjectId) -> bool {
        self.repo.has_object(id)
    }

    /// What kind of object `id` is, or why it cannot be told.
    pub fn object_kind(&self, id: ObjectId) -> Result<gix::object::Kind, String> {
        match self.repo.find_header(id) {
            Ok(header) => Ok(header.kind()),
            Err(_) if !self.repo.has_object(id) => Err(format!("object {id} is missing")),
            Err(_) => Err(format!("object {id} cannot be read")),
        }
    }

    /// Walk the commits from `tip`, each once over a whole check (`seen`): each present, its
    /// tree present; `Err` says what is wrong first. The files of those trees are not read.
    pub fn check_history(&self, tip: ObjectId, seen: &mut HashSet<ObjectId>) -> Result<(), String> {
        let repo = &self.repo;
        let mut stack = vec![tip];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let commit = repo
                .find_commit(id)
                .map_err(|_| self.object_kind(id).err().unwrap_or_else(|| format!("object {id} is not a commit")))?;
            let decoded = commit.decode().map_err(|_| format!("commit {id} cannot be decoded"))?;
            let tree = decoded.tree();
            if !repo.has_object(tree) {
                return Err(format!("object {tree} (the tree of commit {id}) is missing"));
            }
            stack.extend(decoded.parents());
        }
        Ok(())
    }

    /// Commit `id` itself and its tree are present (its history is not read).
    pub fn check_commit(&self, id: ObjectId) -> Result<(), String> {
        let commit = self.repo.find_commit(id).map_err(|_| format!("object {id} cannot be read"))?;
        let tree = commit.tree_id().map_err(|_| format!("commit {id} cannot be decoded"))?.detach();
        if self.repo.has_object(tree) {
            Ok(())
        } else {
            Err(format!("object {tree} (the tree of commit {id}) is missing"))
        }
    }
}

/// The paths a tree merge left conflicting, sorted, each once.
fn conflicted_paths(merge: &gix::merge::tree::Outcome<'_>) -> Vec<String> {
    let how = gix::merge::tree::TreatAsUnresolved::default();
    let mut paths: Vec<String> = merge
        .conflicts
        .iter()
        .filter(|c| c.is_unresolved(how))
        .map(|c| c.changes_in_resolution().0.location().to_string())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}
