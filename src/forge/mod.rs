//! Forges: where done work lands through a pull request (GitHub, Forgejo/Gitea) or a merge
//! request (GitLab) instead of a push to the target (`loop.land = pr`, `land --via pr`).
//!
//! One small trait ([`Forge`]) with an adapter per forge, each speaking the forge's published
//! REST API (GitHub v3, GitLab v4, Forgejo/Gitea v1) over HTTPS with a token:
//! - which forge, and where its API is: [`place`] reads the remote's URL (github.com,
//!   gitlab.com, codeberg.org are known), else `loop.forge`; `loop.forge.url` names the API's
//!   base (GitHub Enterprise's `https://<host>/api/v3`), `loop.forge.repo` the repository;
//! - the token: `GIT_LOOP_FORGE_TOKEN`, else the forge's own variables (`GH_TOKEN`,
//!   `GITHUB_TOKEN`; `GITLAB_TOKEN`; `FORGEJO_TOKEN`, `GITEA_TOKEN`), else git's credential
//!   helper (`git credential fill` for the forge's host). It is never written anywhere, never
//!   printed, and no error carries it.
//!
//! Every failure is one line with a hint ([`http`]): the forge unreachable, a token refused, a
//! repository it does not know, a rate limit (waited for when its reset is near, else
//! [`RateLimited`] saying until when).

mod github;
mod gitlab;
pub mod http;
mod token;

use anyhow::Result;
use serde::Serialize;

use crate::error::usage;
use crate::store::Store;

pub use http::RateLimited;

/// A forge's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    GitHub,
    GitLab,
    /// Forgejo and Gitea (one API).
    Forgejo,
}

impl Kind {
    /// Its name in settings and the journal.
    pub fn word(self) -> &'static str {
        match self {
            Kind::GitHub => "github",
            Kind::GitLab => "gitlab",
            Kind::Forgejo => "forgejo",
        }
    }

    /// What it calls a request to merge.
    pub fn request_word(self) -> &'static str {
        match self {
            Kind::GitLab => "merge request",
            _ => "pull request",
        }
    }

    /// How it writes a request's number (`#12`, GitLab's `!12`).
    pub fn sign(self) -> &'static str {
        match self {
            Kind::GitLab => "!",
            _ => "#",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        match text.trim().to_ascii_lowercase().as_str() {
            "github" | "ghe" => Some(Kind::GitHub),
            "gitlab" => Some(Kind::GitLab),
            "forgejo" | "gitea" | "codeberg" => Some(Kind::Forgejo),
            _ => None,
        }
    }
}

/// Where a repository lives on its forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub kind: Kind,
    /// The API's base URL, without a trailing slash (`https://api.github.com`).
    pub api: String,
    /// The repository's path on the forge (`owner/name`; GitLab: `group/sub/name`).
    pub repo: String,
    /// The forge's web address (`https://github.com`), whose host git's credential helper is
    /// asked for a token.
    pub web: String,
}

/// A pull or merge request as the forge reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub number: u64,
    pub url: String,
    pub state: RequestState,
    /// The branch it merges (short name) and that branch's head on the forge.
    pub branch: String,
    pub head: String,
    /// The branch it merges into (short name).
    pub base: String,
    /// The commit its merge made on the base, once merged.
    pub merge_commit: Option<String>,
    /// Who merged or closed it, when the forge says.
    pub by: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestState {
    Open,
    Closed,
    Merged,
}

impl RequestState {
    pub fn word(self) -> &'static str {
        match self {
            RequestState::Open => "open",
            RequestState::Closed => "closed",
            RequestState::Merged => "merged",
        }
    }
}

/// What the forge's CI says of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Nothing reported on it (no CI, or none started yet).
    None,
    Pending,
    Passing,
    Failing,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::None => "none",
            Verdict::Pending => "pending",
            Verdict::Passing => "passing",
            Verdict::Failing => "failing",
        }
    }
}

/// The forge's CI on a request's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checks {
    pub verdict: Verdict,
    /// Each failing check: its name and what it said.
    pub failing: Vec<String>,
    /// How many checks reported in all.
    pub total: usize,
}

