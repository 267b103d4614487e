//! Calls to a forge's REST API: JSON in and out, the token in its header (never in a URL,
//! never in a message), pages followed by their `Link: <…>; rel="next"` header (GitHub,
//! GitLab and Forgejo all send it), and every failure turned into one line with a hint.
//!
//! A rate limit (HTTP 403 or 429 that says so: `x-ratelimit-remaining: 0` with
//! `x-ratelimit-reset`, GitLab's `ratelimit-reset`, or `retry-after`) is waited for when its
//! reset is within `loop.forge.wait` (default 5m; Ctrl-C stops the wait), then the call is made
//! again; a later reset is [`RateLimited`], which says until when, and nothing more is called.

use std::time::Duration;

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Kind, Place};
use crate::error::{Class, Refusal};

/// A token, and where it came from (named in errors; its value never is).
pub struct Token {
    pub value: String,
    pub source: String,
}

/// The forge told us to wait until `until` before calling again.
#[derive(Debug, Clone)]
pub struct RateLimited {
    pub forge: String,
    pub until: DateTime<Utc>,
}

impl std::fmt::Display for RateLimited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} rate-limits this token until {} UTC", self.forge, self.until.format("%Y-%m-%d %H:%M:%S"))
    }
}

impl std::error::Error for RateLimited {}

/// A forge's answer that was not a success: its status and what it said.
#[derive(Debug, Clone)]
pub struct Status {
    pub code: u16,
    pub said: String,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.code, self.said)
    }
}

impl std::error::Error for Status {}

/// The forge's status code of a failed call, if it answered. (A failure is its `Refusal`, for
/// people, with the `Status` or `RateLimited` as its context, for callers.)
pub fn status_of(err: &anyhow::Error) -> Option<&Status> {
    err.downcast_ref::<Status>()
}

/// A successful answer.
pub struct Reply {
    pub body: Value,
    /// The next page's URL, when the forge sent one.
    next: Option<String>,
}

pub struct Client {
    pub place: Place,
    token: Token,
    agent: ureq::Agent,
    /// The longest rate-limit reset waited for.
    wait: Duration,
}

/// At most this many pages are read of one listing (100 items each where the forge allows).
const MAX_PAGES: usize = 50;

