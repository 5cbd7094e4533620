//! On real processes (3 nodes, quorum mode, loopback): when a coordinator leaves office
//! on its own, its `on_demoted` ends before its successor's `on_elected` starts, for a
//! clean stop, a handover to a restarted higher node and `bully step-down`. The
//! scenario lives in `tests/common/hook_order.rs`; `tests/hook_order_sabotage.rs`
//! shows it catches the old order.

mod common;
#[path = "common/hook_order.rs"]
mod hook_order;
#[path = "common/primary.rs"]
mod primary;

use bully::protocol::Role;
use std::time::{Duration, Instant};

const AGREE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_demoted_ends_before_the_successor_runs_on_elected() {
    let changes = hook_order::voluntary_changes().await;
    assert_eq!(changes.len(), 3);
    for change in &changes {
        assert!(
            change.in_order(),
            "{}: the successor's on_elected started {:.1} ms before the predecessor's \
             on_demoted ended: {change:?}",
            change.how,
            -change.gap_ms()
        );
    }
}

/// A stop asked for while a stepping-down coordinator waits for its `on_demoted` still
/// stops it (right after the wait), and the order holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_asked_while_on_demoted_runs_still_stops_the_node_in_order() {
    let (mut t, first) = hook_order::stamping_cluster().await;

    primary::phase("node 3 steps down (API); its 1 s on_demoted starts");
    let c3 = primary::client(&t, 3).await.expect("node 3 answers");
    let step_down = tokio::spawn(async move { c3.step_down(60_000).await });
    common::wait_until("node 3 to leave office", AGREE, || async {
        let s = primary::status(&t, 3).await?;
        (s.role != Role::Coordinator).then_some(())
    })
    .await;

    primary::phase("SIGTERM node 3 while it waits: it still stops, after its on_demoted");
    let asked = Instant::now();
    t.cluster.stop(3, Duration::from_secs(15)).unwrap();
    eprintln!("node 3 exited {:?} after SIGTERM", asked.elapsed());
    let second = t.wait_for_leader(&[1, 2], 2, AGREE).await;
    let demoted_end = hook_order::stamp(&t, "demoted", 3, first).await;
    let elected_start = hook_order::stamp(&t, "elected", 2, second).await;
    assert!(
        demoted_end < elected_start,
        "node 2's on_elected started {:.1} ms before node 3's on_demoted ended",
        (demoted_end as f64 - elected_start as f64) / 1e6
    );
    // The step-down's answer came, or its connection closed with the node: either way
    // the request ended.
    let answered = tokio::time::timeout(AGREE, step_down).await;
    assert!(answered.is_ok(), "the step-down request never ended");
}
