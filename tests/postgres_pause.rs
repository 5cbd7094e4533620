//! The pause on real processes (issue 49, "pause means pause"): while the cluster is
//! paused (`bully pause`) the manager starts, stops and promotes nothing. A standby's
//! server and then the primary's, stopped by hand, stay stopped, no standby is promoted
//! in the primary's place, and each node's status says it is paused; after `bully
//! resume` the cluster has a primary again with every member streaming.
//!
//! Skips, saying why, without PostgreSQL 15 (or, as root, without a `postgres` user) or
//! HAProxy.

mod common;
#[path = "common/postgres_bully.rs"]
mod postgres_bully;
#[path = "common/postgres_cluster.rs"]
mod postgres_cluster;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/redis_servers.rs"]
mod redis_servers;
#[path = "common/resp.rs"]
mod resp;
#[path = "common/tcp_cut.rs"]
mod tcp_cut;

use bully::protocol::NodeId;
use postgres_bully::{BullyPg, IDS};
use postgres_cluster::role;
use primary::phase;
use std::time::{Duration, Instant};

/// How long the stopped servers are watched: many manager looks (every 100 ms at the
/// tests' timing), any of which would have started them again before the fix (the
/// tester saw 0.15 s).
const WATCH: Duration = Duration::from_secs(5);

/// `bully VERB --config` of node `via`; panics with its output unless it succeeds.
fn cli(c: &BullyPg, verb: &str, via: NodeId) {
    let config = c.t.cluster.config_path(via);
    let out = common::bully(&[verb, "--config", config.to_str().unwrap()]);
    assert!(out.status.success(), "bully {verb}: {}", common::text(&out));
}

/// Every look of [`WATCH`]: the servers in `stopped` have no postmaster, and no server
/// but `primary`'s takes writes.
async fn stay_stopped(c: &BullyPg, stopped: &[NodeId], primary: Option<NodeId>) {
    let until = Instant::now() + WATCH;
    while Instant::now() < until {
        for &id in stopped {
            assert!(
                c.pg.pid(id).is_none(),
                "node {id}'s server, stopped by hand while paused, runs again\n{}",
                c.logs()
            );
        }
        for id in IDS.into_iter().filter(|&id| Some(id) != primary) {
            let writable = role(c.local(id)).await.is_some_and(|r| r.writable());
            assert!(
                !writable,
                "node {id}'s server was promoted while paused\n{}",
                c.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_stopped_by_hand_stay_stopped_while_paused() {
    if postgres_bully::skipped("the pause of the PostgreSQL manager") {
        return;
    }
    let c = BullyPg::start().await;
    let leader = c.wait_primary(&IDS).await;
    let standby = IDS.into_iter().find(|&id| id != leader).unwrap();

    phase("bully pause; a standby's server stopped by hand");
    cli(&c, "pause", standby);
    c.pg.stop_by_hand(standby);
    stay_stopped(&c, &[standby], Some(leader)).await;
    let note = primary::status(&c.t, standby)
        .await
        .and_then(|s| s.postgres)
        .map(|p| p.note)
        .unwrap_or_default();
    assert!(note.contains("paused"), "node {standby}'s note: {note}");

    phase("the primary's server stopped by hand too: no one is promoted");
    c.pg.stop_by_hand(leader);
    stay_stopped(&c, &[standby, leader], None).await;

    phase("bully resume: a primary again, every member streaming");
    cli(&c, "resume", standby);
    c.wait_primary(&IDS).await;
}

/// A standby's whole host killed (-9: node, keeper, server) while the cluster is
/// paused, and booted again: its new node must learn of the pause before its manager
/// acts, so its server stays stopped; after `bully resume` it streams again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_while_paused_stays_stopped_after_its_reboot() {
    if postgres_bully::skipped("a host killed while the manager is paused") {
        return;
    }
    let mut c = BullyPg::start().await;
    let leader = c.wait_primary(&IDS).await;
    let standby = IDS.into_iter().find(|&id| id != leader).unwrap();

    phase("bully pause; a standby's host killed and booted again");
    cli(&c, "pause", leader);
    c.kill_host(standby);
    c.restart_host(standby);
    let what = format!("node {standby} back, saying it is paused");
    common::wait_until(&what, Duration::from_secs(40), || async {
        let note = primary::status(&c.t, standby).await?.postgres?.note;
        note.contains("paused").then_some(())
    })
    .await;
    stay_stopped(&c, &[standby], Some(leader)).await;

    phase("bully resume: the standby streams again");
    cli(&c, "resume", leader);
    c.wait_rejoined(standby, leader).await;
}
