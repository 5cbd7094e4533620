//! Random fault scenarios, one per seed, and their verdict on I1–I5.
//!
//! [`run_seed`] builds a cluster from the seed (2–9 nodes, default or fast timing,
//! sometimes a preempt delay, sometimes `preempt = never`, sometimes an ineligible
//! node), starts it (all at once: concurrent elections; or staggered), and lets an
//! adversary inject up to eight faults that look at the cluster's state: crash the
//! coordinator (with peer-down notices to some, all or none of the others), crash the
//! would-be winner right after its Answer or in the middle of declaring, restart the
//! highest node, pause, partition, deafen a node (one-way links), flip eligibility,
//! report a live coordinator down, lose a store.
//! Then every fault ends (heal, resume, sometimes restart the crashed), and the run
//! goes on for the I5 bound and as long again; I5 must hold from the deadline on.

use super::{CrashPoint, Sim, SimConfig};
use crate::checker::{
    check_convergence, check_no_overlap_with, check_one_per_term, check_start_delay,
    check_unique_terms, lease_bound_ms, quiet_window, Convergence, Leader, Violation,
};
use crate::history::{last_fault_ms, tail, Entry, Record};
use crate::protocol::{recovery, MessageKind, Millis, Mode, NodeId, Preempt, Role, Timing};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt::Write as _;

/// How many history entries a failure report shows.
pub const REPORT_TAIL: usize = 200;

/// The result of one seeded run: everything needed to judge and to debug it.
pub struct SeedRun {
    pub seed: u64,
    /// The cluster and settings the seed chose.
    pub description: String,
    /// The faults the adversary injected, with their times.
    pub steps: Vec<String>,
    pub history: Vec<Entry>,
    pub violations: Vec<Violation>,
    /// How many history entries existed when the first safety violation was found.
    pub first_violation_index: Option<usize>,
    /// Messages sent, by kind.
    pub sent: BTreeMap<MessageKind, u64>,
    pub last_fault_ms: Millis,
    /// The I5 deadline the run was judged against.
    pub deadline_ms: Millis,
    /// From the last fault to the last view change of a live node: how long the
    /// cluster really took to settle (compare with `deadline_ms - last_fault_ms`).
    pub settled_after_ms: Millis,
    /// Which flavour the seed chose, for coverage statistics.
    pub flavor: Flavor,
}

/// The settings a seed chose, for the test's coverage summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Flavor {
    pub mode: Mode,
    pub nodes: usize,
    /// A witness among the members (quorum mode).
    pub witness: bool,
    /// Message delays reach beyond T/2 (up to 1.5 T): Answers can miss their timeout.
    pub slow_network: bool,
    pub fast_timing: bool,
    pub preempt_delay: bool,
    pub preempt_never: bool,
    pub ineligible: bool,
    /// Nodes run different heartbeats and T, T' (same D).
    pub mixed_timing: bool,
    pub faults: usize,
}

impl SeedRun {
    /// No violation of any kind.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The failure message: seed, scenario, violations, the last [`REPORT_TAIL`]
    /// entries up to the first violation, and how to rerun just this seed.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "SIMULATION FAILED: seed {}", self.seed);
        let _ = writeln!(out, "scenario: {}", self.description);
        let _ = writeln!(out, "faults:");
        for step in &self.steps {
            let _ = writeln!(out, "  {step}");
        }
        let _ = writeln!(
            out,
            "last fault at {} ms, I5 deadline {} ms",
            self.last_fault_ms, self.deadline_ms
        );
        let _ = writeln!(out, "violations:");
        for v in &self.violations {
            let _ = writeln!(out, "  {v}");
        }
        let upto = self.first_violation_index.unwrap_or_else(|| {
            let at = self.violations.first().map_or(Millis::MAX, |v| v.at_ms);
            self.history.partition_point(|e| e.at_ms <= at)
        });
        let _ = writeln!(
            out,
            "last {REPORT_TAIL} history entries up to the first violation:"
        );
        out.push_str(&tail(
            &self.history[..upto.min(self.history.len())],
            REPORT_TAIL,
        ));
        let _ = writeln!(
            out,
            "rerun just this seed: SIM_SEED={} cargo test --test simulation -- --nocapture",
            self.seed
        );
        out
    }
}

