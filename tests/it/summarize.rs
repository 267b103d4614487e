//! Summarizer sessions and the role sessions of a landing with scripted agents: a summarizer
//! writes the landing commit's message (the loop appends its trailer); one that breaks its
//! contract is sent back once, and twice sends its task to needs-you while the rest lands; a
//! conflict resolver that breaks its contract is sent back once; a resolution that fails the
//! checks leaves the target untouched and names the resolver's session; `status` and `show`
//! say who is resolving what while a resolver works.

use std::time::{Duration, Instant};

use super::people::{finish, journal, named, spawn, state_dir};
use crate::harness::{Repo, TestEnv};

fn on_main(repo: &Repo<'_>, file: &str, content: &str) {
    std::fs::write(repo.dir.join(file), content).expect("write");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", &format!("{file} on main")]);
}

/// A done task whose branch (from main) writes `content` to `file`: its id. "Write a" is p1,
/// the others p2, so that a lands first.
fn done_task(repo: &Repo<'_>, title: &str, file: &str, content: &str) -> String {
    let priority = if title == "Write a" { "p1" } else { "p2" };
    let id = repo.add(&[title, "--body", &format!("The file says {content}"), "-p", priority]);
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

fn events_of(events: &[serde_json::Value], kind: &str) -> Vec<serde_json::Value> {
    events.iter().filter(|e| e["kind"] == kind).cloned().collect()
}

/// A script that breaks its role's contract the first time it runs (an empty JSON object as
/// its result), then does `then`.
fn once_broken(state: &std::path::Path, name: &str, then: &str) -> String {
    format!(
        "if [ -f {s}/{name}-ran ]; then\n{then}\nelse\ntouch {s}/{name}-ran\necho '{{}}' > \"$GIT_LOOP_RESULT\"\nfi",
        s = state.display()
    )
}

#[test]
fn a_summarizer_writes_the_landing_commits_message_from_the_task_and_its_sessions() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let state = state_dir(&env);
    named(&repo, &env, "w", "printf 'a\\n' > a.txt\ngit loop finish done --message 'wrote a.txt with one line'");
    let summarize = format!(
        "cat \"$GIT_LOOP_PROMPT\" > {s}/summarizer-prompt\ngit loop finish summary --subject 'Add a.txt  with\tone line' --message 'The task asked for a file.'",
        s = state.display()
    );
    // Sent back once: its first report breaks the contract.
    named(&repo, &env, "sum", &once_broken(&state, "sum", &summarize));
    let id = repo.add(&["Write a", "--body", "A file named a.txt."]);
    repo.run(&["run", "--agent", "w", "--summarizer", "sum", "--land", "--grace", "1", "--checks", "test -f a.txt"])
        .ok();
    let message = repo.git(&["log", "-1", "--format=%B", "main"]);
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines[0], "Add a.txt with one line", "{message}");
    assert_eq!(lines[1], "");
    assert_eq!(lines[2], "The task asked for a file.", "{message}");
    assert!(message.contains(&format!("Loop-Task: {id}")), "{message}");
    assert!(message.contains("Summarized-By: s-"), "{message}");
    assert_eq!(repo.git(&["show", "main:a.txt"]), "a");
    // It was told the task, what its worker said and the change.
    let prompt = std::fs::read_to_string(state.join("summarizer-prompt")).expect("the summarizer ran");
    assert!(prompt.contains("A file named a.txt."), "{prompt}");
    assert!(prompt.contains("wrote a.txt with one line"), "{prompt}");
    assert!(prompt.contains("a.txt (+1"), "{prompt}");
    assert!(prompt.contains("could not be read"), "the second session is told why: {prompt}");
    // Journaled as sessions of the task in the summarizer's role; the violation was sent back.
    let events = journal(&repo, &id);
    let started = events_of(&events, "session_started");
    assert_eq!(started.iter().filter(|e| e["data"]["role"] == "summarizer").count(), 2, "{started:?}");
    let violations = events_of(&events, "contract_violation");
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0]["data"]["sent_back"], true);
    assert_eq!(violations[0]["data"]["contract"], "summarizer/1");
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done");
}

