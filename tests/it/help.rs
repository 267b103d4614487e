//! The person at the terminal: `git loop --help` through git and man, the manual pages, shell
//! completion through git's own, colour, and what others wrote escaped in human output.

use std::io::Read as _;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::harness::{bin, Repo, TestEnv};

/// Whether `tool` is installed. Without it the test is skipped, saying so — unless CI is set,
/// where it fails (.ci/run installs what the tests need).
fn have(tool: &str, what: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "{tool} is not installed and CI is set: {what} cannot be tested");
        eprintln!("skipped: {tool} is not installed, so {what} is not tested here (CI installs it)");
    }
    found
}

/// man's output with its layout undone: overstrikes (`N\bN`) dropped and runs of spaces made
/// one, so that a justified line reads as its text.
fn plain(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let mut out = String::new();
    for c in text.chars() {
        if c == '\u{8}' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// This build of git-loop installed in a prefix of its own, as `cargo install --root` leaves
/// it: `<root>/prefix/bin/git-loop`. Returns the PATH that finds it first.
fn installed(env: &TestEnv) -> (PathBuf, String) {
    let prefix = env.path("prefix");
    std::fs::create_dir_all(prefix.join("bin")).expect("create the prefix");
    std::fs::copy(bin(), prefix.join("bin/git-loop")).expect("install the binary");
    let path = format!("{}:{}", prefix.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    (prefix, path)
}

/// A PATH that finds this build as `git-loop` (a link to it, as the completion scripts call it).
fn linked(env: &TestEnv) -> String {
    let dir = env.path("linked");
    std::fs::create_dir_all(&dir).expect("create the directory");
    std::os::unix::fs::symlink(bin(), dir.join("git-loop")).expect("link the binary");
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
}

/// `program args` in the sealed environment with `path`, pagers off, pages 80 wide.
fn paged(env: &TestEnv, path: &str, program: &str, args: &[&str]) -> Output {
    env.seal(&mut Command::new(program))
        .args(args)
        .env("PATH", path)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "80")
        .current_dir(env.root.path())
        .output()
        .expect("run")
}

#[test]
fn git_loop_help_and_git_help_loop_show_the_manual_after_the_install_step() {
    let env = TestEnv::new();
    if !have("man", "'git loop --help' through man") {
        return;
    }
    let (prefix, path) = installed(&env);
    // Before the install step's `git loop man --install`, git finds no page: this is what the
    // issue found.
    let before = paged(&env, &path, "git", &["loop", "--help"]);
    assert!(!before.status.success(), "a page was found before any was installed: {}", plain(&before.stdout));

    // The README's install line, after `cargo install` (done above by copying the binary).
    let readme = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README");
    assert!(readme.contains("`cargo install --path . && git loop man --install`"), "the README's install step");
    let install = paged(&env, &path, "git", &["loop", "man", "--install"]);
    assert!(install.status.success(), "git loop man --install: {}", String::from_utf8_lossy(&install.stderr));
    let pages = prefix.join("share/man/man1");
    assert!(
        String::from_utf8_lossy(&install.stdout).contains(&pages.display().to_string()),
        "it says where the pages went: {}",
        String::from_utf8_lossy(&install.stdout)
    );

    for args in [&["loop", "--help"][..], &["help", "loop"]] {
        let out = paged(&env, &path, "git", args);
        let text = plain(&out.stdout);
        assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        assert!(
            text.contains("NAME git-loop - Run coding agents over a backlog"),
            "git {args:?} shows the page: {text}"
        );
        assert!(text.contains("SYNOPSIS git loop"), "git {args:?}: {text}");
        assert!(text.contains("git-loop-run(1)") && text.contains("git-loop-take-over(1)"), "git {args:?}: {text}");
    }
    // Every command has its page, found the same way.
    let out = paged(&env, &path, "man", &["git-loop-claim-acquire"]);
    let text = plain(&out.stdout);
    assert!(out.status.success(), "man git-loop-claim-acquire: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("git loop claim acquire"), "{text}");
}

#[test]
fn every_command_has_a_valid_page() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let page = repo.run(&["man", "run"]).ok().stdout;
    assert!(page.starts_with(".ie ") || page.starts_with(".TH "), "roff: {}", &page[..page.len().min(200)]);
    assert!(page.contains(".TH git-loop-run 1"), "titled by its page name");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH DESCRIPTION", ".SH OPTIONS"] {
        assert!(page.contains(section), "{section} in:\n{page}");
    }
    assert!(page.contains(r"\-\-checks"), "run's options are on its page");
    // groff reads it without a warning.
    if have("groff", "the roff of the pages") {
        let mut child = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run groff");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), page.as_bytes()).expect("feed groff");
        let out = child.wait_with_output().expect("wait for groff");
        assert!(out.status.success() && out.stderr.is_empty(), "groff: {}", String::from_utf8_lossy(&out.stderr));
    }
    let nested = repo.run(&["man", "claim", "acquire"]).ok().stdout;
    assert!(nested.contains(".TH git-loop-claim-acquire 1"), "{nested}");
    let bad = repo.run(&["man", "nosuch"]).code(2).stderr;
    assert_eq!(bad, "error: 'git loop nosuch' is not a command\nhint: 'git loop --help' lists the commands\n");

    // --install --dir: one page per command, hidden ones left out.
    let dir = env.path("pages");
    let listed = repo.run(&["man", "--install", "--dir", dir.to_str().expect("utf-8"), "--json"]).ok().json();
    let names: Vec<&str> = listed["pages"].as_array().expect("pages").iter().filter_map(|p| p.as_str()).collect();
    for name in ["git-loop.1", "git-loop-run.1", "git-loop-claim-acquire.1", "git-loop-completion.1", "git-loop-man.1"]
    {
        assert!(names.contains(&name) && dir.join(name).is_file(), "{name} in {names:?}");
    }
    assert!(!names.iter().any(|n| n.contains("demo-agent") || n.contains("help")), "{names:?}");
    // Where nothing can be written (root included): one line, and where else they can go.
    let file = env.path("a-file");
    std::fs::write(&file, "").expect("write");
    let bad = repo.run(&["man", "--install", "--dir", file.join("man1").to_str().expect("utf-8")]).code(1).stderr;
    assert!(
        bad.starts_with("error: cannot create '") && bad.contains("\nhint: install them where you can write"),
        "{bad}"
    );
    assert_eq!(bad.lines().count(), 2, "{bad}");
}

/// The places git's bash completion is installed by distributions.
fn git_bash_completion() -> Option<PathBuf> {
    [
        "/usr/share/bash-completion/completions/git",
        "/usr/share/git/completion/git-completion.bash",
        "/etc/bash_completion.d/git",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

#[test]
fn bash_completes_git_loop_through_gits_own_completion() {
    let env = TestEnv::new();
    let Some(git_completion) = git_bash_completion() else {
        assert!(std::env::var_os("CI").is_none(), "git's bash completion is not installed and CI is set");
        eprintln!("skipped: git's bash completion is not installed, so it is not tested here");
        return;
    };
    let repo = env.repo("r");
    let id = repo.add(&["Write the parser"]);
    let path = linked(&env);
    let ours = env.path("git-loop.bash");
    std::fs::write(&ours, repo.run(&["completion", "bash"]).ok().stdout).expect("write the completion");
    // What bash does on <TAB>: COMP_WORDS and COMP_CWORD set, then the function `complete`
    // registered for `git` called (git's own, which hands `git loop …` to _git_loop).
    let script = format!(
        r#"
source {git}
source {ours}
complete_line() {{
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}; COMPREPLY=()
    local fn; fn=$(complete -p "$1" | sed 's/.* -F \([^ ]*\) .*/\1/')
    "$fn" "$1" "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
    echo "$*|${{COMPREPLY[*]}}|"
}}
complete_line git loop ru
complete_line git -C . loop claim ac
complete_line git loop list --st
complete_line git loop completion ""
complete_line git-loop ru
complete_line git loop de
complete_line git loop show {prefix}
complete_line git loop run --task {prefix}
complete_line git loop run --agent cl
"#,
        prefix = &id[..4],
        git = git_completion.display(),
        ours = ours.display()
    );
    let out = env
        .seal(&mut Command::new("bash"))
        .args(["--norc", "--noprofile", "-c", &script])
        .env("PATH", &path)
        .current_dir(&repo.dir)
        .output()
        .expect("run bash");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("git loop ru|run |"), "git loop ru<TAB> offers run:\n{text}");
    // Task ids and agents, asked of the repository.
    assert!(text.contains(&format!("git loop show {}|{id} |", &id[..4])), "{text}");
    assert!(text.contains(&format!("git loop run --task {}|{id} |", &id[..4])), "{text}");
    assert!(text.contains("git loop run --agent cl|claude |"), "{text}");
    assert!(text.contains("git -C . loop claim ac|acquire |"), "{text}");
    assert!(text.contains("git loop list --st|--state |"), "{text}");
    assert!(text.contains("git loop completion |") && text.contains(" bash  zsh  fish |"), "{text}");
    // The same script completes the program under its own name.
    assert!(text.contains("git-loop ru|run|"), "{text}");
    // A hidden command (the demo's agent) is not offered.
    assert!(text.contains("git loop de|demo |"), "{text}");
}

#[test]
fn bash_completes_git_loop_with_task_ids_and_agents_without_bash_completion_or_gits_own() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let id = repo.add(&["Write the parser"]);
    repo.git(&["config", "loop.agent.mine.command", "true"]);
    let path = linked(&env);
    let ours = env.path("git-loop.bash");
    std::fs::write(&ours, repo.run(&["completion", "bash"]).ok().stdout).expect("write the completion");
    // Only our script: no bash-completion, no git completion loaded.
    let script = format!(
        r#"
source {ours}
complete_line() {{
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}; COMPREPLY=()
    local fn; fn=$(complete -p "$1" | sed 's/.* -F \([^ ]*\) .*/\1/')
    "$fn" "$1" "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
    echo "$*|${{COMPREPLY[*]}}|"
}}
complete_line git lo
complete_line git loop ru
complete_line git -C . loop show {prefix}
complete_line git loop reassign {id} mi
complete_line git loop run --together claude,co
complete_line git loop list --st
complete_line git-loop take-over {prefix}
"#,
        ours = ours.display(),
        prefix = &id[..4],
    );
    let out = env
        .seal(&mut Command::new("bash"))
        .args(["--norc", "--noprofile", "-c", &script])
        .env("PATH", &path)
        .current_dir(&repo.dir)
        .output()
        .expect("run bash");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    let expected = format!(
        "git lo|loop|\ngit loop ru|run|\ngit -C . loop show {p}|{id}|\ngit loop reassign {id} mi|mine|\n\
         git loop run --together claude,co|claude,codex|\ngit loop list --st|--state|\ngit-loop take-over {p}|{id}|\n",
        p = &id[..4]
    );
    assert_eq!(text, expected);
}

