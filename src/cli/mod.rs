//! The command line: argv to options, options to a library call, the outcome to human or
//! JSON output, and the exit code. The only code that knows clap, stdout/stderr, environment
//! variables and exit codes. One file per subcommand; groups are folders.

mod add;
mod answer;
mod board;
mod cancel;
mod claim;
mod completion;
mod config;
mod cost;
mod demo;
mod demo_agent;
mod doctor;
mod done;
mod edit;
mod env;
mod exit;
mod export;
mod finish;
mod gc;
mod hand_back;
mod hook;
mod hooks;
mod human;
mod import;
mod init;
mod inside;
mod journal;
mod land;
mod list;
mod log;
mod man;
mod mcp;
mod mission;
mod next;
mod output;
mod paint;
mod park;
mod prune;
mod race;
mod reassign;
mod remote_error;
mod reopen;
mod run;
mod serve;
pub mod session_guard;
mod show;
mod status;
mod stop;
mod sync;
mod take_over;
mod text;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};

use git_loop::error::find_refusal;

pub use env::Env;
use env::{confined_box_of, environment};
use output::print_error;

/// Run coding agents over a backlog kept in git refs: tasks, claims, completion and the
/// journal live in the repository, and clones coordinate through the shared remote.
#[derive(Parser)]
#[command(name = "git-loop", bin_name = "git loop", version, term_width = 100)]
#[command(after_help = "Start with 'git loop add \"Write the parser\"' and 'git loop next'. Docs: docs/cli.md")]
pub struct Cli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: Command,
}

/// The options every subcommand takes.
#[derive(clap::Args)]
struct Globals {
    /// Run as if started in this directory.
    #[arg(short = 'C', global = true, value_name = "DIR", id = "chdir")]
    dir: Option<PathBuf>,
    /// When to colour: auto (on a terminal, without NO_COLOR), always or never.
    #[arg(
        long,
        global = true,
        value_name = "WHEN",
        value_enum,
        default_value = "auto",
        hide_default_value = true,
        hide_possible_values = true
    )]
    color: paint::When,
}

/// Parse argv. The whole command tree (every subcommand, every option and its help text)
/// costs more to build than a claim costs to take, so a command line naming one of the
/// commands agents call in a loop is parsed against a tree holding that command alone (the
/// same definitions: the derived ones). Whatever that parse does not accept as it is (help, a
/// version, any error, another command) is parsed again against the whole tree, which says
/// it as it always has.
fn parse() -> Result<Cli, clap::Error> {
    parse_alone(std::env::args_os()).map_or_else(
        || {
            use clap::{CommandFactory, FromArgMatches};
            let color = paint::clap_choice(std::env::args_os().skip(1));
            Cli::command().color(color).try_get_matches().and_then(|m| Cli::from_arg_matches(&m))
        },
        Ok,
    )
}

fn parse_alone(args: impl IntoIterator<Item = std::ffi::OsString>) -> Option<Cli> {
    use clap::{Args as _, FromArgMatches as _, Subcommand as _};
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    // The command's name: the first argument after the global options.
    let mut rest = args.iter().skip(1);
    let name = loop {
        let arg = rest.next()?.to_str()?;
        match arg {
            "-C" => {
                rest.next()?;
            }
            _ if arg.starts_with("-C") => {}
            _ if arg.starts_with('-') => return None,
            _ => break arg,
        }
    };
    // As `#[derive(Subcommand)]` builds each of these in `Command`.
    let alone = match name {
        "claim" => claim::ClaimCommand::augment_subcommands(
            clap::Command::new("claim").subcommand_required(true).arg_required_else_help(true),
        ),
        "next" => next::NextArgs::augment_args(clap::Command::new("next")),
        _ => return None,
    };
    let tree = Globals::augment_args(clap::Command::new("git-loop").bin_name("git loop")).subcommand(alone);
    let matches = tree.try_get_matches_from(args).ok()?;
    Some(Cli { globals: Globals::from_arg_matches(&matches).ok()?, command: Command::from_arg_matches(&matches).ok()? })
}

