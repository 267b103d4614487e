//! What the agents cost: each session's usage in its `session_ended` event, each task's total
//! in its completion note, `git loop cost` over every clone's sessions after `sync`, `show`
//! and `status`; a session that reports nothing is unknown, never zero. The real Claude Code
//! and Codex against the loopback model server, whose every response counts 10 input and 5
//! output tokens: the ledger holds exactly what the server counted.

use serde_json::Value;

use crate::agents_e2e::{self, CLAUDE, CODEX};
use crate::harness::{Repo, Run, TestEnv};
use crate::model_server::{ModelServer, Request, Turn};

fn run(repo: &Repo<'_>, agent_cmd: &str, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--agent-cmd", agent_cmd, "--grace", "1", "--session-timeout", "60s"];
    args.extend_from_slice(extra);
    repo.run(&args)
}

fn cost(repo: &Repo<'_>, extra: &[&str]) -> Value {
    let mut args = vec!["cost", "--json"];
    args.extend_from_slice(extra);
    repo.run(&args).ok().json()
}

/// The `session_ended` events' usage, in order.
fn usages(repo: &Repo<'_>) -> Vec<Value> {
    repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "session_ended")
        .map(|e| e["data"]["usage"].clone())
        .collect()
}

fn note_of(repo: &Repo<'_>, id: &str) -> Value {
    let note: Value =
        serde_json::from_str(&repo.git(&["notes", "--ref=loop", "show", &format!("loop/{id}")])).expect("a note");
    note["completions"][0].clone()
}

#[test]
fn usage_reported_by_finish_is_journaled_noted_and_counted() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Write hello"]);
    let agent = env.agent(
        "reports",
        r#"echo hi > hello.txt
git loop finish done --message 'wrote it' --usage '{"input": 1200, "output": 340, "cached": 60, "model": "m-1", "turns": 4, "usd": 0.25}'"#,
    );
    let out = run(&repo, &agent, &[]).ok();
    assert!(out.stdout.contains("($0.2500, 1600 tokens)"), "the session's end says what it spent:\n{}", out.stdout);
    let usage = &usages(&repo)[0];
    assert_eq!(
        (&usage["input"], &usage["output"], &usage["cached"], &usage["model"], &usage["turns"], &usage["usd"]),
        (
            &Value::from(1200),
            &Value::from(340),
            &Value::from(60),
            &Value::from("m-1"),
            &Value::from(4),
            &Value::from(0.25)
        )
    );
    assert!(usage.get("usd_estimated").is_none(), "reported dollars are not an estimate");
    let note = note_of(&repo, &id);
    assert_eq!((note["cost"]["sessions"].as_u64(), note["cost"]["usd"].as_f64()), (Some(1), Some(0.25)), "{note}");
    assert_eq!(note["cost"]["input"], 1200);
    let report = cost(&repo, &[]);
    assert_eq!((report["total"]["tokens"].as_u64(), report["total"]["unknown"].as_u64()), (Some(1600), Some(0)));
    assert_eq!(report["rows"][0]["task"], id.as_str());
    let by_model = cost(&repo, &["--by", "model"]);
    assert_eq!(by_model["rows"][0]["model"], "m-1");
    let shown = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(shown["cost"]["usd"].as_f64(), Some(0.25));
    assert!(repo.run(&["show", &id]).ok().stdout.contains("spent:   $0.2500, 1600 tokens over 1 session"));
    assert_eq!(repo.run(&["status", "--json"]).ok().json()["spent"]["usd"].as_f64(), Some(0.25));
    assert_eq!(cost(&repo, &["--since", "1d"])["total"]["sessions"], 1);
    assert_eq!(cost(&repo, &["--since", "2099-01-01"])["total"]["sessions"], 0, "nothing ended after then");
    let bad = repo.run(&["cost", "--since", "last tuesday"]).code(2);
    assert!(bad.stderr.contains("hint:"), "{}", bad.stderr);
}

