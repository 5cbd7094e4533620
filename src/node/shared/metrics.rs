//! A node's live counters, written by the runtime, the hooks and the health check, and
//! read as a [`MetricsSnapshot`] by the client API (`Request::Metrics`), the chaos runner
//! and the HTTP `/metrics` endpoint.
//!
//! Plain atomics: every value is written by one task and read by a snapshot, so relaxed
//! loads are enough and nothing is locked (but the transport's counters, whose source a
//! snapshot reads under a lock). Whether the node leads is no counter: a snapshot takes
//! it from the status read as of now ([`Metrics::snapshot_for`]), like every reader.

use crate::api::event_log::WriteFailures;
use crate::api::{HealthState, Histogram, HookCounts, MetricsSnapshot, Status, HOOK_NAMES};
use crate::protocol::{MessageKind, NodeId, Role};
use crate::transport::{Transport, TransportStats};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Upper bounds (µs) of the failover-duration histogram buckets; a last `+Inf` bucket
/// is implied. Chosen around the default timing (D = 300 ms, T = 100 ms).
pub const FAILOVER_BUCKETS_US: [u64; 10] = [
    50_000, 100_000, 200_000, 300_000, 500_000, 750_000, 1_000_000, 2_000_000, 5_000_000,
    10_000_000,
];
/// Upper bounds (µs) of the persist (write + fsync) histogram: fsync on an SSD takes
/// about 0.1–5 ms, on a busy or network disk far longer, and every epoch waits for it.
pub const PERSIST_BUCKETS_US: [u64; 10] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000,
];
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
    /// Per hook in [`HOOK_NAMES`] order.
    hook_runs: [AtomicU64; 3],
    hook_failures: [AtomicU64; 3],
    health_checks: AtomicU64,
    health_failures: AtomicU64,
    /// A [`HealthState::index`].
    health: AtomicU8,
    eligible: AtomicBool,
    epoch_term: AtomicU64,
    failover: AtomicHistogram<{ FAILOVER_BUCKETS_US.len() }>,
    persist: AtomicHistogram<{ PERSIST_BUCKETS_US.len() }>,
    /// Where the transport's counters come from.
    transport: Mutex<TransportCounters>,
    /// The event log's failed appends, once attached (the log counts them itself,
    /// in every handle on it).
    event_log: OnceLock<Arc<WriteFailures>>,
}

/// The transport's counters: none before it runs, read live while it runs, their last
/// values once the node stopped.
#[derive(Debug, Default)]
enum TransportCounters {
    #[default]
    None,
    Live(Transport),
    Final(TransportStats),
}

/// A histogram of durations recorded lock-free; `B` bounds plus the `+Inf` bucket.
#[derive(Debug)]
struct AtomicHistogram<const B: usize> {
    bounds_us: [u64; B],
    /// Per bucket, `B + 1` entries (a const-generic `B + 1` array is not stable yet).
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl<const B: usize> AtomicHistogram<B> {
    fn new(bounds_us: [u64; B]) -> Self {
        AtomicHistogram {
            bounds_us,
            buckets: (0..=B).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
        }
    }

    fn observe(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let bucket = self.bounds_us.iter().position(|&b| us <= b).unwrap_or(B);
        add(&self.buckets[bucket], 1);
        add(&self.count, 1);
        add(&self.sum_us, us);
    }

    fn snapshot(&self) -> Histogram {
        Histogram {
            bounds_us: self.bounds_us.to_vec(),
            counts: self.buckets.iter().map(load).collect(),
            count: load(&self.count),
            sum_us: load(&self.sum_us),
        }
    }
}

impl Metrics {
    /// Zeroed counters for `node`; eligible, no health check.
    pub fn new(node: NodeId) -> Metrics {
        Metrics {
            node,
            sent: Default::default(),
            received: Default::default(),
            elections_started: AtomicU64::new(0),
            declarations: AtomicU64::new(0),
            coordinator_changes: AtomicU64::new(0),
            peers_up: AtomicU64::new(0),
            hook_runs: Default::default(),
            hook_failures: Default::default(),
            health_checks: AtomicU64::new(0),
            health_failures: AtomicU64::new(0),
            health: AtomicU8::new(HealthState::Unchecked.index()),
            eligible: AtomicBool::new(true),
            epoch_term: AtomicU64::new(0),
            failover: AtomicHistogram::new(FAILOVER_BUCKETS_US),
            persist: AtomicHistogram::new(PERSIST_BUCKETS_US),
            transport: Mutex::default(),
            event_log: OnceLock::new(),
        }
    }

    /// Exports the event log's failed appends (records lost to a full or failing
    /// disk) from now on; a second call is ignored, the node has one log.
    pub fn attach_event_log(&self, failures: Arc<WriteFailures>) {
        let _ = self.event_log.set(failures);
    }

    /// Exports the transport's counters from now on.
    pub fn attach_transport(&self, transport: Transport) {
        *self.transport_counters() = TransportCounters::Live(transport);
    }

    /// The node stopped: keeps the transport's last counters and drops the handle, so
    /// counters kept after the node (an embedder's `Arc`) hold no socket or task.
    pub fn detach_transport(&self) {
        let mut counters = self.transport_counters();
        if let TransportCounters::Live(transport) = &*counters {
            *counters = TransportCounters::Final(transport.stats());
        }
    }

