//! Roles: an agent, a prompt and a versioned JSON output contract.
//!
//! Four contracts are built in, each a role of the same name: `worker` (the task's own
//! sessions: done, blocked or failed), `reviewer` (approve, or changes with comments),
//! `conflict-resolver` (resolved or not, and what was done) and `summarizer` (a landing
//! commit's subject and body). A role of one's own lives in git config
//! (`loop.role.<name>.contract`, `.agent`, `.prompt`) and keeps one of these contracts.
//!
//! What a role's session says is believed only once it parses as its contract: a result file
//! (`$GIT_LOOP_RESULT`) is read strictly (`deny_unknown_fields`, the `contract` field naming the
//! contract and the version this program reads), and a `git loop finish` word must be one of
//! the contract's. A violation is an outcome (`Violation`) the caller sends back to the same
//! role once, with the parse error, before the task goes to a person (docs/agents.md).
//!
//! Which company's model an agent runs (its provider) is here too: a reviewer must not share
//! the worker's.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::presets::Agent;
use crate::error::{usage, Refusal};
use crate::ids::Priority;
use crate::store::Store;

/// An output contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    Worker,
    Reviewer,
    ConflictResolver,
    Summarizer,
}

/// The version of every contract this program reads and writes.
pub const CONTRACT_VERSION: u32 = 1;

impl Contract {
    pub const ALL: [Contract; 4] =
        [Contract::Worker, Contract::Reviewer, Contract::ConflictResolver, Contract::Summarizer];

    /// Its name, which is also the name of the built-in role that keeps it.
    pub fn name(self) -> &'static str {
        match self {
            Contract::Worker => "worker",
            Contract::Reviewer => "reviewer",
            Contract::ConflictResolver => "conflict-resolver",
            Contract::Summarizer => "summarizer",
        }
    }

    /// `<name>/<version>`: what a result file's `contract` field says.
    pub fn id(self) -> String {
        format!("{}/{CONTRACT_VERSION}", self.name())
    }

    pub fn parse(word: &str) -> Option<Contract> {
        Contract::ALL.into_iter().find(|c| c.name() == word)
    }

    /// The words `git loop finish` takes in a session of this contract.
    pub fn words(self) -> &'static [&'static str] {
        match self {
            Contract::Worker => &["done", "blocked", "failed"],
            Contract::Reviewer => &["approve", "changes"],
            Contract::ConflictResolver => &["resolved", "unresolved"],
            Contract::Summarizer => &["summary"],
        }
    }

    /// The contract a `git loop finish` word belongs to.
    pub fn of_word(word: &str) -> Option<Contract> {
        Contract::ALL.into_iter().find(|c| c.words().contains(&word))
    }
}

/// Output that broke its contract: what was wrong, in words the agent is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A worker's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkVerdict {
    Done,
    Blocked,
    Failed,
}

/// A follow-up task a worker asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowUp {
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub labels: Vec<String>,
}

/// `worker/1`: the result file every release has read. `contract` may be left out (what agents
/// wrote before contracts had names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerOutput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    pub verdict: WorkVerdict,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub follow_ups: Vec<FollowUp>,
    /// What the session used, as the agent reports it (read as `finish --usage` is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::store::usage::Usage>,
}

/// A reviewer's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    Approve,
    Changes,
}

impl ReviewVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewVerdict::Approve => "approve",
            ReviewVerdict::Changes => "changes",
        }
    }
}

/// `reviewer/1`: approve, or changes with comments (which must say something).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewOutput {
    pub contract: String,
    pub verdict: ReviewVerdict,
    #[serde(default)]
    pub comments: String,
}

/// `conflict-resolver/1`: whether the conflicted merge is resolved, and what was done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolutionOutput {
    pub contract: String,
    pub resolved: bool,
    pub summary: String,
}

/// `summarizer/1`: a landing commit's subject (one line) and body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryOutput {
    pub contract: String,
    pub subject: String,
    #[serde(default)]
    pub body: String,
}

/// A role's report, parsed as its contract.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Work(WorkerOutput),
    Review(ReviewOutput),
    Resolution(ResolutionOutput),
    Summary(SummaryOutput),
}

