//! Every `loop.*` setting: its key, its default and its meaning in one table ([`KEYS`], the
//! source of the table in docs/storage.md, "Configuration", which a test keeps in step), read
//! from the repository's configuration in one place, behind typed accessors.
//!
//! A server guarded by the pre-receive hook reads two more from its own repository
//! (`loop.maxLease`, `loop.bindHolders`: `hooks::receive`, docs/hooks.md).
//!
//! Settings are read when asked for, not all at once when a store is opened: a bad
//! `loop.syncEvery` must stop a walk, not `git loop list`.

use std::time::Duration;

use super::Store;
use crate::error::{usage, Refusal};
use crate::ids::Span;

/// One documented setting.
pub struct Key {
    /// The key, as `git config` takes it (`<name>` stands for an agent's name).
    pub key: &'static str,
    /// What it means, with its default.
    pub meaning: &'static str,
}

/// Every setting git-loop reads, in the order docs/storage.md lists them.
/// A setting's name as the docs spell it (`loop.sandbox.readOnly`), for one read in git's
/// case-insensitive way (`loop.sandbox.readonly`); a name the docs do not list, as it is.
pub fn documented_name(key: &str) -> String {
    // A row may name several keys of one section: "loop.sandbox.readOnly` / `.readWrite`".
    let names = KEYS.iter().flat_map(|k| {
        let mut parts = k.key.split("` / `");
        let first = parts.next().unwrap_or_default();
        let section = first.rsplit_once('.').map_or("", |(section, _)| section);
        std::iter::once(first.to_owned()).chain(parts.map(move |p| format!("{section}{p}")))
    });
    names.into_iter().find(|name| name.eq_ignore_ascii_case(key)).unwrap_or_else(|| key.to_owned())
}

