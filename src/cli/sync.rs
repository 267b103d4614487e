//! `git loop sync`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::refs;
use git_loop::store::sync::{self, Change};

/// Exchange loop state with a remote.
///
/// Fetches its tasks, journal, notes, claims and task branches, merges them with ours
/// (nothing is lost, nothing is forced), and pushes what it lacks, then lists each ref that
/// changed. Then it looks at the landing target (loop.mergeInto, else the current branch): when
/// the remote's is ahead of ours and ours can fast-forward, it says so, and --ff does it (a
/// worktree that has it checked out follows; one with changes is never touched). And it reads
/// the tasks of other repositories that open tasks wait for (--after <remote-or-path>#<id>),
/// even without a remote of its own.
///
/// Example: git loop sync --remote origin
#[derive(Args)]
pub struct SyncArgs {
    /// The remote (default: loop.remote, else origin).
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// Fast-forward the local landing target to the remote's when it is behind and its
    /// checkout (if it has one) is clean.
    #[arg(long)]
    ff: bool,
    /// Print {"remote": ..., "refs": [...], "target": ...} as JSON.
    #[arg(long)]
    json: bool,
}

fn word(change: &Change) -> &'static str {
    match change {
        Change::Fetched => "fetched",
        Change::FastForwarded => "fast-forwarded",
        Change::Merged => "merged",
        Change::Pushed => "pushed",
        Change::Removed => "removed",
        Change::Kept { .. } => "kept both",
        Change::Problem(_) => "problem",
    }
}

pub fn run(env: &Env, args: SyncArgs) -> Result<u8> {
    let store = env.open()?;
    let remote = match sync::choose_remote(&store, args.remote.as_deref()) {
        Ok(remote) => remote,
        // No remote of its own: the tasks of other repositories it waits for are still read.
        Err(err) => {
            let board = git_loop::backlog::Board::load(&store, &env.ctx)?;
            if !board.tasks.iter().any(|r| r.after().any(git_loop::backlog::foreign::is_foreign)) {
                return Err(err);
            }
            let read = git_loop::backlog::foreign::refresh(&store, &board)?;
            return elsewhere(&read, args.json);
        }
    };
    let report = sync::sync(&store, &env.ctx, &remote)?;
    let read = git_loop::backlog::foreign::refresh(&store, &git_loop::backlog::Board::load(&store, &env.ctx)?)?;
    // No branch to land on (a detached HEAD without loop.mergeInto): nothing to offer.
    let target = git_loop::landing::follow_remote(&store, &remote, args.ff).ok();
    let mut out = Out::new();
    let troubled = report.changes.iter().filter(|c| matches!(c.change, Change::Problem(_))).count();
    if args.json {
        let refs: Vec<_> = report
            .changes
            .iter()
            .map(|c| {
                let detail = match &c.change {
                    Change::Problem(d) => Some(d.clone()),
                    Change::Kept { kept_as } => Some(kept_as.clone()),
                    _ => None,
                };
                json!({ "ref": c.name, "change": word(&c.change), "detail": detail })
            })
            .collect();
        out.json(&json!({
            "remote": report.remote, "refs": refs, "target": target.as_ref().map(target_json),
            "elsewhere": elsewhere_json(&read),
        }))?;
    } else {
        for c in &report.changes {
            match &c.change {
                Change::Problem(d) => out.line(format!("{:<15} {}  ({d})", word(&c.change), c.name))?,
                Change::Kept { kept_as } => out.line(format!(
                    "{:<15} {}  (the two sides diverged: the remote's stays, ours is kept as {})",
                    word(&c.change),
                    c.name,
                    refs::short_branch(kept_as)
                ))?,
                other => out.line(format!("{:<15} {}", word(other), c.name))?,
            }
        }
        if report.changes.is_empty() {
            super::output::stderr_line(format!("already in sync with '{}'", report.remote));
        } else {
            super::output::stderr_line(format!(
                "synced with '{}': {} refs changed",
                report.remote,
                report.changes.len() - troubled
            ));
        }
    }
    if let (Some(news), false) = (super::config::news(&store), args.json) {
        super::output::stderr_line(news);
    }
    let mut code = 0;
    if let (Some((name, standing)), false) = (&target, args.json) {
        code = say_target(name, &report.remote, standing, args.ff);
    } else if let (Some((_, git_loop::landing::Standing::Behind { .. })), true) = (&target, args.ff) {
        code = super::exit::FAILED;
    }
    if !args.json {
        code = code.max(elsewhere(&read, false)?);
    } else if !read.failed.is_empty() {
        code = super::exit::FAILED;
    }
    if troubled > 0 {
        super::output::stderr_line(format!("warning: {troubled} refs could not be synced; see above"));
        return Ok(super::exit::FAILED);
    }
    Ok(code)
}

