//! `git loop board`: the board full-screen, kept current, with the people verbs on keys.
//!
//! What it shows is what `status` reads (`ops::status::overview`), turned into columns by
//! `model`; `layout` draws it; `keys` turns keys into verbs, which run the library functions
//! the command line's verbs run, each on a thread of its own so the board stays live while a
//! stop waits for its session. The board re-reads when the watch of the ref directories says
//! something changed (at once for this clone's walks and commands), every few seconds anyway
//! (sessions' logs, leases), and syncs on a timer when `loop.remote` is set.

mod keys;
mod layout;

pub(super) use keys::Verb;
pub(super) use layout::{Card, Model, SessionRow};

use std::io::IsTerminal as _;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use crossterm::event::{self, Event, KeyEventKind};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use super::human::{clock, relative, short};
use super::text;
use crate::cli::env::Env;
use git_loop::agent::record;
use git_loop::backlog::{self, Readiness};
use git_loop::error::{find_refusal, usage};
use git_loop::ops::people::{self, HandBack};
use git_loop::ops::status::{self, Overview};
use git_loop::refs;
use git_loop::store::events::Recorded;
use git_loop::store::journal::{self, Filter};
use git_loop::store::task::State;
use git_loop::store::watch::{Changes, Watch};
use git_loop::store::Store;
use keys::{Keys, Outcome};
use layout::{Pane, View};

/// A live board in the terminal: act on tasks as they move.
///
/// Columns by state (ready, running, needs you, done, parked, failed), the sessions running
/// here with their agent, try, time, spend and last output line, the journal's tail, and the
/// walk's and missions' status, kept current as the refs change (and synced with loop.remote
/// on its timer). Keys on the selected task: enter show, f follow its session's output, x stop,
/// r reassign, t take over, b hand back, o reopen, p park (the destructive ones ask y/n);
/// q or Ctrl-C quits. Honours --color and NO_COLOR. Needs a terminal: for scripts, git loop status --json.
///
/// Example: git loop board
#[derive(Args)]
pub struct BoardArgs {}

/// The ref directories whose changes redraw the board at once.
const WATCHED: [&str; 4] = [refs::TASKS, "refs/loop/claims/node/", "refs/loop/claims/walker/", refs::JOURNAL];
/// How often a key is waited for (and the watch asked).
const TICK: Duration = Duration::from_millis(150);
/// How often sessions' logs are read again.
const SESSIONS_EVERY: Duration = Duration::from_secs(1);
/// How often everything is read again, changed or not (leases age; missions are not watched).
const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// The shortest time between two full reads when the watch says anything may have changed.
const RELOAD_AT_MOST: Duration = Duration::from_millis(500);

pub fn run(env: &Env, _args: BoardArgs) -> Result<u8> {
    if !std::io::stdout().is_terminal() {
        return Err(usage("the board needs a terminal, and stdout is not one")
            .hint("'git loop status' prints the board (--json for scripts); 'git loop watch <task>' follows a session")
            .into());
    }
    let store = env.open()?;
    let color = super::paint::enabled(super::paint::Stream::Stdout);
    let mut terminal = enter()?;
    std::thread::scope(|scope| {
        let mut board = match Board::new(env, &store, color) {
            Ok(board) => board,
            Err(err) => {
                leave();
                return Err(err);
            }
        };
        let outcome = board.run(scope, &mut terminal);
        leave();
        if board.busy > 0 {
            super::output::stderr_line("waiting for what was asked on the board to finish…");
        }
        outcome
    })
}

/// Raw mode and the alternate screen, undone by `leave` on every way out: a return, an error,
/// and a panic (the hook leaves first, so its message is readable).
fn enter() -> Result<Terminal<CrosstermBackend<std::io::Stdout>>> {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        leave();
        previous(info);
    }));
    terminal::enable_raw_mode()?;
    let mut stdout = std::io::stdout();
    if let Err(err) = crossterm::execute!(stdout, EnterAlternateScreen) {
        leave();
        return Err(err.into());
    }
    Ok(Terminal::new(CrosstermBackend::new(stdout))?)
}

