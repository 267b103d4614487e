//! Landing through the forge (`loop.land = pr`, `land --via pr`, `run --land --via pr`): each
//! forge's adapter against the fake of its endpoints (`fake_forge`), with a real bare remote
//! behind it over `git daemon`, so the request branches are really pushed and a person's merge
//! is a real merge on the remote's `main`.

use serde_json::Value;

use crate::fake_forge::{FakeForge, Flavor};
use crate::harness::{Daemon, Repo, TestEnv};

const TOKEN: &str = "tok-s3cret-4c1d";

/// A clone of a bare remote served by `git daemon`, and a fake forge for it, configured.
fn world(env: &TestEnv, flavor: Flavor) -> (Daemon, Repo<'_>, FakeForge) {
    let bare = env.remote("widgets");
    let daemon = Daemon::start(env);
    let repo = env.clone_of(&daemon.url(&bare), "r");
    let forge = FakeForge::start(flavor, "acme/widgets", bare, TOKEN);
    repo.git(&["config", "loop.forge", flavor.word()]);
    repo.git(&["config", "loop.forge.url", &forge.api()]);
    repo.git(&["config", "loop.forge.repo", "acme/widgets"]);
    (daemon, repo, forge)
}

fn land(repo: &Repo<'_>, extra: &[&str]) -> crate::harness::Run {
    let mut args = vec!["land", "--via", "pr"];
    args.extend_from_slice(extra);
    repo.run_with(&args, &[("GIT_LOOP_FORGE_TOKEN", TOKEN)])
}

fn events(repo: &Repo<'_>, kind: &str) -> Vec<Value> {
    let log = repo.run(&["log", "--json"]).ok().json();
    log["events"].as_array().cloned().unwrap_or_default().into_iter().filter(|e| e["kind"] == kind).collect()
}

