//! A drained child walk is not proof: this reads the project's backlog itself and says which
//! of the mission's tasks there are not done, and why — a task parked with its reason, one
//! still waiting for a dependency, or one hidden from `next` by a claim someone else holds
//! (an earlier child walk that died holding it, say).

use anyhow::Result;

use super::record::Selection;
use crate::backlog::{Board, Readiness};
use crate::context::Context;
use crate::store::task::State;
use crate::store::Store;

/// The mission's tasks in one project, as they stand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    pub total: u32,
    /// Done, or cancelled (a person decided it will not be done).
    pub done: u32,
    /// One sentence per task that is not done, naming it.
    pub problems: Vec<String>,
}

impl Check {
    pub fn is_done(&self) -> bool {
        self.problems.is_empty()
    }

    /// The problems as one line.
    pub fn reason(&self) -> String {
        self.problems.join("; ")
    }
}

/// Check the mission's tasks (`selection`) in the project `store` opened.
pub fn check(store: &Store, ctx: &Context, selection: &Selection) -> Result<Check> {
    let board = Board::load(store, ctx)?;
    let mut check = Check::default();
    let rows: Vec<(String, Option<&crate::store::index::Row>)> = match selection {
        Selection::Label(label) => {
            let rows: Vec<_> =
                board.tasks.iter().filter(|r| r.has_label(label)).map(|r| (r.id().to_owned(), Some(r))).collect();
            if rows.is_empty() {
                check.problems.push(format!("no task has label '{label}'"));
            }
            rows
        }
        Selection::Tasks(ids) => ids.iter().map(|id| (id.clone(), board.get(id))).collect(),
    };
    for (id, row) in rows {
        check.total += 1;
        let Some(row) = row else {
            check.problems.push(format!("{id} does not exist"));
            continue;
        };
        if matches!(row.state, State::Done | State::Cancelled) {
            check.done += 1;
            continue;
        }
        let problem = match board.readiness(row) {
            Readiness::Epic => format!("{id} is an epic: it is done when its children are"),
            Readiness::Claimed => match board.claim(&id) {
                Some(held) => format!(
                    "{id} is open but claimed by {holder} until {}, which hides it from 'next' (if {holder} is \
                     gone, release it there with 'git loop claim release node:{id} --holder {holder}')",
                    held.record.expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    holder = held.record.holder,
                ),
                None => format!("{id} is open but claimed, which hides it from 'next'"),
            },
            Readiness::Blocked(deps) => {
                let deps: Vec<String> = deps.iter().map(|d| board.dependency(d)).collect();
                format!("{id} waits for {}", deps.join(", "))
            }
            Readiness::Ready => format!("{id} is open and ready, but the walk did not take it"),
            Readiness::Closed => {
                let reason = row.task().ok().and_then(|t| t.reason).filter(|r| !r.trim().is_empty());
                match reason {
                    Some(reason) => format!("{id} is {}: {}", row.state.as_str(), reason.lines().next().unwrap_or("")),
                    None => format!("{id} is {}", row.state.as_str()),
                }
            }
        };
        check.problems.push(problem);
    }
    Ok(check)
}

/// The repositories the mission's open tasks (`selection`) in the project `store` opened wait
/// for (`--after <place>#<id>`), each as `store::foreign::normal` writes it, a remote's name read
/// as its URL: what orders a wave's projects (`queue`).
pub fn waits_on(store: &Store, ctx: &Context, selection: &Selection) -> Result<std::collections::HashSet<String>> {
    let board = Board::load(store, ctx)?;
    let chosen = |r: &&crate::store::index::Row| match selection {
        Selection::Label(label) => r.has_label(label),
        Selection::Tasks(ids) => ids.iter().any(|id| id == r.id()),
    };
    let mut out = std::collections::HashSet::new();
    for row in board.tasks.iter().filter(|r| r.state == State::Open).filter(chosen) {
        for dep in row.after().filter_map(crate::backlog::foreign::Dep::parse) {
            let place = crate::store::foreign::remote_url(store.workdir(), &dep.place).unwrap_or(dep.place);
            out.insert(crate::store::foreign::normal(&place));
        }
    }
    Ok(out)
}
