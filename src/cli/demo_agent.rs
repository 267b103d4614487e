//! `git-loop demo-agent` (hidden): the built-in, deterministic demo agent. No keys, no
//! network: it does what `demo:` lines in its task's body say (read from its prompt, as a
//! real agent reads its task), then reports its verdict with `git loop finish`, exactly as a
//! real agent would.
//!
//! Directives, one per line in the task body:
//! - `demo: write <path>` ... `demo: end` — write these lines to the file;
//! - `demo: first-write <path>` ... `demo: end` — the same, but only in the task's first
//!   session; `demo: retry-write <path>` ... only in continuations (how the demo's "fails
//!   its checks first, passes on continuation" task works);
//! - `demo: verdict blocked|failed <message>` — report that instead of done;
//! - `demo: message <text>` — the message reported with done;
//! - `demo: silent` — end without reporting a verdict;
//! - `demo: sleep <seconds>` — take its time.

use std::io::Read as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Args;

use super::env::Env;
use git_loop::error::usage;

/// The built-in demo agent (used by 'git loop demo' and '--agent demo').
#[derive(Args)]
pub struct DemoAgentArgs {}

#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    First,
    Retry,
}

enum Step {
    Write { path: String, content: String, when: When },
    Verdict { word: String, message: String },
    Message(String),
    Silent,
    Sleep(u64),
}

fn parse(body: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = body.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("demo:") else { continue };
        let rest = rest.trim();
        let (word, arg) = rest.split_once(' ').unwrap_or((rest, ""));
        match word {
            "write" | "first-write" | "retry-write" => {
                let mut content = String::new();
                for line in lines.by_ref() {
                    if line.trim() == "demo: end" {
                        break;
                    }
                    content.push_str(line);
                    content.push('\n');
                }
                let when = match word {
                    "first-write" => When::First,
                    "retry-write" => When::Retry,
                    _ => When::Always,
                };
                steps.push(Step::Write { path: arg.trim().to_owned(), content, when });
            }
            "verdict" => {
                let (word, message) = arg.split_once(' ').unwrap_or((arg, ""));
                steps.push(Step::Verdict { word: word.to_owned(), message: message.to_owned() });
            }
            "message" => steps.push(Step::Message(arg.to_owned())),
            "silent" => steps.push(Step::Silent),
            "sleep" => steps.push(Step::Sleep(arg.trim().parse().unwrap_or(1))),
            _ => {}
        }
    }
    steps
}

pub fn run(env: &Env, _args: DemoAgentArgs) -> Result<u8> {
    let Some(id) = env.ctx.session.task.clone() else {
        return Err(usage("the demo agent runs inside a session (GIT_LOOP_TASK is not set)")
            .hint("git loop run --agent demo")
            .into());
    };
    let mut prompt = String::new();
    let _ = std::io::stdin().read_to_string(&mut prompt);
    let continuation = prompt.contains("## What happened before");
    // The task as its prompt says it (a confined session cannot read the repository's records):
    // its title on the first line, its body up to the prompt's own sections.
    let title = prompt
        .lines()
        .next()
        .and_then(|l| l.strip_prefix(&format!("# Task {id}: ")))
        .with_context(|| format!("the prompt on stdin is not task {id}'s"))?
        .to_owned();
    let body = prompt.split("\n## Where you are").next().unwrap_or_default();
    println!("demo agent: working on {id}: {title}");
    let mut verdict = ("done".to_owned(), "did what the task says".to_owned());
    let mut silent = false;
    for step in parse(body) {
        match step {
            Step::Write { when: When::First, .. } if continuation => {}
            Step::Write { when: When::Retry, .. } if !continuation => {}
            Step::Write { path, content, .. } => {
                let target = env.cwd.join(&path);
                if Path::new(&path).is_absolute() || path.split('/').any(|p| p == "..") {
                    anyhow::bail!("the demo agent writes only inside its worktree, not '{path}'");
                }
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&target, content).with_context(|| format!("could not write '{path}'"))?;
                println!("demo agent: wrote {path}");
            }
            Step::Verdict { word, message } => verdict = (word, message),
            Step::Message(message) => verdict.1 = message,
            Step::Silent => silent = true,
            Step::Sleep(seconds) => std::thread::sleep(Duration::from_secs(seconds)),
        }
    }
    if silent {
        println!("demo agent: stopping without a verdict");
        return Ok(0);
    }
    println!("demo agent: git loop finish {} --message {:?}", verdict.0, verdict.1);
    let status = Command::new("git")
        .args(["loop", "finish", &verdict.0, "--message", &verdict.1])
        .status()
        .context("could not run 'git loop finish'")?;
    Ok(if status.success() { 0 } else { 1 })
}
