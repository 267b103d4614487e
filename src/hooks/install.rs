//! Installing the files of `hooks/` where each tool reads them, and removing them again,
//! leaving whatever the user had there.
//!
//! - Shell hooks (`pre-push`, `pre-receive`) and Codex's `config.toml`: our lines sit between
//!   `# >>> git-loop <what> >>>` and `# <<< git-loop <what> <<<`. An existing shell hook keeps
//!   its content; our block goes right after its `#!` line and hands the ref list on to it.
//! - Claude Code's `settings.json` cannot hold comments: our entries are the hook groups
//!   whose command runs `git-loop hook claude-code`; the user's other keys, hooks and key
//!   order are kept.
//!
//! Installing twice changes nothing; uninstalling removes exactly what installing added (and
//! a file that held nothing else). The installed files run this program by its absolute
//! path, so they work whatever PATH the tool gives its hooks.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::json::Json;
use crate::error::{refused, usage};
use crate::store::Store;

use crate::agent::wiring::{claude_command, claude_session_settings, codex_notify, shell_quote, CODEX_NOTIFY};

/// The git hooks users install, as shipped in `hooks/` (they run `git-loop` from PATH).
pub const PRE_PUSH: &str = include_str!("../../hooks/pre-push");
pub const PRE_RECEIVE: &str = include_str!("../../hooks/pre-receive");

/// The Claude Code events the loop hooks.
pub const CLAUDE_EVENTS: &[&str] = &["Stop", "StopFailure", "SessionEnd"];

/// Where one hook goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Claude Code's settings file (`~/.claude/settings.json`).
    ClaudeCode(PathBuf),
    /// Codex's configuration (`~/.codex/config.toml`).
    Codex(PathBuf),
    /// A clone's `pre-push` hook file.
    PrePush(PathBuf),
    /// A remote's `pre-receive` hook file.
    PreReceive(PathBuf),
}

impl Target {
    /// The short name people see: `claude-code`, `codex`, `pre-push`, `pre-receive`.
    pub fn name(&self) -> &'static str {
        match self {
            Target::ClaudeCode(_) => "claude-code",
            Target::Codex(_) => "codex",
            Target::PrePush(_) => "pre-push",
            Target::PreReceive(_) => "pre-receive",
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Target::ClaudeCode(p) | Target::Codex(p) | Target::PrePush(p) | Target::PreReceive(p) => p,
        }
    }
}

/// What `install` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// Added where there was none.
    Added,
    /// Ours was there, for another program path; replaced.
    Updated,
    /// Already there, exactly.
    Unchanged,
}

/// What `uninstall` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    Removed,
    NotInstalled,
}

/// What `status` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Installed,
    /// Ours is there but runs another program path (or an older version of the hook).
    Outdated,
    /// Not there; `true` when the file exists with the user's own content.
    Absent {
        file_exists: bool,
    },
}

/// The `pre-push` file of the repository `store` opened: `core.hooksPath` if set, else
/// `<git-common-dir>/hooks`.
pub fn pre_push_path(store: &Store) -> PathBuf {
    hooks_dir(store.config("core.hooksPath"), store.common_dir(), store.workdir()).join("pre-push")
}

/// The `pre-receive` file of the repository at `repo_dir` (a bare remote, usually).
pub fn pre_receive_path(repo_dir: &Path) -> Result<PathBuf> {
    let repo = gix::open_opts(repo_dir, gix::open::Options::isolated()).map_err(|err| {
        usage(format!("'{}' is not a git repository: {err}", repo_dir.display()))
            .hint("pass the path of the remote's repository, e.g. /srv/git/project.git")
    })?;
    let base = repo.workdir().map(Path::to_owned).unwrap_or_else(|| repo.git_dir().to_owned());
    use gix::bstr::ByteSlice as _;
    let hooks_path = repo.config_snapshot().string("core.hooksPath").map(|p| p.to_str_lossy().into_owned());
    Ok(hooks_dir(hooks_path, repo.common_dir(), &base).join("pre-receive"))
}

/// The hooks directory: `hooks_path` (`core.hooksPath`, relative to `base`) if set, else
/// `<common_dir>/hooks`.
fn hooks_dir(hooks_path: Option<String>, common_dir: &Path, base: &Path) -> PathBuf {
    match hooks_path {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            if path.is_absolute() {
                path
            } else {
                base.join(path)
            }
        }
        _ => common_dir.join("hooks"),
    }
}

