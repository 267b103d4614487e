//! A fleet that rides out the network (issue 31): three clones of one `git daemon` remote,
//! guarded by git-loop's pre-receive hook, each reaching it through a small TCP proxy of its
//! own that this module runs on 127.0.0.1. The proxies reset every third connection, then stall
//! every connection, then cut one clone off altogether while it holds a claim; then the network
//! heals. What must hold: no walk stops (each ends with no work left), each outage is said once
//! and its end said, every task is done exactly once, the cut-off clone's late result on a task
//! another clone took over meanwhile is a kept try (on the remote, never a second done), and
//! every clone is equal to the remote within two sync intervals of the heal.
//!
//! The short version runs in CI (a dozen tasks, seconds per phase); the full one (3 clones × 60
//! tasks, a 20 s stall, two minutes cut off) is `soak::three_clones_ride_out_…` (ignored, run on
//! demand), and docs/reliability.md (F11) has its figures.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::fleet::{assert_converged, finish, guarded, loop_run, sessions_per_task, start_walk, Walk};
use crate::harness::{Repo, TestEnv};

/// What a proxy does with a connection it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Pass it on.
    Pass,
    /// Reset every third connection at once (TCP RST), pass the others on.
    ResetEveryThird,
    /// Hold the connection this long before passing it on: a stalled network or server.
    Stall(Duration),
    /// Accept it and pass nothing either way until the mode changes, then close it: a clone
    /// cut off (its packets dropped), not refused.
    Cut,
    /// Pass it on at this many bytes a second each way: a slow link.
    Throttle(u64),
    /// Pass this many bytes each way, then nothing more (the connection left open): a transfer
    /// that stalls half-way.
    StallAfter(u64),
}

/// What a proxy did, by kind of connection.
#[derive(Debug, Default)]
pub struct Counts {
    pub accepted: AtomicUsize,
    pub reset: AtomicUsize,
    pub stalled: AtomicUsize,
    pub cut: AtomicUsize,
}

/// A TCP proxy on 127.0.0.1 in front of `upstream`, whose behaviour the test sets (`set`);
/// stopped, with every connection it holds, when dropped.
pub struct Proxy {
    pub port: u16,
    mode: Arc<Mutex<Mode>>,
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    /// Every socket it holds, to shut down when it stops.
    held: Arc<Mutex<Vec<TcpStream>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a port for the proxy");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let port = listener.local_addr().expect("its address").port();
        let mode = Arc::new(Mutex::new(Mode::Pass));
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (m, c, s, h) = (mode.clone(), counts.clone(), stop.clone(), held.clone());
        let thread = std::thread::spawn(move || accept_loop(listener, upstream, m, c, s, h));
        Proxy { port, mode, counts, stop, held, thread: Some(thread) }
    }

    pub fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner()) = mode;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for stream in self.held.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    upstream: u16,
    mode: Arc<Mutex<Mode>>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    held: Arc<Mutex<Vec<TcpStream>>>,
) {
    while !stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                // A server's accept loop, not a race: look again in a moment.
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(_) => continue,
        };
        let _ = client.set_nonblocking(false);
        let n = counts.accepted.fetch_add(1, Ordering::SeqCst);
        let now = *mode.lock().unwrap_or_else(|e| e.into_inner());
        match now {
            Mode::ResetEveryThird if n % 3 == 2 => {
                counts.reset.fetch_add(1, Ordering::SeqCst);
                reset(client);
            }
            Mode::Pass | Mode::ResetEveryThird => pass(client, upstream, &held),
            Mode::Throttle(rate) => pass_shaped(client, upstream, &held, Shape { rate: Some(rate), stall_after: None }),
            Mode::StallAfter(bytes) => {
                counts.stalled.fetch_add(1, Ordering::SeqCst);
                pass_shaped(client, upstream, &held, Shape { rate: None, stall_after: Some(bytes) })
            }
            Mode::Stall(length) => {
                counts.stalled.fetch_add(1, Ordering::SeqCst);
                let (held, stop) = (held.clone(), stop.clone());
                std::thread::spawn(move || {
                    let until = Instant::now() + length;
                    while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    pass(client, upstream, &held);
                });
            }
            Mode::Cut => {
                counts.cut.fetch_add(1, Ordering::SeqCst);
                let (mode, stop) = (mode.clone(), stop.clone());
                std::thread::spawn(move || {
                    while *mode.lock().unwrap_or_else(|e| e.into_inner()) == Mode::Cut && !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    // Healed: whatever the client sent is lost, as in a real partition.
                    reset(client);
                });
            }
        }
    }
}

