//! TLS between the members on real processes (issue 49, "Secrets and defaults":
//! optional TLS to PostgreSQL, with bully's CA or the user's): the cluster of
//! `examples/postgres-primary` (tests/common/postgres_bully.rs) with `[postgres] tls =
//! "on"` and no files of the user's, so each server gets its node's certificate from
//! bully's CA.
//! - A primary and two standbys stream, and the primary's `pg_stat_replication`
//!   joined with `pg_stat_ssl` says every standby's replication connection is
//!   encrypted (the standbys' `primary_conninfo` verifies the server with
//!   `sslmode=verify-ca`).
//! - A connection without TLS from a member address (loopback here, where `initdb`'s
//!   own `host all all 127.0.0.1/32` line would let it in) is refused for bully's
//!   roles: `pg_hba.conf` rejects them with `hostnossl` before that line.
//!
//! The test's own sessions log in over TLS, verified against the cluster's CA, with
//! bully's connector (src/node/postgres/tls.rs). Skips, saying why, without PostgreSQL
//! 15 (or, as root, without a `postgres` user) or HAProxy.

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

use bully::certs::TlsFiles;
use bully::config::postgres::{PostgresConfig, TlsMode};
use bully::node::postgres::tls::Connector;
use bully::protocol::NodeId;
use postgres_bully::{BullyPg, AGREE, IDS};
use postgres_cluster::PROBE;
use primary::{phase, wait_logged};
use std::net::SocketAddr;

/// How long the cluster may take to have a primary and both standbys streaming:
/// [`AGREE`] twice, since `initdb` and two clones come first, each syncing its files
/// to disk (one run here waited over 40 s for `initdb` beside a build).
const SETTLE: std::time::Duration = AGREE.saturating_mul(2);

/// Every member's `[postgres]`: TLS on, bully's CA and the node's certificate.
fn tls_on(_: NodeId, config: &mut PostgresConfig) {
    config.tls = TlsMode::On;
}

/// The superuser's login to the server at `addr` (trust: the cluster runs with
/// `auth = "trust"`).
fn login(addr: SocketAddr) -> tokio_postgres::Config {
    postgres_cluster::login(addr, PROBE * 4)
}

/// A session on `addr` over TLS verified against the cluster's CA, within [`PROBE`]
/// x 4; `None` if the server does not answer.
async fn tls_session(connector: &Connector, addr: SocketAddr) -> Option<tokio_postgres::Client> {
    tokio::time::timeout(PROBE * 4, connector.connect(login(addr)))
        .await
        .ok()?
        .ok()
}

/// Every standby streaming from the primary at `addr`, by application name, with
/// whether its connection is encrypted (a clone's WAL stream, `pg_basebackup`, is
/// not a standby); `None` unless it is a primary that answers.
async fn streaming_standbys(
    connector: &Connector,
    addr: SocketAddr,
) -> Option<Vec<(String, bool)>> {
    let client = tls_session(connector, addr).await?;
    let asked = client.query(
        "SELECT application_name, ssl FROM pg_stat_replication JOIN pg_stat_ssl USING (pid) \
         WHERE state = 'streaming' AND application_name LIKE 'bully\\_%' \
         AND NOT pg_is_in_recovery() ORDER BY application_name",
        &[],
    );
    let rows = tokio::time::timeout(PROBE, asked).await.ok()?.ok()?;
    Some(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn standbys_stream_over_tls_and_plain_logins_from_members_are_refused() {
    if postgres_bully::skipped("three members with [postgres] tls = \"on\"") {
        return;
    }
    let pg = BullyPg::start_tuned(tls_on).await;
    let certs = pg.t.dir.path().join("certs");
    let connector = Connector::new(Some(&TlsFiles::for_node(&certs, 1))).unwrap();

    phase("a primary with both standbys streaming, as the primary's SQL says");
    let (primary, standbys) = wait_logged(
        &pg.t,
        "a primary with two standbys streaming",
        SETTLE,
        || {
            let connector = &connector;
            let pg = &pg;
            async move {
                for id in IDS {
                    let Some(standbys) = streaming_standbys(connector, pg.local(id)).await else {
                        continue;
                    };
                    if standbys.len() == IDS.len() - 1 {
                        return Some((id, standbys));
                    }
                }
                None
            }
        },
    )
    .await;
    let others: Vec<String> = IDS
        .iter()
        .filter(|&&o| o != primary)
        .map(|o| format!("bully_{o}"))
        .collect();
    let names: Vec<&String> = standbys.iter().map(|(name, _)| name).collect();
    assert_eq!(
        names,
        others.iter().collect::<Vec<_>>(),
        "node {primary}'s standbys"
    );
    for (name, ssl) in &standbys {
        assert!(
            ssl,
            "{name} streams from node {primary} without TLS: {standbys:?}"
        );
    }
    for id in IDS.into_iter().filter(|&o| o != primary) {
        let conf = std::fs::read_to_string(pg.pg.data_dir(id).join("bully.conf")).unwrap();
        assert!(
            conf.contains("sslmode=verify-ca"),
            "node {id}'s bully.conf:\n{conf}"
        );
    }

    phase("a login without TLS from a member address is refused, on every server");
    for id in IDS {
        let addr = pg.local(id);
        let plain = tokio::time::timeout(PROBE * 4, Connector::Plain.connect(login(addr))).await;
        let refused = match plain {
            Ok(Err(e)) => e.as_db_error().map(|db| db.message().to_string()),
            Ok(Ok(_)) => panic!("node {id}'s server let a plain login from {} in", addr.ip()),
            Err(_) => panic!("node {id}'s server did not answer a plain login"),
        };
        let refused = refused.unwrap_or_default();
        assert!(
            refused.contains("no encryption"),
            "node {id}: not refused by pg_hba.conf: {refused:?}"
        );
        assert!(
            tls_session(&connector, addr).await.is_some(),
            "node {id}'s server refused a TLS login"
        );
    }
    eprintln!("=== node {primary} primary; {standbys:?} over TLS; plain logins refused");
}
