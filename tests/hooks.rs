//! Hooks on real processes: each node's hooks append a line with their `BULLY_*`
//! environment to a file; the lines must come in the order of the changes, carry the
//! durable epochs, and `on_elected` must run again when a node re-declares after a
//! split (SIGSTOP/SIGCONT). A hook past its timeout is killed with its children.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::config::HooksConfig;
use bully::history::Record;
use bully::protocol::{Epoch, NodeId, Preempt, Role, Timing};
use common::{wait_until, TestCluster};
use primary::{events, lines, metrics, phase, quoted};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

/// The fencing token hooks get as `BULLY_EPOCH` for `term` led by `leader`.
fn token(term: u64, leader: NodeId) -> String {
    Epoch { term, leader }.token().to_string()
}

fn hook_file(t: &TestCluster, id: NodeId) -> PathBuf {
    t.dir.path().join(format!("hooks-{id}.log"))
}

/// One hook line parsed into its `key=value` fields (`hook`, `role`, `epoch`, ...).
fn parse(line: &str) -> BTreeMap<String, String> {
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn recorded(t: &TestCluster, id: NodeId) -> Vec<BTreeMap<String, String>> {
    lines(&hook_file(t, id)).iter().map(|l| parse(l)).collect()
}

/// The hook names and coordinators recorded by a node, e.g. `on_elected:3`.
fn summary(t: &TestCluster, id: NodeId) -> Vec<String> {
    recorded(t, id)
        .iter()
        .map(|h| format!("{}:{}", h["hook"], h["coord"]))
        .collect()
}

fn logging_hooks(t: &TestCluster, id: NodeId) -> HooksConfig {
    let line = format!(
        "echo \"hook=$BULLY_HOOK node=$BULLY_NODE_ID role=$BULLY_ROLE epoch=$BULLY_EPOCH \
         leader=$BULLY_EPOCH_LEADER coord=$BULLY_COORDINATOR prev=$BULLY_PREVIOUS_COORDINATOR \
         prev_epoch=$BULLY_PREVIOUS_EPOCH at=$(date +%s%3N)\" >> {}",
        quoted(&hook_file(t, id))
    );
    HooksConfig {
        on_elected: Some(line.clone()),
        on_demoted: Some(line.clone()),
        on_change: Some(line),
        timeout_ms: 5000,
        ..HooksConfig::default()
    }
}

/// Three nodes whose hooks all log to their hook file.
fn three_nodes_with_logging_hooks() -> TestCluster {
    let t = TestCluster::new(3, Timing::default(), Preempt::Always);
    for id in t.cluster.ids() {
        let hooks = logging_hooks(&t, id);
        t.cluster.edit_config(id, |c| c.hooks = hooks).unwrap();
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_in_order_with_the_epoch_and_again_after_a_split() {
    let mut t = three_nodes_with_logging_hooks();

    phase("start: node 3 runs on_elected then on_change; the others on_change");
    t.start_all();
    let first = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    wait_until("node 3's first hooks", AGREE, || async {
        let s = summary(&t, 3);
        (s == ["on_elected:3", "on_change:3"]).then_some(())
    })
    .await;
    let elected = &recorded(&t, 3)[0];
    assert_eq!(elected["role"], "coordinator");
    assert_eq!(elected["epoch"], token(first, 3));
    assert_eq!(elected["leader"], "3");
    assert_eq!(elected["node"], "3");
    assert_eq!(elected["prev"], "");
    for id in [1, 2] {
        wait_until("a follower's on_change", AGREE, || async {
            (summary(&t, id) == ["on_change:3"]).then_some(())
        })
        .await;
        assert_eq!(recorded(&t, id)[0]["role"], "follower");
    }

    phase("SIGSTOP node 3: node 2 is elected (on_elected, on_change) with node 3 as previous");
    t.cluster.pause(3).unwrap();
    let second = t.wait_for_leader(&[1, 2], 2, AGREE).await;
    wait_until("node 2's election hooks", AGREE, || async {
        (summary(&t, 2) == ["on_change:3", "on_elected:2", "on_change:2"]).then_some(())
    })
    .await;
    let h2 = recorded(&t, 2);
    assert_eq!(h2[1]["epoch"], token(second, 2));
    assert_eq!(h2[1]["prev"], "3");
    assert_eq!(h2[1]["prev_epoch"], token(first, 3));

    phase("SIGCONT node 3: it re-declares at a new epoch and runs on_elected again");
    t.cluster.resume(3).unwrap();
    let third = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    assert!(third > second && second > first);
    wait_until("node 3's second on_elected", AGREE, || async {
        let h = recorded(&t, 3);
        h.iter()
            .any(|l| l["hook"] == "on_elected" && l["epoch"] == token(third, 3))
            .then_some(())
    })
    .await;
    wait_until("node 2's demotion hooks", AGREE, || async {
        let s = summary(&t, 2);
        (s.len() >= 5).then_some(s)
    })
    .await;
    let s2 = summary(&t, 2);
    // Demoted either straight to following node 3 or via a candidate spell.
    assert!(
        s2[3].starts_with("on_demoted:"),
        "node 2 is demoted before it follows: {s2:?}"
    );
    assert_eq!(s2.last().unwrap(), "on_change:3", "{s2:?}");

    phase("every node's on_change epochs strictly increase (durable fencing tokens)");
    for id in t.cluster.ids() {
        let epochs: Vec<u64> = recorded(&t, id)
            .iter()
            .filter(|h| h["hook"] == "on_change")
            .map(|h| h["epoch"].parse().unwrap())
            .collect();
        assert!(
            epochs.windows(2).all(|w| w[0] < w[1]),
            "node {id}: {epochs:?}"
        );
        // Each hook's epoch was persisted before the hook ran.
        let persisted: Vec<u64> = events(&t, id)
            .iter()
            .filter_map(|e| match &e.record {
                Record::Persisted(c) => c.accepted.map(|a| a.token()),
                _ => None,
            })
            .collect();
        for epoch in &epochs {
            assert!(
                persisted.contains(epoch),
                "node {id}: epoch {epoch} not persisted"
            );
        }
    }

    phase("hook latency: from the published view to the hook's own clock");
    let view_at = events(&t, 3)
        .iter()
        .find(|e| matches!(&e.record, Record::View(v) if v.role == Role::Coordinator))
        .map(|e| e.at_ms)
        .unwrap();
    let ran_at: u64 = recorded(&t, 3)[0]["at"].parse().unwrap();
    eprintln!(
        "on_elected started {} ms after the view was published",
        ran_at.saturating_sub(view_at)
    );
    let m = metrics(&t, 3).await.unwrap();
    assert_eq!(m.hook_failures, 0, "{m:?}");
    assert!(m.hook_runs >= 3, "{m:?}");
}

/// Whether process `pid` still exists (zombies count as gone once reaped by init).
fn alive(pid: u32) -> bool {
    bully::signals::exists(pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_past_its_timeout_is_killed_with_its_children_and_counted() {
    let mut t = TestCluster::new(1, Timing::default(), Preempt::Always);
    let dir = t.dir.path().to_path_buf();
    let pids = dir.join("hook-pids");
    let after = dir.join("after");
    let hooks = HooksConfig {
        // A shell that starts a child and waits: both must die at the timeout.
        on_elected: Some(format!(
            "sleep 30 & echo \"$$ $!\" > {}; wait",
            quoted(&pids)
        )),
        on_demoted: None,
        on_change: Some(format!("echo ran >> {}", quoted(&after))),
        timeout_ms: 300,
        ..HooksConfig::default()
    };
    t.cluster.edit_config(1, |c| c.hooks = hooks).unwrap();

    phase("a one-node cluster elects itself; on_elected hangs");
    t.start_all();
    t.wait_for_leader(&[1], 1, AGREE).await;
    let started: Vec<u32> = wait_until("the hook's PIDs", AGREE, || async {
        let text = std::fs::read_to_string(&pids).ok()?;
        let pids: Vec<u32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        (pids.len() == 2).then_some(pids)
    })
    .await;

    phase("after the timeout the shell and its child are gone and on_change ran");
    wait_until("on_change after the killed hook", AGREE, || async {
        (lines(&after) == ["ran"]).then_some(())
    })
    .await;
    wait_until("the hook's processes to be gone", AGREE, || async {
        started.iter().all(|&pid| !alive(pid)).then_some(())
    })
    .await;
    let m = wait_until("both hook runs counted", AGREE, || async {
        metrics(&t, 1).await.filter(|m| m.hook_runs == 2)
    })
    .await;
    assert_eq!(m.hook_failures, 1, "{m:?}");
    let log = std::fs::read_to_string(t.cluster.log_path(1)).unwrap();
    assert!(
        log.contains("timed out"),
        "the node logs the killed hook:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_stopped_cleanly_runs_on_demoted_and_resigns() {
    let mut t = three_nodes_with_logging_hooks();
    phase("start: node 3 leads");
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    wait_until("node 3's on_elected", AGREE, || async {
        summary(&t, 3)
            .contains(&"on_elected:3".to_string())
            .then_some(())
    })
    .await;

    phase("SIGTERM node 3: on_demoted runs before it exits; 1 and 2 elect 2 at once");
    let stopped_at = std::time::Instant::now();
    t.cluster.stop(3, Duration::from_secs(10)).unwrap();
    let h3 = recorded(&t, 3);
    let last = h3.last().expect("node 3 ran hooks");
    assert_eq!(last["hook"], "on_demoted", "{h3:?}");
    assert_eq!(last["role"], "candidate", "{h3:?}");
    t.wait_for_leader(&[1, 2], 2, AGREE).await;
    eprintln!(
        "node 2 led {} ms after node 3 was asked to stop (no suspicion timeout: it resigned)",
        stopped_at.elapsed().as_millis()
    );
}
