//! GitHub's REST API (v3; GitHub Enterprise at `https://<host>/api/v3`) and Forgejo's and
//! Gitea's (v1), which has the same shape for what git-loop asks: pull requests, commit
//! statuses (and GitHub's check runs), reviews. Where they differ — finding a branch's request,
//! page sizes, the error for a second request from one branch, status fields — `forgejo` says.

use anyhow::Result;
use serde_json::{json, Value};

use super::http::{status_of, Client};
use super::{Checks, Forge, NewRequest, Place, Request, RequestState, Review, ReviewState};

pub struct Hub {
    client: Client,
    /// Forgejo or Gitea, not GitHub.
    forgejo: bool,
}

impl Hub {
    pub fn github(client: Client) -> Hub {
        Hub { client, forgejo: false }
    }

    pub fn forgejo(client: Client) -> Hub {
        Hub { client, forgejo: true }
    }

    fn repo(&self) -> String {
        self.client.place.repo.split('/').map(encode).collect::<Vec<_>>().join("/")
    }

    fn word(&self) -> &'static str {
        self.client.place.kind.word()
    }

    /// A listing's page-size parameter.
    fn per_page(&self) -> &'static str {
        if self.forgejo {
            "limit=50"
        } else {
            "per_page=100"
        }
    }
}

/// A pull request as GitHub and Forgejo write it (a listing's or a single one's).
fn request_of(v: &Value) -> Option<Request> {
    let merged = v.get("merged").and_then(Value::as_bool).unwrap_or(false) || !v["merged_at"].is_null();
    let state = match (v.get("state")?.as_str()?, merged) {
        (_, true) => RequestState::Merged,
        ("open", _) => RequestState::Open,
        _ => RequestState::Closed,
    };
    Some(Request {
        number: v.get("number")?.as_u64()?,
        url: v["html_url"].as_str().unwrap_or_default().to_owned(),
        state,
        branch: v["head"]["ref"].as_str().unwrap_or_default().to_owned(),
        head: v["head"]["sha"].as_str().unwrap_or_default().to_owned(),
        base: v["base"]["ref"].as_str().unwrap_or_default().to_owned(),
        merge_commit: v["merge_commit_sha"].as_str().filter(|s| !s.is_empty() && merged).map(str::to_owned),
        by: v["merged_by"]["login"].as_str().map(str::to_owned),
    })
}

/// Of the requests from one branch: the open one, else the newest.
pub fn pick(mut found: Vec<Request>) -> Option<Request> {
    found.sort_by_key(|r| (r.state == RequestState::Open, r.number));
    found.pop()
}

/// A review as GitHub and Forgejo write it; `None` for one that does not count (dismissed,
/// pending, a plain comment without words).
fn review_of(v: &Value) -> Option<Review> {
    let state = match v["state"].as_str()? {
        "APPROVED" => ReviewState::Approved,
        "CHANGES_REQUESTED" | "REQUEST_CHANGES" => ReviewState::ChangesRequested,
        "COMMENTED" | "COMMENT" if !v["body"].as_str().unwrap_or_default().trim().is_empty() => ReviewState::Commented,
        _ => return None,
    };
    Some(Review {
        id: v["id"].to_string(),
        state,
        by: v["user"]["login"].as_str().unwrap_or("someone").to_owned(),
        body: v["body"].as_str().unwrap_or_default().to_owned(),
    })
}

impl Forge for Hub {
    fn place(&self) -> &Place {
        &self.client.place
    }

    fn find(&self, branch: &str) -> Result<Option<Request>> {
        let path = if self.forgejo {
            // No filter by head in the listing every version has: all of them, newest first.
            format!("/repos/{}/pulls?state=all&{}&sort=newest", self.repo(), self.per_page())
        } else {
            let owner = self.client.place.repo.split('/').next().unwrap_or_default();
            format!(
                "/repos/{}/pulls?state=all&{}&head={}",
                self.repo(),
                self.per_page(),
                encode(&format!("{owner}:{branch}"))
            )
        };
        let found = self.client.get_all(&path)?.iter().filter_map(request_of).filter(|r| r.branch == branch).collect();
        Ok(pick(found))
    }

    fn open(&self, new: &NewRequest<'_>) -> Result<Request> {
        let body = json!({ "title": new.title, "head": new.branch, "base": new.base, "body": new.body });
        match self.client.send("POST", &format!("/repos/{}/pulls", self.repo()), &body) {
            Ok(v) => request_of(&v)
                .ok_or_else(|| anyhow::anyhow!("{} answered the new pull request without its number", self.word())),
            // GitHub: 422 "A pull request already exists for owner:branch"; Forgejo: 409 "pull
            // request already exists for these targets". Found, not doubled.
            Err(err)
                if status_of(&err)
                    .is_some_and(|s| (s.code == 422 || s.code == 409) && s.said.contains("already exists")) =>
            {
                self.find(new.branch)?.ok_or(err)
            }
            Err(err) => Err(err),
        }
    }

    fn get(&self, number: u64) -> Result<Request> {
        let v = self.client.get(&format!("/repos/{}/pulls/{number}", self.repo()))?;
        request_of(&v)
            .ok_or_else(|| anyhow::anyhow!("{} answered pull request #{number} without its state", self.word()))
    }

    fn checks(&self, request: &Request) -> Result<Checks> {
        let mut reported = Vec::new();
        let status = self.client.get(&format!("/repos/{}/commits/{}/status", self.repo(), request.head))?;
        for s in status["statuses"].as_array().into_iter().flatten() {
            // GitHub writes `state`; Gitea `status`; Forgejo both.
            let said = s.get("status").or_else(|| s.get("state")).and_then(Value::as_str).unwrap_or_default();
            let state = match said {
                "success" | "warning" => "success",
                "pending" => "pending",
                _ => "failure",
            };
            reported.push((text(&s["context"]), state, text(&s["description"])));
        }
        if !self.forgejo {
            let runs =
                self.client.get(&format!("/repos/{}/commits/{}/check-runs?per_page=100", self.repo(), request.head))?;
            for r in runs["check_runs"].as_array().into_iter().flatten() {
                let state =
                    match (r["status"].as_str().unwrap_or_default(), r["conclusion"].as_str().unwrap_or_default()) {
                        ("completed", "success" | "neutral" | "skipped") => "success",
                        ("completed", _) => "failure",
                        _ => "pending",
                    };
                let said = r["output"]["title"].as_str().or(r["conclusion"].as_str()).unwrap_or_default().to_owned();
                reported.push((text(&r["name"]), state, said));
            }
        }
        Ok(Checks::of(reported))
    }

    fn reviews(&self, request: &Request) -> Result<Vec<Review>> {
        let path = format!("/repos/{}/pulls/{}/reviews?{}", self.repo(), request.number, self.per_page());
        Ok(self.client.get_all(&path)?.iter().filter_map(review_of).collect())
    }

    fn retarget(&self, request: &Request, base: &str) -> Result<()> {
        let path = format!("/repos/{}/pulls/{}", self.repo(), request.number);
        self.client.send("PATCH", &path, &json!({ "base": base }))?;
        Ok(())
    }
}

/// A JSON string's text ("" for anything else).
pub fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// `text` percent-encoded for a URL's path segment or query value.
pub fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
