//! Every file and directory git-loop keeps under `.git/loop/` (a clone's machine-local state:
//! caches, locks, sessions, worktrees), named in one place. docs/storage.md ("Files under
//! `.git/loop/`") says what each holds; nothing else formats these names.

use std::path::{Path, PathBuf};

/// The box in a room (a session's directory, or a confined command's room under
/// `.git/loop/rooms/`): what a confined run may write besides its worktree — its result file,
/// its reports, its home, its git directory (`sandbox`). A session's box exists confined or not:
/// its result file is there.
pub fn box_in(room: &Path) -> PathBuf {
    room.join("box")
}

/// The `.git/loop/` directory of one clone (shared by its worktrees).
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout under the repository's common directory (`.git`).
    pub fn of(common_dir: &Path) -> Layout {
        Layout { root: common_dir.join("loop") }
    }

    /// The layout whose root is `root` (a `.git/loop` directory).
    pub fn at(root: &Path) -> Layout {
        Layout { root: root.to_owned() }
    }

    /// `.git/loop` itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The marker `git loop stop --all` leaves for a running walk or mission to stop.
    pub fn cancel(&self) -> PathBuf {
        self.root.join("cancel")
    }

    /// When `next --claim` last lost a claim (its claimers spread out for a while).
    pub fn contended(&self) -> PathBuf {
        self.root.join("contended")
    }

    /// Held exclusively while this clone fetches into its mirrors.
    pub fn fetch_lock(&self) -> PathBuf {
        self.root.join("fetch.lock")
    }

    /// Held shared by every ref and notes transaction of git-loop (`store::locks`).
    pub fn writing(&self) -> PathBuf {
        self.root.join("writing")
    }

    /// Held while the repository is repacked (`store::maintenance`).
    pub fn maintenance_lock(&self) -> PathBuf {
        self.root.join("maintenance.lock")
    }

    /// The branches this clone pruned (`git loop prune`), at the heads it pruned them at
    /// (`store::pruned`): a sync does not bring them back from the remote.
    pub fn pruned(&self) -> PathBuf {
        self.root.join("pruned.json")
    }

    /// The shared settings record this clone last adopted (`store::shared`): its commit id.
    pub fn settings_adopted(&self) -> PathBuf {
        self.root.join("settings-adopted")
    }

    /// The clone's Lamport clock (`store::lamport`).
    pub fn lamport(&self) -> PathBuf {
        self.root.join("lamport")
    }

    /// When this clone first saw each claim record (`store::lease`: leases are measured by the
    /// watcher's own clock).
    pub fn leases(&self) -> PathBuf {
        self.root.join("leases")
    }

    /// The secret this clone's claim capabilities are made from (`store::claim`).
    pub fn claim_secret(&self) -> PathBuf {
        self.root.join("claim-secret")
    }

    /// This clone's random id.
    pub fn clone_id(&self) -> PathBuf {
        self.root.join("clone-id")
    }

    /// Where `git fast-import` leaves the ids of what an import wrote (`task::create_all`),
    /// named by the importing process; removed when the import ends.
    pub fn import_marks(&self, pid: u32) -> PathBuf {
        self.root.join(format!("import-marks-{pid}"))
    }

    /// The settings that steered the last walk, and those changed while an unconfined session
    /// ran (`walk::steering`).
    pub fn steering(&self) -> PathBuf {
        self.root.join("steering-v1.json")
    }

    /// The derived task index (`store::index`).
    pub fn index(&self) -> PathBuf {
        self.root.join("index-v6")
    }

    /// The derived cache of node claims (`store::index`), stamped apart from the tasks'.
    pub fn claims_index(&self) -> PathBuf {
        self.root.join("claims-v1")
    }

    /// Task indexes of earlier versions, which nothing reads any more.
    pub fn old_indexes(&self) -> [PathBuf; 5] {
        ["index-v1", "index-v2", "index-v3", "index-v4", "index-v5"].map(|name| self.root.join(name))
    }

    /// The cache of journal commits already read (`store::journal`).
    pub fn journal_cache(&self) -> PathBuf {
        self.root.join("journal-v1")
    }

    /// One task's events, indexed (`store::journal`).
    pub fn journal_tasks(&self) -> PathBuf {
        self.root.join("journal-tasks")
    }

    /// The default root of try worktrees (`loop.worktrees` overrides it).
    pub fn worktrees(&self) -> PathBuf {
        self.root.join("worktrees")
    }

    /// Where a worktree's registration is made before it is renamed into `worktrees/` whole,
    /// and where one is renamed to before it is deleted (`git::worktree`); used only under the
    /// worktree lock.
    pub fn worktree_staging(&self) -> PathBuf {
        self.root.join("worktree-staging")
    }

    /// Held while worktrees are added or removed.
    pub fn worktree_lock(&self) -> PathBuf {
        self.root.join("worktree.lock")
    }

    /// Every session's directory.
    pub fn sessions(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// One session's files (prompt, log, result, record).
    pub fn session(&self, session: &str) -> PathBuf {
        self.sessions().join(session)
    }

    /// The room of one confined command (checks, setup run outside a session's own): its box
    /// and the `.git` file its worktree shows inside the sandbox; removed when it ends.
    pub fn room(&self, name: &str) -> PathBuf {
        self.root.join("rooms").join(name)
    }

    /// A reviewer session's checkout of the work it reviews (detached, thrown away after).
    pub fn review_checkout(&self, session: &str) -> PathBuf {
        self.session(session).join("checkout")
    }

    /// A race's files: the judge's prompt and verdict, by task and the tries racing.
    pub fn race(&self, task: &str, tries: &[u32]) -> PathBuf {
        let tries: Vec<String> = tries.iter().map(ToString::to_string).collect();
        self.root.join("races").join(format!("{task}-{}", tries.join("-")))
    }

    /// What a try's setup command left in its worktree, untracked, that is never committed.
    pub fn setup_leftovers(&self, task: &str, try_number: u32) -> PathBuf {
        self.root.join("setup").join(format!("{task}-{try_number}"))
    }

    /// The log of the checks `hand-back --keep` ran on a try.
    /// The output of the landing queue's last checks on target `name` (its lander claim's name).
    pub fn landing_log(&self, name: &str) -> PathBuf {
        self.root.join("landing").join(format!("{name}.log"))
    }

    /// The output of the checks that failed `task`'s landing, kept for a person.
    pub fn landing_failure_log(&self, task: &str) -> PathBuf {
        self.root.join("landing").join(format!("{task}-checks.log"))
    }

    pub fn kept_checks_log(&self, task: &str, try_number: u32) -> PathBuf {
        self.root.join(format!("checks-{task}-{try_number}.log"))
    }

    /// One project's files of a mission (its child walk's output).
    pub fn mission_project(&self, mission: &str, project: &str) -> PathBuf {
        self.root.join("missions").join(mission).join(project)
    }
}
