//! docs/cli.md stays in step with `--help`: every `<!-- help: <args> -->` marker there is
//! followed by a fenced block that must equal `git-loop <args> --help`, and every command has
//! one. Run with GIT_LOOP_BLESS=1 to rewrite the blocks from the current help.

use std::path::PathBuf;

use crate::harness::TestEnv;

const COMMANDS: &[&str] = &[
    "",
    "init",
    "add",
    "import",
    "edit",
    "show",
    "list",
    "next",
    "claim",
    "claim acquire",
    "claim release",
    "claim list",
    "done",
    "park",
    "reopen",
    "cancel",
    "log",
    "journal",
    "journal append",
    "sync",
    "doctor",
    "run",
    "race",
    "land",
    "prune",
    "config",
    "mission",
    "mission add",
    "mission project",
    "mission show",
    "mission list",
    "mission run",
    "mission cancel",
    "finish",
    "hook",
    "hook claude-code",
    "hook codex",
    "hook generic",
    "hook pre-push",
    "hook pre-receive",
    "hooks",
    "hooks install",
    "hooks uninstall",
    "hooks status",
    "status",
    "stop",
    "reassign",
    "take-over",
    "hand-back",
    "board",
    "watch",
    "demo",
    "man",
    "completion",
];

fn help(env: &TestEnv, args: &str) -> String {
    let mut argv: Vec<&str> = args.split_whitespace().collect();
    argv.push("--help");
    let out =
        env.seal(&mut std::process::Command::new(crate::harness::bin())).args(&argv).output().expect("run --help");
    assert!(out.status.success(), "git-loop {argv:?} failed");
    String::from_utf8(out.stdout).expect("utf-8").trim_end().to_owned()
}

#[test]
fn docs_cli_md_matches_every_commands_help() {
    let env = TestEnv::new();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let text = std::fs::read_to_string(&path).expect("docs/cli.md exists");
    let bless = std::env::var_os("GIT_LOOP_BLESS").is_some();
    let mut out = String::new();
    let mut rest = text.as_str();
    let mut seen = Vec::new();
    while let Some(at) = rest.find("<!-- help: ") {
        let (before, marker) = rest.split_at(at);
        out.push_str(before);
        let end = marker.find(" -->").expect("a marker ends with -->");
        let args = marker["<!-- help: ".len()..end].trim().to_owned();
        out.push_str(&marker[..end + 4]);
        let after = &marker[end + 4..];
        let open = after.find("```text\n").expect("a ```text block follows each marker");
        let body_start = open + "```text\n".len();
        // The closing fence is at a line start: search from the newline that ends the opening one.
        let close = after[body_start - 1..].find("\n```").expect("the block is closed") + body_start - 1;
        let documented = if close < body_start { "" } else { &after[body_start..close] };
        let actual = help(&env, &args);
        if !bless {
            assert_eq!(
                documented, actual,
                "docs/cli.md is out of step with `git loop {args} --help`; rerun with GIT_LOOP_BLESS=1"
            );
        }
        out.push_str(&after[..body_start]);
        out.push_str(&actual);
        rest = &after[close.max(body_start - 1)..];
        seen.push(args);
    }
    out.push_str(rest);
    if bless {
        std::fs::write(&path, out).expect("write docs/cli.md");
    }
    for command in COMMANDS {
        assert!(seen.iter().any(|s| s == command), "docs/cli.md has no help block for 'git loop {command}'");
    }
}

#[test]
fn help_says_git_loop() {
    let env = TestEnv::new();
    assert!(help(&env, "").contains("Usage: git loop [OPTIONS] <COMMAND>"));
    assert!(help(&env, "claim acquire").contains("Usage: git loop claim acquire [OPTIONS] <KEY>"));
}