#[test]
fn a_summarizer_that_breaks_its_contract_twice_sends_its_task_to_needs_you_and_the_rest_lands() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let a = done_task(&repo, "Write a", "a.txt", "a\n");
    let b = done_task(&repo, "Write b", "b.txt", "b\n");
    // Good for every task but b, whose reports never read as its contract.
    let script = format!(
        "if [ \"$GIT_LOOP_TASK\" = {b} ]; then echo 'not json' > \"$GIT_LOOP_RESULT\"; else git loop finish summary --subject \"Land $GIT_LOOP_TASK\" --message body; fi"
    );
    named(&repo, &env, "sum", &script);
    let out = repo.run(&["land", "--summarizer", "sum", "--json"]).code(1);
    let report = &out.json()["landing"];
    assert_eq!(report["landed"].as_array().expect("landed").len(), 1, "{report}");
    assert_eq!(report["landed"][0]["task"], a.as_str());
    let failed = &report["failed"][0];
    assert_eq!(failed["task"], b.as_str());
    assert_eq!(failed["cause"], "summary");
    let reason = failed["reason"].as_str().expect("reason");
    assert!(reason.contains("broke the summarizer/1 contract twice"), "{reason}");
    // main holds a's landing only, with its summary.
    assert_eq!(repo.git(&["log", "-1", "--format=%s", "main"]), format!("Land {a}"));
    let mut cmd = std::process::Command::new("git");
    cmd.args(["merge-base", "--is-ancestor", &format!("loop/{b}"), "main"]).current_dir(&repo.dir);
    assert!(!repo.env.seal(&mut cmd).status().expect("git").success(), "b's work is not on main");
    let shown = repo.run(&["show", &b, "--json"]).ok().json();
    assert_eq!(shown["state"], "needs-you", "{shown}");
    let violations = events_of(&journal(&repo, &b), "contract_violation");
    assert_eq!(
        violations.iter().map(|v| v["data"]["sent_back"].clone()).collect::<Vec<_>>(),
        vec![serde_json::json!(true), serde_json::json!(false)]
    );
}

/// A resolver that writes both sides' lines into f.txt and says resolved.
const RESOLVING: &str = "printf 'a\\nb\\n' > f.txt\ngit loop finish resolved --message 'kept both lines'";

#[test]
fn a_resolver_that_breaks_its_contract_is_sent_back_once_then_resolves() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let state = state_dir(&env);
    named(&repo, &env, "res", &once_broken(&state, "res", RESOLVING));
    on_main(&repo, "f.txt", "base\n");
    let _a = done_task(&repo, "Write a", "f.txt", "a\n");
    let b = done_task(&repo, "Write b", "f.txt", "b\n");
    let out = repo.run(&["land", "--resolver", "res", "--json"]).ok();
    assert_eq!(out.json()["landing"]["landed"].as_array().expect("landed").len(), 2);
    assert_eq!(repo.git(&["show", "main:f.txt"]), "a\nb");
    let events = journal(&repo, &b);
    let violations = events_of(&events, "contract_violation");
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0]["data"]["sent_back"], true);
    assert_eq!(violations[0]["data"]["contract"], "conflict-resolver/1");
    assert_eq!(events_of(&events, "conflict_resolved").len(), 1);
}