impl Client {
    pub fn new(place: Place, token: Token, wait: Duration) -> Result<Client> {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(15)))
            .timeout_global(Some(Duration::from_secs(60)))
            .user_agent(format!("git-loop/{}", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Client { place, token, agent: ureq::Agent::new_with_config(config), wait })
    }

    /// `GET <api><path>`.
    pub fn get(&self, path: &str) -> Result<Value> {
        Ok(self.call("GET", &self.url(path), None)?.body)
    }

    /// `GET <api><path>` and every next page: the items of all.
    pub fn get_all(&self, path: &str) -> Result<Vec<Value>> {
        let mut url = self.url(path);
        let mut items = Vec::new();
        for _ in 0..MAX_PAGES {
            let reply = self.call("GET", &url, None)?;
            match reply.body {
                Value::Array(page) => items.extend(page),
                other => anyhow::bail!(
                    "{} answered {} with {} where a list was expected",
                    self.forge(),
                    path,
                    kind_of(&other)
                ),
            }
            match reply.next {
                // Only pages of the same API: a Link elsewhere is not followed with the token.
                Some(next) if next.starts_with(&self.place.api) => url = next,
                _ => break,
            }
        }
        Ok(items)
    }

    /// `<method> <api><path>` with a JSON body.
    pub fn send(&self, method: &str, path: &str, body: &Value) -> Result<Value> {
        Ok(self.call(method, &self.url(path), Some(body))?.body)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.place.api)
    }

    fn forge(&self) -> &'static str {
        self.place.kind.word()
    }

    /// One call, a rate limit waited for (once) when its reset is near.
    fn call(&self, method: &str, url: &str, body: Option<&Value>) -> Result<Reply> {
        let mut waited = false;
        loop {
            match self.once(method, url, body)? {
                Ok(reply) => return Ok(reply),
                Err(limited) => {
                    let left = (limited.until - Utc::now()).to_std().unwrap_or_default();
                    if waited || left > self.wait {
                        let refusal = Refusal::new(Class::Failure, format!("{limited}: nothing more was asked of it"))
                            .hint(format!(
                                "the landing goes on after that with 'git loop land' (it waits itself for a reset within loop.forge.wait, now {}s)",
                                self.wait.as_secs()
                            ));
                        return Err(anyhow::Error::from(refusal).context(limited));
                    }
                    waited = true;
                    let until = std::time::Instant::now() + left + Duration::from_millis(200);
                    while std::time::Instant::now() < until {
                        if gix::interrupt::is_triggered() {
                            return Err(Refusal::new(
                                Class::Interrupted,
                                "stopped while waiting for the forge's rate limit",
                            )
                            .hint("run 'git loop land' again later")
                            .into());
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        }
    }

    /// One HTTP exchange: the reply, a rate limit, or a failure as one line.
    fn once(&self, method: &str, url: &str, body: Option<&Value>) -> Result<Result<Reply, RateLimited>> {
        let mut request = ureq::http::Request::builder().method(method).uri(url);
        request = match self.place.kind {
            Kind::GitHub => request
                .header("Authorization", format!("Bearer {}", self.token.value))
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28"),
            Kind::GitLab => request.header("PRIVATE-TOKEN", self.token.value.as_str()),
            Kind::Forgejo => request.header("Authorization", format!("token {}", self.token.value)),
        };
        let payload = match body {
            Some(body) => {
                request = request.header("Content-Type", "application/json");
                serde_json::to_vec(body)?
            }
            None => Vec::new(),
        };
        let request =
            request.body(payload).map_err(|e| anyhow::anyhow!("a request to {url} could not be made: {e}"))?;
        let shown = shown(url);
        let mut response =
            match self.agent.run(request) {
                Ok(response) => response,
                Err(err) => return Err(Refusal::new(
                    Class::Failure,
                    format!("{} at {} cannot be reached: {}", self.forge(), self.place.api, one_line(&err.to_string())),
                )
                .hint(
                    "check the network and loop.forge.url; nothing was changed, and 'git loop land' goes on from here",
                )
                .into()),
            };
        let code = response.status().as_u16();
        let header =
            |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_owned());
        let next = header("link").and_then(|link| next_link(&link));
        let limited = rate_limit(code, &header);
        let text = response.body_mut().with_config().limit(32 << 20).read_to_string().unwrap_or_default();
        if let Some(until) = limited {
            return Ok(Err(RateLimited { forge: self.forge().to_owned(), until }));
        }
        if (200..300).contains(&code) {
            let body = if text.trim().is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).map_err(|e| {
                    anyhow::anyhow!("{} answered {method} {shown} with something that is not JSON: {e}", self.forge())
                })?
            };
            return Ok(Ok(Reply { body, next }));
        }
        // A forge that echoes what it was sent must not make us print the token.
        let said = said(&text).replace(self.token.value.as_str(), "***");
        let status = Status { code, said: said.clone() };
        let refusal = match code {
            401 => Refusal::new(
                Class::Failure,
                format!("{} refused the token from {} (401: {said})", self.forge(), self.token.source),
            )
            .hint(token_hint(self.place.kind)),
            403 => Refusal::new(
                Class::Failure,
                format!(
                    "{} does not let the token from {} do this: {method} {shown} (403: {said})",
                    self.forge(),
                    self.token.source
                ),
            )
            .hint("give the token write access to the repository's pull requests and contents"),
            404 => Refusal::new(
                Class::Failure,
                format!(
                    "{} has no {shown} (404): the repository '{}' is not there, or the token cannot see it",
                    self.forge(),
                    self.place.repo
                ),
            )
            .hint("check loop.forge.repo and loop.forge.url, and the token's access"),
            _ => {
                Refusal::new(Class::Failure, format!("{} answered {method} {shown} with {code}: {said}", self.forge()))
                    .hint("nothing more was asked of it; 'git loop land' tries again")
            }
        };
        Err(anyhow::Error::from(refusal).context(status))
    }
}

