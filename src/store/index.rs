//! A derived cache of folded tasks, so `next` and `list` over thousands of tasks read one
//! file instead of three objects per task.
//!
//! `.git/loop/index-v1` holds one line per task ref: `<ref> <tip> <task.json on one line>`.
//! An entry is used only while the ref still points at that tip, so the cache can never
//! disagree with the refs; deleting it loses nothing. Writers replace it whole (write aside,
//! rename), and two processes racing to rewrite it are harmless: each writes a correct cache.

use std::collections::HashMap;
use std::io::Write as _;

use super::task::{self, Snapshot};
use super::Store;
use crate::ids::random_base32;
use anyhow::Result;

const FILE: &str = "index-v1";

/// The readable tasks, and the task refs that could not be read: (ref name, problem).
pub struct Loaded {
    pub tasks: Vec<Snapshot>,
    pub corrupt: Vec<(String, String)>,
}

/// Read every task, through the cache.
pub fn load_tasks(store: &Store) -> Result<Loaded> {
    let path = crate::git::loop_dir(&store.repo).join(FILE);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut cached: HashMap<&str, (&str, &str)> = HashMap::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ' ');
        if let (Some(name), Some(tip), Some(json)) = (parts.next(), parts.next(), parts.next()) {
            cached.insert(name, (tip, json));
        }
    }
    let mut tasks = Vec::new();
    let mut corrupt = Vec::new();
    let mut changed = false;
    let refs = task::list_refs(&store.repo)?;
    for entry in &refs {
        let tip = match &entry.tip {
            Ok(tip) => *tip,
            Err(problem) => {
                corrupt.push((entry.name.clone(), problem.clone()));
                continue;
            }
        };
        let hex = tip.to_string();
        let from_cache = cached
            .get(entry.name.as_str())
            .filter(|(cached_tip, _)| *cached_tip == hex)
            .and_then(|(_, json)| task::parse_task(&entry.name, json.as_bytes()).ok());
        let read = match from_cache {
            Some(task) => Ok(task),
            None => {
                changed = true;
                task::read_at(&store.repo, &entry.name, tip)
            }
        };
        match read {
            Ok(task) => tasks.push(Snapshot { task, tip }),
            Err(err) => corrupt.push((entry.name.clone(), corrupt_message(&err))),
        }
    }
    if changed || cached.len() != tasks.len() {
        // Best effort: a cache that cannot be written only costs speed.
        let _ = write(store, &tasks);
    }
    Ok(Loaded { tasks, corrupt })
}

fn corrupt_message(err: &anyhow::Error) -> String {
    crate::error::find_refusal(err).map_or_else(|| format!("{err:#}"), |r| r.message.clone())
}

fn write(store: &Store, tasks: &[Snapshot]) -> Result<()> {
    let dir = store.loop_dir()?;
    let mut out = Vec::with_capacity(tasks.len() * 256);
    for snapshot in tasks {
        let name = crate::refs::task(&snapshot.task.task_id());
        write!(out, "{name} {} ", snapshot.tip)?;
        serde_json::to_writer(&mut out, &snapshot.task)?;
        out.push(b'\n');
    }
    let aside = dir.join(format!("{FILE}.tmp-{}", random_base32(6)));
    std::fs::write(&aside, &out)?;
    std::fs::rename(&aside, dir.join(FILE)).inspect_err(|_| {
        let _ = std::fs::remove_file(&aside);
    })?;
    Ok(())
}
