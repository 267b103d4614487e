//! How large the texts a person or an agent writes into shared records may be.
//!
//! Every clone reads every task record (the index, `list`, `show`, a sync, the server's
//! pre-receive hook), so one task with a 50 MB title would make every clone slow and every
//! `show` of it take half a gigabyte. Each writer refuses a text past its limit (a usage
//! error naming the field, its size and the limit); a record past [`RECORD`] that arrives
//! from elsewhere (a hostile push, a clone of another build) is read as corrupt, named by its
//! ref, without being parsed. The limits are documented in docs/storage.md ("Size limits").

use crate::error::{usage, Refusal};

/// A task's title, in bytes.
pub const TITLE: usize = 1024;
/// A task's body, in bytes.
pub const BODY: usize = 256 * 1024;
/// A message or a reason: why a task is parked, cancelled or waiting, what completed it
/// (`done -m`, an agent's `finish --message` or result summary), a claim's reason, a review's
/// comments.
pub const MESSAGE: usize = 64 * 1024;
/// A task's lists (dependencies, labels, agents, …), in items per list.
pub const LIST_ITEMS: usize = 1000;
/// A whole record as stored (`task.json`, `op.json`): the sum of the limits above with room
/// to spare. A reader refuses a larger one without parsing it.
pub const RECORD: usize = 4 * 1024 * 1024;

/// `1,024 bytes`, `256 KiB`: a limit as people read it.
pub fn size(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        let kib = bytes / 1024;
        if kib >= 1024 && kib.is_multiple_of(1024) {
            return format!("{} MiB", kib / 1024);
        }
        return format!("{kib} KiB");
    }
    format!("{bytes} bytes")
}

/// Refuse `text` (named `what`: "the title", "the body", …) when it is longer than `limit`
/// bytes. The message names its size; the hint says what the limit is for.
pub fn check(what: &str, text: &str, limit: usize) -> Result<(), Refusal> {
    if text.len() <= limit {
        return Ok(());
    }
    let elsewhere = if what.contains("title") { "; a long text belongs in the body" } else { "" };
    Err(usage(format!("{what} is {} bytes, over the limit of {}", text.len(), size(limit))).hint(format!(
        "shorten it: every clone reads every record, so texts are bounded (docs/storage.md, \"Size limits\"){elsewhere}"
    )))
}

/// Refuse a list of more than [`LIST_ITEMS`] items.
pub fn check_list(what: &str, items: usize) -> Result<(), Refusal> {
    if items <= LIST_ITEMS {
        return Ok(());
    }
    Err(usage(format!("{what} has {items} items, over the limit of {LIST_ITEMS}"))
        .hint("every clone reads every record, so lists are bounded (docs/storage.md, \"Size limits\")"))
}

/// What a stored record of `len` bytes breaks, if it is past [`RECORD`]: for a reader's
/// "is corrupt: …" message.
pub fn record_problem(file: &str, len: usize) -> Option<String> {
    (len > RECORD).then(|| format!("{file} is {len} bytes, over the limit of {} for a record", size(RECORD)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_as_people_count() {
        assert_eq!(size(TITLE), "1 KiB");
        assert_eq!(size(BODY), "256 KiB");
        assert_eq!(size(RECORD), "4 MiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    #[test]
    fn a_text_at_its_limit_passes_and_one_byte_more_is_refused() {
        assert!(check("the title", &"x".repeat(TITLE), TITLE).is_ok());
        let refused = check("the title", &"x".repeat(TITLE + 1), TITLE).expect_err("past the limit");
        assert_eq!(refused.message, "the title is 1025 bytes, over the limit of 1 KiB");
        assert!(refused.hint.as_deref().is_some_and(|h| h.contains("body")), "{:?}", refused.hint);
        assert!(record_problem("task.json", RECORD).is_none());
        assert!(record_problem("task.json", RECORD + 1).is_some());
    }
}
