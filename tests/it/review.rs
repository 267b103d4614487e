//! Review rounds with scripted agents: a reviewer that asks for changes and then approves (the
//! worker's next session is told the comments), one that never approves (needs-you after the
//! rounds), a reviewer of the worker's provider (refused before any session; allowed with an
//! override, which is journaled), a reviewer whose report breaks its contract (sent back once,
//! then needs-you), a worker's result that breaks its contract twice in a row (needs-you), an
//! approval that does not carry over to a changed tree, a race's entrant reviewed like any
//! try, and a task's own reviewers set by `add` and `edit`.

use super::people::{journal, kinds_of, live, named, show, state_dir};
use crate::harness::{Repo, TestEnv};

/// A worker of one provider and a reviewer of another, as named agents.
fn agents(repo: &Repo<'_>, env: &TestEnv, worker: &str, reviewer: &str) {
    named(repo, env, "w", worker);
    repo.git(&["config", "loop.agent.w.provider", "openai"]);
    named(repo, env, "r", reviewer);
    repo.git(&["config", "loop.agent.r.provider", "anthropic"]);
}

/// A worker that keeps every prompt it is given and reports done.
fn worker(state: &std::path::Path) -> String {
    format!(
        "cat \"$GIT_LOOP_PROMPT\" >> {s}/worker-prompts\necho '--- end of prompt ---' >> {s}/worker-prompts\necho line >> work.txt\ngit loop finish done --message 'worked'",
        s = state.display()
    )
}

fn walk<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--agent", "w", "--reviewer", "r", "--max-units", "1", "--grace", "1"];
    args.extend_from_slice(extra);
    args
}

fn events_of<'a>(events: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// The completion note on `commit`, as JSON.
fn note(repo: &Repo<'_>, commit: &str) -> serde_json::Value {
    serde_json::from_str(&repo.git(&["notes", "--ref=loop", "show", commit])).expect("a JSON note")
}

#[test]
fn changes_then_approve_the_worker_is_told_the_comments_and_the_note_names_the_approved_tree() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["write the parser"]);
    let s = state_dir(&env);
    let reviewer = format!(
        "n=$(cat {s}/reviews 2>/dev/null || echo 0); n=$((n+1)); echo $n > {s}/reviews\n\
         pwd > {s}/reviewer-cwd-$n\n\
         echo 'not the work' > reviewer-wrote.txt\n\
         if [ $n = 1 ]; then git loop finish changes --message 'please add a test for the parser\nand name it well'; \
         else git loop finish approve --message 'looks good'; fi",
        s = s.display()
    );
    agents(&repo, &env, &worker(&s), &reviewer);
    let out = live(&repo, &walk(&[])).ok();
    assert!(
        out.stdout.contains("review round 1 of 3 · reviewer (r) asks for changes: please add a test"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("review round 2 of 3 · reviewer (r) approved"), "{}", out.stdout);
    let task = show(&repo, &id);
    assert_eq!(task["state"], "done", "{task}");
    let prompts = std::fs::read_to_string(s.join("worker-prompts")).expect("prompts");
    let sessions: Vec<&str> = prompts.split("--- end of prompt ---").collect();
    assert!(!sessions[0].contains("please add a test"), "the first session knows of no review");
    assert!(
        sessions[1].contains("please add a test for the parser") && sessions[1].contains("and name it well"),
        "the worker's second session carries the comments:\n{}",
        sessions[1]
    );
    let events = journal(&repo, &id);
    let verdicts: Vec<&str> =
        events_of(&events, "review_verdict").iter().map(|e| e["data"]["verdict"].as_str().unwrap_or("")).collect();
    assert_eq!(verdicts, ["changes", "approve"]);
    let worker_sessions =
        events_of(&events, "session_started").into_iter().filter(|e| e["data"]["role"].is_null()).count();
    assert_eq!(worker_sessions, 2, "the continuation counts as a session");
    // The reviewer ran in a checkout of its own, which is gone, and nothing it wrote is the work.
    let cwd = std::fs::read_to_string(s.join("reviewer-cwd-1")).expect("cwd");
    assert!(cwd.contains("/loop/sessions/") && cwd.trim_end().ends_with("/checkout"), "{cwd}");
    assert!(!std::path::Path::new(cwd.trim()).exists(), "the reviewer's checkout is removed");
    let branch = format!("loop/{id}");
    assert!(repo.command(&["show"]).output().is_ok());
    let listed = repo.git(&["ls-tree", "--name-only", &branch]);
    assert!(listed.contains("work.txt") && !listed.contains("reviewer-wrote.txt"), "{listed}");
    // The note records who approved which tree.
    let commit = repo.git(&["rev-parse", &branch]);
    let tree = repo.git(&["rev-parse", &format!("{branch}^{{tree}}")]);
    let reviews = &note(&repo, &commit)["completions"][0]["reviews"];
    assert_eq!(reviews.as_array().map(Vec::len), Some(1), "{reviews}");
    let approval = &reviews[0];
    assert_eq!(
        (approval["role"].as_str(), approval["agent"].as_str(), approval["round"].as_u64(), approval["tree"].as_str()),
        (Some("reviewer"), Some("r"), Some(2), Some(tree.as_str())),
        "{approval}"
    );
    let approving = events_of(&events, "review_verdict")[1]["data"]["session"].clone();
    assert_eq!(approval["session"], approving, "the approving session is named");
    assert_eq!(task["completion"]["reviews"][0]["tree"], tree.as_str(), "the task record says the same");
}

