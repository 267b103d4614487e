//! The prompt file a session reads (`$GIT_LOOP_PROMPT`, and the agent's stdin or `--file`):
//! the task, what its dependencies delivered, what the previous session left, and how to
//! report the verdict. Task text reaches the agent only through this file.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::agent::role::{self, Contract};
use crate::refs;
use crate::store::task::{self, Task};
use crate::store::Store;
use crate::tries::Try;

pub struct Input<'a> {
    pub task: &'a Task,
    pub try_: &'a Try,
    /// Which dispatch of this unit this is (1 for the first).
    pub attempt: u32,
    /// What the previous session left, for a continuation.
    pub carry: Option<&'a str>,
    pub checks: Option<&'a str>,
    pub result_path: &'a Path,
}

pub fn build(store: &Store, input: &Input<'_>) -> Result<String> {
    let t = input.task;
    let mut out = String::new();
    writeln!(out, "# Task {}: {}", t.id, t.title.lines().next().unwrap_or(""))?;
    writeln!(out)?;
    if t.title.contains('\n') {
        writeln!(out, "Full title:\n\n{}\n", t.title)?;
    }
    if t.body.trim().is_empty() {
        writeln!(out, "(No further description: the title is the task.)")?;
    } else {
        writeln!(out, "{}", t.body.trim_end())?;
    }
    writeln!(out)?;
    writeln!(out, "## Where you are")?;
    writeln!(out)?;
    writeln!(
        out,
        "You work in a git worktree of your own, on branch `{}` (try {} of this task). Edit files here; commit if you like. Whatever you leave in this worktree is committed for you when your session ends, so nothing is lost.",
        refs::short_branch(&input.try_.branch),
        input.try_.number
    )?;
    let mut deps = Vec::new();
    for dep in &t.after {
        if let Ok(id) = dep.parse() {
            if let Ok(Some(snapshot)) = task::read(store, &id) {
                let said = snapshot.task.completion.as_ref().and_then(|c| c.message.clone()).unwrap_or_default();
                deps.push(format!(
                    "- {} \"{}\"{}",
                    dep,
                    snapshot.task.title.lines().next().unwrap_or(""),
                    if said.is_empty() { String::new() } else { format!(": {said}") }
                ));
            }
        }
    }
    if !deps.is_empty() {
        writeln!(out, "\nThis task builds on these, already done and merged into your branch:\n{}", deps.join("\n"))?;
    }
    if input.attempt > 1 || input.carry.is_some() {
        writeln!(out, "\n## What happened before\n")?;
        if input.attempt > 1 {
            writeln!(out, "This is session {} on this task.", input.attempt)?;
        }
        if let Some(carry) = input.carry {
            writeln!(out, "\n{}", carry.trim_end())?;
        }
        if let Some(stat) = diffstat(store, input.try_)? {
            writeln!(out, "\nWork already on your branch (compared with where the task started):\n\n{stat}")?;
        }
    }
    writeln!(
        out,
        "\nIf the file named by $GIT_LOOP_WRAP_UP appears while you work, a person wants the task back: finish the step you are on, report your verdict as below, and stop."
    )?;
    out.push_str(&role::how_to_report(Contract::Worker, input.result_path));
    if let Some(checks) = input.checks {
        writeln!(out, "\n`done` counts only if the checks pass: `{checks}` is run in your worktree after you finish.")?;
    }
    Ok(out)
}

/// Files changed on the try branch since the task branch, as `M path (+added -removed)` lines.
fn diffstat(store: &Store, try_: &Try) -> Result<Option<String>> {
    let (Some(head), Some(start)) =
        (store.ref_target(&try_.branch)?, store.ref_target(&refs::task_branch(&try_.task))?)
    else {
        return Ok(None);
    };
    // A try that is a merge in progress (its landing conflicted) starts on the target: until the
    // merge is made, its branch is not the task's work plus more.
    if head == start || !store.is_ancestor(start, head)? {
        return Ok(None);
    }
    let mut changes = store.diffstat(start, head)?;
    if changes.is_empty() {
        return Ok(None);
    }
    let more = changes.len().saturating_sub(50);
    changes.truncate(50);
    let mut text = crate::tries::describe_changes(&changes);
    if more > 0 {
        text.push_str(&format!("\n  … and {more} more files"));
    }
    Ok(Some(text))
}
