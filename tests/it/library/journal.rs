//! The journal store (`store::journal`) on a temporary repository: chains per writer, the
//! causal order of the merged timeline, one task's timeline (also as a walk keeps it, through a
//! watch), and records that cannot be read, which are reported and never end a read.

use git_loop::context::Context;
use git_loop::ids::WriterId;
use git_loop::store::journal::{self, Entry, Filter, LiveChains, NewEvent};
use git_loop::store::watch::Watch;
use git_loop::store::Store;

use super::{ctx, ctx_at, git_ref, open};
use crate::harness::TestEnv;

/// The one place these tests make an event: a note, about `task` if given.
fn note(store: &Store, ctx: &Context, writer: &str, task: Option<&str>) -> Entry {
    let writer: WriterId = writer.parse().expect("a writer id");
    let new = NewEvent { kind: "note".into(), task: task.map(ToOwned::to_owned), ..Default::default() };
    journal::append(store, ctx, &writer, new).expect("append")
}

fn ids(entries: &[Entry]) -> Vec<String> {
    entries.iter().map(|e| e.id.to_string()).collect()
}

/// A watch on the journal's refs, as a walk keeps one.
fn journal_watch(store: &Store) -> Watch {
    let layout = store.layout().expect("the loop directory");
    let common = layout.root().parent().expect("the loop directory is in the common directory");
    Watch::new(common, &["refs/loop/journal/"])
}

#[test]
fn each_writer_appends_to_its_own_chain_in_sequence() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let a: Vec<Entry> = (0..3).map(|_| note(&store, &ctx(), "c-aaaa", None)).collect();
    let b = note(&store, &ctx(), "c-bbbb", None);
    assert_eq!(a.iter().map(|e| e.event.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(b.event.seq, 1, "another writer's chain starts at 1");
    assert_eq!(git_ref(&env, &repo.dir, "refs/loop/journal/c-aaaa"), Some(a[2].id.to_string()));
    assert_eq!(git_ref(&env, &repo.dir, "refs/loop/journal/c-aaaa~2"), Some(a[0].id.to_string()), "one chain");
    assert_eq!(repo.git(&["rev-list", "--count", "refs/loop/journal/c-aaaa"]), "3");
    let all = journal::timeline(&store, &Filter::default()).expect("timeline");
    assert!(all.problems.is_empty(), "{:?}", all.problems);
    assert_eq!(all.entries.len(), 4);
    // A store handle that did not write them reads the same.
    let again = journal::timeline(&open(&repo.dir), &Filter::default()).expect("timeline");
    assert_eq!(ids(&again.entries), ids(&all.entries));
}

#[test]
fn the_timeline_is_causal_whatever_the_writers_clocks_say() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    // Each event is written after seeing the one before, by clocks that disagree by hours.
    let first = note(&store, &ctx_at("2026-03-01T15:00:00Z"), "c-fast", None);
    let second = note(&store, &ctx_at("2026-03-01T09:00:00Z"), "c-slow", None);
    let third = note(&store, &ctx_at("2026-03-01T12:00:00Z"), "c-fast", None);
    assert!(first.event.lamport < second.event.lamport && second.event.lamport < third.event.lamport);
    let timeline = journal::timeline(&store, &Filter::default()).expect("timeline");
    assert_eq!(ids(&timeline.entries), ids(&[first, second, third]), "in the order they were written");
}

#[test]
fn a_tasks_timeline_holds_its_events_only_and_a_live_read_sees_new_ones() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let x1 = note(&store, &ctx(), "c-aaaa", Some("t-x"));
    note(&store, &ctx(), "c-aaaa", Some("t-y"));
    let x2 = note(&store, &ctx(), "c-bbbb", Some("t-x"));
    note(&store, &ctx(), "c-bbbb", None);

    let filtered = journal::timeline(&store, &Filter { task: Some("t-x".into()), session: None }).expect("timeline");
    assert_eq!(ids(&filtered.entries), ids(&[x1.clone(), x2.clone()]));

    let mut live = LiveChains::default();
    let mut watch = journal_watch(&store);
    let first = journal::task_timeline(&store, "t-x", &mut live, &mut watch).expect("task timeline");
    assert_eq!(ids(&first.entries), ids(&[x1.clone(), x2.clone()]));
    // A new chain and a longer old one, written by another handle (another thread of a walk).
    let other = open(&repo.dir);
    let x3 = note(&other, &ctx(), "c-cccc", Some("t-x"));
    let x4 = note(&other, &ctx(), "c-aaaa", Some("t-x"));
    let second = journal::task_timeline(&store, "t-x", &mut live, &mut watch).expect("task timeline");
    assert_eq!(ids(&second.entries), ids(&[x1, x2, x3, x4]));
    assert!(journal::task_timeline(&store, "t-y", &mut live, &mut watch).expect("read").entries.len() == 1);
}

#[test]
fn a_corrupt_record_is_reported_and_the_rest_is_read() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let good = note(&store, &ctx(), "c-good", Some("t-x"));
    let empty_tree = repo.git(&["hash-object", "-t", "tree", "/dev/null"]);
    let first = note(&store, &ctx(), "c-bad", None);
    let bad =
        repo.git(&["commit-tree", &empty_tree, "-p", &first.id.to_string(), "-m", "note t-x\n\n{this is not an event"]);
    repo.git(&["update-ref", "refs/loop/journal/c-bad", &bad]);

    let timeline = journal::timeline(&store, &Filter::default()).expect("a bad record does not end the read");
    let mut read = ids(&timeline.entries);
    let mut written = vec![good.id.to_string(), first.id.to_string()];
    read.sort();
    written.sort();
    assert_eq!(read, written);
    assert_eq!(timeline.problems.len(), 1, "{:?}", timeline.problems);
    assert!(timeline.problems[0].contains(&bad), "the problem names the commit: {:?}", timeline.problems);

    // Nor is an append to its chain: the new event goes on top of it.
    let after = note(&store, &ctx(), "c-bad", None);
    assert_eq!(git_ref(&env, &repo.dir, "refs/loop/journal/c-bad"), Some(after.id.to_string()));
    assert_eq!(git_ref(&env, &repo.dir, "refs/loop/journal/c-bad^"), Some(bad));
    // And the chain's numbers do not repeat: the unreadable record counts as one.
    assert_eq!((first.event.seq, after.event.seq), (1, 3));
}

#[test]
fn a_chain_folded_into_the_archive_goes_on_from_its_archived_tip() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let store = open(&repo.dir);
    let first: Vec<Entry> = (0..2).map(|_| note(&store, &ctx(), "s-aaaa", None)).collect();
    let name = "refs/loop/journal/s-aaaa".to_owned();
    let tip = first[1].id;
    let mut plan = git_loop::store::fold::Plan::default();
    plan.chains.push(name.clone());
    plan.refs.insert(name.clone(), tip);
    let folded = git_loop::store::fold::fold(&store, &plan, ctx().now()).expect("fold");
    assert_eq!(folded.deleted, 1);
    assert_eq!(git_ref(&env, &repo.dir, &name), None, "retired");
    // A late event of that writer: one chain still, its sequence going on.
    let store = open(&repo.dir);
    let late = note(&store, &ctx(), "s-aaaa", None);
    assert_eq!(late.event.seq, 3);
    let parent = repo.git(&["rev-parse", &format!("{}^", late.id)]);
    assert_eq!(parent, tip.to_string(), "written on the archived tip");
    let all = journal::timeline(&store, &Filter::default()).expect("timeline").entries;
    assert_eq!(all.iter().filter(|e| e.event.writer == "s-aaaa").count(), 3);
}