#[test]
fn three_rounds_of_changes_send_the_task_to_needs_you_with_the_last_comments() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["never good enough"]);
    let s = state_dir(&env);
    let reviewer = format!(
        "n=$(cat {s}/reviews 2>/dev/null || echo 0); n=$((n+1)); echo $n > {s}/reviews\ngit loop finish changes --message \"round $n: still not right\"",
        s = s.display()
    );
    agents(&repo, &env, &worker(&s), &reviewer);
    let out = live(&repo, &walk(&[])).code(1);
    let task = show(&repo, &id);
    assert_eq!(task["state"], "needs-you", "{}", out.stdout);
    let reason = task["reason"].as_str().unwrap_or("");
    assert!(reason.contains("3 rounds without approval") && reason.contains("round 3: still not right"), "{reason}");
    let events = journal(&repo, &id);
    assert_eq!(events_of(&events, "review_verdict").len(), 3);
    let worker_sessions =
        events_of(&events, "session_started").into_iter().filter(|e| e["data"]["role"].is_null()).count();
    assert_eq!(worker_sessions, 3, "one worker session a round");
    let review = &task["review"];
    assert_eq!(
        (review["round"].as_u64(), review["rounds"].as_u64(), review["verdict"].as_str()),
        (Some(3), Some(3), Some("changes"))
    );
    let shown = repo.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("review:  try 1 · round 3 of 3 · reviewer (r) asks for changes: round 3: still not right"),
        "{shown}"
    );
    let status = repo.run(&["status", "--json"]).ok().json();
    assert_eq!(status["reviews"][0]["task"], id.as_str(), "{status}");
    assert_eq!(status["reviews"][0]["verdict"], "changes");
}

#[test]
fn a_reviewer_of_the_workers_provider_is_refused_before_any_session_unless_overridden() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["one provider"]);
    let s = state_dir(&env);
    agents(&repo, &env, &worker(&s), "git loop finish approve --message ok");
    repo.git(&["config", "loop.agent.r.provider", "openai"]);
    let out = live(&repo, &walk(&[])).code(2);
    assert!(
        out.stderr.contains("error: the reviewer 'reviewer (r)' runs on openai, as the worker 'w' does: a reviewer must not share the worker's provider"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("hint: ") && out.stderr.contains("--reviewer-override"), "{}", out.stderr);
    assert!(kinds_of(&journal(&repo, &id)).iter().all(|k| k != "session_started" && k != "claimed"), "nothing ran");
    assert!(!s.join("worker-prompts").exists());
    // An unknown provider cannot be shown to differ.
    repo.git(&["config", "--unset", "loop.agent.r.provider"]);
    let out = live(&repo, &walk(&[])).code(2);
    assert!(out.stderr.contains("provider the loop cannot tell"), "{}", out.stderr);
    // Overridden with a reason: it runs, and the reason is journaled.
    repo.git(&["config", "loop.agent.r.provider", "openai"]);
    live(&repo, &walk(&["--reviewer-override", "one vendor only in this lab"])).ok();
    assert_eq!(show(&repo, &id)["state"], "done");
    let all = repo.run(&["log", "--json"]).ok().json();
    let overrides: Vec<&serde_json::Value> =
        all["events"].as_array().expect("events").iter().filter(|e| e["kind"] == "review_override").collect();
    // Once for the walk when it starts, once for the task it was applied to.
    assert_eq!(overrides.len(), 2, "{overrides:?}");
    assert!(overrides[0]["task"].is_null() && overrides[1]["task"] == id.as_str(), "{overrides:?}");
    for o in &overrides {
        assert_eq!(
            (o["data"]["reason"].as_str(), o["data"]["worker"].as_str()),
            (Some("one vendor only in this lab"), Some("w"))
        );
    }
    // A task's own reviewer of the worker's provider is refused before its first session too.
    let own = repo.add(&["its own reviewer", "--reviewer", "r"]);
    repo.git(&["config", "loop.agent.w2.command", &env.agent("w2", "git loop finish done")]);
    repo.git(&["config", "loop.agent.w2.provider", "openai"]);
    live(&repo, &["run", "--agent", "w2", "--max-units", "1"]).code(1);
    let task = show(&repo, &own);
    assert_eq!(task["state"], "needs-you");
    assert!(task["reason"].as_str().unwrap_or("").contains("runs on openai, as the worker 'w2' does"), "{task}");
    assert!(kinds_of(&journal(&repo, &own)).iter().all(|k| k != "session_started"), "no session ran");
}

