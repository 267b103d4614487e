//! `git loop serve`: the board in a browser, kept live.
//!
//! One process, any clone: it reads what `status` and the terminal board read
//! (`ops::status::overview`, turned into the board's columns by `board::model`) and keeps no
//! state of its own, so it can be stopped, restarted, or run several times at once. A thread
//! (the hub) reads the board again when the watch of the ref directories says something changed
//! (every 5 s anyway, every second for the sessions' output), and each browser's stream of
//! server-sent events gets the board whenever it changed. Actions run the terminal board's verbs
//! (`board::act`, the command line's library functions), each journaled as a `board_action`
//! naming who and from where, what came of it included (a refusal too).
//!
//! Security: the page and its script are static (no data in them) and served to anyone; every
//! `/api/` request needs the token (`Authorization: Bearer`), which the page reads from its
//! address's fragment (never sent to a server) and keeps for the tab. No cookie: another site
//! cannot act through a browser that has the board open. The content security policy runs our
//! script alone, and the script writes what tasks hold as text, never as markup.

mod http;
mod mcp;

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};

use super::board::{self, Verb};
use super::env::Env;
use git_loop::error::{find_refusal, usage, Class};
use git_loop::ops::status;
use git_loop::refs;
use git_loop::store::events::{self, Recorded};
use git_loop::store::watch::{Changes, Watch};
use git_loop::store::Store;

/// Serve the board in a browser: live, with its actions.
///
/// The board's columns, the sessions running here with their output, the journal's tail, what
/// was spent and the landing queue, kept current by server-sent events; a task's actions (stop,
/// reassign, take over, hand back, reopen, park) run what the command line runs, each
/// journaled as board_action with who and from where. At /mcp, the tools of 'git loop mcp' over
/// streamable HTTP (read-only unless --mcp-write). Every request of its API needs the token:
/// loop.serve.token, else a new one printed at start (on 127.0.0.1 only: any other address
/// refuses to start without loop.serve.token, and warns without TLS in front). Stop it with
/// Ctrl-C.
///
/// Example: git loop serve --listen 127.0.0.1:7341
#[derive(Args)]
pub struct ServeArgs {
    /// Where to listen: host:port (port 0 takes a free one; the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7341")]
    listen: String,
    /// Offer the MCP tools that write (add, edit, next with claim, finish) at /mcp, as
    /// 'git loop mcp --write' does; without it /mcp is read-only.
    #[arg(long)]
    mcp_write: bool,
}

/// The page and its script and styles: static, no data in them.
const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");

/// How long a request may take to arrive.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many connections at once (streams included); more are answered 503.
const MAX_CONNECTIONS: usize = 64;
/// The ref directories whose changes have the board read again at once.
const WATCHED: [&str; 4] = [refs::TASKS, "refs/loop/claims/node/", "refs/loop/claims/walker/", refs::JOURNAL];
/// How often the hub looks at the watch.
const TICK: Duration = Duration::from_millis(150);
/// Everything is read again at least this often (leases age, sessions write output).
const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// The sessions' output is read again this often while any runs.
const SESSIONS_EVERY: Duration = Duration::from_secs(1);
/// The shortest time between two reads when the watch says something changed.
const RELOAD_AT_MOST: Duration = Duration::from_millis(250);
/// A quiet stream says it is alive this often.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub fn run(env: &Env, args: ServeArgs) -> Result<u8> {
    let store = env.open()?;
    let addr = resolve(&args.listen)?;
    let configured = store.settings().serve_token().filter(|t| !t.is_empty());
    if !addr.ip().is_loopback() && configured.is_none() {
        return Err(usage(format!("serving on {addr} needs a token set beforehand: anyone who reaches it could act"))
            .hint("git config loop.serve.token \"$(openssl rand -hex 24)\", or listen on 127.0.0.1")
            .into());
    }
    if configured.as_deref().is_some_and(|t| t.len() < 16) {
        return Err(usage("loop.serve.token is shorter than 16 characters").hint("use a long random one").into());
    }
    let listener = TcpListener::bind(addr).map_err(|err| {
        usage(format!("cannot listen on {addr}: {err}"))
            .hint("pick another port with --listen 127.0.0.1:<port> (0: any free one)")
    })?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() {
        super::output::stderr_line(format!(
            "warning: serving on {local} without TLS: the token and the board cross the network in the clear; put a TLS proxy in front"
        ));
    }
    let token = configured.clone().unwrap_or_else(|| git_loop::ids::random_base32(32));
    let root = store.workdir().to_owned();
    drop(store);
    let mut out = super::output::Out::new();
    match configured {
        Some(_) => {
            out.line(format!("serving the board of {} on http://{local}/ (token: loop.serve.token)", root.display()))?
        }
        None => out.line(format!("serving the board of {} on http://{local}/#token={token}", root.display()))?,
    }
    drop(out);
    let endpoint = mcp::Endpoint::new(
        super::mcp::Loop::new(env.exe.clone(), root.clone(), args.mcp_write),
        &local.ip().to_string(),
    )?;
    let server = Server { env, token, hub: Hub::default(), open: AtomicUsize::new(0), endpoint };
    std::thread::scope(|scope| {
        scope.spawn(|| server.hub.run(env));
        let result = server.accept(scope, &listener);
        server.hub.stop();
        result
    })?;
    Ok(super::exit::INTERRUPTED)
}

