//! The exit status, decided once, from the outcome: every code the command line exits with
//! is named here and documented in docs/cli.md ("Exit codes"); commands return one of these,
//! and an error's code comes from its refusal's class.

use git_loop::error::{Class, Refusal};
use git_loop::{engine, mission};

/// Success; for `run`, no work left or `--max-units` reached.
pub const OK: u8 = 0;
/// Refused or failed: held by someone else, a budget spent, a git or I/O failure.
pub const FAILED: u8 = 1;
/// Bad input or configuration.
pub const USAGE: u8 = 2;
/// A corrupt record, or a singleton (walker, commander) held by another process.
pub const CORRUPT_OR_BUSY: u8 = 3;
/// Paused by the walk's policy, or a mission's project failed.
pub const PAUSED: u8 = 4;
/// The agent's program is not installed, or runs cannot be confined as required.
pub const AGENT_MISSING: u8 = 77;
/// Interrupted (a signal, `stop --all`), or a mission cancelled.
pub const INTERRUPTED: u8 = 130;

/// The code of a refusal's class.
pub fn of_class(class: Class) -> u8 {
    match class {
        Class::Usage => USAGE,
        Class::Refused | Class::Failure => FAILED,
        Class::Corrupt | Class::Busy => CORRUPT_OR_BUSY,
        Class::AgentMissing | Class::SandboxMissing => AGENT_MISSING,
        Class::Interrupted => INTERRUPTED,
    }
}

/// The code of an error: its refusal's class, wherever it is in the chain; else a failure.
pub fn of_error(refusal: Option<&Refusal>) -> u8 {
    refusal.map_or(FAILED, |refusal| of_class(refusal.class))
}

/// The code of how a walk stopped.
pub fn of_walk(stop: &engine::Stop) -> u8 {
    match stop {
        engine::Stop::NoWork | engine::Stop::Done => OK,
        engine::Stop::UnitLimit | engine::Stop::Budget | engine::Stop::Failed => FAILED,
        engine::Stop::Paused { .. } => PAUSED,
        engine::Stop::Interrupted => INTERRUPTED,
    }
}

/// The code of how a walk ended: how it stopped, and a walk that would have ended well is a
/// failure when it could not land done work it was asked to land (`run --land`).
pub fn of_walk_end(stop: &engine::Stop, unlanded: &[String]) -> u8 {
    match of_walk(stop) {
        OK if !unlanded.is_empty() => FAILED,
        code => code,
    }
}

/// The code of how a mission run stopped.
pub fn of_mission(stop: &mission::Stop) -> u8 {
    match stop {
        mission::Stop::Complete => OK,
        mission::Stop::Budget { .. } => FAILED,
        mission::Stop::Paused { .. } => PAUSED,
        mission::Stop::Interrupted | mission::Stop::Cancelled { .. } => INTERRUPTED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in docs/cli.md lists exactly these codes.
    #[test]
    fn every_code_is_documented() {
        let doc = include_str!("../../docs/cli.md");
        let table = doc.split("## Exit codes").nth(1).and_then(|rest| rest.split("\n## ").next()).expect("the table");
        for code in [OK, FAILED, USAGE, CORRUPT_OR_BUSY, PAUSED, AGENT_MISSING, INTERRUPTED] {
            assert!(table.contains(&format!("\n| {code} |")), "exit code {code} is in docs/cli.md's table");
        }
    }
}
