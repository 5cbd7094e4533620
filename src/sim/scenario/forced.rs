//! A forced recovery used while the old majority is alive: an operator stops a
//! minority of the members (the survivors), runs `bully recover --force` with them on
//! each (src/node/drive/forced_recovery.rs) and starts them again, while the members
//! it gives up still run, most often cut off from the survivors until a heal, now and
//! then in plain reach. It is the misuse docs/recovery.md warns of; what is owed is that the
//! given-up side stands down once it meets the survivors (src/protocol/machine/
//! given_up.rs), and the judge checks that (`judge.rs`). Before that rule both sides
//! led for as long as they ran (sabotage `Flaw::IgnoresGivenUp`).
//!
//! Half the plans with two survivors or more first put one survivor *ahead*: cut off
//! from the others with the members to be lost, whose coordinators crash one after the
//! other, it sees terms the other survivors never see, and after the recovery it starts
//! last. The survivors must still never declare those terms again
//! (src/protocol/recovery.rs; sabotage `Flaw::SurvivorsTrustOwnTerms`).
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
    // Its own RNG, so that the plans drawn before it existed stay as they were.
    let mut ahead_rng = SmallRng::seed_from_u64(seed ^ 0x0f0c_ed00_0000_0006);
    let ahead = if survivors.len() >= 2 && ahead_rng.gen_bool(0.5) {
        ahead_rng.gen_range(1..=3)
    } else {
        0
    };
    Some(ForcedPlan {
        rng,
        survivors,
        cut,
        ahead,
        ahead_done: 0,
    })
}

impl Adversary {
    /// Schedules the forced recovery among the other faults.
    pub(super) fn plan_forced(&mut self) {
        let Some(plan) = self.forced.as_mut() else {
            return;
        };
        let at = self.sim.now() + plan.rng.gen_range(300..=3000);
        let todo = if plan.ahead > 0 {
            Todo::ForcedAhead
        } else {
            Todo::ForceRecovery
        };
        self.schedule(at, todo);
    }

    /// The first survivor goes ahead: cut off from the other survivors with the members
    /// to be lost, whose coordinator (unless it is that survivor) crashes, so that side
    /// elects above any term the others see; once per round of the plan, and the
    /// recovery follows a while after the last.
    pub(super) fn one_survivor_ahead(&mut self) {
        let Some(plan) = self.forced.as_mut() else {
            return;
        };
        let Some((&first, behind)) = plan.survivors.split_first() else {
            return;
        };
        let behind = behind.to_vec();
        plan.ahead_done += 1;
        let next = if plan.ahead_done < plan.ahead {
            Todo::ForcedAhead
        } else {
            Todo::ForceRecovery
        };
        let next_in = plan.rng.gen_range(200..=1500);
        let ahead: Vec<NodeId> = self
            .ids()
            .into_iter()
            .filter(|n| !behind.contains(n))
            .collect();
        let groups = vec![behind, ahead.clone()];
        self.note(format!("partition {groups:?} (survivor n{first} ahead)"));
        self.sim.partition(&groups);
        let coordinator = self.coordinator().filter(|&c| c != first);
        if let Some(c) = coordinator.filter(|c| ahead.contains(c)) {
            self.crash(c, "coordinator");
        }
        let at = self.sim.now() + next_in;
        self.schedule(at, next);
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
        // The survivor that went ahead starts last, as an operator bringing the hosts
        // up one by one might.
        let last = (plan.ahead > 0).then(|| (survivors[0], plan.rng.gen_range(100..=2000)));
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
            match last {
                Some((ahead, start_in)) if ahead == id => {
                    self.note(format!("n{id} (recovered) starts in {start_in} ms"));
                    let at = self.sim.now() + start_in;
                    self.schedule(at, Todo::Start(id));
                }
                _ => {
                    self.note(format!("start n{id} (recovered)"));
                    self.sim.start(id);
                }
            }
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
