//! `git loop prune`: the branches of finished tasks whose work is elsewhere go; a live task's,
//! one checked out, and work found on no other branch stay (said, and pruned only when asked,
//! and only when an anchor keeps its commits); a dry run deletes nothing; a sync does not bring
//! back what was pruned.

use crate::harness::{Repo, TestEnv};

fn branches(repo: &Repo<'_>) -> Vec<String> {
    repo.git(&["for-each-ref", "--format=%(refname:short)", "refs/heads/"]).lines().map(ToOwned::to_owned).collect()
}

#[test]
fn prune_deletes_what_landed_or_was_accepted_and_keeps_the_rest_saying_why() {
    let env = TestEnv::new();
    let (_remote, repo, other) = env.two_clones();
    let cmd =
        env.agent("writer", "echo \"$GIT_LOOP_TASK\" > \"$GIT_LOOP_TASK.txt\"\ngit loop finish done --message wrote");
    let landed = repo.add(&["Landed", "-p", "p1"]);
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--land", "--max-units", "1"]).ok();
    let waiting = repo.add(&["Done, not landed"]);
    repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--max-units", "1"]).ok();
    // A try nothing took (made by hand: no anchor holds it), and a live task's branch.
    let side =
        repo.git(&["commit-tree", "-p", "main", "-m", "a try nobody took", &repo.git(&["rev-parse", "main^{tree}"])]);
    repo.git(&["branch", &format!("loop-try/{landed}/7"), &side]);
    let live = repo.add(&["Still open"]);
    repo.git(&["branch", &format!("loop/{live}"), "main"]);
    repo.run(&["sync"]).ok();
    let before = branches(&repo);

    let dry = repo.run(&["prune", "--dry-run"]).ok();
    assert_eq!(branches(&repo), before, "a dry run deletes nothing");
    let expected = [
        format!("would prune loop/{landed}"),
        format!("kept        loop/{waiting}"),
        format!("would prune loop-try/{landed}/1"),
        format!("kept        loop-try/{landed}/7"),
        format!("would prune loop-try/{waiting}/1"),
    ];
    let lines: Vec<&str> = dry.stdout.lines().collect();
    assert_eq!(lines.len(), expected.len() + 1, "{}", dry.stdout);
    for start in &expected {
        assert!(lines.iter().any(|l| l.starts_with(start.as_str())), "a line starts with {start:?}:\n{}", dry.stdout);
    }
    assert!(dry.stdout.contains("its work is not on main yet (git loop land)"), "{}", dry.stdout);
    assert!(!dry.stdout.contains(&live), "a live task's branch is not even judged:\n{}", dry.stdout);
    assert_eq!(
        lines.last().copied(),
        Some("3 branches would be pruned; 2 branches kept with work on no other branch ('git loop prune --unlanded' prunes them too; their commits stay anchored)")
    );

    repo.run(&["prune"]).ok();
    let after = branches(&repo);
    for gone in [format!("loop/{landed}"), format!("loop-try/{landed}/1"), format!("loop-try/{waiting}/1")] {
        assert!(!after.contains(&gone), "{gone} pruned: {after:?}");
    }
    for kept in [format!("loop/{waiting}"), format!("loop-try/{landed}/7"), format!("loop/{live}"), "main".to_owned()] {
        assert!(after.contains(&kept), "{kept} kept: {after:?}");
    }
    // The remote keeps its copies, and a sync does not bring them back here.
    repo.run(&["sync"]).ok();
    assert_eq!(branches(&repo), after, "a sync brings nothing pruned back");
    other.run(&["sync"]).ok();
    assert!(branches(&other).contains(&format!("loop/{landed}")), "the other clone still has them");

    // --unlanded: what an anchor keeps goes; what nothing keeps stays, said.
    let out = repo.run(&["prune", "--unlanded"]).ok();
    let after = branches(&repo);
    assert!(!after.contains(&format!("loop/{waiting}")), "{after:?}");
    assert!(after.contains(&format!("loop-try/{landed}/7")), "{after:?}");
    assert!(out.stdout.contains("no anchor holds its commits"), "{}", out.stdout);
    assert_eq!(
        repo.git(&["rev-parse", &format!("refs/loop/done/{waiting}^{{commit}}")]).len(),
        40,
        "its work stays anchored"
    );
}
