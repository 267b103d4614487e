//! Confinement: every agent session, and every command that runs code an agent wrote (checks,
//! the review command, setup, the landing queue's checks), runs in a sandbox where it can change
//! its own try and nothing else.
//!
//! The mechanism is bubblewrap (`bwrap`): mount, pid, IPC and UTS namespaces (and, with
//! `loop.sandbox.network = none`, a network namespace with loopback only). docs/architecture.md
//! ("Confinement") says why it was chosen over landlock + seccomp. Inside:
//!
//! - the file system is read-only, with the run's worktree and its box (`<session>/box`)
//!   writable, and its own `/tmp` (a bounded tmpfs);
//! - the real home, other users' homes, `/tmp`, `/run/user` and container sockets are absent;
//!   the run has a home of its own in its box, with an agent CLI's own credentials bound in and
//!   its configuration copied in, and toolchains visible read-only ([`home`]);
//! - the repository's `.git` is absent — refs, `refs/loop`, notes, config, hooks, other tries'
//!   worktrees, `.git/loop` — but for the object database, read-only; the worktree's `.git`
//!   names a git directory of the run's own ([`private_git`]) where it commits on its own
//!   branch; the walker takes those commits when the run ends;
//! - the walker, and every process but the run's own, is in another pid namespace: it cannot
//!   be seen in `/proc`, signalled or traced;
//! - `git loop finish` and the agent CLIs' hooks report through a file in the box
//!   ([`channel`]), which the walker reads and acts on outside.
//!
//! Which runs are confined is decided once, when a walk (or a landing, or a hand-back) starts:
//! [`Confinement::decide`], from `loop.sandbox` (`auto`, `required`, `off`) and whether bubblewrap
//! works here (it is tried once).

pub mod channel;
pub mod home;
pub mod net;
pub mod private_git;
pub mod safe;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use gix::ObjectId;

use crate::context::Context;
use crate::error::{usage, Class, Refusal};
use crate::store::Store;

pub use private_git::{Adopted, PrivateGit};

/// `loop.sandbox`: whether runs are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Confined where the machine allows it; otherwise unconfined, and said so.
    Auto,
    /// Confined, or nothing runs (exit 77).
    Required,
    /// Never confined: an explicit choice, shown in `status`.
    Off,
}

impl Mode {
    pub fn parse(word: &str) -> Option<Mode> {
        match word.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Some(Mode::Auto),
            "required" | "require" | "on" | "true" => Some(Mode::Required),
            "off" | "false" | "none" => Some(Mode::Off),
            _ => None,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Required => "required",
            Mode::Off => "off",
        }
    }
}

/// `loop.sandbox.network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// The host's network, all of it.
    On,
    /// Loopback only.
    None,
    /// Only the hosts of an allow-list, through a filtering proxy ([`net`]): the agent's
    /// preset's API hosts, the base URLs its environment names, and `loop.sandbox.allow`. The
    /// default.
    Allow,
}

/// What the settings say about confinement.
#[derive(Debug, Clone)]
pub struct Policy {
    pub mode: Mode,
    pub network: Network,
    /// More paths visible read-only, writable, or absent (`loop.sandbox.readOnly`, …).
    pub read_only: Vec<PathBuf>,
    pub read_write: Vec<PathBuf>,
    pub hide: Vec<PathBuf>,
    /// The size of the run's own `/tmp`, in bytes.
    pub tmp_size: u64,
    /// `loop.sandbox.allow`: the hosts a person lets every run reach under `allow`.
    pub allow: Vec<net::Entry>,
}

