//! `/metrics`: a [`MetricsSnapshot`] and the process's own figures in the OpenMetrics
//! text format, encoded by prometheus-client (names, `_total` suffixes, escaping, `le`
//! and float formatting follow the format without hand-written text).
//!
//! Conventions: no per-series `node` label (Prometheus adds `instance`); health as
//! `bully_health_state{state=...}` with 1 on the current state; `bully_build_info`;
//! `process_*` as the Go client names them, read from /proc by the procfs crate.

use crate::api::postgres::{PgRole, PgState};
use crate::api::{HealthState, Histogram, MetricsSnapshot};
use crate::protocol::settings::{synchronous_word, Synchronous};
use crate::transport::MismatchKind;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// The Content-Type of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The exposition text for one scrape.
pub fn render(snapshot: &MetricsSnapshot) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(ProcessCollector));
    registry
        .sub_registry_with_prefix("bully")
        .register_collector(Box::new(SnapshotCollector(snapshot.clone())));
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
        tracing::warn!("cannot encode metrics: {e}");
    }
    text
}

#[derive(Debug)]
struct SnapshotCollector(MetricsSnapshot);

/// Writes one gauge or counter sample without labels.
fn single(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, kind)?;
    sample(metric, kind, value)
}

fn sample(mut metric: MetricEncoder, kind: MetricType, value: f64) -> Result<(), std::fmt::Error> {
    match kind {
        MetricType::Counter => metric.encode_counter::<NoLabelSet, _, f64>(&value, None),
        _ => metric.encode_gauge(&value),
    }
}

/// Writes one family with one label, a sample per `(label value, value)`.
fn family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    label: &'static str,
    samples: impl IntoIterator<Item = (String, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (label_value, value) in samples {
        let labels = [(label, label_value)];
        sample(metric.encode_family(&labels)?, kind, value)?;
    }
    Ok(())
}

fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &Histogram,
) -> Result<(), std::fmt::Error> {
    // Per-bucket counts: the encoder makes them cumulative.
    let buckets: Vec<(f64, u64)> = h
        .counts
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let bound = h
                .bounds_us
                .get(i)
                .map_or(f64::INFINITY, |&us| us as f64 / 1e6);
            (bound, count)
        })
        .collect();
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    metric.encode_histogram::<NoLabelSet>(h.sum_us as f64 / 1e6, h.count, &buckets, None)
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = &self.0;
        encode_role(&mut e, m)?;
        encode_counters(&mut e, m)?;
        encode_traffic(&mut e, m)?;
        if let Some(pg) = &m.postgres {
            encode_postgres(&mut e, pg)?;
        }
        let help = "From losing the coordinator to following one again.";
        histogram(&mut e, "failover_seconds", help, &m.failover)?;
        let help = "Writing and fsyncing the durable cells (every new epoch waits for it).";
        histogram(&mut e, "persist_seconds", help, &m.persist)
    }
}

/// 1 for true, 0 for false: how Prometheus gauges carry flags.
fn flag(b: bool) -> f64 {
    f64::from(u8::from(b))
}

/// What the node is: build, coordinator or not, term, eligibility, health, peers.
fn encode_role(e: &mut DescriptorEncoder, m: &MetricsSnapshot) -> Result<(), std::fmt::Error> {
    use MetricType::Gauge;
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    let info = "Always 1; the version label says which bully build runs.";
    let mut build = e.encode_descriptor("build_info", info, None, Gauge)?;
    sample(build.encode_family(&version)?, Gauge, 1.0)?;
    let lead = "1 if this node is the coordinator.";
    single(e, "is_coordinator", lead, Gauge, flag(m.is_coordinator))?;
    let term = "Term of the epoch this node follows or leads; 0 if none.";
    single(e, "epoch_term", term, Gauge, m.epoch_term as f64)?;
    let eligible = "1 if this node may lead (health passing, not stepped down).";
    single(e, "eligible", eligible, Gauge, flag(m.eligible))?;
    let paused = "1 while the cluster is paused for maintenance (bully pause): no failover.";
    single(e, "paused", paused, Gauge, flag(m.paused))?;
    let given_up = "1 once a forced recovery (bully recover) gave this node up: it stood \
                    down for good.";
    single(e, "given_up", given_up, Gauge, flag(m.given_up))?;
    if let Some(est) = m.estimate {
        let help = "This node's estimate est(S) as last measured (e.g. its WAL position).";
        single(e, "estimate", help, Gauge, est.value as f64)?;
        let help = "1 while the estimate is fresh; a stale one counts as 0 in elections.";
        single(e, "estimate_fresh", help, Gauge, flag(est.fresh))?;
    }
    let states = [
        ("unchecked", HealthState::Unchecked),
        ("pending", HealthState::Pending),
        ("passing", HealthState::Passing),
        ("failing", HealthState::Failing),
    ];
    family(
        e,
        "health_state",
        "1 on the health check's current state (unchecked: no check configured).",
        Gauge,
        "state",
        states.map(|(name, s)| (name.to_string(), flag(m.health == s))),
    )?;
    let up = "Peers whose connection is up.";
    single(e, "peers_up", up, Gauge, m.peers_up as f64)?;
    family(
        e,
        "peer_up",
        "1 while the connection to this peer is up.",
        Gauge,
        "peer",
        m.peer_up.iter().map(|(id, &up)| (id.to_string(), flag(up))),
    )?;
    Ok(())
}

