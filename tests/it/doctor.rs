//! `git loop doctor`: a clean repository is said to be clean (exit 0); every kind of damage is
//! found, named, and comes with what to do (exit 3 for a corrupt record, 1 for leftovers only);
//! `--repair` fixes what it can without losing data, and a second check is clean.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::harness::{Repo, TestEnv};

/// Set a file's modification time `seconds` into the past.
fn age(path: &Path, seconds: u64) {
    let file = std::fs::File::options().write(true).open(path).expect("open");
    file.set_modified(SystemTime::now() - Duration::from_secs(seconds)).expect("set mtime");
}

/// Make a file (and its directory), `seconds` old.
fn leave(path: &Path, seconds: u64) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, "").expect("write");
    age(path, seconds);
}

/// `text` with the number of journal chains hidden: commands run by hand append to one of
/// four chains per clone, chosen by process id.
fn chains_hidden(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split(" journal chain").enumerate() {
        let digits = part.len() - part.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        if i > 0 {
            out.push_str(" journal chain");
        }
        if digits > 0 && part[..part.len() - digits].ends_with(' ') {
            out.push_str(&part[..part.len() - digits]);
            out.push_str("<N>");
        } else {
            out.push_str(part);
        }
    }
    pool_size_hidden(&out.replace("<N> journal chain (", "<N> journal chains ("))
}

/// `text` with the pool's disk use (`(3 pooled, 240 kB)`) hidden: it is the file system's
/// blocks, which differ between file systems.
fn pool_size_hidden(text: &str) -> String {
    let Some(at) = text.find(" pooled, ") else { return text.to_owned() };
    let start = at + " pooled, ".len();
    let end = text[start..].find(')').map_or(text.len(), |e| start + e);
    let size = &text[start..end];
    assert!(size.ends_with(" B") || size.ends_with("kB") || size.ends_with("MB") || size.ends_with("GB"), "{size}");
    format!("{}<SIZE>{}", &text[..start], &text[end..])
}

/// `text` with ages in seconds hidden: they are read off the file system's clock, whose ticks
/// are coarser than the test's `set_modified`.
fn ages_hidden(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split(" s ago").enumerate() {
        if i > 0 {
            out.push_str(" s ago");
        }
        let digits = part.len() - part.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        out.push_str(&part[..part.len() - digits]);
        if digits > 0 {
            out.push_str("<S>");
        }
    }
    out
}

/// Import tasks with the given ids and titles (ids fixed, so outputs sort the same way).
fn import(repo: &Repo<'_>, tasks: &[(&str, &str)]) {
    let lines: String =
        tasks.iter().map(|(id, title)| format!("{}\n", serde_json::json!({ "id": id, "title": title }))).collect();
    let file = repo.dir.join("../tasks.jsonl");
    std::fs::write(&file, lines).expect("write");
    repo.run(&["import", file.to_str().expect("utf-8")]).ok();
}

/// Every ref and what it points to, as plain git lists them.
fn refs(repo: &Repo<'_>) -> String {
    repo.git(&["for-each-ref", "--format=%(objectname) %(refname)"])
}

/// Write a commit over a tree holding `files` (name, content), with `parents`.
fn commit(repo: &Repo<'_>, files: &[(&str, &str)], parents: &[&str], message: &str) -> String {
    let entries: String = files
        .iter()
        .map(|(name, content)| {
            let blob = repo.git_with_stdin(&["hash-object", "-w", "--stdin"], content);
            format!("100644 blob {blob}\t{name}\n")
        })
        .collect();
    let tree = repo.git_with_stdin(&["mktree"], &entries);
    let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
    for parent in parents {
        args.extend(["-p", parent]);
    }
    repo.git(&args)
}

/// A repository a walk went through (three tasks done by an agent: tries, anchors, notes,
/// journal chains, ended sessions), an open task and a claim: doctor finds nothing.
#[test]
fn doctor_says_a_walked_repository_is_clean() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    for i in 0..3 {
        repo.add(&[&format!("task {i}")]);
    }
    let agent = env.agent("agent", "echo work-$GIT_LOOP_TASK > work.txt\ngit loop finish done --message landed");
    repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).ok();
    repo.add(&["open one"]);
    repo.run(&["claim", "acquire", "lock:other", "--holder", "h"]).ok();
    let out = repo.run(&["doctor"]).ok();
    assert_eq!(
        chains_hidden(&out.stdout),
        "no problems found: checked 4 tasks, 5 claims, <N> journal chains (30 events), 3 notes, 6 anchors, 6 branches, 0 worktrees (3 pooled, <SIZE>), 3 sessions\n"
    );
    let json = repo.run(&["doctor", "--json"]).ok().json();
    assert_eq!((json["clean"].as_bool(), json["findings"].as_array().map(Vec::len)), (Some(true), Some(0)));
    assert_eq!(json["checked"]["tasks"], 4);
}

