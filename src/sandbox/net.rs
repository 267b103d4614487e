//! The network policy `allow` (`loop.sandbox.network = allow`): a confined run reaches only the
//! hosts its allow-list names, through a filtering proxy outside its sandbox.
//!
//! The run has a network namespace of its own, with loopback only. Its session guard (outside)
//! serves a proxy on a Unix socket in the run's room ([`Proxy`]); the socket is bound into the
//! sandbox, and the run's first process inside is this program's [`bridge`]: it listens on the
//! namespace's loopback, points `HTTP(S)_PROXY` there and tunnels every connection to the
//! socket, then runs the command. A listed loopback address (`127.0.0.1:8080`, a model server
//! on the host) is also listened on inside at the same address and tunnelled there, so a
//! client that ignores proxies reaches it as it would outside.
//!
//! The proxy speaks HTTP `CONNECT` (what HTTPS goes through) and plain HTTP requests in
//! absolute form. A host not on the list is refused (`403`) and written once to the room's
//! `blocked` file, which the walk journals once per host per session; a listed name is
//! connected to at an address it resolved itself, and a loopback, private or link-local
//! address only where a person listed that name (a preset's API host that resolves to one is
//! refused: DNS could point it anywhere).

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};

/// The room's directory of the network policy: the allow-list, the proxy's socket, and the
/// hosts it refused.
pub const DIR: &str = "net";
/// The allow-list, one entry a line.
pub const ALLOW_FILE: &str = "allow";
/// The proxy's socket.
pub const SOCKET: &str = "proxy.sock";
/// The hosts refused, one a line, each once.
pub const BLOCKED_FILE: &str = "blocked";

/// The proxy's socket for the policy in `dir`: in `dir`, or, where that path is too long for a
/// Unix socket's address (108 bytes on Linux), in the temporary directory under a name drawn
/// from it.
pub fn socket_path(dir: &Path) -> PathBuf {
    let inside = dir.join(SOCKET);
    if inside.as_os_str().len() < 100 {
        return inside;
    }
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    dir.hash(&mut hasher);
    std::env::temp_dir().join(format!("git-loop-net-{:016x}.sock", hasher.finish()))
}

/// The (internal) subcommand that runs the bridge inside a sandbox: `git-loop sandbox-net …`.
pub const SUBCOMMAND: &str = "sandbox-net";

/// Where an entry of the allow-list came from: a person's (`loop.sandbox.allow`, a base URL
/// the agent's environment names) may name a loopback or private address; a preset's may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Person,
    Preset,
}

/// One entry: `host`, `host:port`, `*.domain` (the domain's subdomains), an IP address, with an
/// optional port (any port without one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Lowercase; for `*.example.com`, `.example.com`.
    host: String,
    port: Option<u16>,
    source: Source,
}