#[test]
fn zsh_and_fish_completion_parse() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    for (shell, check) in [("zsh", &["-n"][..]), ("fish", &["--no-execute"])] {
        let script = repo.run(&["completion", shell]).ok().stdout;
        match shell {
            "zsh" => assert!(script.starts_with("#compdef git-loop") && script.contains("_git-loop()"), "{script}"),
            _ => assert!(script.contains("complete -c git -f -n '__fish_seen_subcommand_from loop'"), "{script}"),
        }
        // Parsed by the shell, when it is here (neither is required).
        if Command::new("sh").args(["-c", &format!("command -v {shell}")]).output().is_ok_and(|o| o.status.success()) {
            let file = env.path(&format!("git-loop.{shell}"));
            std::fs::write(&file, &script).expect("write");
            let out = Command::new(shell).args(check).arg(&file).output().expect("run the shell");
            assert!(out.status.success(), "{shell} {check:?}: {}", String::from_utf8_lossy(&out.stderr));
        } else {
            eprintln!("{shell} is not installed: its completion is not parsed here");
        }
    }
    repo.run(&["completion", "tcsh"]).code(2);
}

#[test]
fn fish_completes_git_loop_through_git() {
    let env = TestEnv::new();
    if !Command::new("sh").args(["-c", "command -v fish"]).output().is_ok_and(|o| o.status.success()) {
        eprintln!("fish is not installed: its completion through git is not tested here");
        return;
    }
    let (_, path) = installed(&env);
    let conf = env.path("home/.config/fish/conf.d");
    std::fs::create_dir_all(&conf).expect("fish's conf.d");
    let repo = env.repo("r");
    let id = repo.add(&["Write the parser"]);
    std::fs::write(conf.join("git-loop.fish"), repo.run(&["completion", "fish"]).ok().stdout).expect("write");
    let asked = format!(
        "complete -C 'git loop ru'; complete -C 'git loop claim ac'; complete -C 'git loop show {}'; complete -C 'git loop run --agent cl'",
        &id[..4]
    );
    let out = env
        .seal(&mut Command::new("fish"))
        .args(["-c", &asked])
        .env("PATH", &path)
        .current_dir(&repo.dir)
        .output()
        .expect("run fish");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with("run\t")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("acquire\t")), "{text}");
    assert!(text.lines().any(|l| l == id), "task ids are offered: {text}");
    assert!(text.lines().any(|l| l == "claude"), "agents are offered: {text}");
}

