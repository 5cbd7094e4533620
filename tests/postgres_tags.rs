//! `[postgres.tags]` on real processes (issue 50): the cluster of
//! `tests/common/postgres_bully.rs` (three nodes each keeping a PostgreSQL 15 server,
//! keepers, HAProxy) with node 1 at `failover_priority = 3`, node 2 at 2 tagged
//! `noloadbalance`, node 3 at the default 1.
//!
//! - The primary's host is killed while the two standbys hold the same WAL (the test
//!   waits for it): the standby with the higher priority is promoted, where the ID
//!   order alone would pick the other whenever that one's ID is higher.
//! - `/replica` on the `noloadbalance` replica is 503, on the other 200, and a
//!   `tag_` filter passes only where the tag matches.
//! - Every member is tagged `clonefrom`: a member added after the failover (node 4,
//!   with an empty data dir) copies the standby left, not the primary (a tagged member
//!   too), then streams from the primary and holds a row written before it joined.
//!
//! - Node 3 tagged `nofailover` (the highest ID, which the ID order picks between
//!   servers alike): no primary names it in `synchronous_standby_names`, its node
//!   reads as ineligible, and when the primary's host is killed the other standby is
//!   promoted while node 3 follows it.
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

use bully::config::postgres::PostgresConfig;
use bully::postgres_rules::{names_standby, Synchronous};
use bully::protocol::NodeId;
use postgres_bully::{BullyPg, AGREE, IDS};
use postgres_cluster::wal_position;
use primary::{http_get, phase, wait_logged};

/// Node 1 first, then node 2; node 2 also stays out of the load balancers; every
/// member is a source of new members' clones.
fn tagged(id: NodeId, pg: &mut PostgresConfig) {
    pg.tags.failover_priority = match id {
        1 => 3,
        2 => 2,
        _ => 1,
    };
    pg.tags.noloadbalance = id == 2;
    // Every member: whichever standby is left after the failover is a clone source.
    pg.tags.clonefrom = true;
}

