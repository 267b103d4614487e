//! Who writes a landing commit's message: a `Summarizer`, the one place a summarizer agent plugs
//! in. Without one (`NoSummarizer`, the default) a landing's merge commit says
//! `loop: land loop/<id> (<title>)`. With one, the summarizer is asked once per task landing,
//! before its merge onto the target is made, and its subject and body become the message; the
//! loop appends its trailers (`Loop-Task:`, `Summarized-By:`). A summarizer that cannot give a
//! message (it broke its contract twice, or its session stopped) fails that task's landing: it
//! goes to needs-you, and the target is not moved for it.

use anyhow::Result;
use gix::ObjectId;

use crate::store::Store;

/// A task about to land, as a summarizer is given it.
#[derive(Debug, Clone)]
pub struct Landing {
    pub task: String,
    /// The target branch (full ref name).
    pub target: String,
    /// The task branch's head.
    pub head: ObjectId,
    /// The target's side it merges onto.
    pub onto: ObjectId,
}

/// What a summarizer made of a landing.
#[derive(Debug, Clone)]
pub enum Summary {
    /// No summarizer: the loop's own message.
    Default,
    /// The message: a subject (one line, sanitised) and a body; and who wrote it (a session).
    Written { subject: String, body: String, by: String },
    /// It could not write one, and why: the task does not land.
    Failed(String),
}

/// Writes a landing's message. `keep` is called while it works: it keeps the lander's claim,
/// and true means stop (the landing was interrupted or its claim lost).
pub trait Summarizer {
    fn summarize(&self, store: &Store, landing: &Landing, keep: &dyn Fn() -> bool) -> Result<Summary>;
}

/// No summarizer: the loop's own message.
pub struct NoSummarizer;

impl Summarizer for NoSummarizer {
    fn summarize(&self, _store: &Store, _landing: &Landing, _keep: &dyn Fn() -> bool) -> Result<Summary> {
        Ok(Summary::Default)
    }
}

/// The longest subject kept (characters); a longer one is cut with an ellipsis.
pub const SUBJECT_MAX: usize = 100;
/// The longest body kept (characters).
pub const BODY_MAX: usize = 8000;

/// Trailers the loop writes itself: a summary's lines that look like one are dropped.
const OWN_TRAILERS: &[&str] = &["loop-task:", "summarized-by:", "resolved-by:"];

/// A summarizer's subject as a commit's first line: control characters and runs of whitespace
/// become one space, trimmed, at most `SUBJECT_MAX` characters. Empty: nothing usable.
pub fn clean_subject(subject: &str) -> String {
    let spaced: String = subject.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let words = spaced.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= SUBJECT_MAX {
        return words;
    }
    let cut: String = words.chars().take(SUBJECT_MAX - 1).collect();
    format!("{}…", cut.trim_end())
}

/// A summarizer's body: line ends normalised, control characters other than tab dropped, lines
/// that look like the loop's own trailers dropped, trimmed, at most `BODY_MAX` characters.
pub fn clean_body(body: &str) -> String {
    let text = body.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<String> = text
        .lines()
        .map(|line| line.chars().filter(|c| *c == '\t' || !c.is_control()).collect::<String>())
        .filter(|line| {
            let lower = line.trim_start().to_ascii_lowercase();
            !OWN_TRAILERS.iter().any(|t| lower.starts_with(t))
        })
        .map(|line| line.trim_end().to_owned())
        .collect();
    let joined = lines.join("\n");
    let trimmed = joined.trim_matches('\n').to_owned();
    if trimmed.chars().count() <= BODY_MAX {
        return trimmed;
    }
    let cut: String = trimmed.chars().take(BODY_MAX).collect();
    format!("{}\n…", cut.trim_end())
}

/// The landing commit's message: the summarizer's, else the loop's own, with the loop's trailers.
pub fn message(summary: &Summary, task: &str, branch: &str, title: &str) -> String {
    match summary {
        Summary::Written { subject, body, by } if !subject.is_empty() => {
            let mut out = format!("{subject}\n\n");
            if !body.is_empty() {
                out.push_str(body);
                out.push_str("\n\n");
            }
            out.push_str(&format!("Loop-Task: {task}\nSummarized-By: {by}\n"));
            out
        }
        _ => format!("loop: land {branch} ({})\n\nLoop-Task: {task}\n", title.lines().next().unwrap_or("")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_one_bounded_line_without_control_characters() {
        assert_eq!(clean_subject("  Add\tthe \u{1b}[31mparser\r\n  "), "Add the [31mparser");
        let long = "x".repeat(300);
        let cut = clean_subject(&long);
        assert_eq!(cut.chars().count(), SUBJECT_MAX);
        assert!(cut.ends_with('…'));
        assert_eq!(clean_subject("\n\u{7}\n"), "");
    }

    #[test]
    fn bodies_lose_control_characters_and_the_loops_own_trailers() {
        let body = "Why.\r\n\r\nWhat\u{0}: it\tworks.\nLoop-Task: other\n  summarized-by: me\n\n";
        assert_eq!(clean_body(body), "Why.\n\nWhat: it\tworks.");
        assert!(clean_body(&"y".repeat(BODY_MAX + 10)).ends_with('…'));
    }

    #[test]
    fn the_message_keeps_the_loops_trailer() {
        let written = Summary::Written { subject: "Add a".into(), body: "Because.".into(), by: "s-1".into() };
        assert_eq!(message(&written, "t1", "loop/t1", "a"), "Add a\n\nBecause.\n\nLoop-Task: t1\nSummarized-By: s-1\n");
        assert_eq!(message(&Summary::Default, "t1", "loop/t1", "a\nmore"), "loop: land loop/t1 (a)\n\nLoop-Task: t1\n");
    }
}