/// Run `git-loop args` in `repo` with stdin, stdout and stderr on a new terminal (a pty),
/// and return what the terminal showed.
fn on_a_terminal(repo: &Repo<'_>, args: &[&str], vars: &[(&str, &str)]) -> String {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors into the given ints; the rest may be null.
    let rc =
        unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut cmd = repo.command(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.env("TERM", "xterm")
        .stdin(slave.try_clone().expect("dup"))
        .stdout(slave.try_clone().expect("dup"))
        .stderr(slave.try_clone().expect("dup"));
    let mut child = cmd.spawn().expect("run git-loop on a terminal");
    let _deadline =
        crate::harness::Watchdog::new(child.id(), std::time::Duration::from_secs(60), "git-loop on a terminal");
    drop(cmd);
    drop(slave);
    let mut shown = Vec::new();
    let mut reader = std::fs::File::from(master);
    let mut buf = [0u8; 4096];
    // Until the last writer is gone: then Linux reports EIO.
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        shown.extend_from_slice(&buf[..n]);
    }
    child.wait().expect("wait");
    String::from_utf8_lossy(&shown).replace("\r\n", "\n")
}

const RED_ERROR: &str = "\x1b[1;31merror:\x1b[0m";
const CYAN_HINT: &str = "\x1b[36mhint:\x1b[0m";