/// The HTTP status of `path` on node `id`.
async fn code(c: &BullyPg, id: NodeId, path: &str) -> u16 {
    http_get(c.http[&id], path).await.expect(path).0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failover_priority_picks_between_standbys_alike_and_noloadbalance_is_left_out() {
    if postgres_bully::skipped("[postgres.tags]") {
        return;
    }
    let mut c = BullyPg::start_tuned(tagged).await;
    let old = c.wait_all_streaming(&|_| String::new()).await;
    let standbys: Vec<NodeId> = IDS.into_iter().filter(|&id| id != old).collect();

    phase("noloadbalance and tag filters on the replica checks");
    for &id in &standbys {
        let want = if id == 2 { 503 } else { 200 };
        let what = format!("node {id}'s /replica answering {want}");
        wait_logged(&c.t, &what, AGREE, || async {
            (code(&c, id, "/replica").await == want).then_some(())
        })
        .await;
        let nosync = code(&c, id, "/replica?tag_nosync=true").await;
        assert_eq!(nosync, 503, "node {id}: no member is tagged nosync");
        // A standby that has just been repointed (after its clone from a clonefrom
        // standby) reads as not streaming for a look.
        let ready = format!("node {id}'s /readiness answering 200");
        wait_logged(&c.t, &ready, AGREE, || async {
            (code(&c, id, "/readiness").await == 200).then_some(())
        })
        .await;
    }

    phase("kill -9 of the primary's host, the standbys holding the same WAL");
    let expected = *standbys.iter().min().expect("two standbys");
    let by_id = *standbys.iter().max().expect("two standbys");
    wait_logged(
        &c.t,
        "both standbys at the primary's WAL position",
        AGREE,
        || async {
            let at = wal_position(c.local(old)).await?;
            let mut same = true;
            for &id in &standbys {
                same &= wal_position(c.local(id)).await? == at;
            }
            same.then_some(())
        },
    )
    .await;
    c.kill_host(old);
    let promoted = c.wait_primary(&standbys).await;
    eprintln!(
        "=== node {old} killed: node {promoted} promoted (priority {}; the ID order picks node {by_id})",
        if promoted == 1 { 3 } else { 2 }
    );
    assert_eq!(
        promoted, expected,
        "the standby with the higher failover_priority must be promoted between servers alike"
    );

    phase("clonefrom: node 4 added with no data copies the standby left");
    let source = *standbys
        .iter()
        .find(|&&id| id != promoted)
        .expect("the other standby");
    let row = tokio_postgres::connect(
        &format!(
            "host={} port={} user=postgres dbname=postgres",
            c.local(promoted).ip(),
            c.local(promoted).port()
        ),
        tokio_postgres::NoTls,
    )
    .await
    .map(|(client, conn)| {
        tokio::spawn(conn);
        client
    })
    .expect("the new primary takes logins");
    row.batch_execute("CREATE TABLE before_4 (n int); INSERT INTO before_4 VALUES (42)")
        .await
        .expect("a write on the new primary");
    wait_logged(
        &c.t,
        "the other standby streaming from the new primary",
        AGREE,
        || async {
            let port = c.cuts[&promoted].addr.port();
            postgres_cluster::role(c.local(source))
                .await
                .filter(|r| r.streams_from(port))
                .map(|_| ())
        },
    )
    .await;
    c.add_member(4, promoted).await;
    let cloned = format!(
        "copied (pg_basebackup); streams from {}",
        c.cuts[&source].addr
    );
    let log = c.t.cluster.log_path(4);
    eprintln!("=== waiting for \"{cloned}\" in {}", log.display());
    wait_logged(
        &c.t,
        "node 4's clone from the other standby",
        AGREE,
        || async {
            std::fs::read_to_string(&log)
                .ok()?
                .contains(&cloned)
                .then_some(())
        },
    )
    .await;
    wait_logged(
        &c.t,
        "node 4 streaming from the primary with the row",
        AGREE,
        || async {
            let port = c.cuts[&promoted].addr.port();
            let role = postgres_cluster::role(c.local(4)).await?;
            let client = postgres_cluster::connect(c.local(4), AGREE).await?;
            let n: i32 = client
                .query_one("SELECT n FROM before_4", &[])
                .await
                .ok()?
                .get(0);
            (role.streams_from(port) && n == 42).then_some(())
        },
    )
    .await;
    eprintln!("=== node 4 {cloned} (node {source}'s standby) and streams from node {promoted}");
}

/// Node 3 never leads.
fn node_3_nofailover(id: NodeId, pg: &mut PostgresConfig) {
    pg.tags.nofailover = id == 3;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nofailover_member_is_never_named_nor_promoted() {
    if postgres_bully::skipped("[postgres.tags] nofailover") {
        return;
    }
    let mut c = BullyPg::start_tuned(node_3_nofailover).await;
    let old = c.wait_all_streaming(&|_| String::new()).await;
    assert_ne!(old, 3, "node 3 is tagged nofailover: never the primary");
    let other = if old == 1 { 2 } else { 1 };

    phase(&format!(
        "the primary names node {other} and never node 3; node 3 reads as nofailover"
    ));
    let synchronous = postgres_bully::synchronous() != Synchronous::Off;
    wait_logged(&c.t, "the primary's names settled", AGREE, || async {
        let client = postgres_cluster::connect(c.local(old), AGREE).await?;
        let names: String = client
            .query_one("SHOW synchronous_standby_names", &[])
            .await
            .ok()?
            .get(0);
        assert!(!names_standby(&names, 3), "node 3 named: {names}");
        (names_standby(&names, other) == synchronous).then_some(())
    })
    .await;
    assert_eq!(code(&c, 3, "/replica?tag_nofailover=true").await, 200);
    assert_eq!(code(&c, other, "/replica?tag_nofailover=true").await, 503);
    let health = http_get(c.http[&3], "/health").await.expect("/health").1;
    let health: serde_json::Value = serde_json::from_str(&health).expect("JSON");
    assert_eq!(health["eligible"], false, "node 3's node: {health}");

    phase(&format!(
        "kill -9 of the primary's host: node {other} is promoted, node 3 follows it"
    ));
    c.kill_host(old);
    let promoted = c.wait_primary(&[other, 3]).await;
    assert_eq!(promoted, other, "node 3 is tagged nofailover");
    let port = c.cuts[&other].addr.port();
    wait_logged(
        &c.t,
        "node 3 streaming from the new primary",
        AGREE,
        || async {
            postgres_cluster::role(c.local(3))
                .await
                .filter(|r| r.streams_from(port))
                .map(|_| ())
        },
    )
    .await;
    eprintln!("=== node {old} killed: node {other} promoted; node 3 (nofailover) streams from it");
}
