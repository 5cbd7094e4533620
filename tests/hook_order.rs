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
