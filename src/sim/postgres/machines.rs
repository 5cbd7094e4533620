//! The members' real machines for the PostgreSQL simulator's `Spec::protocol`: the
//! protocol's simulator (src/sim/mod.rs) and what the world last told it. How the
//! world drives it is in src/sim/postgres/protocol.rs.

use crate::protocol::{Millis, Mode, NodeId, Preempt};
use crate::sim::{Sim, SimConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

/// What one step of the PostgreSQL world stands for on the engine's and the machines'
/// clocks: one look at the manager's default `[postgres] interval_ms`.
pub(super) const STEP_MS: u64 = 250;

/// How long the protocol may take to elect the bootstrapped cluster's coordinator.
pub(super) const BOOTSTRAP_MS: Millis = 10_000;

/// The protocol's simulator and what the world last told it.
pub(super) struct Protocol {
    pub sim: Sim,
    /// The protocol's time at the world's step 0.
    pub origin: Millis,
    /// Each member's life as last told (a kill ends one, whatever comes after).
    pub lives: BTreeMap<NodeId, u64>,
    /// Members whose nodes are paused, and cut off, as last told.
    pub paused: BTreeSet<NodeId>,
    pub cut: BTreeSet<NodeId>,
    /// Each member's keeper: the lease end (the protocol's time) of the last grant its
    /// node published.
    pub grants: BTreeMap<NodeId, Millis>,
}

impl Protocol {
    /// The machines of `members` (the last one a witness when `witness`), quorum mode,
    /// preemption drawn from the seed's own stream (`never`, as the PostgreSQL example
    /// configures it, in three seeds of four).
    pub(super) fn new(seed: u64, members: &[NodeId], witness: Option<NodeId>) -> Protocol {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5851_f42d_4c95_7f2d);
        let mut config = SimConfig::new(seed, members.to_vec(), Mode::Quorum);
        config.witnesses = witness.into_iter().collect();
        config.preempt = match rng.gen_ratio(3, 4) {
            true => Preempt::Never,
            false => Preempt::Always,
        };
        Protocol {
            sim: Sim::new(config),
            origin: 0,
            lives: BTreeMap::new(),
            paused: BTreeSet::new(),
            cut: BTreeSet::new(),
            grants: BTreeMap::new(),
        }
    }

    /// The protocol's time at the world's step `now`.
    pub fn at(&self, now: u64) -> Millis {
        self.origin + now * STEP_MS
    }
}