#[test]
fn usage_in_the_result_file_is_priced_from_the_table_and_marked_estimated() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.git(&["config", "loop.price.m-2.input", "3"]);
    repo.git(&["config", "loop.price.m-2.output", "15"]);
    let id = repo.add(&["Write hello"]);
    let agent = env.agent(
        "result-file",
        r#"echo hi > hello.txt
printf '{"verdict": "done", "summary": "ok", "usage": {"input": 1000000, "output": 100000, "model": "m-2"}}' > "$GIT_LOOP_RESULT""#,
    );
    run(&repo, &agent, &[]).ok();
    let usage = &usages(&repo)[0];
    assert_eq!((usage["usd"].is_null(), usage["usd_estimated"].as_f64()), (true, Some(4.5)), "{usage}");
    let report = cost(&repo, &[]);
    assert_eq!((report["total"]["usd"].as_f64(), report["total"]["usd_estimated"].as_f64()), (Some(0.0), Some(4.5)));
    let text = repo.run(&["cost"]).ok().stdout;
    assert!(text.contains("~$4.50") && text.contains("$4.50 (estimated)"), "estimates say so:\n{text}");
    assert_eq!(note_of(&repo, &id)["cost"]["usd_estimated"].as_f64(), Some(4.5));
}

#[test]
fn a_session_that_reports_nothing_is_unknown_not_zero() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["Write hello"]);
    let agent = env.agent("silent", "echo hi > hello.txt\ngit loop finish done --message 'done'");
    let out = run(&repo, &agent, &[]).ok();
    assert!(out.stdout.contains("(spend unknown)"), "{}", out.stdout);
    assert!(usages(&repo)[0].is_null(), "no usage is recorded, not a zero one");
    let report = cost(&repo, &[]);
    assert_eq!(
        (
            report["total"]["sessions"].as_u64(),
            report["total"]["unknown"].as_u64(),
            report["rows"][0]["unknown"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );
    assert!(repo.run(&["cost"]).ok().stdout.contains("1 session unknown"));
}

#[test]
fn a_usage_that_does_not_read_is_refused_by_finish() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["Write hello"]);
    let agent = env.agent(
        "bad-usage",
        &format!(
            r#"git loop finish done --usage '{{"tokens": 5}}' 2> {out} || echo "exit $?" >> {out}
git loop finish done --message 'reported without it'"#,
            out = env.path("refused.txt").display()
        ),
    );
    run(&repo, &agent, &[]).ok();
    let refused = std::fs::read_to_string(env.path("refused.txt")).expect("the agent wrote what finish said");
    assert!(refused.contains("--usage") && refused.contains("hint:") && refused.contains("exit 2"), "{refused}");
    assert!(usages(&repo)[0].is_null());
}

#[test]
fn cost_sums_the_sessions_of_two_clones_after_sync() {
    let env = TestEnv::new();
    let (_remote, a, b) = env.two_clones();
    let agent = |name: &str, usd: &str| {
        env.agent(
            name,
            &format!(
                "echo {name} > {name}.txt\ngit loop finish done --message ok --usage '{{\"input\": 10, \"output\": 5, \"usd\": {usd}}}'"
            ),
        )
    };
    a.add(&["Task of a"]);
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    run(&a, &agent("in-a", "0.5"), &[]).ok();
    b.add(&["Task of b"]);
    run(&b, &agent("in-b", "0.25"), &[]).ok();
    for clone in [&a, &b, &a] {
        clone.run(&["sync"]).ok();
    }
    for clone in [&a, &b] {
        let report = cost(clone, &[]);
        assert_eq!(
            (report["total"]["sessions"].as_u64(), report["total"]["tokens"].as_u64(), report["total"]["usd"].as_f64()),
            (Some(2), Some(30), Some(0.75)),
            "every clone's sessions count once: {report}"
        );
        assert_eq!(cost(clone, &["--by", "walk"])["rows"].as_array().map(Vec::len), Some(2), "two walks");
    }
}

/// The model's script: a first session writes a draft and stops without a verdict; its
/// continuation reports done. Two responses a session.
fn draft_then_done(req: &Request) -> Turn {
    if req.user_text.contains("## What happened before") {
        match req.tool_results {
            0 => Turn::Shell("git loop finish done --message 'notes were already there'".into()),
            _ => Turn::Say("Reported.".into()),
        }
    } else {
        match req.tool_results {
            0 => Turn::WriteFile { path: "notes.txt".into(), content: "first draft\n".into() },
            _ => Turn::Say("I wrote a first draft and stopped here.".into()),
        }
    }
}