/// Something scheduled for later by the adversary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Todo {
    Start(NodeId),
    Resume(NodeId),
    Heal,
    PeerDown { node: NodeId, peer: NodeId },
}

/// The adversary: its own RNG (so the sim's delay draws do not shift its choices),
/// the simulated cluster and the agenda of scheduled follow-ups.
struct Adversary {
    rng: SmallRng,
    sim: Sim,
    agenda: BinaryHeap<Reverse<(Millis, u64, Todo)>>,
    seq: u64,
    steps: Vec<String>,
    max_delay: Millis,
}

impl Adversary {
    fn schedule(&mut self, at: Millis, todo: Todo) {
        self.seq += 1;
        self.agenda.push(Reverse((at, self.seq, todo)));
    }

    /// Runs the cluster to `until`, carrying out scheduled follow-ups on time.
    fn run_to(&mut self, until: Millis) {
        while let Some(&Reverse((at, _, todo))) = self.agenda.peek() {
            if at > until {
                break;
            }
            self.agenda.pop();
            self.sim.run_until(at);
            self.carry_out(todo);
        }
        self.sim.run_until(until);
    }

    fn carry_out(&mut self, todo: Todo) {
        let now = self.sim.now();
        match todo {
            Todo::Start(id) if !self.sim.is_up(id) => {
                self.note(format!("start n{id}"));
                self.sim.start(id);
            }
            Todo::Resume(id) if self.sim.is_paused(id) => {
                self.note(format!("resume n{id}"));
                self.sim.resume(id);
            }
            Todo::Heal if self.sim.is_disturbed() => {
                self.note("heal".to_string());
                self.sim.heal();
            }
            Todo::PeerDown { node, peer } if self.sim.is_up(node) => {
                self.note(format!("n{node} told n{peer} is down"));
                self.sim.peer_down(node, peer);
            }
            _ => {}
        }
        debug_assert_eq!(now, self.sim.now());
    }

    fn note(&mut self, what: String) {
        self.steps.push(format!("{:>6} ms  {what}", self.sim.now()));
    }

    fn ids(&self) -> Vec<NodeId> {
        self.sim.config().ids.clone()
    }

    fn up(&self) -> Vec<NodeId> {
        self.ids()
            .into_iter()
            .filter(|&id| self.sim.is_up(id))
            .collect()
    }

    fn down(&self) -> Vec<NodeId> {
        self.ids()
            .into_iter()
            .filter(|&id| !self.sim.is_up(id))
            .collect()
    }

    /// The node that believes it leads (the highest if several), else the highest up.
    fn coordinator(&self) -> Option<NodeId> {
        let up = self.up();
        up.iter()
            .rev()
            .copied()
            .find(|&id| {
                self.sim
                    .view(id)
                    .is_some_and(|v| v.role == Role::Coordinator)
            })
            .or_else(|| up.last().copied())
    }

    fn pick(&mut self, from: &[NodeId]) -> Option<NodeId> {
        from.choose(&mut self.rng).copied()
    }

    /// After a crash, the survivors' transports may notice: none, some, or all at once.
    fn notices_for(&mut self, dead: NodeId) {
        let now = self.sim.now();
        let others: Vec<NodeId> = self.up();
        match self.rng.gen_range(0..3) {
            0 => {}
            1 => {
                for node in others {
                    if self.rng.gen_bool(0.4) {
                        let at = now + self.rng.gen_range(1..=2 * self.max_delay);
                        self.schedule(at, Todo::PeerDown { node, peer: dead });
                    }
                }
            }
            _ => {
                for node in others {
                    self.schedule(now + 1, Todo::PeerDown { node, peer: dead });
                }
            }
        }
    }

