//! `git loop mission`: a commander walks other repositories wave by wave, one child `git loop
//! run` per project, reads how each ended from the project's journal, checks the mission's
//! tasks there are really done, and records the outcome. Real repositories, the demo agent
//! or scripted agents, real processes and signals.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{path_with, wait_for, Repo, Run, TestEnv};

/// A project repository with these (title, body) tasks labelled `m1`, and one task that is
/// not part of the mission. Returns the mission's task ids and the other task's.
fn project<'e>(env: &'e TestEnv, name: &str, tasks: &[(&str, &str)]) -> (Repo<'e>, Vec<String>, String) {
    let repo = env.repo(name);
    let ids = tasks.iter().map(|(title, body)| repo.add(&[title, "--label", "m1", "--body", body])).collect();
    let other = repo.add(&["not part of the mission"]);
    (repo, ids, other)
}

/// The commander's repository, with mission m1 added.
fn commander(env: &TestEnv) -> Repo<'_> {
    let repo = env.repo("commander");
    repo.run(&["mission", "add", "m1", "--title", "Ship m1"]).ok();
    repo
}

fn add_project(commander: &Repo<'_>, name: &str, dir: &Path, wave: u32) {
    let dir = dir.to_str().expect("utf-8 path");
    commander
        .run(&["mission", "project", "m1", name, "--path", dir, "--wave", &wave.to_string(), "--label", "m1"])
        .ok();
}

fn state(repo: &Repo<'_>, id: &str) -> String {
    repo.run(&["show", id, "--json"]).ok().json()["state"].as_str().expect("state").to_owned()
}

fn mission(commander: &Repo<'_>) -> Value {
    commander.run(&["mission", "show", "m1", "--json"]).ok().json()
}

fn project_of<'m>(mission: &'m Value, name: &str) -> &'m Value {
    mission["projects"].as_array().expect("projects").iter().find(|p| p["name"] == name).expect("the project")
}

/// Events of a `mission run --json` output.
fn events(out: &Run) -> Vec<Value> {
    out.stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"))).collect()
}

/// The live claims of a repository, as keys.
fn claims(repo: &Repo<'_>) -> Vec<String> {
    repo.run(&["claim", "list", "--json"]).ok().json()["claims"]
        .as_array()
        .expect("claims")
        .iter()
        .map(|c| c["key"].as_str().expect("key").to_owned())
        .collect()
}

/// Paths shown to people, with the test's temporary root replaced.
fn rooted(env: &TestEnv, text: &str) -> String {
    let root = env.root.path().canonicalize().expect("canonical root");
    text.replace(root.to_str().expect("utf-8"), "<root>")
}

