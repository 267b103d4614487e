//! `git loop completion <shell>`: shell completion made from the command line's definition,
//! for `git-loop …` and for `git loop …` through git's own completion (or, where git's is not
//! loaded and bash-completion is not there to load it, a small one of our own for `git loop`).
//!
//! Words the definition cannot know — task ids, and the agents (presets and the names defined
//! with `loop.agent.<name>.command`) — are asked of the repository when <TAB> is pressed, by the
//! hidden `git-loop complete-words tasks|agents`: which arguments take them is read off the
//! definition here (`spec`), so the scripts follow the commands as they change.

use std::io::Write as _;

use anyhow::Result;
use clap::{Args, CommandFactory, ValueEnum};

/// Print shell completion for git loop (bash, zsh or fish), for use through git's own.
///
/// Commands and options come from their definition; task ids and agents (presets and
/// loop.agent.<name>.command names) are asked of the repository as you press <TAB>.
///
/// bash: `source <(git loop completion bash)` in ~/.bashrc, or save it as
/// ~/.local/share/bash-completion/completions/git-loop (git's completion loads it for
/// `git loop`); sourced without git's completion or bash-completion, it completes `git loop`
/// itself. zsh: save it as `_git-loop` in a directory of $fpath. fish: save it as
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

/// bash: task ids and agents, asked of the repository. `_git__loop` (what both `git-loop` and
/// `git loop` reach) looks first whether the word is one of those (`__git_loop_spec`, written
/// from the definition, says which options and positions take them), else it is clap's.
/// Agents are comma-separated where an option takes a list.
const BASH_WORDS: &str = r#"
# Task ids and agents, asked of the repository: `git-loop complete-words tasks|agents`.
__git_loop_words() {
    local spec_vals spec_tasks spec_agents spec_pos path="" chdir=() npos=0 i=1 w
    __git_loop_spec ""
    while (( i < COMP_CWORD )); do
        w="${COMP_WORDS[i]}"
        case "$w" in
            -C) chdir=(-C "${COMP_WORDS[i+1]}"); ((i++)) ;;
            --*=*) ;;
            -*) [[ " $spec_vals " == *" $w "* ]] && ((i++)) ;;
            *) if (( npos == 0 )) && __git_loop_spec "${path:+$path }$w"; then path="${path:+$path }$w"
               else ((npos++)); fi ;;
        esac
        ((i++))
    done
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" kind=""
    if (( COMP_CWORD > 1 )) && [[ $prev == -* ]]; then
        if [[ " $spec_tasks " == *" $prev "* ]]; then kind=tasks
        elif [[ " $spec_agents " == *" $prev "* ]]; then kind=agents
        elif [[ " $spec_vals " == *" $prev "* ]]; then return 1
        fi
    fi
    if [[ -z $kind && $cur != -* ]]; then
        local positions=($spec_pos)
        kind="${positions[npos]}"
        [[ $kind == - ]] && kind=""
    fi
    [[ -n $kind ]] || return 1
    local before="" word="$cur"
    if [[ $kind == agents && $word == *,* ]]; then before="${word%,*},"; word="${word##*,}"; fi
    local IFS=$'
'
    COMPREPLY=($(compgen -P "$before" -W "$(command git-loop "${chdir[@]}" complete-words "$kind" 2>/dev/null)" -- "$word"))
    return 0
}

_git__loop() {
    __git_loop_words && return 0
    _git__loop_static "$@"
}
"#;

/// bash without git's completion loaded, nor bash-completion to load it on demand: `git loop
/// …` completes all the same (every other `git …` gets file names, as bash's default).
const BASH_BARE: &str = r#"
# `git loop …` where git's own completion is not there to call _git_loop.
if ! complete -p git >/dev/null 2>&1 && ! declare -F _completion_loader >/dev/null; then
    _git_loop_bare() {
        local i=1
        while (( i < COMP_CWORD )); do
            case "${COMP_WORDS[i]}" in
                -C|-c|--git-dir|--work-tree|--namespace) ((i += 2)); continue ;;
                -*) ((i++)); continue ;;
            esac
            break
        done
        if (( i == COMP_CWORD )); then
            COMPREPLY=($(compgen -W "loop" -- "${COMP_WORDS[COMP_CWORD]}"))
            return 0
        fi
        [[ ${COMP_WORDS[i]} == loop ]] || return 0
        local COMP_WORDS=("git-loop" "${COMP_WORDS[@]:i+1}")
        local COMP_CWORD=$((COMP_CWORD - i))
        _git__loop git-loop "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    }
    complete -F _git_loop_bare -o bashdefault -o default git
fi
"#;