/// Read a result file's bytes as `contract`'s output. Nothing in it is believed unless all of
/// it is: valid JSON, no field the contract does not have, the `contract` field naming this
/// contract at the version this program reads, and each field's own rule.
pub fn parse(contract: Contract, bytes: &[u8]) -> Result<Report, Violation> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| Violation(format!("it is not valid JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(Violation("it is not a JSON object".into()));
    };
    match object.get("contract") {
        None if contract == Contract::Worker => {}
        None => return Err(Violation(format!("it has no \"contract\" field; it must be \"{}\"", contract.id()))),
        Some(serde_json::Value::String(said)) => check_contract(contract, said)?,
        Some(other) => return Err(Violation(format!("its \"contract\" is {other}, not \"{}\"", contract.id()))),
    }
    let typed = |e: serde_json::Error| Violation(format!("it does not read as {}: {e}", contract.id()));
    let report = match contract {
        Contract::Worker => Report::Work(serde_json::from_value(value).map_err(typed)?),
        Contract::Reviewer => Report::Review(serde_json::from_value(value).map_err(typed)?),
        Contract::ConflictResolver => Report::Resolution(serde_json::from_value(value).map_err(typed)?),
        Contract::Summarizer => Report::Summary(serde_json::from_value(value).map_err(typed)?),
    };
    check(report)
}

fn check_contract(contract: Contract, said: &str) -> Result<(), Violation> {
    if said == contract.id() {
        return Ok(());
    }
    match said.split_once('/') {
        Some((name, version)) if name == contract.name() => match version.parse::<u32>() {
            Ok(v) if v > CONTRACT_VERSION => Err(Violation(format!(
                "its contract is \"{said}\", a version newer than this git-loop reads (\"{}\")",
                contract.id()
            ))),
            _ => Err(Violation(format!("its contract is \"{said}\", not \"{}\"", contract.id()))),
        },
        _ => Err(Violation(format!("its contract is \"{said}\", but this session's is \"{}\"", contract.id()))),
    }
}

/// The rules serde cannot say.
fn check(report: Report) -> Result<Report, Violation> {
    use crate::store::limits::{self, MESSAGE};
    let texts: Vec<(&str, &str)> = match &report {
        Report::Work(w) => vec![("its summary", w.summary.as_deref().unwrap_or(""))],
        Report::Review(r) => vec![("its comments", &r.comments)],
        Report::Resolution(r) => vec![("its summary", &r.summary)],
        Report::Summary(s) => vec![("its subject", &s.subject), ("its body", &s.body)],
    };
    for (what, text) in texts {
        limits::check(what, text, MESSAGE).map_err(|refusal| Violation(refusal.message))?;
    }
    if let Report::Work(w) = &report {
        for follow_up in &w.follow_ups {
            limits::check("a follow-up's title", &follow_up.title, limits::TITLE)
                .and_then(|()| {
                    limits::check("a follow-up's body", follow_up.body.as_deref().unwrap_or(""), limits::BODY)
                })
                .map_err(|refusal| Violation(refusal.message))?;
        }
    }
    match &report {
        Report::Review(r) if r.verdict == ReviewVerdict::Changes && r.comments.trim().is_empty() => {
            Err(Violation("it asks for changes without saying which (\"comments\" is empty)".into()))
        }
        Report::Summary(s) if s.subject.trim().is_empty() => Err(Violation("its \"subject\" is empty".into())),
        Report::Summary(s) if s.subject.contains('\n') => {
            Err(Violation("its \"subject\" is more than one line (put the rest in \"body\")".into()))
        }
        Report::Resolution(r) if r.summary.trim().is_empty() => Err(Violation("its \"summary\" is empty".into())),
        Report::Work(WorkerOutput { usage: Some(u), .. }) => match crate::store::usage::Usage::reported(
            &serde_json::to_value(u).map_err(|e| Violation(format!("its usage does not read: {e}")))?,
        ) {
            Ok(_) => Ok(report),
            Err(problem) => Err(Violation(problem)),
        },
        _ => Ok(report),
    }
}

