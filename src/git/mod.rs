//! Thin helpers over gix: opening the repository the way git-loop needs it, and reading and
//! writing the few object shapes the store uses. Nothing here knows what a task or a claim
//! is. `program` is the only module that runs the `git` executable.

pub mod packed;
pub mod program;
pub mod worktree;

use std::path::Path;

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use gix::bstr::ByteSlice;
use gix::ObjectId;

use crate::error::usage;

/// The committer git-loop uses when the repository has none configured. gix, unlike git,
/// refuses to write reflogs or fetch without one, so an identity always exists.
const FALLBACK_NAME: &str = "git-loop";

/// How many pack indices a repository handle can know at once. gix sizes this table when the
/// repository is opened (by default 1.1 × the packs on disk, at least 32) and never grows it:
/// a handle that outlives the packs it was sized for — a walk runs for hours while fetches and
/// other processes add packs — fails every object lookup and fetch with "too few index
/// slots". git-loop keeps packs few (`store::maintenance`; docs/performance.md states the
/// bound), so this leaves a wide margin even while maintenance cannot run; a slot costs a few
/// dozen bytes.
const SLOTS: gix::odb::store::init::Slots =
    gix::odb::store::init::Slots::AsNeededByDiskState { multiplier: 2.0, minimum: 1024 };

/// Open the repository that contains `dir`, refusing the kinds git-loop cannot serve.
///
/// Honours `GIT_DIR` and the other discovery variables as git does. Refuses a bare repository
/// (agents need a working tree) and a reftable one (gix would write loose refs that git never
/// sees, and `git gc` would then prune what they point to).
pub fn open(dir: &Path, host: &str) -> Result<gix::Repository> {
    use gix::sec::trust::DefaultForLevel;
    // Set at open, not later: touching gix's committer identity ("personas") makes it read the
    // local time zone, which scans the whole zoneinfo database (milliseconds per process).
    let overrides = [
        // Our own ref locks are held for well under a millisecond; wait a little longer than
        // gix's default 100 ms so that bursts of claimers queue instead of failing.
        "core.filesRefLockTimeout=1000".to_owned(),
        // gix, unlike git, refuses to write reflogs, notes or fetch without an identity.
        format!("gitoxide.committer.nameFallback={FALLBACK_NAME}"),
        format!("gitoxide.committer.emailFallback=loop@{host}"),
        format!("gitoxide.author.nameFallback={FALLBACK_NAME}"),
        format!("gitoxide.author.emailFallback=loop@{host}"),
    ];
    let level = |trust| {
        gix::open::Options::default_for_level(trust).config_overrides(overrides.clone()).object_store_slots(SLOTS)
    };
    let trust =
        gix::sec::trust::Mapping { full: level(gix::sec::Trust::Full), reduced: level(gix::sec::Trust::Reduced) };
    let repo =
        match gix::ThreadSafeRepository::discover_with_environment_overrides_opts(dir, Default::default(), trust) {
            Ok(repo) => repo.to_thread_local(),
            Err(err) => {
                if is_reftable_dir(dir) {
                    return Err(reftable_refusal(dir).into());
                }
                if err.is_not_found() {
                    return Err(usage(format!("'{}' is not in a git repository", dir.display()))
                        .hint("run 'git init' first, or cd into a clone")
                        .into());
                }
                return Err(anyhow::Error::from(err)
                    .context(format!("could not open the git repository at '{}'", dir.display())));
            }
        };
    if repo.config_snapshot().string("extensions.refStorage").is_some_and(|v| v.eq_ignore_ascii_case(b"reftable")) {
        return Err(reftable_refusal(repo.git_dir()).into());
    }
    if repo.workdir().is_none() {
        return Err(usage(format!("'{}' is a bare repository", repo.git_dir().display()))
            .hint("git loop needs a working tree: run it in a clone of this repository")
            .into());
    }
    Ok(repo)
}

fn reftable_refusal(dir: &Path) -> crate::error::Refusal {
    usage(format!("'{}' stores its refs in reftable format, which git-loop cannot use yet", dir.display()))
        .hint("use a repository with the files ref backend ('git init --ref-format=files', or 'git refs migrate --ref-format=files')")
}