/// Each kind of corrupt record is found and named, with what to do: the rows of issue 11
/// (a symbolic task ref, a notes ref at a blob, a bad line in packed-refs, an object missing
/// from a task's history) and garbage in every other kind of loop ref. Exit 3.
#[test]
fn doctor_names_every_kind_of_corrupt_record_and_what_to_do() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    import(&repo, &[("t-good", "good"), ("t-holey", "holey")]);
    let (good, holey) = ("t-good".to_owned(), "t-holey".to_owned());
    repo.run(&["edit", &holey, "--title", "h2"]).ok();
    repo.run(&["edit", &holey, "--title", "h3"]).ok();
    let loops = repo.dir.join(".git/refs/loop");
    std::fs::write(loops.join("tasks/t-sym"), "ref: refs/heads/main\n").expect("write");
    std::fs::write(loops.join("tasks/t-garbage"), "garbage\n").expect("write");
    let blob = repo.git(&["hash-object", "-w", "README"]);
    repo.git(&["update-ref", "refs/loop/tasks/t-blob", &blob]);
    let middle = repo.git(&["rev-parse", &format!("refs/loop/tasks/{holey}~1")]);
    std::fs::remove_file(repo.dir.join(".git/objects").join(&middle[..2]).join(&middle[2..])).expect("loose object");
    let record = repo.git_with_stdin(&["hash-object", "-w", "--stdin"], "{\"version\":1}");
    repo.git(&["update-ref", "refs/loop/claims/node/t-bad", &record]);
    let junk = repo.git_with_stdin(&["hash-object", "-w", "--stdin"], "junk");
    repo.git(&["update-ref", &format!("refs/loop/tries/{good}/1"), &junk]);
    let missing = "1234567890123456789012345678901234567890";
    std::fs::create_dir_all(repo.dir.join(".git/refs/heads/loop")).expect("mkdir");
    std::fs::write(repo.dir.join(".git/refs/heads/loop").join(&good), format!("{missing}\n")).expect("write");
    repo.git(&["update-ref", "refs/notes/loop", &blob]);
    let chain = repo.git(&["for-each-ref", "--format=%(refname)", "--count=1", "refs/loop/journal"]);
    let empty = repo.git(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
    let event = repo.git(&["commit-tree", &empty, "-p", &chain, "-m", "x", "-m", "not json"]);
    repo.git(&["update-ref", &chain, &event]);
    repo.git(&["pack-refs", "--all"]);
    let packed = repo.dir.join(".git/packed-refs");
    let text = std::fs::read_to_string(&packed).expect("packed-refs");
    std::fs::write(&packed, format!("{text}this is garbage\n")).expect("write");
    let line = text.lines().count() + 1;
    let git_dir = repo.dir.join(".git");

    let out = repo.run(&["doctor"]).code(3);
    let ids = [
        (good.as_str(), "<GOOD>"),
        (holey.as_str(), "<HOLEY>"),
        (middle.as_str(), "<MIDDLE>"),
        (blob.as_str(), "<BLOB>"),
        (event.as_str(), "<EVENT>"),
        (chain.as_str(), "<CHAIN>"),
        (git_dir.to_str().expect("utf-8"), "<GIT>"),
    ];
    let expected = format!(
        "\
corrupt: '<GIT>/packed-refs' has a bad line {line}: \"this is garbage\"
  fix: git reads no ref until it is gone: save a copy and delete the line ('cp <GIT>/packed-refs <GIT>/packed-refs.bak && sed -i {line}d <GIT>/packed-refs')
corrupt: claim record 'refs/loop/claims/node/t-bad' is corrupt: missing field `key` at line 1 column 13
  fix: remove it with 'git loop claim release node:t-bad --force'
corrupt: journal chain '<CHAIN>' holds an event that cannot be read: journal commit <EVENT>: its event is not valid: expected ident at line 1 column 2
  fix: every reader skips it and reads the rest of the chain; it stays in the chain's history (a chain only grows)
corrupt: task record 'refs/loop/tasks/t-blob' is corrupt: it points to a blob (<BLOB>), not a commit
  fix: see its history with 'git log refs/loop/tasks/t-blob' and point it at a good commit with 'git update-ref refs/loop/tasks/t-blob <commit>', or delete it with 'git update-ref -d refs/loop/tasks/t-blob'
corrupt: ref 'refs/loop/tasks/t-garbage' cannot be parsed (its file holds no object id)
  fix: git ignores it as broken: remove it ('rm <GIT>/refs/loop/tasks/t-garbage'), then 'git loop sync' brings the task back if a remote has it, or point the ref at its last operation ('git fsck --unreachable' lists it) with 'git update-ref refs/loop/tasks/t-garbage <commit>'
corrupt: task record 'refs/loop/tasks/<HOLEY>' is corrupt: its history is incomplete: object <MIDDLE> is missing
  fix: copy the object back from a clone that has it ('git fetch --refetch <remote>' fetches every object again), then check with 'git loop doctor'
corrupt: ref 'refs/loop/tasks/t-sym' is a symbolic ref (to 'refs/heads/main'), not an object id
  fix: delete the symbolic ref itself with 'git update-ref --no-deref -d refs/loop/tasks/t-sym' (without --no-deref git deletes 'refs/heads/main')
corrupt: anchor 'refs/loop/tries/<GOOD>/1' is corrupt: its try-number record is not JSON
  fix: the anchor only keeps its commit alive and its number taken; point it at the commit it stands for with 'git update-ref refs/loop/tries/<GOOD>/1 <commit>'
corrupt: branch 'loop/<GOOD>' is damaged: object {missing} is missing
  fix: copy the object back from a clone that has it ('git fetch --refetch <remote>' fetches every object again)
corrupt: notes ref 'refs/notes/loop' is corrupt: it points to a blob (<BLOB>), not a commit
  fix: find the notes commit it held with 'git reflog refs/notes/loop' and point it back with 'git update-ref refs/notes/loop <commit>'
10 corrupt records; checked 5 tasks, 1 claim, <N> journal chains (3 events), 0 notes, 1 anchor, 1 branch, 0 worktrees, 0 sessions
"
    );
    assert_eq!(chains_hidden(&out.stdout_with(&ids)), expected);
    let json = repo.run(&["doctor", "--json"]).code(3).json();
    let findings = json["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 10);
    assert!(findings.iter().all(|f| f["severity"] == "corrupt" && f["repairable"] == false));
    assert_eq!(findings[0]["kind"], "packed_refs");
    assert_eq!(findings[5]["subject"], format!("refs/loop/tasks/{holey}"));
    // Nothing here can be repaired without losing or inventing data: --repair changes nothing.
    let before = std::fs::read_to_string(&packed).expect("packed-refs");
    repo.run(&["doctor", "--repair"]).code(3);
    assert_eq!(std::fs::read_to_string(&packed).expect("packed-refs"), before, "packed-refs is left to the user");
    assert!(
        repo.dir.join(".git/refs/loop/tasks/t-garbage").exists()
            && repo.dir.join(".git/refs/loop/tasks/t-sym").exists()
    );
}

/// Leftovers of crashed processes are found (exit 1) and `--repair` removes exactly them:
/// abandoned locks as every writer judges them (`store::locks`: nobody has it open, no git-loop
/// write in flight, 1 s old by the file system's clock) on a claim, on `refs/notes/loop` and
/// `packed-refs.lock`; a registration of a loop worktree whose directory is gone; a loop worktree
/// of a done task; temporary object files older than an hour; caches of an earlier version or
/// that cannot be read. A lock a live process has open is noted and left, and a lock on a ref
/// that is not the loop's, another worktree's registration and a young temporary file are left
/// alone. Afterwards doctor is clean and the tasks, claims and branches are what they were.
#[test]
fn doctor_repair_removes_leftovers_and_nothing_else() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    import(&repo, &[("t-landed", "landed"), ("t-open", "open")]);
    let (landed, open) = ("t-landed".to_owned(), "t-open".to_owned());
    repo.run(&["claim", "acquire", &format!("node:{open}"), "--holder", "h"]).ok();
    repo.git(&["pack-refs", "--all"]);
    let git = repo.dir.join(".git");
    // A loop worktree of a try whose task is then done (a walk killed before removing it).
    let worktree = git.join(format!("loop/worktrees/{landed}-1"));
    repo.git(&["branch", &format!("loop-try/{landed}/1")]);
    repo.git(&["worktree", "add", "-q", worktree.to_str().expect("utf-8"), &format!("loop-try/{landed}/1")]);
    repo.run(&["done", &landed]).ok();
    // Abandoned locks: on a claim (2 s old: the age writers recover at, not doctor's own), on
    // the notes ref, and git's packed-refs.lock. One a live process has open; one on a branch
    // of the user's.
    leave(&git.join(format!("refs/loop/claims/node/{open}.lock")), 2);
    leave(&git.join("refs/notes/loop.lock"), 120);
    leave(&git.join("packed-refs.lock"), 120);
    let held = git.join("refs/loop/claims/node/t-held.lock");
    std::fs::create_dir_all(held.parent().expect("a parent")).expect("mkdir");
    let holder = crate::harness::Holder::open(&held);
    age(&held, 120);
    leave(&git.join("refs/heads/feature.lock"), 3600);
    // A loop worktree deleted under the loop, and another tool's.
    let gone = git.join(format!("worktrees/{open}-1"));
    std::fs::create_dir_all(&gone).expect("mkdir");
    std::fs::write(gone.join("gitdir"), format!("{}/{open}-1/.git\n", env.path("nowhere").display())).expect("write");
    std::fs::write(gone.join("HEAD"), format!("ref: refs/heads/loop-try/{open}/1\n")).expect("write");
    let other = git.join("worktrees/other");
    std::fs::create_dir_all(&other).expect("mkdir");
    std::fs::write(other.join("gitdir"), format!("{}/other/.git\n", env.path("nowhere").display())).expect("write");
    std::fs::write(other.join("HEAD"), "ref: refs/heads/feature\n").expect("write");
    // What an out-of-space write leaves, and one still being written.
    leave(&git.join("objects/tmp_obj_abc"), 7200);
    leave(&git.join("objects/ab/tmp_obj_def"), 7200);
    leave(&git.join("objects/pack/tmp_pack_ghi"), 7200);
    leave(&git.join("objects/tmp_obj_young"), 60);
    // Caches: an old version, and a journal cache with a torn line.
    repo.run(&["list"]).ok();
    leave(&git.join("loop/index-v3"), 0);
    let journal = git.join("loop/journal-v1");
    let mut text = std::fs::read_to_string(&journal).unwrap_or_default();
    text.push_str("torn li");
    std::fs::write(&journal, text).expect("write");
    let refs_before = refs(&repo);
    let board_before = repo.run(&["list", "--json"]).ok().json();

    let out = repo.run(&["doctor"]).code(1);
    let ids = [(open.as_str(), "<OPEN>"), (landed.as_str(), "<LANDED>")];
    let gone_at = format!("{}/", env.path("nowhere").display());
    let recover = "'git loop doctor --repair' recovers it as the next 'git loop run' would: it stops what was left running, commits what is left in the worktrees to their try branches, and releases the claims";
    assert_eq!(
        ages_hidden(&chains_hidden(&out.stdout_with(&ids))),
        format!("\
leftover: ref 'refs/loop/claims/node/<OPEN>' is locked by '.git/refs/loop/claims/node/<OPEN>.lock', left <S> s ago by a writer that is gone (no process has it open, no git-loop write is in flight); every write of it fails while it stays
  fix: 'git loop doctor --repair' removes it (the next git-loop write would too)
leftover: ref 'refs/notes/loop' is locked by '.git/refs/notes/loop.lock', left <S> s ago by a writer that is gone (no process has it open, no git-loop write is in flight); every write of it fails while it stays
  fix: 'git loop doctor --repair' removes it (the next git-loop write would too)
leftover: packed-refs is locked by '.git/packed-refs.lock', left <S> s ago by a writer that is gone (no process has it open, no git-loop write is in flight); every write of it fails while it stays
  fix: 'git loop doctor --repair' removes it (the next git-loop write would too)
leftover: worktree '.git/loop/worktrees/<LANDED>-1' of try 1 of <LANDED> is left over: its task is done, and no walk works in it
  fix: {recover}
leftover: worktree 'nowhere/<OPEN>-1' is registered but its directory is gone
  fix: 'git loop doctor --repair' removes its registration (as 'git worktree prune' does), so its branch can be checked out again
leftover: '.git/objects/ab/tmp_obj_def' is a temporary object file left 120 min ago by a write that never finished
  fix: 'git loop doctor --repair' removes it (no object is in it: a finished write renames its file)
leftover: '.git/objects/pack/tmp_pack_ghi' is a temporary object file left 120 min ago by a write that never finished
  fix: 'git loop doctor --repair' removes it (no object is in it: a finished write renames its file)
leftover: '.git/objects/tmp_obj_abc' is a temporary object file left 120 min ago by a write that never finished
  fix: 'git loop doctor --repair' removes it (no object is in it: a finished write renames its file)
leftover: cache '.git/loop/index-v3' is of an earlier version: nothing reads it
  fix: 'git loop doctor --repair' deletes it; it is rebuilt from the refs when next needed
leftover: cache '.git/loop/journal-v1' has 1 unreadable line
  fix: 'git loop doctor --repair' deletes it; it is rebuilt from the refs when next needed
note: '.git/refs/loop/claims/node/t-held.lock' is held by a live process (a git command has it open); left alone
  fix: nothing to do: it goes when its holder finishes
10 leftovers (10 repairable with 'git loop doctor --repair') (1 thing left alone, as said above); checked 2 tasks, 1 claim, <N> journal chains (2 events), 0 notes, 0 anchors, 1 branch, 2 worktrees, 0 sessions
")
        .replace("nowhere/", &gone_at)
    );

    let repaired = repo.run(&["doctor", "--repair"]).ok();
    assert_eq!(
        ages_hidden(&chains_hidden(&repaired.stdout_with(&ids))),
        "\
repaired: removed the abandoned lock '.git/refs/loop/claims/node/<OPEN>.lock'
repaired: removed the abandoned lock '.git/refs/notes/loop.lock'
repaired: removed the abandoned lock '.git/packed-refs.lock'
repaired: <LANDED>: removed the worktree of try 1, which an earlier walk left (its task is done)
repaired: removed the registration '.git/worktrees/<OPEN>-1' of a worktree that is gone
repaired: removed '.git/objects/ab/tmp_obj_def'
repaired: removed '.git/objects/pack/tmp_pack_ghi'
repaired: removed '.git/objects/tmp_obj_abc'
repaired: removed '.git/loop/index-v3'
repaired: removed '.git/loop/journal-v1'
note: '.git/refs/loop/claims/node/t-held.lock' is held by a live process (a git command has it open); left alone
  fix: nothing to do: it goes when its holder finishes
no problems found (1 thing left alone, as said above): checked 2 tasks, 2 claims, <N> journal chains (3 events), 0 notes, 0 anchors, 1 branch, 0 worktrees (1 pooled, <SIZE>), 0 sessions
"
    );
    assert_eq!(repo.run(&["doctor", "--json"]).ok().json()["clean"], true);
    // Tasks, claims and branches are as they were; new are the recovery's journal event and
    // the clone's walker claim it took and released.
    let changed: Vec<String> = refs(&repo)
        .lines()
        .chain(refs_before.lines())
        .filter(|l| !(refs_before.lines().any(|b| b == *l) && refs(&repo).lines().any(|a| a == *l)))
        .map(|l| l.split_once(' ').map(|(_, r)| r.to_owned()).unwrap_or_default())
        .collect();
    assert!(
        changed.len() == 2
            && changed
                .iter()
                .all(|r| r.starts_with("refs/loop/journal/w-") || r.starts_with("refs/loop/claims/walker/")),
        "{changed:?}"
    );
    assert_eq!(repo.run(&["claim", "list", "--json"]).ok().json()["claims"].as_array().map(Vec::len), Some(1));
    assert_eq!(repo.run(&["list", "--json"]).ok().json(), board_before, "the board is what it was");
    for kept in
        ["refs/loop/claims/node/t-held.lock", "refs/heads/feature.lock", "worktrees/other", "objects/tmp_obj_young"]
    {
        assert!(git.join(kept).exists(), "{kept} is left alone");
    }
    drop(holder);
    assert!(!worktree.exists(), "the leftover worktree is gone");
    let (others, pooled) = repo.worktrees();
    assert_eq!((others.len(), pooled), (1, 1), "'other', and the leftover try's worktree pooled: {others:?}");
}

/// A leftover worktree with work in it: the work is committed to its try branch before the
/// worktree goes, so nothing is lost.
#[test]
fn doctor_repair_commits_what_a_leftover_worktree_holds_before_removing_it() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["cancelled"]);
    let branch = format!("loop-try/{id}/1");
    let worktree = repo.dir.join(format!(".git/loop/worktrees/{id}-1"));
    repo.git(&["branch", &branch]);
    repo.git(&["worktree", "add", "-q", worktree.to_str().expect("utf-8"), &branch]);
    std::fs::write(worktree.join("unsaved.txt"), "work\n").expect("write");
    repo.run(&["cancel", &id]).ok();
    let before = repo.git(&["rev-parse", &branch]);
    let out = repo.run(&["doctor", "--repair"]).ok();
    let head = repo.git(&["rev-parse", &branch]);
    assert_ne!(head, before, "the try branch holds the work now");
    assert_eq!(
        out.stdout.lines().next().map(|l| l.replace(&id, "<ID>").replace(&head[..12], "<HEAD>")),
        Some(
            "repaired: <ID>: removed the worktree of try 1, which an earlier walk left (its task is cancelled); its 1 changed file committed as <HEAD>"
                .to_owned()
        )
    );
    assert_eq!(repo.git(&["show", &format!("{head}:unsaved.txt")]), "work");
    assert_eq!(repo.git(&["rev-parse", &format!("{head}~1")]), before, "a commit on top: nothing rewritten");
    assert!(!worktree.exists());
}

