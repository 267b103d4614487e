//! Packs and loose objects: a clone's object database is consolidated after work, as git's
//! own `gc --auto` does (src/store/maintenance.rs; the bounds are in docs/performance.md).

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::harness::TestEnv;

/// The pack files in a repository's object database.
fn packs(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(".git/objects/pack"))
        .map(|entries| entries.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "pack")).count())
        .unwrap_or(0)
}

/// A clone that has gathered twelve one-object packs, as twelve fetches leave them, has them
/// rolled into one by the next git-loop command, after the command's own output, which is
/// unchanged.
#[test]
fn the_next_command_rolls_up_the_packs_a_clone_gathered() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    for i in 0..12 {
        let file = env.path(&format!("object-{i}"));
        std::fs::write(&file, format!("object {i}\n")).expect("write");
        let id = repo.git(&["hash-object", "-w", file.to_str().expect("utf-8")]);
        let mut pack = env
            .seal(&mut Command::new("git"))
            .args(["pack-objects", "-q", ".git/objects/pack/pack"])
            .current_dir(&repo.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("run git pack-objects");
        writeln!(pack.stdin.take().expect("stdin"), "{id}").expect("write to git pack-objects");
        assert!(pack.wait().expect("wait").success(), "git pack-objects");
    }
    repo.git(&["prune-packed"]);
    assert_eq!(packs(&repo.dir), 12);
    let listed = repo.run(&["list"]).ok();
    assert_eq!((listed.stdout.as_str(), listed.stderr.as_str()), ("", ""), "the command's output is its own");
    assert_eq!(packs(&repo.dir), 1, "the twelve packs and the loose objects are rolled into one");
    assert_eq!(repo.git(&["count-objects"]), "0 objects, 0 kilobytes", "no loose object is left");
    repo.git(&["fsck", "--strict", "--no-dangling"]);
}
