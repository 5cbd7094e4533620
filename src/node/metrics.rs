//! A node's counters, shared by the runtime (the only writer), the client API
//! (`Request::Metrics`), the chaos runner and the HTTP `/metrics` endpoint.
//!
//! Plain atomics rather than a metrics crate: every value is written by one task and
//! read by a snapshot, so relaxed loads are enough and nothing is locked. A
//! [`MetricsSnapshot`] is the serializable copy; [`render_prometheus`] is the one place
//! that turns it into the Prometheus text format.

use crate::protocol::{MessageKind, NodeId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI8, AtomicU64, Ordering};

/// Upper bounds (ms) of the failover-duration histogram buckets; a last `+Inf` bucket
/// is implied. Chosen around the default timing (D = 300 ms, T = 100 ms).
pub const FAILOVER_BUCKETS_MS: [u64; 10] = [50, 100, 200, 300, 500, 750, 1000, 2000, 5000, 10000];

const KINDS: usize = MessageKind::ALL.len();

/// Live counters of one node. Cheap to share in an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    node: NodeId,
    sent: [AtomicU64; KINDS],
    received: [AtomicU64; KINDS],
    elections_started: AtomicU64,
    declarations: AtomicU64,
    coordinator_changes: AtomicU64,
    peers_up: AtomicU64,
    hook_runs: AtomicU64,
    hook_failures: AtomicU64,
    health_checks: AtomicU64,
    health_failures: AtomicU64,
    /// -1: no health check configured, 0: failing, 1: passing, 2: no result yet.
    health: AtomicI8,
    eligible: AtomicBool,
    is_coordinator: AtomicBool,
    epoch_term: AtomicU64,
    failover_buckets: [AtomicU64; FAILOVER_BUCKETS_MS.len() + 1],
    failover_count: AtomicU64,
    failover_sum_ms: AtomicU64,
}

/// Where a health check stands, as exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthState {
    /// No `[health]` section: the node is always healthy.
    Unchecked,
    /// A check is configured but has not reported yet; the node is not eligible.
    Pending,
    /// The last rise/fall verdict was "healthy".
    Passing,
    /// The last rise/fall verdict was "failing".
    Failing,
}

/// A histogram of durations in milliseconds; `counts[i]` counts observations in
/// `(bounds_ms[i-1], bounds_ms[i]]`, the last entry those above every bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    pub bounds_ms: Vec<u64>,
    /// Per bucket, not cumulative; one more entry than `bounds_ms` (the `+Inf` bucket).
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum_ms: u64,
}

/// A copy of every counter at one instant: what `bully` clients and the chaos runner
/// read, and what `/metrics` renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    pub node: NodeId,
    pub is_coordinator: bool,
    /// The term of the epoch this node follows or leads; 0 while it knows none.
    pub epoch_term: u64,
    /// Messages handed to the transport, keyed by [`MessageKind::name`].
    pub sent: BTreeMap<String, u64>,
    /// Messages received from peers, keyed by [`MessageKind::name`].
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
    pub health_checks: u64,
    pub health_failures: u64,
    pub health: HealthState,
    pub eligible: bool,
    /// From losing the coordinator (the view turns candidate) to following one again.
    pub failover: Histogram,
}

impl Metrics {
    /// Zeroed counters for `node`; eligible, no health check, not coordinator.
    pub fn new(node: NodeId) -> Metrics {
        Metrics {
            node,
            sent: Default::default(),
            received: Default::default(),
            elections_started: AtomicU64::new(0),
            declarations: AtomicU64::new(0),
            coordinator_changes: AtomicU64::new(0),
            peers_up: AtomicU64::new(0),
            hook_runs: AtomicU64::new(0),
            hook_failures: AtomicU64::new(0),
            health_checks: AtomicU64::new(0),
            health_failures: AtomicU64::new(0),
            health: AtomicI8::new(-1),
            eligible: AtomicBool::new(true),
            is_coordinator: AtomicBool::new(false),
            epoch_term: AtomicU64::new(0),
            failover_buckets: Default::default(),
            failover_count: AtomicU64::new(0),
            failover_sum_ms: AtomicU64::new(0),
        }
    }

    /// Counts one message handed to the transport.
    pub fn message_sent(&self, kind: MessageKind) {
        add(&self.sent[kind_index(kind)], 1);
    }

    /// Counts one message received from a peer.
    pub fn message_received(&self, kind: MessageKind) {
        add(&self.received[kind_index(kind)], 1);
    }

    /// Counts one election round begun.
    pub fn election_started(&self) {
        add(&self.elections_started, 1);
    }

    /// Counts one declared epoch.
    pub fn declared(&self) {
        add(&self.declarations, 1);
    }

    /// Counts one change of coordinator.
    pub fn coordinator_changed(&self) {
        add(&self.coordinator_changes, 1);
    }

    /// Sets how many peers are connected.
    pub fn set_peers_up(&self, n: u64) {
        self.peers_up.store(n, Ordering::Relaxed);
    }