pub const KEYS: &[Key] = &[
    Key { key: "loop.remote", meaning: "the remote that decides claims (`git loop init --remote`)" },
    Key { key: "loop.agent", meaning: "the default agent for `run`" },
    Key { key: "loop.agent.<name>.command` / `.resume` / `.env", meaning: "a named agent of your own" },
    Key {
        key: "loop.agent.<name>.provider",
        meaning: "who runs a named agent's model (anthropic, openai, google, …), for the reviewer rule; else its `--model` says, else unknown",
    },
    Key { key: "loop.checks", meaning: "the default checks command" },
    Key {
        key: "loop.notify",
        meaning: "a command told of a task that needs you, a walk that paused or ended and a budget spent, the event as JSON on its stdin (docs/hooks.md, \"Notifications\"); stopped after 10 s, its failure a warning",
    },
    Key {
        key: "loop.notify.webhook",
        meaning: "an http or https URL walks post the same notification document to (`Content-Type: application/json`; 10 s at most, its failure a warning; `git loop serve`'s page shows the same moments as browser notifications); a clone's own",
    },
    Key {
        key: "loop.setup",
        meaning: "a command run in each new try worktree before its first session (copy `.env` from `$GIT_LOOP_CHECKOUT`, the main checkout; install dependencies; `run`/`race --setup`); what it leaves untracked is never committed; its output heads the session's log, its failure sends the task to needs-you, and one that cannot run (the shell's 126, 127) stops the walk, exit 77",
    },
    Key {
        key: "loop.warm",
        meaning: "a path, relative to the repository's root, whose ignored build state (`target`, `node_modules`, `.venv`) each new try starts with (unset, with no `.worktreeinclude`: `target` and `node_modules`; `none`: nothing): copied from the task's previous try's worktree if it is there, else from the main checkout, by reflink where the file system clones, else copied, before `loop.setup` runs (repeatable; a `.worktreeinclude` at the root adds paths and globs, one a line; docs/architecture.md, \"Warm tries\"); a tracked, absolute or `..` path is refused (exit 2)",
    },
    Key { key: "loop.review", meaning: "a command that must approve a try (exit 0) after its checks pass" },
    Key {
        key: "loop.reviewer",
        meaning: "reviewers (roles or agents, comma-separated) that must approve a try after its checks pass (`run --reviewer`)",
    },
    Key {
        key: "loop.reviewRounds",
        meaning: "review rounds without approval before a task goes to needs-you (default 3)",
    },
    Key {
        key: "loop.resolver",
        meaning: "who resolves merge conflicts of landings and of dependencies (a conflict-resolver role or an agent; `--resolver`); else `loop.role.conflict-resolver.agent`, else the walk's agent (a `git loop land` without either has none)",
    },
    Key {
        key: "loop.summarizer",
        meaning: "who writes each landing commit's message from the task and its sessions (a summarizer role or an agent; `--summarizer`); else `loop.role.summarizer.agent`; else the loop's own `loop: land loop/<id> (<title>)`",
    },
    Key {
        key: "loop.role.<name>.contract` / `.agent` / `.prompt",
        meaning: "a role of your own: the contract it keeps (worker, reviewer, conflict-resolver, summarizer), its agent, and its instructions (a file, else the text)",
    },
    Key { key: "loop.pick` / `loop.judge", meaning: "how races pick a winner; the judge command for `judge`" },
    Key { key: "loop.fallback", meaning: "agents (comma-separated) for tasks whose agent is unreachable" },
    Key {
        key: "loop.pick",
        meaning: "how a race picks its winner when neither `--pick` nor the task says: `first` (the first try to pass; the default) or `judge`",
    },
    Key {
        key: "loop.judge",
        meaning: "in judge mode, the command that picks among the tries that passed (the passing tries as JSON on its stdin; it prints the winner's try number; `--judge-cmd`)",
    },
    Key { key: "loop.unreachableFor", meaning: "how long an unreachable agent is left alone (default 15m)" },
    Key {
        key: "loop.agent.<name>.unreachable",
        meaning: "a phrase that means a named agent cannot be reached (repeatable)",
    },
    Key { key: "loop.forbid", meaning: "agents (comma-separated) no task may be given without `--override`" },
    Key {
        key: "loop.budgetUsd",
        meaning: "the dollars a walk's sessions may spend together before no further one starts (`run`/`race --budget-usd`; a mission's, over all its projects' walks, for `mission run`; default: no budget)",
    },
    Key {
        key: "loop.price.<model>.input` / `.output` / `.cached",
        meaning: "USD per million tokens of a model, for sessions whose CLI reports tokens but no dollars; costs computed from them are marked estimated (none shipped; `.cached` defaults to `.input`)",
    },
    Key {
        key: "loop.sandbox",
        meaning: "how sessions, checks and setup are confined (docs/agents.md, \"The sandbox\"): `auto` (default: in bubblewrap where it works, else unconfined and said so), `required` (a walk that cannot confine refuses to start, exit 77) or `off` (unconfined, shown in `status`); `run`/`race --sandbox`",
    },
    Key {
        key: "loop.sandbox.network",
        meaning: "`allow` (default: a confined run reaches only its agent's API hosts, the base URLs its environment names, and `loop.sandbox.allow`, through a filtering proxy; a refused host is journaled once per session), `on` (the whole network) or `none` (loopback only)",
    },
    Key {
        key: "loop.sandbox.allow",
        meaning: "a host a confined run may reach under `loop.sandbox.network = allow` (repeatable): `host`, `host:port`, `*.domain` or an address; a person's entry may name this machine or a private network (`127.0.0.1:8080`), a preset's may not",
    },
    Key {
        key: "loop.sandbox.readOnly` / `.readWrite` / `.hide",
        meaning: "more paths a confined run sees read-only, may write, or does not see at all (repeatable; `~/` is the home); the repository's `.git` stays hidden whatever they say",
    },
    Key { key: "loop.sandbox.tmpSize", meaning: "the size of a confined run's own `/tmp` (default 1g)" },
    Key { key: "loop.syncEvery", meaning: "how often a walk syncs with `loop.remote` (default 30s; `never`)" },
    Key {
        key: "loop.fold",
        meaning: "fold on `loop.remote`, as walks sync, the finished tasks at least this old (`7d`; `0` for every finished one) into `refs/loop/archive` once 50 or more are foldable, looked at every 10 minutes (default off: upgrade every clone and the server's hook first; `git loop gc` folds by hand; docs/storage.md, \"Archive\")",
    },
    Key {
        key: "loop.transferTimeout",
        meaning: "how long one call to a remote (a fetch, a push, a listing) may go without moving a byte before it is cut and, as a fault that may heal, tried again; a transfer still moving data is never cut (default 60s; docs/concurrency.md, \"Faults\")",
    },
    Key {
        key: "loop.serve.token",
        meaning: "the token `git loop serve` asks every request of its API for (`Authorization: Bearer <token>`); unset: a new one is made and printed at each start, on 127.0.0.1 only (any other address refuses to start without it). A clone's own, never shared",
    },
    Key {
        key: "loop.checksTimeout",
        meaning: "how long the checks (and the review, the judge) may run before they are stopped (default 10m; `run --checks-timeout`)",
    },
    Key { key: "loop.base", meaning: "where task branches start (default: the current branch)" },
    Key {
        key: "loop.mergeInto",
        meaning: "the branch done work lands on (`git loop land`, `run --land`; default: the current branch)",
    },
    Key {
        key: "loop.epicBranch",
        meaning: "true: an epic's children land on the epic's own branch (`loop/<epic>`, made from the target when its first child lands) through the landing queue, with the checks run on each merge, and a child's new task branch starts from it; the epic lands on the target once it is done and every child's work is on its branch (default false: children land on the target one by one)",
    },
    Key {
        key: "loop.land",
        meaning: "`true` (or `merge`): `run` and `race` land each done task as if given `--land`, by the landing queue's own merge; `pr`: through a pull or merge request on the forge instead (`--land --via pr`, and `land`'s way; docs/concurrency.md, \"Landing through the forge\"); default false",
    },
    Key {
        key: "loop.forge",
        meaning: "the forge requests are opened on: `github`, `gitlab` or `forgejo` (`gitea`); default: told by the remote's host (github.com, gitlab.com, codeberg.org)",
    },
    Key {
        key: "loop.forge.url` / `.repo",
        meaning: "the forge's API base URL (default `https://api.github.com`, else `https://<host>/api/v3`, `/api/v4`, `/api/v1` by forge) and the repository's `owner/name` on it (default: the remote URL's path)",
    },
    Key {
        key: "loop.forge.branch",
        meaning: "the name a task's request branch is pushed under, `{id}` standing for the task's id (default `loop/{id}`)",
    },
    Key {
        key: "loop.forge.stack",
        meaning: "a done task whose dependency's request is not merged yet: `wait` (default: its request opens once the dependency's merged) or `stack` (its request opens on the dependency's branch, and is retargeted when that one merges)",
    },
    Key {
        key: "loop.forge.poll",
        meaning: "how often a walk that lands through the forge (`run --land --via pr`) reads back every open request while it runs, so a failing CI or a review sends the task back to the same walk, and a merge lands it (default 2m)",
    },
    Key {
        key: "loop.forge.wait",
        meaning: "the longest a forge's rate limit is waited for before the landing stops and says until when (default 5m)",
    },
    Key {
        key: "loop.landBatch",
        meaning: "how many task branches the landing queue merges before checking the result once (default 8; `land --batch`)",
    },
    Key { key: "loop.worktrees", meaning: "where try worktrees go (default: `<git-common-dir>/loop/worktrees`)" },
    Key {
        key: "loop.pool",
        meaning: "how many finished tries' worktrees to keep for the next tries, which check their branch out in place and keep the ignored build state (default 4; 0 to 64; 0: none); docs/cli.md",
    },
    Key {
        key: "loop.pool.maxSize",
        meaning: "the most disk the pool's worktrees may use together (`5g`, `800m`; default: no cap but `loop.pool`'s count): the entries kept longest go first, and a worktree larger than the cap alone is not kept",
    },
    Key {
        key: "loop.pool.share",
        meaning: "`true`: a pooled worktree may go to another task's try, with what git ignores in it (written by the other task's agent); default off: only the same task's later tries take it",
    },
    Key {
        key: "loop.holder",
        meaning: "a holder the `pre-push` hook counts as this clone's, besides its own (repeatable)",
    },
    Key {
        key: "loop.user",
        meaning: "the name the shared remote authenticates this clone's pushes as, written into its claim records (`user`) for a server with `loop.bindHolders`",
    },
];

