//! Lowering D and then restarting nodes (issue 38, and issue 47 since D is cluster
//! state), on real processes behind the relay: five quorum nodes at D = 3000 ms (or
//! 5000), node 5 leading, a `bully run` keeper with a singleton job on every node
//! (tests/common/keepers.rs). `bully config set timing.suspect_after_ms=300` lowers D
//! online; at once nodes 1 and 2 are restarted (kill -9), then {4, 5} is cut off from
//! {1, 2, 3} just as node 3 is restarted (SIGTERM). Their last acks before the change
//! promised node 5 a lease of the old D, which node 5 has earned and holds while cut
//! off; a restarted node must hold off for that D (`Cells::promise_ms`, kept while the
//! old D's promises bind), not for the D it restarts with. Nodes 1–3 elect among
//! themselves; the offices must not overlap (I6), nor the jobs. Shared by
//! `tests/rolling_d.rs` and its sabotage. Included with
//! `#[path = "common/rolling_d.rs"] mod rolling_d;` beside `mod common;` and
//! `#[path = "common/keepers.rs"] mod keepers;`.

use crate::common::relay_spec;
use crate::keepers::{violations as violations_of_jobs, Keepers};
use bully::chaos::harness::Harness;
use bully::chaos::plan::Step;
use bully::checker::{check_no_overlap, check_one_per_term, lease_bound_ms, Violation};
use bully::protocol::{Mode, NodeId, Role, Timing};
use std::time::{Duration, Instant};

/// The D the roll brings.
const NEW_D: u64 = 300;
/// Every wait for a condition: well above what the protocol needs, for CI's 2 cores.
const WAIT: Duration = Duration::from_secs(40);

/// The cluster's first timing: D = `old_d`, heartbeat 100 ms.
fn old_timing(old_d: u64) -> Timing {
    Timing {
        suspect_after_ms: old_d,
        ..Timing::default()
    }
}

/// What a roll left: the event logs' I6 and I7 violations, and the jobs' overlaps and
/// falling tokens (tests/common/keepers.rs `violations`).
pub struct Rolled {
    pub violations: Vec<Violation>,
    pub job_faults: Vec<String>,
}

/// The nodes among `among` that say they are coordinator.
pub async fn coordinators(h: &Harness, among: &[NodeId]) -> Vec<NodeId> {
    let mut out = Vec::new();
    for &id in among {
        let status = h.cluster.status(id, Duration::from_millis(800)).await;
        if status.is_ok_and(|s| s.role == Role::Coordinator) {
            out.push(id);
        }
    }
    out
}

/// Waits until `done` holds for the coordinators among `among`; panics after [`WAIT`].
async fn wait_for(h: &Harness, among: &[NodeId], what: &str, done: impl Fn(&[NodeId]) -> bool) {
    let started = Instant::now();
    loop {
        let now = coordinators(h, among).await;
        if done(&now) {
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting for {what}; coordinators among {among:?}: {now:?}\n{}",
            h.cluster.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Restarts node `id` (`clean`: SIGTERM, waited for; else kill -9), its file as it was.
fn restart(h: &mut Harness, id: NodeId, clean: bool) {
    if clean {
        h.cluster
            .stop(id, Duration::from_secs(10))
            .expect("stop the node");
        // The harness notes the stop it did not make as an anomaly: not an error here.
        h.execute(Step::Start(id));
    } else {
        h.take(Step::Kill(id)).expect("kill the node");
        h.take(Step::Start(id)).expect("start the node");
    }
    assert!(h.cluster.is_running(id), "node {id} did not start again");
}

/// `bully config set ASSIGNMENT` through node `via`; panics unless it is committed.
pub async fn config_set(h: &Harness, via: NodeId, assignment: &str) {
    let config = h.cluster.config_path(via).display().to_string();
    let assignment = assignment.to_string();
    let out = tokio::task::spawn_blocking(move || {
        crate::common::bully(&["config", "set", &assignment, "--config", &config])
    })
    .await
    .expect("bully config set ran");
    let said = crate::common::text(&out);
    assert!(out.status.success(), "config set failed: {said}");
    assert!(said.contains("committed"), "{said}");
}

/// Runs the roll from `old_d` with the cut in `dir`, keepers on every node.
pub async fn roll_with_a_cut(dir: &std::path::Path, old_d: u64) -> Rolled {
    let spec = relay_spec(5, old_timing(old_d), Mode::Quorum, dir);
    let mut h = Harness::start(&spec)
        .await
        .expect("start 5 nodes behind the relay");
    let all = [1, 2, 3, 4, 5];
    wait_for(&h, &all, "node 5 leading", |c| c == [5]).await;
    let mut keepers = Keepers::start(&h, dir);
    let first_job = keepers.next_run(0).await;
    config_set(&h, 5, &format!("timing.suspect_after_ms={NEW_D}")).await;
    for id in [1, 2] {
        restart(&mut h, id, false);
    }
    wait_for(
        &h,
        &[1, 2, 5],
        "nodes 1 and 2 up again, node 5 leading",
        |c| c == [5],
    )
    .await;
    h.take(Step::Partition(vec![4, 5])).expect("cut {4, 5} off");
    restart(&mut h, 3, true);
    wait_for(&h, &[1, 2, 3], "a coordinator among nodes 1-3", |c| {
        c.len() == 1
    })
    .await;
    wait_for(&h, &[4, 5], "node 5's office ended", |c| c.is_empty()).await;
    let successor_job = keepers.next_run(first_job.token).await;
    eprintln!(
        "jobs: node {} (token {}), then node {} (token {})",
        first_job.node, first_job.token, successor_job.node, successor_job.token
    );
    h.take(Step::Heal).expect("heal");
    keepers.stop();
    let job_faults = violations_of_jobs(&keepers.runs());
    if !job_faults.is_empty() {
        eprintln!("{}", keepers.log_tail());
    }
    for id in all {
        let _ = h.cluster.stop(id, Duration::from_secs(5));
    }
    let history = h.cluster.history();
    let mut violations = check_no_overlap(&history, lease_bound_ms(&old_timing(old_d)));
    violations.extend(check_one_per_term(&history));
    if !violations.is_empty() {
        eprintln!("{}", bully::history::tail(&history, 60));
    }
    Rolled {
        violations,
        job_faults,
    }
}
