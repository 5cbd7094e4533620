//! Data dirs bully did not make for the cluster, on real processes (issue 49, "a
//! cluster's identity"; src/sim/postgres/strangers.rs draws both):
//! - **A stranger's volume.** A standby's host comes back with another cluster's data
//!   dir mounted. Its manager leaves it exactly as it is (same system identifier, never
//!   cloned over, rewound or promoted), `bully status` says why, and the primary goes
//!   on taking writes. `bully pg reinit` by the operator clones the member afresh,
//!   keeping the stranger aside.
//! - **A raced initdb.** A standby's data dir is one its own node's `initdb` made and
//!   never promoted (`pg_made` in the node's data dir names it: what two coordinators'
//!   initdb in quick succession leave, the CI run of tests/postgres_unstreamable.rs in
//!   stop 52). Its manager replaces it by a clone without the operator, kept aside all
//!   the same. The old rule left it for the operator: the member never streamed.
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
use postgres_bully::{BullyPg, AGREE, IDS};
use postgres_cluster::{connect, system_id};
use primary::phase;
use std::time::{Duration, Instant};

/// How long the stranger is watched: many manager looks (every 100 ms at the tests'
/// timing), any of which would have replaced it under a rule that did.
const WATCH: Duration = Duration::from_secs(5);

/// Node `id`'s host goes down, comes back with a fresh `initdb` of another cluster in
/// place of its server's data dir (the old one removed), and `made` decides whether its
/// node notes that data as its own initdb's (`pg_made`). Returns the stranger's system
/// identifier.
fn replace_volume(c: &mut BullyPg, id: NodeId, made: bool) -> u64 {
    c.kill_host(id);
    let data_dir = c.pg.data_dir(id);
    std::fs::remove_dir_all(&data_dir).unwrap();
    let system = c.pg.initdb_stranger(&data_dir);
    if made {
        let note = c.t.cluster.data_dir(id).join("pg_made");
        std::fs::write(note, format!("{system}\n")).unwrap();
    }
    c.restart_host(id);
    system
}

/// One row written through HAProxy's front for the primary, whichever server that is
/// now (a lease lost to a busy machine may move it), retried until it commits within
/// [`AGREE`]; panics with the logs otherwise.
async fn write(c: &BullyPg, value: i32) {
    let statement = format!(
        "CREATE TABLE IF NOT EXISTS strangers (v int); INSERT INTO strangers VALUES ({value})"
    );
    let deadline = Instant::now() + AGREE;
    loop {
        let error = match connect(c.front, Duration::from_secs(5)).await {
            Some(client) => match client.batch_execute(&statement).await {
                Ok(()) => return,
                Err(e) => e.to_string(),
            },
            None => "no connection through HAProxy".to_string(),
        };
        assert!(
            Instant::now() < deadline,
            "the cluster takes no write within {AGREE:?}: {error}\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_volume_is_left_alone_and_a_raced_initdb_is_replaced() {
    if postgres_bully::skipped("data dirs of another cluster") {
        return;
    }
    let mut c = BullyPg::start().await;
    let primary = c.wait_primary(&IDS).await;
    let standby = IDS.into_iter().find(|&id| id != primary).unwrap();
    let data_dir = c.pg.data_dir(standby);
    let cluster_system = system_id(&c.pg.data_dir(primary)).expect("the primary's system");

    phase("a stranger's volume on a standby's host: left as it is");
    let stranger = replace_volume(&mut c, standby, false);
    assert_ne!(stranger, cluster_system);
    let what = format!("node {standby}'s status naming another cluster");
    common::wait_until(&what, Duration::from_secs(40), || async {
        let note = primary::status(&c.t, standby).await?.postgres?.note;
        note.contains("another cluster").then_some(())
    })
    .await;
    let until = Instant::now() + WATCH;
    let mut value = 0;
    while Instant::now() < until {
        assert_eq!(
            system_id(&data_dir),
            Some(stranger),
            "node {standby}'s stranger was replaced by the decisions\n{}",
            c.logs()
        );
        assert!(
            common::set_aside(&data_dir).is_none(),
            "node {standby}'s stranger was moved aside by the decisions\n{}",
            c.logs()
        );
        value += 1;
        write(&c, value).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    phase("bully pg reinit by the operator: cloned afresh, the stranger kept aside");
    let others: Vec<NodeId> = IDS.into_iter().filter(|&id| id != standby).collect();
    let primary = c.wait_ready(&others).await;
    let config = c.t.cluster.config_path(primary);
    let config = config.to_str().unwrap().to_string();
    let node = standby.to_string();
    let out = common::bully(&["pg", "reinit", &node, "--config", &config]);
    assert!(out.status.success(), "{}", common::text(&out));
    c.wait_rejoined(standby, primary).await;
    let aside = common::set_aside(&data_dir).expect("the stranger kept aside");
    assert_eq!(system_id(&aside), Some(stranger));
    assert_eq!(system_id(&data_dir), Some(cluster_system));
    std::fs::remove_dir_all(&aside).unwrap();

    phase("a data dir the node's own initdb made, never promoted: replaced by a clone");
    let primary = c.wait_primary(&IDS).await;
    assert_ne!(primary, standby, "the member to replace is a standby");
    let made = replace_volume(&mut c, standby, true);
    c.wait_rejoined(standby, primary).await;
    assert_eq!(system_id(&data_dir), Some(cluster_system));
    let aside = common::set_aside(&data_dir).expect("the raced initdb kept aside");
    assert_eq!(system_id(&aside), Some(made));
    assert!(
        !c.t.cluster.data_dir(standby).join("pg_made").exists(),
        "the note of the node's own initdb is dropped with the clone"
    );
    write(&c, value + 1).await;
}
