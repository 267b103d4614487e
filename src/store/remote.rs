//! Talking to the shared remote: reading refs (gix fetch) and changing them (git push with a
//! lease, the only use of the git program).
//!
//! A claim counts only once the remote accepted the push with
//! `--atomic --force-with-lease=<ref>:<expected>`. A push that fails on the client may still
//! have been applied on the server (the client was killed, the connection dropped after the
//! server committed), so any outcome other than a clean accept or a clean lease rejection is
//! "unknown" and settled by reading the remote ref back.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use gix::protocol::transport::client::blocking_io::Transport;
use gix::ObjectId;

use super::cas::{self, Cas, Expect};
use super::Store;
use crate::error::{Class, Refusal};
use crate::git::program::{self, PushUpdate};
use crate::refs;

/// How long a claim record read from the remote counts as the remote's current one: a claimer
/// refusing on it within this time needs no second read (see `claim::acquire`). A release in
/// that window is a race the claimer lost, as it would be a moment after any read.
pub const MIRROR_FRESH: Duration = Duration::from_secs(2);

/// When this process last made its mirror of remote refs equal to the remote's values.
#[derive(Debug, Default)]
pub struct MirrorReads {
    /// Every claim the remote arbitrates, in one read (`refresh_claims`).
    claims: Option<Instant>,
    /// Single refs (`refresh_mirror`, and our own accepted pushes).
    refs: HashMap<String, Instant>,
}

/// Whether the local mirror of `name` was read from the remote (or written there by us) less
/// than `MIRROR_FRESH` ago.
pub fn mirrored_recently(store: &Store, name: &str) -> bool {
    let reads = store.mirror_reads.lock().unwrap_or_else(|e| e.into_inner());
    let fresh = |at: &Instant| at.elapsed() < MIRROR_FRESH;
    reads.refs.get(name).is_some_and(fresh) || (is_arbitrated_claim(name) && reads.claims.as_ref().is_some_and(fresh))
}

fn note_mirrored(store: &Store, name: &str, at: Instant) {
    let mut reads = store.mirror_reads.lock().unwrap_or_else(|e| e.into_inner());
    reads.refs.retain(|_, at| at.elapsed() < MIRROR_FRESH);
    reads.refs.insert(name.to_owned(), at);
}

/// A claim ref that the remote decides (walker claims stay in their clone).
fn is_arbitrated_claim(name: &str) -> bool {
    refs::claim_key_of(name).is_some_and(|key| key.kind() != super::claim_record::LOCAL_KIND)
}

/// Change `name` on the remote from `expect` to `new` (None deletes), then mirror the
/// remote's value locally. `Lost` carries the remote's actual value.
pub fn swap(store: &Store, remote: &str, name: &str, expect: Expect, new: Option<ObjectId>) -> Result<Cas> {
    swap_checked(store, remote, name, expect, new, &[])
}

/// `swap`, only if the remote's refs named in `checks` still hold the given values (they are
/// pushed as they are, leased on those values: the same atomic push, nothing changed). When
/// a check fails, and only then, the outcome is `Lost` with the value `expect` named: the
/// ref itself is as expected, and the caller's view of a checked ref is old.
pub fn swap_checked(
    store: &Store,
    remote: &str,
    name: &str,
    expect: Expect,
    new: Option<ObjectId>,
    checks: &[(String, ObjectId)],
) -> Result<Cas> {
    swap_with(store, remote, name, expect, new, checks, Mirror::Local)
}

/// Change branch `name` (a full ref name) on the remote from `old` to `new` by a push with a
/// lease — the landing queue moving its target on the shared remote: never a force push, and
/// `new` descends from `old`, so it is a fast-forward as well. The local branch of that name is
/// left alone (it may be checked out, or hold work of its own): the remote's value is kept in
/// its mirror (`refs/loop-remotes/<remote>/heads/...`). `Lost` carries the remote's value,
/// whose objects are fetched.
pub fn swap_branch(store: &Store, remote: &str, name: &str, old: ObjectId, new: ObjectId) -> Result<Cas> {
    swap_with(store, remote, name, Expect::Is(old), Some(new), &[], Mirror::Only)
}

/// Set branch `name` (a full ref name) on the remote to `new` if it holds what `expect` says,
/// by a push with a lease (a request branch of the forge's landing). Only the mirror follows.
pub fn push_branch(store: &Store, remote: &str, name: &str, expect: Expect, new: ObjectId) -> Result<Cas> {
    swap_with(store, remote, name, expect, Some(new), &[], Mirror::Only)
}

/// The remote's value of branch `name` (fetched, with its objects, into its mirror), leaving
/// the local branch alone.
pub fn read_branch(store: &Store, remote: &str, name: &str) -> Result<Option<ObjectId>> {
    let fetched = fetch(store, remote, &[name.to_owned()])?;
    Ok(fetched.remote_refs.iter().find(|(n, _)| n == name).map(|(_, id)| *id))
}

/// Where a swap keeps what the remote now holds: the local ref of the same name (claims and
/// records, which mirror the remote), or only the mirror (a branch the landing queue moves).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mirror {
    Local,
    Only,
}

