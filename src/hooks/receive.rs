//! The server-side `pre-receive` policy for a self-hosted bare remote: it refuses every update
//! that clients could not read or could never undo, and any change to a claim that the claim
//! protocol would not make. git-loop's own writes all pass — those of the previous release too.
//!
//! - Names: under `refs/loop/`, `refs/heads/loop/`, `refs/heads/loop-try/` and
//!   `refs/heads/loop-kept/` only the loop's own names (docs/storage.md, "The namespace"), and nothing
//!   named like a directory of the loop's refs (`refs/loop`, `refs/heads/loop`), which would
//!   block them all.
//! - `refs/loop/claims/<kind>/<name>`: the new value must be a claim record for that key as
//!   clients read it (`claim::decode`: it parses, its version is known, its `key` is the ref's,
//!   its holder is printable), and a live one with a lease no longer than `loop.maxLease` that
//!   has not expired and does not expire beyond that lease from now (both by the server's
//!   clock, give or take [`CLOCK_TOLERANCE`]); the update
//!   is one of: create-if-absent; replacing a tombstone (a released claim is free); a refresh
//!   or release by the same holder (a tombstone keeps the holder's name), carrying the holder's
//!   capability while the record it replaces is live and locked (`claim::proves`); a takeover of a record
//!   that has expired by the server's clock; a tombstone over a record that cannot be read or
//!   that this policy would refuse today (`claim release --force`). Deleting a claim ref is
//!   refused: a delete racing `git pack-refs` can resurrect a claim. With `loop.bindHolders`,
//!   the new record must also be the pusher's, and so must a live current one (see
//!   [`belongs`]).
//! - Task chains, journal chains, the notes ref, mission chains: every commit the push adds to
//!   them must be a record their readers accept (`records`, through the store's own decoders);
//!   a new task chain starts with the task's creation. Fast-forwards only, never deleted.
//! - `refs/loop/tries/<id>/<n>`: created holding its try-number record or a commit; the record
//!   may be replaced by the try's head; then only fast-forwards; never deleted.
//!   `refs/loop/done/<id>`: a commit; fast-forwards only; never deleted. Kept anchors
//!   (`refs/loop/kept/<tag>/...`) follow the rules of the anchor they keep.
//! - Task branches `loop/<id>`: commits, fast-forwards only, never deleted (they hold accepted
//!   work). Try branches and kept branches: commits, fast-forwards only; they may be deleted
//!   (their work stays alive under `refs/loop/`).
//! - `refs/loop/archive`: commits, fast-forwards only, never deleted, each folded task record a
//!   pushed fold adds the record at its tip (`store::fold::check_snapshots`). A delete of a task chain,
//!   journal chain, anchor, claim or branch is let through when the archive, as the server
//!   holds it, archived that ref at exactly the value deleted (a fold, `store::archive`); one
//!   created again at exactly its archived value (a clone of an older release pushing back what
//!   was folded) is refused.
//! - Any other ref: not its business.
//!
//! Each refusal is one line naming the ref, what is wrong and a hint (`Rejected`); clients
//! read them back from git's `remote:` lines (`git::program::PushReport::refusal`).
//!
//! New objects of the push are still in git's quarantine directory while pre-receive runs:
//! they are read from there first, then from the repository. Only the commits a push adds to a
//! history are read (`records::walk`), never a whole history.

use chrono::{DateTime, Duration, Utc};
use gix::ObjectId;

use super::records::{self, Objects};
use crate::error::{refused, usage, Refusal};
use crate::ids::{ClaimKey, Span, TaskId, WriterId};
use crate::mission::MissionId;
use crate::refs;
use crate::store::claim;

/// One line git gives a pre-receive hook: `<old oid> <new oid> <ref>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// `None` when the ref is being created.
    pub old: Option<ObjectId>,
    /// `None` when the ref is being deleted.
    pub new: Option<ObjectId>,
    pub name: String,
}

/// Parse the pre-receive hook's standard input.
pub fn parse(input: &str) -> Result<Vec<Update>, Refusal> {
    input
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut fields = line.splitn(3, ' ');
            let (Some(old), Some(new), Some(name)) = (fields.next(), fields.next(), fields.next()) else {
                return Err(usage(format!(
                    "pre-receive input line '{}' is not '<old> <new> <ref>'",
                    line.escape_debug()
                )));
            };
            Ok(Update { old: super::push::oid(old)?, new: super::push::oid(new)?, name: name.to_owned() })
        })
        .collect()
}