/// Install the hook for `target`, run as `exe`.
pub fn install(target: &Target, exe: &Path) -> Result<Installed> {
    match target {
        Target::ClaudeCode(path) => install_claude(path, exe),
        Target::Codex(path) => install_codex(path, exe),
        Target::PrePush(path) => install_script(path, &script(PRE_PUSH, exe)),
        Target::PreReceive(path) => install_script(path, &script(PRE_RECEIVE, exe)),
    }
}

/// Remove what `install` added for `target`.
pub fn uninstall(target: &Target) -> Result<Removed> {
    match target {
        Target::ClaudeCode(path) => uninstall_claude(path),
        Target::Codex(path) | Target::PrePush(path) | Target::PreReceive(path) => uninstall_block(path),
    }
}

/// Whether `target`'s hook is installed, for `exe`.
pub fn status(target: &Target, exe: &Path) -> Result<State> {
    let Some(text) = read(target.path())? else {
        return Ok(State::Absent { file_exists: false });
    };
    let absent = State::Absent { file_exists: true };
    Ok(match target {
        Target::ClaudeCode(path) => {
            let root = parse_settings(path, &text)?;
            let wanted = claude_command(exe);
            let commands: Vec<String> = CLAUDE_EVENTS.iter().flat_map(|event| ours_in(&root, event)).collect();
            if commands.is_empty() {
                absent
            } else if commands.len() == CLAUDE_EVENTS.len() && commands.iter().all(|c| *c == wanted) {
                State::Installed
            } else {
                State::Outdated
            }
        }
        Target::Codex(_) => block_state(&text, &block_of(&codex_block(exe))),
        Target::PrePush(_) => block_state(&text, &block_of(&script(PRE_PUSH, exe))),
        Target::PreReceive(_) => block_state(&text, &block_of(&script(PRE_RECEIVE, exe))),
    })
}

/// A shipped script with its `git-loop hook` calls made to run `exe`.
fn script(template: &str, exe: &Path) -> String {
    template.replace("\ngit-loop hook ", &format!("\n{} hook ", shell_quote(&exe.display().to_string())))
}

fn codex_block(exe: &Path) -> String {
    CODEX_NOTIFY.replace("notify = [\"git-loop\", \"hook\", \"codex\"]", &format!("notify = {}", codex_notify(exe)))
}

fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err).with_context(|| format!("could not read '{}'", path.display())),
    }
}

/// Replace `path`'s content in one rename, keeping its permissions (`mode` for a new file).
fn write(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().context("a hook file has a directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("could not create '{}'", dir.display()))?;
    let mode = std::fs::metadata(path).map(|m| m.permissions().mode()).unwrap_or(mode);
    let tmp = dir.join(format!(
        ".{}.git-loop-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("hook"),
        crate::ids::random_base32(6)
    ));
    std::fs::write(&tmp, text).with_context(|| format!("could not write '{}'", tmp.display()))?;
    let done = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(err) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(err).with_context(|| format!("could not write '{}'", path.display()));
    }
    Ok(())
}

fn remove(path: &Path) -> Result<()> {
    std::fs::remove_file(path).with_context(|| format!("could not remove '{}'", path.display()))
}

// ----- marked blocks (shell scripts, Codex's TOML) -----

/// The lines from `# >>> git-loop` to `# <<< git-loop`, inclusive, of a shipped file.
fn block_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| l.starts_with("# >>> git-loop")).expect("shipped hooks have a start marker");
    let end = lines.iter().position(|l| l.starts_with("# <<< git-loop")).expect("shipped hooks have an end marker");
    let mut block = lines[start..=end].join("\n");
    block.push('\n');
    block
}

/// Where our block is in `text`: (first byte, one past its last line).
fn find_block(text: &str) -> Option<(usize, usize)> {
    let mut start = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if start.is_none() && line.starts_with("# >>> git-loop") {
            start = Some(at);
        }
        at += line.len();
        if let Some(s) = start {
            if line.starts_with("# <<< git-loop") {
                return Some((s, at));
            }
        }
    }
    None
}

fn block_state(text: &str, wanted: &str) -> State {
    match find_block(text) {
        Some((s, e)) if &text[s..e] == wanted => State::Installed,
        Some(_) => State::Outdated,
        None => State::Absent { file_exists: true },
    }
}

