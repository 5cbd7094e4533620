//! Wall-clock time for records compared across processes on one machine (event logs,
//! histories, chaos timelines). The protocol never reads it: the machine runs on the
//! monotonic milliseconds its driver hands in.

/// Milliseconds since the Unix epoch (0 if the clock is set before 1970).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