/// A `git loop finish` as `contract`'s output: `word` (done, approve, resolved, summary, …),
/// its `--message`, and for a summary its `--subject`.
pub fn from_finish(contract: Contract, word: &str, message: &str, subject: Option<&str>) -> Result<Report, Violation> {
    if !contract.words().contains(&word) {
        return Err(Violation(format!(
            "'git loop finish {word}' is not a {} verdict (one of: {})",
            contract.name(),
            contract.words().join(", ")
        )));
    }
    let report = match contract {
        Contract::Worker => Report::Work(WorkerOutput {
            contract: Some(contract.id()),
            verdict: match word {
                "done" => WorkVerdict::Done,
                "blocked" => WorkVerdict::Blocked,
                _ => WorkVerdict::Failed,
            },
            summary: Some(message.to_owned()),
            follow_ups: Vec::new(),
            usage: None,
        }),
        Contract::Reviewer => Report::Review(ReviewOutput {
            contract: contract.id(),
            verdict: if word == "approve" { ReviewVerdict::Approve } else { ReviewVerdict::Changes },
            comments: message.to_owned(),
        }),
        Contract::ConflictResolver => Report::Resolution(ResolutionOutput {
            contract: contract.id(),
            resolved: word == "resolved",
            summary: message.to_owned(),
        }),
        Contract::Summarizer => Report::Summary(SummaryOutput {
            contract: contract.id(),
            subject: subject.unwrap_or("").to_owned(),
            body: message.to_owned(),
        }),
    };
    check(report)
}

/// A role: which agent, what it is told, and the contract it answers in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub name: String,
    pub contract: Contract,
    /// The agent (a preset or a named agent); none for a built-in role until one is given.
    pub agent: Option<String>,
    /// Instructions of one's own (`loop.role.<name>.prompt`), in place of the built-in ones.
    pub prompt: Option<String>,
}

impl Role {
    /// `<name> (<agent>)`, for lines people read.
    pub fn label(&self) -> String {
        match &self.agent {
            Some(agent) if *agent != self.name => format!("{} ({agent})", self.name),
            _ => self.name.clone(),
        }
    }
}

