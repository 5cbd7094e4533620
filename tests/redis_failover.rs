//! The Redis-primary example under load, on real processes: three `redis-server`s
//! (the example's `redis.conf`, with a password), three bully nodes in quorum mode
//! running the example's hooks and health check (their peer links through the chaos
//! relay, so a node can be cut off on loopback), and HAProxy with the example's
//! `haproxy.cfg`. Two clients write through HAProxy at 100 keys/s each, one plain, one
//! with `WAIT 1 100`; in the pause and isolation scenarios a third writes (with WAIT)
//! straight to the old primary's Redis.
//!
//! Scenarios, in order: kill -9 of the primary's node and Redis; restart of that node
//! with an empty Redis; kill again and restart with its old data (a stale RDB file);
//! SIGSTOP of the coordinator for 3 s; the coordinator cut off from the others for 3 s;
//! a full-cluster restart from the RDB files.
//!
//! Each scenario asserts: no write acknowledged by `WAIT 1` lost; no write accepted by an
//! older epoch's primary after a newer one's primary accepted one (0 ms with two
//! writable primaries, the direct writer included); no accepted write lost at all
//! except to a kill -9 (asynchronous replication); the new primary's data set holds
//! every key the old one had. The full-cluster restart must elect within 5 s and keep
//! every key; bully's own invariants (I1–I4, I6, I7) are checked on the event logs at
//! the end. It prints, per scenario, the write gap, the writes lost and the time with
//! two writable primaries: the README's figures come from
//! `cargo test --release --test redis_failover -- --nocapture`.
//!
//! Timing: the example's (bully's defaults: heartbeat 100 ms, D 300 ms; the health check
//! every 250 ms). Skips, saying why, without `redis-server`, `redis-cli` or
//! `haproxy` (`.ci/run` installs them).

mod common;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/redis_servers.rs"]
mod redis_servers;
#[path = "common/resp.rs"]
mod resp;
#[path = "common/writers.rs"]
mod writers;

use bully::chaos::relay::Relay;
use bully::cluster::{Cluster, ClusterSpec};
use bully::config::{HealthConfig, HooksConfig, HttpConfig};
use bully::ports::free_tcp_addrs;
use bully::protocol::{Mode, NodeId, Preempt, Timing};
use common::{installed, TestCluster};
use primary::{http_get, phase, quoted};
use redis_servers::{example_dir, Haproxy, Redises};
use resp::{follows, is_primary, redis, Conn, Reply};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use writers::{Attempt, Style, Writer};

/// Every wait for the cluster to settle (generous: CI is a busy 2-core machine).
const AGREE: Duration = Duration::from_secs(30);
/// How long the pause and the isolation last.
const FAULT: Duration = Duration::from_secs(3);
/// The bound for an election after a full-cluster restart.
const FULL_RESTART_BOUND: Duration = Duration::from_secs(5);
const PASSWORD: &str = "bully-test-secret";

/// Everything the scenarios act on.
struct Scene {
    t: TestCluster,
    relay: Relay,
    redises: Redises,
    http: BTreeMap<NodeId, SocketAddr>,
    _haproxy: Haproxy,
    /// The writers through HAProxy.
    writers: Vec<Writer>,
    /// The writer straight to node 3's Redis, during the pause and the isolation.
    direct: Option<Writer>,
    /// Attempts of writers already stopped.
    finished: Vec<Attempt>,
    /// One line per scenario, printed at the end.
    figures: Vec<String>,
    /// Accepted (not replicated) writes a kill -9 lost: asynchronous replication's
    /// window, allowed only there.
    lost_to_kills: std::collections::BTreeSet<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_primary_under_load_behind_haproxy() {
    let missing: Vec<&str> = ["redis-server", "redis-cli", "haproxy"]
        .into_iter()
        .filter(|p| !installed(p))
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED: {missing:?} not installed (apt-get install redis-server haproxy; \
             .ci/run installs them); this test runs examples/redis-primary under load"
        );
        return;
    }
    let mut s = Scene::start().await;
    s.kill_the_primary("kill -9 of node 3 and its Redis").await;
    s.restart_node_3(false).await;
    s.kill_the_primary("kill -9 again (after a SAVE, for the stale-RDB restart)")
        .await;
    s.restart_node_3(true).await;
    s.pause_the_coordinator().await;
    s.isolate_the_coordinator().await;
    s.restart_everything().await;
    s.check_bully_invariants();
    eprintln!(
        "\nscenario | write gap plain / WAIT | WAIT-acked lost | accepted lost | two primaries"
    );
    for line in &s.figures {
        eprintln!("{line}");
    }
}

