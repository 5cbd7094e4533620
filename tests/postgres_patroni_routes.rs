//! Patroni's consumers against bully (issue 50), on real processes: the cluster of
//! `tests/common/postgres_bully.rs` (three nodes each keeping a PostgreSQL 15 server,
//! keepers, HAProxy).
//!
//! - Patroni's documented HAProxy section (examples/postgres-primary/patroni-haproxy/
//!   haproxy.cfg: `option httpchk`, OPTIONS /, Patroni's timings) sends every client to
//!   the primary: each of several sessions through it is on a server out of recovery,
//!   carrying the coordinator's office.
//! - `/config` on every member: the cluster settings in Patroni's shape (`ttl`,
//!   `synchronous_mode: quorum`, `postgresql.parameters`).
//! - `/patroni` read the way Patroni's tools read it: on every member 200 with the
//!   server's `role` and `state`, `patroni.name` the node, `cluster_unlocked` false, the
//!   primary's `xlog.location` and each replica's `replication_state: streaming` and
//!   `quorum_standby` (every standby is named under the default `quorum`).
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

use bully::ports::free_tcp_addrs;
use postgres_bully::{BullyPg, AGREE, IDS};
use postgres_cluster::{example_dir, role};
use primary::{http_get, phase};
use redis_servers::Haproxy;

/// Sessions opened through Patroni's HAProxy section, each checked on its own: with a
/// standby still in HAProxy's round robin, all of them reaching the primary by chance
/// has a chance of (1/3)^15.
const SESSIONS: usize = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patronis_haproxy_section_and_status_route_work_unchanged() {
    if postgres_bully::skipped("Patroni's HAProxy section and /patroni") {
        return;
    }
    let c = BullyPg::start().await;
    let leader = c.wait_primary(&IDS).await;

    phase("Patroni's documented HAProxy section: OPTIONS /, inter 3s fall 3 rise 2");
    let front = free_tcp_addrs(1).unwrap()[0];
    let section = example_dir().join("patroni-haproxy");
    let dir = c.t.dir.path().join("patroni-haproxy");
    std::fs::create_dir(&dir).unwrap();
    let _haproxy = Haproxy::start_from(&section, &dir, front, &c.pg.addrs, &c.http);
    // HAProxy starts with every server up; Patroni's fall 3 at inter 3s takes the
    // standbys out after about 9 s. Then every session reaches the primary.
    let started = std::time::Instant::now();
    let what = format!("{SESSIONS} sessions in a row through it on the primary");
    let office = primary::wait_logged(&c.t, &what, AGREE, || async {
        let mut office = None;
        for _ in 0..SESSIONS {
            let r = role(front).await?;
            let primary = !r.standby && !r.read_only && office.map_or(true, |o| o == r.epoch);
            if !primary {
                return None;
            }
            office = Some(r.epoch);
        }
        office
    })
    .await;
    eprintln!(
        "=== settled {:.1} s after HAProxy started (its first checks)",
        started.elapsed().as_secs_f64()
    );
    for session in 0..SESSIONS {
        let r = role(front)
            .await
            .expect("a session through Patroni's section");
        assert!(
            !r.standby && !r.read_only && r.epoch == office,
            "session {session} reached {r:?}, not the primary of office {office}"
        );
    }
    eprintln!("=== {SESSIONS} sessions through Patroni's section: the primary (office {office})");

    phase("/config on any member: the cluster settings in Patroni's shape");
    for id in IDS {
        let (code, body) = http_get(c.http[&id], "/config").await.expect("/config");
        assert_eq!(code, 200, "node {id}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(json["synchronous_mode"], "quorum", "node {id}: {json}");
        assert!(json["ttl"].as_f64().is_some_and(|d| d > 0.0), "{json}");
        assert!(json["postgresql"]["parameters"].is_object(), "{json}");
    }

    phase("/patroni on every member, read as Patroni's tools read it");
    for id in IDS {
        let (code, body) = http_get(c.http[&id], "/patroni").await.expect("/patroni");
        assert_eq!(code, 200, "node {id}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(json["patroni"]["name"], id.to_string(), "{json}");
        assert_eq!(json["state"], "running", "node {id}: {json}");
        assert_eq!(json["cluster_unlocked"], false, "node {id}: {json}");
        if id == leader {
            assert_eq!(json["role"], "primary", "{json}");
            assert!(json["xlog"]["location"].as_u64().is_some(), "{json}");
        } else {
            assert_eq!(json["role"], "replica", "node {id}: {json}");
            assert_eq!(json["replication_state"], "streaming", "node {id}: {json}");
            // Named once the standby's manager has read the primary's names.
            let what = format!("node {id}'s /patroni naming it a quorum standby");
            primary::wait_logged(&c.t, &what, AGREE, || async {
                let (_, body) = http_get(c.http[&id], "/patroni").await.ok()?;
                let json: serde_json::Value = serde_json::from_str(&body).ok()?;
                (json["quorum_standby"] == true).then_some(())
            })
            .await;
        }
    }
}
