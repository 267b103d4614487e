//! Which value wins, decided once per setting: the flag given on the command line, else the
//! `loop.*` setting, else the default. Every verb that takes one of these values asks here, so
//! `run`, `race`, `land`, `mission run` and `hand-back` can never disagree on it.
//!
//! [`CHOICES`] is the source of docs/cli.md's table "Which value wins", which a test keeps in
//! step. Two are decided where they are used, below this layer, since the walk and the
//! landing queue need them without a verb: `loop.base` by `tries::base`, `loop.mergeInto` by
//! `landing::target`; the verbs hand them the flag as given.

use std::time::Duration;

use anyhow::Result;

use crate::error::usage;
use crate::store::settings::parse_usd;
use crate::store::Store;

/// One value a flag and a setting both give.
pub struct Choice {
    /// The setting, as `git config` takes it.
    pub setting: &'static str,
    /// The flags that win over it, with the verbs that take them.
    pub flags: &'static str,
    /// What holds when neither is given.
    pub otherwise: &'static str,
}

pub const AGENT: Choice = Choice {
    setting: "loop.agent",
    flags: "`--agent`, `--agent-cmd` (run, race, mission run)",
    otherwise: "a race's first `--together` agent; else a usage error",
};
pub const CHECKS: Choice = Choice {
    setting: "loop.checks",
    flags: "`--checks` (run, race, land, hand-back)",
    otherwise: "none: a task is done on its agent's word, a landing on its merge alone",
};
pub const CHECKS_TIMEOUT: Choice =
    Choice { setting: "loop.checksTimeout", flags: "`--checks-timeout` (run, race, land)", otherwise: "10m" };
pub const SETUP: Choice = Choice { setting: "loop.setup", flags: "`--setup` (run, race)", otherwise: "none" };
pub const REVIEW: Choice = Choice { setting: "loop.review", flags: "`--review` (run, race)", otherwise: "none" };
pub const REVIEWER: Choice = Choice {
    setting: "loop.reviewer",
    flags: "`--reviewer` (run, race); a task's own reviewers win over both",
    otherwise: "none",
};
pub const RESOLVER: Choice = Choice {
    setting: "loop.resolver",
    flags: "`--resolver` (run, race, land)",
    otherwise: "`loop.role.conflict-resolver.agent`, else the walk's agent (land: none, a conflict goes to a person)",
};
pub const SUMMARIZER: Choice = Choice {
    setting: "loop.summarizer",
    flags: "`--summarizer` (run, race, land)",
    otherwise: "`loop.role.summarizer.agent`, else the loop's own landing message",
};
pub const FALLBACK: Choice = Choice {
    setting: "loop.fallback",
    flags: "`--fallback` (run, race); a task's own fallbacks win over both",
    otherwise: "none: an unreachable agent's task waits",
};
pub const PICK: Choice = Choice {
    setting: "loop.pick",
    flags: "`--pick` (run, race) wins over the task's own pick, which wins over the setting",
    otherwise: "first",
};
pub const JUDGE: Choice = Choice { setting: "loop.judge", flags: "`--judge-cmd` (run, race)", otherwise: "none" };
pub const BUDGET_USD: Choice =
    Choice { setting: "loop.budgetUsd", flags: "`--budget-usd` (run, race, mission run)", otherwise: "no limit" };
pub const SANDBOX: Choice =
    Choice { setting: "loop.sandbox", flags: "`--sandbox` (run, race, land)", otherwise: "auto" };
pub const LAND: Choice = Choice {
    setting: "loop.land",
    flags: "`--land` (run, race) turns it on; it cannot turn it off",
    otherwise: "false",
};
pub const LAND_BATCH: Choice = Choice { setting: "loop.landBatch", flags: "`--batch` (land)", otherwise: "8" };
pub const MERGE_INTO: Choice =
    Choice { setting: "loop.mergeInto", flags: "`--into` (land)", otherwise: "the main worktree's branch" };
pub const BASE: Choice =
    Choice { setting: "loop.base", flags: "`--base` (run, race)", otherwise: "the current branch's head" };

/// Every value a flag and a setting both give, in the order docs/cli.md lists them.
pub const CHOICES: &[&Choice] = &[
    &AGENT,
    &CHECKS,
    &CHECKS_TIMEOUT,
    &SETUP,
    &REVIEW,
    &REVIEWER,
    &RESOLVER,
    &SUMMARIZER,
    &FALLBACK,
    &PICK,
    &JUDGE,
    &BUDGET_USD,
    &SANDBOX,
    &LAND,
    &LAND_BATCH,
    &MERGE_INTO,
    &BASE,
];

/// The table docs/cli.md's "Which value wins" holds.
pub fn table() -> String {
    let mut out = String::from("| setting | given instead by | neither given |\n|---|---|---|\n");
    for c in CHOICES {
        out.push_str(&format!("| `{}` | {} | {} |\n", c.setting, c.flags, c.otherwise));
    }
    out
}

