//! The forced-recovery test catches the old rule: with the debug-only sabotage
//! `ignores_given_up` (see `src/sabotage.rs`) nodes 2 and 3, refused as given up by the
//! recovered node 1, go on leading beside it. In its own test binary because the switch
//! is an environment variable every node inherits.
#![cfg(debug_assertions)]

mod common;
#[path = "common/forced_recovery.rs"]
mod forced_recovery;

use bully::protocol::{Preempt, Timing};
use common::TestCluster;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_side_leading_on_is_caught_as_two_coordinators() {
    // Every test in this binary sets the same switch: their nodes inherit it.
    std::env::set_var(bully::sabotage::ENV, "ignores_given_up");
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let met = forced_recovery::beside_the_old_majority(&mut t, Duration::from_secs(2)).await;
    assert!(!met.given_up, "the sabotaged nodes stood down anyway");
    let both = forced_recovery::stop_and_measure(&mut t);
    eprintln!("caught: the survivor and the old side led at once for {both} ms");
    assert!(both >= 1_000, "two coordinators for {both} ms only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_majority_leading_on_after_the_heal_is_caught() {
    std::env::set_var(bully::sabotage::ENV, "ignores_given_up");
    let dir = tempfile::tempdir().expect("temp dir");
    let watch = Duration::from_secs(2);
    let (given_up, both) = forced_recovery::cut_off_then_healed(dir.path(), watch).await;
    eprintln!("caught: after the heal both sides led at once for {both} ms");
    assert!(
        !given_up && both >= 1_000,
        "two coordinators for {both} ms only"
    );
}