impl Checks {
    /// Fold checks reported one by one: (name, state, what it said), where state is one of
    /// `pending`, `success`, `failure` (anything else that is not a success or a skip fails).
    pub fn of(reported: Vec<(String, &str, String)>) -> Checks {
        let mut failing = Vec::new();
        let mut pending = false;
        let total = reported.len();
        for (name, state, said) in reported {
            match state {
                "success" | "neutral" | "skipped" => {}
                "pending" => pending = true,
                _ => failing.push(if said.trim().is_empty() { name } else { format!("{name}: {}", said.trim()) }),
            }
        }
        let verdict = if !failing.is_empty() {
            Verdict::Failing
        } else if pending {
            Verdict::Pending
        } else if total == 0 {
            Verdict::None
        } else {
            Verdict::Passing
        };
        Checks { verdict, failing, total }
    }
}

/// A review of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// The forge's id of it (each is journaled once).
    pub id: String,
    pub state: ReviewState,
    pub by: String,
    pub body: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    Commented,
}

impl ReviewState {
    pub fn word(self) -> &'static str {
        match self {
            ReviewState::Approved => "approved",
            ReviewState::ChangesRequested => "changes_requested",
            ReviewState::Commented => "commented",
        }
    }
}

/// A request to open.
pub struct NewRequest<'a> {
    /// The branch to merge (short name, on the repository itself).
    pub branch: &'a str,
    /// The branch to merge into (short name).
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
}

/// What git-loop asks of a forge.
pub trait Forge: Send + Sync {
    fn place(&self) -> &Place;
    /// The request from `branch`, in any state (the open one first, else the newest): how a
    /// request is found again after a crash, or from another clone.
    fn find(&self, branch: &str) -> Result<Option<Request>>;
    /// Open a request; one that exists already for its branch is found and returned.
    fn open(&self, new: &NewRequest<'_>) -> Result<Request>;
    fn get(&self, number: u64) -> Result<Request>;
    /// The forge's CI on the request's head.
    fn checks(&self, request: &Request) -> Result<Checks>;
    /// Its reviews, oldest first.
    fn reviews(&self, request: &Request) -> Result<Vec<Review>>;
    /// Make it merge into `base` instead (a stacked request whose dependency merged).
    fn retarget(&self, request: &Request, base: &str) -> Result<()>;
}

/// The forge of `remote_name`: where, with a token, ready to call.
pub fn connect(store: &Store, remote_name: &str) -> Result<Box<dyn Forge>> {
    let place = place(store, remote_name)?;
    let token = token::find(store, &place)?;
    let client = http::Client::new(place.clone(), token, store.settings().forge_wait()?)?;
    Ok(match place.kind {
        Kind::GitHub => Box::new(github::Hub::github(client)),
        Kind::GitLab => Box::new(gitlab::GitLab::new(client)),
        Kind::Forgejo => Box::new(github::Hub::forgejo(client)),
    })
}

/// A remote URL's parts: scheme (`https`, `http`, `ssh`, `git`, `file`), host (with its port),
/// and path (without a leading `/` or a trailing `.git`).
pub fn split_url(url: &str) -> Option<(String, String, String)> {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest.to_owned()),
        None => {
            // scp-like: [user@]host:path
            let (host, path) = url.split_once(':')?;
            if host.contains('/') || path.starts_with("//") {
                return None;
            }
            ("ssh".to_owned(), format!("{host}/{path}"))
        }
    };
    let (authority, path) = rest.split_once('/').unwrap_or((&rest, ""));
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h).to_ascii_lowercase();
    let path = path.trim_matches('/').trim_end_matches(".git").trim_end_matches('/').to_owned();
    Some((scheme, host, path))
}

/// Where `remote_name`'s repository lives on its forge: `loop.forge` (its kind),
/// `loop.forge.url` (its API) and `loop.forge.repo` where set, the remote's URL for the rest.
pub fn place(store: &Store, remote_name: &str) -> Result<Place> {
    let settings = store.settings();
    let url = store.config(&format!("remote.{remote_name}.url")).ok_or_else(|| {
        usage(format!("remote '{remote_name}' has no URL, so there is no forge to open a request on"))
            .hint("add it with 'git remote add origin <url>', or set loop.remote")
    })?;
    let kind = match settings.forge() {
        None => None,
        Some(v) => Some(Kind::parse(&v).ok_or_else(|| {
            usage(format!("loop.forge '{}' is not a forge git-loop knows", v.escape_debug()))
                .hint("set it to github, gitlab, forgejo or gitea")
        })?),
    };
    let named = Named { kind, api: settings.forge_url(), repo: settings.forge_repo() };
    Ok(place_of(remote_name, &url, &named)?)
}