/// Give the terminal back as it was (safe to call more than once).
fn leave() {
    let _ = terminal::disable_raw_mode();
    let _ = crossterm::execute!(std::io::stdout(), LeaveAlternateScreen, crossterm::cursor::Show);
}

enum Input {
    None,
    Ready,
    /// The terminal is gone (an ssh connection dropped, a closed window).
    HungUp,
}

/// Wait up to `timeout` for an event. crossterm would read a terminal that hung up in a loop
/// that never ends (every read fails with EIO), so whether it hung up is asked first, with
/// poll(2), and crossterm reads only a terminal that has not.
fn wait_for_input(timeout: Duration) -> Result<Input> {
    if !std::io::stdin().is_terminal() {
        // crossterm reads /dev/tty then, which hangs up with the process's session.
        return Ok(if event::poll(timeout)? { Input::Ready } else { Input::None });
    }
    let hung_up = |wait: Duration| -> bool {
        let mut fd = libc::pollfd { fd: libc::STDIN_FILENO, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd we own, and its count.
        let n = unsafe { libc::poll(&mut fd, 1, wait.as_millis().min(i32::MAX as u128) as i32) };
        n > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
    };
    // Keys crossterm already read (several in one read) come first; then wait.
    if hung_up(Duration::ZERO) {
        return Ok(Input::HungUp);
    }
    if event::poll(Duration::ZERO)? {
        return Ok(Input::Ready);
    }
    if hung_up(timeout) {
        return Ok(Input::HungUp);
    }
    // Input, a resize (crossterm's signal pipe), or nothing.
    Ok(if event::poll(Duration::ZERO)? { Input::Ready } else { Input::None })
}

/// What a background job reports.
enum Report {
    /// A verb's outcome: lines to show, or an error.
    Acted(Result<Vec<String>, String>),
    Synced(Result<String, String>),
}

struct Board<'e> {
    env: &'e Env,
    store: &'e Store,
    color: bool,
    model: Model,
    view: View,
    keys: Keys,
    overview: Option<Overview>,
    watch: Watch,
    remote: Option<String>,
    sync_every: Option<Duration>,
    /// The task whose session output is followed.
    following: Option<String>,
    busy: usize,
    syncing: bool,
    synced: Option<String>,
}