/// Install a shell hook: the whole script where there is none, else our block after the
/// existing script's `#!` line (or in place of our old block).
fn install_script(path: &Path, full: &str) -> Result<Installed> {
    use std::os::unix::fs::PermissionsExt;
    let block = block_of(full);
    let Some(text) = read(path)? else {
        write(path, full, 0o755)?;
        return Ok(Installed::Added);
    };
    if let Some((s, e)) = find_block(&text) {
        if text[s..e] == block {
            return Ok(Installed::Unchanged);
        }
        write(path, &format!("{}{block}{}", &text[..s], &text[e..]), 0o755)?;
        return Ok(Installed::Updated);
    }
    let first = text.lines().next().unwrap_or("");
    let shell = first.starts_with("#!")
        && ["sh", "bash", "dash", "zsh", "ksh"]
            .iter()
            .any(|s| first.trim_end().ends_with(&format!("/{s}")) || first.trim_end().ends_with(&format!(" {s}")));
    if !shell {
        return Err(refused(format!("'{}' exists and is not a shell script", path.display()))
            .hint(format!(
                "run 'git-loop hook {}' from it yourself, passing it the hook's arguments and standard input",
                path.file_name().and_then(|n| n.to_str()).unwrap_or("<hook>")
            ))
            .into());
    }
    let executable = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false);
    if !executable {
        return Err(refused(format!("'{}' exists but is not executable, so git does not run it", path.display()))
            .hint(format!("make it executable ('chmod +x {}') or remove it, then install again", path.display()))
            .into());
    }
    let cut = text.find('\n').map_or(text.len(), |n| n + 1);
    let head = if cut == text.len() && !text.ends_with('\n') { format!("{text}\n") } else { text[..cut].to_owned() };
    write(path, &format!("{head}{block}{}", &text[cut..]), 0o755)?;
    Ok(Installed::Added)
}

/// Remove our block; remove the file when nothing but a `#!` line (or nothing) is left.
fn uninstall_block(path: &Path) -> Result<Removed> {
    let Some(text) = read(path)? else {
        return Ok(Removed::NotInstalled);
    };
    let Some((s, e)) = find_block(&text) else {
        return Ok(Removed::NotInstalled);
    };
    let rest = format!("{}{}", &text[..s], &text[e..]);
    let meaningful = rest.lines().enumerate().any(|(i, l)| !(l.trim().is_empty() || (i == 0 && l.starts_with("#!"))));
    if meaningful {
        // The blank line `install_codex` put after the block goes with it.
        let rest = if text[e..].starts_with('\n') && s == 0 { rest[1..].to_owned() } else { rest };
        write(path, &rest, 0o644)?;
    } else {
        remove(path)?;
    }
    Ok(Removed::Removed)
}

/// Install Codex's `notify` at the top of `config.toml` (a top-level key must come before
/// any table). Codex runs a single notify program: one of the user's own is not replaced.
fn install_codex(path: &Path, exe: &Path) -> Result<Installed> {
    let block = block_of(&codex_block(exe));
    let text = read(path)?.unwrap_or_default();
    if let Some((s, e)) = find_block(&text) {
        if text[s..e] == block {
            return Ok(Installed::Unchanged);
        }
        write(path, &format!("{}{block}{}", &text[..s], &text[e..]), 0o644)?;
        return Ok(Installed::Updated);
    }
    let top_level = text.lines().take_while(|l| !l.trim_start().starts_with('['));
    if let Some(line) = top_level.into_iter().find(|l| {
        let t = l.trim_start();
        t.strip_prefix("notify").is_some_and(|rest| rest.trim_start().starts_with('='))
    }) {
        return Err(refused(format!("'{}' already sets Codex's notify program: {}", path.display(), line.trim()))
            .hint("Codex runs one notify program: remove that line, or have your program also run 'git-loop hook codex \"$1\"'")
            .into());
    }
    let joined = if text.is_empty() { block } else { format!("{block}\n{text}") };
    write(path, &joined, 0o644)?;
    Ok(Installed::Added)
}

// ----- Claude Code's settings.json -----

fn parse_settings(path: &Path, text: &str) -> Result<Json> {
    if text.trim().is_empty() {
        return Ok(Json::Object(Vec::new()));
    }
    let root = Json::parse(text).map_err(|err| {
        refused(format!("'{}' is not valid JSON: {err}", path.display()))
            .hint("fix it (Claude Code cannot read it either), then install again")
    })?;
    if root.as_object().is_none() {
        return Err(refused(format!("'{}' does not hold a JSON object", path.display())).into());
    }
    Ok(root)
}