/// What settings name of a forge (`loop.forge`, `loop.forge.url`, `loop.forge.repo`).
#[derive(Default)]
pub struct Named {
    pub kind: Option<Kind>,
    pub api: Option<String>,
    pub repo: Option<String>,
}

/// Where the repository at `url` (remote `remote_name`) lives on its forge, `named` overriding
/// what the URL tells.
pub fn place_of(remote_name: &str, url: &str, named: &Named) -> Result<Place, crate::error::Refusal> {
    let (scheme, host, path) = split_url(url).unwrap_or_default();
    let host_name = host.split(':').next().unwrap_or_default().to_owned();
    let kind = match named.kind {
        Some(kind) => kind,
        None => match host_name.as_str() {
            "github.com" => Kind::GitHub,
            "gitlab.com" => Kind::GitLab,
            "codeberg.org" => Kind::Forgejo,
            _ => {
                return Err(usage(format!(
                    "git-loop cannot tell which forge remote '{remote_name}' ({}) is on",
                    redact_url(url)
                ))
                .hint("name it: git config loop.forge github (or gitlab, forgejo, gitea); loop.forge.url for its API"))
            }
        },
    };
    if host_name.is_empty() && named.api.is_none() {
        return Err(usage(format!(
            "remote '{remote_name}' ({}) names no host, so the forge's API is unknown",
            redact_url(url)
        ))
        .hint("name it: git config loop.forge.url https://<host>/api/v3 (or /api/v4, /api/v1)"));
    }
    let web_like = matches!(scheme.as_str(), "http" | "https");
    // The web address: the remote's host over HTTPS (HTTP only where the remote is), the port
    // kept only from a web URL (an ssh port is not the web's).
    let web =
        format!("{}://{}", if scheme == "http" { "http" } else { "https" }, if web_like { &host } else { &host_name });
    let api = match &named.api {
        Some(url) => url.trim().trim_end_matches('/').to_owned(),
        None => match kind {
            Kind::GitHub if host_name == "github.com" => "https://api.github.com".to_owned(),
            Kind::GitHub => format!("{web}/api/v3"),
            Kind::GitLab => format!("{web}/api/v4"),
            Kind::Forgejo => format!("{web}/api/v1"),
        },
    };
    if !(api.starts_with("https://") || api.starts_with("http://")) {
        return Err(usage(format!("loop.forge.url '{}' is not an http(s) URL", api.escape_debug()))
            .hint("e.g. git config loop.forge.url https://github.example.com/api/v3"));
    }
    let repo = match &named.repo {
        Some(repo) => repo.trim().trim_matches('/').to_owned(),
        None => path,
    };
    if repo.split('/').filter(|p| !p.is_empty()).count() < 2 {
        return Err(usage(format!(
            "git-loop cannot tell the repository's owner and name on {} from remote '{remote_name}'",
            kind.word()
        ))
        .hint("name it: git config loop.forge.repo <owner>/<name>"));
    }
    // The credential helper is asked for the host the token goes to: the API's, where a
    // setting names it and the remote is not a web URL of the forge.
    let web = if named.api.is_some() && (!web_like || host_name.is_empty()) {
        api.split('/').take(3).collect::<Vec<_>>().join("/")
    } else {
        web
    };
    Ok(Place { kind, api, repo, web })
}

