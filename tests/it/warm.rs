//! Warm tries (issue 25): a new try starts with the ignored build state `loop.warm` and
//! `.worktreeinclude` name, from the task's previous try's worktree or else the main checkout,
//! before `loop.setup`; only what git ignores is warmed, the source is never written, and
//! race entrants never share a build directory.

use std::path::Path;

use git_loop::ids::TaskId;
use git_loop::tries::warm::Source;
use git_loop::tries::{self, Try};

use super::people::{journal, named, state_dir};
use crate::harness::{Repo, TestEnv};

/// A repository whose `target/` is ignored and holds a "build": `target/debug/out` (with an
/// old modification time) and a link pointing into the checkout; plus an untracked file that
/// is not ignored and an ignored one that `loop.warm` does not name.
fn built(env: &TestEnv) -> Repo<'_> {
    let repo = env.repo("r");
    std::fs::write(repo.dir.join(".gitignore"), "target/\n.env\nscratch/\n").expect("gitignore");
    repo.git(&["add", ".gitignore"]);
    repo.git(&["commit", "-q", "-m", "ignore the build"]);
    std::fs::create_dir_all(repo.dir.join("target/debug/deps")).expect("mkdir");
    std::fs::write(repo.dir.join("target/debug/out"), "built in the checkout\n").expect("write");
    std::fs::write(repo.dir.join("target/debug/deps/lib.rlib"), vec![7u8; 64 * 1024]).expect("write");
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(repo.dir.join("target/debug/out"))
        .and_then(|f| f.set_modified(old))
        .expect("set mtime");
    std::os::unix::fs::symlink(repo.dir.join("README"), repo.dir.join("target/into-checkout")).expect("link");
    std::os::unix::fs::symlink("debug/out", repo.dir.join("target/inside")).expect("link");
    std::fs::write(repo.dir.join("notes.txt"), "mine, not ignored\n").expect("write");
    std::fs::create_dir_all(repo.dir.join("scratch")).expect("mkdir");
    std::fs::write(repo.dir.join("scratch/big"), "ignored, not named\n").expect("write");
    repo
}

/// An agent that writes what it found into `seen.txt` (committed with its work), rewrites
/// the build output in place as cargo does, and says done.
const LOOK: &str = "{ cat target/debug/out; stat -c %Y target/debug/out; test -f notes.txt && echo notes; \
     test -e scratch && echo scratch; test -L target/into-checkout && echo into-checkout; \
     readlink target/inside; cat setup-saw 2>/dev/null || true; } > seen.txt\n\
     echo 'rewritten by the try' > target/debug/out\ngit loop finish done";

#[test]
fn a_new_try_starts_with_the_checkouts_ignored_build_state_before_setup_and_never_writes_the_checkout() {
    let env = TestEnv::new();
    let repo = built(&env);
    repo.git(&["config", "--add", "loop.warm", "target"]);
    repo.git(&["config", "--add", "loop.warm", "notes.txt"]);
    let id = repo.add(&["Build it"]);
    let agent = env.agent("look", LOOK);
    // The setup sees the warm state already there; what it writes is ignored via exclude.
    std::fs::write(repo.dir.join(".git/info/exclude"), "setup-saw\n").expect("exclude");
    let setup = "test -f target/debug/out && echo 'setup saw the build' > setup-saw";
    let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--setup", setup]).ok();
    let line = out.stdout.lines().find(|l| l.contains("opened try 1")).unwrap_or_default().to_owned();
    assert!(
        line.contains("· warmed target/ from the main checkout, copied (")
            || line.contains("· warmed target/ from the main checkout by reflink ("),
        "the opened line says how the try was warmed: {}",
        out.stdout
    );
    let seen = repo.git(&["show", &format!("loop/{id}:seen.txt")]);
    assert_eq!(
        seen, "built in the checkout\n1000000000\ndebug/out\nsetup saw the build",
        "the try had the build with its modification time, the link that stays inside it, and the \
         setup ran after warming; not the untracked file, not the unnamed ignored one, not the link \
         into the checkout"
    );
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("target/debug/out")).expect("read"),
        "built in the checkout\n",
        "rewriting the warmed file in place never reaches the checkout's"
    );
    let tree = repo.git(&["ls-tree", "-r", "--name-only", &format!("loop/{id}")]);
    assert!(!tree.contains("target/") && !tree.contains("notes.txt"), "warm state is never the work: {tree}");
    let opened = journal(&repo, &id).into_iter().find(|e| e["kind"] == "try_opened").expect("try_opened");
    let warmed = &opened["data"]["warmed"];
    assert_eq!(warmed["from"], "checkout", "{opened}");
    assert_eq!(warmed["paths"], serde_json::json!(["target/"]), "{opened}");
    assert_eq!(warmed["files"], 2, "two files, the links not counted: {opened}");
    assert!(warmed["method"] == "copy" || warmed["method"] == "reflink", "{opened}");
}

