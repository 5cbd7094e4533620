//! The pause test catches a node that ignores the maintenance pause: with the
//! debug-only sabotage `ignore_pause` (src/sabotage.rs) every node keeps the pause but
//! stays eligible, so when the paused coordinator dies a follower is elected, which
//! `tests/pause.rs` would report as "an election while paused". In its own test binary
//! because the switch is an environment variable every node inherits.
#![cfg(debug_assertions)]

mod common;
#[path = "common/pause.rs"]
mod pause;
#[path = "common/primary.rs"]
mod primary;

use bully::protocol::{Preempt, Timing};
use common::{text, TestCluster};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_pause_is_caught() {
    // The only test in this binary: no other test's nodes inherit the switch.
    std::env::set_var(bully::sabotage::ENV, "ignore_pause");
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, Duration::from_secs(20))
        .await;
    let out = pause::cli(&t, "pause");
    assert!(out.status.success(), "{}", text(&out));
    let declared = pause::declared_after_killing(&mut t, 3, &[1, 2]).await;
    assert!(
        !declared.is_empty(),
        "the sabotaged cluster elected nobody: the pause test would not notice a node \
         that ignores the pause"
    );
}