fn state(repo: &Repo<'_>, id: &str) -> String {
    repo.run(&["show", id, "--json"]).ok().json()["state"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn github_one_request_found_again_sent_back_on_failing_ci_and_landed_when_a_person_merges() {
    let env = TestEnv::new();
    let (_daemon, repo, forge) = world(&env, Flavor::GitHub);
    let id = crate::land::done_task(&repo, "Add the parser", &[], "parser.txt", "parse\n");
    let head = repo.git(&["rev-parse", &format!("loop/{id}")]);

    // Opened: the task branch pushed to the remote as loop/<id>, one request on main.
    let out = land(&repo, &["--json"]).ok();
    let report = &out.json()["landing"];
    assert_eq!(report["requests"][0]["opened"], true, "{report}");
    assert_eq!(report["requests"][0]["number"], 1);
    let pulls = forge.pulls();
    assert_eq!(pulls.len(), 1);
    assert_eq!((pulls[0].branch.as_str(), pulls[0].base.as_str()), (format!("loop/{id}").as_str(), "main"));
    assert_eq!(pulls[0].title, "Add the parser");
    assert!(pulls[0].body.contains(&format!("`{id}`")) && pulls[0].body.contains("| Cost |"), "{}", pulls[0].body);
    assert_eq!(
        repo.git(&["ls-remote", "origin", &format!("refs/heads/loop/{id}")]).split('\t').next(),
        Some(head.as_str())
    );
    assert_eq!(events(&repo, "pr_opened").len(), 1);

    // Again: found, not doubled; nothing reported yet.
    let out = land(&repo, &["--json"]).ok();
    assert_eq!(out.json()["landing"]["requests"][0]["opened"], false);
    assert_eq!(out.json()["landing"]["requests"][0]["checks"], "none");
    assert_eq!(forge.pulls().len(), 1);
    assert_eq!(events(&repo, "pr_opened").len(), 1, "said once");

    // CI fails: the task goes back to its agent with the forge's words (exit 1: not landed).
    forge.status(&head, "ci/test", "failure", "3 tests failed");
    let out = land(&repo, &[]).code(1);
    assert!(out.stdout.contains("sent back"), "{}", out.stdout);
    assert!(out.stdout.contains("ci/test: 3 tests failed"), "{}", out.stdout);
    assert_eq!(state(&repo, &id), "open");
    let checks = events(&repo, "pr_checks");
    assert_eq!(checks.last().unwrap()["data"]["verdict"], "failing");
    assert_eq!(checks.last().unwrap()["data"]["sent_back"], true);

    // The next session is told why, works on, and is done again; the request follows.
    let prompts = env.path("prompts");
    let agent = env.agent(
        "fixer",
        &format!(
            "cat \"$GIT_LOOP_PROMPT\" >> {}\necho fixed >> parser.txt\ngit loop finish done --message fixed",
            prompts.display()
        ),
    );
    // The walk lands through the forge as it goes: its lander pushes the new head.
    let walk = ["run", "--agent-cmd", &agent, "--max-units", "1", "--grace", "1", "--land", "--via", "pr"];
    let out = repo.run_with(&walk, &[("GIT_LOOP_FORGE_TOKEN", TOKEN)]).ok();
    let prompt = std::fs::read_to_string(&prompts).expect("the agent's prompt");
    assert!(prompt.contains("ci/test: 3 tests failed") && prompt.contains("pull request #1"), "{prompt}");
    assert_eq!(state(&repo, &id), "done");
    let new_head = repo.git(&["rev-parse", &format!("loop/{id}")]);
    assert_ne!(new_head, head);
    assert_eq!(
        repo.git(&["ls-remote", "origin", &format!("refs/heads/loop/{id}")]).split('\t').next(),
        Some(new_head.as_str()),
        "{}{}",
        out.stdout,
        out.stderr
    );
    let out = land(&repo, &["--json"]).ok();
    assert_eq!(out.json()["landing"]["requests"][0]["checks"], "none", "no CI on the new head yet");
    assert_eq!(forge.pulls().len(), 1, "the same request");

    // Passing and approved: still open until a person merges.
    forge.status(&new_head, "ci/test", "success", "all green");
    forge.review(1, "approved", "maintainer", "lgtm");
    let out = land(&repo, &["--json"]).ok();
    let seen = &out.json()["landing"]["requests"][0];
    assert_eq!((seen["checks"].as_str(), seen["review"].as_str()), (Some("passing"), Some("approved")), "{seen}");
    assert_eq!(state(&repo, &id), "done");
    // Shown where people look: show, status (and its JSON).
    let shown = repo.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("request: pull request #1 open · checks passing · approved · http://forge.example/"),
        "{shown}"
    );
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["request"]["number"], 1);
    let status = repo.run(&["status"]).ok().stdout;
    assert!(
        status.contains("requests open for main:") && status.contains(&format!("{id}  pull request #1 open")),
        "{status}"
    );
    assert_eq!(repo.run(&["status", "--json"]).ok().json()["landing"]["requests"][0]["task"], id.as_str());

    // Merged by a person: landed, with the merge commit; then nothing is left to land.
    let merge = forge.merge(1, "maintainer");
    let out = land(&repo, &["--json"]).ok();
    let report = &out.json()["landing"];
    assert_eq!(report["landed"][0]["task"], id.as_str(), "{report}");
    assert_eq!(report["landed"][0]["commit"], merge.as_str());
    assert_eq!(events(&repo, "pr_merged").len(), 1);
    assert_eq!(events(&repo, "task_landed").len(), 1);
    // The completion note says where and through which request.
    let note = repo.git(&["notes", "--ref=loop", "show", &new_head]);
    assert!(note.contains(&merge) && note.contains("\"request\": \"pull request #1 http://forge.example/"), "{note}");
    let out = land(&repo, &[]).ok();
    assert!(out.stdout.contains("nothing to land"), "{}", out.stdout);
    // The token was never shown.
    for kind in ["pr_opened", "pr_checks", "pr_review", "pr_merged"] {
        assert!(!events(&repo, kind).iter().any(|e| e.to_string().contains(TOKEN)));
    }
}