/// Called on the library: a walk's recovery removes a try worktree it did not journal, so
/// the previous try's worktree is made here as a walk leaves one (a race's, a take-over's).
#[test]
fn a_new_try_is_warmed_from_the_previous_tries_worktree_while_it_is_there_else_from_the_checkout() {
    let env = TestEnv::new();
    let repo = built(&env);
    std::fs::write(repo.dir.join(".worktreeinclude"), "# build state\n/targ*\n").expect("include");
    let store = crate::library::open(&repo.dir);
    let plan = tries::warm::Plan::read(&store).expect("a plan");
    let task: TaskId = "t-warm".parse().expect("an id");
    let root = tries::worktrees_root(&store).expect("root");
    let add = |n: u32| {
        let try_ = Try::describe(&task, n, &root);
        let path = try_.worktree.to_str().expect("utf-8").to_owned();
        repo.git(&["worktree", "add", "-q", "-b", &format!("loop-try/{task}/{n}"), &path]);
        try_
    };
    let one = add(1);
    std::fs::create_dir_all(one.worktree.join("target/debug")).expect("mkdir");
    std::fs::write(one.worktree.join("target/debug/out"), "built in try 1\n").expect("write");
    let two = add(2);
    let warmed = tries::warm::warm(&store, &two, &plan, 2, false).expect("warm").expect("a plan to warm by");
    assert_eq!((&warmed.source, &warmed.paths[..]), (&Source::Try(1), &["target/".to_owned()][..]));
    assert_eq!(std::fs::read_to_string(two.worktree.join("target/debug/out")).expect("read"), "built in try 1\n");
    assert!(warmed.describe().starts_with("warmed target/ from try 1"), "{}", warmed.describe());
    // Warming again leaves the try's own build as it is.
    std::fs::write(two.worktree.join("target/debug/out"), "try 2's own\n").expect("write");
    let again = tries::warm::warm(&store, &two, &plan, 2, false).expect("warm").expect("a plan");
    assert!(again.paths.is_empty(), "{again:?}");
    assert_eq!(std::fs::read_to_string(two.worktree.join("target/debug/out")).expect("read"), "try 2's own\n");
    // Gone: the next try is warmed from the main checkout.
    tries::remove_worktree(&store, &one).expect("remove");
    tries::remove_worktree(&store, &two).expect("remove");
    let three = add(3);
    let warmed = tries::warm::warm(&store, &three, &plan, 3, false).expect("warm").expect("a plan");
    assert_eq!(warmed.source, Source::Checkout);
    assert_eq!(
        std::fs::read_to_string(three.worktree.join("target/debug/out")).expect("read"),
        "built in the checkout\n"
    );
}

