//! Parameters as a cluster setting, without failovers (issues 49 and 47), on real
//! processes: the cluster of `tests/common/postgres_bully.rs` (three nodes each keeping
//! a PostgreSQL 15 server, keepers, HAProxy).
//!
//! - The new cluster was made with data checksums (bully's default) and the file's
//!   `initdb_options` (`--encoding=SQL_ASCII`): every server, the clones too, shows
//!   both.
//! - `bully config set postgres.parameters.work_mem=7MB`, asked of one member once:
//!   `SHOW work_mem` gives the new value on every server, with no restart, and the
//!   command says each member applied it.
//! - Bad changes change nothing: a key bully owns (`port`) is refused before anything
//!   is sent (exit 2); a value PostgreSQL refuses (`work_mem=lots`) is committed but
//!   every server refuses it (exit 1, each member named), and neither bully's include
//!   file nor the server's setting moves.
//! - The synchronous mode is a cluster setting too: `bully config set
//!   postgres.synchronous=off` empties the primary's `synchronous_standby_names` and
//!   `=quorum` names the standbys again, each `set` answering once every member runs by
//!   it, and Patroni's `/quorum` and `/async` on each standby follow the names; a word
//!   that is no mode is refused (exit 2); a member's status names its file's `quorum`
//!   while the cluster's is `off`.
//! - A file is never counted: `maintenance_work_mem` changed in one node's file and
//!   the node sent SIGHUP leaves the server as it was, and the node's status names
//!   both values; `bully config set` of it reaches every server.
//! - `shared_buffers` set: `bully config set` and `bully status --cluster` show it
//!   pending a restart on every member, and so does Patroni's `pending_restart` on an
//!   HTTP route.
//! - `bully pg restart` (no node named) restarts the standbys, then the primary, one at
//!   a time: the new value on every server, nothing pending any more, and no failover:
//!   the same coordinator in the same epoch, the same primary on the same timeline. A
//!   writer through HAProxy measures the primary's restart as a write gap (printed).
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
    // The new cluster's initdb with options of the file's (issue 50): an encoding no
    // environment defaults to, so the servers show it came from there.
    let c = BullyPg::start_tuned(|_, pg| {
        pg.initdb_options = vec!["--encoding=SQL_ASCII".into(), "--locale=C".into()];
    })
    .await;
    let leader = c.wait_primary(&IDS).await;
    let before = office(&c, leader).await;
    let timeline_before = timeline(c.local(leader)).await;
    let config = c.t.cluster.config_path(leader);
    let config_set =
        |pair: &str| common::bully(&["config", "set", pair, "--config", config.to_str().unwrap()]);

    for id in IDS {
        let made = [
            show(c.local(id), "data_checksums").await,
            show(c.local(id), "server_encoding").await,
        ];
        assert_eq!(made, ["on", "SQL_ASCII"], "node {id}: checksums, encoding");
    }

    phase("work_mem set once for the cluster: every server takes it by a reload");
    let out = config_set(&format!("postgres.parameters.work_mem={WORK_MEM}"));
    let text = common::text(&out);
    assert!(out.status.success(), "config set: {text}");
    for id in IDS {
        assert!(text.contains(&format!("node {id}: applied")), "{text}");
        assert_eq!(show(c.local(id), "work_mem").await, WORK_MEM, "node {id}");
    }

    phase("bad changes: each a clear error, and nothing changes");
    let victim = IDS.into_iter().find(|&id| id != leader).unwrap();
    let include = c.pg.data_dir(victim).join("bully.conf");
    let include_before = std::fs::read_to_string(&include).unwrap();
    let owned = config_set("postgres.parameters.port=5999");
    let said = common::text(&owned);
    assert_eq!(owned.status.code(), Some(2), "{said}");
    assert!(said.contains("set by bully itself"), "{said}");
    let refused = config_set("postgres.parameters.work_mem=lots");
    let said = common::text(&refused);
    eprintln!("=== a value PostgreSQL refuses: {}", said.trim());
    assert_eq!(refused.status.code(), Some(1), "{said}");
    for id in IDS {
        assert!(
            said.contains(&format!(
                "node {id}: refused: PostgreSQL refuses the new parameters"
            )),
            "node {id}: {said}"
        );
        assert_eq!(show(c.local(id), "work_mem").await, WORK_MEM, "node {id}");
    }
    assert_eq!(
        std::fs::read_to_string(&include).unwrap(),
        include_before,
        "bully.conf changed"
    );
    let back = config_set(&format!("postgres.parameters.work_mem={WORK_MEM}"));
    assert!(back.status.success(), "{}", common::text(&back));

    phase("the synchronous mode set off, then quorum again: the primary's names follow");
    let bad = config_set("postgres.synchronous=sometimes");
    let said = common::text(&bad);
    assert_eq!(bad.status.code(), Some(2), "{said}");
    assert!(said.contains("none of off, quorum and strict"), "{said}");
    for (mode, named) in [("off", false), ("quorum", true)] {
        let out = config_set(&format!("postgres.synchronous={mode}"));
        let text = common::text(&out);
        assert!(out.status.success(), "config set {mode}: {text}");
        for id in IDS {
            assert!(text.contains(&format!("node {id}: applied")), "{text}");
        }
        let what = format!("the primary's synchronous_standby_names under {mode}");
        let names = primary::wait_logged(&c.t, &what, AGREE, || async {
            let names = show(c.local(leader), "synchronous_standby_names").await;
            (names.contains("bully_") == named).then_some(names)
        })
        .await;
        eprintln!("=== postgres.synchronous={mode}: the primary names {names:?}");
        // Patroni's routes follow the names: each standby is a quorum standby exactly
        // while the primary names it.
        for id in IDS.into_iter().filter(|&id| id != leader) {
            let what = format!("node {id}'s /quorum and /async under {mode}");
            let http = c.http[&id];
            primary::wait_logged(&c.t, &what, AGREE, || async move {
                let quorum = http_get(http, "/quorum").await.ok()?.0;
                let not_quorum = http_get(http, "/async").await.ok()?.0;
                let want = if named { (200, 503) } else { (503, 200) };
                ((quorum, not_quorum) == want).then_some(())
            })
            .await;
        }
        let status = primary::status(&c.t, victim).await.expect("a status");
        let differs = status.file_differs.unwrap_or_default();
        let file_named = differs.contains("postgres.synchronous is off (the file says quorum)");
        assert_eq!(
            file_named,
            mode == "off",
            "node {victim}'s status: {differs}"
        );
    }

    phase("maintenance_work_mem in one file and SIGHUP: not counted");
    let default_maintenance = show(c.local(victim), "maintenance_work_mem").await;
    set_parameter(&c, victim, "maintenance_work_mem", MAINTENANCE_WORK_MEM);
    let node = c.t.cluster.pid(victim).expect("the node's PID");
    bully::signals::send(node, bully::signals::Signal::SIGHUP).expect("SIGHUP");
    let want = format!(
        "postgres.parameters.maintenance_work_mem is unset (the file says {MAINTENANCE_WORK_MEM})"
    );
    let what = format!("node {victim}'s status naming the file's maintenance_work_mem");
    primary::wait_logged(&c.t, &what, AGREE, || async {
        let status = primary::status(&c.t, victim).await?;
        status.file_differs.filter(|d| d.contains(&want))
    })
    .await;
    assert_eq!(
        show(c.local(victim), "maintenance_work_mem").await,
        default_maintenance,
        "a file's parameter was applied"
    );
    let out = config_set(&format!(
        "postgres.parameters.maintenance_work_mem={MAINTENANCE_WORK_MEM}"
    ));
    assert!(out.status.success(), "{}", common::text(&out));
    for id in IDS {
        let value = show(c.local(id), "maintenance_work_mem").await;
        assert_eq!(value, MAINTENANCE_WORK_MEM, "node {id}");
    }

    phase("shared_buffers set: pending a restart on every member");
    let default_buffers = show(c.local(leader), "shared_buffers").await;
    let out = config_set(&format!(
        "postgres.parameters.shared_buffers={SHARED_BUFFERS}"
    ));
    let text = common::text(&out);
    assert!(out.status.success(), "{text}");
    for id in IDS {
        let line =
            format!("node {id}: applied; pending a restart (`bully pg restart`): shared_buffers");
        assert!(text.contains(&line), "{text}");
    }
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

    phase("bully pg restart: the standbys, then the primary, one at a time, in place");
    postgres_load::create_table(c.front).await.unwrap();
    let writer = postgres_load::PgWriter::start("params", c.front);
    let restart = Instant::now();
    let out = common::bully(&["pg", "restart", "--config", config.to_str().unwrap()]);
    let answer = common::text(&out);
    eprintln!("=== bully pg restart: {}", answer.trim());
    assert!(out.status.success(), "{answer}");
    let order: Vec<NodeId> = IDS
        .into_iter()
        .filter(|&id| id != leader)
        .chain([leader])
        .collect();
    assert!(
        answer.contains(&format!("restarting, one at a time: nodes {order:?}")),
        "standbys first: {answer}"
    );
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
        "=== longest write gap of the rolling restart in place: {} ms",
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