#[test]
fn gitlab_changes_requested_go_back_with_the_reviewers_words_and_a_closed_request_parks_the_task() {
    let env = TestEnv::new();
    let (_daemon, repo, forge) = world(&env, Flavor::GitLab);
    repo.git(&["config", "loop.forge.branch", "agents/{id}"]);
    repo.git(&["config", "loop.reviewRounds", "1"]);
    let a = crate::land::done_task(&repo, "Add a", &[], "a.txt", "a\n");
    let b = crate::land::done_task(&repo, "Add b", &[], "b.txt", "b\n");
    // The token from git's credential helper, asked for the forge's host.
    let helper = env.path("helper.sh");
    std::fs::write(&helper, format!("#!/bin/sh\ncat > {}\necho password={TOKEN}\n", env.path("asked").display()))
        .unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&helper).status().unwrap();
    repo.git(&["config", "credential.helper", helper.to_str().unwrap()]);
    // And the way from loop.land, without --via.
    repo.git(&["config", "loop.land", "pr"]);
    let out = repo.run(&["land", "--json"]).ok();
    let asked = std::fs::read_to_string(env.path("asked")).unwrap();
    assert!(asked.contains("protocol=http") && asked.contains(&format!("host=127.0.0.1:{}", forge.port)), "{asked}");
    assert_eq!(out.json()["landing"]["requests"].as_array().map(Vec::len), Some(2));
    assert_eq!(forge.pulls().len(), 2);
    let number_of = |id: &str| forge.pulls().iter().find(|p| p.branch == format!("agents/{id}")).unwrap().number;
    assert_eq!(
        repo.git(&["ls-remote", "origin", "refs/heads/agents/*"]).lines().count(),
        2,
        "pushed as loop.forge.branch says"
    );

    forge.review(number_of(&a), "changes", "reviewer1", "please rename the file");
    forge.close(number_of(&b), "maintainer");
    let out = land(&repo, &[]).code(1);
    assert!(out.stdout.contains("reviewer1 asked for changes on merge request !"), "{}", out.stdout);
    assert!(out.stdout.contains("please rename the file"), "{}", out.stdout);
    assert_eq!(state(&repo, &a), "open");
    assert_eq!(state(&repo, &b), "parked");
    let shown = repo.run(&["show", &b]).ok().stdout;
    assert!(shown.contains("closed by maintainer without merging"), "{shown}");
    assert_eq!(events(&repo, "pr_closed").len(), 1);
    assert_eq!(events(&repo, "pr_review").len(), 1);
    // Said once: the same review is not sent back again.
    land(&repo, &[]).ok();
    assert_eq!(events(&repo, "pr_review").len(), 1);

    // Done again: the new head goes to the same request; asked for changes once more, past
    // loop.reviewRounds (1), the task goes to a person with the reviewer's words.
    let wt = env.path("wt-a");
    repo.git(&["worktree", "add", "-q", wt.to_str().unwrap(), &format!("loop/{a}")]);
    std::fs::write(wt.join("renamed.txt"), "a\n").unwrap();
    env.git(&wt, &["add", "-A"]);
    env.git(&wt, &["commit", "-q", "-m", "rename"]);
    repo.git(&["worktree", "remove", wt.to_str().unwrap()]);
    repo.run(&["done", &a]).ok();
    land(&repo, &[]).ok();
    assert_eq!(forge.pulls().len(), 2, "the same request");
    forge.review(number_of(&a), "changes", "reviewer1", "still not right");
    land(&repo, &[]).code(1);
    let shown = repo.run(&["show", &a, "--json"]).ok().json();
    assert_eq!(shown["state"], "needs-you", "{shown}");
    assert!(shown.to_string().contains("still not right"), "{shown}");
}

