//! The ready set: the open tasks whose dependencies are all done, in the order `next` hands
//! them out (priority, then age, then id). An epic is never in it: it is done when its
//! children are, never by an agent.
//!
//! It is derived from the task rows alone, so the index keeps it beside them: worked out once
//! when rows are read from the refs (one pass over the tasks), written in the cache file, and
//! kept current by a walk (`Live`) one changed row at a time, touching only the tasks that wait
//! for it. Whether a live claim holds a ready task is not its to say (each clone judges leases
//! by its own watch): `Board::ready` leaves those out, and checks each task it hands out against
//! its dependencies again, so a set gone stale could only hide a task, never offer one that is
//! not ready. The tests below hold the kept set against one worked out afresh.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::foreign::is_foreign;
use super::task::State;
use crate::ids::Priority;

/// What the ready set reads of a task (the index's rows give it).
pub trait Entry {
    fn id(&self) -> &str;
    fn state(&self) -> State;
    fn priority(&self) -> Priority;
    fn created_at(&self) -> DateTime<Utc>;
    /// The tasks this one comes after.
    fn after(&self) -> impl Iterator<Item = &str>;
    /// An epic (never handed out).
    fn is_epic(&self) -> bool {
        false
    }
}

/// A ready task's place in `next`'s order. Ids are unique, so the order is total.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    priority: Priority,
    created_at: DateTime<Utc>,
    id: Box<str>,
}

impl Key {
    fn of(row: &impl Entry) -> Key {
        Key { priority: row.priority(), created_at: row.created_at(), id: row.id().into() }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ready {
    set: BTreeSet<Key>,
}

/// What the ready set needs to know of a row that is about to change.
pub struct Before {
    key: Key,
    state: State,
    after: Vec<Box<str>>,
}

impl Before {
    pub fn of(row: &impl Entry) -> Before {
        Before { key: Key::of(row), state: row.state(), after: row.after().map(Into::into).collect() }
    }
}

/// Which tasks list a task in their `after`: dependency id → the ids waiting for it.
#[derive(Default)]
pub struct Dependents(HashMap<Box<str>, Vec<Box<str>>>);

impl Dependents {
    pub fn of<R: Entry>(tasks: &[R]) -> Dependents {
        let mut map: HashMap<Box<str>, Vec<Box<str>>> = HashMap::new();
        for row in tasks {
            for dep in row.after() {
                map.entry(dep.into()).or_default().push(row.id().into());
            }
        }
        Dependents(map)
    }

    fn link(&mut self, id: &str, after: impl Iterator<Item = impl AsRef<str>>) {
        for dep in after {
            self.0.entry(dep.as_ref().into()).or_default().push(id.into());
        }
    }

    fn unlink(&mut self, id: &str, after: &[Box<str>]) {
        for dep in after {
            if let Some(waiting) = self.0.get_mut(dep) {
                if let Some(at) = waiting.iter().position(|w| &**w == id) {
                    waiting.swap_remove(at);
                }
                if waiting.is_empty() {
                    self.0.remove(dep);
                }
            }
        }
    }
}

/// The row of task `id` in `tasks` (sorted by id).
fn get<'t, R: Entry>(tasks: &'t [R], id: &str) -> Option<&'t R> {
    tasks.binary_search_by(|r| r.id().cmp(id)).ok().map(|i| &tasks[i])
}

/// Open, not an epic, and every dependency present and done. A dependency on a task of another
/// repository (`<place>#<id>`) is not the rows' to judge: the set keeps the task, and
/// `Board::ready` checks it against what was last read there.
fn is_ready<R: Entry>(tasks: &[R], row: &R) -> bool {
    row.state() == State::Open
        && !row.is_epic()
        && row.after().all(|dep| is_foreign(dep) || get(tasks, dep).is_some_and(|d| d.state() == State::Done))
}

impl Ready {
    /// The ready set of `tasks` (sorted by id), in one pass.
    pub fn of<R: Entry>(tasks: &[R]) -> Ready {
        let done: HashSet<&str> = tasks.iter().filter(|r| r.state() == State::Done).map(|r| r.id()).collect();
        let set = tasks
            .iter()
            .filter(|r| {
                r.state() == State::Open && !r.is_epic() && r.after().all(|dep| is_foreign(dep) || done.contains(dep))
            })
            .map(Key::of)
            .collect();
        Ready { set }
    }

    /// The set as the cache file stores it: positions in `tasks` (sorted by id), in no order.
    pub fn positions<R: Entry>(&self, tasks: &[R]) -> Vec<usize> {
        self.set.iter().filter_map(|k| tasks.binary_search_by(|r| r.id().cmp(&k.id)).ok()).collect()
    }