/// How far the server's clock and a holder's may disagree before a claim's times count as
/// wrong. A day: a machine whose clock is set to local time as if it were UTC is off by up to
/// 14 hours, and clients are built to work with such clocks (they measure leases by watching,
/// docs/concurrency.md); a claim that expired a day before it was pushed, or expires more than a
/// day past the longest lease, comes from a clock that is simply wrong (or a forged record).
pub const CLOCK_TOLERANCE: Duration = Duration::days(1);

/// The longest lease a server allows unless `loop.maxLease` says otherwise: above the 30 days
/// of a person's take-over, the longest lease git-loop itself takes.
pub const DEFAULT_MAX_LEASE: Duration = Duration::days(31);

/// The server repository's settings for the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `loop.maxLease`: the longest lease a claim may state.
    pub max_lease: Duration,
    /// `loop.bindHolders`: a claim is changed only by the user it belongs to.
    pub bind_holders: bool,
}

impl Policy {
    /// Read the policy from the server repository's configuration.
    pub fn from_config(repo: &gix::Repository) -> Result<Policy, Refusal> {
        use gix::bstr::ByteSlice as _;
        let config = repo.config_snapshot();
        let max_lease = match config.string("loop.maxLease") {
            None => DEFAULT_MAX_LEASE,
            Some(value) => {
                let value = value.to_str_lossy();
                value.parse::<Span>().map(|s| s.0).map_err(|_| {
                    usage(format!("loop.maxLease '{}' in the server's configuration is not a duration", value.escape_debug()))
                        .hint("set it to a number with a unit, such as 31d or 12h ('git config loop.maxLease 31d' in the repository)")
                })?
            }
        };
        let bind_holders = match config.try_boolean("loop.bindHolders") {
            Ok(bind) => bind.unwrap_or(false),
            Err(_) => {
                return Err(usage("loop.bindHolders in the server's configuration is not a boolean")
                    .hint("set it to true or false ('git config loop.bindHolders true' in the repository)"))
            }
        };
        Ok(Policy { max_lease, bind_holders })
    }

    /// What is wrong with claim record `record` (read by `claim::decode`: it has a holder) at
    /// `now` by this server's policy, if anything, with a hint: a lease that is not positive or longer than `max_lease`, an expiry beyond the
    /// longest lease from now; with `fresh` (a record being pushed), also an expiry already
    /// past.
    fn flaw(&self, record: &claim::Record, now: DateTime<Utc>, fresh: bool) -> Option<Refusal> {
        let clock = "check the pushing machine's clock ('date -u'), then claim again";
        if record.is_released() {
            return None;
        }
        let lease = record.expires_at - record.refreshed_at;
        if lease <= Duration::zero() {
            return Some(
                refused(format!(
                    "its lease is not positive (it expires at {}, refreshed at {})",
                    time(record.expires_at),
                    time(record.refreshed_at)
                ))
                .hint(CLAIM_HINT),
            );
        }
        if lease > self.max_lease {
            return Some(
                refused(format!(
                    "its lease of {} is longer than this server allows (loop.maxLease: {})",
                    span(lease),
                    span(self.max_lease)
                ))
                .hint(format!(
                    "claim for at most {} ('--ttl'), or ask the server's administrator to raise loop.maxLease",
                    span(self.max_lease)
                )),
            );
        }
        // Checked: loop.maxLease may be any duration, and the hook must not panic on it.
        let latest = now.checked_add_signed(self.max_lease + CLOCK_TOLERANCE);
        if latest.is_some_and(|latest| record.expires_at > latest) {
            return Some(
                refused(format!(
                    "it expires at {}, beyond the longest lease this server allows from now (loop.maxLease: {}; the server's clock reads {})",
                    time(record.expires_at),
                    span(self.max_lease),
                    time(now)
                ))
                .hint(clock),
            );
        }
        if fresh && record.expires_at.checked_add_signed(CLOCK_TOLERANCE).is_some_and(|t| t < now) {
            return Some(
                refused(format!(
                    "it expired at {}, before it was pushed (the server's clock reads {})",
                    time(record.expires_at),
                    time(now)
                ))
                .hint(clock),
            );
        }
        None
    }
}

/// What the server knows of a push besides its ref updates.
#[derive(Debug, Clone)]
pub struct Options {
    /// The server's clock.
    pub now: DateTime<Utc>,
    /// Who pushes, when the server authenticated them (`GL_USER` under gitolite, `REMOTE_USER`
    /// under smart HTTP with authentication).
    pub pusher: Option<String>,
}

/// The repository a push arrives at, with the push's quarantined objects and its policy.
pub struct Server {
    objects: Objects,
    policy: Policy,
}

