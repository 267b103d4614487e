//! Whether an agent could be reached at all: each CLI says "rate limit", "usage limit",
//! "service down" or "login expired" in its own words, and a session that ended without a
//! verdict while saying one of them is not the task's fault — the task goes to a fallback
//! agent instead of being counted as a failure.
//!
//! The phrases come from running each CLI against a loopback server that answers like its
//! vendor's API does (401, 429, quota and plan limits) and from strings in the CLIs
//! themselves; docs/agents.md lists them. A named agent of your own can add its phrases with
//! `loop.agent.<name>.unreachable = <phrase>` (repeatable; the reason is "unreachable").
//!
//! Also here: where each CLI keeps a session's transcript, so a fallback agent can be handed a
//! copy.

use std::path::{Path, PathBuf};

/// Why an agent is unreachable, in the words the loop prints.
pub const RATE_LIMIT: &str = "rate limit";
pub const USAGE_LIMIT: &str = "usage limit";
pub const SERVICE_DOWN: &str = "service down";
pub const LOGIN_EXPIRED: &str = "login expired";

/// (phrase, reason) pairs for a built-in preset, matched case-insensitively.
fn phrases(agent: &str) -> &'static [(&'static str, &'static str)] {
    match agent {
        "claude" => &[
            ("you've hit your", USAGE_LIMIT),
            ("you\u{2019}ve hit your", USAGE_LIMIT),
            ("usage limit reached", USAGE_LIMIT),
            ("credit balance is too low", USAGE_LIMIT),
            ("\"error\":\"billing_error\"", USAGE_LIMIT),
            ("\"error\":\"rate_limit\"", RATE_LIMIT),
            ("request rejected (429)", RATE_LIMIT),
            ("\"api_error_status\":429", RATE_LIMIT),
            ("exceed your account's rate limit", RATE_LIMIT),
            ("\"error\":\"overloaded\"", SERVICE_DOWN),
            ("overloaded_error", SERVICE_DOWN),
            ("\"api_error_status\":529", SERVICE_DOWN),
            ("\"api_error_status\":503", SERVICE_DOWN),
            ("not logged in", LOGIN_EXPIRED),
            ("please run /login", LOGIN_EXPIRED),
            ("oauth token expired", LOGIN_EXPIRED),
            ("oauth token has expired", LOGIN_EXPIRED),
            ("your session has expired", LOGIN_EXPIRED),
            ("invalid api key", LOGIN_EXPIRED),
            ("\"error\":\"authentication_failed\"", LOGIN_EXPIRED),
        ],
        "codex" => &[
            ("hit your usage limit", USAGE_LIMIT),
            ("quota exceeded", USAGE_LIMIT),
            ("usage_limit_reached", USAGE_LIMIT),
            ("insufficient_quota", USAGE_LIMIT),
            ("last status: 429", RATE_LIMIT),
            ("429 too many requests", RATE_LIMIT),
            ("rate_limit_exceeded", RATE_LIMIT),
            ("is at capacity", SERVICE_DOWN),
            ("503 service unavailable", SERVICE_DOWN),
            ("run codex login", LOGIN_EXPIRED),
            ("not signed in", LOGIN_EXPIRED),
            ("401 unauthorized", LOGIN_EXPIRED),
            ("token_expired", LOGIN_EXPIRED),
        ],
        "opencode" => &[
            ("usage limit reached", USAGE_LIMIT),
            ("quota exceeded", USAGE_LIMIT),
            ("exceed your account's rate limit", RATE_LIMIT),
            ("\"statuscode\":429", RATE_LIMIT),
            ("\"statuscode\":503", SERVICE_DOWN),
            ("\"statuscode\":529", SERVICE_DOWN),
            ("opencode auth login", LOGIN_EXPIRED),
            ("\"statuscode\":401", LOGIN_EXPIRED),
        ],
        "gemini" => &[
            ("exhausted your daily quota", USAGE_LIMIT),
            ("usage limit reached", USAGE_LIMIT),
            ("quota exceeded", USAGE_LIMIT),
            ("resource_exhausted", RATE_LIMIT),
            ("status 429", RATE_LIMIT),
            ("\"code\":429", RATE_LIMIT),
            ("status 503", SERVICE_DOWN),
            ("model is overloaded", SERVICE_DOWN),
            ("manual authorization is required", LOGIN_EXPIRED),
            ("api key not valid", LOGIN_EXPIRED),
            ("status 401", LOGIN_EXPIRED),
        ],
        "aider" => &[
            ("insufficient_quota", USAGE_LIMIT),
            ("quota exceeded", USAGE_LIMIT),
            ("ratelimiterror", RATE_LIMIT),
            ("has rate limited you", RATE_LIMIT),
            ("serviceunavailableerror", SERVICE_DOWN),
            ("apiconnectionerror", SERVICE_DOWN),
            ("overloaded", SERVICE_DOWN),
            ("authenticationerror", LOGIN_EXPIRED),
            ("invalid api key", LOGIN_EXPIRED),
        ],
        // The demo agent says this when told to play an unreachable agent.
        "demo" => &[("git-loop demo: usage limit reached", USAGE_LIMIT)],
        _ => &[],
    }
}

