//! `git-loop session-guard` (internal): the process between a walk and an agent. See
//! `session::guard`.
//!
//! It starts once per session, so it is told apart before the command line is parsed for
//! people (building that parser costs more than the guard's own work) and reads its few
//! arguments itself: `--parent <pid> --grace-ms <ms> --log <path> [--stdin <path>]
//! [--confined] [--net <dir>] -- <program> [<arg>…]` (`--confined`: the program is bubblewrap;
//! `--net`: serve the run's filtering proxy from that directory while it runs).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result};

use git_loop::agent::process::{Spec, MARKER_VAR};
use git_loop::error::usage;

/// The subcommand's name, as the walk passes it.
pub use git_loop::agent::guard::SUBCOMMAND as NAME;

struct GuardArgs {
    parent: u32,
    grace: Duration,
    log: PathBuf,
    stdin: Option<PathBuf>,
    /// The command is bubblewrap confining the agent.
    confined: bool,
    /// The directory of the run's network policy, whose proxy the guard serves.
    net: Option<PathBuf>,
    command: Vec<OsString>,
}

fn parse(mut args: impl Iterator<Item = OsString>) -> Result<GuardArgs> {
    let (mut parent, mut grace, mut log, mut stdin, mut net) = (None, Duration::from_secs(10), None, None, None);
    let mut confined = false;
    loop {
        let flag = args.next().ok_or_else(|| usage("session-guard: no command after '--'"))?;
        if flag == "--" {
            break;
        }
        if flag == "--confined" {
            confined = true;
            continue;
        }
        let value = args.next().ok_or_else(|| usage(format!("session-guard: {} takes a value", flag.display())))?;
        let number = || -> Result<u64> {
            value.to_str().and_then(|v| v.parse().ok()).ok_or_else(|| usage("session-guard: not a number").into())
        };
        match flag.to_str() {
            Some("--parent") => parent = Some(number()? as u32),
            Some("--grace-ms") => grace = Duration::from_millis(number()?),
            Some("--log") => log = Some(PathBuf::from(value)),
            Some("--stdin") => stdin = Some(PathBuf::from(value)),
            Some("--net") => net = Some(PathBuf::from(value)),
            _ => return Err(usage(format!("session-guard: unknown option {}", flag.display())).into()),
        }
    }
    let command: Vec<OsString> = args.collect();
    anyhow::ensure!(!command.is_empty(), usage("session-guard: no command after '--'"));
    Ok(GuardArgs {
        parent: parent.ok_or_else(|| usage("session-guard: --parent is required"))?,
        grace,
        log: log.ok_or_else(|| usage("session-guard: --log is required"))?,
        stdin,
        confined,
        net,
        command,
    })
}

/// Run the guard with the arguments after its name; returns the agent's exit code.
pub fn run(args: impl Iterator<Item = OsString>) -> Result<u8> {
    let args = parse(args)?;
    let text = |s: &OsString| s.to_str().map(str::to_owned).context("session-guard: an argument is not UTF-8");
    let program = text(&args.command[0])?;
    let rest = args.command[1..].iter().map(text).collect::<Result<Vec<_>>>()?;
    let spec = Spec {
        program,
        args: rest,
        cwd: std::env::current_dir().context("cannot read the current directory")?,
        env: Vec::new(),
        stdin: args.stdin,
        log: args.log,
        marker: std::env::var(MARKER_VAR).unwrap_or_default(),
        confined: args.confined,
    };
    // Served until the guard ends, which is after the command and everything it started.
    let _proxy = match &args.net {
        Some(dir) => Some(git_loop::sandbox::net::Proxy::start(dir, &spec.log)?),
        None => None,
    };
    let code = git_loop::agent::guard::run(args.parent, args.grace, &spec)?;
    Ok(code.clamp(0, 255) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> impl Iterator<Item = OsString> {
        list.iter().map(OsString::from).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn the_guard_reads_its_own_arguments_and_refuses_what_it_does_not_know() {
        let parsed = parse(args(&["--parent", "7", "--grace-ms", "250", "--log", "/l", "--", "sh", "-c", "--x"]))
            .expect("parse");
        assert_eq!((parsed.parent, parsed.grace, parsed.stdin), (7, Duration::from_millis(250), None));
        assert_eq!(parsed.command, vec!["sh", "-c", "--x"]);
        for bad in [
            &["--parent", "7", "--log", "/l"][..],
            &["--parent", "x", "--log", "/l", "--", "sh"],
            &["--log", "/l", "--", "sh"],
            &["--parent", "7", "--log", "/l", "--"],
            &["--what", "7", "--", "sh"],
        ] {
            assert!(parse(args(bad)).is_err(), "{bad:?} is refused");
        }
    }
}
