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
    /// A beads export (.beads/issues.jsonl): ids, priorities, blocking dependencies and
    /// closed state are kept.
    Beads,
}

/// Add many tasks at once, from JSON lines or a beads export.
///
/// Reads a file ('-' for standard input). Every line is checked before anything is written;
/// tasks whose id exists already are skipped, so importing twice adds nothing.
///
/// Example: git loop import .beads/issues.jsonl --format beads
#[derive(Args)]
pub struct ImportArgs {
    /// The file to read.
    file: PathBuf,
    /// The file's format.
    #[arg(long, value_enum, default_value = "jsonl")]
    format: FormatArg,
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
    let report = import::import(&store, &env.ctx, &text, format, &args.file.display().to_string())?;
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
