//! The operator's day as faults: in some seeds an operator changes the timing, D raised
//! or lowered three to ten times, sometimes with a new heartbeat. It asks for it with
//! `bully config set` (a settings change through the coordinator, at the first node
//! and now and then again), and also rolls it through the files, one node after
//! another (the next sometimes before the last is back), each stopped cleanly
//! (SIGTERM) or killed and started again on the new file, while the adversary's other
//! faults go on. The timing is cluster state (docs/design.md#cluster-settings): the
//! edited file must change nothing, and the set must keep every invariant while it
//! spreads, the members on the old D and the new one talking to each other. Now and
//! then the operator's network also cuts off the coordinator with a minority just as
//! a node restarts.
//!
//! On request (`Operator::TwoLost`) two stores are lost in a row: a node loses its disk
//! and restarts on an empty store, and before its recovery has ended
//! (src/protocol/recovery.rs) a second node loses its own. Before rules 4 and 5 of
//! that file the two vouched for each other's forgotten terms and a term was declared
//! twice (seed 53110, replayed in tests/simulation.rs). It is its own range, not in the
//! default ones: classic mode, which keeps every report counting, does not survive it.
//!
//! Everything here draws from the plan's own RNG, seeded apart from the adversary's: a
//! seed that draws no roll runs exactly as it did before rolls existed (the simulation
//! tests' fingerprint shows it).

use super::adversary::{Adversary, Todo};
use super::plans::{RollPlan, TwoLost};
use crate::protocol::{Change, Millis, Mode, NodeId, Timing};
use crate::sim::SimConfig;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

/// Share of seeds that roll a config change.
const SHARE: f64 = 0.2;

/// How a seed's operator faults are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// In no seed: every seed runs as it did before operator faults existed (to compare
    /// fingerprints with runs from before).
    None,
    /// In a share of the seeds.
    Some,
    /// In every seed (to hunt a flaw that needs one).
    Always,
    /// A config roll in every seed and two stores lost in a row in every seed with four
    /// members or more (docs/design.md#store-recovery), kept out of the other ranges.
    TwoLost,
    /// A forced recovery in every quorum seed without membership changes, and the other
    /// operator faults as in `Some` (`forced.rs`).
    Forced,
}

impl Operator {
    /// Whether a seed draws an operator fault that a share of the default seeds
    /// draws (`drawn`): in the default ranges as drawn, in every seed with `Always`,
    /// never with `None` or in the two-lost range (its seeds replay as found).
    pub(super) fn draws(self, drawn: bool) -> bool {
        match self {
            Operator::None | Operator::TwoLost => false,
            Operator::Some | Operator::Forced => drawn,
            Operator::Always => true,
        }
    }
}

/// Whether `seed` loses two stores in a row: with `Operator::TwoLost`, in every seed
/// with four members or more (in three, two stores are a majority's, and a term only
/// they accepted is gone for any rule). Draws nothing from the adversary's RNG.
pub(super) fn draw_two_lost(seed: u64, members: usize, operator: Operator) -> Option<TwoLost> {
    if operator != Operator::TwoLost || members < 4 {
        return None;
    }
    let rng = SmallRng::seed_from_u64(seed ^ 0x0105_7a05_0000_0003);
    Some(TwoLost { rng, first: None })
}

/// Share of seeds whose hooks take time.
const SLOW_HOOKS_SHARE: f64 = 0.2;

/// Whether `seed` gives its nodes hooks that take time (`on_demoted` and the keepers'
/// stop, src/protocol/machine/release.rs): from none to three times D, and now and
/// then one that hangs until the machine's bound (3 to 8 D) ends the wait. Sets them
/// in `config` and returns the steps that say so; draws nothing from the adversary's
/// RNG. Not in `Operator::TwoLost` (its seeds replay as found).
pub(super) fn draw_slow_hooks(
    seed: u64,
    config: &mut SimConfig,
    operator: Operator,
) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0400_c5ed_0000_0004);
    let drawn = rng.gen_bool(SLOW_HOOKS_SHARE);
    if !operator.draws(drawn) {
        return Vec::new();
    }
    let d = config
        .processes()
        .into_iter()
        .map(|id| config.timing_of(id).suspect_after_ms)
        .max()
        .unwrap_or(config.timing.suspect_after_ms);
    let bound = rng.gen_range(3 * d..=8 * d);
    config.release_bound_ms = Some(bound);
    let mut steps = vec![format!("slow hooks: the release waits at most {bound} ms")];
    for id in config.processes() {
        let took = match rng.gen_range(0..20) {
            0..=4 => 0,
            5..=9 => rng.gen_range(1..=d / 2),
            10..=17 => rng.gen_range(d..=3 * d),
            _ => Millis::MAX,
        };
        config.hook_ms.insert(id, took);
        steps.push(match took {
            Millis::MAX => format!("n{id}'s on_demoted hangs"),
            took => format!("n{id}'s on_demoted takes {took} ms"),
        });
    }
    steps
}