/// A walk killed (`kill -9`) while its agent works: doctor finds the walk, its session and its
/// claim on the task (exit 1), `--repair` recovers them as the next walk would (the agent's
/// work committed to its try branch, the claim released), and the next walk finishes the task.
#[test]
fn doctor_repair_recovers_a_walk_killed_mid_session_as_the_next_walk_would() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["long"]);
    let started = env.path("started");
    let agent = env.agent(
        "slow",
        &format!(
            "if [ -e '{0}' ]; then git loop finish done --message ok; exit 0; fi\necho wip > wip.txt\ntouch '{0}'\nexec sleep 60",
            started.display()
        ),
    );
    let mut walk = repo.command(&["run", "--agent-cmd", &agent, "--grace", "1"]).spawn().expect("a walk");
    crate::harness::wait_for("the agent to start", || started.exists());
    walk.kill().expect("kill -9 the walk");
    walk.wait().expect("reap the walk");
    // The session's guard stops its agent when its walk dies; wait until it is gone too.
    let guard = repo.session_records()[0]["pid"].as_u64().expect("the guard's pid");
    crate::harness::wait_for("the guard to end", || !std::path::Path::new(&format!("/proc/{guard}")).exists());

    let found = repo.run(&["doctor"]).code(1);
    let lines: Vec<&str> = found.stdout.lines().filter(|l| l.starts_with("leftover: ")).collect();
    assert_eq!(lines.len(), 3, "{}", found.stdout);
    assert!(
        lines[0].starts_with("leftover: walk w-")
            && lines[0].ends_with("ended without a trace: it still holds this clone's walker claim"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("leftover: session s-")
            && lines[1].ends_with(&format!("try 1 of {id}) ended without a trace: its walk is gone")),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with(&format!("leftover: claim 'node:{id}' is held by walk w-")), "{}", lines[2]);
    assert!(found.stdout.ends_with("3 leftovers (3 repairable with 'git loop doctor --repair'); checked 1 task, 2 claims, 2 journal chains (5 events), 0 notes, 1 anchor, 2 branches, 1 worktree, 1 session\n"), "{}", found.stdout);

    let repaired = repo.run(&["doctor", "--repair"]).ok();
    assert!(repaired.stdout.contains(&format!("repaired: {id}: session s-")), "{}", repaired.stdout);
    assert!(
        repaired.stdout.contains(&format!("repaired: {id}: released the claim its crashed walk w-")),
        "{}",
        repaired.stdout
    );
    assert!(
        repaired.stdout.lines().last().is_some_and(|l| l.starts_with("no problems found: ")),
        "{}",
        repaired.stdout
    );
    assert_eq!(
        repo.git(&["show", &format!("loop-try/{id}/1:wip.txt")]),
        "wip",
        "the agent's work is on its try branch"
    );
    assert_eq!(repo.run(&["claim", "list", "--json"]).ok().json()["claims"], serde_json::json!([]), "nothing claimed");
    repo.run(&["doctor"]).ok();
    repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done", "the next walk finished it");
    repo.run(&["doctor"]).ok();
}

