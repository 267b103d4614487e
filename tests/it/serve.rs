//! `git loop serve`: the web board. Its API over plain HTTP (the token, the live stream, an
//! action journaled with who), and the page itself in a real browser: Debian's Chromium driven
//! over the W3C WebDriver protocol by ChromeDriver, with a small client of ours.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{tool, Repo, TestEnv};

/// A `git loop serve` on 127.0.0.1 (a free port), stopped when dropped.
struct Serving {
    child: Child,
    /// `127.0.0.1:<port>`.
    addr: String,
    token: String,
}

impl Serving {
    fn start(repo: &Repo<'_>) -> Serving {
        let mut child = repo
            .command(&["serve", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start git loop serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("its first line");
        let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("the address").to_owned();
        let rest = url.trim_start_matches("http://");
        let (addr, token) = rest.split_once("/#token=").expect("a token in the address");
        Serving { child, addr: addr.to_owned(), token: token.trim().to_owned() }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A call to its API with the token; (status, JSON body).
    fn api(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let auth = format!("Bearer {}", self.token);
        let (status, body) = call(&self.addr, method, path, &[("Authorization", &auth)], body);
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 exchange: (status, body). A body is sent as JSON.
fn call(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if body.is_some() {
        request.push_str("Content-Type: application/json; charset=utf-8\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{payload}", payload.len()));
    stream.write_all(request.as_bytes()).expect("send");
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status: u16 = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("a status");
    let mut length = None;
    let mut chunked = false;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').expect("name: value");
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse::<usize>().ok();
        }
        if name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).expect("a chunk's size");
            let size = usize::from_str_radix(size.trim(), 16).expect("hex");
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).expect("a chunk");
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = length {
        body.resize(length, 0);
        reader.read_exact(&mut body).expect("the body");
    } else {
        reader.read_to_end(&mut body).expect("the body");
    }
    (status, body)
}

fn state(repo: &Repo<'_>, id: &str) -> String {
    repo.run(&["show", id, "--json"]).ok().json()["state"].as_str().unwrap_or_default().to_owned()
}

/// The API: no token or a wrong one is refused; with it, the board; a task added from the command
/// line reaches an open stream of events within 2 s; an action runs and is journaled with who
/// and from where; anything not JSON is refused as an action; a non-loopback address without
/// loop.serve.token refuses to start.
#[test]
fn the_api_asks_for_the_token_streams_the_board_and_journals_actions() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let first = repo.add(&["Write the parser"]);
    let serving = Serving::start(&repo);

    let (status, _) = call(&serving.addr, "GET", "/api/board", &[], None);
    assert_eq!(status, 401, "no token");
    let (status, _) = call(&serving.addr, "GET", "/api/board", &[("Authorization", "Bearer nope")], None);
    assert_eq!(status, 401, "a wrong token");
    let (status, page) = call(&serving.addr, "GET", "/", &[], None);
    assert_eq!(status, 200, "the page is static: no token needed");
    assert!(!String::from_utf8_lossy(&page).contains("Write the parser"), "and holds no data");
    let (status, board) = serving.api("GET", "/api/board", None);
    assert_eq!(status, 200);
    let ready = &board["columns"][0];
    assert_eq!(ready["name"], "ready");
    assert!(ready["cards"].as_array().expect("cards").iter().any(|c| c["id"] == first.as_str()), "{board}");

    // The stream: the board at once, then again with a task added from the command line.
    let mut stream = TcpStream::connect(&serving.addr).expect("connect");
    let request = format!(
        "GET /api/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        serving.addr, serving.token
    );
    stream.write_all(request.as_bytes()).expect("send");
    stream.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    let mut reader = BufReader::new(stream);
    let mut seen = String::new();
    let read_until = |reader: &mut BufReader<TcpStream>, seen: &mut String, what: &str, within: Duration| {
        let deadline = Instant::now() + within;
        while !seen.contains(what) {
            assert!(Instant::now() < deadline, "no '{what}' in the stream within {within:?}: {seen}");
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(_) => seen.push_str(&line),
                Err(err) if matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(err) => panic!("the stream broke: {err}"),
            }
        }
    };
    read_until(&mut reader, &mut seen, "event: board", Duration::from_secs(10));
    let added_at = Instant::now();
    let second = repo.add(&["Ship it"]);
    read_until(&mut reader, &mut seen, &second, Duration::from_secs(2));
    assert!(added_at.elapsed() < Duration::from_secs(2));