/// A command: the flag, else the setting; a blank flag is none (`--checks ""` turns the
/// setting's off).
fn command(flag: Option<String>, setting: impl FnOnce() -> Option<String>) -> Option<String> {
    match flag {
        Some(flag) => Some(flag).filter(|c| !c.trim().is_empty()),
        None => setting(),
    }
}

/// A list: the flag's items, else the setting's.
fn list(flag: Vec<String>, setting: impl FnOnce() -> Vec<String>) -> Vec<String> {
    if flag.is_empty() {
        setting()
    } else {
        flag
    }
}

/// The agent's name: `--agent`, else `loop.agent` (`--agent-cmd` is decided by its caller).
pub fn agent(store: &Store, flag: Option<String>) -> Option<String> {
    flag.or_else(|| store.settings().agent())
}

/// The checks command.
pub fn checks(store: &Store, flag: Option<String>) -> Option<String> {
    command(flag, || store.settings().checks())
}

/// How long the checks (and a review command, a judge) may run.
pub fn checks_timeout(store: &Store, flag: Option<Duration>) -> Result<Duration> {
    match flag {
        Some(d) => Ok(d),
        None => Ok(store.settings().checks_timeout()?),
    }
}

/// The command run in each new try before its first session.
pub fn setup(store: &Store, flag: Option<String>) -> Option<String> {
    command(flag, || store.settings().setup())
}

/// The review command.
pub fn review(store: &Store, flag: Option<String>) -> Option<String> {
    command(flag, || store.settings().review())
}

/// The walk's reviewers (a task's own win over these, in the walk).
pub fn reviewers(store: &Store, flag: Vec<String>) -> Vec<String> {
    list(flag, || store.settings().reviewers())
}

/// Who resolves conflicting merges, by name (a role or an agent); the built-in role's agent
/// and the walk's are looked at where the role is found (`walk::resolve::role_of`).
pub fn resolver(store: &Store, flag: Option<String>) -> Option<String> {
    flag.or_else(|| store.settings().resolver())
}

/// Who writes landing messages, by name (a role or an agent; `walk::summarize::role_of`).
pub fn summarizer(store: &Store, flag: Option<String>) -> Option<String> {
    flag.or_else(|| store.settings().summarizer())
}

/// The walk's fallback agents (a task's own win over these, in the walk).
pub fn fallback(store: &Store, flag: Vec<String>) -> Vec<String> {
    list(flag, || store.settings().fallback())
}

/// The pick word: the flag's (which wins over a task's own) and the setting's (which a task's
/// own wins over), unparsed.
pub fn pick(store: &Store, flag: Option<String>) -> (Option<String>, Option<String>) {
    (flag, store.settings().pick())
}

/// The judge command.
pub fn judge(store: &Store, flag: Option<String>) -> Option<String> {
    command(flag, || store.settings().judge())
}

/// The dollars a walk's (or a mission's) sessions may spend together.
pub fn budget_usd(store: &Store, flag: Option<&str>) -> Result<Option<f64>> {
    match flag {
        Some(text) => Ok(Some(parse_usd(text).ok_or_else(|| {
            usage(format!("--budget-usd '{text}' is not a positive number of dollars")).hint("e.g. --budget-usd 5")
        })?)),
        None => Ok(store.settings().budget_usd()?),
    }
}

/// Whether a walk lands each done task.
pub fn land(store: &Store, flag: bool) -> Result<bool> {
    Ok(flag || store.settings().land()?)
}

/// How done work lands: `--via`, else `loop.land`'s way.
pub fn land_via(store: &Store, flag: Option<crate::landing::Via>) -> Result<crate::landing::Via> {
    match flag {
        Some(via) => Ok(via),
        None if store.settings().land_through_forge()? => Ok(crate::landing::Via::Request),
        None => Ok(crate::landing::Via::Merge),
    }
}

/// How many task branches a landing merges before checking once.
pub fn land_batch(store: &Store, flag: Option<usize>) -> Result<usize> {
    match flag {
        Some(0) => Err(usage("--batch must be at least 1").into()),
        Some(n) => Ok(n),
        None => Ok(store.settings().land_batch()?),
    }
}

#[cfg(test)]
mod tests {
    /// docs/cli.md's "Which value wins" is [`super::table`], and names only known settings.
    #[test]
    fn the_docs_say_which_value_wins() {
        let table = crate::store::settings::table_under(include_str!("../../docs/cli.md"), "## Which value wins");
        assert_eq!(table, super::table(), "docs/cli.md's 'Which value wins' is made from ops::config::CHOICES");
        // Every setting named here is one docs/storage.md lists.
        let known = |s: &&str| crate::store::settings::KEYS.iter().any(|k| k.key == *s);
        let unknown: Vec<&str> = super::CHOICES.iter().map(|c| c.setting).filter(|s| !known(s)).collect();
        assert_eq!(unknown, Vec::<&str>::new(), "settings docs/storage.md does not list");
    }
}