/// The real CLI, a first session without a verdict and its continuation: the ledger holds the
/// server's counts (10 input and 5 output tokens per response), to the token.
fn the_ledger_holds_the_servers_counts(cli: agents_e2e::Cli, model: Option<&str>) {
    let Some(program) = agents_e2e::installed(cli) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let server = ModelServer::start(cli.api, draft_then_done);
    let id = repo.add(&["Write notes"]);
    let mut extra = vec!["--per-unit-dispatches", "3", "--session-timeout", "180s"];
    if let Some(model) = model {
        extra.extend(["--model", model]);
    }
    let (out, _) = agents_e2e::run(&repo, cli, &program, &server, &extra);
    out.ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done", "{}", agents_e2e::diagnose(&repo));
    let usages = usages(&repo);
    assert_eq!(usages.len(), 2, "two sessions");
    for usage in &usages {
        // Two responses each: a tool call and a closing word.
        assert_eq!(
            (usage["input"].as_u64(), usage["output"].as_u64(), usage["cached"].as_u64()),
            (Some(20), Some(10), Some(0)),
            "{usage}"
        );
    }
    let note = note_of(&repo, &id);
    assert_eq!(
        (note["cost"]["input"].as_u64(), note["cost"]["output"].as_u64(), note["cost"]["unknown"].as_u64()),
        (Some(40), Some(20), Some(0)),
        "{note}"
    );
    let report = cost(&repo, &[]);
    assert_eq!((report["total"]["tokens"].as_u64(), report["total"]["sessions"].as_u64()), (Some(60), Some(2)));
    if cli.name == "claude" {
        assert_eq!(usages[0]["turns"], 2);
        assert!(usages[0]["usd"].as_f64().is_some_and(|d| d > 0.0), "Claude Code reports its dollars");
        assert!(usages[0]["model"].is_string());
    } else {
        assert_eq!(usages[0]["model"], "loopback-model", "Codex names no model: the one it was given");
        assert!(usages[0]["usd"].is_null());
    }
}

#[test]
#[cfg_attr(not(has_claude), ignore = "claude is not on PATH: npm install @anthropic-ai/claude-code")]
fn claude_codes_usage_is_the_model_servers_count_to_the_token() {
    the_ledger_holds_the_servers_counts(CLAUDE, None);
}

#[test]
#[cfg_attr(not(has_codex), ignore = "codex is not on PATH: npm install @openai/codex")]
fn codex_usage_is_the_model_servers_count_to_the_token() {
    the_ledger_holds_the_servers_counts(CODEX, Some("loopback-model"));
}

/// The real Claude Code and Codex racing on one task (judge mode: both run to their end), each
/// entrant a first session without a verdict and its continuation: every one of the four
/// sessions is in the ledger with the server's counts, each agent's total is what its server
/// answered (10 input and 5 output tokens a response), and the task's note adds up all four.
#[test]
fn claude_and_codex_racing_with_continuations_are_counted_to_the_token() {
    let (Some(claude), Some(codex)) = (agents_e2e::installed(CLAUDE), agents_e2e::installed(CODEX)) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let anthropic = ModelServer::start(CLAUDE.api, draft_then_done);
    let responses = ModelServer::start(CODEX.api, draft_then_done);
    let id = repo.add(&["Write notes"]);
    let mut cmd = repo.command(&[
        "race",
        &id,
        "--together",
        "claude,codex",
        "--pick",
        "judge",
        "--judge-cmd",
        "cat > /dev/null; echo 1",
        "--grace",
        "2s",
        "--session-timeout",
        "180s",
        "--per-unit-dispatches",
        "6",
    ]);
    cmd.envs(agents_e2e::cli_env(&env, CLAUDE, &claude, &anthropic));
    cmd.envs(agents_e2e::cli_env(&env, CODEX, &codex, &responses));
    let out = crate::harness::Run::from(cmd.output().expect("run git-loop")).ok();
    assert!(out.stdout.contains("sessions and checks run confined ("), "both raced in the sandbox: {}", out.stdout);
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done", "{}", agents_e2e::diagnose(&repo));
    let usages = usages(&repo);
    assert_eq!(usages.len(), 4, "two sessions of each entrant");
    for usage in &usages {
        assert_eq!(
            (usage["input"].as_u64(), usage["output"].as_u64(), usage["cached"].as_u64()),
            (Some(20), Some(10), Some(0)),
            "{usage}"
        );
    }
    let by_agent = cost(&repo, &["--by", "agent"]);
    for (agent, server) in [("claude", &anthropic), ("codex", &responses)] {
        let row = by_agent["rows"].as_array().expect("rows").iter().find(|r| r["agent"] == agent).expect("a row");
        let answered = server.requests().len() as u64;
        assert_eq!(
            (row["sessions"].as_u64(), row["input"].as_u64(), row["output"].as_u64()),
            (Some(2), Some(10 * answered), Some(5 * answered)),
            "{agent}: what its server answered ({answered} responses)"
        );
    }
    let note = note_of(&repo, &id);
    assert_eq!(
        (note["cost"]["sessions"].as_u64(), note["cost"]["input"].as_u64(), note["cost"]["output"].as_u64()),
        (Some(4), Some(80), Some(40)),
        "every entrant and continuation in the task's total: {note}"
    );
}