impl Server {
    /// Open the repository at `git_dir`; `quarantine` is the push's object directory
    /// (`$GIT_QUARANTINE_PATH` while pre-receive runs), if any. A policy setting that cannot be
    /// read is an error: the hook then refuses every push until it is fixed.
    pub fn open(git_dir: &std::path::Path, quarantine: Option<&std::path::Path>) -> anyhow::Result<Server> {
        let objects = Objects::open(git_dir, quarantine)?;
        let policy = Policy::from_config(objects.server())?;
        Ok(Server { objects, policy })
    }

    fn claim_record(&self, key: &ClaimKey, id: ObjectId) -> Result<claim::Record, String> {
        match self.objects.find(id) {
            None => Err(format!("object {id} is missing")),
            Some((gix::objs::Kind::Blob, data)) => claim::decode(key, &data),
            Some((kind, _)) => Err(format!("it points to a {kind}, not a claim record")),
        }
    }
}

/// A ref update the policy refuses, why, and what the pusher can do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub name: String,
    /// One line, control characters escaped (it may quote what the pusher wrote).
    pub reason: String,
    /// One line too.
    pub hint: String,
}

/// Check every update of a push. Empty when all may go ahead.
pub fn check(server: &Server, opts: &Options, updates: &[Update]) -> Vec<Rejected> {
    updates
        .iter()
        .filter_map(|u| {
            check_one(server, opts, u).map(|r| Rejected {
                name: printable(&u.name),
                reason: printable(&r.message),
                hint: printable(r.hint.as_deref().unwrap_or(RECORD_HINT)),
            })
        })
        .collect()
}

/// What a ref of the loop's namespaces is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Claim(ClaimKey),
    Task(TaskId),
    Journal,
    Mission,
    /// The shared settings chain.
    Settings,
    Notes,
    Anchor(Anchor),
    TaskBranch,
    /// A try branch or a kept branch: forward-only, but may be deleted.
    LooseBranch,
    /// The archive of folded records: forward-only, never deleted.
    Archive,
}

/// A ref that holds on to a try's or a task's work.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Anchor {
    Try { task: TaskId, number: u32 },
    Done,
}

/// What `name` is, `None` when it is not in the loop's namespaces, `Err` when it is but is not
/// one of the loop's names.
fn classify(name: &str) -> Result<Option<Target>, String> {
    let component = |what: &str, value: &str| crate::ids::check_component(what, value).map_err(|r| r.message);
    if ["refs/loop", "refs/heads/loop", "refs/heads/loop-try", "refs/heads/loop-kept"].contains(&name)
        || name.starts_with("refs/notes/loop/")
    {
        return Err("a ref of that name would block the loop's own refs below it".into());
    }
    if name == refs::NOTES {
        return Ok(Some(Target::Notes));
    }
    if let Some(rest) = name.strip_prefix(refs::LOOP) {
        let (kind, rest) = rest.split_once('/').unwrap_or((rest, ""));
        return match kind {
            "tasks" => Ok(Some(Target::Task(rest.parse().map_err(|r: Refusal| r.message)?))),
            "claims" => match refs::claim_key_of(name) {
                Some(key) => Ok(Some(Target::Claim(key))),
                None => Err("not a claim ref: claims are 'refs/loop/claims/<kind>/<name>' (docs/storage.md)".into()),
            },
            "journal" => rest.parse::<WriterId>().map(|_| Some(Target::Journal)).map_err(|r| r.message),
            "missions" => rest.parse::<MissionId>().map(|_| Some(Target::Mission)).map_err(|r| r.message),
            "settings" if rest.is_empty() => Ok(Some(Target::Settings)),
            "archive" if rest.is_empty() => Ok(Some(Target::Archive)),
            "tries" | "done" | "kept" => anchor(&format!("{kind}/{rest}")).map(|a| Some(Target::Anchor(a))),
            _ => Err(format!(
                "'{}' is not one of the loop's refs (tasks, claims, journal, tries, done, missions, kept, settings, archive)",
                kind.escape_debug()
            )),
        };
    }
    if let Some(id) = name.strip_prefix(refs::TASK_BRANCHES) {
        component("task id", id)?;
        return Ok(Some(Target::TaskBranch));
    }
    if name.starts_with(refs::TRY_BRANCHES) || name.starts_with(refs::KEPT_BRANCHES) {
        branch(name.strip_prefix("refs/heads/").expect("both prefixes start with refs/heads/"))?;
        return Ok(Some(Target::LooseBranch));
    }
    Ok(None)
}

