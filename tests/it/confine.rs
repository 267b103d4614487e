//! The hostile agent suite (issue 24): what an agent tries from inside its session, and that
//! it changes nothing but its own try. Every session here runs confined (bubblewrap, which CI
//! installs) in a world whose test directory is not made visible to sessions
//! (`TestEnv::strict`): an agent sees what any agent would.
//!
//! Each attack's exit status goes into `attacks.txt` in the agent's own worktree, which
//! commit-on-stop puts on its try branch, where the test reads it; the repository, the home and
//! the rest of the machine are checked from outside.

use std::path::Path;

use crate::harness::{path_with, Repo, TestEnv};

/// Whether bubblewrap can confine here; in CI it must (the suite fails rather than skips).
fn confinable() -> bool {
    let ok = std::process::Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "CI must be able to confine sessions: install bubblewrap");
        eprintln!("skipped: bubblewrap cannot confine here (apt install bubblewrap)");
    }
    ok
}

fn events(repo: &Repo<'_>, kind: &str) -> Vec<serde_json::Value> {
    repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

/// Each attack's name and exit status, as the agent wrote them on its try branch.
fn attacks(repo: &Repo<'_>, id: &str) -> std::collections::BTreeMap<String, String> {
    repo.git(&["show", &format!("loop/{id}:attacks.txt")])
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect()
}

fn task(repo: &Repo<'_>, id: &str) -> serde_json::Value {
    repo.run(&["show", id, "--json"]).ok().json()
}

#[test]
fn an_agent_in_a_confined_session_changes_its_own_try_and_nothing_else() {
    if !confinable() {
        return;
    }
    let env = TestEnv::strict();
    let repo = env.repo("r");
    let outside = env.path("outside");
    // The checks run the agent's code, confined too: what they write outside stays out.
    repo.git(&[
        "config",
        "loop.checks",
        &format!("test -f ok.txt && {{ echo x > {}-checks; true; }}", outside.display()),
    ]);
    repo.git(&["config", "loop.sandbox.tmpSize", "64m"]);
    std::fs::write(env.home().join(".gitconfig"), "[user]\n\tname = Secret Person\n").expect("gitconfig");
    std::fs::create_dir_all(env.home().join(".ssh")).expect("mkdir");
    std::fs::write(env.home().join(".ssh/id_ed25519"), "PRIVATE KEY\n").expect("key");
    // A tracked file the agent will put behind a link to the secrets, for commit-on-stop to read.
    std::fs::create_dir_all(repo.dir.join("d")).expect("mkdir");
    std::fs::write(repo.dir.join("d/id_ed25519"), "public\n").expect("write");
    repo.git(&["add", "d"]);
    repo.git(&["commit", "-q", "-m", "d"]);
    let victim = repo.add(&["victim", "-p", "p3"]);
    let attacker = repo.add(&["attacker", "-p", "p0"]);
    let before = repo.run(&["show", &victim, "--json"]).ok().json();
    let refs_before = repo.git(&["for-each-ref", "--format=%(refname) %(objectname)", "refs/loop/tasks", "refs/heads"]);
    let dir = repo.dir.display().to_string();
    let home = env.home().display().to_string();
    // Another clone's secret, outside the directories every sandbox hides (the build's own
    // temporary directory): absent all the same.
    let other = tempfile::Builder::new()
        .prefix("other-clone-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("a directory beside the build");
    let other_secret = other.path().join(".git/loop/claim-secret");
    std::fs::create_dir_all(other_secret.parent().expect("parent")).expect("mkdir");
    std::fs::write(&other_secret, "SECRET\n").expect("write");
    // Every line: an attack, then its exit status into attacks.txt. `try` keeps going.
    let script = format!(
        r#"set +e
try() {{ name=$1; shift; "$@" >/dev/null 2>&1; echo "$name $?" >> attacks.txt; }}
try done_other git loop done {victim} --message forged
try park_other git loop park {victim} --reason no
try edit_other git loop edit {victim} --title stolen
try claim_other git loop claim acquire node:{victim} --holder me
try add_task git loop add 'more work for me'
try read_state git loop list
try plant_checks git config loop.checks true
try plant_notify git config loop.notify 'touch {outside}'
try global_config git config --global loop.checks true
try update_ref git update-ref refs/loop/tasks/evil HEAD
try move_task_branch git update-ref refs/heads/loop/{victim} HEAD
try write_hook sh -c 'mkdir -p {dir}/.git/hooks && echo "touch {outside}" > {dir}/.git/hooks/pre-commit'
try write_config sh -c 'echo "[loop] checks = true" >> {dir}/.git/config'
try delete_claims rm -rf {dir}/.git/refs/loop
try push_other git push {dir} HEAD:refs/heads/loop/{victim}
try read_home cat {home}/.gitconfig
try read_ssh cat {home}/.ssh/id_ed25519
try write_main sh -c 'echo pwned > {dir}/pwned'
try write_outside sh -c 'echo pwned > {outside}'
try link_out ln -s {home}/.ssh/id_ed25519 leaked-key
try link_dir sh -c 'rm -rf d && ln -s {home}/.ssh d'
try see_walker sh -c 'for p in /proc/[0-9]*; do grep -q "run" $p/cmdline 2>/dev/null && tr "\0" " " < $p/cmdline | grep -q "git-loo[p] run" && exit 0; done; exit 1'
try fill_tmp sh -c 'dd if=/dev/zero of=/tmp/fill bs=1M count=200'
try garbage_report sh -c 'echo "not a report" >> "$GIT_LOOP_BOX/reports.jsonl"'
try forge_other_kind git loop journal append task_done --data '{{"by":"me"}}'
try finish_as_reviewer git loop finish approve --message fine
try anonymous_done env -u GIT_LOOP_SESSION -u GIT_LOOP_BOX git loop done {victim}
try read_shadow test -s /etc/shadow
try be_root sh -c 'test "$(id -u)" = 0'
try unmount umount /tmp
try capable sh -c 'grep -q "^CapEff:[[:space:]]*0*$" /proc/self/status && exit 1; exit 0'
try read_other_clone cat {other_secret}
echo hi > own.txt && git add own.txt && git -c user.name=a -c user.email=a@a commit -qm "own commit"; echo "own_commit $?" >> attacks.txt
touch ok.txt
git loop finish done --message 'attacked'
sh -c 'kill -9 -1'
"#,
        outside = outside.display(),
        other_secret = other_secret.display(),
    );
    let agent = env.agent("attacker", &script);
    let out = repo.run(&[
        "run",
        "--agent-cmd",
        &agent,
        "--task",
        &attacker,
        "--max-units",
        "1",
        "--grace",
        "1",
        "--sandbox",
        "required",
    ]);
    assert!(out.stdout.contains("sessions and checks run confined ("), "{}", out.stdout);
    let done = task(&repo, &attacker);
    assert_eq!(done["state"], "done", "the attacker's own task is done on its checks: {}{}", out.stdout, out.stderr);
    let got = attacks(&repo, &attacker);
    // The loop's own verbs from inside a session: refused with a usage error, each.
    // (a worker's finish words only; no event of a kind the loop reads)
    for refused in [
        "done_other",
        "park_other",
        "edit_other",
        "claim_other",
        "add_task",
        "read_state",
        "anonymous_done",
        "finish_as_reviewer",
        "forge_other_kind",
    ] {
        assert_eq!(got.get(refused).map(String::as_str), Some("2"), "{refused}: {got:?}");
    }
    // What a file system that is read-only or absent refuses (the rest — a global config, a
    // file under /tmp — lands in the session's own home and /tmp, checked from outside below).
    for failed in [
        "write_hook",
        "write_config",
        "push_other",
        "read_home",
        "read_ssh",
        "write_main",
        "see_walker",
        "fill_tmp",
        "read_shadow",
        "be_root",
        "unmount",
        "capable",
        "read_other_clone",
    ] {
        assert_ne!(got.get(failed).map(String::as_str), Some("0"), "{failed} must fail: {got:?}");
    }
    // What works, and stays in the session's own git directory.
    for inside in ["plant_checks", "plant_notify", "update_ref", "move_task_branch", "delete_claims", "own_commit"] {
        assert_eq!(got.get(inside).map(String::as_str), Some("0"), "{inside} works on its own copy: {got:?}");
    }
    // The repository, the home and the machine, from outside.
    let after = repo.run(&["show", &victim, "--json"]).ok().json();
    assert_eq!(
        (after["state"].as_str(), after["title"].as_str()),
        (Some("open"), Some("victim")),
        "the victim is untouched"
    );
    assert_eq!(after["claim"], before["claim"], "no claim on the victim");
    assert!(repo.git(&["config", "loop.checks"]).starts_with("test -f ok.txt &&"), "loop.checks as the person set it");
    assert!(!env.path("outside-checks").exists(), "the checks wrote nothing outside either");
    assert!(repo.run(&["status", "--json"]).ok().json().is_object());
    assert!(!repo.dir.join(".git/hooks/pre-commit").exists(), "no hook planted");
    assert!(!repo.dir.join("pwned").exists() && !outside.exists(), "nothing written outside the worktree");
    assert!(!Path::new("/tmp/fill").exists(), "the session's /tmp is its own");
    let refs_after = repo.git(&["for-each-ref", "--format=%(refname) %(objectname)", "refs/loop/tasks", "refs/heads"]);
    let changed: Vec<&str> = refs_after.lines().filter(|l| !refs_before.lines().any(|b| b == *l)).collect();
    assert!(changed.iter().all(|l| l.contains(&attacker)), "only the attacker's own refs moved: {changed:?}");
    assert!(
        !refs_after.contains("refs/loop/tasks/evil") && !refs_after.contains(&format!("refs/heads/loop/{victim} "))
    );
    assert_eq!(
        std::fs::read_to_string(env.home().join(".gitconfig")).expect("read"),
        "[user]\n\tname = Secret Person\n"
    );
    // Its own commit is on its try branch, its symlink is a link (the key's bytes are not).
    let branch = format!("loop/{attacker}");
    assert!(repo.git(&["log", "--format=%s", &branch]).lines().any(|s| s == "own commit"), "its own commit was taken");
    assert_eq!(repo.git(&["cat-file", "-t", &format!("{branch}:leaked-key")]), "blob");
    let mode = repo.git(&["ls-tree", &branch, "leaked-key"]);
    assert!(mode.starts_with("120000"), "a link, not the key: {mode}");
    let d = repo.git(&["ls-tree", &branch, "d"]);
    assert!(d.starts_with("120000"), "the directory became a link, its file gone: {d}");
    let objects = repo.git(&["rev-list", "--objects", "--all"]);
    for id in objects.lines().filter_map(|l| l.split(' ').next()) {
        if repo.git(&["cat-file", "-t", id]) == "blob" {
            assert!(!repo.git(&["cat-file", "-p", id]).contains("PRIVATE KEY"), "the key's bytes are in blob {id}");
        }
    }
    // Every refused write is journaled, naming what it tried.
    let overreach = events(&repo, "agent_overreach");
    let tried: Vec<(String, String)> = overreach
        .iter()
        .map(|e| {
            (
                e["data"]["command"].as_str().unwrap_or("").to_owned(),
                e["data"]["target"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for (command, target) in
        [("done", victim.as_str()), ("park", &victim), ("edit", &victim), ("claim acquire", &format!("node:{victim}"))]
    {
        assert!(tried.iter().any(|(c, t)| c == command && t == target), "{command} {target} journaled: {tried:?}");
    }
    assert!(tried.iter().any(|(c, _)| c == "report"), "the garbled report is journaled: {tried:?}");
    assert!(tried.iter().any(|(c, _)| c == "add"), "{tried:?}");
    assert!(overreach.iter().all(|e| e["task"] == attacker.as_str()), "journaled against the attacker's task");
}

#[test]
fn a_setting_planted_by_an_unconfined_session_is_named_and_the_next_walk_refuses_it() {
    let env = TestEnv::strict();
    let repo = env.repo("r");
    repo.git(&["config", "loop.checks", "test -f ok.txt"]);
    let victim = repo.add(&["victim", "-p", "p3"]);
    let first = repo.add(&["plants", "-p", "p0"]);
    // Unconfined (loop.sandbox off): it can write the repository's configuration, and does.
    let agent = env.agent(
        "planter",
        &format!(
            "if git loop done {victim} --message forged; then echo 'done 0' > {out}; else echo \"done $?\" > {out}; fi\ngit config loop.checks true\ntouch ok.txt\ngit loop finish done",
            out = env.path("said").display()
        ),
    );
    let out = repo.run(&["run", "--agent-cmd", &agent, "--task", &first, "--sandbox", "off", "--grace", "1"]).ok();
    assert!(out.stdout.contains("sessions run unconfined (loop.sandbox = off)"), "{}", out.stdout);
    assert!(
        out.stderr.contains("loop.checks 'test -f ok.txt' → 'true'; this walk goes on with those it started with"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(env.path("said")).expect("said"), "done 2\n", "refused unconfined too");
    assert_eq!(task(&repo, &victim)["state"], "open");
    let overreach = events(&repo, "agent_overreach");
    assert_eq!(
        (overreach.len(), overreach[0]["data"]["target"].as_str(), overreach[0]["data"]["confined"].as_bool()),
        (1, Some(victim.as_str()), Some(false)),
        "journaled by the session itself: {overreach:?}"
    );
    let changed = events(&repo, "settings_changed");
    assert_eq!(changed[0]["data"]["obeyed"], false, "{changed:?}");
    // The next walk will not run with it.
    let refused = repo.run(&["run", "--agent-cmd", "true", "--sandbox", "off"]).code(2);
    assert!(
        refused.stderr.starts_with(&format!(
            "error: loop.checks was changed to 'true' while session {} ran unconfined: a walk does not obey a setting an agent may have planted\nhint: ",
            changed[0]["data"]["during"][0].as_str().unwrap_or("")
        )),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("--accept-settings"), "{}", refused.stderr);
    // A person who made it accepts it: obeyed, and named.
    let accepted = repo.run(&[
        "run",
        "--agent-cmd",
        "true",
        "--sandbox",
        "off",
        "--accept-settings",
        "--task",
        &victim,
        "--max-iterations",
        "1",
    ]);
    assert!(
        accepted.stdout.contains("settings changed since the last walk: loop.checks 'test -f ok.txt' → 'true'"),
        "{}",
        accepted.stdout
    );
    // A change a person makes between walks is named at the start of the next, and obeyed.
    repo.git(&["config", "loop.checks", "test -f other.txt"]);
    let next =
        repo.run(&["run", "--agent-cmd", "true", "--sandbox", "off", "--task", &victim, "--max-iterations", "1"]);
    assert!(
        next.stdout.contains("settings changed since the last walk: loop.checks 'true' → 'test -f other.txt'"),
        "{}",
        next.stdout
    );
}

#[test]
fn a_session_without_the_network_cannot_reach_the_host_and_one_with_it_can() {
    if !confinable() {
        return;
    }
    let env = TestEnv::strict();
    let repo = env.repo("r");
    let host = Counter::start();
    let port = host.port;
    let agent = env.agent(
        "caller",
        &format!(
            "if git ls-remote http://127.0.0.1:{port}/x >/dev/null 2>&1; then echo 'reach 0' > reach.txt; else echo \"reach $?\" > reach.txt; fi\ngit loop finish done"
        ),
    );
    let accepted = || host.reached.swap(0, std::sync::atomic::Ordering::SeqCst);
    let id = repo.add(&["offline"]);
    repo.git(&["config", "loop.sandbox.network", "none"]);
    repo.run(&["run", "--agent-cmd", &agent, "--task", &id, "--grace", "1"]).ok();
    assert_eq!(accepted(), 0, "no connection reached the host");
    assert_ne!(repo.git(&["show", &format!("loop/{id}:reach.txt")]), "reach 0");
    let online = repo.add(&["online"]);
    repo.git(&["config", "loop.sandbox.network", "on"]);
    repo.run(&["run", "--agent-cmd", &agent, "--task", &online, "--grace", "1"]).ok();
    assert!(accepted() >= 1, "with the network on, the host's loopback is reached");
}

/// A host service on loopback that counts the connections it accepts and hangs up at once.
struct Counter {
    port: u16,
    reached: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Counter {
    fn start() -> Counter {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (reached, stop) = (reached.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            reached.fetch_add(1, Ordering::SeqCst);
                            drop(stream);
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
                    }
                }
            })
        };
        Counter { port, reached, stop, thread: Some(thread) }
    }

    fn reached(&self) -> usize {
        self.reached.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `loop.sandbox.network = allow` (the default, unset here): a session reaches a listed host of this machine (as a
/// client that ignores proxies would, at its own address), and nothing else — not another
/// port of this machine, not a name that is not listed, through the proxy or around it; each
/// host refused is journaled once, however often it was tried.
#[test]
fn a_session_under_the_allow_list_reaches_only_what_is_listed_and_each_refused_host_is_journaled_once() {
    if !confinable() {
        return;
    }
    let env = TestEnv::strict();
    let repo = env.repo("r");
    let (listed, unlisted) = (Counter::start(), Counter::start());
    let agent = env.agent(
        "caller",
        &format!(
            r#"set +e
try() {{ name=$1; shift; "$@" >/dev/null 2>&1; echo "$name $?" >> reach.txt; }}
try listed git ls-remote http://127.0.0.1:{listed}/x
try unlisted_direct git ls-remote http://127.0.0.1:{unlisted}/x
try unlisted_proxied env -u NO_PROXY -u no_proxy git ls-remote http://127.0.0.1:{unlisted}/x
try unlisted_name git ls-remote http://example.invalid/x
try unlisted_name_again git ls-remote http://example.invalid/y
git loop finish done"#,
            listed = listed.port,
            unlisted = unlisted.port,
        ),
    );
    let id = repo.add(&["a task that calls out"]);
    repo.git(&["config", "--add", "loop.sandbox.allow", &format!("127.0.0.1:{}", listed.port)]);
    let out = repo.run(&["run", "--agent-cmd", &agent, "--task", &id, "--grace", "1", "--sandbox", "required"]).ok();
    assert!(
        out.stdout.contains(&format!("network: each agent's API hosts and 127.0.0.1:{}", listed.port)),
        "the walk says what its sessions reach:\n{}",
        out.stdout
    );
    assert!(listed.reached() >= 1, "the listed host is reached");
    assert_eq!(unlisted.reached(), 0, "no connection reached the host's other port");
    let reach = repo.git(&["show", &format!("loop/{id}:reach.txt")]);
    for refused in ["unlisted_direct", "unlisted_proxied", "unlisted_name", "unlisted_name_again"] {
        assert!(!reach.contains(&format!("{refused} 0")), "{refused} fails: {reach}");
    }
    let refused: Vec<String> = events(&repo, "agent_overreach")
        .iter()
        .filter(|e| e["data"]["command"] == "network")
        .map(|e| e["data"]["target"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        refused,
        [format!("127.0.0.1:{}", unlisted.port), "example.invalid:80".to_owned()],
        "each refused host journaled once"
    );
    assert!(out.stderr.contains("tried a connection to example.invalid:80, which it may not"), "{}", out.stderr);
    assert_eq!(task(&repo, &id)["state"], "done");
}

#[test]
fn required_refuses_to_start_where_bubblewrap_cannot_run_and_auto_says_so() {
    let env = TestEnv::strict();
    let repo = env.repo("r");
    repo.add(&["a task"]);
    // A PATH with git and a shell, and no bubblewrap.
    let path = path_with(&env, &["git", "sh", "true"]);
    let refused = repo.run_with(&["run", "--agent-cmd", "true", "--sandbox", "required"], &[("PATH", &path)]).code(77);
    assert_eq!(
        refused.stderr,
        "error: loop.sandbox is required, and bubblewrap (bwrap) is not installed\nhint: install it (Debian, Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap)\n"
    );
    assert_eq!(events(&repo, "walk_started").len(), 0, "nothing started");
    let auto = repo.run_with(&["run", "--agent-cmd", "true", "--max-iterations", "1"], &[("PATH", &path)]);
    assert!(
        auto.stderr.starts_with("warning: sessions run unconfined: bubblewrap (bwrap) is not installed; an agent can reach every file this user can\nhint: install it"),
        "{}",
        auto.stderr
    );
    let status = repo.run_with(&["status"], &[("PATH", &path)]).ok();
    assert!(
        status.stdout.contains("sandbox: sessions run unconfined: bubblewrap (bwrap) is not installed"),
        "{}",
        status.stdout
    );
    let started = events(&repo, "walk_started");
    assert_eq!(started[0]["data"]["sandbox"], "unconfined");
}

#[test]
fn a_confined_sessions_own_commits_survive_its_walk_being_killed() {
    if !confinable() {
        return;
    }
    let env = TestEnv::strict();
    let repo = env.repo("r");
    let id = repo.add(&["crash me"]);
    let first = env.agent(
        "committer",
        "echo work > work.txt && git add work.txt && git -c user.name=a -c user.email=a@a commit -qm 'own commit before the crash'\ntouch started\nwhile :; do sleep 1; done",
    );
    let mut walk = repo
        .command(&["run", "--agent-cmd", &first, "--grace", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let started = repo.dir.join(format!(".git/loop/worktrees/{id}-1/started"));
    crate::harness::wait_for("the session's commit", || started.exists());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(walk.id() as i32, libc::SIGKILL) };
    walk.wait().expect("wait");
    let second = env.agent("finisher", "git loop finish done --message 'after the crash'");
    let out = repo.run(&["run", "--agent-cmd", &second, "--grace", "1"]).ok();
    assert!(out.stdout.contains("recovered: session"), "{}", out.stdout);
    let log = repo.git(&["log", "--format=%s", &format!("loop/{id}")]);
    assert!(log.lines().any(|s| s == "own commit before the crash"), "its commit is on the task's branch: {log}");
    assert_eq!(repo.git(&["show", &format!("loop/{id}:work.txt")]), "work");
}

/// What an agent leaves in its box cannot stall the walk nor swamp the journal: FIFOs where the
/// walker reads (its report file, its result file) are refused at once as not regular files,
/// a FIFO in its try is no reason to wait either, and a flood of garbage report lines is
/// journaled as two overreaches (the first line, then the count), not one for each line.
#[test]
fn fifos_and_floods_in_the_box_neither_stall_the_walk_nor_swamp_the_journal() {
    if !confinable() {
        return;
    }
    let env = TestEnv::strict();
    let repo = env.repo("r");
    let fifo = repo.add(&["fifo", "-p", "p1"]);
    let flood = repo.add(&["flood", "-p", "p0"]);
    let agent = env.agent(
        "hostile",
        &format!(
            r#"case "$GIT_LOOP_TASK" in
{fifo}) rm -f "$GIT_LOOP_BOX/reports.jsonl" "$GIT_LOOP_RESULT"
  mkfifo "$GIT_LOOP_BOX/reports.jsonl" "$GIT_LOOP_RESULT" fifo-in-try
  exit 0 ;;
{flood}) i=0; while [ $i -lt 5000 ]; do echo "garbage $i"; i=$((i+1)); done >> "$GIT_LOOP_BOX/reports.jsonl"
  echo ok > ok.txt
  git loop finish done --message ok ;;
esac"#
        ),
    );
    let started = std::time::Instant::now();
    let out = repo.run(&[
        "run",
        "--agent-cmd",
        &agent,
        "--max-units",
        "2",
        "--per-unit-dispatches",
        "1",
        "--session-timeout",
        "60s",
        "--sandbox",
        "required",
    ]);
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(45), "the walk ended in {took:?}: {}{}", out.stdout, out.stderr);
    assert_eq!(task(&repo, &flood)["state"], "done", "the flood's own task is done: {}{}", out.stdout, out.stderr);
    assert_ne!(task(&repo, &fifo)["state"], "done", "no verdict came from a FIFO");
    let overreach = events(&repo, "agent_overreach");
    let of = |id: &str| -> Vec<String> {
        overreach
            .iter()
            .filter(|e| e["task"] == id)
            .map(|e| e["data"]["detail"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let fifo_said = of(&fifo);
    assert!(fifo_said.iter().any(|d| d.contains("not a regular file")), "the FIFO report file is named: {fifo_said:?}");
    let flood_said = of(&flood);
    assert_eq!(flood_said.len(), 2, "the first garbage line, then the count: {flood_said:?}");
    assert!(flood_said[1].starts_with("5000 unreadable lines in its reports in all"), "{flood_said:?}");
}

/// A session whose commits hold a path git refuses to check out (`.GIT/config` at the top,
/// `sub/.git` as a file) made with its private git: an overreach, its commits not taken, its
/// session failed with the reason, and the walk goes on to the next task (the crafted tree
/// used to fail the index build and end every walk that picked the task).
#[test]
fn commits_holding_a_path_git_refuses_are_not_taken_and_the_walk_goes_on() {
    if !confinable() {
        return;
    }
    let env = TestEnv::strict();
    let repo = env.repo("r");
    let upper = repo.add(&["upper", "-p", "p1"]);
    let nested = repo.add(&["nested", "-p", "p1"]);
    let good = repo.add(&["good", "-p", "p2"]);
    let agent = env.agent(
        "crafter",
        &format!(
            r#"blob=$(echo x | git hash-object -w --stdin)
craft() {{
  top=$( (git ls-tree HEAD; printf '040000 tree %s\t%s\n' "$1" "$2") | git mktree)
  c=$(git commit-tree "$top" -p HEAD -m crafted)
  git update-ref HEAD "$c"
  git loop finish done --message crafted
}}
case "$GIT_LOOP_TASK" in
{upper}) craft "$(printf '100644 blob %s\tconfig\n' "$blob" | git mktree)" .GIT ;;
{nested}) craft "$(printf '100644 blob %s\t.git\n' "$blob" | git mktree)" sub ;;
*) echo ok > ok.txt; git loop finish done --message ok ;;
esac"#
        ),
    );
    let out = repo.run(&[
        "run",
        "--agent-cmd",
        &agent,
        "--per-unit-dispatches",
        "1",
        "--session-timeout",
        "60s",
        "--sandbox",
        "required",
    ]);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(task(&repo, &good)["state"], "done", "the walk went on to the good task: {said}");
    let overreach = events(&repo, "agent_overreach");
    for (id, path) in [(&upper, ".GIT"), (&nested, ".git")] {
        assert_ne!(task(&repo, id)["state"], "done", "{path}: not done on a crafted tree: {said}");
        let details: Vec<&str> = overreach
            .iter()
            .filter(|e| e["task"] == id.as_str())
            .filter_map(|e| e["data"]["detail"].as_str())
            .collect();
        assert!(
            details.iter().any(|d| d.contains(&format!("holds '{path}', a path git refuses"))),
            "{path}: the overreach names it: {details:?}"
        );
        let tree = repo.git(&["ls-tree", "-r", "--name-only", &format!("loop-try/{id}/1")]);
        assert!(!tree.lines().any(|p| p.to_ascii_lowercase().contains(".git/")), "{path}: not taken: {tree}");
    }
}

/// Issue 43: a toolchain the walk's environment names under a directory the sandbox hides
/// (`RUSTUP_HOME` under `/tmp` here, as under `/srv` or another user's home) is visible to
/// sessions, read-only, and the walk's confinement line names it (it was invisible inside: a
/// rustup backtrace, thirty sessions burnt).
#[test]
fn toolchains_the_environment_names_under_hidden_directories_are_visible_read_only() {
    if !confinable() {
        return;
    }
    let env = TestEnv::strict();
    let repo = env.repo("r");
    let id = repo.add(&["build it"]);
    let toolchain = env.path("toolchains/rustup");
    std::fs::create_dir_all(toolchain.join("bin")).expect("mkdir");
    std::fs::write(toolchain.join("bin/marker"), "toolchain here\n").expect("write");
    let agent = env.agent(
        "builder",
        "cat \"$RUSTUP_HOME/bin/marker\" > seen.txt\n\
         if touch \"$RUSTUP_HOME/written\" 2>/dev/null; then echo writable >> seen.txt; fi\n\
         git loop finish done --message ok",
    );
    let toolchain_var = toolchain.to_str().expect("utf-8").to_owned();
    let out =
        repo.run_with(&["run", "--agent-cmd", &agent, "--sandbox", "required"], &[("RUSTUP_HOME", &toolchain_var)]);
    assert!(
        out.stdout.contains(&format!("toolchains visible read-only: RUSTUP_HOME ({toolchain_var})")),
        "the confinement line names it: {}",
        out.stdout
    );
    assert_eq!(repo.git(&["show", &format!("loop/{id}:seen.txt")]), "toolchain here", "seen, and not writable");
    assert!(!toolchain.join("written").exists());
}