/// How often a walk syncs when `loop.syncEvery` is not set.
pub const SYNC_EVERY: Duration = Duration::from_secs(30);

/// How long one call to a remote may take when `loop.transferTimeout` is not set.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(60);

/// How many task branches a landing merges before checking, when `loop.landBatch` is not set.
pub const LAND_BATCH: usize = 8;

/// A size as settings write it: bytes, or with `k`, `m`, `g` (`512m`, `2g`).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let scale: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return None,
    };
    digits.parse::<u64>().ok().map(|n| n.saturating_mul(scale))
}

/// The size of a confined run's own `/tmp` when `loop.sandbox.tmpSize` is not set.
pub const SANDBOX_TMP: u64 = 1 << 30;

/// Review rounds without approval before a task goes to a person, when `loop.reviewRounds` is
/// not set.
pub const REVIEW_ROUNDS: u32 = 3;

/// How long checks may run when `loop.checksTimeout` is not set.
pub const CHECKS_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The settings of one repository, read through its store.
pub struct Settings<'s> {
    store: &'s Store,
}

impl<'s> Settings<'s> {
    pub fn of(store: &'s Store) -> Settings<'s> {
        Settings { store }
    }

    /// A setting's value, if set and not blank.
    fn text(&self, key: &str) -> Option<String> {
        self.store.config(key).filter(|v| !v.trim().is_empty())
    }

    /// A comma-separated list (empty when unset).
    fn list(&self, key: &str) -> Vec<String> {
        self.text(key)
            .map(|v| v.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    }

    /// `loop.remote`: the remote that decides claims.
    pub fn remote(&self) -> Option<String> {
        self.text("loop.remote")
    }

    /// `loop.agent`: the default agent.
    pub fn agent(&self) -> Option<String> {
        self.text("loop.agent")
    }

    /// `loop.checks`: the default checks command.
    pub fn checks(&self) -> Option<String> {
        self.text("loop.checks")
    }

    /// `loop.notify.webhook`: a URL walks post their notifications to (http or https).
    pub fn notify_webhook(&self) -> Result<Option<String>, Refusal> {
        let Some(url) = self.text("loop.notify.webhook").map(|u| u.trim().to_owned()) else { return Ok(None) };
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.chars().any(char::is_whitespace) {
            return Err(usage(format!("loop.notify.webhook '{}' is not an http or https URL", url.escape_debug()))
                .hint("git config loop.notify.webhook https://hooks.example.com/git-loop"));
        }
        Ok(Some(url))
    }

    /// `loop.notify`: the command told of walks' events (docs/hooks.md, "Notifications").
    pub fn notify(&self) -> Option<String> {
        self.text("loop.notify")
    }

    /// `loop.setup`: the command run in each new try worktree before its first session.
    pub fn setup(&self) -> Option<String> {
        self.text("loop.setup")
    }

    /// `loop.review`: the review command.
    pub fn review(&self) -> Option<String> {
        self.text("loop.review")
    }

    /// `loop.reviewer`: reviewers (roles or agents) for every task that names none.
    pub fn reviewers(&self) -> Vec<String> {
        self.list("loop.reviewer")
    }

    /// `loop.resolver`: who resolves merge conflicts (a role or an agent).
    pub fn resolver(&self) -> Option<String> {
        self.text("loop.resolver").map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    /// `loop.summarizer`: who writes landing commits' messages (a role or an agent).
    pub fn summarizer(&self) -> Option<String> {
        self.text("loop.summarizer").map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    /// `loop.reviewRounds`: review rounds without approval before a task goes to a person;
    /// [`REVIEW_ROUNDS`] when unset.
    pub fn review_rounds(&self) -> Result<u32, Refusal> {
        match self.text("loop.reviewRounds") {
            None => Ok(REVIEW_ROUNDS),
            Some(v) => v.trim().parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                usage(format!("loop.reviewRounds '{v}' is not a number of rounds")).hint("e.g. 3 (at least 1)")
            }),
        }
    }

    /// `loop.role.<name>.contract`.
    pub fn role_contract(&self, name: &str) -> Option<String> {
        self.text(&format!("loop.role.{name}.contract")).map(|v| v.trim().to_owned())
    }

    /// `loop.role.<name>.agent`.
    pub fn role_agent(&self, name: &str) -> Option<String> {
        self.text(&format!("loop.role.{name}.agent")).map(|v| v.trim().to_owned())
    }

    /// `loop.role.<name>.prompt`: a file's path or the text itself, unread.
    pub fn role_prompt(&self, name: &str) -> Option<String> {
        self.text(&format!("loop.role.{name}.prompt"))
    }

    /// `loop.agent.<name>.provider`.
    pub fn agent_provider(&self, name: &str) -> Option<String> {
        self.text(&format!("loop.agent.{name}.provider"))
    }

    /// `loop.pick`, unparsed (the walk's layer knows the words).
    pub fn pick(&self) -> Option<String> {
        self.store.config("loop.pick")
    }

    /// `loop.judge`: the judge command.
    pub fn judge(&self) -> Option<String> {
        self.text("loop.judge")
    }

    /// `loop.fallback`: agents for tasks whose agent is unreachable.
    pub fn fallback(&self) -> Vec<String> {
        self.list("loop.fallback")
    }

    /// `loop.forbid`: agents no task may be given without `--override`.
    pub fn forbid(&self) -> Vec<String> {
        self.list("loop.forbid")
    }

    /// `loop.unreachableFor`, if set.
    pub fn unreachable_for(&self) -> Result<Option<Duration>, Refusal> {
        self.duration("loop.unreachableFor", "e.g. 15m, 1h")
    }

    /// `loop.syncEvery`: None for `never` (or 0); [`SYNC_EVERY`] when unset.
    pub fn sync_every(&self) -> Result<Option<Duration>, Refusal> {
        match self.store.config("loop.syncEvery").as_deref() {
            Some("0" | "never") => Ok(None),
            _ => Ok(Some(self.duration("loop.syncEvery", "e.g. 30s, 2m, or never")?.unwrap_or(SYNC_EVERY))),
        }
    }

    /// `loop.transferTimeout`: how long one call to a remote may take; [`TRANSFER_TIMEOUT`]
    /// when unset.
    pub fn transfer_timeout(&self) -> Result<Duration, Refusal> {
        Ok(self.duration("loop.transferTimeout", "e.g. 60s, 2m")?.unwrap_or(TRANSFER_TIMEOUT))
    }

    /// `loop.checksTimeout`: how long checks may run; [`CHECKS_TIMEOUT`] when unset.
    pub fn checks_timeout(&self) -> Result<Duration, Refusal> {
        Ok(self.duration("loop.checksTimeout", "e.g. 10m, 30m, 1h")?.unwrap_or(CHECKS_TIMEOUT))
    }

    /// A duration setting (`15m`, `1h`), if set; a usage error naming it, with `hint`, if it
    /// is not one.
    fn duration(&self, key: &str, hint: &str) -> Result<Option<Duration>, Refusal> {
        let Some(value) = self.store.config(key) else { return Ok(None) };
        value
            .parse::<Span>()
            .ok()
            .and_then(|span| span.0.to_std().ok())
            .map(Some)
            .ok_or_else(|| usage(format!("{key} '{value}' is not a duration")).hint(hint.to_owned()))
    }

    /// `loop.base`: where task branches start, as a revision.
    pub fn base(&self) -> Option<String> {
        self.text("loop.base")
    }

    /// `loop.mergeInto`: the branch done work lands on.
    pub fn merge_into(&self) -> Option<String> {
        self.text("loop.mergeInto")
    }

    /// `loop.serve.token`: the web board's token, if set.
    pub fn serve_token(&self) -> Option<String> {
        self.text("loop.serve.token").map(|t| t.trim().to_owned())
    }

    /// `loop.epicBranch`: whether an epic's children land on the epic's branch.
    pub fn epic_branch(&self) -> Result<bool, Refusal> {
        match self.text("loop.epicBranch").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("false" | "no" | "off" | "0") => Ok(false),
            Some("true" | "yes" | "on" | "1") => Ok(true),
            Some(other) => Err(usage(format!("loop.epicBranch '{}' is not a boolean", other.escape_debug()))
                .hint("git config loop.epicBranch true")),
        }
    }

    /// `loop.land`: whether `run` and `race` land each done task (as `--land`).
    pub fn land(&self) -> Result<bool, Refusal> {
        match self.text("loop.land").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("false" | "no" | "off" | "0") => Ok(false),
            Some("true" | "yes" | "on" | "1" | "merge" | "pr" | "mr" | "request") => Ok(true),
            Some(other) => {
                Err(usage(format!("loop.land '{}' is neither a boolean nor a way to land", other.escape_debug()))
                    .hint("set it to true, false or pr: git config loop.land pr"))
            }
        }
    }