    fn maybe_restart_later(&mut self, id: NodeId, chance: f64, range: (Millis, Millis)) {
        if self.rng.gen_bool(chance) {
            let at = self.sim.now() + self.rng.gen_range(range.0..=range.1);
            self.schedule(at, Todo::Start(id));
        }
    }

    fn crash(&mut self, id: NodeId, why: &str) {
        self.note(format!("crash n{id} ({why})"));
        self.sim.crash(id);
        self.notices_for(id);
    }

    /// Any crash point: after a persist, or after sending one message of any kind.
    fn any_point(&mut self) -> CrashPoint {
        match MessageKind::ALL.choose(&mut self.rng) {
            Some(&kind) if self.rng.gen_bool(0.8) => CrashPoint::AfterSend(kind),
            _ => CrashPoint::AfterPersist,
        }
    }

    /// Starts every node, all at once (concurrent elections) or staggered; sometimes
    /// one or two fail their health check from the start (by config or by a later
    /// event). Returns whether some did.
    fn start_cluster(&mut self) -> bool {
        let ids = self.ids();
        let ineligible_from_start = self.rng.gen_bool(0.15);
        let mut unhealthy: Vec<NodeId> = ids.clone();
        unhealthy.shuffle(&mut self.rng);
        let two = ids.len() > 2 && self.rng.gen_bool(0.35);
        unhealthy.truncate(if two { 2 } else { 1 });
        let via_event = self.rng.gen_bool(0.5);
        if ineligible_from_start && !via_event {
            for &id in &unhealthy {
                self.note(format!("n{id} starts ineligible"));
                self.sim.set_eligible(id, false);
            }
        }
        let staggered = self.rng.gen_bool(0.5);
        for &id in &ids {
            let at = if staggered {
                self.rng.gen_range(0..=600)
            } else {
                0
            };
            self.schedule(at, Todo::Start(id));
        }
        self.run_to(0);
        if ineligible_from_start && via_event {
            let at = self.rng.gen_range(0..=300);
            self.run_to(at);
            for &id in &unhealthy {
                self.note(format!("n{id} ineligible"));
                self.sim.set_eligible(id, false);
            }
        }
        ineligible_from_start
    }

    /// Up to eight faults, some in quick bursts; returns how many.
    fn inject_faults(&mut self) -> usize {
        let faults = self.rng.gen_range(0..=8usize);
        let mut t = self.sim.now() + self.rng.gen_range(200..=1500);
        for _ in 0..faults {
            self.run_to(t);
            self.inject();
            t += if self.rng.gen_bool(0.3) {
                self.rng.gen_range(0..=40)
            } else {
                self.rng.gen_range(50..=1500)
            };
        }
        self.run_to(t);
        faults
    }

    /// One fault, chosen by weight among those that make sense right now.
    fn inject(&mut self) {
        let up = self.up();
        let down = self.down();
        let roll = self.rng.gen_range(0..122);
        match roll {
            0..=19 if !up.is_empty() => self.crash_coordinator(),
            20..=29 if !up.is_empty() => self.crash_random(&up),
            30..=44 => self.crash_coordinator_and_heir(&up),
            45..=59 if !down.is_empty() => self.restart_one(&down),
            60..=64 if !up.is_empty() => self.crash_and_quickly_restart_highest(&up),
            65..=74 if !up.is_empty() => self.pause_one(&up),
            75..=80 => self.partition(),
            81..=84 => self.lose_messages(),
            85..=88 if !up.is_empty() => self.arm_crash_anywhere(&up),
            89..=102 => self.flip_eligibility(&up),
            103..=109 => self.report_down_but_alive(&up),
            110..=117 if !up.is_empty() => self.lose_a_store(&up),
            118..=121 if !up.is_empty() => self.deafen_one(&up),
            _ => {}
        }
    }

