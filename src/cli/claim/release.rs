//! `git loop claim release`.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::env::Env;
use crate::cli::output::Out;
use git_loop::error::refused;
use git_loop::ids::ClaimKey;
use git_loop::store::claim::{self, Release};

/// Release a claim you hold (exit 1 if someone else holds it).
///
/// Example: git loop claim release node:t-4f2a --holder agent-7
#[derive(Args)]
pub struct ReleaseArgs {
    /// The claim key.
    key: ClaimKey,
    /// Who holds it (defaults to $GIT_LOOP_SESSION).
    #[arg(long, value_name = "NAME")]
    holder: Option<String>,
    /// Also remove a corrupt record, or a stale one of another holder (never a live one).
    #[arg(long)]
    force: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, mut args: ReleaseArgs) -> Result<u8> {
    let holder = match super::holder(env, args.holder) {
        Ok(holder) => holder,
        Err(_) if args.force => String::new(),
        Err(err) => return Err(err),
    };
    let store = env.open()?;
    // As `acquire` takes a task's claim by a unique prefix, so does release; a key that names
    // no task (a claim made before acquire checked) is released as it is given.
    if args.key.kind() == "node" {
        if let Ok(id) = git_loop::backlog::resolve(&store, args.key.name()) {
            args.key = ClaimKey::node(&id);
        }
    }
    let outcome = claim::release(&store, &env.ctx, &args.key, &holder, args.force)?;
    let mut out = Out::new();
    let word = match &outcome {
        Release::Released(_) => "released",
        Release::NotHeld => "not_held",
        Release::RemovedCorrupt => "removed_corrupt",
        Release::HeldByOther(_) => "held",
    };
    if args.json {
        out.json(&json!({ "outcome": word, "key": args.key.to_string() }))?;
    }
    match outcome {
        Release::HeldByOther(record) => Err(refused(format!(
            "claim '{}' is held by {}, not {}",
            args.key,
            record.holder,
            if holder.is_empty() { "you" } else { &holder }
        ))
        .hint("only its holder can release a live claim")
        .into()),
        _ if args.json => Ok(0),
        Release::Released(record) => {
            let held = crate::cli::human::relative(record.acquired_at, env.ctx.now());
            out.line(format!("released {} (taken {held})", args.key)).map(|()| 0)
        }
        Release::NotHeld => out.line(format!("{} was not held", args.key)).map(|()| 0),
        Release::RemovedCorrupt => out.line(format!("removed the corrupt record of {}", args.key)).map(|()| 0),
    }
}