/// Whether `seed` rolls a config change, and if so the plan. Sets every process's
/// starting timing in `config` (the old D); draws nothing from the adversary's RNG.
pub(super) fn draw_roll(seed: u64, config: &mut SimConfig, operator: Operator) -> Option<RollPlan> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x09e7_a70e_0000_0002);
    let drawn = rng.gen_bool(SHARE);
    let rolls = match operator {
        Operator::None => false,
        Operator::Some | Operator::Forced => drawn,
        Operator::Always | Operator::TwoLost => true,
    };
    if !rolls {
        return None;
    }
    let base = config.timing.suspect_after_ms;
    let times = rng.gen_range(3..=10);
    let (d_from, d_to) = if rng.gen_bool(0.6) {
        (base * times, base) // lowered: the rolling restart the operator did
    } else {
        (base, base * times)
    };
    let new_heartbeat = rng.gen_bool(0.3);
    let mut from = BTreeMap::new();
    let mut to = BTreeMap::new();
    for id in config.processes() {
        let own = config.timing_of(id);
        let before = with_d(own, d_from, own.heartbeat_ms);
        let heartbeat = if new_heartbeat {
            rng.gen_range((own.heartbeat_ms / 2).max(1)..=own.heartbeat_ms * 2)
        } else {
            own.heartbeat_ms
        };
        from.insert(id, before);
        to.insert(id, with_d(own, d_to, heartbeat));
    }
    config.node_timing = from.clone();
    let mut order = config.processes();
    order.shuffle(&mut rng);
    Some(RollPlan {
        rng,
        to,
        from,
        order,
    })
}

/// `timing` with D set to `d` and the heartbeat to `heartbeat`, the heartbeat lowered
/// until the lease spans two of them (`Timing::validate`).
fn with_d(timing: Timing, d: Millis, heartbeat: Millis) -> Timing {
    let mut out = Timing {
        suspect_after_ms: d,
        heartbeat_ms: heartbeat.min(d / 3).max(1),
        ..timing
    };
    while out.validate().is_err() && out.heartbeat_ms > 1 {
        out.heartbeat_ms -= 1;
    }
    out
}

impl Adversary {
    /// Schedules the roll: when the operator reaches each node, among the other faults.
    pub(super) fn plan_roll(&mut self) {
        let Some(plan) = self.operator.as_mut() else {
            return;
        };
        let d_from = plan.from.values().map(|t| t.suspect_after_ms).max();
        let d_from = d_from.unwrap_or(300);
        let mut at = self.sim.now() + plan.rng.gen_range(200..=3000);
        let mut todo = Vec::new();
        for &id in &plan.order {
            todo.push((at, Todo::Roll(id)));
            // The next node right away now and then (two down at once), else once this
            // one is back, or well after.
            at += match plan.rng.gen_range(0..4) {
                0 => plan.rng.gen_range(0..=50),
                _ => plan.rng.gen_range(100..=2 * d_from),
            };
        }
        for (at, what) in todo {
            self.schedule(at, what);
        }
    }

    /// The operator reaches node `id`: its config file gets the new timing; a running
    /// node is stopped (SIGTERM or kill -9) and started again shortly after.
    pub(super) fn roll(&mut self, id: NodeId) {
        let Some(plan) = self.operator.as_mut() else {
            return;
        };
        let Some(&timing) = plan.to.get(&id) else {
            return;
        };
        let clean = plan.rng.gen_bool(0.5);
        let back_in = plan.rng.gen_range(1..=300);
        let cut = plan.rng.gen_bool(0.3);
        let heal_in = plan
            .rng
            .gen_range(50..=3 * timing.suspect_after_ms.max(100));
        let what = format!(
            "D={} heartbeat={}",
            timing.suspect_after_ms, timing.heartbeat_ms
        );
        let first = plan.order.first() == Some(&id);
        let ask = first || plan.rng.gen_bool(0.3);
        if ask {
            self.set_timing(timing);
        }
        self.sim.reconfigure(id, timing);
        if !self.sim.is_up(id) {
            self.note(format!("n{id} config rolled to {what} while down"));
            return;
        }
        let coordinator = self.coordinator();
        self.stop_or_kill(id, clean, &format!("to restart with {what}"));
        let at = self.sim.now() + back_in;
        self.schedule(at, Todo::Start(id));
        if let (true, Some(c)) = (cut, coordinator.filter(|&c| c != id)) {
            self.cut_off_with_a_minority(c, id, heal_in);
        }
    }