/// What live processes hold is said to be in use and left alone, whatever its age:
/// `packed-refs.lock` that a git process has open, a claim's lock while a git-loop write is in
/// flight (`.git/loop/writing` held), and a walk at work with its session, claim and worktree.
/// Exit 0. Once the write is over, `--repair` removes the lock it left.
#[test]
fn doctor_leaves_what_live_processes_hold() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["long"]);
    let git = repo.dir.join(".git");
    let started = env.path("started");
    let agent = env.agent("slow", &format!("touch '{}'\nexec sleep 60", started.display()));
    let mut walk = repo.command(&["run", "--agent-cmd", &agent, "--grace", "1"]).spawn().expect("a walk");
    crate::harness::wait_for("the agent to start", || started.exists());
    let packed = git.join("packed-refs.lock");
    let git_holds = crate::harness::Holder::open(&packed);
    age(&packed, 120);
    let claim_lock = git.join("refs/loop/claims/node/t-other.lock");
    leave(&claim_lock, 120);
    let mut writing = std::process::Command::new("flock")
        .args(["-s", "-o", git.join("loop/writing").to_str().expect("utf-8"), "sleep", "60"])
        .spawn()
        .expect("flock(1)");
    let in_flight = git.join("loop/writing");
    crate::harness::wait_for("the write in flight", || {
        // Taken exclusively by nobody else while a shared holder has it.
        std::process::Command::new("flock")
            .args(["-n", "-x", in_flight.to_str().expect("utf-8"), "true"])
            .status()
            .is_ok_and(|status| !status.success())
    });

    for args in [&["doctor"][..], &["doctor", "--repair"][..]] {
        let out = repo.run(args).ok();
        let text = out.stdout.replace(&id, "<ID>");
        let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("note: ")).collect();
        assert_eq!(notes.len(), 3, "{text}");
        assert_eq!(notes[0], "note: '.git/refs/loop/claims/node/t-other.lock' is held by a live process: a git-loop write is in flight in this clone (or a git-loop process is stopped in the middle of one); left alone");
        assert_eq!(
            notes[1],
            "note: '.git/packed-refs.lock' is held by a live process (a git command has it open); left alone"
        );
        assert!(notes[2].starts_with("note: a walk of this clone is at work (w-"), "{}", notes[2]);
        assert!(!text.contains("repaired"), "{text}");
        assert!(
            text.lines()
                .last()
                .is_some_and(|l| l.starts_with("no problems found (3 things left alone, as said above): ")),
            "{text}"
        );
    }
    assert!(packed.exists() && claim_lock.exists(), "live locks are never taken");
    let _ = writing.kill();
    let _ = writing.wait();
    drop(git_holds);
    assert_eq!(repo.run(&["claim", "list", "--json"]).ok().json()["claims"][0]["key"], format!("node:{id}"));
    let _ = walk.kill();
    let _ = walk.wait();
    let repaired = repo.run(&["doctor", "--repair"]).ok();
    assert!(
        repaired.stdout.contains("repaired: removed the abandoned lock '.git/refs/loop/claims/node/t-other.lock'"),
        "{}",
        repaired.stdout
    );
    assert!(!claim_lock.exists() && !packed.exists(), "abandoned once their holders are gone");
    repo.run(&["doctor"]).ok();
}

