//! Two things decided at build time.
//!
//! Link the `git-loop` binary as a position-dependent executable on x86-64 Linux. The code
//! stays position-independent, but the loader no longer has to patch ~17,000 relocations at
//! every start: about 70 fewer page faults and 0.3-0.5 ms per run, for a command that agents
//! call many times a minute (docs/performance.md). Only the binary gets the flag; proc-macros
//! and other shared objects would not link with it.
//!
//! Which agent CLIs are on PATH: `has_claude`, `has_codex`, `has_opencode`, `has_gemini`. The
//! end-to-end tests that drive a CLI are `#[ignore]`d without it, so `cargo test` lists them as
//! ignored with the reason (libtest has no way to skip at run time) instead of passing them
//! silently. With `CI` set every one is on: CI must run them, and a missing CLI fails them.

use std::path::Path;

const CLIS: [&str; 4] = ["claude", "codex", "opencode", "gemini"];

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os == "linux" && arch == "x86_64" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo:rerun-if-env-changed=CI");
    let ci = std::env::var_os("CI").is_some();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for cli in CLIS {
        println!("cargo::rustc-check-cfg=cfg(has_{cli})");
        if ci || std::env::split_paths(&path).any(|dir| on(&dir.join(cli))) {
            println!("cargo:rustc-cfg=has_{cli}");
        }
    }
}

/// Whether `program` is a file (what a shell's PATH search would run).
fn on(program: &Path) -> bool {
    program.is_file()
}