/// gix cannot open a reftable repository at all; look for the tell-tale directory ourselves.
fn is_reftable_dir(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git/reftable").is_dir() || d.join("reftable").is_dir() && d.join("HEAD").is_file())
}

/// Make a repository handle safe for internal work in a worktree an agent controls: remove
/// every `filter.<driver>` from its in-memory configuration, so no clean, smudge or process
/// filter an agent planted can run while we hash, stage or check out files. (gix runs no
/// hooks and no fsmonitor in any case.)
pub fn harden(repo: &mut gix::Repository) -> Result<()> {
    let mut config = repo.config_snapshot_mut();
    let ids: Vec<_> = config.sections_and_ids_by_name("filter").into_iter().flatten().map(|(_, id)| id).collect();
    for id in ids {
        config.remove_section_by_id(id);
    }
    config.commit().context("could not apply the hardened configuration")?;
    Ok(())
}

/// Rewrite a worktree's index from `tree`, with stat data from the files on disk, so `git
/// status` sees the worktree as clean where it matches the tree.
pub fn write_index(repo: &gix::Repository, tree: ObjectId) -> Result<()> {
    let workdir = repo.workdir().context("the repository has no working directory")?.to_owned();
    let mut index = repo.index_from_tree(&tree).context("could not build the index")?;
    for (entry, path) in index.entries_mut_with_paths() {
        let Ok(rela) = gix::path::from_bstr(path) else { continue };
        let file = workdir.join(rela);
        if let Ok(meta) = gix::index::fs::Metadata::from_path_no_follow(&file) {
            if let Ok(stat) = gix::index::entry::Stat::from_fs(&meta) {
                entry.stat = stat;
            }
        }
    }
    index.write(Default::default()).context("could not write the index")?;
    Ok(())
}

/// Make the files of `wt`'s worktree, which match tree `from`, match tree `to`: each file added
/// or changed between the two written (through the handle's conversions to the worktree, so
/// `eol` and `text` apply; harden the handle first, so no filter driver runs), exec bit and
/// symlinks included, and each file removed deleted (with the directories it leaves empty).
/// Submodules are left alone. The index is not touched.
pub fn checkout_changes(wt: &gix::Repository, from: ObjectId, to: ObjectId) -> Result<()> {
    use gix::object::tree::diff::ChangeDetached as Change;
    use gix::objs::tree::EntryKind;
    let workdir = wt.workdir().context("the worktree has no working directory")?.to_owned();
    let tree = |id: ObjectId| wt.find_tree(id).context("could not read a tree to check out");
    let (old, new) = (tree(from)?, tree(to)?);
    let changes = wt
        .diff_tree_to_tree(Some(&old), Some(&new), gix::diff::Options::default().with_rewrites(None))
        .context("could not compare the trees to check out")?;
    let (mut pipeline, _) = wt.filter_pipeline(Some(to)).context("could not set up the conversion to the worktree")?;
    for change in changes {
        let (location, write) = match change {
            Change::Deletion { location, entry_mode, .. } => {
                if entry_mode.is_tree() || entry_mode.kind() == EntryKind::Commit {
                    continue;
                }
                (location, None)
            }
            Change::Addition { location, entry_mode, id, .. }
            | Change::Modification { location, entry_mode, id, .. }
            | Change::Rewrite { location, entry_mode, id, .. } => {
                if entry_mode.is_tree() || entry_mode.kind() == EntryKind::Commit {
                    continue;
                }
                (location, Some((entry_mode.kind(), id)))
            }
        };
        let rela = gix::path::from_bstr(location.as_bstr()).context("a path to check out is not valid here")?;
        let path = workdir.join(&rela);
        // A file becomes a link or the other way round: whatever is there goes first.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&path).with_context(|| format!("could not replace '{}'", path.display()))?;
        }
        let Some((kind, id)) = write else {
            let mut dir = path.parent();
            while let Some(d) = dir.filter(|d| *d != workdir) {
                if std::fs::remove_dir(d).is_err() {
                    break;
                }
                dir = d.parent();
            }
            continue;
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
        }
        let data = read_blob(wt, id)?;
        if kind == EntryKind::Link {
            let target = gix::path::from_bstr(data.as_bstr()).context("a link target is not valid here")?;
            std::os::unix::fs::symlink(&target, &path)
                .with_context(|| format!("could not make the link '{}'", path.display()))?;
            continue;
        }
        let mut converted = pipeline
            .convert_to_worktree(&data, location.as_bstr(), Default::default())
            .with_context(|| format!("could not convert '{}'", path.display()))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut converted, &mut bytes)
            .with_context(|| format!("could not convert '{}'", path.display()))?;
        std::fs::write(&path, &bytes).with_context(|| format!("could not write '{}'", path.display()))?;
        if kind == EntryKind::BlobExecutable {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("could not make '{}' executable", path.display()))?;
        }
    }
    Ok(())
}

