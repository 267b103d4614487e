//! Agent presets: how each CLI is run unattended, how it takes the prompt, its model flag,
//! and its resume command (what a person pastes after `take-over`).
//!
//! The prompt never travels through a shell string and never as a command-line argument
//! (Linux caps one argument at 128 KiB): it goes in on standard input, or as a file the CLI
//! is told to read. Flags were checked against each CLI's `--help` (docs/agents.md quotes
//! them, and a test re-checks them when the CLIs are installed).
//!
//! The loop puts its hooks into every session of the CLIs that have them, by flags rather than
//! files in the worktree (which would end up in commits): Claude Code gets `--settings
//! <session dir>/claude-settings.json` (its Stop, StopFailure and SessionEnd hooks run `git-loop
//! hook claude-code`), Codex gets a Stop hook by `-c hooks.Stop=[...]` (it runs `git-loop hook
//! codex` after every turn). The hooks record the CLI's own session id, commit each turn and
//! journal it (docs/hooks.md).
//!
//! Named agents of the user's own come from git config: `loop.agent.<name>.command` (a shell
//! command line, run by `sh -c`, prompt on stdin), optional `.resume` and `.env` (`KEY=VALUE`,
//! repeatable). `--agent-cmd` is the same thing for one run.

use anyhow::Result;

use super::wiring::shell_quote;
use crate::error::usage;
use crate::store::Store;

/// How a CLI takes the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptVia {
    /// On standard input.
    Stdin,
    /// As a file: these arguments are added, with `{prompt}` replaced by the file's path.
    File(Vec<String>),
}

/// An agent ready to be started: program, arguments, prompt delivery, resume template.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The preset or named agent, or "custom" for `--agent-cmd`.
    pub name: String,
    pub program: String,
    pub args: Vec<String>,
    pub prompt: PromptVia,
    /// The resume command, with `{session}` for the CLI's own session id.
    pub resume: Option<String>,
    pub env: Vec<(String, String)>,
    /// Environment only for a session that runs confined (`IS_SANDBOX=1` for Claude Code).
    pub confined_env: Vec<(String, String)>,
    /// Files written into each session's directory before the CLI starts (its hook
    /// configuration): (file name, content).
    pub session_files: Vec<(String, String)>,
    /// The model it was told to use (`--model`), when it was told one: what its usage is
    /// priced at when its CLI does not name the model.
    pub model: Option<String>,
    /// Whether its CLI takes Claude Code's per-session limits (`--max-turns`, `--max-budget-usd`).
    pub takes_limits: bool,
}

/// A built-in preset.
struct Preset {
    name: &'static str,
    program: &'static str,
    /// Arguments; `{session_id}` becomes a fresh UUID that the CLI uses as its own session id.
    args: &'static [&'static str],
    model_flag: &'static str,
    /// Where the model flag goes: before the last `trailing` arguments.
    trailing: usize,
    prompt: &'static [&'static str],
    resume: &'static str,
    /// Extra environment; `{session_dir}` becomes the session's directory.
    env: &'static [(&'static str, &'static str)],
    /// Extra environment only where the session runs confined (what tells the CLI a sandbox is
    /// there: never said where there is none).
    confined_env: &'static [(&'static str, &'static str)],
    /// How the loop's hooks reach the CLI.
    hooks: Hooks,
    /// Whether it takes per-session limits, appended when the walk has them: Claude Code's
    /// `--max-turns <n>` and `--max-budget-usd <dollars left>`.
    limits: bool,
}

/// How a preset's CLI gets the loop's hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hooks {
    None,
    /// Settings in the session's directory, named by `--settings {session_dir}/claude-settings.json`.
    ClaudeSettings,
    /// `{codex_stop_hook}` in the arguments becomes a Stop hook running `<git-loop> hook codex`.
    CodexStopHook,
}

/// The file Claude Code's `--settings` names, in the session's directory.
pub const CLAUDE_SETTINGS_FILE: &str = "claude-settings.json";