    fn transport_counters(&self) -> MutexGuard<'_, TransportCounters> {
        self.transport.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One write + fsync of the cells took `took`.
    pub fn observe_persist(&self, took: Duration) {
        self.persist.observe(took);
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
    /// Hook `name` (one of [`HOOK_NAMES`]) ran; others are not counted by name.
    pub fn hook_ran(&self, name: &str, failed: bool) {
        let Some(i) = HOOK_NAMES.iter().position(|&n| n == name) else {
            return;
        };
        add(&self.hook_runs[i], 1);
        if failed {
            add(&self.hook_failures[i], 1);
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
        self.health.store(state.index(), Ordering::Relaxed);
    }

    /// Sets whether the node may lead (health and step-down together).
    pub fn set_eligible(&self, eligible: bool) {
        self.eligible.store(eligible, Ordering::Relaxed);
    }

    /// Sets the current epoch term (0 when none).
    pub fn set_epoch_term(&self, epoch_term: u64) {
        self.epoch_term.store(epoch_term, Ordering::Relaxed);
    }

    /// Records one failover duration.
    pub fn observe_failover(&self, took: Duration) {
        self.failover.observe(took);
    }

    /// Every counter now, with the role and the peers' links taken from `status`, which
    /// the caller reads as of now ([`Status::as_of_now`]) so `/metrics` judges the role
    /// against the lease like every other reader (Q4): what the API, `/metrics` and the
    /// chaos runner read.
    pub fn snapshot_for(&self, status: &Status) -> MetricsSnapshot {
        let by_kind = |counters: &[AtomicU64; KINDS]| {
            MessageKind::ALL
                .iter()
                .map(|&kind| (kind.name().to_string(), load(&counters[kind_index(kind)])))
                .collect()
        };
        MetricsSnapshot {
            node: self.node,
            is_coordinator: status.role == Role::Coordinator,
            paused: status.pause.paused,
            given_up: status.given_up,
            estimate: status.estimate,
            epoch_term: load(&self.epoch_term),
            sent: by_kind(&self.sent),
            received: by_kind(&self.received),
            elections_started: load(&self.elections_started),
            declarations: load(&self.declarations),
            coordinator_changes: load(&self.coordinator_changes),
            peers_up: load(&self.peers_up),
            hook_runs: self.hook_runs.iter().map(load).sum(),
            hook_failures: self.hook_failures.iter().map(load).sum(),
            hooks: HOOK_NAMES
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let counts = HookCounts {
                        runs: load(&self.hook_runs[i]),
                        failures: load(&self.hook_failures[i]),
                    };
                    (name.to_string(), counts)
                })
                .collect(),
            health_checks: load(&self.health_checks),
            health_failures: load(&self.health_failures),
            health: HealthState::from_index(self.health.load(Ordering::Relaxed)),
            eligible: self.eligible.load(Ordering::Relaxed),
            failover: self.failover.snapshot(),
            persist: self.persist.snapshot(),
            peer_up: status.peers.iter().map(|p| (p.id, p.connected)).collect(),
            event_log_write_errors: self.event_log.get().map_or(0, |f| f.count()),
            postgres: status.postgres.clone(),
            transport: match &*self.transport_counters() {
                TransportCounters::None => TransportStats::default(),
                TransportCounters::Live(transport) => transport.stats(),
                TransportCounters::Final(stats) => *stats,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Mode;

    #[test]
    fn snapshot_counts_by_kind_and_buckets() {
        let m = Metrics::new(3);
        m.message_sent(MessageKind::Heartbeat);
        m.message_sent(MessageKind::Heartbeat);
        m.message_received(MessageKind::Ack);
        m.observe_failover(Duration::from_millis(120));
        m.observe_failover(Duration::from_secs(20));
        m.hook_ran("on_change", true);
        m.set_health(HealthState::Failing);
        let s = m.snapshot_for(&Status::for_test(
            3,
            Role::Follower,
            None,
            Mode::Quorum,
            &[],
        ));
        assert_eq!(s.sent["heartbeat"], 2);
        assert_eq!(s.sent["election"], 0);
        assert_eq!(s.received["ack"], 1);
        assert_eq!(s.sent.len(), MessageKind::ALL.len());
        assert_eq!(s.failover.count, 2);
        assert_eq!(s.failover.sum_us, 20_120_000);
        assert_eq!(s.failover.counts[2], 1, "120 ms falls in (100, 200]");
        assert_eq!(
            *s.failover.counts.last().unwrap(),
            1,
            "20 s is above every bound"
        );
        assert_eq!((s.hook_runs, s.hook_failures), (1, 1));
        assert_eq!(
            s.hooks["on_change"],
            HookCounts {
                runs: 1,
                failures: 1
            }
        );
        assert_eq!(s.hooks["on_elected"], HookCounts::default());
        assert_eq!(s.health, HealthState::Failing);
    }

    /// Issue 38: records an event log on a full disk (`/dev/full`) lost show in the
    /// snapshot, from every handle on the log.
    #[test]
    fn event_log_write_errors_are_counted() {
        use crate::api::event_log::{EventLog, EVENT_LOG};
        use crate::history::Record;
        let status = Status::for_test(3, Role::Follower, None, Mode::Quorum, &[]);
        let m = Metrics::new(3);
        assert_eq!(m.snapshot_for(&status).event_log_write_errors, 0, "no log");
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/full", dir.path().join(EVENT_LOG)).unwrap();
        let mut log = EventLog::open(dir.path(), 3).expect("open /dev/full");
        m.attach_event_log(log.failures());
        assert_eq!(m.snapshot_for(&status).event_log_write_errors, 0);
        log.append(Record::Started { incarnation: 1 });
        log.try_clone()
            .unwrap()
            .append(Record::Started { incarnation: 2 });
        assert!(log.flush());
        assert_eq!(m.snapshot_for(&status).event_log_write_errors, 2);
    }
}
