//! The plans the adversary carries for one seed (src/sim/scenario/adversary.rs):
//! each drawn from its own RNG by the module that acts on it (`damage`, `file_edits`,
//! `forced`, `membership`, `operator`). Only the data lives here, below the adversary, so the
//! adversary can hold the plans while the modules that act on them extend it.

use crate::protocol::{NodeId, Timing};
use rand::rngs::SmallRng;
use std::collections::BTreeMap;

/// The store rollback one seed does.
pub(super) struct DamagePlan {
    pub(super) rng: SmallRng,
}

/// The forced recovery one seed does.
pub(super) struct ForcedPlan {
    pub(super) rng: SmallRng,
    /// The members kept: a minority, one of them able to lead.
    pub(super) survivors: Vec<NodeId>,
    /// Whether the survivors are cut off from the rest while they recover.
    pub(super) cut: bool,
    /// How many coordinators one survivor sees crash while it is ahead: cut off with the
    /// members to be lost from the other survivors, it sees terms they never do, and it
    /// starts last after the recovery (`forced.rs`); 0: none goes ahead.
    pub(super) ahead: u8,
    /// How many of those rounds went by.
    pub(super) ahead_done: u8,
}

/// The membership changes one seed asks for.
pub(super) struct MemberPlan {
    pub(super) rng: SmallRng,
    pub(super) changes: usize,
    /// Shorter gaps between changes.
    pub(super) hurried: bool,
}

/// The config roll one seed does.
pub(super) struct RollPlan {
    pub(super) rng: SmallRng,
    /// Each node's timing once the roll has passed it.
    pub(super) to: BTreeMap<NodeId, Timing>,
    /// Each node's timing before (what the cluster starts with).
    pub(super) from: BTreeMap<NodeId, Timing>,
    /// The order the operator goes through the nodes.
    pub(super) order: Vec<NodeId>,
}

/// The member-list edits one seed does (`file_edits.rs`).
pub(super) struct FileEditPlan {
    pub(super) rng: SmallRng,
    /// The members whose files are edited: a minority.
    pub(super) group: Vec<NodeId>,
    /// The edit names the other mode; else the group's files name only each other.
    pub(super) mode: bool,
}

/// Two stores lost in a row, the second while the first node still recovers.
pub(super) struct TwoLost {
    pub(super) rng: SmallRng,
    /// The node that lost its store first, once it has.
    pub(super) first: Option<NodeId>,
}

impl RollPlan {
    /// Every timing a node runs with in this seed, before and after: what the judge's
    /// bounds must allow for.
    pub(super) fn timings(&self) -> Vec<Timing> {
        self.from
            .values()
            .chain(self.to.values())
            .copied()
            .collect()
    }
}
