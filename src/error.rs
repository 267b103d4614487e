//! Errors the user can act on, classed (the command line maps a class to its exit code).
//!
//! Inside the library errors are `anyhow` chains with context. Where the user can do
//! something about a failure, the library raises a [`Refusal`]: a class (which decides the
//! exit code), a one-line message naming the object, and an optional hint. The reporter in
//! `cli` finds the refusal anywhere in the chain.

use std::fmt;

/// What kind of failure this is; the command line exits with its code (`cli::exit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Bad arguments, unknown ids, invalid configuration.
    Usage,
    /// An expected refusal: held by someone else, not the holder, lost a race: exit 1.
    Refused,
    /// A stored record cannot be read: exit 3.
    Corrupt,
    /// Anything else that went wrong while doing the work: exit 1.
    Failure,
    /// A singleton (walker, commander) is held by another process: exit 3.
    Busy,
    /// The agent's program is not installed: exit 77.
    AgentMissing,
    /// Runs must be confined (`loop.sandbox = required`) and cannot be here: exit 77.
    SandboxMissing,
    /// A person stopped it (Ctrl-C) while it worked: exit 130.
    Interrupted,
}

/// A failure with a message for people and, where they can do something, a hint.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub class: Class,
    pub message: String,
    pub hint: Option<String>,
}

impl Refusal {
    pub fn new(class: Class, message: impl Into<String>) -> Self {
        Refusal { class, message: message.into(), hint: None }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// A usage error (exit 2).
pub fn usage(message: impl Into<String>) -> Refusal {
    Refusal::new(Class::Usage, message)
}

/// An expected refusal (exit 1).
pub fn refused(message: impl Into<String>) -> Refusal {
    Refusal::new(Class::Refused, message)
}

/// A corrupt record (exit 3).
pub fn corrupt(message: impl Into<String>) -> Refusal {
    Refusal::new(Class::Corrupt, message)
}

/// Find the refusal in an error chain, if there is one.
pub fn find_refusal(err: &anyhow::Error) -> Option<&Refusal> {
    err.chain().find_map(|cause| cause.downcast_ref::<Refusal>())
}
