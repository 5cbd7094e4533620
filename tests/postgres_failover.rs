//! The PostgreSQL-primary example under load, on real processes: three PostgreSQL
//! servers set up by the example's `pg.sh` (streaming replication, `synchronous_commit =
//! on`, `synchronous_standby_names = 'ANY 1 (...)'`), three bully nodes in quorum mode
//! running the example's hooks and health check (their peer links through the chaos
//! relay, so a node can be cut off on loopback; each server reached by the other hosts
//! through a `tcp_cut` forwarder, so its replication and the others' scripts can be cut
//! too), one keeper per node (`bully run --config`, running `fence.sh`), and HAProxy
//! with the example's `haproxy.cfg`. Two writers insert rows through HAProxy at 100/s
//! each; every answered INSERT is a commit a standby flushed too, and is recorded.
//!
//! Scenarios, each on whichever node is the primary then (`preempt = "never"`: no
//! failback): kill -9 of the primary's host processes (server, bully node, keeper),
//! then that host restarted; SIGSTOP of the primary's bully node for 3 s; SIGSTOP of
//! the primary's server for 3 s; the primary's host cut off (bully links and server)
//! for 3 s; a standby with the higher ID lagging behind (its WAL receiver SIGSTOPped)
//! when the primary's host is killed; a full restart of every process.
//!
//! Each asserts: no committed row lost (every recorded commit is on the new primary);
//! no write accepted by an older epoch's primary after a newer one accepted one; no
//! two servers writable at once (each server's role polled every 25 ms,
//! `postgres_load::RolePoller`); the old primary rejoins as a standby streaming from
//! the new one. It prints per scenario the longest write gap through HAProxy, the rows
//! lost, the time with two writable servers and when the old primary streamed again;
//! bully's invariants (I1–I4, I6, I7) are checked on the event logs at the end.
//!
//! The lagging-standby scenario depends on est(S) (issue 29) for its speed, not for its
//! safety: today bully elects by ID, so the lagging standby (the higher ID) is elected
//! first, its `on-elected.sh` refuses (a fresher standby exists) and it resigns; once
//! bully elects by `est=` (health.sh prints it) the fresher standby is elected at once.
//! The test asserts the fresher standby ends up primary with nothing lost either way,
//! and prints whether the lagging one was elected on the way (with
//! `BULLY_EXPECT_EST=1` it asserts it never was).
//!
//! Skips, saying why, without PostgreSQL 15 (or, as root, without a `postgres` user to
//! run it as) or HAProxy; `.ci/run` installs both.

mod common;
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

use bully::chaos::relay::Relay;
use bully::cluster::{Cluster, ClusterSpec};
use bully::config::{FenceConfig, HealthConfig, HooksConfig, HttpConfig};
use bully::ports::free_tcp_addrs;
use bully::protocol::{Mode, NodeId, Preempt, Timing};
use bully::signals::{self, Signal};
use common::{installed, TestCluster};
use postgres_cluster::{example_dir, role, wal_position, write_nodes_file, PgServers};
use postgres_load::{PgWriter, RolePoller};
use primary::{http_get, phase, quoted};
use redis_servers::{Haproxy, Keepers};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tcp_cut::CutProxy;
use writers::Attempt;

/// Every wait for the cluster to settle (generous: CI is a busy 2-core machine).
const AGREE: Duration = Duration::from_secs(40);
/// How long the pauses and the cut last.
const FAULT: Duration = Duration::from_secs(3);
/// What `fence.sh` logs (to its keeper's log) once it asked the server to shut down.
const FENCED: &str = "fast shutdown of the server";
const IDS: [NodeId; 3] = [1, 2, 3];

