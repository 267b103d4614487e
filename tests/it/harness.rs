//! A sealed test environment: every test gets its own temporary directory, its own HOME, no
//! system or global git config, a fixed identity and fixed dates, and a pinned clock for
//! git-loop. Repositories are made with the real git; git-loop runs as a real process.

use std::ffi::OsStr;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The instant every test's clock is pinned to unless it says otherwise.
pub const NOW: &str = "2026-03-01T12:00:00Z";

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_git-loop")
}

/// A temporary world for one test.
pub struct TestEnv {
    pub root: tempfile::TempDir,
    home: PathBuf,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let root = tempfile::Builder::new().prefix("git-loop-test-").tempdir().expect("a temporary directory");
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).expect("create HOME");
        TestEnv { root, home }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// Apply the sealed environment to a command.
    pub fn seal<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Tess Ter")
            .env("GIT_AUTHOR_EMAIL", "tess@example.com")
            .env("GIT_COMMITTER_NAME", "Tess Ter")
            .env("GIT_COMMITTER_EMAIL", "tess@example.com")
            .env("GIT_AUTHOR_DATE", "2026-03-01T12:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-03-01T12:00:00Z")
            .env("GIT_LOOP_NOW", NOW)
            .env("TZ", "UTC")
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
    }

    /// Run the real git in `dir`; panics with its stderr if it fails.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.seal(Command::new("git").args(args).current_dir(dir)).output().expect("run git");
        assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// A fresh repository with one commit, at `<root>/<name>`.
    pub fn repo(&self, name: &str) -> Repo<'_> {
        let dir = self.path(name);
        std::fs::create_dir_all(&dir).expect("create repo dir");
        self.git(&dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("README"), "hello\n").expect("write README");
        self.git(&dir, &["add", "README"]);
        self.git(&dir, &["commit", "-q", "-m", "init"]);
        Repo { env: self, dir }
    }

    /// Write a scripted agent (`set -e` and `script`, run by `sh`) and return the command that
    /// runs it, for `--agent-cmd` or `loop.agent.<name>.command`.
    pub fn agent(&self, name: &str, script: &str) -> String {
        let path = self.path(&format!("{name}.sh"));
        std::fs::write(&path, format!("set -e\n{script}\n")).expect("write agent");
        format!("sh {}", path.display())
    }

    /// A bare "remote" at `<root>/<name>.git` with one commit on main.
    pub fn remote(&self, name: &str) -> PathBuf {
        let seed = self.repo(&format!("{name}-seed"));
        let bare = self.path(&format!("{name}.git"));
        self.git(
            self.root.path(),
            &["clone", "-q", "--bare", seed.dir.to_str().expect("utf-8 path"), bare.to_str().expect("utf-8 path")],
        );
        bare
    }

    /// A clone of `url` at `<root>/<name>`.
    pub fn clone_of(&self, url: &str, name: &str) -> Repo<'_> {
        let dir = self.path(name);
        self.git(self.root.path(), &["clone", "-q", url, dir.to_str().expect("utf-8 path")]);
        Repo { env: self, dir }
    }
}

/// A working repository inside a [`TestEnv`].
pub struct Repo<'e> {
    pub env: &'e TestEnv,
    pub dir: PathBuf,
}

impl Repo<'_> {
    /// `git loop <args>` in this repository.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.run_with(args, &[])
    }

    /// `git loop <args>` with extra environment variables.
    pub fn run_with<S: AsRef<OsStr>>(&self, args: &[S], vars: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(bin());
        self.env.seal(&mut cmd).args(args).current_dir(&self.dir);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        Run::from(cmd.output().expect("run git-loop"))
    }

    /// A command for `git loop <args>`, not yet run (for races and stdin).
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new(bin());
        self.env.seal(&mut cmd).args(args).current_dir(&self.dir);
        cmd
    }

    pub fn git(&self, args: &[&str]) -> String {
        self.env.git(&self.dir, args)
    }

    /// The session records of this repository's walks, oldest first.
    pub fn session_records(&self) -> Vec<serde_json::Value> {
        let Ok(entries) = std::fs::read_dir(self.dir.join(".git/loop/sessions")) else { return Vec::new() };
        let mut all: Vec<serde_json::Value> = entries
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("record.json")).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect();
        all.sort_by(|a, b| a["started_at"].as_str().cmp(&b["started_at"].as_str()));
        all
    }

    /// Add a task and return its id.
    pub fn add(&self, args: &[&str]) -> String {
        let mut all = vec!["add"];
        all.extend_from_slice(args);
        self.run(&all).ok().stdout.trim().to_owned()
    }
}

/// Wait (up to a minute) until `cond` holds.
#[track_caller]
pub fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A finished git-loop process.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Assert exit 0.
    #[track_caller]
    pub fn ok(self) -> Run {
        self.code(0)
    }

    /// Assert the exit code.
    #[track_caller]
    pub fn code(self, code: i32) -> Run {
        assert_eq!(self.code, code, "exit code\n--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr);
        self
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

impl Run {
    /// stdout with each given id replaced by its placeholder, for whole-output assertions.
    pub fn stdout_with(&self, ids: &[(&str, &str)]) -> String {
        replace_ids(&self.stdout, ids)
    }

    /// stderr likewise.
    pub fn stderr_with(&self, ids: &[(&str, &str)]) -> String {
        replace_ids(&self.stderr, ids)
    }
}

fn replace_ids(text: &str, ids: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    for (id, placeholder) in ids {
        out = out.replace(id, placeholder);
    }
    out
}

/// A `git daemon` serving every bare repository under the test's root, stopped (killed and
/// reaped) when dropped, whatever the test did.
pub struct Daemon {
    child: Child,
    port: u16,
}

impl Daemon {
    /// Start one on a free port and wait (bounded) until it accepts connections. The
    /// processes it forks for each connection end with their connection.
    pub fn start(env: &TestEnv) -> Daemon {
        let root = env.root.path().to_str().expect("utf-8 path").to_owned();
        // The daemon itself, not `git daemon`: the `git` wrapper runs it as a child, and
        // killing the wrapper would leave the daemon running.
        let program = PathBuf::from(env.git(env.root.path(), &["--exec-path"])).join("git-daemon");
        // Another process may take the port between our probe and the daemon's bind: then
        // the daemon exits, and we try another port.
        for _attempt in 0..5 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .expect("a free port on 127.0.0.1")
                .port();
            let log = std::fs::File::create(env.path(&format!("daemon-{port}.log"))).expect("daemon log");
            let child = env
                .seal(&mut Command::new(&program))
                .args([
                    "--reuseaddr",
                    "--listen=127.0.0.1",
                    &format!("--port={port}"),
                    &format!("--base-path={root}"),
                    "--export-all",
                    "--enable=receive-pack",
                    &root,
                ])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn git daemon");
            let mut daemon = Daemon { child, port };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if daemon.child.try_wait().expect("poll git daemon").is_some() {
                    break;
                }
                if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                    return daemon;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Dropping `daemon` here stops it if it is still running.
        }
        panic!("git daemon did not start listening on 127.0.0.1 within 5 attempts");
    }

    pub fn url(&self, bare: &Path) -> String {
        let name = bare.file_name().expect("a repository name").to_str().expect("utf-8 name");
        format!("git://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