/// Who loop writes are made as.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub email: String,
    /// False when neither the environment nor the configuration names anyone.
    pub configured: bool,
}

impl Identity {
    /// Resolve as git does for a committer: `GIT_COMMITTER_*` (passed in by the caller),
    /// then `committer.*`, then `user.*`, then `EMAIL`; else git-loop's fallback.
    pub fn resolve(repo: &gix::Repository, env: &crate::context::GitIdentityEnv, host: &str) -> Identity {
        let config = repo.config_snapshot();
        let get =
            |key: &str| config.string(key).map(|v| v.to_str_lossy().into_owned()).filter(|v| !v.trim().is_empty());
        let name = env.name.clone().or_else(|| get("committer.name")).or_else(|| get("user.name"));
        let email = env
            .email
            .clone()
            .or_else(|| get("committer.email"))
            .or_else(|| get("user.email"))
            .or_else(|| env.fallback_email.clone());
        Identity {
            configured: name.is_some() && email.is_some(),
            name: name.unwrap_or_else(|| FALLBACK_NAME.to_owned()),
            email: email.unwrap_or_else(|| format!("loop@{host}")),
        }
    }

    /// The signature at `at` (UTC).
    pub fn signature(&self, at: DateTime<Utc>) -> gix::actor::Signature {
        gix::actor::Signature {
            name: self.name.as_str().into(),
            email: self.email.as_str().into(),
            time: gix::date::Time { seconds: at.timestamp(), offset: 0 },
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} <{}>", self.name, self.email)
    }
}

pub fn write_blob(repo: &gix::Repository, bytes: &[u8]) -> Result<ObjectId> {
    write_object_bytes(repo, gix::objs::Kind::Blob, bytes)
}

/// Write an object of any kind as a loose object (see `write_object_bytes`).
pub fn write_object(repo: &gix::Repository, kind: gix::objs::Kind, data: &[u8]) -> Result<ObjectId> {
    write_object_bytes(repo, kind, data)
}

/// Run a write of gix's object writer again when the loose object could not be put in place
/// because its fan-out directory vanished under it: `git gc` and `git prune-packed` remove the
/// fan-out directories they empty, and gix makes the directory, then renames its temporary
/// file into it, without trying again (git does). Ten tries, then the error stands.
pub fn retry_vanished<T, E>(mut write: impl FnMut() -> std::result::Result<T, E>) -> std::result::Result<T, E>
where
    E: std::error::Error + 'static,
{
    let mut tries = 0;
    loop {
        match write() {
            Err(err) if tries < 10 && vanished(&err) => tries += 1,
            done => return done,
        }
    }
}

/// Whether an I/O "not found" is among an error's causes.
fn vanished(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(err) = cause {
        if is_not_found(err) {
            return true;
        }
        cause = err.source();
    }
    false
}

