//! The one integration-test binary: every module drives the real `git-loop` executable
//! against real repositories in a sealed environment (see `harness`), but `library`, which
//! calls the library crate (`git_loop`) directly.

mod agents_e2e;
mod backlog;
mod board;
mod claims;
mod cli_docs;
mod clocks;
mod confine;
mod conflicts;
mod cost;
mod crash;
mod doctor;
mod evidence;
mod explain;
mod fleet;
mod fleet_net;
mod harness;
mod help;
mod hooks;
mod hostile;
mod interrupt;
mod journal;
mod land;
mod library;
mod mission;
mod model_server;
mod next_claim;
mod packs;
mod people;
mod prune;
mod race;
mod receive;
mod remote;
mod resolve;
mod review;
mod robustness;
mod run;
mod scale;
mod setup_notify;
mod share;
mod soak;
mod suite;
mod summarize;
mod sync;
mod warm;
