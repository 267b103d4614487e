//! `git loop export`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};

use super::env::Env;
use git_loop::backlog::export;
use git_loop::backlog::import::Format;
use git_loop::error::usage;

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// One JSON object per line, as 'import' reads it: the fields of 'add', the id, the
    /// parent, epic mark and links, and the state when it is not open.
    Jsonl,
    /// A beads export (issues.jsonl): a task imported from beads and unchanged since is written
    /// back as its line was; a changed one has what git-loop holds written over it.
    Beads,
}

/// Write the backlog in a format 'import' reads, one task a line, by id.
///
/// Every task, folded ones too. A beads export imported and exported again is the same file,
/// line for line (tombstones and other lines that are no issue aside); what changed here since
/// is written over the lines' own fields, and every field git-loop does not know is kept.
///
/// Example: git loop export --format beads -o .beads/issues.jsonl
#[derive(Args)]
pub struct ExportArgs {
    /// The format to write.
    #[arg(long, value_enum, default_value = "jsonl")]
    format: FormatArg,
    /// Write to this file (replaced whole, or left as it was) instead of standard output.
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
}

pub fn run(env: &Env, args: ExportArgs) -> Result<u8> {
    let format = match args.format {
        FormatArg::Jsonl => Format::Jsonl,
        FormatArg::Beads => Format::Beads,
    };
    let store = env.open()?;
    match &args.output {
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            export::export(&store, &env.ctx, format, &mut out)?;
        }
        Some(path) => {
            // Written beside it and renamed over it: a failure leaves the file as it was.
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
                _ => PathBuf::from("."),
            };
            if !dir.is_dir() {
                return Err(usage(format!(
                    "cannot write '{}': there is no directory '{}'",
                    path.display(),
                    dir.display()
                ))
                .hint("make the directory first, or write to standard output (without -o)")
                .into());
            }
            let cannot = |err: std::io::Error| usage(format!("cannot write '{}': {}", path.display(), err.kind()));
            let mut file = tempfile::NamedTempFile::new_in(&dir).map_err(cannot)?;
            let written = {
                let mut out = std::io::BufWriter::new(file.as_file_mut());
                export::export(&store, &env.ctx, format, &mut out)?
            };
            file.persist(path).map_err(|e| cannot(e.error))?;
            super::output::stderr_line(format!(
                "note: wrote {} to {}",
                super::human::count(written as u64, "task", "tasks"),
                path.display()
            ));
        }
    }
    Ok(0)
}