    /// The coordinator crashes; it may come back later.
    fn crash_coordinator(&mut self) {
        let Some(c) = self.coordinator() else { return };
        self.crash(c, "coordinator");
        self.maybe_restart_later(c, 0.6, (50, 2000));
    }

    /// Any live node crashes; it may come back later.
    fn crash_random(&mut self, up: &[NodeId]) {
        let Some(n) = self.pick(up) else { return };
        self.crash(n, "random");
        self.maybe_restart_later(n, 0.5, (50, 2000));
    }

    /// The would-be winner dies after its Answer (or while declaring) as the coordinator crashes.
    fn crash_coordinator_and_heir(&mut self, up: &[NodeId]) {
        // The would-be winner dies after its Answer (or while declaring).
        let Some(c) = self.coordinator() else { return };
        let Some(&heir) = up.iter().rev().find(|&&n| n != c) else {
            return;
        };
        let point = match self.rng.gen_range(0..6) {
            0 | 1 => CrashPoint::AfterSend(MessageKind::Answer),
            2 => CrashPoint::AfterSend(MessageKind::Coordinator),
            3 => CrashPoint::AfterPersist,
            _ => self.any_point(),
        };
        self.note(format!("arm crash of n{heir} at {point:?}"));
        self.sim.arm_crash(heir, point);
        self.crash(c, "coordinator, heir armed");
        if let Some(&low) = up.iter().find(|&&n| n != heir && n != c) {
            let at = self.sim.now() + 1;
            self.schedule(at, Todo::PeerDown { node: low, peer: c });
        }
        self.maybe_restart_later(heir, 0.5, (300, 2500));
        self.maybe_restart_later(c, 0.3, (300, 2500));
    }

    /// A down node restarts, the highest one more often; sometimes into a crash loop.
    fn restart_one(&mut self, down: &[NodeId]) {
        let id = if self.rng.gen_bool(0.6) {
            down[down.len() - 1]
        } else {
            self.pick(down).unwrap_or(down[0])
        };
        self.note(format!("restart n{id}"));
        self.sim.start(id);
        if self.rng.gen_bool(0.25) {
            // A crash loop: it dies again somewhere in its first election.
            let point = self.any_point();
            self.note(format!("arm crash of n{id} at {point:?}"));
            self.sim.arm_crash(id, point);
        }
    }

    /// The highest node crashes and comes back before anyone suspects it.
    fn crash_and_quickly_restart_highest(&mut self, up: &[NodeId]) {
        // The highest node crashes and comes back before anyone suspects it.
        let top = up[up.len() - 1];
        self.crash(top, "highest, quick restart");
        let at = self.sim.now() + self.rng.gen_range(1..=200);
        self.schedule(at, Todo::Start(top));
    }

    /// A node (the coordinator half the time) dies and loses its disk; it usually comes
    /// back on an empty store, sometimes at once (a container restarted without its
    /// volume), sometimes much later (a replaced disk).
    fn lose_a_store(&mut self, up: &[NodeId]) {
        // The rule tolerates one lost store at a time (README, "What the guarantee
        // assumes"): not while another is empty and unrecovered.
        if self.ids().iter().any(|&id| self.sim.store_is_empty(id)) {
            return;
        }
        let Some(id) = self.coordinator_or_pick(up) else {
            return;
        };
        self.note(format!("n{id} loses its store"));
        self.sim.lose_store(id);
        self.notices_for(id);
        self.maybe_restart_later(id, 0.8, (1, 2500));
    }

    /// The coordinator half the time (none if there is none), else a random node of `up`.
    fn coordinator_or_pick(&mut self, up: &[NodeId]) -> Option<NodeId> {
        if self.rng.gen_bool(0.5) {
            self.coordinator()
        } else {
            self.pick(up)
        }
    }

    /// The coordinator or a random node pauses, and resumes later.
    fn pause_one(&mut self, up: &[NodeId]) {
        let Some(id) = self.coordinator_or_pick(up) else {
            return;
        };
        self.note(format!("pause n{id}"));
        self.sim.pause(id);
        let at = self.sim.now() + self.rng.gen_range(20..=1200);
        self.schedule(at, Todo::Resume(id));
    }

