//! Just enough HTTP/1.1 for the board: one request per connection (`Connection: close`), a
//! bounded head and body, and responses that carry the headers every page of ours needs
//! (no caching, no sniffing, no referrer, a content security policy that runs our script alone).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The longest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// The longest request body read (an action's few fields).
const MAX_BODY: usize = 64 * 1024;

/// One request.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// Every header, as sent.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// A header's value (names compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read: answered with this status, or not at all (`None`: the
/// peer went away).
pub struct Unreadable(pub Option<u16>);

/// Read one request from `stream` (a slow peer is cut after `timeout` per read).
pub fn read(stream: &TcpStream, timeout: Duration) -> Result<Request, Unreadable> {
    stream.set_read_timeout(Some(timeout)).map_err(|_| Unreadable(None))?;
    let mut reader = BufReader::new(stream.take((MAX_HEAD + MAX_BODY) as u64));
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = reader.read_until(b'\n', &mut line).map_err(|_| Unreadable(None))?;
        if n == 0 {
            return Err(Unreadable(None));
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_HEAD {
            return Err(Unreadable(Some(431)));
        }
        if line == b"\r\n" || line == b"\n" {
            break;
        }
    }
    let head = String::from_utf8(head).map_err(|_| Unreadable(Some(400)))?;
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version)) = (first.next(), first.next(), first.next()) else {
        return Err(Unreadable(Some(400)));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Unreadable(Some(505)));
    }
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else { return Err(Unreadable(Some(400))) };
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let mut request = Request { method: method.to_owned(), path: path.to_owned(), headers, body: Vec::new() };
    let length: usize = match request.header("content-length") {
        Some(n) => n.parse().map_err(|_| Unreadable(Some(400)))?,
        None => 0,
    };
    if length > MAX_BODY {
        return Err(Unreadable(Some(413)));
    }
    request.body.resize(length, 0);
    reader.read_exact(&mut request.body).map_err(|_| Unreadable(Some(400)))?;
    Ok(request)
}

/// The headers every response carries.
const COMMON: &str = "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\
X-Frame-Options: DENY\r\nContent-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\nConnection: close\r\n";

/// The reason phrase of the statuses used here.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    }
}

/// Write a whole response.
pub fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) -> std::io::Result<()> {
    let auth = if status == 401 { "WWW-Authenticate: Bearer realm=\"git-loop\"\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status} {}\r\n{COMMON}{auth}Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        reason(status),
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// A JSON response.
pub fn json(stream: &mut TcpStream, status: u16, value: &serde_json::Value) -> std::io::Result<()> {
    respond(stream, status, "application/json; charset=utf-8", value.to_string().as_bytes())
}

/// Start a stream of server-sent events; then `event` writes each.
pub fn start_events(stream: &mut TcpStream) -> std::io::Result<()> {
    let head = format!("HTTP/1.1 200 OK\r\n{COMMON}Content-Type: text/event-stream; charset=utf-8\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    stream.flush()
}

/// One server-sent event: its name and its data (one line of JSON).
pub fn event(stream: &mut TcpStream, name: &str, data: &str) -> std::io::Result<()> {
    debug_assert!(!data.contains('\n'));
    stream.write_all(format!("event: {name}\ndata: {data}\n\n").as_bytes())?;
    stream.flush()
}

/// A comment line that keeps a quiet stream open (and finds a peer that left).
pub fn keep_alive(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.write_all(b": keep-alive\n\n")?;
    stream.flush()
}

/// Compare two secrets in time that does not depend on where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
