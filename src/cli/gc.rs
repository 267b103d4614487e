//! `git loop gc`: fold finished tasks' records into the archive (`refs/loop/archive`).

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::error::{usage, Refusal};
use git_loop::ids::Span;
use git_loop::store::archive;

/// Fold the records of finished tasks into one ref, refs/loop/archive, so that refs grow with
/// live work, not with history.
///
/// Done and cancelled tasks unchanged for --older-than (and whose claim nobody holds) are folded
/// with their claim's tombstone and their done and try anchors, and so are the journal chains of
/// sessions and walks that ended that long ago: one commit on refs/loop/archive whose parents
/// keep every commit reachable and whose tree indexes every retired ref (index/<shard>: "<id>
/// <ref>" lines). show, log, cost, list and the completion notes read a folded task as
/// before; a change to one (reopen) makes it live again. Each retired ref is deleted only if it
/// still holds the value archived, after the archive is written: a gc stopped at any point
/// leaves duplicates the next one removes, never a hole. Task and try branches are prune's.
///
/// With loop.remote the fold is the fleet's: it syncs, pushes the fold to the remote's archive
/// (leased: two clones folding at once take turns), then the deletes of the retired refs, each
/// leased on its archived value; every clone's next sync deletes them there too, and never
/// pushes them back. A remote guarded by git-loop's hook needs this release's hook.
///
/// Example: git loop gc --older-than 7d --dry-run
#[derive(Args)]
pub struct GcArgs {
    /// Fold what finished at least this long ago (0 for everything finished) [default: 7d].
    #[arg(long, value_name = "DURATION", value_parser = parse_age)]
    older_than: Option<chrono::Duration>,
    /// Say what would be folded; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print what was folded as JSON.
    #[arg(long)]
    json: bool,
}

/// A duration as `Span` reads it, or zero.
fn parse_age(text: &str) -> Result<chrono::Duration, Refusal> {
    if text.trim().trim_end_matches(['s', 'm', 'h', 'd']) == "0" {
        return Ok(chrono::Duration::zero());
    }
    text.parse::<Span>()
        .map(|s| s.0)
        .map_err(|_| usage(format!("'{}' is not a duration", text.escape_debug())).hint("e.g. 7d, 12h or 0"))
}

pub fn run(env: &Env, args: GcArgs) -> Result<u8> {
    let store = env.open()?;
    let older = args.older_than.unwrap_or_else(|| chrono::Duration::days(7));
    let before = env.ctx.now() - older;
    let mut out = Out::new();
    let (mut tasks, mut chains, mut deleted, mut kept) = (0, 0, 0, 0);
    let mut archive_tip = None;
    // With loop.remote the fold is the fleet's: on the remote first (docs/concurrency.md).
    if let (Some(remote), false) = (store.arbiter(), args.dry_run) {
        loop {
            let planner = || git_loop::prune::plan_fold(&store, &env.ctx, before);
            let folded = git_loop::store::fold::fold_remote(&store, &env.ctx, &remote, &planner)?;
            tasks += folded.tasks;
            chains += folded.chains;
            deleted += folded.deleted;
            kept += folded.kept;
            archive_tip = folded.archive.or(archive_tip);
            if folded.tasks < git_loop::store::fold::BATCH {
                break;
            }
        }
    }
    // A fold takes at most git_loop::store::fold::BATCH tasks: fold until nothing is left.
    while store.arbiter().is_none() || args.dry_run {
        let plan = git_loop::prune::plan_fold(&store, &env.ctx, before)?;
        if plan.refs.is_empty() || args.dry_run {
            tasks += plan.tasks.len();
            chains += plan.chains.len();
            deleted += if args.dry_run { plan.refs.len() } else { 0 };
            break;
        }
        let folded = git_loop::store::fold::fold(&store, &plan, env.ctx.now())?;
        tasks += folded.tasks;
        chains += folded.chains;
        deleted += folded.deleted;
        kept += folded.kept;
        archive_tip = folded.archive.or(archive_tip);
        if folded.deleted == 0 {
            break;
        }
    }
    if !args.dry_run {
        deleted += git_loop::store::fold::tidy(&store)?;
    }
    // Once, after every round: the archive moved here.
    if archive_tip.is_some() {
        git_loop::store::maintenance::after_archive_moved(store.common_dir());
    }
    if args.json {
        out.json(&json!({
            "dry_run": args.dry_run, "tasks": tasks, "chains": chains, "refs": deleted, "kept": kept,
            "archive": archive_tip,
        }))?;
        return Ok(0);
    }
    let verb = if args.dry_run { "would fold" } else { "folded" };
    let what = format!(
        "{verb} {} and {} into {} ({} {})",
        super::human::count(tasks as u64, "finished task", "finished tasks"),
        super::human::count(chains as u64, "journal chain", "journal chains"),
        archive::REF,
        deleted,
        if args.dry_run { "refs to retire" } else { "refs retired" }
    );
    out.line(what)?;
    if kept > 0 {
        out.line(format!("{kept} refs moved while they were folded: kept live, folded again next time"))?;
    }
    Ok(0)
}