/// The built-in presets (flags checked against each CLI's --help and runs against a loopback
/// model server; docs/agents.md). An empty `prompt` means standard input.
const PRESETS: &[Preset] = &[
    // `-p` prints and exits, reading the prompt from stdin. Permissions are bypassed: Claude
    // Code treats every path with a `.git` component as a sensitive file and, in `-p` mode,
    // refuses to write one unless permissions are bypassed (hook and allow-rule approvals do
    // not count), and try worktrees live under `.git/loop/worktrees` by default. As root it
    // refuses bypass mode unless IS_SANDBOX=1 says it runs in a sandbox: said only where
    // git-loop's sandbox confines the session (`sandbox`), never where it cannot. The loop
    // chooses the session id, so the resume command is known from the start; the hooks come
    // in by `--settings`.
    Preset {
        name: "claude",
        program: "claude",
        args: &[
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "bypassPermissions",
            "--session-id",
            "{session_id}",
            "--settings",
            "{session_dir}/claude-settings.json",
        ],
        model_flag: "--model",
        trailing: 0,
        prompt: &[],
        resume: "claude --resume {session}",
        env: &[],
        confined_env: &[("IS_SANDBOX", "1")],
        hooks: Hooks::ClaudeSettings,
        limits: true,
    },
    // `codex exec -` reads the instructions from stdin. Its own sandbox is bypassed: inside
    // git-loop's (`sandbox`) it would only stand in the way, and where git-loop's cannot run
    // Codex's would keep `git loop finish` from reporting (the walk then says, at its start,
    // that sessions run unconfined). `exec` never asks for approval. The loop's Stop hook comes in by
    // `-c`; Codex runs hooks it has no persisted trust for only with
    // --dangerously-bypass-hook-trust. (Its `notify` program would need no trust, but Codex
    // does not wait for it, and the session's processes are swept when Codex exits.) Its
    // shell commands run without a login shell: a login shell's /etc/profile resets PATH, and
    // the session's PATH is what finds `git loop`.
    Preset {
        name: "codex",
        program: "codex",
        args: &[
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--dangerously-bypass-hook-trust",
            "--json",
            "-c",
            "allow_login_shell=false",
            "-c",
            "hooks.Stop={codex_stop_hook}",
            "-",
        ],
        model_flag: "--model",
        trailing: 1,
        prompt: &[],
        resume: "codex resume {session}",
        env: &[],
        confined_env: &[],
        hooks: Hooks::CodexStopHook,
        limits: false,
    },
    // `opencode run` with no message reads it from stdin. It leaves a 5.5 MB library in
    // $TMPDIR on every run: give it the session's own.
    Preset {
        name: "opencode",
        program: "opencode",
        args: &["run", "--auto", "--format", "json"],
        model_flag: "--model",
        trailing: 0,
        prompt: &[],
        resume: "opencode --session {session}",
        env: &[("TMPDIR", "{session_dir}/tmp")],
        confined_env: &[],
        hooks: Hooks::None,
        limits: false,
    },
    // Headless needs --skip-trust; --prompt is appended to what stdin holds (the task); yolo
    // offers the shell tool. The loop chooses the session id.
    Preset {
        name: "gemini",
        program: "gemini",
        args: &[
            "--skip-trust",
            "--approval-mode",
            "yolo",
            "--output-format",
            "stream-json",
            "--session-id",
            "{session_id}",
            "--prompt",
            "Do the task described above.",
        ],
        model_flag: "--model",
        trailing: 2,
        prompt: &[],
        resume: "gemini --resume {session}",
        env: &[],
        confined_env: &[],
        hooks: Hooks::None,
        limits: false,
    },
    // aider never runs shell commands the model suggests; it edits files and commits them
    // itself. It exits 0 even when the provider refuses, so its log is what tells.
    Preset {
        name: "aider",
        program: "aider",
        args: &[
            "--yes-always",
            "--no-pretty",
            "--no-stream",
            "--no-check-update",
            "--no-show-model-warnings",
            "--analytics-disable",
        ],
        model_flag: "--model",
        trailing: 0,
        prompt: &["--message-file", "{prompt}"],
        resume: "aider --restore-chat-history",
        env: &[],
        confined_env: &[],
        hooks: Hooks::None,
        limits: false,
    },
];