impl Policy {
    /// The policy `store`'s settings give; `mode`, when given (`--sandbox`), wins over
    /// `loop.sandbox`.
    pub fn read(store: &Store, ctx: &Context, mode: Option<Mode>) -> Result<Policy, Refusal> {
        let settings = store.settings();
        let mode = match mode {
            Some(mode) => mode,
            None => match settings.sandbox() {
                None => Mode::Auto,
                Some(word) => Mode::parse(&word).ok_or_else(|| {
                    usage(format!("loop.sandbox '{}' is not auto, required or off", word.escape_debug()))
                        .hint("git config loop.sandbox auto")
                })?,
            },
        };
        let network = match settings.sandbox_network().as_deref() {
            Some("on") | Some("true") => Network::On,
            Some("none") | Some("off") | Some("false") => Network::None,
            None | Some("allow") => Network::Allow,
            Some(other) => {
                return Err(usage(format!("loop.sandbox.network '{}' is not on, none or allow", other.escape_debug()))
                    .hint("git config loop.sandbox.network allow (then list hosts with git config --add loop.sandbox.allow registry.npmjs.org)"))
            }
        };
        let allow = settings
            .sandbox_paths("allow")
            .iter()
            .map(|entry| {
                net::Entry::parse(entry, net::Source::Person).map_err(|why| {
                    usage(format!("loop.sandbox.allow: {why}")).hint(
                        "list a host, host:port or *.domain: git config --add loop.sandbox.allow registry.npmjs.org",
                    )
                })
            })
            .collect::<Result<Vec<_>, Refusal>>()?;
        let paths = |kind: &str| -> Result<Vec<PathBuf>, Refusal> {
            settings.sandbox_paths(kind).iter().map(|p| expand(p, ctx.home.as_deref(), store.workdir(), kind)).collect()
        };
        Ok(Policy {
            mode,
            network,
            read_only: paths("readOnly")?,
            read_write: paths("readWrite")?,
            hide: paths("hide")?,
            tmp_size: settings.sandbox_tmp_size()?,
            allow,
        })
    }
}

/// A path as a setting writes it: `~/x` in the home, a relative one from the main worktree.
fn expand(text: &str, home: Option<&Path>, workdir: &Path, kind: &str) -> Result<PathBuf, Refusal> {
    let path = match (text.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        (Some(_), None) => {
            return Err(usage(format!(
                "loop.sandbox.{kind} '{}' names the home, and HOME is not set",
                text.escape_debug()
            )))
        }
        (None, _) if text == "~" => home.map(Path::to_owned).ok_or_else(|| usage("HOME is not set"))?,
        (None, _) => {
            let p = PathBuf::from(text);
            if p.is_absolute() {
                p
            } else {
                workdir.join(p)
            }
        }
    };
    if path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(usage(format!("loop.sandbox.{kind} '{}' climbs with '..'", text.escape_debug()))
            .hint("name the directory itself, as an absolute path or from ~/"));
    }
    Ok(path)
}

/// Bubblewrap, found and tried on this machine.
#[derive(Debug, Clone)]
struct Bwrap {
    path: PathBuf,
    version: String,
    /// Who runs inside: `--unshare-user` (where user namespaces work), `nobody` where the
    /// walker is root, and no capability ever.
    user: Vec<String>,
}

