//! The keeper test catches a late fence and a hasty Resign. With the debug-only
//! sabotage `late_fence` (see `src/sabotage.rs`) every keeper stops its job half a
//! second after the fencing deadline, and a node SIGSTOPped in office leaves its job
//! running while the successor's starts. With `resign_before_on_demoted` a node that
//! steps down resigns without waiting for its keeper, and the successor's job starts
//! while the old one (which lingers 200 ms after SIGTERM) still runs. Each in its own
//! test binary because the switch is an environment variable every process inherits:
//! this one, and `tests/run_fencing_resign_sabotage.rs`.
#![cfg(debug_assertions)]

mod common;
#[path = "common/keepers.rs"]
mod keepers;

use bully::protocol::Timing;
use keepers::{scenario, violations, Fault};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_fence_is_caught() {
    // The only test in this binary: no other test's keepers inherit the switch.
    std::env::set_var(bully::sabotage::ENV, "late_fence");
    let dir = tempfile::Builder::new()
        .prefix("bully-run-sabotage-")
        .tempdir()
        .expect("temp dir");
    let faults = [Fault::PauseNode, Fault::PauseNode, Fault::PauseNode];
    // Each stall lasts past the late kill, so the overlap is the whole half second.
    let seen = scenario(
        dir.path(),
        &faults,
        Duration::from_secs(1),
        Timing::default(),
    )
    .await;
    let found = violations(&seen.runs);
    eprintln!("{found:#?}");
    let overlaps = found.iter().filter(|v| v.starts_with("overlap")).count();
    assert_eq!(overlaps, faults.len(), "every stall overlaps: {found:#?}");
    assert!(seen.stall_margins_ms.iter().all(|&m| m < 0.0));
}