    /// The set the cache file stored; `None` if a position is out of range.
    pub fn at_positions<R: Entry>(tasks: &[R], positions: impl Iterator<Item = usize>) -> Option<Ready> {
        let mut set = BTreeSet::new();
        for at in positions {
            set.insert(Key::of(tasks.get(at)?));
        }
        Some(Ready { set })
    }

    /// The ready tasks' ids, in `next`'s order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.set.iter().map(|k| &*k.id)
    }

    /// Task `id` changed from `before` (`None`: it was not there) to what `tasks` now holds
    /// for it (if anything): bring the set, and `dependents`, up to date. Only the task and,
    /// when it became done or stopped being done, the tasks waiting for it are looked at.
    pub fn changed<R: Entry>(&mut self, tasks: &[R], dependents: &mut Dependents, id: &str, before: Option<Before>) {
        let now = get(tasks, id);
        let was_done = before.as_ref().is_some_and(|b| b.state == State::Done);
        if let Some(before) = &before {
            self.set.remove(&before.key);
            dependents.unlink(id, &before.after);
        }
        if let Some(row) = now {
            dependents.link(id, row.after());
            if is_ready(tasks, row) {
                self.set.insert(Key::of(row));
            }
        }
        if was_done != now.is_some_and(|r| r.state() == State::Done) {
            let waiting = dependents.0.get(id).cloned().unwrap_or_default();
            for waiting in waiting.iter().filter_map(|w| get(tasks, w)) {
                let key = Key::of(waiting);
                if is_ready(tasks, waiting) {
                    self.set.insert(key);
                } else {
                    self.set.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Row {
        id: String,
        state: State,
        priority: Priority,
        after: Vec<String>,
    }

    impl Entry for Row {
        fn id(&self) -> &str {
            &self.id
        }
        fn state(&self) -> State {
            self.state
        }
        fn priority(&self) -> Priority {
            self.priority
        }
        fn created_at(&self) -> DateTime<Utc> {
            DateTime::<Utc>::UNIX_EPOCH
        }
        fn after(&self) -> impl Iterator<Item = &str> {
            self.after.iter().map(String::as_str)
        }
    }

    fn row(id: &str, state: State, priority: u8, after: &[&str]) -> Row {
        let priority = format!("p{priority}").parse().expect("a priority");
        Row { id: id.into(), state, priority, after: after.iter().map(|a| a.to_string()).collect() }
    }

    /// Apply a change to a sorted list of rows as `Live` does, returning what was there.
    fn apply(tasks: &mut Vec<Row>, id: &str, new: Option<Row>) -> Option<Before> {
        let at = tasks.binary_search_by(|r| r.id().cmp(id));
        let before = at.ok().map(|i| Before::of(&tasks[i]));
        match (at, new) {
            (Ok(i), Some(r)) => tasks[i] = r,
            (Ok(i), None) => {
                tasks.remove(i);
            }
            (Err(i), Some(r)) => tasks.insert(i, r),
            (Err(_), None) => {}
        }
        before
    }

    #[test]
    fn the_set_is_the_open_tasks_whose_dependencies_are_done_in_nexts_order() {
        let tasks = vec![
            row("a", State::Done, 1, &[]),
            row("b", State::Open, 2, &["a"]),
            row("c", State::Open, 0, &["b"]),
            row("d", State::Open, 1, &[]),
            row("e", State::Open, 0, &["missing"]),
            row("f", State::Parked, 0, &[]),
        ];
        let ready = Ready::of(&tasks);
        assert_eq!(ready.ids().collect::<Vec<_>>(), ["d", "b"]);
        let positions = ready.positions(&tasks);
        assert_eq!(Ready::at_positions(&tasks, positions.into_iter()), Some(ready));
        assert_eq!(Ready::at_positions(&tasks, [9].into_iter()), None);
    }

    #[test]
    fn a_set_kept_one_change_at_a_time_is_the_set_worked_out_afresh() {
        // A few hundred random changes to forty tasks with random dependencies (some on tasks
        // that do not exist), each held against the set worked out from scratch.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let states = [State::Open, State::Done, State::Parked, State::Failed];
        let id = |i: u64| format!("t{i:02}");
        let mut tasks: Vec<Row> = Vec::new();
        let mut ready = Ready::of(&tasks);
        let mut dependents = Dependents::of(&tasks);
        for step in 0..600 {
            let target = id(rand(40));
            let new = if rand(8) == 0 {
                None
            } else {
                let after: Vec<String> = (0..rand(3)).map(|_| id(rand(44))).filter(|d| *d != target).collect();
                let after: Vec<&str> = after.iter().map(String::as_str).collect();
                Some(row(&target, states[rand(4) as usize], rand(4) as u8, &after))
            };
            let before = apply(&mut tasks, &target, new);
            ready.changed(&tasks, &mut dependents, &target, before);
            assert_eq!(ready, Ready::of(&tasks), "after step {step} (task {target})");
        }
    }
}