    /// The nodes split into two or three groups until a later heal.
    fn partition(&mut self) {
        let mut ids = self.ids();
        ids.shuffle(&mut self.rng);
        let parts = if ids.len() > 2 && self.rng.gen_bool(0.2) {
            3
        } else {
            2
        };
        let mut groups: Vec<Vec<NodeId>> = vec![Vec::new(); parts];
        for (i, id) in ids.into_iter().enumerate() {
            let g = if i < parts {
                i
            } else {
                self.rng.gen_range(0..parts)
            };
            groups[g].push(id);
        }
        groups.iter_mut().for_each(|g| g.sort_unstable());
        self.note(format!("partition {groups:?}"));
        self.sim.partition(&groups);
        let at = self.sim.now() + self.rng.gen_range(50..=2000);
        self.schedule(at, Todo::Heal);
    }

    /// One-way links: a live node (the coordinator half the time) hears no one until a
    /// later heal, while what it sends still arrives.
    fn deafen_one(&mut self, up: &[NodeId]) {
        let id = match self.coordinator() {
            Some(c) if self.rng.gen_bool(0.5) => c,
            _ => up[self.rng.gen_range(0..up.len())],
        };
        self.note(format!("deafen n{id}"));
        self.sim.deafen(id);
        let at = self.sim.now() + self.rng.gen_range(50..=2000);
        self.schedule(at, Todo::Heal);
    }

    /// A share of messages is lost until a later heal.
    fn lose_messages(&mut self) {
        let percent = self.rng.gen_range(5..=60);
        self.note(format!("lose {percent}% of messages"));
        self.sim.set_loss(percent);
        let at = self.sim.now() + self.rng.gen_range(50..=2000);
        self.schedule(at, Todo::Heal);
    }

    /// A live node will crash at a random point of its next steps.
    fn arm_crash_anywhere(&mut self, up: &[NodeId]) {
        let Some(id) = self.pick(up) else { return };
        let point = self.any_point();
        self.note(format!("arm crash of n{id} at {point:?}"));
        self.sim.arm_crash(id, point);
        self.maybe_restart_later(id, 0.7, (300, 2500));
    }

    /// An ineligible node becomes eligible again, or a node becomes ineligible.
    fn flip_eligibility(&mut self, up: &[NodeId]) {
        let ineligible: Vec<NodeId> = self
            .ids()
            .into_iter()
            .filter(|&id| !self.sim.is_eligible(id))
            .collect();
        if !ineligible.is_empty() && self.rng.gen_bool(0.6) {
            let Some(id) = self.pick(&ineligible) else {
                return;
            };
            self.note(format!("n{id} eligible again"));
            self.sim.set_eligible(id, true);
        } else {
            let id = if self.rng.gen_bool(0.5) {
                self.coordinator()
            } else {
                self.pick(up)
            };
            let Some(id) = id else { return };
            self.note(format!("n{id} ineligible"));
            self.sim.set_eligible(id, false);
        }
    }

    /// Reported down but alive: a node's transport wrongly reports a live peer down.
    fn report_down_but_alive(&mut self, up: &[NodeId]) {
        // Reported down but alive: a node's transport wrongly reports a live peer
        // down, the coordinator or any other (it then skips waiting for it).
        let target = if self.rng.gen_bool(0.5) {
            self.coordinator()
        } else {
            self.pick(up)
        };
        let Some(c) = target else { return };
        let others: Vec<NodeId> = up.iter().copied().filter(|&n| n != c).collect();
        let Some(f) = self.pick(&others) else {
            return;
        };
        self.note(format!("n{f} wrongly told n{c} is down"));
        self.sim.peer_down(f, c);
    }