#[test]
fn a_two_wave_mission_walks_every_project_and_records_their_outcomes() {
    let env = TestEnv::new();
    let (api, api_ids, api_other) =
        project(&env, "api", &[("api one", "demo: write one.txt\nfrom api\ndemo: end"), ("api two", "")]);
    let (web, web_ids, _) = project(&env, "web", &[("web one", "demo: write web.txt\nfrom web\ndemo: end")]);
    let (docs, docs_ids, _) = project(&env, "docs", &[("docs one", "")]);
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    add_project(&c, "web", &web.dir, 1);
    add_project(&c, "docs", &docs.dir, 2);
    let out = c.run(&["mission", "run", "m1", "--agent", "demo", "--json"]).ok();
    let evs = events(&out);
    let dispatched: Vec<&str> = evs
        .iter()
        .filter(|e| e["event"] == "project_dispatched")
        .map(|e| e["project"].as_str().expect("project"))
        .collect();
    assert_eq!(dispatched, ["api", "web", "docs"], "wave 1's projects, then wave 2's");
    let waves: Vec<u64> = evs.iter().filter(|e| e["event"] == "wave").map(|e| e["wave"].as_u64().expect("n")).collect();
    assert_eq!(waves, [1, 2]);
    let child_ends: Vec<(&str, u64)> = evs
        .iter()
        .filter(|e| e["event"] == "output" && e["line"]["event"] == "walk_ended")
        .map(|e| (e["project"].as_str().expect("project"), e["line"]["done"].as_u64().expect("done")))
        .collect();
    assert_eq!(child_ends, [("api", 2), ("web", 1), ("docs", 1)], "each child walk's lines come through, tagged");
    let last = evs.last().expect("a finished event");
    assert_eq!(
        (last["event"].as_str(), last["stop"].as_str(), last["exit_code"].as_u64()),
        (Some("mission_ended"), Some("complete"), Some(0))
    );

    for (repo, ids) in [(&api, &api_ids), (&web, &web_ids), (&docs, &docs_ids)] {
        for id in ids {
            assert_eq!(state(repo, id), "done", "every mission task is done");
        }
    }
    assert_eq!(state(&api, &api_other), "open", "a task outside the mission is left alone");
    assert_eq!(api.git(&["show", &format!("loop/{}:one.txt", api_ids[0])]), "from api", "the agent's work landed");

    let m = mission(&c);
    assert_eq!((m["state"].as_str(), m["version"].as_u64()), (Some("complete"), Some(1)));
    for (name, repo, n) in [("api", &api, 2), ("web", &web, 1), ("docs", &docs, 1)] {
        let p = project_of(&m, name);
        let o = &p["outcome"];
        assert_eq!(
            (p["status"].as_str(), p["dispatches"].as_u64(), o["stop"].as_str()),
            (Some("done"), Some(1), Some("no_work")),
            "{p}"
        );
        assert_eq!(
            (o["tasks_done"].as_u64(), o["tasks_total"].as_u64(), o["sessions"].as_u64()),
            (Some(n), Some(n), Some(n))
        );
        let key = o["key"].as_str().expect("the termination key is recorded");
        let chain = repo.git(&["log", "--format=%s", &format!("refs/loop/journal/{key}")]);
        assert_eq!(chain, "walk_terminated", "the child journaled its end under the key the commander gave it");
    }
    let show = c.run(&["mission", "show", "m1"]).ok();
    assert_eq!(
        rooted(&env, &show.stdout),
        "m1  Ship m1\n  state:    complete\n  created:  just now by Tess Ter <tess@example.com>\n\n\
         wave 1\n  api   done · 2 of 2 tasks done · 1 walk\n        label m1 in <root>/api\n\
         \x20 web   done · 1 of 1 tasks done · 1 walk\n        label m1 in <root>/web\n\n\
         wave 2\n  docs  done · 1 of 1 tasks done · 1 walk\n        label m1 in <root>/docs\n"
    );
    let list = c.run(&["mission", "list"]).ok();
    assert_eq!(list.stdout, "m1  complete   3 of 3 projects done, 2 waves  Ship m1\n");
    let listed = c.run(&["mission", "list", "--json"]).ok().json();
    assert_eq!(
        (listed["missions"][0]["id"].as_str(), listed["missions"][0]["commander"].is_null()),
        (Some("m1"), true)
    );
    let log = c.run(&["log", "--json"]).ok().json();
    let kinds: Vec<&str> =
        log["events"].as_array().expect("events").iter().map(|e| e["kind"].as_str().expect("kind")).collect();
    assert_eq!(
        kinds.iter().filter(|k| k.starts_with("mission_") || k.starts_with("project_")).count(),
        2 + 3 * 2,
        "the commander journals its start, each dispatch and outcome, and its end: {kinds:?}"
    );
    assert_eq!(claims(&c), Vec::<String>::new(), "the fleet claim is released");
    let again = c.run(&["mission", "run", "m1", "--agent", "demo"]).ok();
    assert!(again.stdout.ends_with("mission complete: every project is done\n"), "{}", again.stdout);
    assert_eq!(project_of(&mission(&c), "api")["dispatches"], 1, "a complete mission dispatches nothing");
}