impl<'e> Board<'e> {
    fn new(env: &'e Env, store: &'e Store, color: bool) -> Result<Board<'e>> {
        let remote = store.arbiter();
        let sync_every = if remote.is_some() { store.settings().sync_every()? } else { None };
        Ok(Board {
            env,
            store,
            color,
            model: Model::default(),
            view: View::default(),
            keys: Keys::default(),
            overview: None,
            watch: Watch::new(store.common_dir(), &WATCHED),
            remote,
            sync_every,
            following: None,
            busy: 0,
            syncing: false,
            synced: None,
        })
    }

    fn run<'s>(
        &mut self,
        scope: &'s std::thread::Scope<'s, 'e>,
        terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>,
    ) -> Result<u8> {
        let (tx, rx) = mpsc::channel::<Report>();
        let mut last_reload = Instant::now() - RELOAD_EVERY;
        let mut last_sessions = Instant::now();
        let mut last_sync = Instant::now();
        let mut dirty = true;
        let mut changed = false;
        loop {
            if gix::interrupt::is_triggered() {
                return Ok(super::exit::INTERRUPTED);
            }
            // A change seen too soon after a read waits for the next, never forgotten.
            changed |= self.changed();
            let since = last_reload.elapsed();
            if (changed && since >= RELOAD_AT_MOST) || since >= RELOAD_EVERY {
                changed = false;
                self.reload()?;
                last_reload = Instant::now();
                last_sessions = last_reload;
                dirty = true;
            } else if last_sessions.elapsed() >= SESSIONS_EVERY {
                self.refresh_sessions();
                last_sessions = Instant::now();
                dirty = true;
            }
            if let (Some(remote), Some(every)) = (&self.remote, self.sync_every) {
                if !self.syncing && last_sync.elapsed() >= every {
                    self.syncing = true;
                    last_sync = Instant::now();
                    let (env, remote, tx) = (self.env, remote.clone(), tx.clone());
                    scope.spawn(move || {
                        let result = Store::open(&env.ctx, &env.cwd)
                            .and_then(|store| git_loop::store::sync::sync(&store, &env.ctx, &remote))
                            .map(|report| {
                                format!(
                                    "synced with {remote} at {}",
                                    env.ctx.now().with_timezone(&chrono::Local).format("%H:%M:%S")
                                ) + &if report.incoming() > 0 {
                                    format!(" ({} changed)", report.incoming())
                                } else {
                                    String::new()
                                }
                            })
                            .map_err(|err| format!("sync with {remote} failed: {}", one_line(&err)));
                        let _ = tx.send(Report::Synced(result));
                    });
                }
            }
            while let Ok(report) = rx.try_recv() {
                match report {
                    Report::Acted(result) => {
                        self.busy -= 1;
                        match result {
                            Ok(lines) if lines.len() > 1 => {
                                self.view.message = lines.first().cloned();
                                self.view.pane = Pane::Detail { title: "what came of it".into(), lines };
                            }
                            Ok(lines) => self.view.message = lines.into_iter().next(),
                            Err(err) => self.view.message = Some(err),
                        }
                        last_reload = Instant::now() - RELOAD_EVERY;
                    }
                    Report::Synced(result) => {
                        self.syncing = false;
                        match result {
                            Ok(line) => self.synced = Some(line),
                            Err(err) => self.view.message = Some(err),
                        }
                    }
                }
                dirty = true;
            }
            if dirty {
                terminal.draw(|frame| layout::draw(frame, &self.model, &self.view, self.color))?;
                dirty = false;
                // Tests (debug builds): a panic once the board is drawn, to see the terminal given
                // back by the panic hook.
                if cfg!(debug_assertions) && std::env::var_os("GIT_LOOP_BOARD_PANIC").is_some() {
                    panic!("GIT_LOOP_BOARD_PANIC is set");
                }
            }
            match wait_for_input(TICK)? {
                Input::None => continue,
                Input::HungUp => return Ok(super::exit::INTERRUPTED),
                Input::Ready => {}
            }
            dirty = true;
            let Event::Key(key) = event::read()? else { continue };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            match self.keys.handle(&mut self.view, &self.model, key) {
                Outcome::Nothing => {}
                Outcome::Quit => return Ok(super::exit::OK),
                Outcome::Show(task) => {
                    self.following = None;
                    self.view.pane = self.detail(&task);
                }
                Outcome::Follow(task) => {
                    self.following = Some(task);
                    self.refresh_sessions();
                }
                Outcome::Act(task, verb) => {
                    self.busy += 1;
                    self.view.message = Some(format!("{}…", doing(&task, &verb)));
                    let (env, tx) = (self.env, tx.clone());
                    scope.spawn(move || {
                        let result = act(env, &task, &verb).map_err(|err| one_line(&err));
                        // Send what the verb changed to the remote, as the command line does.
                        env.publish();
                        let _ = tx.send(Report::Acted(result));
                    });
                }
            }
            if matches!(self.view.pane, Pane::None) {
                self.following = None;
            }
        }
    }

    /// Whether the watch says a ref changed. A directory that does not exist (no claim was
    /// ever taken) holds nothing to change: its `All` is not a change (packed-refs replaced
    /// is, through the directories that exist).
    fn changed(&mut self) -> bool {
        let common = self.store.common_dir().to_owned();
        let mut changed = false;
        for prefix in WATCHED {
            changed |= match self.watch.changes(prefix) {
                Changes::All => common.join(prefix.trim_end_matches('/')).is_dir(),
                Changes::Names(names) => !names.is_empty(),
            };
        }
        changed
    }

    /// Read everything again.
    fn reload(&mut self) -> Result<()> {
        let overview = status::overview(self.store, &self.env.ctx)?;
        let selected = self.model.card(self.view.selected).map(|c| c.id.clone());
        self.model = model(self.env, self.store, &overview, self.synced.as_deref())?;
        self.overview = Some(overview);
        // The selection follows its task to its new column.
        if let Some(at) = selected.and_then(|id| self.model.find(&id)) {
            self.view.selected = at;
        } else {
            let (column, row) = self.view.selected;
            self.view.selected = (column, row.min(self.model.columns[column].len().saturating_sub(1)));
        }
        self.refresh_sessions();
        Ok(())
    }

    /// Read the sessions and the followed output again.
    fn refresh_sessions(&mut self) {
        let Some(o) = &self.overview else { return };
        self.model.sessions = sessions(self.env, self.store, o);
        if let Some(task) = &self.following {
            self.view.pane = match super::watch::session_of(&o.loop_dir, &self.env.ctx, task) {
                Some((r, running)) => {
                    let log = record::dir(&o.loop_dir, &r.session).join("log");
                    let lines = record::tail(&log, 200).lines().map(|l| text::line(l).into_owned()).collect();
                    let how = if running { "running" } else { "ended" };
                    Pane::Follow {
                        title: format!("{task} · session {} ({}, try {}) · {how}", r.session, r.agent, r.try_number),
                        lines,
                    }
                }
                None => Pane::Detail {
                    title: task.clone(),
                    lines: vec![format!("no session of {task} ran on this machine")],
                },
            };
        }
    }

    /// A task's record, for the detail pane.
    fn detail(&self, id: &str) -> Pane {
        let found =
            backlog::resolve(self.store, id).and_then(|id| git_loop::store::task::read(self.store, &id)).ok().flatten();
        let Some(snapshot) = found else {
            return Pane::Detail { title: id.to_owned(), lines: vec![format!("{id} is not on the board any more")] };
        };
        let t = &snapshot.task;
        let shown = self.overview.as_ref().map_or(t.state.as_str(), |o| o.board.shown_state(&t.id, t.state));
        let mut lines = vec![format!("{} · {} · {}", t.title, shown, t.priority)];
        let mut field = |name: &str, value: String| {
            if !value.is_empty() {
                lines.push(format!("{name:<10} {value}"));
            }
        };
        field("reason", t.reason.clone().unwrap_or_default());
        field("after", t.after.join(", "));
        field("labels", t.labels.join(", "));
        field("agents", t.agents.join(", "));
        field("assigned", t.assigned.as_ref().map(|a| a.agent.clone()).unwrap_or_default());
        if t.state == git_loop::store::task::State::TakenOver {
            if let Some((worktree, by)) = self.overview.as_ref().and_then(|o| o.taken.get(&t.id)) {
                field("worktree", format!("{worktree} (taken over by {by})"));
            }
        }
        if let Some(c) = &t.completion {
            field("done by", c.session.clone().unwrap_or_default());
            field("note", c.message.clone().unwrap_or_default());
        }
        let mut lines: Vec<String> = lines.iter().map(|l| text::line(l).into_owned()).collect();
        if !t.body.is_empty() {
            lines.push(String::new());
            lines.extend(t.body.lines().map(|l| text::body_line(l).into_owned()));
        }
        Pane::Detail { title: format!("show {}", t.id), lines }
    }
}