fn swap_with(
    store: &Store,
    remote: &str,
    name: &str,
    expect: Expect,
    new: Option<ObjectId>,
    checks: &[(String, ObjectId)],
    mirror: Mirror,
) -> Result<Cas> {
    let read_back = |store: &Store| -> Result<Option<ObjectId>> {
        match mirror {
            Mirror::Local => refresh_mirror(store, remote, name),
            Mirror::Only => read_branch(store, remote, name),
        }
    };
    let lease = match expect {
        Expect::Absent => None,
        Expect::Is(id) => Some(id),
    };
    let mut updates = vec![PushUpdate { dst: name.to_owned(), src: new, expect: Some(lease) }];
    updates.extend(checks.iter().map(|(check, id)| PushUpdate {
        dst: check.clone(),
        src: Some(*id),
        expect: Some(Some(*id)),
    }));
    let pushed_at = Instant::now();
    let timeout = store.settings().transfer_timeout()?;
    crate::failpoint::write_point();
    let pushed = program::push(store.workdir(), remote, &updates, &[], timeout);
    crate::failpoint::write_point();
    if pushed.is_ok() {
        note_answer(remote);
    }
    match pushed {
        Ok(report) if report.all_ok() => {
            match mirror {
                Mirror::Local => {
                    set_local(store, name, new)?;
                    note_mirrored(store, name, pushed_at);
                }
                Mirror::Only => mirror_pushed(store, remote, &updates[..1])?,
            }
            Ok(Cas::Applied)
        }
        Ok(report) => {
            // Another claimer got there first. When that is a claim, others are claiming
            // too: learn all their claims in this one read, so that the next choice is made
            // knowing them, instead of losing one claim after another to them.
            let actual = if is_arbitrated_claim(name) {
                refresh_claims(store, remote)?.get(name).copied()
            } else {
                read_back(store)?
            };
            if let Some(refusal) = report.refusal() {
                // A lease that held when the client checked it but not when the server took
                // the ref lock (another clone's push landed in between) is reported as
                // "[remote rejected] (atomic transaction failed)", like a refusal: it is a
                // lost race exactly when the remote no longer holds what we expected.
                if actual != lease {
                    return Ok(Cas::Lost { actual });
                }
                // Policy, not a race: the local mirror equals the remote; say so.
                let hint = refusal.hint.unwrap_or_else(|| {
                    "the remote's hooks or settings forbid it; ask its administrator, or see 'git loop sync'".into()
                });
                return Err(Refusal::new(
                    Class::Refused,
                    format!("remote '{remote}' refused the update of '{}': {}", refusal.dst, refusal.why),
                )
                .hint(hint)
                .into());
            }
            Ok(Cas::Lost { actual })
        }
        Err(err) => {
            if crate::error::find_refusal(&err).is_some() {
                return Err(err);
            }
            if let Fault::Unhealable(refusal) = fault(remote, &err) {
                return Err(unhealable(remote, refusal, err));
            }
            // Unknown outcome (the connection reset, the push cut by the transfer timeout): the
            // server is the judge.
            let actual = read_back(store).with_context(|| {
                format!("the push to '{remote}' failed and the remote could not be read back: {err:#}")
            })?;
            if actual == new {
                Ok(Cas::Applied)
            } else {
                Ok(Cas::Lost { actual })
            }
        }
    }
}

/// Make the local ref `name` hold what the remote holds (fetching the object), and return it.
pub fn refresh_mirror(store: &Store, remote: &str, name: &str) -> Result<Option<ObjectId>> {
    let started = Instant::now();
    let fetched = fetch(store, remote, &[name.to_owned()])?;
    let actual = fetched.remote_refs.iter().find(|(n, _)| n == name).map(|(_, id)| *id);
    set_local(store, name, actual)?;
    note_mirrored(store, name, started);
    Ok(actual)
}

/// Make every local claim ref the remote decides hold what the remote holds, and return the
/// remote's claims. One listing of the remote's claim refs; then, if any differs here, one
/// fetch of exactly those (a wildcard refspec would have gix lock every claim ref it maps,
/// changed or not, and gix refuses a wildcard without a destination).
pub fn refresh_claims(store: &Store, remote: &str) -> Result<HashMap<String, ObjectId>> {
    let started = Instant::now();
    let mut theirs: HashMap<String, ObjectId> =
        list(store, remote, refs::CLAIMS)?.into_iter().filter(|(name, _)| is_arbitrated_claim(name)).collect();
    store.fresh_refs();
    let mut ours = HashMap::new();
    let platform = store.repo.references().context("could not list refs")?;
    for reference in platform.prefixed(refs::CLAIMS).context("could not list claim refs")?.flatten() {
        let name = reference.name().as_bstr().to_string();
        if let Some(id) = reference.target().try_id().filter(|_| is_arbitrated_claim(&name)) {
            ours.insert(name, id.to_owned());
        }
    }
    let changed: Vec<String> =
        theirs.iter().filter(|(name, id)| ours.get(*name) != Some(id)).map(|(name, _)| name.clone()).collect();
    if !changed.is_empty() {
        // What this fetch sees is newer still than the listing.
        let fetched = fetch(store, remote, &changed)?.remote_refs;
        for name in &changed {
            if !fetched.iter().any(|(n, _)| n == name) {
                theirs.remove(name);
            }
        }
        theirs.extend(fetched);
        for name in &changed {
            set_local(store, name, theirs.get(name).copied())?;
        }
    }
    for name in ours.keys().filter(|name| !theirs.contains_key(*name)) {
        set_local(store, name, None)?;
    }
    store.mirror_reads.lock().unwrap_or_else(|e| e.into_inner()).claims = Some(started);
    Ok(theirs)
}

/// Set the local ref `name` to `value` whatever it holds now (it mirrors the remote, which
/// decided already).
pub fn set_local(store: &Store, name: &str, value: Option<ObjectId>) -> Result<()> {
    for _ in 0..20 {
        let current = crate::git::ref_target(&store.repo, name)?;
        if current == value {
            return Ok(());
        }
        let outcome = match (current, value) {
            (current, Some(new)) => {
                cas::update(store, name, Expect::from_current(current), new, "loop: mirror remote")?
            }
            (Some(old), None) => cas::delete(store, name, old)?,
            (None, None) => return Ok(()),
        };
        if outcome == Cas::Applied {
            return Ok(());
        }
    }
    anyhow::bail!("could not mirror '{name}' locally: it kept changing")
}

/// What a fetch saw on the remote: every advertised ref that matched the sources.
#[derive(Debug)]
pub struct Fetched {
    pub remote_refs: Vec<(String, ObjectId)>,
}

/// The remote `name`, refused with a hint when it is not configured.
fn find_remote<'r>(store: &'r Store, name: &str) -> Result<gix::Remote<'r>> {
    find_remote_in(&store.repo, name)
}

