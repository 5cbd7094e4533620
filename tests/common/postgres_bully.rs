//! The whole `examples/postgres-primary` on loopback, set up one way for both
//! `tests/postgres_failover.rs` and `benches/pg_failover.rs`, so the test's safety
//! checks and the bench's figures are about the same cluster: three bully nodes in
//! quorum mode, each keeping its own PostgreSQL server (`[postgres]`: the first
//! coordinator runs initdb, the others clone it), their peer links through the chaos
//! relay (a node can be cut off on loopback), each server reached by the other hosts
//! through a `tcp_cut` forwarder (`connect_address`: its replication and the other
//! managers' round trips can be cut too), one keeper per node (`bully run --config`,
//! which fences the server) and HAProxy with the example's `haproxy.cfg` (writes on
//! `/primary`, reads on `/replica`, as Patroni's users write it); on request a second
//! HAProxy with Patroni's documented section (`BullyPg::patroni_haproxy`). Every
//! process is killed by PID on drop.
//!
//! Included with `#[path = "common/postgres_bully.rs"] mod postgres_bully;` next to
//! `common`, `postgres_cluster.rs`, `primary.rs`, `redis_servers.rs` and `tcp_cut.rs`.
#![allow(dead_code)]

use super::common::{binary, TestCluster};
use super::postgres_cluster::{
    connect_as, example_dir, is_root, role, server_pids, PgServers, PROBE,
};
use super::primary::{self, http_get, phase};
use super::redis_servers::{Haproxy, Keepers};
use super::tcp_cut::CutProxy;
use bully::chaos::relay::Relay;
use bully::cluster::{Cluster, ClusterSpec};
use bully::config::postgres::{Auth, PostgresConfig, Synchronous};
use bully::config::HttpConfig;
use bully::ports::free_tcp_addrs;
use bully::protocol::{Mode, NodeId, Preempt, Timing};
use bully::signals::{self, Signal};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a test changes in every node's `[postgres]`, given the node's ID
/// ([`BullyPg::start_tuned`], [`Prepared::tune_more`]).
pub type Tune = dyn Fn(NodeId, &mut PostgresConfig) + Send + Sync;

/// Every wait for the cluster to settle (generous: CI is a busy 2-core machine).
pub const AGREE: Duration = Duration::from_secs(40);
/// The nodes (and servers) of the cluster.
pub const IDS: [NodeId; 3] = [1, 2, 3];
/// Sessions [`BullyPg::patroni_haproxy`] opens in a row through Patroni's section, each
/// checked on its own: with a standby still in HAProxy's round robin, all of them
/// reaching the primary by chance has a chance of (1/3)^15.
pub const PATRONI_SESSIONS: usize = 15;

/// A superuser password with a quote, a backslash, a space and non-ASCII: what the
/// tester's quoting broke (issue 49), for the tests that log in with one.
pub const AWKWARD_SUPERUSER: &str = r"pa'ss\wo rd é";

/// Whether this cluster cannot run here (PostgreSQL 15 missing, or as root no
/// `postgres` user to run it as; HAProxy missing): then says so, `SKIPPED: <why>; this
/// test runs <what>`, and the test returns. `.ci/run` installs both.
pub fn skipped(what: &str) -> bool {
    let mut missing: Vec<String> = super::postgres_cluster::cannot_run().into_iter().collect();
    if !super::common::installed("haproxy") {
        missing.push("haproxy not installed (apt-get install haproxy)".into());
    }
    if !missing.is_empty() {
        eprintln!("SKIPPED: {}; this test runs {what}", missing.join("; "));
    }
    !missing.is_empty()
}

/// The timing the nodes run: bully's default, or with `PG_TEST_D_MS=D` a slower D
/// (heartbeat and T at D/3, T' at D), to try the same scenarios at another timing.
pub fn timing() -> Timing {
    match std::env::var("PG_TEST_D_MS").ok() {
        None => Timing::default(),
        Some(d) => {
            let d: u64 = d.parse().expect("PG_TEST_D_MS is milliseconds");
            Timing {
                heartbeat_ms: d / 3,
                suspect_after_ms: d,
                answer_timeout_ms: d / 3,
                coordinator_timeout_ms: d,
                preempt_delay_ms: 0,
            }
        }
    }
}