/// A task whose latest record is garbage but whose operations before it parse: `--repair`
/// appends a commit (parent: the bad tip) holding the task folded from the operations that
/// parse, so the ref moves forward and the remote and the other clones take it as a
/// fast-forward; the bad commit stays in history. Before the repair the other clone's sync
/// cannot merge it.
#[test]
fn doctor_repair_mends_a_task_chain_with_a_commit_on_top_that_every_clone_takes() {
    let env = TestEnv::new();
    let (remote, a, b) = env.two_clones();
    let id = a.add(&["first title", "-p", "p1"]);
    let other = a.add(&["other"]);
    a.run(&["edit", &id, "--title", "second title"]).ok();
    a.run(&["sync"]).ok();
    b.run(&["sync"]).ok();
    let name = format!("refs/loop/tasks/{id}");
    let good_tip = a.git(&["rev-parse", &name]);
    let garbage = "{\"version\": 1, \"lamport\": ";
    let bad = commit(&a, &[("op.json", garbage), ("task.json", garbage)], &[&good_tip], &format!("{id}: garbage"));
    a.git(&["update-ref", &name, &bad]);
    // Pushed as a plain fast-forward, as a hostile or broken client could.
    a.git(&["push", "-q", "origin", &format!("{name}:{name}")]);
    // The other clone's sync meets it and names it (how sync reports it is sync's business).
    let met = b.run(&["sync"]);
    assert!(met.stdout.contains("cannot be read: op.json: "), "{met:?}");

    let found = a.run(&["doctor"]).code(3);
    assert!(
        found.stdout.starts_with(&format!("corrupt: task record '{name}' is corrupt: task.json: EOF while parsing a value at line 1 column 26\n  fix: 'git loop doctor --repair' appends a commit holding the task folded from the operations that parse (nothing is rewritten; the unreadable operations stay in its history)\n")),
        "{}",
        found.stdout
    );
    let refs_before = refs(&a);
    let repaired = a.run(&["doctor", "--repair"]).ok();
    let tip = a.git(&["rev-parse", &name]);
    assert!(
        repaired.stdout.starts_with(&format!(
            "repaired: appended repair commit {tip} to {id}, skipping 1 unreadable operation\nno problems found"
        )),
        "{}",
        repaired.stdout
    );
    assert_eq!(a.git(&["rev-parse", &format!("{tip}^")]), bad, "the repair's parent is the bad tip");
    assert_eq!(a.git(&["rev-list", "--count", &tip]), "4", "create, edit, the garbage, the repair");
    let op: serde_json::Value = serde_json::from_str(&a.git(&["show", &format!("{tip}:op.json")])).expect("op.json");
    assert_eq!(op["repair"]["skipped"], serde_json::json!([bad]));
    let shown = a.run(&["show", &id, "--json"]).ok().json();
    assert_eq!((shown["title"].as_str(), shown["priority"].as_str()), (Some("second title"), Some("p1")));
    // Only the task's ref and the journal chain recording the repair moved.
    let changed: Vec<String> = refs(&a)
        .lines()
        .filter(|l| !refs_before.lines().any(|b| b == *l))
        .map(|l| l.split_once(' ').map(|(_, r)| r.to_owned()).unwrap_or_default())
        .filter(|r| !r.starts_with("refs/loop-remotes/"))
        .collect();
    assert!(
        changed.len() == 2 && changed.contains(&name) && changed[0].starts_with("refs/loop/journal/c-"),
        "{changed:?}"
    );
    assert_eq!(env.git(&remote, &["rev-parse", &name]), tip, "published to the remote as a fast-forward");
    b.run(&["sync"]).ok();
    assert_eq!(b.git(&["rev-parse", &name]), tip, "the other clone converges");
    assert_eq!(b.run(&["show", &id, "--json"]).ok().json()["title"], "second title");
    assert_eq!(b.run(&["show", &other, "--json"]).ok().json()["title"], "other");
    b.run(&["doctor"]).ok();
    let events = a.run(&["log", "--task", &id, "--json"]).ok().json();
    assert_eq!(
        events["events"].as_array().and_then(|e| e.last()).map(|e| e["kind"].clone()),
        Some("task_repaired".into())
    );
}

