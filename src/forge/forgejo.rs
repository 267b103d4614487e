//! Forgejo's and Gitea's REST API (v1): pull requests, the combined commit status, reviews.
//! Their pull requests and reviews read as GitHub's do.

use anyhow::Result;
use serde_json::{json, Value};

use super::github::{encode, pick, request_of, review_of, text};
use super::http::{status_of, Client};
use super::{Checks, Forge, NewRequest, Place, Request, Review};

pub struct Forgejo {
    client: Client,
}

impl Forgejo {
    pub fn new(client: Client) -> Forgejo {
        Forgejo { client }
    }

    fn repo(&self) -> String {
        self.client.place.repo.split('/').map(encode).collect::<Vec<_>>().join("/")
    }
}

impl Forge for Forgejo {
    fn place(&self) -> &Place {
        &self.client.place
    }

    fn find(&self, branch: &str) -> Result<Option<Request>> {
        // No filter by head in the listing every version has: all of them, newest first.
        let listed = self.client.get_all(&format!("/repos/{}/pulls?state=all&limit=50&sort=newest", self.repo()))?;
        Ok(pick(listed.iter().filter_map(request_of).filter(|r| r.branch == branch).collect()))
    }

    fn open(&self, new: &NewRequest<'_>) -> Result<Request> {
        let body = json!({ "title": new.title, "head": new.branch, "base": new.base, "body": new.body });
        match self.client.send("POST", &format!("/repos/{}/pulls", self.repo()), &body) {
            Ok(v) => request_of(&v)
                .ok_or_else(|| anyhow::anyhow!("forgejo answered the new pull request without its number")),
            // "pull request already exists for these targets": found, not doubled.
            Err(err) if status_of(&err).is_some_and(|s| s.code == 409 || s.said.contains("already exists")) => {
                self.find(new.branch)?.ok_or(err)
            }
            Err(err) => Err(err),
        }
    }

    fn get(&self, number: u64) -> Result<Request> {
        let v = self.client.get(&format!("/repos/{}/pulls/{number}", self.repo()))?;
        request_of(&v).ok_or_else(|| anyhow::anyhow!("forgejo answered pull request #{number} without its state"))
    }

    fn checks(&self, request: &Request) -> Result<Checks> {
        let status = self.client.get(&format!("/repos/{}/commits/{}/status", self.repo(), request.head))?;
        let mut reported = Vec::new();
        for s in status["statuses"].as_array().into_iter().flatten() {
            // Gitea writes `status`, Forgejo both `status` and `state`.
            let said = s.get("status").or_else(|| s.get("state")).and_then(Value::as_str).unwrap_or_default();
            let state = match said {
                "success" | "warning" => "success",
                "pending" => "pending",
                _ => "failure",
            };
            reported.push((text(&s["context"]), state, text(&s["description"])));
        }
        Ok(Checks::of(reported))
    }

    fn reviews(&self, request: &Request) -> Result<Vec<Review>> {
        let listed =
            self.client.get_all(&format!("/repos/{}/pulls/{}/reviews?limit=50", self.repo(), request.number))?;
        Ok(listed.iter().filter_map(review_of).collect())
    }

    fn retarget(&self, request: &Request, base: &str) -> Result<()> {
        self.client.send(
            "PATCH",
            &format!("/repos/{}/pulls/{}", self.repo(), request.number),
            &json!({ "base": base }),
        )?;
        Ok(())
    }
}