/// `[postgres] synchronous` of every node: `quorum`, or `PG_TEST_SYNCHRONOUS=strict`
/// (`off` may lose commits at a failover, which the failover test counts as lost).
pub fn synchronous() -> Synchronous {
    match std::env::var("PG_TEST_SYNCHRONOUS").as_deref() {
        Err(_) | Ok("quorum") => Synchronous::Quorum,
        Ok("strict") => Synchronous::Strict,
        Ok("off") => Synchronous::Off,
        Ok(other) => panic!("PG_TEST_SYNCHRONOUS: off, quorum or strict, not {other}"),
    }
}

/// How the members log in to each other's servers.
#[derive(Debug, Clone)]
pub enum Secrets {
    /// `auth = "trust"` (asked for: a test cluster on loopback, whose probes and
    /// writers log in without a password).
    Trust,
    /// SCRAM, with these password files (superuser, replication) on every member.
    Files(std::path::PathBuf, std::path::PathBuf),
    /// SCRAM, with no password files: each node generates its own.
    Generated,
}

/// The running cluster. Fields drop in this order (after [`Drop::drop`] killed the bully
/// nodes): HAProxy, keepers, forwarders, servers, relay, and the temp dir (`t`, last)
/// that holds their files.
pub struct BullyPg {
    haproxy: Haproxy,
    pub keepers: Keepers,
    /// The rest, as [`Prepared`] made it (forwarders, servers, relay, temp dir): a
    /// `BullyPg` reads and changes them as its own fields.
    parts: Prepared,
}

impl std::ops::Deref for BullyPg {
    type Target = Prepared;
    fn deref(&self) -> &Prepared {
        &self.parts
    }
}

impl std::ops::DerefMut for BullyPg {
    fn deref_mut(&mut self) -> &mut Prepared {
        &mut self.parts
    }
}

impl BullyPg {
    /// Creates and starts everything (servers as standbys, keepers, nodes, HAProxy) in a
    /// new temp dir (kept with `BULLY_KEEP_TEST_DIR`); returns before anyone leads.
    pub async fn start() -> BullyPg {
        Self::start_full(Secrets::Trust, |_, _| {}).await
    }

    /// [`BullyPg::start`] with the members logging in by `secrets`.
    pub async fn start_with(secrets: Secrets) -> BullyPg {
        Self::start_full(secrets, |_, _| {}).await
    }

    /// As [`BullyPg::start`], with `tune` applied to every node's `[postgres]` (members
    /// added later too), given the node's ID.
    pub async fn start_tuned(tune: fn(NodeId, &mut PostgresConfig)) -> BullyPg {
        Self::start_full(Secrets::Trust, tune).await
    }

    /// [`BullyPg::start`] with both: how the members log in, and what each `[postgres]`
    /// changes.
    async fn start_full(secrets: Secrets, tune: fn(NodeId, &mut PostgresConfig)) -> BullyPg {
        Self::prepare_with(secrets, tune).await.start()
    }