/// Find `bwrap` on `path_var` and run it once in the namespaces a run uses: `Err` says why it
/// cannot confine here (not installed; no user namespaces; a kernel that refuses), with a hint.
fn probe(path_var: Option<&std::ffi::OsStr>) -> Result<Bwrap, (String, String)> {
    let Some(path) = crate::agent::process::find_program("bwrap", path_var) else {
        return Err((
            "bubblewrap (bwrap) is not installed".into(),
            "install it (Debian, Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap)".into(),
        ));
    };
    let version = std::process::Command::new(&path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let try_with = |user: &[String]| {
        std::process::Command::new(&path)
            .args(user)
            .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"])
            .args(["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session", "true"])
            .stdin(std::process::Stdio::null())
            .output()
    };
    let root = walker_is_root();
    let mut user: Vec<String> = vec!["--unshare-user".into()];
    if root {
        user.extend(["--uid".into(), RUN_AS_WHEN_ROOT.to_string(), "--gid".into(), RUN_AS_WHEN_ROOT.to_string()]);
    }
    user.extend(["--cap-drop".into(), "ALL".into()]);
    let mut tried = try_with(&user);
    if !tried.as_ref().is_ok_and(|out| out.status.success()) {
        // A setuid bubblewrap on a kernel without unprivileged user namespaces: the run keeps
        // the walker's user (root: uid 0, still without capabilities, its secrets hidden).
        user = vec!["--cap-drop".into(), "ALL".into()];
        tried = try_with(&user);
    }
    match tried {
        Ok(out) if out.status.success() => Ok(Bwrap { path, version, user }),
        Ok(out) => {
            let said = String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or("").trim().to_owned();
            Err((
                format!("bubblewrap cannot make a sandbox here ({said})"),
                "it needs user namespaces: check kernel.unprivileged_userns_clone and AppArmor's restrict_unprivileged_userns".into(),
            ))
        }
        Err(err) => Err((format!("bubblewrap could not be run: {err}"), "check that bwrap is executable".into())),
    }
}

/// Whether this process runs as root.
fn walker_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// What a walk runs with, decided once when it starts.
#[derive(Debug, Clone)]
pub enum Confinement {
    /// Runs are confined.
    Confined(Arc<Sandbox>),
    /// `loop.sandbox = auto`, and the machine cannot confine: why, and what would help.
    Unconfined { why: String, hint: String },
    /// `loop.sandbox = off`.
    Off,
}

impl Confinement {
    /// Decide from `policy`: confined if bubblewrap works here; `required` and it does not is a
    /// refusal (exit 77, naming why).
    pub fn decide(policy: Policy, ctx: &Context, exe: &Path) -> Result<Confinement, Refusal> {
        if policy.mode == Mode::Off {
            return Ok(Confinement::Off);
        }
        match probe(ctx.path_var.as_deref()) {
            Ok(bwrap) => Ok(Confinement::Confined(Arc::new(Sandbox {
                toolchains: toolchains(&policy, ctx.home.as_deref()),
                policy,
                bwrap,
                home: ctx.home.clone(),
                codex_home: ctx.codex_home.clone(),
                path_var: ctx.path_var.clone(),
                exe: exe.to_owned(),
            }))),
            Err((why, hint)) if policy.mode == Mode::Required => {
                Err(Refusal::new(Class::SandboxMissing, format!("loop.sandbox is required, and {why}")).hint(hint))
            }
            Err((why, hint)) => Ok(Confinement::Unconfined { why, hint }),
        }
    }

    /// The sandbox, when runs are confined.
    pub fn sandbox(&self) -> Option<&Arc<Sandbox>> {
        match self {
            Confinement::Confined(sandbox) => Some(sandbox),
            _ => None,
        }
    }

    /// One word for `status --json` and the journal: `confined`, `unconfined`, `off`.
    pub fn word(&self) -> &'static str {
        match self {
            Confinement::Confined(_) => "confined",
            Confinement::Unconfined { .. } => "unconfined",
            Confinement::Off => "off",
        }
    }

    /// How runs are confined, said in a line for people.
    pub fn describe(&self) -> String {
        match self {
            Confinement::Confined(sandbox) => {
                let net = match sandbox.policy.network {
                    Network::On => "network on".to_owned(),
                    Network::None => "no network".to_owned(),
                    Network::Allow if sandbox.policy.allow.is_empty() => {
                        "network: each agent's API hosts only".to_owned()
                    }
                    Network::Allow => format!(
                        "network: each agent's API hosts and {}",
                        sandbox.policy.allow.iter().map(net::Entry::shown).collect::<Vec<_>>().join(", ")
                    ),
                };
                let mut line = format!("sessions and checks run confined ({}, {net})", sandbox.bwrap.version);
                if !sandbox.toolchains.is_empty() {
                    let named: Vec<String> =
                        sandbox.toolchains.iter().map(|(var, path)| format!("{var} ({})", path.display())).collect();
                    line.push_str(&format!(" · toolchains visible read-only: {}", named.join(", ")));
                }
                line
            }
            Confinement::Unconfined { why, .. } => {
                format!("sessions run unconfined: {why}; an agent can reach every file this user can")
            }
            Confinement::Off => "sessions run unconfined (loop.sandbox = off)".to_owned(),
        }
    }
}

/// Variables of the walk's environment that name a toolchain or its caches: where they point
/// under a hidden directory (`/home`, `/srv`, `/opt` is not), sessions see it read-only, so a
/// `RUSTUP_HOME=/srv/rustup` works inside as outside (a path `loop.sandbox.hide` names stays
/// hidden). `GOPATH` may name several.
pub const TOOLCHAIN_VARS: &[&str] = &[
    "RUSTUP_HOME",
    "CARGO_HOME",
    "GOROOT",
    "GOPATH",
    "GOMODCACHE",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "UV_CACHE_DIR",
    "UV_PYTHON_INSTALL_DIR",
    "PIP_CACHE_DIR",
    "NVM_DIR",
    "VOLTA_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "JAVA_HOME",
    "GRADLE_USER_HOME",
    "SDKMAN_DIR",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
];