/// An agent that reports `usd` and 15 tokens, and notes what the walk handed it.
fn spender(env: &TestEnv, usd: &str) -> String {
    env.agent(
        "spender",
        &format!(
            r#"echo "$GIT_LOOP_TASK budget=${{GIT_LOOP_BUDGET_USD:-none}} turns=${{GIT_LOOP_MAX_TURNS:-none}}" >> "$GIT_LOOP_REPO/../seen.txt"
echo work > "work-$GIT_LOOP_TASK.txt"
git loop finish done --message ok --usage '{{"input": 10, "output": 5, "usd": {usd}}}'"#
        ),
    )
}

#[test]
fn a_walk_with_budget_usd_stops_before_the_next_session_once_it_is_spent() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let ids: Vec<String> = ["one", "two", "three"].iter().map(|t| repo.add(&[t])).collect();
    let out = run(&repo, &spender(&env, "0.4"), &["--budget-usd", "0.8", "--max-turns", "7"]).code(1);
    assert!(
        out.stdout
            .contains("2 done, 0 not done, 1 left open · 2 sessions · $0.8000 spent, 30 tokens · a budget ran out"),
        "the final line says how much was spent:\n{}",
        out.stdout
    );
    let seen = std::fs::read_to_string(env.path("seen.txt")).expect("the agents noted their budget");
    let seen: Vec<(&str, &str)> = seen.lines().map(|l| l.split_once(' ').expect("task and budget")).collect();
    assert_eq!(
        seen.iter().map(|(_, b)| *b).collect::<Vec<_>>(),
        ["budget=0.800000 turns=7", "budget=0.400000 turns=7"],
        "each session is told what is left; no third session started"
    );
    let unworked = ids.iter().find(|id| !seen.iter().any(|(t, _)| t == id)).expect("a task no session worked");
    let task = repo.run(&["show", unworked, "--json"]).ok().json();
    assert_eq!((task["state"].as_str(), task["claim"].is_null()), (Some("open"), true), "the third is given back");
    let events = repo.run(&["log", "--json"]).ok().json();
    let ended = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .rfind(|e| e["kind"] == "walk_ended")
        .expect("walk_ended")
        .clone();
    assert_eq!(
        (ended["data"]["stop"].as_str(), ended["data"]["spent_usd"].as_f64(), ended["data"]["spent_tokens"].as_u64()),
        (Some("budget"), Some(0.8), Some(30)),
        "journaled with the figures"
    );
    let started = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "walk_started")
        .expect("walk_started")
        .clone();
    assert_eq!(started["data"]["budget_usd"].as_f64(), Some(0.8));
}

#[test]
fn a_token_budget_and_loop_budget_usd_stop_the_walk_too_and_bad_budgets_are_refused() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    for t in ["one", "two", "three"] {
        repo.add(&[t]);
    }
    let out = run(&repo, &spender(&env, "0.01"), &["--budget-tokens", "15"]).code(1);
    assert!(out.stdout.contains("1 session · $0.0100 spent, 15 tokens · a budget ran out"), "{}", out.stdout);
    repo.git(&["config", "loop.budgetUsd", "0.01"]);
    let out = run(&repo, &spender(&env, "0.01"), &[]).code(1);
    assert!(out.stdout.contains("1 session · $0.0100 spent"), "loop.budgetUsd is the default: {}", out.stdout);
    for bad in [&["--budget-usd=-3"][..], &["--budget-usd", "lots"], &["--budget-tokens", "0"]] {
        let out = run(&repo, "true", bad).code(2);
        assert!(out.stderr.contains("hint:"), "{bad:?}: {}", out.stderr);
    }
    repo.git(&["config", "loop.budgetUsd", "free"]);
    assert!(run(&repo, "true", &[]).code(2).stderr.contains("loop.budgetUsd"));
}

