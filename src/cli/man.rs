//! `git loop man`: the manual pages, made from the command line's own definition. `git loop
//! --help` is git's `git help loop`, which runs `man git-loop`; man-db looks for pages beside
//! every directory of PATH (`<bin>/../share/man`), so pages installed beside this program are
//! found wherever it was installed.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::{Args, CommandFactory};
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::error::{refused, usage};

/// Print a command's manual page (roff), or install every page where man finds them.
///
/// `git loop --help` and `git help loop` show the page of git-loop once the pages are
/// installed: `cargo install --path . && git loop man --install`.
#[derive(Args)]
#[command(after_help = "Read one without installing: git loop man run | man -l -")]
pub struct ManArgs {
    /// The command whose page to print (`run`, `claim acquire`); none: git-loop's own.
    #[arg(value_name = "COMMAND", conflicts_with = "install")]
    command: Vec<String>,
    /// Write every command's page (git-loop.1, git-loop-<command>.1) into a directory man
    /// searches: by default <this program's directory>/../share/man/man1, which man finds
    /// through PATH.
    #[arg(long)]
    install: bool,
    /// Where --install writes the pages.
    #[arg(long, value_name = "DIR", requires = "install")]
    dir: Option<PathBuf>,
    /// With --install: print the directory and the pages written as JSON.
    #[arg(long, requires = "install")]
    json: bool,
}

pub fn run(env: &Env, args: ManArgs) -> Result<u8> {
    let root = definition();
    if !args.install {
        let mut cmd = &root;
        for (i, word) in args.command.iter().enumerate() {
            cmd = cmd.get_subcommands().find(|c| !c.is_hide_set() && c.get_name() == word).ok_or_else(|| {
                let path = args.command[..=i].join(" ");
                usage(format!("'git loop {path}' is not a command")).hint("'git loop --help' lists the commands")
            })?;
        }
        let mut page = Vec::new();
        page_of(cmd).render(&mut page)?;
        use std::io::Write as _;
        std::io::stdout().lock().write_all(&page)?;
        return Ok(0);
    }
    let dir = match args.dir {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => env.cwd.join(dir),
        None => beside(&env.exe)?,
    };
    // A directory that cannot be written (a program installed by root, run by a user) is
    // said in one line, with where else the pages can go.
    let cannot = |e: anyhow::Error| {
        refused(format!("{e:#}")).hint(
            "install them where you can write, e.g. --dir ~/.local/share/man/man1 (man finds it through ~/.local/bin on PATH)",
        )
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create '{}'", dir.display())).map_err(cannot)?;
    let mut written = Vec::new();
    write_pages(&root, &dir, &mut written).map_err(cannot)?;
    let mut out = Out::new();
    if args.json {
        out.json(&json!({ "dir": dir, "pages": written }))?;
    } else {
        out.line(format!("installed {} manual pages in {}", written.len(), dir.display()))?;
    }
    Ok(0)
}

/// The command line as clap knows it, built: every subcommand's display name is
/// `git-loop-<command>` (its page's name), and clap's `help` subcommand is left out.
fn definition() -> clap::Command {
    let mut cmd = super::Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// The page of one command, titled by its page name (`git-loop-run`), its footer naming the
/// version. (clap_mangen writes an empty `.TH` field as nothing, which shifts the fields after
/// it: the version goes in the first of them, the date's.)
fn page_of(cmd: &clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd.clone()).date(format!("git-loop {}", env!("CARGO_PKG_VERSION"))).source("")
}

/// `<dir>/../share/man/man1` for the directory this program is in.
fn beside(exe: &Path) -> Result<PathBuf> {
    let bin =
        exe.parent().ok_or_else(|| anyhow::anyhow!("this program's path '{}' has no directory", exe.display()))?;
    let prefix = bin.parent().unwrap_or(bin);
    Ok(prefix.join("share/man/man1"))
}

/// The page of `cmd` and of each of its visible subcommands, written to `dir` (each through
/// a temporary file, so a page is never seen half-written).
fn write_pages(cmd: &clap::Command, dir: &Path, written: &mut Vec<String>) -> Result<()> {
    let man = page_of(cmd);
    let name = man.get_filename();
    let mut page = Vec::new();
    man.render(&mut page)?;
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).with_context(|| format!("cannot write in '{}'", dir.display()))?;
    std::io::Write::write_all(&mut tmp, &page)?;
    use std::os::unix::fs::PermissionsExt as _;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(dir.join(&name)).with_context(|| format!("cannot write '{}'", dir.join(&name).display()))?;
    written.push(name);
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
