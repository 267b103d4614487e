//! Validated names: task ids, claim keys, priorities, durations, writer ids.
//!
//! Every id that ends up inside a ref name is a newtype checked in `FromStr`, so bad input is
//! a usage error before any work is done. The rules are stricter than git's
//! check-ref-format on purpose: lowercase only (no two ids that collide on a case-insensitive
//! file system), no `/` (no directory/file conflicts between `a` and `a/b`), nothing that
//! git treats specially (`..`, `.lock`, a leading `.` or `-`).

use std::fmt;
use std::io::Read;
use std::str::FromStr;

use crate::error::{usage, Refusal};

/// The longest id or key component accepted, so ref names stay well below path limits.
const MAX_COMPONENT_LEN: usize = 64;

/// Check one component that will be part of a ref name.
pub fn check_component(what: &str, value: &str) -> Result<(), Refusal> {
    let bad = |why: &str| {
        usage(format!("{what} '{}' is not valid: {why}", value.escape_debug()))
            .hint("use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit")
    };
    if value.is_empty() {
        return Err(bad("it is empty"));
    }
    if value.len() > MAX_COMPONENT_LEN {
        return Err(bad(&format!("it is longer than {MAX_COMPONENT_LEN} characters")));
    }
    if let Some(c) =
        value.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')))
    {
        return Err(bad(&format!("it contains {c:?}")));
    }
    let first = value.chars().next().expect("not empty, checked above");
    if !first.is_ascii_alphanumeric() {
        return Err(bad("it must start with a letter or digit"));
    }
    if value.contains("..") || value.ends_with('.') || value.ends_with(".lock") {
        return Err(bad("git does not allow '..', a trailing '.' or '.lock' in ref names"));
    }
    Ok(())
}

/// A task id, e.g. `t-4f2a9k3m`, or an imported one such as `bd-a1b2`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(String);