#[test]
fn a_reviewer_that_breaks_its_contract_is_sent_back_once_then_the_task_needs_you() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["review me"]);
    let s = state_dir(&env);
    let reviewer = format!(
        "cat \"$GIT_LOOP_PROMPT\" >> {s}/reviewer-prompts\necho '--- end ---' >> {s}/reviewer-prompts\n\
         printf '{{\"contract\": \"reviewer/1\", \"verdict\": \"approve\", \"score\": 10}}' > \"$GIT_LOOP_RESULT\"",
        s = s.display()
    );
    agents(&repo, &env, &worker(&s), &reviewer);
    live(&repo, &walk(&[])).code(1);
    let task = show(&repo, &id);
    assert_eq!(task["state"], "needs-you");
    let reason = task["reason"].as_str().unwrap_or("");
    assert!(reason.contains("broke its contract twice") && reason.contains("unknown field `score`"), "{reason}");
    let events = journal(&repo, &id);
    let violations = events_of(&events, "contract_violation");
    assert_eq!(violations.len(), 2);
    assert_eq!(
        (violations[0]["data"]["sent_back"].as_bool(), violations[1]["data"]["sent_back"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(violations[0]["data"]["contract"], "reviewer/1");
    let prompts = std::fs::read_to_string(s.join("reviewer-prompts")).expect("prompts");
    let sessions: Vec<&str> = prompts.split("--- end ---").collect();
    assert!(!sessions[0].contains("could not be read"));
    assert!(
        sessions[1].contains("Your last report could not be read") && sessions[1].contains("unknown field `score`"),
        "the second session is told the parse error:\n{}",
        sessions[1]
    );
    assert_eq!(
        events_of(&events, "session_started").into_iter().filter(|e| e["data"]["role"].is_null()).count(),
        1,
        "the worker is not sent back for the reviewer's fault"
    );
    // A worker's `finish` word that is not its contract's is refused in the session itself.
    let out =
        repo.run_with(&["finish", "approve"], &[("GIT_LOOP_SESSION", "s-abcdefgh"), ("GIT_LOOP_TASK", &id)]).code(2);
    assert!(
        out.stderr.contains("this session is a worker (worker/1): 'git loop finish approve' is not a worker verdict"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_approval_holds_for_the_tree_it_read_only() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["sneaky"]);
    let s = state_dir(&env);
    // The reviewer approves, then reaches around its checkout and moves the try branch to work
    // it made itself.
    let reviewer = "echo sneaky > sneaky.txt\ngit add sneaky.txt\ngit commit -qm sneaky\n\
         git update-ref \"refs/heads/loop-try/$GIT_LOOP_TASK/$GIT_LOOP_TRY\" HEAD\n\
         git loop finish approve --message 'fine'";
    agents(&repo, &env, &worker(&s), reviewer);
    // Unconfined, so that its update-ref reaches the real try branch: what the approved-tree
    // rule is there for (confined, it cannot: `confine::`).
    live(&repo, &walk(&["--sandbox", "off"])).code(1);
    let task = show(&repo, &id);
    assert_eq!(task["state"], "needs-you", "{task}");
    let reason = task["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("its work is not approved: reviewer approved tree")
            && reason.contains("the work's tree is now"),
        "{reason}"
    );
    let branch = repo.git(&["ls-tree", "--name-only", &format!("loop/{id}")]);
    assert!(!branch.contains("sneaky.txt"), "the task branch did not take the unreviewed work: {branch}");
}

#[test]
fn a_race_entrant_is_reviewed_like_any_try() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["race and review"]);
    let s = state_dir(&env);
    for name in ["w1", "w2"] {
        named(&repo, &env, name, &format!("echo {name} > {name}.txt\ngit loop finish done --message '{name} done'"));
        repo.git(&["config", &format!("loop.agent.{name}.provider"), "openai"]);
    }
    named(
        &repo,
        &env,
        "r",
        &format!("echo \"$GIT_LOOP_TRY\" >> {}/reviewed-tries\ngit loop finish approve --message 'good'", s.display()),
    );
    repo.git(&["config", "loop.agent.r.provider", "google"]);
    live(&repo, &["race", &id, "--together", "w1,w2", "--reviewer", "r", "--grace", "1"]).ok();
    let task = show(&repo, &id);
    assert_eq!(task["state"], "done", "{task}");
    let won = task["completion"]["try"].as_u64().expect("the winning try");
    let events = journal(&repo, &id);
    let approved: Vec<u64> = events_of(&events, "review_verdict")
        .iter()
        .filter(|e| e["data"]["verdict"] == "approve")
        .filter_map(|e| e["data"]["try"].as_u64())
        .collect();
    assert!(approved.contains(&won), "the winner was reviewed: {approved:?}, won {won}");
    let commit = repo.git(&["rev-parse", &format!("loop/{id}")]);
    let reviews = &note(&repo, &commit)["completions"][0]["reviews"];
    assert_eq!(reviews[0]["tree"], repo.git(&["rev-parse", &format!("loop-try/{id}/{won}^{{tree}}")]).as_str());
}

#[test]
fn a_worker_whose_result_breaks_its_contract_twice_in_a_row_goes_to_needs_you() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["torn twice"]);
    let s = state_dir(&env);
    named(
        &repo,
        &env,
        "w",
        &format!(
            "cat \"$GIT_LOOP_PROMPT\" >> {}/prompts\necho '--- end ---' >> {}/prompts\nprintf '{{\"verdict\": \"done\", \"sumary\": \"typo\"}}' > \"$GIT_LOOP_RESULT\"",
            s.display(),
            s.display()
        ),
    );
    live(&repo, &["run", "--agent", "w", "--max-units", "1"]).code(1);
    let task = show(&repo, &id);
    assert_eq!(task["state"], "needs-you");
    let reason = task["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("broke its contract twice in a row") && reason.contains("unknown field `sumary`"),
        "{reason}"
    );
    let prompts = std::fs::read_to_string(s.join("prompts")).expect("prompts");
    let sessions: Vec<&str> = prompts.split("--- end ---").collect();
    assert!(sessions[1].contains("unknown field `sumary`"), "sent back with the parse error:\n{}", sessions[1]);
    let events = journal(&repo, &id);
    let sent: Vec<Option<bool>> =
        events_of(&events, "contract_violation").iter().map(|e| e["data"]["sent_back"].as_bool()).collect();
    assert_eq!(sent, [Some(true), Some(false)]);
}

