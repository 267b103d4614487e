//! What every command gets: the ambient context built from the process environment, where it
//! runs, and what it changed — published to the remote and looked after when it ends.

use std::path::PathBuf;

use anyhow::Result;

use super::output::{self, print_error};
use git_loop::context::{Clock, Context, GitIdentityEnv, SessionEnv};
use git_loop::store::Store;

/// What every command gets: the ambient context and where it runs.
pub struct Env {
    pub ctx: Context,
    pub cwd: PathBuf,
    /// This program, for the session guard and the demo agent.
    pub exe: PathBuf,
    /// What every store handle the command opened changed: published when it is done.
    written: std::sync::Mutex<Vec<git_loop::store::Written>>,
    /// Whether this command already asked the remote for loop state (`adopt`).
    adopted: std::sync::atomic::AtomicBool,
    /// The common directory of the repository the command opened: its objects are looked
    /// after when the command ends.
    opened: std::sync::OnceLock<PathBuf>,
    /// Whether the process ends once the command's store is dropped (not a walk, a race, a
    /// landing or a mission, which hold theirs for hours and see packs come and go).
    pub(super) exits_soon: bool,
}

impl Env {
    pub fn new(ctx: Context, cwd: PathBuf, exe: PathBuf) -> Env {
        Env {
            ctx,
            cwd,
            exe,
            written: Default::default(),
            adopted: Default::default(),
            opened: Default::default(),
            exits_soon: false,
        }
    }

    pub fn open(&self) -> Result<Store> {
        let mut store = self.open_as_configured()?;
        self.adopt(&mut store);
        Ok(store)
    }

    /// `open`, without looking for a remote to follow (`init --remote` names it).
    pub fn open_as_configured(&self) -> Result<Store> {
        let store = Store::open(&self.ctx, &self.cwd)?;
        self.written.lock().unwrap_or_else(|e| e.into_inner()).push(store.written());
        if self.opened.set(store.common_dir().to_owned()).is_ok() && self.exits_soon {
            store.keep_objects_until_exit();
        }
        Ok(store)
    }

    /// A fresh clone follows a remote that holds loop state (see `sync::adopt`), once per
    /// command, saying so; a remote that cannot be asked is a warning, not a failure (there is
    /// nothing here yet to get wrong).
    fn adopt(&self, store: &mut Store) {
        if self.adopted.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        match git_loop::store::sync::adopt(store, &self.ctx) {
            Ok(git_loop::store::sync::Adoption::Followed { remote, .. }) => output::stderr_line(format!(
                "note: remote '{remote}' holds loop state: this clone now follows it (loop.remote = {remote})"
            )),
            Ok(_) => {}
            Err(err) => {
                let text = format!("{err:#}").replace('\n', " ");
                output::stderr_line(format!("warning: could not ask the remote whether it holds loop state: {text}"));
                output::stderr_line(
                    "hint: 'git loop init --remote <name>' makes this clone follow a remote once it can be reached",
                );
            }
        }
    }

    /// With `loop.remote` set, send what the command changed to the remote before it exits, so
    /// that a person's word (stop, reassign, take-over, done, an added task) reaches the other
    /// clones at their next sync without a `git loop sync` here. A failure only warns: the
    /// change is recorded in this clone, and the next sync sends it.
    pub(super) fn publish(&self) {
        let names: std::collections::BTreeSet<String> = self
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .flat_map(|w| std::mem::take(&mut *w.lock().unwrap_or_else(|e| e.into_inner())))
            .collect();
        // Inside a walk's session the walk publishes the session's journal when it closes the
        // unit, in the same push as the claim's release. A command that only journaled (a
        // claim taken or released, `next --claim`) leaves its events for the next publish or
        // sync: the board did not change, and agents calling it in a loop should not pay a
        // round trip to the remote for the record of it.
        let journal_only = names.iter().all(|n| n.starts_with(git_loop::refs::JOURNAL));
        if journal_only || self.ctx.session.session.is_some() {
            return;
        }
        let Ok(store) = Store::open(&self.ctx, &self.cwd) else { return };
        let Some(remote) = store.arbiter() else { return };
        if let Err(err) = git_loop::store::sync::publish(&store, &self.ctx, &remote, names, None) {
            let text = format!("{err:#}").replace('\n', " ");
            output::stderr_line(format!(
                "warning: this change is recorded here but could not be sent to '{remote}': {text}"
            ));
            output::stderr_line("hint: 'git loop sync' sends it once the remote can be reached");
        }
    }

