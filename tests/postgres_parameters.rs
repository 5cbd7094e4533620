//! Parameters without failovers (issue 49), on real processes: the cluster of
//! `tests/common/postgres_bully.rs` (three nodes each keeping a PostgreSQL 15 server,
//! keepers, HAProxy).
//!
//! - `work_mem` changed in every node's config file and `bully pg reload N` on each:
//!   `SHOW work_mem` gives the new value on every server, with no restart.
//! - Bad edits change nothing: a file that is not TOML, a key bully owns (`port`), and
//!   a value PostgreSQL refuses each give a clear error, and neither bully's include
//!   file nor the server's setting moves.
//! - `maintenance_work_mem` changed in one file and its node sent SIGHUP (`systemctl
//!   reload`): the server has the new value, as after `bully pg reload`.
//! - `shared_buffers` changed and reloaded: `bully status --cluster` shows it pending a
//!   restart on every member, and so does Patroni's `pending_restart` on an HTTP route.
//! - `bully pg restart N` of each standby, then of the primary: the new value on every
//!   server, nothing pending any more, and no failover: the same coordinator in the
//!   same epoch, the same primary on the same timeline. A writer through HAProxy
//!   measures the primary's restart as a write gap (printed).
//!
//! Skips, saying why, without PostgreSQL 15 (or, as root, without a `postgres` user) or
//! HAProxy.

mod common;
#[path = "common/postgres_bully.rs"]
mod postgres_bully;
#[path = "common/postgres_cluster.rs"]
mod postgres_cluster;
#[path = "common/postgres_load.rs"]
mod postgres_load;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/redis_servers.rs"]
mod redis_servers;
#[path = "common/resp.rs"]
mod resp;
#[path = "common/tcp_cut.rs"]
mod tcp_cut;
#[path = "common/writers.rs"]
mod writers;

use bully::config::NodeConfig;
use bully::protocol::NodeId;
use common::installed;
use postgres_bully::{BullyPg, AGREE, IDS};
use postgres_cluster::{connect, PROBE};
use primary::{http_get, phase};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

