//! `git loop mcp`: the backlog over the Model Context Protocol, on stdio, with the official Rust
//! MCP SDK (`rmcp`).
//!
//! Each tool is one of the command line's own commands, run as this program with `--json` in
//! the repository the server was started in: the same library functions, the same checks and
//! refusals, the same JSON (docs/cli.md), and inside an agent's session the same confinement (a
//! session may `finish` its own task and read; every other write is refused and journaled as
//! `agent_overreach`, as on the command line). Only reading tools are offered unless `--write`.

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use super::env::Env;

/// Serve the backlog over MCP on stdin and stdout.
///
/// For agents and editors that speak the Model Context Protocol: tools to list, show, add and
/// edit tasks, hand out the next one (and claim it), finish a session's task, and read the
/// board and what was spent, each with a JSON schema; resources for each task
/// (loop://tasks/<id>) and the journal (loop://journal). Every tool runs the command of the same
/// name, with its checks and its JSON. Read-only unless --write (add, edit, next with a claim,
/// finish). Inside an agent's session only finish (of its own task) writes, as on the command
/// line.
///
/// Example: claude mcp add git-loop -- git loop mcp --write
#[derive(Args)]
pub struct McpArgs {
    /// Offer the tools that write: add, edit, next with claim, finish.
    #[arg(long)]
    write: bool,
}