    /// Consolidate the packs and loose objects of the repository the command worked in, if
    /// they have grown (otherwise this is a directory listing). Called once the command's
    /// outcome is out, so it never delays a claim or a fetch; a failure is only a warning.
    pub(super) fn maintain(&self) {
        let Some(git_dir) = self.opened.get() else { return };
        if let Err(err) = git_loop::store::maintenance::auto(git_dir) {
            print_error("warning", &err);
        }
    }
}

/// The box of the confined session whose worktree `dir` is in, if it is one: its `.git` file
/// names a git directory that says it is a confined session's (`sandbox::private_git`). Read so
/// that a session which cleared its environment is still known for what it is.
pub(super) fn confined_box_of(dir: &std::path::Path) -> Option<PathBuf> {
    let gitfile = dir.ancestors().map(|d| d.join(".git")).find(|g| g.exists())?;
    let text = std::fs::read_to_string(&gitfile).ok()?;
    let git_dir = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    git_dir
        .join(git_loop::sandbox::private_git::MARKER)
        .is_file()
        .then(|| git_dir.parent().map(PathBuf::from))
        .flatten()
}

/// Build the context from the process environment. `GIT_LOOP_NOW` pins the clock (tests and
/// reproducible demos).
pub(super) fn environment(dir: Option<PathBuf>) -> Result<Env> {
    let clock = match std::env::var("GIT_LOOP_NOW") {
        Ok(text) if !text.is_empty() => {
            let at = chrono::DateTime::parse_from_rfc3339(&text).map_err(|_| {
                git_loop::error::usage(format!("GIT_LOOP_NOW '{text}' is not an RFC 3339 time"))
                    .hint("e.g. GIT_LOOP_NOW=2026-01-02T03:04:05Z, or unset it")
            })?;
            Clock::Fixed(at.with_timezone(&chrono::Utc))
        }
        _ => Clock::System,
    };
    let read = |path: &str| std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_default();
    let host = Some(read("/proc/sys/kernel/hostname"))
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let ctx = Context {
        clock,
        host,
        pid: std::process::id(),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        session: SessionEnv {
            session: var("GIT_LOOP_SESSION"),
            task: var("GIT_LOOP_TASK"),
            try_number: var("GIT_LOOP_TRY").and_then(|t| t.parse().ok()),
            contract: var("GIT_LOOP_CONTRACT"),
            confined: var("GIT_LOOP_BOX").map(PathBuf::from),
        },
        git_identity: GitIdentityEnv {
            name: var("GIT_COMMITTER_NAME"),
            email: var("GIT_COMMITTER_EMAIL"),
            fallback_email: var("EMAIL"),
        },
        path_var: std::env::var_os("PATH"),
        home: var("HOME").map(PathBuf::from),
        codex_home: var("CODEX_HOME").map(PathBuf::from),
    };
    let cwd = std::env::current_dir().map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}"))?;
    let cwd = match dir {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => cwd.join(dir),
        None => cwd,
    };
    if !cwd.is_dir() {
        let what = if cwd.exists() { "is not a directory" } else { "does not exist" };
        return Err(git_loop::error::usage(format!("'{}' {what}", cwd.display()))
            .hint("-C takes the directory of a clone, as git -C does")
            .into());
    }
    let exe = std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find this program's own path: {e}"))?;
    Ok(Env::new(ctx, cwd, exe))
}
