//! How long the query commands take on loopback, as a user sees them (the `bully`
//! process from start to exit, release build): `bully leader` through `--config` (the
//! node and its peers asked at once) and through one follower's endpoint (which asks
//! the coordinator for us, docs/design.md#asking-who-leads), and `bully status
//! --cluster` over 5 members. Goals (issue 48): medians of at most 5 ms, 10 ms and 20 ms.
//!
//! ```text
//! cargo bench --bench query_latency
//! QUERY_BENCH_RUNS=40      runs of each command (default 40)
//! ```
//!
//! Prints the median, the 90th percentile and the maximum of each, and the load average
//! (`/proc/loadavg`) before and after, since the machine's load moves these figures.
//! Every node is a child process killed when the cluster is dropped. Not part of
//! `cargo test`; a figure over its goal is printed, not failed.

#[path = "../tests/common/mod.rs"]
mod common;

use bully::protocol::{Preempt, Timing};
use common::TestCluster;
use std::time::{Duration, Instant};

/// One command's figures.
struct Figures {
    what: &'static str,
    goal_ms: f64,
    runs_ms: Vec<f64>,
}

impl Figures {
    fn at(&self, fraction: f64) -> f64 {
        let mut sorted = self.runs_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let i = ((sorted.len() - 1) as f64 * fraction).round() as usize;
        sorted[i]
    }

    fn line(&self) -> String {
        let median = self.at(0.5);
        format!(
            "{:<44} median {median:>6.1} ms  p90 {:>6.1} ms  max {:>6.1} ms  goal {:>4.0} ms  {}",
            self.what,
            self.at(0.9),
            self.at(1.0),
            self.goal_ms,
            if median <= self.goal_ms {
                "met"
            } else {
                "MISSED"
            }
        )
    }
}

/// Runs `bully ARGS` `runs` times; each must succeed. The wall time of each, in ms.
fn time_runs(args: &[String], runs: usize) -> Vec<f64> {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            let out = std::process::Command::new(common::binary())
                .args(args)
                .output()
                .expect("bully ran");
            let took = started.elapsed().as_secs_f64() * 1000.0;
            assert!(out.status.success(), "{args:?}: {}", common::text(&out));
            took
        })
        .collect()
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn main() {
    let runs: usize = std::env::var("QUERY_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut t = TestCluster::new(5, Timing::default(), Preempt::Always);
    t.start_all();
    runtime.block_on(t.wait_for_leader(&[1, 2, 3, 4, 5], 5, Duration::from_secs(30)));
    println!("load average before: {}", load());
    let c = &t.cluster;
    let config = c.config_path(1).display().to_string();
    let tls = c.client_tls();
    let follower = vec![
        "leader".to_string(),
        "--endpoints".into(),
        c.addr(1).to_string(),
        "--ca".into(),
        tls.ca.display().to_string(),
        "--cert".into(),
        tls.cert.display().to_string(),
        "--key".into(),
        tls.key.display().to_string(),
    ];
    let figures = [
        Figures {
            what: "bully leader --config (node 1 and its peers)",
            goal_ms: 5.0,
            runs_ms: time_runs(&["leader".into(), "--config".into(), config.clone()], runs),
        },
        Figures {
            what: "bully leader --endpoints <one follower>",
            goal_ms: 10.0,
            runs_ms: time_runs(&follower, runs),
        },
        Figures {
            what: "bully status --cluster (5 members)",
            goal_ms: 20.0,
            runs_ms: time_runs(
                &[
                    "status".into(),
                    "--cluster".into(),
                    "--config".into(),
                    config,
                ],
                runs,
            ),
        },
    ];
    println!("{runs} runs each, 5 nodes on loopback, release build:");
    for f in &figures {
        println!("{}", f.line());
    }
    println!("load average after: {}", load());
}
