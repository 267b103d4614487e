//! The way back from a landing that conflicts, end to end (issue 32): the task waits for you
//! offering only answers that work; taking it over gives a worktree holding the merge in
//! progress (git lists the conflict, the markers name both sides), and handing it back lands
//! it without resolving the same conflict again; reopening lets the agent resolve that merge
//! instead of redoing the task on its old branch.

use super::people::{journal, named, state_dir};
use super::resolve::{done_task, on_main};
use crate::harness::{Repo, TestEnv};

/// Two done tasks whose branches both rewrite f.txt, landed with no resolver: the first lands,
/// the second's landing conflicts. Returns (a, b, b's branch head).
fn conflicted(repo: &Repo<'_>) -> (String, String, String) {
    on_main(repo, "f.txt", "base\n");
    let a = done_task(repo, "Write a", "The file says a.", "f.txt", "a\n");
    let b = done_task(repo, "Write b", "The file says b.", "f.txt", "b\n");
    let out = repo.run(&["land"]).code(1);
    assert!(
        out.stdout.contains(&format!("{b}  not landed, needs you: its merge into main conflicts in: f.txt")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("git loop take-over {b}")), "the landing says how to answer:\n{}", out.stdout);
    let head = repo.git(&["rev-parse", &format!("loop/{b}")]);
    (a, b, head)
}

fn answers(repo: &Repo<'_>, id: &str) -> Vec<String> {
    let shown = repo.run(&["show", id, "--json"]).ok().json();
    shown["answers"]
        .as_array()
        .expect("answers")
        .iter()
        .map(|a| a["command"].as_str().expect("a command").to_owned())
        .collect()
}

fn count(events: &[serde_json::Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

fn parents(repo: &Repo<'_>, rev: &str) -> Vec<String> {
    repo.git(&["rev-list", "--parents", "-n", "1", rev]).split_whitespace().skip(1).map(ToOwned::to_owned).collect()
}

#[test]
fn a_conflicting_landing_taken_over_and_kept_is_resolved_once_and_lands() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let (_a, b, old_head) = conflicted(&repo);
    // Only answers that work: no try to accept (none holds the target), take over or reopen.
    let offered = answers(&repo, &b);
    assert_eq!(
        offered,
        [
            format!("git loop take-over {b}"),
            format!("git loop reopen {b}"),
            format!("git loop reassign {b} <agent>"),
            format!("git loop park {b} --reason '…'"),
        ],
        "the answers to a landing conflict"
    );
    let main = repo.git(&["rev-parse", "main"]);
    let taken = repo.run(&["take-over", &b, "--json"]).ok().json();
    assert_eq!(taken["merging"]["paths"], serde_json::json!(["f.txt"]), "{taken}");
    let wt = std::path::PathBuf::from(taken["worktree"].as_str().expect("a worktree"));
    // A real merge in progress: git says so, MERGE_HEAD is the task branch, HEAD the target.
    assert_eq!(env.git(&wt, &["status", "--porcelain"]), "UU f.txt");
    assert_eq!(env.git(&wt, &["rev-parse", "MERGE_HEAD"]), old_head);
    assert_eq!(env.git(&wt, &["rev-parse", "HEAD"]), main);
    let marked = std::fs::read_to_string(wt.join("f.txt")).expect("f.txt");
    assert_eq!(marked, format!("<<<<<<< main\na\n=======\nb\n>>>>>>> loop/{b}\n"), "the markers name both sides");
    assert_eq!(
        answers(&repo, &b),
        [format!("git loop hand-back {b} --keep"), format!("git loop hand-back {b} --continue")]
    );
    // Where it is worked by hand, on the board.
    let worktree = wt.display().to_string();
    assert_eq!(repo.run(&["show", &b, "--json"]).ok().json()["taken_over"]["worktree"], worktree.as_str());
    let status = repo.run(&["status"]).ok();
    assert!(
        status.stdout.contains(&format!("      worked by hand by Tess Ter <tess@example.com> in {worktree}\n")),
        "{}",
        status.stdout
    );
    let listed = repo.run(&["status", "--json"]).ok().json();
    assert_eq!(listed["needs_you"][0]["worktree"], worktree.as_str(), "{listed}");
    // The person resolves and commits the merge as git has them do it.
    std::fs::write(wt.join("f.txt"), "a\nb\n").expect("resolve");
    env.git(&wt, &["add", "f.txt"]);
    env.git(&wt, &["commit", "-q", "--no-edit"]);
    let back = repo.run(&["hand-back", &b, "--keep"]).ok();
    assert!(!back.stdout.contains("you changed nothing"), "a committed resolution is a change:\n{}", back.stdout);
    assert!(back.stdout.contains("lands on main without a conflict"), "{}", back.stdout);
    assert_eq!(parents(&repo, &format!("loop/{b}")), [main.clone(), old_head], "the task branch is the merge");
    // It lands with no resolver: the conflict was resolved once.
    let landed = repo.run(&["land", "--json"]).ok().json();
    assert_eq!(landed["landing"]["landed"][0]["task"], b.as_str(), "{landed}");
    assert_eq!(repo.git(&["show", "main:f.txt"]), "a\nb");
    assert_eq!(count(&journal(&repo, &b), "landing_failed"), 1, "it conflicted once");
    // Landed: its failure is answered, and the board no longer shows it.
    let status = repo.run(&["status"]).ok();
    assert!(!status.stdout.contains("last landing failure"), "{}", status.stdout);
    assert_eq!(repo.run(&["status", "--json"]).ok().json()["landing"]["last_failure"], serde_json::Value::Null);
}

#[test]
fn a_merge_left_with_markers_is_refused_and_one_left_uncommitted_is_concluded_by_the_loop() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let (_a, b, old_head) = conflicted(&repo);
    let taken = repo.run(&["take-over", &b, "--json"]).ok().json();
    let wt = std::path::PathBuf::from(taken["worktree"].as_str().expect("a worktree"));
    assert!(
        repo.run(&["status"]).ok().stdout.contains(&format!("last landing failure on main: {b} ")),
        "not landed yet"
    );
    let refused = repo.run(&["hand-back", &b, "--keep"]).code(1);
    assert!(refused.stderr.contains("conflict markers are left in: f.txt"), "{}", refused.stderr);
    assert_eq!(repo.run(&["show", &b, "--json"]).ok().json()["state"], "taken-over", "it stays yours");
    // Resolved, not added, not committed: the loop makes the merge.
    std::fs::write(wt.join("f.txt"), "b\na\n").expect("resolve");
    repo.run(&["hand-back", &b, "--keep"]).ok();
    let branch = format!("loop/{b}");
    assert_eq!(parents(&repo, &branch).len(), 2, "the task branch is a merge");
    assert_eq!(parents(&repo, &branch)[1], old_head);
    assert_eq!(repo.git(&["show", &format!("{branch}:f.txt")]), "b\na");
    repo.run(&["land"]).ok();
    assert_eq!(repo.git(&["show", "main:f.txt"]), "b\na");
}