/// Whether `err` itself is an I/O "not found" (a file or directory vanished under a writer).
pub fn is_not_found(err: &(dyn std::error::Error + 'static)) -> bool {
    err.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
}

/// Objects up to this size are written as one stored (uncompressed) deflate block.
const SMALL_OBJECT: usize = 32 * 1024;

/// Write an encoded object. Small ones — claim records, journal events, task operations, the
/// commits and trees around them — are written here as a loose object whose zlib stream is a
/// single stored block: setting up a real compressor costs more than these records weigh
/// (zlib-rs zeroes ~300 KiB of state per object, a few hundred microseconds and page faults
/// per process). Any git reads the result; `git gc` recompresses it into a pack. Larger
/// objects go through gix's compressed writer.
fn write_object_bytes(repo: &gix::Repository, kind: gix::objs::Kind, data: &[u8]) -> Result<ObjectId> {
    let id = gix::objs::compute_hash(repo.object_hash(), kind, data).context("could not hash an object")?;
    if data.len() > SMALL_OBJECT {
        use gix::objs::Write as _;
        return retry_vanished(|| repo.objects.write_buf(kind, data)).context("could not write an object");
    }
    // Only a loose copy is looked for: asking the object database about a missing object
    // makes it look for new packs on disk, every time. A copy in a pack is harmless.
    let hex = id.to_string();
    let dir = repo.objects.store_ref().path().join(&hex[..2]);
    if dir.join(&hex[2..]).exists() {
        return Ok(id);
    }
    let mut raw = gix::objs::encode::loose_header(kind, data.len() as u64).to_vec();
    raw.extend_from_slice(data);
    let stream = zlib_stored(&raw);
    let tmp = dir.join(format!("tmp_obj_{}", crate::ids::random_base32(10)));
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        // A repack's `prune-packed` removes fan-out directories it empties, so the directory
        // can vanish between making it and creating the file in it: make it again, as git
        // does. Once our file is in it, it is not empty and stays.
        let mut attempts = 0;
        let mut file = loop {
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(err).with_context(|| format!("could not create '{}'", dir.display())),
            }
            match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o444).open(&tmp) {
                Ok(file) => break file,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound && attempts < 10 => attempts += 1,
                Err(err) => return Err(err).with_context(|| format!("could not create '{}'", tmp.display())),
            }
        };
        if let Err(err) = file.write_all(&stream) {
            // Out of space, most likely: leave nothing half-written behind.
            drop(file);
            let _ = std::fs::remove_file(&tmp);
            return Err(err).with_context(|| format!("could not write '{}'", tmp.display()));
        }
    }
    crate::failpoint::write_point();
    let path = dir.join(&hex[2..]);
    if let Err(err) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(err).with_context(|| format!("could not store object {id}"));
    }
    Ok(id)
}

