//! A small fake of the forge endpoints git-loop calls, for GitHub (REST v3), GitLab (REST v4)
//! and Forgejo/Gitea (REST v1), written from their published API documentation: the same
//! paths, request and response shapes, errors (`422 Validation Failed` for a second pull request
//! from one branch on GitHub, `409` on GitLab and Forgejo), `Link` pagination, token headers and
//! rate-limit headers. It serves HTTP on 127.0.0.1 and reads branch heads from a real bare
//! repository (which the clones push to over `git daemon`), so a request's head is what was
//! really pushed; a person's merge is a real merge commit on the bare repository's base.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flavor {
    GitHub,
    GitLab,
    Forgejo,
}

impl Flavor {
    pub fn word(self) -> &'static str {
        match self {
            Flavor::GitHub => "github",
            Flavor::GitLab => "gitlab",
            Flavor::Forgejo => "forgejo",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Flavor::GitHub => "/api/v3",
            Flavor::GitLab => "/api/v4",
            Flavor::Forgejo => "/api/v1",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Pull {
    pub number: u64,
    pub branch: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub open: bool,
    pub merged: bool,
    pub merge_commit: Option<String>,
    pub by: Option<String>,
}

#[derive(Clone, Debug)]
struct FakeReview {
    id: u64,
    state: &'static str,
    by: String,
    body: String,
}

#[derive(Default)]
struct State {
    pulls: Vec<Pull>,
    /// By commit: (name, state, description), state in GitHub's words (success, failure, pending).
    statuses: HashMap<String, Vec<(String, String, String)>>,
    reviews: HashMap<u64, Vec<FakeReview>>,
    next_id: u64,
    /// Every call: "METHOD /path?query".
    calls: Vec<String>,
    /// The next calls are refused for the rate limit, with a reset this many seconds ahead.
    limited: Option<(u32, i64)>,
}

pub struct FakeForge {
    pub flavor: Flavor,
    pub port: u16,
    pub token: String,
    /// `owner/name`.
    pub repo: String,
    bare: PathBuf,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

/// Items per page of a listing (small, so pagination is exercised).
const PAGE: usize = 2;

impl FakeForge {
    /// Serve `repo` (`owner/name`), whose branches live in the bare repository `bare`, to
    /// callers that give `token`.
    pub fn start(flavor: Flavor, repo: &str, bare: PathBuf, token: &str) -> FakeForge {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State { next_id: 1000, ..State::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let fake = FakeForge { flavor, port, token: token.to_owned(), repo: repo.to_owned(), bare, state, stop };
        let server = fake.handle();
        std::thread::spawn(move || {
            while !server.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let server = server.clone();
                        std::thread::spawn(move || server.serve(stream));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        fake
    }

    fn handle(&self) -> Server {
        Server {
            flavor: self.flavor,
            port: self.port,
            token: self.token.clone(),
            repo: self.repo.clone(),
            bare: self.bare.clone(),
            state: self.state.clone(),
            stop: self.stop.clone(),
        }
    }

    /// The API's base URL, for `loop.forge.url`.
    pub fn api(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.flavor.prefix())
    }

    pub fn pulls(&self) -> Vec<Pull> {
        self.state.lock().unwrap().pulls.clone()
    }

    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Report a check on `sha`: `state` is success, failure or pending.
    pub fn status(&self, sha: &str, name: &str, state: &str, description: &str) {
        let mut s = self.state.lock().unwrap();
        let list = s.statuses.entry(sha.to_owned()).or_default();
        list.retain(|(n, _, _)| n != name);
        list.push((name.to_owned(), state.to_owned(), description.to_owned()));
    }

    /// A review of request `number`: `approved` or `changes`.
    pub fn review(&self, number: u64, state: &str, by: &str, body: &str) {
        let mut s = self.state.lock().unwrap();
        s.next_id += 1;
        let id = s.next_id;
        let state = if state == "approved" { "APPROVED" } else { "CHANGES_REQUESTED" };
        s.reviews.entry(number).or_default().push(FakeReview { id, state, by: by.to_owned(), body: body.to_owned() });
    }

    /// A person merges request `number`: a real merge commit of its branch onto its base in
    /// the bare repository.
    pub fn merge(&self, number: u64, by: &str) -> String {
        let pull = self.pulls().into_iter().find(|p| p.number == number).expect("the request");
        let git = |args: &[&str]| git_in(&self.bare, args);
        let base = git(&["rev-parse", &format!("refs/heads/{}", pull.base)]);
        let head = git(&["rev-parse", &format!("refs/heads/{}", pull.branch)]);
        let tree = git(&["merge-tree", "--write-tree", &base, &head]);
        let commit =
            git(&["commit-tree", &tree, "-p", &base, "-p", &head, "-m", &format!("Merge pull request #{number}")]);
        git(&["update-ref", &format!("refs/heads/{}", pull.base), &commit, &base]);
        let mut s = self.state.lock().unwrap();
        let p = s.pulls.iter_mut().find(|p| p.number == number).expect("the request");
        p.open = false;
        p.merged = true;
        p.merge_commit = Some(commit.clone());
        p.by = Some(by.to_owned());
        commit
    }

    /// A person closes request `number` without merging.
    pub fn close(&self, number: u64, by: &str) {
        let mut s = self.state.lock().unwrap();
        let p = s.pulls.iter_mut().find(|p| p.number == number).expect("the request");
        p.open = false;
        p.by = Some(by.to_owned());
    }

    /// Refuse the next `calls` calls for the rate limit, its reset `seconds` ahead.
    pub fn limit(&self, calls: u32, seconds: i64) {
        self.state.lock().unwrap().limited = Some((calls, seconds));
    }

    /// A request opened by someone else (another clone that stopped before it said so).
    pub fn open_directly(&self, branch: &str, base: &str, title: &str) -> u64 {
        let mut s = self.state.lock().unwrap();
        let number = s.pulls.len() as u64 + 1;
        s.pulls.push(Pull {
            number,
            branch: branch.into(),
            base: base.into(),
            title: title.into(),
            body: String::new(),
            open: true,
            merged: false,
            merge_commit: None,
            by: None,
        });
        number
    }
}

impl Drop for FakeForge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn git_in(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Forge")
        .env("GIT_AUTHOR_EMAIL", "forge@example.com")
        .env("GIT_COMMITTER_NAME", "Forge")
        .env("GIT_COMMITTER_EMAIL", "forge@example.com")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[derive(Clone)]
struct Server {
    flavor: Flavor,
    port: u16,
    token: String,
    repo: String,
    bare: PathBuf,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

struct Answer {
    code: u16,
    body: Value,
    headers: Vec<(String, String)>,
}

fn answer(code: u16, body: Value) -> Answer {
    Answer { code, body, headers: Vec::new() }
}

impl Server {
    fn serve(&self, stream: TcpStream) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = self.route(&method, &target, &headers, &body);
        let text = answer.body.to_string();
        let mut out = format!(
            "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            answer.code,
            text.len()
        );
        for (k, v) in &answer.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&text);
        let mut stream = stream;
        let _ = stream.write_all(out.as_bytes());
    }

    fn authorized(&self, headers: &HashMap<String, String>) -> bool {
        match self.flavor {
            Flavor::GitHub => headers.get("authorization") == Some(&format!("Bearer {}", self.token)),
            Flavor::GitLab => headers.get("private-token") == Some(&self.token),
            Flavor::Forgejo => headers.get("authorization") == Some(&format!("token {}", self.token)),
        }
    }

    fn head_of(&self, branch: &str) -> String {
        let out = Command::new("git")
            .args(["rev-parse", "--verify", "-q", &format!("refs/heads/{branch}")])
            .current_dir(&self.bare)
            .output()
            .expect("git");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn route(&self, method: &str, target: &str, headers: &HashMap<String, String>, body: &Value) -> Answer {
        let mut s = self.state.lock().unwrap();
        s.calls.push(format!("{method} {target}"));
        if let Some((calls, seconds)) = s.limited {
            s.limited = if calls > 1 { Some((calls - 1, seconds)) } else { None };
            let reset = chrono::Utc::now().timestamp() + seconds;
            let mut a = answer(
                if self.flavor == Flavor::GitHub { 403 } else { 429 },
                json!({ "message": "API rate limit exceeded" }),
            );
            a.headers = match self.flavor {
                Flavor::GitHub => vec![
                    ("x-ratelimit-limit".into(), "5000".into()),
                    ("x-ratelimit-remaining".into(), "0".into()),
                    ("x-ratelimit-reset".into(), reset.to_string()),
                ],
                Flavor::GitLab => {
                    vec![("RateLimit-Remaining".into(), "0".into()), ("RateLimit-Reset".into(), reset.to_string())]
                }
                Flavor::Forgejo => vec![("Retry-After".into(), seconds.to_string())],
            };
            return a;
        }
        drop(s);
        if !self.authorized(headers) {
            return answer(
                401,
                match self.flavor {
                    Flavor::GitHub => {
                        json!({ "message": "Bad credentials", "documentation_url": "https://docs.github.com/rest" })
                    }
                    Flavor::GitLab => json!({ "message": "401 Unauthorized" }),
                    Flavor::Forgejo => {
                        json!({ "message": "token is required", "url": "https://forgejo.org/api/swagger" })
                    }
                },
            );
        }
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let query: HashMap<String, String> =
            query.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_owned(), decode(v))).collect();
        let Some(rest) = path.strip_prefix(self.flavor.prefix()) else {
            return answer(404, json!({"message": "Not Found"}));
        };
        match self.flavor {
            Flavor::GitHub | Flavor::Forgejo => self.route_hub(method, rest, &query, body),
            Flavor::GitLab => self.route_lab(method, rest, &query, body),
        }
    }

    fn page(&self, items: Vec<Value>, query: &HashMap<String, String>, base: &str) -> Answer {
        let page: usize = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1).max(1);
        let chunk: Vec<Value> = items.iter().skip((page - 1) * PAGE).take(PAGE).cloned().collect();
        let mut a = answer(200, Value::Array(chunk));
        if items.len() > page * PAGE {
            let mut q: Vec<String> =
                query.iter().filter(|(k, _)| *k != "page").map(|(k, v)| format!("{k}={}", encode(v))).collect();
            q.sort();
            q.push(format!("page={}", page + 1));
            a.headers.push(("Link".into(), format!("<{base}?{}>; rel=\"next\"", q.join("&"))));
        }
        a
    }

    fn pull_json(&self, p: &Pull) -> Value {
        let head = self.head_of(&p.branch);
        match self.flavor {
            Flavor::GitLab => json!({
                "iid": p.number, "id": p.number + 500, "title": p.title, "description": p.body,
                "state": if p.merged { "merged" } else if p.open { "opened" } else { "closed" },
                "source_branch": p.branch, "target_branch": p.base, "sha": head,
                "merge_commit_sha": p.merge_commit, "squash_commit_sha": null,
                "web_url": format!("http://forge.example/{}/-/merge_requests/{}", self.repo, p.number),
                "merged_by": if p.merged { json!({"username": p.by}) } else { Value::Null },
                "closed_by": if !p.open && !p.merged { json!({"username": p.by}) } else { Value::Null },
            }),
            _ => json!({
                "number": p.number, "title": p.title, "body": p.body,
                "state": if p.open { "open" } else { "closed" },
                "merged": p.merged,
                "merged_at": if p.merged { json!("2026-03-01T12:00:00Z") } else { Value::Null },
                "merge_commit_sha": p.merge_commit,
                "html_url": format!("http://forge.example/{}/pull/{}", self.repo, p.number),
                "head": { "ref": p.branch, "sha": head, "label": format!("{}:{}", self.repo.split('/').next().unwrap_or(""), p.branch) },
                "base": { "ref": p.base },
                "merged_by": if p.merged { json!({"login": p.by}) } else { Value::Null },
            }),
        }
    }

    fn create(&self, branch: &str, base: &str, title: &str, body: &str) -> Answer {
        if self.head_of(branch).is_empty() {
            return answer(
                422,
                json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}]}),
            );
        }
        let mut s = self.state.lock().unwrap();
        if s.pulls.iter().any(|p| p.open && p.branch == branch) {
            return match self.flavor {
                Flavor::GitHub => answer(
                    422,
                    json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom", "message": format!("A pull request already exists for {}:{branch}.", self.repo.split('/').next().unwrap_or(""))}]}),
                ),
                Flavor::GitLab => answer(
                    409,
                    json!({"message": ["Another open merge request already exists for this source branch: !1"]}),
                ),
                Flavor::Forgejo => answer(409, json!({"message": "pull request already exists for these targets"})),
            };
        }
        let number = s.pulls.len() as u64 + 1;
        let pull = Pull {
            number,
            branch: branch.into(),
            base: base.into(),
            title: title.into(),
            body: body.into(),
            open: true,
            merged: false,
            merge_commit: None,
            by: None,
        };
        s.pulls.push(pull.clone());
        drop(s);
        answer(201, self.pull_json(&pull))
    }

    fn route_hub(&self, method: &str, rest: &str, query: &HashMap<String, String>, body: &Value) -> Answer {
        let segs: Vec<&str> = rest.trim_matches('/').split('/').collect();
        let repo: Vec<&str> = self.repo.split('/').collect();
        if segs.len() < 3 || segs[0] != "repos" || segs[1] != repo[0] || segs[2] != repo[1] {
            return answer(404, json!({"message": "Not Found"}));
        }
        let full = |tail: &str| format!("{}/repos/{}{tail}", self.api_base(), self.repo);
        match (method, &segs[3..]) {
            ("GET", ["pulls"]) => {
                let pulls = self.state.lock().unwrap().pulls.clone();
                let head = query.get("head").map(|h| h.split_once(':').map_or(h.as_str(), |(_, b)| b).to_owned());
                let wanted = query.get("state").map(String::as_str).unwrap_or("open");
                let items: Vec<Value> = pulls
                    .iter()
                    .rev()
                    .filter(|p| self.flavor == Flavor::Forgejo || head.as_deref().is_none_or(|h| h == p.branch))
                    .filter(|p| wanted == "all" || (wanted == "open") == p.open)
                    .map(|p| self.pull_json(p))
                    .collect();
                self.page(items, query, &full("/pulls"))
            }
            ("POST", ["pulls"]) => self.create(
                body["head"].as_str().unwrap_or_default(),
                body["base"].as_str().unwrap_or_default(),
                body["title"].as_str().unwrap_or_default(),
                body["body"].as_str().unwrap_or_default(),
            ),
            ("GET", ["pulls", n]) => match self.find(n) {
                Some(p) => answer(200, self.pull_json(&p)),
                None => answer(404, json!({"message": "Not Found"})),
            },
            ("PATCH", ["pulls", n]) => {
                let mut s = self.state.lock().unwrap();
                let Some(p) = s.pulls.iter_mut().find(|p| p.number.to_string() == *n) else {
                    return answer(404, json!({"message": "Not Found"}));
                };
                if let Some(base) = body["base"].as_str() {
                    p.base = base.to_owned();
                }
                let p = p.clone();
                drop(s);
                answer(200, self.pull_json(&p))
            }
            ("GET", ["pulls", n, "reviews"]) => {
                let reviews =
                    self.state.lock().unwrap().reviews.get(&n.parse().unwrap_or(0)).cloned().unwrap_or_default();
                let items = reviews
                    .iter()
                    .map(|r| {
                        let state = match (self.flavor, r.state) {
                            (Flavor::Forgejo, "CHANGES_REQUESTED") => "REQUEST_CHANGES",
                            (_, s) => s,
                        };
                        json!({"id": r.id, "user": {"login": r.by}, "body": r.body, "state": state, "submitted_at": "2026-03-01T12:00:00Z"})
                    })
                    .collect();
                self.page(items, query, &full(&format!("/pulls/{n}/reviews")))
            }
            ("GET", ["commits", sha, "status"]) => {
                let statuses = self.state.lock().unwrap().statuses.get(*sha).cloned().unwrap_or_default();
                let combined = if statuses.iter().any(|(_, s, _)| s == "failure") {
                    "failure"
                } else if statuses.iter().any(|(_, s, _)| s == "pending") || statuses.is_empty() {
                    "pending"
                } else {
                    "success"
                };
                let items: Vec<Value> = statuses
                    .iter()
                    .map(|(name, state, said)| match self.flavor {
                        Flavor::Forgejo => json!({"context": name, "status": state, "description": said}),
                        _ => json!({"context": name, "state": state, "description": said}),
                    })
                    .collect();
                answer(200, json!({"state": combined, "sha": sha, "total_count": items.len(), "statuses": items}))
            }
            ("GET", ["commits", _, "check-runs"]) if self.flavor == Flavor::GitHub => {
                answer(200, json!({"total_count": 0, "check_runs": []}))
            }
            _ => answer(404, json!({"message": "Not Found"})),
        }
    }

    fn route_lab(&self, method: &str, rest: &str, query: &HashMap<String, String>, body: &Value) -> Answer {
        let segs: Vec<&str> = rest.trim_matches('/').split('/').collect();
        let project = encode(&self.repo);
        if segs.len() < 2 || segs[0] != "projects" || segs[1] != project {
            return answer(404, json!({"message": "404 Project Not Found"}));
        }
        let full = |tail: &str| format!("{}/projects/{project}{tail}", self.api_base());
        match (method, &segs[2..]) {
            ("GET", ["merge_requests"]) => {
                let pulls = self.state.lock().unwrap().pulls.clone();
                let items: Vec<Value> = pulls
                    .iter()
                    .rev()
                    .filter(|p| query.get("source_branch").is_none_or(|b| *b == p.branch))
                    .map(|p| self.pull_json(p))
                    .collect();
                self.page(items, query, &full("/merge_requests"))
            }
            ("POST", ["merge_requests"]) => self.create(
                body["source_branch"].as_str().unwrap_or_default(),
                body["target_branch"].as_str().unwrap_or_default(),
                body["title"].as_str().unwrap_or_default(),
                body["description"].as_str().unwrap_or_default(),
            ),
            ("GET", ["merge_requests", n]) => match self.find(n) {
                Some(p) => answer(200, self.pull_json(&p)),
                None => answer(404, json!({"message": "404 Not found"})),
            },
            ("PUT", ["merge_requests", n]) => {
                let mut s = self.state.lock().unwrap();
                let Some(p) = s.pulls.iter_mut().find(|p| p.number.to_string() == *n) else {
                    return answer(404, json!({"message": "404 Not found"}));
                };
                if let Some(base) = body["target_branch"].as_str() {
                    p.base = base.to_owned();
                }
                let p = p.clone();
                drop(s);
                answer(200, self.pull_json(&p))
            }
            ("GET", ["merge_requests", n, "approvals"]) => {
                let reviews =
                    self.state.lock().unwrap().reviews.get(&n.parse().unwrap_or(0)).cloned().unwrap_or_default();
                let approved: Vec<Value> = reviews
                    .iter()
                    .filter(|r| r.state == "APPROVED")
                    .map(|r| json!({"user": {"username": r.by}}))
                    .collect();
                answer(200, json!({"approved": !approved.is_empty(), "approved_by": approved}))
            }
            ("GET", ["merge_requests", n, "reviewers"]) => {
                let reviews =
                    self.state.lock().unwrap().reviews.get(&n.parse().unwrap_or(0)).cloned().unwrap_or_default();
                let mut last: Vec<(String, &str)> = Vec::new();
                for r in &reviews {
                    last.retain(|(by, _)| *by != r.by);
                    last.push((r.by.clone(), if r.state == "APPROVED" { "approved" } else { "requested_changes" }));
                }
                let items = last.iter().map(|(by, state)| json!({"user": {"username": by}, "state": state})).collect();
                self.page(items, query, &full(&format!("/merge_requests/{n}/reviewers")))
            }
            ("GET", ["merge_requests", n, "notes"]) => {
                let reviews =
                    self.state.lock().unwrap().reviews.get(&n.parse().unwrap_or(0)).cloned().unwrap_or_default();
                let mut items: Vec<Value> = vec![
                    json!({"id": 1, "body": "requested review", "author": {"username": "system"}, "system": true}),
                ];
                items.extend(
                    reviews
                        .iter()
                        .filter(|r| !r.body.is_empty())
                        .map(|r| json!({"id": r.id, "body": r.body, "author": {"username": r.by}, "system": false})),
                );
                self.page(items, query, &full(&format!("/merge_requests/{n}/notes")))
            }
            ("GET", ["repository", "commits", sha, "statuses"]) => {
                let statuses = self.state.lock().unwrap().statuses.get(*sha).cloned().unwrap_or_default();
                let items = statuses
                    .iter()
                    .map(|(name, state, said)| {
                        let status = match state.as_str() {
                            "success" => "success",
                            "failure" => "failed",
                            _ => "running",
                        };
                        json!({"name": name, "status": status, "description": said, "sha": sha})
                    })
                    .collect();
                self.page(items, query, &full(&format!("/repository/commits/{sha}/statuses")))
            }
            _ => answer(404, json!({"message": "404 Not found"})),
        }
    }

    fn find(&self, n: &str) -> Option<Pull> {
        self.state.lock().unwrap().pulls.iter().find(|p| p.number.to_string() == n).cloned()
    }

    fn api_base(&self) -> String {
        // Links name the address the caller used; only the path matters to the client.
        format!("http://127.0.0.1:{}{}", self.port, self.flavor.prefix())
    }
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
