//! The only module that runs the `git` program, used where gix cannot do the job: pushing
//! (gix 0.90 has no push), fetching over http, and repacking. One function per invocation;
//! stdin closed; hooks, fsmonitor and prompts disabled; errors name the argv, the exit status
//! and stderr.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result};
use gix::ObjectId;

use crate::error::{Class, Refusal};

/// One ref to push: `src` (None deletes) to `dst`, with the lease `expect`
/// (`Some(None)`: must not exist on the remote; `Some(Some(id))`: must hold `id`).
#[derive(Debug, Clone)]
pub struct PushUpdate {
    pub dst: String,
    pub src: Option<ObjectId>,
    pub expect: Option<Option<ObjectId>>,
}

/// What the remote said about one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefStatus {
    /// Updated, created, deleted, or already up to date.
    Ok,
    /// Refused because the lease did not hold or it was not a fast-forward: someone else
    /// changed it first. Read the remote again.
    Stale(String),
    /// Refused by the remote's policy (a hook, a locked ref, denyDeletes...).
    Refused(String),
}

/// The outcome of one push.
#[derive(Debug, Clone)]
pub struct PushReport {
    pub refs: Vec<(String, RefStatus)>,
}

impl PushReport {
    pub fn all_ok(&self) -> bool {
        self.refs.iter().all(|(_, s)| *s == RefStatus::Ok)
    }
}

/// Run the git program in `dir` with hooks and fsmonitor off, no prompts, C locale.
fn git(dir: &Path, args: &[String]) -> Result<std::process::Output> {
    Command::new("git")
        .args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"])
        // git's own upkeep after a fetch (`gc --auto`, `maintenance run --auto`, a commit
        // graph) would repack and prune beside other git-loop processes reading and fetching:
        // git-loop consolidates at moments of its own choosing instead.
        .args(["-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "fetch.writeCommitGraph=false"])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .output()
        .with_context(|| format!("could not run 'git {}'", args.join(" ")))
}

/// `git push --porcelain --atomic --force-with-lease=... <remote> <src>:<dst>... <pattern>...`,
/// run in `dir`. Never a `+` refspec: that would silently override the lease. `patterns` are
/// plain wildcard refspecs (`refs/loop/tasks/*:refs/loop/tasks/*`), pushed without force: the
/// server still checks each ref's old value under its lock, and git refuses anything that is
/// not a fast-forward. (git resolves explicit refspecs one by one against every ref; a
/// thousand of them cost a second of CPU, a wildcard almost nothing.)
///
/// Returns the per-ref report when git gave one. An error means the outcome is unknown (the
/// remote may or may not have applied the push): callers must read the remote back.
pub fn push(dir: &Path, remote: &str, updates: &[PushUpdate], patterns: &[String]) -> Result<PushReport> {
    let mut args: Vec<String> = vec!["push".into(), "--porcelain".into(), "--atomic".into(), "--no-verify".into()];
    for update in updates {
        if let Some(expect) = &update.expect {
            let value = expect.map(|id| id.to_string()).unwrap_or_default();
            args.push(format!("--force-with-lease={}:{value}", update.dst));
        }
    }
    args.push("--".into());
    args.push(remote.to_owned());
    for update in updates {
        let src = update.src.map(|id| id.to_string()).unwrap_or_default();
        args.push(format!("{src}:{}", update.dst));
    }
    args.extend(patterns.iter().cloned());
    let output = git(dir, &args)?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("does not support --atomic") {
        return Err(Refusal::new(
            Class::Failure,
            format!("remote '{remote}' does not support atomic pushes, which git-loop needs to arbitrate claims"),
        )
        .hint("enable it on the server with 'git config receive.advertiseAtomic true' (git's default)")
        .into());
    }
    let refs = parse_porcelain(&stdout);
    if refs.is_empty() {
        anyhow::bail!(
            "'git {}' failed ({}): {}",
            args.join(" "),
            output.status,
            stderr.trim().lines().last().unwrap_or("no output")
        );
    }
    Ok(PushReport { refs })
}

/// Parse `git push --porcelain` status lines: `<flag>\t<src>:<dst>\t<summary> (<reason>)`.
fn parse_porcelain(stdout: &str) -> Vec<(String, RefStatus)> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        let mut fields = line.splitn(3, '\t');
        let (Some(flag), Some(spec), summary) = (fields.next(), fields.next(), fields.next().unwrap_or("")) else {
            continue;
        };
        if flag.len() != 1 {
            continue;
        }
        let dst = spec.rsplit_once(':').map_or(spec, |(_, dst)| dst).to_owned();
        let status = match flag {
            " " | "+" | "-" | "*" | "=" => RefStatus::Ok,
            "!" => {
                let stale = ["stale info", "fetch first", "non-fast-forward", "atomic push failed", "already exists"];
                if stale.iter().any(|s| summary.contains(s)) {
                    RefStatus::Stale(summary.to_owned())
                } else {
                    RefStatus::Refused(summary.to_owned())
                }
            }
            _ => continue,
        };
        out.push((dst, status));
    }
    out
}