/// The role named `name`: one in git config (`loop.role.<name>.*`), else a built-in one.
/// `None` when neither exists.
pub fn find(store: &Store, name: &str) -> Result<Option<Role>, Refusal> {
    let settings = store.settings();
    let configured = settings.role_contract(name);
    let contract = match configured {
        Some(word) => Some(Contract::parse(&word).ok_or_else(|| {
            usage(format!("loop.role.{name}.contract '{word}' is not a contract"))
                .hint(format!("use one of {}", Contract::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")))
        })?),
        None => Contract::parse(name),
    };
    let Some(contract) = contract else { return Ok(None) };
    let prompt = match settings.role_prompt(name) {
        Some(text) => Some(prompt_text(store, &text)?),
        None => None,
    };
    Ok(Some(Role { name: name.to_owned(), contract, agent: settings.role_agent(name), prompt }))
}

/// `.prompt` is a file (absolute, or relative to the main working tree) when one exists there,
/// else the text itself.
fn prompt_text(store: &Store, given: &str) -> Result<String, Refusal> {
    let path = store.workdir().join(given);
    if given.lines().count() == 1 && path.is_file() {
        return std::fs::read_to_string(&path)
            .map_err(|e| usage(format!("could not read the role prompt '{}': {e}", path.display())));
    }
    Ok(given.to_owned())
}

/// A reviewer, as `--reviewer`, `loop.reviewer` and a task's `reviewers` name one: a role of
/// the reviewer contract, or an agent (a preset or a named agent), which reviews as the
/// built-in `reviewer` role.
pub fn reviewer(store: &Store, name: &str) -> Result<Role, Refusal> {
    of_contract(store, name, Contract::Reviewer, "--reviewer")
}

/// A role keeping `contract`, as a flag (`flag`) or setting names one: a role of that contract,
/// or an agent (a preset or a named agent), which plays the built-in role of the contract.
pub fn of_contract(store: &Store, name: &str, contract: Contract, flag: &str) -> Result<Role, Refusal> {
    match find(store, name)? {
        Some(role) if role.contract != contract => Err(usage(format!(
            "role '{name}' keeps the {} contract, not the {}'s",
            role.contract.name(),
            contract.name()
        ))
        .hint(format!("name a role whose loop.role.<name>.contract is {0}, or an agent (git config loop.role.{name}.contract {0})", contract.name()))),
        Some(role) if role.agent.is_none() => Err(usage(format!("the {} role '{name}' names no agent", contract.name()))
            .hint(format!("git config loop.role.{name}.agent <preset or named agent>, or pass {flag} <agent>"))),
        Some(role) => Ok(role),
        None => Ok(Role {
            name: contract.name().to_owned(),
            contract,
            agent: Some(name.to_owned()),
            prompt: store.settings().role_prompt(contract.name()).map(|t| prompt_text(store, &t)).transpose()?,
        }),
    }
}

/// The built-in instructions of each contract's role. `{name}` placeholders are filled by
/// [`render`]; what is not given is left empty.
pub fn builtin_instructions(contract: Contract) -> &'static str {
    match contract {
        Contract::Worker => "# Task {task}: {title}\n\n{body}\n",
        Contract::Reviewer => REVIEWER,
        Contract::ConflictResolver => RESOLVER,
        Contract::Summarizer => SUMMARIZER,
    }
}

const REVIEWER: &str = "# Review of task {task}: {title}

Another agent worked on this task and says it is done; its checks passed. You are its reviewer:
read the task, then the change, and decide whether the change does what the task asks,
correctly and completely. Review round {round} of {rounds}.

## The task

{body}

## The change

The work is commit {head} (tree {tree}), compared with {base}, where its task branch started:

{diffstat}

Your current directory is a checkout of that commit, detached from any branch. Read it and run
what you need (`git diff {base} {head}` shows the whole change), but do not try to fix
anything: this checkout is thrown away when you finish, and your changes would not count.
Ask for changes instead; the worker gets your comments.
{previous}";

const RESOLVER: &str = "# Resolve a merge conflict: {task} {title}

Merging the work of task {task} into {target} conflicts in these paths:

{paths}

Your current directory holds that merge in progress, as `git merge` leaves one that
conflicts: `git status` lists the conflicted paths, and their conflict markers name both
sides (`<<<<<<< {target}` and `>>>>>>> loop/{task}`). Resolve every conflict so that both
sides' intent is kept, and leave the result in the worktree (`git add` it; you may commit the
merge with `git commit --no-edit`, or leave that to the loop). Do not abort the merge. The
checks run on what you leave.

## This side ({target})

{ours}

## The other side ({task})

{theirs}
";

const SUMMARIZER: &str = "# Write the landing commit's message for task {task}: {title}

The work of this task lands as one commit. Write its message: a subject line of at most 72
characters saying what the change does, in the imperative, and a body saying why and what
changed, for a person reading `git log` a year from now.

## The task

{body}

## What its sessions said

{sessions}

## The change

{diffstat}
";

/// Fill `{name}` placeholders in `template`; unknown ones are left as they are.
pub fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (name, value) in vars {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// A role's whole prompt: its instructions (its own, else the built-in ones) with the
/// placeholders filled, then how to report, which is the contract's and always the same.
pub fn prompt(role: &Role, vars: &[(&str, &str)], result_path: &std::path::Path) -> String {
    let instructions = role.prompt.as_deref().unwrap_or(builtin_instructions(role.contract));
    let mut out = render(instructions, vars);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&how_to_report(role.contract, result_path));
    out
}

