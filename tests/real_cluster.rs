//! Real processes on 127.0.0.1: elect, kill -9 the coordinator, restart it, SIGSTOP and
//! SIGCONT it; every phase waits for agreement with a generous bound, and the nodes'
//! event logs are checked against I1–I5 at the end.

mod common;

use bully::protocol::{NodeId, Preempt, Timing};
use common::TestCluster;
use std::time::Duration;

/// Generous: the protocol converges in well under a second; CI machines are slow.
const AGREE: Duration = Duration::from_secs(20);

fn phase(name: &str) {
    eprintln!("=== phase: {name}");
}

async fn kill_restart_pause_resume(nodes: u64) {
    let mut t = TestCluster::new(nodes, Timing::default(), Preempt::Always);
    let all: Vec<NodeId> = t.cluster.ids();
    let top = nodes;
    let survivors: Vec<NodeId> = all.iter().copied().filter(|&id| id != top).collect();

    phase("start every node; all agree on the highest ID");
    t.start_all();
    let first = t.wait_for_leader(&all, top, AGREE).await;

    phase("kill -9 the coordinator; survivors follow the next highest");
    t.cluster.kill(top).unwrap();
    let second = t.wait_for_leader(&survivors, top - 1, AGREE).await;
    assert!(second > first, "new epoch {second} must be above {first}");

    phase("restart it; it wins again with a higher epoch");
    t.cluster.start(top).unwrap();
    let third = t.wait_for_leader(&all, top, AGREE).await;
    assert!(
        third > second,
        "reclaimed epoch {third} must be above {second}"
    );

    phase("SIGSTOP the coordinator; the others elect a new one");
    t.cluster.pause(top).unwrap();
    let fourth = t.wait_for_leader(&survivors, top - 1, AGREE).await;
    assert!(fourth > third);

    phase("SIGCONT; it takes over again");
    t.cluster.resume(top).unwrap();
    let fifth = t.wait_for_leader(&all, top, AGREE).await;
    assert!(fifth > fourth);
    let converged_at = bully::wall_clock::wall_ms();

    phase("check I1–I7 on every node's event log");
    // The stop's own records must fall after every record of the converged views: a
    // view logged in the same millisecond as `converged_at` would otherwise be cut off
    // with them, leaving the view before it as the node's last (a false I5 failure).
    let stopping_at = common::wall_ms_after(converged_at).await;
    for id in t.cluster.ids() {
        t.cluster.stop(id, Duration::from_secs(5)).unwrap();
    }
    let history = t.cluster.history();
    assert!(!history.is_empty(), "the nodes wrote no event log");
    let mut violations = bully::checker::check_safety(&history);
    // Quorum mode (the default): never two coordinators, one per term.
    let bound = bully::checker::lease_bound_ms(&Timing::default());
    violations.extend(bully::checker::check_no_overlap(&history, bound));
    violations.extend(bully::checker::check_one_per_term(&history));
    // Stopping the nodes demotes the coordinator on purpose: judge I5 before that.
    let before_stop: Vec<_> = history
        .iter()
        .filter(|e| e.at_ms < stopping_at)
        .cloned()
        .collect();
    violations.extend(bully::checker::check_convergence(
        &before_stop,
        &bully::checker::Convergence {
            live: all.clone(),
            leader: bully::checker::Leader::Node(top),
            deadline_ms: converged_at,
        },
    ));
    assert!(
        violations.is_empty(),
        "invariant violations: {violations:#?}\n{}",
        t.log_tail()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_kill_restart_pause_resume() {
    kill_restart_pause_resume(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_kill_restart_pause_resume() {
    kill_restart_pause_resume(5).await;
}
