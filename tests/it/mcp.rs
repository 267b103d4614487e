//! `git loop mcp`: the backlog over MCP, driven by the official Rust SDK's own client talking to
//! it as a child process on stdio.

use rmcp::model::{CallToolRequestParams, CallToolResult, ReadResourceRequestParams, ResourceContents};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::harness::{Repo, TestEnv};

type Client = RunningService<RoleClient, ()>;

async fn connect(repo: &Repo<'_>, args: &[&str]) -> Client {
    let mut all = vec!["mcp"];
    all.extend_from_slice(args);
    let command = tokio::process::Command::from(repo.command(&all));
    ().serve(TokioChildProcess::new(command).expect("start git loop mcp")).await.expect("an MCP session")
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let params =
        CallToolRequestParams::new(tool.to_owned()).with_arguments(args.as_object().cloned().unwrap_or_default());
    client.call_tool(params).await.unwrap_or_else(|err| panic!("{tool}: {err}"))
}

fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

/// What a tool that ran well returned, as JSON.
fn ok(result: CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    serde_json::from_str(&text(&result)).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&result)))
}

/// Every tool, listed with a schema and called: each answers as its command does; the
/// resources are each task and the journal; without --write the writing tools are neither
/// offered nor run.
#[test]
fn an_sdk_client_lists_every_tool_with_its_schema_and_calls_each() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let first = repo.add(&["Write the parser", "--label", "api"]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let client = connect(&repo, &["--write"]).await;
        let tools = client.list_all_tools().await.expect("tools");
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        assert_eq!(names, ["add", "cost", "edit", "finish", "list", "next", "show", "status"]);
        for tool in &tools {
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
            assert!(tool.description.as_deref().is_some_and(|d| !d.is_empty()), "{}", tool.name);
        }
        let show = tools.iter().find(|t| t.name == "show").expect("show");
        assert_eq!(show.input_schema.get("required"), Some(&json!(["id"])));

        let listed = ok(call(&client, "list", json!({ "ready": true, "label": ["api"] })).await);
        assert_eq!(listed["tasks"][0]["id"], first.as_str());
        let shown = ok(call(&client, "show", json!({ "id": first })).await);
        assert_eq!(shown["title"], "Write the parser");
        let status = ok(call(&client, "status", json!({})).await);
        assert_eq!(status["counts"]["ready"], 1);
        let cost = ok(call(&client, "cost", json!({ "by": "agent" })).await);
        assert!(cost.is_object(), "{cost}");
        let added = ok(call(&client, "add", json!({ "title": "Ship it", "priority": "p0", "label": ["api"] })).await);
        // A title that reads like an option is a title.
        let odd = ok(call(&client, "add", json!({ "title": "--help" })).await);
        let odd_id = odd["id"].as_str().expect("an id").to_owned();
        assert_eq!(ok(call(&client, "show", json!({ "id": odd_id })).await)["title"], "--help");
        let second = added["id"].as_str().expect("an id").to_owned();
        let edited = ok(call(&client, "edit", json!({ "id": second, "title": "Ship it now" })).await);
        assert_eq!(edited["title"], "Ship it now");
        ok(call(&client, "edit", json!({ "id": odd_id, "priority": "p3" })).await);
        let next = ok(call(&client, "next", json!({})).await);
        assert_eq!(next["id"], second.as_str(), "p0 first: {next}");
        let claimed = ok(call(&client, "next", json!({ "claim": true, "holder": "mcp-agent" })).await);
        assert_eq!(claimed["id"], second.as_str(), "{claimed}");
        let shown = repo.run(&["show", &second, "--json"]).ok().json();
        assert_eq!(shown["claim"]["holder"], "mcp-agent", "{shown}");
        // finish belongs to a session: outside one it is refused, said as the command says it.
        let finished = call(&client, "finish", json!({ "verdict": "done", "message": "did it" })).await;
        assert_eq!(finished.is_error, Some(true));
        assert!(text(&finished).contains("session"), "{}", text(&finished));
        // Bad arguments: said, nothing written.
        let missing = call(&client, "show", json!({})).await;
        assert_eq!(missing.is_error, Some(true));
        assert!(text(&missing).contains("'id' is required"), "{}", text(&missing));
        let unknown = call(&client, "show", json!({ "id": "t-nothere" })).await;
        assert!(text(&unknown).contains("no task matches"), "{}", text(&unknown));

        let resources = client.list_all_resources().await.expect("resources");
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
        assert!(uris.contains(&"loop://journal"), "{uris:?}");
        let task_uri = format!("loop://tasks/{first}");
        assert!(uris.contains(&task_uri.as_str()), "{uris:?}");
        let read = client.read_resource(ReadResourceRequestParams::new(task_uri.clone())).await.expect("read");
        let ResourceContents::TextResourceContents { text: body, .. } = &read.contents[0] else { panic!("text") };
        assert_eq!(serde_json::from_str::<Value>(body).expect("JSON")["id"], first.as_str());
        let journal = client.read_resource(ReadResourceRequestParams::new("loop://journal")).await.expect("journal");
        let ResourceContents::TextResourceContents { text: body, .. } = &journal.contents[0] else { panic!("text") };
        let events = serde_json::from_str::<Value>(body).expect("JSON");
        assert!(events["events"].as_array().is_some_and(|e| e.iter().any(|e| e["kind"] == "task_added")), "{events}");
        client.cancel().await.expect("end the session");

        // Read-only: the writing tools are neither listed nor run.
        let client = connect(&repo, &[]).await;
        let tools = client.list_all_tools().await.expect("tools");
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        assert_eq!(names, ["cost", "list", "next", "show", "status"]);
        let refused = call(&client, "add", json!({ "title": "sneaky" })).await;
        assert_eq!(refused.is_error, Some(true));
        assert!(text(&refused).contains("read-only"), "{}", text(&refused));
        let refused = call(&client, "next", json!({ "claim": true })).await;
        assert_eq!(refused.is_error, Some(true));
        client.cancel().await.expect("end the session");
    });
    let titles = repo.run(&["list", "--json"]).ok().json();
    assert!(!titles.to_string().contains("sneaky"), "nothing was added read-only");
}