pub fn run(args: CompletionArgs) -> Result<u8> {
    let mut cmd = visible(super::Cli::command());
    let specs = spec(&cmd);
    let mut script = Vec::new();
    match args.shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, BIN, &mut script);
            // clap_complete names the top level's state `git__loop` where it finds it, and
            // `git__subcmd__loop` in the cases of the subcommands (a '-' in the program's
            // name is turned into each of its two separators): one name, so that `git loop
            // list --<TAB>` reaches list's options. Its function becomes the static half of
            // ours (`BASH_WORDS`).
            let text = String::from_utf8(script)?
                .replace("git__subcmd__loop", "git__loop")
                .replace("_git__loop() {", "_git__loop_static() {");
            script = text.into_bytes();
            script.extend_from_slice(bash_spec(&specs).as_bytes());
            script.extend_from_slice(BASH_WORDS.as_bytes());
            script.extend_from_slice(BASH_GIT.as_bytes());
            script.extend_from_slice(BASH_BARE.as_bytes());
        }
        // zsh's git completion calls `_git-<command>` for `git <command> …`, with the words
        // from the command on: the function clap writes for `git-loop` is that one.
        Shell::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, BIN, &mut script);
            script = zsh_words(&String::from_utf8(script)?).into_bytes();
        }
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, BIN, &mut script);
            script.extend_from_slice(fish_words(&specs).as_bytes());
            script.extend_from_slice(FISH_GIT.as_bytes());
        }
    }
    std::io::stdout().lock().write_all(&script)?;
    Ok(0)
}

/// Words asked of the repository.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Words {
    /// Task ids.
    Tasks,
    /// Agents: the presets, and the names defined with loop.agent.<name>.command.
    Agents,
}

impl Words {
    fn name(self) -> &'static str {
        match self {
            Words::Tasks => "tasks",
            Words::Agents => "agents",
        }
    }
}

/// Which arguments of one (sub)command take words asked of the repository.
struct Spec {
    /// The command's path below the top (`""`, `"show"`, `"claim acquire"`).
    path: String,
    /// Every spelling of its options that take a value (globals included).
    values: Vec<String>,
    tasks: Vec<String>,
    agents: Vec<String>,
    /// Its positional arguments in order: which words each takes, if any.
    positions: Vec<Option<Words>>,
}

/// The options that name this repository's tasks, and those that name agents (long names).
const TASK_OPTIONS: &[&str] = &["task", "after", "remove-after"];
const AGENT_OPTIONS: &[&str] = &[
    "agent",
    "together",
    "fallback",
    "forbid",
    "reviewer",
    "resolver",
    "summarizer",
    "remove-agent",
    "remove-together",
    "remove-fallback",
    "remove-forbid",
    "remove-reviewer",
];

/// The specs of `cmd` and every subcommand below it. A mission's subcommands name another
/// repository's tasks: they get none of this one's.
fn spec(cmd: &clap::Command) -> Vec<Spec> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<Spec>) {
        let top = !path.is_empty() && !path.contains(' ');
        let mission = path == "mission" || path.starts_with("mission ");
        let mut spec = Spec {
            path: path.to_owned(),
            values: Vec::new(),
            tasks: Vec::new(),
            agents: Vec::new(),
            positions: Vec::new(),
        };
        for arg in cmd.get_arguments() {
            let takes = arg.get_action().takes_values() && arg.get_num_args().is_none_or(|n| n.takes_values());
            if arg.is_positional() {
                let word = match arg.get_id().as_str() {
                    "id" | "target" if top => Some(Words::Tasks),
                    "agent" if top => Some(Words::Agents),
                    _ => None,
                };
                spec.positions.push(word);
                continue;
            }
            if !takes {
                continue;
            }
            let spellings: Vec<String> = arg
                .get_long_and_visible_aliases()
                .into_iter()
                .flatten()
                .map(|l| format!("--{l}"))
                .chain(arg.get_short_and_visible_aliases().into_iter().flatten().map(|c| format!("-{c}")))
                .collect();
            let long = arg.get_long().unwrap_or_default();
            let free = arg.get_possible_values().is_empty();
            if free && !mission && TASK_OPTIONS.contains(&long) {
                spec.tasks.extend(spellings.iter().cloned());
            } else if free && AGENT_OPTIONS.contains(&long) {
                spec.agents.extend(spellings.iter().cloned());
            }
            spec.values.extend(spellings);
        }
        out.push(spec);
        for sub in cmd.get_subcommands() {
            let path = if path.is_empty() { sub.get_name().to_owned() } else { format!("{path} {}", sub.get_name()) };
            walk(sub, &path, out);
        }
    }
    let mut out = Vec::new();
    walk(cmd, "", &mut out);
    out
}

/// `__git_loop_spec <path>`: sets the `spec_*` variables of that command and succeeds, or fails
/// (leaving them) when there is no such command.
fn bash_spec(specs: &[Spec]) -> String {
    let mut out = String::from("\n# Which arguments take task ids and agents, by command (from its definition).\n__git_loop_spec() {\n    case \"$1\" in\n");
    for s in specs {
        let positions: Vec<&str> = s.positions.iter().map(|p| p.map_or("-", Words::name)).collect();
        out.push_str(&format!(
            "        \"{}\") spec_vals=\"{}\"; spec_tasks=\"{}\"; spec_agents=\"{}\"; spec_pos=\"{}\" ;;\n",
            s.path,
            s.values.join(" "),
            s.tasks.join(" "),
            s.agents.join(" "),
            positions.join(" ")
        ));
    }
    out.push_str("        *) return 1 ;;\n    esac\n}\n");
    out
}

