//! `git loop completion <shell>`: shell completion made from the command line's definition,
//! for `git-loop …` and for `git loop …` through git's own completion.

use std::io::Write as _;

use anyhow::Result;
use clap::{Args, CommandFactory, ValueEnum};

/// Print shell completion for git loop (bash, zsh or fish), for use through git's own.
///
/// bash: `source <(git loop completion bash)` in ~/.bashrc, or save it as
/// ~/.local/share/bash-completion/completions/git-loop (git's completion loads it for
/// `git loop`). zsh: save it as `_git-loop` in a directory of $fpath. fish: save it as
/// ~/.config/fish/conf.d/git-loop.fish.
#[derive(Args)]
pub struct CompletionArgs {
    /// The shell: bash, zsh or fish.
    #[arg(value_enum, value_name = "SHELL", hide_possible_values = true)]
    shell: Shell,
}

#[derive(Clone, Copy, ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// What a command is called by the generated completers: `git-loop` (git runs it as that).
const BIN: &str = "git-loop";

/// bash: git's completion (git-completion.bash) completes `git loop …` by calling
/// `_git_loop`, with `words`, `cword` and `__git_cmd_idx` (where `loop` is) set. It hands the
/// words from `loop` on to clap's completer as if `git-loop` had been typed, and adds the
/// space git's `complete -o nospace` leaves out to each whole word.
const BASH_GIT: &str = r#"
# `git loop …` through git's own completion, which calls _git_loop.
_git_loop() {
    local COMP_WORDS=("git-loop" "${words[@]:__git_cmd_idx+1}")
    local COMP_CWORD=$((cword - __git_cmd_idx))
    _git__loop git-loop "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    local i
    for i in "${!COMPREPLY[@]}"; do
        [[ ${COMPREPLY[i]} == */ ]] || COMPREPLY[i]="${COMPREPLY[i]} "
    done
}
"#;

/// fish: `git loop …` offers what `git-loop …` would, whatever fish's own git completion does
/// with commands of other programs (it has no such hook in some versions). Sourced at start
/// (conf.d), the lines for `git` are there before git's own completion loads.
const FISH_GIT: &str = r#"
# `git loop …` through git's completion: what `git-loop …` would offer.
function __git_loop_complete
    set -l tokens (commandline -opc)
    set -l at (contains -i -- loop $tokens)
    and set -e tokens[1..$at]
    complete -C "git-loop $tokens "(commandline -ct)
end
complete -c git -f -n '__fish_seen_subcommand_from loop' -a '(__git_loop_complete)'
"#;

pub fn run(args: CompletionArgs) -> Result<u8> {
    let mut cmd = visible(super::Cli::command());
    let mut script = Vec::new();
    match args.shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, BIN, &mut script);
            // clap_complete names the top level's state `git__loop` where it finds it, and
            // `git__subcmd__loop` in the cases of the subcommands (a '-' in the program's
            // name is turned into each of its two separators): one name, so that `git loop
            // list --<TAB>` reaches list's options.
            let text = String::from_utf8(script)?.replace("git__subcmd__loop", "git__loop");
            script = text.into_bytes();
            script.extend_from_slice(BASH_GIT.as_bytes());
        }
        // zsh's git completion calls `_git-<command>` for `git <command> …`, with the words
        // from the command on: the function clap writes for `git-loop` is that one.
        Shell::Zsh => clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, BIN, &mut script),
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, BIN, &mut script);
            script.extend_from_slice(FISH_GIT.as_bytes());
        }
    }
    std::io::stdout().lock().write_all(&script)?;
    Ok(0)
}

/// The command line without its hidden commands (the demo's agent), which clap_complete would
/// offer: the same top-level options and visible commands, on a new top level.
fn visible(full: clap::Command) -> clap::Command {
    let mut cmd = clap::Command::new("git-loop")
        .bin_name(BIN)
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(full.is_subcommand_required_set());
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    cmd.args(full.get_arguments().cloned()).subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned())
}