/// The hosts each preset's CLI reaches for its model (`loop.sandbox.network = allow`), and the
/// variables of its environment that point it at another base URL (a proxy of the company's, a
/// model server on this machine): docs/agents.md, "The sandbox".
const NETWORK: &[(&str, &[&str], &[&str])] = &[
    (
        "claude",
        &["api.anthropic.com", "console.anthropic.com", "claude.ai", "statsig.anthropic.com"],
        &["ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL"],
    ),
    ("codex", &["api.openai.com", "chatgpt.com", "auth.openai.com"], &["OPENAI_BASE_URL"]),
    (
        "opencode",
        &["opencode.ai", "models.dev", "api.anthropic.com", "api.openai.com", "openrouter.ai"],
        &["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"],
    ),
    (
        "gemini",
        &[
            "generativelanguage.googleapis.com",
            "cloudcode-pa.googleapis.com",
            "oauth2.googleapis.com",
            "www.googleapis.com",
        ],
        &["GOOGLE_GEMINI_BASE_URL", "GEMINI_API_BASE_URL"],
    ),
    (
        "aider",
        &["api.openai.com", "api.anthropic.com", "openrouter.ai"],
        &["OPENAI_API_BASE", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OLLAMA_API_BASE"],
    ),
];

/// What a run of agent `agent` (a preset's name, a configured agent's, none for a command) may
/// reach under `loop.sandbox.network = allow` besides `loop.sandbox.allow`: its preset's API
/// hosts, and the base URLs its environment names (and, for Codex, its `config.toml`'s
/// `base_url`s), which count as a person's word (they may name this machine).
pub fn network_entries(agent: Option<&str>, codex_home: Option<&std::path::Path>) -> Vec<crate::sandbox::net::Entry> {
    use crate::sandbox::net::{Entry, Source};
    let Some((name, hosts, vars)) = NETWORK.iter().find(|(name, _, _)| Some(*name) == agent) else {
        return Vec::new();
    };
    let mut entries: Vec<Entry> = hosts.iter().filter_map(|h| Entry::parse(h, Source::Preset).ok()).collect();
    let mut urls: Vec<String> = vars.iter().filter_map(|v| std::env::var(v).ok()).collect();
    if *name == "codex" {
        if let Some(config) = codex_home.and_then(|home| std::fs::read_to_string(home.join("config.toml")).ok()) {
            urls.extend(config.lines().filter_map(|line| {
                let (key, value) = line.split_once('=')?;
                (key.trim() == "base_url").then(|| value.trim().trim_matches('"').to_owned())
            }));
        }
    }
    entries.extend(urls.iter().filter(|u| !u.trim().is_empty()).filter_map(|url| {
        // A URL without a port reaches its scheme's.
        let entry = Entry::parse(url, Source::Person).ok()?;
        Some(entry.with_default_port(if url.starts_with("http://") { 80 } else { 443 }))
    }));
    entries
}

/// Names of the built-in presets, for help and errors.
pub fn preset_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
    names.push("demo");
    names
}

