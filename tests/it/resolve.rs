//! Conflict-resolver sessions with scripted agents: a landing whose merge conflicts is resolved
//! by a resolver session and lands with its checks passing; a resolver that leaves conflict
//! markers sends the task to needs-you with the paths named and the target untouched; a task
//! whose two done dependencies conflict gets its task branch from a resolved merge, and its
//! worker works on that.

use super::people::{journal, named, state_dir};
use crate::harness::{Repo, TestEnv};

/// Put `content` in `file` on main, committed.
pub fn on_main(repo: &Repo<'_>, file: &str, content: &str) {
    std::fs::write(repo.dir.join(file), content).expect("write");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", &format!("{file} on main")]);
}

/// A done task whose branch (from main) writes `content` to `file`: its id. Tasks titled
/// "Write a" are p1 and others p2, so that a lands first.
pub fn done_task(repo: &Repo<'_>, title: &str, body: &str, file: &str, content: &str) -> String {
    let priority = if title == "Write a" { "p1" } else { "p2" };
    let id = repo.add(&[title, "--body", body, "-p", priority]);
    let wt = repo.env.path(&format!("wt-{id}"));
    let wt_str = wt.to_str().expect("utf-8");
    repo.git(&["worktree", "add", "-q", "-b", &format!("loop/{id}"), wt_str, "main"]);
    std::fs::write(wt.join(file), content).expect("write the task's file");
    repo.env.git(&wt, &["add", "-A"]);
    repo.env.git(&wt, &["commit", "-q", "-m", &format!("work of {title}")]);
    repo.git(&["worktree", "remove", wt_str]);
    repo.run(&["done", &id]).ok();
    id
}

/// A resolver that keeps its prompt, writes both sides' lines into f.txt and says resolved.
fn resolving(state: &std::path::Path) -> String {
    format!(
        "cat \"$GIT_LOOP_PROMPT\" > {s}/resolver-prompt\ngit status --porcelain > {s}/resolver-status\ncat f.txt > {s}/resolver-saw\nprintf 'a\\nb\\n' > f.txt\ngit loop finish resolved --message 'kept both lines'",
        s = state.display()
    )
}

fn events_of(events: &[serde_json::Value], kind: &str) -> Vec<serde_json::Value> {
    events.iter().filter(|e| e["kind"] == kind).cloned().collect()
}

#[test]
fn two_conflicting_task_branches_land_once_a_resolver_resolves_the_second() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let state = state_dir(&env);
    named(&repo, &env, "res", &resolving(&state));
    on_main(&repo, "f.txt", "base\n");
    let a = done_task(&repo, "Write a", "The file says a.", "f.txt", "a\n");
    let b = done_task(&repo, "Write b", "The file says b.", "f.txt", "b\n");
    let out =
        repo.run(&["land", "--resolver", "res", "--checks", "grep -qx a f.txt && grep -qx b f.txt", "--json"]).ok();
    let report = &out.json()["landing"];
    assert_eq!(report["landed"].as_array().expect("landed").len(), 2, "{report}");
    assert_eq!(report["failed"].as_array().expect("failed").len(), 0, "{report}");
    assert_eq!(repo.git(&["show", "main:f.txt"]), "a\nb");
    for id in [&a, &b] {
        let mut cmd = std::process::Command::new("git");
        cmd.args(["merge-base", "--is-ancestor", &format!("loop/{id}"), "main"]).current_dir(&repo.dir);
        assert!(repo.env.seal(&mut cmd).status().expect("git").success(), "{id}'s work is on main");
    }
    // The resolver works in a real merge in progress: git lists the conflict, and the markers
    // name both sides.
    let status = std::fs::read_to_string(state.join("resolver-status")).expect("the resolver ran");
    assert_eq!(status, "UU f.txt\n", "git status in the resolver's worktree");
    let saw = std::fs::read_to_string(state.join("resolver-saw")).expect("the resolver ran");
    assert_eq!(saw, format!("<<<<<<< main\na\n=======\nb\n>>>>>>> loop/{b}\n"));
    // The resolver was told the paths and both sides' tasks.
    let prompt = std::fs::read_to_string(state.join("resolver-prompt")).expect("the resolver ran");
    assert!(prompt.contains("- f.txt"), "{prompt}");
    assert!(prompt.contains(&format!("{b}: Write b")) && prompt.contains("The file says b."), "{prompt}");
    assert!(prompt.contains(&format!("{a}: Write a")) && prompt.contains("The file says a."), "{prompt}");
    // Journaled: its session (a session of the task, in the resolver's role), and the resolution.
    let events = journal(&repo, &b);
    let started = events_of(&events, "session_started");
    assert!(started.iter().any(|e| e["data"]["role"] == "conflict-resolver"), "{started:?}");
    let resolving = events_of(&events, "conflict_resolving");
    assert_eq!(resolving.len(), 1);
    assert_eq!(resolving[0]["data"]["paths"], serde_json::json!(["f.txt"]));
    assert_eq!(resolving[0]["data"]["kind"], "landing");
    let resolved = events_of(&events, "conflict_resolved");
    assert_eq!(resolved.len(), 1, "{events:?}");
    assert_eq!(resolved[0]["data"]["summary"], "kept both lines");
    // Its work is kept on its try's branch; the landing merge names it.
    let number = resolved[0]["data"]["try"].as_u64().expect("try");
    assert_eq!(repo.git(&["show", &format!("loop-try/{b}/{number}:f.txt")]), "a\nb");
    let message = repo.git(&["log", "-1", "--format=%B", "main"]);
    assert!(message.contains(&format!("Resolved-By: loop-try/{b}/{number}")), "{message}");
    assert_eq!(repo.git(&["status", "--porcelain"]), "", "main's worktree followed, clean");
}

