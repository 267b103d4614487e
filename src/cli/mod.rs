//! The command line: argv to options, options to a library call, the outcome to human or
//! JSON output, and the exit code. The only code that knows clap, stdout/stderr, environment
//! variables and exit codes. One file per subcommand; groups are folders.

mod add;
mod cancel;
mod claim;
mod demo;
mod demo_agent;
mod done;
mod edit;
mod finish;
mod hand_back;
mod hook;
mod hooks;
mod human;
mod import;
mod init;
mod journal;
mod list;
mod log;
mod mission;
mod next;
mod output;
mod park;
mod race;
mod reassign;
mod reopen;
mod run;
pub mod session_guard;
mod show;
mod status;
mod stop;
mod sync;
mod take_over;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::context::{Clock, Context, GitIdentityEnv, SessionEnv};
use crate::error::find_refusal;
use crate::store::Store;

/// Run coding agents over a backlog kept in git refs: tasks, claims, completion and the
/// journal live in the repository, and clones coordinate through the shared remote.
#[derive(Parser)]
#[command(name = "git-loop", bin_name = "git loop", version, term_width = 100)]
#[command(after_help = "Start with 'git loop add \"Write the parser\"' and 'git loop next'. Docs: docs/cli.md")]
pub struct Cli {
    /// Run as if started in this directory.
    #[arg(short = 'C', global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Init(init::InitArgs),
    Add(add::AddArgs),
    Import(import::ImportArgs),
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
    #[command(subcommand)]
    Journal(journal::JournalCommand),
    Sync(sync::SyncArgs),
    Run(run::RunArgs),
    Race(race::RaceArgs),
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
    Demo(demo::DemoArgs),
    #[command(hide = true)]
    DemoAgent(demo_agent::DemoAgentArgs),
}

/// What every command gets: the ambient context and where it runs.
pub struct Env {
    pub ctx: Context,
    pub cwd: PathBuf,
    /// This program, for the session guard and the demo agent.
    pub exe: PathBuf,
    /// The common directory of the repository the command opened: its objects are looked
    /// after when the command ends.
    opened: std::sync::OnceLock<PathBuf>,
}

impl Env {
    pub fn open(&self) -> Result<Store> {
        let store = Store::open(&self.ctx, &self.cwd)?;
        let _ = self.opened.set(store.repo.common_dir().to_owned());
        Ok(store)
    }

    /// Consolidate the packs and loose objects of the repository the command worked in, if
    /// they have grown (otherwise this is a directory listing). Called once the command's
    /// outcome is out, so it never delays a claim or a fetch; a failure is only a warning.
    fn maintain(&self) {
        let Some(git_dir) = self.opened.get() else { return };
        if let Err(err) = crate::store::maintenance::auto(git_dir) {
            print_error("warning", &err);
        }
    }
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { 2 } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        // The first SIGINT/SIGTERM asks the walk to stop (sessions stopped, work committed);
        // a second one ends the process after deleting in-flight lock files.
        Command::Run(_) | Command::Race(_) | Command::Demo(_) => {
            let _ = gix::interrupt::init_handler_default(1);
        }
        // Likewise for a mission's commander: the first signal stops the running child walk.
        Command::Mission(ref cmd) if cmd.is_run() => {
            let _ = gix::interrupt::init_handler_default(1);
        }
        // Delete in-flight lock files on SIGINT/SIGTERM, then die as the signal says.
        _ => {
            let _ = gix::interrupt::init_handler_default(0);
        }
    }
    let env = match environment(cli.dir) {
        Ok(env) => env,
        Err(err) => return report(err),
    };
    let outcome = match cli.command {
        Command::Init(args) => init::run(&env, args),
        Command::Add(args) => add::run(&env, args),
        Command::Import(args) => import::run(&env, args),
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
        Command::Journal(cmd) => journal::run(&env, cmd),
        Command::Sync(args) => sync::run(&env, args),
        Command::Run(args) => run::run(&env, args),
        Command::Race(args) => race::run(&env, args),
        Command::Mission(cmd) => mission::run(&env, cmd),
        Command::Finish(args) => finish::run(&env, args),
        Command::Hook(cmd) => hook::run(&env, cmd),
        Command::Hooks(cmd) => hooks::run(&env, cmd),
        Command::Status(args) => status::run(&env, args),
        Command::Stop(args) => stop::run(&env, args),
        Command::Reassign(args) => reassign::run(&env, args),
        Command::TakeOver(args) => take_over::run(&env, args),
        Command::HandBack(args) => hand_back::run(&env, args),
        Command::Demo(args) => demo::run(&env, args),
        Command::DemoAgent(args) => demo_agent::run(&env, args),
    };
    let code = match outcome {
        Ok(code) => ExitCode::from(code),
        Err(err) => report(err),
    };
    env.maintain();
    code
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
    ExitCode::from(find_refusal(&err).map_or(1, |refusal| refusal.class.exit_code()))
}

/// Print an error on one `<level>:` line, with a `hint:` line when it has one.
fn print_error(level: &str, err: &anyhow::Error) {
    match find_refusal(err) {
        Some(refusal) => {
            eprintln!("{level}: {}", refusal.message);
            if let Some(hint) = &refusal.hint {
                eprintln!("hint: {hint}");
            }
        }
        None => eprintln!("{level}: {}", format!("{err:#}").replace('\n', " ")),
    }
}

/// Build the context from the process environment. `GIT_LOOP_NOW` pins the clock (tests and
/// reproducible demos).
fn environment(dir: Option<PathBuf>) -> Result<Env> {
    let clock = match std::env::var("GIT_LOOP_NOW") {
        Ok(text) if !text.is_empty() => {
            let at = chrono::DateTime::parse_from_rfc3339(&text).map_err(|_| {
                crate::error::usage(format!("GIT_LOOP_NOW '{text}' is not an RFC 3339 time"))
                    .hint("e.g. GIT_LOOP_NOW=2026-01-02T03:04:05Z, or unset it")
            })?;
            Clock::Fixed(at.with_timezone(&chrono::Utc))
        }
        _ => Clock::System,
    };
    let read = |path: &str| std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_default();
    let host = Some(read("/proc/sys/kernel/hostname"))
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let ctx = Context {
        clock,
        host,
        pid: std::process::id(),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        session: SessionEnv {
            session: var("GIT_LOOP_SESSION"),
            task: var("GIT_LOOP_TASK"),
            try_number: var("GIT_LOOP_TRY").and_then(|t| t.parse().ok()),
        },
        git_identity: GitIdentityEnv {
            name: var("GIT_COMMITTER_NAME"),
            email: var("GIT_COMMITTER_EMAIL"),
            fallback_email: var("EMAIL"),
        },
        path_var: std::env::var_os("PATH"),
    };
    let cwd = std::env::current_dir().map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}"))?;
    let cwd = match dir {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => cwd.join(dir),
        None => cwd,
    };
    let exe = std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find this program's own path: {e}"))?;
    Ok(Env { ctx, cwd, exe, opened: Default::default() })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
