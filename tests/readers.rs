//! What readers are told on real processes (issue 26):
//! - `bully leader` never names a SIGSTOPped or killed coordinator with exit 0 once its
//!   lease may have run out (the checker's bound after the fault), and names its
//!   successor once there is one;
//! - `bully local` shows a killed node as down and a paused one as paused, never with
//!   its last view, and counts only the live nodes.

#[path = "common/browser.rs"]
mod browser;
mod common;
#[path = "common/session.rs"]
mod session;

use bully::protocol::{Epoch, NodeId, Preempt, Timing};
use common::{binary, TestCluster};
use session::Session;
use std::process::Command;
use std::time::{Duration, Instant};

/// Generous: the protocol converges in well under a second; CI machines are slow.
const AGREE: Duration = Duration::from_secs(30);

/// Slow enough that several `bully leader` runs fit between the lease's end and the
/// followers' own suspicion (D after the last heartbeat).
const SLOW: Timing = Timing {
    heartbeat_ms: 500,
    suspect_after_ms: 2500,
    answer_timeout_ms: 100,
    coordinator_timeout_ms: 300,
    preempt_delay_ms: 0,
};

/// One `bully leader --json` run: when it started, its exit code and its answer.
#[derive(Debug)]
struct Asked {
    at: Instant,
    code: Option<i32>,
    answer: serde_json::Value,
}

fn ask_leader(t: &TestCluster, via: NodeId) -> Asked {
    let config = t.cluster.config_path(via);
    let at = Instant::now();
    let out = Command::new(binary())
        .args(["leader", "--json", "--timeout", "2s", "--config"])
        .arg(&config)
        .output()
        .expect("run bully leader");
    let answer = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    Asked {
        at,
        code: out.status.code(),
        answer,
    }
}

/// Asks `bully leader` (through node `via`) over and over after `fault_at` until it
/// names `successor`; panics if any run that started after the old coordinator's lease
/// bound named `old` with exit 0.
fn ask_until_successor(
    t: &TestCluster,
    via: NodeId,
    old: NodeId,
    successor: NodeId,
    fault_at: Instant,
) {
    let lease_over = fault_at + Duration::from_millis(bully::checker::lease_bound_ms(&SLOW));
    let mut runs = Vec::new();
    loop {
        let asked = ask_leader(t, via);
        let named = asked.answer["coordinator"].as_u64();
        eprintln!(
            "+{:>5} ms: exit {:?} {}",
            asked.at.duration_since(fault_at).as_millis(),
            asked.code,
            asked.answer
        );
        assert!(
            !(asked.at >= lease_over && asked.code == Some(0) && named == Some(old)),
            "named node {old} with exit 0 after its lease: {asked:?}\n{}",
            t.log_tail()
        );
        if asked.code == Some(0) {
            // Exit 0 always names the coordinator with its epoch and token.
            let epoch: Epoch = serde_json::from_value(asked.answer["epoch"].clone()).unwrap();
            assert_eq!(asked.answer["token"], epoch.token(), "{asked:?}");
        }
        let done = asked.code == Some(0) && named == Some(successor);
        runs.push(asked);
        if done {
            return;
        }
        assert!(
            fault_at.elapsed() < AGREE,
            "node {successor} never named: {runs:#?}\n{}",
            t.log_tail()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_never_names_a_paused_or_killed_coordinator_after_its_lease() {
    let mut t = TestCluster::new(3, SLOW, Preempt::Always);
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    eprintln!("=== the coordinator's own answer counts");
    let asked = ask_leader(&t, 1);
    assert_eq!(asked.code, Some(0), "{asked:?}");
    assert_eq!(asked.answer["coordinator"], 3, "{asked:?}");
    assert_eq!(asked.answer["source"], "coordinator", "{asked:?}");

    eprintln!("=== SIGSTOP the coordinator");
    t.cluster.pause(3).unwrap();
    let paused_at = Instant::now();
    ask_until_successor(&t, 1, 3, 2, paused_at);

    eprintln!("=== SIGCONT; it leads again; then kill -9");
    t.cluster.resume(3).unwrap();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    t.cluster.kill(3).unwrap();
    let killed_at = Instant::now();
    ask_until_successor(&t, 1, 3, 2, killed_at);
}

#[test]
fn local_shows_killed_and_paused_nodes_and_counts_only_live_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let within = Duration::from_secs(60);
    let mut local = Session::local_three(&binary(), dir.path(), within);

    local.type_line("kill 3");
    local.lines_until("coordinator 2 (2 of 2 reachable agree, 1 down)", within);
    local.type_line("status");
    let shown = local.lines_until("node 3 ", within);
    let node3 = shown.last().unwrap();
    assert!(node3.contains("down"), "{shown:#?}");
    assert!(!node3.contains("coordinator"), "{shown:#?}");

    local.type_line("pause 1");
    local.type_line("status");
    local.lines_until("node 1   paused (SIGSTOP)", within);
    let shown = local.lines_until("reachable", within);
    assert!(
        shown
            .last()
            .unwrap()
            .contains("reachable, 1 down, 1 paused)")
            || shown
                .last()
                .unwrap()
                .contains("reachable agree, 1 down, 1 paused)"),
        "only node 2 is live: {shown:#?}"
    );
    assert!(
        shown.last().unwrap().contains("1 of 1 reachable")
            || shown.last().unwrap().contains("(1 reachable"),
        "{shown:#?}"
    );

    local.type_line("start 3");
    local.type_line("resume 1");
    local.lines_until("coordinator 3 (3 of 3 reachable agree)", within);
    local.type_line("quit");
    local.lines_until("stopped every node", within);
}