/// A zlib stream holding `data` in stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = data.chunks(65_535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(if chunks.peek().is_none() { 0x01 } else { 0x00 });
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for byte in data {
        a = (a + u32::from(*byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

/// Encode and write any object.
fn write_encoded(repo: &gix::Repository, object: &impl gix::objs::WriteTo) -> Result<ObjectId> {
    let mut buf = Vec::with_capacity(256);
    object.write_to(&mut buf).context("could not encode an object")?;
    write_object_bytes(repo, object.kind(), &buf)
}

/// Write a tree of plain files (name, blob id); names must be valid and unique.
pub fn write_tree(repo: &gix::Repository, files: &[(&str, ObjectId)]) -> Result<ObjectId> {
    let mut entries: Vec<gix::objs::tree::Entry> = files
        .iter()
        .map(|(name, oid)| gix::objs::tree::Entry {
            mode: gix::objs::tree::EntryKind::Blob.into(),
            filename: (*name).into(),
            oid: *oid,
        })
        .collect();
    entries.sort();
    let tree = gix::objs::Tree { entries };
    write_encoded(repo, &tree)
}

/// The empty tree, written once so that packs and fsck never miss it.
pub fn empty_tree(repo: &gix::Repository) -> Result<ObjectId> {
    write_encoded(repo, &gix::objs::Tree::empty())
}

/// Write a commit with an explicit signature (author = committer = `sig`).
pub fn write_commit(
    repo: &gix::Repository,
    tree: ObjectId,
    parents: &[ObjectId],
    message: &str,
    sig: &gix::actor::Signature,
) -> Result<ObjectId> {
    let commit = gix::objs::Commit {
        tree,
        parents: parents.iter().copied().collect(),
        author: sig.clone(),
        committer: sig.clone(),
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    write_encoded(repo, &commit)
}

/// What a ref holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Direct(ObjectId),
    /// A symbolic ref (`ref: <name>`), naming the ref it points to.
    Symbolic(String),
}

/// What a ref points to, if it exists and is a direct ref (a symbolic ref reads as absent;
/// readers of records use [`find_ref`], which tells them apart).
pub fn ref_target(repo: &gix::Repository, name: &str) -> Result<Option<ObjectId>> {
    Ok(match find_ref(repo, name)? {
        Some(Found::Direct(id)) => Some(id),
        Some(Found::Symbolic(_)) | None => None,
    })
}

/// Read a ref: `None` if it does not exist. A bad line in packed-refs does not make a healthy
/// ref unreadable (see `packed`): gix reads the loose file first, so with no loose file its
/// failure came from packed-refs, which is then read line by line.
pub fn find_ref(repo: &gix::Repository, name: &str) -> Result<Option<Found>> {
    match repo.try_find_reference(name) {
        Ok(found) => Ok(found.map(|r| match r.target() {
            gix::refs::TargetRef::Object(id) => Found::Direct(id.to_owned()),
            gix::refs::TargetRef::Symbolic(to) => Found::Symbolic(to.as_bstr().to_string()),
        })),
        Err(err) => {
            if !repo.common_dir().join(name).exists() {
                if let Some(found) = packed::lookup_around_bad_lines(repo, name) {
                    return Ok(found.map(Found::Direct));
                }
            }
            Err(anyhow::Error::from(err).context(format!("could not read ref '{name}'")))
        }
    }
}

/// What a ref listing could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// A loose ref file that cannot be parsed (its ref name, or the listing's fallback name).
    Ref(String),
    /// A line of packed-refs that cannot be parsed: no ref of ours is at fault.
    PackedRefs(packed::BadLine),
}

impl Unreadable {
    /// The name a report files this under: the ref, or `packed-refs`.
    pub fn name(&self) -> String {
        match self {
            Unreadable::Ref(name) => name.clone(),
            Unreadable::PackedRefs(_) => packed::NAME.to_owned(),
        }
    }
}

/// One item of a ref listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    Ref { name: String, target: Found },
    Unreadable(Unreadable),
}

/// Every ref whose name starts with `prefix`, in name order, with what could not be read.
///
/// gix lists packed refs from a binary search for the prefix, and a bad line in packed-refs can
/// throw that search off, silently skipping healthy refs (a held claim would read as free).
/// So while packed-refs looks damaged (`packed::looks_damaged`, one read of the file), the
/// loose refs are listed by gix and the packed ones read line by line, and the first bad line
/// is listed once, as what it is.
pub fn refs_prefixed(repo: &gix::Repository, prefix: &str) -> Result<Vec<Listed>> {
    let fallback = format!("{prefix}(unreadable)");
    let listed = |item: std::result::Result<(String, Found), gix::Error>| match item {
        Ok((name, target)) => Listed::Ref { name, target },
        Err(err) => Listed::Unreadable(unreadable(repo, &err, &fallback)),
    };
    let found = |target: gix::refs::TargetRef<'_>| match target {
        gix::refs::TargetRef::Object(id) => Found::Direct(id.to_owned()),
        gix::refs::TargetRef::Symbolic(to) => Found::Symbolic(to.as_bstr().to_string()),
    };
    let mut out = Vec::new();
    if !packed::looks_damaged(repo) {
        let platform = repo.references().context("could not list refs")?;
        for item in platform.prefixed(prefix).with_context(|| format!("could not list refs under '{prefix}'"))? {
            out.push(listed(item.map(|r| (r.name().as_bstr().to_string(), found(r.target())))));
        }
        return Ok(out);
    }
    let relative: &gix::path::RelativePath =
        prefix.try_into().with_context(|| format!("'{prefix}' is not a valid ref prefix"))?;
    let loose =
        repo.refs.loose_iter_prefixed(relative).with_context(|| format!("could not list refs under '{prefix}'"))?;
    for item in loose {
        out.push(listed(item.map(|r| (r.name.as_bstr().to_string(), found(r.target.to_ref())))));
    }
    let loose_names: std::collections::HashSet<String> = out.iter().map(listed_name).collect();
    for (name, id) in packed::refs_prefixed(repo, prefix) {
        if !loose_names.contains(&name) {
            out.push(Listed::Ref { name, target: Found::Direct(id) });
        }
    }
    out.sort_by_key(listed_name);
    if let Some(line) = packed::bad_lines(repo).into_iter().next() {
        out.push(Listed::Unreadable(Unreadable::PackedRefs(line)));
    }
    Ok(out)
}