#[test]
fn race_entrants_each_get_a_build_directory_of_their_own() {
    let env = TestEnv::new();
    let repo = built(&env);
    repo.git(&["config", "loop.warm", "target/"]);
    let id = repo.add(&["Race to build"]);
    let s = state_dir(&env);
    // Each appends its name to the build output, waits for the other to have done so, and
    // records what it sees: with a shared (or hard-linked) build both would see both names.
    for (me, other) in [("a", "b"), ("b", "a")] {
        named(
            &repo,
            &env,
            me,
            &format!(
                "echo {me} >> target/debug/out\ntouch {s}/{me}-wrote\n\
                 n=0; while [ ! -f {s}/{other}-wrote ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done\n\
                 cat target/debug/out > seen-{me}.txt\ngit loop finish done",
                s = s.display()
            ),
        );
    }
    let out =
        repo.run_with(&["race", &id, "--together", "a,b", "--grace", "1", "--checks", "true"], &[("GIT_LOOP_NOW", "")]);
    let out = out.ok();
    let warmed = out.stdout.lines().filter(|l| l.contains("warmed target/ from the main checkout")).count();
    assert_eq!(warmed, 2, "both entrants warmed from the checkout: {}", out.stdout);
    let mut seen_by = 0;
    for (me, n) in [("a", 1), ("b", 2)] {
        let seen = std::process::Command::new("git")
            .args(["show", &format!("loop-try/{id}/{n}:seen-{me}.txt")])
            .current_dir(&repo.dir)
            .output()
            .expect("git");
        let seen = String::from_utf8_lossy(&seen.stdout).into_owned();
        // The loser may be stopped before it wrote what it saw; the winner has.
        if !seen.is_empty() {
            seen_by += 1;
            assert_eq!(seen, format!("built in the checkout\n{me}\n"), "{me} saw only its own build");
        }
    }
    assert!(seen_by >= 1, "the winner recorded what it saw: {}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("target/debug/out")).expect("read"),
        "built in the checkout\n",
        "no entrant wrote the checkout's build"
    );
}

#[test]
fn a_warm_path_that_is_absolute_leaves_the_repository_or_is_tracked_is_refused_with_a_hint() {
    let env = TestEnv::new();
    let repo = built(&env);
    repo.add(&["Build it"]);
    let agent = env.agent("done", "git loop finish done");
    for (value, says) in [
        ("/tmp/target", "error: loop.warm '/tmp/target' is an absolute path"),
        ("../elsewhere", "error: loop.warm '../elsewhere' has '..', which leaves the repository"),
        ("README", "error: loop.warm 'README' is tracked: only ignored build state is warmed"),
    ] {
        repo.git(&["config", "loop.warm", value]);
        let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).code(2);
        let first = out.stderr.lines().next().unwrap_or_default();
        assert_eq!(first, says, "{}", out.stderr);
        assert!(out.stderr.lines().nth(1).is_some_and(|l| l.starts_with("hint: ")), "{}", out.stderr);
    }
    repo.git(&["config", "--unset", "loop.warm"]);
    // A .worktreeinclude may have been written for another tool: what it cannot take is said.
    std::fs::write(repo.dir.join(".worktreeinclude"), "target\n**/node_modules\nREADME\n").expect("include");
    let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).ok();
    assert!(
        out.stderr.contains(
            "warning: not warmed: .worktreeinclude:2 '**/node_modules' has '**', which warming does not take\n"
        ) && out.stderr.contains("warning: not warmed: .worktreeinclude:3 'README' is tracked"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("warmed target/ from the main checkout"), "the rest is warmed: {}", out.stdout);
    assert!(Path::new(&repo.dir.join("target/debug/out")).exists());
}