#[test]
fn a_project_whose_agent_fails_pauses_the_mission_and_resumes_once_fixed() {
    let env = TestEnv::new();
    let (api, api_ids, _) = project(&env, "api", &[("api one", "")]);
    let (web, web_ids, _) =
        project(&env, "web", &[("web one", ""), ("web two", "demo: verdict failed the schema is wrong")]);
    let (docs, docs_ids, _) = project(&env, "docs", &[("docs one", "")]);
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    add_project(&c, "web", &web.dir, 1);
    add_project(&c, "docs", &docs.dir, 2);
    let out = c.run(&["mission", "run", "m1", "--agent", "demo"]).code(4);
    let failing = &web_ids[1];
    let m = mission(&c);
    let reason = m["reason"].as_str().expect("a paused mission says why");
    assert!(
        reason.starts_with(&format!("project 'web' is incomplete: {failing} is "))
            && reason.ends_with("the schema is wrong"),
        "{reason}"
    );
    assert!(out.stdout.ends_with(&format!("mission paused: {reason}\n")), "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "hint: see 'git loop mission show m1'; fix what is named, then resume with 'git loop mission run m1'"
        ),
        "{}",
        out.stderr
    );
    let web_project = project_of(&m, "web");
    assert_eq!(
        (m["state"].as_str(), web_project["status"].as_str(), web_project["outcome"]["tasks_done"].as_u64()),
        (Some("paused"), Some("incomplete"), Some(1))
    );
    assert_eq!(
        (project_of(&m, "docs")["status"].as_str(), project_of(&m, "docs")["dispatches"].as_u64()),
        (Some("pending"), Some(0)),
        "wave 2 does not start while wave 1 is not done"
    );
    assert_eq!(state(&docs, &docs_ids[0]), "open");
    let status = c.run(&["status"]).ok();
    let section = status.stdout.split("\n\n").find(|s| s.starts_with("missions:")).expect("a missions section");
    assert_eq!(
        section,
        format!(
            "missions:\n  m1  Ship m1 · paused: {}\n    wave 1  api done · web incomplete\n    wave 2  docs pending",
            crate_short(reason, 70)
        )
    );

    // Fix it: a plan the agent can carry out, the task reopened, and the claim the first
    // walk kept on it (it keeps the claims of tasks it parks) let go.
    let walker = web_project["outcome"]["walker"].as_str().expect("the child walk's key").to_owned();
    web.run(&["edit", failing, "--body", "demo: message fixed"]).ok();
    web.run(&["reopen", failing]).ok();
    web.run(&["claim", "release", &format!("node:{failing}"), "--holder", &walker]).ok();
    let out = c.run(&["mission", "run", "m1", "--agent", "demo"]).ok();
    assert!(out.stdout.ends_with("mission complete: every project is done\n"), "{}", out.stdout);
    for (repo, ids) in [(&api, &api_ids), (&web, &web_ids), (&docs, &docs_ids)] {
        for id in ids {
            assert_eq!(state(repo, id), "done");
        }
    }
    let m = mission(&c);
    let dispatches: Vec<u64> =
        ["api", "web", "docs"].iter().map(|n| project_of(&m, n)["dispatches"].as_u64().expect("n")).collect();
    assert_eq!(dispatches, [1, 2, 1], "the resumed run started where the first stopped");
    assert_eq!((m["state"].as_str(), m["reason"].as_str()), (Some("complete"), None));
}