fn find_remote_in<'r>(repo: &'r gix::Repository, name: &str) -> Result<gix::Remote<'r>> {
    Ok(repo.find_remote(name).map_err(|_| {
        Refusal::new(Class::Usage, format!("remote '{name}' is not configured")).hint(
            "add it with 'git remote add <name> <url>', or fix 'loop.remote' with 'git loop init --remote <name>'",
        )
    })?)
}

/// Whether this build of gix cannot talk to `handle` (http and https: gix would need libcurl or
/// a TLS stack), or should not (ssh), so that the git program must (see `program::fetch`).
fn needs_git_program(handle: &gix::Remote<'_>) -> bool {
    let scheme = handle.url(gix::remote::Direction::Fetch).map(|u| u.scheme.clone());
    // ssh too: gix runs `ssh` itself and would wait for a stalled one for ever; the git
    // program's calls are stopped after the transfer timeout.
    matches!(scheme, Some(gix::url::Scheme::Http) | Some(gix::url::Scheme::Https) | Some(gix::url::Scheme::Ssh))
}

/// The refs `remote` holds under `prefix` (e.g. `refs/loop/claims/`), without fetching
/// anything. A transient fault is tried again (see `answered`).
pub fn list(store: &Store, remote: &str, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
    let timeout = store.settings().transfer_timeout()?;
    answered(store, remote, || {
        let handle = find_remote(store, remote)?;
        if needs_git_program(&handle) {
            return program::ls_remote(store.workdir(), remote, &[prefix.to_owned()], timeout);
        }
        let mut handle = handle.with_fetch_tags(gix::remote::fetch::Tags::None);
        handle
            .replace_refspecs([format!("+{prefix}*:{prefix}*").as_str()], gix::remote::Direction::Fetch)
            .context("invalid fetch refspec")?;
        let connection = connect(&handle, remote, timeout)?;
        let (ref_map, _) = connection
            .ref_map(gix::progress::Discard, gix::remote::ref_map::Options::default())
            .with_context(|| format!("could not list the refs of remote '{remote}'"))?;
        Ok(advertised(&ref_map))
    })
}

/// A connection to `handle` for fetching. Over `git://` the socket is gix's own but made here,
/// with `timeout` on every read and write: gix's daemon transport sets none, so a connection
/// that stalls would hang its fetch for ever. (Other transports: `file://` has no network, and
/// http, https and ssh go through the git program, which `program` stops after its timeout.)
fn connect<'a, 'repo>(
    handle: &'a gix::Remote<'repo>,
    remote: &str,
    timeout: Duration,
) -> Result<gix::remote::Connection<'a, 'static, 'repo, Box<dyn Transport + Send>>> {
    use gix::protocol::transport::client::git;
    let (url, version) = handle
        .sanitized_url_and_version(gix::remote::Direction::Fetch)
        .with_context(|| format!("could not connect to remote '{remote}'"))?;
    if url.scheme != gix::url::Scheme::Git {
        return handle
            .connect(gix::remote::Direction::Fetch)
            .with_context(|| format!("could not connect to remote '{remote}'"));
    }
    let host = url.host().with_context(|| format!("remote '{remote}' has a git:// URL without a host"))?.to_owned();
    let port = url.port.unwrap_or(9418);
    let address = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .with_context(|| format!("could not connect to remote '{remote}': cannot resolve '{host}'"))?
        .next()
        .with_context(|| format!("could not connect to remote '{remote}': '{host}' has no address"))?;
    let stream = std::net::TcpStream::connect_timeout(&address, timeout.min(CONNECT_TIMEOUT))
        .with_context(|| format!("could not connect to remote '{remote}' ({address})"))?;
    stream.set_read_timeout(Some(timeout)).context("could not set the connection's timeout")?;
    stream.set_write_timeout(Some(timeout)).context("could not set the connection's timeout")?;
    let write = stream.try_clone().context("could not use the connection")?;
    let connection = git::blocking_io::Connection::new(
        stream,
        write,
        version,
        url.path.clone(),
        Some((host, url.port)),
        git::ConnectMode::Daemon,
        false,
    );
    Ok(handle.to_connection_with_transport(Box::new(connection) as Box<dyn Transport + Send>))
}

/// How long connecting to a `git://` remote may take (or the transfer timeout, if shorter).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The refs a ref map says the remote advertised, with the objects they point to.
fn advertised(ref_map: &gix::remote::fetch::RefMap) -> Vec<(String, ObjectId)> {
    ref_map
        .mappings
        .iter()
        .filter_map(|m| {
            let (name, id, _) = match &m.remote {
                gix::remote::fetch::refmap::Source::Ref(r) => r.unpack(),
                gix::remote::fetch::refmap::Source::ObjectId(_) => return None,
            };
            Some((name.to_string(), id?.to_owned()))
        })
        .collect()
}

/// Fetches that bring fewer objects than this are stored as loose objects, not as a pack, as
/// git's `fetch.unpackLimit` does. A pack per fetch is what piles packs up; and every pack
/// that appears takes a slot in the index table of each gix handle that comes to see it,
/// slots that gix 0.90 hands out again wrongly once a long-lived handle has used each of them
/// (a pack it then never loads: its objects read as missing, "object could not be found").
/// A walk fetches thousands of times; its handles must see packs only from the rare repack.
const UNPACK_LIMIT: u32 = 100;

