//! The keeper test catches a Resign that does not wait for the keeper: with the
//! debug-only sabotage `resign_before_on_demoted` (see `src/sabotage.rs`) a node that
//! steps down resigns at once, and the successor's job starts while the old one,
//! lingering 200 ms after its SIGTERM, still runs (D = 2 s, so the lease's own
//! deadline comes much later). In its own test binary because the
//! switch is an environment variable every node inherits.
#![cfg(debug_assertions)]

mod common;
#[path = "common/keepers.rs"]
mod keepers;

use bully::protocol::Timing;
use keepers::{scenario, violations, Fault};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resign_before_the_keeper_released_is_caught() {
    // The only test in this binary: no other test's nodes inherit the switch.
    std::env::set_var(bully::sabotage::ENV, "resign_before_on_demoted");
    let dir = tempfile::Builder::new()
        .prefix("bully-run-resign-")
        .tempdir()
        .expect("temp dir");
    let faults = [Fault::StepDown, Fault::StepDown, Fault::StepDown];
    // A long lease: the old job's SIGKILL (by the fencing deadline, about D after the
    // last renewal) comes well after a successor could start (about 120 ms after the
    // step-down), so only the release keeps them apart.
    let timing = Timing {
        suspect_after_ms: 2_000,
        ..Timing::default()
    };
    let seen = scenario(dir.path(), &faults, Duration::ZERO, timing).await;
    let found = violations(&seen.runs);
    eprintln!(
        "{found:#?}\nfault to the next start (ms): {:?}",
        seen.gaps_ms
    );
    let overlaps = found.iter().filter(|v| v.starts_with("overlap")).count();
    assert!(
        overlaps > 0,
        "a hasty Resign went unnoticed: {:#?}",
        seen.runs
    );
}
