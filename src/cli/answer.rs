//! How to answer a task that waits for a person, rendered: the ways `ops::answer` finds, as
//! aligned lines, as JSON, and in one line by their verbs.

pub use git_loop::ops::answer::{ways, Failure, Standing};

/// The ways as lines, the commands aligned, under `indent`.
pub fn lines(indent: &str, ways: &[(String, &'static str)]) -> Vec<String> {
    let width = ways.iter().map(|(c, _)| c.chars().count()).max().unwrap_or(0);
    ways.iter().map(|(command, what)| format!("{indent}{command:<width$}   {what}")).collect()
}

/// The ways and the failure as JSON (`answers`, `failure` in `show --json` and in the
/// `needs_you` entries of `status --json`).
pub fn json(ways: &[(String, &'static str)], failure: Option<&Failure>) -> (serde_json::Value, serde_json::Value) {
    let answers = ways.iter().map(|(c, w)| serde_json::json!({ "command": c, "does": w })).collect();
    let failure = failure
        .map_or(serde_json::Value::Null, |f| serde_json::json!({ "what": f.what, "log": f.log, "tail": f.tail }));
    (serde_json::Value::Array(answers), failure)
}

/// The ways in one line, by their verbs, for a list of tasks (`status`): the full commands
/// are in `show`.
pub fn summary(id: &str, ways: &[(String, &'static str)]) -> String {
    let verbs: Vec<String> = ways
        .iter()
        .map(|(command, _)| {
            let verbs: Vec<&str> =
                command.split("git loop ").skip(1).filter_map(|part| part.split_whitespace().next()).collect();
            let try_ = command.split_once("--try ").map(|(_, n)| format!(" --try {n}")).unwrap_or_default();
            let how = command.split_once(" --").filter(|_| try_.is_empty() && verbs.len() == 1);
            let flag =
                how.map(|(_, f)| format!(" --{}", f.split_whitespace().next().unwrap_or(""))).unwrap_or_default();
            format!("{}{try_}{flag}", verbs.join(" + "))
        })
        .collect();
    format!("{} (the commands: git loop show {id})", verbs.join(" · "))
}
