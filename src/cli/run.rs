//! `git loop run`: walk the backlog with an agent.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::human::count;
use super::text;
use git_loop::agent::presets;
use git_loop::engine::{PausePolicy, Stop};
use git_loop::error::usage;
use git_loop::ids::{short_commit, Span};
use git_loop::mission::AgentChoice;
use git_loop::ops;
use git_loop::walk::unit::human_duration;
use git_loop::walk::{self, Event, Observer};

/// Walk the backlog with an agent.
///
/// Takes the next ready task, claims it, runs an agent session on it in its own worktree and
/// try branch, commits what it leaves, checks its verdict, closes the task, and goes on until
/// nothing is ready, a budget is spent, or the walk policy pauses it. With --together, every
/// task is raced by several agents at once.
///
/// Exit codes: 0 no work left (or once mode succeeded), 1 budget spent or failure (or, with
/// --land, done work that could not be landed), 2 usage (or a setting changed while an
/// unconfined session ran), 3 another walker runs here, 4 paused by policy, 77 agent program
/// missing, a checks, setup or review command that cannot run, or --sandbox required and no
/// sandbox here, 130 interrupted.
///
/// Sessions and their checks run confined in bubblewrap where it works (docs/agents.md, "The
/// sandbox"): an agent changes its own try and nothing else.
///
/// Example: git loop run --agent claude --checks "cargo test" --max-units 5
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// Stop after closing this many tasks (done or not); 1 is "once" mode.
    #[arg(long, value_name = "N")]
    max_units: Option<u32>,
    /// Stop after this many sessions in all.
    #[arg(long, value_name = "N")]
    max_iterations: Option<u32>,
    /// Work this many tasks at once, each with its own claim, try and worktree.
    #[arg(long, value_name = "N", default_value = "1")]
    parallel: u32,
    /// Only tasks with this label; repeat to require several.
    #[arg(long, value_name = "LABEL")]
    label: Vec<String>,
    /// Only this task (id or unique prefix); repeat for several.
    #[arg(long, value_name = "ID")]
    task: Vec<String>,
    /// Also journal how the walk ended under this key, as a 'walk_terminated' event in the
    /// journal chain of that name (what a mission commander waits for).
    #[arg(long, value_name = "KEY")]
    termination_key: Option<git_loop::ids::WriterId>,
    /// Count this walk's sessions towards this mission ('cost --by mission'); a mission
    /// commander passes it to its child walks.
    #[arg(long, value_name = "ID")]
    mission: Option<git_loop::mission::MissionId>,
    /// Race these agents on every task that does not name its own race (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "PRESETS")]
    together: Vec<String>,
    #[command(flatten)]
    walk: WalkArgs,
}

/// Which agent works the tasks (`run`, and each child walk of `mission run`).
#[derive(Args)]
pub struct AgentArgs {
    /// The agent: claude, codex, opencode, gemini, aider, demo, or a name defined with
    /// loop.agent.<name>.command (default: loop.agent).
    #[arg(long, value_name = "PRESET", conflicts_with = "agent_cmd")]
    agent: Option<String>,
    /// A command line of your own, run by 'sh -c' in the worktree, the prompt on stdin.
    #[arg(long, value_name = "COMMAND")]
    agent_cmd: Option<String>,
    /// The model to ask the agent's CLI for.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
}

impl AgentArgs {
    /// The agent asked for: the options, else loop.agent, else `default` (a race's first
    /// entrant); none at all is a usage error.
    pub(super) fn choose(self, store: &git_loop::store::Store, default: Option<&str>) -> Result<AgentChoice> {
        let flags = ops::run::AgentFlags { agent: self.agent, agent_cmd: self.agent_cmd, model: self.model };
        ops::run::choose_agent(store, flags, default)
    }
}

