//! A forced recovery used while the old majority still runs (issue 38), on three real
//! nodes: node 1 is stopped and recovered alone (`bully recover --members 1 --force`)
//! while nodes 2 and 3, a majority of the old list, run on and lead; then node 1 is
//! started again. Shared by `tests/recover.rs` and its sabotage.

use crate::common::{bully, text, TestCluster};
use bully::api::Status;
use bully::protocol::{NodeId, Role, Timing};
use std::time::{Duration, Instant};

/// Generous: each step takes a second or two; CI machines are slow.
pub const STEP: Duration = Duration::from_secs(30);

/// `bully recover --config <node id's config> ARGS`, off the async runtime.
pub async fn recover(t: &TestCluster, id: NodeId, args: &[&str]) -> std::process::Output {
    let mut full = vec![
        "recover".to_string(),
        "--config".to_string(),
        t.cluster.config_path(id).display().to_string(),
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
    let forced = recover(t, 1, &["--members", "1", "--force"]).await;
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
    let offices = bully::checker::offices(&history, Some(bound));
    let mut both = 0;
    for x in offices.iter().filter(|o| o.node == 1) {
        for y in offices.iter().filter(|o| o.node != 1) {
            let (from, until) = (x.from_ms.max(y.from_ms), x.until_ms.min(y.until_ms));
            both += until.saturating_sub(from);
        }
    }
    both
}