/// The PostgreSQL server the node keeps (issue 50): its role, timeline, WAL, lag,
/// synchronous standing and pending restart, as its manager last reported them.
fn encode_postgres(e: &mut DescriptorEncoder, pg: &PgState) -> Result<(), std::fmt::Error> {
    use MetricType::Gauge;
    let roles = [
        PgRole::Primary,
        PgRole::Replica,
        PgRole::Stopped,
        PgRole::Absent,
        PgRole::Missing,
        PgRole::Unreachable,
    ];
    family(
        e,
        "postgres_role",
        "1 on the role of the PostgreSQL server this node keeps.",
        Gauge,
        "role",
        roles.map(|r| (r.word().to_string(), flag(pg.role == r))),
    )?;
    if let Some(timeline) = pg.timeline {
        let help = "The server's timeline.";
        single(e, "postgres_timeline", help, Gauge, f64::from(timeline))?;
    }
    if let Some(wal) = pg.wal_position {
        let help = "The server's WAL position (flushed on a primary, received on a replica).";
        single(e, "postgres_wal_position_bytes", help, Gauge, wal as f64)?;
    }
    if let Some(lag) = pg.lag_bytes {
        let help = "How far this replica's replay is behind the coordinator's primary.";
        single(e, "postgres_replication_lag_bytes", help, Gauge, lag as f64)?;
    }
    let help = "1 while this replica streams from a member's server.";
    let streaming = pg.streaming_from.is_some();
    single(e, "postgres_streaming", help, Gauge, flag(streaming))?;
    let help = "1 while the coordinator's primary names this replica in \
                synchronous_standby_names (Patroni's quorum standby).";
    single(
        e,
        "postgres_quorum_standby",
        help,
        Gauge,
        flag(pg.quorum_standby),
    )?;
    let help = "Parameters the server holds for its next restart (bully pg restart).";
    let pending = pg.pending_restart.len() as f64;
    single(
        e,
        "postgres_pending_restart_parameters",
        help,
        Gauge,
        pending,
    )?;
    let help = "1 while PostgreSQL refuses the cluster's parameters (the ones before stay).";
    let refused = pg.parameters_refused.is_some();
    single(e, "postgres_parameters_refused", help, Gauge, flag(refused))?;
    if let Some(mode) = pg.synchronous {
        family(
            e,
            "postgres_synchronous_mode",
            "1 on the synchronous mode this node's manager runs its server by.",
            Gauge,
            "mode",
            Synchronous::ALL.map(|m| (synchronous_word(m).to_string(), flag(mode == m))),
        )?;
    }
    Ok(())
}

/// The node's event counters and the transport's.
fn encode_counters(e: &mut DescriptorEncoder, m: &MetricsSnapshot) -> Result<(), std::fmt::Error> {
    let counters: [(&str, &str, u64); 12] = [
        (
            "elections_started",
            "Election rounds this node began.",
            m.elections_started,
        ),
        ("declarations", "Epochs this node declared.", m.declarations),
        (
            "coordinator_changes",
            "Times the coordinator seen by this node changed.",
            m.coordinator_changes,
        ),
        (
            "health_checks",
            "Health check commands run.",
            m.health_checks,
        ),
        (
            "health_check_failures",
            "Health check commands that failed or timed out.",
            m.health_failures,
        ),
        (
            "event_log_write_errors",
            "Event-log records lost because appending failed (a full or failing disk).",
            m.event_log_write_errors,
        ),
        (
            "transport_refused",
            "Incoming connections or handshakes refused (certificate, unknown peer, member list).",
            m.transport.connections_refused,
        ),
        (
            "transport_bad_frames",
            "Frames refused as truncated, oversized or undecodable; each closed its connection.",
            m.transport.bad_frames,
        ),
        (
            "transport_messages_dropped",
            "Messages dropped: peer unreachable or its queue full.",
            m.transport.messages_dropped,
        ),
        (
            "transport_peer_connects",
            "Outbound peer connections established (connects and reconnects).",
            m.transport.peer_connects,
        ),
        (
            "transport_connections_silenced",
            "Peer connections cut because what the node sent went unanswered for 20 D.",
            m.transport.connections_silenced,
        ),
        (
            "transport_rtt_probes",
            "Probes sent to bring a quiet link's RTT estimate (and so its resend timeout) back down.",
            m.transport.rtt_probes,
        ),
    ];
    for (name, help, value) in counters {
        single(e, name, help, MetricType::Counter, value as f64)?;
    }
    let refusals = &m.transport.config_refusals;
    family(
        e,
        "transport_config_refusals",
        "Peer connections refused because the two configs disagree, by what differs \
         (members, mode, timing); counted at both ends.",
        MetricType::Counter,
        "reason",
        MismatchKind::ALL.map(|k| (k.label().to_string(), refusals.get(k) as f64)),
    )
}