/// How each task is worked: races, checks, review, fallbacks, timing, output.
#[derive(Args)]
pub struct WalkArgs {
    /// How a race picks its winner: first (the first try to pass) or judge; wins over the
    /// task's own pick (default: the task's pick, else loop.pick, else first).
    #[arg(long, value_name = "MODE")]
    pick: Option<String>,
    /// In judge mode, the command that picks among the tries that passed: it reads a JSON
    /// document on stdin and prints the winner's try number (default: loop.judge).
    #[arg(long, value_name = "COMMAND")]
    judge_cmd: Option<String>,
    /// A command that must pass in the worktree for "done" to count (default: loop.checks).
    #[arg(long, value_name = "COMMAND")]
    checks: Option<String>,
    /// A command run in each new try worktree before its first session, e.g. copying .env from
    /// the main checkout ($GIT_LOOP_CHECKOUT) or installing dependencies (default: loop.setup);
    /// what it leaves untracked is never committed; its output heads the session's log, and if
    /// it fails the task goes to needs-you with the reason (one that cannot run stops the walk).
    #[arg(long, value_name = "COMMAND")]
    setup: Option<String>,
    /// A command that must approve a try (exit 0) after its checks pass (default: loop.review).
    #[arg(long, value_name = "COMMAND")]
    review: Option<String>,
    /// Reviewers whose sessions must approve a try's work after its checks pass: roles of the
    /// reviewer contract or agents, comma-separated (default: the task's own, else loop.reviewer).
    #[arg(long, value_delimiter = ',', value_name = "ROLES")]
    reviewer: Vec<String>,
    /// Let a reviewer review a worker of the same (or an unknown) provider, for this reason
    /// (journaled as review_override).
    #[arg(long, value_name = "REASON")]
    reviewer_override: Option<String>,
    /// Who resolves a merge that conflicts (a landing's with --land, or a task's dependencies'):
    /// a role of the conflict-resolver contract or an agent (default: loop.resolver, else
    /// loop.role.conflict-resolver.agent, else the walk's agent).
    #[arg(long, value_name = "ROLE")]
    resolver: Option<String>,
    /// Who writes each landing commit's message (with --land) from the task and its sessions:
    /// a role of the summarizer contract or an agent (default: loop.summarizer, else
    /// loop.role.summarizer.agent, else the loop's own message).
    #[arg(long, value_name = "ROLE")]
    summarizer: Option<String>,
    /// Agents to turn to when a task's agent is unreachable, comma-separated; several race
    /// (default: the task's own, else loop.fallback).
    #[arg(long, value_delimiter = ',', value_name = "PRESETS")]
    fallback: Vec<String>,
    /// Start no further session once the walk's sessions have spent this many dollars together
    /// (reported, else estimated from loop.price.*; default: loop.budgetUsd, else none).
    #[arg(long, value_name = "USD")]
    budget_usd: Option<String>,
    /// Start no further session once the walk's sessions have spent this many tokens together.
    #[arg(long, value_name = "N")]
    budget_tokens: Option<u64>,
    /// Park a task once its sessions (every walk's) have spent this many dollars, before its next
    /// session.
    #[arg(long, value_name = "USD")]
    task_budget_usd: Option<String>,
    /// Turns each session may take: GIT_LOOP_MAX_TURNS for every agent, --max-turns for Claude
    /// Code.
    #[arg(long, value_name = "N")]
    max_turns: Option<u32>,
    /// Sessions per task before it fails (each continuation is one; a race's entrants share them).
    #[arg(long, value_name = "N", default_value = "15")]
    per_unit_dispatches: u32,
    /// Pause the walk after this many failed tasks in a row (0: never; a p0 task's failure
    /// pauses it whatever this says).
    #[arg(long, value_name = "N", default_value = "3")]
    pause_after: u32,
    /// Stop a session after this long.
    #[arg(long, value_name = "DURATION", default_value = "60m")]
    session_timeout: Span,
    /// Stop the checks (and the review and the judge) after this long [default: loop.checksTimeout, else 10m].
    #[arg(long, value_name = "DURATION")]
    checks_timeout: Option<Span>,
    /// Between asking a session to stop (SIGTERM) and killing it (SIGKILL).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    grace: Span,
    /// How long a session asked to wrap up (take-over, reassignment) may take to finish.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    wrap_up: Span,
    /// How long a task claim lasts unless refreshed (it is refreshed while a session runs).
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    lease: Span,
    /// Where task branches start (default: loop.base, else the current branch).
    #[arg(long, value_name = "REV")]
    base: Option<String>,
    /// Land each done task on the current branch (or loop.mergeInto) through the landing
    /// queue, checked on the merged result, as 'git loop land' does (default: loop.land);
    /// --merge is an alias.
    #[arg(long, visible_alias = "merge")]
    land: bool,
    /// How --land lands: merge (the landing queue moves the target itself) or pr (a pull or
    /// merge request per task on the forge, landed when merged there); given, it lands
    /// (default: loop.land's way, else merge).
    #[arg(long, value_name = "WAY", value_parser = parse_via)]
    via: Option<git_loop::landing::Via>,
    /// How sessions and checks are confined: auto (in bubblewrap where it works, else
    /// unconfined and said so), required (refuse to start without it, exit 77) or off
    /// (default: loop.sandbox, else auto).
    #[arg(long, value_name = "MODE", value_parser = parse_sandbox)]
    sandbox: Option<git_loop::sandbox::Mode>,
    /// Obey the settings changed while an unconfined session ran, which a walk otherwise
    /// refuses to start with (they may have been planted by an agent).
    #[arg(long)]
    accept_settings: bool,
    /// Stream events as JSON lines.
    #[arg(long)]
    json: bool,
}

