//! What the landing queue does with a merge that conflicts: it asks a `Resolver`, the one
//! place a conflict-resolver agent plugs in. The resolver is given the conflict (the task, the
//! target, both commits and the conflicting paths) and answers with a merge commit of the two
//! that resolves it — which is then checked with the rest of its batch like any merge — or
//! that it cannot, and why. The walk's `walk::resolve::AgentResolver` dispatches a
//! conflict-resolver session; `NoResolver` (a `git loop land` given no resolver) fails every
//! conflicting landing, and the task goes to needs-you with the paths named.

use anyhow::Result;
use gix::ObjectId;

use crate::store::Store;

/// A merge of a task branch onto the target that conflicts.
#[derive(Debug, Clone)]
pub struct Conflict {
    pub task: String,
    /// The target branch (full ref name).
    pub target: String,
    /// The target's side: the tip, with the batch's earlier merges.
    pub ours: ObjectId,
    /// The task branch's head.
    pub theirs: ObjectId,
    /// The paths that conflict.
    pub paths: Vec<String>,
    /// The merge commit's message (a resolution's commit takes it).
    pub message: String,
}

/// What a resolver made of a conflict.
#[derive(Debug, Clone)]
pub enum Resolution {
    /// A merge commit with parents `ours` and `theirs` that resolves it (checked before it
    /// lands), and the session that resolved it (none: it merged cleanly after all).
    Resolved { commit: ObjectId, by: Option<String> },
    /// It cannot be resolved, and why.
    Unresolved(String),
}

/// Resolves a conflicting landing, or says it cannot. `keep` is called while it works: it keeps
/// the lander's claim, and true means stop (the landing was interrupted or its claim lost).
pub trait Resolver {
    fn resolve(&self, store: &Store, conflict: &Conflict, keep: &dyn Fn() -> bool) -> Result<Resolution>;
}

/// No resolver: every conflict stays one.
pub struct NoResolver;

impl Resolver for NoResolver {
    fn resolve(&self, _store: &Store, _conflict: &Conflict, _keep: &dyn Fn() -> bool) -> Result<Resolution> {
        Ok(Resolution::Unresolved(
            "no conflict resolver is configured: pass --resolver <agent or role>, or set loop.resolver".into(),
        ))
    }
}