/// `host:port` as an address to bind.
fn resolve(listen: &str) -> Result<SocketAddr> {
    let bad = || {
        usage(format!("'{}' is not an address to listen on", listen.escape_debug()))
            .hint("e.g. --listen 127.0.0.1:7341")
    };
    listen.to_socket_addrs().map_err(|_| bad())?.next().ok_or_else(|| bad().into())
}

struct Server<'e> {
    env: &'e Env,
    token: String,
    hub: Hub,
    open: AtomicUsize,
    /// MCP at /mcp.
    endpoint: mcp::Endpoint,
}

impl<'e> Server<'e> {
    /// Take connections until Ctrl-C, each on a thread of its own.
    fn accept<'s>(&'s self, scope: &'s std::thread::Scope<'s, 'e>, listener: &TcpListener) -> Result<()> {
        loop {
            if gix::interrupt::is_triggered() {
                return Ok(());
            }
            match listener.accept() {
                Ok((stream, peer)) => {
                    let _ = stream.set_nonblocking(false);
                    if self.open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                        self.open.fetch_sub(1, Ordering::SeqCst);
                        let mut stream = stream;
                        let _ = http::json(&mut stream, 503, &json!({ "error": "too many connections" }));
                        continue;
                    }
                    scope.spawn(move || {
                        self.handle(stream, peer);
                        self.open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err.into()),
            }
        }
    }

    fn handle(&self, mut stream: TcpStream, peer: SocketAddr) {
        let request = match http::read(&stream, READ_TIMEOUT) {
            Ok(request) => request,
            Err(http::Unreadable(Some(status))) => {
                let _ = http::json(&mut stream, status, &json!({ "error": "the request could not be read" }));
                return;
            }
            Err(http::Unreadable(None)) => return,
        };
        let _ = self.route(&mut stream, &request, peer);
    }

