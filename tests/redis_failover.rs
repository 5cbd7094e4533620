//! The Redis-primary example under load, on real processes: three `redis-server`s
//! (the example's `redis.conf`, with a password), three bully nodes in quorum mode
//! running the example's hooks and health check (their peer links through the chaos
//! relay, so a node can be cut off on loopback), one keeper per node (`bully run
//! --config`, running the example's `fence.sh` when the node's office ends on its
//! host, as `cluster.sh` starts them), and HAProxy with the example's `haproxy.cfg`.
//! Two clients write through HAProxy at 100 keys/s each, one plain, one with
//! `WAIT 1 100`; in the pause, isolation and cut-off scenarios a third writes straight
//! to the old primary's Redis.
//!
//! Scenarios, in order: kill -9 of the primary's node and Redis; restart of that node
//! with an empty Redis; kill again and restart with its old data (a stale RDB file);
//! SIGSTOP of the coordinator for 3 s; the coordinator cut off from the others for 3 s;
//! the coordinator cut off for 3 s with its Redis out of the new primary's reach too
//! (its `bully node` SIGSTOPped, not its keeper nor its Redis: only its keeper can fence
//! it); SIGSTOP of the coordinator's bully AND Redis for 3 s; the primary's Redis
//! killed -9 and restarted empty under a living bully; a follower's Redis likewise; a
//! full-cluster restart from the RDB files.
//!
//! Each scenario asserts: no write acknowledged by `WAIT 1` lost; no write accepted by an
//! older epoch's primary after a newer one's primary accepted one (0 ms with two
//! writable primaries, the direct writer included); no accepted write lost at all
//! except where the old primary's Redis was killed or frozen (asynchronous
//! replication: the new primary cannot catch up from it); the new primary's data set
//! holds every key the old one had. The cut-off scenario also asserts that the old
//! Redis refused direct writes before the new primary accepted its first write, the
//! frozen one that the write gap stays well below the freeze, the Redis restarts that
//! the restarted Redis ends up replicating from the primary. The full-cluster restart must elect within 5 s and keep
//! every key; bully's own invariants (I1–I4, I6, I7) are checked on the event logs at
//! the end. It prints, per scenario, the write gap, the writes lost and the time with
//! two writable primaries: examples/redis-primary/README.md's figures come from
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
#[path = "common/tcp_cut.rs"]
mod tcp_cut;
#[path = "common/writers.rs"]
mod writers;

use bully::chaos::relay::Relay;
use bully::cluster::{Cluster, ClusterSpec};
use bully::config::{FenceConfig, HealthConfig, HooksConfig, HttpConfig};
use bully::ports::free_tcp_addrs;
use bully::protocol::{Mode, NodeId, Preempt, Timing};
use common::{installed, TestCluster};
use primary::{http_get, phase, quoted};
use redis_servers::{example_dir, Haproxy, Keepers, Redises};
use resp::{follows, is_primary, redis, Conn, Reply};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tcp_cut::CutProxy;
use writers::{Attempt, Style, Writer};