    /// Ends every fault: disarm, heal, resume, run what is scheduled, make sure some
    /// live node may lead.
    fn calm_down(&mut self) {
        self.sim.disarm();
        while let Some(Reverse((at, _, _))) = self.agenda.peek().copied() {
            self.run_to(at);
        }
        if self.sim.is_disturbed() {
            self.note("heal".to_string());
            self.sim.heal();
        }
        for id in self.ids() {
            if self.sim.is_paused(id) {
                self.note(format!("resume n{id}"));
                self.sim.resume(id);
            }
        }
        if self.rng.gen_bool(0.3) {
            for id in self.down() {
                self.note(format!("restart n{id} (end)"));
                self.sim.start(id);
            }
        }
        if self.up().is_empty() {
            let ids = self.ids();
            let top = ids[ids.len() - 1];
            self.note(format!("restart n{top} (none left)"));
            self.sim.start(top);
        }
        if self.sim.config().mode == Mode::Quorum {
            // Quorum mode promises a coordinator only where a majority is up.
            let majority = self.ids().len() / 2 + 1;
            while self.up().len() < majority {
                let Some(id) = self.down().pop() else { break };
                self.note(format!("restart n{id} (for a majority)"));
                self.sim.start(id);
            }
        }
        // A node on an empty store votes and leads only once enough other members
        // report their terms (src/protocol/recovery.rs): M - q + 1 of them up.
        let members = self.ids().len();
        let needed = recovery::reports_needed(members, members / 2 + 1);
        while self.up().iter().any(|&id| self.sim.is_recovering(id)) && self.up().len() <= needed {
            let Some(id) = self.down().pop() else { break };
            self.note(format!("restart n{id} (for a store recovery)"));
            self.sim.start(id);
        }
        let up = self.up();
        if !up.iter().any(|&id| self.sim.is_eligible(id)) {
            let witnesses = self.sim.config().witnesses.clone();
            let top = up.iter().rev().copied().find(|id| !witnesses.contains(id));
            let top = match top {
                Some(top) => top,
                None => {
                    // Only a witness is up: start the highest other member.
                    let Some(id) = self
                        .down()
                        .into_iter()
                        .rev()
                        .find(|id| !witnesses.contains(id))
                    else {
                        return;
                    };
                    self.note(format!("restart n{id} (only a witness up)"));
                    self.sim.start(id);
                    id
                }
            };
            self.note(format!("n{top} eligible again (none eligible)"));
            self.sim.set_eligible(top, true);
        }
        // A peer-down notice may have been scheduled by the last fault.
        while let Some(Reverse((at, _, _))) = self.agenda.peek().copied() {
            self.run_to(at);
        }
    }
}

/// The cluster settings a seed chooses.
fn choose_cluster(seed: u64, mode: Mode, rng: &mut SmallRng) -> (SimConfig, Flavor) {
    let n = rng.gen_range(2..=9usize);
    let ids: Vec<NodeId> = if rng.gen_bool(0.7) {
        (1..=n as NodeId).collect()
    } else {
        let mut pool: Vec<NodeId> = (1..=60).collect();
        pool.shuffle(rng);
        let mut ids = pool[..n].to_vec();
        ids.sort_unstable();
        ids
    };
    let roll = rng.gen_range(0..100);
    let fast = (55..80).contains(&roll) || (roll >= 80 && rng.gen_bool(0.5));
    let mut timing = if fast {
        Timing::fast()
    } else {
        Timing::default()
    };
    if roll >= 80 {
        timing.preempt_delay_ms = rng.gen_range(20..=400);
    }
    let preempt = if rng.gen_bool(0.15) {
        Preempt::Never
    } else {
        Preempt::Always
    };
    // Usually below T/2, so an Answer always makes it within T (DESIGN: delays within
    // bounds); sometimes up to 1.5 T, where only safety is promised.
    let slow_network = rng.gen_bool(0.15);
    let max_delay = if slow_network {
        timing.answer_timeout_ms * 3 / 2
    } else {
        (timing.answer_timeout_ms / 2 - 1).min(20)
    };
    let witnesses = if mode == Mode::Quorum && n >= 3 && rng.gen_bool(0.2) {
        vec![ids[rng.gen_range(0..ids.len())]]
    } else {
        Vec::new()
    };
    let node_timing = if rng.gen_bool(0.2) {
        ids.iter()
            .map(|&id| (id, varied_timing(timing, rng)))
            .collect()
    } else {
        BTreeMap::new()
    };
    let flavor = Flavor {
        mode,
        witness: !witnesses.is_empty(),
        slow_network,
        nodes: n,
        fast_timing: fast,
        preempt_delay: timing.preempt_delay_ms > 0,
        preempt_never: preempt == Preempt::Never,
        ineligible: false,
        mixed_timing: !node_timing.is_empty(),
        faults: 0,
    };
    let config = SimConfig {
        seed,
        ids,
        timing,
        preempt,
        delay_ms: (1, max_delay),
        mode,
        witnesses,
        drift_permille: 10,
        flaw: None,
        node_timing,
    };
    (config, flavor)
}

