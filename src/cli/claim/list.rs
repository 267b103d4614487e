//! `git loop claim list`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use std::collections::HashSet;

use crate::cli::env::Env;
use crate::cli::human::{self, relative};
use crate::cli::output::{claim_json, Out};
use git_loop::store::claim::{self, Listed};
use git_loop::store::lease::{ref_prefix, Watcher};

/// List claims with holder, reason, when taken and how long each was seen unchanged.
///
/// A claim is stale once this clone has seen it unchanged (not refreshed) for its whole lease,
/// by this machine's clock; stale claims are hidden unless --include-stale.
///
/// Example: git loop claim list --prefix node: --include-stale
#[derive(Args)]
pub struct ListArgs {
    /// Only keys starting with this (e.g. node: or walker:).
    #[arg(long, value_name = "PREFIX", default_value = "")]
    prefix: String,
    /// Include claims seen unchanged for a whole lease.
    #[arg(long)]
    include_stale: bool,
    /// Print {"claims": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ListArgs) -> Result<u8> {
    let store = env.open()?;
    let now = env.ctx.now();
    let listed = claim::list(&store, &args.prefix)?;
    let mut watcher = Watcher::load(&store, &env.ctx);
    let mut out = Out::new();
    let mut rows = Vec::new();
    let mut corrupt = Vec::new();
    let mut watched = HashSet::new();
    for item in listed {
        match item {
            Listed::Claim { key, held } => {
                let lease = watcher.judge(&key, &held);
                watched.insert(git_loop::refs::claim(&key));
                if args.include_stale || !lease.is_stale() {
                    rows.push((key, *held, lease));
                }
            }
            Listed::Corrupt { name, problem } => corrupt.push((name, problem)),
        }
    }
    watcher.keep_only(&ref_prefix(&args.prefix), &watched);
    watcher.save();
    if args.json {
        let claims: Vec<_> = rows.iter().map(|(_, h, lease)| claim_json(h, lease)).collect();
        let corrupt: Vec<_> = corrupt.iter().map(|(n, p)| json!({ "ref": n, "problem": p })).collect();
        out.json(&json!({ "claims": claims, "corrupt": corrupt }))?;
    } else {
        for (key, held, lease) in &rows {
            let r = &held.record;
            let status = if lease.is_stale() { "stale" } else { "live" };
            let reason = r.reason.as_deref().map(|x| format!("  {x}")).unwrap_or_default();
            // The holder's own times are shown as its clock has them (taken "3 min ago" by a
            // clock an hour fast reads "in 57 min"); only the watch decides.
            out.line(format!(
                "{:<24} {:<16} {status:<5}  taken {}, {}{reason}",
                key.to_string(),
                r.holder,
                relative(r.acquired_at, now),
                human::lease(lease).trim_start_matches("stale: ")
            ))?;
        }
        crate::cli::output::warn_corrupt(&corrupt);
    }
    Ok(0)
}