/// Why the agent was unreachable, if its output (the session log's tail) says so. `extra`
/// are the user's own phrases for a named agent; the reason is guessed from the phrase.
pub fn unreachable(agent: &str, log_tail: &str, extra: &[String]) -> Option<&'static str> {
    let text = log_tail.to_lowercase();
    for (phrase, reason) in phrases(agent) {
        if text.contains(phrase) {
            return Some(reason);
        }
    }
    let phrase = extra.iter().map(|p| p.trim().to_lowercase()).find(|p| !p.is_empty() && text.contains(p.as_str()))?;
    let has = |words: &[&str]| words.iter().any(|w| phrase.contains(w));
    Some(if has(&["rate", "429", "too many"]) {
        RATE_LIMIT
    } else if has(&["usage", "quota", "credit", "billing", "limit"]) {
        USAGE_LIMIT
    } else if has(&["login", "auth", "token", "401", "sign in", "signed in"]) {
        LOGIN_EXPIRED
    } else {
        SERVICE_DOWN
    })
}

/// Whether the CLI's output announces its own session id (see `session_id_in_output`).
pub fn announces_session_id(agent: &str) -> bool {
    matches!(agent, "codex" | "opencode")
}

/// The CLI's own session id as its JSON output announces it, for CLIs whose id the loop cannot
/// choose: Codex (`{"type":"thread.started","thread_id":…}`) and OpenCode (`"sessionID"` on
/// every event).
pub fn session_id_in_output(agent: &str, output: &str) -> Option<String> {
    if !announces_session_id(agent) {
        return None;
    }
    output
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| match agent {
            "codex" => {
                (v["type"] == "thread.started").then(|| v["thread_id"].as_str().map(ToOwned::to_owned)).flatten()
            }
            "opencode" => v["sessionID"].as_str().map(ToOwned::to_owned),
            _ => None,
        })
}

/// Where a CLI keeps the transcript of its session `id` (run in `worktree`), if it keeps one
/// on disk. `home` is the user's home directory, `codex_home` Codex's (`$CODEX_HOME`) when it
/// is not `~/.codex`.
pub fn transcript(agent: &str, id: &str, worktree: &Path, home: &Path, codex_home: Option<&Path>) -> Option<PathBuf> {
    match agent {
        // ~/.claude/projects/<the worktree path with every non-alphanumeric as '-'>/<id>.jsonl
        "claude" => {
            let projects = home.join(".claude/projects");
            let munged: String = worktree
                .display()
                .to_string()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let direct = projects.join(munged).join(format!("{id}.jsonl"));
            if direct.is_file() {
                return Some(direct);
            }
            find_file(&projects, 1, &|name| name == format!("{id}.jsonl"))
        }
        // $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl
        "codex" => {
            let root = codex_home.map(Path::to_owned).unwrap_or_else(|| home.join(".codex"));
            find_file(&root.join("sessions"), 3, &|name| name.starts_with("rollout-") && name.contains(id))
        }
        // ~/.gemini/tmp/<project>/chats/session-<time>-<first 8 of the id>.json(l)
        "gemini" => {
            let short = &id[..id.len().min(8)];
            find_file(&home.join(".gemini/tmp"), 2, &|name| name.starts_with("session-") && name.contains(short))
        }
        // aider keeps its chat history in the worktree itself.
        "aider" => Some(worktree.join(".aider.chat.history.md")).filter(|p| p.is_file()),
        _ => None,
    }
}

/// The first file under `dir` (at most `depth` directories down) whose name matches.
fn find_file(dir: &Path, depth: u32, matches: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_file() && matches(&name) {
            return Some(path);
        }
        if path.is_dir() {
            dirs.push(path);
        }
    }
    if depth == 0 {
        return None;
    }
    dirs.sort();
    dirs.iter().rev().find_map(|d| find_file(d, depth - 1, matches))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cli_says_it_is_unreachable_in_its_own_words() {
        let cases = [
            ("claude", "You've hit your session limit · resets 3pm", USAGE_LIMIT),
            ("claude", "API Error: Request rejected (429) · This request would exceed", RATE_LIMIT),
            ("claude", "Not logged in · Please run /login", LOGIN_EXPIRED),
            ("codex", "ERROR: You\u{2019}ve hit your usage limit. Upgrade to Pro", USAGE_LIMIT),
            ("codex", "exceeded retry limit, last status: 429 Too Many Requests", RATE_LIMIT),
            ("opencode", "Error: This request would exceed your account's rate limit.", RATE_LIMIT),
            ("gemini", "[API Error: You have exhausted your daily quota on this model.]", USAGE_LIMIT),
            ("aider", "litellm.RateLimitError: RateLimitError: OpenAIException", RATE_LIMIT),
        ];
        for (agent, text, reason) in cases {
            assert_eq!(unreachable(agent, text, &[]), Some(reason), "{agent}: {text}");
        }
        assert_eq!(unreachable("claude", "all tests pass; rate limiting module written", &[]), None);
        let codex = "warning: x\n{\"type\":\"thread.started\",\"thread_id\":\"0199-abc\"}\n{\"type\":\"turn.started\"}";
        assert_eq!(session_id_in_output("codex", codex).as_deref(), Some("0199-abc"));
        let opencode = "{\"type\":\"step_start\",\"sessionID\":\"ses_42\"}";
        assert_eq!(session_id_in_output("opencode", opencode).as_deref(), Some("ses_42"));
        assert_eq!(unreachable("mine", "QUOTA GONE", &["quota gone".into()]), Some(USAGE_LIMIT));
        assert_eq!(unreachable("mine", "HTTP 503 from the proxy", &["503 from".into()]), Some(SERVICE_DOWN));
    }
}
