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
    let mut args: Vec<std::ffi::OsString> = vec!["--endpoints".into(), endpoints.join(",").into()];
    for (flag, file) in [
        ("--ca", &tls.ca),
        ("--cert", &tls.cert),
        ("--key", &tls.key),
    ] {
        args.extend([flag.into(), file.into()]);
    }
    leader_asked(&args)
}

/// Runs `bully leader --json --config <node id's file>`: its node first, then its
/// peers (src/cli/leader.rs, `OWN_NODE_ALONE`).
fn leader_by_config(t: &TestCluster, id: NodeId) -> (Option<NodeId>, String) {
    leader_asked(&["--config".into(), t.cluster.config_path(id).into()])
}

/// `bully leader --json --timeout 2s ARGS`: the node it names (none on exit 1) and the
/// whole output for failure messages.
fn leader_asked(args: &[std::ffi::OsString]) -> (Option<NodeId>, String) {
    let out = std::process::Command::new(common::binary())
        .args(["leader", "--json", "--timeout", "2s"])
        .args(args)
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

/// `bully leader --config` of follower 1 names coordinator 3, from its own node's
/// answer or its peers'; then with node 1 down (its file still given) through the
/// peers, once node 1 was asked alone for a moment. Node 1 is started again.
async fn by_config_with_its_node_up_then_down(t: &mut TestCluster, mode: Mode) {
    for i in 0..10 {
        let (named, text) = leader_by_config(t, 1);
        assert_eq!(named, Some(3), "{mode}: --config query {i}: {text}");
    }
    t.cluster.kill(1).expect("kill -9 node 1");
    for i in 0..5 {
        let started = Instant::now();
        let (named, text) = leader_by_config(t, 1);
        assert_eq!(
            named,
            Some(3),
            "{mode}: --config query {i} with node 1 down: {text}"
        );
        eprintln!(
            "{mode}: --config of node 1, down, named node 3 in {:?}",
            started.elapsed()
        );
    }
    t.cluster.start(1).expect("start node 1");
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
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
    by_config_with_its_node_up_then_down(&mut t, mode).await;

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
