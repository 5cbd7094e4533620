//! The stale-health test catches a runtime that does not notice its stall: with the
//! debug-only sabotage `ignore_stall` (see `src/sabotage.rs`) node 3, continued after a
//! SIGSTOP, declares on the verdict it held before the stop. In its own test binary
//! because the switch is an environment variable every node inherits.
#![cfg(debug_assertions)]

mod common;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/stale_health.rs"]
mod stale_health;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leading_on_a_stale_verdict_is_caught() {
    // The only test in this binary: no other test's nodes inherit the switch.
    std::env::set_var(bully::sabotage::ENV, "ignore_stall");
    let after = stale_health::stop_sicken_resume().await;
    assert!(
        !after.declared.is_empty(),
        "the sabotaged node did not declare: the test would not notice a stale verdict"
    );
}