/// One node's own timing around `base`: D and the preempt delay as everyone's (the
/// transport refuses a peer whose D differs), the heartbeat from half to 1.5 times
/// (at most D / 3, so the lease spans two heartbeats), T and T' up to 1.5 times (never
/// below `base`: the message delays are drawn below base T / 2), T' ≥ T.
fn varied_timing(base: Timing, rng: &mut SmallRng) -> Timing {
    let heartbeat_ms = rng
        .gen_range((base.heartbeat_ms / 2).max(1)..=base.heartbeat_ms * 3 / 2)
        .min(base.suspect_after_ms / 3);
    let answer_timeout_ms = rng.gen_range(base.answer_timeout_ms..=base.answer_timeout_ms * 3 / 2);
    let coordinator_timeout_ms = rng
        .gen_range(base.coordinator_timeout_ms..=base.coordinator_timeout_ms * 3 / 2)
        .max(answer_timeout_ms);
    let timing = Timing {
        heartbeat_ms,
        answer_timeout_ms,
        coordinator_timeout_ms,
        ..base
    };
    if timing.validate().is_ok() {
        timing
    } else {
        base
    }
}

/// Runs the scenario this seed describes and judges it. Deterministic in `seed`.
pub fn run_seed(seed: u64, mode: Mode) -> SeedRun {
    run_seed_with(seed, mode, None)
}

/// [`run_seed`] with a deliberately broken machine: the checkers must catch it.
pub fn run_seed_with(seed: u64, mode: Mode, flaw: Option<crate::protocol::Flaw>) -> SeedRun {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed_ad0e_0000_0001);
    let (mut config, mut flavor) = choose_cluster(seed, mode, &mut rng);
    config.flaw = flaw;
    let description = describe(&config);
    let judge = Judge {
        mode,
        timing: config.slowest_timing(),
        lease_bounds: config
            .ids
            .iter()
            .map(|&id| (id, lease_bound_ms(&config.timing_of(id))))
            .collect(),
        preempt: config.preempt,
        max_delay: config.delay_ms.1,
        slow_network: flavor.slow_network,
    };
    let mut adv = Adversary {
        rng,
        max_delay: config.delay_ms.1,
        sim: Sim::new(config),
        agenda: BinaryHeap::new(),
        seq: 0,
        steps: Vec::new(),
    };
    flavor.ineligible = adv.start_cluster();
    flavor.faults = adv.inject_faults();
    adv.calm_down();

    let last_fault = last_fault_ms(adv.sim.history()).unwrap_or(0);
    let deadline = judge.deadline(last_fault);
    adv.run_to(deadline + judge.timing.convergence_bound_in(mode));
    let history = adv.sim.history().to_vec();
    let live = adv.sim.live();
    let mut violations = adv.sim.violations().to_vec();
    violations.extend(judge.violations(&adv.sim, &history, &live, deadline));
    let settled = history
        .iter()
        .filter(|e| matches!(e.record, Record::View(_)) && live.contains(&e.node))
        .map(|e| e.at_ms)
        .max()
        .unwrap_or(0)
        .saturating_sub(last_fault);
    SeedRun {
        seed,
        description,
        steps: adv.steps,
        first_violation_index: adv.sim.first_violation_index(),
        sent: adv.sim.sent().clone(),
        history,
        violations,
        last_fault_ms: last_fault,
        deadline_ms: deadline,
        settled_after_ms: settled,
        flavor,
    }
}