/// The toolchain paths (see [`TOOLCHAIN_VARS`]) of this process's environment that a sandbox
/// would hide and makes visible read-only, each with the variable that names it.
fn toolchains(policy: &Policy, home: Option<&Path>) -> Vec<(String, PathBuf)> {
    let hidden = hidden_roots(home, None);
    let mut out = Vec::new();
    for var in TOOLCHAIN_VARS {
        let Some(value) = std::env::var_os(var) else { continue };
        for path in std::env::split_paths(&value) {
            let under_hidden = hidden.iter().any(|h| path.starts_with(h) && path != *h);
            let holds_hidden = hidden.iter().any(|h| h.starts_with(&path));
            let hidden_by_person = policy.hide.iter().any(|h| path.starts_with(h) || h.starts_with(&path));
            if path.is_absolute() && path.exists() && under_hidden && !holds_hidden && !hidden_by_person {
                out.push(((*var).to_owned(), path));
            }
        }
    }
    out
}

/// A working sandbox and the policy it applies.
#[derive(Debug)]
pub struct Sandbox {
    pub policy: Policy,
    /// Toolchains the walk's environment names under a hidden directory, visible read-only.
    toolchains: Vec<(String, PathBuf)>,
    bwrap: Bwrap,
    home: Option<PathBuf>,
    codex_home: Option<PathBuf>,
    path_var: Option<OsString>,
    exe: PathBuf,
}

/// One confined run: what it is and where it works.
pub struct Request<'r> {
    /// Where it works, writable: a try's worktree, a reviewer's checkout, the landing worktree.
    pub worktree: &'r Path,
    /// Where it starts (the worktree, usually).
    pub cwd: &'r Path,
    /// Its room: a directory of the walker's, holding the run's `box/` (writable inside) and
    /// the `.git` file its worktree shows (read-only inside). A session's directory is its room.
    pub room: &'r Path,
    /// Visible read-only besides (the session's directory, with its prompt and log).
    pub readable: &'r [&'r Path],
    /// The preset it runs (its CLI's credentials and configuration come into its home); none
    /// for a command.
    pub agent: Option<&'r str>,
    /// The program it starts, whose installation must be visible.
    pub program: &'r str,
    /// Its command line as the person configured it (an agent's `--agent-cmd`, the checks):
    /// a file or directory it names by absolute path is made visible read-only, so that
    /// `sh /tmp/my-agent.sh` finds its script under a hidden `/tmp`.
    pub command_line: &'r str,
    /// Refs its private git directory may show besides its own branch (the task branch, the
    /// target), with their commits.
    pub context: &'r [(String, ObjectId)],
    /// Who its commits are authored as.
    pub author: &'r str,
    /// What it may reach under `loop.sandbox.network = allow` besides `loop.sandbox.allow`: its
    /// agent's model API (`agent::presets::network_entries`); none for a command.
    pub network: &'r [net::Entry],
}

/// A run made ready: run `program` with `args` and then `--`, the command and its arguments,
/// with `env` added to its environment.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The run's box (writable inside; reports, the result file, its home, its git directory).
    pub box_dir: PathBuf,
    /// Its private git directory, to adopt when it ends (none when the worktree is no linked
    /// worktree of the repository).
    pub git: Option<PrivateGit>,
    /// Its home, inside and out: (where it is mounted, its directory in the box).
    pub home: Option<(PathBuf, PathBuf)>,
    /// Under `loop.sandbox.network = allow`: the room's directory of the network policy
    /// ([`net`]), whose proxy the run's guard serves.
    pub net: Option<PathBuf>,
}

/// The box inside a room.
pub fn box_of(room: &Path) -> PathBuf {
    crate::store::layout::box_in(room)
}

/// Where a run's home is in its box.
pub fn home_of(box_dir: &Path) -> PathBuf {
    box_dir.join("home")
}

/// Paths that are hidden in every sandbox (where they exist).
const HIDDEN: &[&str] = &["/tmp", "/var/tmp", "/run/user", "/run/secrets", "/home", "/root", "/mnt", "/media", "/srv"];