#[derive(Subcommand)]
enum Command {
    Init(init::InitArgs),
    Add(add::AddArgs),
    Import(import::ImportArgs),
    Export(export::ExportArgs),
    Edit(edit::EditArgs),
    Show(show::ShowArgs),
    List(list::ListArgs),
    Next(next::NextArgs),
    #[command(subcommand)]
    Claim(claim::ClaimCommand),
    Done(done::DoneArgs),
    Park(park::ParkArgs),
    Reopen(reopen::ReopenArgs),
    Cancel(cancel::CancelArgs),
    Log(log::LogArgs),
    Cost(cost::CostArgs),
    #[command(subcommand)]
    Journal(journal::JournalCommand),
    Sync(sync::SyncArgs),
    Doctor(doctor::DoctorArgs),
    Run(run::RunArgs),
    Race(race::RaceArgs),
    Land(land::LandArgs),
    Prune(prune::PruneArgs),
    Gc(gc::GcArgs),
    Config(config::ConfigArgs),
    #[command(subcommand)]
    Mission(mission::MissionCommand),
    Finish(finish::FinishArgs),
    #[command(subcommand)]
    Hook(hook::HookCommand),
    #[command(subcommand)]
    Hooks(hooks::HooksCommand),
    Status(status::StatusArgs),
    Stop(stop::StopArgs),
    Reassign(reassign::ReassignArgs),
    TakeOver(take_over::TakeOverArgs),
    HandBack(hand_back::HandBackArgs),
    Board(board::BoardArgs),
    Serve(serve::ServeArgs),
    Mcp(mcp::McpArgs),
    Watch(watch::WatchArgs),
    Demo(demo::DemoArgs),
    Man(man::ManArgs),
    Completion(completion::CompletionArgs),
    #[command(hide = true)]
    DemoAgent(demo_agent::DemoAgentArgs),
    #[command(hide = true)]
    CompleteWords(completion::CompleteWordsArgs),
}