/// A task whose creating operation is garbage cannot be folded again: reported, not repaired.
#[test]
fn doctor_does_not_repair_a_task_whose_creation_cannot_be_read() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["t"]);
    let name = format!("refs/loop/tasks/{id}");
    // Its only operation, the creation, replaced by garbage.
    let root = commit(&repo, &[("op.json", "garbage"), ("task.json", "garbage")], &[], &format!("{id}: create"));
    repo.git(&["update-ref", &name, &root]);
    let out = repo.run(&["doctor", "--repair"]).code(3);
    assert!(
        out.stdout.starts_with(&format!(
            "corrupt: task record '{name}' is corrupt: task.json: expected value at line 1 column 1; its creating operation cannot be read either, so it cannot be folded again\n  fix: see its history with 'git log {name}' and point it at a good commit"
        )),
        "{}",
        out.stdout
    );
    assert_eq!(repo.git(&["rev-parse", &name]), root, "left as it was");
}

/// The task index is held against the refs: a task whose history lost an object after the
/// index checked it is reported, and so is the index that still holds it as readable;
/// `--repair` deletes the index, and `list` then reports the task as corrupt.
#[test]
fn doctor_finds_an_index_that_holds_a_damaged_task_as_readable() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let good = repo.add(&["good"]);
    let id = repo.add(&["v1"]);
    repo.run(&["edit", &id, "--title", "v2"]).ok();
    repo.run(&["edit", &id, "--title", "v3"]).ok();
    repo.run(&["list"]).ok();
    let name = format!("refs/loop/tasks/{id}");
    let middle = repo.git(&["rev-parse", &format!("{name}~1")]);
    std::fs::remove_file(repo.dir.join(".git/objects").join(&middle[..2]).join(&middle[2..])).expect("loose object");
    assert_eq!(repo.run(&["list"]).ok().stderr, "", "the index checked this tip before the object went");
    let out = repo.run(&["doctor"]).code(3);
    assert!(
        out.stdout.contains(&format!(
            "leftover: cache '.git/loop/index-v6' holds {id} as readable, but its history is not (see above)\n"
        )),
        "{}",
        out.stdout
    );
    repo.run(&["doctor", "--repair"]).code(3);
    let list = repo.run(&["list"]).ok();
    assert_eq!(list.stdout.replace(&good, "<G>"), "ID          PRI  STATE  TITLE\n<G>  p2   ready  good\n");
    assert!(list.stderr.contains(&format!("object {middle} is missing")), "{}", list.stderr);
}