/// Warming never goes through a symlink: not a symlinked parent in the source (which would
/// copy from outside it), nor one in the try (which would write outside it).
#[test]
fn warming_never_reads_or_writes_through_a_symlinked_directory() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let outside = env.path("outside");
    std::fs::create_dir_all(outside.join("node_modules")).expect("mkdir");
    std::fs::write(outside.join("node_modules/secret"), "not the repository's\n").expect("write");
    std::fs::write(repo.dir.join(".gitignore"), "node_modules/\n").expect("gitignore");
    std::fs::create_dir_all(repo.dir.join("web/node_modules")).expect("mkdir");
    std::fs::write(repo.dir.join("web/index.js"), "//\n").expect("write");
    std::fs::write(repo.dir.join("web/node_modules/dep.js"), "dep\n").expect("write");
    std::os::unix::fs::symlink(&outside, repo.dir.join("lib")).expect("link");
    repo.git(&["add", ".gitignore", "web/index.js", "lib"]);
    repo.git(&["commit", "-q", "-m", "a web app and a linked lib"]);
    // The try's branch has `web` as a link out of the repository.
    let main = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&["rm", "-q", "-r", "--cached", "web"]);
    let tree_web = env.path("elsewhere");
    std::fs::create_dir_all(&tree_web).expect("mkdir");
    std::fs::rename(repo.dir.join("web"), env.path("web-aside")).expect("aside");
    std::os::unix::fs::symlink(&tree_web, repo.dir.join("web")).expect("link");
    repo.git(&["add", "web"]);
    repo.git(&["commit", "-q", "-m", "web elsewhere"]);
    let linked = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&["reset", "-q", "--hard", &main]);
    // The reset checked out `web/index.js` again; the ignored build state comes back beside it.
    std::fs::rename(env.path("web-aside/node_modules"), repo.dir.join("web/node_modules")).expect("back");
    repo.git(&["config", "--add", "loop.warm", "web/node_modules"]);
    repo.git(&["config", "--add", "loop.warm", "lib/node_modules"]);
    let store = crate::library::open(&repo.dir);
    let plan = tries::warm::Plan::read(&store).expect("a plan");
    let task: TaskId = "t-links".parse().expect("an id");
    let root = tries::worktrees_root(&store).expect("root");
    let one = Try::describe(&task, 1, &root);
    repo.git(&["branch", &format!("loop-try/{task}/1"), &linked]);
    repo.git(&["worktree", "add", "-q", one.worktree.to_str().expect("utf-8"), &format!("loop-try/{task}/1")]);
    let warmed = tries::warm::warm(&store, &one, &plan, 1, false).expect("warm").expect("a plan");
    assert!(warmed.paths.is_empty(), "nothing warmed through a link: {warmed:?}");
    assert_eq!(warmed.links_left_out, 1, "the source's linked lib/ is left out: {warmed:?}");
    assert_eq!(warmed.failed.len(), 1, "the try's linked web/ is refused: {warmed:?}");
    assert!(std::fs::read_dir(&tree_web).expect("read").next().is_none(), "nothing written outside the try");
    assert!(one.worktree.join("lib").is_symlink(), "the try's lib is its tracked link, nothing copied into it");
}

/// What a try sees of its worktree, written into it last (so it is committed with its work):
/// every path but `.git` and `target/`, the tracked file the try before changed, the
/// modification time of a file nobody changed, the build state, and `git status`.
const INVENTORY: &str = "{ find . -path ./.git -prune -o -path ./target -prune -o -print | sort; cat keep.txt; \
     stat -c %Y src/x; cat target/by 2>/dev/null || echo no-build; git status --porcelain; } > /tmp/seen\n\
     mv /tmp/seen seen.txt\n\
     echo changed >> keep.txt\necho mine > \"new-$GIT_LOOP_TASK.txt\"\n\
     printf 'extra-ignored/\\n' >> .gitignore\nmkdir -p extra-ignored && echo secret > extra-ignored/secret\n\
     mkdir -p target && echo \"$GIT_LOOP_TASK\" > target/by\ngit loop finish done";

fn opened_line(out: &crate::harness::Run, id: &str) -> String {
    out.stdout.lines().find(|l| l.contains(id) && l.contains("opened try")).unwrap_or_default().to_owned()
}

fn checkout_of(repo: &Repo<'_>, id: &str) -> serde_json::Value {
    journal(repo, id).into_iter().find(|e| e["kind"] == "try_opened").expect("try_opened")["data"]["checkout"].clone()
}

