//! Issue 38's first break, on real processes: a rolling restart that lowers D (3000 →
//! 300 ms, kill -9 and SIGTERM) with the old coordinator cut off just as a node
//! restarts gives no two coordinators, because a restart holds off for the D its last
//! promise was made under (`Cells::promise_ms`, docs/design.md#q5-restart-hold-off).
//! The simulator found it first (`tests/simulation.rs`,
//! `a_rolling_restart_that_lowers_d_keeps_the_promises_of_the_old_d`);
//! `tests/rolling_d_sabotage.rs` shows this test catches the old rule.

mod common;
#[path = "common/rolling_d.rs"]
mod rolling_d;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_that_lowers_d_never_gives_two_coordinators() {
    let dir = tempfile::tempdir().expect("temp dir");
    let violations = rolling_d::roll_with_a_cut(dir.path()).await;
    assert!(violations.is_empty(), "{violations:#?}");
}
