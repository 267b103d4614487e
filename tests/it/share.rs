//! `git loop config --share`: a clone's loop settings shared as a versioned record that sync
//! brings to the others, which adopt it only when a person says so.

use crate::harness::TestEnv;

#[test]
fn shared_settings_reach_another_clone_which_adopts_them_only_when_asked() {
    let env = TestEnv::new();
    let (remote, a, b) = env.two_clones();
    // The server guards its refs: the settings record is one it knows.
    env.install_receive_hook(&remote);
    a.git(&["config", "loop.checks", "test -f ok"]);
    a.git(&["config", "loop.agent.mine.command", "sh mine.sh"]);
    a.git(&["config", "loop.notify", "./mine-only.sh"]);
    let shared = a.run(&["config", "--share"]).ok();
    assert_eq!(
        shared.stdout.lines().take(2).collect::<Vec<_>>(),
        ["  loop.agent.mine.command = sh mine.sh", "  loop.checks = test -f ok"],
        "a clone's own settings (its remote, its notify command) are not shared:\n{}",
        shared.stdout
    );
    assert!(shared.stdout.contains("shared 2 settings as the loop's (refs/loop/settings, "), "{}", shared.stdout);
    let record = env.git(&remote, &["show", "refs/loop/settings:settings.json"]);
    let record: serde_json::Value = serde_json::from_str(&record).expect("a JSON record");
    assert_eq!(record["version"], 1);
    assert_eq!(record["settings"]["loop.checks"], serde_json::json!(["test -f ok"]));

    // The other clone hears of them at its sync, and nothing changes there by itself.
    let synced = b.run(&["sync"]).ok();
    assert!(
        synced.stderr.contains("the loop's shared settings (by Tess Ter <tess@example.com>) differ from this clone's in 2 settings: see them with 'git loop config', adopt them with 'git loop config --adopt'"),
        "{}",
        synced.stderr
    );
    let unset = env
        .seal(std::process::Command::new("git").args(["config", "loop.checks"]).current_dir(&b.dir))
        .output()
        .expect("git");
    assert!(!unset.status.success(), "not adopted without a person's word");
    let shown = b.run(&["config"]).ok();
    assert!(shown.stdout.contains("  loop.checks = test -f ok   (not set here)"), "{}", shown.stdout);
    let adopted = b.run(&["config", "--adopt"]).ok();
    assert!(adopted.stdout.contains("  set loop.checks = test -f ok (was not set)"), "{}", adopted.stdout);
    assert_eq!(b.git(&["config", "loop.checks"]), "test -f ok");
    assert_eq!(b.git(&["config", "loop.agent.mine.command"]), "sh mine.sh");
    assert!(b.run(&["config", "--json"]).ok().json()["adopted"].as_bool().expect("adopted"));
    let again = b.run(&["sync"]).ok();
    assert!(!again.stderr.contains("shared settings"), "{}", again.stderr);
    // Sharing the same again writes nothing.
    let same = a.run(&["config", "--share"]).ok();
    assert!(same.stdout.contains("the loop's shared settings are these already"), "{}", same.stdout);
    assert!(!b.run(&["doctor"]).stdout.contains("settings"), "doctor reads the record as sound");
}

/// A settings record past 64 KiB: its sharer refuses to write it, the remote's hook refuses one
/// pushed by hand, and a clone that has one anyway reads it as corrupt without loading it. A
/// record without a `loop.user` is shown as unverified.
#[test]
fn a_settings_record_past_its_limit_is_refused_everywhere_and_its_author_is_said_as_verified_or_not() {
    let env = TestEnv::new();
    let (remote, a, b) = env.two_clones();
    env.install_receive_hook(&remote);
    a.git(&["config", "loop.checks", &"x".repeat(70 * 1024)]);
    let refused = a.run(&["config", "--share"]).code(2);
    assert!(
        refused.stderr.contains("settings.json is ")
            && refused.stderr.contains("over the limit of 64 KiB for a settings record"),
        "{}",
        refused.stderr
    );
    assert!(a.git(&["for-each-ref", "refs/loop/settings"]).is_empty(), "nothing written");

    // One made by hand, pushed straight to the remote.
    let record = serde_json::json!({
        "version": 1, "by": "Mallory <m@example.com>", "at": "2026-03-01T12:00:00Z",
        "settings": { "loop.checks": ["x".repeat(5 * 1024 * 1024)] },
    });
    let file = env.path("big-settings.json");
    std::fs::write(&file, serde_json::to_vec(&record).expect("json")).expect("write");
    let blob = a.git(&["hash-object", "-w", file.to_str().expect("utf-8")]);
    let tree = a.git_with_stdin(&["mktree"], &format!("100644 blob {blob}\tsettings.json\n"));
    let commit = a.git(&["commit-tree", &tree, "-m", "loop: settings shared by Mallory"]);
    let pushed = env
        .seal(
            std::process::Command::new("git")
                .args(["push", "origin", &format!("{commit}:refs/loop/settings")])
                .current_dir(&a.dir),
        )
        .output()
        .expect("git push");
    let said = String::from_utf8_lossy(&pushed.stderr);
    assert!(!pushed.status.success(), "the hook refuses it: {said}");
    assert!(said.contains("over the limit of 64 KiB for a settings record"), "{said}");
    // A clone that has it anyway (from a remote without the hook) reads it as corrupt.
    a.git(&["update-ref", "refs/loop/settings", &commit]);
    let corrupt = a.run(&["config"]).code(3);
    assert!(corrupt.stderr.contains("the shared settings record is corrupt: settings.json is "), "{}", corrupt.stderr);
    a.git(&["update-ref", "-d", "refs/loop/settings"]);

    // Shared without a loop.user: said as unverified.
    a.git(&["config", "loop.checks", "test -f ok"]);
    a.run(&["config", "--share"]).ok();
    b.run(&["sync"]).ok();
    let shown = b.run(&["config"]).ok();
    assert!(
        shown.stdout.contains("shared by Tess Ter <tess@example.com> (unverified: it names no loop.user)"),
        "{}",
        shown.stdout
    );
}