    /// Counts one finished hook run and whether it failed.
    pub fn hook_ran(&self, failed: bool) {
        add(&self.hook_runs, 1);
        if failed {
            add(&self.hook_failures, 1);
        }
    }

    /// Counts one health check result.
    pub fn health_checked(&self, passed: bool) {
        add(&self.health_checks, 1);
        if !passed {
            add(&self.health_failures, 1);
        }
    }

    /// Sets the health verdict (after rise/fall).
    pub fn set_health(&self, state: HealthState) {
        let value = match state {
            HealthState::Unchecked => -1,
            HealthState::Failing => 0,
            HealthState::Passing => 1,
            HealthState::Pending => 2,
        };
        self.health.store(value, Ordering::Relaxed);
    }

    /// Sets whether the node may lead (health and step-down together).
    pub fn set_eligible(&self, eligible: bool) {
        self.eligible.store(eligible, Ordering::Relaxed);
    }

    /// Sets the role gauge and the current epoch term (0 when none).
    pub fn set_view(&self, is_coordinator: bool, epoch_term: u64) {
        self.is_coordinator.store(is_coordinator, Ordering::Relaxed);
        self.epoch_term.store(epoch_term, Ordering::Relaxed);
    }

    /// Records one failover duration.
    pub fn observe_failover(&self, ms: u64) {
        let bucket = FAILOVER_BUCKETS_MS
            .iter()
            .position(|&bound| ms <= bound)
            .unwrap_or(FAILOVER_BUCKETS_MS.len());
        add(&self.failover_buckets[bucket], 1);
        add(&self.failover_count, 1);
        add(&self.failover_sum_ms, ms);
    }

    /// A copy of every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let by_kind = |counters: &[AtomicU64; KINDS]| {
            MessageKind::ALL
                .iter()
                .map(|&kind| (kind.name().to_string(), load(&counters[kind_index(kind)])))
                .collect()
        };
        MetricsSnapshot {
            node: self.node,
            is_coordinator: self.is_coordinator.load(Ordering::Relaxed),
            epoch_term: load(&self.epoch_term),
            sent: by_kind(&self.sent),
            received: by_kind(&self.received),
            elections_started: load(&self.elections_started),
            declarations: load(&self.declarations),
            coordinator_changes: load(&self.coordinator_changes),
            peers_up: load(&self.peers_up),
            hook_runs: load(&self.hook_runs),
            hook_failures: load(&self.hook_failures),
            health_checks: load(&self.health_checks),
            health_failures: load(&self.health_failures),
            health: match self.health.load(Ordering::Relaxed) {
                0 => HealthState::Failing,
                1 => HealthState::Passing,
                2 => HealthState::Pending,
                _ => HealthState::Unchecked,
            },
            eligible: self.eligible.load(Ordering::Relaxed),
            failover: Histogram {
                bounds_ms: FAILOVER_BUCKETS_MS.to_vec(),
                counts: self.failover_buckets.iter().map(load).collect(),
                count: load(&self.failover_count),
                sum_ms: load(&self.failover_sum_ms),
            },
        }
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

fn kind_index(kind: MessageKind) -> usize {
    MessageKind::ALL
        .iter()
        .position(|&k| k == kind)
        .unwrap_or(0)
}

/// The snapshot in the Prometheus text exposition format (version 0.0.4). Every name
/// starts with `bully_` and carries a `node` label.
pub fn render_prometheus(m: &MetricsSnapshot) -> String {
    let mut out = Exposition {
        node: m.node,
        text: String::new(),
    };
    let by_kind = |map: &BTreeMap<String, u64>| -> Vec<(String, String)> {
        map.iter()
            .map(|(kind, n)| (format!(",type=\"{kind}\""), n.to_string()))
            .collect()
    };
    let health = match m.health {
        HealthState::Unchecked => -1,
        HealthState::Failing | HealthState::Pending => 0,
        HealthState::Passing => 1,
    };
    out.single(
        "is_coordinator",
        "gauge",
        "1 if this node is the coordinator.",
        u8::from(m.is_coordinator),
    );
    out.single(
        "epoch_term",
        "gauge",
        "Term of the epoch this node follows or leads (the fencing token); 0 if none.",
        m.epoch_term,
    );
    out.single(
        "eligible",
        "gauge",
        "1 if this node may lead (health check passing, not stepped down).",
        u8::from(m.eligible),
    );
    out.single(
        "health_state",
        "gauge",
        "Health check verdict: 1 passing, 0 failing (or no result yet), -1 no check configured.",
        health,
    );
    out.single(
        "peers_up",
        "gauge",
        "Peers whose connection is up.",
        m.peers_up,
    );
    out.single(
        "elections_started_total",
        "counter",
        "Election rounds this node began.",
        m.elections_started,
    );
    out.single(
        "declarations_total",
        "counter",
        "Epochs this node declared.",
        m.declarations,
    );
    out.single(
        "coordinator_changes_total",
        "counter",
        "Times the coordinator seen by this node changed.",
        m.coordinator_changes,
    );
    out.family(
        "messages_sent_total",
        "counter",
        "Peer messages handed to the transport, by type.",
        &by_kind(&m.sent),
    );
    out.family(
        "messages_received_total",
        "counter",
        "Peer messages received, by type.",
        &by_kind(&m.received),
    );
    out.single(
        "hook_runs_total",
        "counter",
        "Hook commands run.",
        m.hook_runs,
    );
    out.single(
        "hook_failures_total",
        "counter",
        "Hook commands that failed, timed out or could not start.",
        m.hook_failures,
    );
    out.single(
        "health_checks_total",
        "counter",
        "Health check commands run.",
        m.health_checks,
    );
    out.single(
        "health_check_failures_total",
        "counter",
        "Health check commands that failed or timed out.",
        m.health_failures,
    );
    let h = &m.failover;
    let mut cumulative = 0;
    let mut samples: Vec<(String, String)> = Vec::new();
    for (i, count) in h.counts.iter().enumerate() {
        cumulative += count;
        let le = match h.bounds_ms.get(i) {
            Some(&ms) => seconds(ms),
            None => "+Inf".to_string(),
        };
        samples.push((format!(",le=\"{le}\""), cumulative.to_string()));
    }
    out.histogram(
        "failover_seconds",
        "Time from losing the coordinator to following a new one.",
        &samples,
        &seconds(h.sum_ms),
        h.count,
    );
    out.text
}

