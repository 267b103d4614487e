//! What the library may not find out for itself: the time, who and where we are, and the
//! session we run in. The CLI builds one `Context` from the process environment; tests pin
//! the time through it, so nothing below `cli` reads the clock or the environment.

use chrono::{DateTime, Utc};

/// Where the current time comes from.
#[derive(Debug, Clone)]
pub enum Clock {
    /// The system clock.
    System,
    /// A pinned instant (tests, reproducible demos).
    Fixed(DateTime<Utc>),
}

/// The source of a [`Tick`] read from a pinned clock.
pub const PINNED: &str = "pinned";

/// One reading of the lease clock: `at` on the clock named by `source`.
///
/// The source is `boot:<boot id>` for the monotonic clock — it counts the seconds this machine
/// has run since it booted, is the same for every process of the machine, and no change of
/// the wall clock (NTP, a person, a skewed machine) moves it — or `pinned` for a clock pinned
/// by `GIT_LOOP_NOW` (tests), whose readings are the pinned time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tick {
    pub source: String,
    pub at: std::time::Duration,
}

/// The session an invocation runs inside, when an agent calls back into `git loop`.
#[derive(Debug, Clone, Default)]
pub struct SessionEnv {
    pub session: Option<String>,
    pub task: Option<String>,
    pub try_number: Option<u32>,
    /// The contract the session keeps (`GIT_LOOP_CONTRACT`: `reviewer/1`, …); none: the worker's.
    pub contract: Option<String>,
    /// The box of a confined session (`GIT_LOOP_BOX`): where it reports, since the repository
    /// is out of its reach.
    pub confined: Option<std::path::PathBuf>,
}

/// The identity git takes from the environment (`GIT_COMMITTER_NAME`, `GIT_COMMITTER_EMAIL`,
/// and `EMAIL` as a last resort for the address).
#[derive(Debug, Clone, Default)]
pub struct GitIdentityEnv {
    pub name: Option<String>,
    pub email: Option<String>,
    pub fallback_email: Option<String>,
}

/// Time, identity of the machine and process, and session: everything ambient.
#[derive(Debug, Clone)]
pub struct Context {
    pub clock: Clock,
    /// Host name, recorded in claims.
    pub host: String,
    /// This process's id, recorded in claims.
    pub pid: u32,
    /// The kernel's boot id, so a pid from another boot is never mistaken for a live one.
    pub boot_id: String,
    pub session: SessionEnv,
    pub git_identity: GitIdentityEnv,
    /// The PATH programs are looked up in.
    pub path_var: Option<std::ffi::OsString>,
    /// The home directory (`HOME`): what a confined session's own home takes from it.
    pub home: Option<std::path::PathBuf>,
    /// Where Codex keeps its files, when `CODEX_HOME` says (else `~/.codex`).
    pub codex_home: Option<std::path::PathBuf>,
}

impl Context {
    pub fn now(&self) -> DateTime<Utc> {
        match &self.clock {
            Clock::System => Utc::now(),
            Clock::Fixed(at) => *at,
        }
    }

    /// A reading of the clock leases are measured by (`store::lease`): this machine's
    /// monotonic clock, or the pinned time. Only differences of two readings of one source
    /// mean anything, so a reading names its source.
    pub fn tick(&self) -> Tick {
        match &self.clock {
            Clock::Fixed(at) => Tick {
                source: PINNED.to_owned(),
                at: at.signed_duration_since(DateTime::<Utc>::UNIX_EPOCH).to_std().unwrap_or_default(),
            },
            Clock::System => {
                let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                // SAFETY: clock_gettime writes one timespec into memory we own; CLOCK_MONOTONIC
                // exists on every Linux, so it cannot fail with these arguments.
                unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
                Tick {
                    source: format!("boot:{}", self.boot_id),
                    at: std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
                }
            }
        }
    }

    /// A context for unit tests: a fixed clock, this process, a named committer.
    #[cfg(test)]
    pub fn for_tests() -> Context {
        Context {
            clock: Clock::Fixed("2026-03-01T12:00:00Z".parse().expect("a time")),
            host: "test-host".into(),
            pid: std::process::id(),
            boot_id: "boot".into(),
            session: SessionEnv::default(),
            git_identity: GitIdentityEnv {
                name: Some("T".into()),
                email: Some("t@example.com".into()),
                fallback_email: None,
            },
            path_var: None,
            home: None,
            codex_home: None,
        }
    }
}