    /// `loop.land`'s way: true when it lands through the forge (`pr`), false by the queue's
    /// own merge (`landing::Via`).
    pub fn land_through_forge(&self) -> Result<bool, Refusal> {
        match self.text("loop.land").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            Some("pr" | "mr" | "request") => Ok(true),
            _ => self.land().map(|_| false),
        }
    }

    /// `loop.forge`: the forge named, as written (`forge::place` reads it).
    pub fn forge(&self) -> Option<String> {
        self.text("loop.forge")
    }

    /// `loop.forge.url`: the forge's API base URL, if named.
    pub fn forge_url(&self) -> Option<String> {
        self.text("loop.forge.url").map(|v| v.trim().to_owned())
    }

    /// `loop.forge.repo`: the repository's path on the forge, if named.
    pub fn forge_repo(&self) -> Option<String> {
        self.text("loop.forge.repo").map(|v| v.trim().to_owned())
    }

    /// `loop.forge.branch`: the request branch of a task, `{id}` its id (default `loop/{id}`).
    pub fn forge_branch(&self, id: &str) -> Result<String, Refusal> {
        let pattern = self.text("loop.forge.branch").unwrap_or_else(|| "loop/{id}".into());
        let name = pattern.trim().replace("{id}", id);
        if !pattern.contains("{id}") || gix::refs::FullName::try_from(format!("refs/heads/{name}")).is_err() {
            return Err(usage(format!(
                "loop.forge.branch '{}' does not make a branch name of a task's id",
                pattern.escape_debug()
            ))
            .hint("it names {id}, e.g. git config loop.forge.branch 'agents/{id}'"));
        }
        Ok(name)
    }

    /// `loop.forge.stack`: whether a request opens on its dependency's unmerged branch.
    pub fn forge_stack(&self) -> Result<bool, Refusal> {
        match self.text("loop.forge.stack").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("wait") => Ok(false),
            Some("stack") => Ok(true),
            Some(other) => Err(usage(format!("loop.forge.stack '{}' is neither wait nor stack", other.escape_debug()))
                .hint("git config loop.forge.stack stack")),
        }
    }

    /// `loop.fold`: how old a finished task must be for walks to fold it (`None`: off).
    pub fn fold_after(&self) -> Result<Option<chrono::Duration>, Refusal> {
        match self.text("loop.fold").map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(None),
            Some(v) if matches!(v.as_str(), "off" | "false" | "no" | "never") => Ok(None),
            Some(v) if v.trim_end_matches(['s', 'm', 'h', 'd']) == "0" => Ok(Some(chrono::Duration::zero())),
            Some(v) => v.parse::<Span>().map(|s| Some(s.0)).map_err(|_| {
                usage(format!("loop.fold '{}' is neither off nor a duration", v.escape_debug()))
                    .hint("e.g. git config loop.fold 7d (or off)")
            }),
        }
    }

    /// `loop.forge.poll`: how often a walk reads back its open requests (default 2m).
    pub fn forge_poll(&self) -> Result<Duration, Refusal> {
        match self.text("loop.forge.poll") {
            None => Ok(Duration::from_secs(120)),
            Some(v) => match v.trim().parse::<Span>() {
                Ok(s) if s.0.num_seconds() >= 1 => Ok(Duration::from_secs(s.0.num_seconds() as u64)),
                _ => {
                    Err(usage(format!("loop.forge.poll '{}' is not a duration of a second or more", v.escape_debug()))
                        .hint("e.g. 2m or 30s"))
                }
            },
        }
    }

    /// `loop.forge.wait`: the longest rate-limit reset waited for (default 5m).
    pub fn forge_wait(&self) -> Result<Duration, Refusal> {
        match self.text("loop.forge.wait") {
            None => Ok(Duration::from_secs(300)),
            Some(v) => {
                v.trim().parse::<Span>().map(|s| Duration::from_secs(s.0.num_seconds().max(0) as u64)).map_err(|_| {
                    usage(format!("loop.forge.wait '{}' is not a duration", v.escape_debug()))
                        .hint("e.g. 5m, 90s or 0s")
                })
            }
        }
    }

    /// `loop.budgetUsd`: the dollars a walk's sessions may spend together, unless `--budget-usd`
    /// says.
    pub fn budget_usd(&self) -> Result<Option<f64>, Refusal> {
        match self.text("loop.budgetUsd") {
            None => Ok(None),
            Some(v) => parse_usd(&v).map(Some).ok_or_else(|| {
                usage(format!("loop.budgetUsd '{}' is not a positive number of dollars", v.escape_debug()))
                    .hint("e.g. git config loop.budgetUsd 20")
            }),
        }
    }

    /// `loop.landBatch`: how many task branches a landing merges before checking; [`LAND_BATCH`]
    /// when unset.
    pub fn land_batch(&self) -> Result<usize, Refusal> {
        match self.text("loop.landBatch") {
            None => Ok(LAND_BATCH),
            Some(v) => v.trim().parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                usage(format!("loop.landBatch '{}' is not a number of at least 1", v.escape_debug()))
                    .hint("e.g. git config loop.landBatch 8")
            }),
        }
    }

    /// `loop.user`: the name the shared remote authenticates this clone's pushes as.
    pub fn user(&self) -> Option<String> {
        self.text("loop.user").map(|u| u.trim().to_owned())
    }

    /// `loop.agent.<name>.unreachable`: the user's own phrases that mean agent `name` cannot
    /// be reached, every value given.
    pub fn agent_unreachable(&self, name: &str) -> Vec<String> {
        self.store.config_values(&format!("loop.agent.{name}.unreachable"))
    }

    /// `loop.agent.<name>.env`: the environment of agent `name`, every value given, unparsed
    /// (`KEY=VALUE` each; the caller refuses one that is not).
    pub fn agent_env(&self, name: &str) -> Vec<String> {
        self.store.config_values(&format!("loop.agent.{name}.env"))
    }

    /// `loop.holder`: holders the `pre-push` hook counts as this clone's, every value given.
    pub fn holders(&self) -> Vec<String> {
        self.store.config_values("loop.holder")
    }

    /// `loop.sandbox`: how runs are confined (`auto`, `required`, `off`), as written.
    pub fn sandbox(&self) -> Option<String> {
        self.text("loop.sandbox").map(|v| v.trim().to_ascii_lowercase())
    }

    /// `loop.sandbox.network`, as written.
    pub fn sandbox_network(&self) -> Option<String> {
        self.text("loop.sandbox.network").map(|v| v.trim().to_ascii_lowercase())
    }

    /// `loop.sandbox.<kind>` (`readOnly`, `readWrite`, `hide`): every path given.
    pub fn sandbox_paths(&self, kind: &str) -> Vec<String> {
        self.store
            .config_values(&format!("loop.sandbox.{kind}"))
            .into_iter()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect()
    }

    /// `loop.sandbox.tmpSize`: bytes (`512m`, `2g`); [`SANDBOX_TMP`] when unset.
    pub fn sandbox_tmp_size(&self) -> Result<u64, Refusal> {
        let Some(v) = self.text("loop.sandbox.tmpSize") else { return Ok(SANDBOX_TMP) };
        parse_size(&v).filter(|n| *n >= 1 << 20).ok_or_else(|| {
            usage(format!("loop.sandbox.tmpSize '{}' is not a size of at least 1m", v.escape_debug()))
                .hint("e.g. git config loop.sandbox.tmpSize 2g")
        })
    }

    /// `loop.worktrees`: where try worktrees go.
    pub fn worktrees(&self) -> Option<String> {
        self.text("loop.worktrees")
    }
}

