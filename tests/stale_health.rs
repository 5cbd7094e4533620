//! A node continued after a SIGSTOP re-checks its health before it may lead again: its
//! verdict is as old as the stop (src/node/policy/stall.rs). Node 3, stopped in office
//! while its database went bad, comes back ineligible, declares nothing, and node 2
//! keeps leading; its fresh check then fails at once (the first result decides).

mod common;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/stale_health.rs"]
mod stale_health;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_node_does_not_lead_on_its_old_verdict() {
    let after = stale_health::stop_sicken_resume().await;
    assert!(
        after.declared.is_empty(),
        "node 3 declared {:?} on its stale verdict",
        after.declared
    );
}