/// The top-level directories a run sees: the system's programs, libraries and configuration,
/// and the kernel's file systems. Every other one (`/work`, `/data`, `/boot`, another clone's
/// directory…) is absent, but for what the run needs under it (its worktree, the programs it
/// runs, toolchains), bound back read-only.
const SYSTEM: &[&str] = &[
    "bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "opt", "nix", "snap", "gnu", "run", "sys", "dev",
    "proc", "var", "tmp",
];

/// What a run sees of `/var`: caches. Mail, spools, logs, backups (`shadow.bak`) and services'
/// data (`/var/lib`) are absent.
const VAR_SEEN: &[&str] = &["cache"];

/// Files of the system's configuration that hold secrets: absent (an empty file) in every run,
/// which matters where the walker is root and the run's user maps to it.
const SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/krb5.keytab",
];

/// The user a run is inside its namespace when the walker is root: `nobody`, which every
/// system names. A walker of another user runs its sessions as itself; either way, without
/// any capability.
const RUN_AS_WHEN_ROOT: u32 = 65534;

/// The directories hidden at the root of every run's view ([`HIDDEN`], every top-level
/// directory not in [`SYSTEM`], `/var`'s but [`VAR_SEEN`]) and `home`. A top-level directory
/// that is `keep` itself (a repository at `/project`) is kept; what lies below a hidden one is
/// bound back where a run needs it. Symbolic links are never hidden (hiding one would hide
/// what it points to).
fn hidden_roots(home: Option<&Path>, keep: Option<&Path>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = HIDDEN.iter().map(PathBuf::from).chain(home.map(Path::to_owned)).collect();
    roots.extend(unseen_below(Path::new("/"), keep));
    roots.sort();
    roots.dedup();
    roots
}

/// The directories of the file system at `root` that are not the system's: its top-level ones
/// but [`SYSTEM`]'s (and `keep`), and `var`'s but [`VAR_SEEN`]'s.
fn unseen_below(root: &Path, keep: Option<&Path>) -> Vec<PathBuf> {
    let dirs = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    let named = |p: &Path, names: &[&str]| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| names.contains(&n));
    let mut unseen: Vec<PathBuf> =
        dirs(root).into_iter().filter(|p| !named(p, SYSTEM) && Some(p.as_path()) != keep).collect();
    unseen.extend(dirs(&root.join("var")).into_iter().filter(|p| !named(p, VAR_SEEN)));
    unseen.sort();
    unseen
}

/// The secret files and directories of the system's configuration present here
/// ([`SECRETS`], and the ssh server's private host keys).
fn secrets() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = SECRETS.iter().map(PathBuf::from).filter(|p| p.symlink_metadata().is_ok()).collect();
    if let Ok(entries) = std::fs::read_dir("/etc/ssh") {
        found.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("ssh_host_") && n.ends_with("_key"))
        }));
    }
    found
}

/// Cover each of `paths` that exists and is not below another of them: a directory with an
/// empty tmpfs (`/tmp`'s of `tmp_size`), anything else with an empty file. A symbolic link is
/// followed when `follow` (a person named it: what it points to is hidden), else left.
fn cover(b: &mut Args, paths: &[PathBuf], tmp_size: &str, follow: bool) {
    let mut paths = paths.to_vec();
    paths.sort();
    paths.dedup();
    let covered: Vec<PathBuf> =
        paths.iter().filter(|h| paths.iter().any(|o| o != *h && h.starts_with(o))).cloned().collect();
    for dir in paths.iter().filter(|h| !covered.contains(h)) {
        let meta = if follow { std::fs::metadata(dir) } else { std::fs::symlink_metadata(dir) };
        match meta {
            Ok(meta) if meta.is_dir() => {
                if dir == Path::new("/tmp") {
                    b.one("--size", tmp_size);
                }
                b.one("--tmpfs", dir);
            }
            Ok(meta) if !meta.is_symlink() => {
                b.pair("--ro-bind", "/dev/null", dir);
            }
            _ => {}
        }
    }
}

/// Sockets that would hand a confined run the machine (a container engine is root).
const SOCKETS: &[&str] = &[
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/crio/crio.sock",
    "/run/snapd.socket",
    "/run/dbus/system_bus_socket",
];

/// Environment a confined run never inherits: what would point git at the real repository, or
/// hand it an agent or a bus outside.
const UNSET: &[&str] = &[
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "CODEX_HOME",
];