/// Every wait for the cluster to settle (generous: CI is a busy 2-core machine).
const AGREE: Duration = Duration::from_secs(30);
/// How long the pause and the isolation last.
const FAULT: Duration = Duration::from_secs(3);
/// The longest write gap through HAProxy allowed when the coordinator's bully and Redis
/// are frozen for [`FAULT`]: the failover (about 0.5 s, examples/redis-primary/README.md) plus `on-elected.sh`
/// giving up on the frozen Redis (`PEER_TIMEOUT`, 0.5 s), with room for a busy machine.
/// A hook that waited for the frozen Redis made it the whole freeze (3.2 s).
const FROZEN_GAP_BOUND: Duration = Duration::from_millis(2000);
/// What `fence.sh` logs (to its keeper's log) once it paused the local Redis.
const FENCED: &str = "writes paused (for at most";
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
    /// One keeper per node, running `fence.sh`.
    keepers: Keepers,
    /// Node 3's Redis as the other hosts reach it (hooks, health checks, replication):
    /// through a forwarder that can be cut like a partition. Its own keeper's fence and
    /// the clients (HAProxy, the direct writer) reach it directly.
    cut_3: CutProxy,
    /// Each node's Redis as the scripts know it (`nodes.conf`): node 3's through `cut_3`.
    seen: BTreeMap<NodeId, SocketAddr>,
    /// The writers through HAProxy.
    writers: Vec<Writer>,
    /// The writer straight to node 3's Redis, during the pause and the isolation.
    direct: Option<Writer>,
    /// Attempts of writers already stopped.
    finished: Vec<Attempt>,
    /// One line per scenario, printed at the end.
    figures: Vec<String>,
    /// Accepted (not replicated) writes lost with an old primary's Redis that was killed
    /// or frozen: asynchronous replication's window, allowed only there.
    lost_unreplicated: std::collections::BTreeSet<String>,
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
    s.cut_off_the_coordinator().await;
    s.freeze_the_coordinator_and_its_redis().await;
    s.restart_the_primarys_redis().await;
    s.restart_a_followers_redis().await;
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
        // One batch, so no two of the 2N + 2 listeners are handed the same port.
        let mut ports = free_tcp_addrs(2 * ids.len() + 2).unwrap().into_iter();
        let mut take_each = || -> BTreeMap<NodeId, SocketAddr> {
            ids.iter().map(|&id| (id, ports.next().unwrap())).collect()
        };
        let (redis_addrs, http) = (take_each(), take_each());
        let cut_3 = CutProxy::start(ports.next().unwrap(), redis_addrs[&3]);
        let mut seen = redis_addrs.clone();
        seen.insert(3, cut_3.addr);
        configure(&t, &seen, &redis_addrs, &http);
        let mut redises = Redises::new(t.dir.path(), redis_addrs, PASSWORD);
        for &id in &ids {
            redises.start(id, false);
        }
        let front = ports.next().unwrap();
        let haproxy = Haproxy::start(t.dir.path(), front, &redises.addrs, &http);
        // The keepers first, as cluster.sh starts them: each waits for its node's socket.
        let configs = ids
            .iter()
            .map(|&id| (id, t.cluster.config_path(id)))
            .collect();
        let keepers = Keepers::start(&common::binary(), &configs, t.dir.path());
        let mut t = t;
        t.start_all();
        let mut s = Scene {
            t,
            relay,
            redises,
            http,
            _haproxy: haproxy,
            keepers,
            cut_3,
            seen,
            writers: Vec::new(),
            direct: None,
            finished: Vec::new(),
            figures: Vec::new(),
            lost_unreplicated: Default::default(),
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
                .all(|&id| follows(self.addr(id), self.seen[&leader], self.auth()));
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
            let records: Vec<Vec<Attempt>> = self.writers.iter().map(|w| w.records()).collect();
            writers::each_wrote_on(&records, port, since).then_some(())
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
    /// and, unless the old primary's Redis was killed or frozen (`unreachable_primary`:
    /// what it had not yet sent to a replica is gone), no accepted write lost at all
    /// (the fences and the catch-up keep every write the old primary took).
    fn judge(
        &mut self,
        scenario: &str,
        primary: NodeId,
        window: Option<(Instant, Instant)>,
        unreachable_primary: bool,
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
            .filter(|k| !self.lost_unreplicated.contains(*k))
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
        if unreachable_primary {
            self.lost_unreplicated.extend(newly_lost);
        } else {
            assert!(
                newly_lost.is_empty(),
                "{scenario}: accepted writes lost, the old primary's Redis alive: {newly_lost:?}\n{}",
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

    /// Starts a writer straight to node 3's Redis (the old primary in what follows) and
    /// waits until that Redis accepted one of its writes.
    async fn start_direct_writer(&mut self) {
        let started = Instant::now();
        self.direct = Some(Writer::start(
            "direct",
            self.addr(3),
            PASSWORD,
            Style::Plain,
        ));
        let direct = self.direct.as_ref().expect("just started");
        primary::wait_logged(
            &self.t,
            "a direct write to node 3's Redis",
            AGREE,
            || async {
                direct
                    .records()
                    .iter()
                    .any(|a| a.start >= started && a.epoch.is_some())
                    .then_some(())
            },
        )
        .await;
    }

    fn stop_direct_writer(&mut self) -> Vec<Attempt> {
        let records = self.direct.take().expect("the direct writer").stop();
        self.finished.extend(records.iter().cloned());
        records
    }

    async fn pause_the_coordinator(&mut self) {
        let scenario = "SIGSTOP of the coordinator for 3 s";
        phase(scenario);
        self.start_direct_writer().await;
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
        self.start_direct_writer().await;
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

    /// The coordinator cut off, on one host: its `bully node` SIGSTOPped (not its keeper,
    /// not its Redis) and its Redis cut off from the other hosts (`cut_3`: their hooks,
    /// health checks and replication stream), for [`FAULT`]. Its own hooks cannot run
    /// and the new primary's cannot reach it; its replicas vanish without a goodbye, so
    /// `min-replicas-to-write` stops it only 2 s later: only its keeper can fence it
    /// in time, at its lease's end. The direct writer (a client on the old primary's
    /// side) must see the old Redis refuse writes before the new primary accepts any.
    async fn cut_off_the_coordinator(&mut self) {
        let scenario = "the coordinator cut off with its Redis out of reach for 3 s";
        phase(scenario);
        let fences_before = self.keepers.lines_with(3, FENCED).len();
        self.start_direct_writer().await;
        self.reach_3(false);
        let fault = Instant::now();
        self.t.cluster.pause(3).unwrap();
        self.wait_primary(2, &[1, 2]).await;
        self.wait_writes_on(2, fault).await;
        tokio::time::sleep(FAULT.saturating_sub(fault.elapsed())).await;
        let healed = Instant::now();
        self.reach_3(true);
        self.t.cluster.resume(3).unwrap();
        self.wait_primary(3, &[1, 2, 3]).await;
        self.wait_writes_on(3, Instant::now()).await;
        let settled = Instant::now();
        self.report_refusal(scenario, fault, healed);
        // What refused them: the keeper's fence (not min-replicas-to-write, later).
        let fences = self.keepers.lines_with(3, FENCED);
        assert!(
            fences.len() > fences_before,
            "{scenario}: node 3's keeper did not pause its Redis:\n{}",
            self.keepers.log(3)
        );
        eprintln!("=== {scenario}: node 3's keeper: {}", fences[fences_before]);
        // What the old primary accepted after the cut, before its fence, never reached a
        // replica: asynchronous replication's loss (no WAIT-acknowledged write).
        self.judge(scenario, 3, Some((fault, settled)), true);
    }

    /// SIGSTOP of the coordinator's `bully node` and of its Redis for [`FAULT`] under
    /// the write load: the new primary's `on_elected` must give up on the frozen Redis
    /// at once (every `redis-cli` has a timeout), so the write gap stays near the
    /// failover time, far below the freeze.
    async fn freeze_the_coordinator_and_its_redis(&mut self) {
        let scenario = "SIGSTOP of the coordinator's bully and Redis for 3 s";
        phase(scenario);
        let fault = Instant::now();
        self.t.cluster.pause(3).unwrap();
        self.redises.pause(3);
        self.wait_primary(2, &[1, 2]).await;
        self.wait_writes_on(2, fault).await;
        let failed_over = Instant::now();
        tokio::time::sleep(FAULT.saturating_sub(fault.elapsed())).await;
        self.redises.resume(3);
        self.t.cluster.resume(3).unwrap();
        self.wait_primary(3, &[1, 2, 3]).await;
        self.wait_writes_on(3, Instant::now()).await;
        let settled = Instant::now();
        let gap = self.haproxy_gap(fault, failed_over);
        eprintln!(
            "=== {scenario}: longest write gap through HAProxy until node 2 took writes: {} ms \
             (bound {} ms, freeze {} ms)",
            gap.as_millis(),
            FROZEN_GAP_BOUND.as_millis(),
            FAULT.as_millis()
        );
        // The frozen Redis may have acknowledged a plain write it had not sent yet.
        self.judge(scenario, 3, Some((fault, settled)), true);
        assert!(
            gap < FROZEN_GAP_BOUND,
            "{scenario}: writes stopped for {gap:?}: the failover waited for the frozen Redis\n{}",
            self.t.log_tail()
        );
    }

    /// The primary's Redis killed -9 and restarted empty at once, its bully alive. It
    /// comes back read-only, a replica of no one (redis.conf), so it neither takes
    /// writes nor empties the replicas; node 3's health check fails (not the Redis its
    /// on_elected promoted), node 3 steps down, a node whose Redis holds the data leads
    /// and the restarted Redis replicates from it; once caught up, node 3 takes over
    /// again (preempt = "always") with every acknowledged write.
    async fn restart_the_primarys_redis(&mut self) {
        let scenario = "kill -9 of the primary's Redis, restarted empty (bully alive)";
        phase(scenario);
        let fault = Instant::now();
        self.redises.kill(3);
        self.redises.start(3, false);
        let what = "a coordinator among nodes 1 and 2, ready, with Redis 3 replicating from it";
        let leader = primary::wait_logged(&self.t, what, AGREE, || async {
            for id in [2, 1] {
                let Ok((200, _)) = http_get(self.http[&id], "/coordinator").await else {
                    continue;
                };
                let others_follow = [1, 2, 3]
                    .iter()
                    .filter(|&&o| o != id)
                    .all(|&o| follows(self.addr(o), self.seen[&id], self.auth()));
                if is_primary(self.addr(id), self.auth()) && others_follow {
                    return Some(id);
                }
            }
            None
        })
        .await;
        self.wait_writes_on(leader, fault).await;
        eprintln!(
            "=== {scenario}: node {leader} leads, Redis 3 replicates from it, {} ms after the kill",
            fault.elapsed().as_millis()
        );
        self.wait_primary(3, &[1, 2, 3]).await;
        self.wait_writes_on(3, Instant::now()).await;
        let settled = Instant::now();
        self.judge(scenario, 3, Some((fault, settled)), true);
    }

    /// A follower's Redis (node 1's) killed -9 and restarted empty, its bully alive:
    /// node 1's health check repoints it at the primary (nothing else would: no epoch
    /// changed, so no hook runs). No write is lost.
    async fn restart_a_followers_redis(&mut self) {
        let scenario = "kill -9 of a follower's Redis, restarted empty (bully alive)";
        phase(scenario);
        let fault = Instant::now();
        self.redises.kill(1);
        self.redises.start(1, false);
        self.wait_primary(3, &[1, 2, 3]).await;
        eprintln!(
            "=== {scenario}: Redis 1 replicates from the primary again {} ms after the kill",
            fault.elapsed().as_millis()
        );
        let settled = Instant::now();
        self.judge(scenario, 3, Some((fault, settled)), false);
    }

    /// Whether the other hosts reach node 3's Redis.
    fn reach_3(&self, reachable: bool) {
        self.cut_3.cut(!reachable);
    }

    /// The longest write gap of the HAProxy writers within `[from, to]`.
    fn haproxy_gap(&self, from: Instant, to: Instant) -> Duration {
        let attempts = self.attempts();
        ["plain", "waited"]
            .iter()
            .map(|&writer| {
                let mine: Vec<Attempt> = attempts
                    .iter()
                    .filter(|a| a.writer == writer)
                    .cloned()
                    .collect();
                writers::longest_gap(&mine, from, to).0
            })
            .max()
            .unwrap_or_default()
    }

    /// The direct writer's view of a fault where only the old primary's keeper can
    /// fence it: once its Redis refused a direct write (blocked by the pause past the
    /// writer's timeout, or an error), it refused every one until `healed`, and it
    /// began refusing before a newer primary accepted any write.
    fn report_refusal(&mut self, scenario: &str, fault: Instant, healed: Instant) {
        let direct = self.direct.as_ref().expect("the direct writer").records();
        let first_refused = direct
            .iter()
            .filter(|a| a.start >= fault && a.epoch.is_none())
            .min_by_key(|a| a.start)
            .cloned()
            .unwrap_or_else(|| panic!("{scenario}: the old Redis never refused a direct write"));
        let accepted_later: Vec<&Attempt> = direct
            .iter()
            .filter(|a| a.start > first_refused.start && a.start < healed)
            .filter(|a| a.epoch.is_some())
            .collect();
        let old_epoch = self.report_direct(scenario, fault);
        let first_new = self
            .attempts()
            .iter()
            .filter(|a| a.epoch.is_some_and(|e| e > old_epoch))
            .map(|a| a.start)
            .min()
            .expect("a newer primary accepted writes");
        let since = |t: Instant| t.saturating_duration_since(fault).as_millis();
        eprintln!(
            "=== {scenario}: the old Redis refused direct writes from +{} ms ({}), \
             the new primary took its first write at +{} ms",
            since(first_refused.start),
            first_refused.error.as_deref().unwrap_or("-"),
            since(first_new)
        );
        assert!(
            accepted_later.is_empty(),
            "{scenario}: the old Redis accepted direct writes again before the heal: {:?}",
            accepted_later
                .iter()
                .map(|a| since(a.start))
                .collect::<Vec<_>>()
        );
        assert!(
            first_refused.start < first_new,
            "{scenario}: the old Redis still took writes when the new primary took its first"
        );
    }

    /// The direct writer's view of the fault: when the old primary (the epoch it wrote
    /// under before the fault) last accepted a direct write, and when a newer primary
    /// first accepted any write; the first must come before the second.
    fn report_direct(&mut self, scenario: &str, fault: Instant) -> u64 {
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
        old_epoch
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
        common::stop_all_and_assert_invariants(&mut self.t);
    }
}

/// The example's hooks, health check, fence command and readiness, pointed at this
/// test's Redis servers (nodes files) and password file. The hooks and health checks
/// reach the Redis servers at the `seen` addresses; the fence command, which only
/// touches its own host's Redis, at the `local` ones.
fn configure(
    t: &TestCluster,
    seen: &BTreeMap<NodeId, SocketAddr>,
    local: &BTreeMap<NodeId, SocketAddr>,
    http: &BTreeMap<NodeId, SocketAddr>,
) {
    let password_file = t.dir.path().join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let (nodes_file, local_file) = (
        t.dir.path().join("nodes.conf"),
        t.dir.path().join("local.conf"),
    );
    write_nodes_file(&nodes_file, seen);
    write_nodes_file(&local_file, local);
    let script = |name: &str, nodes: &Path| {
        format!(
            "REDIS_NODES_FILE={} REDIS_PASSWORD_FILE={} {}",
            quoted(nodes),
            quoted(&password_file),
            quoted(&example_dir().join(name))
        )
    };
    for id in t.cluster.ids() {
        t.cluster
            .edit_config(id, |c| {
                c.hooks = HooksConfig {
                    on_elected: Some(script("on-elected.sh", &nodes_file)),
                    on_demoted: Some(script("on-demoted.sh", &nodes_file)),
                    on_change: Some(script("on-change.sh", &nodes_file)),
                    ..HooksConfig::default()
                };
                c.health = Some(HealthConfig {
                    interval_ms: 250,
                    timeout_ms: 2000,
                    rise: 2,
                    fall: 2,
                    ..HealthConfig::new(script("health.sh", &nodes_file))
                });
                c.fence = FenceConfig {
                    command: Some(script("fence.sh", &local_file)),
                    ..FenceConfig::default()
                };
                c.http = Some(HttpConfig::on(http[&id]));
            })
            .unwrap();
    }
}

/// Writes the example's nodes file format (`ID HOST PORT` per line) for `redis`.
fn write_nodes_file(path: &Path, redis: &BTreeMap<NodeId, SocketAddr>) {
    let map: String = redis
        .iter()
        .map(|(id, a)| format!("{id} {} {}\n", a.ip(), a.port()))
        .collect();
    std::fs::write(path, map).unwrap();
}