/// The board's columns and lines, from what `status` read.
pub(super) fn model(env: &Env, store: &Store, o: &Overview, synced: Option<&str>) -> Result<Model> {
    let now = env.ctx.now();
    let board = &o.board;
    let clean = |s: &str| text::line(s).into_owned();
    let card =
        |t: &git_loop::store::task::Task, note: Option<String>| Card { id: t.id.clone(), title: clean(&t.title), note };
    let mut model = Model::default();
    model.columns[0] = o.ready.iter().map(|t| card(t, None)).collect();
    model.more[0] = o.ready_count - o.ready.len();
    for row in board.tasks.iter().filter(|r| r.state == State::Open) {
        match board.readiness(row) {
            Readiness::Blocked(_) => model.columns[0].push(card(&row.task()?, Some("blocked".into()))),
            Readiness::Epic => {
                let progress = board.progress(row.id());
                model.columns[0].push(card(&row.task()?, Some(format!("epic {progress}"))));
            }
            _ => {}
        }
    }
    for id in &o.worked_ids {
        let agent = o.running.iter().find(|r| &r.task == id).map(|r| r.agent.clone());
        if let Some(row) = board.get(id) {
            model.columns[1].push(card(&row.task()?, agent));
        }
    }
    for t in &o.waiting {
        let column = if t.state == State::Failed { 5 } else { 2 };
        let note = match o.taken.get(&t.id) {
            // Where the person works it: its worktree.
            Some((worktree, _)) if t.state == State::TakenOver => Some(format!("taken over · {}", clean(worktree))),
            _ => (t.state != State::Failed).then(|| t.state.as_str().to_owned()),
        };
        model.columns[column].push(card(t, note));
    }
    let mut done: Vec<_> = board.tasks.iter().filter(|r| r.state == State::Done).collect();
    done.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    model.more[3] = done.len().saturating_sub(500);
    let requests = o.landing.as_ref().map(|v| v.requests.as_slice()).unwrap_or_default();
    for row in done.into_iter().take(500) {
        // A done task's open request on the forge: its number and CI.
        let note = requests.iter().find(|k| k.task == row.id()).map(|k| {
            let sign = if k.forge == "gitlab" { "!" } else { "#" };
            format!("{sign}{} checks {}", k.number, k.checks)
        });
        model.columns[3].push(card(&row.task()?, note));
    }
    model.columns[4] = o.parked.iter().map(|t| card(t, None)).collect();

    let walk = match (o.walkers.first(), &o.last_walk) {
        (Some((w, _)), _) => format!(
            "walk {} running since {} (pid {} on {})",
            w.record.holder,
            relative(w.record.acquired_at, now),
            w.record.pid,
            w.record.host
        ),
        (None, Some((e, Recorded::WalkPaused(p)))) => {
            format!("no walk running here · the last walk paused {} ({})", relative(e.event.at, now), p.policy)
        }
        (None, Some((e, Recorded::WalkEnded(ended)))) => {
            format!("no walk running here · the last walk ended {} ({})", relative(e.event.at, now), ended.stop)
        }
        _ => "no walk running here".to_owned(),
    };
    let walk = match synced {
        Some(synced) => format!("{walk} · {synced}"),
        None => walk,
    };
    let count = |st: State| board.tasks.iter().filter(|r| r.state == st).count();
    let mut counts = format!(
        "{} open ({} ready, {} blocked, {} running) · {} waiting for you · {} done · {} parked",
        count(State::Open),
        o.ready_count,
        o.blocked,
        o.worked,
        o.waiting.len(),
        count(State::Done),
        count(State::Parked)
    );
    if o.spent.sessions > 0 {
        counts.push_str(&format!(" · spent {}", o.spent.describe()));
    }
    model.header = vec![clean(&walk), counts];
    if !o.mission_list.is_empty() {
        let missions: Vec<String> = o
            .mission_list
            .iter()
            .map(|m| {
                let state = match super::mission::commander(store, &env.ctx, m) {
                    Some(held) => super::mission::commander_line(&held, now),
                    None => m.state.as_str().to_owned(),
                };
                format!("mission {} {} · {state}", m.id, short(&m.title, 30))
            })
            .collect();
        model.header.push(clean(&missions.join(" │ ")));
    }
    let timeline = journal::timeline(store, &Filter::default())?.entries;
    model.journal = timeline[timeline.len().saturating_sub(30)..]
        .iter()
        .map(|entry| {
            let e = &entry.event;
            let summary = journal::summary(e).map(|s| format!("  {s}")).unwrap_or_default();
            clean(&format!("{} {} {}{summary}", clock(e.at, now), e.task.as_deref().unwrap_or("-"), e.kind))
        })
        .collect();
    model.sessions = sessions(env, store, o);
    Ok(model)
}

