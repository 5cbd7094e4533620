//! Deterministic simulation: many seeded fault scenarios, zero invariant violations.
//!
//! `cargo test --test simulation` runs 2,000 seeds; `SIM_SEEDS=200000` runs more;
//! `SIM_SEED=n` runs just seed n (and prints its history when run with --nocapture).
//! Seeds start at `SIM_FIRST_SEED` (default 0).

use bully::sim::scenario::{run_seed, Flavor, Outcome};
use std::collections::BTreeMap;
use std::time::Instant;

const DEFAULT_SEEDS: u64 = 2_000;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

/// Coverage counters over all seeds, printed at the end.
#[derive(Default)]
struct Summary {
    runs: u64,
    by_nodes: BTreeMap<usize, u64>,
    fast: u64,
    preempt_delay: u64,
    never: u64,
    ineligible: u64,
    faults: u64,
    max_settle: (u64, u64),
    worst_slack: (i64, u64),
}

impl Summary {
    fn add(&mut self, o: &Outcome) {
        let f: Flavor = o.flavor;
        self.runs += 1;
        *self.by_nodes.entry(f.nodes).or_default() += 1;
        self.fast += f.fast_timing as u64;
        self.preempt_delay += f.preempt_delay as u64;
        self.never += f.preempt_never as u64;
        self.ineligible += f.ineligible as u64;
        self.faults += f.faults as u64;
        if o.settled_after_ms > self.max_settle.0 {
            self.max_settle = (o.settled_after_ms, o.seed);
        }
        let allowed = (o.deadline_ms - o.last_fault_ms) as i64;
        let slack = allowed - o.settled_after_ms as i64;
        if self.runs == 1 || slack < self.worst_slack.0 {
            self.worst_slack = (slack, o.seed);
        }
    }
}

#[test]
fn simulated_seeds_keep_every_invariant() {
    if let Some(seed) = env_u64("SIM_SEED") {
        let outcome = run_seed(seed);
        println!("seed {seed}: {}", outcome.description);
        for step in &outcome.steps {
            println!("  {step}");
        }
        println!("{}", bully::history::tail(&outcome.history, usize::MAX));
        assert!(outcome.passed(), "{}", outcome.report());
        println!("seed {seed} passed; messages sent: {:?}", outcome.sent);
        return;
    }
    let first = env_u64("SIM_FIRST_SEED").unwrap_or(0);
    let count = env_u64("SIM_SEEDS").unwrap_or(DEFAULT_SEEDS);
    let started = Instant::now();
    let mut summary = Summary::default();
    for seed in first..first + count {
        let outcome = run_seed(seed);
        assert!(outcome.passed(), "{}", outcome.report());
        summary.add(&outcome);
    }
    println!(
        "{} seeds in {:.1} s: nodes {:?}, fast timing {}, preempt delay {}, preempt never {}, \
         ineligible {}, faults {}; slowest settle {} ms (seed {}), least slack to the I5 \
         deadline {} ms (seed {})",
        summary.runs,
        started.elapsed().as_secs_f64(),
        summary.by_nodes,
        summary.fast,
        summary.preempt_delay,
        summary.never,
        summary.ineligible,
        summary.faults,
        summary.max_settle.0,
        summary.max_settle.1,
        summary.worst_slack.0,
        summary.worst_slack.1,
    );
    assert!(summary.never > 0 && summary.ineligible > 0 && summary.fast > 0);
}
