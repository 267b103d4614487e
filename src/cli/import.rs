//! `git loop import`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::backlog::import::{self, Format};
use git_loop::error::usage;

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// One JSON object per line with the fields of 'add' (title, priority, after, body,
    /// labels, agents) and optionally an id.
    Jsonl,
    /// A beads export (.beads/issues.jsonl): ids, priorities, blocking dependencies, closed
    /// state, epics and their children (parent-child), and every other link are kept.
    Beads,
}

/// Add many tasks at once, from JSON lines or a beads export.
///
/// Reads a file ('-' for standard input). Every line is checked before anything is written;
/// tasks whose id exists already are skipped, so importing twice adds nothing. What cannot be
/// kept (a dependency or parent found nowhere, a second parent) is listed line by line and
/// nothing is imported (exit 1), unless --lossy lets it go.
///
/// Example: git loop import .beads/issues.jsonl --format beads
#[derive(Args)]
pub struct ImportArgs {
    /// The file to read.
    file: PathBuf,
    /// The file's format.
    #[arg(long, value_enum, default_value = "jsonl")]
    format: FormatArg,
    /// Import what can be kept, letting go of what cannot (each thing said as a warning).
    #[arg(long)]
    lossy: bool,
    /// Print {"added": [...], "skipped": [...], "warnings": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ImportArgs) -> Result<u8> {
    let text = if args.file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
        text
    } else {
        std::fs::read_to_string(&args.file)
            .map_err(|err| usage(format!("cannot read '{}': {err}", args.file.display())))?
    };
    let format = match args.format {
        FormatArg::Jsonl => Format::Jsonl,
        FormatArg::Beads => Format::Beads,
    };
    let store = env.open()?;
    let mut prepared = import::prepare(&store, &env.ctx, &text, format)?;
    if !prepared.lost.is_empty() && !args.lossy {
        for lost in &prepared.lost {
            super::output::stderr_line(format!("cannot keep: {lost}"));
        }
        return Err(git_loop::error::refused(format!(
            "{} in the file cannot be kept (listed above); nothing was imported",
            super::human::count(prepared.lost.len() as u64, "thing", "things")
        ))
        .hint("add what they name to the file or the backlog, or pass --lossy to import without them")
        .into());
    }
    let lost = std::mem::take(&mut prepared.lost);
    prepared.warnings.extend(lost.into_iter().map(|l| format!("let go: {l}")));
    let report = import::write(&store, &env.ctx, prepared, &args.file.display().to_string())?;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "added": report.added.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "skipped": report.skipped.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "warnings": report.warnings,
        }))?;
    } else {
        for warning in &report.warnings {
            super::output::stderr_line(format!("warning: {warning}"));
        }
        out.line(format!(
            "imported {}, skipped {} already present",
            super::human::count(report.added.len() as u64, "task", "tasks"),
            report.skipped.len()
        ))?;
    }
    Ok(0)
}
