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
    let spec = format!("+{name}:{name}");
    let fetched = fetch(store, remote, &[spec])?;
    let actual = fetched.remote_refs.iter().find(|(n, _)| n == name).map(|(_, id)| *id);
    if actual.is_none() {
        set_local(store, name, None)?;
    }
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

/// What a fetch saw on the remote: every advertised ref that matched the refspecs.
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
/// a TLS stack), so that the git program must (see `program::fetch`).
fn needs_git_program(handle: &gix::Remote<'_>) -> bool {
    let scheme = handle.url(gix::remote::Direction::Fetch).map(|u| u.scheme.clone());
    matches!(scheme, Some(gix::url::Scheme::Http) | Some(gix::url::Scheme::Https))
}

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

/// Fetch `refspecs` (which say where each ref lands locally) from `remote`, through gix.
/// Tags are not fetched and nothing is pruned.
///
/// The fetch runs in a repository handle of its own, opened for it: gix's negotiation looks
/// our refs' objects up without ever reading the pack directory again, so in a handle that
/// has not looked since a repack moved those objects into a new pack every fetch fails
/// ("object could not be found"); and the pack it receives is never seen by `store`'s handle
/// (see `UNPACK_LIMIT`). Opening costs about a millisecond.
pub fn fetch(store: &Store, remote: &str, refspecs: &[String]) -> Result<Fetched> {
    let handle = find_remote(store, remote)?;
    if needs_git_program(&handle) {
        // This build of gix carries no http transport: let git do it (see `program::fetch`).
        let prefixes: Vec<String> = refspecs
            .iter()
            .filter_map(|spec| {
                spec.trim_start_matches('+').split(':').next().map(|src| src.trim_end_matches('*').to_owned())
            })
            .collect();
        let remote_refs = crate::git::program::fetch(store.workdir(), remote, &prefixes, refspecs)?;
        return Ok(Fetched { remote_refs });
    }
    let repo = gix::open_opts(store.repo.git_dir(), store.repo.open_options().clone())
        .context("could not open the repository to fetch into")?;
    let mut handle = find_remote_in(&repo, remote)?.with_fetch_tags(gix::remote::fetch::Tags::None);
    handle
        .replace_refspecs(refspecs.iter().map(String::as_str), gix::remote::Direction::Fetch)
        .context("invalid fetch refspec")?;
    let connection = handle
        .connect(gix::remote::Direction::Fetch)
        .with_context(|| format!("could not connect to remote '{remote}'"))?;
    let prepare = connection
        .prepare_fetch(gix::progress::Discard, gix::remote::ref_map::Options::default())
        .with_context(|| format!("could not list the refs of remote '{remote}'"))?;
    let remote_refs = advertised(prepare.ref_map());
    if prepare.ref_map().is_missing_required_mapping() {
        // The remote has none of these refs (yet): nothing to receive.
        return Ok(Fetched { remote_refs });
    }
    let interrupt = AtomicBool::new(false);
    let outcome = prepare
        .receive(gix::progress::Discard, &interrupt)
        .with_context(|| format!("could not fetch from remote '{remote}'"))?;
    if let gix::remote::fetch::Status::Change { write_pack_bundle, .. } = &outcome.status {
        unpack_small(&repo, write_pack_bundle);
    }
    Ok(Fetched { remote_refs })
}

/// Store the objects of a pack just received with fewer than `UNPACK_LIMIT` objects as loose
/// objects, then delete the pack. Each object is written before any pack file goes, so every
/// object can be read at every moment; whatever fails leaves the pack in place (the next
/// maintenance rolls it up).
fn unpack_small(repo: &gix::Repository, pack: &gix::odb::pack::bundle::write::Outcome) {
    let (Some(index_path), Some(data_path)) = (&pack.index_path, &pack.data_path) else { return };
    if pack.index.num_objects >= UNPACK_LIMIT {
        return;
    }
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