/// Fetch `sources` — exact ref names, or prefixes ending in `*` — from `remote` into their
/// mirrors under `refs/loop-remotes/<remote>/` (see `refs::mirror`), and delete the mirrors of
/// those refs the remote no longer advertises (gix never prunes). Tags are not fetched.
///
/// Only fetches write mirrors, and one fetch at a time per clone (`.git/loop/fetch.lock`): two
/// fetches updating one mirror ref at once would fail each other's ref transaction. Callers
/// never read a mirror to decide anything; they get the listing, and update their own refs by
/// compare-and-swap.
///
/// The fetch runs in a repository handle of its own, opened for it: gix's negotiation looks
/// our refs' objects up without ever reading the pack directory again, so in a handle that
/// has not looked since a repack or another handle's fetch moved those objects into a new pack
/// every fetch fails ("object could not be found"); and the pack it receives is never seen by
/// `store`'s handle (see `UNPACK_LIMIT`). Opening costs about a millisecond. A repack during
/// the fetch has the same effect on its handle: the fetch is then tried again in a new one.
pub fn fetch(store: &Store, remote: &str, sources: &[String]) -> Result<Fetched> {
    let timeout = store.settings().transfer_timeout()?;
    answered(store, remote, || {
        // Taken for each attempt, not across the waits between them: the other threads and
        // processes of this clone fetch in between. A holder keeps it for at most a transfer
        // timeout per attempt.
        let wait = Duration::from_secs(120) + timeout * ATTEMPTS;
        let _one_at_a_time = super::flock::FileLock::exclusive(&store.layout()?.fetch_lock(), "fetching", wait)?;
        let refspecs: Vec<String> = sources.iter().map(|s| format!("+{s}:{}", refs::mirror(remote, s))).collect();
        let handle = find_remote(store, remote)?;
        let fetched = if needs_git_program(&handle) {
            fetch_with_git(store, remote, sources, &refspecs, timeout)?
        } else {
            // Claim records are blobs: there is no history to negotiate, and offering every local
            // commit as a "have" costs more than the records themselves.
            let blobs_only = sources.iter().all(|s| s.starts_with(refs::CLAIMS));
            fetch_gix_retrying(store, remote, &refspecs, blobs_only, &mut |_, _| {})?
        };
        prune_mirrors(store, remote, sources, &fetched.remote_refs)?;
        Ok(fetched)
    })
}

/// How many times one call to a remote is made when it meets a transient fault (see `answered`).
pub const ATTEMPTS: u32 = 4;

/// Run `call`, a call to `remote`, again when it fails on a fault that may heal — a connection
/// reset or refused, a timeout or a stall cut by the transfer timeout, an HTTP 5xx or 429 —
/// after a jittered backoff (0.2, 0.6, 1.8 s, each ± half), [`ATTEMPTS`] times in all; then
/// the error says the remote did not answer ([`NoAnswer`]). A fault that cannot heal (the
/// remote refuses our credentials, has no repository there) is a refusal at once, with a
/// hint. Every outcome is noted for [`health`].
pub fn answered<T>(store: &Store, remote: &str, mut call: impl FnMut() -> Result<T>) -> Result<T> {
    let _ = store;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match call() {
            Ok(value) => {
                note_answer(remote);
                return Ok(value);
            }
            Err(err) => match fault(remote, &err) {
                Fault::Transient(why) if attempt < ATTEMPTS => {
                    note_silence(remote, &why, false);
                    std::thread::sleep(backoff(attempt));
                }
                Fault::Transient(why) => return Err(gave_up(remote, why, err)),
                Fault::Unhealable(refusal) => return Err(unhealable(remote, refusal, err)),
                Fault::Other => return Err(err),
            },
        }
    }
}

/// The wait before attempt `attempt + 1`: 0.2 s × 3^(attempt − 1), ± half, at most 10 s.
pub fn backoff(attempt: u32) -> Duration {
    let base = 200u64.saturating_mul(3u64.saturating_pow(attempt.saturating_sub(1))).min(10_000);
    let bytes = crate::ids::random_bytes(2);
    let jitter = u64::from(u16::from_le_bytes([bytes[0], bytes[1]]));
    Duration::from_millis(base / 2 + jitter % base.max(1))
}

/// A remote that did not answer, however often it was asked: a fault that may heal (the
/// network, the server's load), after [`ATTEMPTS`] calls. Callers that can wait (a walk) wait
/// and ask again; a command run by hand stops with it. Its cause is the last attempt's error.
#[derive(Debug)]
pub struct NoAnswer {
    pub remote: String,
    /// What the last attempt met, on one line.
    pub why: String,
    cause: anyhow::Error,
}

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "remote '{}' {NO_ANSWER} ({}); nothing was lost", self.remote, self.why)
    }
}

impl std::error::Error for NoAnswer {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// `err`, a call to `remote` that met `why` once too often, as a [`NoAnswer`] (noted for
/// [`health`]).
pub fn gave_up(remote: &str, why: String, err: anyhow::Error) -> anyhow::Error {
    note_silence(remote, &why, true);
    NoAnswer { remote: remote.to_owned(), why, cause: err }.into()
}

/// A refusal for a call to `remote` that met a fault which will not heal by itself, marked
/// [`CannotHeal`]. (`err`, git's own words, is in the refusal's message already.)
pub fn unhealable(remote: &str, refusal: Refusal, err: anyhow::Error) -> anyhow::Error {
    drop(err);
    CannotHeal { remote: remote.to_owned(), refusal }.into()
}

/// A fault of the shared remote that will not heal by itself — it refuses this clone's
/// credentials, has no repository at its URL, or its hook refuses what this clone publishes:
/// a walk stops on it. Its cause is the refusal that says what to do (so the command line finds
/// and shows it as any refusal).
#[derive(Debug, Clone)]
pub struct CannotHeal {
    pub remote: String,
    pub refusal: Refusal,
}

impl std::fmt::Display for CannotHeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "remote '{}' cannot be worked with until a person acts", self.remote)
    }
}

impl std::error::Error for CannotHeal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.refusal)
    }
}

/// Whether `err` is a fault of a remote that will not heal by itself ([`CannotHeal`]).
pub fn cannot_heal(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.downcast_ref::<CannotHeal>().is_some())
}

/// Whether `err` says a remote did not answer ([`NoAnswer`]): worth waiting for.
pub fn no_answer(err: &anyhow::Error) -> Option<&NoAnswer> {
    err.chain().find_map(|cause| cause.downcast_ref::<NoAnswer>())
}

