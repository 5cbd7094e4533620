//! A lost data dir on real processes (issue 26): a node whose store is deleted while it
//! is down comes back on an empty store, says so, and votes for nothing until enough
//! other members reported their terms (src/protocol/recovery.rs). The event logs of
//! every life are checked against I1–I7 at the end.

mod common;

use bully::history::Record;
use bully::protocol::{Fact, NodeId, Preempt, Role, Timing};
use common::{wait_until, TestCluster};
use std::time::{Duration, Instant};

/// Generous: the protocol converges in well under a second; CI machines are slow.
const AGREE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_store_votes_only_after_its_peers_reported() {
    let timing = Timing::default();
    let mut t = TestCluster::new(3, timing, Preempt::Always);
    let all: Vec<NodeId> = t.cluster.ids();
    t.start_all();
    let first = t.wait_for_leader(&all, 3, AGREE).await;

    // Node 1's disk is replaced while it is down, and it comes back beside node 2 alone:
    // node 3, which holds the newest term with node 1's help, is down too.
    t.cluster.kill(1).unwrap();
    t.cluster.lose_store(1).unwrap();
    t.cluster.kill(3).unwrap();
    t.cluster.start(1).unwrap();

    // It says what happened, and nobody leads: node 2 would need node 1's vote, and
    // node 1 cannot know which terms it forgot without node 3's report.
    let log = t.cluster.log_path(1);
    wait_until("node 1 to log its empty store", AGREE, || {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        async move { log.contains("the store is empty").then_some(()) }
    })
    .await;
    let watch_until = Instant::now() + Duration::from_millis(10 * timing.suspect_after_ms);
    while Instant::now() < watch_until {
        for (id, status) in t.views(&[1, 2]).await {
            let leads = status.is_some_and(|s| s.role == Role::Coordinator);
            assert!(
                !leads,
                "node {id} leads while node 1 has not recovered its store\n{}",
                t.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Node 3 returns: node 1 hears enough terms, and the cluster settles above `first`.
    t.cluster.start(3).unwrap();
    let settled = t.wait_for_leader(&all, 3, AGREE).await;
    assert!(settled > first, "epoch {settled} must be above {first}");

    for id in t.cluster.ids() {
        t.cluster.stop(id, Duration::from_secs(5)).unwrap();
    }
    let history = t.cluster.history();
    let recovered = history.iter().any(|e| {
        e.node == 1 && matches!(e.record, Record::Fact(Fact::Recovered { term }) if term >= first)
    });
    assert!(
        recovered,
        "node 1 never recovered a term >= {first}\n{}",
        t.log_tail()
    );
    let mut violations = bully::checker::check_safety(&history);
    violations.extend(bully::checker::check_no_overlap(
        &history,
        bully::checker::lease_bound_ms(&timing),
    ));
    violations.extend(bully::checker::check_one_per_term(&history));
    assert!(
        violations.is_empty(),
        "invariant violations: {violations:#?}\n{}",
        t.log_tail()
    );
}
