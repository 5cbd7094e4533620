//! `bully leader` through followers on real processes, both modes
//! (docs/design.md#asking-who-leads): in a healthy 3-node cluster 40 of 40 queries
//! through one follower, and 40 of 40 through two, name the coordinator (each follower
//! asks the coordinator, which confirms under its lease); after kill -9 of the
//! coordinator, no query started 1 s or more after the kill names it.

mod common;

use bully::protocol::{Mode, NodeId, Preempt, Timing};
use common::TestCluster;
use std::time::{Duration, Instant};

const AGREE: Duration = Duration::from_secs(20);

/// Runs `bully leader --json` against `through`; the node it names (none on exit 1)
/// and the whole output for failure messages.
fn leader_through(t: &TestCluster, through: &[NodeId]) -> (Option<NodeId>, String) {
    let c = &t.cluster;
    let endpoints: Vec<String> = through.iter().map(|&id| c.addr(id).to_string()).collect();
    let tls = c.client_tls();
    let out = std::process::Command::new(common::binary())
        .args(["leader", "--json", "--timeout", "2s", "--endpoints"])
        .arg(endpoints.join(","))
        .arg("--ca")
        .arg(&tls.ca)
        .arg("--cert")
        .arg(&tls.cert)
        .arg("--key")
        .arg(&tls.key)
        .output()
        .expect("bully leader ran");
    let text = common::text(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: Option<serde_json::Value> = serde_json::from_str(stdout.trim()).ok();
    let named = json.and_then(|v| v["coordinator"].as_u64());
    assert_eq!(
        out.status.success(),
        named.is_some(),
        "exit 0 exactly when a coordinator is named: {text}"
    );
    (named, text)
}

async fn through_followers_then_after_a_kill(mode: Mode) {
    let mut t = TestCluster::with_mode(3, Timing::default(), Preempt::Always, mode);
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    for through in [&[1][..], &[1, 2][..]] {
        for i in 0..40 {
            let (named, text) = leader_through(&t, through);
            assert_eq!(
                named,
                Some(3),
                "{mode}: query {i} through {through:?} did not name node 3: {text}"
            );
        }
        eprintln!("{mode}: 40 of 40 through {through:?} named node 3");
    }

    t.cluster.kill(3).expect("kill -9 node 3");
    let killed = Instant::now();
    let (mut after_a_second, mut last_named) = (0, None);
    // Bounded: at most 200 queries and 4 s.
    for _ in 0..200 {
        let started = killed.elapsed();
        if started > Duration::from_secs(4) {
            break;
        }
        let (named, text) = leader_through(&t, &[1, 2]);
        if named == Some(3) {
            last_named = Some(started);
            assert!(
                started < Duration::from_secs(1),
                "{mode}: a query started {started:?} after the kill named node 3: {text}"
            );
        }
        if started >= Duration::from_secs(1) {
            after_a_second += 1;
        }
    }
    eprintln!("{mode}: the dead coordinator was last named by a query started {last_named:?} after the kill");
    assert!(
        after_a_second >= 5,
        "{mode}: only {after_a_second} queries ran after the first second"
    );
    t.wait_for_leader(&[1, 2], 2, AGREE).await;
    let (named, text) = leader_through(&t, &[1]);
    assert_eq!(
        named,
        Some(2),
        "{mode}: the new coordinator through node 1: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_through_followers_quorum() {
    through_followers_then_after_a_kill(Mode::Quorum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_through_followers_classic() {
    through_followers_then_after_a_kill(Mode::Classic).await;
}
