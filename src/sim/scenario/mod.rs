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

mod adversary;
mod cluster;
mod judge;
mod seed_run;

pub use seed_run::{Flavor, SeedRun, REPORT_TAIL};

use crate::history::{last_fault_ms, Record};
use crate::protocol::Mode;
use adversary::Adversary;
use cluster::{choose_cluster, describe};
use judge::Judge;
use rand::rngs::SmallRng;
use rand::SeedableRng;

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
    let judge = Judge::new(&config, flavor.slow_network);
    let mut adv = Adversary::new(rng, config);
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
