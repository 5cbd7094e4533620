//! Random fault scenarios, one per seed, and their verdict on I1–I5.
//!
//! [`run_seed`] builds a cluster from the seed (2–9 nodes, default or fast timing,
//! sometimes a preempt delay, sometimes `preempt = never`, sometimes an ineligible
//! node), starts it (all at once: concurrent elections; or staggered), and lets an
//! adversary inject up to eight faults that look at the cluster's state: crash the
//! coordinator (with peer-down notices to some, all or none of the others), crash the
//! would-be winner right after its Answer or in the middle of declaring, restart the
//! highest node, pause, partition, deafen a node (one-way links), flip eligibility,
//! report a live coordinator down, lose a store. In some seeds an operator also changes
//! the member list (`membership.rs`): adds a spare node, removes or replaces a member.
//! Then every fault ends (heal, resume, sometimes restart the crashed), and the run
//! goes on for the I5 bound and as long again; I5 must hold from the deadline on.

mod adversary;
mod cluster;
mod damage;
mod file_edits;
mod forced;
mod judge;
mod membership;
mod operator;
mod plans;
mod seed_run;

pub use membership::{asks_for_changes, Changes};
pub use operator::Operator;
pub use seed_run::{Flavor, Gap, SeedRun, REPORT_TAIL};

use crate::history::{last_fault_ms, Entry, Record};
use crate::protocol::{Fact, Millis, Mode};
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
    run_seed_changing(seed, mode, flaw, Changes::Some)
}

/// [`run_seed_with`], with membership changes drawn as `changes` says.
pub fn run_seed_changing(
    seed: u64,
    mode: Mode,
    flaw: Option<crate::protocol::Flaw>,
    changes: Changes,
) -> SeedRun {
    run_seed_drawing(seed, mode, flaw, changes, Operator::Some)
}

/// [`run_seed_changing`], with the operator's faults drawn as `operator` says.
pub fn run_seed_drawing(
    seed: u64,
    mode: Mode,
    flaw: Option<crate::protocol::Flaw>,
    changes: Changes,
    operator: Operator,
) -> SeedRun {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed_ad0e_0000_0001);
    let (mut config, mut flavor) = choose_cluster(seed, mode, &mut rng);
    config.flaw = flaw;
    let plan = membership::draw_plan(seed, &config.ids, changes).map(|(plan, spares)| {
        config.spares = spares;
        plan
    });
    flavor.membership = plan.is_some();
    let roll = operator::draw_roll(seed, &mut config, operator);
    flavor.config_roll = roll.is_some();
    let two_lost = operator::draw_two_lost(seed, config.ids.len(), operator);
    let hook_steps = operator::draw_slow_hooks(seed, &mut config, operator);
    flavor.slow_hooks = !hook_steps.is_empty();
    flavor.two_stores_lost = two_lost.is_some();
    let description = describe(&config);
    let mut judge = Judge::new(&config, flavor.slow_network, flavor.two_stores_lost);
    if let Some(roll) = &roll {
        judge.allow_for(&roll.timings());
    }
    if let Some(bound) = config.release_bound_ms {
        judge.allow_release(bound);
    }
    let forced = forced::draw_forced(seed, &config, plan.is_some(), operator);
    flavor.forced_recovery = forced.is_some();
    let damage = damage::draw_damage(seed, operator);
    flavor.store_rolled_back = damage.is_some();
    let file_edit = file_edits::draw_file_edit(
        seed,
        &config.ids,
        operator,
        plan.is_some() || two_lost.is_some() || forced.is_some() || damage.is_some(),
    );
    flavor.file_edit = file_edit.is_some();
    let mut adv = Adversary::new(rng, config, plan, roll, two_lost, forced, damage);
    adv.file_edit = file_edit;
    adv.steps.extend(hook_steps);
    flavor.ineligible = adv.start_cluster();
    adv.plan_membership();
    adv.plan_roll();
    adv.plan_two_lost();
    adv.plan_forced();
    adv.plan_damage();
    adv.plan_file_edit();
    flavor.faults = adv.inject_faults();
    adv.calm_down();

    if adv.preempt_asked {
        judge.preempt_changed();
    }
    let mut last_fault = last_fault_ms(adv.sim.history()).unwrap_or(0);
    let mut deadline = judge.deadline(last_fault);
    // Each round is a list change: a few at most (a promotion per learner).
    for _ in 0..20 {
        adv.run_to(deadline + judge.timing.convergence_bound_in(mode));
        // A list change after the calm (a learner that caught up takes its seat) may
        // change who leads: the bound runs from it.
        let last_change = last_list_change(adv.sim.history()).unwrap_or(0);
        if last_change <= last_fault {
            break;
        }
        last_fault = last_change;
        deadline = judge.deadline(last_fault);
    }
    let history = adv.sim.history().to_vec();
    let live = adv.sim.live();
    let mut violations = adv.sim.violations().to_vec();
    let (judged, known_gaps) = judge.violations(&adv.sim, &history, &live, deadline);
    violations.extend(judged);
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
        known_gaps,
        last_fault_ms: last_fault,
        deadline_ms: deadline,
        settled_after_ms: settled,
        flavor,
        leader_answers: adv.sim.leader_answers().len(),
    }
}

/// When a node last stored a new member list, if ever.
fn last_list_change(history: &[Entry]) -> Option<Millis> {
    history
        .iter()
        .rev()
        .find(|e| matches!(e.record, Record::Fact(Fact::MembersChanged { .. })))
        .map(|e| e.at_ms)
}