/// The section every prompt of `contract` ends with: the `git loop finish` lines and the
/// result file's form.
pub fn how_to_report(contract: Contract, result_path: &std::path::Path) -> String {
    let mut out = String::new();
    let path = result_path.display();
    let _ = writeln!(out, "\n## When you are finished\n");
    match contract {
        Contract::Worker => {
            let _ = writeln!(out, "Report your verdict by running exactly one of:\n");
            let _ = writeln!(out, "    git loop finish done --message \"<what you did>\"");
            let _ = writeln!(out, "    git loop finish blocked --message \"<what you need>\"");
            let _ = writeln!(out, "    git loop finish failed --message \"<what went wrong>\"");
            let _ = writeln!(
                out,
                "\nYou may instead write a JSON file to {path}: {{\"contract\": \"{}\", \"verdict\": \"done\", \"summary\": \"...\", \"follow_ups\": [{{\"title\": \"...\"}}]}} — follow-ups become new tasks; nothing else may be in it.",
                contract.id()
            );
        }
        Contract::Reviewer => {
            let _ = writeln!(out, "Report your verdict by running exactly one of:\n");
            let _ = writeln!(out, "    git loop finish approve --message \"<what you checked>\"");
            let _ = writeln!(out, "    git loop finish changes --message \"<what must change, one point per line>\"");
            let _ = writeln!(
                out,
                "\nOr write this JSON to {path} (nothing else in it):\n\n    {{\"contract\": \"{}\", \"verdict\": \"approve\" or \"changes\", \"comments\": \"...\"}}",
                contract.id()
            );
        }
        Contract::ConflictResolver => {
            let _ = writeln!(out, "Report by running exactly one of:\n");
            let _ = writeln!(out, "    git loop finish resolved --message \"<how you resolved it>\"");
            let _ = writeln!(out, "    git loop finish unresolved --message \"<why it cannot be resolved>\"");
            let _ = writeln!(
                out,
                "\nOr write this JSON to {path} (nothing else in it):\n\n    {{\"contract\": \"{}\", \"resolved\": true or false, \"summary\": \"...\"}}",
                contract.id()
            );
        }
        Contract::Summarizer => {
            let _ = writeln!(out, "Report the message by running:\n");
            let _ = writeln!(out, "    git loop finish summary --subject \"<subject line>\" --message \"<body>\"");
            let _ = writeln!(
                out,
                "\nOr write this JSON to {path} (nothing else in it):\n\n    {{\"contract\": \"{}\", \"subject\": \"...\", \"body\": \"...\"}}",
                contract.id()
            );
        }
    }
    out
}

/// Who runs an agent's model, as far as the loop can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provider {
    Known(String),
    /// A command of one's own, or a CLI whose model does not say.
    Unknown,
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provider::Known(p) => f.write_str(p),
            Provider::Unknown => f.write_str("unknown"),
        }
    }
}

/// The provider of `agent`: `loop.agent.<name>.provider` when set; claude → anthropic,
/// codex → openai, gemini → google; opencode, aider and named agents from their model flag
/// (`--model anthropic/…`, `claude-…`, `gpt-…`, `gemini-…`) where they have one; the demo
/// agent is `demo`; anything else is unknown.
pub fn provider(store: &Store, agent: &Agent) -> Provider {
    if let Some(p) = store.settings().agent_provider(&agent.name) {
        return Provider::Known(p.trim().to_lowercase());
    }
    match agent.name.as_str() {
        "claude" => return Provider::Known("anthropic".into()),
        "codex" => return Provider::Known("openai".into()),
        "gemini" => return Provider::Known("google".into()),
        "demo" => return Provider::Known("demo".into()),
        _ => {}
    }
    model_of(agent).and_then(|m| provider_of_model(&m)).map_or(Provider::Unknown, Provider::Known)
}

/// The model an agent's command line asks for (`--model m`, `--model=m`, `-m m` is not read).
fn model_of(agent: &Agent) -> Option<String> {
    // A named agent's command is one `sh -c` string: look at its words.
    let words: Vec<String> = agent.args.iter().flat_map(|a| a.split_whitespace().map(str::to_owned)).collect();
    words.iter().enumerate().find_map(|(i, w)| {
        if let Some(m) = w.strip_prefix("--model=") {
            return Some(m.trim_matches(['"', '\'']).to_owned());
        }
        (w == "--model").then(|| words.get(i + 1).map(|m| m.trim_matches(['"', '\'']).to_owned())).flatten()
    })
}

/// The provider a model name says: a `provider/` prefix, else what its name is known as.
pub fn provider_of_model(model: &str) -> Option<String> {
    let lower = model.to_lowercase();
    if let Some((prefix, _)) = lower.split_once('/') {
        return match prefix {
            "anthropic" | "openai" | "google" => Some(prefix.to_owned()),
            "gemini" | "vertex_ai" => Some("google".into()),
            "" => None,
            other => Some(other.to_owned()),
        };
    }
    if lower.starts_with("claude") || ["opus", "sonnet", "haiku"].contains(&lower.as_str()) {
        Some("anthropic".into())
    } else if lower.starts_with("gpt")
        || lower.starts_with("o1")
        || lower.starts_with("o3")
        || lower.starts_with("o4")
        || lower.contains("codex")
    {
        Some("openai".into())
    } else if lower.starts_with("gemini") {
        Some("google".into())
    } else {
        None
    }
}

