//! `/metrics` of real nodes, both modes, coordinator and follower, read by strict
//! parsers: the OpenMetrics parser of Python's prometheus_client (Debian's
//! `python3-prometheus-client`), which checks names, suffixes, histogram buckets and the
//! `# EOF`, and `promtool check metrics` (Debian's `prometheus`), which must parse it and
//! whose lint may only note the OpenMetrics counter naming (`# TYPE x counter` with
//! samples `x_total`, which its Prometheus-0.0.4 lint reads as "no help text").
//! `.ci/run` installs both; without them those checks skip, saying so.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::config::HttpConfig;
use bully::ports::free_tcp_addrs;
use bully::protocol::{Mode, NodeId, Preempt, Timing};
use common::TestCluster;
use primary::{http_get, phase};
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

/// Runs `program args` with `input` on stdin; None if it cannot be run.
fn run_with_input(program: &str, args: &[&str], input: &str) -> Option<(bool, String)> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(input.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text))
}

const OPENMETRICS_CHECK: &str = "
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
names = [f.name for f in text_string_to_metric_families(sys.stdin.read())]
print(len(names), 'families:', ' '.join(names))
";

fn check_strictly(text: &str, what: &str) {
    let has_parser = Command::new("/usr/bin/python3")
        .args(["-c", "import prometheus_client.openmetrics.parser"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_parser {
        let (ok, out) =
            run_with_input("/usr/bin/python3", &["-c", OPENMETRICS_CHECK], text).unwrap();
        assert!(
            ok,
            "{what}: the OpenMetrics parser refused it: {out}\n{text}"
        );
        assert!(out.contains("bully_persist_seconds"), "{what}: {out}");
        eprintln!("{what}: {}", out.trim());
    } else {
        eprintln!("python3-prometheus-client not installed; OpenMetrics parse skipped");
    }
    match run_with_input("promtool", &["check", "metrics"], text) {
        None => eprintln!("promtool not installed; promtool check skipped"),
        Some((ok, out)) => {
            // Exit 1 is a parse error; exit 3 lint problems, of which only the
            // OpenMetrics counter naming is expected.
            let unexpected: Vec<&str> = out
                .lines()
                .filter(|l| !(l.contains("_total no help text")))
                .filter(|l| !l.trim().is_empty())
                .collect();
            assert!(
                ok || unexpected.is_empty(),
                "{what}: promtool check metrics: {unexpected:?}\n{text}"
            );
        }
    }
}

async fn metrics_parse(mode: Mode) {
    let mut t = TestCluster::with_mode(3, Timing::default(), Preempt::Always, mode);
    let mut http: Vec<SocketAddr> = Vec::new();
    let ids = t.cluster.ids();
    for (id, listen) in ids.iter().copied().zip(free_tcp_addrs(ids.len()).unwrap()) {
        http.push(listen);
        t.cluster
            .edit_config(id, |c| c.http = Some(HttpConfig::on(listen)))
            .unwrap();
    }
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    phase("coordinator 3 and follower 1");
    for id in [3 as NodeId, 1] {
        let (code, text) = http_get(http[id as usize - 1], "/metrics").await.unwrap();
        assert_eq!(code, 200, "{text}");
        let role = if id == 3 { "coordinator" } else { "follower" };
        let leads = if id == 3 { "1.0" } else { "0.0" };
        assert!(
            text.contains(&format!("\nbully_is_coordinator {leads}\n")),
            "{text}"
        );
        assert!(!text.contains("node=\""), "a node label:\n{text}");
        check_strictly(&text, &format!("{mode} {role} node {id}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_strictly_quorum() {
    metrics_parse(Mode::Quorum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_strictly_classic() {
    metrics_parse(Mode::Classic).await;
}

/// A replica's PostgreSQL figures (issue 50): parsed strictly, named the OpenMetrics
/// way, each with the value its state gives.
#[test]
fn postgres_figures_parse_strictly() {
    use bully::api::postgres::{PgRole, PgState};
    use bully::api::Status;
    use bully::node::serve::http_routes::route;
    use bully::node::Metrics;
    use bully::postgres_rules::Synchronous;
    use bully::protocol::{Cells, Role, View};
    let follower = View::new(1, Role::Follower);
    let mut status = Status::initial(follower, Mode::Quorum, Cells::default(), &[2, 3], 0);
    let listen = "127.0.0.1:5432".parse().unwrap();
    status.postgres = Some(PgState {
        timeline: Some(3),
        wal_position: Some(0x300_0148),
        lag_bytes: Some(4096),
        streaming_from: Some(2),
        quorum_standby: true,
        pending_restart: vec!["shared_buffers".into()],
        synchronous: Some(Synchronous::Quorum),
        ..PgState::bare(listen, PgRole::Replica, String::new(), 0)
    });
    let reply = route("/metrics", None, &status, &Metrics::new(1), 0);
    assert_eq!(reply.code, 200, "{}", reply.body);
    let text = reply.body;
    for line in [
        "bully_postgres_role{role=\"replica\"} 1.0",
        "bully_postgres_role{role=\"primary\"} 0.0",
        "bully_postgres_timeline 3.0",
        "bully_postgres_wal_position_bytes 50331976.0",
        "bully_postgres_replication_lag_bytes 4096.0",
        "bully_postgres_streaming 1.0",
        "bully_postgres_quorum_standby 1.0",
        "bully_postgres_pending_restart_parameters 1.0",
        "bully_postgres_parameters_refused 0.0",
        "bully_postgres_synchronous_mode{mode=\"quorum\"} 1.0",
        "bully_postgres_synchronous_mode{mode=\"off\"} 0.0",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}`:\n{text}");
    }
    check_strictly(&text, "a replica's PostgreSQL figures");
}