    fn route(&self, stream: &mut TcpStream, request: &http::Request, peer: SocketAddr) -> std::io::Result<()> {
        let method = request.method.as_str();
        match (method, request.path.as_str()) {
            ("GET", "/") => return http::respond(stream, 200, "text/html; charset=utf-8", PAGE.as_bytes()),
            ("GET", "/app.js") => {
                return http::respond(stream, 200, "text/javascript; charset=utf-8", SCRIPT.as_bytes())
            }
            ("GET", "/app.css") => return http::respond(stream, 200, "text/css; charset=utf-8", STYLE.as_bytes()),
            (_, "/mcp") => {
                if !self.authorized(request) {
                    return http::json(stream, 401, &json!({ "error": "a token is needed" }));
                }
                return self.endpoint.answer(stream, request);
            }
            (_, path) if !path.starts_with("/api/") => {
                return http::json(stream, 404, &json!({ "error": "no such page" }));
            }
            _ => {}
        }
        if !self.authorized(request) {
            return http::json(
                stream,
                401,
                &json!({ "error": "a token is needed", "hint": "open the address 'git loop serve' printed, with its #token=…" }),
            );
        }
        let parts: Vec<&str> = request.path.trim_start_matches("/api/").split('/').collect();
        match (method, parts.as_slice()) {
            ("GET", ["board"]) => {
                let (_, board) = self.hub.wait(0, Duration::from_secs(10));
                http::respond(stream, 200, "application/json; charset=utf-8", board.as_bytes())
            }
            ("GET", ["events"]) => self.events(stream),
            ("GET", ["tasks", id, "output"]) => {
                let value = self.output(id);
                http::json(stream, 200, &value)
            }
            ("POST", ["tasks", id, verb]) => {
                // A request another page could make without asking (a form's) is refused: ours
                // sends JSON.
                if !request.header("content-type").is_some_and(|t| t.starts_with("application/json")) {
                    return http::json(stream, 400, &json!({ "error": "send the action as JSON" }));
                }
                let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
                let (status, value) = self.act(id, verb, &body, peer);
                http::json(stream, status, &value)
            }
            ("GET" | "POST", _) => http::json(stream, 404, &json!({ "error": "no such call" })),
            _ => http::json(stream, 405, &json!({ "error": "method not allowed" })),
        }
    }

    fn authorized(&self, request: &http::Request) -> bool {
        let given = request.header("authorization").and_then(|h| h.strip_prefix("Bearer ")).map(str::trim);
        given.is_some_and(|t| http::same_secret(t, &self.token))
    }

    /// The board as a stream of server-sent events: `board` at once and whenever it changes.
    fn events(&self, stream: &mut TcpStream) -> std::io::Result<()> {
        http::start_events(stream)?;
        let mut seen = 0;
        let mut quiet = Instant::now();
        loop {
            let (version, board) = self.hub.wait(seen, Duration::from_secs(1));
            if self.hub.stopping() {
                return Ok(());
            }
            if version != seen {
                seen = version;
                http::event(stream, "board", &board)?;
                quiet = Instant::now();
            } else if quiet.elapsed() >= KEEP_ALIVE {
                http::keep_alive(stream)?;
                quiet = Instant::now();
            }
        }
    }

    /// The last output of a task's session on this machine.
    fn output(&self, id: &str) -> Value {
        // A handle of its own, not the command's (`env.open` keeps each handle's writes until a
        // publish: a page following output would grow that list every second).
        let Ok(store) = Store::open(&self.env.ctx, &self.env.cwd) else { return json!({ "task": id, "lines": [] }) };
        let Ok(loop_dir) = store.loop_dir() else { return json!({ "task": id, "lines": [] }) };
        match super::watch::session_of(&loop_dir, &self.env.ctx, id) {
            Some((r, running)) => {
                let log = git_loop::agent::record::dir(&loop_dir, &r.session).join("log");
                let text = git_loop::agent::record::tail(&log, 200);
                let lines: Vec<String> = text.lines().map(|l| super::text::line(l).into_owned()).collect();
                json!({ "task": id, "session": r.session, "agent": r.agent, "try": r.try_number, "running": running, "lines": lines })
            }
            None => json!({ "task": id, "lines": [] }),
        }
    }

