//! Agent sessions: presets, process supervision, per-session records.

pub mod guard;
pub mod presets;
pub mod process;
pub mod reach;
pub mod record;
pub mod wiring;