/// The scripts refuse a Redis older than 6.2 with a message that says why (no Redis
/// needed: `check_version` reads the version a probe found).
#[test]
fn scripts_refuse_redis_older_than_6_2_with_a_clear_message() {
    let common = example_dir().join("common.sh");
    let check = |version: &str| {
        let script = format!(". {}; version={version}; check_version", quoted(&common));
        std::process::Command::new("sh")
            .args(["-c", &script])
            .env("BULLY_NODE_ID", "1")
            .env("REDIS_NODES_FILE", example_dir().join("nodes.conf"))
            .env_remove("REDIS_PASSWORD_FILE")
            .output()
            .unwrap()
    };
    for old in ["6.0.16", "5.0.7", ""] {
        let out = check(old);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{old} accepted");
        assert!(
            said.contains("too old: these scripts need Redis >= 6.2"),
            "{old}: {said}"
        );
    }
    for fine in ["6.2.0", "7.0.15", "10.1.2"] {
        let out = check(fine);
        assert!(
            out.status.success(),
            "{fine}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Scene {
    async fn start() -> Scene {
        phase("three Redis servers (password, example redis.conf), three bully nodes behind the relay, HAProxy");
        let ids: Vec<NodeId> = vec![1, 2, 3];
        let mut dir = tempfile::Builder::new()
            .prefix("bully-redis-")
            .tempdir()
            .unwrap();
        let mut relay = Relay::bind(&ids).await.unwrap();
        let cluster = Cluster::create_routed(
            ClusterSpec {
                nodes: 3,
                timing: Timing::default(),
                preempt: Preempt::Always,
                mode: Mode::Quorum,
                binary: common::binary(),
                dir: dir.path().to_path_buf(),
            },
            |from, to, _| relay.front_addr(from, to),
        )
        .unwrap();
        let targets = ids.iter().map(|&id| (id, cluster.addr(id))).collect();
        relay.start(&targets, 13).await.unwrap();
        if std::env::var_os("BULLY_KEEP_TEST_DIR").is_some() {
            eprintln!("keeping {} (BULLY_KEEP_TEST_DIR)", dir.path().display());
            dir.disable_cleanup(true);
        }
        let t = TestCluster { cluster, dir };
        // One batch, so no two of the 2N + 1 listeners are handed the same port.
        let mut ports = free_tcp_addrs(2 * ids.len() + 1).unwrap().into_iter();
        let mut take_each = || -> BTreeMap<NodeId, SocketAddr> {
            ids.iter().map(|&id| (id, ports.next().unwrap())).collect()
        };
        let (redis_addrs, http) = (take_each(), take_each());
        configure(&t, &redis_addrs, &http);
        let mut redises = Redises::new(t.dir.path(), redis_addrs, PASSWORD);
        for &id in &ids {
            redises.start(id, false);
        }
        let front = ports.next().unwrap();
        let haproxy = Haproxy::start(t.dir.path(), front, &redises.addrs, &http);
        let mut t = t;
        t.start_all();
        let mut s = Scene {
            t,
            relay,
            redises,
            http,
            _haproxy: haproxy,
            writers: Vec::new(),
            direct: None,
            finished: Vec::new(),
            figures: Vec::new(),
            lost_to_kills: Default::default(),
        };
        s.wait_primary(3, &[1, 2, 3]).await;
        phase("two writers through HAProxy: plain SET, and SET + WAIT 1 100");
        s.writers = vec![
            Writer::start("plain", front, PASSWORD, Style::Plain),
            Writer::start("waited", front, PASSWORD, Style::Waiting),
        ];
        s.wait_writes_on(3, Instant::now()).await;
        s
    }

    fn auth(&self) -> Option<&str> {
        self.redises.auth()
    }

    fn addr(&self, id: NodeId) -> SocketAddr {
        self.redises.addrs[&id]
    }

    /// Waits until `leader` is the agreed coordinator of `live`, answers /coordinator
    /// 200, its Redis is the primary and every other live Redis replicates from it.
    async fn wait_primary(&self, leader: NodeId, live: &[NodeId]) {
        self.t.wait_for_leader(live, leader, AGREE).await;
        let what = format!("node {leader} ready and every Redis of {live:?} following its Redis");
        primary::wait_logged(&self.t, &what, AGREE, || async {
            let (code, _) = http_get(self.http[&leader], "/coordinator").await.ok()?;
            let primary = self.addr(leader);
            let followed = live
                .iter()
                .filter(|&&id| id != leader)
                .all(|&id| follows(self.addr(id), primary, self.auth()));
            (code == 200 && is_primary(primary, self.auth()) && followed).then_some(())
        })
        .await;
    }

    /// Writes node `id`'s Redis snapshot to disk. A replica's full sync makes the
    /// primary run a background save, and SAVE is refused while one runs: wait it out.
    async fn save(&self, id: NodeId) {
        let what = format!("SAVE on node {id}'s Redis");
        primary::wait_logged(&self.t, &what, AGREE, || async {
            match redis(self.addr(id), self.auth(), &["SAVE"]) {
                Ok(reply) if reply.is_ok() => Some(()),
                Ok(Reply::Error(e)) if e.contains("in progress") => None,
                other => panic!("{what}: {other:?}"),
            }
        })
        .await;
    }

    /// Waits until both HAProxy writers had a write accepted by node `id`'s Redis after
    /// `since`.
    async fn wait_writes_on(&self, id: NodeId, since: Instant) {
        let port = self.addr(id).port();
        let what = format!("writes through HAProxy accepted by node {id}'s Redis");
        primary::wait_logged(&self.t, &what, AGREE, || async {
            self.writers
                .iter()
                .all(|w| {
                    w.records()
                        .iter()
                        .any(|a| a.port == port && a.start > since && a.epoch.is_some())
                })
                .then_some(())
        })
        .await;
    }

    /// Every attempt so far, of every writer.
    fn attempts(&self) -> Vec<Attempt> {
        let mut all = self.finished.clone();
        for w in self.writers.iter().chain(&self.direct) {
            all.extend(w.records());
        }
        all
    }

    /// Reads `keys` from node `id`'s Redis.
    fn read_keys(&self, id: NodeId) -> impl FnMut(&[&str]) -> Vec<Option<String>> + '_ {
        let mut conn = Conn::open(self.addr(id), self.auth(), Duration::from_secs(10)).unwrap();
        move |keys: &[&str]| {
            let mut args = vec!["MGET"];
            args.extend_from_slice(keys);
            match conn.call(&args).unwrap() {
                Reply::Array(items) => items
                    .into_iter()
                    .map(|r| match r {
                        Reply::Bulk(v) => v,
                        _ => None,
                    })
                    .collect(),
                other => panic!("MGET: {other:?}"),
            }
        }
    }

    fn dbsize(&self, id: NodeId) -> i64 {
        match redis(self.addr(id), self.auth(), &["DBSIZE"]).unwrap() {
            Reply::Int(n) => n,
            other => panic!("DBSIZE: {other:?}"),
        }
    }

    /// Judges the writes against node `primary`'s data and prints one figure line (the
    /// write gaps within `window`, from the fault until it settled, if writers ran):
    /// asserts no WAIT-acknowledged write lost, no write accepted by a stale primary,
    /// and, unless the scenario `killed` the primary, no accepted write lost at all
    /// (the fence and the catch-up keep every write the old primary took).
    fn judge(
        &mut self,
        scenario: &str,
        primary: NodeId,
        window: Option<(Instant, Instant)>,
        killed: bool,
    ) {
        let attempts = self.attempts();
        let gap = |writer: &str| {
            let Some((fault, settled)) = window else {
                return "-".to_string();
            };
            let mine: Vec<Attempt> = attempts
                .iter()
                .filter(|a| a.writer == writer)
                .cloned()
                .collect();
            let (gap, began) = writers::longest_gap(&mine, fault, settled);
            let at = began.saturating_duration_since(fault).as_millis();
            eprintln!("=== {scenario}: {writer} writer: longest gap {gap:?} from +{at} ms");
            for line in writers::failures(&mine, fault, settled) {
                eprintln!("    {line}");
            }
            gap.as_millis().to_string()
        };
        let (plain_gap, waited_gap) = (gap("plain"), gap("waited"));
        let (acked_lost, accepted_lost) = writers::lost(&attempts, self.read_keys(primary));
        let (stale, overlap) = writers::stale_primary_writes(&attempts);
        let newly_lost: Vec<String> = accepted_lost
            .iter()
            .filter(|k| !self.lost_to_kills.contains(*k))
            .cloned()
            .collect();
        let line = format!(
            "{scenario} | {plain_gap} / {waited_gap} ms | {} | {} | {} ms ({stale} writes)",
            acked_lost.len(),
            newly_lost.len(),
            overlap.as_millis()
        );
        eprintln!("=== figures: {line}");
        self.figures.push(line);
        assert!(
            acked_lost.is_empty(),
            "{scenario}: writes acknowledged by WAIT 1 lost: {acked_lost:?}\n{}",
            self.t.log_tail()
        );
        assert_eq!(
            stale,
            0,
            "{scenario}: an older primary accepted writes after a newer one ({overlap:?})\n{}",
            self.t.log_tail()
        );
        if killed {
            self.lost_to_kills.extend(newly_lost);
        } else {
            assert!(
                newly_lost.is_empty(),
                "{scenario}: accepted writes lost without a kill: {newly_lost:?}\n{}",
                self.t.log_tail()
            );
        }
    }

    async fn kill_the_primary(&mut self, scenario: &str) {
        phase(scenario);
        // A snapshot first: the stale-RDB restart reads it (it misses what follows).
        self.save(3).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let fault = Instant::now();
        self.t.cluster.kill(3).unwrap();
        self.redises.kill(3);
        self.wait_primary(2, &[1, 2]).await;
        self.wait_writes_on(2, fault).await;
        let settled = Instant::now();
        self.judge(scenario, 2, Some((fault, settled)), true);
    }

    /// Restarts node 3 with an empty Redis, or (`keep`) with its stale RDB file: it must
    /// not lead before its Redis caught up; then it takes over, with every key.
    async fn restart_node_3(&mut self, keep: bool) {
        let scenario = if keep {
            "restart of node 3 with its old data"
        } else {
            "restart of node 3 with an empty Redis"
        };
        phase(scenario);
        let before = self.dbsize(2);
        let fault = Instant::now();
        self.redises.start(3, keep);
        let stale = self.dbsize(3);
        assert!(
            stale < before,
            "node 3's Redis should start behind ({stale} keys, node 2 has {before})"
        );
        self.t.cluster.start(3).unwrap();
        self.wait_primary(3, &[1, 2, 3]).await;
        self.wait_writes_on(3, fault).await;
        let settled = Instant::now();
        let after = self.dbsize(3);
        assert!(
            after >= before,
            "{scenario}: node 3's Redis leads with {after} keys, node 2's had {before}"
        );
        self.judge(scenario, 3, Some((fault, settled)), false);
    }

    /// Starts a writer straight to node 3's Redis (the old primary in what follows).
    fn start_direct_writer(&mut self) {
        self.direct = Some(Writer::start(
            "direct",
            self.addr(3),
            PASSWORD,
            Style::Plain,
        ));
    }

    fn stop_direct_writer(&mut self) -> Vec<Attempt> {
        let records = self.direct.take().expect("the direct writer").stop();
        self.finished.extend(records.iter().cloned());
        records
    }

    async fn pause_the_coordinator(&mut self) {
        let scenario = "SIGSTOP of the coordinator for 3 s";
        phase(scenario);
        self.start_direct_writer();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let fault = Instant::now();
        self.t.cluster.pause(3).unwrap();
        self.wait_primary(2, &[1, 2]).await;
        self.wait_writes_on(2, fault).await;
        tokio::time::sleep(FAULT.saturating_sub(fault.elapsed())).await;
        self.t.cluster.resume(3).unwrap();
        self.wait_primary(3, &[1, 2, 3]).await;
        self.wait_writes_on(3, Instant::now()).await;
        let settled = Instant::now();
        self.report_direct(scenario, fault);
        self.judge(scenario, 3, Some((fault, settled)), false);
    }

    async fn isolate_the_coordinator(&mut self) {
        let scenario = "the coordinator cut off from the others for 3 s";
        phase(scenario);
        self.start_direct_writer();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let fault = Instant::now();
        self.relay.partition(&[3], &[1, 2]);
        self.wait_primary(2, &[1, 2]).await;
        self.wait_writes_on(2, fault).await;
        tokio::time::sleep(FAULT.saturating_sub(fault.elapsed())).await;
        self.relay.heal();
        self.wait_primary(3, &[1, 2, 3]).await;
        self.wait_writes_on(3, Instant::now()).await;
        let settled = Instant::now();
        self.report_direct(scenario, fault);
        self.judge(scenario, 3, Some((fault, settled)), false);
    }

    /// The direct writer's view of the fault: when the old primary (the epoch it wrote
    /// under before the fault) last accepted a direct write, and when a newer primary
    /// first accepted any write; the first must come before the second.
    fn report_direct(&mut self, scenario: &str, fault: Instant) {
        let direct = self.stop_direct_writer();
        let old_epoch = direct
            .iter()
            .filter(|a| a.end < fault)
            .filter_map(|a| a.epoch)
            .max()
            .expect("direct writes before the fault");
        let last_old = direct
            .iter()
            .filter(|a| a.epoch == Some(old_epoch))
            .map(|a| a.end)
            .max();
        let first_new = self
            .attempts()
            .iter()
            .filter(|a| a.epoch.is_some_and(|e| e > old_epoch))
            .map(|a| a.start)
            .min();
        let since = |t: Option<Instant>| {
            t.map_or("-".into(), |t| {
                format!("{:+} ms", t.saturating_duration_since(fault).as_millis())
            })
        };
        eprintln!(
            "=== {scenario}: the old primary's Redis last accepted a direct write at {}, \
             the new primary first accepted one at {} (after the fault)",
            since(last_old),
            since(first_new)
        );
        if let (Some(old), Some(new)) = (last_old, first_new) {
            assert!(
                old < new,
                "{scenario}: the old primary accepted writes after the new one started"
            );
        }
    }

    async fn restart_everything(&mut self) {
        let scenario = "full-cluster restart from the RDB files";
        phase(scenario);
        let stopped: Vec<Attempt> = self.writers.drain(..).flat_map(Writer::stop).collect();
        self.finished.extend(stopped);
        primary::wait_logged(
            &self.t,
            "both replicas at the primary's offset",
            AGREE,
            || async {
                let offset = |id| {
                    resp::replication(self.addr(id), self.auth())
                        .and_then(|r| r.get("master_repl_offset").cloned())
                };
                let top = offset(3)?;
                (offset(1)? == top && offset(2)? == top).then_some(())
            },
        )
        .await;
        for id in [1, 2, 3] {
            self.save(id).await;
        }
        let keys = self.dbsize(3);
        for id in [1, 2, 3] {
            self.t.cluster.kill(id).unwrap();
            self.redises.kill(id);
        }
        for id in [1, 2, 3] {
            self.redises.start(id, true);
        }
        let restarted = Instant::now();
        self.t.start_all();
        let leader = primary::wait_logged(&self.t, "a ready coordinator", AGREE, || async {
            for (&id, &addr) in &self.http {
                if http_get(addr, "/coordinator").await.ok()?.0 == 200 {
                    return Some(id);
                }
            }
            None
        })
        .await;
        let took = restarted.elapsed();
        eprintln!(
            "=== {scenario}: node {leader} ready {} ms after the nodes started",
            took.as_millis()
        );
        assert!(
            took < FULL_RESTART_BOUND,
            "{scenario}: no primary within {FULL_RESTART_BOUND:?} (took {took:?})"
        );
        self.wait_primary(leader, &[1, 2, 3]).await;
        assert_eq!(
            self.dbsize(leader),
            keys,
            "{scenario}: keys before and after"
        );
        self.judge(scenario, leader, None, false);
    }

    /// I1–I4 on every node's event log, and quorum mode's I6 and I7.
    fn check_bully_invariants(&mut self) {
        phase("bully's invariants on the event logs");
        for id in self.t.cluster.ids() {
            let _ = self.t.cluster.stop(id, Duration::from_secs(5));
        }
        let history = self.t.cluster.history();
        let mut violations = bully::checker::check_safety(&history);
        let bound = bully::checker::lease_bound_ms(&Timing::default());
        violations.extend(bully::checker::check_no_overlap(&history, bound));
        violations.extend(bully::checker::check_one_per_term(&history));
        assert!(
            violations.is_empty(),
            "invariant violations: {violations:#?}"
        );
    }
}

/// The example's hooks, health check and readiness, pointed at this test's Redis
/// servers (nodes file) and password file.
fn configure(
    t: &TestCluster,
    redis: &BTreeMap<NodeId, SocketAddr>,
    http: &BTreeMap<NodeId, SocketAddr>,
) {
    let nodes_file = t.dir.path().join("nodes.conf");
    let map: String = redis
        .iter()
        .map(|(id, a)| format!("{id} {} {}\n", a.ip(), a.port()))
        .collect();
    std::fs::write(&nodes_file, map).unwrap();
    let password_file = t.dir.path().join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let script = |name: &str| {
        format!(
            "REDIS_NODES_FILE={} REDIS_PASSWORD_FILE={} {}",
            quoted(&nodes_file),
            quoted(&password_file),
            quoted(&example_dir().join(name))
        )
    };
    for id in t.cluster.ids() {
        t.cluster
            .edit_config(id, |c| {
                c.hooks = HooksConfig {
                    on_elected: Some(script("on-elected.sh")),
                    on_demoted: Some(script("on-demoted.sh")),
                    on_change: Some(script("on-change.sh")),
                    ..HooksConfig::default()
                };
                c.health = Some(HealthConfig {
                    interval_ms: 250,
                    timeout_ms: 2000,
                    rise: 2,
                    fall: 2,
                    ..HealthConfig::new(script("health.sh"))
                });
                c.http = Some(HttpConfig::on(http[&id]));
            })
            .unwrap();
    }
}