/// The cluster and settings a seed chose, for the failure message.
fn describe(config: &SimConfig) -> String {
    let mut out = format!(
        "{} mode, nodes {:?}, witnesses {:?}, timing {:?}, preempt {:?}, delay {:?} ms, \
         clocks ±{}‰",
        config.mode,
        config.ids,
        config.witnesses,
        config.timing,
        config.preempt,
        config.delay_ms,
        config.drift_permille
    );
    for (id, t) in &config.node_timing {
        let _ = write!(
            out,
            "; n{id}: heartbeat {}, T {}, T' {}",
            t.heartbeat_ms, t.answer_timeout_ms, t.coordinator_timeout_ms
        );
    }
    out
}

/// Which checks apply to a run, and with which bounds, given its settings.
struct Judge {
    mode: Mode,
    /// The slowest node's timeouts (they bound convergence).
    timing: Timing,
    /// How long each node's office can outlast its pause (its own heartbeat sets its
    /// lease margin).
    lease_bounds: BTreeMap<NodeId, Millis>,
    preempt: Preempt,
    max_delay: Millis,
    slow_network: bool,
}

impl Judge {
    /// When the cluster must have converged after the last fault: the bound plus eight
    /// one-way delays of slack (see `convergence_deadline`), and the clocks' drift.
    fn deadline(&self, last_fault: Millis) -> Millis {
        let bound = self.timing.convergence_bound_in(self.mode) + 8 * self.max_delay;
        last_fault + bound + bound / 50
    }

    /// The history checks beyond the ones the simulator runs as it goes.
    fn violations(
        &self,
        sim: &Sim,
        history: &[Entry],
        live: &[NodeId],
        deadline_ms: Millis,
    ) -> Vec<Violation> {
        let (timing, mode) = (&self.timing, self.mode);
        // The node's clock may run up to 1% fast: its delay can end that much early.
        let mut violations = check_start_delay(history, timing.preempt_delay_ms * 98 / 100);
        if !self.slow_network {
            let mut quiet = quiet_window(timing, self.max_delay);
            if self.preempt == Preempt::Never && mode == Mode::Classic {
                // Such a node listens D after a start before it may declare (machine.rs
                // `start`), silent like one in a preempt delay.
                quiet.before_ms += timing.suspect_after_ms;
            }
            violations.extend(check_unique_terms(history, quiet));
        }
        if mode == Mode::Quorum {
            let bound = |node: NodeId| {
                self.lease_bounds
                    .get(&node)
                    .copied()
                    .unwrap_or_else(|| lease_bound_ms(timing))
            };
            violations.extend(check_no_overlap_with(history, bound));
            violations.extend(check_one_per_term(history));
        }
        // A quorum coordinator holds its lease only while acks come back within
        // D - 2 x heartbeat; on a slower network quorum mode promises safety, not a leader.
        let lease_holds = 2 * self.max_delay < timing.suspect_after_ms - 2 * timing.heartbeat_ms;
        if mode == Mode::Classic || lease_holds {
            let leader = match self.preempt {
                Preempt::Always => live
                    .iter()
                    .rev()
                    .copied()
                    .find(|&id| sim.is_eligible(id))
                    .map_or(Leader::AnyLive, Leader::Node),
                Preempt::Never => Leader::AnyLive,
            };
            let convergence = Convergence {
                live: live.to_vec(),
                leader,
                deadline_ms,
            };
            violations.extend(check_convergence(history, &convergence));
        }
        violations
    }
}
