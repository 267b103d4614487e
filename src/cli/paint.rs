//! Colour for people at a terminal: task states, and the `error:`, `warning:`, `hint:` and
//! `note:` labels of stderr lines. The one place that decides whether a stream gets colour
//! (`--color auto|always|never`, `NO_COLOR`) and the one place that writes colour codes.
//!
//! Lines are escaped as a whole when they are printed (`text::line`): a colour code put into
//! a line before that would be escaped with the rest, and one taken from the text would let
//! whoever wrote a title colour the reader's terminal. So [`state`] and [`label`] put a
//! marker around what they paint — a noncharacter followed by a key made at random for this
//! process, which no record can hold — and [`render`] escapes the text between the markers
//! and turns the markers into colour codes (or drops them, for a stream without colour).
//! `--json` never goes through here.

use std::borrow::Cow;
use std::fmt;
use std::io::IsTerminal;
use std::sync::OnceLock;

/// When to colour: `--color`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum When {
    /// When the stream is a terminal and NO_COLOR is unset or empty.
    Auto,
    /// Always, NO_COLOR or not.
    Always,
    /// Never.
    Never,
}

/// A stream human output goes to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Whether each stream gets colour, decided once.
#[derive(Clone, Copy)]
struct Decided {
    stdout: bool,
    stderr: bool,
}

static DECIDED: OnceLock<Decided> = OnceLock::new();

/// Decide for this process, from `--color` and the environment (`NO_COLOR`: any non-empty
/// value means never, unless `--color always`; `auto` also needs a terminal that is not
/// `TERM=dumb`). Later calls change nothing.
pub fn init(when: When) {
    let _ = DECIDED.set(decide(when));
}

fn decide(when: When) -> Decided {
    match when {
        When::Always => Decided { stdout: true, stderr: true },
        When::Never => Decided { stdout: false, stderr: false },
        When::Auto => {
            let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
            let allowed = !set("NO_COLOR") && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
            Decided {
                stdout: allowed && std::io::stdout().is_terminal(),
                stderr: allowed && std::io::stderr().is_terminal(),
            }
        }
    }
}

fn decided() -> Decided {
    *DECIDED.get_or_init(|| decide(When::Auto))
}

/// Whether `stream` gets colour.
pub fn enabled(stream: Stream) -> bool {
    let d = decided();
    match stream {
        Stream::Stdout => d.stdout,
        Stream::Stderr => d.stderr,
    }
}

/// `--color` as clap's own choice, for its help and usage errors, read from argv before it is
/// parsed (the last `--color` wins, as clap takes it).
pub fn clap_choice<I: IntoIterator<Item = std::ffi::OsString>>(args: I) -> clap::ColorChoice {
    let mut choice = clap::ColorChoice::Auto;
    let mut args = args.into_iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        let value = match arg.strip_prefix("--color") {
            Some("") => args.next(),
            Some(rest) => rest.strip_prefix('=').map(str::to_owned),
            None => None,
        };
        match value.as_deref() {
            Some("always") => choice = clap::ColorChoice::Always,
            Some("never") => choice = clap::ColorChoice::Never,
            Some("auto") => choice = clap::ColorChoice::Auto,
            _ => {}
        }
    }
    choice
}

/// A style, as one character in a marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Red,
    Yellow,
    Green,
    Cyan,
    Magenta,
    Dim,
}

impl Style {
    const ALL: [Style; 6] = [Style::Red, Style::Yellow, Style::Green, Style::Cyan, Style::Magenta, Style::Dim];

    fn code(self) -> char {
        match self {
            Style::Red => 'r',
            Style::Yellow => 'y',
            Style::Green => 'g',
            Style::Cyan => 'c',
            Style::Magenta => 'm',
            Style::Dim => 'd',
        }
    }

    fn sgr(self) -> &'static str {
        match self {
            Style::Red => "\x1b[1;31m",
            Style::Yellow => "\x1b[1;33m",
            Style::Green => "\x1b[32m",
            Style::Cyan => "\x1b[36m",
            Style::Magenta => "\x1b[1;35m",
            Style::Dim => "\x1b[2m",
        }
    }
}

const RESET_CODE: char = '0';
const RESET: &str = "\x1b[0m";
/// The first character of a marker: a noncharacter, which no text is meant to hold.
const MARK: char = '\u{fdd0}';

/// `MARK` and the key: 16 hex digits drawn at random for this process (std's hasher keys
/// are random), so text from a record cannot hold a marker.
fn key() -> &'static str {
    static KEY: OnceLock<String> = OnceLock::new();
    KEY.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        format!("{MARK}{:016x}", h.finish())
    })
}