#[test]
fn a_resolver_that_breaks_its_contract_twice_sends_the_task_to_needs_you() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    named(&repo, &env, "res", "printf 'a\\nb\\n' > f.txt\necho '{\"resolved\": true}' > \"$GIT_LOOP_RESULT\"");
    on_main(&repo, "f.txt", "base\n");
    let _a = done_task(&repo, "Write a", "f.txt", "a\n");
    let b = done_task(&repo, "Write b", "f.txt", "b\n");
    let out = repo.run(&["land", "--resolver", "res", "--json"]).code(1);
    let failed = &out.json()["landing"]["failed"][0];
    assert_eq!(failed["task"], b.as_str());
    assert!(failed["reason"].as_str().expect("reason").contains("contract twice"), "{failed}");
    assert_eq!(repo.git(&["show", "main:f.txt"]), "a", "main holds a's landing only");
    assert_eq!(repo.run(&["show", &b, "--json"]).ok().json()["state"], "needs-you");
    assert_eq!(events_of(&journal(&repo, &b), "contract_violation").len(), 2);
}

#[test]
fn a_resolution_that_fails_the_checks_leaves_the_target_and_names_the_resolver() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    named(&repo, &env, "res", "printf 'b only\\n' > f.txt\ngit loop finish resolved --message 'took b'");
    on_main(&repo, "f.txt", "base\n");
    let b = done_task(&repo, "Write b", "f.txt", "b\n");
    on_main(&repo, "f.txt", "main\n");
    let before = repo.git(&["rev-parse", "main"]);
    let out = repo.run(&["land", "--resolver", "res", "--checks", "grep -qx main f.txt", "--json"]).code(1);
    let failed = &out.json()["landing"]["failed"][0];
    assert_eq!(failed["task"], b.as_str());
    assert_eq!(failed["cause"], "checks");
    let reason = failed["reason"].as_str().expect("reason");
    let session =
        events_of(&journal(&repo, &b), "conflict_resolved")[0]["data"]["session"].as_str().expect("session").to_owned();
    assert!(reason.contains(&format!("as resolved by session {session}")), "{reason}");
    assert_eq!(repo.git(&["rev-parse", "main"]), before, "the target did not move");
    assert_eq!(repo.run(&["show", &b, "--json"]).ok().json()["state"], "needs-you");
}

#[test]
fn status_and_show_say_who_is_resolving_what() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let state = state_dir(&env);
    let go = state.join("go");
    // It waits (at most 60 s) for the test to have seen it at work.
    let script = format!(
        "i=0; while [ ! -f {go} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n{RESOLVING}",
        go = go.display()
    );
    named(&repo, &env, "res", &script);
    on_main(&repo, "f.txt", "base\n");
    let _a = done_task(&repo, "Write a", "f.txt", "a\n");
    let b = done_task(&repo, "Write b", "f.txt", "b\n");
    let child = spawn(&repo, &["land", "--resolver", "res", "--json"], None);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = repo.run(&["status", "--json"]).ok().json();
        if status["resolving"].as_array().is_some_and(|r| !r.is_empty()) {
            break status;
        }
        if Instant::now() > deadline {
            std::fs::write(&go, "").expect("release the resolver");
            let _ = finish(child);
            panic!("status never showed the resolver at work: {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let shown = repo.run(&["show", &b, "--json"]).ok().json();
    let text = repo.run(&["status"]).ok().stdout;
    std::fs::write(&go, "").expect("release the resolver");
    let out = finish(child);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let at_work = &status["resolving"][0];
    assert_eq!(at_work["task"], b.as_str(), "{status}");
    assert_eq!(at_work["agent"], "res");
    assert_eq!(at_work["kind"], "landing");
    assert_eq!(at_work["into"], "main");
    assert_eq!(at_work["paths"], serde_json::json!(["f.txt"]));
    assert!(at_work["session"].as_str().is_some_and(|s| s.starts_with("s-")), "{at_work}");
    assert_eq!(shown["resolving"]["session"], at_work["session"], "{shown}");
    assert_eq!(shown["resolving"]["paths"], serde_json::json!(["f.txt"]));
    assert!(text.contains("resolves its landing on main: f.txt"), "{text}");
    // Once it is over, nobody is.
    assert_eq!(repo.run(&["status", "--json"]).ok().json()["resolving"], serde_json::json!([]));
    assert!(repo.run(&["show", &b, "--json"]).ok().json()["resolving"].is_null());
}
