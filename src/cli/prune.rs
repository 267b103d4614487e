//! `git loop prune`: delete the branches of finished tasks that nothing needs.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::prune::{self, Options, Verdict};

/// Delete the task and try branches of finished tasks (done or cancelled) whose work is on the
/// landing target or on the task branch.
///
/// A branch of a task not finished is never touched, nor one checked out in a worktree. A
/// branch whose work is on no other branch (a done task not landed yet, a cancelled task's
/// work, a try that lost a race) is kept and listed, unless --unlanded; its commits stay
/// reachable from the try and done anchors (refs/loop/tries, refs/loop/done) all the same. With
/// loop.remote the remote keeps its branches, and a sync does not bring back what was pruned
/// here.
///
/// Example: git loop prune --dry-run
#[derive(Args)]
pub struct PruneArgs {
    /// Say what would be pruned; delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also prune branches whose work is on no other branch.
    #[arg(long)]
    unlanded: bool,
    /// Print what was judged as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: PruneArgs) -> Result<u8> {
    let store = env.open_as_configured()?;
    let report = prune::prune(&store, &env.ctx, Options { dry_run: args.dry_run, unlanded: args.unlanded })?;
    let mut out = Out::new();
    if args.json {
        let branches: Vec<serde_json::Value> = report
            .branches
            .iter()
            .map(|b| {
                let (action, why) = match &b.verdict {
                    Verdict::Pruned(why) if report.dry_run => ("would_prune", why.clone()),
                    Verdict::Pruned(why) => ("pruned", why.clone()),
                    Verdict::Unlanded(why) => ("kept", why.clone()),
                    Verdict::CheckedOut(path) => ("kept", format!("it is checked out in {}", path.display())),
                    Verdict::Moved => ("kept", "it moved while it was judged".to_owned()),
                };
                json!({ "branch": b.branch, "task": b.task, "head": b.head.to_string(), "action": action, "why": why })
            })
            .collect();
        out.json(&json!({ "into": report.into, "dry_run": report.dry_run, "branches": branches }))?;
        return Ok(0);
    }
    let width = report.branches.iter().map(|b| b.branch.chars().count()).max().unwrap_or(0);
    let (mut pruned, mut unlanded, mut other) = (0, 0, 0);
    for b in &report.branches {
        let (word, why) = match &b.verdict {
            Verdict::Pruned(why) => {
                pruned += 1;
                (if report.dry_run { "would prune" } else { "pruned" }, why.clone())
            }
            Verdict::Unlanded(why) => {
                unlanded += 1;
                ("kept", why.clone())
            }
            Verdict::CheckedOut(path) => {
                other += 1;
                ("kept", format!("it is checked out in {}", path.display()))
            }
            Verdict::Moved => {
                other += 1;
                ("kept", "it moved while it was judged".to_owned())
            }
        };
        out.line(format!("{word:<11} {:<width$}  {why}", b.branch))?;
    }
    let branches = |n: usize| super::human::count(n as u64, "branch", "branches");
    let mut last = format!("{} {}", branches(pruned), if report.dry_run { "would be pruned" } else { "pruned" });
    if unlanded > 0 {
        last.push_str(&format!(
            "; {} kept with work on no other branch ('git loop prune --unlanded' prunes them too; their commits stay anchored)",
            branches(unlanded)
        ));
    }
    if other > 0 {
        last.push_str(&format!("; {} kept, in use", branches(other)));
    }
    out.line(last)?;
    Ok(0)
}