/// Text painted in one style: it formats as the text (padded as asked, `{:<9}`) between
/// markers when some stream gets colour, and as the plain text otherwise.
pub struct Painted<'a> {
    text: &'a str,
    style: Option<Style>,
}

impl Painted<'_> {
    fn fmt_marked(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.style {
            Some(style) => {
                write!(f, "{}{}", key(), style.code())?;
                f.pad(self.text)?;
                write!(f, "{}{RESET_CODE}", key())
            }
            None => f.pad(self.text),
        }
    }
}

impl fmt::Display for Painted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = decided();
        if d.stdout || d.stderr {
            self.fmt_marked(f)
        } else {
            f.pad(self.text)
        }
    }
}

/// A task's state as shown to people — `ready`, `running`, `needs-you`, `open, blocked` —
/// in its colour: what needs a person stands out, what is closed recedes.
pub fn state(word: &str) -> Painted<'_> {
    // "open, ready": the part after the comma says it.
    let key = word.rsplit(", ").next().unwrap_or(word).trim();
    let style = match key {
        "ready" | "done" => Some(Style::Green),
        "running" | "claimed" => Some(Style::Cyan),
        "needs-you" | "needs-decision" | "taken-over" => Some(Style::Magenta),
        "failed" => Some(Style::Red),
        "blocked" => Some(Style::Yellow),
        "parked" | "cancelled" => Some(Style::Dim),
        _ => None,
    };
    Painted { text: word, style }
}

/// The label a stderr line starts with (`error:`, `warning:`, `hint:`, `note:`), in its
/// colour, followed by the rest of the line; other lines as they are.
pub fn label(line: &str) -> Cow<'_, str> {
    for (label, style) in
        [("error:", Style::Red), ("warning:", Style::Yellow), ("hint:", Style::Cyan), ("note:", Style::Green)]
    {
        if let Some(rest) = line.strip_prefix(label) {
            let painted = Painted { text: label, style: Some(style) };
            return Cow::Owned(format!("{painted}{rest}"));
        }
    }
    Cow::Borrowed(line)
}

/// A line for `stream`: the text between markers escaped by `escape`, the markers made
/// colour codes when the stream gets colour, and dropped otherwise.
pub fn render(line: &str, stream: Stream, escape: impl Fn(&str) -> Cow<'_, str>) -> String {
    render_as(line, enabled(stream), escape)
}

fn render_as(line: &str, colour: bool, escape: impl Fn(&str) -> Cow<'_, str>) -> String {
    let key = key();
    let mut pieces = line.split(key);
    let mut out = String::with_capacity(line.len() + 16);
    out.push_str(&escape(pieces.next().unwrap_or("")));
    for piece in pieces {
        let mut chars = piece.chars();
        let code = chars.next();
        if colour {
            if code == Some(RESET_CODE) {
                out.push_str(RESET);
            } else if let Some(style) = Style::ALL.iter().find(|s| Some(s.code()) == code) {
                out.push_str(style.sgr());
            }
        }
        out.push_str(&escape(chars.as_str()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A painted value formatted with its markers, whatever this process decided.
    struct Marked<'a>(Painted<'a>);

    impl fmt::Display for Marked<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.fmt_marked(f)
        }
    }

    #[test]
    fn a_painted_word_keeps_its_padding_and_renders_to_colour_or_plain_text() {
        let line = format!("[{:<9}] {}", Marked(state("failed")), "x\u{1b}[31my");
        let escape = super::super::text::line;
        assert_eq!(render_as(&line, true, escape), "[\x1b[1;31mfailed   \x1b[0m] x\\u{1b}[31my");
        assert_eq!(render_as(&line, false, escape), "[failed   ] x\\u{1b}[31my");
        assert_eq!(format!("{:<9}|", Marked(state("mystery"))), "mystery  |");
    }

    #[test]
    fn text_that_imitates_a_marker_stays_text() {
        let forged = format!("{MARK}0000000000000000r evil");
        assert_eq!(render_as(&forged, true, |s: &str| Cow::Owned(s.to_owned())), forged);
    }

    #[test]
    fn clap_is_told_the_last_color_flag() {
        let args = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(clap_choice(args(&["list", "--color", "never"])), clap::ColorChoice::Never);
        assert_eq!(clap_choice(args(&["--color=always", "list"])), clap::ColorChoice::Always);
        assert_eq!(clap_choice(args(&["add", "--", "--color=never"])), clap::ColorChoice::Auto);
    }
}
