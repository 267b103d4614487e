//! The one home for ref names: nobody else formats `refs/loop/...`.
//!
//! The namespace (docs/storage.md describes every record stored under it):
//!
//! | ref | what |
//! |---|---|
//! | `refs/loop/tasks/<id>` | the task's operation chain; the tip's tree holds the folded `task.json` |
//! | `refs/loop/claims/<kind>/<name>` | a claim record (a blob, unique per attempt) |
//! | `refs/loop/journal/<writer>` | one event chain per writer |
//! | `refs/loop/tries/<id>/<n>` | the last head of try `n` of a task: keeps it alive, numbers never reused |
//! | `refs/loop/done/<id>` | the commit that completed a task (keeps it alive through gc) |
//! | `refs/notes/loop` | completion evidence, a note on the completing commit |
//! | `refs/heads/loop/<id>` | the task branch: the accepted work |
//! | `refs/heads/loop-try/<id>/<n>` | try branch `n` of a task |
//! | `refs/loop-remotes/<remote>/...` | what `sync` last fetched from a remote, mirrored |
//! | `refs/loop-foreign/<place>/tasks/<id>` | another repository's task a task here waits for, as last read |
//! | `refs/loop/missions/<id>` | a mission's record chain; the tip's tree holds `mission.json` |
//! | `refs/loop/kept/<tag>/...` | a clone's side of a loop ref that diverged from the remote's, kept |
//! | `refs/loop/settings` | the loop's shared settings: a chain of records, the tip's tree holds `settings.json` |
//! | `refs/heads/loop-kept/<tag>/...` | likewise for a task or try branch |
//!
//! Try branches live beside, not below, `refs/heads/loop/<id>`, because git cannot have both
//! `loop/<id>` and `loop/<id>/...` (a file and a directory of the same name).

use crate::ids::MissionId;
use crate::ids::{ClaimKey, TaskId, WriterId};

pub const LOOP: &str = "refs/loop/";
pub const TASKS: &str = "refs/loop/tasks/";
pub const CLAIMS: &str = "refs/loop/claims/";
pub const JOURNAL: &str = "refs/loop/journal/";
pub const TRIES: &str = "refs/loop/tries/";
pub const DONE: &str = "refs/loop/done/";
pub const NOTES: &str = "refs/notes/loop";
pub const TASK_BRANCHES: &str = "refs/heads/loop/";
pub const TRY_BRANCHES: &str = "refs/heads/loop-try/";
pub const REMOTES: &str = "refs/loop-remotes/";
/// Where the records of other repositories' tasks are read into (`store::foreign`).
pub const FOREIGN: &str = "refs/loop-foreign/";
pub const MISSIONS: &str = "refs/loop/missions/";
pub const KEPT: &str = "refs/loop/kept/";
pub const KEPT_BRANCHES: &str = "refs/heads/loop-kept/";
/// The chain of the loop's shared settings records (`git loop config --share`).
pub const SETTINGS: &str = "refs/loop/settings";

/// The pseudo-ref a merge in progress names its other side by, in a worktree's own git
/// directory (`git status` and `git commit` read it, as after a `git merge` that conflicts).
pub const MERGE_HEAD: &str = "MERGE_HEAD";
/// The message `git commit` proposes for that merge, beside it.
pub const MERGE_MSG: &str = "MERGE_MSG";

pub fn task(id: &TaskId) -> String {
    format!("{TASKS}{id}")
}

/// The branch `git fast-import` builds an import's commits on, named by the importing process:
/// reset at the end of the stream, so it is never written (docs/storage.md, "Importing").
pub fn import_scratch(pid: u32) -> String {
    format!("{LOOP}import-scratch/{pid}")
}

/// The task id a task ref names, if it is one.
pub fn task_id_of(name: &str) -> Option<&str> {
    name.strip_prefix(TASKS).filter(|rest| !rest.contains('/'))
}

pub fn claim(key: &ClaimKey) -> String {
    format!("{CLAIMS}{}/{}", key.kind(), key.name())
}