impl Sandbox {
    /// Make `req` ready to run: its box (a fresh home, a private git directory, an empty
    /// report file) and the bubblewrap arguments that confine it.
    pub fn prepare(&self, store: &Store, req: &Request<'_>) -> Result<Prepared> {
        let box_dir = box_of(req.room);
        std::fs::create_dir_all(&box_dir).with_context(|| format!("could not create '{}'", box_dir.display()))?;
        // A run's home and git directory are its own: nothing an earlier run left there counts.
        for stale in [home_of(&box_dir), box_dir.join(private_git::DIR)] {
            if stale.exists() {
                std::fs::remove_dir_all(&stale).with_context(|| format!("could not clear '{}'", stale.display()))?;
            }
        }
        let mut env =
            vec![("GIT_LOOP_BOX".to_owned(), box_dir.display().to_string()), ("TMPDIR".into(), "/tmp".into())];
        let mut b = Args::default();
        b.flag("--die-with-parent").flag("--new-session");
        b.flag("--unshare-pid").flag("--unshare-ipc").flag("--unshare-uts").flag("--unshare-cgroup-try");
        // An unprivileged user without any capability: a walker run as root would otherwise
        // hand its runs every capability in their namespaces, enough to unmount what hides the
        // host's files.
        b.args(&self.bwrap.user);
        if self.policy.network != Network::On {
            b.flag("--unshare-net");
        }
        b.pair("--ro-bind", "/", "/").one("--dev", "/dev").one("--proc", "/proc");
        // What no run sees: every directory but the system's, and the system's secrets.
        let hidden = hidden_roots(self.home.as_deref(), Some(store.workdir()));
        let size = self.policy.tmp_size.to_string();
        cover(&mut b, &hidden, &size, false);
        b.one("--size", &size).one("--tmpfs", "/dev/shm");
        for socket in SOCKETS {
            if std::fs::symlink_metadata(socket).is_ok() {
                b.pair("--ro-bind", "/dev/null", socket);
            }
        }
        for secret in secrets() {
            if secret.is_dir() {
                b.one("--tmpfs", &secret);
            } else {
                b.pair("--ro-bind", "/dev/null", &secret);
            }
        }
        // What the settings add.
        for path in self.policy.read_only.iter().filter(|p| p.exists()) {
            b.pair("--ro-bind", path, path);
        }
        for path in self.policy.read_write.iter().filter(|p| p.exists()) {
            b.pair("--bind", path, path);
        }
        // Its own home, with what it may have of the real one.
        let mut home_pair = None;
        // What the home already shows (read-only toolchains): not bound again below.
        let mut shown: Vec<PathBuf> = Vec::new();
        if let Some(real_home) = &self.home {
            let run_home = home_of(&box_dir);
            let entries = home::entries(req.agent, real_home, self.codex_home.as_deref());
            home::fill(&run_home, &entries)?;
            b.pair("--bind", &run_home, real_home);
            for entry in &entries {
                let to = real_home.join(&entry.to);
                match entry.how {
                    home::How::Live => b.pair("--bind", &entry.from, &to),
                    home::How::ReadOnly => {
                        shown.push(to.clone());
                        b.pair("--ro-bind", &entry.from, &to)
                    }
                    home::How::Masked if entry.from.is_dir() => b.one("--tmpfs", &to),
                    home::How::Masked => b.pair("--ro-bind", "/dev/null", &to),
                    home::How::Copy => &mut b,
                };
            }
            env.push(("HOME".into(), real_home.display().to_string()));
            if req.agent == Some("codex") {
                env.push(("CODEX_HOME".into(), real_home.join(".codex").display().to_string()));
            }
            home_pair = Some((real_home.clone(), run_home));
        }
        // The programs it runs, where they are under something hidden: this program, its
        // PATH, and where the agent's program is installed.
        let mut visible: Vec<PathBuf> = Vec::new();
        visible.extend(self.exe.parent().map(Path::to_owned));
        if let Some(path_var) = &self.path_var {
            visible.extend(std::env::split_paths(path_var));
        }
        if let Some(program) = crate::agent::process::find_program(req.program, self.path_var.as_deref()) {
            if let Ok(real) = program.canonicalize() {
                visible.push(install_root(&real));
            }
        }
        visible.push(store.workdir().to_owned());
        visible.extend(named_paths(req.command_line));
        visible.extend(self.toolchains.iter().map(|(_, path)| path.clone()));
        // Only what lies under something hidden needs binding, and never a hidden root itself or
        // what holds one (`PATH=/home/me:…` must not bring the home back), nor the repository's
        // own state.
        let common = store.common_dir().to_owned();
        let bindable = |p: &Path| {
            p.is_absolute()
                && p.exists()
                && hidden.iter().any(|h| p.starts_with(h) && p != h)
                && !hidden.iter().any(|h| h.starts_with(p))
                && !p.starts_with(&common)
                && !self.policy.read_write.iter().any(|w| p.starts_with(w))
                && !shown.iter().any(|s| p.starts_with(s))
        };
        visible.sort();
        visible.dedup();
        for path in visible.iter().filter(|p| bindable(p)) {
            b.pair("--ro-bind", path, path);
        }
        // What the person hides, last: it stays hidden whatever above brought back.
        cover(&mut b, &self.policy.hide, &size, true);
        // The repository's state: gone, but for its objects, read-only.
        b.one("--tmpfs", &common);
        if let Some(git_dir) = store.workdir().join(".git").canonicalize().ok().filter(|g| g.is_dir() && *g != common) {
            b.one("--tmpfs", git_dir);
        }
        let worktrees = crate::store::layout::Layout::of(&common).worktrees();
        let configured_root = store.settings().worktrees().map(|d| {
            let d = PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                store.workdir().join(d)
            }
        });
        if let Some(root) = configured_root.filter(|r| *r != worktrees && r.is_dir() && !r.starts_with(&common)) {
            b.one("--tmpfs", root);
        }
        b.pair("--ro-bind", store.objects_dir(), store.objects_dir());
        for path in req.readable {
            b.pair("--ro-bind", path, path);
        }
        // Under `allow`: the proxy's socket, which the run's guard serves (it exists by the
        // time bubblewrap binds it), and the allow-list it serves.
        let net = if self.policy.network == Network::Allow {
            let dir = req.room.join(net::DIR);
            std::fs::create_dir_all(&dir).with_context(|| format!("could not create '{}'", dir.display()))?;
            let _ = std::fs::remove_file(dir.join(net::BLOCKED_FILE));
            let allow = net::Allow(self.policy.allow.iter().chain(req.network).cloned().collect());
            allow.write(&dir.join(net::ALLOW_FILE))?;
            let socket = net::socket_path(&dir);
            b.pair("--ro-bind", &socket, &socket);
            Some((dir, socket, allow.loopbacks()))
        } else {
            None
        };
        b.pair("--bind", &box_dir, &box_dir);
        b.pair("--bind", req.worktree, req.worktree);
        // Its git directory: its own, in its box.
        let git = match store.worktree_admin(req.worktree) {
            Some(admin) => {
                let head = private_git::worktree_head(store, &admin)?;
                let git = private_git::make(store, &admin, &head, req.context, &box_dir, req.author)?;
                let gitfile = req.room.join("gitfile");
                std::fs::write(&gitfile, format!("gitdir: {}\n", git.dir.display()))
                    .with_context(|| format!("could not write '{}'", gitfile.display()))?;
                b.pair("--ro-bind", &gitfile, req.worktree.join(".git"));
                Some(git)
            }
            None => None,
        };
        // What is left of the repository's `.git` is an empty directory that refuses writes, so
        // an agent writing a hook or a config there is told so, not fooled by a scratch copy.
        b.one("--remount-ro", &common);
        for var in UNSET {
            b.one("--unsetenv", var);
        }
        b.one("--chdir", req.cwd);
        b.flag("--");
        // Under `allow`, the bridge runs first and runs the command.
        let net = net.map(|(dir, socket, loopbacks)| {
            b.one_word(&self.exe.display().to_string())
                .one_word(net::SUBCOMMAND)
                .one_word(&socket.display().to_string());
            for address in loopbacks {
                b.one_word(&address.to_string());
            }
            b.one_word("--");
            dir
        });
        Ok(Prepared {
            program: self.bwrap.path.display().to_string(),
            args: b.0,
            env,
            box_dir,
            git,
            home: home_pair,
            net,
        })
    }
}