    /// Everything but the processes: the temp dir (kept with `BULLY_KEEP_TEST_DIR`), the
    /// relay, the forwarders and every node's config, with `secrets` and `tune` as in
    /// [`BullyPg::start_full`]. A test acts on the servers' data dirs before any node
    /// runs (an existing cluster for `bully pg adopt`: tests/postgres_adopt.rs,
    /// tests/postgres_patroni_takeover.rs), then calls [`Prepared::start`].
    pub async fn prepare_with(secrets: Secrets, tune: fn(NodeId, &mut PostgresConfig)) -> Prepared {
        phase("three bully nodes keeping their servers, behind the relay; keepers; HAProxy");
        let mut dir = tempfile::Builder::new()
            .prefix("bully-pg-")
            .tempdir()
            .unwrap();
        if std::env::var_os("BULLY_KEEP_TEST_DIR").is_some() {
            eprintln!("keeping {} (BULLY_KEEP_TEST_DIR)", dir.path().display());
            dir.disable_cleanup(true);
        }
        let mut relay = Relay::bind(&IDS).await.unwrap();
        let cluster = Cluster::create_routed(
            ClusterSpec {
                nodes: 3,
                timing: timing(),
                preempt: Preempt::Never,
                mode: Mode::Quorum,
                binary: binary(),
                dir: dir.path().to_path_buf(),
            },
            |from, to, _| relay.front_addr(from, to),
        )
        .unwrap();
        let targets = IDS.iter().map(|&id| (id, cluster.addr(id))).collect();
        relay.start(&targets, 29).await.unwrap();
        // One batch, so no two listeners are handed the same port.
        let mut ports = free_tcp_addrs(3 * IDS.len() + 2).unwrap().into_iter();
        let mut take_each = || -> BTreeMap<NodeId, SocketAddr> {
            IDS.iter().map(|&id| (id, ports.next().unwrap())).collect()
        };
        let (local, seen, http) = (take_each(), take_each(), take_each());
        let (front, reads) = (ports.next().unwrap(), ports.next().unwrap());
        let pg = PgServers::new(dir.path(), local.clone());
        let cuts = IDS
            .iter()
            .map(|&id| (id, CutProxy::start(seen[&id], local[&id])))
            .collect();
        let t = TestCluster { cluster, dir };
        configure(&t, &pg, &seen, &http, &secrets, &tune);
        Prepared {
            cuts,
            pg,
            relay,
            http,
            front,
            reads,
            secrets,
            tune: Arc::new(tune),
            t,
        }
    }

    /// Every member now: [`IDS`] and any added at runtime ([`BullyPg::add_member`]).
    pub fn ids(&self) -> Vec<NodeId> {
        self.t.cluster.ids()
    }