/// Issue 25's pool: a finished try's worktree is kept and the next try checks its own branch
/// out in it, in place — whatever the try before (or anyone) left there that is not ignored
/// build state goes, a file the new tree has and nobody changed keeps its modification time,
/// and the ignored build state stays. With `loop.pool 0` nothing is kept, and `doctor` clears
/// what the pool still holds.
#[test]
fn a_finished_tries_worktree_is_checked_out_in_place_for_the_next_try_and_leaks_nothing_of_it() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    std::fs::write(repo.dir.join(".gitignore"), "target/\n").expect("gitignore");
    std::fs::create_dir_all(repo.dir.join("src")).expect("mkdir");
    std::fs::write(repo.dir.join("src/x"), "one\n").expect("write");
    std::fs::write(repo.dir.join("keep.txt"), "keep\n").expect("write");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "files"]);
    let agent = env.agent("inventory", INVENTORY);
    let (first, second, third) = (repo.add(&["First"]), repo.add(&["Second"]), repo.add(&["Third"]));
    let walk = |id: &str| repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--task", id]).ok();
    let out = walk(&first);
    assert!(!opened_line(&out, &first).contains("reused"), "nothing pooled yet: {}", out.stdout);
    assert_eq!(checkout_of(&repo, &first)["how"], "added");
    let pool = repo.dir.join(".git/loop/worktrees/.pool");
    let kept: Vec<_> = std::fs::read_dir(&pool).expect("a pool").flatten().map(|e| e.path()).collect();
    assert_eq!(kept.len(), 1, "the finished try's worktree is kept: {kept:?}");
    assert!(!repo.dir.join(format!(".git/loop/worktrees/{first}-1")).exists(), "not at its try's place any more");
    let listed = repo.git(&["worktree", "list"]);
    assert!(listed.contains(".pool/") && listed.contains("(detached HEAD)"), "no branch stays checked out: {listed}");
    // Whatever else lands there while it waits: files, a nested repository, a link out, a
    // changed tracked file, a touched one.
    let entry = &kept[0];
    let outside = env.path("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(entry.join("stray.txt"), "stray\n").expect("write");
    std::fs::create_dir_all(entry.join("stray-dir/deeper")).expect("mkdir");
    std::fs::write(entry.join("stray-dir/deeper/file"), "stray\n").expect("write");
    std::fs::create_dir_all(entry.join("nested")).expect("mkdir");
    env.git(&entry.join("nested"), &["init", "-q"]);
    std::os::unix::fs::symlink(&outside, entry.join("escape")).expect("symlink");
    std::fs::write(entry.join("keep.txt"), "tampered\n").expect("write");
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    std::fs::File::options().write(true).open(entry.join("src/x")).and_then(|f| f.set_modified(old)).expect("mtime");

    // Another task's try takes it only where the person shares the pool.
    repo.git(&["config", "loop.pool.share", "true"]);
    let out = walk(&second);
    let line = opened_line(&out, &second);
    assert!(
        line.contains(&format!(
            "reused the pooled worktree of {first}-1, another task's, with what git ignores in it (loop.pool.share) ("
        )) && line.contains("kept"),
        "the opened line says the worktree was reused, and whose: {}",
        out.stdout
    );
    assert_eq!(checkout_of(&repo, &second)["shared"], true, "try_opened says it was another task's");
    assert!(line.contains(&format!("/{second}-1 ")), "at the try's own place: {line}");
    let checkout = checkout_of(&repo, &second);
    assert_eq!((checkout["how"].as_str(), checkout["from"].as_str()), (Some("pooled"), Some(&*format!("{first}-1"))));
    let seen = repo.git(&["show", &format!("loop/{second}:seen.txt")]);
    assert_eq!(
        seen,
        ".\n./.gitignore\n./README\n./keep.txt\n./src\n./src/x\nkeep\n1000000000\n".to_owned() + &first,
        "only the new try's tree (the first try's files, its ignore rule and what was put in the pool \
         gone, the tampered file restored), the untouched file not rewritten, the build state kept, \
         and git status clean"
    );
    assert_eq!(std::fs::read_dir(&outside).expect("outside").count(), 0, "nothing written through the link");

    // Off: nothing is reused or kept, and doctor clears what the pool holds.
    repo.git(&["config", "loop.pool", "0"]);
    let out = walk(&third);
    assert!(!opened_line(&out, &third).contains("reused"), "{}", out.stdout);
    assert_eq!(checkout_of(&repo, &third)["how"], "added");
    assert!(!repo.dir.join(format!(".git/loop/worktrees/{third}-1")).exists(), "removed, not kept");
    let doctor = repo.run(&["doctor"]).code(1);
    assert!(doctor.stdout.contains("is left over: the pool is off (loop.pool 0)"), "{}", doctor.stdout);
    repo.run(&["doctor", "--repair"]).ok();
    assert_eq!(std::fs::read_dir(&pool).map(|d| d.count()).unwrap_or(0), 0);
    assert_eq!(repo.git(&["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1, "only the main one");
}

/// A `loop.pool` that is not a count is refused before the walk starts; a pool entry that is no
/// worktree (its registration pruned beside the loop) is never used, and doctor clears it.
#[test]
fn a_bad_pool_setting_is_refused_and_a_broken_pool_entry_is_cleared_not_used() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let agent = env.agent("done", "git loop finish done");
    let id = repo.add(&["Work"]);
    repo.git(&["config", "loop.pool", "lots"]);
    let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).code(2);
    assert!(out.stderr.contains("loop.pool 'lots' is not a number from 0 to 64"), "{}", out.stderr);
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
    repo.git(&["config", "--unset", "loop.pool"]);
    let broken = repo.dir.join(".git/loop/worktrees/.pool/1-broken");
    std::fs::create_dir_all(&broken).expect("mkdir");
    std::fs::write(broken.join(".git"), "gitdir: /nowhere\n").expect("write");
    std::fs::write(broken.join("left.txt"), "not the try's\n").expect("write");
    let doctor = repo.run(&["doctor"]).code(1);
    assert!(
        doctor.stdout.contains("is left over: it is no worktree this clone registers any more"),
        "{}",
        doctor.stdout
    );
    let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).ok();
    assert!(!opened_line(&out, &id).contains("reused"), "{}", out.stdout);
    assert!(!broken.exists(), "cleared when its turn came, not used");
}