/// Resolve an agent by preset or configured name. `exe` is this program (the demo agent is
/// built in).
pub fn resolve(store: &Store, name: &str, model: Option<&str>, exe: &std::path::Path) -> Result<Agent> {
    if let Some(command) = store.config(&format!("loop.agent.{name}.command")) {
        let mut agent = custom(name, &command);
        agent.resume = store.config(&format!("loop.agent.{name}.resume"));
        agent.env = configured_env(store, name)?;
        agent.model = model.map(str::to_owned);
        return Ok(agent);
    }
    if name == "demo" {
        return Ok(Agent {
            name: "demo".into(),
            program: exe.display().to_string(),
            args: vec!["demo-agent".into()],
            prompt: PromptVia::Stdin,
            resume: None,
            env: Vec::new(),
            confined_env: Vec::new(),
            session_files: Vec::new(),
            model: model.map(str::to_owned),
            takes_limits: false,
        });
    }
    let Some(preset) = PRESETS.iter().find(|p| p.name == name) else {
        return Err(usage(format!("no agent named '{name}'"))
            .hint(format!(
                "use one of {}, define loop.agent.{name}.command in git config, or pass --agent-cmd",
                preset_names().join(", ")
            ))
            .into());
    };
    let stop_hook = super::wiring::codex_stop_hook(exe);
    let mut args: Vec<String> = preset.args.iter().map(|s| s.replace("{codex_stop_hook}", &stop_hook)).collect();
    if let Some(model) = model {
        let at = args.len() - preset.trailing;
        args.insert(at, preset.model_flag.into());
        args.insert(at + 1, model.into());
    }
    let prompt = if preset.prompt.is_empty() {
        PromptVia::Stdin
    } else {
        PromptVia::File(preset.prompt.iter().map(|s| s.to_string()).collect())
    };
    Ok(Agent {
        name: preset.name.into(),
        program: preset.program.into(),
        args,
        prompt,
        resume: Some(preset.resume.into()),
        env: preset.env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        confined_env: preset.confined_env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        session_files: match preset.hooks {
            Hooks::ClaudeSettings => {
                vec![(CLAUDE_SETTINGS_FILE.to_owned(), crate::agent::wiring::claude_session_settings(exe))]
            }
            Hooks::CodexStopHook | Hooks::None => Vec::new(),
        },
        model: model.map(str::to_owned),
        takes_limits: preset.limits,
    })
}

/// A command line of the user's own, run by `sh -c` with the prompt on stdin.
pub fn custom(name: &str, command: &str) -> Agent {
    Agent {
        name: name.into(),
        program: "sh".into(),
        args: vec!["-c".into(), command.into()],
        prompt: PromptVia::Stdin,
        resume: None,
        env: Vec::new(),
        confined_env: Vec::new(),
        session_files: Vec::new(),
        model: None,
        takes_limits: false,
    }
}

fn configured_env(store: &Store, name: &str) -> Result<Vec<(String, String)>> {
    let key = format!("loop.agent.{name}.env");
    store
        .settings()
        .agent_env(name)
        .into_iter()
        .map(|text| match text.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(usage(format!("{key} value '{text}' is not KEY=VALUE")).into()),
        })
        .collect()
}

impl Agent {
    /// The program this agent starts that cannot be found (on `path_var` or at its path), if
    /// any: the preset's or named agent's program, or, for a command line of the user's own, the
    /// program its first word plainly names (not a shell builtin, keyword, assignment,
    /// expansion or relative path, which only the shell in the worktree can judge).
    pub fn missing_program(&self, path_var: Option<&std::ffi::OsStr>) -> Option<String> {
        use super::process::find_program;
        if find_program(&self.program, path_var).is_none() {
            return Some(self.program.clone());
        }
        let [dash_c, command] = self.args.as_slice() else { return None };
        if self.program != "sh" || dash_c != "-c" {
            return None;
        }
        let word = command.split_whitespace().next()?;
        let plain = !word.chars().any(|c| "$`'\"\\;&|<>(){}=*?[]~!#".contains(c));
        const SHELL_WORDS: &[&str] = &[
            ".", ":", "alias", "builtin", "case", "cd", "command", "eval", "exec", "exit", "export", "for", "function",
            "if", "local", "readonly", "set", "source", "time", "trap", "type", "ulimit", "umask", "unset", "until",
            "wait", "while",
        ];
        // A relative path is the session's to resolve, in the try's worktree, not here.
        let relative = word.contains('/') && !word.starts_with('/');
        (plain && !relative && !SHELL_WORDS.contains(&word) && find_program(word, path_var).is_none())
            .then(|| word.to_owned())
    }

    /// The arguments for one session: the prompt file where the CLI takes one, the session id
    /// the loop chose for the CLI where it accepts one, and the session's directory (the
    /// prompt file's) where its hook configuration is.
    pub fn argv(&self, prompt_file: &std::path::Path, agent_session: &str) -> Vec<String> {
        let session_dir = prompt_file.parent().unwrap_or(std::path::Path::new(".")).display().to_string();
        let mut args: Vec<String> = self
            .args
            .iter()
            .map(|a| a.replace("{session_id}", agent_session).replace("{session_dir}", &session_dir))
            .collect();
        if let PromptVia::File(extra) = &self.prompt {
            args.extend(extra.iter().map(|a| a.replace("{prompt}", &prompt_file.display().to_string())));
        }
        args
    }

