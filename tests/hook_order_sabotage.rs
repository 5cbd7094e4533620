//! The hook-order test catches the old order: with the debug-only sabotage
//! `resign_before_on_demoted` (see `src/sabotage.rs`) every node sends its Resign before
//! its `on_demoted` has ended, and the successor's `on_elected` starts first. In its own
//! test binary because the switch is an environment variable every node inherits.
#![cfg(debug_assertions)]

mod common;
#[path = "common/hook_order.rs"]
mod hook_order;
#[path = "common/primary.rs"]
mod primary;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_order_is_caught() {
    // The only test in this binary: no other test's nodes inherit the switch.
    std::env::set_var(bully::sabotage::ENV, "resign_before_on_demoted");
    let changes = hook_order::voluntary_changes().await;
    for change in &changes {
        assert!(
            !change.in_order(),
            "{}: the sabotaged order went unnoticed: {change:?}",
            change.how
        );
    }
}
