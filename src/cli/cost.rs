//! `git loop cost`: what the agents cost, from the journal's sessions.

use std::collections::BTreeMap;

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::error::usage;
use git_loop::ids::Span;
use git_loop::store::ledger::{self, Spent};
use git_loop::store::usage::{self as spend, Total};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum By {
    Task,
    Agent,
    Model,
    Day,
    Mission,
    Walk,
}

/// Show what the agents' sessions cost: tokens and dollars, in total and by task, agent,
/// model, day, mission or walk.
///
/// Each session's usage is what its CLI reported (or the agent with `finish --usage`);
/// dollars computed from the price table (loop.price.<model>.*) are marked estimated; a
/// session that reported nothing is counted as unknown, never as zero. Every clone's
/// sessions count once this clone has synced.
///
/// Example: git loop cost --by task --since 7d
#[derive(Args)]
pub struct CostArgs {
    /// How to break the total down.
    #[arg(long, value_enum, default_value = "task")]
    by: By,
    /// Only sessions that ended in this span before now (90m, 7d) or since this date (2026-03-01).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Print {"by": ..., "total": {...}, "rows": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

fn key(s: &Spent, by: By) -> String {
    match by {
        By::Task => s.task.clone().unwrap_or_else(|| "(no task)".into()),
        By::Agent => s.agent.clone(),
        By::Model => s.usage.as_ref().and_then(|u| u.model.clone()).unwrap_or_else(|| "(unknown)".into()),
        By::Day => s.at.format("%Y-%m-%d").to_string(),
        By::Mission => s.mission.clone().unwrap_or_else(|| "(no mission)".into()),
        By::Walk => s.walk.clone(),
    }
}

/// Dollars to the millionth (sums of many sessions' floats carry noise below that), by the one
/// rounding every line uses (`usage::micro_usd`).
fn micro(usd: f64) -> f64 {
    git_loop::store::usage::micro_usd(usd) as f64 / 1_000_000.0
}

/// A total as `--json` shows it (also `show` and `status`).
pub fn total_json(t: &Total) -> serde_json::Value {
    json!({
        "sessions": t.sessions, "unknown": t.unknown, "unpriced": t.unpriced,
        "input": t.input, "output": t.output, "cached": t.cached, "tokens": t.tokens(),
        "usd": micro(t.usd), "usd_estimated": micro(t.usd_estimated),
    })
}

pub fn run(env: &Env, args: CostArgs) -> Result<u8> {
    let now = env.ctx.now();
    let since = match args.since.as_deref() {
        None => None,
        Some(text) => Some(match text.parse::<Span>() {
            Ok(Span(span)) => now - span,
            Err(_) => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|d| d.and_utc())
                .ok_or_else(|| {
                    usage(format!("--since '{text}' is neither a span nor a date"))
                        .hint("write a span such as 7d or 12h, or a date such as 2026-03-01")
                })?,
        }),
    };
    let store = env.open()?;
    let ledger = ledger::ledger(&store)?;
    let mut total = Total::default();
    let mut rows: BTreeMap<String, Total> = BTreeMap::new();
    for s in ledger.iter().filter(|s| since.is_none_or(|t| s.at >= t)) {
        total.add(s.usage.as_ref());
        rows.entry(key(s, args.by)).or_default().add(s.usage.as_ref());
    }
    let by = match args.by {
        By::Task => "task",
        By::Agent => "agent",
        By::Model => "model",
        By::Day => "day",
        By::Mission => "mission",
        By::Walk => "walk",
    };
    let mut out = Out::new();
    if args.json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|(k, t)| {
                let mut row = total_json(t);
                row[by] = json!(k);
                row
            })
            .collect();
        out.json(&json!({ "by": by, "total": total_json(&total), "rows": rows }))?;
        return Ok(0);
    }
    if total.sessions == 0 {
        out.line("no sessions yet")?;
        return Ok(0);
    }
    let width = rows.keys().map(|k| k.len()).max().unwrap_or(0).max(by.len());
    out.line(format!("{by:<width$}  {:>8}  {:>12}  {:>10}  {:>7}", "sessions", "tokens", "usd", "unknown"))?;
    let usd = |t: &Total| {
        if t.sessions == t.unknown + t.unpriced {
            "-".to_owned()
        } else if t.usd_estimated > 0.0 {
            format!("~{}", spend::dollars(t.dollars()))
        } else {
            spend::dollars(t.usd)
        }
    };
    for (k, t) in &rows {
        out.line(format!("{k:<width$}  {:>8}  {:>12}  {:>10}  {:>7}", t.sessions, t.tokens(), usd(t), t.unknown))?;
    }
    out.line(format!(
        "total: {} over {} session{}",
        total.describe(),
        total.sessions,
        if total.sessions == 1 { "" } else { "s" }
    ))?;
    if total.usd_estimated > 0.0 {
        out.line("~ includes dollars estimated from the price table (loop.price.<model>.*)")?;
    }
    Ok(0)
}