#[test]
fn a_resolver_that_leaves_markers_sends_the_task_to_needs_you_and_the_target_stays() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    named(&repo, &env, "res", "git loop finish resolved --message 'done, I think'");
    on_main(&repo, "f.txt", "base\n");
    let _a = done_task(&repo, "Write a", "a", "f.txt", "a\n");
    let b = done_task(&repo, "Write b", "b", "f.txt", "b\n");
    let out = repo.run(&["land", "--resolver", "res", "--json"]).code(1);
    let report = &out.json()["landing"];
    assert_eq!(report["landed"].as_array().expect("landed").len(), 1, "{report}");
    let failed = &report["failed"][0];
    assert_eq!(failed["task"], b.as_str());
    assert_eq!(failed["cause"], "conflict");
    assert_eq!(failed["paths"], serde_json::json!(["f.txt"]));
    let reason = failed["reason"].as_str().expect("reason");
    assert!(reason.contains("conflicts in: f.txt") && reason.contains("left conflict markers in: f.txt"), "{reason}");
    // The target holds the first landing only.
    assert_eq!(repo.git(&["show", "main:f.txt"]), "a");
    let shown = repo.run(&["show", &b, "--json"]).ok().json();
    assert_eq!(shown["state"], "needs-you", "{shown}");
    let unresolved = events_of(&journal(&repo, &b), "conflict_unresolved");
    assert_eq!(unresolved.len(), 1);
    assert!(unresolved[0]["data"]["reason"].as_str().expect("reason").contains("conflict markers"));
}

#[test]
fn a_resolver_that_reports_unresolved_leaves_the_target_untouched() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    named(&repo, &env, "res", "git loop finish unresolved --message 'both sides rewrite the same line'");
    on_main(&repo, "f.txt", "base\n");
    let b = done_task(&repo, "Write b", "b", "f.txt", "b\n");
    // main moves on its own, in conflict with b.
    on_main(&repo, "f.txt", "main\n");
    let before = repo.git(&["rev-parse", "main"]);
    let out = repo.run(&["land", "--resolver", "res", "--json"]).code(1);
    let reason = out.json()["landing"]["failed"][0]["reason"].as_str().expect("reason").to_owned();
    assert!(reason.contains("f.txt") && reason.contains("both sides rewrite the same line"), "{reason}");
    assert_eq!(repo.git(&["rev-parse", "main"]), before, "the target did not move");
    assert_eq!(repo.run(&["show", &b, "--json"]).ok().json()["state"], "needs-you");
}

#[test]
fn a_landing_without_a_resolver_names_the_flag() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    on_main(&repo, "f.txt", "base\n");
    let b = done_task(&repo, "Write b", "b", "f.txt", "b\n");
    on_main(&repo, "f.txt", "main\n");
    let out = repo.run(&["land", "--json"]).code(1);
    let failed = &out.json()["landing"]["failed"][0];
    assert_eq!(failed["task"], b.as_str());
    assert!(failed["reason"].as_str().expect("reason").contains("--resolver"), "{failed}");
}

#[test]
fn a_tasks_conflicting_dependencies_are_resolved_and_its_worker_goes_on_from_there() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let state = state_dir(&env);
    named(&repo, &env, "res", &resolving(&state));
    named(
        &repo,
        &env,
        "w",
        &format!("cp f.txt {s}/worker-saw\ngit loop finish done --message 'built on both'", s = state.display()),
    );
    on_main(&repo, "f.txt", "base\n");
    let a = done_task(&repo, "Write a", "The file says a.", "f.txt", "a\n");
    let b = done_task(&repo, "Write b", "The file says b.", "f.txt", "b\n");
    let c = repo.add(&["Use both", "--after", &a, "--after", &b]);
    repo.run(&[
        "run",
        "--agent",
        "w",
        "--resolver",
        "res",
        "--checks",
        "grep -qx a f.txt && grep -qx b f.txt",
        "--task",
        &c,
        "--max-units",
        "1",
        "--grace",
        "1",
    ])
    .ok();
    assert_eq!(std::fs::read_to_string(state.join("worker-saw")).expect("the worker ran"), "a\nb\n");
    let prompt = std::fs::read_to_string(state.join("resolver-prompt")).expect("the resolver ran");
    assert!(prompt.contains("- f.txt") && prompt.contains(&format!("loop/{c}")), "{prompt}");
    let events = journal(&repo, &c);
    let resolved = events_of(&events, "conflict_resolved");
    assert_eq!(resolved.len(), 1, "{events:?}");
    let commit = resolved[0]["data"]["commit"].as_str().expect("commit").to_owned();
    // The task branch starts at the resolved merge, whose parents are both sides.
    let parents = repo.git(&["rev-list", "--parents", "-n", "1", &commit]);
    assert_eq!(parents.split_whitespace().count(), 3, "{parents}");
    let shown = repo.run(&["show", &c, "--json"]).ok().json();
    assert_eq!(shown["state"], "done", "{shown}");
}