/// Whether a hook group of Claude Code's settings is ours: one of its commands runs
/// `git-loop hook claude-code` (by any path).
fn is_ours(group: &Json) -> bool {
    group
        .get("hooks")
        .and_then(Json::as_array)
        .is_some_and(|hooks| hooks.iter().any(|h| h.get("command").and_then(Json::as_str).is_some_and(is_our_command)))
}

fn is_our_command(command: &str) -> bool {
    command.contains("git-loop") && command.trim_end().ends_with(" hook claude-code")
}

/// The commands of our groups for `event`.
fn ours_in(root: &Json, event: &str) -> Vec<String> {
    let groups = root.get("hooks").and_then(|h| h.get(event)).and_then(Json::as_array);
    groups
        .into_iter()
        .flatten()
        .filter(|g| is_ours(g))
        .flat_map(|g| g.get("hooks").and_then(Json::as_array).cloned().unwrap_or_default())
        .filter_map(|h| h.get("command").and_then(Json::as_str).map(ToOwned::to_owned))
        .collect()
}

fn install_claude(path: &Path, exe: &Path) -> Result<Installed> {
    let before = read(path)?;
    let mut root = parse_settings(path, before.as_deref().unwrap_or(""))?;
    let shipped = Json::parse(&claude_session_settings(exe)).expect("hooks/claude-code.json is valid");
    let had_ours = CLAUDE_EVENTS.iter().any(|e| !ours_in(&root, e).is_empty());
    let hooks = root.entry("hooks", Json::Object(Vec::new())).expect("the root is an object");
    if hooks.as_object().is_none() {
        return Err(refused(format!("'{}' has a \"hooks\" value that is not an object", path.display())).into());
    }
    for event in CLAUDE_EVENTS {
        let ours = shipped.get("hooks").and_then(|h| h.get(event)).cloned().expect("shipped for every event");
        let list = hooks.entry(event, Json::Array(Vec::new())).expect("hooks is an object");
        let Json::Array(groups) = list else {
            return Err(refused(format!("'{}' has hooks.{event} that is not a list", path.display())).into());
        };
        groups.retain(|g| !is_ours(g));
        groups.extend(ours.as_array().cloned().unwrap_or_default());
    }
    let text = root.pretty();
    if before.as_deref() == Some(text.as_str()) {
        return Ok(Installed::Unchanged);
    }
    write(path, &text, 0o644)?;
    Ok(if had_ours { Installed::Updated } else { Installed::Added })
}

fn uninstall_claude(path: &Path) -> Result<Removed> {
    let Some(text) = read(path)? else {
        return Ok(Removed::NotInstalled);
    };
    let mut root = parse_settings(path, &text)?;
    if CLAUDE_EVENTS.iter().all(|e| ours_in(&root, e).is_empty()) {
        return Ok(Removed::NotInstalled);
    }
    if let Some(hooks) = root.get_mut("hooks") {
        for event in CLAUDE_EVENTS {
            if let Some(Json::Array(groups)) = hooks.get_mut(event) {
                if groups.iter().any(is_ours) {
                    groups.retain(|g| !is_ours(g));
                    if groups.is_empty() {
                        hooks.remove(event);
                    }
                }
            }
        }
        if hooks.is_empty_container() {
            root.remove("hooks");
        }
    }
    if root.is_empty_container() {
        remove(path)?;
    } else {
        write(path, &root.pretty(), 0o644)?;
    }
    Ok(Removed::Removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_scripts_run_the_given_program() {
        let text = script(PRE_PUSH, Path::new("/opt/my tools/git-loop"));
        assert!(text.contains("\n'/opt/my tools/git-loop' hook pre-push \"$@\""), "{text}");
        assert!(!text.contains("\ngit-loop hook"), "{text}");
        let settings = claude_session_settings(Path::new("/x/git-loop"));
        let root = Json::parse(&settings).expect("valid JSON");
        for event in CLAUDE_EVENTS {
            assert_eq!(ours_in(&root, event), ["/x/git-loop hook claude-code"]);
        }
        assert!(codex_block(Path::new("/x/git-loop")).contains("notify = [\"/x/git-loop\", \"hook\", \"codex\"]"));
    }
}
