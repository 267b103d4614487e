//! `git loop hooks ...`: install, uninstall and show the hooks of `hooks/` (docs/hooks.md).

mod install;
mod status;
mod uninstall;

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};

use crate::cli::env::Env;
use git_loop::error::usage;
use git_loop::hooks::install::{self as files, Target};

/// Install, remove and show hooks: agent CLIs', git's pre-push, a remote's pre-receive.
#[derive(Subcommand)]
pub enum HooksCommand {
    Install(install::InstallArgs),
    Uninstall(uninstall::UninstallArgs),
    Status(status::StatusArgs),
}

pub fn run(env: &Env, cmd: HooksCommand) -> Result<u8> {
    match cmd {
        HooksCommand::Install(args) => install::run(env, args),
        HooksCommand::Uninstall(args) => uninstall::run(env, args),
        HooksCommand::Status(args) => status::run(env, args),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AgentArg {
    /// Claude Code: Stop, StopFailure and SessionEnd hooks in its user settings.
    ClaudeCode,
    /// Codex CLI: the notify program in its config.toml.
    Codex,
    /// Both.
    All,
}

/// Which hooks a command is about.
#[derive(Args)]
struct Selection {
    /// An agent CLI's hooks, in its user configuration (~/.claude/settings.json,
    /// ~/.codex/config.toml; CLAUDE_CONFIG_DIR and CODEX_HOME are honoured).
    #[arg(long, value_enum, value_name = "AGENT")]
    agent: Option<AgentArg>,
    /// This clone's git pre-push hook (core.hooksPath, else .git/hooks).
    #[arg(long)]
    git: bool,
    /// The pre-receive hook of the repository at this path (a bare remote you host).
    #[arg(long, value_name = "REPO")]
    server: Option<PathBuf>,
}

impl Selection {
    fn targets(&self, env: &Env) -> Result<Vec<Target>> {
        if self.agent.is_none() && !self.git && self.server.is_none() {
            return Err(usage("say which hooks: --agent <claude-code|codex|all>, --git, or --server <repo>")
                .hint("'git loop hooks status' shows what is installed where")
                .into());
        }
        let mut targets = Vec::new();
        if matches!(self.agent, Some(AgentArg::ClaudeCode | AgentArg::All)) {
            targets.push(Target::ClaudeCode(claude_settings()?));
        }
        if matches!(self.agent, Some(AgentArg::Codex | AgentArg::All)) {
            targets.push(Target::Codex(codex_config()?));
        }
        if self.git {
            targets.push(Target::PrePush(files::pre_push_path(&env.open()?)));
        }
        if let Some(repo) = &self.server {
            targets.push(Target::PreReceive(files::pre_receive_path(&absolute(env, repo))?));
        }
        Ok(targets)
    }
}

fn absolute(env: &Env, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_owned()
    } else {
        env.cwd.join(path)
    }
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| usage("HOME is not set, so the agents' configuration cannot be found").into())
}

/// Claude Code's user settings: `$CLAUDE_CONFIG_DIR/settings.json`, else `~/.claude/settings.json`.
fn claude_settings() -> Result<PathBuf> {
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir).join("settings.json")),
        None => Ok(home()?.join(".claude/settings.json")),
    }
}

/// Codex's configuration: `$CODEX_HOME/config.toml`, else `~/.codex/config.toml`.
fn codex_config() -> Result<PathBuf> {
    match std::env::var_os("CODEX_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir).join("config.toml")),
        None => Ok(home()?.join(".codex/config.toml")),
    }
}

/// "Claude Code's hooks", "the pre-push hook", ...
fn label(target: &Target) -> &'static str {
    match target {
        Target::ClaudeCode(_) => "Claude Code's hooks",
        Target::Codex(_) => "Codex's notify program",
        Target::PrePush(_) => "the pre-push hook",
        Target::PreReceive(_) => "the pre-receive hook",
    }
}
