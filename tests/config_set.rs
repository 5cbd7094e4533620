//! Issue 47's timing change, on real processes behind the relay: a running 5-node quorum
//! cluster changes D with `bully config set timing.suspect_after_ms=3000`, then `=300`,
//! the coordinator cut off from the other four just after each is asked. No node
//! restarts; the offices never overlap (I6) nor share a term (I7); the four elect a
//! coordinator again while the old one is cut off, and after each heal every member
//! lives by the new D and `bully config show` says so. The change reaches the members
//! through the protocol only: the files keep the D they started with, and the members
//! report that they differ.

mod common;
// Only `rolling_d::config_set` and `coordinators` are used here.
#[path = "common/keepers.rs"]
mod keepers;
#[allow(dead_code)]
#[path = "common/rolling_d.rs"]
mod rolling_d;

use bully::chaos::harness::Harness;
use bully::chaos::plan::Step;
use bully::checker::{check_no_overlap, check_one_per_term, lease_bound_ms};
use bully::history::Record;
use bully::protocol::{Mode, NodeId, Timing};
use std::time::{Duration, Instant};

/// Every wait for a condition: far above what the protocol needs, for CI's 2 cores.
const WAIT: Duration = Duration::from_secs(60);

/// Waits until exactly one of `among` leads; returns it and how long that took.
async fn one_leader(h: &Harness, among: &[NodeId], what: &str) -> (NodeId, Duration) {
    let started = Instant::now();
    loop {
        let now = rolling_d::coordinators(h, among).await;
        if let [one] = now[..] {
            return (one, started.elapsed());
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out waiting for {what}; coordinators among {among:?}: {now:?}\n{}",
            h.cluster.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every member reports D = `d` in its status.
async fn all_live_by(h: &Harness, d: u64) {
    let started = Instant::now();
    loop {
        let mut ds = Vec::new();
        for id in 1..=5 {
            let status = h.cluster.status(id, Duration::from_millis(800)).await;
            ds.push(status.map(|s| s.timing.suspect_after_ms).ok());
        }
        if ds.iter().all(|x| *x == Some(d)) {
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "the members do not all live by D = {d}: {ds:?}\n{}",
            h.cluster.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asks for D = `d` through node 1 while `leader` is cut off from the rest right after
/// the request is sent; returns how long the rest took to lead again. If the change
/// did not commit before the cut, it is asked again after the heal.
async fn change_under_a_cut(h: &mut Harness, leader: NodeId, d: u64) -> Duration {
    let config = h.cluster.config_path(1).display().to_string();
    let assignment = format!("timing.suspect_after_ms={d}");
    let asked = tokio::task::spawn_blocking(move || {
        common::bully(&["config", "set", &assignment, "--config", &config])
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    let rest: Vec<NodeId> = (1..=5).filter(|&n| n != leader).collect();
    h.take(Step::Partition(vec![leader]))
        .expect("cut the coordinator off");
    let (successor, took) = one_leader(h, &rest, "a coordinator among the rest").await;
    eprintln!("D -> {d}: node {successor} leads the rest {took:?} after the cut");
    let out = asked.await.expect("config set ran");
    eprintln!("config set during the cut: {}", common::text(&out));
    h.take(Step::Heal).expect("heal");
    one_leader(h, &[1, 2, 3, 4, 5], "one coordinator after the heal").await;
    if !out.status.success() {
        rolling_d::config_set(h, 1, &format!("timing.suspect_after_ms={d}")).await;
    }
    all_live_by(h, d).await;
    let status = h.cluster.status(2, Duration::from_secs(2)).await;
    let differs = status.expect("node 2 answers").file_differs;
    let want = format!("timing.suspect_after_ms is {d} (the file says 300)");
    match d {
        300 => assert_eq!(differs, None, "the file agrees again"),
        _ => assert!(
            differs.as_deref().is_some_and(|t| t.contains(&want)),
            "{differs:?}"
        ),
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d_changes_online_with_the_coordinator_cut_off_and_never_two_lead() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = common::relay_spec(5, Timing::default(), Mode::Quorum, dir.path());
    let mut h = Harness::start(&spec)
        .await
        .expect("start 5 nodes behind the relay");
    let (leader, _) = one_leader(&h, &[1, 2, 3, 4, 5], "a first coordinator").await;
    let raised = change_under_a_cut(&mut h, leader, 3000).await;
    let (leader, _) = one_leader(&h, &[1, 2, 3, 4, 5], "a coordinator").await;
    let lowered = change_under_a_cut(&mut h, leader, 300).await;
    eprintln!("failover under the cut: raising {raised:?}, lowering {lowered:?}");

    // The files still say 300: after the raise, each member said its file differs.
    let shown = common::text(&common::bully(&[
        "config",
        "show",
        "--config",
        &h.cluster.config_path(2).display().to_string(),
    ]));
    assert!(shown.contains("timing.suspect_after_ms = 300"), "{shown}");

    for id in 1..=5 {
        let _ = h.cluster.stop(id, Duration::from_secs(5));
    }
    let history = h.cluster.history();
    let starts: Vec<NodeId> = history
        .iter()
        .filter(|e| matches!(e.record, Record::Started { .. }))
        .map(|e| e.node)
        .collect();
    assert_eq!(starts.len(), 5, "a node restarted: {starts:?}");
    let slowest = Timing {
        suspect_after_ms: 3000,
        ..Timing::default()
    };
    let mut violations = check_no_overlap(&history, lease_bound_ms(&slowest));
    violations.extend(check_one_per_term(&history));
    if !violations.is_empty() {
        eprintln!("{}", bully::history::tail(&history, 80));
    }
    assert!(violations.is_empty(), "{violations:#?}");
}