    /// `argv`, with the walk's per-session limits appended for a CLI that takes them: the
    /// turns a session may take, and the dollars the walk has left.
    pub fn argv_within(
        &self,
        prompt_file: &std::path::Path,
        agent_session: &str,
        max_turns: Option<u32>,
        usd_left: Option<f64>,
    ) -> Vec<String> {
        let mut args = self.argv(prompt_file, agent_session);
        if self.takes_limits {
            if let Some(turns) = max_turns {
                args.extend(["--max-turns".to_owned(), turns.to_string()]);
            }
            if let Some(left) = usd_left {
                args.extend(["--max-budget-usd".to_owned(), format!("{left:.6}")]);
            }
        }
        args
    }

    /// The line a person pastes to resume the CLI's session `id` where it ran:
    /// `cd <worktree> && <resume command>`, every word of it shell-quoted (the template is
    /// split at whitespace and `{session}` replaced in each word, so nothing in a path or a
    /// template word is ever read by the shell as more than one word). `None` without a
    /// resume command.
    pub fn resume_line(&self, worktree: &std::path::Path, id: &crate::ids::AgentSessionId) -> Option<String> {
        let template = self.resume.as_deref()?;
        let words: Vec<String> = template
            .split_whitespace()
            .map(|w| shell_quote(&w.replace("{session}", id.as_str())).into_owned())
            .collect();
        if words.is_empty() {
            return None;
        }
        Some(format!("cd {} && {}", shell_quote(&worktree.display().to_string()), words.join(" ")))
    }

    /// Whether the CLI takes the session id the loop chooses (so its resume command is known).
    pub fn presets_session_id(&self) -> bool {
        self.args.iter().any(|a| a.contains("{session_id}"))
    }

    /// Write the files the CLI reads from the session's directory (its hook configuration),
    /// before it starts.
    pub fn write_session_files(&self, session_dir: &std::path::Path) -> Result<()> {
        use anyhow::Context as _;
        for (name, content) in &self.session_files {
            let path = session_dir.join(name);
            std::fs::write(&path, content).with_context(|| format!("could not write '{}'", path.display()))?;
        }
        Ok(())
    }

