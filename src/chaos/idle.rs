//! `bully chaos --bench idle`: what a settled cluster costs while nothing happens (CPU,
//! memory and messages per node, read from `/proc` and the nodes' metrics), how many
//! declarations its start-up took, and how long `bully leader` takes as a whole process.

use super::harness::{first_election_limit, Harness, HarnessSpec};
use super::report::{IdleFigures, Report};
use super::setup::BenchConfig;
use super::stats::Summary;
use crate::protocol::{MessageKind, NodeId};
use anyhow::{Context, Result};
use std::time::{Duration, Instant};

/// Clock ticks per second in `/proc/<pid>/stat` (USER_HZ, 100 on every Linux ABI).
const TICKS_PER_S: f64 = 100.0;
/// How long the cluster runs after agreeing before the measurement starts.
const SETTLE: Duration = Duration::from_secs(2);
/// `bully leader` runs timed after the idle window.
const LEADER_QUERIES: usize = 21;

/// CPU ticks (user + system) and resident memory of one process, from `/proc`.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    ticks: u64,
    rss_kb: u64,
}

fn usage(pid: u32) -> Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line (counting from 1), so indices 11
    // and 12 of what follows the ')'.
    let tick = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .context("malformed /proc stat")
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    Ok(Usage {
        ticks: tick(11)? + tick(12)?,
        rss_kb,
    })
}

/// Every node's usage, by ID.
fn usages(h: &Harness) -> Result<Vec<(NodeId, Usage)>> {
    h.ids()
        .iter()
        .map(|&id| {
            let pid = h
                .cluster
                .pid(id)
                .with_context(|| format!("node {id} is not running"))?;
            Ok((id, usage(pid)?))
        })
        .collect()
}

/// Messages of each kind the whole cluster has sent so far.
async fn sent_by_kind(h: &Harness) -> Result<[u64; MessageKind::ALL.len()]> {
    let mut totals = [0; MessageKind::ALL.len()];
    for &id in h.ids() {
        let m = h.cluster.metrics(id, Duration::from_secs(2)).await?;
        for (total, kind) in totals.iter_mut().zip(MessageKind::ALL) {
            *total += m.sent.get(kind.name()).copied().unwrap_or(0);
        }
    }
    Ok(totals)
}

/// Times `bully leader --config F` (node 1's config) as a whole process.
fn time_leader_queries(h: &Harness, binary: &std::path::Path) -> Result<Summary> {
    let config = h.cluster.config_path(1);
    let mut times = Vec::with_capacity(LEADER_QUERIES);
    for _ in 0..LEADER_QUERIES {
        let started = Instant::now();
        let out = std::process::Command::new(binary)
            .arg("leader")
            .arg("--config")
            .arg(&config)
            .output()
            .context("cannot run bully leader")?;
        times.push(started.elapsed().as_millis() as u64);
        anyhow::ensure!(
            out.status.success(),
            "bully leader failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(Summary::of(&times))
}

/// Runs the idle benchmark for `window`; the report carries the idle figures and the
/// usual verdict over the whole run (every invariant is still judged).
pub async fn idle(config: &BenchConfig, window: Duration) -> Result<Report> {
    config.validate().map_err(anyhow::Error::msg)?;
    let setup = &config.setup;
    let mut h = Harness::start(&HarnessSpec::of(setup, false)).await?;
    let top = setup.nodes;
    let first = first_election_limit(&setup.timing, top, setup.mode);
    let mut figures = None;
    if h.wait_for_leader(top, first).await {
        let startup_declarations = h.declarations;
        tokio::time::sleep(SETTLE).await;
        match measure(&h, window, &setup.binary).await {
            Ok(f) => figures = Some((f, startup_declarations)),
            Err(e) => h.anomalies.push(format!("idle measurement failed: {e:#}")),
        }
    } else {
        h.anomalies
            .push(format!("no first agreement on node {top} within {first:?}"));
    }
    let mut report = h.finish(|elapsed_s| setup.params("chaos --bench idle", elapsed_s));
    if let Some((f, startup)) = figures {
        report.idle = Some(f);
        report.startup_declarations = Some(startup);
    }
    Ok(report)
}

async fn measure(h: &Harness, window: Duration, binary: &std::path::Path) -> Result<IdleFigures> {
    let sent_before = sent_by_kind(h).await?;
    let before = usages(h)?;
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let after = usages(h)?;
    let elapsed = started.elapsed().as_secs_f64();
    let sent_after = sent_by_kind(h).await?;
    let cpu: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|((_, b), (_, a))| a.ticks.saturating_sub(b.ticks) as f64 / TICKS_PER_S)
        .collect();
    let percent = |secs: f64| 100.0 * secs / elapsed;
    let mut cpu_percent: Vec<f64> = cpu.iter().map(|&s| percent(s)).collect();
    cpu_percent.sort_by(f64::total_cmp);
    let mut rss: Vec<f64> = after
        .iter()
        .map(|(_, u)| u.rss_kb as f64 / 1024.0)
        .collect();
    rss.sort_by(f64::total_cmp);
    let per_s = |kind: MessageKind| {
        let i = MessageKind::ALL
            .iter()
            .position(|&k| k == kind)
            .unwrap_or(0);
        sent_after[i].saturating_sub(sent_before[i]) as f64 / elapsed
    };
    let links = (h.ids().len().saturating_sub(1)).max(1) as f64;
    let all: u64 = sent_after
        .iter()
        .zip(&sent_before)
        .map(|(a, b)| a.saturating_sub(*b))
        .sum();
    Ok(IdleFigures {
        window_s: elapsed,
        cpu_percent_p50: cpu_percent[cpu_percent.len() / 2],
        cpu_percent_max: cpu_percent.last().copied().unwrap_or(0.0),
        core_seconds_per_10s: cpu.iter().sum::<f64>() / elapsed * 10.0,
        rss_mb_p50: rss[rss.len() / 2],
        rss_mb_max: rss.last().copied().unwrap_or(0.0),
        messages_per_s: all as f64 / elapsed,
        heartbeats_per_link_s: per_s(MessageKind::Heartbeat) / links,
        acks_per_link_s: per_s(MessageKind::Ack) / links,
        leader_query_ms: time_leader_queries(h, binary)?,
    })
}