impl TaskId {
    /// A fresh id: `t-` and eight base-32 characters from the OS random source.
    pub fn generate() -> TaskId {
        TaskId(format!("t-{}", random_base32(8)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for TaskId {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        check_component("task id", s)?;
        Ok(TaskId(s.to_owned()))
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A claim key `<kind>:<name>`, e.g. `node:t-4f2a9k3m`, `walker:main`, `fleet:m1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimKey {
    kind: String,
    name: String,
}

impl ClaimKey {
    pub fn new(kind: &str, name: &str) -> Result<ClaimKey, Refusal> {
        format!("{kind}:{name}").parse()
    }

    /// The claim that excludes other workers from a task.
    pub fn node(task: &TaskId) -> ClaimKey {
        ClaimKey { kind: "node".into(), name: task.as_str().to_owned() }
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl FromStr for ClaimKey {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((kind, name)) = s.split_once(':') else {
            return Err(usage(format!("claim key '{}' has no kind", s.escape_debug()))
                .hint("keys look like 'node:<task-id>', 'walker:<name>' or 'fleet:<mission>'"));
        };
        let kind_ok = !kind.is_empty()
            && kind.len() <= 32
            && kind.starts_with(|c: char| c.is_ascii_lowercase())
            && kind.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !kind_ok {
            return Err(usage(format!("claim kind '{}' is not valid", kind.escape_debug()))
                .hint("a kind is lowercase letters, digits and '-', such as 'node' or 'walker'"));
        }
        check_component("claim name", name)?;
        Ok(ClaimKey { kind: kind.to_owned(), name: name.to_owned() })
    }
}

impl fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// A journal writer: one chain of events per writer, so appends never contend.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriterId(String);

impl FromStr for WriterId {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        check_component("journal writer", s)?;
        Ok(WriterId(s.to_owned()))
    }
}

impl fmt::Display for WriterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An agent CLI's own session id (Claude Code's and Gemini's UUIDs, Codex's thread id,
/// OpenCode's `ses_...`), as its hook reports it and its resume command takes it. An agent can
/// report anything, and the id ends up in a command line a person pastes (`take-over`) and in
/// file names (transcripts), so only plausible ids are accepted: 1 to 128 ASCII letters,
/// digits, `-`, `_`, `.` and `:`, starting with a letter or digit (no whitespace, no shell
/// metacharacters, no `/`, nothing a CLI would take for an option).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentSessionId(String);

/// The longest agent session id accepted.
pub const AGENT_SESSION_MAX: usize = 128;

impl AgentSessionId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for AgentSessionId {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: String| {
            // The id may be long and hold anything: quote a bounded, escaped part of it.
            let shown: String = s.chars().take(64).collect();
            let more = if s.chars().count() > 64 { "…" } else { "" };
            usage(format!("agent session id '{}{more}' is not valid: {why}", shown.escape_debug())).hint(format!(
                "an agent session id is 1 to {AGENT_SESSION_MAX} ASCII letters, digits, '-', '_', '.' and ':', \
                 starting with a letter or digit"
            ))
        };
        if s.is_empty() {
            return Err(bad("it is empty".into()));
        }
        if s.len() > AGENT_SESSION_MAX {
            return Err(bad(format!("it is longer than {AGENT_SESSION_MAX} characters")));
        }
        if let Some(c) = s.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))) {
            return Err(bad(format!("it contains {c:?}")));
        }
        if !s.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return Err(bad("it must start with a letter or digit".into()));
        }
        Ok(AgentSessionId(s.to_owned()))
    }
}

impl fmt::Display for AgentSessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Task priority, p0 (most urgent) to p3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    P0,
    P1,
    #[default]
    P2,
    P3,
}

impl Priority {
    pub fn rank(self) -> u8 {
        self as u8
    }

    pub fn from_rank(rank: u8) -> Priority {
        match rank {
            0 => Priority::P0,
            1 => Priority::P1,
            2 => Priority::P2,
            _ => Priority::P3,
        }
    }
}

impl FromStr for Priority {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().trim_start_matches('p') {
            "0" => Ok(Priority::P0),
            "1" => Ok(Priority::P1),
            "2" => Ok(Priority::P2),
            "3" => Ok(Priority::P3),
            _ => Err(usage(format!("priority '{}' is not valid", s.escape_debug()))
                .hint("use p0 (most urgent), p1, p2 or p3")),
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.rank())
    }
}

impl serde::Serialize for Priority {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Read as written (`"p1"`), and also as a bare number (`1`, as beads and hand-written files
/// have it).
impl<'de> serde::Deserialize<'de> for Priority {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Priority;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a priority: \"p0\" to \"p3\", or 0 to 3")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Priority, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Priority, E> {
                n.to_string().parse().map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Priority, E> {
                n.to_string().parse().map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A length of time given on the command line: `90s`, `30m`, `2h`, `1d`, or plain seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub chrono::Duration);

impl FromStr for Span {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            usage(format!("duration '{}' is not valid", s.escape_debug()))
                .hint("write a number with a unit (s, m, h or d), such as 90s, 30m, 2h or 1d")
        };
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (digits, unit) = s.split_at(split);
        let n: i64 = digits.parse().map_err(|_| bad())?;
        let seconds = match unit {
            "" | "s" => n,
            "m" => n.checked_mul(60).ok_or_else(bad)?,
            "h" => n.checked_mul(3600).ok_or_else(bad)?,
            "d" => n.checked_mul(86_400).ok_or_else(bad)?,
            _ => return Err(bad()),
        };
        if seconds <= 0 || seconds > 366 * 86_400 {
            return Err(bad());
        }
        Ok(Span(chrono::Duration::seconds(seconds)))
    }
}

/// A random (version 4) UUID, for CLIs that take the session id the loop chooses.
pub fn uuid_v4() -> String {
    let mut b = random_bytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The alphabet of generated ids: Crockford base 32, lowercase (no i, l, o, u).
const BASE32: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// A new walk's key: its claims' holder and its journal writer (`w-` and 8 characters).
pub fn walker_key() -> String {
    format!("{WALKER_PREFIX}{}", random_base32(8))
}

/// Whether a claim holder is a walk (not a person or an agent session).
pub fn is_walker_key(holder: &str) -> bool {
    holder.starts_with(WALKER_PREFIX)
}

const WALKER_PREFIX: &str = "w-";

/// `n` random base-32 characters from the OS random source.
pub fn random_base32(n: usize) -> String {
    let bytes = random_bytes(n);
    bytes.iter().map(|b| BASE32[(*b & 31) as usize] as char).collect()
}

/// Random bytes from the kernel. Falls back to hashing time and pid, which is unique enough
/// for nonces, if /dev/urandom cannot be read (it always can on Linux).
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if read.is_err() {
        use std::hash::{BuildHasher, Hasher};
        for (i, b) in buf.iter_mut().enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default(),
            );
            *b = h.finish() as u8;
        }
    }
    buf
}

// A mission's names: its id (a ref component and the name of its `fleet:` claim) and its
// projects' names, by the same rules as task ids (docs/storage.md, "Names").
/// A mission's id, e.g. `v2-launch`: `refs/loop/missions/<id>` and claim `fleet:<id>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MissionId(String);

impl MissionId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for MissionId {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        check_component("mission id", s)?;
        Ok(MissionId(s.to_owned()))
    }
}

impl fmt::Display for MissionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A project's name within its mission, e.g. `api`; it prefixes the project's output lines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProjectName(String);

impl ProjectName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ProjectName {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        check_component("project name", s)?;
        Ok(ProjectName(s.to_owned()))
    }
}

impl fmt::Display for ProjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The git-loop journal writer of an agent session (its key, e.g. `s-…`).
pub fn session_writer(session: &str) -> anyhow::Result<WriterId> {
    use anyhow::Context as _;
    session.parse::<WriterId>().map_err(anyhow::Error::from).context("invalid session key")
}

/// How many hex digits of a commit id lines for people show: a fixed length (git's own
/// abbreviation grows with the repository), so the same commit reads the same on every clone.
pub const SHORT_COMMIT: usize = 12;

/// A commit id as lines for people show it: its first [`SHORT_COMMIT`] hex digits (the whole of
/// anything shorter).
pub fn short_commit(id: &impl std::fmt::Display) -> String {
    let text = id.to_string();
    text.get(..SHORT_COMMIT).unwrap_or(&text).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_that_are_not_safe_ref_components_are_refused() {
        for bad in [
            "",
            "A",
            "a/b",
            "a..b",
            "x.lock",
            ".a",
            "-a",
            "a ",
            "a\n",
            "é",
            "a:b",
            "a~1",
            "a^",
            "a@{1}",
            "a*",
            "a?",
            "a[",
            "a\\b",
            "trailing.",
        ] {
            assert!(bad.parse::<TaskId>().is_err(), "{bad:?} must be refused");
        }
        for good in ["t-4f2a", "bd-a1b2", "bd-a1b2.1", "x_y", "0"] {
            assert!(good.parse::<TaskId>().is_ok(), "{good:?} must be accepted");
        }
        assert!("a".repeat(65).parse::<TaskId>().is_err(), "overlong ids are refused");
    }

    #[test]
    fn claim_keys_need_a_kind_and_a_valid_name() {
        let key: ClaimKey = "node:t-1".parse().expect("valid");
        assert_eq!((key.kind(), key.name()), ("node", "t-1"));
        for bad in ["node", ":x", "Node:x", "node:", "node:a/b", "no de:x", "node:X"] {
            assert!(bad.parse::<ClaimKey>().is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn agent_session_ids_are_plausible_ids_only() {
        for good in ["a84694c7-ecf9-421e-ac15-d61f519116bf", "01a2-thread", "ses_4kq3mz8xv1c2", "thread:1.2", "x"] {
            assert!(good.parse::<AgentSessionId>().is_ok(), "{good:?} must be accepted");
        }
        let too_long = "a".repeat(AGENT_SESSION_MAX + 1);
        for bad in [
            "",
            "x; touch ~/pwned; :",
            "$(id)",
            "`id`",
            "a b",
            "a\tb",
            "a\nb",
            "-rf",
            "../x",
            "a/b",
            "'a'",
            "a|b",
            "a&b",
            "é",
            &too_long,
        ] {
            assert!(bad.parse::<AgentSessionId>().is_err(), "{bad:?} must be refused");
        }
        let refusal = "x; touch ~/pwned; :".parse::<AgentSessionId>().expect_err("refused");
        assert_eq!(refusal.message, "agent session id 'x; touch ~/pwned; :' is not valid: it contains ';'");
    }

    #[test]
    fn spans_read_units() {
        assert_eq!("2h".parse::<Span>().expect("valid").0, chrono::Duration::hours(2));
        assert_eq!("90".parse::<Span>().expect("valid").0, chrono::Duration::seconds(90));
        for bad in ["", "0", "-1m", "2w", "h", "1.5h"] {
            assert!(bad.parse::<Span>().is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = TaskId::generate();
        let b = TaskId::generate();
        assert_ne!(a, b);
        assert!(a.as_str().parse::<TaskId>().is_ok());
    }

    #[test]
    fn names_that_are_not_safe_ref_components_are_refused() {
        for bad in ["", "V2", "a/b", "a..b", "x.lock", "-a", ".a", "a b", "trailing.", &"a".repeat(65)] {
            assert!(bad.parse::<MissionId>().is_err(), "{bad:?} must be refused as a mission id");
            assert!(bad.parse::<ProjectName>().is_err(), "{bad:?} must be refused as a project name");
        }
        for good in ["v2-launch", "api", "m1", "web.app", "0"] {
            assert!(good.parse::<MissionId>().is_ok(), "{good:?} is a valid mission id");
        }
    }
}