/// What a failed call to a remote met.
#[derive(Debug)]
pub enum Fault {
    /// A fault that may heal by itself; what it was, on one line.
    Transient(String),
    /// One that will not: the remote refuses us, or is not there. Said with what to do.
    Unhealable(Refusal),
    /// Not the network's doing (a refusal of ours, a local error).
    Other,
}

/// Tell what `err`, a failed call to `remote`, met — by what git and gix say, which is all
/// either reports of a transport's failure.
pub fn fault(remote: &str, err: &anyhow::Error) -> Fault {
    if no_answer(err).is_some() {
        return Fault::Transient(no_answer(err).map(|n| n.why.clone()).unwrap_or_default());
    }
    if crate::error::find_refusal(err).is_some() {
        return Fault::Other;
    }
    let text = format!("{err:#}");
    let lower = text.to_ascii_lowercase();
    let has = |signs: &[&str]| signs.iter().any(|sign| lower.contains(sign));
    let why = || one_line(&text);
    const DENIED: &[&str] = &[
        "authentication failed",
        "permission denied",
        "returned error: 401",
        "returned error: 403",
        "could not read username",
        "could not read password",
        "terminal prompts disabled",
        "host key verification failed",
        "access denied",
    ];
    const GONE: &[&str] = &[
        "repository not found",
        "does not appear to be a git repository",
        "returned error: 404",
        "not exported",
        "no such repository",
    ];
    const TRANSIENT: &[&str] = &[
        "connection reset",
        "connection refused",
        "connection closed",
        "connection timed out",
        "timed out",
        program::TIMED_OUT,
        program::STALLED,
        "broken pipe",
        "early eof",
        "unexpected disconnect",
        "hung up",
        "rpc failed",
        "returned error: 5",
        "returned error: 429",
        "couldn't connect",
        "failed to connect",
        "network is unreachable",
        "no route to host",
        "could not resolve host",
        "temporary failure",
        "resource temporarily unavailable",
        "would block",
        "failed to fill whole buffer",
        "unexpected end of file",
        "end of file",
        "kex_exchange_identification",
        "could not read from remote repository",
        "protocol error",
        // A ref the listing named was deleted (a fold's retired refs) or moved before
        // upload-pack served it: fetched again, the new listing holds.
        "not our ref",
    ];
    // git over http: "repository '<url>' not found".
    let missing = lower.contains("repository '") && lower.contains("' not found");
    if has(GONE) || missing {
        return Fault::Unhealable(
            Refusal::new(Class::Failure, format!("remote '{remote}' has no repository at its URL ({})", why()))
                .hint(format!("check 'git remote get-url {remote}'; if it moved, 'git remote set-url {remote} <url>'")),
        );
    }
    if has(DENIED) {
        return Fault::Unhealable(
            Refusal::new(Class::Failure, format!("remote '{remote}' refused this clone ({})", why())).hint(format!(
                "check the credentials git uses for '{remote}' (ssh keys, a credential helper, 'git remote get-url {remote}'), then run 'git loop sync'"
            )),
        );
    }
    if has(&["resource temporarily unavailable", "would block"]) {
        // What a socket's read timeout reads as.
        return Fault::Transient(format!("{} (a read timed out)", program::TIMED_OUT));
    }
    if has(TRANSIENT) {
        return Fault::Transient(why());
    }
    Fault::Other
}

/// The gist of a failed call's error chain on one line: git's own words (from its first
/// `fatal:` or `error:`), else the innermost cause.
fn one_line(text: &str) -> String {
    // Else gix's chain, without our own context in front ("could not fetch from remote 'x': ").
    let ours = text.strip_prefix("could not ").and_then(|rest| rest.split_once("': ")).map(|(_, rest)| rest);
    let gist = ["fatal: ", "error: ", program::TIMED_OUT, program::STALLED]
        .iter()
        .filter_map(|mark| text.find(mark).map(|at| &text[at..]))
        .next()
        .unwrap_or_else(|| ours.unwrap_or(text));
    let gist = gist.split(": 'git ").next().unwrap_or(gist);
    let gist = gist.strip_prefix("fatal: ").or_else(|| gist.strip_prefix("error: ")).unwrap_or(gist);
    let mut line: String = gist.lines().next().unwrap_or(gist).chars().filter(|c| !c.is_control()).collect();
    if line.len() > 200 {
        let cut = (0..=200).rev().find(|i| line.is_char_boundary(*i)).unwrap_or(0);
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// Whether a remote answers, as this process last found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Its last call was answered (or none was made).
    Answering,
    /// Calls to it have failed since `since` on faults that may heal; the last met `why`.
    Silent { since: std::time::Instant, why: String },
}

/// Per remote: since when its calls have failed, what the last met, and whether one gave up.
type Silences = HashMap<String, (Instant, String, bool)>;

fn silences() -> &'static std::sync::Mutex<Silences> {
    static SILENCES: std::sync::OnceLock<std::sync::Mutex<Silences>> = std::sync::OnceLock::new();
    SILENCES.get_or_init(Default::default)
}

/// A call to `remote` met a fault that may heal; `gave_up`: it was the last attempt.
fn note_silence(remote: &str, why: &str, gave_up: bool) {
    let mut silences = silences().lock().unwrap_or_else(|e| e.into_inner());
    let entry = silences.entry(remote.to_owned()).or_insert_with(|| (Instant::now(), String::new(), false));
    entry.1 = why.to_owned();
    entry.2 |= gave_up;
}

fn note_answer(remote: &str) {
    silences().lock().unwrap_or_else(|e| e.into_inner()).remove(remote);
}

/// Whether `remote` answers, as this process's calls to it found it last (every thread of a
/// walk shares this): an outage begins with the first call that met a fault which may heal —
/// it counts once some call gave up on it (a reset that the next attempt gets past is no
/// outage) — and ends with the next call answered.
pub fn health(remote: &str) -> Health {
    match silences().lock().unwrap_or_else(|e| e.into_inner()).get(remote) {
        Some((since, why, true)) => Health::Silent { since: *since, why: why.clone() },
        _ => Health::Answering,
    }
}

