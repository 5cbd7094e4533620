//! A store that goes back while its node is down: a disk or a restore that hands back
//! an older copy of the `db` file (issue 38's third break). The store check
//! (src/storage/check.rs) refuses it at the next start with exit 2, and the operator
//! wipes the data dir, so the node recovers as a lost store; the rule before the check
//! (sabotage `Flaw::TrustsDamagedStore`) started it on the older term. Drawn from its
//! own RNG in a share of the seeds, one store per seed, never while another store is
//! lost or on a forced recovery's survivor.

use super::adversary::{Adversary, Todo};
use super::operator::Operator;
use super::plans::DamagePlan;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Share of the seeds (`Operator::Some`) that roll a store back.
const SHARE: f64 = 0.1;

/// Whether `seed` rolls a store back. Draws nothing from the adversary's RNG.
pub(super) fn draw_damage(seed: u64, operator: Operator) -> Option<DamagePlan> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0da3_a9ed_0000_0006);
    let drawn = rng.gen_bool(SHARE);
    operator.draws(drawn).then_some(DamagePlan { rng })
}

impl Adversary {
    /// Schedules the rollback among the other faults.
    pub(super) fn plan_damage(&mut self) {
        let Some(plan) = self.damage.as_mut() else {
            return;
        };
        let at = self.sim.now() + plan.rng.gen_range(500..=5000);
        self.schedule(at, Todo::RollBackStore);
    }

    /// A node (the coordinator half the time) is killed and its store goes back; the
    /// operator starts it again a little later.
    pub(super) fn roll_back_a_store(&mut self) {
        if !self.store_loss_tolerated() {
            return;
        }
        let coordinator = self.coordinator();
        let ids = self.sim.config().ids.clone();
        let Some(plan) = self.damage.as_mut() else {
            return;
        };
        let id = match coordinator {
            Some(c) if plan.rng.gen_bool(0.5) => c,
            _ => ids[plan.rng.gen_range(0..ids.len())],
        };
        let back = plan.rng.gen_range(0..4);
        let restart_in = plan.rng.gen_range(1..=1000);
        if self.is_survivor(id) {
            return;
        }
        match self.sim.roll_back_store(id, back) {
            None => return,
            Some(true) => self.note(format!(
                "n{id}'s store went back {} saves while down: refused (exit 2), wiped",
                back + 1
            )),
            Some(false) => self.note(format!(
                "n{id}'s store went back {} saves while down: used as current",
                back + 1
            )),
        }
        let at = self.sim.now() + restart_in;
        self.schedule(at, Todo::Start(id));
    }
}
