//! A sealed test environment: every test gets its own temporary directory, its own HOME, no
//! system or global git config, a fixed identity and fixed dates, and a pinned clock for
//! git-loop. Repositories are made with the real git; git-loop runs as a real process.

use std::ffi::OsStr;
use std::fmt::Write as _;
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
    /// Whether confined sessions may read and write the test's directory (see `seal`).
    open_root: bool,
}

impl TestEnv {
    /// A new world; with `GIT_LOOP_KEEP_TESTS` set, its directory is kept for a post-mortem.
    pub fn new() -> TestEnv {
        let mut root = tempfile::Builder::new().prefix("git-loop-test-").tempdir().expect("a temporary directory");
        root.disable_cleanup(std::env::var_os("GIT_LOOP_KEEP_TESTS").is_some());
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).expect("create HOME");
        TestEnv { root, home, open_root: true }
    }

    /// A world whose confined sessions get nothing of the test's directory but what the
    /// sandbox gives any session (the hostile suite).
    pub fn strict() -> TestEnv {
        TestEnv { open_root: false, ..TestEnv::new() }
    }

    /// The home every command of this world runs with.
    pub fn home(&self) -> &Path {
        &self.home
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
            .stdin(Stdio::null());
        // Sessions run confined where bubblewrap works; the test's own directory (its agent
        // scripts, the flag files they touch) stays theirs to read and write. The hostile suite
        // (`confine`) seals without it.
        if self.open_root {
            cmd.env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "loop.sandbox.readWrite")
                .env("GIT_CONFIG_VALUE_0", self.root.path());
        }
        cmd
    }

    /// Run the real git in `dir`; panics with its stderr if it fails.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = output_within(self.seal(Command::new("git").args(args).current_dir(dir)), COMMAND_LIMIT);
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

    /// Guard bare repository `bare` with git-loop's pre-receive hook (`hooks install --server`).
    pub fn install_receive_hook(&self, bare: &Path) {
        let out = self
            .seal(&mut Command::new(bin()))
            .args(["hooks", "install", "--server", bare.to_str().expect("utf-8 path")])
            .current_dir(self.root.path())
            .output()
            .expect("run git-loop");
        assert!(out.status.success(), "hooks install --server: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A clone of `url` at `<root>/<name>`.
    /// A new bare remote `origin`, and two clones of it, `a` and `b`, each with `loop.remote`
    /// set to it.
    pub fn two_clones(&self) -> (PathBuf, Repo<'_>, Repo<'_>) {
        let remote = self.remote("origin");
        let url = remote.to_str().expect("utf-8");
        let (a, b) = (self.clone_of(url, "a"), self.clone_of(url, "b"));
        for clone in [&a, &b] {
            clone.run(&["init", "--remote", "origin"]).ok();
        }
        (remote, a, b)
    }

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
        Run::from(output_within(&mut cmd, COMMAND_LIMIT))
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

    /// Run the real git here with `input` on its stdin; panics with its stderr if it fails.
    pub fn git_with_stdin(&self, args: &[&str], input: &str) -> String {
        use std::io::Write as _;
        let mut child = self
            .env
            .seal(Command::new("git").args(args).current_dir(&self.dir))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run git");
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
        let out = child.wait_with_output().expect("wait for git");
        assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// The try worktrees `git worktree list` shows besides the checkout itself, and how many
    /// finished tries' worktrees are kept in the pool (`.git/loop/worktrees/.pool/`).
    pub fn worktrees(&self) -> (Vec<String>, usize) {
        let listed = self.git(&["worktree", "list", "--porcelain"]);
        let paths: Vec<&str> = listed.lines().filter_map(|l| l.strip_prefix("worktree ")).skip(1).collect();
        let pooled = paths.iter().filter(|p| p.contains("/.git/loop/worktrees/.pool/")).count();
        let tries = paths.iter().filter(|p| !p.contains("/.git/loop/worktrees/.pool/")).map(|p| p.to_string());
        (tries.collect(), pooled)
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

/// How long one command a test runs may take before it is killed and the test fails naming it:
/// under nextest's own deadline (3 minutes), so the message is ours.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(150);

/// Kills a process that outlives its deadline, saying so on stderr (which the failing test's
/// output shows); dropped in time, it does nothing.
pub struct Watchdog {
    stop: Option<std::sync::mpsc::Sender<()>>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    pub fn new(pid: u32, limit: Duration, what: &str) -> Watchdog {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let fired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, what) = (fired.clone(), what.to_owned());
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(limit) {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                eprintln!("deadline: {what} was still running after {limit:?}; killed");
                // SAFETY: a signal to a process this test started and has not reaped.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        });
        Watchdog { stop: Some(stop), fired }
    }

    /// Whether the deadline passed and the process was killed.
    pub fn fired(&self) -> bool {
        self.fired.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Run `cmd` to its end and return what it printed; past `limit` it is killed and the test
/// fails naming it.
#[track_caller]
pub fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    let what = format!("{:?} {:?}", cmd.get_program(), cmd.get_args().collect::<Vec<_>>());
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("run {what}: {e}"));
    let dog = Watchdog::new(child.id(), limit, &what);
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("wait for {what}: {e}"));
    assert!(!dog.fired(), "{what} did not finish within {limit:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
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
    /// processes it forks for each connection end with their connection. Its clock (what a
    /// pre-receive hook judges claims by) is the tests' pinned one.
    pub fn start(env: &TestEnv) -> Daemon {
        Daemon::spawn(env, false)
    }

    /// `start`, on the real clock: for clones that run on it (a fleet's), whose claims a
    /// hooked remote judges by its own clock.
    pub fn start_on_real_clock(env: &TestEnv) -> Daemon {
        Daemon::spawn(env, true)
    }

    fn spawn(env: &TestEnv, real_clock: bool) -> Daemon {
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
            let mut command = Command::new(&program);
            env.seal(&mut command);
            if real_clock {
                command.env_remove("GIT_LOOP_NOW");
            }
            let child = command
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

/// A program the tests need from the distribution: its path, or `None` after printing why the
/// test is skipped. With `CI` set a missing program fails the test instead (`.ci/run`
/// installs it). Looks on PATH and in the sbin directories, which a non-root PATH may lack.
pub fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let sbin = ["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from);
    let found = std::env::split_paths(&path).chain(sbin).map(|dir| dir.join(name)).find(|p| p.is_file());
    if found.is_none() {
        if std::env::var_os("CI").is_some() {
            panic!("{name} is not installed: CI must run this test ('.ci/run' installs the package '{package}')");
        }
        eprintln!("skipped: {name} is not installed (apt-get install {package})");
    }
    found
}

/// Smart HTTP: `git http-backend` run by lighttpd (mod_cgi) on 127.0.0.1, serving every bare
/// repository under the test's root with pushes enabled; stopped (killed and reaped) when
/// dropped, whatever the test did. Its configuration, user file and upload directory live in
/// `<root>/http-<port>/`, its error log (with the backend's stderr) is `<root>/http-<port>.log`.
///
/// With users (`start_with_users`) every request needs basic authentication, and lighttpd
/// hands the user to the backend as `REMOTE_USER`, which reaches the repository's hooks.
pub struct HttpServer {
    child: Child,
    port: u16,
    root: PathBuf,
    users: Vec<(String, String)>,
}

impl HttpServer {
    /// Start one open to anyone, or `None` (the test is skipped) when lighttpd is not
    /// installed and `CI` is unset.
    #[must_use = "a test without a server is skipped: return early on None"]
    pub fn start(env: &TestEnv) -> Option<HttpServer> {
        HttpServer::start_with_users(env, &[])
    }

    /// Start one that only `users` (name, password) may use, fetch and push alike.
    #[must_use = "a test without a server is skipped: return early on None"]
    pub fn start_with_users(env: &TestEnv, users: &[(&str, &str)]) -> Option<HttpServer> {
        let lighttpd = tool("lighttpd", "lighttpd")?;
        let backend = PathBuf::from(env.git(env.root.path(), &["--exec-path"])).join("git-http-backend");
        let users: Vec<(String, String)> = users.iter().map(|(u, p)| ((*u).to_owned(), (*p).to_owned())).collect();
        // As with the daemon: another process may take the probed port before lighttpd binds
        // it; lighttpd then exits and we try another.
        for _attempt in 0..5 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .expect("a free port on 127.0.0.1")
                .port();
            let dir = env.path(&format!("http-{port}"));
            std::fs::create_dir_all(&dir).expect("create the server's directory");
            // lighttpd's own complaints before it opens its error log (a bad configuration) go
            // to the same file.
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(env.path(&format!("http-{port}.log")))
                .expect("http server log");
            let config = dir.join("lighttpd.conf");
            std::fs::write(&config, lighttpd_config(env, port, &backend, &dir, &users)).expect("write lighttpd.conf");
            let child = env
                .seal(&mut Command::new(&lighttpd))
                .args(["-D", "-f"])
                .arg(&config)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn lighttpd");
            let mut server = HttpServer { child, port, root: env.root.path().to_owned(), users: users.clone() };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if server.child.try_wait().expect("poll lighttpd").is_some() {
                    break;
                }
                if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                    return Some(server);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Dropping `server` here stops it if it is still running.
        }
        panic!(
            "lighttpd did not start listening on 127.0.0.1 within 5 attempts (see the http-*.log files in {})",
            env.root.path().display()
        );
    }

    /// The URL of `bare` (a repository under the test's root), without credentials: a server
    /// with users refuses it.
    pub fn url(&self, bare: &Path) -> String {
        format!("http://127.0.0.1:{}/{}", self.port, self.repo_path(bare))
    }

    /// The URL of `bare` with `user`'s name and password in it, so git authenticates without
    /// prompting (and keeps them in a clone's remote URL).
    pub fn url_as(&self, bare: &Path, user: &str) -> String {
        let (_, password) = self
            .users
            .iter()
            .find(|(name, _)| name == user)
            .unwrap_or_else(|| panic!("no user '{user}' on this server"));
        format!("http://{user}:{password}@127.0.0.1:{}/{}", self.port, self.repo_path(bare))
    }

    /// `bare`'s path below the served root, which is its path in URLs.
    fn repo_path(&self, bare: &Path) -> String {
        let rel = bare
            .strip_prefix(&self.root)
            .unwrap_or_else(|_| panic!("{} is not under the served root {}", bare.display(), self.root.display()));
        rel.to_str().expect("utf-8 path").to_owned()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// lighttpd's configuration: every URL is a path below `git http-backend` (lighttpd passes the
/// rest as PATH_INFO), whose environment is sealed like the tests' own.
fn lighttpd_config(env: &TestEnv, port: u16, backend: &Path, dir: &Path, users: &[(String, String)]) -> String {
    let quoted = |path: &Path| format!("\"{}\"", path.display());
    let root = env.root.path();
    let mut vars = vec![
        ("GIT_PROJECT_ROOT", root.display().to_string()),
        ("GIT_HTTP_EXPORT_ALL", String::new()),
        ("GIT_CONFIG_NOSYSTEM", "1".to_owned()),
        ("GIT_CONFIG_GLOBAL", "/dev/null".to_owned()),
        ("HOME", env.home.display().to_string()),
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("TZ", "UTC".to_owned()),
        ("LC_ALL", "C".to_owned()),
        // The server's clock, which git-loop's pre-receive hook judges claims by, is the
        // tests' pinned one (as a daemon's: it runs sealed).
        ("GIT_LOOP_NOW", NOW.to_owned()),
    ];
    if users.is_empty() {
        // receive-pack over HTTP is off unless a user authenticated or the server says so;
        // saying it here covers every repository under the root, made before or after.
        vars.extend([
            ("GIT_CONFIG_COUNT", "1".to_owned()),
            ("GIT_CONFIG_KEY_0", "http.receivepack".to_owned()),
            ("GIT_CONFIG_VALUE_0", "true".to_owned()),
        ]);
    }
    let vars: Vec<String> = vars.iter().map(|(k, v)| format!("\"{k}\" => \"{v}\"")).collect();
    let mut config = format!(
        "server.modules = ( \"mod_auth\", \"mod_authn_file\", \"mod_alias\", \"mod_setenv\", \"mod_cgi\" )\n\
         server.bind = \"127.0.0.1\"\n\
         server.port = {port}\n\
         server.document-root = {root}\n\
         server.errorlog = {log}\n\
         server.pid-file = {pid}\n\
         server.upload-dirs = ( {dir} )\n\
         alias.url = ( \"/\" => \"{backend}/\" )\n\
         cgi.assign = ( \"\" => \"\" )\n\
         setenv.set-environment = ( {vars} )\n",
        root = quoted(root),
        log = quoted(&env.path(&format!("http-{port}.log"))),
        pid = quoted(&dir.join("lighttpd.pid")),
        dir = quoted(dir),
        backend = backend.display(),
        vars = vars.join(", "),
    );
    if !users.is_empty() {
        let file = dir.join("users");
        let lines: String = users.iter().map(|(user, password)| format!("{user}:{password}\n")).collect();
        std::fs::write(&file, lines).expect("write the user file");
        let _ = write!(
            config,
            "auth.backend = \"plain\"\n\
             auth.backend.plain.userfile = {file}\n\
             auth.require = ( \"/\" => ( \"method\" => \"basic\", \"realm\" => \"git\", \"require\" => \"valid-user\" ) )\n",
            file = quoted(&file),
        );
    }
    config
}

/// Tests that measure time (latencies, Ctrl-C windows, leases, a fleet's convergence within a
/// bound) take this first, so that they run one at a time: on a small machine two of them at
/// once would each measure the other.
///
/// The lock is a file lock (`flock`) under the build's temporary directory, so it holds across
/// processes: under `cargo nextest`, where every test is a process of its own, as under
/// `cargo test`'s threads. It is let go when the guard is dropped or the process ends.
/// `.config/nextest.toml` names the same tests in its `heavy` group.
pub fn heavy() -> Heavy {
    lock_named("heavy-tests.lock")
}

/// Fleets of clones that only count (every task once, converged) and measure no time take this
/// first: one of them at a time beside one [`heavy`] test, as nextest's `fleets` group runs them,
/// so that two chains of big scenarios share the machine instead of one chain taking all of it.
pub fn fleet() -> Heavy {
    lock_named("fleet-tests.lock")
}

fn lock_named(name: &str) -> Heavy {
    use std::os::fd::AsRawFd as _;
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|err| panic!("open {}: {err}", path.display()));
    // SAFETY: flock on a descriptor this function owns; it blocks until the lock is ours.
    while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        let err = std::io::Error::last_os_error();
        assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "lock {}: {err}", path.display());
    }
    Heavy(file)
}

/// A big scenario's lock ([`heavy`], [`fleet`]), held until dropped.
pub struct Heavy(#[allow(dead_code)] std::fs::File);

/// A PATH that holds only `programs` (each linked from where the test's own PATH finds it), so
/// that a test means what is installed and what is not, whatever this machine has.
pub fn path_with(env: &TestEnv, programs: &[&str]) -> String {
    let bin = env.path("path-with");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for program in programs {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(program))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{program} is not on the tests' PATH"));
        let link = bin.join(program);
        if !link.exists() {
            std::os::unix::fs::symlink(found, link).expect("link");
        }
    }
    bin.display().to_string()
}

/// Hold `lock` open in a process of its own, as git holds the locks it takes, until dropped.
pub struct Holder(std::process::Child);

impl Holder {
    pub fn open(lock: &std::path::Path) -> Holder {
        let child = std::process::Command::new("sh")
            .args(["-c", &format!("exec 3>>'{}'; exec sleep 120", lock.display())])
            .spawn()
            .expect("a holder");
        wait_for("the holder's lock", || lock.exists());
        // Give the shell the moment it needs to have the file open, not only created.
        wait_for("the holder to have it open", || {
            std::fs::read_dir(format!("/proc/{}/fd", child.id()))
                .map(|fds| {
                    fds.flatten().any(|fd| {
                        std::fs::read_link(fd.path()).is_ok_and(|p| p.ends_with(lock.file_name().expect("a name")))
                    })
                })
                .unwrap_or(false)
        });
        Holder(child)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