/// Parse argv, run the command, report any error, and return the exit code.
pub fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|first| first == session_guard::NAME) {
        // The guard handles its own signals.
        return match session_guard::run(args.skip(1)) {
            Ok(code) => ExitCode::from(code),
            Err(err) => report(err),
        };
    }
    if args.peek().is_some_and(|first| first == git_loop::sandbox::net::SUBCOMMAND) {
        // Inside a sandbox under `loop.sandbox.network = allow`: the bridge to its proxy.
        let rest: Vec<String> = args.skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
        return match git_loop::sandbox::net::bridge(&rest) {
            Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
            Err(err) => report(err),
        };
    }
    let cli = match parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { exit::USAGE } else { exit::OK };
            // A value our own parser refused (a priority, a duration) has a hint: its one line,
            // then the hint, as every other refusal is reported.
            let hint = std::error::Error::source(&err)
                .and_then(|e| e.downcast_ref::<git_loop::error::Refusal>())
                .and_then(|r| r.hint.clone());
            match hint {
                Some(hint) => {
                    let rendered = err.render().to_string();
                    output::stderr_line(rendered.lines().next().unwrap_or_default());
                    output::stderr_line(format!("hint: {hint}"));
                }
                None => {
                    let _ = err.print();
                }
            }
            return ExitCode::from(code);
        }
    };
    paint::init(cli.globals.color);
    match cli.command {
        // The first SIGINT/SIGTERM asks the walk to stop (sessions stopped, work committed);
        // one more, a while later, ends the process at once.
        Command::Run(_) | Command::Race(_) | Command::Demo(_) | Command::Land(_) => interrupt_gracefully(),
        // Likewise for a mission's commander: the first signal stops the running child walk.
        Command::Mission(ref cmd) if cmd.is_run() => interrupt_gracefully(),
        // The board polls the flag and quits, giving the terminal back.
        Command::Board(_) | Command::Serve(_) => interrupt_gracefully(),
        // A sync stops its transfer at once (its process group killed) and says how far it got.
        Command::Sync(_) => {
            interrupt_gracefully();
            git_loop::git::program::stop_transfers_on_interrupt();
        }
        // Delete in-flight lock files on SIGINT/SIGTERM, then die as the signal says.
        _ => {
            let _ = gix::interrupt::init_handler_default(0);
        }
    }
    arm_failpoint();
    let mut env = match environment(cli.globals.dir) {
        Ok(env) => env,
        Err(err) => return report(err),
    };
    if env.ctx.session.confined.is_none() {
        env.ctx.session.confined = confined_box_of(&env.cwd);
    }
    if env.ctx.session.session.is_some() || env.ctx.session.confined.is_some() {
        match inside::judge(&env, &cli.command) {
            inside::May::Run => {}
            inside::May::Read if env.ctx.session.confined.is_none() => {}
            may => return report(inside::refuse(&env, may)),
        }
    }
    env.exits_soon = !matches!(
        cli.command,
        Command::Run(_) | Command::Race(_) | Command::Demo(_) | Command::Mission(_) | Command::Land(_)
    );
    let publishes = !matches!(
        cli.command,
        Command::Sync(_)
            | Command::Run(_)
            | Command::Race(_)
            | Command::Demo(_)
            | Command::Mission(_)
            | Command::Land(_)
    );
    let outcome = match cli.command {
        Command::Init(args) => init::run(&env, args),
        Command::Add(args) => add::run(&env, args),
        Command::Import(args) => import::run(&env, args),
        Command::Export(args) => export::run(&env, args),
        Command::Edit(args) => edit::run(&env, args),
        Command::Show(args) => show::run(&env, args),
        Command::List(args) => list::run(&env, args),
        Command::Next(args) => next::run(&env, args),
        Command::Claim(cmd) => claim::run(&env, cmd),
        Command::Done(args) => done::run(&env, args),
        Command::Park(args) => park::run(&env, args),
        Command::Reopen(args) => reopen::run(&env, args),
        Command::Cancel(args) => cancel::run(&env, args),
        Command::Log(args) => log::run(&env, args),
        Command::Cost(args) => cost::run(&env, args),
        Command::Journal(cmd) => journal::run(&env, cmd),
        Command::Sync(args) => sync::run(&env, args),
        Command::Doctor(args) => doctor::run(&env, args),
        Command::Run(args) => run::run(&env, args),
        Command::Race(args) => race::run(&env, args),
        Command::Land(args) => land::run(&env, args),
        Command::Prune(args) => prune::run(&env, args),
        Command::Gc(args) => gc::run(&env, args),
        Command::Config(args) => config::run(&env, args),
        Command::Mission(cmd) => mission::run(&env, cmd),
        Command::Finish(args) => finish::run(&env, args),
        Command::Hook(cmd) => hook::run(&env, cmd),
        Command::Hooks(cmd) => hooks::run(&env, cmd),
        Command::Status(args) => status::run(&env, args),
        Command::Stop(args) => stop::run(&env, args),
        Command::Reassign(args) => reassign::run(&env, args),
        Command::TakeOver(args) => take_over::run(&env, args),
        Command::HandBack(args) => hand_back::run(&env, args),
        Command::Board(args) => board::run(&env, args),
        Command::Serve(args) => serve::run(&env, args),
        Command::Mcp(args) => mcp::run(&env, args),
        Command::Watch(args) => watch::run(&env, args),
        Command::Demo(args) => demo::run(&env, args),
        Command::Man(args) => man::run(&env, args),
        Command::Completion(args) => completion::run(args),
        Command::DemoAgent(args) => demo_agent::run(&env, args),
        Command::CompleteWords(args) => completion::run_words(&env, args),
    };
    // Walks and syncs exchange with the remote themselves; everything else publishes what it
    // changed, whether it succeeded or not (what it wrote is this clone's state either way).
    if publishes {
        env.publish();
    }
    let code = match outcome {
        Ok(code) => ExitCode::from(code),
        Err(err) => report(err),
    };
    env.maintain();
    code
}

/// Signals this close to the first one of an interruption belong to it. One Ctrl-C in a
/// terminal reaches `git-loop` twice when it runs as `git loop`: the terminal signals its whole
/// foreground process group (git's wrapper and us), and the wrapper forwards the signal to its
/// child again, well within a millisecond of the first.
const SAME_INTERRUPTION: Duration = Duration::from_secs(1);

/// When the current interruption's first signal arrived (CLOCK_MONOTONIC, in nanoseconds;
/// 0: none yet).
static INTERRUPTED_AT_NS: AtomicU64 = AtomicU64::new(0);

/// SIGINT, SIGTERM, SIGQUIT and SIGHUP ask the walk to stop (`gix::interrupt::is_triggered`,
/// which it polls); signals within `SAME_INTERRUPTION` of the first count as that one, and one
/// after it ends the process at once (exit 130), after deleting in-flight lock files.
fn interrupt_gracefully() {
    // gix ends the process itself once `grace_count` signals have arrived, before it calls
    // us: with a count no process ever reaches, the decision is `on_interrupt`'s alone.
    // SAFETY: `on_interrupt` does only async-signal-safe work (atomics, clock_gettime, gix's
    // signal-safe lock file cleanup, write and _exit).
    let _ = unsafe { gix::interrupt::init_handler(usize::MAX, on_interrupt) };
}