/// `human::short` as the status line uses it.
fn crate_short(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

#[test]
fn a_drained_walk_is_not_proof_a_task_hidden_by_a_claim_is_named() {
    let env = TestEnv::new();
    let (api, ids, _) = project(&env, "api", &[("api one", ""), ("api two", "")]);
    api.run(&["claim", "acquire", &format!("node:{}", ids[1]), "--holder", "agent-7", "--ttl", "2h"]).ok();
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    let out = c.run(&["mission", "run", "m1", "--agent", "demo"]).code(4);
    let hidden = &ids[1];
    let expected = format!(
        "project 'api' is incomplete: {hidden} is open but claimed by agent-7 until 2026-03-01T14:00:00Z, which \
         hides it from 'next' (if agent-7 is gone, release it there with 'git loop claim release node:{hidden} \
         --holder agent-7')"
    );
    assert_eq!(mission(&c)["reason"], expected.as_str());
    assert!(out.stdout.ends_with(&format!("mission paused: {expected}\n")), "{}", out.stdout);
    let p = project_of(&mission(&c), "api").clone();
    assert_eq!(
        (p["outcome"]["stop"].as_str(), p["outcome"]["succeeded"].as_u64()),
        (Some("no_work"), Some(1)),
        "the child drained"
    );
    assert_eq!(state(&api, &ids[0]), "done");
}

#[test]
fn two_commanders_of_one_mission_one_exits_3_naming_the_other() {
    let env = TestEnv::new();
    let (api, ids, _) = project(&env, "api", &[("api one", "")]);
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    let started = env.path("started");
    let go = env.path("go");
    let cmd = env.agent("gate",
        &format!(
            "touch {}\nn=0\nwhile [ ! -f {} ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done\ngit loop finish done",
            started.display(),
            go.display()
        ),
    );
    let mut first = c
        .command(&["mission", "run", "m1", "--agent-cmd", &cmd])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the first commander");
    wait_for("the first commander's session", || started.exists());
    let second = c.run(&["mission", "run", "m1", "--agent-cmd", &cmd]).code(3);
    let pid = first.id();
    let holder =
        c.run(&["claim", "list", "--json"]).ok().json()["claims"][0]["holder"].as_str().expect("holder").to_owned();
    assert!(holder.starts_with("m-"), "{holder}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    assert_eq!(
        second.stderr,
        format!(
            "error: another commander runs mission 'm1': {holder} (pid {pid} on {})\nhint: wait for it to finish, or \
             interrupt it with 'kill -INT {pid}'\n",
            host.trim()
        )
    );
    std::fs::write(&go, "").expect("let the first session finish");
    assert_eq!(first.wait().expect("the first commander ends").code(), Some(0));
    assert_eq!(state(&api, &ids[0]), "done");
    assert_eq!(claims(&c), Vec::<String>::new(), "the fleet claim is released");
}

#[test]
fn a_child_that_never_journals_its_end_is_dispatched_three_times_then_the_project_fails() {
    let env = TestEnv::new();
    let (api, ids, _) = project(&env, "api", &[("api one", "")]);
    // Unconfined: the agent must see and kill its own walk, which no confined session can.
    api.git(&["config", "loop.sandbox", "off"]);
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    // The agent kills its own walk (the process that has a termination key), so the walk
    // never gets to journal how it ended.
    let count = env.path("dispatches");
    let cmd = env.agent("crash",
        &format!(
            "echo dispatched >> {}\np=$$\nwhile [ \"$p\" -gt 1 ]; do\n  if tr '\\0' ' ' < /proc/$p/cmdline | grep -q -- --termination-key; then kill -9 $p; exit 0; fi\n  p=$(awk '{{print $4}}' /proc/$p/stat)\ndone\nexit 1",
            count.display()
        ),
    );
    let out = c.run(&["mission", "run", "m1", "--agent-cmd", &cmd]).code(4);
    assert_eq!(std::fs::read_to_string(&count).expect("count").lines().count(), 3, "three dispatches, no more");
    let unfinished =
        out.stdout.matches("api: its walk ended (killed by signal 9) without journaling how it ended").count();
    assert_eq!(unfinished, 3, "{}", out.stdout);
    let m = mission(&c);
    let p = project_of(&m, "api");
    let why =
        "3 dispatches came to nothing; the last: its walk ended (killed by signal 9) without journaling how it ended";
    assert_eq!(
        (p["status"].as_str(), p["dispatches"].as_u64(), p["outcome"]["reason"].as_str()),
        (Some("failed"), Some(3), Some(why))
    );
    assert_eq!(
        (m["state"].as_str(), m["reason"].as_str()),
        (Some("paused"), Some(format!("project 'api' failed: {why}").as_str()))
    );
    assert_eq!(claims(&c), Vec::<String>::new(), "the fleet claim is released");
    assert_eq!(state(&api, &ids[0]), "open");
}

#[test]
fn sigint_stops_the_child_walk_releases_the_fleet_claim_and_exits_130() {
    let env = TestEnv::new();
    let (api, ids, _) = project(&env, "api", &[("api one", "")]);
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    let flag = env.path("wrote");
    let cmd = env.agent("long", &format!("echo partial > partial.txt\ntouch {}\nsleep 60", flag.display()));
    let mut child = c
        .command(&["mission", "run", "m1", "--agent-cmd", &cmd, "--grace", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the commander");
    wait_for("the agent's first write", || flag.exists());
    assert_eq!(claims(&c), ["fleet:m1"]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    assert_eq!(child.wait().expect("wait").code(), Some(130));
    assert!(started.elapsed() < Duration::from_secs(20), "stopped promptly, not after the agent's sleep");
    assert_eq!(claims(&c), Vec::<String>::new(), "the fleet claim is released");
    assert_eq!(claims(&api), Vec::<String>::new(), "the child walk ended and let go of its claims");
    assert_eq!(api.git(&["show", &format!("loop-try/{}/1:partial.txt", ids[0])]), "partial", "its work is committed");
    let m = mission(&c);
    let p = project_of(&m, "api");
    assert_eq!(
        (m["state"].as_str(), m["reason"].as_str(), p["status"].as_str()),
        (Some("open"), Some("interrupted"), Some("pending"))
    );
    assert_eq!(p["outcome"]["stop"], "interrupted", "the child journaled that it was interrupted");
}

#[test]
fn a_cancelled_mission_stops_its_commander_and_is_not_run_again() {
    let env = TestEnv::new();
    let (api, _, _) = project(&env, "api", &[("api one", "")]);
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    let flag = env.path("started");
    let cmd = env.agent("long", &format!("touch {}\nsleep 60", flag.display()));
    let child = c
        .command(&["mission", "run", "m1", "--agent-cmd", &cmd, "--grace", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the commander");
    wait_for("the session", || flag.exists());
    assert_eq!(c.run(&["mission", "cancel", "m1", "--reason", "superseded"]).ok().stdout, "mission m1 cancelled\n");
    let out = Run::from(child.wait_with_output().expect("the commander ends"));
    assert_eq!(out.code, 130);
    assert!(out.stdout.ends_with("mission cancelled: superseded\n"), "{}", out.stdout);
    let again = c.run(&["mission", "run", "m1", "--agent", "demo"]).code(1);
    assert_eq!(again.stderr, "error: mission 'm1' is cancelled\nhint: add a new mission with 'git loop mission add'\n");
    let m = mission(&c);
    assert_eq!((m["state"].as_str(), m["reason"].as_str()), (Some("cancelled"), Some("superseded")));
    assert_eq!(claims(&c), Vec::<String>::new());
}

#[test]
fn a_missing_agent_exits_77_before_any_claim() {
    let env = TestEnv::new();
    let (api, _, _) = project(&env, "api", &[("api one", "")]);
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    let out = c
        .run_with(&["mission", "run", "m1", "--agent", "claude"], &[("PATH", &path_with(&env, &["git", "sh"]))])
        .code(77);
    assert!(out.stderr.starts_with("error: the agent's program 'claude' was not found\n"), "{}", out.stderr);
    assert_eq!(claims(&c), Vec::<String>::new(), "no fleet claim was taken");
    assert_eq!(project_of(&mission(&c), "api")["dispatches"], 0);
}

#[test]
fn bad_input_is_one_line_with_a_hint_and_exit_2() {
    let env = TestEnv::new();
    let (api, _, _) = project(&env, "api", &[("api one", "")]);
    let c = commander(&env);
    let api_dir = api.dir.to_str().expect("utf-8");
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["mission", "project", "m1", "api", "--path", api_dir, "--wave", "1"],
            2,
            "error: say which of the project's tasks belong to the mission\nhint: pass --label <label>, or --task <id> for each task\n",
        ),
        (
            &["mission", "project", "m1", "api", "--path", api_dir, "--wave", "0", "--label", "m1"],
            2,
            "error: waves count from 1\nhint: pass --wave 1 for the first wave\n",
        ),
        (
            &["mission", "project", "m1", "api", "--path", "/nonexistent/api", "--wave", "1", "--label", "m1"],
            2,
            "error: project path '/nonexistent/api' does not exist\nhint: pass the directory of a git repository with --path, or a clone URL with --url\n",
        ),
        (
            &["mission", "project", "m1", "api", "--path", api_dir, "--wave", "1", "--task", "zz"],
            2,
            "error: no task matches 'zz' in '<root>/api'\nhint: list its tasks with 'git loop -C <root>/api list'\n",
        ),
        (
            &["mission", "show", "nope"],
            2,
            "error: there is no mission 'nope'\nhint: list missions with 'git loop mission list', or add one with 'git loop mission add'\n",
        ),
        (
            &["mission", "run", "m1", "--agent", "demo"],
            2,
            "error: mission 'm1' has no projects\nhint: add one with 'git loop mission project m1 <name> --path <dir> --wave 1 --label <label>'\n",
        ),
        (&["mission", "add", "m1", "--title", "again"], 1, "error: mission 'm1' already exists\nhint: see it with 'git loop mission show m1'\n"),
        (&["mission", "run", "m1", "--agent", "demo", "--max-units", "0"], 2, "error: a budget of 0 would do nothing\nhint: leave it out for no limit\n"),
        (&["mission", "run", "m1", "--agent", "demo", "--parallel", "0"], 2, "error: --parallel must be at least 1\nhint: --parallel 1 runs one session at a time\n"),
    ];
    for (args, code, stderr) in cases {
        let out = c.run(args).code(*code);
        assert_eq!(rooted(&env, &out.stderr), *stderr, "git loop {}", args.join(" "));
    }
    let bad_id = c.run(&["mission", "add", "M1", "--title", "x"]).code(2);
    assert!(bad_id.stderr.contains("mission id 'M1' is not valid: it contains 'M'"), "{}", bad_id.stderr);
    assert!(c.git(&["for-each-ref", "refs/loop/missions"]).lines().count() == 1, "nothing but m1 was written");
}

#[test]
fn a_project_known_by_url_is_cloned_walked_and_synced_back() {
    let env = TestEnv::new();
    let bare = env.remote("docs");
    let seed = env.clone_of(bare.to_str().expect("utf-8"), "docs-clone");
    seed.run(&["init", "--remote", "origin"]).ok();
    let id = seed.add(&["docs one", "--label", "m1"]);
    seed.run(&["sync"]).ok();
    let c = commander(&env);
    c.run(&[
        "mission",
        "project",
        "m1",
        "docs",
        "--url",
        bare.to_str().expect("utf-8"),
        "--wave",
        "1",
        "--label",
        "m1",
    ])
    .ok();
    let out = c.run(&["mission", "run", "m1", "--agent", "demo"]).ok();
    assert!(out.stdout.ends_with("mission complete: every project is done\n"), "{}", out.stdout);
    let clone = c.dir.join(".git/loop/missions/m1/docs");
    assert!(clone.join(".git").is_dir(), "the commander keeps its clone under .git/loop/missions");
    seed.run(&["sync"]).ok();
    assert_eq!(state(&seed, &id), "done", "the result reached the project's remote");
    let p = project_of(&mission(&c), "docs").clone();
    assert_eq!((p["status"].as_str(), p["url"].as_str()), (Some("done"), bare.to_str()));
}

#[test]
fn a_session_budget_counts_over_the_whole_mission_and_stops_it_with_exit_1() {
    let env = TestEnv::new();
    let (api, _, _) = project(&env, "api", &[("api one", "")]);
    let (web, web_ids, _) = project(&env, "web", &[("web one", ""), ("web two", "")]);
    let c = commander(&env);
    add_project(&c, "api", &api.dir, 1);
    add_project(&c, "web", &web.dir, 1);
    let out = c.run(&["mission", "run", "m1", "--agent", "demo", "--max-iterations", "2"]).code(1);
    let why = "2 sessions run, the --max-iterations budget";
    assert!(out.stdout.ends_with(&format!("mission stopped: a budget ran out ({why})\n")), "{}", out.stdout);
    let m = mission(&c);
    let p = project_of(&m, "web");
    assert_eq!(
        (p["status"].as_str(), p["outcome"]["sessions"].as_u64(), p["outcome"]["reason"].as_str()),
        (Some("pending"), Some(1), Some(format!("the budget ran out ({why})").as_str())),
        "web's walk was given what was left after api's: one session"
    );
    assert_eq!((m["state"].as_str(), m["reason"].as_str()), (Some("open"), Some(format!("stopped: {why}").as_str())));
    let states: Vec<String> = web_ids.iter().map(|id| state(&web, id)).collect();
    assert_eq!(states.iter().filter(|s| *s == "done").count(), 1, "{states:?}");
    c.run(&["mission", "run", "m1", "--agent", "demo"]).ok();
    assert_eq!(web_ids.iter().map(|id| state(&web, id)).collect::<Vec<_>>(), ["done", "done"]);
}

/// A mission's projects may depend on each other's tasks (`--after <path>#<id>`): in one wave,
/// the project whose tasks wait for another's is walked after it, whatever order they were
/// added in, and reads the other's tasks when its walk starts.
#[test]
fn a_project_waiting_for_another_of_its_wave_is_walked_after_it() {
    let env = TestEnv::new();
    let (lib, lib_ids, _) = project(&env, "lib", &[("lib one", "")]);
    let app = env.repo("app");
    let uses = app.add(&["app one", "--label", "m1", "--after", &format!("../lib#{}", lib_ids[0])]);
    let c = commander(&env);
    add_project(&c, "app", &app.dir, 1);
    add_project(&c, "lib", &lib.dir, 1);
    let out = c.run(&["mission", "run", "m1", "--agent", "demo"]).ok();
    assert!(out.stdout.ends_with("mission complete: every project is done\n"), "{}", out.stdout);
    let walked: Vec<&str> = out.stdout.lines().filter(|l| l.contains(": walking ")).collect();
    assert!(walked[0].contains("lib: walking") && walked[1].contains("app: walking"), "{walked:?}");
    assert_eq!(state(&lib, &lib_ids[0]), "done");
    assert_eq!(state(&app, &uses), "done");
}
