//! Handing a task from one agent to the next — after a reassignment, a restart, or when its
//! agent became unreachable: a note of the work so far (what changed on the try branch, the
//! last session's own summary or the end of its output), and a copy of the last session's
//! transcript inside the next agent's worktree where its CLI keeps one.
//!
//! The copy lives in `.git-loop/handoff/` in the worktree, a directory whose own `.gitignore`
//! ignores everything in it, so commit-on-stop never commits it.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::agent::{reach, record};
use crate::refs;
use crate::store::events::Recorded;
use crate::store::journal;
use crate::store::Store;
use crate::tries::{self, Try};

/// Where transcript copies go, relative to a worktree.
pub const DIR: &str = ".git-loop/handoff";

/// Who had the task and why it moves on.
pub struct Previous<'a> {
    pub agent: &'a str,
    /// Why it stopped working on it ("you reassigned it to codex", "it is unreachable (usage
    /// limit)").
    pub why: &'a str,
    pub session: Option<&'a str>,
    pub summary: Option<&'a str>,
}

/// The transcript of `session` (by its CLI's own session id), if its CLI keeps one on disk.
pub fn transcript_of(store: &Store, session: &str) -> Option<PathBuf> {
    let loop_dir = store.loop_dir().ok()?;
    let rec = record::read(&loop_dir, session)?;
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let codex_home = std::env::var_os("CODEX_HOME").map(PathBuf::from);
    reach::transcript(
        &rec.agent,
        rec.agent_session.as_deref().unwrap_or(""),
        &rec.worktree,
        &home,
        codex_home.as_deref(),
    )
    .filter(|_| rec.agent_session.is_some() || rec.agent == "aider")
}

/// The path a transcript copy has inside a worktree.
pub fn copy_name(transcript: &Path) -> String {
    let name = transcript.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "transcript".into());
    format!("{DIR}/{name}")
}

/// Copy `transcript` into the try's worktree (best effort: a missing copy only loses a hint).
pub fn place(try_: &Try, transcript: &Path) {
    let dir = try_.worktree.join(DIR);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let _ = std::fs::write(try_.worktree.join(".git-loop/.gitignore"), "*\n");
    let _ = std::fs::copy(transcript, try_.worktree.join(copy_name(transcript)));
}

/// The note for the next agent on `try_`.
pub fn note(store: &Store, try_: &Try, previous: &Previous<'_>, transcript: Option<&Path>) -> Result<String> {
    let mut out = format!(
        "This task was with {} until now: {}. You continue its work on branch `{}`.\n",
        previous.agent,
        previous.why,
        refs::short_branch(&try_.branch)
    );
    if let (Some(head), Some(start)) =
        (store.ref_target(&try_.branch)?, store.ref_target(&refs::task_branch(&try_.task))?)
    {
        let changes = store.diffstat(start, head)?;
        out.push_str(&format!("\nWhat it changed so far:\n{}\n", tries::describe_changes(&changes)));
    }
    match (previous.summary, previous.session) {
        (Some(summary), _) if !summary.trim().is_empty() => {
            out.push_str(&format!("\nIts own summary of its last session:\n{}\n", summary.trim_end()));
        }
        (_, Some(session)) => {
            let log = record::dir(&store.loop_dir()?, session).join("log");
            let tail = crate::agent::record::tail(&log, 20);
            if !tail.trim().is_empty() {
                out.push_str(&format!("\nThe last lines of its last session's output:\n{tail}\n"));
            }
        }
        _ => {}
    }
    let spent = crate::store::ledger::task_total(store, &try_.task.to_string())?;
    if spent.sessions > 0 {
        out.push_str(&format!(
            "\nWhat this task's {} session{} before you spent: {} (also in $GIT_LOOP_SPENT_USD and $GIT_LOOP_SPENT_TOKENS).\n",
            spent.sessions,
            if spent.sessions == 1 { "" } else { "s" },
            spent.describe()
        ));
    }
    if let Some(transcript) = transcript {
        out.push_str(&format!(
            "\nA copy of its transcript is in your worktree at {} (not committed).\n",
            copy_name(transcript)
        ));
    }
    Ok(out)
}

/// The note for the next session after a person handed the task back, if they did since the
/// try's last session (over the task's events, already read).
pub fn hand_back_note_in(entries: &[journal::Entry]) -> Option<String> {
    let mut note = None;
    for entry in entries {
        match Recorded::of(&entry.event) {
            Recorded::HandedBack(back) if back.mode == "continue" => {
                let by = back.by.as_deref().unwrap_or("a person");
                let changes = back.changes.as_deref().unwrap_or("  (no changes)");
                let mut text = format!(
                    "{by} took this task over and handed it back to you. What they changed on your branch:\n{changes}\n"
                );
                if let Some(m) = &back.message {
                    text.push_str(&format!("\nTheir note:\n{m}\n"));
                }
                note = Some(text);
            }
            Recorded::SessionStarted(_) => note = None,
            _ => {}
        }
    }
    note
}