#[test]
fn a_tasks_own_reviewers_are_set_by_add_and_edit_and_shown() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["reviewed", "--reviewer", "security"]);
    repo.run(&["edit", &id, "--reviewer", "codex", "--remove-reviewer", "security"]).ok();
    assert_eq!(show(&repo, &id)["reviewers"], serde_json::json!(["codex"]));
    assert!(repo.run(&["show", &id]).ok().stdout.contains("  reviewers: codex"));
    // A role of another contract cannot review.
    repo.git(&["config", "loop.role.merger.contract", "conflict-resolver"]);
    repo.git(&["config", "loop.agent.w.command", "true"]);
    let out = repo.run(&["run", "--agent", "w", "--reviewer", "merger"]).code(2);
    assert!(
        out.stderr.contains("error: role 'merger' keeps the conflict-resolver contract, not the reviewer's"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_reviewer_left_running_by_a_killed_walk_is_recovered_and_its_checkout_removed() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["write the parser"]);
    let s = state_dir(&env);
    // The first reviewer session says where it runs, then outlives its walk (killed -9).
    let reviewer = format!(
        "if [ ! -e {s}/reviewing ]; then pwd > {s}/reviewing; sleep 60; fi\ngit loop finish approve --message 'fine'",
        s = s.display()
    );
    agents(&repo, &env, &worker(&s), &reviewer);
    let mut walk1 = repo.command(&walk(&[])).spawn().expect("start a walk");
    let started = std::time::Instant::now();
    while !s.join("reviewing").exists() && started.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let checkout = std::fs::read_to_string(s.join("reviewing")).expect("the reviewer started");
    walk1.kill().expect("kill -9 the walk");
    walk1.wait().expect("reap it");
    // The next walk recovers the reviewer's session: its checkout goes, nothing of it is
    // committed, and the task is reviewed again and done.
    let again = repo.run(&walk(&[])).ok();
    assert!(
        again.stdout.contains("reviewer session") && again.stdout.contains("its checkout is removed"),
        "{}",
        again.stdout
    );
    assert!(!std::path::Path::new(checkout.trim()).exists(), "the crashed reviewer's checkout is gone");
    assert_eq!(show(&repo, &id)["state"], "done");
    let branch = repo.git(&["log", "--format=%s", &format!("loop/{id}")]);
    assert!(!branch.contains("recovered"), "nothing of the reviewer's was committed: {branch}");
}