/// The sessions running here, read again, with each task's spend so far.
pub(super) fn sessions(env: &Env, store: &Store, o: &Overview) -> Vec<SessionRow> {
    let now = env.ctx.now();
    let mut running = status::running_sessions(&o.loop_dir, &env.ctx);
    running.sort_by_key(|r| r.started_at);
    running
        .iter()
        .map(|r| {
            let spent = git_loop::store::ledger::task_total(store, &r.task)
                .ok()
                .filter(|t| t.sessions > 0)
                .map(|t| t.describe())
                .unwrap_or_else(|| "spent –".into());
            let last = record::tail(&record::dir(&o.loop_dir, &r.session).join("log"), 1);
            SessionRow {
                task: r.task.clone(),
                session: r.session.clone(),
                agent: text::line(&r.agent).into_owned(),
                try_number: r.try_number,
                elapsed: relative(r.started_at, now).trim_end_matches(" ago").to_owned(),
                spent,
                last: text::line(&last).into_owned(),
            }
        })
        .collect()
}

/// What the bottom line says while a verb runs.
fn doing(task: &str, verb: &Verb) -> String {
    match verb {
        Verb::Stop => format!("stopping {task}'s session"),
        Verb::Reassign(agent) => format!("reassigning {task} to {agent}"),
        Verb::TakeOver => format!("taking {task} over"),
        Verb::HandBack(true) => format!("handing {task} back, keeping the work: running the checks"),
        Verb::HandBack(false) => format!("handing {task} back to its agent"),
        Verb::Reopen => format!("reopening {task}"),
        Verb::Park(_) => format!("parking {task}"),
    }
}