    /// The environment for one session, with `{session_dir}` filled in.
    pub fn session_env(&self, session_dir: &std::path::Path) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), v.replace("{session_dir}", &session_dir.display().to_string())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_line_quotes_every_word_that_needs_it() {
        let id: crate::ids::AgentSessionId = "a84694c7-ecf9".parse().expect("valid");
        let mut agent = custom("mine", "true");
        agent.resume = Some("my-cli --resume {session}  --note it's --x=$HOME".into());
        assert_eq!(
            agent.resume_line(std::path::Path::new("/w/it's a $(touch x) dir"), &id).as_deref(),
            Some(r"cd '/w/it'\''s a $(touch x) dir' && my-cli --resume a84694c7-ecf9 --note 'it'\''s' '--x=$HOME'")
        );
        agent.resume = Some("claude --resume {session}".into());
        assert_eq!(
            agent.resume_line(std::path::Path::new("/repo/.git/loop/worktrees/t-1-1"), &id).as_deref(),
            Some("cd /repo/.git/loop/worktrees/t-1-1 && claude --resume a84694c7-ecf9"),
            "plain words stay as they are"
        );
        agent.resume = None;
        assert_eq!(agent.resume_line(std::path::Path::new("/w"), &id), None);
    }

    /// A preset's command line as docs/agents.md shows it: its environment (a confined
    /// session's included), program and arguments, placeholders as they are, an argument with
    /// spaces in single quotes.
    fn documented(p: &Preset) -> String {
        let mut words: Vec<String> = p.env.iter().chain(p.confined_env).map(|(k, v)| format!("{k}={v}")).collect();
        words.push(p.program.to_owned());
        for arg in p.args.iter().chain(p.prompt) {
            words.push(if arg.contains(' ') { format!("'{arg}'") } else { (*arg).to_owned() });
        }
        words.join(" ")
    }

    #[test]
    fn docs_agents_md_shows_every_presets_exact_command_line() {
        let docs = include_str!("../../docs/agents.md");
        for preset in PRESETS {
            let line = documented(preset);
            assert!(
                docs.lines().any(|l| l == line),
                "docs/agents.md does not show the {} preset as:\n{line}",
                preset.name
            );
        }
    }

    #[test]
    fn session_hooks_reach_claude_by_a_settings_file_and_codex_by_a_flag() {
        let exe = std::path::Path::new("/opt/git-loop");
        let claude = PRESETS.iter().find(|p| p.name == "claude").expect("claude");
        assert_eq!(claude.hooks, Hooks::ClaudeSettings);
        let agent = Agent {
            name: "claude".into(),
            program: "claude".into(),
            args: claude.args.iter().map(|a| a.to_string()).collect(),
            prompt: PromptVia::Stdin,
            resume: None,
            env: vec![],
            confined_env: vec![],
            session_files: vec![(CLAUDE_SETTINGS_FILE.into(), crate::agent::wiring::claude_session_settings(exe))],
            model: None,
            takes_limits: false,
        };
        let argv = agent.argv(std::path::Path::new("/s/s-1/prompt.md"), "u-1");
        let at = argv.iter().position(|a| a == "--settings").expect("--settings");
        assert_eq!(argv[at + 1], "/s/s-1/claude-settings.json");
        assert!(argv.contains(&"u-1".to_owned()));
        let dir = tempfile::tempdir().expect("tempdir");
        agent.write_session_files(dir.path()).expect("write");
        let settings: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(CLAUDE_SETTINGS_FILE)).expect("read")).expect("JSON");
        assert_eq!(settings["hooks"]["Stop"][0]["hooks"][0]["command"], "/opt/git-loop hook claude-code");
        assert_eq!(
            crate::agent::wiring::codex_stop_hook(exe),
            r#"[{hooks=[{type="command",command="/opt/git-loop hook codex",timeout=60}]}]"#
        );
    }

    #[test]
    fn claude_code_is_given_the_walks_per_session_limits_and_others_are_not() {
        let store_less = |name: &str| {
            let preset = PRESETS.iter().find(|p| p.name == name).expect("preset");
            Agent {
                name: name.into(),
                program: name.into(),
                args: preset.args.iter().map(|a| a.to_string()).collect(),
                prompt: PromptVia::Stdin,
                resume: None,
                env: vec![],
                confined_env: vec![],
                session_files: vec![],
                model: None,
                takes_limits: preset.limits,
            }
        };
        let prompt = std::path::Path::new("/s/s-1/prompt.md");
        let claude = store_less("claude").argv_within(prompt, "u-1", Some(7), Some(0.25));
        assert_eq!(claude[claude.len() - 4..], ["--max-turns", "7", "--max-budget-usd", "0.250000"]);
        let none = store_less("claude").argv_within(prompt, "u-1", None, None);
        assert_eq!(none, store_less("claude").argv(prompt, "u-1"));
        let codex = store_less("codex");
        assert_eq!(codex.argv_within(prompt, "u-1", Some(7), Some(0.25)), codex.argv(prompt, "u-1"));
    }

    #[test]
    fn prompt_text_never_appears_in_the_argument_list() {
        let agent = Agent {
            name: "aider".into(),
            program: "aider".into(),
            args: vec!["--yes-always".into()],
            prompt: PromptVia::File(vec!["--message-file".into(), "{prompt}".into()]),
            resume: Some("aider --restore-chat-history".into()),
            env: vec![],
            confined_env: vec![],
            session_files: vec![],
            model: None,
            takes_limits: false,
        };
        assert_eq!(
            agent.argv(std::path::Path::new("/s/prompt.md"), "u"),
            ["--yes-always", "--message-file", "/s/prompt.md"]
        );
    }
}
