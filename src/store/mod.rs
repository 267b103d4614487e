//! The store: the only code that writes refs and objects. Tasks, claims, the journal and
//! completion notes each have a module; `cas` is the transaction type every ref write goes
//! through; `remote` arbitrates claims through the shared remote; `sync` exchanges state with
//! it; `maintenance` keeps the object database's packs and loose objects few; `objects` is
//! what the layers above ask of the repository's refs, objects and files. Record formats are
//! documented once, in docs/storage.md.
//!
//! The repository handle (`Store::repo`) is private to the store: only the store's modules and
//! `git` (which they call) touch a `gix::Repository` of a store.

pub mod archive;
pub mod cas;
pub mod claim;
pub mod claim_record;
pub mod events;
pub mod flock;
pub mod fold;
pub mod foreign;
pub mod index;
pub mod journal;
pub mod lamport;
pub mod layout;
pub mod lease;
pub mod ledger;
pub mod limits;
pub mod locks;
pub mod maintenance;
pub mod notes;
pub mod objects;
pub mod pruned;
pub mod ready;
pub mod remote;
pub mod settings;
pub mod shared;
pub mod sync;
pub mod task;
pub mod usage;
pub mod watch;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use gix::bstr::ByteSlice;

use crate::context::Context;
use crate::error::usage;
use crate::git;
use crate::ids::{random_base32, WriterId};
use crate::refs;

/// The repository, opened for loop work.
pub struct Store {
    /// The repository, for the store's modules only (see the module documentation).
    repo: gix::Repository,
    /// Who loop writes are made as.
    pub identity: git::Identity,
    /// The host name, for the fallback committer identity.
    host: String,
    /// Where "now" comes from (pinned in tests).
    clock: crate::context::Clock,
    git_identity: crate::context::GitIdentityEnv,
    /// The tip, last `seq` and last Lamport clock of each journal chain this process appended
    /// to: the next append expects them instead of reading the chain again (a chain moved
    /// meanwhile fails the compare-and-swap, and is read).
    journal_tips: std::sync::Mutex<std::collections::HashMap<String, (gix::ObjectId, u64, u64)>>,
    /// The identity of the packed-refs file gix was last made to read (see `fresh_refs`).
    packed_seen: std::sync::Mutex<Option<PackedIdentity>>,
    /// The shared refs this handle changed and has not yet published (see `note_written`).
    written: Written,
    /// Remote refs just confirmed to equal their mirrors (see `note_confirmed`).
    confirmed: std::sync::Mutex<std::collections::HashSet<String>>,
    /// When refs were last mirrored from the remote (see `remote::mirrored_recently`).
    mirror_reads: std::sync::Mutex<remote::MirrorReads>,
}

/// The shared refs a store handle changed: what a command publishes to `loop.remote` before it
/// ends (`sync::publish`). Shared, so the command line can collect them from every handle it
/// opened.
pub type Written = std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>;