/// `--sandbox`'s value.
pub(super) fn parse_via(word: &str) -> Result<git_loop::landing::Via, git_loop::error::Refusal> {
    git_loop::landing::Via::parse(word)
        .ok_or_else(|| usage(format!("'{}' is not a way to land", word.escape_debug())).hint("use merge or pr"))
}

pub(super) fn parse_sandbox(word: &str) -> Result<git_loop::sandbox::Mode, git_loop::error::Refusal> {
    git_loop::sandbox::Mode::parse(word).ok_or_else(|| {
        usage(format!("sandbox mode '{}' is not valid", word.escape_debug())).hint("use auto, required or off")
    })
}

/// How a command's sessions and checks are confined: `--sandbox` when given, else
/// loop.sandbox; tried on this machine once.
pub(super) fn walk_confinement(
    env: &Env,
    store: &git_loop::store::Store,
    mode: Option<git_loop::sandbox::Mode>,
) -> Result<git_loop::sandbox::Confinement> {
    ops::run::confinement(store, &env.ctx, &env.exe, mode)
}

pub fn run(env: &Env, args: RunArgs) -> Result<u8> {
    if args.parallel == 0 {
        return Err(usage("--parallel must be at least 1").hint("--parallel 1 runs one session at a time").into());
    }
    if args.walk.per_unit_dispatches == 0 {
        return Err(usage("--per-unit-dispatches must be at least 1")
            .hint("it is how many sessions a task may have; leave it out for the default")
            .into());
    }
    if args.max_units == Some(0) || args.max_iterations == Some(0) {
        return Err(usage("a budget of 0 would do nothing").hint("leave it out for no limit").into());
    }
    let store = env.open()?;
    let choice = args.agent.choose(&store, args.together.first().map(String::as_str))?;
    let agent = ops::run::agent_of(&store, &env.exe, choice)?;
    let tasks = args
        .task
        .iter()
        .map(|t| git_loop::backlog::resolve(&store, t).map(|id| id.to_string()))
        .collect::<Result<Vec<_>>>()?;
    ops::run::refuse_stuck(&store, &env.ctx, &tasks)?;
    let json = args.walk.json;
    let mut opts = walk_options(env, &store, agent, args.together, args.walk)?;
    opts.tasks = tasks;
    opts.termination_key = args.termination_key;
    opts.mission = args.mission.map(|m| m.to_string());
    opts.labels = args.label;
    opts.parallel = args.parallel;
    opts.limits.max_units = args.max_units;
    opts.limits.max_iterations = args.max_iterations;
    walk_and_report(env, &store, opts, json)
}

impl WalkArgs {
    pub fn json(&self) -> bool {
        self.json
    }
}

/// The walk options shared by `run` and `race` (decided in `ops::run`); what could not be
/// warmed is said here.
pub(super) fn walk_options(
    env: &Env,
    store: &git_loop::store::Store,
    agent: presets::Agent,
    together: Vec<String>,
    args: WalkArgs,
) -> Result<walk::Options> {
    let flags = ops::run::WalkFlags {
        pick: args.pick,
        judge_cmd: args.judge_cmd,
        checks: args.checks,
        setup: args.setup,
        review: args.review,
        reviewer: args.reviewer,
        reviewer_override: args.reviewer_override,
        resolver: args.resolver,
        summarizer: args.summarizer,
        fallback: args.fallback,
        budget_usd: args.budget_usd,
        budget_tokens: args.budget_tokens,
        task_budget_usd: args.task_budget_usd,
        max_turns: args.max_turns,
        per_unit_dispatches: args.per_unit_dispatches,
        pause_after: args.pause_after,
        session_timeout: to_std(args.session_timeout),
        checks_timeout: args.checks_timeout.map(to_std),
        grace: to_std(args.grace),
        wrap_up: to_std(args.wrap_up),
        lease: args.lease.0,
        base: args.base,
        land: args.land,
        land_via: args.via,
        sandbox: args.sandbox,
        accept_settings: args.accept_settings,
    };
    let opts = ops::run::walk_options(store, &env.ctx, &env.exe, agent, together, flags)?;
    for line in &opts.warm.skipped {
        super::output::stderr_line(format!("warning: not warmed: {line}"));
    }
    Ok(opts)
}