/// What [`NoAnswer`] always says, for readers of its message (a walk's warnings): one outage
/// is said once, however many calls meet it.
pub const NO_ANSWER: &str = "did not answer";

/// `fetch_with_gix`, tried again while it finds one of our objects missing; `before_receive`
/// is told the attempt (from 1) and shown each handle (see `fetch_with_gix`).
fn fetch_gix_retrying(
    store: &Store,
    remote: &str,
    refspecs: &[String],
    blobs_only: bool,
    before_receive: &mut dyn FnMut(u32, &gix::Repository),
) -> Result<Fetched> {
    let mut attempt = 1;
    loop {
        match fetch_with_gix(store, remote, refspecs, blobs_only, |repo| before_receive(attempt, repo)) {
            Ok(fetched) => return Ok(fetched),
            // gix's negotiation reads every local ref's object without ever looking at the
            // pack directory again: a repack beside it (this clone's maintenance, in another
            // process or thread) that packs a loose object and prunes it makes that object
            // look missing (seen in fleets of four walks). A new handle sees the new pack. A
            // mirror whose object is really gone is only a copy of what the remote held: drop
            // it, and the fetch fills it again.
            Err(err) if object_missing(&err) && attempt < FETCH_TRIES => {
                attempt += 1;
                drop_broken_mirrors(store, remote)?;
            }
            Err(err) if object_missing(&err) => return Err(name_broken_refs(store, err)),
            Err(err) => return Err(err),
        }
    }
}

/// How many times a fetch that found one of our objects missing is tried (see `fetch`).
const FETCH_TRIES: u32 = 4;

/// Whether a fetch failed because a local object could not be found.
fn object_missing(err: &anyhow::Error) -> bool {
    format!("{err:#}").contains("could not be found")
}

/// A fetch that kept finding a local object missing: name the refs whose objects this clone
/// does not have (a corrupt repository), or, if none, the fetch's own error.
fn name_broken_refs(store: &Store, err: anyhow::Error) -> anyhow::Error {
    let mut broken = Vec::new();
    if let Ok(platform) = store.repo.references() {
        if let Ok(all) = platform.all() {
            for reference in all.flatten() {
                if let Some(id) = reference.target().try_id() {
                    if !store.repo.has_object(id) {
                        broken.push(format!("{} -> {id}", reference.name().as_bstr()));
                    }
                }
            }
        }
    }
    if broken.is_empty() {
        return err;
    }
    let more = if broken.len() > 3 { format!(" and {} more", broken.len() - 3) } else { String::new() };
    broken.truncate(3);
    Refusal::new(
        Class::Corrupt,
        format!("cannot fetch: refs point at objects this clone does not have: {}{more}", broken.join(", ")),
    )
    .hint("'git fsck' names what is missing; 'git loop doctor' tells which records are affected")
    .into()
}

/// Drop the mirror refs of `remote` whose objects this clone cannot read; how many. A mirror
/// is only a copy of what the remote held: the next fetch fills it again.
fn drop_broken_mirrors(store: &Store, remote: &str) -> Result<usize> {
    let prefix = refs::mirror(remote, "refs/");
    let mut broken = Vec::new();
    let platform = store.repo.references().context("could not list refs")?;
    for reference in platform.prefixed(prefix.as_str()).context("could not list the mirrors")?.flatten() {
        if let Some(id) = reference.target().try_id() {
            if !store.repo.has_object(id) {
                broken.push((reference.name().as_bstr().to_string(), id.to_owned()));
            }
        }
    }
    for (name, id) in &broken {
        // Lost: another process dropped or refilled it meanwhile; either way it is not broken.
        match cas::delete(store, name, *id)? {
            Cas::Applied | Cas::Lost { .. } => {}
        }
    }
    Ok(broken.len())
}

/// `fetch` through gix, in a handle of its own; `before_receive` sees that handle just before
/// the negotiation (tests use it to repack under it).
fn fetch_with_gix(
    store: &Store,
    remote: &str,
    refspecs: &[String],
    blobs_only: bool,
    before_receive: impl FnOnce(&gix::Repository),
) -> Result<Fetched> {
    let timeout = store.settings().transfer_timeout()?;
    let mut options = store.repo.open_options().clone();
    if blobs_only {
        options = options.cli_overrides(["fetch.negotiationAlgorithm=noop"]);
    }
    let repo = gix::open_opts(store.repo.git_dir(), options).context("could not open the repository to fetch into")?;
    let mut handle = find_remote_in(&repo, remote)?.with_fetch_tags(gix::remote::fetch::Tags::None);
    handle
        .replace_refspecs(refspecs.iter().map(String::as_str), gix::remote::Direction::Fetch)
        .context("invalid fetch refspec")?;
    let connection = connect(&handle, remote, timeout)?;
    let prepare = connection
        .prepare_fetch(gix::progress::Discard, gix::remote::ref_map::Options::default())
        .with_context(|| format!("could not list the refs of remote '{remote}'"))?;
    let remote_refs = advertised(prepare.ref_map());
    if prepare.ref_map().is_missing_required_mapping() {
        // The remote has none of these refs (yet): nothing to receive.
        return Ok(Fetched { remote_refs });
    }
    before_receive(&repo);
    let interrupt = AtomicBool::new(false);
    let outcome = prepare
        .receive(gix::progress::Discard, &interrupt)
        .with_context(|| format!("could not fetch from remote '{remote}'"))?;
    if let gix::remote::fetch::Status::Change { write_pack_bundle, .. } = &outcome.status {
        unpack_small(&repo, write_pack_bundle);
    }
    Ok(Fetched { remote_refs })
}