/// Why `reviewer` may not review `worker`'s work, if it may not: the same provider, or a
/// provider the loop cannot tell (then it cannot be shown to differ).
pub fn shares_provider(worker: (&str, &Provider), reviewer: (&str, &Provider)) -> Option<String> {
    let ((w, wp), (r, rp)) = (worker, reviewer);
    match (wp, rp) {
        (Provider::Known(a), Provider::Known(b)) if a == b => {
            Some(format!("the reviewer '{r}' runs on {b}, as the worker '{w}' does"))
        }
        (Provider::Known(_), Provider::Known(_)) => None,
        (Provider::Unknown, _) => Some(format!(
            "the worker '{w}' runs on a provider the loop cannot tell, so the reviewer '{r}' cannot be shown to differ"
        )),
        (_, Provider::Unknown) => Some(format!(
            "the reviewer '{r}' runs on a provider the loop cannot tell, so it cannot be shown to differ from the worker '{w}'"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_review_reads() {
        let good = br#"{"contract": "reviewer/1", "verdict": "changes", "comments": "add a test\nrename x"}"#;
        let Ok(Report::Review(r)) = parse(Contract::Reviewer, good) else { panic!("a review") };
        assert_eq!((r.verdict, r.comments.as_str()), (ReviewVerdict::Changes, "add a test\nrename x"));
        let approve = br#"{"contract": "reviewer/1", "verdict": "approve"}"#;
        assert!(matches!(
            parse(Contract::Reviewer, approve),
            Ok(Report::Review(ReviewOutput { verdict: ReviewVerdict::Approve, .. }))
        ));
    }

    #[test]
    fn an_unknown_field_breaks_every_contract() {
        for (contract, text) in [
            (Contract::Worker, r#"{"verdict": "done", "sumary": "typo"}"#),
            (Contract::Reviewer, r#"{"contract": "reviewer/1", "verdict": "approve", "score": 9}"#),
            (
                Contract::ConflictResolver,
                r#"{"contract": "conflict-resolver/1", "resolved": true, "summary": "s", "paths": []}"#,
            ),
            (Contract::Summarizer, r#"{"contract": "summarizer/1", "subject": "s", "footer": "x"}"#),
        ] {
            let err = parse(contract, text.as_bytes()).expect_err(text);
            assert!(err.0.contains("unknown field"), "{contract:?}: {err}");
        }
    }

    #[test]
    fn a_wrong_or_newer_contract_version_is_refused() {
        let newer =
            parse(Contract::Reviewer, br#"{"contract": "reviewer/2", "verdict": "approve"}"#).expect_err("newer");
        assert!(newer.0.contains("newer"), "{newer}");
        let other = parse(Contract::Reviewer, br#"{"contract": "worker/1", "verdict": "approve"}"#).expect_err("other");
        assert!(other.0.contains("this session's is \"reviewer/1\""), "{other}");
        let missing = parse(Contract::Summarizer, br#"{"subject": "s"}"#).expect_err("missing");
        assert!(missing.0.contains("no \"contract\" field"), "{missing}");
        let worker_v2 = parse(Contract::Worker, br#"{"contract": "worker/2", "verdict": "done"}"#).expect_err("w2");
        assert!(worker_v2.0.contains("newer"), "{worker_v2}");
    }

    #[test]
    fn torn_json_is_a_violation_not_a_verdict() {
        for torn in [&br#"{"contract": "reviewer/1", "verdict": "appr"#[..], b"", b"[1, 2]", b"approve"] {
            assert!(parse(Contract::Reviewer, torn).is_err(), "{}", String::from_utf8_lossy(torn));
        }
        assert!(parse(Contract::Worker, br#"{"verdict": "do"#).is_err());
    }

    #[test]
    fn what_workers_sent_before_contracts_had_names_still_reads() {
        let old =
            br#"{"verdict":"done","summary":"all set","follow_ups":[{"title":"write the docs","priority":"p1"}]}"#;
        let Ok(Report::Work(w)) = parse(Contract::Worker, old) else { panic!("a worker result") };
        assert_eq!((w.verdict, w.follow_ups.len()), (WorkVerdict::Done, 1));
        let named = br#"{"contract":"worker/1","verdict":"blocked"}"#;
        assert!(matches!(
            parse(Contract::Worker, named),
            Ok(Report::Work(WorkerOutput { verdict: WorkVerdict::Blocked, .. }))
        ));
        assert!(parse(Contract::Worker, br#"{"verdict":"maybe"}"#).is_err(), "an unknown verdict breaks it");
    }

    #[test]
    fn each_contracts_own_rules_hold() {
        assert!(
            parse(Contract::Reviewer, br#"{"contract": "reviewer/1", "verdict": "changes", "comments": " "}"#).is_err()
        );
        assert!(parse(Contract::Summarizer, br#"{"contract": "summarizer/1", "subject": "a\nb"}"#).is_err());
        assert!(parse(
            Contract::ConflictResolver,
            br#"{"contract": "conflict-resolver/1", "resolved": "yes", "summary": "s"}"#
        )
        .is_err());
        let Ok(Report::Resolution(r)) = parse(
            Contract::ConflictResolver,
            br#"{"contract": "conflict-resolver/1", "resolved": false, "summary": "both rename x"}"#,
        ) else {
            panic!("a resolution")
        };
        assert!(!r.resolved);
    }

    #[test]
    fn finish_words_belong_to_one_contract() {
        assert!(matches!(
            from_finish(Contract::Reviewer, "changes", "add a test", None),
            Ok(Report::Review(ReviewOutput { verdict: ReviewVerdict::Changes, .. }))
        ));
        assert!(from_finish(Contract::Reviewer, "done", "", None).is_err(), "a reviewer cannot say done");
        assert!(from_finish(Contract::Summarizer, "summary", "body", None).is_err(), "a summary needs a subject");
        assert!(matches!(
            from_finish(Contract::Summarizer, "summary", "body", Some("Add the parser")),
            Ok(Report::Summary(SummaryOutput { ref subject, .. })) if subject == "Add the parser"
        ));
        assert_eq!(Contract::of_word("unresolved"), Some(Contract::ConflictResolver));
    }

    #[test]
    fn providers_come_from_the_preset_or_the_model() {
        assert_eq!(provider_of_model("anthropic/claude-sonnet-4"), Some("anthropic".into()));
        assert_eq!(provider_of_model("gpt-5"), Some("openai".into()));
        assert_eq!(provider_of_model("gemini/gemini-2.5-pro"), Some("google".into()));
        assert_eq!(provider_of_model("llama3"), None);
        let mut agent = super::super::presets::custom("mine", "my-agent --model=claude-opus-4 --yes");
        assert_eq!(model_of(&agent).as_deref(), Some("claude-opus-4"));
        agent.args = vec!["run".into(), "--model".into(), "openai/gpt-5".into()];
        assert_eq!(model_of(&agent).as_deref(), Some("openai/gpt-5"));
        let (a, o, u) = (Provider::Known("anthropic".into()), Provider::Known("openai".into()), Provider::Unknown);
        assert!(shares_provider(("claude", &a), ("codex", &o)).is_none());
        assert!(shares_provider(("claude", &a), ("mine", &a)).is_some());
        assert!(shares_provider(("x", &u), ("codex", &o)).is_some(), "unknown cannot be shown to differ");
    }

    #[test]
    fn every_role_prompt_ends_with_its_contract() {
        let role = Role {
            name: "security".into(),
            contract: Contract::Reviewer,
            agent: Some("codex".into()),
            prompt: Some("Look for injections in {task}.".into()),
        };
        let text = prompt(&role, &[("task", "t-1")], std::path::Path::new("/s/result.json"));
        assert!(text.starts_with("Look for injections in t-1.\n"), "{text}");
        assert!(text.contains("git loop finish approve") && text.contains("\"reviewer/1\""), "{text}");
    }
}
