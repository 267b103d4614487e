//! The home a confined run gets: a directory of its own, mounted where the real home is, with
//! only what the run needs of the real one in it.
//!
//! - An agent CLI's credentials are bound in live and writable (`~/.claude/.credentials.json`,
//!   `~/.codex/auth.json`, …): a CLI that refreshes its login writes the real file, so the
//!   person's own login keeps working (a rotated refresh token written to a copy would leave
//!   the real one dead).
//! - Its configuration is copied in (`~/.claude.json`, `~/.codex/config.toml`, …): the CLI may
//!   write to the copy, and nothing it writes reaches the person's own configuration, so
//!   nothing planted there runs later outside the sandbox.
//! - Toolchains in the home are visible read-only (`~/.cargo`, `~/.rustup`, `~/.nvm`,
//!   `~/.pyenv`, …), without the registry credentials they hold (`~/.cargo/credentials.toml`).
//! - Nothing else: not `~/.ssh`, not `~/.gitconfig`, not cloud credentials. `loop.sandbox.readOnly`
//!   and `.readWrite` name more (docs/agents.md, "The sandbox").

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// How one path of the real home reaches the run's home.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// Bound in writable: the real file, shared (a CLI's credentials).
    Live,
    /// Copied in before the run starts; what the run writes stays in its home.
    Copy,
    /// Bound in read-only.
    ReadOnly,
    /// Made empty (a file of secrets inside a directory bound read-only).
    Masked,
}

/// One path brought into the run's home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Where it is on the host.
    pub from: PathBuf,
    /// Where it goes, relative to the home.
    pub to: PathBuf,
    pub how: How,
}

/// Toolchains people keep in their home: visible read-only to every confined run, so builds and
/// checks find their compilers and caches (a cache is read, never written: see docs/agents.md).
const TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".nvm",
    ".pyenv",
    ".rbenv",
    ".local/bin",
    ".local/lib",
    ".local/share/pnpm",
    ".bun",
    ".deno",
    ".volta",
    ".asdf",
    ".sdkman",
    ".ghcup",
    ".elan",
    ".opam",
    "go",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".cache/pip",
    ".cache/uv",
    ".npm",
];

/// Secrets inside those toolchains, made empty.
const TOOLCHAIN_SECRETS: &[&str] = &[".cargo/credentials", ".cargo/credentials.toml"];

/// What each preset's CLI keeps in the home: (path, how).
fn preset_files(agent: &str) -> &'static [(&'static str, How)] {
    match agent {
        "claude" => &[
            (".claude/.credentials.json", How::Live),
            (".claude.json", How::Copy),
            (".claude/settings.json", How::Copy),
            (".claude/CLAUDE.md", How::Copy),
        ],
        "codex" => &[],
        "gemini" => &[
            (".gemini/oauth_creds.json", How::Live),
            (".gemini/settings.json", How::Copy),
            (".gemini/google_accounts.json", How::Copy),
            (".gemini/installation_id", How::Copy),
        ],
        "opencode" => &[(".local/share/opencode/auth.json", How::Live), (".config/opencode", How::Copy)],
        "aider" => &[
            (".aider.conf.yml", How::Copy),
            (".aider.model.settings.yml", How::Copy),
            (".aider.model.metadata.json", How::Copy),
        ],
        _ => &[],
    }
}

/// Where Codex keeps its files: `$CODEX_HOME`, else `~/.codex`. Inside the sandbox it is always
/// `~/.codex` of the run's home (the walk sets `CODEX_HOME` to it).
pub fn codex_home(home: &Path, codex_home: Option<&Path>) -> PathBuf {
    codex_home.map(Path::to_owned).unwrap_or_else(|| home.join(".codex"))
}

/// What of the real `home` a run of `agent` (a preset's name; none for a command: checks, setup)
/// gets, for the paths that exist.
pub fn entries(agent: Option<&str>, home: &Path, codex: Option<&Path>) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut add = |from: PathBuf, to: &str, how: How| {
        if std::fs::symlink_metadata(&from).is_ok() {
            out.push(Entry { from, to: PathBuf::from(to), how });
        }
    };
    for dir in TOOLCHAINS {
        add(home.join(dir), dir, How::ReadOnly);
    }
    for secret in TOOLCHAIN_SECRETS {
        add(home.join(secret), secret, How::Masked);
    }
    if let Some(agent) = agent {
        for (path, how) in preset_files(agent) {
            add(home.join(path), path, *how);
        }
        if agent == "codex" {
            let codex = codex_home(home, codex);
            add(codex.join("auth.json"), ".codex/auth.json", How::Live);
            add(codex.join("config.toml"), ".codex/config.toml", How::Copy);
            add(codex.join("AGENTS.md"), ".codex/AGENTS.md", How::Copy);
        }
    }
    out
}

/// Copy the `Copy` entries into `run_home` (the run's own home, on the host), following links in
/// the person's own files (a dotfile manager's) but copying only files and directories.
pub fn fill(run_home: &Path, entries: &[Entry]) -> Result<()> {
    std::fs::create_dir_all(run_home).with_context(|| format!("could not create '{}'", run_home.display()))?;
    for entry in entries.iter().filter(|e| e.how == How::Copy) {
        copy_tree(&entry.from, &run_home.join(&entry.to))?;
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let Ok(meta) = std::fs::metadata(from) else { return Ok(()) };
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("could not create '{}'", parent.display()))?;
    }
    if meta.is_dir() {
        std::fs::create_dir_all(to).with_context(|| format!("could not create '{}'", to.display()))?;
        for child in std::fs::read_dir(from).with_context(|| format!("could not read '{}'", from.display()))?.flatten()
        {
            copy_tree(&child.path(), &to.join(child.file_name()))?;
        }
    } else if meta.is_file() {
        std::fs::copy(from, to).with_context(|| format!("could not copy '{}'", from.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preset_gets_its_own_files_and_the_toolchains_never_the_rest_of_the_home() {
        let home = tempfile::tempdir().expect("tempdir");
        for path in
            [".claude/.credentials.json", ".claude.json", ".ssh/id_ed25519", ".gitconfig", ".cargo/credentials.toml"]
        {
            let file = home.path().join(path);
            std::fs::create_dir_all(file.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&file, "x").expect("write");
        }
        std::fs::create_dir_all(home.path().join(".rustup")).expect("mkdir");
        let got = entries(Some("claude"), home.path(), None);
        let names: Vec<(String, How)> = got.iter().map(|e| (e.to.display().to_string(), e.how)).collect();
        assert_eq!(
            names,
            vec![
                (".cargo".to_owned(), How::ReadOnly),
                (".rustup".to_owned(), How::ReadOnly),
                (".cargo/credentials.toml".to_owned(), How::Masked),
                (".claude/.credentials.json".to_owned(), How::Live),
                (".claude.json".to_owned(), How::Copy),
            ]
        );
        let run_home = home.path().join("run");
        fill(&run_home, &got).expect("fill");
        assert!(run_home.join(".claude.json").is_file() && !run_home.join(".ssh").exists());
        assert!(
            entries(None, home.path(), None).iter().all(|e| !e.to.starts_with(".claude")),
            "checks get no agent's files"
        );
    }
}
