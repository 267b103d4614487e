//! How the agent CLIs are wired to call git-loop back: the Claude Code settings and the Codex
//! flags and config a session or an install hands them, built from the files shipped in
//! `hooks/`, run as this program's absolute path. `hooks/` (the layer above) installs them
//! into a user's configuration and answers the calls; this module only says what they are.

use std::borrow::Cow;
use std::path::Path;

/// The agent CLIs' hook files as shipped in `hooks/` (they run `git-loop` from PATH).
pub const CLAUDE_CODE: &str = include_str!("../../hooks/claude-code.json");
pub const CODEX_NOTIFY: &str = include_str!("../../hooks/codex-notify.toml");

/// The Claude Code settings a loop session passes with `--settings`: the hooks of
/// `hooks/claude-code.json`, run as `exe`.
pub fn claude_session_settings(exe: &Path) -> String {
    CLAUDE_CODE.replace("\"git-loop hook claude-code\"", &json_string(&claude_command(exe)))
}

/// `exe hook claude-code`, quoted for the shell Claude Code runs hook commands with.
pub fn claude_command(exe: &Path) -> String {
    format!("{} hook claude-code", shell_quote(&exe.display().to_string()))
}

/// The TOML value of Codex's `notify` key for `exe`: `["<exe>", "hook", "codex"]`.
pub fn codex_notify(exe: &Path) -> String {
    format!("[{}, \"hook\", \"codex\"]", json_string(&exe.display().to_string()))
}

/// The TOML value of a Codex `hooks.Stop` that runs `exe hook codex` (JSON on stdin).
pub fn codex_stop_hook(exe: &Path) -> String {
    let command = format!("{} hook codex", shell_quote(&exe.display().to_string()));
    format!("[{{hooks=[{{type=\"command\",command={},timeout=60}}]}}]", json_string(&command))
}

/// `word` as exactly one word for `sh`: as it is when it holds only characters no shell
/// treats specially, else in single quotes (a quote inside as `'\''`).
pub fn shell_quote(word: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+@%:=,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
    }
}

/// A JSON (and TOML basic) string literal.
pub fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_a_shell_would_read_them_otherwise() {
        assert_eq!(shell_quote("/usr/bin/git-loop"), "/usr/bin/git-loop");
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
