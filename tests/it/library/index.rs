//! The index (`store::index`): the cache of tasks and task claims, on a temporary repository.
//! Its rows are used while their refs still point where they did, a changed ref is read
//! again, a walk's `Live` copy follows the refs through a watch, and compacting that copy into
//! the cache file changes no row.

use git_loop::backlog::{self, TaskFields};
use git_loop::ids::{ClaimKey, Priority, TaskId};
use git_loop::store::claim::{self, AcquireOptions};
use git_loop::store::index::{self, Live, Loaded};
use git_loop::store::task::State;
use git_loop::store::watch::Watch;
use git_loop::store::Store;

use super::{add, ctx, open};
use crate::harness::TestEnv;

/// Every task row as (id, tip, state, priority, title) and every claim row as (task, holder,
/// released), sorted.
#[allow(clippy::type_complexity)]
fn rows(loaded: &Loaded) -> (Vec<(String, String, State, Priority, String)>, Vec<(String, String, bool)>) {
    let mut tasks: Vec<_> = loaded
        .tasks
        .iter()
        .map(|r| {
            let title = r.task().expect("the row's record").title;
            (r.id().to_owned(), r.tip.to_string(), r.state, r.priority, title)
        })
        .collect();
    tasks.sort();
    let mut claims: Vec<_> =
        loaded.claims.iter().map(|c| (c.task_id().to_owned(), c.holder().to_owned(), c.is_released())).collect();
    claims.sort();
    (tasks, claims)
}

fn hold(store: &Store, id: &TaskId, holder: &str) {
    let opts =
        AcquireOptions { holder: holder.into(), ttl: chrono::Duration::minutes(30), reason: None, session: None };
    claim::acquire(store, &ctx(), &ClaimKey::node(id), &opts).expect("acquire");
}

/// A watch on the task and task-claim refs, as a walk keeps one.
fn watch(store: &Store) -> Watch {
    let layout = store.layout().expect("the loop directory");
    let common = layout.root().parent().expect("the loop directory is in the common directory");
    Watch::new(common, &["refs/loop/tasks/", "refs/loop/claims/node/", "refs/loop/journal/"])
}

#[test]
fn load_reads_every_task_and_claim_and_keeps_the_cache_file() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let a = add(&store, &ctx(), "Alpha", TaskFields { priority: Some(Priority::P0), ..Default::default() });
    let b = add(&store, &ctx(), "Bravo", TaskFields::default());
    backlog::set_state(&store, &ctx(), &b, State::Parked, None).expect("park");
    hold(&store, &a, "h1");

    let loaded = index::load(&store).expect("load");
    let (tasks, claims) = rows(&loaded);
    let states: Vec<(&str, State, Priority, &str)> =
        tasks.iter().map(|(id, _, s, p, t)| (id.as_str(), *s, *p, t.as_str())).collect();
    let mut expected =
        vec![(a.as_str(), State::Open, Priority::P0, "Alpha"), (b.as_str(), State::Parked, Priority::P2, "Bravo")];
    expected.sort();
    assert_eq!(states, expected);
    assert_eq!(claims, vec![(a.to_string(), "h1".to_owned(), false)]);
    assert!(loaded.corrupt.is_empty(), "{:?}", loaded.corrupt);
    assert!(store.layout().expect("layout").index().exists(), "the cache file is written");
}

/// The index file's records section holds each task's JSON: change a title there, keeping its
/// length, and see whether `load` used the file (same tip) or read the task again (new tip).
fn doctor_title(store: &Store, from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let path = store.layout().expect("layout").index();
    let bytes = std::fs::read(&path).expect("the cache file");
    let text = String::from_utf8(bytes).expect("utf-8");
    let needle = format!("\"title\":\"{from}\"");
    assert_eq!(text.matches(&needle).count(), 1, "one record holds {needle}");
    let aside = path.with_extension("doctored");
    std::fs::write(&aside, text.replace(&needle, &format!("\"title\":\"{to}\""))).expect("write");
    std::fs::rename(&aside, &path).expect("replace");
}

