//! `git-loop`, the command line: argv, output and exit codes over the library crate
//! (`src/lib.rs`), which cannot see this one.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
