//! The PostgreSQL-primary example under load, on real processes: three bully nodes in
//! quorum mode, each keeping its own PostgreSQL 15 server with the built-in manager
//! (`[postgres]`: the first coordinator runs initdb, the others clone it; streaming
//! replication with `synchronous_standby_names = 'ANY 1 (...)'` kept by the
//! primary's manager), their peer links through the chaos relay (a node can be cut off
//! on loopback), each server reached by the other hosts through a `tcp_cut` forwarder
//! (`connect_address`: its replication and the other managers' round trips can be cut
//! too), one keeper per node (`bully run --config`, which fences the server), and
//! HAProxy with the example's `haproxy.cfg` (checks on `/primary` and `/replica`), set
//! up by `tests/common/postgres_bully.rs` (which `benches/pg_failover.rs` uses too, so
//! its figures are about this very cluster). Two writers insert rows through HAProxy at
//! 100/s each; every answered INSERT is a commit a standby flushed too, and is recorded.
//!
//! Scenarios, each on whichever node is the primary then (`preempt = "never"`: no
//! failback): kill -9 of the primary's host processes (server, bully node, keeper),
//! then that host restarted; kill -9, then SIGTERM, of the primary's bully node while
//! `bully pg restart` restarts its server in place; SIGSTOP of the primary's bully node for 3 s; SIGSTOP of
//! the primary's server for 3 s; the primary's host cut off (bully links and server)
//! for 3 s; a standby with the higher ID lagging behind (its WAL receiver SIGSTOPped)
//! when the primary's host is killed; a standby's data dir wiped (reported missing and
//! left alone until `bully pg reinit` clones it back) and the operator's `bully pg`
//! verbs; a fourth member added at runtime with
//! `bully member add` (it clones the primary and joins the synchronous set); a full
//! restart of every process.
//!
//! Each asserts: no committed row lost (every recorded commit is on the new primary);
//! no write accepted by an older epoch's primary after a newer one accepted one (each
//! write reads `bully.epoch`, the fencing token the manager sets on its primary); no
//! two servers writable at once (each server's role polled every 25 ms,
//! `postgres_load::RolePoller`); the old primary rejoins as a standby streaming from
//! the new one. It prints per scenario the longest write gap through HAProxy, the rows
//! lost, the time with two writable servers and when the old primary streamed again;
//! bully's invariants (I1–I4, I6, I7) are checked on the event logs at the end.
//!
//! The lagging-standby scenario checks the estimate on real servers: the manager
//! reports the server's position (its branch, then its WAL), so when the primary dies
//! bully elects the fresher standby although the lagging one has the higher ID. The
//! test asserts the lagging one is never asked to promote (its manager would refuse,
//! "holds newer WAL", and resign: safe, but a round slower), and that the fresher one
//! ends up primary with nothing lost.
//!
//! `PG_TEST_D_MS=1000` runs it at a slower D, `PG_TEST_SYNCHRONOUS=strict` in strict
//! mode (tests/common/postgres_bully.rs), `PG_TEST_FAULT_S=10` with pauses and cuts
//! of 10 s.
//!
//! Skips, saying why, without PostgreSQL 15 (or, as root, without a `postgres` user to
//! run it as) or HAProxy; `.ci/run` installs both.

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

use bully::protocol::NodeId;
use bully::signals::{self, Signal};
use common::installed;
use postgres_bully::{BullyPg, AGREE, IDS};
use postgres_cluster::wal_position;
use postgres_load::{PgWriter, RolePoller};
use primary::phase;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use writers::Attempt;

/// Every node but `old`.
fn others(old: NodeId) -> Vec<NodeId> {
    IDS.into_iter().filter(|&id| id != old).collect()
}

/// How long the pauses and the cut last at least: 3 s, or `PG_TEST_FAULT_S` seconds.
fn fault_span() -> Duration {
    let seconds = std::env::var("PG_TEST_FAULT_S").map_or(3, |s| {
        s.parse()
            .expect("PG_TEST_FAULT_S is a whole number of seconds")
    });
    Duration::from_secs(seconds)
}
/// How many `bully pg restart`s the restart scenario asks for at most to see the
/// primary's server down once (a restart in place takes a few hundred ms).
const RESTART_TRIES: u32 = 5;
/// What the keeper logs once it stopped (or killed) its node's server.
const FENCED: &str = "fence: the postgres server";