fn elsewhere_json(read: &git_loop::backlog::foreign::Refreshed) -> serde_json::Value {
    json!({
        "read": read.read.iter().map(|(dep, state)| json!({ "after": dep, "state": state.map(|s| s.as_str()) })).collect::<Vec<_>>(),
        "failed": read.failed.iter().map(|(place, why)| json!({ "place": place, "reason": why })).collect::<Vec<_>>(),
    })
}

/// What was read of the tasks of other repositories (`--after <place>#<id>`): a line each, and
/// a place that could not be read a warning (exit 1).
fn elsewhere(read: &git_loop::backlog::foreign::Refreshed, json: bool) -> Result<u8> {
    if json {
        Out::new().json(&json!({ "elsewhere": elsewhere_json(read) }))?;
    } else {
        let mut out = Out::new();
        for (dep, state) in &read.read {
            match state {
                Some(state) => out.line(format!("{:<15} {dep}  ({} there)", "read", state.as_str()))?,
                None => out.line(format!("{:<15} {dep}  (no such task there)", "problem"))?,
            }
        }
        for (place, why) in &read.failed {
            let _ = place;
            super::output::stderr_line(format!("warning: {why}"));
        }
    }
    Ok(if read.failed.is_empty() { super::exit::OK } else { super::exit::FAILED })
}

/// What sync says of the landing target, and the exit code: a fast-forward asked for and not
/// made (a checkout with changes) is a failure.
fn say_target(name: &str, remote: &str, standing: &git_loop::landing::Standing, ff: bool) -> u8 {
    use git_loop::landing::Standing;
    let short = |id: &gix::ObjectId| git_loop::ids::short_commit(id);
    match standing {
        Standing::Behind { remote: theirs, checkout: Some((path, false)), .. } => {
            super::output::stderr_line(format!(
                "{name} is behind {remote}'s ({}), but it is checked out in {} with changes: it is left where it is",
                short(theirs),
                path.display()
            ));
            if ff {
                super::output::stderr_line("hint: commit or stash them there, then run 'git loop sync --ff' again");
                return super::exit::FAILED;
            }
        }
        Standing::Behind { remote: theirs, checkout, .. } => {
            let clean = if checkout.is_some() { " and its checkout is clean" } else { "" };
            super::output::stderr_line(format!(
                "{name} is behind {remote}'s ({}){clean}: 'git loop sync --ff' fast-forwards it",
                short(theirs)
            ));
            if ff {
                return super::exit::FAILED;
            }
        }
        Standing::Unfetched { remote: theirs } => {
            super::output::stderr_line(format!(
                "{remote}'s {name} is at {}, which this clone has not fetched: 'git loop sync --ff' fetches it and fast-forwards {name} if it can",
                short(theirs)
            ));
        }
        Standing::FastForwarded { from, to } => {
            super::output::stderr_line(format!("{name} fast-forwarded to {remote}'s: {} → {}", short(from), short(to)))
        }
        Standing::Diverged => super::output::stderr_line(format!(
            "{name} and {remote}'s have both moved: {name} has commits of its own, and is left alone"
        )),
        Standing::UpToDate | Standing::Absent => {}
    }
    0
}

fn target_json((name, standing): &(String, git_loop::landing::Standing)) -> serde_json::Value {
    use git_loop::landing::Standing;
    match standing {
        Standing::UpToDate => json!({ "branch": name, "state": "up_to_date" }),
        Standing::Behind { local, remote, checkout } => json!({
            "branch": name, "state": "behind", "local": local.to_string(), "remote": remote.to_string(),
            "checkout": checkout.as_ref().map(|(p, _)| p), "clean": checkout.as_ref().is_none_or(|(_, c)| *c),
        }),
        Standing::FastForwarded { from, to } => {
            json!({ "branch": name, "state": "fast_forwarded", "local": to.to_string(), "from": from.to_string() })
        }
        Standing::Unfetched { remote } => json!({ "branch": name, "state": "unfetched", "remote": remote.to_string() }),
        Standing::Diverged => json!({ "branch": name, "state": "diverged" }),
        Standing::Absent => json!({ "branch": name, "state": "absent" }),
    }
}
