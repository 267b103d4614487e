//! `git-loop`, the library: runs autonomous coding agents over a backlog whose whole state —
//! tasks, claims, completion, the journal — lives in the repository as refs and notes.
//!
//! The command line (`src/main.rs` and `src/cli/`) is a separate crate target built on this
//! one, so nothing here can reach it: no module below prints, reads the process environment
//! or decides an exit code. The layers, from the top (docs/architecture.md draws them, and
//! says which module may import which):
//!
//! - `ops` (the porcelain: one file per verb, typed flags in, outcomes out; `ops::config`
//!   decides which value of a setting wins);
//! - `walk` (the loop over a backlog), `mission`,
//!   `prune` (deleting the branches of finished tasks), `hooks` (what git and the agent CLIs
//!   call back into);
//! - `landing` (the merge queue: done task branches onto a target, checked on the merged
//!   result);
//! - `tries` (one try's lifecycle), `backlog` (the task verbs), `agent` (one agent process:
//!   presets, wiring, the guard, supervision, records), `sandbox` (the confinement every
//!   session and check runs in);
//! - `store` (the only writer of refs, objects and the files under `.git/loop/`);
//! - `git` (gix helpers, and the one module that runs the `git` program), `refs` (every ref
//!   name), `ids`;
//! - `engine` (a run's control flow behind traits: the walk's and missions'), `context`, `error`, `failpoint`.

pub mod agent;
pub mod backlog;
pub mod context;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod failpoint;
pub mod forge;
pub mod git;
pub mod hooks;
pub mod ids;
pub mod landing;
pub mod mission;
pub mod ops;
pub mod prune;
pub mod refs;
pub mod sandbox;
pub mod store;
pub mod tries;
pub mod walk;