/// A try a person accepts (`done <id> --try 1`) is the task's work now: its worktree goes, as
/// when a walk closes the task, and doctor finds nothing left over (it called the worktree a
/// leftover, exit 1, until --repair).
#[test]
fn an_accepted_try_leaves_no_worktree_for_doctor_to_find() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["judged by hand"]);
    let started = env.path("started");
    let agent = env.agent(
        "slow",
        &format!(
            "echo draft > draft.txt\ntouch {}\nn=0; while [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done",
            started.display()
        ),
    );
    let mut walk = repo
        .command(&["run", "--agent-cmd", &agent, "--grace", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the walk");
    let _deadline = crate::harness::Watchdog::new(walk.id(), std::time::Duration::from_secs(90), "the walk");
    crate::harness::wait_for("the session to start", || started.exists());
    repo.run(&["stop", "--all"]).ok();
    assert_eq!(walk.wait().expect("the walk ends").code(), Some(130), "stopped");
    let (left, _) = repo.worktrees();
    assert_eq!(left.len(), 1, "the stopped try's worktree waits for a decision: {left:?}");
    repo.run(&["done", &id, "--try", "1"]).ok();
    assert_eq!(repo.run(&["show", &id, "--json"]).ok().json()["state"], "done");
    let (left, _) = repo.worktrees();
    assert!(left.is_empty(), "the accepted try's worktree is gone: {left:?}");
    let doctor = repo.run(&["doctor"]);
    assert_eq!(doctor.code, 0, "{}{}", doctor.stdout, doctor.stderr);
}

/// A session record this version cannot read is left alone and said so — not called "in use".
#[test]
fn an_unreadable_session_record_is_left_alone_and_not_called_in_use() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.add(&["a task"]);
    let dir = repo.dir.join(".git/loop/sessions/s-unreadab");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("record.json"), "{ not json").expect("write");
    let out = repo.run(&["doctor"]).ok();
    assert!(out.stdout.contains("the record of session s-unreadab cannot be read"), "{}", out.stdout);
    assert!(!out.stdout.contains("in use"), "{}", out.stdout);
    assert!(out.stdout.contains("(1 thing left alone, as said above)"), "{}", out.stdout);
}
