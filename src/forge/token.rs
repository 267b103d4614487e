//! The token a forge is called with: from the environment, else from git's credential helper.
//! It is held in memory only: never written, never printed.

use std::io::Write as _;
use std::process::{Command, Stdio};

use anyhow::Result;

use super::http::{token_hint, Token};
use super::{Kind, Place};
use crate::error::{Class, Refusal};

/// The variables read, in order, for a forge of `kind`.
pub fn variables(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::GitHub => &["GIT_LOOP_FORGE_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"],
        Kind::GitLab => &["GIT_LOOP_FORGE_TOKEN", "GITLAB_TOKEN", "GL_TOKEN"],
        Kind::Forgejo => &["GIT_LOOP_FORGE_TOKEN", "FORGEJO_TOKEN", "GITEA_TOKEN"],
    }
}

/// The token for `place`: the first of its variables that is set, else what `git credential
/// fill` gives for its web host (never prompting).
pub fn find(store: &crate::store::Store, place: &Place) -> Result<Token> {
    for var in variables(place.kind) {
        if let Ok(value) = std::env::var(var) {
            if !value.trim().is_empty() {
                return Ok(Token { value: value.trim().to_owned(), source: format!("${var}") });
            }
        }
    }
    if let Some(value) = from_helper(store, &place.web) {
        return Ok(Token { value, source: "git's credential helper".into() });
    }
    Err(Refusal::new(
        Class::Usage,
        format!(
            "no token for {} at {}: a {} cannot be opened without one",
            place.kind.word(),
            place.web,
            place.kind.request_word()
        ),
    )
    .hint(token_hint(place.kind))
    .into())
}

/// `git credential fill` for `web` (`https://host[:port]`), without a prompt: the password it
/// gives, if any.
fn from_helper(store: &crate::store::Store, web: &str) -> Option<String> {
    let (protocol, host) = web.split_once("://")?;
    let mut child = Command::new("git")
        .args(["credential", "fill"])
        .current_dir(store.workdir())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env("SSH_ASKPASS", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let ask = format!("protocol={protocol}\nhost={host}\n\n");
    let _ = child.stdin.take()?.write_all(ask.as_bytes());
    let output = child.wait_with_output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines().find_map(|l| l.strip_prefix("password=")).map(str::to_owned).filter(|p| !p.trim().is_empty())
}
