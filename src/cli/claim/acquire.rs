//! `git loop claim acquire`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::env::Env;
use crate::cli::human::{self, clock, relative};
use crate::cli::output::{claim_json, Out};
use git_loop::error::refused;
use git_loop::ids::{ClaimKey, Span};
use git_loop::store::claim::{self, Acquire, AcquireOptions};
use git_loop::store::lease;

/// Take a claim, refresh one you hold, or take over one left unrefreshed for its lease.
///
/// Another holder's claim is taken over once this clone has seen it unchanged (not refreshed)
/// for its whole lease, by this machine's clock: run this again later to take over a claim
/// whose holder stopped.
///
/// Exit 0 acquired (or refreshed: re-acquiring your own claim extends its lease), 1 held by
/// another live holder, 2 bad input, 3 the claim record is corrupt.
///
/// Example: git loop claim acquire node:t-4f2a --holder agent-7 --ttl 2h --reason "fixing the parser"
#[derive(Args)]
pub struct AcquireArgs {
    /// The claim key: node:<task-id> (a task's id or unique prefix), walker:<name>,
    /// fleet:<mission>, or <kind>:<name>.
    key: ClaimKey,
    /// Who takes it (defaults to $GIT_LOOP_SESSION).
    #[arg(long, value_name = "NAME")]
    holder: Option<String>,
    /// How long it lasts unless refreshed.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    ttl: Span,
    /// Why, shown in 'claim list'.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, mut args: AcquireArgs) -> Result<u8> {
    let holder = super::holder(env, args.holder)?;
    let store = env.open()?;
    // A task's claim names a task that exists, by its full id: a prefix claims the task it
    // means (and `next` then skips it), an unknown id or an ambiguous prefix is refused.
    // With a remote, a full id this clone has not fetched yet is looked up there first.
    if args.key.kind() == "node" {
        let id = match git_loop::backlog::resolve(&store, args.key.name()) {
            Ok(id) => id,
            Err(unknown) => match (args.key.name().parse::<git_loop::ids::TaskId>(), store.arbiter()) {
                (Ok(id), Some(remote)) => {
                    let names = git_loop::store::sync::task_scope(&store, &id)?;
                    git_loop::store::sync::pull(&store, &env.ctx, &remote, names)?;
                    git_loop::backlog::resolve(&store, args.key.name()).map_err(|_| unknown)?
                }
                _ => return Err(unknown),
            },
        };
        args.key = ClaimKey::node(&id);
    }
    let opts =
        AcquireOptions { holder, ttl: args.ttl.0, reason: args.reason, session: env.ctx.session.session.clone() };
    let outcome = claim::acquire(&store, &env.ctx, &args.key, &opts)?;
    let now = env.ctx.now();
    let watched = |held: &claim::Held| lease::judge(&store, &env.ctx, &args.key, held);
    let mut out = Out::new();
    let (word, held, previous) = match &outcome {
        Acquire::Acquired(held) => ("acquired", held, None),
        Acquire::Refreshed(held) => ("refreshed", held, None),
        Acquire::TookOver { held, previous } => ("taken_over", held, Some(previous)),
        Acquire::HeldByOther(held) => ("held", held, None),
    };
    if args.json {
        out.json(&json!({
            "outcome": word,
            "key": args.key.to_string(),
            "claim": claim_json(held, &watched(held)),
            "previous_holder": previous.map(|p| p.holder.clone()),
        }))?;
    }
    let r = &held.record;
    // Our own lease, by our own clock.
    let until = format!("until {} ({})", clock(r.expires_at, now), relative(r.expires_at, now));
    match &outcome {
        Acquire::HeldByOther(held) => {
            let reason = r.reason.as_deref().map(|x| format!(" ({x})")).unwrap_or_default();
            let lease = human::lease(&watched(held));
            Err(refused(format!("claim '{}' is held by {}{reason}: {lease}", args.key, r.holder))
                .hint(if args.key.kind() == "node" {
                    "pick another task with 'git loop next'"
                } else {
                    "wait for it to be released, or try again once it is left unrefreshed for its lease"
                })
                .into())
        }
        _ if args.json => Ok(0),
        Acquire::TookOver { previous, .. } => {
            let lease = (previous.expires_at - previous.refreshed_at).to_std().unwrap_or_default();
            out.line(format!(
                "took over {} from {} (unchanged for its whole {} lease), held {until}",
                args.key,
                previous.holder,
                human::span(chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX))
            ))?;
            Ok(0)
        }
        Acquire::Refreshed(_) => {
            out.line(format!("refreshed {}, held {until}", args.key))?;
            Ok(0)
        }
        Acquire::Acquired(_) => {
            out.line(format!("acquired {}, held {until}", args.key))?;
            Ok(0)
        }
    }
}