/// Runs in a signal handler, before gix sets its interrupt flag: no allocation, no locks.
fn on_interrupt() {
    let now = monotonic_ns();
    let first = INTERRUPTED_AT_NS.load(Ordering::SeqCst);
    // A handler running on another thread at the same moment may see the flag still unset
    // and also take its signal for the first: the same interruption either way.
    if first == 0 || !gix::interrupt::is_triggered() {
        INTERRUPTED_AT_NS.store(now, Ordering::SeqCst);
        return;
    }
    if now.saturating_sub(first) < SAME_INTERRUPTION.as_nanos() as u64 {
        return;
    }
    gix::tempfile::registry::cleanup_tempfiles_signal_safe();
    let message = b"error: interrupted again: exited at once, without waiting for the sessions to stop\n\
                    hint: the next 'git loop run' commits what they left to their try branches\n";
    // SAFETY: write and _exit are async-signal-safe; the buffer is a static byte string.
    unsafe {
        libc::write(libc::STDERR_FILENO, message.as_ptr().cast(), message.len());
        libc::_exit(130);
    }
}

/// CLOCK_MONOTONIC in nanoseconds (never 0), from a signal handler.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime is async-signal-safe and writes only to `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64).max(1)
}

/// Print an error as one `error:` line (and a `hint:` line when there is one) and pick the
/// exit code from its class. A closed stdout (`| head`) is not an error.
fn report(err: anyhow::Error) -> ExitCode {
    if err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    }) {
        return ExitCode::SUCCESS;
    }
    print_error("error", &err);
    ExitCode::from(exit::of_error(find_refusal(&err)))
}

/// Crash tests (debug builds): `GIT_LOOP_KILL_AT=<command>:<n>` kills this process at its n-th
/// write when it runs `<command>` (see `failpoint`); the processes it starts run other commands,
/// and are not armed.
fn arm_failpoint() {
    let Ok(spec) = std::env::var("GIT_LOOP_KILL_AT") else { return };
    let Some((name, at)) = spec.split_once(':') else { return };
    // The command's name: the first argument that is not an option (nor `-C`'s directory).
    let mut args = std::env::args().skip(1);
    let mut command = None;
    while let Some(arg) = args.next() {
        if arg == "-C" {
            args.next();
        } else if !arg.starts_with('-') {
            command = Some(arg);
            break;
        }
    }
    if command.as_deref() == Some(name) {
        if let Ok(at) = at.parse() {
            git_loop::failpoint::arm(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// The commands parsed against a tree of their own are parsed as the whole tree parses
    /// them; whatever that tree alone does not accept as it is goes to the whole tree.
    #[test]
    fn a_command_parsed_alone_is_parsed_as_the_whole_tree_parses_it() {
        use clap::Parser as _;
        let argv = |line: &str| -> Vec<std::ffi::OsString> {
            std::iter::once("git-loop").chain(line.split(' ')).map(Into::into).collect()
        };
        let name = |cli: &super::Cli| match &cli.command {
            super::Command::Claim(super::claim::ClaimCommand::Acquire(_)) => "claim acquire",
            super::Command::Claim(super::claim::ClaimCommand::Release(_)) => "claim release",
            super::Command::Claim(super::claim::ClaimCommand::List(_)) => "claim list",
            super::Command::Next(_) => "next",
            _ => "another",
        };
        for line in [
            "claim acquire node:t-1 --holder a --ttl 2h --reason why --json",
            "-C /tmp claim acquire bench:b1 --holder a",
            "claim -C /tmp release node:t-1 --holder a",
            "claim list --json",
            "next --claim --holder agent-1 --json",
            "-C/tmp next",
        ] {
            let whole = super::Cli::try_parse_from(argv(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
            let alone = super::parse_alone(argv(line)).unwrap_or_else(|| panic!("{line}: not parsed alone"));
            assert_eq!((name(&alone), &alone.globals.dir), (name(&whole), &whole.globals.dir), "{line}");
        }
        for line in [
            "claim",
            "claim acquire",
            "claim acquire nokind --holder a",
            "claim acquire node:t-1 --ttl soon",
            "claim acquire node:t-1 --bogus",
            "claim acquire --help",
            "claim help acquire",
            "next --help",
            "--version",
            "-C",
            "list --json",
        ] {
            assert!(super::parse_alone(argv(line)).is_none(), "{line}: left to the whole tree");
        }
    }
}
