//! Shared by `tests/pause.rs` and `tests/pause_sabotage.rs`: the `bully pause` and
//! `bully resume` calls, and the watch of a paused cluster whose holder died.
#![allow(dead_code)]

use super::common::{bully, wait_until, TestCluster};
use super::primary::{events, status};
use bully::history::Record;
use bully::protocol::{Fact, NodeId};
use std::time::Duration;

/// How long a paused cluster without a coordinator is watched for an election: ten
/// suspicion timeouts, time for several elections had the pause not held them back.
pub const WATCH_QUIET: Duration = Duration::from_secs(3);

/// `bully COMMAND --config node1.toml` (`pause`, `resume`, `status`).
pub fn cli(t: &TestCluster, command: &str) -> std::process::Output {
    let config = t.cluster.config_path(1);
    bully(&[command, "--config", config.to_str().unwrap()])
}

/// Kills `holder`, waits until every node in `live` sees no coordinator or a new one
/// (bounded), then watches for [`WATCH_QUIET`]: the declarations made from the kill on.
pub async fn declared_after_killing(
    t: &mut TestCluster,
    holder: NodeId,
    live: &[NodeId],
) -> Vec<(NodeId, u64)> {
    let killed_at = bully::wall_clock::wall_ms();
    t.cluster.kill(holder).unwrap();
    wait_until(
        "the live nodes stop following the dead holder",
        Duration::from_secs(20),
        || async {
            for &id in live {
                if status(t, id).await?.coordinator() == Some(holder) {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    tokio::time::sleep(WATCH_QUIET).await; // a window that must stay without a leader
    declared_since(t, killed_at)
}

/// Every declaration logged at or after `since_ms` (wall clock): (node, term), sorted.
pub fn declared_since(t: &TestCluster, since_ms: u64) -> Vec<(NodeId, u64)> {
    let mut declared: Vec<(NodeId, u64)> = t
        .cluster
        .ids()
        .into_iter()
        .flat_map(|id| events(t, id))
        .filter(|e| e.at_ms >= since_ms)
        .filter_map(|e| match e.record {
            Record::Fact(Fact::Declared { epoch }) => Some((e.node, epoch.term)),
            _ => None,
        })
        .collect();
    declared.sort_unstable();
    declared
}