/// `fetch` through the git program, for http and https (this build of gix carries no http
/// transport; see `program::fetch`).
///
/// Smart HTTP is stateless: git lists the remote's refs in one request and asks for their
/// objects in another, and a ref that moved in between (a claim refreshed, a task closed) can
/// leave its listed object unreachable there — "did not send all necessary objects". That is
/// a lost race, not a failure: list and fetch again. So is a fetch that died on one of this
/// clone's worktrees changing under git's connectivity check. The values returned are the ones the
/// fetch wrote into the mirrors, so their objects are here.
fn fetch_with_git(
    store: &Store,
    remote: &str,
    sources: &[String],
    refspecs: &[String],
    timeout: Duration,
) -> Result<Fetched> {
    let prefixes: Vec<String> = sources.iter().map(|s| s.trim_end_matches('*').to_owned()).collect();
    let mut attempt = 0;
    let listed = loop {
        attempt += 1;
        match program::fetch(store.workdir(), remote, &prefixes, refspecs, timeout) {
            Ok(listed) => break listed,
            Err(err) if attempt < 6 && program::moved_while_fetching(&err) => {
                std::thread::sleep(Duration::from_millis(10 * attempt));
            }
            // A worktree of this clone added or removed while git read it (see
            // `program::worktree_changed_while_fetching`): nothing to do with the remote.
            Err(err) if attempt < 6 && program::worktree_changed_while_fetching(&err) => {
                std::thread::sleep(Duration::from_millis(10 * attempt));
            }
            Err(err) => return Err(err),
        }
    };
    let mut remote_refs = Vec::new();
    for (name, listed_id) in listed.into_iter().filter(|(name, _)| matches(sources, name)) {
        let mirrored = crate::git::ref_target(&store.repo, &refs::mirror(remote, &name))?;
        remote_refs.push((name, mirrored.unwrap_or(listed_id)));
    }
    Ok(Fetched { remote_refs })
}

/// What our mirrors last saw of `sources` on `remote` (no network).
pub fn mirrored(
    store: &Store,
    remote: &str,
    sources: &[String],
) -> Result<std::collections::BTreeMap<String, ObjectId>> {
    let root = format!("{}{remote}/", refs::REMOTES);
    let platform = store.repo.references().context("could not list refs")?;
    let mut out = std::collections::BTreeMap::new();
    for source in sources {
        let mirror = refs::mirror(remote, source.trim_end_matches('*'));
        let found: Vec<_> = match source.ends_with('*') {
            true => platform.prefixed(mirror.as_str()).context("could not list mirrored refs")?.flatten().collect(),
            false => store.repo.try_find_reference(mirror.as_str()).ok().flatten().into_iter().collect(),
        };
        for reference in found {
            let name = reference.name().as_bstr().to_string();
            if let Some(id) = reference.target().try_id() {
                out.insert(format!("refs/{}", name.strip_prefix(&root).unwrap_or_default()), id.to_owned());
            }
        }
    }
    Ok(out)
}

/// After a push the remote accepted: make the mirrors of the refs it set hold what we pushed
/// (under the fetch lock: only one writer of mirrors at a time).
pub fn mirror_pushed(store: &Store, remote: &str, pushed: &[PushUpdate]) -> Result<()> {
    let _one_at_a_time =
        super::flock::FileLock::exclusive(&store.layout()?.fetch_lock(), "fetching", Duration::from_secs(120))?;
    for update in pushed {
        set_local(store, &refs::mirror(remote, &update.dst), update.src)?;
    }
    Ok(())
}

/// Whether ref `name` is one of `sources` (an exact name, or under a `prefix*`).
fn matches(sources: &[String], name: &str) -> bool {
    sources.iter().any(|s| s.strip_suffix('*').map_or(s == name, |prefix| name.starts_with(prefix)))
}

/// Delete the mirrors of refs in `sources` that the remote did not list.
fn prune_mirrors(store: &Store, remote: &str, sources: &[String], listed: &[(String, ObjectId)]) -> Result<()> {
    let listed: std::collections::BTreeSet<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    let root = format!("{}{remote}/", refs::REMOTES);
    let platform = store.repo.references().context("could not list refs")?;
    let mut stale = Vec::new();
    for source in sources {
        let mirror = refs::mirror(remote, source.trim_end_matches('*'));
        let found = match source.ends_with('*') {
            true => platform.prefixed(mirror.as_str()).context("could not list mirrored refs")?.flatten().collect(),
            false => store.repo.try_find_reference(mirror.as_str()).ok().flatten().into_iter().collect::<Vec<_>>(),
        };
        for reference in found {
            let name = reference.name().as_bstr().to_string();
            let Some(id) = reference.target().try_id().map(ToOwned::to_owned) else { continue };
            let original = format!("refs/{}", name.strip_prefix(&root).unwrap_or_default());
            if matches(sources, &original) && !listed.contains(original.as_str()) {
                stale.push((name, id));
            }
        }
    }
    for (name, id) in stale {
        cas::delete(store, &name, id)?;
    }
    Ok(())
}

