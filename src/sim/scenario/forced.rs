//! A forced recovery used while the old majority is alive: an operator stops a
//! minority of the members (the survivors), runs `bully recover --force` with them on
//! each (src/node/drive/forced_recovery.rs) and starts them again, while the members
//! it gives up still run, most often cut off from the survivors until a heal, now and
//! then in plain reach. It is the misuse docs/recovery.md warns of; what is owed is that the
//! given-up side stands down once it meets the survivors (src/protocol/machine/
//! given_up.rs), and the judge checks that (`judge.rs`). Before that rule both sides
//! led for as long as they ran (sabotage `Flaw::IgnoresGivenUp`).
//!
//! Quorum mode only (classic mode has no majority to lose), in seeds without
//! membership changes. Drawn from its own RNG: a seed that draws none runs as before.

use super::adversary::{Adversary, Todo};
use super::operator::Operator;
use super::plans::ForcedPlan;
use crate::protocol::{Mode, NodeId};
use crate::sim::SimConfig;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Share of the eligible seeds (`Operator::Some`) that force a recovery.
const SHARE: f64 = 0.05;

/// Whether `seed` forces a recovery, and on whom. Draws nothing from the adversary's
/// RNG. `changes`: the seed changes its member list (then it draws none).
pub(super) fn draw_forced(
    seed: u64,
    config: &SimConfig,
    changes: bool,
    operator: Operator,
) -> Option<ForcedPlan> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0f0c_ed00_0000_0005);
    let drawn = rng.gen_bool(SHARE);
    let forced = operator == Operator::Forced || operator.draws(drawn);
    let members = &config.ids;
    if !forced || config.mode != Mode::Quorum || changes || members.len() < 3 {
        return None;
    }
    let leaders: Vec<NodeId> = members
        .iter()
        .copied()
        .filter(|id| !config.witnesses.contains(id))
        .collect();
    let first = *leaders.choose(&mut rng)?;
    let mut others: Vec<NodeId> = members.iter().copied().filter(|&n| n != first).collect();
    others.shuffle(&mut rng);
    let size = rng.gen_range(1..=(members.len() - 1) / 2);
    let mut survivors: Vec<NodeId> = std::iter::once(first)
        .chain(others.into_iter().take(size - 1))
        .collect();
    survivors.sort_unstable();
    let cut = rng.gen_bool(0.7);
    Some(ForcedPlan {
        rng,
        survivors,
        cut,
    })
}

impl Adversary {
    /// Schedules the forced recovery among the other faults.
    pub(super) fn plan_forced(&mut self) {
        let Some(plan) = self.forced.as_mut() else {
            return;
        };
        let at = self.sim.now() + plan.rng.gen_range(300..=3000);
        self.schedule(at, Todo::ForceRecovery);
    }

    /// The operator cuts the survivors off (most often) and stops each of them.
    pub(super) fn begin_forced_recovery(&mut self) {
        let Some(plan) = self.forced.as_mut() else {
            return;
        };
        let survivors = plan.survivors.clone();
        let cut = plan.cut;
        let back_in = plan.rng.gen_range(1..=300);
        let clean: Vec<bool> = survivors.iter().map(|_| plan.rng.gen_bool(0.5)).collect();
        if cut {
            let rest: Vec<NodeId> = self
                .ids()
                .into_iter()
                .filter(|n| !survivors.contains(n))
                .collect();
            let groups = vec![survivors.clone(), rest];
            self.note(format!("partition {groups:?} (the survivors cut off)"));
            self.sim.partition(&groups);
        }
        for (&id, clean) in survivors.iter().zip(clean) {
            if !self.sim.is_up(id) {
                continue;
            }
            self.stop_or_kill(id, clean, "for a forced recovery");
        }
        let at = self.sim.now() + back_in;
        self.schedule(at, Todo::ForcedRestart);
    }

    /// `bully recover --force` on each survivor (any that came back meanwhile is
    /// stopped first, as the tool demands), then each is started on its new store; a
    /// cut is healed later, and the given-up side meets the survivors.
    pub(super) fn finish_forced_recovery(&mut self) {
        let Some(plan) = self.forced.as_mut() else {
            return;
        };
        let survivors = plan.survivors.clone();
        let heal_in = plan.cut.then(|| plan.rng.gen_range(300..=4000));
        for &id in &survivors {
            if self.sim.is_up(id) {
                self.note(format!("stop n{id} again (recover needs it stopped)"));
                self.sim.stop(id);
            }
        }
        match self.sim.force_recovery(&survivors) {
            Ok(()) => self.note(format!(
                "bully recover --force --members {survivors:?} on each of them"
            )),
            Err(e) => {
                self.note(format!("bully recover refused: {e}"));
                return;
            }
        }
        for &id in &survivors {
            self.note(format!("start n{id} (recovered)"));
            self.sim.start(id);
        }
        if let Some(heal_in) = heal_in {
            let at = self.sim.now() + heal_in;
            self.schedule(at, Todo::Heal);
        }
    }

    /// Whether `id` kept its store in a forced recovery: its store is not lost by the
    /// adversary (the survivors' lists are all the cluster has left).
    pub(super) fn is_survivor(&self, id: NodeId) -> bool {
        self.forced
            .as_ref()
            .is_some_and(|plan| plan.survivors.contains(&id))
    }
}
