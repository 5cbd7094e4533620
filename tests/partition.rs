//! Real processes behind the chaos relay, cut apart in three ways: the coordinator
//! alone, the coordinator with one follower (a minority pair), and a lone follower.
//!
//! Quorum mode must never have two coordinators (I6, I7 on the merged history), must
//! converge again after each heal (I1–I5 as the other real-process tests check them),
//! and a follower cut off alone must not drive the term up when it comes back (Q6:
//! it cannot reach a majority, so it does not raise the term; at most 1 is allowed).
//! Classic mode runs the same scenario for comparison: I1–I5 only, and its time with
//! two coordinators is printed (a partition gives one coordinator per side).
//!
//! Every phase is logged; every wait is bounded by a generous deadline (CI is a busy
//! 2-core machine); the nodes are killed by PID when the harness's cluster drops.

mod common;

use bully::chaos::harness::Harness;
use bully::chaos::office;
use bully::chaos::plan::Step;
use bully::checker::{self, Convergence, Leader, Violation};
use bully::history::{self, Entry};
use bully::protocol::{Mode, NodeId, Timing};
use bully::wall_clock::wall_ms;
use std::time::{Duration, Instant};

const NODES: u64 = 5;
const ALL: [NodeId; 5] = [1, 2, 3, 4, 5];
/// How long each partition lasts (at least: the majority side must also have agreed).
const CUT: Duration = Duration::from_millis(2500);
/// Every wait for agreement: the protocol needs well under 2 s even in quorum mode,
/// but CI's 2 cores are shared with everything else.
const AGREE: Duration = Duration::from_secs(30);

/// One scenario at a time: two 5-node clusters and their relays at once would starve
/// each other on 2 cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(mode: Mode) {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(scenario(mode));
}

#[test]
fn quorum_partitions_never_make_two_coordinators() {
    run(Mode::Quorum);
}

#[test]
fn classic_partitions_converge_after_each_heal() {
    run(Mode::Classic);
}

/// The cluster under test, and when the scenario started (for the phase log).
struct Scene {
    h: Harness,
    mode: Mode,
    started: Instant,
    _dir: tempfile::TempDir,
}

impl Scene {
    fn phase(&self, name: &str) {
        eprintln!(
            "=== [{} mode, {:>5.1} s] {name}",
            self.mode,
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Waits until every available node follows `leader`; panics with the history's
    /// tail and the node logs after [`AGREE`]. Returns the agreed term.
    async fn wait_for(&mut self, leader: NodeId) -> u64 {
        if self.h.wait_for_leader(leader, AGREE).await {
            let (_, epoch) = self.h.agreed().expect("agreed just now");
            eprintln!("    node {leader} leads at epoch {epoch}");
            return epoch.term;
        }
        panic!(
            "{} mode: the available nodes {:?} did not agree on node {leader} within \
             {AGREE:?}\n--- history (tail)\n{}{}",
            self.mode,
            self.h.available(),
            history::tail(&self.h.history(), 60),
            self.log_tail()
        );
    }

    /// Cuts `side` off from the rest and waits until the rest agree on
    /// `majority_leader`, then keeps the cut for at least [`CUT`] in all.
    async fn cut(&mut self, side: &[NodeId], majority_leader: NodeId) {
        let at = Instant::now();
        self.h.execute(Step::Partition(side.to_vec()));
        self.wait_for(majority_leader).await;
        tokio::time::sleep_until((at + CUT).into()).await;
    }

    /// Heals every link and waits until all nodes follow node 5 again.
    async fn heal(&mut self) -> u64 {
        self.h.execute(Step::Heal);
        self.wait_for(NODES).await
    }

    fn log_tail(&self) -> String {
        self.h.cluster.log_tail(15)
    }

    /// The merged history so far (every node's event log and the runner's records).
    fn history(&mut self) -> Vec<Entry> {
        self.h.poll();
        self.h.history()
    }
}

async fn scenario(mode: Mode) {
    let timing = Timing::default();
    let dir = tempfile::Builder::new()
        .prefix("bully-partition-")
        .tempdir()
        .expect("temp dir");
    let h = common::five_behind_relay(dir.path(), mode).await;
    let mut s = Scene {
        h,
        mode,
        started: Instant::now(),
        _dir: dir,
    };

    s.phase("start 5 nodes behind the relay; wait for node 5 to lead");
    s.wait_for(NODES).await;

    s.phase("cut the coordinator (5) off alone; the other four elect node 4");
    s.cut(&[5], 4).await;
    s.phase("heal; node 5 leads again");
    s.heal().await;

    s.phase("split {4, 5} | {1, 2, 3}; the majority side elects node 3");
    s.cut(&[4, 5], 3).await;
    s.phase("heal; node 5 leads again");
    s.heal().await;

    s.phase("cut follower 1 off alone; node 5 keeps leading the other four");
    let before = history::highest_term(&s.history());
    s.cut(&[1], 5).await;
    s.phase("heal; node 1 follows node 5 again");
    s.heal().await;
    let converged_at = wall_ms();
    let after = history::highest_term(&s.history());
    eprintln!("    highest term {before} before the lone follower's cut, {after} after");

    s.phase("let the converged cluster run a moment, then read the merged history");
    let settle = Duration::from_millis(3 * timing.heartbeat_ms + timing.suspect_after_ms);
    tokio::time::sleep(settle).await;
    let history = s.history();
    let end_ms = history.last().map_or(converged_at, |e| e.at_ms);
    let figures = office::figures(&history, &ALL, &timing, mode, end_ms);
    eprintln!(
        "    {} mode: {} ms with two coordinators, {} ms with the majority side leaderless",
        mode, figures.two_coordinators_ms, figures.majority_side_leaderless_ms
    );

    s.phase("check I1-I5 (and I6, I7 in quorum mode)");
    let mut violations: Vec<Violation> = checker::check_safety(&history);
    violations.extend(checker::check_convergence(
        &history,
        &Convergence {
            live: ALL.to_vec(),
            leader: Leader::Node(NODES),
            deadline_ms: converged_at,
        },
    ));
    let mut quorum_rules = checker::check_no_overlap(&history, checker::lease_bound_ms(&timing));
    quorum_rules.extend(checker::check_one_per_term(&history));
    match mode {
        Mode::Quorum => violations.extend(quorum_rules),
        Mode::Classic => {
            for v in &quorum_rules {
                eprintln!("    (classic, not judged) {v}");
            }
        }
    }
    s.h.stop_all();
    let show = |list: &[Violation]| {
        list.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        violations.is_empty(),
        "{mode} mode: invariant violations:\n{}\n--- history (tail)\n{}",
        show(&violations),
        history::tail(&history, 80)
    );
    if mode == Mode::Quorum {
        assert_eq!(
            figures.two_coordinators_ms, 0,
            "quorum mode had two coordinators at once"
        );
        assert!(
            after <= before + 1,
            "the lone follower's cut raised the highest term from {before} to {after}\n{}",
            history::tail(&history, 80)
        );
        // Both cuts of the coordinator cost the majority side a failover: the figure
        // must see it.
        assert!(figures.majority_side_leaderless_ms > 0, "{figures:?}");
    }
}