/// Store the objects of a pack just received with fewer than `UNPACK_LIMIT` objects as loose
/// objects, then delete the pack. Each object is written before any pack file goes, so every
/// object can be read at every moment, and it is all done under the maintenance lock, so that
/// no repack is reading the pack meanwhile (if one is running, it takes the pack up instead).
/// Whatever fails leaves the pack in place, for the next maintenance to roll up.
fn unpack_small(repo: &gix::Repository, pack: &gix::odb::pack::bundle::write::Outcome) {
    let (Some(index_path), Some(data_path)) = (&pack.index_path, &pack.data_path) else { return };
    if pack.index.num_objects >= UNPACK_LIMIT {
        return;
    }
    let Ok(Some(_lock)) = super::maintenance::try_lock(repo.common_dir()) else { return };
    let Ok(index) = gix::odb::pack::index::File::at(index_path, repo.object_hash()) else { return };
    for entry in index.iter() {
        let Ok(object) = repo.find_object(entry.oid) else { return };
        if crate::git::write_object(repo, object.kind, &object.data).is_err() {
            return;
        }
    }
    // The index first: from then on, no reader that lists the directory takes up the pack.
    let mut files = vec![index_path.clone(), data_path.clone(), data_path.with_extension("rev")];
    files.extend(pack.keep_path.clone());
    for file in files {
        let _ = std::fs::remove_file(file);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::context::Context;
    use crate::git::for_tests as git;

    /// A new loose commit on `main` in `clone`, and a new commit for `task` on `bare`, so that
    /// the next fetch has something to negotiate: the id of the local one.
    fn diverge(clone: &Path, bare: &Path, task: &str) -> String {
        git(clone, &["commit", "-q", "--allow-empty", "-m", task]);
        let tree = git(bare, &["rev-parse", "main^{tree}"]);
        let theirs = git(bare, &["commit-tree", &tree, "-p", "main", "-m", task]);
        git(bare, &["update-ref", &format!("refs/loop/tasks/{task}"), &theirs]);
        git(clone, &["rev-parse", "HEAD"])
    }

    /// What heals is tried again; what does not is said with what to do; the rest is left
    /// alone — by what git and gix say of it.
    #[test]
    fn faults_are_told_apart_by_what_git_and_gix_say() {
        let git =
            |line: &str| anyhow::anyhow!("'git push --porcelain -- origin x:y' failed (exit status: 128): {line}");
        let transient = [
            git("fatal: unable to access 'http://h/r.git/': The requested URL returned error: 502"),
            git("fatal: unable to access 'http://h/r.git/': The requested URL returned error: 429"),
            git("fatal: the remote end hung up unexpectedly"),
            git("error: RPC failed; curl 56 Recv failure: Connection reset by peer"),
            git("kex_exchange_identification: Connection closed by remote host / fatal: Could not read from remote repository."),
            anyhow::Error::from(program::TimedOut {
                argv: "push".into(),
                after: Duration::from_secs(2),
                moved: 0,
                ran: Duration::from_secs(2),
            }),
            anyhow::Error::from(program::TimedOut {
                argv: "push".into(),
                after: Duration::from_secs(2),
                moved: 5 << 20,
                ran: Duration::from_secs(90),
            }),
            anyhow::anyhow!("Connection reset by peer (os error 104)").context("could not list the refs of remote 'origin'"),
            anyhow::anyhow!("Resource temporarily unavailable (os error 11)").context("could not fetch from remote 'origin'"),
        ];
        for err in &transient {
            assert!(matches!(fault("origin", err), Fault::Transient(_)), "{err:#}");
        }
        let gone = [
            git("fatal: remote error: access denied or repository not exported: /x.git"),
            git("fatal: repository 'http://h/x.git/' not found"),
            git("fatal: '/srv/x.git' does not appear to be a git repository"),
        ];
        for err in &gone {
            match fault("origin", err) {
                Fault::Unhealable(r) => {
                    assert!(r.message.starts_with("remote 'origin' has no repository at its URL"), "{}", r.message)
                }
                other => panic!("{err:#}: {other:?}"),
            }
        }
        let denied = [
            git("fatal: Authentication failed for 'http://h/r.git/'"),
            git("git@h: Permission denied (publickey). / fatal: Could not read from remote repository."),
            git("fatal: unable to access 'http://h/r.git/': The requested URL returned error: 403"),
        ];
        for err in &denied {
            match fault("origin", err) {
                Fault::Unhealable(r) => {
                    assert!(r.message.starts_with("remote 'origin' refused this clone ("), "{}", r.message);
                    assert!(r.hint.as_deref().is_some_and(|h| h.contains("credentials")));
                }
                other => panic!("{err:#}: {other:?}"),
            }
        }
        for err in [anyhow::anyhow!("could not lock 'refs/loop/x'"), anyhow::Error::from(crate::error::refused("held"))]
        {
            assert!(matches!(fault("origin", &err), Fault::Other), "{err:#}");
        }
    }

    /// A repack beside a fetch — it packs the loose objects our refs point to and prunes them
    /// — after the fetch's handle first looked at the object directory: gix's negotiation
    /// then finds those objects missing, as it never reads the pack directory again. `fetch`
    /// tries again in a new handle, which sees the new pack.
    #[test]
    fn a_repack_under_a_fetch_is_survived() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (bare, clone) = (dir.path().join("remote.git"), dir.path().join("clone"));
        git(dir.path(), &["init", "-q", "--bare", "-b", "main", "remote.git"]);
        git(dir.path(), &["clone", "-q", "remote.git", "clone"]);
        git(&clone, &["commit", "-q", "--allow-empty", "-m", "i"]);
        git(&clone, &["push", "-q", "origin", "main"]);
        let store = Store::open(&Context::for_tests(), &clone).expect("open the clone");
        let specs = vec![format!("+refs/loop/tasks/*:{}", refs::mirror("origin", "refs/loop/tasks/*"))];
        let repack_under = |local: &str, repo: &gix::Repository| {
            let id = ObjectId::from_hex(local.as_bytes()).expect("an id");
            repo.find_object(id).expect("the handle reads the object directory");
            git(&clone, &["repack", "-a", "-d", "-q"]);
        };

        // The race, once, as gix meets it.
        let local = diverge(&clone, &bare, "t-one");
        let failed =
            fetch_with_gix(&store, "origin", &specs, false, |repo: &gix::Repository| repack_under(&local, repo))
                .expect_err("a repack under a negotiation fails it");
        assert!(object_missing(&failed), "{failed:#}");

        // And in `fetch`, which tries again.
        let local = diverge(&clone, &bare, "t-two");
        let mut raced = 0;
        let fetched = fetch_gix_retrying(&store, "origin", &specs, false, &mut |attempt, repo| {
            if attempt == 1 {
                raced += 1;
                repack_under(&local, repo);
            }
        })
        .expect("the fetch survives the repack");
        assert_eq!(raced, 1);
        assert_eq!(fetched.remote_refs.len(), 2, "{:?}", fetched.remote_refs);
        let mirror = refs::mirror("origin", "refs/loop/tasks/t-two");
        assert_eq!(
            crate::git::ref_target(&store.repo, &mirror).expect("read").map(|id| id.to_string()),
            Some(git(&bare, &["rev-parse", "refs/loop/tasks/t-two"])),
            "fetched"
        );
    }
}