#[test]
fn errors_are_coloured_on_a_terminal_or_when_asked_and_never_otherwise() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    repo.run(&["init"]).ok();
    // Asked for: coloured, even on a pipe and with NO_COLOR.
    for vars in [&[][..], &[("NO_COLOR", "1")]] {
        let err = repo.run_with(&["--color", "always", "show", "t-nosuch"], vars).code(2).stderr;
        assert!(err.starts_with(RED_ERROR) && err.contains(&format!("\n{CYAN_HINT} ")), "{err:?}");
    }
    // On a pipe, by default: plain.
    let err = repo.run(&["show", "t-nosuch"]).code(2).stderr;
    assert!(err.starts_with("error: no task matches") && !err.contains('\x1b'), "{err:?}");
    // On a terminal: coloured by default; not with NO_COLOR set, nor with --color never.
    let shown = on_a_terminal(&repo, &["show", "t-nosuch"], &[]);
    assert!(shown.starts_with(RED_ERROR) && shown.contains(CYAN_HINT), "{shown:?}");
    let shown = on_a_terminal(&repo, &["show", "t-nosuch"], &[("NO_COLOR", "1")]);
    assert!(shown.starts_with("error: no task matches") && !shown.contains('\x1b'), "{shown:?}");
    let shown = on_a_terminal(&repo, &["show", "t-nosuch"], &[("NO_COLOR", "")]);
    assert!(shown.starts_with(RED_ERROR), "an empty NO_COLOR is unset: {shown:?}");
    let shown = on_a_terminal(&repo, &["--color", "never", "show", "t-nosuch"], &[]);
    assert!(shown.starts_with("error: no task matches") && !shown.contains('\x1b'), "{shown:?}");
}

