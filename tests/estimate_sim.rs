//! est(S) in the simulator (docs/design.md#elected-by-data-est): three nodes whose
//! estimates disagree with their IDs (node 1 freshest, node 3 stalest), in both modes
//! over many seeds (random delays): the higher ID with the lower estimate is never
//! elected while a fresher eligible node is up, the coordinator is kept when an old one
//! returns, and without estimates the ID order is unchanged. The sabotage
//! `Flaw::IdOrder` is caught by the same checks.

use bully::history::Record;
use bully::protocol::{Fact, Flaw, Mode, NodeId, Role};
use bully::sim::{Sim, SimConfig};

const SEEDS: u64 = 20;

fn cluster(seed: u64, mode: Mode, estimates: &[(NodeId, u64)], flaw: Option<Flaw>) -> Sim {
    let mut config = SimConfig::new(seed, vec![1, 2, 3], mode);
    config.flaw = flaw;
    let mut sim = Sim::new(config);
    for &(id, est) in estimates {
        sim.set_estimate(id, Some(est));
    }
    for id in [1, 2, 3] {
        sim.start(id);
    }
    sim
}

fn coordinator(sim: &Sim) -> Option<NodeId> {
    let leaders: Vec<NodeId> = sim
        .live()
        .into_iter()
        .filter(|&id| sim.role_now(id) == Some(Role::Coordinator))
        .collect();
    match leaders[..] {
        [one] => Some(one),
        _ => None,
    }
}

/// Who declared, in order, over the whole run.
fn declarers(sim: &Sim) -> Vec<NodeId> {
    sim.history()
        .iter()
        .filter(|e| matches!(e.record, Record::Fact(Fact::Declared { .. })))
        .map(|e| e.node)
        .collect()
}

/// Starts, fails over from node 1, brings node 1 back; returns the coordinator after
/// each phase and every declarer.
fn run(seed: u64, mode: Mode, estimates: &[(NodeId, u64)], flaw: Option<Flaw>) -> Outcome {
    let mut sim = cluster(seed, mode, estimates, flaw);
    sim.run_until(3_000);
    let first = coordinator(&sim);
    sim.crash(first.unwrap_or(1));
    sim.run_until(6_000);
    let second = coordinator(&sim);
    sim.start(first.unwrap_or(1));
    sim.run_until(9_000);
    let third = coordinator(&sim);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    Outcome {
        leaders: [first, second, third],
        declarers: declarers(&sim),
    }
}

struct Outcome {
    leaders: [Option<NodeId>; 3],
    declarers: Vec<NodeId>,
}

const BY_DATA: &[(NodeId, u64)] = &[(1, 30), (2, 20), (3, 10)];

#[test]
fn a_higher_id_with_a_lower_estimate_is_never_elected() {
    for mode in [Mode::Classic, Mode::Quorum] {
        for seed in 0..SEEDS {
            let o = run(seed, mode, BY_DATA, None);
            assert_eq!(o.leaders, [Some(1), Some(2), Some(2)], "{mode} seed {seed}");
            assert!(
                !o.declarers.contains(&3),
                "{mode} seed {seed}: {:?}",
                o.declarers
            );
        }
    }
}

#[test]
fn without_estimates_the_id_order_is_unchanged() {
    for mode in [Mode::Classic, Mode::Quorum] {
        for seed in 0..SEEDS {
            let o = run(seed, mode, &[], None);
            assert_eq!(o.leaders, [Some(3), Some(2), Some(3)], "{mode} seed {seed}");
        }
    }
}

#[test]
fn sabotage_id_order_is_caught() {
    for mode in [Mode::Classic, Mode::Quorum] {
        let caught = (0..SEEDS).any(|seed| {
            let o = run(seed, mode, BY_DATA, Some(Flaw::IdOrder));
            o.declarers.contains(&3)
        });
        assert!(
            caught,
            "{mode}: the stalest node never declared under IdOrder"
        );
    }
}
