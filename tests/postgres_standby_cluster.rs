//! A standby cluster (`postgres.standby_cluster`, Patroni's `standby_cluster`;
//! docs/postgresql.md#a-standby-cluster) on real processes: the cluster of
//! `tests/common/postgres_bully.rs` (three nodes, each keeping a PostgreSQL 15 server,
//! keepers, HAProxy; SCRAM with password files) following a remote primary the test
//! runs itself.
//!
//! - **The remote primary.** A standalone server of the test's (`initdb` as the
//!   servers' user, its own port and socket, `wal_keep_size = 256MB` so no slot is
//!   needed), with bully's replication role and its password, bully's superuser
//!   password (the clone carries the remote's roles: the managers log in with it), a
//!   `pg_hba.conf` letting both in from 127.0.0.1 by SCRAM, and rows loaded. It is
//!   stopped by its postmaster's PID when the test ends, also on a panic.
//! - **Three nodes with `standby_cluster` in their files, every data dir empty.** The
//!   coordinator's server, the standby leader, is cloned from the remote and streams
//!   from it; the other two stream from the standby leader; every server holds every
//!   row and the remote's system identifier; `/standby-leader` is 200 on the standby
//!   leader's node only, `/primary` 503 everywhere; no node ran `initdb`.
//! - **Rows keep coming.** More rows written on the remote reach every member.
//! - **The standby leader's host dies.** A new coordinator among the other two is the
//!   standby leader (streams from the remote), the third streams from it, new rows on
//!   the remote reach both; the killed host boots again and every member follows one
//!   standby leader (the office may move on a loaded machine) with every row.
//! - **DR promotion.** The remote is stopped cleanly (`pg_ctl stop -m fast`: its last
//!   WAL reaches the standby leader), then `bully config set postgres.standby_cluster=`
//!   (empty): the coordinator promotes, its server holds every row the remote
//!   committed, `/primary` is 200 there and `/standby-leader` 503 everywhere; a write
//!   on it reaches the other members, which stream from it.
//!
//! bully's invariants are checked on the event logs at the end. Skips, saying why,
//! without PostgreSQL 15 (or, as root, without a `postgres` user) or HAProxy.

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
use bully::signals::{self, Signal};
use postgres_bully::{joined, load, load_more, wait_tally, BullyPg, Secrets, Tally, AGREE, IDS};
use postgres_cluster::{connect_as, give_to_servers, is_root, is_zombie, role_as, run_as_servers};
use postgres_cluster::{server_pids, PROBE};
use primary::{http_get, phase};
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// bully's superuser password (the members' file), which the remote's `postgres` role
/// gets too: a quote, a backslash, a space, non-ASCII.
const SUPERUSER: &str = postgres_bully::AWKWARD_SUPERUSER;
/// bully's replication password (the members' file), the remote's replication role's.
const REPLICATION: &str = "st'andby re\\pl é";
/// The first clones: the standby leader's from the remote, then the others' from it
/// (each a `pg_basebackup`, slow on a busy 2-core machine).
const CLONED: Duration = Duration::from_secs(120);
/// What the node logs say when an `initdb` ran (src/node/postgres/manager.rs,
/// `init_db` and its act's note): never in a standby cluster.
const INITDB_LINES: [&str; 2] = [
    "postgres: initdb done (a new cluster)",
    "postgres: initdb done; started as a standby",
];

/// A PostgreSQL text literal of `text` (`standard_conforming_strings` is on).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The remote primary: a standalone server of the test's in a temp dir of its own
/// (kept with `BULLY_KEEP_TEST_DIR`), stopped by its postmaster's PID on drop (also on
/// a panic) unless the test stopped it cleanly.
struct Remote {
    bin: PathBuf,
    data: PathBuf,
    socket: PathBuf,
    addr: SocketAddr,
    /// The postmaster's PID, read from `postmaster.pid` once it ran.
    pid: u32,
    /// Stopped cleanly by the test ([`Remote::stop_fast`]): the PID may belong to
    /// another process by now, so the drop sends it nothing.
    stopped: bool,
    /// Last: removed once the server is gone.
    _dir: tempfile::TempDir,
}

