//! `git loop claim list`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::human::relative;
use crate::cli::output::{claim_json, Out};
use crate::cli::Env;
use crate::store::claim::{self, Listed};

/// List claims with holder, reason, when taken and when they expire.
///
/// Stale claims (lease run out) are hidden unless --include-stale.
///
/// Example: git loop claim list --prefix node: --include-stale
#[derive(Args)]
pub struct ListArgs {
    /// Only keys starting with this (e.g. node: or walker:).
    #[arg(long, value_name = "PREFIX", default_value = "")]
    prefix: String,
    /// Include claims whose lease has run out.
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
    let mut out = Out::new();
    let mut rows = Vec::new();
    let mut corrupt = Vec::new();
    for item in listed {
        match item {
            Listed::Claim { key, held } => {
                if args.include_stale || !held.record.is_stale(now) {
                    rows.push((key, *held));
                }
            }
            Listed::Corrupt { name, problem } => corrupt.push((name, problem)),
        }
    }
    if args.json {
        let claims: Vec<_> = rows.iter().map(|(_, h)| claim_json(h, now)).collect();
        let corrupt: Vec<_> = corrupt.iter().map(|(n, p)| json!({ "ref": n, "problem": p })).collect();
        out.json(&json!({ "claims": claims, "corrupt": corrupt }))?;
    } else {
        for (key, held) in &rows {
            let r = &held.record;
            let status = if r.is_stale(now) { "stale" } else { "live" };
            let reason = r.reason.as_deref().map(|x| format!("  {x}")).unwrap_or_default();
            out.line(format!(
                "{:<24} {:<16} {status:<5}  taken {}, expires {}{reason}",
                key.to_string(),
                r.holder,
                relative(r.acquired_at, now),
                relative(r.expires_at, now)
            ))?;
        }
        crate::cli::output::warn_corrupt(&corrupt);
    }
    Ok(0)
}