/// Everything the scenarios act on. Fields drop in this order: the writers and the
/// poller first, the servers before the temp dir (`t`, last) that holds their files.
struct Scene {
    writers: Vec<PgWriter>,
    poller: RolePoller,
    _haproxy: Haproxy,
    keepers: Keepers,
    /// Each server as the other hosts reach it (their scripts, replication): through a
    /// forwarder that can be cut like a partition.
    cuts: BTreeMap<NodeId, CutProxy>,
    pg: PgServers,
    relay: Relay,
    http: BTreeMap<NodeId, SocketAddr>,
    /// Attempts of writers already stopped.
    finished: Vec<Attempt>,
    /// One line per scenario, printed at the end.
    figures: Vec<String>,
    /// The node whose server is the primary now.
    primary: NodeId,
    t: TestCluster,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_primary_under_load_behind_haproxy() {
    let mut missing: Vec<String> = postgres_cluster::cannot_run().into_iter().collect();
    if !installed("haproxy") {
        missing.push("haproxy not installed (apt-get install haproxy)".into());
    }
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED: {}; this test runs examples/postgres-primary under load",
            missing.join("; ")
        );
        return;
    }
    let began = Instant::now();
    let mut s = Scene::start().await;
    s.kill_the_primary_host().await;
    s.pause_the_primarys_bully().await;
    s.pause_the_primarys_server().await;
    s.cut_off_the_primary().await;
    s.lagging_standby_with_a_higher_id().await;
    s.restart_everything().await;
    s.check_bully_invariants();
    eprintln!("\nscenario | longest write gap | committed lost | stale writes | two writable | old primary streams again");
    for line in &s.figures {
        eprintln!("{line}");
    }
    eprintln!("wall time {} s", began.elapsed().as_secs());
}

/// The two-writable measure itself (no PostgreSQL needed): node 1 writable until
/// +100 ms, node 2 from +60 ms: 40 ms with two writable servers; none when they do not
/// overlap, and a server that did not answer counts as not writable.
#[test]
fn two_writable_counts_only_overlapping_writable_samples() {
    use postgres_load::{two_writable, Sample};
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    let sample = |node, ms, writable| Sample {
        node,
        at: at(ms),
        writable,
    };
    let overlapping = [
        sample(1, 0, Some(true)),
        sample(1, 100, Some(false)),
        sample(2, 60, Some(true)),
        sample(2, 200, Some(true)),
        sample(2, 220, None),
    ];
    let overlap = two_writable(&overlapping, t0, at(300));
    assert_eq!(overlap.longest, Duration::from_millis(40));
    assert_eq!((overlap.nodes, overlap.began), (vec![1, 2], Some(at(60))));
    let apart = [
        sample(1, 0, Some(true)),
        sample(1, 50, None),
        sample(2, 60, Some(true)),
        sample(2, 90, Some(false)),
    ];
    assert_eq!(two_writable(&apart, t0, at(300)).longest, Duration::ZERO);
}

