//! Issue 38's first break, on real processes, as D is lowered since it is cluster
//! state: `bully config set` from 3000 (or 5000) to 300 ms, then restarts (kill -9 and
//! SIGTERM, a `bully run` keeper on every node) with the old coordinator cut off just as
//! a node restarts, gives no two coordinators and no two jobs, because a restart holds
//! off for the longest D its promises may still bind under (`Cells::promise_ms`,
//! docs/design.md#q5-restart-hold-off and #cluster-settings).
//! The simulator found it first (`tests/simulation.rs`,
//! `a_rolling_restart_that_lowers_d_keeps_the_promises_of_the_old_d`);
//! `tests/rolling_d_sabotage.rs` shows this test catches the old rule.

mod common;
#[path = "common/keepers.rs"]
mod keepers;
#[path = "common/rolling_d.rs"]
mod rolling_d;

/// Rolls from `old_d` to 300 ms: no two coordinators, no two jobs.
async fn roll_keeps_one_coordinator_and_one_job(old_d: u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let rolled = rolling_d::roll_with_a_cut(dir.path(), old_d).await;
    assert!(rolled.violations.is_empty(), "{:#?}", rolled.violations);
    assert!(rolled.job_faults.is_empty(), "{:#?}", rolled.job_faults);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_that_lowers_d_never_gives_two_coordinators() {
    roll_keeps_one_coordinator_and_one_job(3000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_from_five_seconds_never_gives_two_coordinators() {
    roll_keeps_one_coordinator_and_one_job(5000).await;
}