/// Issue 42: what git ignores in a finished try's worktree was written by that task's agent (a
/// `local.mk` the Makefile includes, a poisoned build output). The pool hands it to another
/// task's try only where a person shares the pool (`loop.pool.share`), and then says so.
#[test]
fn the_pool_never_hands_one_tasks_ignored_files_to_another_tasks_try_unless_shared() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    std::fs::write(repo.dir.join(".gitignore"), "local.mk\n").expect("gitignore");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "ignore local.mk"]);
    let agent = env.agent(
        "plant",
        "if [ -e local.mk ]; then cp local.mk inherited.txt; fi\n\
         echo \"include from $GIT_LOOP_TASK\" > local.mk\n\
         echo ok > \"own-$GIT_LOOP_TASK.txt\"\n\
         git loop finish done --message ok",
    );
    let (a, b, c) = (repo.add(&["A"]), repo.add(&["B"]), repo.add(&["C"]));
    let walk = |id: &str| repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--task", id]).ok();
    walk(&a);
    let out = walk(&b);
    assert!(!opened_line(&out, &b).contains("reused"), "another task's entry is not taken: {}", out.stdout);
    assert_eq!(checkout_of(&repo, &b)["how"], "added");
    let files = repo.git(&["ls-tree", "-r", "--name-only", &format!("loop/{b}")]);
    assert!(!files.lines().any(|f| f == "inherited.txt"), "B never saw A's local.mk: {files}");

    repo.git(&["config", "loop.pool.share", "true"]);
    let out = walk(&c);
    let line = opened_line(&out, &c);
    assert!(line.contains(", another task's, with what git ignores in it (loop.pool.share)"), "{}", out.stdout);
    assert_eq!(checkout_of(&repo, &c)["shared"], true);
    let inherited = repo.git(&["show", &format!("loop/{c}:inherited.txt")]);
    assert!(inherited.starts_with("include from t-"), "shared, the ignored file came along: {inherited}");
}