/// Walk with `opts`, printing progress, and turn how it ended into the exit code.
pub(super) fn walk_and_report(
    env: &Env,
    store: &git_loop::store::Store,
    opts: walk::Options,
    json: bool,
) -> Result<u8> {
    let observer = Progress::new(json, env.ctx.clone());
    let cancel = AtomicBool::new(false);
    let ticked = git_loop::engine::StopFlag::default();
    let ended = std::thread::scope(|scope| {
        scope.spawn(|| {
            observer.tick();
            while !ticked.sleep(Duration::from_millis(250)) {
                observer.tick();
            }
        });
        let ended = walk::walk(store, &env.ctx, env.cwd.clone(), env.exe.clone(), opts, &observer, &cancel);
        ticked.stop();
        ended
    })?;
    Ok(super::exit::of_walk_end(&ended.stop, &ended.unlanded))
}

fn to_std(span: Span) -> Duration {
    Duration::from_secs(span.0.num_seconds().max(0) as u64)
}

/// Prints what the walk does: one line per event, and on a terminal a live line with the
/// running sessions; or JSON lines.
pub struct Progress {
    json: bool,
    ctx: git_loop::context::Context,
    live: bool,
    running: Mutex<BTreeMap<String, (String, String, Instant)>>,
    drawn: Mutex<bool>,
}

impl Progress {
    pub fn new(json: bool, ctx: git_loop::context::Context) -> Progress {
        Progress {
            json,
            ctx,
            live: !json && std::io::stderr().is_terminal(),
            running: Mutex::new(BTreeMap::new()),
            drawn: Mutex::new(false),
        }
    }

    fn clear_live(&self) {
        let mut drawn = self.drawn.lock().unwrap_or_else(|p| p.into_inner());
        if *drawn {
            eprint!("\r\x1b[K");
            *drawn = false;
        }
    }

    /// Redraw the live line (on a terminal, while sessions run).
    pub fn tick(&self) {
        if !self.live {
            return;
        }
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.is_empty() {
            return;
        }
        let parts: Vec<String> = running
            .values()
            .map(|(task, agent, since)| format!("{task} ({agent}, {})", clock_of(since.elapsed())))
            .collect();
        let mut drawn = self.drawn.lock().unwrap_or_else(|p| p.into_inner());
        // Our own control sequence, then the names escaped (an agent's name is configuration,
        // a task id came from a record).
        eprint!("\r\x1b[Krunning: {}", text::line(&parts.join(" · ")));
        let _ = std::io::stderr().flush();
        *drawn = true;
    }

    /// One progress line: what it quotes (titles, messages, reasons, an agent's own words)
    /// is escaped as every line for people is.
    fn say(&self, task: Option<&str>, said: String) {
        self.clear_live();
        let now = self.ctx.now().with_timezone(&chrono::Local).format("%H:%M:%S");
        let said = super::paint::render(&said, super::paint::Stream::Stdout, text::line);
        let mut out = std::io::stdout().lock();
        let _ = match task {
            Some(task) => writeln!(out, "{now}  {:<11} {said}", text::line(task)),
            None => writeln!(out, "{now}  {said}"),
        };
        let _ = out.flush();
    }

    /// Lines beneath a progress line, indented under its text (each escaped).
    fn indented(&self, lines: &[String]) {
        self.clear_live();
        let mut out = std::io::stdout().lock();
        for l in lines {
            let _ = writeln!(out, "{:22}{}", "", text::line(l));
        }
        let _ = out.flush();
    }

    /// Lines quoted beneath a progress line (the end of a failed command's output), each
    /// escaped, indented under the line's text.
    fn quote(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        self.clear_live();
        let mut out = std::io::stdout().lock();
        for l in lines {
            let _ = writeln!(out, "{:22}│ {}", "", text::line(l));
        }
        let _ = out.flush();
    }
}

/// How a task in `state` (a person's state) waits, in words: "needs you".
fn waiting_words(state: &str) -> &'static str {
    match state {
        "needs-decision" => "needs a decision",
        "taken-over" => "was taken over",
        "parked" => "was parked",
        _ => "needs you",
    }
}

