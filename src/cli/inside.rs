//! What `git loop` does when a session runs it (`$GIT_LOOP_SESSION` is set): a session speaks
//! only for its own task and role, through `git loop finish` and its CLI's hooks. Anything that
//! would change the loop's records itself — `done`, `park`, `edit`, a claim, a walk — is
//! refused (exit 2), whatever task it names, and journaled as an `agent_overreach` with what was
//! tried: in a confined session through its box (the walk journals it), else in the session's
//! journal chain directly. The task it named is unchanged.
//!
//! Commands that only read run in an unconfined session as anywhere; a confined one cannot see
//! the repository's loop state at all, so they are refused there too (without an overreach:
//! reading is no harm), saying where its task is described.

use super::env::Env;
use super::{claim, hooks, mission, Command};
use git_loop::error::usage;
use git_loop::sandbox::channel::{self, Report};

/// What a session may do with a command.
pub(super) enum May {
    /// Its own commands: `finish`, the agent hooks, help.
    Run,
    /// Reads only.
    Read,
    /// Writes the loop's records: never from inside a session.
    Refuse,
}

/// What a session may do with `cmd`.
pub(super) fn judge(env: &Env, cmd: &Command) -> May {
    match cmd {
        Command::Journal(super::journal::JournalCommand::Append(args)) if args.speaks_for_itself(env) => May::Run,
        // Each of its tools runs the command of its name, judged as that command.
        Command::Finish(_)
        | Command::Hook(_)
        | Command::Man(_)
        | Command::Completion(_)
        | Command::DemoAgent(_)
        | Command::Mcp(_) => May::Run,
        Command::Show(_)
        | Command::List(_)
        | Command::Log(_)
        | Command::Cost(_)
        | Command::Status(_)
        | Command::Watch(_)
        | Command::Board(_) => May::Read,
        Command::Next(args) if !args.claims() => May::Read,
        Command::Doctor(args) if !args.repairs() => May::Read,
        Command::Claim(claim::ClaimCommand::List(_)) => May::Read,
        Command::Mission(mission::MissionCommand::Show(_) | mission::MissionCommand::List(_)) => May::Read,
        Command::Hooks(hooks::HooksCommand::Status(_)) => May::Read,
        _ => May::Refuse,
    }
}

/// The command's words and the task (or claim) it names, from the process's arguments: the
/// first word that is no option after the command's name (and a group's subcommand).
fn what_was_tried() -> (String, Option<String>, Vec<String>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut words = args.iter().peekable();
    let mut command = Vec::new();
    while let Some(word) = words.next() {
        if word == "-C" || word == "--color" {
            words.next();
        } else if word.starts_with('-') {
            continue;
        } else {
            command.push(word.clone());
            if !matches!(word.as_str(), "claim" | "mission" | "hooks" | "journal" | "hook") {
                break;
            }
        }
    }
    let target = words.find(|w| !w.starts_with('-')).cloned();
    (command.join(" "), target, args)
}

/// Refuse `cmd`'s run inside a session, recording the overreach: the error to exit with.
pub(super) fn refuse(env: &Env, may: May) -> anyhow::Error {
    let session = env.ctx.session.session.clone().unwrap_or_default();
    let (command, target, argv) = what_was_tried();
    if let May::Read = may {
        return usage(format!(
            "'git loop {command}' cannot run inside a confined session: the repository's loop state is out of its reach"
        ))
        .hint("your task is described in $GIT_LOOP_PROMPT; report with 'git loop finish done|blocked|failed --message \"…\"'")
        .into();
    }
    let recorded = match &env.ctx.session.confined {
        Some(box_dir) => {
            channel::write(box_dir, &Report::Overreach { command: command.clone(), target: target.clone(), argv })
        }
        None => env.open().and_then(|store| {
            git_loop::hooks::agent::journal_overreach(&store, &env.ctx, &session, &command, target.clone(), argv)
        }),
    };
    let on = target.as_deref().map(|t| format!(" on {t}")).unwrap_or_default();
    let mut refusal = usage(format!(
        "inside session {session}, 'git loop {command}'{on} is refused: a session speaks only for its own task, through 'git loop finish'"
    ))
    .hint("report your verdict with 'git loop finish done|blocked|failed --message \"…\"'; ask for more work in the result file's follow_ups");
    if let Err(err) = recorded {
        let said = refusal.hint.clone().unwrap_or_default();
        refusal = refusal.hint(format!("{said} (the refusal could not be recorded: {err:#})"));
    }
    refusal.into()
}
