//! One agent process: its presets, how its CLI is wired to call back (`wiring`), the session
//! guard it runs under, process supervision, and its per-session records.

pub mod guard;
pub mod presets;
pub mod process;
pub mod reach;
pub mod record;
pub mod role;
pub mod usage;
pub mod wiring;
