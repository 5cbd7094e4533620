//! A node's counters as a client sees them: the copy `Request::Metrics` answers with,
//! the chaos runner reads and `/metrics` renders (the live atomics are
//! `node/shared/metrics.rs`).

use super::health::HealthState;
use crate::protocol::NodeId;
use crate::transport::TransportStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The hooks, as labelled in the metrics.
pub const HOOK_NAMES: [&str; 3] = ["on_elected", "on_demoted", "on_change"];

/// A histogram of durations in microseconds; `counts[i]` counts observations in
/// `(bounds_us[i-1], bounds_us[i]]`, the last entry those above every bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    pub bounds_us: Vec<u64>,
    /// Per bucket, not cumulative; one more entry than `bounds_us` (the `+Inf` bucket).
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum_us: u64,
}

/// A copy of every counter at one instant: what `bully` clients and the chaos runner
/// read, and what `/metrics` renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    pub node: NodeId,
    /// Whether the node leads, read against its lease: taken from the status read as of
    /// now that the snapshot was made for (`Metrics::snapshot_for`).
    pub is_coordinator: bool,
    /// The term of the epoch this node follows or leads; 0 while it knows none.
    pub epoch_term: u64,
    /// Messages handed to the transport, keyed by [`crate::protocol::MessageKind::name`].
    pub sent: BTreeMap<String, u64>,
    /// Messages received from peers, keyed by [`crate::protocol::MessageKind::name`].
    pub received: BTreeMap<String, u64>,
    /// Election rounds begun: a batch of Election messages to higher IDs, or an
    /// immediate declaration by a node with no higher peer.
    pub elections_started: u64,
    /// Epochs this node declared (each one persisted before it was announced).
    pub declarations: u64,
    /// Times the coordinator this node follows or is became a different node.
    pub coordinator_changes: u64,
    /// Peers whose connection is up right now.
    pub peers_up: u64,
    pub hook_runs: u64,
    /// Hooks that exited non-zero, timed out or could not be started.
    pub hook_failures: u64,
    /// Runs and failures per hook name.
    pub hooks: BTreeMap<String, HookCounts>,
    pub health_checks: u64,
    pub health_failures: u64,
    pub health: HealthState,
    pub eligible: bool,
    /// Whether the node keeps a maintenance pause (`bully pause`): no automatic
    /// failover or preemption.
    #[serde(default)]
    pub paused: bool,
    /// Whether a forced recovery gave this node up (`Status::given_up`).
    #[serde(default)]
    pub given_up: bool,
    /// The node's estimate est(S) and whether it is fresh (docs/design.md#elected-by-data-est),
    /// when it has one.
    #[serde(default)]
    pub estimate: Option<super::status::Estimate>,
    /// From losing the coordinator (the view turns candidate) to following one again.
    pub failover: Histogram,
    /// Writing and fsyncing the cells, which every new epoch waits for.
    pub persist: Histogram,
    /// Whether each peer's connection is up, by peer ID (filled from the status).
    pub peer_up: BTreeMap<NodeId, bool>,
    /// The transport's counters (refusals, bad frames, drops, connects).
    pub transport: TransportStats,
    /// Event-log records lost because appending failed (a full or failing disk): the
    /// log is what `bully history` and the checker read, so a loss must show.
    #[serde(default)]
    pub event_log_write_errors: u64,
    /// The PostgreSQL server the node keeps, as its manager last reported it
    /// (`Status::postgres`); `None` without `[postgres]`.
    #[serde(default)]
    pub postgres: Option<super::postgres::PgState>,
}

/// How often one hook ran and failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookCounts {
    pub runs: u64,
    pub failures: u64,
}