#[test]
fn a_reopened_conflicting_landing_is_resolved_by_the_agent_in_the_merge_not_redone() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let state = state_dir(&env);
    let (_a, b, old_head) = conflicted(&repo);
    named(
        &repo,
        &env,
        "w",
        &format!(
            "cat \"$GIT_LOOP_PROMPT\" > {s}/prompt\ngit status --porcelain > {s}/status\n\
             printf 'a\\nb\\n' > f.txt\ngit add f.txt\ngit commit -q --no-edit\n\
             git loop finish done --message 'kept both'",
            s = state.display()
        ),
    );
    repo.run(&["reopen", &b]).ok();
    let out = repo
        .run(&["run", "--agent", "w", "--land", "--checks", "grep -qx a f.txt && grep -qx b f.txt", "--grace", "1"])
        .ok();
    assert!(out.stdout.contains(&format!("{b}  landed on main")), "{}", out.stdout);
    assert_eq!(std::fs::read_to_string(state.join("status")).expect("the agent ran"), "UU f.txt\n");
    let prompt = std::fs::read_to_string(state.join("prompt")).expect("the prompt");
    assert!(prompt.contains("landing it on main conflicts in:\n\n- f.txt"), "{prompt}");
    assert!(prompt.contains("do not redo the task"), "{prompt}");
    assert_eq!(repo.git(&["show", "main:f.txt"]), "a\nb");
    let branch = format!("loop/{b}");
    assert_eq!(parents(&repo, &branch)[1], old_head, "the task branch is the merge of its old head");
    let events = journal(&repo, &b);
    assert_eq!(count(&events, "merge_started"), 1, "{events:?}");
    assert_eq!(count(&events, "landing_failed"), 1, "it conflicted once");
}

#[test]
fn work_a_person_or_an_agent_committed_itself_is_not_called_no_change() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    // An agent that commits its own work: the loop finds nothing left, and says only that.
    named(&repo, &env, "c", "echo x > x.txt\ngit add x.txt\ngit commit -q -m 'my work'\ngit loop finish done");
    let id = repo.add(&["Write x"]);
    let walked = repo.run(&["run", "--agent", "c", "--max-units", "1"]).ok();
    assert!(!walked.stdout.contains("it changed no file"), "{}", walked.stdout);
    assert!(walked.stdout.contains("nothing was left uncommitted"), "{}", walked.stdout);
    assert_eq!(repo.git(&["show", &format!("loop/{id}:x.txt")]), "x");
    // A person who commits by hand in a task they took over changed something.
    let other = repo.add(&["Write y"]);
    let taken = repo.run(&["take-over", &other, "--json"]).ok().json();
    let wt = std::path::PathBuf::from(taken["worktree"].as_str().expect("a worktree"));
    std::fs::write(wt.join("y.txt"), "y\n").expect("write");
    env.git(&wt, &["add", "y.txt"]);
    env.git(&wt, &["commit", "-q", "-m", "by hand"]);
    let back = repo.run(&["hand-back", &other, "--keep"]).ok();
    assert!(
        back.stdout.starts_with(&format!("{other} · your changes (1 file) are committed on loop-try/{other}/1 as ")),
        "{}",
        back.stdout
    );
}