/// Everything the scenarios act on. Fields drop in this order: the writers and the
/// poller first, then the cluster (`postgres_bully::BullyPg`).
struct Scene {
    writers: Vec<PgWriter>,
    poller: RolePoller,
    c: BullyPg,
    /// Attempts of writers already stopped.
    finished: Vec<Attempt>,
    /// One line per scenario, printed at the end.
    figures: Vec<String>,
    /// The node whose server is the primary now.
    primary: NodeId,
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
    s.stop_the_primarys_node_during_its_restart(Signal::SIGKILL)
        .await;
    s.stop_the_primarys_node_during_its_restart(Signal::SIGTERM)
        .await;
    s.pause_the_primarys_bully().await;
    s.pause_the_primarys_server().await;
    s.cut_off_the_primary().await;
    s.lagging_standby_with_a_higher_id().await;
    s.wipe_a_standby_and_reinit_another().await;
    s.add_a_fourth_member().await;
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
        let c = BullyPg::start().await;
        let poller = RolePoller::start(&c.pg.addrs);
        let mut s = Scene {
            c,
            poller,
            writers: Vec::new(),
            finished: Vec::new(),
            figures: Vec::new(),
            primary: 0,
        };
        s.primary = s.c.wait_primary(&IDS).await;
        phase("the table, then two writers through HAProxy");
        // HAProxy routes to the primary once its next check (every 100 ms) saw it ready.
        let front = s.c.front;
        primary::wait_logged(
            &s.c.t,
            "the table created through HAProxy",
            AGREE,
            || async { postgres_load::create_table(front).await.ok() },
        )
        .await;
        s.writers = vec![PgWriter::start("w1", front), PgWriter::start("w2", front)];
        s.wait_writes_on(s.primary, Instant::now()).await;
        s
    }

    /// Each server as this test's clients reach it (the poller, the checks).
    fn local(&self, id: NodeId) -> SocketAddr {
        self.c.local(id)
    }

    /// Waits until node `id`'s server streams from the primary's again; returns when.
    async fn wait_rejoined(&self, id: NodeId) -> Instant {
        self.c.wait_rejoined(id, self.primary).await
    }

    /// Waits until every writer had a commit from node `id`'s server after `since`.
    async fn wait_writes_on(&self, id: NodeId, since: Instant) {
        let port = self.local(id).port();
        let what = format!("commits through HAProxy on node {id}'s server");
        primary::wait_logged(&self.c.t, &what, AGREE, || async {
            let records: Vec<Vec<Attempt>> = self.writers.iter().map(|w| w.records()).collect();
            writers::each_wrote_on(&records, port, since).then_some(())
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
        let logs = || self.c.logs();
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
        self.c.kill_host(old);
        self.primary = self.c.wait_primary(&others(old)).await;
        self.wait_writes_on(self.primary, fault).await;
        let settled = Instant::now();
        self.c.restart_host(old);
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(settled), Some(rejoined))
            .await;
    }

    /// `bully pg restart` of the primary's server (in place: its node keeps the office),
    /// and its bully node sent `signal` once the server stopped for it: SIGKILL (its
    /// keeper and whatever the restart started left running) or SIGTERM (a clean stop).
    /// The restart answers with an error; the keeper's fence stops any server the
    /// restart started by the lease's end, and a stopping node starts none; a standby
    /// takes over with every commit; the node, started again, brings its server back as
    /// a standby. The signal must land inside the restart: a restart that ended first is
    /// asked again, a bounded number of times.
    async fn stop_the_primarys_node_during_its_restart(&mut self, signal: Signal) {
        let scenario = &format!("{signal:?} of the primary's node during its bully pg restart");
        phase(scenario);
        let old = self.primary;
        let via = self.c.t.cluster.config_path(others(old)[0]);
        let server = self.local(old);
        let mut caught = None;
        for attempt in 1..=RESTART_TRIES {
            let mut restart = tokio::process::Command::new(common::binary())
                .args(["pg", "restart", &old.to_string(), "--config"])
                .arg(&via)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("start bully pg restart");
            // The server seen answering, then not answering twice in a row (one probe
            // may time out on a busy machine); bounded by the restart's own end (it
            // finished before this test saw the server down) and by AGREE.
            let deadline = Instant::now() + AGREE;
            let (mut seen_up, mut misses) = (false, 0);
            let stopped = loop {
                match postgres_cluster::role(server).await {
                    Some(_) => (seen_up, misses) = (true, 0),
                    None if seen_up => misses += 1,
                    None => {}
                }
                if misses >= 2 {
                    break true;
                }
                if restart.try_wait().expect("poll bully pg restart").is_some() {
                    break false;
                }
                assert!(
                    Instant::now() < deadline,
                    "{scenario}: attempt {attempt}: neither the server stopped nor the restart ended within {AGREE:?}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            if stopped {
                let fault = Instant::now();
                // A kill is noted in the history (the checker ends the node's office
                // there); a SIGTERM'd node logs its own leaving.
                match signal {
                    Signal::SIGKILL => self.c.kill_node(old),
                    _ => self.c.t.cluster.signal(old, signal).unwrap(),
                }
                caught = Some((fault, restart));
                break;
            }
            let out = restart.wait_with_output().await.unwrap();
            eprintln!(
                "=== {scenario}: attempt {attempt}: the restart ended before the server was seen down: {}",
                common::text(&out).trim()
            );
            self.wait_writes_on(old, Instant::now()).await;
        }
        let (fault, restart) = caught.unwrap_or_else(|| {
            panic!("{scenario}: no restart of {RESTART_TRIES} was caught with its server down")
        });
        self.primary = self.c.wait_primary(&others(old)).await;
        self.wait_writes_on(self.primary, fault).await;
        let settled = Instant::now();
        let deadline = Instant::now() + AGREE;
        while self.c.t.cluster.is_running(old) {
            assert!(
                Instant::now() < deadline,
                "{scenario}: node {old} still runs {AGREE:?} after the signal"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.c.t.cluster.start(old).unwrap();
        let rejoined = self.wait_rejoined(old).await;
        // The answer: the node refused the restart as its office ended (a clean stop),
        // or the client lost the connection (after a kill, once QUIC's idle timeout
        // passed).
        let answer = tokio::time::timeout(AGREE, restart.wait_with_output())
            .await
            .expect("bully pg restart did not answer after its node stopped")
            .unwrap();
        let text = common::text(&answer);
        eprintln!("=== {scenario}: the restart answered: {}", text.trim());
        let said = [
            "may or may not have taken effect",
            "ended during the restart",
            "stopping",
        ];
        assert!(
            !answer.status.success() && said.iter().any(|s| text.contains(s)),
            "{scenario}: the restart's answer does not say its node was lost or stopped: {text}"
        );
        self.judge(scenario, fault, Some(settled), Some(rejoined))
            .await;
    }

    /// SIGSTOP of the primary's `bully node` for [`fault_span`] (its server and keeper run
    /// on): its keeper must stop the server at the lease's end, before another node can
    /// be elected; once continued, the node follows and its server rejoins.
    async fn pause_the_primarys_bully(&mut self) {
        let scenario = &format!(
            "SIGSTOP of the primary's bully node for {} s",
            fault_span().as_secs()
        );
        phase(scenario);
        let old = self.primary;
        let fences = self.c.keepers.lines_with(old, FENCED).len();
        let fault = Instant::now();
        self.c.t.cluster.pause(old).unwrap();
        self.fail_over_and_heal(&others(old), fault, |s| s.c.t.cluster.resume(old).unwrap())
            .await;
        let what = format!("node {old}'s keeper fencing its server");
        primary::wait_logged(&self.c.t, &what, Duration::from_secs(10), || async {
            (self.c.keepers.lines_with(old, FENCED).len() > fences).then_some(())
        })
        .await;
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(Instant::now()), Some(rejoined))
            .await;
    }

    /// SIGSTOP of the primary's server (all its processes) for [`fault_span`]: its node's
    /// health check fails, the node steps down, and its keeper's fence SIGKILLs the
    /// frozen server by the lease's end (a stopped process dies too). Who leads next
    /// is a race: a standby, or the same node again with a fresh server its manager
    /// started after the kill (equal WAL, the higher ID). Never the frozen server.
    async fn pause_the_primarys_server(&mut self) {
        let scenario = &format!(
            "SIGSTOP of the primary's server for {} s",
            fault_span().as_secs()
        );
        phase(scenario);
        let old = self.primary;
        let frozen = self.c.pg.pid(old).expect("the primary's postmaster");
        let fault = Instant::now();
        self.c.pg.pause(old);
        self.fail_over_and_heal(&IDS, fault, |s| s.c.pg.resume(old))
            .await;
        let rejoined = match self.primary == old {
            true => {
                let now = self.c.pg.pid(old);
                assert_ne!(now, Some(frozen), "{scenario}: the frozen server leads");
                eprintln!("=== node {old} leads again, with a fresh server (was PID {frozen})");
                Instant::now()
            }
            false => self.wait_rejoined(old).await,
        };
        self.judge(scenario, fault, Some(Instant::now()), Some(rejoined))
            .await;
    }

    /// The primary's host cut off for [`fault_span`]: its bully links (the relay) and its
    /// server as the other hosts reach it (replication, their scripts). Its lease lapses
    /// without acks: its node's on_demoted and its keeper stop the server.
    async fn cut_off_the_primary(&mut self) {
        let scenario = &format!(
            "the primary's host cut off for {} s",
            fault_span().as_secs()
        );
        phase(scenario);
        let old = self.primary;
        let fault = Instant::now();
        self.c.cut_off(old, true);
        self.fail_over_and_heal(&others(old), fault, |s| s.c.cut_off(old, false))
            .await;
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(Instant::now()), Some(rejoined))
            .await;
    }

    /// After a fault at `fault`: waits for a primary `among` these nodes
    /// and its first commits, holds the fault until [`fault_span`] has passed, then
    /// `heal`s it.
    async fn fail_over_and_heal(
        &mut self,
        among: &[NodeId],
        fault: Instant,
        heal: impl FnOnce(&mut Self),
    ) {
        self.primary = self.c.wait_primary(among).await;
        self.wait_writes_on(self.primary, fault).await;
        eprintln!(
            "=== node {} took commits {} ms after the fault",
            self.primary,
            fault.elapsed().as_millis()
        );
        tokio::time::sleep(fault_span().saturating_sub(fault.elapsed())).await;
        heal(self);
    }

    /// The standby with the higher ID lags (its WAL receiver SIGSTOPped: a slow disk or
    /// link) while the other acknowledges every commit; then the primary's host is
    /// killed. The fresher standby (the lower ID) must become the primary with every
    /// commit. Today (est(S) not in bully yet) the lagging one is elected first and its
    /// its manager refuses; with the estimate the fresher one is elected at once.
    async fn lagging_standby_with_a_higher_id(&mut self) {
        let scenario = "a lagging standby with the higher ID, then kill -9 of the primary's host";
        phase(scenario);
        let old = self.primary;
        let standbys = others(old);
        let (fresh, lagging) = (standbys[0], standbys[1]);
        let receiver = postgres_cluster::walreceiver_pid(self.local(lagging))
            .await
            .expect("the lagging standby's WAL receiver");
        signals::send(receiver, Signal::SIGSTOP).unwrap();
        let what = format!("node {lagging}'s server 64 KiB behind node {fresh}'s");
        primary::wait_logged(&self.c.t, &what, AGREE, || async {
            let ahead = wal_position(self.local(fresh)).await?;
            let behind = wal_position(self.local(lagging)).await?;
            (ahead - behind > 65536).then_some(())
        })
        .await;
        let refusals = self
            .c
            .t
            .cluster
            .log_tail(200)
            .matches("holds newer WAL")
            .count();
        let fault = Instant::now();
        self.c.kill_host(old);
        self.c.wait_ready(&[fresh]).await;
        self.primary = fresh;
        // Its only standby now is the lagging one: commits wait for it to stream.
        let _ = signals::send(receiver, Signal::SIGCONT);
        self.wait_writes_on(fresh, fault).await;
        let settled = Instant::now();
        let elected_first = self
            .c
            .t
            .cluster
            .log_tail(200)
            .matches("holds newer WAL")
            .count()
            > refusals;
        eprintln!(
            "=== {scenario}: node {lagging} (lagging, the higher ID) {}",
            if elected_first {
                "was elected first, refused to promote and resigned"
            } else {
                "was never asked to promote"
            }
        );
        // On failure, what each node said of its eligibility, estimate and election.
        let said = || {
            let words = [
                "election by",
                "eligibility changed",
                "holds newer WAL",
                "declared",
            ];
            let tail = self.c.t.cluster.log_tail(200);
            let lines: Vec<&str> = tail
                .lines()
                .filter(|l| l.starts_with("---") || words.iter().any(|w| l.contains(w)))
                .collect();
            lines.join("\n")
        };
        assert!(
            !elected_first,
            "{scenario}: with est(S) the lagging standby must not be elected\n{}",
            said()
        );
        self.c.wait_primary(&[fresh, lagging]).await;
        self.c.restart_host(old);
        let rejoined = self.wait_rejoined(old).await;
        self.judge(scenario, fault, Some(settled), Some(rejoined))
            .await;
    }

    /// A standby's host loses its data dir (kill -9 of its processes, the directory
    /// removed): restarted, its manager clones it back from the primary. Then the
    /// operator's verbs on the other standby: `bully pg reload`, and `bully pg reinit`
    /// (a fresh clone, the old directory kept aside), after which it streams again;
    /// `bully pg reinit` of the primary is refused.
    async fn wipe_a_standby_and_reinit_another(&mut self) {
        let scenario = "a standby's data dir wiped; bully pg reload and reinit";
        phase(scenario);
        let standbys = others(self.primary);
        let (wiped, reinit) = (standbys[0], standbys[1]);
        let fault = Instant::now();
        self.c.kill_host(wiped);
        let data_dir = self.c.pg.data_dir(wiped);
        std::fs::remove_dir_all(&data_dir).unwrap();
        self.c.restart_host(wiped);
        let config = self.c.t.cluster.config_path(self.primary);
        let config = config.to_str().unwrap();
        let pg = |verb: &str, node: NodeId| {
            let node = node.to_string();
            common::bully(&["pg", verb, &node, "--config", config])
        };
        // Its server held the cluster's data: a missing data dir is a lost volume, left
        // for the operator (docs/design.md#the-durability-rule), not cloned over.
        let what = format!("node {wiped} reported as missing");
        let reported = common::wait_until(&what, Duration::from_secs(40), || async {
            let out = common::bully(&["status", "--cluster", "--config", config]);
            let text = common::text(&out);
            text.contains("missing").then_some(text)
        })
        .await;
        assert!(
            !data_dir.join("PG_VERSION").is_file(),
            "node {wiped}'s missing data dir was recreated: {reported}"
        );
        let cloned = pg("reinit", wiped);
        assert!(cloned.status.success(), "{}", common::text(&cloned));
        let rejoined = self.wait_rejoined(wiped).await;
        assert!(
            data_dir.join("PG_VERSION").is_file(),
            "node {wiped}'s server was not cloned back"
        );
        let reloaded = pg("reload", reinit);
        assert!(reloaded.status.success(), "{}", common::text(&reloaded));
        let refused = pg("reinit", self.primary);
        assert_eq!(refused.status.code(), Some(1), "{}", common::text(&refused));
        assert!(
            common::text(&refused).contains("switch over first"),
            "{}",
            common::text(&refused)
        );
        let reinitialized = pg("reinit", reinit);
        assert!(
            reinitialized.status.success(),
            "{}",
            common::text(&reinitialized)
        );
        let kept = common::set_aside(&self.c.pg.data_dir(reinit));
        assert!(
            kept.is_some(),
            "the old data dir is kept aside as <data_dir>.aside.<seconds>"
        );
        self.wait_rejoined(reinit).await;
        self.judge(scenario, fault, Some(Instant::now()), Some(rejoined))
            .await;
    }

    /// A fourth member added at runtime (`bully member add`, its data dir empty): its
    /// manager clones the primary, its server streams from it, and the primary names
    /// it in `synchronous_standby_names` under its own name once its report shows the
    /// primary's branch, where `pg_stat_replication` counts it among the quorum.
    async fn add_a_fourth_member(&mut self) {
        let scenario = "a fourth member added at runtime (clones, joins the synchronous set)";
        phase(scenario);
        let fault = Instant::now();
        self.c.add_member(4, self.primary).await;
        let rejoined = self.wait_rejoined(4).await;
        assert!(
            self.c.pg.data_dir(4).join("PG_VERSION").is_file(),
            "node 4's server was not cloned"
        );
        let primary = self.local(self.primary);
        primary::wait_logged(
            &self.c.t,
            "node 4's standby counted in the primary's quorum",
            AGREE,
            || async {
                postgres_cluster::sync_state(primary, "bully_4")
                    .await
                    .filter(|state| state == "quorum")
            },
        )
        .await;
        self.judge(scenario, fault, Some(Instant::now()), Some(rejoined))
            .await;
    }

    /// Every process of every host killed -9 and restarted: the servers come back as
    /// standbys, bully elects, its manager promotes one holding every commit.
    async fn restart_everything(&mut self) {
        let scenario = "full restart (kill -9 of everything)";
        phase(scenario);
        let stopped: Vec<PgWriter> = self.writers.drain(..).collect();
        for w in stopped {
            let records = w.stop().await;
            self.finished.extend(records);
        }
        let fault = Instant::now();
        let restarted = self.c.restart_all();
        let all = self.c.ids();
        let ready = self.c.wait_ready(&all).await;
        let ready_after = restarted.elapsed();
        self.primary = self.c.wait_primary(&all).await;
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
        common::stop_all_and_assert_invariants(&mut self.c.t);
    }
}