#[test]
fn a_task_that_has_eaten_its_share_is_parked_with_the_reason() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Never passes"]);
    // Every session says done and spends $0.50; the checks never pass, so it is continued.
    let out = run(&repo, &spender(&env, "0.5"), &["--checks", "false", "--task-budget-usd", "0.8"]);
    let task = repo.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(task["state"], "parked", "{}", out.stdout);
    assert_eq!(
        task["reason"].as_str(),
        Some("its share of the budget is spent: $1.00 of $0.8000 (--task-budget-usd)"),
        "parked before a third session, with the reason"
    );
    assert_eq!((task["cost"]["sessions"].as_u64(), task["cost"]["usd"].as_f64()), (Some(2), Some(1.0)));
    let bad = run(&repo, "true", &["--task-budget-usd", "none"]).code(2);
    assert!(bad.stderr.contains("--task-budget-usd"), "{}", bad.stderr);
}

#[test]
fn a_races_every_entrant_counts_in_the_ledger_and_the_note() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["race me"]);
    crate::people::named(
        &repo,
        &env,
        "quick",
        r#"git loop finish failed --message 'gave up' --usage '{"input": 100, "output": 10, "usd": 0.1}'"#,
    );
    crate::people::named(
        &repo,
        &env,
        "steady",
        r#"sleep 0.5; echo steady > steady.txt
git loop finish done --message 'done' --usage '{"input": 200, "output": 20, "usd": 0.2}'"#,
    );
    repo.run(&["race", &id, "--together", "quick,steady", "--grace", "1", "--session-timeout", "60s"]).ok();
    let note = note_of(&repo, &id);
    assert_eq!((note["cost"]["sessions"].as_u64(), note["cost"]["input"].as_u64()), (Some(2), Some(300)), "{note}");
    assert!((note["cost"]["usd"].as_f64().unwrap_or(0.0) - 0.3).abs() < 1e-9, "{note}");
    let by_agent = cost(&repo, &["--by", "agent"]);
    let agents: Vec<(&str, u64)> = by_agent["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| (r["agent"].as_str().unwrap_or(""), r["tokens"].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(agents, [("quick", 110), ("steady", 220)]);
}

