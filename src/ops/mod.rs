//! The porcelain: the verbs a person (or the command line, or a server) calls, one file per
//! verb, each taking typed flags and returning outcomes; nothing here prints or decides an exit
//! code. [`config`] decides, once for every setting a flag can also give, which value wins.
//!
//! Below it: `walk`, `mission`, `landing` and the rest; above it only the command
//! line (`src/cli/`), which parses arguments, renders outcomes and maps them to exit codes.

pub mod answer;
pub mod config;
pub mod finish;
pub mod land;
pub mod people;
pub mod run;
pub mod show;
pub mod status;