fn clock_of(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

impl Observer for Progress {
    fn event(&self, event: &Event) {
        match event {
            Event::SessionStarted { session, task, agent, .. } => {
                self.running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(session.clone(), (task.clone(), agent.clone(), Instant::now()));
            }
            Event::SessionEnded { session, .. } => {
                self.running.lock().unwrap_or_else(|p| p.into_inner()).remove(session);
            }
            _ => {}
        }
        if self.json {
            let at = self.ctx.now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let value = event_json(event);
            let mut value = value;
            value["at"] = json!(at);
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{value}");
            let _ = out.flush();
            return;
        }
        match event {
            Event::Started { walker, agent, parallel, limits, labels, checks, sandbox } => {
                let mut parts = vec![format!("agent {agent}")];
                if *parallel > 1 {
                    parts.push(format!("{parallel} tasks at a time"));
                }
                if !labels.is_empty() {
                    parts.push(format!("labels {}", labels.join(", ")));
                }
                if let Some(n) = limits.max_units {
                    parts.push(format!("at most {}", count(n, "task", "tasks")));
                }
                if let Some(n) = limits.max_iterations {
                    parts.push(format!("at most {}", count(n, "session", "sessions")));
                }
                if let Some(usd) = limits.budget_usd {
                    parts.push(format!("at most {} spent", git_loop::store::usage::dollars(usd)));
                }
                if let Some(n) = limits.budget_tokens {
                    parts.push(format!("at most {n} tokens"));
                }
                parts.push(format!("{} per task", count(limits.per_unit_dispatches, "session", "sessions")));
                self.say(None, format!("walk {walker} · {}", parts.join(" · ")));
                match sandbox {
                    walk::Sandboxing::Confined(line) => self.say(None, line.clone()),
                    walk::Sandboxing::Unconfined { line, hint } => {
                        super::output::stderr_line(format!("warning: {line}"));
                        super::output::stderr_line(format!(
                            "hint: {hint}, or set loop.sandbox to off to run them so on purpose"
                        ));
                    }
                    walk::Sandboxing::Off(line) => self.say(None, line.clone()),
                }
                if checks.is_none() {
                    self.say(
                        None,
                        "no checks are set (--checks, loop.checks): a task counts as done on its agent's word"
                            .to_owned(),
                    );
                }
            }
            Event::Recovered { task, detail } => self.say(Some(task), format!("recovered: {detail}")),
            Event::Claimed { task, title, priority } => {
                self.say(Some(task), format!("claimed · {priority} · {}", title.lines().next().unwrap_or("")))
            }
            Event::TryOpened { task, number, branch, worktree, resumed, warmed, checkout } => {
                let pooled = checkout.as_ref().and_then(|c| c.describe());
                // A pooled worktree kept its build state: "nothing to warm" says nothing then.
                let warmed =
                    warmed.as_ref().filter(|w| pooled.is_none() || !w.paths.is_empty() || !w.failed.is_empty());
                self.say(
                    Some(task),
                    format!(
                        "{} try {number} on {branch} · {}{}{}",
                        if *resumed { "continuing" } else { "opened" },
                        worktree.display(),
                        pooled.map(|p| format!(" · {p}")).unwrap_or_default(),
                        warmed.map(|w| format!(" · {}", w.describe())).unwrap_or_default()
                    ),
                )
            }
            Event::SessionStarted { task, session, agent, number, attempt, role } => {
                let which = if *attempt > 1 { format!(", continuation {}", attempt - 1) } else { String::new() };
                let role = role.as_ref().map(|r| format!(" as {r}")).unwrap_or_default();
                self.say(Some(task), format!("session {session} started{role} ({agent}, try {number}{which})"))
            }
            Event::SessionEnded { task, session, elapsed, why, commit, own, commits, usage, log, tail } => {
                let spent = git_loop::store::usage::describe(usage.as_ref());
                let saved = match commit {
                    Some(c) if *own => {
                        format!(" · its own commits, up to {}: nothing was left uncommitted", short_commit(c))
                    }
                    Some(c) => format!(" · work committed as {}", short_commit(c)),
                    // Nothing was left to commit: the agent (or its hook) may have committed its
                    // work itself, so this says no more than that.
                    None if *commits => " · nothing was left uncommitted".to_owned(),
                    None => String::new(),
                };
                let full = if tail.is_empty() { String::new() } else { format!(" · its output: {}", log.display()) };
                self.say(
                    Some(task),
                    format!("session {session} ended after {} ({spent}): {why}{saved}{full}", human_duration(*elapsed)),
                );
                self.quote(tail);
            }
            Event::Checks { task, passed, elapsed, log, tail } => {
                let full = if *passed { String::new() } else { format!(" · their output: {}", log.display()) };
                self.say(
                    Some(task),
                    format!(
                        "checks {} ({}){full}",
                        if *passed { "passed" } else { "failed" },
                        human_duration(*elapsed)
                    ),
                );
                self.quote(tail);
            }
            Event::BranchMoved { task, branch, commit } => {
                self.say(Some(task), format!("{branch} moved to {}", short_commit(commit)))
            }
            Event::Landed { task, into, commit, batch } => {
                let with = if *batch > 1 { format!(" (a batch of {batch})") } else { String::new() };
                self.say(Some(task), format!("landed on {into} at {}{with}", short_commit(commit)))
            }
            Event::LandingFailed { task, into, cause, reason } => {
                self.say(Some(task), format!("not landed on {into}, needs you: {reason}"));
                let standing = super::answer::Standing {
                    conflict: (cause == "conflict").then(|| into.clone()),
                    ..Default::default()
                };
                let ways = super::answer::ways(task, git_loop::store::task::State::NeedsYou, &standing);
                self.indented(&["answer it with one of:".to_owned()]);
                self.indented(&super::answer::lines("  ", &ways));
            }
            Event::NotLanded { tasks, why } => self.say(Some(&tasks.join(", ")), format!("not landed yet: {why}")),
            Event::Done { task, message } => {
                let said = if message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", message.lines().next().unwrap_or(""))
                };
                self.say(Some(task), format!("{}{said}", super::paint::state("done")))
            }
            Event::Closed { task, state, reason, number } => {
                self.say(
                    Some(task),
                    format!("{} · {}", super::paint::state(state), reason.lines().next().unwrap_or("")),
                );
                if let Some(state) = git_loop::store::task::State::parse(state) {
                    let standing = super::answer::Standing { accept: *number, ..Default::default() };
                    let ways = super::answer::ways(task, state, &standing);
                    if !ways.is_empty() {
                        self.indented(&["answer it with one of:".to_owned()]);
                        self.indented(&super::answer::lines("  ", &ways));
                    }
                }
            }
            Event::Abandoned { task, why } => {
                self.say(Some(task), format!("the walk lets it go: {why} · its try branch keeps what was done"))
            }
            Event::Reviewed { task, approved } => self.say(
                Some(task),
                (if *approved { "the review approved" } else { "the review did not approve" }).to_owned(),
            ),
            Event::ReviewVerdict { task, round, rounds, reviewer, verdict, comments } => {
                let what = match verdict.as_str() {
                    "approve" => "approved".to_owned(),
                    "changes" => format!("asks for changes: {}", comments.lines().next().unwrap_or("")),
                    _ => format!("gave no verdict its contract allows: {}", comments.lines().next().unwrap_or("")),
                };
                self.say(Some(task), format!("review round {round} of {rounds} · {reviewer} {what}"))
            }
            Event::RaceStarted { line, .. } | Event::RaceDecided { line, .. } | Event::Handover { line, .. } => {
                self.say(None, line.clone())
            }
            Event::Synced { changes } => self.say(
                None,
                format!("synced: {changes} ref{} changed on the remote", if *changes == 1 { "" } else { "s" }),
            ),
            Event::Folded { remote, tasks, chains, refs } => self.say(
                None,
                format!(
                    "folded {tasks} finished tasks and {chains} journal chains into refs/loop/archive on {remote}: {refs} refs retired (loop.fold)"
                ),
            ),
            Event::FollowUp { task, added, title } => self.say(Some(task), format!("follow-up task {added}: {title}")),
            Event::SettingsChanged { changes, during, obeyed } => {
                let what = walk::steering::describe(changes);
                let line = match (during.is_empty(), obeyed) {
                    (true, _) => format!("settings changed since the last walk: {what}"),
                    (false, _) => format!(
                        "settings changed while session {} ran: {what}; this walk goes on with those it started with",
                        during.join(", ")
                    ),
                };
                if during.is_empty() {
                    self.say(None, line);
                } else {
                    self.clear_live();
                    super::output::stderr_line(format!("warning: {line}"));
                }
            }
            Event::RemoteSilent { remote, why } => {
                self.clear_live();
                super::output::stderr_line(format!(
                    "warning: remote '{remote}' does not answer ({why}): this walk goes on with the work it holds, claims nothing new and keeps asking; nothing is lost"
                ));
            }
            Event::RemoteBack { remote, after } => self.say(
                None,
                format!(
                    "remote '{remote}' answers again, after {} without an answer",
                    super::human::span(chrono::Duration::from_std(*after).unwrap_or(chrono::Duration::MAX))
                ),
            ),
            Event::Warning { message } => {
                self.clear_live();
                let message = super::remote_error::summarize(message).unwrap_or_else(|| message.clone());
                super::output::stderr_line(format!("warning: {message}"));
            }
            Event::Finished { stop, tally, unlanded } => {
                let why = match stop {
                    Stop::NoWork => "nothing left to do".to_owned(),
                    Stop::Done => "--max-units reached, every task it took done".to_owned(),
                    Stop::UnitLimit => "--max-units reached, not every task it took done".to_owned(),
                    Stop::Budget => "a budget ran out".to_owned(),
                    Stop::Failed => "stopped by the error below".to_owned(),
                    Stop::Paused { policy: PausePolicy::P0Failure, units } => {
                        format!("paused: p0 task {} failed", units.join(", "))
                    }
                    Stop::Paused { policy: PausePolicy::P0Waiting(state), units } => {
                        format!("paused: p0 task {} {}", units.join(", "), waiting_words(state))
                    }
                    Stop::Paused { policy: PausePolicy::ConsecutiveFailures(n), units } => {
                        format!("paused after {n} failures in a row ({})", units.join(", "))
                    }
                    Stop::Paused { policy: PausePolicy::Unreachable(why), .. } => format!("paused: {why}"),
                    Stop::Interrupted => "interrupted; sessions stopped and their work committed".to_owned(),
                };
                let known = tally.spent_tokens > 0 || tally.spent_micro_usd > 0;
                let mut spent = if known {
                    format!(
                        "{} spent, {} tokens",
                        git_loop::store::usage::dollars(tally.spent_usd()),
                        tally.spent_tokens
                    )
                } else {
                    "spend unknown".to_owned()
                };
                if known && tally.spent_unknown > 0 {
                    spent.push_str(&format!(
                        ", {} session{} unknown",
                        tally.spent_unknown,
                        if tally.spent_unknown == 1 { "" } else { "s" }
                    ));
                }
                let why = match unlanded.len() {
                    0 => why,
                    n => format!("{why} · {} not landed, as said above", count(n as u32, "done task", "done tasks")),
                };
                self.say(
                    None,
                    format!(
                        "{} done, {} not done, {} left open · {} · {}{why}",
                        tally.succeeded,
                        tally.failed,
                        tally.abandoned,
                        count(tally.dispatches, "session", "sessions"),
                        if tally.dispatches == 0 { String::new() } else { format!("{spent} · ") }
                    ),
                );
            }
        }
    }
}

