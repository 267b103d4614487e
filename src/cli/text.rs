//! Text that others wrote, made safe to show on a terminal.
//!
//! Titles, bodies, holders, reasons, messages, labels, agent names, ref names and journal
//! data come from agents, imports and other clones: anyone who can push to the shared remote
//! can write them. Printed raw, an ESC or CSI sequence would drive the reader's terminal
//! (recolour, move the cursor, rewrite what was printed before, set the window title), a
//! carriage return would print over a line, and a right-to-left override would show a line
//! in another order than its bytes. So every line human output prints goes through
//! [`line`] (or [`body_line`] for a line of a multi-line body): what could act on a terminal
//! or reorder or break the line is shown as an escape instead, `\u{1b}`, `\n`, `\u{202e}`.
//!
//! This is the command line's job, not the library's: records keep their text exactly as it
//! was given, and `--json` prints it exactly (JSON escapes control characters itself).
//! A backslash is left as it is: escapes are for reading, not for parsing back.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as it is: C0 controls (ESC, CR, BS, BEL, and the
/// newline and tab a one-line field must not hold), DEL, C1 controls (CSI U+009B, OSC U+009D,
/// NEL U+0085, which some terminals act on as the 7-bit ESC sequences), the bidirectional
/// formatting characters (embeddings, overrides and isolates, the marks, the Arabic letter
/// mark), the line and paragraph separators, and the invisible characters that can hide text
/// in a name (zero-width space, word joiner and invisible operators, the byte-order mark,
/// Unicode tags). Zero-width joiners and non-joiners stay: scripts and emoji need them.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// `text` as one line of a terminal: every character [`needs_escape`] names, newlines and
/// tabs included, shown as an escape. What needs none is returned as it is.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, needs_escape)
}

/// One line of a multi-line body (a task's plan, a message) as `show` prints it: like
/// [`line`], but a tab stays a tab (plans hold code). The caller splits the body into lines.
pub fn body_line(text: &str) -> Cow<'_, str> {
    escape(text, |c| c != '\t' && needs_escape(c))
}

fn escape(text: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !escaped(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => out.extend(c.escape_unicode()),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_and_other_scripts_pass_unchanged() {
        for text in ["Write the parser", "tâche à faire", "написать парсер", "كتابة المحلل", "👩‍👩‍👧 family", "a\\b"]
        {
            assert!(matches!(line(text), Cow::Borrowed(t) if t == text), "{text:?}");
        }
    }

    #[test]
    fn terminal_controls_are_escaped() {
        assert_eq!(line("\u{1b}[31mred\u{1b}[0m"), "\\u{1b}[31mred\\u{1b}[0m");
        assert_eq!(line("csi\u{9b}2J del\u{7f} nel\u{85}"), "csi\\u{9b}2J del\\u{7f} nel\\u{85}");
        assert_eq!(line("over\rwrite\nnext\tcol\u{7}"), "over\\rwrite\\nnext\\tcol\\u{7}");
    }

    #[test]
    fn bidirectional_and_invisible_characters_are_escaped() {
        assert_eq!(line("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(line("\u{2066}a\u{2069}\u{200f}\u{200e}\u{61c}"), "\\u{2066}a\\u{2069}\\u{200f}\\u{200e}\\u{61c}");
        assert_eq!(line("al\u{200b}ice\u{feff}\u{2028}"), "al\\u{200b}ice\\u{feff}\\u{2028}");
        assert_eq!(line("tag\u{e0041}"), "tag\\u{e0041}");
    }

    #[test]
    fn a_body_line_keeps_its_tabs_only() {
        assert_eq!(body_line("\tindented\u{1b}]0;title\u{7}"), "\tindented\\u{1b}]0;title\\u{7}");
        assert_eq!(body_line("a\rb"), "a\\rb");
    }
}