#[test]
fn the_cache_is_used_while_a_ref_is_unchanged_and_a_changed_ref_is_read_again() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let a = add(&store, &ctx(), "Alpha", TaskFields::default());
    let b = add(&store, &ctx(), "Bravo", TaskFields::default());
    index::load(&store).expect("load");

    doctor_title(&store, "Alpha", "Alphx");
    doctor_title(&store, "Bravo", "Bravx");
    let title = |loaded: &Loaded, id: &TaskId| {
        loaded.tasks.iter().find(|r| r.id() == id.as_str()).expect("a row").task().expect("record").title
    };
    let reused = index::load(&store).expect("load");
    assert_eq!(title(&reused, &a), "Alphx", "a row is used while its ref points where it did");

    let edit = TaskFields { title: Some("Bravo 2".into()), ..Default::default() };
    backlog::edit(&store, &ctx(), &b, edit, Default::default()).expect("edit");
    let changed = index::load(&store).expect("load");
    assert_eq!(title(&changed, &b), "Bravo 2", "a changed ref is read again");
    assert_eq!(title(&changed, &a), "Alphx");

    std::fs::remove_file(store.layout().expect("layout").index()).expect("lose the cache");
    let rebuilt = index::load(&store).expect("load");
    assert_eq!((title(&rebuilt, &a), title(&rebuilt, &b)), ("Alpha".to_owned(), "Bravo 2".to_owned()));
}

#[test]
fn live_follows_the_refs_through_a_watch() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let a = add(&store, &ctx(), "Alpha", TaskFields::default());
    // (The watch vouches for a directory only once it exists: until then every load is full.)
    hold(&store, &a, "h0");
    let mut live = Live::default();
    let mut watch = watch(&store);
    assert_eq!(live.load(&store, &mut watch).expect("load").tasks.len(), 1);
    let index_file = store.layout().expect("layout").index();
    std::fs::remove_file(&index_file).expect("remove the cache file");

    // Changes by another handle: a new task, a state change, a claim, a released claim.
    let other = open(&repo.dir);
    let b = add(&other, &ctx(), "Bravo", TaskFields::default());
    backlog::set_state(&other, &ctx(), &a, State::Parked, Some("later".into())).expect("park");
    hold(&other, &b, "h1");
    claim::release(&other, &ctx(), &ClaimKey::node(&a), "h0", false).expect("release");

    let followed = rows(live.load(&store, &mut watch).expect("load"));
    assert!(!index_file.exists(), "only the changed refs were read (a full load writes the cache file)");
    assert_eq!(followed, rows(&index::load(&store).expect("a full load")), "the same as a full read");
    let states: Vec<State> = followed.0.iter().map(|t| t.2).collect();
    assert_eq!(followed.0.len(), 2);
    assert!(states.contains(&State::Parked) && states.contains(&State::Open));
    assert_eq!(followed.1, {
        let mut c = vec![(a.to_string(), "h0".to_owned(), true), (b.to_string(), "h1".to_owned(), false)];
        c.sort();
        c
    });
}

#[test]
fn live_compacts_many_fresh_rows_into_the_cache_file_and_changes_none() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let seed = add(&store, &ctx(), "seed", TaskFields::default());
    // The watch vouches for a directory only once it exists (until then every load is full).
    hold(&store, &seed, "h1");
    let mut live = Live::default();
    let mut watch = watch(&store);
    live.load(&store, &mut watch).expect("the first, full load");
    let index_file = store.layout().expect("layout").index();

    // A few fresh rows stay on the heap: the cache file is not written.
    std::fs::remove_file(&index_file).expect("remove the cache file");
    for i in 0..5 {
        add(&store, &ctx(), &format!("few {i}"), TaskFields::default());
    }
    assert_eq!(live.load(&store, &mut watch).expect("load").tasks.len(), 6);
    assert!(!index_file.exists(), "five fresh rows are not compacted");

    // More than 256 are: written to the cache file, and read back from it.
    for i in 0..260 {
        add(&store, &ctx(), &format!("many {i}"), TaskFields::default());
    }
    let compacted = rows(live.load(&store, &mut watch).expect("load"));
    assert!(index_file.exists(), "the fresh rows were compacted into the cache file");
    assert_eq!(compacted.0.len(), 266);
    assert_eq!(compacted, rows(&index::load(&store).expect("a full load")), "no row changed");
    let text = std::fs::read_to_string(&index_file).expect("the cache file");
    assert_eq!(text.lines().filter(|l| l.starts_with("T\t")).count(), 266, "every row is in the file");
    // And the next loads go on from the compacted rows.
    let late = add(&store, &ctx(), "late", TaskFields::default());
    let after = rows(live.load(&store, &mut watch).expect("load"));
    assert_eq!(after.0.len(), 267);
    assert!(after.0.iter().any(|t| t.0 == late.as_str() && t.4 == "late"));
}