/// The absolute paths a command line names (its words, split at whitespace and shell quotes
/// and operators), for making them visible.
fn named_paths(command_line: &str) -> Vec<PathBuf> {
    command_line
        .split(|c: char| c.is_whitespace() || "'\"`;&|<>()=".contains(c))
        .filter(|w| w.starts_with('/') && !w.contains(['$', '*', '?']))
        .map(PathBuf::from)
        .filter(|p| !p.components().any(|c| matches!(c, std::path::Component::ParentDir)))
        .collect()
}

/// Where a program is installed, for making it visible: the directory above the first
/// `node_modules` of its real path (an npm package finds its dependencies there), else its
/// directory.
fn install_root(program: &Path) -> PathBuf {
    let mut root = PathBuf::new();
    for part in program.components() {
        if part.as_os_str() == "node_modules" {
            return root;
        }
        root.push(part);
    }
    program.parent().map(Path::to_owned).unwrap_or_default()
}

/// Bubblewrap's arguments, in the order its mounts are made (a later one covers an earlier).
#[derive(Default)]
struct Args(Vec<String>);

impl Args {
    fn args(&mut self, args: &[String]) -> &mut Args {
        self.0.extend(args.iter().cloned());
        self
    }

    fn one_word(&mut self, word: &str) -> &mut Args {
        self.0.push(word.to_owned());
        self
    }