/// The path of `url` after the API's base, without its query (which may name branches but
/// never secrets; kept short).
fn shown(url: &str) -> String {
    let path = url.split_once("://").map_or(url, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
    format!("/{}", path.split('?').next().unwrap_or_default())
}

/// When the forge says a call was refused for its rate limit: until when.
fn rate_limit(code: u16, header: &dyn Fn(&str) -> Option<String>) -> Option<DateTime<Utc>> {
    if code != 403 && code != 429 {
        return None;
    }
    let now = Utc::now();
    if let Some(after) = header("retry-after").and_then(|v| v.parse::<i64>().ok()) {
        return Some(now + chrono::Duration::seconds(after.max(0)));
    }
    let remaining = header("x-ratelimit-remaining").or_else(|| header("ratelimit-remaining"));
    let reset = header("x-ratelimit-reset").or_else(|| header("ratelimit-reset"));
    let exhausted = remaining.as_deref() == Some("0");
    match (reset.and_then(|r| r.parse::<i64>().ok()), exhausted || code == 429) {
        (Some(epoch), true) => DateTime::from_timestamp(epoch, 0).map(|t| t.max(now)),
        (None, true) if code == 429 => Some(now + chrono::Duration::seconds(60)),
        _ => None,
    }
}

/// The URL a `Link` header names as the next page.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"")
            .then(|| url.trim().trim_start_matches('<').trim_end_matches('>').to_owned())
    })
}

/// What a forge's error body says, in one printable line of at most 300 characters.
fn said(text: &str) -> String {
    let value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let mut parts = Vec::new();
    for key in ["message", "error", "error_description"] {
        match value.get(key) {
            Some(Value::String(s)) => parts.push(s.clone()),
            Some(other @ (Value::Array(_) | Value::Object(_))) => parts.push(other.to_string()),
            _ => {}
        }
    }
    if let Some(Value::Array(errors)) = value.get("errors") {
        for e in errors {
            match e.get("message").and_then(Value::as_str) {
                Some(m) => parts.push(m.to_owned()),
                None => parts.push(e.to_string()),
            }
        }
    }
    let line = if parts.is_empty() { text.to_owned() } else { parts.join("; ") };
    let line = one_line(&line);
    if line.is_empty() {
        return "no message".into();
    }
    line.chars().take(300).collect()
}

/// `text` on one line, control characters dropped: a forge's words must not drive a terminal.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").chars().filter(|c| !c.is_control()).collect()
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Object(_) => "an object",
        _ => "a value",
    }
}

/// How to give git-loop a token for a forge.
pub fn token_hint(kind: Kind) -> String {
    let var = match kind {
        Kind::GitHub => "GITHUB_TOKEN",
        Kind::GitLab => "GITLAB_TOKEN",
        Kind::Forgejo => "FORGEJO_TOKEN",
    };
    format!(
        "set {var} (or GIT_LOOP_FORGE_TOKEN) to a token that may open {}s, or store one with 'git credential approve'",
        kind.request_word()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_is_read_from_the_link_header() {
        let link = r#"<https://api.github.com/repositories/1/pulls?page=2>; rel="next", <https://api.github.com/repositories/1/pulls?page=9>; rel="last""#;
        assert_eq!(next_link(link).as_deref(), Some("https://api.github.com/repositories/1/pulls?page=2"));
        assert_eq!(next_link(r#"<https://x/?page=1>; rel="prev""#), None);
    }

    #[test]
    fn a_rate_limit_is_told_by_its_headers() {
        let h = |pairs: Vec<(&'static str, String)>| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
        };
        let soon = (Utc::now() + chrono::Duration::seconds(30)).timestamp();
        let github = h(vec![("x-ratelimit-remaining", "0".into()), ("x-ratelimit-reset", soon.to_string())]);
        assert_eq!(rate_limit(403, &github).map(|t| t.timestamp()), Some(soon));
        // A 403 that is not about the rate limit is not one.
        assert_eq!(rate_limit(403, &h(vec![("x-ratelimit-remaining", "12".into())])), None);
        let after = rate_limit(429, &h(vec![("retry-after", "5".into())])).unwrap();
        assert!((after - Utc::now()).num_seconds() <= 5);
        assert!(rate_limit(200, &github).is_none());
    }

    #[test]
    fn a_forges_error_body_becomes_one_short_line() {
        assert_eq!(
            said(r#"{"message":"Validation Failed","errors":[{"message":"A pull request already exists for a:b."}]}"#),
            "Validation Failed; A pull request already exists for a:b."
        );
        assert_eq!(
            said(r#"{"message":["Another open merge request already exists"]}"#),
            r#"["Another open merge request already exists"]"#
        );
        assert_eq!(said("<html>\n\x1b[31mbad gateway</html>"), "<html> [31mbad gateway</html>");
    }
}
