//! The rolling-D test catches the old rule: with the debug-only sabotage
//! `holdoff_by_new_d` (see `src/sabotage.rs`) a restarted node holds off for the D it
//! restarts with, and the side that restarted elects while the old coordinator still
//! leads. In its own test binary because the switch is an environment variable every
//! node inherits.
#![cfg(debug_assertions)]

mod common;
#[path = "common/keepers.rs"]
mod keepers;
#[path = "common/rolling_d.rs"]
mod rolling_d;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_hold_off_is_caught_as_two_coordinators_and_two_jobs() {
    // The only test in this binary: no other test's nodes inherit the switch.
    std::env::set_var(bully::sabotage::ENV, "holdoff_by_new_d");
    let dir = tempfile::tempdir().expect("temp dir");
    let rolled = rolling_d::roll_with_a_cut(dir.path(), 3000).await;
    let violations = rolled.violations;
    eprintln!("jobs on the old rule: {:#?}", rolled.job_faults);
    // The jobs' own files show it too: node 5's job was still alive after its
    // successor's had started (by about 1.5 s here).
    assert!(
        rolled.job_faults.iter().any(|f| f.starts_with("overlap")),
        "the jobs did not overlap on the old rule: {:#?}",
        rolled.job_faults
    );
    assert!(
        violations
            .iter()
            .any(|v| v.invariant == bully::checker::Invariant::NoOverlap),
        "the old hold-off went unnoticed: {violations:#?}"
    );
    for v in &violations {
        eprintln!("caught: {v}");
    }
}