pub fn run(env: &Env, args: McpArgs) -> Result<u8> {
    // The repository must be one before a client is told anything.
    let root = env.open()?.workdir().to_owned();
    let server = Loop::new(env.exe.clone(), root, args.write);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    runtime.block_on(async move {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|err| anyhow::anyhow!("the MCP client did not start a session: {err}"))?;
        running.waiting().await.map_err(|err| anyhow::anyhow!("the MCP session failed: {err}"))?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(super::exit::OK)
}

/// The server: this program and the repository its tools run in.
#[derive(Clone)]
pub(super) struct Loop {
    exe: PathBuf,
    root: PathBuf,
    write: bool,
}

impl Loop {
    /// The tools of the repository at `root`, run by `exe`; the writing ones with `write`.
    pub(super) fn new(exe: PathBuf, root: PathBuf, write: bool) -> Loop {
        Loop { exe, root, write }
    }
}

/// One tool: its name, whether it writes, what it does, and its arguments' schema.
struct Spec {
    name: &'static str,
    writes: bool,
    description: &'static str,
    schema: fn() -> Value,
}

const PRIORITY: &[&str] = &["p0", "p1", "p2", "p3"];

fn specs() -> Vec<Spec> {
    vec![
        Spec {
            name: "list",
            writes: false,
            description: "List tasks (git loop list --json): ready ones first, then claimed, blocked, waiting for a person, parked, done, cancelled.",
            schema: || {
                json!({ "type": "object", "properties": {
                    "ready": { "type": "boolean", "description": "only tasks `next` could hand out now" },
                    "state": { "type": "string", "enum": ["open", "needs-decision", "needs-you", "taken-over", "failed", "done", "parked", "cancelled"] },
                    "label": { "type": "array", "items": { "type": "string" }, "description": "only tasks with every one of these labels" },
                    "tree": { "type": "boolean", "description": "epics with their children beneath them, each with its depth" },
                }, "additionalProperties": false })
            },
        },
        Spec {
            name: "show",
            writes: false,
            description: "Show one task in full (git loop show --json): fields, dependencies, claim, completion, landing, how to answer it.",
            schema: || {
                json!({ "type": "object", "properties": {
                    "id": { "type": "string", "description": "the task's id or a unique prefix" },
                }, "required": ["id"], "additionalProperties": false })
            },
        },
        Spec {
            name: "status",
            writes: false,
            description: "The board at a glance (git loop status --json): walks, sessions, claims, ready tasks, tasks waiting for a person, the landing queue, what was spent.",
            schema: || json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        },
        Spec {
            name: "cost",
            writes: false,
            description: "What the agents cost, from the ledger (git loop cost --json).",
            schema: || {
                json!({ "type": "object", "properties": {
                    "by": { "type": "string", "enum": ["task", "agent", "model", "day", "mission", "walk"] },
                    "since": { "type": "string", "description": "e.g. 7d, or a date" },
                }, "additionalProperties": false })
            },
        },
        Spec {
            name: "next",
            writes: false,
            description: "The next ready task (git loop next --json); with claim (needs --write), claimed for holder so no other agent takes it.",
            schema: || {
                json!({ "type": "object", "properties": {
                    "claim": { "type": "boolean" },
                    "holder": { "type": "string", "description": "who claims it (with claim)" },
                    "label": { "type": "array", "items": { "type": "string" } },
                }, "additionalProperties": false })
            },
        },
        Spec {
            name: "add",
            writes: true,
            description: "Add a task (git loop add --json).",
            schema: || {
                json!({ "type": "object", "properties": {
                    "title": { "type": "string" },
                    "body": { "type": "string", "description": "the plan: what the agent should do" },
                    "priority": { "type": "string", "enum": PRIORITY },
                    "after": { "type": "array", "items": { "type": "string" }, "description": "tasks that must be done first (ids, or <remote-or-path>#<id> of another repository)" },
                    "label": { "type": "array", "items": { "type": "string" } },
                    "parent": { "type": "string", "description": "the epic it is part of" },
                }, "required": ["title"], "additionalProperties": false })
            },
        },
        Spec {
            name: "edit",
            writes: true,
            description: "Change a task's fields (git loop edit --json).",
            schema: || {
                json!({ "type": "object", "properties": {
                    "id": { "type": "string" },
                    "title": { "type": "string" },
                    "body": { "type": "string" },
                    "priority": { "type": "string", "enum": PRIORITY },
                    "after": { "type": "array", "items": { "type": "string" } },
                    "label": { "type": "array", "items": { "type": "string" } },
                    "remove_label": { "type": "array", "items": { "type": "string" } },
                }, "required": ["id"], "additionalProperties": false })
            },
        },
        Spec {
            name: "finish",
            writes: true,
            description: "Inside an agent's session: report how its task went (git loop finish); only the session's own task.",
            schema: || {
                json!({ "type": "object", "properties": {
                    "verdict": { "type": "string", "enum": ["done", "blocked", "failed", "approve", "changes", "resolved", "unresolved"] },
                    "message": { "type": "string" },
                }, "required": ["verdict", "message"], "additionalProperties": false })
            },
        },
    ]
}

/// A tool's arguments as the command's argv, or why they are not valid.
fn argv(name: &str, args: &JsonObject, write: bool) -> Result<Vec<String>, String> {
    let text = |k: &str| args.get(k).and_then(Value::as_str).map(ToOwned::to_owned);
    let flag = |k: &str| args.get(k).and_then(Value::as_bool).unwrap_or(false);
    let list = |k: &str| -> Vec<String> {
        args.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(ToOwned::to_owned)).collect())
            .unwrap_or_default()
    };
    let required = |k: &str| text(k).filter(|v| !v.trim().is_empty()).ok_or_else(|| format!("'{k}' is required"));
    let mut out: Vec<String> = vec![name.to_owned()];
    // What a command takes by position goes last, after `--`: a title such as "--help" or
    // "-rf" is a title, never an option.
    let mut positional: Vec<String> = Vec::new();
    let many = |out: &mut Vec<String>, option: &str, values: Vec<String>| {
        for v in values {
            out.push(option.to_owned());
            out.push(v);
        }
    };
    match name {
        "list" => {
            if flag("ready") {
                out.push("--ready".into());
            }
            if flag("tree") {
                out.push("--tree".into());
            }
            if let Some(state) = text("state") {
                out.extend(["--state".into(), state]);
            }
            many(&mut out, "--label", list("label"));
        }
        "show" => positional.push(required("id")?),
        "status" => {}
        "cost" => {
            if let Some(by) = text("by") {
                out.extend(["--by".into(), by]);
            }
            if let Some(since) = text("since") {
                out.extend(["--since".into(), since]);
            }
        }
        "next" => {
            if flag("claim") {
                if !write {
                    return Err("claiming writes: start the server with 'git loop mcp --write'".into());
                }
                out.push("--claim".into());
                let holder = text("holder").unwrap_or_else(|| "mcp".into());
                out.extend(["--holder".into(), holder]);
            }
            many(&mut out, "--label", list("label"));
        }
        "add" => {
            positional.push(required("title")?);
            for (k, option) in [("body", "--body"), ("priority", "--priority"), ("parent", "--parent")] {
                if let Some(v) = text(k) {
                    out.extend([option.into(), v]);
                }
            }
            many(&mut out, "--after", list("after"));
            many(&mut out, "--label", list("label"));
        }
        "edit" => {
            positional.push(required("id")?);
            for (k, option) in [("title", "--title"), ("body", "--body"), ("priority", "--priority")] {
                if let Some(v) = text(k) {
                    out.extend([option.into(), v]);
                }
            }
            many(&mut out, "--after", list("after"));
            many(&mut out, "--label", list("label"));
            many(&mut out, "--remove-label", list("remove_label"));
        }
        "finish" => {
            positional.push(required("verdict")?);
            out.extend(["--message".into(), required("message")?]);
        }
        other => return Err(format!("there is no tool '{other}'")),
    }
    out.push("--json".into());
    if !positional.is_empty() {
        out.push("--".into());
        out.extend(positional);
    }
    Ok(out)
}