/// Messages by type and hook runs by hook.
fn encode_traffic(e: &mut DescriptorEncoder, m: &MetricsSnapshot) -> Result<(), std::fmt::Error> {
    use MetricType::Counter;
    let by_type = |map: &std::collections::BTreeMap<String, u64>| {
        map.iter()
            .map(|(kind, &n)| (kind.clone(), n as f64))
            .collect::<Vec<_>>()
    };
    let sent = "Peer messages handed to the transport, by type.";
    family(e, "messages_sent", sent, Counter, "type", by_type(&m.sent))?;
    let got = "Peer messages received, by type.";
    family(
        e,
        "messages_received",
        got,
        Counter,
        "type",
        by_type(&m.received),
    )?;
    let runs = m.hooks.iter().map(|(n, c)| (n.clone(), c.runs as f64));
    family(
        e,
        "hook_runs",
        "Hook commands run, by hook.",
        Counter,
        "hook",
        runs,
    )?;
    let failures = m.hooks.iter().map(|(n, c)| (n.clone(), c.failures as f64));
    let help = "Hook commands that failed, timed out or could not start, by hook.";
    family(e, "hook_failures", help, Counter, "hook", failures)?;
    Ok(())
}

/// `process_*` from /proc/self, named as the Prometheus Go client names them. A figure
/// /proc cannot give is left out rather than reported as 0.
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use MetricType::{Counter, Gauge};
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            let cpu = (stat.utime + stat.stime) as f64 / ticks;
            let help = "Total user and system CPU time spent in seconds.";
            single(&mut e, "process_cpu_seconds", help, Counter, cpu)?;
            let rss = stat.rss as f64 * procfs::page_size() as f64;
            let help = "Resident memory size in bytes.";
            single(&mut e, "process_resident_memory_bytes", help, Gauge, rss)?;
            let help = "Virtual memory size in bytes.";
            single(
                &mut e,
                "process_virtual_memory_bytes",
                help,
                Gauge,
                stat.vsize as f64,
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                let start = boot as f64 + stat.starttime as f64 / ticks;
                let help = "Start time of the process since unix epoch in seconds.";
                single(&mut e, "process_start_time_seconds", help, Gauge, start)?;
            }
        }
        if let Ok(fds) = me.fd_count() {
            let help = "Number of open file descriptors.";
            single(&mut e, "process_open_fds", help, Gauge, fds as f64)?;
        }
        if let Ok(limits) = me.limits() {
            if let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit {
                let help = "Maximum number of open file descriptors.";
                single(&mut e, "process_max_fds", help, Gauge, max as f64)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Status;
    use crate::node::shared::metrics::Metrics;
    use crate::protocol::{Epoch, Mode, Role};
    use std::time::Duration;

    #[test]
    fn conventions_hold() {
        let m = Metrics::new(2);
        m.set_epoch_term(7);
        m.set_health(HealthState::Passing);
        m.observe_failover(Duration::from_millis(250));
        m.observe_persist(Duration::from_micros(700));
        m.hook_ran("on_elected", false);
        let epoch = Some(Epoch { term: 7, leader: 2 });
        let mut status = Status::for_test(2, Role::Coordinator, epoch, Mode::Classic, &[1, 3]);
        status.set_peer(1, true);
        let mut snapshot = m.snapshot_for(&status);
        snapshot.transport.config_refusals.timing = 4;
        snapshot.event_log_write_errors = 2;
        let text = render(&snapshot);
        for line in [
            "bully_is_coordinator 1.0",
            "bully_epoch_term 7.0",
            "bully_health_state{state=\"passing\"} 1.0",
            "bully_health_state{state=\"unchecked\"} 0.0",
            "bully_peer_up{peer=\"1\"} 1.0",
            "bully_peer_up{peer=\"3\"} 0.0",
            "bully_hook_runs_total{hook=\"on_elected\"} 1.0",
            "bully_messages_sent_total{type=\"heartbeat\"} 0.0",
            "bully_failover_seconds_bucket{le=\"0.2\"} 0",
            "bully_failover_seconds_bucket{le=\"0.3\"} 1",
            "bully_failover_seconds_bucket{le=\"+Inf\"} 1",
            "bully_failover_seconds_sum 0.25",
            "bully_persist_seconds_bucket{le=\"0.001\"} 1",
            "bully_transport_bad_frames_total 0.0",
            "bully_event_log_write_errors_total 2.0",
            "bully_transport_config_refusals_total{reason=\"timing\"} 4.0",
            "bully_transport_config_refusals_total{reason=\"mode\"} 0.0",
            "bully_build_info{version=",
            "process_open_fds ",
            "process_resident_memory_bytes ",
            "# EOF",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(line)),
                "{line} in\n{text}"
            );
        }
        assert!(
            !text.contains("node=\""),
            "no per-series node label:\n{text}"
        );
    }
}