/// Issue 42: a `.worktreeinclude` that names a path `loop.sandbox.hide` keeps from sessions
/// (as an agent's landed work might) never warms it into a try, and the walk names the changed
/// `.worktreeinclude` with the changed settings.
#[test]
fn a_hidden_path_is_never_warmed_and_a_changed_worktreeinclude_is_named() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    std::fs::write(repo.dir.join(".gitignore"), "secret.env\n").expect("gitignore");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "ignore the secret"]);
    std::fs::write(repo.dir.join("secret.env"), "TOKEN=hunter2\n").expect("secret");
    repo.git(&["config", "loop.sandbox.hide", "secret.env"]);
    let agent = env.agent(
        "look",
        "if [ -e secret.env ]; then echo warmed > seen.txt; else echo absent > seen.txt; fi\n\
         git loop finish done --message ok",
    );
    let walk = |id: &str| repo.run(&["run", "--agent-cmd", &agent, "--grace", "1", "--task", id]).ok();
    let first = repo.add(&["first"]);
    walk(&first);
    // The agent's work lands a .worktreeinclude that names the secret.
    std::fs::write(repo.dir.join(".worktreeinclude"), "secret.env\n").expect("include");
    repo.git(&["add", ".worktreeinclude"]);
    repo.git(&["commit", "-q", "-m", "warm the env"]);
    let second = repo.add(&["second"]);
    let out = walk(&second);
    assert_eq!(repo.git(&["show", &format!("loop/{second}:seen.txt")]), "absent", "{}", out.stdout);
    assert!(out.stdout.contains("loop.sandbox.hide covers 'secret.env'"), "said on the try's line: {}", out.stdout);
    assert!(
        out.stdout.contains("settings changed since the last walk: .worktreeinclude unset → 'secret.env'"),
        "{}",
        out.stdout
    );
}

/// Issue 43: checks that run a virtualenv the main checkout has and a try lacks (git ignores
/// it, nothing warms it) fail at once; the hint names what works — warming it — not the
/// sandbox's read-only paths.
#[test]
fn a_command_that_needs_what_the_checkout_has_and_the_try_lacks_is_told_to_warm_it() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    std::fs::write(repo.dir.join(".gitignore"), ".venv/\n").expect("gitignore");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "ignore the venv"]);
    std::fs::create_dir_all(repo.dir.join(".venv/bin")).expect("mkdir");
    let python = repo.dir.join(".venv/bin/python");
    std::fs::write(&python, "#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    repo.add(&["test it"]);
    let agent = env.agent("done", "git loop finish done --message ok");
    let out = repo.run(&["run", "--agent-cmd", &agent, "--checks", ".venv/bin/python -m unittest"]);
    assert_ne!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("'.venv' is in the main checkout but not in the try (git ignores it): warm it into each try with git config --add loop.warm .venv"),
        "{}",
        out.stderr
    );
}

