//! Running a try's checks — and the review, a command of the same kind — in the try's
//! worktree (or the landing queue's, on a merged result), under the session guard (so nothing
//! it starts outlives the process that asked), to its end or the configured timeout
//! (`--checks-timeout`, `loop.checksTimeout`). The one way the walk, a person's
//! `hand-back --keep` and the landing queue run them.
//!
//! They run code an agent wrote, so with a sandbox they run confined as a session does (see
//! `sandbox`), in a room of their own under `.git/loop/rooms/`: the worktree writable, a home
//! and a `/tmp` of their own, a private git directory, the repository's state out of reach.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::agent::guard;
use crate::agent::process::Exit;
use crate::ids::random_base32;
use crate::sandbox::{self, Sandbox};
use crate::store::Store;

/// Who runs the commands, and for how long.
pub struct Runner<'r> {
    /// This program, which runs the guard.
    pub exe: &'r Path,
    /// The process the guard watches: it stops the command if that one dies.
    pub parent: u32,
    /// Between SIGTERM and SIGKILL when the command is stopped.
    pub grace: Duration,
    /// How long the command may run.
    pub timeout: Duration,
    /// Asked while the command runs: true stops it.
    pub cancelled: &'r dyn Fn() -> bool,
    /// Where the command runs confined (none: unconfined, as the walk decided).
    pub sandbox: Option<&'r Sandbox>,
}

/// How one run went.
pub struct Ran {
    /// Exited with 0.
    pub passed: bool,
    /// How it ended (`None`: it had to be stopped and would not say).
    pub exit: Option<Exit>,
    pub elapsed: Duration,
    /// Its output.
    pub log: PathBuf,
}

impl Ran {
    /// The checks' verdict as evidence (a completion note's `checks`).
    pub fn evidence(&self, command: &str) -> serde_json::Value {
        serde_json::json!({
            "command": command,
            "passed": self.passed,
            "exit": self.exit.map(|e| e.to_string()),
            "elapsed_ms": self.elapsed.as_millis() as u64,
            "log": self.log.display().to_string(),
        })
    }
}

/// Run `sh -c command` (its kind: `name`, e.g. `checks`) in `cwd` (a try's worktree, or the
/// landing worktree) with `env`, its output to `log`.
pub fn run(
    store: &Store,
    runner: &Runner<'_>,
    name: &str,
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
    log: &Path,
) -> Result<Ran> {
    run_fed(store, runner, name, command, cwd, env, log, None)
}

/// [`run`], the command reading `stdin` (a file) on its standard input.
#[allow(clippy::too_many_arguments)]
pub fn run_fed(
    store: &Store,
    runner: &Runner<'_>,
    name: &str,
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
    log: &Path,
    stdin: Option<PathBuf>,
) -> Result<Ran> {
    let started = Instant::now();
    let marker = format!("{name}-{}", random_base32(12));
    let mut program = "sh".to_owned();
    let mut args = vec!["-c".to_owned(), command.to_owned()];
    let mut env = env.to_vec();
    env.extend(super::warm::own_build_dirs(cwd));
    let room = match runner.sandbox {
        Some(sandbox) => {
            let room = store.layout()?.room(&marker);
            let prepared = sandbox.prepare(
                store,
                &sandbox::Request {
                    worktree: cwd,
                    cwd,
                    room: &room,
                    readable: &[],
                    agent: None,
                    program: "sh",
                    command_line: command,
                    context: &[],
                    author: name,
                    network: &[],
                },
            )?;
            let mut confined = prepared.args;
            confined.push(program);
            confined.append(&mut args);
            (program, args) = (prepared.program, confined);
            env.extend(prepared.env);
            Some((room, prepared.net))
        }
        None => None,
    };
    let spawned = guard::spawn(&guard::Guarded {
        exe: runner.exe,
        parent: runner.parent,
        grace: runner.grace,
        program: &program,
        args: &args,
        cwd,
        env: &env,
        stdin,
        log,
        marker: &marker,
        confined: room.is_some(),
        net: room.as_ref().and_then(|(_, net)| net.as_deref()),
    });
    let exit =
        spawned.and_then(|mut running| guard::finish(&mut running, runner.timeout, runner.grace, runner.cancelled));
    if let Some((room, _)) = &room {
        let _ = std::fs::remove_dir_all(room);
    }
    let exit = exit?;
    Ok(Ran { passed: exit == Some(Exit::Code(0)), exit, elapsed: started.elapsed(), log: log.to_owned() })
}