/// The real Claude Code, with `git loop mcp --write` as its MCP server and the loopback model
/// server scripting it, adds a task through the server's `add` tool: the task is in the
/// backlog, written by the command line's own `add`.
#[test]
fn claude_code_calls_a_tool_of_git_loop_mcp_end_to_end() {
    use crate::agents_e2e::{cli_env, installed, CLAUDE};
    use crate::model_server::{ModelServer, Request, Turn};
    let Some(program) = installed(CLAUDE) else { return };
    let env = TestEnv::new();
    let repo = env.repo("r");
    let config = env.path("mcp.json");
    let server_config = json!({ "mcpServers": { "git-loop": {
        "type": "stdio",
        "command": crate::harness::bin(),
        "args": ["-C", repo.dir.to_str().expect("utf-8"), "mcp", "--write"],
    }}});
    std::fs::write(&config, server_config.to_string()).expect("write the MCP configuration");
    let offered = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = offered.clone();
    let server = ModelServer::start(CLAUDE.api, move |req: &Request| {
        if req.tools.iter().any(|t| t.starts_with("mcp__git-loop__")) {
            *seen.lock().expect("lock") = req.tools.clone();
        }
        match req.tool_results {
            0 if req.tools.iter().any(|t| t == "mcp__git-loop__add") => Turn::Tool {
                name: "mcp__git-loop__add".into(),
                input: json!({ "title": "Added by Claude Code over MCP", "priority": "p1" }),
            },
            _ => Turn::Say("Added.".into()),
        }
    });
    let mut cmd = std::process::Command::new(&program);
    cmd.args(["-p", "Add a task to the backlog with the git-loop tools.", "--output-format", "json"])
        .args(["--mcp-config", config.to_str().expect("utf-8"), "--strict-mcp-config"])
        .args(["--allowedTools", "mcp__git-loop__add"]);
    env.seal(&mut cmd).current_dir(&repo.dir).envs(cli_env(&env, CLAUDE, &program, &server));
    let out = crate::harness::output_within(&mut cmd, std::time::Duration::from_secs(120));
    let said = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "claude: {said}");
    let tools = offered.lock().expect("lock").clone();
    for tool in ["list", "show", "add", "edit", "next", "finish", "status", "cost"] {
        assert!(tools.contains(&format!("mcp__git-loop__{tool}")), "Claude Code was offered {tool}: {tools:?}");
    }
    let listed = repo.run(&["list", "--json"]).ok().json();
    let task = listed["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["title"] == "Added by Claude Code over MCP")
        .unwrap_or_else(|| panic!("the task Claude Code added through the tool: {listed}\n{said}"))
        .clone();
    assert_eq!(task["priority"], "p1");
}
