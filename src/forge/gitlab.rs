//! GitLab's REST API (v4): merge requests, commit statuses (a pipeline's jobs and external
//! statuses), approvals and reviewers who requested changes.

use anyhow::Result;
use serde_json::{json, Value};

use super::github::{encode, text};
use super::http::{status_of, Client};
use super::{Checks, Forge, NewRequest, Place, Request, RequestState, Review, ReviewState};

pub struct GitLab {
    client: Client,
}

impl GitLab {
    pub fn new(client: Client) -> GitLab {
        GitLab { client }
    }

    /// The project's id in a path: its full path, encoded.
    fn project(&self) -> String {
        format!("/projects/{}", encode(&self.client.place.repo))
    }
}

fn request_of(v: &Value) -> Option<Request> {
    let state = match v.get("state")?.as_str()? {
        "opened" | "locked" => RequestState::Open,
        "merged" => RequestState::Merged,
        _ => RequestState::Closed,
    };
    let merge_commit = v["merge_commit_sha"].as_str().or(v["squash_commit_sha"].as_str()).map(str::to_owned);
    let by = match state {
        RequestState::Merged => v["merged_by"]["username"].as_str(),
        RequestState::Closed => v["closed_by"]["username"].as_str(),
        RequestState::Open => None,
    };
    Some(Request {
        number: v.get("iid")?.as_u64()?,
        url: text(&v["web_url"]),
        state,
        branch: text(&v["source_branch"]),
        head: text(&v["sha"]),
        base: text(&v["target_branch"]),
        merge_commit: merge_commit.filter(|_| state == RequestState::Merged),
        by: by.map(str::to_owned),
    })
}

impl Forge for GitLab {
    fn place(&self) -> &Place {
        &self.client.place
    }

    fn find(&self, branch: &str) -> Result<Option<Request>> {
        let path = format!("{}/merge_requests?state=all&per_page=100&source_branch={}", self.project(), encode(branch));
        let found = self.client.get_all(&path)?.iter().filter_map(request_of).filter(|r| r.branch == branch).collect();
        Ok(super::github::pick(found))
    }

    fn open(&self, new: &NewRequest<'_>) -> Result<Request> {
        let body = json!({
            "source_branch": new.branch,
            "target_branch": new.base,
            "title": new.title,
            "description": new.body,
            "remove_source_branch": false,
        });
        match self.client.send("POST", &format!("{}/merge_requests", self.project()), &body) {
            Ok(v) => {
                request_of(&v).ok_or_else(|| anyhow::anyhow!("gitlab answered the new merge request without its iid"))
            }
            // "Another open merge request already exists for this source branch": found.
            Err(err) if status_of(&err).is_some_and(|s| s.code == 409 || s.said.contains("already exists")) => {
                self.find(new.branch)?.ok_or(err)
            }
            Err(err) => Err(err),
        }
    }

    fn get(&self, number: u64) -> Result<Request> {
        let v = self.client.get(&format!("{}/merge_requests/{number}", self.project()))?;
        request_of(&v).ok_or_else(|| anyhow::anyhow!("gitlab answered merge request !{number} without its state"))
    }

    fn checks(&self, request: &Request) -> Result<Checks> {
        // The latest status of each job or external check on the head (GitLab's default).
        let listed = self.client.get_all(&format!(
            "{}/repository/commits/{}/statuses?per_page=100",
            self.project(),
            request.head
        ))?;
        let reported = listed
            .iter()
            .map(|s| {
                let state = match s["status"].as_str().unwrap_or_default() {
                    "success" | "skipped" | "manual" => "success",
                    "failed" | "canceled" => "failure",
                    _ => "pending",
                };
                (text(&s["name"]), state, text(&s["description"]))
            })
            .collect();
        Ok(Checks::of(reported))
    }

    fn reviews(&self, request: &Request) -> Result<Vec<Review>> {
        let n = request.number;
        let mut out = Vec::new();
        let approvals = self.client.get(&format!("{}/merge_requests/{n}/approvals", self.project()))?;
        for a in approvals["approved_by"].as_array().into_iter().flatten() {
            let by = text(&a["user"]["username"]);
            out.push(Review {
                id: format!("approved:{by}:{}", request.head),
                state: ReviewState::Approved,
                by,
                body: String::new(),
            });
        }
        let reviewers = self.client.get_all(&format!("{}/merge_requests/{n}/reviewers", self.project()))?;
        let asking: Vec<String> = reviewers
            .iter()
            .filter(|r| r["state"].as_str() == Some("requested_changes"))
            .map(|r| text(&r["user"]["username"]))
            .collect();
        if !asking.is_empty() {
            let notes = self.client.get_all(&format!(
                "{}/merge_requests/{n}/notes?sort=asc&order_by=created_at&per_page=100",
                self.project()
            ))?;
            for by in asking {
                // What they wrote last is what they ask for; a new note makes a new round.
                let last = notes.iter().rev().find(|note| {
                    note["system"] != Value::Bool(true) && note["author"]["username"].as_str() == Some(by.as_str())
                });
                let (id, body) = match last {
                    Some(note) => (note["id"].to_string(), text(&note["body"])),
                    None => (String::new(), String::new()),
                };
                out.push(Review { id: format!("changes:{by}:{id}"), state: ReviewState::ChangesRequested, by, body });
            }
        }
        Ok(out)
    }

    fn retarget(&self, request: &Request, base: &str) -> Result<()> {
        let path = format!("{}/merge_requests/{}", self.project(), request.number);
        self.client.send("PUT", &path, &json!({ "target_branch": base }))?;
        Ok(())
    }
}
