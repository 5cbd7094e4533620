//! A forced recovery used while the old majority still runs (issue 38), on three real
//! nodes: node 1 is stopped and recovered alone (`bully recover --members 1 --force`)
//! while nodes 2 and 3, a majority of the old list, run on and lead; then node 1 is
//! started again. Shared by `tests/recover.rs` and its sabotage.

use crate::common::{bully, text, TestCluster};
use bully::api::Status;
use bully::chaos::plan::Step;
use bully::cluster::Cluster;
use bully::history::Entry;
use bully::protocol::{Mode, NodeId, Role, Timing};
use std::path::Path;
use std::time::{Duration, Instant};

/// Generous: each step takes a second or two; CI machines are slow.
pub const STEP: Duration = Duration::from_secs(30);

/// `bully recover --config <node id's config> ARGS`, off the async runtime.
pub async fn recover(cluster: &Cluster, id: NodeId, args: &[&str]) -> std::process::Output {
    let mut full = vec![
        "recover".to_string(),
        "--config".to_string(),
        cluster.config_path(id).display().to_string(),
    ];
    full.extend(args.iter().map(|a| a.to_string()));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = full.iter().map(String::as_str).collect();
        bully(&args)
    })
    .await
    .expect("the CLI ran")
}

/// What became of the old side once the recovered node ran.
pub struct Met {
    /// Nodes 2 and 3 both stood down as given up within the watch.
    pub given_up: bool,
}

/// Whether `status` is a node that stood down for good.
pub fn given_up(status: &Option<Status>) -> bool {
    status
        .as_ref()
        .is_some_and(|s| s.given_up && !s.eligible && s.role != Role::Coordinator)
}

/// Runs the scenario on the three nodes of `t` and watches the old side for up to
/// `watch` once node 1 leads.
pub async fn beside_the_old_majority(t: &mut TestCluster, watch: Duration) -> Met {
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, STEP).await;
    t.cluster.stop(1, STEP).unwrap();
    // Nodes 2 and 3 are a majority of the old list: they keep a coordinator.
    t.wait_for_leader(&[2, 3], 3, STEP).await;
    let forced = recover(&t.cluster, 1, &["--members", "1", "--force"]).await;
    assert!(forced.status.success(), "{}", text(&forced));
    t.cluster.start(1).unwrap();
    t.wait_for_leader(&[1], 1, STEP).await;
    let since = Instant::now();
    let given_up = loop {
        let views = t.views(&[2, 3]).await;
        if views.values().all(given_up) {
            break true;
        }
        if since.elapsed() > watch {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    Met { given_up }
}

/// Stops every node, then measures from the merged event logs how long node 1 and a
/// node of the old side were in office at once, and checks I6 and I7 within each side.
pub fn stop_and_measure(t: &mut TestCluster) -> u64 {
    for id in t.cluster.ids() {
        let _ = t.cluster.stop(id, STEP);
    }
    let history = t.cluster.history();
    let bound = bully::checker::lease_bound_ms(&Timing::default());
    for side in [&[1][..], &[2, 3][..]] {
        let own: Vec<_> = history
            .iter()
            .filter(|e| side.contains(&e.node))
            .cloned()
            .collect();
        let mut violations = bully::checker::check_no_overlap(&own, bound);
        violations.extend(bully::checker::check_one_per_term(&own));
        assert!(violations.is_empty(), "{side:?}: {violations:#?}");
    }
    overlap_after(&history, &[1], 0)
}

/// How long (ms) offices of the `survivors` and of the other nodes overlapped after
/// `since` (wall ms), from the merged event logs `history`.
pub fn overlap_after(history: &[Entry], survivors: &[NodeId], since: u64) -> u64 {
    let bound = bully::checker::lease_bound_ms(&Timing::default());
    let offices = bully::checker::offices(history, Some(bound));
    let mut both = 0;
    for x in offices.iter().filter(|o| survivors.contains(&o.node)) {
        for y in offices.iter().filter(|o| !survivors.contains(&o.node)) {
            let from = x.from_ms.max(y.from_ms).max(since);
            let until = x.until_ms.min(y.until_ms);
            both += until.saturating_sub(from);
        }
    }
    both
}

/// Every node's status (`None` where one does not answer in time), nodes 1 to 5.
async fn statuses(cluster: &Cluster) -> Vec<Option<Status>> {
    let mut out = Vec::new();
    for id in 1..=5 {
        out.push(cluster.status(id, Duration::from_millis(800)).await.ok());
    }
    out
}

/// The issue's own case, behind the relay: five nodes, node 5 leading; {1, 2} is cut
/// off, stopped, recovered with `--members 1,2 --force` on each and started: both sides
/// lead, the misuse. Then the cut heals. Returns whether {3, 4, 5} all stood down as
/// given up within `watch` of the heal, and how long both sides led at once after it.
pub async fn cut_off_then_healed(dir: &Path, watch: Duration) -> (bool, u64) {
    let mut h = crate::common::five_behind_relay(dir, Mode::Quorum).await;
    assert!(h.wait_for_leader(5, STEP).await, "node 5 leads first");
    h.execute(Step::Partition(vec![1, 2]));
    for id in [1, 2] {
        h.cluster.stop(id, STEP).expect("stop a survivor");
    }
    for id in [1, 2] {
        let forced = recover(&h.cluster, id, &["--members", "1,2", "--force"]).await;
        assert!(forced.status.success(), "{}", text(&forced));
    }
    for id in [1, 2] {
        h.execute(Step::Start(id));
    }
    let both_lead = |views: &[Option<Status>]| {
        let leads = |s: &Option<Status>| s.as_ref().is_some_and(|s| s.role == Role::Coordinator);
        leads(&views[1]) && leads(&views[4])
    };
    let started = Instant::now();
    while !both_lead(&statuses(&h.cluster).await) {
        assert!(
            started.elapsed() < STEP,
            "nodes 2 and 5 never both led\n{}",
            h.cluster.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let healed_at = bully::wall_clock::wall_ms();
    h.execute(Step::Heal);
    let since = Instant::now();
    let given_up = loop {
        let views = statuses(&h.cluster).await;
        if views[2..].iter().all(given_up) {
            break true;
        }
        if since.elapsed() > watch {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    h.stop_all();
    let history = h.cluster.history();
    (given_up, overlap_after(&history, &[1, 2], healed_at))
}