/// fish: the same words, for `git-loop …` (and so for `git loop …`, which asks `git-loop`).
fn fish_words(specs: &[Spec]) -> String {
    let mut out = String::from("\n# Task ids and agents, asked of the repository.\n");
    for s in specs.iter().filter(|s| !s.path.is_empty()) {
        let when = format!("__fish_git_loop_using {}", s.path);
        let words = |w: Words| format!("(git-loop complete-words {} 2>/dev/null)", w.name());
        for long in s.tasks.iter().filter_map(|o| o.strip_prefix("--")) {
            out.push_str(&format!("complete -c git-loop -n '{when}' -l {long} -x -a '{}'\n", words(Words::Tasks)));
        }
        for long in s.agents.iter().filter_map(|o| o.strip_prefix("--")) {
            out.push_str(&format!("complete -c git-loop -n '{when}' -l {long} -x -a '{}'\n", words(Words::Agents)));
        }
        if let Some(Some(first)) = s.positions.first() {
            out.push_str(&format!("complete -c git-loop -n '{when}' -f -a '{}'\n", words(*first)));
        }
    }
    out.push_str(
        "function __fish_git_loop_using\n    set -l words (commandline -opc)\n    set -e words[1]\n    for w in $argv\n        contains -- $w $words; or return 1\n    end\nend\n",
    );
    out
}

/// zsh: the task and agent arguments clap leaves to `_default` ask the repository instead: a
/// top-level command's task argument, the task options (not a mission's: they name another
/// repository's tasks) and the agent options.
fn zsh_words(script: &str) -> String {
    let mut out = String::with_capacity(script.len() + 512);
    let mut in_mission = false;
    for line in script.split_inclusive('\n') {
        if line.contains("curcontext=\"${curcontext%:*:*}:git-loop-") {
            in_mission = line.contains(":git-loop-mission-command-");
        }
        let option =
            |longs: &[&str]| line.starts_with('\'') && longs.iter().any(|l| line.contains(&format!("--{l}=[")));
        let line = if line.starts_with("':id -- The task (id or unique prefix):_default'") {
            line.replacen(":_default'", ":_git_loop_tasks'", 1)
        } else if !in_mission && option(TASK_OPTIONS) {
            line.replacen(":ID:_default'", ":ID:_git_loop_tasks'", 1)
        } else if option(AGENT_OPTIONS) {
            line.replacen(":_default'", ":_git_loop_agents'", 1)
        } else {
            line.to_owned()
        };
        out.push_str(&line);
    }
    // Defined before the file's last lines, which call `_git-loop` when zsh autoloads it.
    let words = "_git_loop_tasks() { local -a w; w=(${(f)\"$(git-loop complete-words tasks 2>/dev/null)\"}); compadd -a w }\n\
                 _git_loop_agents() { local -a w; w=(${(f)\"$(git-loop complete-words agents 2>/dev/null)\"}); compadd -a w }\n\n";
    match out.rfind("if [ \"$funcstack[1]\" = \"_git-loop\" ]; then") {
        Some(at) => out.insert_str(at, words),
        None => out.push_str(words),
    }
    out
}

/// Print the words of `kind` this repository has, one a line (nothing outside a repository).
pub fn words(env: &super::Env, kind: Words) -> Result<u8> {
    let mut out = std::io::stdout().lock();
    let Ok(store) = env.open_as_configured() else { return Ok(0) };
    let words: Vec<String> = match kind {
        Words::Tasks => match git_loop::backlog::Board::load(&store, &env.ctx) {
            Ok(board) => board.tasks.iter().map(|r| r.id().to_owned()).collect(),
            Err(_) => Vec::new(),
        },
        Words::Agents => {
            let mut names: Vec<String> =
                git_loop::agent::presets::preset_names().into_iter().map(str::to_owned).collect();
            for (key, _) in store.config_all_prefixed("loop.agent.") {
                if let Some(name) = key.strip_prefix("loop.agent.").and_then(|k| k.strip_suffix(".command")) {
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_owned());
                    }
                }
            }
            names
        }
    };
    for w in words {
        // A broken pipe (the shell stopped reading) ends it quietly.
        if writeln!(out, "{w}").is_err() {
            break;
        }
    }
    Ok(0)
}

/// Print the words a shell completes with: task ids or agents (hidden; the completion scripts
/// call it).
#[derive(Args)]
pub struct CompleteWordsArgs {
    #[arg(value_enum)]
    kind: Words,
}

pub fn run_words(env: &super::Env, args: CompleteWordsArgs) -> Result<u8> {
    words(env, args.kind)
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