/// An event as a JSON object (`event` names its kind).
fn event_json(event: &Event) -> serde_json::Value {
    match event {
        Event::Started { walker, agent, parallel, limits, labels, checks, sandbox } => json!({
            "event": "walk_started", "walker": walker, "agent": agent, "parallel": parallel, "labels": labels, "checks": checks,
            "sandbox": sandbox.word(),
            "max_units": limits.max_units, "max_iterations": limits.max_iterations, "per_unit_dispatches": limits.per_unit_dispatches,
            "budget_usd": limits.budget_usd, "budget_tokens": limits.budget_tokens,
        }),
        Event::Recovered { task, detail } => json!({ "event": "recovered", "task": task, "detail": detail }),
        Event::Claimed { task, title, priority } => {
            json!({ "event": "claimed", "task": task, "title": title, "priority": priority })
        }
        Event::TryOpened { task, number, branch, worktree, resumed, warmed, checkout } => json!({
            "event": "try_opened", "task": task, "try": number, "branch": branch, "worktree": worktree, "resumed": resumed,
            "warmed": warmed.as_ref().map(|w| w.record()),
            "checkout": checkout.as_ref().map(|c| c.record()),
        }),
        Event::SessionStarted { task, session, agent, number, attempt, role } => json!({
            "event": "session_started", "task": task, "session": session, "agent": agent, "try": number, "attempt": attempt,
            "role": role.as_deref().unwrap_or("worker"),
        }),
        Event::SessionEnded { task, session, elapsed, why, commit, own, usage, log, tail, .. } => json!({
            "event": "session_ended", "task": task, "session": session, "elapsed_ms": elapsed.as_millis() as u64, "reason": why, "commit": commit,
            "own_commit": own,
            "usage": usage, "log": log, "tail": tail,
        }),
        Event::Checks { task, passed, elapsed, log, tail } => json!({
            "event": "checks", "task": task, "passed": passed, "elapsed_ms": elapsed.as_millis() as u64,
            "log": log, "tail": tail,
        }),
        Event::BranchMoved { task, branch, commit } => {
            json!({ "event": "branch_moved", "task": task, "branch": branch, "commit": commit })
        }
        Event::Landed { task, into, commit, batch } => {
            json!({ "event": "landed", "task": task, "into": into, "commit": commit, "batch": batch })
        }
        Event::LandingFailed { task, into, cause, reason } => {
            json!({ "event": "landing_failed", "task": task, "into": into, "cause": cause, "reason": reason })
        }
        Event::NotLanded { tasks, why } => json!({ "event": "not_landed", "tasks": tasks, "reason": why }),
        Event::Done { task, message } => {
            json!({ "event": "unit_closed", "task": task, "verdict": "done", "message": message })
        }
        Event::Closed { task, state, reason, .. } => {
            json!({ "event": "unit_closed", "task": task, "verdict": state, "reason": reason })
        }
        Event::Reviewed { task, approved } => json!({ "event": "review", "task": task, "approved": approved }),
        Event::ReviewVerdict { task, round, rounds, reviewer, verdict, comments } => json!({
            "event": "review_verdict", "task": task, "round": round, "rounds": rounds, "reviewer": reviewer,
            "verdict": verdict, "comments": comments,
        }),
        Event::RaceStarted { task, agents, tries, line } => {
            json!({ "event": "race_started", "task": task, "agents": agents, "tries": tries, "line": line })
        }
        Event::RaceDecided { task, winner, line } => {
            json!({ "event": if winner.is_some() { "race_won" } else { "race_ended" }, "task": task, "winner": winner, "line": line })
        }
        Event::Handover { task, line } => json!({ "event": "handed_over", "task": task, "line": line }),
        Event::Synced { changes } => json!({ "event": "synced", "changes": changes }),
        Event::Folded { remote, tasks, chains, refs } => {
            json!({ "event": "folded", "remote": remote, "tasks": tasks, "chains": chains, "refs": refs })
        }
        Event::Abandoned { task, why } => json!({ "event": "unit_abandoned", "task": task, "reason": why }),
        Event::FollowUp { task, added, title } => {
            json!({ "event": "follow_up", "task": task, "added": added, "title": title })
        }
        Event::Warning { message } => json!({ "event": "warning", "message": message }),
        Event::SettingsChanged { changes, during, obeyed } => {
            json!({ "event": "settings_changed", "changes": changes, "during": during, "obeyed": obeyed })
        }
        Event::RemoteSilent { remote, why } => json!({ "event": "remote_silent", "remote": remote, "reason": why }),
        Event::RemoteBack { remote, after } => {
            json!({ "event": "remote_back", "remote": remote, "silent_s": after.as_secs_f64() })
        }
        Event::Finished { stop, tally, unlanded } => {
            let mut value = json!({
                "event": "walk_ended", "stop": walk::stop_word(stop), "exit_code": super::exit::of_walk_end(stop, unlanded),
                "unlanded": unlanded,
                "done": tally.succeeded, "not_done": tally.failed, "left_open": tally.abandoned, "sessions": tally.dispatches,
                "spent_usd": tally.spent_usd(), "spent_tokens": tally.spent_tokens, "spent_unknown": tally.spent_unknown,
            });
            if let Stop::Paused { policy, units } = stop {
                value["policy"] = json!(match policy {
                    PausePolicy::P0Failure => "p0_failure".to_owned(),
                    PausePolicy::P0Waiting(_) => "p0_waiting".to_owned(),
                    PausePolicy::ConsecutiveFailures(n) => format!("{n}_consecutive_failures"),
                    PausePolicy::Unreachable(_) => "unreachable".to_owned(),
                });
                if let PausePolicy::Unreachable(why) = policy {
                    value["reason"] = json!(why);
                }
                if let PausePolicy::P0Waiting(state) = policy {
                    value["state"] = json!(state);
                }
                value["units"] = json!(units);
            }
            value
        }
    }
}