    /// Run a verb on a task, journaled first with who and from where.
    fn act(&self, id: &str, verb: &str, body: &Value, peer: SocketAddr) -> (u16, Value) {
        let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::trim).unwrap_or_default().to_owned();
        let verb = match verb {
            "stop" => Verb::Stop,
            "reassign" if !text("agent").is_empty() => Verb::Reassign(text("agent")),
            "take-over" => Verb::TakeOver,
            "hand-back" => Verb::HandBack(body.get("keep").and_then(Value::as_bool).unwrap_or(false)),
            "reopen" => Verb::Reopen,
            "park" if !text("reason").is_empty() => Verb::Park(text("reason")),
            "reassign" | "park" => {
                return (
                    400,
                    json!({ "error": format!("{verb} needs {}", if verb == "park" { "a reason" } else { "an agent" }) }),
                )
            }
            other => {
                return (404, json!({ "error": format!("'{}' is not an action of the board", other.escape_debug()) }))
            }
        };
        let word = match &verb {
            Verb::Stop => "stop",
            Verb::Reassign(_) => "reassign",
            Verb::TakeOver => "take-over",
            Verb::HandBack(_) => "hand-back",
            Verb::Reopen => "reopen",
            Verb::Park(_) => "park",
        };
        let result = board::act(self.env, id, &verb);
        let (done, outcome) = match &result {
            Ok(lines) => (true, lines.first().cloned().unwrap_or_default()),
            Err(err) => (false, board::one_line(err)),
        };
        if let Ok(store) = self.env.open() {
            let task = git_loop::backlog::resolve(&store, id).ok();
            let by = git_loop::backlog::person(&store);
            let event = Recorded::BoardAction(events::BoardAction {
                verb: word.to_owned(),
                by,
                from: peer.to_string(),
                outcome: outcome.clone(),
                done,
            });
            let _ = git_loop::backlog::record(&store, &self.env.ctx, task.as_ref(), event);
        }
        // What the verb changed goes to the remote, as the command line sends it.
        self.env.publish();
        self.hub.poke();
        match result {
            Ok(lines) => (200, json!({ "task": id, "verb": word, "lines": lines })),
            Err(err) => {
                let status = match find_refusal(&err).map(|r| r.class) {
                    Some(Class::Usage) => 400,
                    Some(Class::Refused | Class::Busy) => 409,
                    _ => 500,
                };
                let hint = find_refusal(&err).and_then(|r| r.hint.clone());
                (status, json!({ "error": outcome, "hint": hint }))
            }
        }
    }
}

/// The board as last read, numbered; readers wait for a number they have not seen.
#[derive(Default)]
struct Hub {
    state: Mutex<(u64, Arc<String>)>,
    changed: Condvar,
    stopping: AtomicBool,
    /// Asked to read again at once (an action ran).
    poked: AtomicBool,
}

impl Hub {
    /// Read the board whenever it may have changed, until stopped.
    fn run(&self, env: &Env) {
        let mut store: Option<Store> = None;
        let mut watch: Option<Watch> = None;
        let mut last = Instant::now() - RELOAD_EVERY;
        let mut sessions = Instant::now();
        let mut changed = true;
        let remote_sync = Sync::new(env);
        while !self.stopping() && !gix::interrupt::is_triggered() {
            if store.is_none() {
                store = env.open().ok();
                watch = store.as_ref().map(|s| Watch::new(s.common_dir(), &WATCHED));
            }
            let Some(s) = &store else {
                std::thread::sleep(Duration::from_secs(1));
                continue;
            };
            if let Some(w) = &mut watch {
                changed |= watched(s, w);
            }
            changed |= self.poked.swap(false, Ordering::SeqCst);
            let since = last.elapsed();
            let running = self.state.lock().unwrap_or_else(|p| p.into_inner()).1.contains("\"sessions\":[{");
            if (changed && since >= RELOAD_AT_MOST)
                || since >= RELOAD_EVERY
                || (running && sessions.elapsed() >= SESSIONS_EVERY)
            {
                changed = false;
                last = Instant::now();
                sessions = last;
                let read = read_board(env, s, remote_sync.line());
                self.publish(read);
            }
            remote_sync.tick(env);
            std::thread::sleep(TICK);
        }
        self.stop();
    }

    /// Keep `board` if it differs from what readers have.
    fn publish(&self, board: Value) {
        let text = board.to_string();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if *state.1 != text {
            state.0 += 1;
            state.1 = Arc::new(text);
            self.changed.notify_all();
        }
    }