/// `work_mem` as every server starts (PostgreSQL's default) and as reloaded.
const WORK_MEM: &str = "7MB";
/// `maintenance_work_mem` as reloaded by SIGHUP (PostgreSQL's default is 64MB).
const MAINTENANCE_WORK_MEM: &str = "96MB";
/// `shared_buffers` as changed: above PostgreSQL's default 128MB.
const SHARED_BUFFERS: &str = "160MB";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_reload_and_restart_in_place_without_a_failover() {
    let mut missing: Vec<String> = postgres_cluster::cannot_run().into_iter().collect();
    if !installed("haproxy") {
        missing.push("haproxy not installed (apt-get install haproxy)".into());
    }
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED: {}; this test changes a real cluster's parameters",
            missing.join("; ")
        );
        return;
    }
    let c = BullyPg::start().await;
    let leader = c.wait_primary(&IDS).await;
    let before = office(&c, leader).await;
    let timeline_before = timeline(c.local(leader)).await;
    let pg = |verb: &str, node: NodeId| {
        let config = c.t.cluster.config_path(leader);
        common::bully(&[
            "pg",
            verb,
            &node.to_string(),
            "--config",
            config.to_str().unwrap(),
        ])
    };

    phase("work_mem changed in every config file; bully pg reload on each node");
    for id in IDS {
        set_parameter(&c, id, "work_mem", WORK_MEM);
        let out = pg("reload", id);
        let text = common::text(&out);
        assert!(out.status.success(), "reload of node {id}: {text}");
        assert!(text.contains("applied now: work_mem"), "node {id}: {text}");
    }
    for id in IDS {
        assert_eq!(show(c.local(id), "work_mem").await, WORK_MEM, "node {id}");
    }

    phase("bad edits: each a clear error, and nothing changes");
    let victim = IDS.into_iter().find(|&id| id != leader).unwrap();
    let path = c.t.cluster.config_path(victim);
    let good = std::fs::read_to_string(&path).unwrap();
    let include = c.pg.data_dir(victim).join("bully.conf");
    let include_before = std::fs::read_to_string(&include).unwrap();
    let file_name = path.file_name().unwrap().to_string_lossy().to_string();
    // Each edit of the good file, made before any is written.
    let edits = [
        (
            "a file that is not TOML",
            format!("{good}\n[[[ not toml\n"),
            file_name.as_str(),
        ),
        (
            "a key bully owns",
            edited(&path, |c| param(c, "port", "5999")),
            "set by bully itself",
        ),
        (
            "a value PostgreSQL refuses",
            edited(&path, |c| param(c, "work_mem", "lots")),
            "PostgreSQL refuses the new parameters",
        ),
    ];
    for (what, text, says) in edits {
        std::fs::write(&path, text).unwrap();
        let out = pg("reload", victim);
        let answer = common::text(&out);
        eprintln!("=== {what}: {}", answer.trim());
        assert_eq!(out.status.code(), Some(1), "{what}: {answer}");
        assert!(
            answer.contains(says) && answer.contains("nothing changed"),
            "{what}: {answer}"
        );
        assert_eq!(
            std::fs::read_to_string(&include).unwrap(),
            include_before,
            "{what}: bully.conf changed"
        );
        assert_eq!(show(c.local(victim), "work_mem").await, WORK_MEM, "{what}");
        std::fs::write(&path, &good).unwrap();
    }

    phase("maintenance_work_mem changed in one file; its node reloaded by SIGHUP");
    set_parameter(&c, victim, "maintenance_work_mem", MAINTENANCE_WORK_MEM);
    let node = c.t.cluster.pid(victim).expect("the node's PID");
    bully::signals::send(node, bully::signals::Signal::SIGHUP).expect("SIGHUP");
    let what = format!("node {victim}'s server with the reloaded maintenance_work_mem");
    primary::wait_logged(&c.t, &what, AGREE, || async {
        (show(c.local(victim), "maintenance_work_mem").await == MAINTENANCE_WORK_MEM).then_some(())
    })
    .await;

    phase("shared_buffers changed and reloaded: pending a restart on every member");
    let default_buffers = show(c.local(leader), "shared_buffers").await;
    for id in IDS {
        set_parameter(&c, id, "shared_buffers", SHARED_BUFFERS);
        let out = pg("reload", id);
        let text = common::text(&out);
        assert!(out.status.success(), "reload of node {id}: {text}");
        assert!(
            text.contains("waiting for a restart") && text.contains("shared_buffers"),
            "node {id}: {text}"
        );
    }
    let config = c.t.cluster.config_path(leader);
    let pending_everywhere = common::wait_until(
        "shared_buffers pending on every member in status --cluster",
        AGREE,
        || async {
            let table = cluster_table(&config);
            IDS.iter()
                .all(|&id| member_pending(&table, id).contains("shared_buffers"))
                .then_some(table)
        },
    )
    .await;
    eprintln!("{pending_everywhere}");
    let (code, body) = http_get(c.http[&leader], "/primary").await.unwrap();
    assert_eq!(code, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["pending_restart"], true, "{body}");
    assert_eq!(
        json["pending_restart_params"][0], "shared_buffers",
        "{body}"
    );
    assert_eq!(
        show(c.local(leader), "shared_buffers").await,
        default_buffers
    );

    phase("bully pg restart of each standby, then of the primary, in place");
    postgres_load::create_table(c.front).await.unwrap();
    let writer = postgres_load::PgWriter::start("params", c.front);
    for id in IDS.into_iter().filter(|&id| id != leader) {
        let out = pg("restart", id);
        assert!(
            out.status.success(),
            "restart of node {id}: {}",
            common::text(&out)
        );
        c.wait_rejoined(id, leader).await;
    }
    let restart = Instant::now();
    let out = pg("restart", leader);
    let answer = common::text(&out);
    assert!(out.status.success(), "restart of the primary: {answer}");
    eprintln!("=== the primary's restart: {}", answer.trim());
    let answered = Instant::now();
    let what = "a write accepted after the primary's restart";
    common::wait_until(what, AGREE, || async {
        let wrote = writer
            .records()
            .iter()
            .any(|a| a.epoch.is_some() && a.start >= answered);
        wrote.then_some(())
    })
    .await;
    let attempts = writer.stop().await;
    let (gap, _) = writers::longest_gap(&attempts, restart, Instant::now());
    eprintln!(
        "=== write gap of the primary's restart in place: {} ms",
        gap.as_millis()
    );
    for line in writers::failures(&attempts, restart, Instant::now()) {
        eprintln!("    {line}");
    }

    phase("the new value everywhere, nothing pending, and no failover");
    for id in IDS {
        assert_eq!(
            show(c.local(id), "shared_buffers").await,
            SHARED_BUFFERS,
            "node {id}"
        );
        assert_eq!(pending_count(c.local(id)).await, 0, "node {id}");
    }
    common::wait_until("nothing pending in status --cluster", AGREE, || async {
        let table = cluster_table(&config);
        IDS.iter()
            .all(|&id| member_pending(&table, id) == "-")
            .then_some(())
    })
    .await;
    assert_eq!(
        c.wait_ready(&IDS).await,
        leader,
        "another node's server is the primary"
    );
    assert_eq!(
        office(&c, leader).await,
        before,
        "the coordinator's office changed"
    );
    for id in IDS {
        let seen = primary::status(&c.t, id).await.map(|s| s.epoch);
        assert_eq!(seen, Some(before), "node {id} saw another office");
    }
    assert_eq!(
        timeline(c.local(leader)).await,
        timeline_before,
        "the primary's timeline changed: it was promoted again"
    );
}

