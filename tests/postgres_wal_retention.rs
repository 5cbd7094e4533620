//! A standby down past WAL retention comes back by itself (issue 49), on real processes:
//! the cluster of `tests/common/postgres_bully.rs` (three nodes, each keeping a
//! PostgreSQL 15 server, keepers, HAProxy) with retention made small on every server
//! (`wal_keep_size = 0`, `[postgres] max_slot_wal_keep_size = "32MB"`). A standby's host
//! is killed; the primary writes, switches WAL segments and checkpoints until the WAL
//! that standby needs next is gone (its oldest segment past the standby's position, read
//! by SQL, and its slot lost); the host is restarted. Asserts: the standby streams from
//! the primary again within 120 s (its manager reads that its WAL is gone and clones it
//! afresh, the old data dir kept aside), and its node is never eligible before its old
//! data dir went aside (a standby that cannot stream must not lead).
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
use bully::protocol::NodeId;
use postgres_bully::{BullyPg, IDS};
use postgres_cluster::{connect, oldest_wal, role, wal_position, PROBE};
use primary::phase;
use std::time::{Duration, Instant};

/// How long the standby may take to stream again once its host is back.
const BACK_WITHIN: Duration = Duration::from_secs(120);
/// At most this many segment switches to push the standby's WAL out.
const SWITCHES: usize = 40;

/// Retention made small: no `wal_keep_size` floor, two WAL segments for a slot. Not
/// less: under one segment no slot holds any WAL, and the two first clones, each
/// switching a segment when its copy ends, invalidated each other's slots forever
/// (the config now refuses it, src/config/postgres.rs).
fn small_retention(_: NodeId, pg: &mut PostgresConfig) {
    pg.parameters.insert("wal_keep_size".into(), "0".into());
    pg.max_slot_wal_keep_size = 32 << 20;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_past_wal_retention_is_cloned_afresh_and_streams_again() {
    if postgres_bully::skipped("a standby past WAL retention") {
        return;
    }
    let mut c = BullyPg::start_tuned(small_retention).await;
    let leader = c.wait_primary(&IDS).await;
    let gone = IDS.into_iter().find(|&id| id != leader).unwrap();

    phase("the standby's host killed; the primary writes past its retention");
    let position = wal_position(c.local(gone))
        .await
        .expect("the standby's position") as u64;
    c.kill_host(gone);
    let primary = connect(c.local(leader), PROBE)
        .await
        .expect("a client of the primary");
    primary
        .batch_execute("CREATE TABLE IF NOT EXISTS retention_filler (x text)")
        .await
        .unwrap();
    let mut removed = false;
    for _ in 0..SWITCHES {
        primary
            .batch_execute(
                "INSERT INTO retention_filler SELECT repeat('x', 1000) \
                 FROM generate_series(1, 2000); SELECT pg_switch_wal(); CHECKPOINT",
            )
            .await
            .unwrap();
        if oldest_wal(&primary).await > position {
            removed = true;
            break;
        }
    }
    assert!(
        removed,
        "the primary still holds node {gone}'s WAL after {SWITCHES} segment switches"
    );
    eprintln!(
        "=== node {gone}'s slot on the primary: {:?}",
        slot_status(&primary, gone).await
    );

    phase("the standby's host back: it must stream again by itself");
    let restarted = Instant::now();
    c.restart_host(gone);
    let data_dir = c.pg.data_dir(gone);
    let streams_from = c.cuts[&leader].addr.port();
    let mut notes = Vec::new();
    let mut eligible_before_aside = None;
    let streamed = loop {
        if role(c.local(gone))
            .await
            .is_some_and(|r| r.streams_from(streams_from))
        {
            break Some(restarted.elapsed());
        }
        if restarted.elapsed() > BACK_WITHIN {
            break None;
        }
        if let Some(status) = primary::status(&c.t, gone).await {
            let note = status.postgres.as_ref().map(|p| p.note.clone());
            if common::set_aside(&data_dir).is_none() && status.health.allows_leading() {
                eligible_before_aside.get_or_insert((restarted.elapsed(), note.clone()));
            }
            if let Some(note) = note.filter(|n| notes.last() != Some(n)) {
                notes.push(note);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("=== node {gone}'s notes: {notes:#?}");
    let Some(took) = streamed else {
        panic!(
            "node {gone} did not stream again within {BACK_WITHIN:?}\n{}",
            c.logs()
        );
    };
    eprintln!(
        "=== node {gone} streams again {} ms after its host came back",
        took.as_millis()
    );
    assert_eq!(
        eligible_before_aside, None,
        "node {gone} was eligible while its WAL was gone"
    );
    assert!(
        common::set_aside(&data_dir).is_some(),
        "node {gone} was cloned afresh with its old data dir kept aside"
    );
    // The status said why (its note, which the node also logs: the polls above may
    // fall between the notes of a clone this quick).
    let log = std::fs::read_to_string(c.t.cluster.log_path(gone)).unwrap_or_default();
    assert!(
        log.contains("removed the WAL this standby needs"),
        "node {gone} did not say its WAL was gone: {notes:?}\n{}",
        c.logs()
    );
}

/// `wal_status` of member `id`'s slot on the server behind `client`, if it has one.
async fn slot_status(client: &tokio_postgres::Client, id: NodeId) -> Option<String> {
    client
        .query_opt(
            "SELECT coalesce(wal_status, 'unreserved') FROM pg_replication_slots \
             WHERE slot_name = $1",
            &[&format!("bully_{id}")],
        )
        .await
        .ok()?
        .map(|row| row.get(0))
}