/// Writes metric families for one node.
struct Exposition {
    node: NodeId,
    text: String,
}

impl Exposition {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP bully_{name} {help}");
        let _ = writeln!(self.text, "# TYPE bully_{name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) {
        let node = self.node;
        let _ = writeln!(self.text, "bully_{name}{{node=\"{node}\"{labels}}} {value}");
    }

    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.header(name, kind, help);
        self.sample(name, "", value);
    }

    fn family(&mut self, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
        self.header(name, kind, help);
        for (labels, value) in samples {
            self.sample(name, labels, value);
        }
    }

    fn histogram(
        &mut self,
        name: &str,
        help: &str,
        buckets: &[(String, String)],
        sum: &str,
        count: u64,
    ) {
        self.header(name, "histogram", help);
        for (labels, value) in buckets {
            self.sample(&format!("{name}_bucket"), labels, value);
        }
        self.sample(&format!("{name}_sum"), "", sum);
        self.sample(&format!("{name}_count"), "", count);
    }
}

/// Milliseconds as a decimal number of seconds without float rounding noise.
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_counts_by_kind_and_buckets() {
        let m = Metrics::new(3);
        m.message_sent(MessageKind::Heartbeat);
        m.message_sent(MessageKind::Heartbeat);
        m.message_received(MessageKind::Ack);
        m.observe_failover(120);
        m.observe_failover(20_000);
        m.hook_ran(true);
        m.set_health(HealthState::Failing);
        let s = m.snapshot();
        assert_eq!(s.sent["heartbeat"], 2);
        assert_eq!(s.sent["election"], 0);
        assert_eq!(s.received["ack"], 1);
        assert_eq!(s.sent.len(), MessageKind::ALL.len());
        assert_eq!(s.failover.count, 2);
        assert_eq!(s.failover.sum_ms, 20_120);
        assert_eq!(s.failover.counts[2], 1, "120 ms falls in (100, 200]");
        assert_eq!(
            *s.failover.counts.last().unwrap(),
            1,
            "20 s is above every bound"
        );
        assert_eq!((s.hook_runs, s.hook_failures), (1, 1));
        assert_eq!(s.health, HealthState::Failing);
    }

    #[test]
    fn prometheus_text_has_every_family_once() {
        let m = Metrics::new(2);
        m.set_view(true, 7);
        m.observe_failover(250);
        let text = render_prometheus(&m.snapshot());
        for family in [
            "bully_is_coordinator",
            "bully_epoch_term",
            "bully_eligible",
            "bully_health_state",
            "bully_elections_started_total",
            "bully_declarations_total",
            "bully_coordinator_changes_total",
            "bully_messages_sent_total",
            "bully_messages_received_total",
            "bully_hook_runs_total",
            "bully_hook_failures_total",
            "bully_peers_up",
            "bully_failover_seconds",
        ] {
            assert_eq!(
                text.matches(&format!("# TYPE {family} ")).count(),
                1,
                "{family} in\n{text}"
            );
        }
        assert!(text.contains("bully_is_coordinator{node=\"2\"} 1\n"));
        assert!(text.contains("bully_epoch_term{node=\"2\"} 7\n"));
        assert!(text.contains("bully_messages_sent_total{node=\"2\",type=\"heartbeat\"} 0\n"));
        assert!(text.contains("bully_failover_seconds_bucket{node=\"2\",le=\"0.200\"} 0\n"));
        assert!(text.contains("bully_failover_seconds_bucket{node=\"2\",le=\"0.300\"} 1\n"));
        assert!(text.contains("bully_failover_seconds_bucket{node=\"2\",le=\"+Inf\"} 1\n"));
        assert!(text.contains("bully_failover_seconds_sum{node=\"2\"} 0.250\n"));
        assert!(text.contains("bully_health_state{node=\"2\"} -1\n"));
    }
}