    /// `bully config set` of the roll's timing, asked of the coordinator (of any member
    /// now and then, which passes it on only if it leads), from the settings that node
    /// holds: the way the timing changes since it is cluster state
    /// (docs/design.md#cluster-settings). The file edit beside it must change nothing.
    fn set_timing(&mut self, timing: Timing) {
        // Not beside a forced recovery: like a membership change there, a list written
        // by the given-up side would be the newest the judge reads (`judge.rs`). Nor in
        // the two-lost range, whose seeds replay as found.
        if self.forced.is_some() || self.two_lost.is_some() {
            return;
        }
        let up = self.up();
        let leader = self.coordinator();
        let quorum = self.sim.config().mode == Mode::Quorum;
        let Some(plan) = self.operator.as_mut() else {
            return;
        };
        let target = match leader {
            Some(c) if plan.rng.gen_bool(0.8) => Some(c),
            _ => up.choose(&mut plan.rng).copied(),
        };
        let Some(target) = target else {
            return;
        };
        let mut set = vec![
            (
                "timing.heartbeat_ms".into(),
                timing.heartbeat_ms.to_string(),
            ),
            (
                "timing.suspect_after_ms".into(),
                timing.suspect_after_ms.to_string(),
            ),
        ];
        // The other cluster key of the protocol, now and then, in quorum mode (the
        // judge's classic allowance reads the seed's preempt). Drawn from a copy of the
        // plan's RNG, so the seeds recorded before keep their course.
        let mut fork = plan.rng.clone();
        if quorum && fork.gen_bool(0.3) {
            let word = ["always", "never"][fork.gen_range(0..2)];
            set.push(("preempt".into(), word.into()));
            self.preempt_asked = true;
        }
        let change = Change::Settings { set };
        self.note(format!("ask n{target}: {change}"));
        self.sim.change_members(target, change);
    }

    /// The network cuts `coordinator` and a minority off from the rest (`restarting`
    /// among the rest) until `heal_in` later.
    fn cut_off_with_a_minority(
        &mut self,
        coordinator: NodeId,
        restarting: NodeId,
        heal_in: Millis,
    ) {
        let Some(plan) = self.operator.as_mut() else {
            return;
        };
        let mut others: Vec<NodeId> = self
            .sim
            .config()
            .processes()
            .into_iter()
            .filter(|&n| n != coordinator && n != restarting)
            .collect();
        others.shuffle(&mut plan.rng);
        let all = others.len() + 2;
        let beside = ((all - 1) / 2).saturating_sub(1); // the coordinator's side stays a minority
        let mut side: Vec<NodeId> = others.drain(..beside.min(others.len())).collect();
        side.push(coordinator);
        others.push(restarting);
        side.sort_unstable();
        others.sort_unstable();
        let groups = vec![side, others];
        self.note(format!("partition {groups:?} (during the roll)"));
        self.sim.partition(&groups);
        let at = self.sim.now() + heal_in;
        self.schedule(at, Todo::Heal);
    }
}

impl Adversary {
    /// Schedules the first of two store losses among the other faults.
    pub(super) fn plan_two_lost(&mut self) {
        let Some(plan) = self.two_lost.as_mut() else {
            return;
        };
        let at = self.sim.now() + plan.rng.gen_range(300..=4000);
        self.schedule(at, Todo::LoseStore { second: false });
    }

    /// A node (the coordinator half the time) loses its store and restarts on an
    /// empty one; the first time, the second loss is scheduled for while it recovers
    /// (its first query goes out D after its start, the next T' later).
    pub(super) fn lose_store_in_a_row(&mut self, second: bool) {
        let coordinator = self.coordinator();
        let ids = self.ids();
        let Some(plan) = self.two_lost.as_mut() else {
            return;
        };
        let first = plan.first;
        let candidates: Vec<NodeId> = ids.into_iter().filter(|&n| Some(n) != first).collect();
        let id = match coordinator.filter(|&c| Some(c) != first) {
            Some(c) if plan.rng.gen_bool(0.5) => c,
            _ => match candidates.choose(&mut plan.rng) {
                Some(&n) => n,
                None => return,
            },
        };
        let back_in = plan.rng.gen_range(1..=300);
        let timing = self.sim.config().timing_of(id);
        let next_in = plan
            .rng
            .gen_range(0..=timing.suspect_after_ms + 2 * timing.coordinator_timeout_ms);
        plan.first = plan.first.or(Some(id));
        let which = if second { "second" } else { "first" };
        self.note(format!("n{id} loses its store ({which} in a row)"));
        self.sim.lose_store(id);
        let at = self.sim.now() + back_in;
        self.schedule(at, Todo::Start(id));
        if !second {
            let at = self.sim.now() + back_in + next_in;
            self.schedule(at, Todo::LoseStore { second: true });
        }
    }
}
