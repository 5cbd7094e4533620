//! est(S) on real processes (docs/design.md#elected-by-data-est): each node's health
//! check prints `est=N` from a file. Node 1 holds the freshest data and leads although
//! it has the lowest ID; when it is killed node 2 (est 20) takes over, never node 3
//! (higher ID, est 10); the status, `status --cluster`, the counters behind `/metrics`
//! and the event log show the estimates.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::api::Estimate;
use bully::config::HealthConfig;
use bully::history::Record;
use bully::protocol::{Fact, NodeId, Preempt, Timing};
use common::TestCluster;
use primary::{events, phase, quoted, status};
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

fn set_estimate(t: &TestCluster, id: NodeId, est: u64) {
    let file = t.dir.path().join(format!("est-{id}"));
    std::fs::write(&file, format!("{est}\n")).unwrap();
    let check = HealthConfig {
        interval_ms: 50,
        timeout_ms: 1000,
        rise: 1,
        fall: 1,
        ..HealthConfig::new(format!("echo est=$(cat {})", quoted(&file)))
    };
    t.cluster
        .edit_config(id, |c| c.health = Some(check))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_freshest_node_leads_and_a_stale_higher_id_never_does() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    for (id, est) in [(1, 30), (2, 20), (3, 10)] {
        set_estimate(&t, id, est);
    }

    phase("start nodes 1 and 2: node 1, the freshest, leads; node 3 joins and follows");
    // One at a time: at a cold start the first node whose check passes may win before
    // the others report (docs/design.md#elected-by-data-est, limits).
    t.cluster.start(1).unwrap();
    t.cluster.start(2).unwrap();
    t.wait_for_leader(&[1, 2], 1, AGREE).await;
    t.cluster.start(3).unwrap();
    t.wait_for_leader(&[1, 2, 3], 1, AGREE).await;
    let s1 = status(&t, 1).await.expect("node 1 answers");
    let fresh = Estimate {
        value: 30,
        fresh: true,
    };
    assert_eq!(s1.estimate, Some(fresh), "{s1:?}");
    let counters = primary::metrics(&t, 1).await.expect("node 1's counters");
    assert_eq!(
        counters.estimate,
        Some(fresh),
        "/metrics carries the estimate"
    );
    let config = t.cluster.config_path(1);
    let table = common::text(&common::bully(&[
        "status",
        "--cluster",
        "--config",
        config.to_str().unwrap(),
    ]));
    assert!(table.contains("EST") && table.contains("30"), "{table}");
    let ranked = |id| {
        events(&t, id)
            .iter()
            .any(|e| matches!(e.record, Record::Fact(Fact::Ranked { .. })))
    };
    assert!(
        ranked(1),
        "node 1's event log records its estimate at elections"
    );

    phase("node 1 killed: node 2 (est 20) leads, not node 3 (est 10)");
    t.cluster.kill(1).unwrap();
    t.wait_for_leader(&[2, 3], 2, AGREE).await;
    assert!(!primary::ever_led(&t, 3), "node 3 led on staler data");
}