/// What tells two packed-refs files apart: the file (it is always replaced by rename), its
/// size and its times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PackedIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Store {
    /// Open the repository containing `dir` (see `git::open` for what is refused).
    pub fn open(ctx: &Context, dir: &Path) -> Result<Store> {
        let repo = git::open(dir, &ctx.host)?;
        let identity = git::Identity::resolve(&repo, &ctx.git_identity, &ctx.host);
        Ok(Store {
            repo,
            identity,
            host: ctx.host.clone(),
            clock: ctx.clock.clone(),
            git_identity: ctx.git_identity.clone(),
            journal_tips: Default::default(),
            packed_seen: Default::default(),
            written: Default::default(),
            confirmed: Default::default(),
            mirror_reads: Default::default(),
        })
    }

    /// Remember that this handle changed `name`, so that it is published to `loop.remote`.
    /// Mirrors of a remote and claims (decided by the remote itself, or local to the clone)
    /// and missions (never exchanged) are not shared state to publish.
    pub fn note_written(&self, name: &str) {
        let shared =
            !name.starts_with(refs::REMOTES) && !name.starts_with(refs::CLAIMS) && !name.starts_with(refs::MISSIONS);
        if shared {
            self.written.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_owned());
        }
    }

    /// The refs changed since the last call, forgotten here (the caller publishes them).
    pub fn take_written(&self) -> std::collections::BTreeSet<String> {
        std::mem::take(&mut *self.written.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Remember that the remote's `name` was just confirmed to equal our mirror of it (by a
    /// push leased on it), so that a reader may merge the mirror instead of fetching.
    pub fn note_confirmed(&self, name: &str) {
        self.confirmed.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_owned());
    }

    /// Whether `note_confirmed` was said of `name` since the last call (it is forgotten here).
    pub fn take_confirmed(&self, name: &str) -> bool {
        self.confirmed.lock().unwrap_or_else(|e| e.into_inner()).remove(name)
    }

    /// The refs changed and not yet taken, left in place (a publish that may fail).
    pub fn written_so_far(&self) -> std::collections::BTreeSet<String> {
        self.written.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The set `note_written` fills, for a caller that publishes after the handle is gone.
    pub fn written(&self) -> Written {
        self.written.clone()
    }

    /// Leave this handle's object database to the end of the process: dropping the handle
    /// then frees everything but it. For a command that exits once its store is dropped, where
    /// freeing the database's table of pack slots (`git::open` sizes it for long walks: a
    /// thousand entries, each released through an atomic swap) cost more instructions than
    /// taking a claim. Call it once per process: each call keeps one database.
    pub fn keep_objects_until_exit(&self) {
        std::mem::forget(self.repo.objects.store());
    }

    /// Make sure gix reads the packed-refs file as it is now. gix keeps its copy while the
    /// file's modification time is unchanged, and file times tick coarsely (milliseconds):
    /// a packed-refs that `git pack-refs` or `git gc` replaced within the same tick would go
    /// unseen, and a ref it packed — its loose file removed — would read as absent (a claim as
    /// free, a create-if-absent as allowed). Like git, tell files apart by inode, size and
    /// times, and have gix read the file again when they differ. Called before every
    /// compare-and-swap, claim and task read, and listing of the board or the journal.
    pub fn fresh_refs(&self) {
        use std::os::unix::fs::MetadataExt as _;
        let Ok(meta) = std::fs::metadata(self.repo.common_dir().join("packed-refs")) else {
            // No packed-refs: gix notices a file that went away by itself.
            return;
        };
        let now = PackedIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        };
        let mut seen = self.packed_seen.lock().unwrap_or_else(|e| e.into_inner());
        if *seen != Some(now) && self.repo.refs.force_refresh_packed_buffer().is_ok() {
            *seen = Some(now);
        }
    }

    /// Ref `name` as it is now, a ref `git pack-refs` moved meanwhile included: read fresh
    /// (`fresh_refs`), and when it is not there, read again once packed-refs is looked at anew.
    /// `git pack-refs` writes the new packed-refs before it deletes the loose files it packed,
    /// so a loose ref found gone after the first look is in the packed-refs a second look sees;
    /// without it a claim packed between the two read as free (a release as "not held", leaving
    /// the live record in packed-refs: a released claim back, robustness L4).
    pub fn find_ref_settled(&self, name: &str) -> Result<Option<git::Found>> {
        self.fresh_refs();
        match git::find_ref(&self.repo, name)? {
            None => {
                self.fresh_refs();
                git::find_ref(&self.repo, name)
            }
            found => Ok(found),
        }
    }

    /// The current time, as the context's clock says.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        match &self.clock {
            crate::context::Clock::System => chrono::Utc::now(),
            crate::context::Clock::Fixed(at) => *at,
        }
    }

    /// The signature loop writes carry, now.
    pub fn signature(&self) -> gix::actor::Signature {
        self.identity.signature(self.now())
    }

    /// The main working tree (linked worktrees share the same loop state).
    pub fn workdir(&self) -> &Path {
        self.repo.workdir().expect("bare repositories are refused when opening")
    }

    /// `<common-dir>/loop`, machine-local runtime state, created on demand.
    pub fn loop_dir(&self) -> Result<PathBuf> {
        Ok(self.layout()?.root().to_owned())
    }

    /// The files under `<common-dir>/loop` (see [`layout`]); the directory is created on demand.
    pub fn layout(&self) -> Result<layout::Layout> {
        let layout = layout::Layout::of(self.repo.common_dir());
        let dir = layout.root();
        std::fs::create_dir_all(dir).with_context(|| format!("could not create '{}'", dir.display()))?;
        Ok(layout)
    }

    /// This clone's id: random, made once, kept in `.git/loop/clone-id`. It names this clone's
    /// journal writers and breaks ties when operations from two clones are ordered.
    pub fn clone_id(&self) -> Result<String> {
        let path = self.layout()?.clone_id();
        if let Ok(text) = std::fs::read_to_string(&path) {
            let id = text.trim();
            if id.len() == 8 && id.parse::<WriterId>().is_ok() {
                return Ok(id.to_owned());
            }
        }
        // Write aside, then link into place: of two processes racing here, one link wins
        // and both read the winner's id.
        let fresh = random_base32(8);
        let aside = path.with_extension(format!("tmp-{}", random_base32(6)));
        std::fs::write(&aside, format!("{fresh}\n"))
            .with_context(|| format!("could not write '{}'", aside.display()))?;
        let linked = std::fs::hard_link(&aside, &path);
        let _ = std::fs::remove_file(&aside);
        if linked.is_err() {
            // Someone else's id is in place (or it was corrupt: replace it).
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let id = text.trim();
            if id.len() == 8 && id.parse::<WriterId>().is_ok() {
                return Ok(id.to_owned());
            }
            std::fs::write(&path, format!("{fresh}\n"))
                .with_context(|| format!("could not write '{}'", path.display()))?;
        }
        Ok(fresh)
    }

    /// A git configuration value, as a string.
    pub fn config(&self, key: &str) -> Option<String> {
        self.repo.config_snapshot().string(key).map(|v| v.to_str_lossy().into_owned())
    }

    /// Every `<prefix><rest>.<name> = value` in git configuration whose section is `prefix`'s
    /// first word (`loop.price.` reads `[loop "price.<model>"]` sections): (key, value), in
    /// the order git reads them.
    pub fn config_all_prefixed(&self, prefix: &str) -> Vec<(String, String)> {
        let config = self.repo.config_snapshot();
        let Some((section, sub)) = prefix.trim_end_matches('.').split_once('.') else { return Vec::new() };
        let mut out = Vec::new();
        let Some(sections) = config.plumbing().sections_by_name(section) else { return out };
        for s in sections {
            let Some(name) = s.header().subsection_name().map(|n| n.to_string()) else { continue };
            if !name.starts_with(&format!("{sub}.")) {
                continue;
            }
            let names: Vec<String> = s.value_names().map(|n| n.to_string()).collect();
            for value_name in names {
                if let Some(value) = s.value(&value_name) {
                    out.push((format!("{section}.{name}.{value_name}"), value.to_string()));
                }
            }
        }
        out
    }

    /// Every `loop.*` setting as git reads it (from every configuration file it reads): key to
    /// value, the values of a key given more than once joined by newlines. What a walk obeys,
    /// compared from one walk to the next (`walk::steering`).
    pub fn loop_settings(&self) -> std::collections::BTreeMap<String, String> {
        let config = self.repo.config_snapshot();
        let mut out: std::collections::BTreeMap<String, String> = Default::default();
        let Some(sections) = config.plumbing().sections_by_name("loop") else { return out };
        for s in sections {
            let prefix = match s.header().subsection_name() {
                Some(sub) => format!("loop.{sub}."),
                None => "loop.".to_owned(),
            };
            let names: Vec<String> = s.value_names().map(|n| n.to_string().to_ascii_lowercase()).collect();
            for name in names {
                for value in s.values(&name) {
                    let entry = out.entry(format!("{prefix}{name}")).or_default();
                    if !entry.is_empty() {
                        entry.push('\n');
                    }
                    entry.push_str(&value.to_string());
                }
            }
        }
        out
    }

    /// Every value of a multi-valued git configuration key, in the order git reads them.
    pub fn config_values(&self, key: &str) -> Vec<String> {
        let config = self.repo.config_snapshot();
        config.plumbing().raw_values(key).unwrap_or_default().iter().map(|v| v.to_string()).collect()
    }

    /// The remote that arbitrates claims (`loop.remote`), if one is configured.
    pub fn arbiter(&self) -> Option<String> {
        self.settings().remote()
    }

    /// The highest clock of a journal chain's or a task's tip, if `name` is either.
    pub fn clock_of_tip(&self, name: &str, tip: gix::ObjectId) -> Option<u64> {
        let repo = &self.repo;
        if name.starts_with(refs::JOURNAL) {
            journal::tip_lamport(repo, tip)
        } else if name.starts_with(refs::TASKS) {
            task::read_at(self, name, tip).ok().map(|t| t.lamport)
        } else {
            None
        }
    }

    /// The highest clock the refs hold: where a lost counter starts again.
    pub fn highest_clock_in_refs(&self) -> u64 {
        let repo = &self.repo;
        let chains = journal::chains(repo).unwrap_or_default();
        let tasks = task::list_refs(self).unwrap_or_default();
        let chain_clocks = chains.into_iter().filter_map(|(name, tip)| self.clock_of_tip(&name, tip));
        let task_clocks = tasks.into_iter().filter_map(|t| self.clock_of_tip(&t.name, t.tip.ok()?));
        chain_clocks.chain(task_clocks).max().unwrap_or(0)
    }

    /// The `loop.*` settings (see [`settings`]).
    pub fn settings(&self) -> settings::Settings<'_> {
        settings::Settings::of(self)
    }

    /// Set `key` in the repository's own config file (`.git/config`), as `git config` would:
    /// under `config.lock`, replacing the file in one rename.
    pub fn set_local_config(&mut self, key: &str, value: &str) -> Result<()> {
        let path = self.repo.common_dir().join("config");
        let mut file = gix::config::File::from_path_no_includes(path.clone(), gix::config::Source::Local)
            .with_context(|| format!("could not read '{}'", path.display()))?;
        file.set_raw_value(key, value).with_context(|| format!("could not set '{key}'"))?;
        let lock = path.with_extension("lock");
        let mut out = std::fs::OpenOptions::new().write(true).create_new(true).open(&lock).map_err(|_| {
            usage(format!("'{}' is locked by another git process", lock.display()))
                .hint(format!("wait for it to finish, or remove '{}' if none is running", lock.display()))
        })?;
        let written = file.write_to(&mut out).and_then(|()| out.flush());
        if let Err(err) = written.and_then(|()| std::fs::rename(&lock, &path)) {
            let _ = std::fs::remove_file(&lock);
            return Err(err).with_context(|| format!("could not write '{}'", path.display()));
        }
        // Re-open so the new value is visible to this process too.
        let workdir = self.workdir().to_owned();
        self.repo = git::open(&workdir, &self.host)?;
        self.identity = git::Identity::resolve(&self.repo, &self.git_identity, &self.host);
        Ok(())
    }
}