/// A fresh try warmed from the main checkout: its tracked files whose content is the
/// checkout's, unedited since its index saw them, take the checkout's modification times (so a
/// build tool sees them as the checkout's build did, and rebuilds nothing for them); a file
/// edited in the checkout since keeps the try's own time; git sees the try as clean.
#[test]
fn a_fresh_trys_tracked_files_take_the_checkouts_times_where_their_content_is_the_same() {
    let env = TestEnv::new();
    let repo = built(&env);
    std::fs::write(repo.dir.join("edited.txt"), "committed\n").expect("write");
    repo.git(&["add", "edited.txt"]);
    repo.git(&["commit", "-q", "-m", "a file to edit"]);
    let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_100_000_000);
    for file in ["README", "edited.txt"] {
        std::fs::File::options()
            .write(true)
            .open(repo.dir.join(file))
            .and_then(|f| f.set_modified(long_ago))
            .expect("set mtime");
    }
    repo.git(&["update-index", "--refresh"]);
    std::fs::write(repo.dir.join("edited.txt"), "edited since, not committed\n").expect("write");
    let id = repo.add(&["Build it"]);
    let agent = env.agent(
        "times",
        "{ stat -c %Y README; stat -c %Y edited.txt; git status --porcelain --untracked-files=no; } > /tmp/times\n\
         mv /tmp/times times.txt\ngit loop finish done",
    );
    let out = repo.run(&["run", "--agent-cmd", &agent, "--grace", "1"]).ok();
    let line = out.stdout.lines().find(|l| l.contains("opened try 1")).unwrap_or_default().to_owned();
    assert!(line.contains("tracked files as old as in the main checkout"), "{}", out.stdout);
    let times = repo.git(&["show", &format!("loop/{id}:times.txt")]);
    let lines: Vec<&str> = times.lines().collect();
    assert_eq!(lines.first().copied(), Some("1100000000"), "README took the checkout's time: {times}");
    assert_ne!(lines.get(1).copied(), Some("1100000000"), "the edited file kept the try's own time: {times}");
    assert_eq!(lines.len(), 2, "git sees nothing changed in the try: {times}");
}

/// The pool's disk use is said by `status` and `doctor`, and `loop.pool.maxSize` caps it: the
/// entries kept longest go until a new one fits, one larger than the cap alone is not kept, a
/// cap lowered later makes doctor name what is beyond it, and a cap that is not a size is
/// refused before a walk starts.
#[test]
fn the_pools_disk_use_is_said_and_capped() {
    let env = TestEnv::new();
    let repo = built(&env);
    let agent = env.agent("quick", "echo done > done.txt\ngit loop finish done");
    let walk = ["run", "--agent-cmd", agent.as_str(), "--grace", "1"];
    for title in ["one", "two"] {
        repo.add(&[title]);
    }
    repo.run(&walk).ok();
    let pool = || repo.run(&["status", "--json"]).ok().json()["pool"].clone();
    let before = pool();
    assert_eq!(before["worktrees"], 2, "{before}");
    let bytes = before["bytes"].as_u64().expect("bytes");
    assert!(bytes > 64 * 1024, "each holds the warmed 64 KiB build at least: {before}");
    let status = repo.run(&["status"]).ok();
    assert!(status.stdout.contains("pool: 2 finished worktrees kept for the next tries, "), "{}", status.stdout);
    let doctor = repo.run(&["doctor"]).ok();
    assert!(doctor.stdout.contains("(2 pooled, "), "{}", doctor.stdout);

    // Room for one entry: the next one given back leaves only itself.
    let one = bytes / 2 + bytes / 4;
    repo.git(&["config", "loop.pool.maxSize", &one.to_string()]);
    repo.add(&["three"]);
    repo.run(&walk).ok();
    let capped = pool();
    assert_eq!(capped["worktrees"], 1, "{capped}");
    assert!(capped["bytes"].as_u64().expect("bytes") <= one, "{capped}");
    assert_eq!(capped["max_bytes"], one, "{capped}");

    // Lowered below what one holds: the next one is not kept, and doctor names the one left.
    repo.git(&["config", "loop.pool.maxSize", "1k"]);
    let doctor = repo.run(&["doctor"]);
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    assert!(
        doctor.stdout.contains("is left over: loop.pool.maxSize is 1 kB, and with the newer ones it would make"),
        "{}",
        doctor.stdout
    );
    repo.add(&["four"]);
    repo.run(&walk).ok();
    repo.run(&["doctor", "--repair"]).ok();
    assert_eq!(pool()["worktrees"], 0, "nothing larger than the cap is kept");

    repo.git(&["config", "loop.pool.maxSize", "lots"]);
    repo.add(&["five"]);
    let refused = repo.run(&walk).code(2);
    assert!(refused.stderr.contains("loop.pool.maxSize 'lots' is not a size"), "{}", refused.stderr);
    assert!(refused.stderr.contains("git config loop.pool.maxSize 5g"), "{}", refused.stderr);
}
