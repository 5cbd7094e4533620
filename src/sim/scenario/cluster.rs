//! The cluster a seed chooses: size, IDs, timing (sometimes per node), preempt,
//! network delays, witnesses; and its one-line description for the failure report.

use super::seed_run::Flavor;
use crate::protocol::{Mode, NodeId, Preempt, Timing};
use crate::sim::SimConfig;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::Rng;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The cluster settings a seed chooses.
pub(super) fn choose_cluster(seed: u64, mode: Mode, rng: &mut SmallRng) -> (SimConfig, Flavor) {
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
    // Usually below T/2, so an Answer always makes it within T (docs/design.md: delays within
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
        membership: false,
        config_roll: false,
        two_stores_lost: false,
        slow_hooks: false,
        forced_recovery: false,
        store_rolled_back: false,
        file_edit: false,
        faults: 0,
    };
    let config = SimConfig {
        seed,
        ids,
        spares: Vec::new(),
        timing,
        preempt,
        delay_ms: (1, max_delay),
        mode,
        witnesses,
        drift_permille: 10,
        flaw: None,
        release_bound_ms: None,
        hook_ms: BTreeMap::new(),
        node_timing,
        file_peers: BTreeMap::new(),
        file_mode: BTreeMap::new(),
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

/// The cluster and settings a seed chose, for the failure message.
pub(super) fn describe(config: &SimConfig) -> String {
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
    if !config.spares.is_empty() {
        let _ = write!(out, ", spares {:?}", config.spares);
    }
    for (id, t) in &config.node_timing {
        let _ = write!(
            out,
            "; n{id}: D {}, heartbeat {}, T {}, T' {}",
            t.suspect_after_ms, t.heartbeat_ms, t.answer_timeout_ms, t.coordinator_timeout_ms
        );
    }
    out
}