impl Remote {
    /// `initdb` as the servers' user, the settings and `pg_hba.conf` of a primary that
    /// lets `replication_user` (bully's) stream from 127.0.0.1 by SCRAM, then
    /// `pg_ctl start -w`.
    fn start(bin: &Path, replication_user: &str) -> Remote {
        let mut dir = tempfile::Builder::new()
            .prefix("bully-remote-")
            .tempdir()
            .unwrap();
        if std::env::var_os("BULLY_KEEP_TEST_DIR").is_some() {
            eprintln!("keeping {} (BULLY_KEEP_TEST_DIR)", dir.path().display());
            dir.disable_cleanup(true);
        }
        if is_root() {
            use std::os::unix::fs::PermissionsExt;
            let open = std::fs::Permissions::from_mode(0o711);
            std::fs::set_permissions(dir.path(), open).unwrap();
        }
        let root = dir.path().join("pg");
        let socket = root.join("socket");
        std::fs::create_dir_all(&socket).unwrap();
        give_to_servers(&root);
        let data = root.join("data");
        let mut args: Vec<&OsStr> = vec!["-D".as_ref(), data.as_os_str()];
        args.extend(
            [
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--no-sync",
            ]
            .map(OsStr::new),
        );
        let out = run_as_servers(bin, "initdb", &args);
        assert!(out.status.success(), "initdb: {}", common::text(&out));
        let addr = bully::ports::free_tcp_addrs(1).unwrap()[0];
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap();
        text += &format!(
            "\n# the remote primary of the test's standby cluster\n\
             listen_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{}'\n\
             wal_level = replica\nmax_wal_senders = 10\nwal_keep_size = '256MB'\n",
            addr.port(),
            socket.display()
        );
        std::fs::write(&conf, text).unwrap();
        let role = format!("\"{}\"", replication_user.replace('"', "\"\""));
        let hba = format!(
            "local all all trust\n\
             host replication {role} 127.0.0.1/32 scram-sha-256\n\
             host all all 127.0.0.1/32 scram-sha-256\n"
        );
        std::fs::write(data.join("pg_hba.conf"), hba).unwrap();
        let log = root.join("remote.log");
        let mut args: Vec<&OsStr> = vec!["-D".as_ref(), data.as_os_str()];
        args.extend(["-l".as_ref(), log.as_os_str()]);
        args.extend(["-w", "-t", "120", "start"].map(OsStr::new));
        let out = run_as_servers(bin, "pg_ctl", &args);
        assert!(
            out.status.success(),
            "pg_ctl start: {}\n{}",
            common::text(&out),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let pid = std::fs::read_to_string(data.join("postmaster.pid"))
            .ok()
            .and_then(|t| t.lines().next()?.trim().parse().ok())
            .expect("the remote's postmaster.pid");
        eprintln!("=== the remote primary listens on {addr} (postmaster {pid})");
        Remote {
            bin: bin.to_path_buf(),
            data,
            socket,
            addr,
            pid,
            stopped: false,
            _dir: dir,
        }
    }

    /// A session as `postgres` on the remote's socket (trust).
    async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::Config::new()
            .host_path(&self.socket)
            .port(self.addr.port())
            .user("postgres")
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(10))
            .connect(tokio_postgres::NoTls)
            .await
            .expect("a login on the remote's socket");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// `pg_ctl stop -m fast`: a clean stop, whose shutdown checkpoint (and every WAL
    /// record before it) reaches the standbys streaming from it.
    fn stop_fast(&mut self) {
        let mut args: Vec<&OsStr> = vec!["-D".as_ref(), self.data.as_os_str()];
        args.extend(["-m", "fast", "-w", "-t", "60", "stop"].map(OsStr::new));
        let out = run_as_servers(&self.bin, "pg_ctl", &args);
        assert!(out.status.success(), "pg_ctl stop: {}", common::text(&out));
        assert!(is_zombie(self.pid), "the remote's postmaster still runs");
        self.stopped = true;
    }
}