/// The port and the repository path of a `git://127.0.0.1:<port>/<path>` URL of the daemon.
fn port_and_path(direct: &str) -> (u16, String) {
    let upstream: u16 = direct
        .trim_start_matches("git://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the daemon's port");
    let path = direct.split_once(&format!(":{upstream}/")).map(|(_, p)| p.to_owned()).expect("its path");
    (upstream, path)
}

/// Close `stream` with a TCP reset (SO_LINGER 0), as a middlebox or a crashed server does.
fn reset(stream: TcpStream) {
    use std::os::fd::AsRawFd as _;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt on a socket this function owns, with a correctly sized option.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}

/// How a passed connection's bytes are shaped.
#[derive(Debug, Clone, Copy, Default)]
struct Shape {
    /// Bytes a second each way.
    rate: Option<u64>,
    /// Bytes each way after which nothing more passes.
    stall_after: Option<u64>,
}

/// Pass `client` on to the upstream port, both ways, until either side closes.
fn pass(client: TcpStream, upstream: u16, held: &Arc<Mutex<Vec<TcpStream>>>) {
    pass_shaped(client, upstream, held, Shape::default());
}

/// `pass`, with the bytes shaped.
fn pass_shaped(client: TcpStream, upstream: u16, held: &Arc<Mutex<Vec<TcpStream>>>, shape: Shape) {
    let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream)) else {
        reset(client);
        return;
    };
    {
        let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
        held.retain(|s| s.peer_addr().is_ok());
        for s in [&client, &server] {
            if let Ok(copy) = s.try_clone() {
                held.push(copy);
            }
        }
    }
    let pump = move |mut from: TcpStream, mut to: TcpStream| {
        std::thread::spawn(move || {
            // Throttled, in slices of a tenth of a second's worth.
            let slice = shape.rate.map_or(16 * 1024, |r| (r / 10).clamp(1, 16 * 1024) as usize);
            let mut buf = vec![0u8; slice];
            let mut passed = 0u64;
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let n = match shape.stall_after {
                            Some(limit) if passed >= limit => {
                                // Stalled: the bytes are dropped, the connection kept open
                                // until the other side gives up.
                                continue;
                            }
                            Some(limit) => n.min((limit - passed) as usize),
                            None => n,
                        };
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        passed += n as u64;
                        if let Some(rate) = shape.rate {
                            std::thread::sleep(Duration::from_secs_f64(n as f64 / rate as f64));
                        }
                    }
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        })
    };
    let (c2, s2) = match (client.try_clone(), server.try_clone()) {
        (Ok(c), Ok(s)) => (c, s),
        _ => return,
    };
    pump(client, s2);
    pump(server, c2);
}

/// The shape of one run of the scenario.
pub struct Scenario {
    pub tasks: usize,
    /// How long each agent session takes.
    pub agent_secs: u32,
    pub lease: &'static str,
    pub sync_every: Duration,
    pub transfer_timeout: Duration,
    /// Connections are reset (every third) until this many tasks are done.
    pub reset_until_done: usize,
    /// Then every new connection is held this long before it is passed on...
    pub stall: Duration,
    /// ... for this long.
    pub stall_for: Duration,
    /// Then the last clone is cut off, once it holds a claim mid-session, for this long.
    pub cut_for: Duration,
}

/// What a run of the scenario measured.
#[derive(Debug)]
pub struct Figures {
    pub tasks: usize,
    pub sessions: usize,
    /// Tasks with more than one session (a kept try of the cut-off clone, a takeover).
    pub worked_twice: usize,
    /// From the heal until the cut-off clone holds every task the remote had done at the heal
    /// and the remote holds every try branch the clone had made.
    pub converged_after: Duration,
    pub elapsed: Duration,
    pub resets: usize,
    pub stalls: usize,
    pub cut_connections: usize,
    /// Per clone: "does not answer" lines, and "answers again" lines.
    pub said: Vec<(usize, usize)>,
    /// The tasks the cut-off clone worked and lost while cut off (kept tries).
    pub kept_tries: Vec<String>,
}

/// The done anchors of a repository: the tasks it holds as done.
fn done_set(env: &TestEnv, dir: &Path) -> BTreeSet<String> {
    let out = env.git(dir, &["for-each-ref", "--format=%(refname)", "refs/loop/done/"]);
    out.lines().map(ToOwned::to_owned).collect()
}