/// The `session_started` events, as (agent, role).
fn sessions_started(repo: &Repo<'_>) -> Vec<(String, String)> {
    repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .map(|e| {
            (e["data"]["agent"].as_str().unwrap_or("").to_owned(), e["data"]["role"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

fn walk_ended(repo: &Repo<'_>) -> Value {
    repo.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .rfind(|e| e["kind"] == "walk_ended")
        .expect("walk_ended")["data"]
        .clone()
}

#[test]
fn a_reviewers_session_counts_against_the_walks_budget_and_does_not_start_past_it() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    crate::people::named(
        &repo,
        &env,
        "w",
        r#"echo work > "work-$GIT_LOOP_TASK.txt"
git loop finish done --message worked --usage '{"input": 100, "output": 10, "usd": 0.5}'"#,
    );
    repo.git(&["config", "loop.agent.w.provider", "openai"]);
    crate::people::named(
        &repo,
        &env,
        "r",
        r#"git loop finish approve --message 'looks good' --usage '{"input": 20, "output": 2, "usd": 0.1}'"#,
    );
    repo.git(&["config", "loop.agent.r.provider", "anthropic"]);
    let walk = |budget: &str| {
        crate::people::live(&repo, &["run", "--agent", "w", "--reviewer", "r", "--grace", "1", "--budget-usd", budget])
    };

    // The worker spends past the budget: its reviewer does not start, the walk stops (exit 1)
    // and the task is given back, its try kept for the next walk.
    let first = repo.add(&["reviewed, over budget"]);
    let out = walk("0.4").code(1);
    assert_eq!(sessions_started(&repo), [("w".to_owned(), String::new())], "no reviewer session:\n{}", out.stdout);
    assert!(out.stdout.contains("$0.5000 spent"), "{}", out.stdout);
    let task = repo.run(&["show", &first, "--json"]).ok().json();
    assert_eq!((task["state"].as_str(), task["claim"].is_null()), (Some("open"), true), "{task}");
    assert_eq!(
        (walk_ended(&repo)["stop"].as_str(), walk_ended(&repo)["spent_usd"].as_f64()),
        (Some("budget"), Some(0.5))
    );

    // Within the budget the reviewer runs, and what it spent counts: the walk's total and the
    // task's (in its note) include it, and no further worker starts past the budget.
    let second = repo.add(&["the next task"]);
    let out = walk("0.55").code(1);
    let roles: Vec<String> = sessions_started(&repo).into_iter().skip(1).map(|(a, r)| format!("{a}/{r}")).collect();
    assert_eq!(roles, ["w/", "r/reviewer"], "one worker and its reviewer, then nothing:\n{}", out.stdout);
    assert!((walk_ended(&repo)["spent_usd"].as_f64().unwrap_or(0.0) - 0.6).abs() < 1e-9, "the reviewer's spend counts");
    let done =
        [&first, &second].into_iter().find(|id| repo.run(&["show", id, "--json"]).ok().json()["state"] == "done");
    let done = done.expect("the task the worker and the reviewer finished");
    let note = note_of(&repo, done);
    assert_eq!(note["cost"]["sessions"].as_u64(), Some(if *done == first { 3 } else { 2 }), "{note}");
    let by_agent = cost(&repo, &["--by", "agent"]);
    let r = by_agent["rows"].as_array().expect("rows").iter().find(|r| r["agent"] == "r").expect("the reviewer's row");
    assert_eq!(r["tokens"], 22);
}

#[test]
fn a_fallback_is_told_what_was_spent_before_it() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["limited"]);
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    // A Claude Code that reports its usage in its result line and hits its limit.
    let fake = bin.join("claude");
    std::fs::write(
        &fake,
        r#"#!/bin/sh
cat > /dev/null
echo started > claude.txt
echo '{"type":"result","total_cost_usd":0.3,"num_turns":1,"usage":{"input_tokens":100,"output_tokens":20}}'
echo "You've hit your session limit · resets 3pm"
exit 1
"#,
    )
    .expect("write");
    std::process::Command::new("chmod").args(["+x", fake.to_str().expect("utf-8")]).status().expect("chmod");
    let told = env.path("told");
    crate::people::named(
        &repo,
        &env,
        "fb",
        &format!(
            "cp \"$GIT_LOOP_PROMPT\" {t}.md\necho \"$GIT_LOOP_SPENT_USD $GIT_LOOP_SPENT_TOKENS $GIT_LOOP_SPENT_SESSIONS $GIT_LOOP_SPENT_UNKNOWN\" > {t}.env\ngit loop finish done",
            t = told.display()
        ),
    );
    repo.git(&["config", "loop.fallback", "fb"]);
    let walk = crate::people::spawn(&repo, &["run", "--agent", "claude", "--grace", "1"], Some(&bin));
    let out = crate::people::finish(walk).ok();
    assert!(out.stdout.contains(&format!("claude is unreachable (usage limit) · fb takes {id}")), "{}", out.stdout);
    let env_seen = std::fs::read_to_string(env.path("told.env")).expect("the fallback ran");
    assert_eq!(env_seen.trim(), "0.300000 120 1 0", "what the task's sessions spent before it");
    let prompt = std::fs::read_to_string(env.path("told.md")).expect("its prompt");
    assert!(
        prompt.contains("What this task's 1 session before you spent: $0.3000, 120 tokens"),
        "the handoff note says it:\n{prompt}"
    );
    let note = note_of(&repo, &id);
    assert_eq!((note["cost"]["sessions"].as_u64(), note["cost"]["unknown"].as_u64()), (Some(2), Some(1)), "{note}");
}

#[test]
fn a_mission_budget_counts_every_projects_sessions_and_stops_the_mission() {
    let env = TestEnv::new();
    let api = env.repo("api");
    api.add(&["api one", "--label", "m1"]);
    let web = env.repo("web");
    for t in ["web one", "web two"] {
        web.add(&[t, "--label", "m1"]);
    }
    let c = env.repo("commander");
    c.run(&["mission", "add", "m1", "--title", "Ship m1"]).ok();
    for (name, repo) in [("api", &api), ("web", &web)] {
        let dir = repo.dir.to_str().expect("utf-8 path");
        c.run(&["mission", "project", "m1", name, "--path", dir, "--wave", "1", "--label", "m1"]).ok();
    }
    // $0.40 a session: api's one ($0.40), then web's walk is given the $0.30 left, runs one
    // session ($0.80 in all) and stops before its second.
    let agent = spender(&env, "0.4");
    let out = c.run(&["mission", "run", "m1", "--agent-cmd", &agent, "--budget-usd", "0.7", "--grace", "1"]).code(1);
    let why = "$0.8000 spent of the mission's $0.7000 (--budget-usd), 30 tokens";
    assert!(out.stdout.ends_with(&format!("mission stopped: a budget ran out ({why})\n")), "{}", out.stdout);
    let seen = std::fs::read_to_string(env.path("seen.txt")).expect("the agents noted their budget");
    let budgets: Vec<&str> = seen.lines().filter_map(|l| l.split(' ').nth(1)).collect();
    assert_eq!(budgets, ["budget=0.700000", "budget=0.300000"], "each child walk is given what is left");
    let ended = c.run(&["log", "--json"]).ok().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .rfind(|e| e["kind"] == "mission_ended")
        .expect("mission_ended")["data"]
        .clone();
    assert_eq!(
        (ended["stop"].as_str(), ended["spent_usd"].as_f64(), ended["spent_tokens"].as_u64()),
        (Some("budget"), Some(0.8), Some(30)),
        "journaled with the figures: {ended}"
    );
    // Each project's ledger names the mission whose walk ran its sessions.
    for repo in [&api, &web] {
        let by_mission = cost(repo, &["--by", "mission"]);
        assert_eq!(by_mission["rows"].as_array().map(Vec::len), Some(1), "{by_mission}");
        assert_eq!(
            (by_mission["rows"][0]["mission"].as_str(), by_mission["rows"][0]["sessions"].as_u64()),
            (Some("m1"), Some(1))
        );
    }
    // A walk of no mission is its own row.
    web.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--max-units", "1"]).ok();
    let rows: Vec<String> = cost(&web, &["--by", "mission"])["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["mission"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(rows, ["(no mission)", "m1"]);
    let bad = c.run(&["mission", "run", "m1", "--agent-cmd", &agent, "--budget-usd", "x"]).code(2);
    assert!(bad.stderr.contains("hint:"), "{}", bad.stderr);
}

#[test]
fn a_landings_summarizer_counts_in_the_tasks_note_and_does_not_start_past_the_budget() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    crate::people::named(
        &repo,
        &env,
        "w",
        r#"echo work > "work-$GIT_LOOP_TASK.txt"
git loop finish done --message worked --usage '{"input": 100, "output": 10, "usd": 0.5}'"#,
    );
    crate::people::named(
        &repo,
        &env,
        "sum",
        r#"git loop finish summary --subject 'Add the work' --message 'It adds a file.' --usage '{"input": 30, "output": 3, "usd": 0.1}'"#,
    );
    let walk = |extra: &[&str]| {
        let mut args = vec!["run", "--agent", "w", "--summarizer", "sum", "--land", "--grace", "1"];
        args.extend_from_slice(extra);
        repo.run(&args)
    };
    // Within the budget: the summarizer's session counts in the task's note once it lands.
    let first = repo.add(&["Landed with a summary"]);
    walk(&["--budget-usd", "1"]).ok();
    assert_eq!(repo.git(&["log", "-1", "--format=%s", "main"]), "Add the work");
    let note = note_of(&repo, &first);
    assert!(note["landed"].is_object(), "{note}");
    assert_eq!((note["cost"]["sessions"].as_u64(), note["cost"]["input"].as_u64()), (Some(2), Some(130)), "{note}");
    assert!((note["cost"]["usd"].as_f64().unwrap_or(0.0) - 0.6).abs() < 1e-9, "{note}");

    // Past the budget: the worker's session ends over it, no summarizer starts, the task is
    // done but not landed, and the walk stops (exit 1).
    let second = repo.add(&["Over budget"]);
    let out = walk(&["--budget-usd", "0.4"]).code(1);
    let summarizers = sessions_started(&repo).into_iter().filter(|(_, role)| role == "summarizer").count();
    assert_eq!(summarizers, 1, "only the first task's:\n{}", out.stdout);
    assert_eq!(repo.run(&["show", &second, "--json"]).ok().json()["state"], "done");
    assert_eq!(repo.git(&["log", "-1", "--format=%s", "main"]), "Add the work", "the target did not move");
    assert!(
        out.stdout.contains("the walk's budget in dollars is spent: no summarizer session was started"),
        "{}",
        out.stdout
    );
    assert_eq!(walk_ended(&repo)["stop"], "budget");
}