#[test]
fn forgejo_pages_through_requests_waits_out_a_near_rate_limit_and_refuses_a_bad_token_in_one_line() {
    let env = TestEnv::new();
    let (_daemon, repo, forge) = world(&env, Flavor::Forgejo);
    // Other people's requests, so finding ours reads more than one page.
    for n in 0..3 {
        forge.open_directly(&format!("feature-{n}"), "main", "someone's work");
    }
    let id = crate::land::done_task(&repo, "Add c", &[], "c.txt", "c\n");

    // A bad token: one line naming where it came from, never the token; nothing opened.
    let out = repo.run_with(&["land", "--via", "pr"], &[("GIT_LOOP_FORGE_TOKEN", "wrong-token-value")]).code(1);
    let err = out.stderr.trim();
    assert!(err.contains("forgejo refused the token from $GIT_LOOP_FORGE_TOKEN"), "{err}");
    assert!(
        !err.contains("wrong-token-value") && err.lines().filter(|l| l.starts_with("error:")).count() == 1,
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
    assert_eq!(forge.pulls().len(), 3);
    // No token at all: a usage error that says how to give one.
    let out = repo.run(&["land", "--via", "pr"]).code(2);
    assert!(out.stderr.contains("no token for forgejo") && out.stderr.contains("FORGEJO_TOKEN"), "{}", out.stderr);

    // A rate limit whose reset is 2 s away is waited for; the request is opened once.
    forge.limit(1, 2);
    let started = std::time::Instant::now();
    let out = land(&repo, &["--json"]).ok();
    assert!(started.elapsed() >= std::time::Duration::from_millis(1500), "it waited for the reset");
    assert_eq!(out.json()["landing"]["requests"][0]["opened"], true);
    assert_eq!(forge.pulls().len(), 4);
    // Found again across pages: the listing was read past its first page.
    land(&repo, &[]).ok();
    assert_eq!(forge.pulls().len(), 4);
    assert!(forge.calls().iter().any(|c| c.contains("page=2")), "{:?}", forge.calls());

    // A reset an hour away: one line saying until when, nothing more asked.
    forge.limit(1, 3600);
    let out = land(&repo, &[]).code(1);
    assert!(out.stderr.contains("rate-limits this token until"), "{}", out.stderr);
    assert_eq!(state(&repo, &id), "done");
}

#[test]
fn a_walk_landing_through_the_forge_reads_its_requests_back_while_it_runs() {
    let env = TestEnv::new();
    let (_daemon, repo, forge) = world(&env, Flavor::GitHub);
    repo.git(&["config", "loop.forge.poll", "1s"]);
    let first = repo.add(&["first"]);
    let second = repo.add(&["second", "--after", &first]);
    let flag = env.path("go-on");
    // The second task's session waits (bounded) until the test has seen the first one merged.
    let agent = env.agent(
        "w",
        &format!(
            "echo \"$GIT_LOOP_TASK\" >> work.txt\nif [ \"$GIT_LOOP_TASK\" = {second} ]; then i=0; while [ ! -f {f} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; fi\ngit loop finish done",
            f = flag.display()
        ),
    );
    let walk = repo
        .command(&["run", "--agent-cmd", &agent, "--grace", "1", "--land", "--via", "pr"])
        .env("GIT_LOOP_FORGE_TOKEN", TOKEN)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the walk");
    crate::harness::wait_for("the first task's request", || forge.pulls().len() == 1);
    forge.merge(1, "maintainer");
    // The walk's lander reads it back within its poll (1 s): the first task lands.
    crate::harness::wait_for("the merge read back", || !events(&repo, "pr_merged").is_empty());
    std::fs::write(&flag, "").unwrap();
    let out = walk.wait_with_output().expect("the walk ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("lands on its merge alone"), "the forge's CI gates the merge: {stderr}");
    assert!(stdout.contains("landed on main"), "{stdout}");
    let landed: Vec<Value> = events(&repo, "task_landed");
    assert_eq!(landed.len(), 1, "{landed:?}");
    assert_eq!(landed[0]["task"], first.as_str());
    // The second, done after its dependency merged, has its own request on main.
    let pulls = forge.pulls();
    assert_eq!(pulls.len(), 2, "{pulls:?}");
    assert_eq!(pulls[1].branch, format!("loop/{second}"));
    assert_eq!(pulls[1].base, "main");
}

#[test]
fn an_unreachable_forge_is_one_line_and_nothing_is_pushed_or_opened() {
    let env = TestEnv::new();
    let (_daemon, repo, _forge) = world(&env, Flavor::GitHub);
    let id = crate::land::done_task(&repo, "Add e", &[], "e.txt", "e\n");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    repo.git(&["config", "loop.forge.url", &format!("http://127.0.0.1:{closed}/api/v3")]);
    let out = land(&repo, &[]).code(1);
    let err = out.stderr.trim();
    assert!(err.starts_with("error: github at http://127.0.0.1:") && err.contains("cannot be reached"), "{err}");
    assert_eq!(err.lines().count(), 2, "one error line and its hint: {err}");
    assert_eq!(repo.git(&["ls-remote", "origin", &format!("refs/heads/loop/{id}")]), "", "nothing pushed");
    assert!(events(&repo, "pr_opened").is_empty());
    assert_eq!(state(&repo, &id), "done");
    // No forge to name: a usage error that says how.
    repo.git(&["config", "--unset", "loop.forge"]);
    let out = land(&repo, &[]).code(2);
    assert!(
        out.stderr.contains("cannot tell which forge") && out.stderr.contains("git config loop.forge"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_landing_killed_at_any_write_leaves_exactly_one_request_once_run_again() {
    let env = TestEnv::new();
    let (_daemon, repo, forge) = world(&env, Flavor::GitHub);
    let id = crate::land::done_task(&repo, "Add d", &[], "d.txt", "d\n");
    let mut kill_at = 1;
    loop {
        let out = repo.run_with(
            &["land", "--via", "pr"],
            &[("GIT_LOOP_FORGE_TOKEN", TOKEN), ("GIT_LOOP_KILL_AT", &format!("land:{kill_at}"))],
        );
        if out.code != -1 {
            out.code(0);
            break;
        }
        assert!(kill_at < 40, "the landing kept being killed");
        kill_at += 1;
    }
    assert!(kill_at > 2, "the failpoint was reached");
    land(&repo, &[]).ok();
    let pulls = forge.pulls();
    assert_eq!(pulls.len(), 1, "one request whatever write the landing died at: {pulls:?}");
    assert_eq!(events(&repo, "pr_opened").len(), 1);
    assert_eq!(pulls[0].branch, format!("loop/{id}"));
}

#[test]
fn a_stacked_request_opens_on_its_dependencys_branch_and_is_retargeted_when_that_one_merges() {
    let env = TestEnv::new();
    let (_daemon, repo, forge) = world(&env, Flavor::GitHub);
    repo.git(&["config", "loop.forge.stack", "stack"]);
    let a = crate::land::done_task(&repo, "Add a", &[], "a.txt", "a\n");
    let b = crate::land::done_task(&repo, "Add b", &["--after", &a], "b.txt", "b\n");
    land(&repo, &[]).ok();
    let pulls = forge.pulls();
    let pull = |id: &str| pulls.iter().find(|p| p.branch == format!("loop/{id}")).cloned().expect("a request");
    assert_eq!(pull(&a).base, "main");
    assert_eq!(pull(&b).base, format!("loop/{a}"));
    forge.merge(pull(&a).number, "maintainer");
    let out = land(&repo, &["--json"]).ok();
    assert_eq!(out.json()["landing"]["landed"][0]["task"], a.as_str());
    let b_now = forge.pulls().into_iter().find(|p| p.number == pull(&b).number).unwrap();
    assert_eq!(b_now.base, "main", "retargeted onto the target");

    // Without stacking (the default), a dependant waits.
    repo.git(&["config", "loop.forge.stack", "wait"]);
    let c = crate::land::done_task(&repo, "Add c", &[], "c.txt", "c\n");
    let d = crate::land::done_task(&repo, "Add d", &["--after", &c], "d.txt", "d\n");
    let out = land(&repo, &[]).ok();
    assert!(out.stdout.contains(&format!("{d}  waits for {c}")), "{}", out.stdout);
    assert!(!forge.pulls().iter().any(|p| p.branch == format!("loop/{d}")));
}

#[test]
fn two_clones_on_one_remote_share_one_request_per_task() {
    let env = TestEnv::new();
    let (remote, a, b) = env.two_clones();
    let forge = FakeForge::start(Flavor::GitHub, "acme/widgets", remote, TOKEN);
    for clone in [&a, &b] {
        clone.git(&["config", "loop.forge", "github"]);
        clone.git(&["config", "loop.forge.url", &forge.api()]);
        clone.git(&["config", "loop.forge.repo", "acme/widgets"]);
    }
    let id = crate::land::done_task(&a, "Add f", &[], "f.txt", "f\n");
    a.run(&["sync"]).ok();
    // The other clone opens it (its landing syncs first, and learns of the done task)…
    let out = land(&b, &["--json"]).ok();
    assert_eq!(out.json()["landing"]["requests"][0]["opened"], true, "{}", out.stdout);
    // …and this one, syncing, knows it: no second request, nothing journaled twice.
    let out = land(&a, &["--json"]).ok();
    assert_eq!(out.json()["landing"]["requests"][0]["opened"], false, "{}", out.stdout);
    assert_eq!(forge.pulls().len(), 1);
    assert_eq!(events(&a, "pr_opened").len(), 1);
    // Merged: whichever clone reads it back lands it once, and the other knows.
    forge.merge(1, "maintainer");
    land(&a, &[]).ok();
    land(&b, &[]).ok();
    assert_eq!(events(&b, "task_landed").len(), 1);
    assert_eq!(events(&b, "task_landed")[0]["task"], id.as_str());
}