/// The try branches of a repository, with their heads.
fn try_branches(env: &TestEnv, dir: &Path) -> BTreeMap<String, String> {
    let out = env.git(dir, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/loop-try/"]);
    out.lines().filter_map(|l| l.split_once(' ')).map(|(n, id)| (n.to_owned(), id.to_owned())).collect()
}

/// Wait until `cond` holds, for up to 10 minutes (a phase of the full scenario takes minutes).
fn wait_long(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the repository at `dir` has branch `name` at `id` or past it.
fn holds(env: &TestEnv, dir: &Path, name: &str, id: &str) -> bool {
    let mut cmd = std::process::Command::new("git");
    env.seal(&mut cmd).args(["merge-base", "--is-ancestor", id, name]).current_dir(dir);
    cmd.output().is_ok_and(|out| out.status.success())
}

/// Run the scenario: three clones, each behind its own proxy, walk one backlog through the
/// phases; then every invariant is checked and the figures returned.
pub fn ride_out(s: &Scenario) -> Figures {
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    let direct = daemon.url(&bare);
    let (upstream, path) = port_and_path(&direct);
    let seed = env.clone_of(&direct, "seed");
    loop_run(&seed, &["init", "--remote", "origin"]).ok();
    let lines: String = (0..s.tasks).map(|i| format!("{{\"title\": \"task {i:03}\"}}\n")).collect();
    let file = env.path("backlog.jsonl");
    std::fs::write(&file, lines).expect("write the backlog");
    loop_run(&seed, &["import", file.to_str().expect("utf-8 path")]).ok();
    loop_run(&seed, &["sync"]).ok();
    let proxies: Vec<Proxy> = (0..3).map(|_| Proxy::start(upstream)).collect();
    let clones: Vec<Repo<'_>> = proxies
        .iter()
        .enumerate()
        .map(|(i, proxy)| {
            let clone = env.clone_of(&direct, &format!("clone-{i}"));
            clone.git(&["remote", "set-url", "origin", &format!("git://127.0.0.1:{}/{path}", proxy.port)]);
            loop_run(&clone, &["init", "--remote", "origin"]).ok();
            clone.git(&["config", "loop.syncEvery", &format!("{}s", s.sync_every.as_secs())]);
            clone.git(&["config", "loop.transferTimeout", &format!("{}s", s.transfer_timeout.as_secs())]);
            loop_run(&clone, &["sync"]).ok();
            clone
        })
        .collect();
    let agent = env.agent(
        "steady",
        &format!(
            "sleep {}\necho \"$GIT_LOOP_TASK\" > \"done-$GIT_LOOP_TASK.txt\"\ngit loop finish done --message ok",
            s.agent_secs
        ),
    );
    let started = Instant::now();
    for proxy in &proxies {
        proxy.set(Mode::ResetEveryThird);
    }
    let walks: Vec<Walk> =
        clones.iter().map(|c| start_walk(c, &agent, &["--parallel", "1", "--lease", s.lease])).collect();

    // Phase 1: resets, until some tasks are done.
    wait_long("tasks done through the resets", || done_set(&env, &bare).len() >= s.reset_until_done);
    // Phase 2: every new connection stalls.
    for proxy in &proxies {
        proxy.set(Mode::Stall(s.stall));
    }
    let stall_ends = Instant::now() + s.stall_for;
    while Instant::now() < stall_ends {
        std::thread::sleep(Duration::from_millis(100));
    }
    for proxy in &proxies {
        proxy.set(Mode::Pass);
    }
    // Phase 3: the last clone is cut off in the middle of a session, holding its claim.
    let victim = &clones[2];
    let mid_session = || victim.session_records().iter().any(|r| r["ended_at"].is_null());
    wait_long("the last clone to be mid-session", mid_session);
    proxies[2].set(Mode::Cut);
    let cut_at = Instant::now();
    while cut_at.elapsed() < s.cut_for {
        std::thread::sleep(Duration::from_millis(100));
    }
    let remote_done = done_set(&env, &bare);
    let victim_tries = try_branches(&env, &victim.dir);
    proxies[2].set(Mode::Pass);
    let healed = Instant::now();
    // It sees the fleet's work, and the fleet sees its own.
    let deadline = healed + Duration::from_secs(120);
    loop {
        let sees = done_set(&env, &victim.dir).is_superset(&remote_done);
        let seen = victim_tries.iter().all(|(name, id)| holds(&env, &bare, name, id));
        if sees && seen {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cut-off clone and the remote did not converge within 2 min of the heal"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let converged_after = healed.elapsed();

    let mut said = Vec::new();
    for (i, walk) in walks.into_iter().enumerate() {
        let out = finish(walk, "a walk");
        assert_eq!(
            out.code, 0,
            "walk {i} rides the faults out and ends with no work left:\n{}{}",
            out.stdout, out.stderr
        );
        let silent = out.stderr.lines().filter(|l| l.contains("does not answer")).count();
        let back = out.stdout.lines().filter(|l| l.contains("answers again")).count();
        assert_eq!(silent, back, "walk {i}: each outage said once, and its end:\n{}{}", out.stdout, out.stderr);
        let stray: Vec<&str> =
            out.stderr.lines().filter(|l| l.contains("did not answer") || l.contains("could not sync")).collect();
        assert!(stray.is_empty(), "walk {i}: no fault said but as an outage: {stray:?}");
        said.push((silent, back));
    }
    assert!(said[2].0 >= 1, "the cut-off clone said that the remote did not answer: {said:?}");
    let elapsed = started.elapsed();

    let all: Vec<&Repo<'_>> = clones.iter().collect();
    assert_converged(&env, &bare, &all);
    // Each task done exactly once: one task_done in the (common) journal, one done anchor.
    let log = loop_run(&clones[0], &["log", "--json"]).ok().json();
    let mut done_events: BTreeMap<String, usize> = BTreeMap::new();
    for event in log["events"].as_array().expect("events") {
        if event["kind"] == "task_done" {
            *done_events.entry(event["task"].as_str().unwrap_or_default().to_owned()).or_default() += 1;
        }
    }
    assert_eq!(done_events.len(), s.tasks, "every task done: {done_events:?}");
    assert!(done_events.values().all(|n| *n == 1), "each done once: {done_events:?}");
    let per_task = sessions_per_task(&all);
    // The cut-off clone's tries: each one's work is on the remote, on a task done once; a try it
    // lost while cut off is a kept try (its task done by another clone).
    let mut kept_tries = Vec::new();
    for record in victim.session_records() {
        let task = record["task"].as_str().expect("a task").to_owned();
        let number = record["try"].as_u64().expect("a try number");
        let branch = format!("refs/heads/loop-try/{task}/{number}");
        let files = env.git(&bare, &["ls-tree", "-r", "--name-only", &branch]);
        assert!(
            files.lines().any(|f| f == format!("done-{task}.txt")),
            "the remote holds the cut-off clone's work on {branch}: {files}"
        );
        let completing = env.git(&bare, &["rev-parse", &format!("refs/loop/done/{task}")]);
        let ours = env.git(&bare, &["rev-parse", &branch]);
        let done_by_us = env.git(&bare, &["branch", "--contains", &ours, "--list", &format!("loop/{task}")]);
        if per_task.get(&task).copied().unwrap_or(0) > 1 && done_by_us.trim().is_empty() {
            kept_tries.push(format!("{task} (try {number}; done by {completing:.12})"));
        }
    }
    let counts = |f: fn(&Counts) -> &AtomicUsize| proxies.iter().map(|p| f(&p.counts).load(Ordering::SeqCst)).sum();
    let figures = Figures {
        tasks: s.tasks,
        sessions: per_task.values().sum(),
        worked_twice: per_task.values().filter(|n| **n > 1).count(),
        converged_after,
        elapsed,
        resets: counts(|c| &c.reset),
        stalls: counts(|c| &c.stalled),
        cut_connections: counts(|c| &c.cut),
        said,
        kept_tries,
    };
    assert!(figures.resets > 0 && figures.stalls > 0 && figures.cut_connections > 0, "every fault met: {figures:?}");
    let bound = s.sync_every * 2 + s.transfer_timeout + Duration::from_secs(3);
    assert!(figures.converged_after <= bound, "converged within two sync intervals of the heal: {figures:?}");
    eprintln!("fleet_net figures: {figures:?}");
    figures
}

/// The short version for CI: three clones × 12 tasks; resets until 3 are done, every new
/// connection stalled 3 s (past the 1 s transfer timeout) for 4 s, the last clone cut off for
/// 12 s (four leases of 3 s) while it holds a claim, then healed.
#[test]
fn three_clones_ride_out_resets_a_stall_and_a_partition_doing_each_task_once() {
    let _one_at_a_time = crate::harness::heavy();
    let figures = ride_out(&Scenario {
        tasks: 12,
        agent_secs: 1,
        lease: "3s",
        sync_every: Duration::from_secs(3),
        transfer_timeout: Duration::from_secs(1),
        reset_until_done: 3,
        stall: Duration::from_secs(3),
        stall_for: Duration::from_secs(4),
        cut_for: Duration::from_secs(12),
    });
    // Cut off for four leases, its claim is taken over by another clone: the work it did
    // meanwhile is a kept try, on the remote, and its task was done once, by the other clone.
    assert_eq!(figures.kept_tries.len(), 1, "one kept try: {figures:?}");
    assert_eq!((figures.worked_twice, figures.sessions), (1, 13), "one task worked twice, the rest once: {figures:?}");
}

// ----- the same fleet over ssh and over nginx + fcgiwrap + git http-backend -----

/// A free port on 127.0.0.1 (another process may take it before the server binds it: the
/// servers below try again then).
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).and_then(|l| l.local_addr()).expect("a free port").port()
}

/// Wait (bounded) until `child` listens on `port`; false if it exited or did not in 10 s.
fn listening(child: &mut std::process::Child, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().expect("poll a server").is_some() {
            return false;
        }
        if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The PATH the servers run git and git-loop (the remote's hook) with: the tests' own, and the
/// directory of the git-loop under test.
fn server_path() -> String {
    let bin = Path::new(crate::harness::bin()).parent().expect("a directory").display().to_string();
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

/// An OpenSSH server on 127.0.0.1 that lets this test's user in with a key of its own (and
/// nothing else), running git and the remote's hook on the real clock; stopped when dropped.
pub struct Sshd {
    child: std::process::Child,
    port: u16,
    /// Where the clients' shared connections have their sockets.
    dir: std::path::PathBuf,
    /// What git runs as `ssh` to reach it (`core.sshCommand`).
    pub command: String,
}

impl Sshd {
    /// Start one, or `None` (the test is skipped) when sshd is not installed and `CI` is unset.
    pub fn start(env: &TestEnv) -> Option<Sshd> {
        let sshd = crate::harness::tool("sshd", "openssh-server")?;
        let dir = env.path("sshd");
        std::fs::create_dir_all(&dir).expect("the server's directory");
        for (key, what) in [("host_key", "the host key"), ("client_key", "the client key")] {
            let out = std::process::Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "git-loop-test", "-f"])
                .arg(dir.join(key))
                .output()
                .expect("run ssh-keygen");
            assert!(out.status.success(), "ssh-keygen made {what}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let public = std::fs::read_to_string(dir.join("client_key.pub")).expect("the client's public key");
        std::fs::write(
            dir.join("authorized_keys"),
            format!("environment=\"PATH={}\",environment=\"GIT_CONFIG_NOSYSTEM=1\" {public}", server_path()),
        )
        .expect("authorized_keys");
        // sshd run by root needs its privilege separation directory.
        if unsafe { libc::geteuid() } == 0 {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        for _attempt in 0..5 {
            let port = free_port();
            let config = dir.join(format!("sshd-{port}.conf"));
            std::fs::write(
                &config,
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {pid}\nAuthorizedKeysFile {keys}\n\
                     PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     UsePAM no\nStrictModes no\nPermitUserEnvironment yes\nPermitRootLogin prohibit-password\n\
                     MaxStartups 100:30:200\nLogLevel ERROR\n",
                    host = dir.join("host_key").display(),
                    pid = dir.join(format!("sshd-{port}.pid")).display(),
                    keys = dir.join("authorized_keys").display(),
                ),
            )
            .expect("sshd_config");
            let log = std::fs::File::create(env.path(&format!("sshd-{port}.log"))).expect("sshd log");
            let mut child = std::process::Command::new(&sshd)
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn sshd");
            if listening(&mut child, port) {
                // One connection shared by every git call (as people set ssh up for git): a key
                // exchange per call would cost more than the calls. The shared connection ends
                // with the server.
                let command = format!(
                    "ssh -F /dev/null -i {key} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes -o ControlMaster=auto -o ControlPath={dir}/cm-%C -o ControlPersist=30 -p {port}",
                    key = dir.join("client_key").display(),
                    dir = dir.display()
                );
                return Some(Sshd { child, port, dir, command });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("sshd did not start listening on 127.0.0.1 within 5 attempts (see the sshd-*.log files)");
    }

    /// The URL of `bare` on this server, for this test's user.
    pub fn url(&self, bare: &Path) -> String {
        let user = std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| {
            // SAFETY: getpwuid returns a pointer into static storage or null; read at once.
            unsafe {
                let pw = libc::getpwuid(libc::geteuid());
                assert!(!pw.is_null(), "this user has a passwd entry");
                std::ffi::CStr::from_ptr((*pw).pw_name).to_string_lossy().into_owned()
            }
        });
        format!("ssh://{user}@127.0.0.1:{}{}", self.port, bare.display())
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // The clients' shared connections first (each lingers for its ControlPersist), which
        // ends the server's session processes too; then the server.
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with("cm-") {
                let _ = std::process::Command::new("ssh")
                    .args(["-F", "/dev/null", "-O", "exit", "-S"])
                    .arg(entry.path())
                    .arg("127.0.0.1")
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx on 127.0.0.1 passing every request to `git http-backend` through fcgiwrap, serving
/// every bare repository under the test's root with pushes enabled, on the real clock;
/// both stopped when dropped.
pub struct Nginx {
    nginx: std::process::Child,
    fcgiwrap: std::process::Child,
    port: u16,
    root: std::path::PathBuf,
}

impl Nginx {
    /// Start them, or `None` (the test is skipped) when either is missing and `CI` is unset.
    pub fn start(env: &TestEnv) -> Option<Nginx> {
        let nginx = crate::harness::tool("nginx", "nginx")?;
        let fcgiwrap = crate::harness::tool("fcgiwrap", "fcgiwrap")?;
        let backend = Path::new(&env.git(env.root.path(), &["--exec-path"])).join("git-http-backend");
        let dir = env.path("nginx");
        for sub in ["body", "fastcgi", "proxy", "uwsgi", "scgi", "logs"] {
            std::fs::create_dir_all(dir.join(sub)).expect("nginx's directories");
        }
        let socket = dir.join("fcgiwrap.sock");
        let fcgi_log = std::fs::File::create(env.path("fcgiwrap.log")).expect("fcgiwrap log");
        // In a process group of its own: it forks its children, which stop with the group.
        let mut fcgiwrap = std::process::Command::new(&fcgiwrap)
            .process_group(0)
            .args(["-c", "4", "-s"])
            .arg(format!("unix:{}", socket.display()))
            .env_clear()
            .env("PATH", server_path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(fcgi_log)
            .spawn()
            .expect("spawn fcgiwrap");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            if Instant::now() >= deadline || fcgiwrap.try_wait().expect("poll fcgiwrap").is_some() {
                let _ = fcgiwrap.kill();
                let _ = fcgiwrap.wait();
                panic!("fcgiwrap did not start (see fcgiwrap.log)");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let root = env.root.path().to_owned();
        let home = env.path("home");
        let params: Vec<(&str, String)> = vec![
            ("SCRIPT_FILENAME", backend.display().to_string()),
            ("PATH_INFO", "$uri".into()),
            ("QUERY_STRING", "$query_string".into()),
            ("REQUEST_METHOD", "$request_method".into()),
            ("CONTENT_TYPE", "$content_type".into()),
            ("CONTENT_LENGTH", "$content_length".into()),
            ("REMOTE_ADDR", "$remote_addr".into()),
            ("GIT_PROJECT_ROOT", root.display().to_string()),
            ("GIT_HTTP_EXPORT_ALL", String::new()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
            ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
            ("GIT_CONFIG_COUNT", "1".into()),
            ("GIT_CONFIG_KEY_0", "http.receivepack".into()),
            ("GIT_CONFIG_VALUE_0", "true".into()),
            ("HOME", home.display().to_string()),
            ("PATH", server_path()),
            ("LC_ALL", "C".into()),
            ("TZ", "UTC".into()),
        ];
        let params: String = params.iter().map(|(k, v)| format!("            fastcgi_param {k} \"{v}\";\n")).collect();
        for _attempt in 0..5 {
            let port = free_port();
            let config = dir.join(format!("nginx-{port}.conf"));
            std::fs::write(
                &config,
                format!(
                    "daemon off;\nmaster_process off;\nworker_processes 1;\npid {dir}/nginx-{port}.pid;\n\
                     error_log {dir}/logs/error-{port}.log warn;\nevents {{ worker_connections 256; }}\n\
                     http {{\n    access_log off;\n    client_body_temp_path {dir}/body;\n\
                         fastcgi_temp_path {dir}/fastcgi;\n    proxy_temp_path {dir}/proxy;\n\
                         uwsgi_temp_path {dir}/uwsgi;\n    scgi_temp_path {dir}/scgi;\n\
                         client_max_body_size 0;\n    server {{\n        listen 127.0.0.1:{port};\n\
                             location / {{\n            fastcgi_pass unix:{socket};\n\
                     {params}            fastcgi_read_timeout 300s;\n        }}\n    }}\n}}\n",
                    dir = dir.display(),
                    socket = socket.display(),
                ),
            )
            .expect("nginx.conf");
            let log = std::fs::File::create(env.path(&format!("nginx-{port}.log"))).expect("nginx log");
            let mut child = std::process::Command::new(&nginx)
                .args(["-e"])
                .arg(dir.join(format!("logs/error-{port}.log")))
                .arg("-p")
                .arg(&dir)
                .arg("-c")
                .arg(&config)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn nginx");
            if listening(&mut child, port) {
                return Some(Nginx { nginx: child, fcgiwrap, port, root });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // SAFETY: killpg only sends a signal, to the group this test started fcgiwrap in.
        unsafe {
            libc::killpg(fcgiwrap.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = fcgiwrap.wait();
        panic!("nginx did not start listening on 127.0.0.1 within 5 attempts (see the nginx-*.log files)");
    }

    pub fn url(&self, bare: &Path) -> String {
        let rel = bare.strip_prefix(&self.root).expect("a repository under the served root");
        format!("http://127.0.0.1:{}/{}", self.port, rel.display())
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.nginx.kill();
        let _ = self.nginx.wait();
        // SAFETY: killpg only sends a signal, to the group this test started fcgiwrap in.
        unsafe {
            libc::killpg(self.fcgiwrap.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = self.fcgiwrap.wait();
    }
}

/// Three clones walking 6 tasks over ssh (sshd on 127.0.0.1, key auth), through a remote
/// guarded by git-loop's hook: every task once, every sync through, converged. (Small for CI:
/// every call through sshd costs a session of its own, 0.3–0.4 s on a small machine, and a
/// unit makes a dozen calls; 3 × 12 tasks took 73 s.)
#[test]
fn three_clones_over_ssh_do_six_tasks_once_and_converge() {
    let _one_fleet_at_a_time = crate::harness::fleet();
    let env = TestEnv::new();
    let Some(sshd) = Sshd::start(&env) else { return };
    let bare = env.remote("fleet");
    env.install_receive_hook(&bare);
    let ssh = format!("core.sshCommand={}", sshd.command);
    let clones = crate::fleet::fleet_with(&env, &sshd.url(&bare), 3, 6, &["--config", &ssh]);
    crate::fleet::clones_do_every_task_once(&env, clones, &bare, 6);
}

/// The same over nginx, fcgiwrap and `git http-backend` (smart HTTP).
#[test]
fn three_clones_over_nginx_and_fcgiwrap_do_twelve_tasks_once_and_converge() {
    let _one_fleet_at_a_time = crate::harness::fleet();
    let env = TestEnv::new();
    let Some(server) = Nginx::start(&env) else { return };
    let bare = env.remote("fleet");
    env.install_receive_hook(&bare);
    let clones = crate::fleet::fleet_with(&env, &server.url(&bare), 3, 12, &[]);
    crate::fleet::clones_do_every_task_once(&env, clones, &bare, 12);
}

/// A fault that cannot heal — here the remote's repository is gone from under the daemon while
/// a walk works — stops the walk, in one line with what to do (not a walk that waits for ever).
#[test]
fn a_walk_stops_in_one_line_when_its_remote_has_no_repository_any_more() {
    let env = TestEnv::new();
    let (bare, daemon) = guarded(&env);
    let clone = env.clone_of(&daemon.url(&bare), "a");
    loop_run(&clone, &["init", "--remote", "origin"]).ok();
    clone.git(&["config", "loop.syncEvery", "1s"]);
    clone.add(&["One"]);
    loop_run(&clone, &["sync"]).ok();
    // Outside the home: a confined session has a private one.
    let started = env.path("started");
    let go = env.path("go");
    let agent = env.agent(
        "waits",
        &format!(
            "touch '{}'\nwhile [ ! -f '{}' ]; do sleep 0.1; done\ngit loop finish done",
            started.display(),
            go.display()
        ),
    );
    let walk = start_walk(&clone, &agent, &["--parallel", "1"]);
    wait_long("the session to start", || started.exists());
    std::fs::rename(&bare, env.path("moved.git")).expect("take the repository away");
    std::fs::write(&go, "").expect("let the agent finish");
    let out = finish(walk, "the walk");
    assert_eq!(out.code, 1, "the walk stops:\n{}{}", out.stdout, out.stderr);
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("error:") || l.starts_with("hint:")).collect();
    assert_eq!(errors.len(), 2, "one error line and its hint:\n{}", out.stderr);
    assert!(
        errors[0].starts_with("error: remote 'origin' has no repository at its URL (")
            && errors[0].contains("access denied or repository not exported: /fleet.git)"),
        "{}",
        out.stderr
    );
    assert_eq!(errors[1], "hint: check 'git remote get-url origin'; if it moved, 'git remote set-url origin <url>'");
    assert!(!out.stderr.contains("does not answer"), "not said as an outage: {}", out.stderr);
}

/// Issue 44: the transfer timeout cuts stalls, not work. With `loop.transferTimeout 1s`, a sync
/// publishing a 2 MiB task branch through a link slow enough that it takes three times that
/// succeeds; through a link that stalls half-way it is cut after the timeout, the error names
/// the stall, and a sync once the link is back publishes it.
#[test]
fn a_sync_that_moves_longer_than_the_timeout_succeeds_and_one_that_stalls_is_cut_naming_it() {
    let _one_at_a_time = crate::harness::heavy();
    let env = TestEnv::new();
    let bare = env.remote("slow");
    let daemon = crate::harness::Daemon::start_on_real_clock(&env);
    let direct = daemon.url(&bare);
    let (upstream, path) = port_and_path(&direct);
    let proxy = Proxy::start(upstream);
    let clone = env.clone_of(&direct, "slow");
    clone.git(&["remote", "set-url", "origin", &format!("git://127.0.0.1:{}/{path}", proxy.port)]);
    loop_run(&clone, &["init", "--remote", "origin"]).ok();
    clone.git(&["config", "loop.transferTimeout", "1s"]);
    // A task whose branch holds 2 MiB that do not compress (a pseudo-random sequence).
    let big_task = |seed: u64| -> String {
        let id = loop_run(&clone, &["add", &format!("big {seed}")]).ok().stdout.trim().to_owned();
        let mut x = seed;
        let bytes: Vec<u8> = (0..(2 << 20))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let file = env.path(&format!("big-{seed}.bin"));
        std::fs::write(&file, bytes).expect("write");
        let blob = clone.git(&["hash-object", "-w", file.to_str().expect("utf-8")]);
        let tree = clone.git_with_stdin(&["mktree"], &format!("100644 blob {blob}\tbig.bin\n"));
        let commit = clone.git(&["commit-tree", &tree, "-p", "HEAD", "-m", "big"]);
        clone.git(&["update-ref", &format!("refs/heads/loop/{id}"), &commit]);
        id
    };
    let on_remote = |id: &str| env.git(&bare, &["for-each-ref", "--format=%(refname)", "refs/heads/loop"]).contains(id);

    let first = big_task(7);
    proxy.set(Mode::Throttle(400 * 1024));
    let started = Instant::now();
    let synced = loop_run(&clone, &["sync"]);
    let took = started.elapsed();
    assert_eq!(synced.code, 0, "{}{}", synced.stdout, synced.stderr);
    assert!(on_remote(&first), "the remote holds it");
    assert!(took > Duration::from_secs(3), "the push moved for three timeouts and more: {took:?}");

    let second = big_task(11);
    proxy.set(Mode::StallAfter(256 * 1024));
    let cut = loop_run(&clone, &["sync"]);
    assert_ne!(cut.code, 0, "{}{}", cut.stdout, cut.stderr);
    assert!(
        cut.stderr.contains("stalled: nothing moved within the transfer timeout (1 s), after moving"),
        "the error names the stall: {}",
        cut.stderr
    );
    assert!(!on_remote(&second), "not published");
    proxy.set(Mode::Pass);
    let healed = loop_run(&clone, &["sync"]);
    assert_eq!(healed.code, 0, "{}{}", healed.stdout, healed.stderr);
    assert!(on_remote(&second), "published by the sync once the link is back");
}