/// The journal writer for commands run by hand in this clone: one of a few shards per clone,
/// chosen by process id, so concurrent commands rarely contend on one ref.
pub fn clone_writer(store: &Store, ctx: &Context) -> Result<WriterId> {
    let shard = ctx.pid % 4;
    format!("c-{}-{shard}", store.clone_id()?).parse().map_err(Into::into)
}

/// A store over a new, empty repository in a temporary directory, for unit tests.
#[cfg(test)]
pub(crate) fn scratch() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).output().expect("git");
    assert!(out.status.success(), "git init");
    let store = Store::open(&Context::for_tests(), dir.path()).expect("open");
    (dir, store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ClaimKey;

    use crate::git::for_tests as git;

    /// What `git pack-refs` does between two reads, within one tick of the file clock: the
    /// claim's loose ref is packed and removed, and packed-refs keeps its modification time.
    #[test]
    fn a_ref_packed_within_one_tick_of_the_last_read_is_still_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = Context::for_tests();
        git(dir.path(), &["init", "-q"]);
        git(dir.path(), &["-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "i"]);
        git(dir.path(), &["update-ref", "refs/zzz/other", "HEAD"]);
        git(dir.path(), &["pack-refs", "--all"]);
        let packed = dir.path().join(".git/packed-refs");
        let before = std::fs::read_to_string(&packed).expect("packed-refs");
        let modified = std::fs::metadata(&packed).and_then(|m| m.modified()).expect("mtime");
        let store = Store::open(&ctx, dir.path()).expect("open");
        let key: ClaimKey = "node:t-aaaa".parse().expect("key");
        assert!(claim::read(&store, &key).expect("read").is_none(), "not claimed yet (packed-refs now read)");
        let opts =
            claim::AcquireOptions { holder: "h".into(), ttl: chrono::Duration::hours(1), reason: None, session: None };
        claim::acquire(&store, &ctx, &key, &opts).expect("acquire");
        let name = crate::refs::claim(&key);
        let oid = git::ref_target(&store.repo, &name).expect("read").expect("claimed");

        let (header, lines) = before.split_once('\n').expect("a header");
        let claim_line = format!("{oid} {name}");
        let mut lines: Vec<&str> = lines.lines().chain([claim_line.as_str()]).collect();
        lines.sort_by_key(|l| l.split_once(' ').map(|(_, name)| name).unwrap_or_default());
        let after = format!("{header}\n{}\n", lines.join("\n"));
        let tmp = dir.path().join(".git/packed-refs.new");
        std::fs::write(&tmp, after).expect("write");
        std::fs::File::options().write(true).open(&tmp).and_then(|f| f.set_modified(modified)).expect("mtime");
        std::fs::rename(&tmp, &packed).expect("rename");
        std::fs::remove_file(dir.path().join(".git").join(&name)).expect("prune the loose ref");

        let held = claim::read(&store, &key).expect("read").expect("the claim is still held");
        assert_eq!(held.oid, oid);
    }
}