fn listed_name(listed: &Listed) -> String {
    match listed {
        Listed::Ref { name, .. } => name.clone(),
        Listed::Unreadable(unreadable) => unreadable.name(),
    }
}

/// What a failed item of a ref listing was: a loose ref file gix names in its error (and that
/// exists), else a bad line of packed-refs when there is one, else `fallback`.
pub fn unreadable(repo: &gix::Repository, err: &gix::Error, fallback: &str) -> Unreadable {
    let named = unreadable_ref_name(err, fallback);
    if named != fallback && repo.common_dir().join(&named).is_file() {
        return Unreadable::Ref(named);
    }
    match packed::bad_lines(repo).into_iter().next() {
        Some(line) => Unreadable::PackedRefs(line),
        None => Unreadable::Ref(named),
    }
}

/// The ref name gix gives in an error about a ref it could not parse (it names the file);
/// `fallback` when it names none.
pub fn unreadable_ref_name(err: &gix::Error, fallback: &str) -> String {
    let text = format!("{err:#}");
    text.split(['"', '\''])
        .find_map(|part| part.find("refs/").map(|at| part[at..].to_owned()))
        .unwrap_or_else(|| fallback.to_owned())
}

/// Read a blob's bytes.
pub fn read_blob(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>> {
    let blob = repo.find_blob(id).with_context(|| format!("could not read blob {id}"))?;
    Ok(blob.data.clone())
}

/// Read one file of a commit's tree (top level only).
pub fn read_commit_file(repo: &gix::Repository, commit: ObjectId, file: &str) -> Result<Option<Vec<u8>>> {
    let commit = repo.find_commit(commit).with_context(|| format!("could not read commit {commit}"))?;
    let tree = commit.tree().context("could not read the commit's tree")?;
    let Some(entry) = tree.find_entry(file) else {
        return Ok(None);
    };
    let oid = entry.object_id();
    Ok(Some(read_blob(repo, oid)?))
}

/// Read one file of a commit's tree (top level only), unless it is larger than `limit` bytes:
/// `Some(Err(size))` then, and the blob is never loaded.
pub fn read_commit_file_within(
    repo: &gix::Repository,
    commit: ObjectId,
    file: &str,
    limit: usize,
) -> Result<Option<std::result::Result<Vec<u8>, usize>>> {
    let commit = repo.find_commit(commit).with_context(|| format!("could not read commit {commit}"))?;
    let tree = commit.tree().context("could not read the commit's tree")?;
    let Some(entry) = tree.find_entry(file) else {
        return Ok(None);
    };
    let oid = entry.object_id();
    let size = repo.find_header(oid).with_context(|| format!("could not read blob {oid}"))?.size() as usize;
    if size > limit {
        return Ok(Some(Err(size)));
    }
    Ok(Some(Ok(read_blob(repo, oid)?)))
}

/// A commit's parents and message.
pub fn read_commit(repo: &gix::Repository, id: ObjectId) -> Result<(Vec<ObjectId>, String)> {
    let commit = repo.find_commit(id).with_context(|| format!("could not read commit {id}"))?;
    let decoded = commit.decode().with_context(|| format!("could not decode commit {id}"))?;
    let parents = decoded.parents().collect();
    Ok((parents, decoded.message.to_str_lossy().into_owned()))
}

/// Resolve a revision such as `HEAD~2` or a branch name to a commit id.
pub fn resolve_commit(repo: &gix::Repository, rev: &str) -> Result<ObjectId> {
    let id = repo.rev_parse_single(rev).map_err(|_| {
        usage(format!("revision '{rev}' does not name a commit")).hint("use a branch name, tag or commit id")
    })?;
    let object = id.object().with_context(|| format!("could not read the object '{rev}' names"))?;
    let commit = object.peel_to_commit().map_err(|_| {
        usage(format!("revision '{rev}' does not name a commit")).hint("use a branch name, tag or commit id")
    })?;
    Ok(commit.id)
}

/// Whether git refuses to check out a tree entry of this name (`symlink`: the entry is a
/// symbolic link): gix's `verify_path` with git's defaults of `core.protectNTFS` and
/// `core.protectHFS` — `.git` in any case, with the trailing dots and spaces NTFS drops, as
/// NTFS's short name `git~1`, with the invisible characters HFS ignores; a linked
/// `.gitmodules`; empty, `.`, `..`, a slash — and a NUL byte.
pub fn refused_path_component(name: &[u8], symlink: bool) -> bool {
    use gix::validate::path::component;
    let options = component::Options { protect_windows: false, protect_hfs: true, protect_ntfs: true };
    let mode = symlink.then_some(component::Mode::Symlink);
    name.contains(&0) || component(name.into(), mode, options).is_err()
}

/// The git program as unit tests run it: in `dir`, without the machine's or the user's
/// configuration, as a fixed identity. Its trimmed stdout; a failure fails the test with
/// git's stderr.
#[cfg(test)]
pub(crate) fn for_tests(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@e")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_COMMITTER_EMAIL", "t@e")
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_names_git_refuses_in_a_tree_are_refused() {
        for bad in
            [&b""[..], b".", b"..", b"a/b", b"a\0b", b".git", b".GIT", b".Git. ", b"GIT~1", ".g\u{200c}it".as_bytes()]
        {
            assert!(super::refused_path_component(bad, false), "{:?} is refused", String::from_utf8_lossy(bad));
        }
        for good in [&b".gitignore"[..], b".github", b"git", b"x.git", b"sub", b".git~2", b"..."] {
            assert!(!super::refused_path_component(good, false), "{:?} is a good name", String::from_utf8_lossy(good));
        }
    }

    use super::retry_vanished;

    #[test]
    fn small_objects_written_as_stored_zlib_read_back_through_gix_and_git() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = gix::init(dir.path()).expect("init");
        for len in [0usize, 1, 300, 32 * 1024, 32 * 1024 + 1, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let id = super::write_blob(&repo, &data).expect("write");
            assert_eq!(repo.find_blob(id).expect("read back").data, data, "length {len}");
        }
        let fsck = std::process::Command::new("git")
            .args(["fsck", "--strict"])
            .current_dir(dir.path())
            .output()
            .expect("git fsck");
        assert!(fsck.status.success(), "git fsck: {}", String::from_utf8_lossy(&fsck.stderr));
    }

    /// A write whose loose object lost its fan-out directory is tried again; any other error
    /// stands at once, and a directory that keeps vanishing gives up after ten tries.
    #[test]
    fn a_write_is_tried_again_only_when_its_directory_vanished() {
        let gone = || std::io::Error::new(std::io::ErrorKind::NotFound, "persist");
        let mut calls = 0;
        let ok: Result<u32, std::io::Error> = retry_vanished(|| {
            calls += 1;
            if calls < 3 {
                Err(gone())
            } else {
                Ok(7)
            }
        });
        assert_eq!((ok.ok(), calls), (Some(7), 3));
        let mut calls = 0;
        let denied: Result<u32, std::io::Error> = retry_vanished(|| {
            calls += 1;
            Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no"))
        });
        assert_eq!((denied.is_err(), calls), (true, 1));
        let mut calls = 0;
        let never: Result<u32, std::io::Error> = retry_vanished(|| {
            calls += 1;
            Err(gone())
        });
        assert_eq!((never.is_err(), calls), (true, 11));
    }
}