/// The claim key a claim ref names, if it is one.
pub fn claim_key_of(name: &str) -> Option<ClaimKey> {
    let rest = name.strip_prefix(CLAIMS)?;
    let (kind, key) = rest.split_once('/')?;
    ClaimKey::new(kind, key).ok()
}

pub fn journal(writer: &WriterId) -> String {
    format!("{JOURNAL}{writer}")
}

pub fn task_branch(id: &TaskId) -> String {
    format!("{TASK_BRANCHES}{id}")
}

pub fn done_anchor(id: &TaskId) -> String {
    format!("{DONE}{id}")
}

pub fn try_branch(id: &TaskId, n: u32) -> String {
    format!("{TRY_BRANCHES}{id}/{n}")
}

pub fn try_anchor(id: &TaskId, n: u32) -> String {
    format!("{TRIES}{id}/{n}")
}

pub fn mission(id: &MissionId) -> String {
    format!("{MISSIONS}{id}")
}

/// The mission id a mission ref names, if it is one.
pub fn mission_id_of(name: &str) -> Option<&str> {
    name.strip_prefix(MISSIONS).filter(|rest| !rest.contains('/'))
}

/// The claim a mission's commander holds while it runs: one commander per mission.
pub fn fleet_claim(id: &MissionId) -> ClaimKey {
    ClaimKey::new("fleet", id.as_str()).expect("mission ids are valid claim names")
}

/// A branch name without `refs/heads/`, as people write it.
pub fn short_branch(name: &str) -> &str {
    name.strip_prefix("refs/heads/").unwrap_or(name)
}

/// Where `sync` mirrors a ref fetched from `remote`: `refs/loop/x` becomes
/// `refs/loop-remotes/<remote>/loop/x`.
pub fn mirror(remote: &str, name: &str) -> String {
    format!("{REMOTES}{remote}/{}", name.strip_prefix("refs/").unwrap_or(name))
}

/// Where a clone keeps its own side of `name` when it diverged from the remote's and the
/// remote's was taken: `refs/heads/loop/t-1` → `refs/heads/loop-kept/<tag>/loop/t-1`,
/// `refs/loop/tries/t-1/2` → `refs/loop/kept/<tag>/tries/t-1/2`. `tag` is unique to one
/// divergence (the clone's id and a random suffix), so kept refs never collide.
pub fn kept(name: &str, tag: &str) -> Option<String> {
    if let Some(branch) = name.strip_prefix("refs/heads/") {
        Some(format!("{KEPT_BRANCHES}{tag}/{branch}"))
    } else {
        name.strip_prefix(LOOP).map(|rest| format!("{KEPT}{tag}/{rest}"))
    }
}

/// Every ref that records one task's state and work: its record, task branch and done anchor
/// (try branches and anchors are listed by prefix: see [`task_try_prefixes`]).
pub fn task_refs(id: &TaskId) -> [String; 3] {
    [task(id), task_branch(id), done_anchor(id)]
}

/// The prefixes under which a task's try branches and try anchors live.
pub fn task_try_prefixes(id: &TaskId) -> [String; 2] {
    [format!("{TRY_BRANCHES}{id}/"), format!("{TRIES}{id}/")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let id: TaskId = "t-1".parse().expect("valid");
        assert_eq!(task_id_of(&task(&id)), Some("t-1"));
        let key: ClaimKey = "walker:main".parse().expect("valid");
        assert_eq!(claim(&key), "refs/loop/claims/walker/main");
        assert_eq!(claim_key_of(&claim(&key)), Some(key));
        let m: MissionId = "v2".parse().expect("valid");
        assert_eq!(mission_id_of(&mission(&m)), Some("v2"));
        assert_eq!(fleet_claim(&m).to_string(), "fleet:v2");
        assert_eq!(mirror("origin", "refs/loop/tasks/t-1"), "refs/loop-remotes/origin/loop/tasks/t-1");
        assert_eq!(kept("refs/heads/loop/t-1", "c-x").as_deref(), Some("refs/heads/loop-kept/c-x/loop/t-1"));
        assert_eq!(kept("refs/loop/tries/t-1/2", "c-x").as_deref(), Some("refs/loop/kept/c-x/tries/t-1/2"));
    }
}