impl Drop for Remote {
    /// An immediate shutdown (SIGQUIT to the postmaster), then kill -9 of the
    /// postmaster and its children if it is not gone within 10 s.
    fn drop(&mut self) {
        if self.stopped || is_zombie(self.pid) {
            return;
        }
        let _ = signals::send(self.pid, Signal::SIGQUIT);
        let started = Instant::now();
        while !is_zombie(self.pid) && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !is_zombie(self.pid) {
            for p in server_pids(self.pid) {
                let _ = signals::send(p, Signal::SIGKILL);
            }
        }
    }
}

/// Polls `probe` (every 50 ms) until it gives a value, within `within`; panics with
/// the node logs' tails and every server's log tail (`BullyPg::logs`: a WAL receiver's
/// errors show there).
async fn settle<T, F, Fut>(c: &BullyPg, what: &str, within: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            started.elapsed() < within,
            "timed out after {within:?} waiting for {what}\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The status code of `GET path` on node `id`'s HTTP endpoint (0: no answer).
async fn code(c: &BullyPg, id: NodeId, path: &str) -> u16 {
    http_get(c.http[&id], path)
        .await
        .map_or(0, |(code, _)| code)
}

/// Node `id`'s log (its bully node's), empty while there is none.
fn node_log(c: &BullyPg, id: NodeId) -> String {
    std::fs::read_to_string(c.t.cluster.log_path(id)).unwrap_or_default()
}

/// Whether `client`'s server lists member `id`'s standby (`bully_<id>`) as streaming
/// in `pg_stat_replication`: its WAL receiver got past `START_REPLICATION` (the
/// receiver's own `pg_stat_wal_receiver` says `streaming` while it still tries).
async fn sends_to(client: &tokio_postgres::Client, id: NodeId) -> bool {
    let sql = "SELECT count(*) FROM pg_stat_replication \
               WHERE application_name = $1 AND state = 'streaming'";
    let name = format!("bully_{id}");
    let counted = tokio::time::timeout(PROBE, client.query_one(sql, &[&name])).await;
    matches!(counted, Ok(Ok(row)) if row.get::<_, i64>(0) == 1)
}

/// Whether node `id`'s server (logged in to with the superuser's password) streams
/// from member `upstream`'s server, as the other hosts reach it (its forwarder): the
/// standby's WAL receiver says so and the upstream's walsender does too.
async fn streams_from(c: &BullyPg, id: NodeId, upstream: NodeId) -> bool {
    let port = c.cuts[&upstream].addr.port();
    let receives = role_as(c.local(id), Some(SUPERUSER))
        .await
        .is_some_and(|r| r.streams_from(port));
    if !receives {
        return false;
    }
    match connect_as(c.local(upstream), PROBE, Some(SUPERUSER)).await {
        Some(client) => sends_to(&client, id).await,
        None => false,
    }
}

/// Whether node `id`'s server streams from the remote primary, both sides saying so.
async fn streams_from_remote(c: &BullyPg, id: NodeId, remote: &Remote) -> bool {
    let receives = role_as(c.local(id), Some(SUPERUSER))
        .await
        .is_some_and(|r| r.streams_from(remote.addr.port()));
    receives && sends_to(&remote.client().await, id).await
}

/// Waits (within `within`) until one of `live` is the ready coordinator (/coordinator
/// 200) whose server streams from the remote primary (`remote`), and every other
/// member of `live` streams from that server (as the other hosts reach it, through its
/// forwarder); returns that node, the standby leader.
async fn wait_standby_leader(
    c: &BullyPg,
    live: &[NodeId],
    remote: &Remote,
    within: Duration,
) -> NodeId {
    let what = format!(
        "a standby leader among {live:?} streaming from the remote {}, the others \
         streaming from it",
        remote.addr
    );
    let from_remote = |id| streams_from_remote(c, id, remote);
    let follows = |other, id| streams_from(c, other, id);
    let leader = c
        .wait_leading(live, &what, within, from_remote, follows)
        .await;
    eprintln!("=== node {leader} leads; its server is the standby leader");
    leader
}

/// Waits (within [`AGREE`]) until one of `live` is the ready coordinator with a
/// writable server and every other member of `live` streams from it (both sides
/// saying so, logged in with the files' password); returns it.
async fn wait_primary(c: &BullyPg, live: &[NodeId]) -> NodeId {
    let what = format!("a primary among {live:?} with the others streaming from it");
    let writable = |id| async move {
        (role_as(c.local(id), Some(SUPERUSER)).await).is_some_and(|r| r.writable())
    };
    let follows = |other, id| streams_from(c, other, id);
    let leader = c.wait_leading(live, &what, AGREE, writable, follows).await;
    eprintln!("=== node {leader} leads; its server is the primary");
    leader
}

/// Waits (within [`AGREE`]) until `path` answers `want` on node `id`'s HTTP endpoint.
async fn wait_code(c: &BullyPg, id: NodeId, path: &str, want: u16) {
    let what = format!("{path} answering {want} on node {id}");
    settle(c, &what, AGREE, || async {
        (code(c, id, path).await == want).then_some(())
    })
    .await
}

/// The Patroni checks of a standby cluster: `/standby-leader` 200 on the standby
/// leader's node (within [`AGREE`]: its report of its server may be a look old), 503
/// on every other member of `live`; `/primary` 503 on all of them.
async fn assert_standby_checks(c: &BullyPg, live: &[NodeId], leader: NodeId) {
    wait_code(c, leader, "/standby-leader", 200).await;
    for &id in live {
        if id != leader {
            assert_eq!(
                code(c, id, "/standby-leader").await,
                503,
                "/standby-leader on node {id}, not the standby leader\n{}",
                c.logs()
            );
        }
        assert_eq!(
            code(c, id, "/primary").await,
            503,
            "/primary on node {id} of a standby cluster\n{}",
            c.logs()
        );
    }
}

/// Asserts node `id`'s server holds the remote's system identifier.
async fn assert_remote_system(c: &BullyPg, id: NodeId, system: i64) {
    let client = connect_as(c.local(id), PROBE * 20, Some(SUPERUSER))
        .await
        .unwrap_or_else(|| panic!("a login to node {id}'s server\n{}", c.logs()));
    assert_eq!(
        postgres_bully::system_identifier(&client).await,
        system,
        "node {id}'s server is not a copy of the remote"
    );
}

/// Waits until every one of `ids` holds exactly `rows`.
async fn wait_everywhere(c: &BullyPg, ids: &[NodeId], rows: Tally) {
    for &id in ids {
        wait_tally(c, id, Some(SUPERUSER), rows).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_cluster_follows_a_remote_primary_and_takes_over_when_promoted() {
    if postgres_bully::skipped("a standby cluster following a remote primary") {
        return;
    }
    let began = Instant::now();
    let secrets = tempfile::tempdir().unwrap();
    let superuser = secrets.path().join("pg-superuser");
    let replication = secrets.path().join("pg-replication");
    std::fs::write(&superuser, format!("{SUPERUSER}\n")).unwrap();
    std::fs::write(&replication, format!("{REPLICATION}\n")).unwrap();
    let mut p = BullyPg::prepare_with(Secrets::Files(superuser, replication), |_, _| {}).await;

    phase("the remote primary: its own server, bully's roles and pg_hba lines, rows loaded");
    let any = "127.0.0.1:1".parse().unwrap();
    let replication_user = PostgresConfig::new(PathBuf::new(), any).replication.user;
    let mut remote = Remote::start(&p.pg.bin, &replication_user);
    let writer = remote.client().await;
    writer
        .batch_execute(&format!(
            "ALTER ROLE postgres PASSWORD {}; \
             CREATE ROLE \"{replication_user}\" REPLICATION LOGIN PASSWORD {}",
            literal(SUPERUSER),
            literal(REPLICATION)
        ))
        .await
        .unwrap();
    let mut rows = load(&writer, 20, 10).await;
    let system = postgres_bully::system_identifier(&writer).await;
    eprintln!("=== the remote holds {rows:?}; system {system}");

    phase("three nodes with standby_cluster set, every data dir empty");
    let standby_cluster = remote.addr.to_string();
    p.tune_more(move |_, pg| pg.standby_cluster = Some(standby_cluster.clone()));
    let mut c = p.start();
    let settling = Instant::now();
    let leader = wait_standby_leader(&c, &IDS, &remote, CLONED).await;
    wait_everywhere(&c, &IDS, rows).await;
    eprintln!(
        "=== the standby cluster settled {:.1} s after the nodes started",
        settling.elapsed().as_secs_f64()
    );
    for id in IDS {
        assert_remote_system(&c, id, system).await;
    }
    assert_standby_checks(&c, &IDS, leader).await;
    for id in IDS {
        let log = node_log(&c, id);
        for line in INITDB_LINES {
            assert!(
                !log.contains(line),
                "node {id} ran initdb: \"{line}\"\n{log}"
            );
        }
    }
    let from_remote = format!("copied (pg_basebackup); streams from {}", remote.addr);
    // A coordinator that copied waits for its copy to answer before its next look, so
    // it does not resign over a server still replaying; a second copy still happens
    // when the office moves on a loaded machine before the first one is reported, so
    // the copies are counted, not held to one.
    let copies: usize = IDS
        .iter()
        .map(|&id| node_log(&c, id).matches(&from_remote).count())
        .sum();
    assert!(
        copies >= 1,
        "no node cloned the remote (\"{from_remote}\")\n{}",
        c.logs()
    );
    eprintln!("=== the remote was copied {copies} time(s)");

    phase("rows keep coming: more rows on the remote reach every member");
    rows = joined(rows, load_more(&writer, rows.max, 20, 10).await);
    wait_everywhere(&c, &IDS, rows).await;

    phase("the standby leader's host dies: a new standby leader, the third follows it");
    c.kill_host(leader);
    let others: Vec<NodeId> = IDS.into_iter().filter(|&id| id != leader).collect();
    let second = wait_standby_leader(&c, &others, &remote, AGREE).await;
    assert_ne!(second, leader);
    rows = joined(rows, load_more(&writer, rows.max, 10, 10).await);
    wait_everywhere(&c, &others, rows).await;
    assert_standby_checks(&c, &others, second).await;

    phase("the killed host boots again: every member follows one standby leader");
    c.restart_host(leader);
    // Whoever leads now (a lease may lapse on a loaded machine and the office move):
    // one standby leader, the others streaming from it, every row everywhere.
    let back = wait_standby_leader(&c, &IDS, &remote, AGREE).await;
    rows = joined(rows, load_more(&writer, rows.max, 10, 10).await);
    wait_everywhere(&c, &IDS, rows).await;
    assert_standby_checks(&c, &IDS, back).await;

    phase("DR promotion: the remote stopped cleanly, standby_cluster unset");
    drop(writer);
    remote.stop_fast();
    let config = c.t.cluster.config_path(back);
    let promoting = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        let config = config.display().to_string();
        common::bully(&[
            "config",
            "set",
            "postgres.standby_cluster=",
            "--config",
            &config,
        ])
    })
    .await
    .unwrap();
    let said = common::text(&out);
    eprintln!("=== bully config set postgres.standby_cluster=\n{said}");
    assert!(out.status.success(), "config set: {said}\n{}", c.logs());
    let primary = wait_primary(&c, &IDS).await;
    eprintln!(
        "=== node {primary}'s server promoted {:.1} s after `config set` began",
        promoting.elapsed().as_secs_f64()
    );
    wait_everywhere(&c, &[primary], rows).await;
    wait_code(&c, primary, "/primary", 200).await;
    for id in IDS {
        wait_code(&c, id, "/standby-leader", 503).await;
    }
    let client = connect_as(c.local(primary), PROBE * 20, Some(SUPERUSER))
        .await
        .expect("a login to the new primary");
    rows = joined(rows, load_more(&client, rows.max, 10, 10).await);
    wait_everywhere(&c, &IDS, rows).await;
    for id in IDS.into_iter().filter(|&id| id != primary) {
        assert!(
            streams_from(&c, id, primary).await,
            "node {id} does not stream from the new primary\n{}",
            c.logs()
        );
    }

    phase("bully's invariants on the event logs");
    drop(client);
    common::stop_all_and_assert_invariants(&mut c.t);
    eprintln!("wall time {:.1} s", began.elapsed().as_secs_f64());
}