    /// Adds node `id` at runtime, as an operator would on a new host: a config with
    /// `[postgres]` and an empty data dir (its manager clones the primary), its server
    /// behind a forwarder like the others', its keeper and node started, then `bully
    /// member add` through node `via`. Its peer links go straight to the others'
    /// nodes, not through the relay ([`BullyPg::cut_off`] does not cut them).
    pub async fn add_member(&mut self, id: NodeId, via: NodeId) {
        let mut ports = free_tcp_addrs(3).unwrap().into_iter();
        let (local, seen, http) = (
            ports.next().unwrap(),
            ports.next().unwrap(),
            ports.next().unwrap(),
        );
        self.pg.addrs.insert(id, local);
        self.cuts.insert(id, CutProxy::start(seen, local));
        self.http.insert(id, http);
        let peers: Vec<(NodeId, SocketAddr)> = self
            .ids()
            .into_iter()
            .map(|p| (p, self.t.cluster.addr(p)))
            .collect();
        self.t.cluster.add_member(id, &peers).unwrap();
        configure_one(
            &self.t,
            &self.pg,
            id,
            seen,
            http,
            &self.secrets,
            &*self.tune,
        );
        let config = self.t.cluster.config_path(id);
        self.keepers.spawn(&binary(), id, &config);
        self.t.cluster.start(id).unwrap();
        let args = [
            "member".to_string(),
            "add".into(),
            id.to_string(),
            self.t.cluster.addr(id).to_string(),
            "--endpoints".into(),
            self.t.cluster.addr(via).to_string(),
            "--certs".into(),
            self.t.dir.path().join("certs").display().to_string(),
            "--timeout".into(),
            "10s".into(),
        ];
        let out = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            super::common::bully(&args)
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "bully member add {id}: {}",
            super::common::text(&out)
        );
    }

    /// Each server as clients on its own host reach it (pollers, checks).
    pub fn local(&self, id: NodeId) -> SocketAddr {
        self.pg.addrs[&id]
    }

    /// Waits until one of `live` is the ready coordinator (/coordinator 200), its server
    /// a writable primary, and every other server of `live` streams from it; returns
    /// that node. Panics with the logs after [`AGREE`].
    pub async fn wait_primary(&self, live: &[NodeId]) -> NodeId {
        let what = format!("a primary among {live:?} with the others streaming from it");
        let writable = |id| async move { role(self.local(id)).await.is_some_and(|r| r.writable()) };
        let follows = |other, id| async move {
            let port = self.cuts[&id].addr.port();
            (role(self.local(other)).await).is_some_and(|r| r.streams_from(port))
        };
        let leader = self
            .wait_leading(live, &what, AGREE, writable, follows)
            .await;
        eprintln!("=== node {leader} leads; its server is the primary");
        leader
    }

    /// Waits (within `within`) until one of `live` is the ready coordinator
    /// (/coordinator 200) whose server passes `serves`, and every other member `other`
    /// of `live` passes `follows(other, leader)`; returns the leader. Panics with the
    /// logs after `within`. The one wait behind [`BullyPg::wait_primary`] and the tests'
    /// own heads (a standby cluster's standby leader, a login with a password).
    pub async fn wait_leading<S, SF, F, FF>(
        &self,
        live: &[NodeId],
        what: &str,
        within: Duration,
        serves: S,
        follows: F,
    ) -> NodeId
    where
        S: Fn(NodeId) -> SF,
        SF: std::future::Future<Output = bool>,
        F: Fn(NodeId, NodeId) -> FF,
        FF: std::future::Future<Output = bool>,
    {
        primary::wait_logged(&self.t, what, within, || async {
            for &id in live {
                if !matches!(http_get(self.http[&id], "/coordinator").await, Ok((200, _))) {
                    continue;
                }
                if !serves(id).await {
                    return None;
                }
                for &other in live.iter().filter(|&&o| o != id) {
                    if !follows(other, id).await {
                        return None;
                    }
                }
                return Some(id);
            }
            None
        })
        .await
    }

    /// A second HAProxy in front of the servers, running Patroni's documented section
    /// (`examples/postgres-primary/patroni-haproxy/haproxy.cfg`: `option httpchk`,
    /// `inter 3s fall 3 rise 2`, only the addresses swapped) on a free port, its files in
    /// `patroni-haproxy/` of the temp dir. Returns once [`PATRONI_SESSIONS`] sessions in a
    /// row through it reached the same primary, with that primary's office: HAProxy
    /// starts with every server up and sends sessions to the standbys until its checks
    /// took them out (1.2 s after it started in the bench's run of 3 Dec 2026). One
    /// helper, so `tests/postgres_patroni_routes.rs` (which checks the section works)
    /// and `benches/pg_failover.rs`'s `bully-patroni-haproxy` (which times a failover
    /// through it) run the same config. Panics with the logs after
    /// [`AGREE`]; call it once a primary leads ([`BullyPg::wait_primary`]).
    pub async fn patroni_haproxy(&self) -> (Haproxy, u64) {
        let front = free_tcp_addrs(1).unwrap()[0];
        let section = example_dir().join("patroni-haproxy");
        let dir = self.t.dir.path().join("patroni-haproxy");
        std::fs::create_dir_all(&dir).unwrap();
        let haproxy = Haproxy::start_from(&section, &dir, front, &self.pg.addrs, &self.http);
        let started = Instant::now();
        let what = format!(
            "{PATRONI_SESSIONS} sessions in a row through Patroni's section on the primary"
        );
        let office = primary::wait_logged(&self.t, &what, AGREE, || async {
            let mut office = None;
            for _ in 0..PATRONI_SESSIONS {
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
            "=== Patroni's HAProxy section settled {:.1} s after it started (its first checks)",
            started.elapsed().as_secs_f64()
        );
        (haproxy, office)
    }

    /// Waits until one of `among` is the ready coordinator (/coordinator 200) with a
    /// writable server; returns that node.
    pub async fn wait_ready(&self, among: &[NodeId]) -> NodeId {
        let what = format!("a ready coordinator among {among:?} with a writable server");
        primary::wait_logged(&self.t, &what, AGREE, || async {
            for &id in among {
                let ready = matches!(http_get(self.http[&id], "/coordinator").await, Ok((200, _)));
                if ready && role(self.local(id)).await.is_some_and(|r| r.writable()) {
                    return Some(id);
                }
            }
            None
        })
        .await
    }

    /// The node whose server is the primary and lists every other member's standby as
    /// `streaming` in `pg_stat_replication`, logging in to node `id`'s server with
    /// `password(id)` (SCRAM: [`BullyPg::wait_primary`]'s probes log in by trust),
    /// within [`AGREE`]; panics with the logs.
    pub async fn wait_all_streaming(&self, password: &dyn Fn(NodeId) -> String) -> NodeId {
        let ids = self.ids();
        let deadline = Instant::now() + AGREE;
        loop {
            for &id in &ids {
                let password = password(id);
                let login = connect_as(self.local(id), PROBE * 4, Some(&password));
                let Some(client) = login.await else {
                    continue;
                };
                let Ok(row) = client.query_one("SELECT pg_is_in_recovery()", &[]).await else {
                    continue;
                };
                if row.get::<_, bool>(0) {
                    continue;
                }
                let rows = client
                    .query(
                        "SELECT application_name FROM pg_stat_replication \
                         WHERE state = 'streaming'",
                        &[],
                    )
                    .await
                    .unwrap_or_default();
                let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                let all = ids
                    .iter()
                    .filter(|&&o| o != id)
                    .all(|o| names.contains(&format!("bully_{o}")));
                if all {
                    eprintln!("=== node {id}'s server is the primary; streaming: {names:?}");
                    return id;
                }
            }
            assert!(
                Instant::now() < deadline,
                "not every standby streams within {AGREE:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until node `id`'s server streams from node `leader`'s; returns when.
    pub async fn wait_rejoined(&self, id: NodeId, leader: NodeId) -> Instant {
        let port = self.cuts[&leader].addr.port();
        let what = format!("node {id}'s server streaming from node {leader}'s");
        primary::wait_logged(&self.t, &what, AGREE, || async {
            role(self.local(id))
                .await
                .is_some_and(|r| r.streams_from(port))
                .then(Instant::now)
        })
        .await
    }

    /// Node `id`'s host loses every process: kill -9 of its node, of each program the
    /// node had running (a `pg_rewind` or `pg_basebackup` in flight: each leads a
    /// process group of its own, which a kill of the node alone leaves running), its
    /// keeper, and its server (the postmaster and its children, found by PID).
    pub fn kill_host(&mut self, id: NodeId) {
        self.kill_node(id);
        self.keepers.kill(id);
        self.pg.kill(id);
    }

    /// kill -9 of node `id`'s `bully node` and of each program it had running (a
    /// `pg_ctl`, `pg_rewind` or `pg_basebackup` in flight, each the leader of a process
    /// group of its own); its server and keeper run on. The kill is noted in the
    /// cluster's history.
    pub fn kill_node(&mut self, id: NodeId) {
        let server = self.pg.pid(id);
        let programs: Vec<u32> = match self.t.cluster.pid(id) {
            Some(node) => server_pids(node)
                .into_iter()
                .skip(1)
                .filter(|&p| Some(p) != server)
                .collect(),
            None => Vec::new(),
        };
        self.t.cluster.kill(id).unwrap();
        for pid in programs {
            let _ = signals::send_group(pid, Signal::SIGKILL);
        }
    }

    /// Node `id`'s host boots again: its keeper and node (which starts its server as a
    /// standby).
    pub fn restart_host(&mut self, id: NodeId) {
        let config = self.t.cluster.config_path(id);
        self.keepers.spawn(&binary(), id, &config);
        self.t.cluster.start(id).unwrap();
    }

    /// Every host loses every process (kill -9) and boots again: the keepers and nodes
    /// (each starts its server as a standby). Returns when they were started.
    pub fn restart_all(&mut self) -> Instant {
        for id in self.ids() {
            self.kill_host(id);
        }
        let restarted = Instant::now();
        for id in self.ids() {
            let config = self.t.cluster.config_path(id);
            self.keepers.spawn(&binary(), id, &config);
        }
        self.t.start_all();
        restarted
    }

    /// Node `id`'s host cut off (`true`) or back (`false`): its bully links (the relay)
    /// and its server as the other hosts reach it (replication, their scripts).
    pub fn cut_off(&mut self, id: NodeId, cut: bool) {
        if cut {
            let others: Vec<NodeId> = IDS.into_iter().filter(|&o| o != id).collect();
            // Members added at runtime link directly, not through the relay.
            self.relay.partition(&[id], &others);
        } else {
            self.relay.heal();
        }
        self.cuts[&id].cut(cut);
    }

    /// The bully nodes' event logs, then every server's log, for failures.
    pub fn logs(&self) -> String {
        let mut text = self.t.log_tail();
        for id in self.ids() {
            let path = self.t.cluster.data_dir(id).join("postgres.log");
            let log = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            text += &format!(
                "--- {}\n{}\n",
                path.display(),
                lines[lines.len().saturating_sub(12)..].join("\n")
            );
        }
        text
    }
}

/// A cluster whose configs are written and whose processes are not started yet
/// ([`BullyPg::prepare_with`]): a test may set up the servers' data dirs as an operator
/// would before the first start. Its fields drop in this order: forwarders, servers
/// (every one still running is killed, also one the test started itself), relay, and
/// the temp dir last.
pub struct Prepared {
    /// Each server as the other hosts will reach it (its forwarder).
    pub cuts: BTreeMap<NodeId, CutProxy>,
    /// The servers: where their data dirs are and where they will listen.
    pub pg: PgServers,
    pub relay: Relay,
    pub http: BTreeMap<NodeId, SocketAddr>,
    /// Where clients will write: HAProxy's front for the primary.
    pub front: SocketAddr,
    /// Where clients will read: HAProxy's front for the replicas.
    pub reads: SocketAddr,
    /// How the members log in.
    pub secrets: Secrets,
    /// What every node's `[postgres]` changes, members added later too.
    tune: Arc<Tune>,
    pub t: TestCluster,
}

impl Prepared {
    /// Node `id`'s config file (what `bully pg adopt --config` reads).
    pub fn config(&self, id: NodeId) -> std::path::PathBuf {
        self.t.cluster.config_path(id)
    }

    /// `more` changes every node's `[postgres]` too, after the tune the cluster was
    /// prepared with: each config now, and each member added later
    /// ([`BullyPg::add_member`]). For settings known only once the temp dir exists
    /// (paths in it), before [`Prepared::start`].
    pub fn tune_more(
        &mut self,
        more: impl Fn(NodeId, &mut PostgresConfig) + Send + Sync + 'static,
    ) {
        for id in self.t.cluster.ids() {
            self.t
                .cluster
                .edit_config(id, |c| more(id, c.postgres.as_mut().expect("[postgres]")))
                .unwrap();
        }
        let before = Arc::clone(&self.tune);
        self.tune = Arc::new(move |id, pg| {
            before(id, pg);
            more(id, pg);
        });
    }

    /// Node `id` keeps the server whose data dir is `dir` (another manager's, taken
    /// over with `bully pg adopt`): its config's `[postgres] data_dir`, and where the
    /// test's kills, probes and drop find the server.
    pub fn use_data_dir(&mut self, id: NodeId, dir: std::path::PathBuf) {
        self.t
            .cluster
            .edit_config(id, |c| {
                c.postgres.as_mut().expect("[postgres]").data_dir = dir.clone();
            })
            .unwrap();
        self.pg.set_data_dir(id, dir);
    }

    /// Starts HAProxy, the keepers and the nodes (each starts its server as a standby,
    /// or clones, or runs initdb); returns before anyone leads.
    pub fn start(mut self) -> BullyPg {
        let fronts = [self.front, self.reads];
        let haproxy = Haproxy::start_fronts(
            &example_dir(),
            self.t.dir.path(),
            &fronts,
            &self.pg.addrs,
            &self.http,
        );
        let configs = IDS
            .iter()
            .map(|&id| (id, self.t.cluster.config_path(id)))
            .collect();
        // The keepers first, as cluster.sh starts them: each waits for its node's socket.
        let keepers = Keepers::start(&binary(), &configs, self.t.dir.path());
        self.t.start_all();
        BullyPg {
            haproxy,
            keepers,
            parts: self,
        }
    }
}

impl Drop for BullyPg {
    /// The bully nodes go first, so no manager starts a server while the servers are
    /// being killed.
    fn drop(&mut self) {
        for id in self.ids() {
            let _ = self.t.cluster.kill(id);
        }
    }
}

/// Each node keeps its server: listening on its local address, reached by the others
/// at its `seen` one (through the forwarder); HTTP for HAProxy's checks.
fn configure(
    t: &TestCluster,
    pg: &PgServers,
    seen: &BTreeMap<NodeId, SocketAddr>,
    http: &BTreeMap<NodeId, SocketAddr>,
    secrets: &Secrets,
    tune: &Tune,
) {
    for id in t.cluster.ids() {
        configure_one(t, pg, id, seen[&id], http[&id], secrets, tune);
    }
}

/// Node `id`'s `[postgres]` and `[http]` ([`configure`]).
fn configure_one(
    t: &TestCluster,
    pg: &PgServers,
    id: NodeId,
    seen: SocketAddr,
    http: SocketAddr,
    secrets: &Secrets,
    tune: &Tune,
) {
    let mut postgres = PostgresConfig {
        bin_dir: Some(pg.bin.clone()),
        run_as: is_root().then(|| "postgres".to_string()),
        connect_address: Some(seen),
        synchronous: synchronous(),
        ..PostgresConfig::new(pg.data_dir(id), pg.addrs[&id])
    };
    match secrets {
        Secrets::Trust => postgres.auth = Auth::Trust,
        Secrets::Files(superuser, replication) => {
            postgres.superuser.password_file = Some(superuser.clone());
            postgres.replication.password_file = Some(replication.clone());
        }
        Secrets::Generated => {}
    }
    tune(id, &mut postgres);
    t.cluster
        .edit_config(id, |c| {
            c.postgres = Some(postgres);
            c.http = Some(HttpConfig::on(http));
        })
        .unwrap();
}

/// `bully pg adopt --config <config>` run to its end on a blocking thread (it stops a
/// server and runs PostgreSQL in single-user mode: seconds, which a test's async
/// workers must not wait out).
pub async fn adopt(config: &std::path::Path) -> std::process::Output {
    let config = config.display().to_string();
    tokio::task::spawn_blocking(move || {
        super::common::bully(&["pg", "adopt", "--config", config.as_str()])
    })
    .await
    .unwrap()
}

/// The table [`load`] fills: an id and a payload derived from it (`md5(id)`).
pub const LOADED: &str = "loaded";

/// What a table of loaded rows holds, or must hold: its row count, lowest and highest
/// id and their sum, and whether every payload is still the one written. With ids
/// unique (the primary key), `rows == max - min + 1` and the same bounds mean exactly
/// the same ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub rows: i64,
    pub min: i64,
    pub max: i64,
    pub sum: i64,
    pub intact: bool,
}

/// Creates [`LOADED`] through `client` and fills it in `transactions` committed
/// transactions of `per` rows each (ids 1, 2, ... in order); returns the tally of what
/// the server acknowledged. Panics on any error: nothing is supposed to fail here.
pub async fn load(client: &tokio_postgres::Client, transactions: i64, per: i64) -> Tally {
    client
        .batch_execute(&format!(
            "CREATE TABLE {LOADED} (id bigint PRIMARY KEY, payload text NOT NULL)"
        ))
        .await
        .unwrap();
    load_more(client, 0, transactions, per).await
}

/// [`load`]'s rows after id `after` (the table exists): `transactions` more committed
/// transactions of `per` rows; returns the tally of those rows alone.
pub async fn load_more(
    client: &tokio_postgres::Client,
    after: i64,
    transactions: i64,
    per: i64,
) -> Tally {
    let statement = client
        .prepare(&format!(
            "INSERT INTO {LOADED} SELECT g, md5(g::text) FROM generate_series($1::bigint, $2::bigint) g"
        ))
        .await
        .unwrap();
    for k in 0..transactions {
        let (first, last) = (after + k * per + 1, after + (k + 1) * per);
        client.execute(&statement, &[&first, &last]).await.unwrap();
    }
    let (min, max) = (after + 1, after + transactions * per);
    Tally {
        rows: max - min + 1,
        min,
        max,
        sum: (min..=max).sum(),
        intact: true,
    }
}

/// Both tallies as one: `earlier` then `later`, ids following on.
pub fn joined(earlier: Tally, later: Tally) -> Tally {
    assert_eq!(earlier.max + 1, later.min, "{earlier:?} then {later:?}");
    Tally {
        rows: earlier.rows + later.rows,
        min: earlier.min,
        max: later.max,
        sum: earlier.sum + later.sum,
        intact: earlier.intact && later.intact,
    }
}

/// The tally of [`LOADED`] as the server of `client` holds it (a standby's too: a
/// read-only query), or the error.
pub async fn tally(client: &tokio_postgres::Client) -> Result<Tally, String> {
    let sql = format!(
        "SELECT count(*), coalesce(min(id), 0), coalesce(max(id), 0), \
         coalesce(sum(id), 0)::bigint, coalesce(bool_and(payload = md5(id::text)), true) \
         FROM {LOADED}"
    );
    let row = tokio::time::timeout(Duration::from_secs(10), client.query_one(&sql, &[]))
        .await
        .map_err(|_| "no answer within 10 s".to_string())?
        .map_err(|e| e.to_string())?;
    Ok(Tally {
        rows: row.get(0),
        min: row.get(1),
        max: row.get(2),
        sum: row.get(3),
        intact: row.get(4),
    })
}

/// Waits (within [`AGREE`]) until node `id`'s server, logged in to with `password` (or
/// by trust), holds exactly `expected` in [`LOADED`] (a standby catching up replays
/// it); panics with what it last held and the logs.
pub async fn wait_tally(c: &BullyPg, id: NodeId, password: Option<&str>, expected: Tally) {
    let deadline = Instant::now() + AGREE;
    let mut last = String::from("no login");
    loop {
        if let Some(client) = connect_as(c.local(id), PROBE * 4, password).await {
            match tally(&client).await {
                Ok(found) if found == expected => {
                    eprintln!("=== node {id}'s server holds every row: {found:?}");
                    return;
                }
                Ok(found) => last = format!("{found:?}"),
                Err(e) => last = e,
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {id}'s server does not hold {expected:?} within {AGREE:?}; last: {last}\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The timeline the server of `client` writes (a primary) or receives (a standby's
/// WAL receiver), or `None` while a standby receives nothing.
pub async fn timeline(client: &tokio_postgres::Client) -> Option<i64> {
    let row = client
        .query_one(
            "SELECT CASE WHEN pg_is_in_recovery() \
             THEN (SELECT received_tli::bigint FROM pg_stat_wal_receiver) \
             ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint \
             END",
            &[],
        )
        .await
        .ok()?;
    row.get(0)
}

/// The system identifier of the server of `client` (`pg_control_system()`).
pub async fn system_identifier(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one("SELECT system_identifier FROM pg_control_system()", &[])
        .await
        .unwrap()
        .get(0)
}
