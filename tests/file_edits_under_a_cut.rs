//! Issue 47's two breaks, as the tester ran them, on real processes behind the relay: a
//! 5-node quorum cluster is cut {1, 2} | {3, 4, 5}, and nodes 1 and 2 are restarted
//! with their files edited. Before, files whose `[[peers]]` named only each other let
//! {1, 2} count a majority of 2 and elect beside node 5 (11.1 s of two coordinators,
//! lasting past the heal), and files switched to `mode = "classic"` did the same
//! (8.6 s). Files never count now (docs/design.md#cluster-settings): the shrunk list is
//! not counted, so {1, 2} elect nobody, and a node whose file names another mode than
//! the stored one refuses to start. Both runs give 0 ms with two coordinators (I6) and
//! one office per term (I7), judged on the merged event logs.

mod common;
// Only `coordinators` is used here.
#[path = "common/keepers.rs"]
mod keepers;
#[allow(dead_code)]
#[path = "common/rolling_d.rs"]
mod rolling_d;

use bully::chaos::harness::Harness;
use bully::chaos::plan::Step;
use bully::checker::{check_no_overlap, check_one_per_term, lease_bound_ms};
use bully::config::NodeConfig;
use bully::protocol::{Mode, NodeId, Timing};
use std::time::{Duration, Instant};

/// Every wait for a condition: far above what the protocol needs, for CI's 2 cores.
const WAIT: Duration = Duration::from_secs(60);

/// How long the cut side is watched after its restarts: many times D = 300 ms, the
/// tester's 11.1 s included.
const WATCH: Duration = Duration::from_secs(12);

/// Waits until exactly one of `among` leads and returns it.
async fn one_leader(h: &Harness, among: &[NodeId], what: &str) -> NodeId {
    let started = Instant::now();
    loop {
        if let [one] = rolling_d::coordinators(h, among).await[..] {
            return one;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out waiting for {what}\n{}",
            h.cluster.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts 5 nodes, waits for a coordinator, cuts {1, 2} off (the coordinator is on the
/// other side: node 5 by the Bully rule, or one of {3, 4, 5} after a slow start), and
/// stops nodes 1 and 2 and applies `edit` to their files.
async fn cut_and_edit(dir: &std::path::Path, edit: fn(&mut NodeConfig)) -> Harness {
    let spec = common::relay_spec(5, Timing::default(), Mode::Quorum, dir);
    let mut h = Harness::start(&spec)
        .await
        .expect("start 5 nodes behind the relay");
    let mut leader = one_leader(&h, &[1, 2, 3, 4, 5], "a first coordinator").await;
    for _ in 0..5 {
        if leader >= 3 {
            break;
        }
        // The scenario needs the coordinator on the majority side.
        h.take(Step::Restart(leader)).expect("restart");
        leader = one_leader(&h, &[1, 2, 3, 4, 5], "a coordinator among 3-5").await;
    }
    assert!(leader >= 3, "node {leader} still leads after five restarts");
    h.take(Step::Partition(vec![1, 2])).expect("cut {1, 2} off");
    for id in [1, 2] {
        h.cluster.stop(id, Duration::from_secs(10)).expect("stop");
        h.cluster.edit_config(id, edit).expect("edit the file");
    }
    h
}

/// Stops every node and asserts I6 and I7 on the merged event logs.
fn stop_and_check(h: &mut Harness) {
    for id in 1..=5 {
        let _ = h.cluster.stop(id, Duration::from_secs(5));
    }
    let history = h.cluster.history();
    let mut violations = check_no_overlap(&history, lease_bound_ms(&Timing::default()));
    violations.extend(check_one_per_term(&history));
    if !violations.is_empty() {
        eprintln!("{}", bully::history::tail(&history, 80));
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

/// The first break: nodes 1 and 2 restarted under the cut with a lower D and files
/// listing only each other. They live by the stored list of five, so two of five is no
/// majority: neither leads while cut off, and after the heal there is one coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_files_shrunk_to_each_other_under_a_cut_never_give_two_coordinators() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut h = cut_and_edit(dir.path(), |c| {
        c.peers.retain(|p| p.id <= 2);
        c.timing.heartbeat_ms = 50;
        c.timing.suspect_after_ms = 200;
    })
    .await;
    for id in [1, 2] {
        h.cluster.start(id).expect("restart with the edited file");
    }
    let watched = Instant::now();
    while watched.elapsed() < WATCH {
        let cut_side = rolling_d::coordinators(&h, &[1, 2]).await;
        assert!(
            cut_side.is_empty(),
            "the cut pair elected {cut_side:?} from their files\n{}",
            h.cluster.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for id in [1, 2] {
        let status = h.cluster.status(id, Duration::from_secs(2)).await;
        let status = status.expect("the restarted node answers");
        let listed: Vec<NodeId> = status
            .members
            .as_ref()
            .map(|l| l.members.iter().map(|m| m.id).collect())
            .unwrap_or_default();
        assert_eq!(
            listed,
            [1, 2, 3, 4, 5],
            "node {id} lives by the stored list"
        );
        let differs = status.file_differs.unwrap_or_default();
        assert!(differs.contains("[1, 2]"), "node {id}: {differs:?}");
    }
    h.take(Step::Heal).expect("heal");
    one_leader(&h, &[1, 2, 3, 4, 5], "one coordinator after the heal").await;
    stop_and_check(&mut h);
}

/// The second break: nodes 1 and 2 restarted under the cut with `mode = "classic"`.
/// The stored mode rules: each refuses to start (exit 2, naming both modes and the
/// offline way to change it), the majority side keeps its coordinator, and nothing
/// leads twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_files_switched_to_classic_under_a_cut_never_give_two_coordinators() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut h = cut_and_edit(dir.path(), |c| c.mode = Mode::Classic).await;
    for id in [1, 2] {
        let config = h.cluster.config_path(id);
        let Some((code, said)) = common::refused_start(&config, WAIT).await else {
            panic!("node {id} ran with mode = classic beside a quorum cluster");
        };
        assert_eq!(code, Some(2), "node {id}: {said}");
        assert!(
            said.contains("runs the cluster in quorum mode") && said.contains("--change-mode"),
            "node {id}: {said}"
        );
    }
    one_leader(&h, &[3, 4, 5], "the majority side's coordinator").await;
    // Back with their files put right, they follow the one coordinator.
    for id in [1, 2] {
        h.cluster
            .edit_config(id, |c| c.mode = Mode::Quorum)
            .expect("put the file back");
        h.cluster.start(id).expect("restart");
    }
    h.take(Step::Heal).expect("heal");
    one_leader(&h, &[1, 2, 3, 4, 5], "one coordinator after the heal").await;
    stop_and_check(&mut h);
}