#[test]
fn states_are_coloured_and_json_never_is() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let ready = repo.add(&["Ready one"]);
    let parked = repo.add(&["Parked one"]);
    repo.run(&["park", &parked, "--reason", "later"]).ok();
    let list = on_a_terminal(&repo, &["list"], &[]);
    assert!(list.contains(&format!("{ready}  p2   \x1b[32mready \x1b[0m  Ready one")), "{list:?}");
    assert!(list.contains("\x1b[2mparked\x1b[0m  Parked one"), "{list:?}");
    let show = on_a_terminal(&repo, &["show", &parked], &[]);
    assert!(show.contains("state:   \x1b[2mparked\x1b[0m"), "{show:?}");
    let plain = repo.run(&["list"]).ok().stdout;
    assert!(plain.contains(&format!("{ready}  p2   ready   Ready one")) && !plain.contains('\x1b'), "{plain:?}");
    let json = on_a_terminal(&repo, &["--color", "always", "list", "--json"], &[]);
    assert!(!json.contains('\x1b') && json.contains("\"state\": \"parked\""), "{json:?}");
}

#[test]
fn the_walks_lines_colour_how_a_task_ended() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let done = repo.add(&["Done one", "-p", "p0"]);
    let blocked = repo.add(&["Blocked one", "-p", "p1"]);
    let cmd = env.agent(
        "agent",
        &format!("if [ \"$GIT_LOOP_TASK\" = {done} ]; then git loop finish done; else git loop finish blocked --message 'need a key'; fi"),
    );
    let walk = |colour: &str| {
        repo.run(&["run", "--agent-cmd", &cmd, "--grace", "1", "--session-timeout", "60s", "--color", colour]).stdout
    };
    let out = walk("always");
    assert!(out.lines().any(|l| l.contains(&done) && l.ends_with("\x1b[32mdone\x1b[0m")), "{out:?}");
    assert!(out.lines().any(|l| l.contains(&blocked) && l.contains("\x1b[1;35mneeds-you\x1b[0m · ")), "{out:?}");
    repo.run(&["reopen", &done]).ok();
    let out = walk("never");
    assert!(out.lines().any(|l| l.contains(&done) && l.ends_with(" done")) && !out.contains('\x1b'), "{out:?}");
}

#[test]
fn control_characters_in_what_others_wrote_are_escaped_everywhere_people_read() {
    let env = TestEnv::new();
    let repo = env.repo("r");
    let title = "evil\x1b[31mred\nsecond line";
    let id = repo.add(&[title]);
    repo.run(&["park", &id, "--reason", "why\x1b]0;owned\x07\nmore"]).ok();
    let shown_title = "evil\\u{1b}[31mred\\nsecond line";
    for (args, expected) in [
        (vec!["list"], shown_title),
        (vec!["show", &id], shown_title),
        (vec!["status"], shown_title),
        // `log` shows the first line of a multi-line reason (tests/it/journal.rs).
        (vec!["log"], "why\\u{1b}]0;owned\\u{7}\n"),
    ] {
        // With colour too: the painter's codes are the only escape sequences shown.
        for colour in ["never", "always"] {
            let mut all = vec!["--color", colour];
            all.extend(&args);
            let out = repo.run(&all).ok().stdout;
            assert!(out.contains(expected), "git loop {all:?} shows {expected:?}:\n{out}");
            assert!(!out.contains("\x1b[31m") && !out.contains("\x1b]0") && !out.contains('\x07'), "{all:?}: {out:?}");
            // A newline in a one-line field breaks no line (`show` prints a reason's lines as
            // lines, beneath its field).
            assert!(!out.lines().any(|l| l.trim_start().starts_with("second line")), "{all:?}\n{out}");
            if args[0] != "show" {
                assert!(!out.lines().any(|l| l.trim_start().starts_with("more")), "{all:?}\n{out}");
            }
            if colour == "always" && args[0] == "list" {
                assert!(out.contains("\x1b[2mparked\x1b[0m  evil\\u{1b}[31mred"), "{out:?}");
            }
        }
    }
}
