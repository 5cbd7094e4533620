//! [`IdleFigures`]: what `bully chaos --bench idle` measured of a settled cluster, as
//! the report carries them (the bench in `chaos/idle.rs` fills them in).

use crate::chaos::stats::Summary;
use serde::Serialize;

/// The idle figures, per node and for the whole cluster.
#[derive(Debug, Clone, Serialize)]
pub struct IdleFigures {
    pub window_s: f64,
    /// CPU time per node over the window, in % of one core (p50 and max over nodes).
    pub cpu_percent_p50: f64,
    pub cpu_percent_max: f64,
    /// All nodes together, core-seconds per 10 s of wall time.
    pub core_seconds_per_10s: f64,
    /// Resident memory at the end, MB (p50 and max over nodes).
    pub rss_mb_p50: f64,
    pub rss_mb_max: f64,
    /// Protocol messages (all kinds) the whole cluster sent per second.
    pub messages_per_s: f64,
    /// Of those, heartbeats and acks per second per directed coordinator link.
    pub heartbeats_per_link_s: f64,
    pub acks_per_link_s: f64,
    /// `bully leader --config F` as a whole process, ms.
    pub leader_query_ms: Summary,
}
