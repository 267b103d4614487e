//! A scripted model server on 127.0.0.1 for driving the real agent CLIs without any outside
//! network: the Anthropic Messages API (streamed as server-sent events) for Claude Code, and
//! the OpenAI Responses API (streamed) for Codex. A script decides each turn from the request
//! (how far the conversation is, what the prompt says): write a file with the CLI's own file
//! tool, run a shell command with its shell tool, say something and end the turn, or stall.
//!
//! Every request body is kept for the test to inspect. The server stops when dropped: the
//! accept loop and any stalled response end, and their threads are joined.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

/// Which API the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/messages` (Claude Code, through ANTHROPIC_BASE_URL).
    Anthropic,
    /// `POST /v1/responses` (Codex, through a model provider's base_url).
    Responses,
}

/// What the model does in one turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// Write `content` to `path` (relative to the CLI's working directory) with the CLI's
    /// file tool (Claude Code's Write; Codex's apply_patch).
    WriteFile { path: String, content: String },
    /// Run a command with the CLI's shell tool (Claude Code's Bash; Codex's exec_command).
    Shell(String),
    /// Say this and end the turn.
    Say(String),
    /// Call a tool the request offers by its name (an MCP server's, `mcp__<server>__<tool>` in
    /// Claude Code) with this input.
    Tool { name: String, input: Value },
    /// Never answer (until the server is dropped).
    Stall,
    /// Refuse as the vendor's API does: this HTTP status with its error body (a 429 rate or
    /// usage limit, a 401).
    Refuse { status: u16, body: Value },
}

/// What the script sees of a request.
#[derive(Debug, Clone)]
pub struct Request {
    /// Every user message's text, joined (the prompt is in there).
    pub user_text: String,
    /// How many tool results the conversation holds so far: the script's step.
    pub tool_results: usize,
    /// Whether the request offers tools (CLIs also make small side requests without them).
    pub has_tools: bool,
    /// The names of the tools it offers.
    pub tools: Vec<String>,
}

type Script = dyn Fn(&Request) -> Turn + Send + Sync;

/// A running server.
pub struct ModelServer {
    port: u16,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    handlers: Arc<Mutex<Vec<JoinHandle<()>>>>,
    bodies: Arc<Mutex<Vec<Value>>>,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl ModelServer {
    /// Start on a free port of 127.0.0.1.
    pub fn start(api: Api, script: impl Fn(&Request) -> Turn + Send + Sync + 'static) -> ModelServer {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free port on 127.0.0.1");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let port = listener.local_addr().expect("the listener's address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let handlers: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let ids = Arc::new(AtomicUsize::new(0));
        let accept = {
            let (stop, handlers, bodies, requests) = (stop.clone(), handlers.clone(), bodies.clone(), requests.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let conn = Connection {
                                api,
                                stream,
                                stop: stop.clone(),
                                script: script.clone(),
                                bodies: bodies.clone(),
                                requests: requests.clone(),
                                ids: ids.clone(),
                            };
                            let handle = std::thread::spawn(move || conn.serve());
                            handlers.lock().expect("handlers").push(handle);
                        }
                        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5))
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        ModelServer { port, stop, accept: Some(accept), handlers, bodies, requests }
    }

    /// The base URL: `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every model request body received so far (side requests without tools included).
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().expect("bodies").clone()
    }

    /// The requests the script was asked about (those offering tools), in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("requests").clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let handlers: Vec<_> = self.handlers.lock().map(|mut h| h.drain(..).collect()).unwrap_or_default();
        for handle in handlers {
            let _ = handle.join();
        }
    }
}

struct Connection {
    api: Api,
    stream: TcpStream,
    stop: Arc<AtomicBool>,
    script: Arc<Script>,
    bodies: Arc<Mutex<Vec<Value>>>,
    requests: Arc<Mutex<Vec<Request>>>,
    ids: Arc<AtomicUsize>,
}