impl Loop {
    fn offered(&self) -> impl Iterator<Item = Spec> + '_ {
        specs().into_iter().filter(|s| self.write || !s.writes)
    }

    /// Run `git loop <argv>` here: (exit code, stdout, stderr). Its stdin is not ours (the
    /// protocol's).
    async fn git_loop(&self, argv: Vec<String>) -> (i32, String, String) {
        let (exe, root) = (self.exe.clone(), self.root.clone());
        let ran = tokio::task::spawn_blocking(move || {
            std::process::Command::new(exe)
                .arg("-C")
                .arg(root)
                .args(argv)
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .output()
        })
        .await;
        match ran {
            Ok(Ok(out)) => (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ),
            Ok(Err(err)) => (-1, String::new(), format!("could not run git-loop: {err}")),
            Err(err) => (-1, String::new(), format!("could not run git-loop: {err}")),
        }
    }
}

fn schema_object(value: Value) -> Arc<JsonObject> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

impl ServerHandler for Loop {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_resources().build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("git-loop", env!("CARGO_PKG_VERSION")))
            .with_instructions(if self.write {
                "The git-loop backlog of this repository: tasks with dependencies, epics, claims and the journal, kept in git. Tools run the command of the same name."
            } else {
                "The git-loop backlog of this repository, read-only: this server offers no tool that writes (it would with --write; under git loop serve, --mcp-write). Tools run the command of the same name."
            })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .offered()
            .map(|s| Tool::new(Cow::Borrowed(s.name), Cow::Borrowed(s.description), schema_object((s.schema)())))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let Some(spec) = specs().into_iter().find(|s| s.name == name) else {
            return Err(ErrorData::invalid_params(format!("there is no tool '{name}'"), None));
        };
        if spec.writes && !self.write {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "'{name}' writes, and this server is read-only: start it with 'git loop mcp --write'"
            ))])
            .into());
        }
        let args = request.arguments.unwrap_or_default();
        let argv = match argv(&name, &args, self.write) {
            Ok(argv) => argv,
            Err(why) => return Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into()),
        };
        let (code, stdout, stderr) = self.git_loop(argv).await;
        let result = if code == 0 {
            let text = if stdout.trim().is_empty() { "{}".to_owned() } else { stdout };
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            let said = if stderr.trim().is_empty() { stdout } else { stderr };
            CallToolResult::error(vec![ContentBlock::text(format!("exit {code}: {}", said.trim()))])
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resources = vec![{
            let mut r = Resource::new("loop://journal", "journal");
            r.description = Some("The journal's last 200 events (git loop log --json)".into());
            r.mime_type = Some("application/json".into());
            r
        }];
        let (code, stdout, stderr) = self.git_loop(vec!["list".into(), "--json".into()]).await;
        if code != 0 {
            return Err(ErrorData::internal_error(format!("the tasks could not be listed: {}", stderr.trim()), None));
        }
        let listed: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        for task in listed["tasks"].as_array().into_iter().flatten() {
            let id = task["id"].as_str().unwrap_or_default();
            let mut r = Resource::new(format!("loop://tasks/{id}"), id.to_owned());
            r.title = task["title"].as_str().map(ToOwned::to_owned);
            r.mime_type = Some("application/json".into());
            resources.push(r);
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let argv: Vec<String> = if uri == "loop://journal" {
            ["log", "--limit", "200", "--json"].map(String::from).to_vec()
        } else if let Some(id) = uri.strip_prefix("loop://tasks/").filter(|id| !id.is_empty() && !id.contains('/')) {
            vec!["show".into(), id.to_owned(), "--json".into()]
        } else {
            return Err(ErrorData::resource_not_found(format!("no resource '{uri}'"), None));
        };
        let (code, stdout, stderr) = self.git_loop(argv).await;
        if code != 0 {
            return Err(ErrorData::resource_not_found(format!("'{uri}': {}", stderr.trim()), None));
        }
        let contents = ResourceContents::text(stdout, uri).with_mime_type("application/json");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
