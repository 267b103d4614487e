//! Times for people: local and relative ("3 min ago", "in 27 min", "until 14:05").

use chrono::{DateTime, Local, Utc};

/// "just now", "42 s", "3 min", "2 h", "5 d": the length of `d`.
pub fn span(d: chrono::Duration) -> String {
    let s = d.num_seconds().abs();
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", s / 60),
        3600..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

/// What this clone has seen of another holder's lease: "unchanged for 12 min of its 30 min
/// lease" while live, "stale: unchanged for 31 min" once it has seen it unchanged for a whole
/// lease; "…, its process is gone" for a holder of this machine that no longer runs.
pub fn lease(lease: &git_loop::store::lease::Lease) -> String {
    let length = |d: std::time::Duration| span(chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX));
    let mut out = if lease.is_stale() {
        format!("stale: unchanged for {}", length(lease.unchanged_for))
    } else {
        format!("unchanged for {} of its {} lease", length(lease.unchanged_for), length(lease.length))
    };
    if lease.holder_gone {
        out.push_str(", its process is gone");
    }
    out
}

/// "3 min ago", or "in 3 min" for a time in the future.
pub fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let d = at - now;
    if d.num_seconds().abs() < 1 {
        "just now".into()
    } else if d.num_seconds() < 0 {
        format!("{} ago", span(d))
    } else {
        format!("in {}", span(d))
    }
}

/// The local wall-clock time: "14:05", or "Mar 3 14:05" when not today.
pub fn clock(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let local = at.with_timezone(&Local);
    if local.date_naive() == now.with_timezone(&Local).date_naive() {
        local.format("%H:%M").to_string()
    } else {
        local.format("%b %-d %H:%M").to_string()
    }
}

/// A title (or a reason) on one line, shortened to `width` characters: what could act on a
/// terminal or break the line shown as its escape (`text::line`: a newline as `\n`), an
/// escape counted by its length and never cut in two.
pub fn short(text: &str, width: usize) -> String {
    let shown = super::text::line(text);
    if shown.chars().count() <= width {
        return shown.into_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    let mut buf = [0u8; 4];
    for c in text.chars() {
        let unit = super::text::line(c.encode_utf8(&mut buf));
        let n = unit.chars().count();
        if used + n > width.saturating_sub(1) {
            break;
        }
        out.push_str(&unit);
        used += n;
    }
    out.push('…');
    out
}

/// "1 session", "2 sessions": a count with its noun in the right number.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}
