//! The counters a node exports over the client API (`Client::metrics`): messages by
//! kind, declarations, coordinator changes and the failover histogram, on real
//! processes (kill -9 of the coordinator).

mod common;

use bully::api::MetricsSnapshot;
use bully::client::Client;
use bully::protocol::{NodeId, Preempt, Timing};
use common::{wait_until, TestCluster};
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

async fn metrics(t: &TestCluster, id: NodeId) -> Option<MetricsSnapshot> {
    let c = &t.cluster;
    let client = Client::connect(c.addr(id), c.client_tls(), Some(id), Duration::from_secs(1))
        .await
        .ok()?;
    client.metrics().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_follow_an_election_and_a_failover() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    let term = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    eprintln!("=== phase: the coordinator counts its declaration and heartbeats");
    let top = wait_until("heartbeats counted on node 3", AGREE, || async {
        metrics(&t, 3).await.filter(|m| m.sent["heartbeat"] > 0)
    })
    .await;
    assert!(top.is_coordinator);
    assert_eq!(top.epoch_term, term);
    assert!(top.declarations >= 1, "{top:?}");
    assert!(top.elections_started >= 1, "{top:?}");
    assert_eq!(top.peers_up, 2, "{top:?}");

    eprintln!("=== phase: a follower counts what it received");
    let low = metrics(&t, 1).await.expect("node 1 metrics");
    assert!(!low.is_coordinator);
    assert!(low.received["heartbeat"] > 0, "{low:?}");
    assert!(low.sent["ack"] > 0, "{low:?}");
    assert!(low.coordinator_changes >= 1, "{low:?}");

    eprintln!("=== phase: kill -9 the coordinator; the followers time their failover");
    t.cluster.kill(3).unwrap();
    t.wait_for_leader(&[1, 2], 2, AGREE).await;
    // Node 2 won through a candidate spell, so it timed a failover; node 1 may have
    // switched straight from following 3 to following 2 (no candidate spell).
    let winner = metrics(&t, 2).await.expect("node 2 metrics");
    assert_eq!(winner.failover.count, 1, "{winner:?}");
    assert!(
        winner.failover.sum_us < 10_000_000,
        "failover took {} µs",
        winner.failover.sum_us
    );
    let after = metrics(&t, 1).await.expect("node 1 metrics");
    assert!(after.coordinator_changes > low.coordinator_changes);
    eprintln!(
        "node 2 failover (candidate until leading): {} µs",
        winner.failover.sum_us
    );
}
