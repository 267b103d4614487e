//! Hooks: what the loop does when an agent CLI or git calls back into it, and installing the
//! files of `hooks/` where the tools read them (docs/hooks.md).
//!
//! - `agent`: an agent CLI's end-of-turn and end-of-session events (Claude Code's hooks,
//!   Codex's notify program, any agent through the generic hook): record the CLI's own
//!   session id, commit the worktree, journal the event;
//! - `push`: the client-side `pre-push` policy (this clone pushes only what its holders hold);
//! - `receive`: the server-side `pre-receive` policy (claims change only as the protocol
//!   says, the loop's history is never rewritten, and nothing clients could not read gets in);
//! - `records`: what a push brings, read as clients will read it (its new commits, each loop
//!   record in them);
//! - `install`: install, uninstall and status of each hook, between markers;
//! - `json`: a JSON value that keeps key order, for editing settings files.
//!
//! Like the rest of the library this never prints: the CLI reports.

pub mod agent;
pub mod install;
pub mod json;
pub mod push;
pub mod receive;
pub mod records;