/// The office node `leader` holds now, as it reports it.
async fn office(c: &BullyPg, leader: NodeId) -> Option<bully::protocol::Epoch> {
    let status = primary::status(&c.t, leader)
        .await
        .expect("the leader's status");
    assert_eq!(status.coordinator(), Some(leader), "node {leader} leads");
    status.epoch
}

/// Sets `[postgres] parameters.name = value` in node `id`'s config file.
fn set_parameter(c: &BullyPg, id: NodeId, name: &str, value: &str) {
    c.t.cluster
        .edit_config(id, |config| param(config, name, value))
        .unwrap();
}

fn param(config: &mut NodeConfig, name: &str, value: &str) {
    let pg = config.postgres.as_mut().expect("[postgres]");
    pg.parameters.insert(name.into(), value.into());
}

/// The config at `path` with `edit` made, rendered without the checks a load makes.
fn edited(path: &Path, edit: impl FnOnce(&mut NodeConfig)) -> String {
    let mut config = bully::config::load(path).unwrap();
    edit(&mut config);
    bully::config::render(&config).unwrap()
}

/// `SHOW name` on the server at `addr`.
async fn show(addr: SocketAddr, name: &str) -> String {
    let client = connect(addr, PROBE).await.expect("a client");
    let row = client
        .query_one(&format!("SHOW {name}"), &[])
        .await
        .unwrap();
    row.get(0)
}

/// How many parameters the server at `addr` holds for its next restart.
async fn pending_count(addr: SocketAddr) -> i64 {
    let client = connect(addr, PROBE).await.expect("a client");
    let sql = "SELECT count(*) FROM pg_settings WHERE pending_restart";
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// The server's timeline, from its control file.
async fn timeline(addr: SocketAddr) -> i32 {
    let client = connect(addr, PROBE).await.expect("a client");
    let sql = "SELECT timeline_id FROM pg_control_checkpoint()";
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// `bully status --cluster`'s table.
fn cluster_table(config: &Path) -> String {
    let out = common::bully(&["status", "--cluster", "--config", config.to_str().unwrap()]);
    common::text(&out)
}

/// Member `id`'s PENDING RESTART column (the last) in `table`; empty when no row.
fn member_pending(table: &str, id: NodeId) -> String {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id.to_string().as_str()))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_default()
        .to_string()
}
