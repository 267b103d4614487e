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
        r#"git loop finish done --usage '{"tokens": 5}' 2> "$GIT_LOOP_WORKTREE/../refused.txt" || echo "exit $?" >> "$GIT_LOOP_WORKTREE/../refused.txt"
git loop finish done --message 'reported without it'"#,
    );
    run(&repo, &agent, &[]).ok();
    let dir = repo.dir.join(".git/loop/worktrees");
    let refused = std::fs::read_to_string(dir.join("refused.txt")).expect("the agent wrote what finish said");
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

/// The real CLI, a first session without a verdict and its continuation: the ledger holds the
/// server's counts (10 input and 5 output tokens per response), to the token.
fn the_ledger_holds_the_servers_counts(cli: agents_e2e::Cli, model: Option<&str>) {
    let Some(program) = agents_e2e::installed(cli) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let server = ModelServer::start(cli.api, |req: &Request| {
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
    });
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