/// Dollars as a budget takes them: a positive, finite number.
pub fn parse_usd(text: &str) -> Option<f64> {
    text.trim().trim_start_matches('$').parse::<f64>().ok().filter(|d| d.is_finite() && *d > 0.0)
}

/// The table docs/storage.md lists the settings in.
pub fn table() -> String {
    let mut out = String::from("| key | meaning |\n|---|---|\n");
    for key in KEYS {
        out.push_str(&format!("| `{}` | {} |\n", key.key, key.meaning));
    }
    out
}

/// The first table under the heading line `heading` (`## Configuration`) of a Markdown `doc`,
/// its lines as written: what a test holds a table made from code against.
#[cfg(test)]
pub(crate) fn table_under(doc: &str, heading: &str) -> String {
    let section = doc.split(&format!("{heading}\n")).nth(1).unwrap_or_else(|| panic!("no '{heading}' section"));
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    /// docs/storage.md lists every setting, as [`super::KEYS`] says (`GIT_LOOP_BLESS=1`
    /// rewrites the table from them).
    #[test]
    fn the_docs_list_every_setting() {
        let doc = include_str!("../../docs/storage.md");
        let table = super::table_under(doc, "## Configuration");
        if std::env::var_os("GIT_LOOP_BLESS").is_some() && table != super::table() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/storage.md");
            std::fs::write(path, doc.replacen(&table, &super::table(), 1)).expect("write docs/storage.md");
            return;
        }
        assert_eq!(table, super::table(), "docs/storage.md's settings table is made from settings::KEYS");
    }
}