/// `url` without a password or token in it.
pub fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
            match authority.rsplit_once('@') {
                Some((user, host)) if user.contains(':') => {
                    let name = user.split(':').next().unwrap_or_default();
                    format!("{scheme}://{name}:***@{host}/{path}")
                }
                _ => url.to_owned(),
            }
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_split_into_scheme_host_and_path() {
        let cases = [
            ("https://github.com/acme/widgets.git", ("https", "github.com", "acme/widgets")),
            ("git@github.com:acme/widgets.git", ("ssh", "github.com", "acme/widgets")),
            ("ssh://git@gitlab.com:2222/group/sub/app", ("ssh", "gitlab.com:2222", "group/sub/app")),
            ("http://user:secret@127.0.0.1:8080/acme/w.git/", ("http", "127.0.0.1:8080", "acme/w")),
        ];
        for (url, (scheme, host, path)) in cases {
            assert_eq!(split_url(url), Some((scheme.into(), host.into(), path.into())), "{url}");
        }
        assert_eq!(split_url("/srv/repo.git"), None);
    }

    #[test]
    fn the_forge_its_api_and_the_repository_are_told_by_the_remote_url_or_named() {
        let place = |url: &str, named: &Named| place_of("origin", url, named).map(|p| (p.kind, p.api, p.repo, p.web));
        let none = Named::default();
        assert_eq!(
            place("git@github.com:acme/widgets.git", &none).unwrap(),
            (Kind::GitHub, "https://api.github.com".into(), "acme/widgets".into(), "https://github.com".into())
        );
        assert_eq!(
            place("https://gitlab.com/group/sub/app.git", &none).unwrap(),
            (Kind::GitLab, "https://gitlab.com/api/v4".into(), "group/sub/app".into(), "https://gitlab.com".into())
        );
        assert_eq!(place("https://codeberg.org/a/b", &none).unwrap().1, "https://codeberg.org/api/v1");
        // GitHub Enterprise: its API under /api/v3 of its host; the ssh port is not the web's.
        let ghe = Named { kind: Some(Kind::GitHub), ..Named::default() };
        assert_eq!(
            place("ssh://git@github.example.com:2222/acme/w.git", &ghe).unwrap(),
            (
                Kind::GitHub,
                "https://github.example.com/api/v3".into(),
                "acme/w".into(),
                "https://github.example.com".into()
            )
        );
        let gitea = Named { kind: Some(Kind::Forgejo), ..Named::default() };
        assert_eq!(place("http://git.lan:3000/me/app.git", &gitea).unwrap().1, "http://git.lan:3000/api/v1");
        // A host it does not know, unnamed: one line saying how to name it, no password shown.
        let err = place("https://me:hunter2@git.example.com/a/b.git", &none).unwrap_err();
        assert!(err.message.contains("cannot tell which forge") && !err.message.contains("hunter2"), "{}", err.message);
        // Named whole: a file remote with the forge, its API and the repository set.
        let named = Named {
            kind: Some(Kind::GitLab),
            api: Some("http://127.0.0.1:9/api/v4/".into()),
            repo: Some("g/p".into()),
        };
        assert_eq!(
            place("/srv/p.git", &named).unwrap(),
            (Kind::GitLab, "http://127.0.0.1:9/api/v4".into(), "g/p".into(), "http://127.0.0.1:9".into())
        );
        let unnamed = place("/srv/p.git", &Named { kind: Some(Kind::GitLab), ..Named::default() }).unwrap_err();
        assert!(unnamed.message.contains("names no host"), "{}", unnamed.message);
        let bad = Named { api: Some("ftp://x".into()), ..Named::default() };
        assert!(place("https://github.com/a/b", &bad).unwrap_err().message.contains("not an http(s) URL"));
    }

    #[test]
    fn a_url_loses_its_password_before_it_is_shown() {
        assert_eq!(redact_url("https://me:ghp_secret@github.com/a/b"), "https://me:***@github.com/a/b");
        assert_eq!(redact_url("https://github.com/a/b"), "https://github.com/a/b");
    }

    #[test]
    fn checks_fold_failing_before_pending_before_passing() {
        let c = |v: Vec<(&str, &str)>| {
            Checks::of(v.into_iter().map(|(n, s)| (n.to_owned(), s, String::new())).collect()).verdict
        };
        assert_eq!(c(vec![]), Verdict::None);
        assert_eq!(c(vec![("a", "success"), ("b", "skipped")]), Verdict::Passing);
        assert_eq!(c(vec![("a", "success"), ("b", "pending")]), Verdict::Pending);
        assert_eq!(c(vec![("a", "failure"), ("b", "pending")]), Verdict::Failing);
        assert_eq!(c(vec![("a", "cancelled")]), Verdict::Failing);
    }
}