impl Scene {
    async fn start() -> Scene {
        phase("pg.sh init, three servers, three bully nodes behind the relay, keepers, HAProxy");
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
                timing: Timing::default(),
                preempt: Preempt::Never,
                mode: Mode::Quorum,
                binary: common::binary(),
                dir: dir.path().to_path_buf(),
            },
            |from, to, _| relay.front_addr(from, to),
        )
        .unwrap();
        let targets = IDS.iter().map(|&id| (id, cluster.addr(id))).collect();
        relay.start(&targets, 29).await.unwrap();
        // One batch, so no two listeners are handed the same port.
        let mut ports = free_tcp_addrs(3 * IDS.len() + 1).unwrap().into_iter();
        let mut take_each = || -> BTreeMap<NodeId, SocketAddr> {
            IDS.iter().map(|&id| (id, ports.next().unwrap())).collect()
        };
        let (local, seen, http) = (take_each(), take_each(), take_each());
        let front = ports.next().unwrap();
        let pg = PgServers::init(dir.path(), local.clone());
        let cuts = IDS
            .iter()
            .map(|&id| (id, CutProxy::start(seen[&id], local[&id])))
            .collect();
        let t = TestCluster { cluster, dir };
        configure(&t, &pg, &seen, &http);
        for id in IDS {
            pg.start(id);
        }
        let haproxy = Haproxy::start_from(&example_dir(), t.dir.path(), front, &local, &http);
        let configs = IDS
            .iter()
            .map(|&id| (id, t.cluster.config_path(id)))
            .collect();
        // The keepers first, as cluster.sh starts them: each waits for its node's socket.
        let keepers = Keepers::start(&common::binary(), &configs, t.dir.path());
        let mut t = t;
        t.start_all();
        let poller = RolePoller::start(&local);
        let mut s = Scene {
            t,
            relay,
            pg,
            http,
            cuts,
            keepers,
            poller,
            _haproxy: haproxy,
            writers: Vec::new(),
            finished: Vec::new(),
            figures: Vec::new(),
            primary: 0,
        };
        s.primary = s.wait_primary(&IDS).await;
        phase("the table, then two writers through HAProxy");
        // HAProxy routes to the primary once its next check (every 100 ms) saw it ready.
        primary::wait_logged(&s.t, "the table created through HAProxy", AGREE, || async {
            postgres_load::create_table(front).await.ok()
        })
        .await;
        s.writers = vec![PgWriter::start("w1", front), PgWriter::start("w2", front)];
        s.wait_writes_on(s.primary, Instant::now()).await;
        s
    }

    /// Each server as this test's clients reach it (the poller, the checks).
    fn local(&self, id: NodeId) -> SocketAddr {
        self.pg.addrs[&id]
    }

    /// Waits until one of `live` is the ready coordinator (/coordinator 200), its server
    /// a writable primary of that node's epoch, and every other server of `live`
    /// streams from it; returns that node.
    async fn wait_primary(&self, live: &[NodeId]) -> NodeId {
        let what = format!("a primary among {live:?} with the others streaming from it");
        let leader = primary::wait_logged(&self.t, &what, AGREE, || async {
            for &id in live {
                if !matches!(http_get(self.http[&id], "/coordinator").await, Ok((200, _))) {
                    continue;
                }
                if !role(self.local(id)).await.is_some_and(|r| r.writable()) {
                    return None;
                }
                for &other in live.iter().filter(|&&o| o != id) {
                    let port = self.cuts[&id].addr.port();
                    if !role(self.local(other))
                        .await
                        .is_some_and(|r| r.streams_from(port))
                    {
                        return None;
                    }
                }
                return Some(id);
            }
            None
        })
        .await;
        eprintln!("=== node {leader} leads; its server is the primary");
        leader
    }

    /// Waits until one of `among` is the ready coordinator (/coordinator 200) with a
    /// writable server; returns that node.
    async fn wait_ready(&self, among: &[NodeId]) -> NodeId {
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

    /// Waits until node `id`'s server streams from the primary's again; returns when.
    async fn wait_rejoined(&self, id: NodeId) -> Instant {
        let port = self.cuts[&self.primary].addr.port();
        let what = format!("node {id}'s server streaming from node {}'s", self.primary);
        let rejoined = primary::wait_logged(&self.t, &what, AGREE, || async {
            role(self.local(id))
                .await
                .is_some_and(|r| r.streams_from(port))
                .then(Instant::now)
        })
        .await;
        rejoined
    }

    /// Waits until every writer had a commit from node `id`'s server after `since`.
    async fn wait_writes_on(&self, id: NodeId, since: Instant) {
        let port = self.local(id).port();
        let what = format!("commits through HAProxy on node {id}'s server");
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
        for w in &self.writers {
            all.extend(w.records());
        }
        all
    }

    /// Judges a scenario from `fault` until `settled` and prints one figure line:
    /// asserts no committed row missing on the primary, no write accepted by an older
    /// epoch's primary after a newer one's, no two writable servers at once.
    async fn judge(
        &mut self,
        scenario: &str,
        fault: Instant,
        settled: Option<Instant>,
        rejoined: Option<Instant>,
    ) {
        let attempts = self.attempts();
        let mut gaps = Vec::new();
        let writers_ran = settled.is_some();
        let settled = settled.unwrap_or_else(Instant::now);
        for w in ["w1", "w2"].into_iter().filter(|_| writers_ran) {
            let mine: Vec<Attempt> = attempts.iter().filter(|a| a.writer == w).cloned().collect();
            let (gap, began) = writers::longest_gap(&mine, fault, settled);
            let at = began.saturating_duration_since(fault).as_millis();
            eprintln!(
                "=== {scenario}: {w}: longest gap {} ms from +{at} ms",
                gap.as_millis()
            );
            for line in writers::failures(&mine, fault, settled) {
                eprintln!("    {line}");
            }
            gaps.push(gap);
        }
        let gap = match gaps.into_iter().max() {
            Some(gap) => format!("{} ms", gap.as_millis()),
            None => "- (no writers)".to_string(),
        };
        let lost = postgres_load::missing(self.local(self.primary), &attempts)
            .await
            .unwrap_or_else(|e| panic!("{scenario}: reading the primary's rows: {e}"));
        let (stale, stale_span) = writers::stale_primary_writes(&attempts);
        let overlap = self.poller.two_writable(fault, settled);
        let (two, nodes) = (overlap.longest, overlap.nodes.clone());
        let rejoin = rejoined.map_or("-".to_string(), |r| {
            format!("+{} ms", r.saturating_duration_since(fault).as_millis())
        });
        let line = format!(
            "{scenario} | {gap} | {} | {stale} ({} ms) | {} ms {nodes:?} | {rejoin}",
            lost.len(),
            stale_span.as_millis(),
            two.as_millis()
        );
        eprintln!("=== figures: {line}");
        self.figures.push(line);
        let logs = || {
            let mut text = self.t.log_tail();
            for id in IDS {
                text += &self.pg.log_tail(id);
            }
            text
        };
        assert!(
            lost.is_empty(),
            "{scenario}: committed rows lost: {lost:?}\n{}",
            logs()
        );
        assert_eq!(
            stale,
            0,
            "{scenario}: an older primary took writes after a newer one\n{}",
            logs()
        );
        if let Some(began) = overlap.began {
            let near: Vec<String> = self
                .poller
                .samples()
                .iter()
                .filter(|x| {
                    x.at + Duration::from_millis(600) > began
                        && x.at < began + Duration::from_millis(300)
                })
                .map(|x| {
                    format!(
                        "node {} at {:+} ms: {:?}",
                        x.node,
                        x.at.saturating_duration_since(fault).as_millis(),
                        x.writable
                    )
                })
                .collect();
            panic!("{scenario}: servers {nodes:?} writable at once for {two:?} from +{} ms; samples:\n{}\n{}", began.saturating_duration_since(fault).as_millis(), near.join("\n"), logs());
        }
    }

    /// The primary's host loses every process: kill -9 of its server, its bully node
    /// and its keeper. The freshest standby must take over with every commit; then the
    /// host restarts (server as a standby, keeper, node) and its server rejoins by
    /// pg_rewind.
    async fn kill_the_primary_host(&mut self) {
        let scenario = "kill -9 of the primary's host (server, node, keeper)";
        phase(scenario);
        let old = self.primary;
        let fault = Instant::now();
        self.kill_host(old);
        let others: Vec<NodeId> = IDS.into_iter().filter(|&id| id != old).collect();
        self.primary = self.wait_primary(&others).await;
        self.wait_writes_on(self.primary, fault).await;
        let settled = Instant::now();
        self.restart_host(old);
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(settled), Some(rejoined))
            .await;
    }

    fn kill_host(&mut self, id: NodeId) {
        self.t.cluster.kill(id).unwrap();
        self.keepers.kill(id);
        self.pg.kill(id);
    }

    fn restart_host(&mut self, id: NodeId) {
        self.pg.start(id);
        let config = self.t.cluster.config_path(id);
        self.keepers.spawn(&common::binary(), id, &config);
        self.t.cluster.start(id).unwrap();
    }

    /// SIGSTOP of the primary's `bully node` for [`FAULT`] (its server and keeper run
    /// on): its keeper must stop the server at the lease's end, before another node can
    /// be elected; once continued, the node follows and its server rejoins.
    async fn pause_the_primarys_bully(&mut self) {
        let scenario = "SIGSTOP of the primary's bully node for 3 s";
        phase(scenario);
        let old = self.primary;
        let fences = self.keepers.lines_with(old, FENCED).len();
        let fault = Instant::now();
        self.t.cluster.pause(old).unwrap();
        self.fail_over_and_heal(old, fault, |s| s.t.cluster.resume(old).unwrap())
            .await;
        assert!(
            self.keepers.lines_with(old, FENCED).len() > fences,
            "{scenario}: node {old}'s keeper did not fence its server:\n{}",
            self.keepers.log(old)
        );
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(Instant::now()), Some(rejoined))
            .await;
    }

    /// SIGSTOP of the primary's server (all its processes) for [`FAULT`]: its node's
    /// health check fails, the node steps down; the fence's shutdown is pending in the
    /// frozen server and takes effect the moment it is continued.
    async fn pause_the_primarys_server(&mut self) {
        let scenario = "SIGSTOP of the primary's server for 3 s";
        phase(scenario);
        let old = self.primary;
        let fault = Instant::now();
        self.pg.pause(old);
        self.fail_over_and_heal(old, fault, |s| s.pg.resume(old))
            .await;
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(Instant::now()), Some(rejoined))
            .await;
    }

    /// The primary's host cut off for [`FAULT`]: its bully links (the relay) and its
    /// server as the other hosts reach it (replication, their scripts). Its lease lapses
    /// without acks: its node's on_demoted and its keeper stop the server.
    async fn cut_off_the_primary(&mut self) {
        let scenario = "the primary's host cut off for 3 s";
        phase(scenario);
        let old = self.primary;
        let others: Vec<NodeId> = IDS.into_iter().filter(|&id| id != old).collect();
        let fault = Instant::now();
        self.relay.partition(&[old], &others);
        self.cuts[&old].cut(true);
        self.fail_over_and_heal(old, fault, |s| {
            s.relay.heal();
            s.cuts[&old].cut(false);
        })
        .await;
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(Instant::now()), Some(rejoined))
            .await;
    }

    /// After a fault on node `old` at `fault`: waits for another primary and its first
    /// commits, holds the fault until [`FAULT`] has passed, then `heal`s it.
    async fn fail_over_and_heal(
        &mut self,
        old: NodeId,
        fault: Instant,
        heal: impl FnOnce(&mut Self),
    ) {
        let others: Vec<NodeId> = IDS.into_iter().filter(|&id| id != old).collect();
        self.primary = self.wait_primary(&others).await;
        self.wait_writes_on(self.primary, fault).await;
        eprintln!(
            "=== node {} took commits {} ms after the fault",
            self.primary,
            fault.elapsed().as_millis()
        );
        tokio::time::sleep(FAULT.saturating_sub(fault.elapsed())).await;
        heal(self);
    }

    /// The standby with the higher ID lags (its WAL receiver SIGSTOPped: a slow disk or
    /// link) while the other acknowledges every commit; then the primary's host is
    /// killed. The fresher standby (the lower ID) must become the primary with every
    /// commit. Today (est(S) not in bully yet) the lagging one is elected first and its
    /// on-elected.sh refuses; with est the fresher one is elected at once.
    async fn lagging_standby_with_a_higher_id(&mut self) {
        let scenario = "a lagging standby with the higher ID, then kill -9 of the primary's host";
        phase(scenario);
        let old = self.primary;
        let standbys: Vec<NodeId> = IDS.into_iter().filter(|&id| id != old).collect();
        let (fresh, lagging) = (standbys[0], standbys[1]);
        let receiver = postgres_cluster::walreceiver_pid(self.local(lagging))
            .await
            .expect("the lagging standby's WAL receiver");
        signals::send(receiver, Signal::SIGSTOP).unwrap();
        let what = format!("node {lagging}'s server 64 KiB behind node {fresh}'s");
        primary::wait_logged(&self.t, &what, AGREE, || async {
            let ahead = wal_position(self.local(fresh)).await?;
            let behind = wal_position(self.local(lagging)).await?;
            (ahead - behind > 65536).then_some(())
        })
        .await;
        let refusals = self
            .t
            .cluster
            .log_tail(200)
            .matches("holds newer WAL")
            .count();
        let fault = Instant::now();
        self.kill_host(old);
        self.wait_ready(&[fresh]).await;
        self.primary = fresh;
        // Its only standby now is the lagging one: commits wait for it to stream.
        let _ = signals::send(receiver, Signal::SIGCONT);
        self.wait_writes_on(fresh, fault).await;
        let settled = Instant::now();
        let elected_first = self
            .t
            .cluster
            .log_tail(200)
            .matches("holds newer WAL")
            .count()
            > refusals;
        eprintln!(
            "=== {scenario}: node {lagging} (lagging) {} (est(S) makes bully elect the fresher one at once)",
            if elected_first {
                "was elected first, refused to promote and resigned"
            } else {
                "was never asked to promote"
            }
        );
        if std::env::var_os("BULLY_EXPECT_EST").is_some() {
            assert!(
                !elected_first,
                "{scenario}: with est(S) the lagging standby must not be elected"
            );
        }
        self.wait_primary(&[fresh, lagging]).await;
        self.restart_host(old);
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(settled), Some(rejoined))
            .await;
    }

    /// Every process of every host killed -9 and restarted: the servers come back as
    /// standbys, bully elects, on-elected.sh promotes one holding every commit.
    async fn restart_everything(&mut self) {
        let scenario = "full restart (kill -9 of everything)";
        phase(scenario);
        let stopped: Vec<PgWriter> = self.writers.drain(..).collect();
        for w in stopped {
            let records = w.stop().await;
            self.finished.extend(records);
        }
        let fault = Instant::now();
        for id in IDS {
            self.kill_host(id);
        }
        for id in IDS {
            self.pg.start(id);
        }
        let restarted = Instant::now();
        for id in IDS {
            let config = self.t.cluster.config_path(id);
            self.keepers.spawn(&common::binary(), id, &config);
        }
        self.t.start_all();
        let ready = self.wait_ready(&IDS).await;
        let ready_after = restarted.elapsed();
        self.primary = self.wait_primary(&IDS).await;
        eprintln!(
            "=== {scenario}: node {ready} ready {} ms after the nodes started; node {} the \
             primary with every server streaming after {} ms",
            ready_after.as_millis(),
            self.primary,
            restarted.elapsed().as_millis()
        );
        self.judge(scenario, fault, None, None).await;
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

impl Drop for Scene {
    /// The bully nodes go first, so no health check starts a `rejoin.sh` (which would
    /// start a server) while the servers are being killed.
    fn drop(&mut self) {
        for id in IDS {
            let _ = self.t.cluster.kill(id);
        }
    }
}

/// The example's hooks, health check and fence command for each node, pointed at this
/// test's servers: the scripts reach the other servers at the `seen` addresses (through
/// the forwarders) and their own at its local one (`PG_LISTEN`).
fn configure(
    t: &TestCluster,
    pg: &PgServers,
    seen: &BTreeMap<NodeId, SocketAddr>,
    http: &BTreeMap<NodeId, SocketAddr>,
) {
    let nodes_file = t.dir.path().join("nodes.conf");
    write_nodes_file(&nodes_file, seen);
    for id in t.cluster.ids() {
        let local = pg.addrs[&id];
        let env = format!(
            "{} PG_LISTEN='{} {}'",
            pg.script_env(&nodes_file),
            local.ip(),
            local.port()
        );
        let script = |name: &str| format!("{env} {}", quoted(&example_dir().join(name)));
        t.cluster
            .edit_config(id, |c| {
                c.hooks = HooksConfig {
                    on_elected: Some(script("on-elected.sh")),
                    on_demoted: Some(script("on-demoted.sh")),
                    on_change: Some(script("on-change.sh")),
                    timeout_ms: 10_000,
                    ..HooksConfig::default()
                };
                c.health = Some(HealthConfig {
                    interval_ms: 250,
                    timeout_ms: 2000,
                    rise: 2,
                    fall: 2,
                    ..HealthConfig::new(script("health.sh"))
                });
                c.fence = FenceConfig {
                    command: Some(script("fence.sh")),
                    ..FenceConfig::default()
                };
                c.http = Some(HttpConfig::on(http[&id]));
            })
            .unwrap();
    }
}