/// Fetch through the git program, for transports this build of gix does not carry (http and
/// https: gix would need libcurl or a TLS stack; git brings the user's credential helpers).
/// Lists the remote's refs matching `prefixes` first (`git ls-remote`, the truth about what
/// it holds, deletions included), then fetches `refspecs` if anything matched.
pub fn fetch(dir: &Path, remote: &str, prefixes: &[String], refspecs: &[String]) -> Result<Vec<(String, ObjectId)>> {
    let refs = ls_remote(dir, remote, prefixes)?;
    // git fails the whole fetch when an exact refspec (refs/notes/loop) names a ref the
    // remote lacks: ask only for what the listing found.
    let listed_source = |spec: &&String| {
        let src = spec.trim_start_matches('+').split(':').next().unwrap_or_default();
        refs.iter().any(|(name, _)| src.strip_suffix('*').map_or(name == src, |prefix| name.starts_with(prefix)))
    };
    let wanted: Vec<&String> = refspecs.iter().filter(listed_source).collect();
    if !wanted.is_empty() {
        let mut args = vec![
            "fetch".to_owned(),
            "--quiet".to_owned(),
            "--no-tags".to_owned(),
            "--no-write-fetch-head".to_owned(),
            "--".to_owned(),
            remote.to_owned(),
        ];
        args.extend(wanted.into_iter().cloned());
        run(dir, &args)?;
    }
    Ok(refs)
}

/// Whether a failed `fetch` lost a race with a push (a ref moved or went away between git's
/// listing and its request for the objects, as can happen over stateless smart HTTP): worth
/// trying again.
pub fn moved_while_fetching(err: &anyhow::Error) -> bool {
    let text = format!("{err:#}");
    ["did not send all necessary objects", "couldn't find remote ref", "not our ref", "unadvertised object"]
        .iter()
        .any(|sign| text.contains(sign))
}

/// `git ls-remote -- <remote> <prefix>*...`: the refs the remote holds under `prefixes`.
pub fn ls_remote(dir: &Path, remote: &str, prefixes: &[String]) -> Result<Vec<(String, ObjectId)>> {
    let mut args = vec!["ls-remote".to_owned(), "--".to_owned(), remote.to_owned()];
    args.extend(prefixes.iter().map(|p| format!("{p}*")));
    let listed = run(dir, &args)?;
    Ok(listed
        .lines()
        .filter_map(|line| {
            let (id, name) = line.split_once('\t')?;
            let id = ObjectId::from_hex(id.trim().as_bytes()).ok()?;
            prefixes.iter().any(|p| name.starts_with(p.as_str())).then(|| (name.to_owned(), id))
        })
        .collect())
}

/// Run git in `dir` and return its stdout; an error names the argv, the exit status and the
/// last line of stderr.
fn run(dir: &Path, args: &[String]) -> Result<String> {
    let output = git(dir, args)?;
    if !output.status.success() {
        anyhow::bail!(
            "'git {}' failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim().lines().last().unwrap_or("no output")
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `git repack -d -l -n -q --geometric=2` on the repository whose common directory is
/// `git_dir`: roll the loose objects and the packs that break a geometric progression (each
/// pack at least twice the objects of the next smaller one) into one new pack, then delete
/// the packs and loose objects it made redundant. It never looks at reachability, so it drops
/// no object — one a concurrent writer has written but not yet referenced stays — and packs
/// with a `.keep` (a fetch still in flight) are left alone. No bitmaps, no `info/packs`.
pub fn repack_geometric(git_dir: &Path) -> Result<()> {
    let args: Vec<String> = vec![
        format!("--git-dir={}", git_dir.display()),
        "repack".into(),
        "-d".into(),
        "-l".into(),
        "-n".into(),
        "-q".into(),
        "--geometric=2".into(),
        "--no-write-bitmap-index".into(),
    ];
    run(git_dir, &args)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_lines_are_read() {
        let out = "To ../r.git\n*\tabc:refs/loop/claims/node/t1\t[new reference]\n!\tdef:refs/loop/x\t[rejected] (stale info)\n!\t:refs/loop/y\t[remote rejected] (pre-receive hook declined)\nDone\n";
        let refs = parse_porcelain(out);
        assert_eq!(refs[0], ("refs/loop/claims/node/t1".into(), RefStatus::Ok));
        assert!(matches!(refs[1].1, RefStatus::Stale(_)));
        assert!(matches!(refs[2].1, RefStatus::Refused(_)));
    }
}
