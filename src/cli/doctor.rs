//! `git loop doctor`: check every loop ref and record and this clone's local state; with
//! `--repair`, fix what can be fixed without losing data.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::env::Env;
use super::output::Out;
use git_loop::doctor::{self, Options, Report, Severity};

/// Check every loop ref and record, and this clone's local state, and say what to repair.
///
/// Checks task chains (every operation present and readable, versions known, ids matching
/// their refs), claims, journal chains, notes, anchors, the loop's branches, kept refs and
/// mirrors, packed-refs; and the local state: abandoned locks, what crashed walks left (their
/// walker claim, sessions, task claims, worktrees of closed tasks or of tries never journaled),
/// worktree registrations whose directory is gone, temporary object files older than an hour,
/// stale caches. And the backlog: tasks whose dependencies make a cycle (none of them can ever
/// be ready). A lock a live process holds, and a walk at work, are noted and left alone.
///
/// Exit 0: clean. Exit 1: only leftovers (a crash left them; nothing is lost) or dependency
/// cycles. Exit 3: a record is corrupt. With --repair, the exit code says what remains after the repairs.
///
/// --repair removes abandoned locks (nobody has them open, no git-loop write is in flight, 1 s
/// old by the file system's clock: as every git-loop writer does), recovers what crashed walks
/// left as the next 'git loop run' would (what is left in a worktree is committed to its try
/// branch before the worktree goes), removes registrations of worktrees that are gone,
/// temporary object files older than an hour and stale caches; and mends a task whose record
/// cannot be read, but whose operations can, with a commit on top holding the task folded from
/// them. It never rewrites history, never deletes a ref that holds data, never takes a lock a
/// live process holds.
///
/// Example: git loop doctor --repair
#[derive(Args)]
pub struct DoctorArgs {
    /// Fix what can be fixed without losing data, then check again.
    #[arg(long)]
    repair: bool,
    /// Print {"clean", "findings": [...], "repaired": [...], "checked": {...}} as JSON.
    #[arg(long)]
    json: bool,
}

impl DoctorArgs {
    /// Whether it repairs (and so writes).
    pub(super) fn repairs(&self) -> bool {
        self.repair
    }
}

pub fn run(env: &Env, args: DoctorArgs) -> Result<u8> {
    // As configured: a doctor needs no remote, and must work when it cannot be reached.
    let store = env.open_as_configured()?;
    let opts = Options { workdir: store.workdir().to_owned(), cwd: env.cwd.clone(), exe: env.exe.clone() };
    let mut report = doctor::check(&store, &env.ctx, &opts)?;
    let repaired = if args.repair && report.findings.iter().any(|f| f.is_repairable()) {
        let repaired = doctor::repair(&store, &env.ctx, &report, &opts)?;
        report = doctor::check(&store, &env.ctx, &opts)?;
        repaired
    } else {
        Vec::new()
    };
    let code = match report.worst() {
        None | Some(Severity::Info) => 0,
        Some(Severity::Leftover | Severity::Stuck) => 1,
        Some(Severity::Corrupt) => 3,
    };
    let mut out = Out::new();
    if args.json {
        let findings: Vec<_> = report
            .findings
            .iter()
            .map(|f| {
                let mut value = serde_json::to_value(f).expect("findings serialize");
                value["repairable"] = json!(f.is_repairable());
                value
            })
            .collect();
        out.json(&json!({
            "clean": report.is_clean(),
            "findings": findings,
            "repaired": repaired,
            "checked": report.checked,
        }))?;
        return Ok(code);
    }
    for r in &repaired {
        out.line(format!("{}: {}", if r.done { "repaired" } else { "not repaired" }, r.outcome))?;
    }
    for f in &report.findings {
        let word = match f.severity {
            Severity::Corrupt => "corrupt",
            Severity::Leftover => "leftover",
            Severity::Stuck => "stuck",
            Severity::Info => "note",
        };
        out.line(format!("{word}: {}", f.problem))?;
        if !f.fix.is_empty() {
            out.line(format!("  fix: {}", f.fix))?;
        }
    }
    out.line(summary(&report))?;
    Ok(code)
}

/// The last line: what was found, and what was checked.
fn summary(report: &Report) -> String {
    let c = &report.checked;
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let checked = format!(
        "checked {}, {}, {} ({}), {}, {}, {}, {}, {}",
        plural(c.tasks, "task", "tasks"),
        plural(c.claims, "claim", "claims"),
        plural(c.journal_chains, "journal chain", "journal chains"),
        plural(c.journal_events, "event", "events"),
        plural(c.notes, "note", "notes"),
        plural(c.anchors, "anchor", "anchors"),
        match c.archived {
            0 => plural(c.branches, "branch", "branches"),
            n => format!(
                "{}, {}",
                plural(c.branches, "branch", "branches"),
                plural(n, "archived record", "archived records")
            ),
        },
        match c.pooled {
            0 => plural(c.worktrees, "worktree", "worktrees"),
            n => format!(
                "{} ({n} pooled, {})",
                plural(c.worktrees, "worktree", "worktrees"),
                git_loop::tries::warm::bytes(c.pooled_bytes)
            ),
        },
        plural(c.sessions, "session", "sessions"),
    );
    let count = |severity: Severity| report.findings.iter().filter(|f| f.severity == severity).count();
    let (corrupt, leftover, notes) = (count(Severity::Corrupt), count(Severity::Leftover), count(Severity::Info));
    // Left alone: in use (a live lock, a running walk) or not this version's to read (a
    // session record a newer git-loop wrote); each one's own line says which.
    let left_alone = match notes {
        0 => String::new(),
        n => format!(" ({} left alone, as said above)", plural(n, "thing", "things")),
    };
    if report.is_clean() {
        return format!("no problems found{left_alone}: {checked}");
    }
    let repairable = report.findings.iter().filter(|f| f.is_repairable()).count();
    let mut found = Vec::new();
    if corrupt > 0 {
        found.push(plural(corrupt, "corrupt record", "corrupt records"));
    }
    if leftover > 0 {
        found.push(plural(leftover, "leftover", "leftovers"));
    }
    let stuck = count(Severity::Stuck);
    if stuck > 0 {
        found.push(plural(stuck, "dependency cycle", "dependency cycles"));
    }
    let repair = match repairable {
        0 => String::new(),
        n => format!(" ({n} repairable with 'git loop doctor --repair')"),
    };
    format!("{}{repair}{left_alone}; {checked}", found.join(", "))
}