/// An anchor's path below `refs/loop/`: `tries/<id>/<n>`, `done/<id>`, or a kept one,
/// `kept/<clone>-<tag>/<anchor path>`.
fn anchor(path: &str) -> Result<Anchor, String> {
    let parts: Vec<&str> = path.splitn(3, '/').collect();
    match parts.as_slice() {
        ["tries", id, n] => {
            Ok(Anchor::Try { task: id.parse().map_err(|r: Refusal| r.message)?, number: try_number(n)? })
        }
        ["done", id] => id.parse::<TaskId>().map(|_| Anchor::Done).map_err(|r| r.message),
        ["kept", tag, rest] => {
            crate::ids::check_component("kept tag", tag).map_err(|r| r.message)?;
            anchor(rest)
        }
        _ => {
            Err("not an anchor: anchors are 'tries/<id>/<n>' and 'done/<id>', or kept ones below 'kept/<tag>/'".into())
        }
    }
}

/// A branch name without `refs/heads/`: `loop-try/<id>/<n>`, or a kept one,
/// `loop-kept/<clone>-<tag>/<branch>` (of a task branch `loop/<id>` or a try branch).
fn branch(name: &str) -> Result<(), String> {
    let parts: Vec<&str> = name.splitn(3, '/').collect();
    match parts.as_slice() {
        ["loop", id] => crate::ids::check_component("task id", id).map_err(|r| r.message),
        ["loop-try", id, n] => {
            crate::ids::check_component("task id", id).map_err(|r| r.message)?;
            try_number(n).map(|_| ())
        }
        ["loop-kept", tag, rest] => {
            crate::ids::check_component("kept tag", tag).map_err(|r| r.message)?;
            branch(rest)
        }
        _ => Err("not a loop branch: they are 'loop/<id>', 'loop-try/<id>/<n>' and 'loop-kept/<tag>/<branch>'".into()),
    }
}

/// A try number as the loop writes it: a positive decimal without leading zeros.
fn try_number(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n > 0 && n.to_string() == text => Ok(n),
        _ => Err(format!("'{}' is not a try number (1, 2, 3...)", text.escape_debug())),
    }
}

/// Hints, one per kind of refusal.
const NAME_HINT: &str = "the loop's own names are listed in docs/storage.md (\"The namespace\"); push other refs outside refs/loop/ and the loop/, loop-try/ and loop-kept/ branches";
const RECORD_HINT: &str =
    "push only what git-loop writes (records of a newer git-loop need a newer git-loop on this server too)";
const REWRITE_HINT: &str = "run 'git loop sync', which merges diverged histories instead of replacing them";
const KEPT_HINT: &str = "the loop's history and accepted work are kept for good; nothing needs deleting";
const CLAIM_HINT: &str =
    "take, refresh and release claims with 'git loop claim acquire|release', which write valid records";
const HELD_HINT: &str =
    "wait until it expires, or ask its holder to release it ('git loop claim list' shows who holds what)";

const CAPABILITY_HINT: &str = "only the clone that took a claim can refresh or release it while it is live; take it over once it expires, or ask its holder ('git loop claim list' shows who holds what)";

fn check_one(server: &Server, opts: &Options, u: &Update) -> Option<Refusal> {
    let target = match classify(&u.name) {
        Ok(Some(target)) => target,
        Ok(None) => return None,
        Err(why) => return Some(refused(format!("not a name the loop uses: {why}")).hint(NAME_HINT)),
    };
    let objects = &server.objects;
    // A record the archive holds at exactly this value goes: folded (`store::archive`), its
    // history kept by the archive, which was pushed first.
    let foldable = matches!(
        target,
        Target::Claim(_)
            | Target::Task(_)
            | Target::Journal
            | Target::Anchor(_)
            | Target::TaskBranch
            | Target::LooseBranch
    );
    if foldable {
        if let Ok(Some(archived)) = crate::store::archive::lookup(objects.server(), &u.name) {
            match (u.old, u.new) {
                (Some(old), None) if old == archived => return None,
                // Created again at its folded value: a clone that does not read the archive
                // pushed back what the fold retired.
                (None, Some(new)) if new == archived => return Some(
                    refused(
                        "this ref was folded into refs/loop/archive at that value; pushing it back would undo the fold",
                    )
                    .hint(
                        "upgrade git-loop on this clone: its sync reads the archive and never pushes folded refs back",
                    ),
                ),
                _ => {}
            }
        }
    }
    match target {
        Target::Archive => match u.new {
            None => Some(refused("the archive holds the loop's folded history; it is never deleted").hint(KEPT_HINT)),
            Some(new) => forward(server, u.old, new).or_else(|| {
                // The folded tasks' records it adds are the records at their tips: a clone
                // builds its task index from them (`store::archive::snapshot`).
                let read = |id| objects.find(id);
                crate::store::fold::check_snapshots(&read, objects.server().object_hash(), u.old, new)
                    .err()
                    .map(|why| refused(why).hint(RECORD_HINT))
            }),
        },
        Target::Claim(key) => check_claim(server, opts, u, &key),
        Target::Task(id) => chain(server, u, &mut |c| records::task_commit(objects, &id, c)),
        Target::Journal => chain(server, u, &mut records::journal_commit),
        Target::Notes => chain(server, u, &mut |c| records::notes_commit(objects, c)),
        Target::Mission => chain(server, u, &mut |c| records::mission_commit(objects, &u.name, c)),
        Target::Settings => check_settings(server, opts, u),
        Target::Anchor(anchor) => check_anchor(server, u, &anchor),
        Target::TaskBranch => match u.new {
            None => Some(refused("task branches hold accepted work; they are never deleted").hint(KEPT_HINT)),
            Some(new) => forward(server, u.old, new),
        },
        Target::LooseBranch => u.new.and_then(|new| forward(server, u.old, new)),
    }
}

