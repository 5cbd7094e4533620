//! Wall-clock time for records compared across processes on one machine (event logs,
//! histories, chaos timelines). The protocol never reads it: the machine runs on the
//! monotonic milliseconds its driver hands in.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is set before 1970).
pub fn wall_ms() -> u64 {
    ms_of(SystemTime::now())
}

/// `t` in milliseconds since the Unix epoch (0 before 1970): the unit records keep.
pub fn ms_of(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The instant `ms` milliseconds after the Unix epoch, to print a recorded time.
pub fn time_of(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// A UTC time in RFC 3339 (`2026-11-26T15:00:00Z`; the `T` may be a space and the `Z`
/// left out), for `bully step-down --at` and Patroni's `scheduled_at`.
pub fn parse_utc(text: &str) -> Result<SystemTime, String> {
    humantime::parse_rfc3339_weak(text).map_err(|e| e.to_string())
}