    /// The board once its number is past `seen` (at most `timeout` later: then as it is).
    fn wait(&self, seen: u64, timeout: Duration) -> (u64, Arc<String>) {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |s| (s.0 <= seen || s.0 == 0) && !self.stopping())
            .unwrap_or_else(|p| p.into_inner());
        (state.0, state.1.clone())
    }

    fn poke(&self) {
        self.poked.store(true, Ordering::SeqCst);
    }

    fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.changed.notify_all();
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// Whether the watch says a ref the board shows changed (see `board`'s own).
fn watched(store: &Store, watch: &mut Watch) -> bool {
    let common = store.common_dir().to_owned();
    let mut changed = false;
    for prefix in WATCHED {
        changed |= match watch.changes(prefix) {
            Changes::All => common.join(prefix.trim_end_matches('/')).is_dir(),
            Changes::Names(names) => !names.is_empty(),
        };
    }
    changed
}

/// The board as the page draws it: the terminal board's model, with its columns named, the
/// landing queue and what was spent; or what went wrong reading it.
fn read_board(env: &Env, store: &Store, synced: Option<String>) -> Value {
    let read = || -> Result<Value> {
        let overview = status::overview(store, &env.ctx)?;
        let model = board::model(env, store, &overview, synced.as_deref())?;
        let columns: Vec<Value> = ["ready", "running", "needs you", "done", "parked", "failed"]
            .iter()
            .zip(model.columns.iter().zip(model.more))
            .map(|(name, (cards, more))| json!({ "name": name, "cards": cards, "more": more }))
            .collect();
        // How to answer each task that waits for a person: its reason, and the ways (`show`).
        let waiting: serde_json::Map<String, Value> = overview
            .waiting
            .iter()
            .map(|t| {
                let (answers, failure) = overview
                    .answers
                    .get(&t.id)
                    .map_or((json!([]), Value::Null), |(w, f)| super::answer::json(w, f.as_ref()));
                (t.id.clone(), json!({ "state": t.state, "reason": t.reason, "answers": answers, "failure": failure }))
            })
            .collect();
        Ok(json!({
            "repository": store.workdir().display().to_string(),
            "waiting": waiting,
            "header": model.header,
            "columns": columns,
            "sessions": model.sessions,
            "journal": model.journal,
            "spent": super::cost::total_json(&overview.spent),
            "landing": overview.landing.as_ref().map(super::output::landing_json),
            "read_at": env.ctx.now(),
        }))
    };
    read().unwrap_or_else(|err| json!({ "error": board::one_line(&err), "read_at": env.ctx.now() }))
}

/// Syncing with `loop.remote` on its timer, as the terminal board does, so what the page shows
/// is the fleet's.
struct Sync {
    remote: Option<String>,
    every: Option<Duration>,
    last: Mutex<Instant>,
    said: Mutex<Option<String>>,
}

impl Sync {
    fn new(env: &Env) -> Sync {
        let store = Store::open(&env.ctx, &env.cwd).ok();
        let remote = store.as_ref().and_then(Store::arbiter);
        let every = match (&store, &remote) {
            (Some(store), Some(_)) => store.settings().sync_every().ok().flatten(),
            _ => None,
        };
        Sync { remote, every, last: Mutex::new(Instant::now()), said: Mutex::new(None) }
    }

    fn tick(&self, env: &Env) {
        let (Some(remote), Some(every)) = (&self.remote, self.every) else { return };
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() < every {
            return;
        }
        *last = Instant::now();
        let said = match Store::open(&env.ctx, &env.cwd)
            .and_then(|store| git_loop::store::sync::sync(&store, &env.ctx, remote))
        {
            Ok(_) => {
                format!("synced with {remote} at {}", env.ctx.now().with_timezone(&chrono::Local).format("%H:%M:%S"))
            }
            Err(err) => format!("sync with {remote} failed: {}", board::one_line(&err)),
        };
        *self.said.lock().unwrap_or_else(|p| p.into_inner()) = Some(said);
    }

    fn line(&self) -> Option<String> {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
