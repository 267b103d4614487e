//! `git loop config`: the loop's settings shared through the repository.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::human::relative;
use super::output::Out;
use git_loop::store::shared::{self, Compared};

/// Share the loop's settings with other clones, or see and adopt the shared ones.
///
/// --share records this clone's loop settings (the agent, named agents and roles, the checks,
/// setup, review, resolver, landing, budgets, …; never the remote, loop.worktrees, loop.holder,
/// loop.user or loop.notify, which are each clone's own) as a versioned record on
/// refs/loop/settings, which sync brings to every clone. A clone never takes them on its own,
/// since settings decide what runs: without options this shows the shared settings against
/// this clone's, and --adopt writes them into this repository's configuration.
///
/// Example: git loop config --share
#[derive(Args)]
pub struct ConfigArgs {
    /// Share this clone's loop settings as the loop's.
    #[arg(long, conflicts_with = "adopt")]
    share: bool,
    /// Adopt the shared settings: write them into this repository's configuration.
    #[arg(long)]
    adopt: bool,
    /// Print the shared settings, and how this clone's compare, as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(env: &Env, args: ConfigArgs) -> Result<u8> {
    let store = env.open()?;
    let mut out = Out::new();
    if args.share {
        let settings = shared::here(&store);
        if settings.is_empty() {
            return Err(git_loop::error::refused("this clone has no loop settings to share")
                .hint("set them first, e.g. git config loop.checks \"cargo test\"")
                .into());
        }
        let outcome = shared::share(&store, settings.clone())?;
        let (commit, new) = match outcome {
            shared::Shared::Shared(c) => (c, true),
            shared::Shared::Same(c) => (c, false),
        };
        shared::mark_adopted(&store, commit)?;
        if let (true, Some(remote)) = (new, store.arbiter()) {
            let names = std::collections::BTreeSet::from([git_loop::refs::SETTINGS.to_owned()]);
            git_loop::store::sync::publish(&store, &env.ctx, &remote, names, None)?;
        }
        if args.json {
            out.json(&json!({ "commit": commit.to_string(), "shared": new, "settings": settings }))?;
            return Ok(0);
        }
        for (key, values) in &settings {
            out.line(format!("  {key} = {}", values.join(", ")))?;
        }
        out.line(if new {
            format!(
                "shared {} as the loop's ({}, {}): other clones see them at their next sync, and adopt them with 'git loop config --adopt'",
                super::human::count(settings.len() as u64, "setting", "settings"),
                git_loop::refs::SETTINGS,
                git_loop::ids::short_commit(&commit)
            )
        } else {
            format!("the loop's shared settings are these already ({})", git_loop::ids::short_commit(&commit))
        })?;
        return Ok(0);
    }
    let Some((commit, record)) = shared::read(&store)? else {
        if args.json {
            out.json(&json!({ "shared": null }))?;
            return Ok(0);
        }
        if args.adopt {
            return Err(git_loop::error::refused("no settings are shared in this repository")
                .hint("a clone shares its own with 'git loop config --share' (then sync)")
                .into());
        }
        out.line("no settings are shared in this repository (share this clone's: git loop config --share)")?;
        return Ok(0);
    };
    if args.adopt {
        let written = shared::adopt(&store, commit, &record)?;
        if args.json {
            let keys: Vec<_> = written.iter().map(|(k, v, _)| json!({ "key": k, "values": v })).collect();
            out.json(&json!({ "commit": commit.to_string(), "adopted": keys }))?;
            return Ok(0);
        }
        for (key, values, how) in &written {
            let was = match how {
                Compared::Differs(mine) => format!(" (was {})", mine.join(", ")),
                _ => " (was not set)".to_owned(),
            };
            out.line(format!("  set {key} = {}{was}", values.join(", ")))?;
        }
        out.line(format!(
            "adopted the settings {} shared {} ({}): {} changed in this repository's configuration",
            record.author(),
            relative(record.at, env.ctx.now()),
            git_loop::ids::short_commit(&commit),
            super::human::count(written.len() as u64, "setting", "settings")
        ))?;
        return Ok(0);
    }
    let here = shared::here(&store);
    let (compared, only_here) = shared::compare(&record.settings, &here);
    let adopted = shared::adopted(&store) == Some(commit);
    if args.json {
        let settings: Vec<_> = compared
            .iter()
            .map(|(k, v, how)| {
                let (state, mine) = match how {
                    Compared::Same => ("same", None),
                    Compared::Differs(mine) => ("differs", Some(mine.clone())),
                    Compared::NotHere => ("not_here", None),
                };
                json!({ "key": k, "values": v, "here": state, "here_values": mine })
            })
            .collect();
        let only: Vec<_> = only_here.iter().map(|(k, v)| json!({ "key": k, "values": v })).collect();
        out.json(&json!({
            "shared": { "commit": commit.to_string(), "version": record.version, "by": record.by, "user": record.user, "at": record.at },
            "adopted": adopted, "settings": settings, "only_here": only,
        }))?;
        return Ok(0);
    }
    out.line(format!(
        "the loop's settings, shared by {} {} ({}){}:",
        record.author(),
        relative(record.at, env.ctx.now()),
        git_loop::ids::short_commit(&commit),
        if adopted { ", adopted here" } else { "" }
    ))?;
    for (key, values, how) in &compared {
        let here = match how {
            Compared::Same => "same here".to_owned(),
            Compared::Differs(mine) => format!("here: {}", mine.join(", ")),
            Compared::NotHere => "not set here".to_owned(),
        };
        out.line(format!("  {key} = {}   ({here})", values.join(", ")))?;
    }
    for (key, values) in &only_here {
        out.line(format!("  {key}: set only here ({})", values.join(", ")))?;
    }
    let differ = compared.iter().filter(|(_, _, how)| *how != Compared::Same).count();
    if differ > 0 {
        out.line(format!(
            "{} this clone's: 'git loop config --adopt' takes them (they decide what runs: read them first)",
            super::human::count(differ as u64, "differs from", "differ from")
        ))?;
    }
    Ok(0)
}

/// What `sync` says when the shared settings are ones this clone has not adopted and differ
/// from its own: a line, never an adoption.
pub fn news(store: &git_loop::store::Store) -> Option<String> {
    let (commit, record) = shared::read(store).ok().flatten()?;
    if shared::adopted(store) == Some(commit) {
        return None;
    }
    let (compared, _) = shared::compare(&record.settings, &shared::here(store));
    let differ = compared.iter().filter(|(_, _, how)| *how != Compared::Same).count();
    (differ > 0).then(|| {
        format!(
            "the loop's shared settings (by {}) differ from this clone's in {}: see them with 'git loop config', adopt them with 'git loop config --adopt'",
            record.by,
            super::human::count(differ as u64, "setting", "settings")
        )
    })
}