/// The shared settings chain: records clones read; with `loop.bindHolders`, every record the
/// push adds must name the pusher as its `user`, so that what a clone shows as its author is who
/// pushed it.
fn check_settings(server: &Server, opts: &Options, u: &Update) -> Option<Refusal> {
    let objects = &server.objects;
    if !server.policy.bind_holders {
        return chain(server, u, &mut |c| records::settings_commit(objects, c).map(|_| ()));
    }
    let Some(pusher) = opts.pusher.as_deref() else {
        return Some(
            refused("this server binds shared settings to the users who push them (loop.bindHolders) but was not told who pushes")
                .hint("push through a server that authenticates you (it passes GL_USER or REMOTE_USER to the hook), or unset loop.bindHolders on the server"),
        );
    };
    chain(server, u, &mut |c| {
        let record = records::settings_commit(objects, c)?;
        match record.user.as_deref() {
            Some(user) if user == pusher => Ok(()),
            Some(user) => Err(format!(
                "commit {}: the settings record is user '{}''s but user '{}' pushed it (loop.bindHolders)",
                c.id,
                user.escape_debug(),
                pusher.escape_debug()
            )),
            None => Err(format!(
                "commit {}: the settings record names no user, and this server binds records to the users who push them (loop.bindHolders): set 'git config loop.user {}' and share again",
                c.id,
                pusher.escape_debug()
            )),
        }
    })
}

/// A chain of records: every commit the push adds must pass `valid`, and the chain only grows.
fn chain(
    server: &Server,
    u: &Update,
    valid: &mut dyn FnMut(&records::Commit) -> Result<(), String>,
) -> Option<Refusal> {
    let Some(new) = u.new else {
        return Some(refused("loop history is append-only; it is never deleted").hint(KEPT_HINT));
    };
    match records::walk(&server.objects, u.old, new, true, valid) {
        Ok(true) => None,
        Ok(false) => u.old.map(|old| rewrite(new, old)),
        // A rewrite is the clearer reason when it is one (its commits are usually not records
        // at all: someone pushed the wrong branch).
        Err(why) => match u.old.map(|old| (old, records::descends(&server.objects, old, new))) {
            Some((old, Ok(false))) => Some(rewrite(new, old)),
            _ => Some(refused(why).hint(RECORD_HINT)),
        },
    }
}

fn rewrite(new: ObjectId, old: ObjectId) -> Refusal {
    refused(format!("{new} does not descend from {old}: that would rewrite history")).hint(REWRITE_HINT)
}

/// A commit that may only move forward: `None` when `new` is a commit that descends from `old`.
fn forward(server: &Server, old: Option<ObjectId>, new: ObjectId) -> Option<Refusal> {
    match server.objects.kind(new) {
        Some(gix::objs::Kind::Commit) => {}
        Some(kind) => return Some(refused(format!("{new} is a {kind}, not a commit")).hint(RECORD_HINT)),
        None => return Some(refused(format!("object {new} is missing")).hint(RECORD_HINT)),
    }
    let old = old?;
    match records::descends(&server.objects, old, new) {
        Ok(true) => None,
        Ok(false) => Some(rewrite(new, old)),
        Err(why) => Some(refused(format!("cannot tell whether {new} descends from {old}: {why}")).hint(RECORD_HINT)),
    }
}