impl Entry {
    /// Read an entry as a setting writes it; `Err` says what is wrong.
    pub fn parse(text: &str, source: Source) -> Result<Entry, String> {
        let text = text.trim();
        let without_scheme = text.split_once("://").map_or(text, |(_, rest)| rest);
        let authority = without_scheme.split('/').next().unwrap_or_default();
        let (host, port) = split_host_port(authority)?;
        let host = host.to_ascii_lowercase();
        let wild = host.strip_prefix("*.");
        let name = wild.unwrap_or(&host);
        let valid = !name.is_empty()
            && (name.parse::<IpAddr>().is_ok()
                || name.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                }));
        if !valid {
            return Err(format!("'{}' is not a host, host:port or *.domain", text.escape_debug()));
        }
        let host = match wild {
            Some(domain) => format!(".{domain}"),
            None => host,
        };
        Ok(Entry { host, port, source })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        let name_matches = match self.host.strip_prefix('.') {
            Some(domain) => host.len() > domain.len() + 1 && host.ends_with(&self.host),
            None => host == self.host,
        };
        name_matches && self.port.is_none_or(|p| p == port)
    }

    /// As written in the allow file: `host:port`, `*.domain`, `P ` before a person's.
    fn line(&self) -> String {
        let host = match self.host.strip_prefix('.') {
            Some(domain) => format!("*.{domain}"),
            None if self.host.contains(':') => format!("[{}]", self.host),
            None => self.host.clone(),
        };
        let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
        let who = match self.source {
            Source::Person => "person",
            Source::Preset => "preset",
        };
        format!("{who} {host}{port}")
    }

    /// The entry with `port` where it names none.
    pub fn with_default_port(mut self, port: u16) -> Entry {
        self.port = self.port.or(Some(port));
        self
    }

    /// As people write it: `api.anthropic.com`, `*.npmjs.org`, `127.0.0.1:8080`.
    pub fn shown(&self) -> String {
        self.line().split_once(' ').map(|(_, e)| e.to_owned()).unwrap_or_default()
    }

    /// A loopback address and port a client would connect to directly (`127.0.0.1:8080`,
    /// `localhost:8080`), which the bridge listens on inside.
    pub fn loopback(&self) -> Option<SocketAddr> {
        let port = self.port?;
        let ip: IpAddr = match self.host.as_str() {
            "localhost" => IpAddr::from([127, 0, 0, 1]),
            other => other.parse().ok()?,
        };
        ip.is_loopback().then_some(SocketAddr::new(ip, port))
    }
}

/// `host[:port]`, `[v6]:port`, `v6`.
fn split_host_port(authority: &str) -> Result<(String, Option<u16>), String> {
    let bad_port = |p: &str| format!("'{}' is not a port", p.escape_debug());
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) =
            rest.split_once(']').ok_or_else(|| format!("'{}' has no closing ']'", authority.escape_debug()))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse::<u16>().map_err(|_| bad_port(p))?),
            None if after.is_empty() => None,
            None => return Err(format!("'{}' is not a host", authority.escape_debug())),
        };
        return Ok((host.to_owned(), port));
    }
    if authority.matches(':').count() > 1 {
        return Ok((authority.to_owned(), None));
    }
    match authority.split_once(':') {
        Some((host, p)) => Ok((host.to_owned(), Some(p.parse::<u16>().map_err(|_| bad_port(p))?))),
        None => Ok((authority.to_owned(), None)),
    }
}

/// An allow-list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allow(pub Vec<Entry>);

impl Allow {
    /// The entries that let `host:port` through, if any does: whether one is a person's.
    fn admits(&self, host: &str, port: u16) -> Option<Source> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let matching: Vec<&Entry> = self.0.iter().filter(|e| e.matches(host, port)).collect();
        if matching.is_empty() {
            return None;
        }
        Some(if matching.iter().any(|e| e.source == Source::Person) { Source::Person } else { Source::Preset })
    }

    /// Write it where the guard reads it.
    pub fn write(&self, file: &Path) -> Result<()> {
        let text: String = self.0.iter().map(|e| e.line() + "\n").collect();
        std::fs::write(file, text).with_context(|| format!("could not write '{}'", file.display()))
    }

    /// Read what [`Allow::write`] wrote.
    pub fn read(file: &Path) -> Result<Allow> {
        let text = std::fs::read_to_string(file).with_context(|| format!("could not read '{}'", file.display()))?;
        let mut entries = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (who, entry) = line.split_once(' ').unwrap_or(("person", line));
            let source = if who == "preset" { Source::Preset } else { Source::Person };
            entries.push(Entry::parse(entry, source).map_err(anyhow::Error::msg)?);
        }
        Ok(Allow(entries))
    }

    /// The loopback addresses it names with a port, for the bridge to listen on inside.
    pub fn loopbacks(&self) -> Vec<SocketAddr> {
        let mut all: Vec<SocketAddr> = self.0.iter().filter_map(Entry::loopback).collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Whether `ip` is an address of this machine or a private network: reachable through the
/// proxy only where a person listed it.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || (a == 100 && (64..128).contains(&b))
                || a == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// What the proxy decided about one request.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Connect here.
    Through(SocketAddr),
    /// Refused, and why.
    Refused(String),
}

