//! `git-loop`: runs autonomous coding agents over a backlog whose whole state — tasks, claims,
//! completion, the journal — lives in the repository as refs and notes.
//!
//! The layers point one way: `cli` (argv, output, exit codes) calls the library verbs in
//! `backlog`, which call `store` (the only writer of refs and objects), which calls `git`
//! (gix helpers, and the one module that runs the `git` program).

mod backlog;
mod cli;
mod context;
mod doctor;
mod error;
mod failpoint;
mod git;
mod hooks;
mod ids;
mod mission;
mod people;
mod refs;
mod runloop;
mod session;
mod store;
mod tries;
mod walk;

fn main() -> std::process::ExitCode {
    cli::main()
}