/// Run a verb as its command does, and say what came of it.
pub(super) fn act(env: &Env, task: &str, verb: &Verb) -> Result<Vec<String>> {
    let store = env.open()?;
    let ctx = &env.ctx;
    Ok(match verb {
        Verb::Stop => {
            let stopped = people::stop(&store, ctx, task)?;
            let id = stopped.task;
            let how = match &stopped.session {
                Some(s) if s.ended.is_some() => format!("session {} stopped", s.session),
                Some(s) => format!("session {} is stopping", s.session),
                None => format!("{} stops its session at its next sync", stopped.walker),
            };
            vec![format!("{id} · {how} · it needs a decision: o reopen, r reassign, t take over")]
        }
        Verb::Reassign(agent) => {
            let done = people::reassign(&store, ctx, &env.exe, task, agent, None)?;
            match &done.from {
                Some(from) if *from == done.to => vec![format!("{} · {} restarts", done.task, done.to)],
                Some(from) => vec![format!("{} · reassigned from {from} to {}", done.task, done.to)],
                None => vec![format!("{} · assigned to {}", done.task, done.to)],
            }
        }
        Verb::TakeOver => {
            let taken = people::take_over(&store, ctx, &env.exe, task)?;
            let id = &taken.task;
            let mut lines = vec![
                format!("{id} is yours: the loop leaves it alone until you hand it back"),
                format!("  worktree  {}", taken.try_.worktree.display()),
                format!("  branch    {}", refs::short_branch(&taken.try_.branch)),
            ];
            if let Some(resume) = &taken.resume {
                lines.push(format!("  resume    {resume}"));
            }
            lines.push(format!("when you are done: b on the board, or git loop hand-back {id} --keep | --continue"));
            lines
        }
        Verb::HandBack(keep) => {
            let mode = if *keep { HandBack::Keep } else { HandBack::Continue };
            let back = people::hand_back(&store, ctx, &env.exe, task, mode, None, None)?;
            if mode == HandBack::Keep && !env.cwd.starts_with(&back.try_.worktree) {
                let _ = git_loop::tries::remove_worktree(&store, &back.try_);
            }
            match back.landed {
                Some(c) => vec![format!(
                    "{} done · loop/{} moved to {}",
                    back.task,
                    back.task,
                    git_loop::ids::short_commit(&c)
                )],
                None => {
                    vec![format!("{} is open again: the next walk's agent goes on, told what you changed", back.task)]
                }
            }
        }
        Verb::Reopen => {
            let id = backlog::resolve(&store, task)?;
            backlog::set_state(&store, ctx, &id, State::Open, None)?;
            vec![format!("{id} reopened")]
        }
        Verb::Park(reason) => {
            let id = backlog::resolve(&store, task)?;
            backlog::set_state(&store, ctx, &id, State::Parked, Some(reason.clone()))?;
            vec![format!("{id} parked")]
        }
    })
}

/// An error on one line, with its hint.
pub(super) fn one_line(err: &anyhow::Error) -> String {
    let line = match find_refusal(err) {
        Some(r) => match &r.hint {
            Some(hint) => format!("error: {} · hint: {hint}", r.message),
            None => format!("error: {}", r.message),
        },
        None => format!("error: {}", format!("{err:#}").replace('\n', " ")),
    };
    text::line(&line).into_owned()
}