impl Connection {
    fn serve(mut self) {
        let _ = self.stream.set_nonblocking(false);
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(30)));
        let Some((method, path, body)) = self.read_request() else { return };
        let reply = match (method.as_str(), path.split('?').next().unwrap_or("")) {
            ("POST", p) if p.ends_with("/messages") || p.ends_with("/responses") => {
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                self.bodies.lock().expect("bodies").push(body.clone());
                self.model_reply(&body)
            }
            ("POST", p) if p.ends_with("/count_tokens") => Some(json_reply(&json!({ "input_tokens": 1 }))),
            ("HEAD", _) => Some("HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned()),
            _ => Some(json_reply(&json!({ "data": [], "models": [] }))),
        };
        match reply {
            Some(reply) => {
                let _ = self.stream.write_all(reply.as_bytes());
                let _ = self.stream.flush();
            }
            None => {
                // Stall: hold the connection, say nothing, until the server stops.
                while !self.stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Method, path and body of one HTTP/1.1 request (`content-length` or chunked).
    fn read_request(&mut self) -> Option<(String, String, Vec<u8>)> {
        let mut reader = BufReader::new(self.stream.try_clone().ok()?);
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
        let (mut length, mut chunked) = (0usize, false);
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).ok()? == 0 || header.trim().is_empty() {
                break;
            }
            let (name, value) = header.split_once(':')?;
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().ok()?,
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                reader.read_line(&mut size).ok()?;
                let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
                let mut chunk = vec![0; n + 2];
                reader.read_exact(&mut chunk).ok()?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            body.resize(length, 0);
            reader.read_exact(&mut body).ok()?;
        }
        Some((method, path, body))
    }

    /// The reply to one model request, or `None` to stall.
    fn model_reply(&self, body: &Value) -> Option<String> {
        let request = match self.api {
            Api::Anthropic => anthropic_request(body),
            Api::Responses => responses_request(body),
        };
        let turn = if request.has_tools {
            self.requests.lock().expect("requests").push(request.clone());
            (self.script)(&request)
        } else {
            Turn::Say("OK".into())
        };
        let n = self.ids.fetch_add(1, Ordering::SeqCst);
        let events = match (self.api, turn) {
            (_, Turn::Stall) => return None,
            (_, Turn::Refuse { status, body }) => {
                let text = body.to_string();
                return Some(format!(
                    "HTTP/1.1 {status} Refused\r\ncontent-type: application/json\r\nretry-after: 3600\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                ));
            }
            (Api::Anthropic, turn) => anthropic_events(body, &turn, n),
            (Api::Responses, turn) => responses_events(body, &turn, n),
        };
        if self.api == Api::Anthropic && body.get("stream") != Some(&Value::Bool(true)) {
            // A non-streamed request: the message the events would have built.
            return Some(json_reply(&anthropic_message(&events)));
        }
        let mut out = String::from(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
        );
        for (name, data) in events {
            out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        }
        Some(out)
    }
}

fn json_reply(value: &Value) -> String {
    let text = value.to_string();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    )
}

// ----- Anthropic Messages -----

fn anthropic_request(body: &Value) -> Request {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut user_text = String::new();
    let mut tool_results = 0;
    for message in messages.iter().filter(|m| m["role"] == "user") {
        match &message["content"] {
            Value::String(text) => user_text.push_str(text),
            Value::Array(blocks) => {
                for block in blocks {
                    match block["type"].as_str() {
                        Some("text") => user_text.push_str(block["text"].as_str().unwrap_or("")),
                        Some("tool_result") => tool_results += 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let has_tools = body["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "Bash"));
    let tools =
        body["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).map(String::from).collect();
    Request { user_text, tool_results, has_tools, tools }
}

/// The working directory Claude Code states in its system prompt.
fn claude_cwd(body: &Value) -> String {
    let system = body["system"].to_string();
    let marker = "Primary working directory: ";
    system
        .find(marker)
        .map(|at| {
            let rest = &system[at + marker.len()..];
            rest[..rest.find("\\n").unwrap_or(rest.len())].to_owned()
        })
        .unwrap_or_default()
}

fn anthropic_events(body: &Value, turn: &Turn, n: usize) -> Vec<(String, String)> {
    let model = body["model"].as_str().unwrap_or("claude").to_owned();
    let mut events = vec![(
        "message_start",
        json!({"type":"message_start","message":{"id":format!("msg_{n}"),"type":"message","role":"assistant","model":model,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}),
    )];
    let tool = |name: &str, input: Value| {
        vec![
            (
                "content_block_start",
                json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":format!("toolu_{n}"),"name":name,"input":{}}}),
            ),
            (
                "content_block_delta",
                json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":input.to_string()}}),
            ),
            ("content_block_stop", json!({"type":"content_block_stop","index":0})),
            (
                "message_delta",
                json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}),
            ),
        ]
    };
    match turn {
        Turn::WriteFile { path, content } => {
            let file_path = format!("{}/{path}", claude_cwd(body));
            events.extend(tool("Write", json!({ "file_path": file_path, "content": content })));
        }
        Turn::Shell(command) => {
            events.extend(tool("Bash", json!({ "command": command, "description": "Run the command" })))
        }
        Turn::Tool { name, input } => events.extend(tool(name, input.clone())),
        Turn::Say(text) => events.extend([
            ("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})),
            ("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}})),
            ("content_block_stop", json!({"type":"content_block_stop","index":0})),
            ("message_delta", json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}})),
        ]),
        Turn::Stall | Turn::Refuse { .. } => unreachable!("a stall or a refusal has no events"),
    }
    events.push(("message_stop", json!({"type":"message_stop"})));
    events.into_iter().map(|(name, data)| (name.to_owned(), data.to_string())).collect()
}

/// The complete message a stream of Anthropic events describes (for non-streamed requests).
fn anthropic_message(events: &[(String, String)]) -> Value {
    let mut message = json!({});
    let mut content = Vec::new();
    for (name, data) in events {
        let data: Value = serde_json::from_str(data).expect("events are JSON");
        match name.as_str() {
            "message_start" => message = data["message"].clone(),
            "content_block_start" => content.push(data["content_block"].clone()),
            "content_block_delta" => {
                if let Some(last) = content.last_mut() {
                    if let Some(text) = data["delta"]["text"].as_str() {
                        last["text"] = json!(format!("{}{text}", last["text"].as_str().unwrap_or("")));
                    }
                    if let Some(partial) = data["delta"]["partial_json"].as_str() {
                        last["input"] = serde_json::from_str(partial).unwrap_or(json!({}));
                    }
                }
            }
            "message_delta" => message["stop_reason"] = data["delta"]["stop_reason"].clone(),
            _ => {}
        }
    }
    message["content"] = json!(content);
    message
}

// ----- OpenAI Responses -----

fn responses_request(body: &Value) -> Request {
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let mut user_text = String::new();
    let mut tool_results = 0;
    for item in &input {
        match item["type"].as_str() {
            Some("function_call_output") | Some("custom_tool_call_output") => tool_results += 1,
            Some("message") if item["role"] == "user" => {
                for part in item["content"].as_array().into_iter().flatten() {
                    user_text.push_str(part["text"].as_str().unwrap_or(""));
                    user_text.push('\n');
                }
            }
            _ => {}
        }
    }
    let tools: Vec<String> = tool_names(body).into_iter().map(|(_, name)| name).collect();
    Request { user_text, tool_results, has_tools: !tools.is_empty(), tools }
}

/// Every tool the request offers, as (type, name): the `tools` list and the tools the
/// conversation announces (`additional_tools`), namespaces opened.
fn tool_names(body: &Value) -> Vec<(String, String)> {
    fn collect(list: &Value, out: &mut Vec<(String, String)>) {
        for tool in list.as_array().into_iter().flatten() {
            let (kind, name) = (tool["type"].as_str().unwrap_or(""), tool["name"].as_str().unwrap_or(""));
            if kind == "namespace" {
                collect(&tool["tools"], out);
            } else if !name.is_empty() {
                out.push((kind.to_owned(), name.to_owned()));
            }
        }
    }
    let mut out = Vec::new();
    collect(&body["tools"], &mut out);
    for item in body["input"].as_array().into_iter().flatten() {
        if item["type"] == "additional_tools" {
            collect(&item["tools"], &mut out);
        }
    }
    out
}

fn responses_events(body: &Value, turn: &Turn, n: usize) -> Vec<(String, String)> {
    let tools = tool_names(body);
    let has = |name: &str| tools.iter().any(|(_, t)| t == name);
    let call_id = format!("call_{n}");
    // Codex offers its tools directly, or (for models that support it) through `exec`, which
    // runs JavaScript calling `tools.<name>(...)`.
    let code_mode = tools.iter().any(|(kind, name)| kind == "custom" && name == "exec");
    let js = |call: String| json!({"type":"custom_tool_call","id":format!("ctc_{n}"),"call_id":call_id,"name":"exec","input":format!("const r = await {call};\ntext(JSON.stringify(r));"),"status":"completed"});
    let function = |name: &str, arguments: Value| json!({"type":"function_call","id":format!("fc_{n}"),"call_id":call_id,"name":name,"arguments":arguments.to_string(),"status":"completed"});
    let item = match turn {
        Turn::WriteFile { path, content } => {
            let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
            for line in content.lines() {
                patch.push_str(&format!("+{line}\n"));
            }
            patch.push_str("*** End Patch\n");
            if code_mode {
                js(format!("tools.apply_patch({})", json!(patch)))
            } else if has("apply_patch") {
                let kind = tools.iter().find(|(_, t)| t == "apply_patch").map(|(k, _)| k.as_str()).unwrap_or("");
                if kind == "custom" {
                    json!({"type":"custom_tool_call","id":format!("ctc_{n}"),"call_id":call_id,"name":"apply_patch","input":patch,"status":"completed"})
                } else {
                    function("apply_patch", json!({ "input": patch }))
                }
            } else {
                function("exec_command", json!({ "cmd": format!("cat > {path} <<'EOF'\n{content}EOF") }))
            }
        }
        Turn::Shell(command) => {
            if code_mode {
                js(format!("tools.exec_command({})", json!({ "cmd": command })))
            } else if has("exec_command") {
                function("exec_command", json!({ "cmd": command }))
            } else {
                function("shell", json!({ "command": ["bash", "-lc", command] }))
            }
        }
        Turn::Say(text) => {
            json!({"type":"message","role":"assistant","id":format!("msg_{n}"),"content":[{"type":"output_text","text":text,"annotations":[]}]})
        }
        Turn::Tool { name, input } => function(name, input.clone()),
        Turn::Stall | Turn::Refuse { .. } => unreachable!("a stall or a refusal has no events"),
    };
    let id = format!("resp_{n}");
    vec![
        ("response.created", json!({"type":"response.created","response":{"id":id}})),
        ("response.output_item.added", json!({"type":"response.output_item.added","output_index":0,"item":item})),
        ("response.output_item.done", json!({"type":"response.output_item.done","output_index":0,"item":item})),
        (
            "response.completed",
            json!({"type":"response.completed","response":{"id":id,"usage":{"input_tokens":10,"input_tokens_details":null,"output_tokens":5,"output_tokens_details":null,"total_tokens":15}}}),
        ),
    ]
    .into_iter()
    .map(|(name, data)| (name.to_owned(), data.to_string()))
    .collect()
}