    fn flag(&mut self, flag: &str) -> &mut Args {
        self.0.push(flag.to_owned());
        self
    }

    fn one(&mut self, flag: &str, value: impl AsRef<Path>) -> &mut Args {
        self.0.push(flag.to_owned());
        self.0.push(value.as_ref().display().to_string());
        self
    }

    fn pair(&mut self, flag: &str, from: impl AsRef<Path>, to: impl AsRef<Path>) -> &mut Args {
        self.0.push(flag.to_owned());
        self.0.push(from.as_ref().display().to_string());
        self.0.push(to.as_ref().display().to_string());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_sees_the_systems_directories_and_nothing_else_at_the_root() {
        let root = tempfile::tempdir().expect("tempdir");
        for dir in [
            "usr/bin",
            "etc",
            "opt",
            "work/other-clone/.git/loop",
            "data",
            "project",
            "var/lib",
            "var/cache",
            "var/backups",
        ] {
            std::fs::create_dir_all(root.path().join(dir)).expect("mkdir");
        }
        std::os::unix::fs::symlink("usr/bin", root.path().join("bin")).expect("link");
        std::fs::write(root.path().join("swapfile"), "").expect("file");
        let names = |keep: Option<&Path>| -> Vec<String> {
            unseen_below(root.path(), keep)
                .iter()
                .map(|p| p.strip_prefix(root.path()).expect("below").display().to_string())
                .collect()
        };
        assert_eq!(names(None), ["data", "project", "var/backups", "var/lib", "work"].map(String::from));
        let project = root.path().join("project");
        assert_eq!(
            names(Some(&project)),
            ["data", "var/backups", "var/lib", "work"].map(String::from),
            "a repository at the root stays"
        );
    }

    #[test]
    fn settings_name_paths_plainly_and_never_climb() {
        let home = Path::new("/h/me");
        let work = Path::new("/w/project");
        assert_eq!(expand("~/.npmrc", Some(home), work, "readOnly").expect("ok"), PathBuf::from("/h/me/.npmrc"));
        assert_eq!(expand("vendor", Some(home), work, "readOnly").expect("ok"), PathBuf::from("/w/project/vendor"));
        assert!(expand("../x", Some(home), work, "readOnly").is_err());
        assert!(expand("~/x", None, work, "readOnly").is_err());
        assert_eq!(Mode::parse("Required"), Some(Mode::Required));
        assert_eq!(Mode::parse("sometimes"), None);
        assert_eq!(
            install_root(Path::new("/opt/clis/node_modules/@anthropic-ai/claude-code/cli.js")),
            PathBuf::from("/opt/clis")
        );
        assert_eq!(install_root(Path::new("/usr/bin/codex")), PathBuf::from("/usr/bin"));
        assert_eq!(
            named_paths("sh /tmp/a.sh && cat '/tmp/b c' >/tmp/out;x=/tmp/y $HOME/z ../w /tmp/../etc"),
            vec![
                PathBuf::from("/tmp/a.sh"),
                PathBuf::from("/tmp/b"),
                PathBuf::from("/tmp/out"),
                PathBuf::from("/tmp/y")
            ]
        );
    }
}
