//! `bully step-down --to N` on real processes, both modes: four nodes, node 1 a
//! witness. Refused with the reason for an unknown node, the coordinator itself, a
//! witness, an unreachable node and an ineligible one; a switchover from node 4 to
//! node 2, asked through node 3's config (a follower passes it on), makes node 3 stand
//! aside, and when node 2 stops, the nodes held back are
//! released at once (well before their period ends) and node 4 leads again.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::checker;
use bully::protocol::{Mode, NodeId, Preempt, Timing};
use common::{binary, wait_until, TestCluster};
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

/// Runs `bully step-down --to N --for 60s` against node `at`; exit status and output.
fn step_down_to(t: &TestCluster, at: NodeId, to: NodeId) -> (bool, String) {
    let out = std::process::Command::new(binary())
        .arg("step-down")
        .arg("--config")
        .arg(t.cluster.config_path(at))
        .args(["--for", "60s", "--to", &to.to_string()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn refused(t: &TestCluster, at: NodeId, to: NodeId, why: &str) {
    let (ok, text) = step_down_to(t, at, to);
    eprint!("step-down --to {to} at node {at}: {text}");
    assert!(
        !ok && text.contains(why),
        "--to {to}: expected {why:?}, got {text}"
    );
}

async fn sees_down(t: &TestCluster, at: NodeId, down: NodeId) {
    wait_until("the coordinator to see the node down", AGREE, || async {
        let s = t
            .cluster
            .status(at, Duration::from_millis(800))
            .await
            .ok()?;
        s.peers
            .iter()
            .any(|p| p.id == down && !p.connected)
            .then_some(())
    })
    .await;
}

async fn switchover(mode: Mode) {
    let mut t = TestCluster::with_mode(4, Timing::default(), Preempt::Always, mode);
    for id in t.cluster.ids() {
        t.cluster
            .edit_config(id, |c| {
                c.witness = c.id == 1;
                for p in &mut c.peers {
                    p.witness = p.id == 1;
                }
            })
            .unwrap();
    }
    t.start_all();
    t.wait_for_leader(&[1, 2, 3, 4], 4, AGREE).await;

    primary::phase("refusals: unknown, itself, witness, unreachable");
    refused(&t, 4, 9, "node 9 is not a member");
    refused(&t, 4, 4, "node 4 is the coordinator already");
    refused(&t, 4, 1, "node 1 is a witness");
    t.cluster.stop(3, Duration::from_secs(5)).unwrap();
    sees_down(&t, 4, 3).await;
    refused(&t, 4, 3, "node 3 is unreachable");
    t.cluster.start(3).unwrap();
    t.wait_for_leader(&[1, 2, 3, 4], 4, AGREE).await;

    primary::phase("switchover 4 -> 2 through node 3's config: node 3 stands aside, node 2 leads");
    let (ok, text) = step_down_to(&t, 3, 2);
    assert!(ok && text.contains("node 2 took over"), "{text}");
    assert!(
        text.contains("coordinator 4 (asked through node 3)"),
        "{text}"
    );
    t.wait_for_leader(&[1, 2, 3, 4], 2, AGREE).await;
    for id in [3, 4] {
        let s = t.cluster.status(id, AGREE).await.unwrap();
        assert!(!s.eligible, "node {id} should be held back: {s:?}");
    }
    refused(&t, 2, 4, "node 4 is not eligible");

    primary::phase("node 2 stops: nodes 3 and 4 are released at once, node 4 leads");
    t.cluster.stop(2, Duration::from_secs(5)).unwrap();
    // Within AGREE (20 s), well before the 60 s the nodes were held back for.
    t.wait_for_leader(&[1, 3, 4], 4, AGREE).await;

    for id in [1, 3, 4] {
        t.cluster.stop(id, Duration::from_secs(5)).unwrap();
    }
    let history = t.cluster.history();
    let mut violations = checker::check_safety(&history);
    if mode == Mode::Quorum {
        violations.extend(checker::check_one_per_term(&history));
    }
    assert!(violations.is_empty(), "{violations:#?}\n{}", t.log_tail());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchover_quorum() {
    switchover(Mode::Quorum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchover_classic() {
    switchover(Mode::Classic).await;
}
