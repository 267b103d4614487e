//! Talking to the shared remote: reading refs (gix fetch) and changing them (git push with a
//! lease, the only use of the git program).
//!
//! A claim counts only once the remote accepted the push with
//! `--atomic --force-with-lease=<ref>:<expected>`. A push that fails on the client may still
//! have been applied on the server (the client was killed, the connection dropped after the
//! server committed), so any outcome other than a clean accept or a clean lease rejection is
//! "unknown" and settled by reading the remote ref back.

use std::sync::atomic::AtomicBool;

use anyhow::{Context as _, Result};
use gix::ObjectId;

use super::cas::{self, Cas, Expect};
use super::Store;
use crate::error::{Class, Refusal};
use crate::git::program::{self, PushUpdate, RefStatus};

/// Change `name` on the remote from `expect` to `new` (None deletes), then mirror the
/// remote's value locally. `Lost` carries the remote's actual value.
pub fn swap(store: &Store, remote: &str, name: &str, expect: Expect, new: Option<ObjectId>) -> Result<Cas> {
    let lease = match expect {
        Expect::Absent => None,
        Expect::Is(id) => Some(id),
    };
    let update = PushUpdate { dst: name.to_owned(), src: new, expect: Some(lease) };
    match program::push(store.workdir(), remote, &[update], &[]) {
        Ok(report) if report.all_ok() => {
            set_local(store, name, new)?;
            Ok(Cas::Applied)
        }
        Ok(report) => {
            let actual = refresh_mirror(store, remote, name)?;
            if let Some((dst, RefStatus::Refused(why))) =
                report.refs.iter().find(|(_, s)| matches!(s, RefStatus::Refused(_)))
            {
                // A lease that held when the client checked it but not when the server took
                // the ref lock (another clone's push landed in between) is reported as
                // "[remote rejected] (atomic transaction failed)", like a refusal: it is a
                // lost race exactly when the remote no longer holds what we expected.
                if actual != lease {
                    return Ok(Cas::Lost { actual });
                }
                // Policy, not a race: the local mirror equals the remote; say so.
                return Err(Refusal::new(
                    Class::Refused,
                    format!("remote '{remote}' refused the update of '{dst}': {why}"),
                )
                .hint("the remote's hooks or settings forbid it; ask its administrator, or see 'git loop sync'")
                .into());
            }
            Ok(Cas::Lost { actual })
        }
        Err(err) => {
            if crate::error::find_refusal(&err).is_some() {
                return Err(err);
            }
            // Unknown outcome: the server is the judge.
            let actual = refresh_mirror(store, remote, name).with_context(|| {
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
    let fetched = fetch(store, remote, &[name.to_owned()])?;
    let actual = fetched.remote_refs.iter().find(|(n, _)| n == name).map(|(_, id)| *id);
    set_local(store, name, actual)?;
    Ok(actual)
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
pub struct Fetched {
    pub remote_refs: Vec<(String, ObjectId)>,
}

/// Fetch `sources` — exact ref names, or prefixes ending in `*` — from `remote` into their
/// mirrors under `refs/loop-remotes/<remote>/` (see `refs::mirror`), and delete the mirrors of
/// those refs the remote no longer advertises (gix never prunes). Tags are not fetched.
///
/// Only fetches write mirrors, and one fetch at a time per clone (`.git/loop/fetch.lock`): two
/// fetches updating one mirror ref at once would fail each other's ref transaction. Callers
/// never read a mirror to decide anything; they get the listing, and update their own refs by
/// compare-and-swap.
pub fn fetch(store: &Store, remote: &str, sources: &[String]) -> Result<Fetched> {
    let _one_at_a_time = super::flock::FileLock::exclusive(
        &store.loop_dir()?.join("fetch.lock"),
        "fetching",
        std::time::Duration::from_secs(120),
    )?;
    let fetched = fetch_locked(store, remote, sources)?;
    prune_mirrors(store, remote, sources, &fetched.remote_refs)?;
    Ok(fetched)
}

/// Whether ref `name` is one of `sources` (an exact name, or under a `prefix*`).
fn matches(sources: &[String], name: &str) -> bool {
    sources.iter().any(|s| s.strip_suffix('*').map_or(s == name, |prefix| name.starts_with(prefix)))
}

/// Delete the mirrors of refs in `sources` that the remote did not list.
fn prune_mirrors(store: &Store, remote: &str, sources: &[String], listed: &[(String, ObjectId)]) -> Result<()> {
    let listed: std::collections::BTreeSet<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    let root = format!("{}{remote}/", crate::refs::REMOTES);
    let platform = store.repo.references().context("could not list refs")?;
    let mut stale = Vec::new();
    for source in sources {
        let mirror = crate::refs::mirror(remote, source.trim_end_matches('*'));
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

/// `fetch` through the git program, for http and https (this build of gix carries no http
/// transport; see `program::fetch`).
///
/// Smart HTTP is stateless: git lists the remote's refs in one request and asks for their
/// objects in another, and a ref that moved in between (a claim refreshed, a task closed) can
/// leave its listed object unreachable there — "did not send all necessary objects". That is
/// a lost race, not a failure: list and fetch again. The values returned are the ones the
/// fetch wrote into the mirrors, so their objects are here.
fn fetch_with_git(store: &Store, remote: &str, sources: &[String], refspecs: &[String]) -> Result<Fetched> {
    let prefixes: Vec<String> = sources.iter().map(|s| s.trim_end_matches('*').to_owned()).collect();
    let mut attempt = 0;
    let listed = loop {
        attempt += 1;
        match crate::git::program::fetch(store.workdir(), remote, &prefixes, refspecs) {
            Ok(listed) => break listed,
            Err(err) if attempt < 6 && crate::git::program::moved_while_fetching(&err) => {
                std::thread::sleep(std::time::Duration::from_millis(10 * attempt));
            }
            Err(err) => return Err(err),
        }
    };
    let mut remote_refs = Vec::new();
    for (name, listed_id) in listed.into_iter().filter(|(name, _)| matches(sources, name)) {
        let mirrored = crate::git::ref_target(&store.repo, &crate::refs::mirror(remote, &name))?;
        remote_refs.push((name, mirrored.unwrap_or(listed_id)));
    }
    Ok(Fetched { remote_refs })
}

/// `fetch`, under the lock.
fn fetch_locked(store: &Store, remote: &str, sources: &[String]) -> Result<Fetched> {
    let repo = &store.repo;
    let handle = repo.find_remote(remote).map_err(|_| {
        Refusal::new(Class::Usage, format!("remote '{remote}' is not configured")).hint(
            "add it with 'git remote add <name> <url>', or fix 'loop.remote' with 'git loop init --remote <name>'",
        )
    })?;
    let refspecs: Vec<String> = sources.iter().map(|s| format!("+{s}:{}", crate::refs::mirror(remote, s))).collect();
    let scheme = handle.url(gix::remote::Direction::Fetch).map(|u| u.scheme.clone());
    if matches!(scheme, Some(gix::url::Scheme::Http) | Some(gix::url::Scheme::Https)) {
        return fetch_with_git(store, remote, sources, &refspecs);
    }
    let mut handle = handle.with_fetch_tags(gix::remote::fetch::Tags::None);
    handle
        .replace_refspecs(refspecs.iter().map(String::as_str), gix::remote::Direction::Fetch)
        .context("invalid fetch refspec")?;
    // gix negotiates without refreshing its view of the object database (its "haves" are the
    // local refs, peeled with refreshing turned off), and another handle of this process (a
    // walk's other worker, its sync thread) may have fetched a pack since ours last looked: a
    // local ref pointing into that pack then fails the negotiation ("object could not be
    // found"). Looking up an object nobody has makes the handle read the disk state again; as
    // another fetch can still land between that and the negotiation, a failed receive is tried
    // once more after looking again.
    let refresh = || {
        let nobody = gix::ObjectId::from_hex(b"ffffffffffffffffffffffffffffffffffffffff").expect("a valid hex id");
        let _ = repo.try_find_object(nobody);
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let connection = handle
            .connect(gix::remote::Direction::Fetch)
            .with_context(|| format!("could not connect to remote '{remote}'"))?;
        let prepare = connection
            .prepare_fetch(gix::progress::Discard, gix::remote::ref_map::Options::default())
            .with_context(|| format!("could not list the refs of remote '{remote}'"))?;
        let remote_refs = prepare
            .ref_map()
            .mappings
            .iter()
            .filter_map(|m| {
                let (name, id, _) = match &m.remote {
                    gix::remote::fetch::refmap::Source::Ref(r) => r.unpack(),
                    gix::remote::fetch::refmap::Source::ObjectId(_) => return None,
                };
                Some((name.to_string(), id?.to_owned()))
            })
            .collect();
        if prepare.ref_map().is_missing_required_mapping() {
            // The remote has none of these refs (yet): nothing to receive.
            return Ok(Fetched { remote_refs });
        }
        refresh();
        let interrupt = AtomicBool::new(false);
        match prepare.receive(gix::progress::Discard, &interrupt) {
            Ok(_) => return Ok(Fetched { remote_refs }),
            Err(_) if attempt < 2 => continue,
            Err(err) => return Err(anyhow::Error::from(err).context(format!("could not fetch from remote '{remote}'"))),
        }
    }
}
