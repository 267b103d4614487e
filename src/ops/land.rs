//! `land`: the landing queue run as a verb — its values decided by [`config`], its roles'
//! sessions (a conflict resolver, a summarizer) run under a walker of its own, confined as a
//! walk's are.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::config;
use crate::agent::role::{self, Role};
use crate::context::Context;
use crate::error::{Class, Refusal};
use crate::ids::TaskId;
use crate::landing::{self, Outcome, Report};
use crate::sandbox::Confinement;
use crate::store::Store;
use crate::walk;

/// What `land` was asked (`None`: not asked).
pub struct LandFlags {
    pub via: Option<crate::landing::Via>,
    pub into: Option<String>,
    pub only: Vec<TaskId>,
    pub batch: Option<usize>,
    pub checks: Option<String>,
    pub checks_timeout: Option<Duration>,
    pub resolver: Option<String>,
    pub summarizer: Option<String>,
    pub sandbox: Option<crate::sandbox::Mode>,
}

/// A landing about to run: what was decided, for its caller to say before it starts.
pub struct Prepared {
    flags: LandFlags,
    pub via: crate::landing::Via,
    batch: usize,
    checks: Option<String>,
    checks_timeout: Duration,
    resolver: Option<Role>,
    summarizer: Option<Role>,
    agent: Option<crate::agent::presets::Agent>,
    pub confinement: Confinement,
}

impl Prepared {
    /// Whether anything of it runs code or agents unconfined (the caller warns).
    pub fn runs_unconfined(&self) -> bool {
        (self.checks.is_some() || self.agent.is_some()) && matches!(self.confinement, Confinement::Unconfined { .. })
    }
}

/// Decide every value of a landing and check every role it names, before anything lands.
pub fn prepare(store: &Store, ctx: &Context, exe: &Path, flags: LandFlags) -> Result<Prepared> {
    let via = config::land_via(store, flags.via)?;
    let batch = config::land_batch(store, flags.batch)?;
    let checks = config::checks(store, flags.checks.clone());
    let checks_timeout = config::checks_timeout(store, flags.checks_timeout)?;
    let resolver = match config::resolver(store, flags.resolver.clone()) {
        Some(name) => Some(role::of_contract(store, &name, role::Contract::ConflictResolver, "--resolver")?),
        None => None,
    };
    let summarizer = walk::summarize::role_of(store, config::summarizer(store, flags.summarizer.clone()).as_deref())?;
    // Every agent a role names must be known before anything lands.
    let mut agent = None;
    for role in resolver.iter().chain(&summarizer) {
        let found = crate::agent::presets::resolve(store, role.agent.as_deref().unwrap_or_default(), None, exe)?;
        agent.get_or_insert(found);
    }
    // The checks run the merged code, and the roles are agents: confined as a walk's are.
    let confinement = super::run::confinement(store, ctx, exe, flags.sandbox)?;
    Ok(Prepared { flags, via, batch, checks, checks_timeout, resolver, summarizer, agent, confinement })
}

/// Run a prepared landing; `cancelled` is asked between steps, `observer` hears the roles'
/// sessions (their warnings). Another lander at work is a refusal (exit 3).
pub fn land(
    store: &Store,
    ctx: &Context,
    cwd: &Path,
    exe: &Path,
    prepared: Prepared,
    cancelled: &dyn Fn() -> bool,
    observer: &dyn walk::Observer,
) -> Result<Report> {
    let Prepared { flags, via, batch, checks, checks_timeout, resolver, summarizer, agent, confinement } = prepared;
    let opts = landing::Options {
        via,
        into: flags.into,
        only: flags.only,
        batch,
        checks,
        checks_timeout,
        grace: Duration::from_secs(10),
        exe: exe.to_owned(),
        holder: format!("lander-{}", crate::ids::random_base32(8)),
        cancelled,
        resolver: &landing::NoResolver,
        summarizer: &landing::NoSummarizer,
        sandbox: confinement.sandbox().map(|s| s.as_ref()),
    };
    let outcome = match agent {
        None => landing::land(store, ctx, &opts)?,
        Some(agent) => {
            // The roles' sessions run as a walk's do, under a walker of this verb's own.
            let mut walk_opts = walk::Options::new(agent);
            walk_opts.checks = opts.checks.clone();
            walk_opts.checks_timeout = opts.checks_timeout;
            walk_opts.confinement = confinement.clone();
            walk::one_off(store, ctx, cwd.to_owned(), exe.to_owned(), walk_opts, observer, |walker| {
                let resolver = resolver.map(|role| walk::resolve::AgentResolver { walker, role });
                let summarizer = summarizer.map(|role| walk::summarize::AgentSummarizer { walker, role });
                let opts = landing::Options {
                    resolver: match &resolver {
                        Some(r) => r,
                        None => &landing::NoResolver,
                    },
                    summarizer: match &summarizer {
                        Some(s) => s,
                        None => &landing::NoSummarizer,
                    },
                    ..opts
                };
                landing::land(store, ctx, &opts)
            })?
        }
    };
    match outcome {
        Outcome::Ran(report) => Ok(*report),
        Outcome::Busy(held) => {
            let r = &held.record;
            Err(Refusal::new(
                Class::Busy,
                format!("another lander is at work on this target: {} (pid {} on {})", r.holder, r.pid, r.host),
            )
            .hint(
                "its landing takes in every done task; wait for it, then run 'git loop land' again if anything is left",
            )
            .into())
        }
    }
}

/// Whether a landing left work asked for off the target: a landing failed; or asked for tasks
/// by id, one is not on the target now (the queue left out only what the target holds
/// already); or asked for every done task, it landed none of those left in the queue (nor,
/// through the forge, has any request open for them).
pub fn unlanded(report: &Report, asked_by_id: bool) -> bool {
    !report.failed.is_empty()
        || (asked_by_id && !report.waiting.is_empty())
        || (report.landed.is_empty() && report.requests.is_empty() && !report.waiting.is_empty())
}