/// Decide `host:port` against `allow`, resolving the name once.
fn decide(allow: &Allow, host: &str, port: u16) -> Verdict {
    let Some(source) = allow.admits(host, port) else {
        return Verdict::Refused(format!("{host}:{port} is not on the allow-list (loop.sandbox.allow)"));
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<SocketAddr> = match (bare, port).to_socket_addrs() {
        Ok(found) => found.collect(),
        Err(err) => return Verdict::Refused(format!("{host} does not resolve: {err}")),
    };
    match addresses.iter().find(|a| source == Source::Person || !is_internal(a.ip())) {
        Some(address) => Verdict::Through(*address),
        None => Verdict::Refused(format!(
            "{host} resolves to an address of this machine or a private network, which only a person's loop.sandbox.allow may name"
        )),
    }
}

/// The filtering proxy, served by a session's guard on the room's socket for as long as it
/// lives.
pub struct Proxy {
    path: PathBuf,
}

impl Proxy {
    /// Read the allow-list in `dir`, bind its socket and serve it on a thread of its own.
    pub fn start(dir: &Path, log: &Path) -> Result<Proxy> {
        let allow = Arc::new(Allow::read(&dir.join(ALLOW_FILE))?);
        let path = socket_path(dir);
        let _ = std::fs::remove_file(&path);
        let listener =
            UnixListener::bind(&path).with_context(|| format!("could not listen on '{}'", path.display()))?;
        let blocked = Arc::new(Mutex::new(BTreeSet::new()));
        let (blocked_file, log) = (dir.join(BLOCKED_FILE), log.to_owned());
        let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                use std::sync::atomic::Ordering;
                // A run that opens connections without end gets refusals, not the guard's
                // threads.
                if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::SeqCst);
                    let _ = refuse(&mut conn, "too many connections at once");
                    continue;
                }
                let (allow, blocked, blocked_file, log) =
                    (allow.clone(), blocked.clone(), blocked_file.clone(), log.clone());
                let open = open.clone();
                std::thread::spawn(move || {
                    // Written before the client hears of it, so the record is never behind;
                    // each host once, and no more than MAX_HOSTS_SAID of them.
                    serve(conn, &allow, &|host: &str, why: &str| {
                        let first = blocked
                            .lock()
                            .map(|mut seen| seen.len() < MAX_HOSTS_SAID && seen.insert(host.to_owned()))
                            .unwrap_or(false);
                        if first {
                            append(&blocked_file, &format!("{host}\n"));
                            append(&log, &format!("git-loop: a connection to {host} was refused: {why}\n"));
                        }
                    });
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Ok(Proxy { path })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn append(file: &Path, text: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
        let _ = f.write_all(text.as_bytes());
    }
}

/// How many connections one run's proxy serves at once.
const MAX_CONNECTIONS: usize = 256;
/// How many refused hosts one run's proxy writes down.
const MAX_HOSTS_SAID: usize = 1000;

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;

/// Serve one connection; `refused(host, why)` is told of a refusal before the client is.
fn serve(conn: UnixStream, allow: &Allow, refused: &dyn Fn(&str, &str)) -> Option<()> {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let read = (&mut reader).take((MAX_HEAD - head.len()) as u64).read_until(b'\n', &mut head).ok()?;
        if read == 0 || head.len() >= MAX_HEAD {
            return None;
        }
        if head[before..] == *b"\r\n" || head[before..] == *b"\n" {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let first = text.lines().next().unwrap_or_default().to_owned();
    let mut words = first.split_whitespace();
    let (method, target, version) = (words.next()?, words.next()?, words.next().unwrap_or("HTTP/1.1"));
    let mut conn = conn;
    let (host, port, forward) = if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_host_port(target).ok()?;
        (host, port.unwrap_or(443), None)
    } else {
        let Some(rest) = target.strip_prefix("http://") else {
            let _ = refuse(&mut conn, "only CONNECT and http:// requests go through this proxy");
            return None;
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        let (host, port) = split_host_port(authority).ok()?;
        let rest_of_head = &text[first.len()..];
        (host, port.unwrap_or(80), Some(format!("{method} {path} {version}{rest_of_head}")))
    };
    // What the run asked for, as one short line (it goes into a log and the journal).
    let shown: String = format!("{}:{port}", host.escape_debug()).chars().take(200).collect();
    let upstream = match decide(allow, &host, port) {
        Verdict::Through(address) => match TcpStream::connect_timeout(&address, Duration::from_secs(15)) {
            Ok(upstream) => upstream,
            Err(err) => {
                let body = format!("git-loop could not reach {shown}: {err}\n");
                let _ = conn.write_all(
                    format!(
                        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
                return None;
            }
        },
        Verdict::Refused(why) => {
            refused(&shown, &why);
            let _ = refuse(&mut conn, &why);
            return None;
        }
    };
    let mut upstream_w = upstream.try_clone().ok()?;
    match forward {
        None => conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").ok()?,
        Some(head) => upstream_w.write_all(head.as_bytes()).ok()?,
    }
    // What the reader already holds past the head goes first.
    let buffered = reader.buffer().to_vec();
    if !buffered.is_empty() {
        upstream_w.write_all(&buffered).ok()?;
    }
    let _ = conn.set_read_timeout(None);
    splice(conn.try_clone().ok()?, upstream_w, upstream, conn);
    None
}

/// A stream whose writing half can be closed, telling its reader that nothing more comes.
trait HalfClose: Write {
    fn close_write(&self);
}

impl HalfClose for TcpStream {
    fn close_write(&self) {
        let _ = self.shutdown(std::net::Shutdown::Write);
    }
}

impl HalfClose for UnixStream {
    fn close_write(&self) {
        let _ = self.shutdown(std::net::Shutdown::Write);
    }
}

/// Carry bytes both ways until each side has said all it will: `up_from` to `up_to` on a
/// thread of its own, `down_from` to `down_to` here, each writing half closed once its reader
/// ends.
fn splice(
    mut up_from: impl Read + Send + 'static,
    mut up_to: impl HalfClose + Send + 'static,
    mut down_from: impl Read,
    mut down_to: impl HalfClose,
) {
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut up_from, &mut up_to);
        up_to.close_write();
    });
    let _ = std::io::copy(&mut down_from, &mut down_to);
    down_to.close_write();
    let _ = up.join();
}

fn refuse(conn: &mut UnixStream, why: &str) -> std::io::Result<()> {
    let body = format!("git-loop refused this connection: {why}\n");
    conn.write_all(
        format!(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

/// The bridge, the first process of a run under `allow`, inside its sandbox:
/// `sandbox-net <socket> [<loopback address>…] -- <command>…`. It listens on the namespace's
/// loopback for the proxy (and on each listed loopback address), runs the command with the
/// proxy in its environment, and exits as it exits. Signals reach the command through its
/// process group; the bridge outlives them until the command has ended.
pub fn bridge(args: &[String]) -> Result<i32> {
    let split = args.iter().position(|a| a == "--").context("sandbox-net: no command after '--'")?;
    let (ours, command) = (&args[..split], &args[split + 1..]);
    let socket = PathBuf::from(ours.first().context("sandbox-net: no socket")?);
    anyhow::ensure!(!command.is_empty(), "sandbox-net: no command after '--'");
    let proxy = TcpListener::bind("127.0.0.1:0").context("sandbox-net: could not listen on loopback")?;
    let port = proxy.local_addr()?.port();
    let mut listeners = vec![(proxy, None)];
    for address in &ours[1..] {
        let address: SocketAddr = address.parse().context("sandbox-net: not an address")?;
        // A listed loopback address is reached as it would be outside: a CONNECT to it.
        if let Ok(listener) = TcpListener::bind(address) {
            listeners.push((listener, Some(address)));
        }
    }
    for (listener, target) in listeners {
        let socket = socket.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let socket = socket.clone();
                std::thread::spawn(move || tunnel(conn, &socket, target));
            }
        });
    }
    // The command's group gets the walk's signals; the bridge waits for the command to end.
    // A handler (not SIG_IGN, which the command would inherit) keeps it alive meanwhile.
    extern "C" fn ignore(_: libc::c_int) {}
    // SAFETY: installing a handler that does nothing.
    unsafe {
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(signal, ignore as *const () as libc::sighandler_t);
        }
    }
    let proxy_url = format!("http://127.0.0.1:{port}");
    let mut child = std::process::Command::new(&command[0]);
    child.args(&command[1..]);
    for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        child.env(var, &proxy_url);
    }
    for var in ["NO_PROXY", "no_proxy"] {
        child.env(var, "localhost,127.0.0.1,::1");
    }
    child.env("NODE_USE_ENV_PROXY", "1");
    let status = child.status().with_context(|| format!("could not run '{}'", command[0]))?;
    use std::os::unix::process::ExitStatusExt as _;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Carry one connection to the proxy: as it is, or (for a listed loopback address) as a
/// CONNECT to that address.
fn tunnel(conn: TcpStream, socket: &Path, target: Option<SocketAddr>) {
    let Ok(proxy) = UnixStream::connect(socket) else { return };
    let (Ok(conn_r), Ok(mut proxy_w)) = (conn.try_clone(), proxy.try_clone()) else { return };
    let mut conn = conn;
    // What comes back, read through a buffer that may already hold the first bytes after the
    // proxy's answer to a CONNECT.
    let mut back = BufReader::new(proxy);
    if let Some(target) = target {
        if proxy_w.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes()).is_err() {
            return;
        }
        let mut status = String::new();
        if back.read_line(&mut status).is_err() || !status.contains(" 200 ") {
            // Refused: the client reads the proxy's HTTP error as the server's answer.
            let _ = conn.write_all(status.as_bytes());
            let _ = std::io::copy(&mut back, &mut conn);
            return;
        }
        let mut line = String::new();
        while back.read_line(&mut line).is_ok_and(|n| n > 0) && !line.trim().is_empty() {
            line.clear();
        }
    }
    splice(conn_r, proxy_w, back, conn);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[(&str, Source)]) -> Allow {
        Allow(entries.iter().map(|(e, s)| Entry::parse(e, *s).expect("an entry")).collect())
    }

    #[test]
    fn entries_read_as_people_write_them_and_match_only_what_they_name() {
        let list = allow(&[
            ("api.anthropic.com", Source::Preset),
            ("*.npmjs.org", Source::Person),
            ("https://registry.example.com:8443/path", Source::Person),
            ("127.0.0.1:8080", Source::Person),
            ("[::1]:9000", Source::Person),
        ]);
        assert_eq!(list.admits("API.anthropic.com", 443), Some(Source::Preset));
        assert_eq!(list.admits("api.anthropic.com.", 80), Some(Source::Preset));
        assert_eq!(list.admits("registry.npmjs.org", 443), Some(Source::Person));
        assert_eq!(list.admits("npmjs.org", 443), None, "*.domain is its subdomains");
        assert_eq!(list.admits("evilnpmjs.org", 443), None);
        assert_eq!(list.admits("registry.example.com", 8443), Some(Source::Person));
        assert_eq!(list.admits("registry.example.com", 443), None, "only the port it names");
        assert_eq!(list.admits("127.0.0.1", 8080), Some(Source::Person));
        assert_eq!(list.admits("127.0.0.1", 8081), None);
        assert_eq!(list.admits("[::1]", 9000), Some(Source::Person));
        assert_eq!(list.admits("example.org", 443), None);
        assert_eq!(list.loopbacks(), vec!["127.0.0.1:8080".parse().unwrap(), "[::1]:9000".parse().unwrap()]);
        for bad in ["", "a b", "host:99999", "exa$mple.com", "*.", "[::1"] {
            assert!(Entry::parse(bad, Source::Person).is_err(), "{bad:?} is refused");
        }
        // A socket's address is short whatever the room's path.
        let deep = Path::new("/srv").join("d".repeat(120));
        let socket = socket_path(&deep);
        assert!(socket.as_os_str().len() < 100 && socket == socket_path(&deep), "{}", socket.display());
        assert_eq!(socket_path(Path::new("/r/net")), Path::new("/r/net").join(SOCKET));
        // What the guard reads is what was written.
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join(ALLOW_FILE);
        list.write(&file).expect("write");
        assert_eq!(Allow::read(&file).expect("read"), list);
    }

    #[test]
    fn a_name_that_resolves_inside_passes_only_where_a_person_listed_it() {
        let preset = allow(&[("localhost", Source::Preset)]);
        assert!(matches!(decide(&preset, "localhost", 80), Verdict::Refused(why) if why.contains("private network")));
        let person = allow(&[("localhost", Source::Person)]);
        assert!(matches!(decide(&person, "localhost", 80), Verdict::Through(a) if a.ip().is_loopback()));
        assert!(
            matches!(decide(&person, "example.org", 80), Verdict::Refused(why) if why.contains("not on the allow-list"))
        );
        for internal in [
            "10.1.2.3",
            "192.168.0.1",
            "172.16.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in ["1.1.1.1", "2606:4700::1111"] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn the_proxy_tunnels_what_is_listed_and_refuses_the_rest_once_per_host() {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = server.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for conn in server.incoming().flatten() {
                let mut conn = conn;
                let mut buf = [0u8; 1024];
                let n = conn.read(&mut buf).unwrap_or(0);
                let said = String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or_default().to_owned();
                let _ = conn
                    .write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{said}", said.len()).as_bytes());
            }
        });
        allow(&[(&format!("127.0.0.1:{port}"), Source::Person)]).write(&dir.path().join(ALLOW_FILE)).expect("write");
        let log = dir.path().join("log");
        let _proxy = Proxy::start(dir.path(), &log).expect("start");
        let ask = |request: String| {
            let mut conn = UnixStream::connect(socket_path(dir.path())).expect("connect");
            conn.write_all(request.as_bytes()).expect("write");
            let mut answer = String::new();
            let _ = conn.read_to_string(&mut answer);
            answer
        };
        let plain =
            ask(format!("GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
        assert!(plain.starts_with("HTTP/1.1 200 OK") && plain.ends_with("GET /x HTTP/1.1"), "{plain}");
        let tunnelled = ask(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nHEAD /y HTTP/1.1\r\n\r\n"));
        assert!(tunnelled.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"), "{tunnelled}");
        assert!(tunnelled.ends_with("HEAD /y HTTP/1.1"), "{tunnelled}");
        for _ in 0..3 {
            let refused = ask("CONNECT example.org:443 HTTP/1.1\r\n\r\n".into());
            assert!(refused.starts_with("HTTP/1.1 403 Forbidden"), "{refused}");
            assert!(refused.contains("example.org:443 is not on the allow-list"), "{refused}");
        }
        let other_port = ask(format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", port.wrapping_add(1)));
        assert!(other_port.starts_with("HTTP/1.1 403"), "{other_port}");
        let blocked = std::fs::read_to_string(dir.path().join(BLOCKED_FILE)).expect("blocked");
        assert_eq!(blocked, format!("example.org:443\n127.0.0.1:{}\n", port.wrapping_add(1)), "each host once");
        assert!(std::fs::read_to_string(&log).expect("log").contains("a connection to example.org:443 was refused"));
    }
}