/// A try, done or kept anchor: a commit that only moves forward; a try anchor may first hold
/// its try-number record, which only the try's head replaces.
fn check_anchor(server: &Server, u: &Update, anchor: &Anchor) -> Option<Refusal> {
    let Some(new) = u.new else {
        return Some(
            refused("anchors keep a task's and its tries' work alive; they are never deleted").hint(KEPT_HINT),
        );
    };
    let is_commit = |id| server.objects.kind(id) == Some(gix::objs::Kind::Commit);
    let is_record = |id| match anchor {
        Anchor::Try { task, number } => records::try_record(&server.objects, id, task, *number).is_ok(),
        Anchor::Done => false,
    };
    let why = match u.old {
        Some(old) if is_commit(old) => return forward(server, Some(old), new),
        // A try-number record is replaced only by the try's head: a number is taken once.
        Some(old) if is_record(old) => {
            (!is_commit(new)).then(|| "a try-number record is replaced only by the try's head (a commit)".to_owned())
        }
        // Created, or replacing what no client could read (pushed before this policy).
        _ if is_commit(new) => None,
        _ => Some(match (anchor, server.objects.kind(new)) {
            (_, None) => format!("object {new} is missing"),
            (Anchor::Try { task, number }, Some(gix::objs::Kind::Blob)) => {
                records::try_record(&server.objects, new, task, *number).err()?
            }
            (Anchor::Try { .. }, Some(kind)) => {
                format!("it points to a {kind}; a try anchor holds its try-number record or the try's head")
            }
            (Anchor::Done, Some(kind)) => {
                format!("it points to a {kind}; a done anchor holds the commit that completed the task")
            }
        }),
    };
    why.map(|why| refused(why).hint(RECORD_HINT))
}

fn check_claim(server: &Server, opts: &Options, u: &Update, key: &ClaimKey) -> Option<Refusal> {
    let now = opts.now;
    let release = format!("release it with 'git loop claim release {key} --force'");
    let Some(new) = u.new else {
        return Some(
            refused("claims are released with a tombstone, never deleted (a deletion racing 'git pack-refs' can bring a claim back)")
                .hint(format!("release it with 'git loop claim release {key}'")),
        );
    };
    let record = match server.claim_record(key, new) {
        Ok(record) => record,
        Err(why) => return Some(refused(format!("the new record is not valid: {why}")).hint(CLAIM_HINT)),
    };
    if let Some(flaw) = server.policy.flaw(&record, now, true) {
        return Some(
            refused(format!("the new record is not valid: {}", flaw.message)).hint(flaw.hint.unwrap_or_default()),
        );
    }
    let pusher = if server.policy.bind_holders {
        let Some(user) = opts.pusher.as_deref() else {
            return Some(
                refused("this server binds claims to the users who push them (loop.bindHolders) but was not told who pushes")
                    .hint("push through a server that authenticates you (it passes GL_USER or REMOTE_USER to the hook), or unset loop.bindHolders on the server"),
            );
        };
        if !belongs(&record, user) {
            let why = match &record.user {
                Some(other) => format!(
                    "the record is user '{}''s but user '{}' pushed it (loop.bindHolders: a claim is changed only by its own user)",
                    other.escape_debug(),
                    user.escape_debug()
                ),
                None => format!(
                    "the record names no user and its holder '{}' is not user '{}''s (loop.bindHolders)",
                    record.holder.escape_debug(),
                    user.escape_debug()
                ),
            };
            return Some(refused(why).hint(format!(
                "name your clone's user as the server knows you: 'git config loop.user {}'",
                user.escape_debug()
            )));
        }
        Some(user)
    } else {
        None
    };
    // No old value: create-if-absent, which any valid record may do.
    let old = u.old?;
    let current = match server.claim_record(key, old) {
        Ok(current) => match server.policy.flaw(&current, now, false) {
            None => current,
            // Pushed before this policy (or before loop.maxLease was lowered): no client could
            // ever release it, so anyone may, as with a record that cannot be read.
            Some(_) if record.is_released() => return None,
            Some(flaw) => {
                return Some(
                    refused(format!("the current record would not be accepted today ({})", flaw.message)).hint(release),
                )
            }
        },
        // An unreadable record may be released (`claim release --force`), nothing else.
        Err(_) if record.is_released() => return None,
        Err(why) => return Some(refused(format!("the current record cannot be read ({why})")).hint(release)),
    };
    // The server's clock against the holder's: with clocks that disagree this may refuse a
    // fair takeover (while the holder's clock runs ahead) or fail to refuse an early one. It is
    // a second check only: what keeps a live claim is the clients' own rule (a takeover only
    // after watching the record unchanged for a whole lease, leased on exactly that record).
    if current.is_released() || now >= current.expires_at {
        return None;
    }
    // A refresh, release or rewrite in the live holder's name must carry its capability: the
    // holder's name is public (it is in the record), the capability's next token is not.
    if current.holder == record.holder {
        if let Err(why) = claim::proves(&current, &record) {
            return Some(
                refused(format!(
                    "'{key}' is held by '{}' until {}; this change in its name is refused: {why}",
                    current.holder.escape_debug(),
                    time(current.expires_at)
                ))
                .hint(CAPABILITY_HINT),
            );
        }
    }
    // A person's take-over (`git loop take-over`) passes a live claim from whoever works the
    // task to the person, who names whom they took it from; the walk sees it and stops. The
    // hook cannot tell people from impostors unless the server binds holders to users (then
    // only the claim's own user may, below).
    let person_takes_over = key.kind() == claim::TASK_KIND
        && record.holder.starts_with("person:")
        && record.took_over_from.as_deref() == Some(current.holder.as_str());
    if current.holder != record.holder && !person_takes_over {
        return Some(
            refused(format!(
                "'{key}' is held by '{}' until {}; '{}' may take it over only once it expires",
                current.holder.escape_debug(),
                time(current.expires_at),
                record.holder.escape_debug()
            ))
            .hint(HELD_HINT),
        );
    }
    match pusher {
        Some(user) if !belongs(&current, user) => Some(
            refused(format!(
                "'{key}' is held by '{}' ({}) until {}; user '{}' may not refresh, release or rewrite it",
                current.holder.escape_debug(),
                owner(&current),
                time(current.expires_at),
                user.escape_debug()
            ))
            .hint(HELD_HINT),
        ),
        _ => None,
    }
}