    // An action: journaled with who and from where, then the verb's own event.
    let (status, said) = serving.api("POST", &format!("/api/tasks/{second}/park"), Some(&json!({ "reason": "later" })));
    assert_eq!(status, 200, "{said}");
    assert_eq!(state(&repo, &second), "parked");
    let log = repo.run(&["log", "--json"]).ok().json();
    let action = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "board_action")
        .unwrap_or_else(|| panic!("a board_action: {log}"))
        .clone();
    assert_eq!(action["task"], second.as_str());
    assert_eq!(action["data"]["verb"], "park");
    assert_eq!(action["data"]["by"], "person:tess@example.com");
    assert!(action["data"]["from"].as_str().unwrap_or_default().starts_with("127.0.0.1:"), "{action}");
    assert_eq!(action["data"]["done"], true);
    // A refused one says why, with the refusal's status.
    let (status, said) = serving.api("POST", &format!("/api/tasks/{second}/park"), Some(&json!({})));
    assert_eq!(status, 400, "{said}");
    let (status, said) = serving.api("POST", "/api/tasks/t-nothere/reopen", Some(&json!({})));
    assert_eq!(status, 400, "{said}");
    // A form post (no JSON) is not an action.
    let auth = format!("Bearer {}", serving.token);
    let (status, _) =
        call(&serving.addr, "POST", &format!("/api/tasks/{second}/reopen"), &[("Authorization", &auth)], None);
    assert_eq!(status, 400);
    assert_eq!(state(&repo, &second), "parked");

    // MCP over streamable HTTP at /mcp: the token first, then a session of the SDK's service.
    let (status, _) = call(&serving.addr, "POST", "/mcp", &[], Some(&json!({})));
    assert_eq!(status, 401);
    let mcp = |session: Option<&str>, message: Value| -> (Option<String>, Vec<Value>) {
        let mut stream = TcpStream::connect(&serving.addr).expect("connect");
        let body = message.to_string();
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n",
            serving.token,
            body.len()
        );
        if let Some(session) = session {
            request.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        request.push_str(&format!("\r\n{body}"));
        stream.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("the answer");
        let session = answer
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("mcp-session-id:").map(|_| l[15..].trim().to_owned()));
        let messages = answer
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        (session, messages)
    };
    let (session, said) = mcp(
        None,
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "test", "version": "1" } } }),
    );
    let session = session.expect("a session");
    assert_eq!(said[0]["result"]["serverInfo"]["name"], "git-loop", "{said:?}");
    mcp(Some(&session), json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    let (_, said) = mcp(Some(&session), json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }));
    let mut tools: Vec<&str> =
        said[0]["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    tools.sort_unstable();
    assert_eq!(tools, ["cost", "list", "next", "show", "status"], "read-only without --mcp-write");
    let (_, said) = mcp(
        Some(&session),
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": "show", "arguments": { "id": first } } }),
    );
    let shown: Value =
        serde_json::from_str(said[0]["result"]["content"][0]["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(shown["title"], "Write the parser");

    let out = repo.run(&["serve", "--listen", "0.0.0.0:0"]).code(2);
    assert!(out.stderr.contains("needs a token"), "{}", out.stderr);
}

/// A W3C WebDriver session of ChromeDriver driving headless Chromium, ended when dropped.
struct Browser {
    driver: Child,
    addr: String,
    session: String,
}

impl Browser {
    /// `None`: Chromium or ChromeDriver is not installed (and `CI` is unset: the test is skipped).
    fn start(env: &TestEnv) -> Option<Browser> {
        let chromium = tool("chromium", "chromium")?;
        let chromedriver = tool("chromedriver", "chromium-driver")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
        let driver = std::process::Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = env.path("chromium-profile");
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--user-data-dir={}", profile.display())])
        .collect::<Vec<_>>();
        let capabilities = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args },
        }}});
        let mut browser = Browser { driver, addr, session: String::new() };
        let created = browser.call("POST", "/session", Some(&capabilities));
        browser.session =
            created["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("a session: {created}")).to_owned();
        Some(browser)
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (_, body) = call(&self.addr, method, path, &[], body);
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    }

    fn session(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    fn go(&self, url: &str) {
        self.session("POST", "/url", Some(&json!({ "url": url })));
    }

    /// Run `script` in the page: its return value.
    fn eval(&self, script: &str) -> Value {
        self.session("POST", "/execute/sync", Some(&json!({ "script": script, "args": [] })))["value"].clone()
    }

    /// Wait (up to `within`) until `script` returns true.
    fn wait(&self, what: &str, script: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while self.eval(script) != json!(true) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn click(&self, css: &str) {
        let found = self.session("POST", "/element", Some(&json!({ "using": "css selector", "value": css })));
        // Not there (drawn again meanwhile): the caller tries again.
        let Some(element) = found["value"].as_object().and_then(|o| o.values().next()).and_then(Value::as_str) else {
            return;
        };
        let element = element.to_owned();
        self.session("POST", &format!("/element/{element}/click"), Some(&json!({})));
    }

    /// Click `css` until the page asks something (`confirm`), finding it again each time.
    fn click_until_asked(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            self.click(css);
            let asked = Instant::now() + Duration::from_secs(2);
            while Instant::now() < asked {
                if self.session("GET", "/alert/text", None)["value"].is_string() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(Instant::now() < deadline, "clicking {css} asked nothing");
        }
    }

    fn screenshot(&self, to: &std::path::Path) {
        let shot = self.session("GET", "/screenshot", None);
        let png = base64_decode(shot["value"].as_str().expect("a screenshot"));
        std::fs::write(to, png).expect("write the screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64, for WebDriver's screenshots.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &c)| n | (u32::from(value(c)) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// The board in headless Chromium: a task added from the command line shows within 2 s; a
/// hostile title is text, and its script never runs; a stop clicked in the page stops a running
/// session; a missing or a wrong token gets no board; at 390×844 the page has no horizontal
/// scroll. With GIT_LOOP_SCREENSHOTS=<dir>, the board is photographed wide and on a phone.
#[test]
fn the_board_in_a_browser_is_live_safe_acts_and_fits_a_phone() {
    let env = TestEnv::new();
    let Some(browser) = Browser::start(&env) else { return };
    let repo = env.repo("r");
    let hostile = "<img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script> Tidy up";
    let evil = repo.add(&[hostile]);
    let long = repo.add(&["Sleep on it", "--body", "a session that runs until stopped"]);
    let agent = env.agent("slow", "echo started; sleep 60");
    repo.git(&["config", "loop.agent.slow.command", &agent]);
    let serving = Serving::start(&repo);

    // No token: the page asks for one, and shows nothing.
    browser.go(&serving.url());
    browser.wait("the token form", "return !document.getElementById('login').hidden", Duration::from_secs(10));
    assert_eq!(browser.eval("return document.querySelectorAll('.card').length"), json!(0));
    // A wrong one is refused.
    browser.go(&format!("{}/#token=wrong", serving.url()));
    browser.eval("location.reload(); return true");
    browser.wait(
        "the refusal",
        "return document.getElementById('connection').textContent === 'the token was refused'",
        Duration::from_secs(10),
    );

    // The token: the board, with the hostile title as text and its script never run.
    browser.go(&format!("{}/#token={}", serving.url(), serving.token));
    browser.eval("location.reload(); return true");
    let card = |id: &str| format!("document.querySelector('[data-task=\"{id}\"]')");
    browser.wait("the board", &format!("return {} !== null", card(&evil)), Duration::from_secs(10));
    assert_eq!(browser.eval(&format!("return {}.querySelector('.title').textContent", card(&evil))), json!(hostile));
    assert_eq!(browser.eval("return document.querySelectorAll('.card img, .card script').length"), json!(0));
    assert_eq!(browser.eval("return window.pwned === undefined"), json!(true));
    assert_eq!(browser.eval("return location.hash"), json!(""), "the token is taken out of the address");
    assert_eq!(
        browser.eval("return getComputedStyle(document.getElementById('login')).display"),
        json!("none"),
        "no token form on a live board"
    );

    // A task added from the command line shows within 2 s.
    let added_at = Instant::now();
    let fresh = repo.add(&["Added from the command line"]);
    browser.wait("the new task", &format!("return {} !== null", card(&fresh)), Duration::from_secs(2));
    assert!(added_at.elapsed() < Duration::from_secs(2));

    // Browser notifications, as a page allowed to show them would: recorded here.
    browser.eval(
        "window.shown = []; window.Notification = class { constructor(title, options) { \
         window.shown.push({ title, tag: options.tag, body: options.body }); } \
         static get permission() { return 'granted'; } static requestPermission() { return Promise.resolve('granted'); } }; \
         return true",
    );
    // A running session, stopped from the page.
    let mut walk = repo
        .command(&["run", "--agent", "slow", "--task", &long, "--sandbox", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a walk");
    let stop = format!("section[aria-label=\"running\"] [data-task=\"{long}\"] button[data-verb=\"stop\"]");
    browser.wait(
        "the running session",
        &format!("return document.querySelector('{stop}') !== null"),
        Duration::from_secs(30),
    );
    // The board is drawn again as the session writes: a button found may be gone by its click.
    browser.click_until_asked(&stop);
    browser.session("POST", "/alert/accept", Some(&json!({})));
    let deadline = Instant::now() + Duration::from_secs(30);
    while state(&repo, &long) != "needs-decision" {
        assert!(
            Instant::now() < deadline,
            "the stop clicked in the page did not stop the session: {}",
            state(&repo, &long)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // It waits for a person now: the page says why and how to answer it.
    browser.wait(
        "the stopped task's answers",
        &format!(
            "const c = {}; return c !== null && c.closest('section').getAttribute('aria-label') === 'needs you' \
             && c.querySelector('.reason').textContent.includes('stopped') \
             && Array.from(c.querySelectorAll('.answers li')).some((l) => l.textContent.includes('git loop reopen'))",
            card(&long)
        ),
        Duration::from_secs(10),
    );
    // The page told of it: on the page, and as a notification.
    browser.wait(
        "a notification of the stopped task",
        &format!("return window.shown.some((n) => n.tag === '{long}' && n.title === '{long} needs you')"),
        Duration::from_secs(10),
    );
    let journaled = || {
        let log = repo.run(&["log", "--json"]).ok().json();
        log["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["kind"] == "board_action" && e["data"]["verb"] == "stop")
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !journaled() {
        assert!(Instant::now() < deadline, "the stop was not journaled as a board_action");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = walk.kill();
    let _ = walk.wait();

    let shots = std::env::var_os("GIT_LOOP_SCREENSHOTS").map(std::path::PathBuf::from);
    if let Some(dir) = &shots {
        browser.screenshot(&dir.join("serve-wide.png"));
    }
    // A phone: 390×844, no horizontal scroll.
    browser.session(
        "POST",
        "/goog/cdp/execute",
        Some(&json!({ "cmd": "Emulation.setDeviceMetricsOverride",
                      "params": { "width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": true } })),
    );
    browser.eval("location.reload(); return true");
    browser.wait("the board on a phone", &format!("return {} !== null", card(&evil)), Duration::from_secs(10));
    assert_eq!(browser.eval("return window.innerWidth"), json!(390));
    assert_eq!(
        browser.eval("return document.documentElement.scrollWidth <= window.innerWidth"),
        json!(true),
        "scroll width {} at 390",
        browser.eval("return document.documentElement.scrollWidth")
    );
    if let Some(dir) = &shots {
        browser.screenshot(&dir.join("serve-phone.png"));
    }
}