/// Whether claim record `record` is `user`'s (for `loop.bindHolders`): it says so in its `user`
/// field (written from the clone's `loop.user`, so a walk's `w-…` claims are its clone's
/// user's); or, when it names no user (a clone without `loop.user`, an earlier git-loop), its
/// holder is `user` itself, `<user>/<anything>` or `person:<user>@<domain>`.
pub fn belongs(record: &claim::Record, user: &str) -> bool {
    match &record.user {
        Some(named) => named == user,
        None => {
            let holder = record.holder.as_str();
            holder == user
                || holder.strip_prefix(user).is_some_and(|rest| rest.starts_with('/'))
                || holder.strip_prefix("person:").and_then(|p| p.split_once('@')).is_some_and(|(name, _)| name == user)
        }
    }
}

/// "user 'bob'", or "no user recorded".
fn owner(record: &claim::Record) -> String {
    match &record.user {
        Some(user) => format!("user '{}'", user.escape_debug()),
        None => "no user recorded".into(),
    }
}

fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// "31 d", "12 h", "90 min", "45 s".
fn span(d: Duration) -> String {
    let s = d.num_seconds();
    match s {
        s if s % 86_400 == 0 && s != 0 => format!("{} d", s / 86_400),
        s if s % 3600 == 0 && s != 0 => format!("{} h", s / 3600),
        s if s % 60 == 0 && s != 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// `text` on one line with control characters escaped: it may quote what a pusher wrote, and
/// git shows it on the pusher's terminal.
fn printable(text: &str) -> String {
    text.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_receive_lines_are_read() {
        let zero = "0".repeat(40);
        let one = "1".repeat(40);
        let updates =
            parse(&format!("{zero} {one} refs/loop/claims/node/t-1\n{one} {zero} refs/heads/x y\n")).expect("ok");
        assert_eq!(updates[0].old, None);
        assert_eq!(updates[1].new, None);
        assert_eq!(updates[1].name, "refs/heads/x y");
    }

    #[test]
    fn only_the_loops_own_names_are_in_its_namespaces() {
        let task: TaskId = "t-1".parse().expect("id");
        for (name, target) in [
            ("refs/loop/tasks/t-1", Some(Target::Task(task.clone()))),
            ("refs/loop/claims/node/t-1", Some(Target::Claim("node:t-1".parse().expect("key")))),
            ("refs/loop/journal/w-abc", Some(Target::Journal)),
            ("refs/loop/missions/v2", Some(Target::Mission)),
            ("refs/loop/settings", Some(Target::Settings)),
            ("refs/loop/tries/t-1/12", Some(Target::Anchor(Anchor::Try { task: task.clone(), number: 12 }))),
            ("refs/loop/done/t-1", Some(Target::Anchor(Anchor::Done))),
            ("refs/loop/kept/abcd2345-x9k2/tries/t-1/3", Some(Target::Anchor(Anchor::Try { task, number: 3 }))),
            ("refs/loop/kept/abcd2345-x9k2/done/t-1", Some(Target::Anchor(Anchor::Done))),
            ("refs/notes/loop", Some(Target::Notes)),
            ("refs/heads/loop/t-1", Some(Target::TaskBranch)),
            ("refs/heads/loop-try/t-1/2", Some(Target::LooseBranch)),
            ("refs/heads/loop-kept/abcd2345-x9k2/loop/t-1", Some(Target::LooseBranch)),
            ("refs/heads/loop-kept/abcd2345-x9k2/loop-try/t-1/2", Some(Target::LooseBranch)),
            ("refs/heads/main", None),
            ("refs/notes/commits", None),
            ("refs/loop-remotes/origin/loop/tasks/t-1", None),
        ] {
            assert_eq!(classify(name), Ok(target), "{name}");
        }
        for bad in [
            "refs/loop/tasks/T-1",
            "refs/loop/tasks/t-1/x",
            "refs/loop/tasks/",
            "refs/loop/claims/node",
            "refs/loop/claims/Node/t-1",
            "refs/loop/journal/a..b",
            "refs/loop/tries/t-1",
            "refs/loop/tries/t-1/0",
            "refs/loop/tries/t-1/02",
            "refs/loop/tries/t-1/x",
            "refs/loop/done/t-1/x",
            "refs/loop/kept/x/heads/t-1",
            "refs/loop/other/x",
            "refs/loop",
            "refs/heads/loop",
            "refs/heads/loop/a/b",
            "refs/heads/loop-try/t-1",
            "refs/heads/loop-kept/tag/main",
            "refs/notes/loop/x",
        ] {
            assert!(classify(bad).is_err(), "{bad} is refused");
        }
    }

    fn record(holder: &str, user: Option<&str>) -> claim::Record {
        let at: DateTime<Utc> = "2026-03-01T12:00:00Z".parse().expect("time");
        claim::Record {
            version: 1,
            key: "node:t-1".into(),
            holder: holder.into(),
            session: None,
            reason: None,
            host: "h".into(),
            pid: 1,
            boot_id: "b".into(),
            nonce: "n".into(),
            acquired_at: at,
            refreshed_at: at,
            expires_at: at + Duration::hours(1),
            took_over_from: None,
            released_at: None,
            lamport: None,
            user: user.map(Into::into),
            capability: None,
        }
    }

    #[test]
    fn a_claim_belongs_to_the_user_it_names_else_to_the_user_its_holder_names() {
        assert!(belongs(&record("w-3n5q7r9t", Some("alice")), "alice"));
        assert!(!belongs(&record("alice", Some("bob")), "alice"), "the user field decides when present");
        for holder in ["alice", "alice/agent-7", "person:alice@example.com"] {
            assert!(belongs(&record(holder, None), "alice"), "{holder}");
        }
        for holder in ["alicex", "w-3n5q7r9t", "person:bob@alice", "bob/alice", "person:alice"] {
            assert!(!belongs(&record(holder, None), "alice"), "{holder}");
        }
    }

    #[test]
    fn claims_that_no_client_could_undo_are_flawed() {
        let policy = Policy { max_lease: DEFAULT_MAX_LEASE, bind_holders: false };
        let flaw = |r: &claim::Record, now, fresh| policy.flaw(r, now, fresh).map(|r| r.message);
        let now: DateTime<Utc> = "2026-03-01T12:00:00Z".parse().expect("time");
        assert_eq!(flaw(&record("alice", None), now, true), None);
        let mut far = record("alice", None);
        far.expires_at = "9999-12-31T00:00:00Z".parse().expect("time");
        assert!(flaw(&far, now, true).expect("flawed").contains("longer than this server allows"));
        far.refreshed_at = far.expires_at - Duration::days(1);
        assert!(flaw(&far, now, true).expect("flawed").contains("beyond the longest lease"));
        let person = {
            let mut r = record("person:alice@example.com", None);
            r.expires_at = r.refreshed_at + Duration::days(30);
            r
        };
        assert_eq!(flaw(&person, now, true), None, "a person's 30-day take-over passes");
        let behind = now + Duration::hours(14);
        assert_eq!(flaw(&record("alice", None), behind, true), None, "a clock 14 h behind passes");
        let expired = now + Duration::days(2);
        assert!(flaw(&record("alice", None), expired, true).expect("flawed").contains("before it was pushed"));
        assert_eq!(flaw(&record("alice", None), expired, false), None, "a current record may be expired");
    }
}
