//! The fixed settings of a simulated cluster, and the points in a node's action
//! stream where a scenario can arm a crash.

use crate::protocol::{Flaw, MessageKind, Millis, Mode, NodeId, Preempt, Timing};
use std::collections::BTreeMap;

/// The fixed settings of one simulated cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seeds the delivery delays (faults are the caller's).
    pub seed: u64,
    /// Every member of the initial lists; each is a peer of all the others.
    pub ids: Vec<NodeId>,
    /// Processes that are in no initial list, for membership changes to add: each
    /// starts from a seed that lists `ids` and itself, as a new node's config file
    /// would, and is refused by the members until a coordinator adds it.
    pub spares: Vec<NodeId>,
    pub timing: Timing,
    pub preempt: Preempt,
    /// One-way delay of every message, drawn uniformly from this inclusive range.
    /// Keep the maximum below `answer_timeout_ms / 2`, or an Answer can miss T and the
    /// soft part of I2 no longer applies.
    pub delay_ms: (Millis, Millis),
    pub mode: Mode,
    /// Members that are witnesses: they vote and count for majorities, never lead.
    pub witnesses: Vec<NodeId>,
    /// Each node's clock runs at its own rate, drawn from `1000 ± drift_permille` per
    /// mille of real time, from its own origin (0: every clock exact and equal).
    pub drift_permille: u64,
    /// A deliberately broken machine, to show the checkers catch it.
    pub flaw: Option<Flaw>,
    /// How long a coordinator leaving office on its own waits for its release
    /// (src/protocol/machine/release.rs); `None`: it leaves at once, as before.
    pub release_bound_ms: Option<Millis>,
    /// How long each node's `on_demoted` (with its keepers) takes before the release
    /// comes; `Millis::MAX`: it hangs, and the machine's bound ends the wait. Absent: 0.
    pub hook_ms: BTreeMap<NodeId, Millis>,
    /// Nodes whose timing differs from `timing`, read at each start (an operator may
    /// change it between two lives, [`crate::sim::Sim::reconfigure`]). Nodes whose
    /// running lives differ in D refuse each other's hello and exchange nothing, as the
    /// transport does (src/transport/agreement.rs).
    pub node_timing: BTreeMap<NodeId, Timing>,
    /// Nodes whose config file names other peers than the cluster's (an operator
    /// edited it, [`crate::sim::Sim::edit_peers`]): what a start that finds no stored
    /// list seeds from (issue 47; [`crate::protocol::membership::list_at_start`]).
    pub file_peers: BTreeMap<NodeId, Vec<NodeId>>,
    /// Nodes whose config file names another mode than `mode` ([`crate::sim::Sim::edit_mode`]):
    /// a start whose store holds a mode refuses it ([`crate::protocol::mode_at_start`]).
    pub file_mode: BTreeMap<NodeId, Mode>,
}

impl SimConfig {
    /// A cluster of `ids` with default timing, preempt always, delays of 1–20 ms,
    /// exact clocks, no witnesses, no spares.
    pub fn new(seed: u64, ids: Vec<NodeId>, mode: Mode) -> SimConfig {
        SimConfig {
            seed,
            ids,
            spares: Vec::new(),
            timing: Timing::default(),
            preempt: Preempt::Always,
            delay_ms: (1, 20),
            mode,
            witnesses: Vec::new(),
            drift_permille: 0,
            flaw: None,
            release_bound_ms: None,
            hook_ms: BTreeMap::new(),
            node_timing: BTreeMap::new(),
            file_peers: BTreeMap::new(),
            file_mode: BTreeMap::new(),
        }
    }

    /// Every simulated process: the members of the initial lists, then the spares.
    /// Faults, links and notices concern them all, members or not.
    pub fn processes(&self) -> Vec<NodeId> {
        self.ids.iter().chain(&self.spares).copied().collect()
    }

    /// The mode node `id`'s config file names.
    pub fn mode_of(&self, id: NodeId) -> Mode {
        self.file_mode.get(&id).copied().unwrap_or(self.mode)
    }

    /// The timing node `id` runs with.
    pub fn timing_of(&self, id: NodeId) -> Timing {
        self.node_timing.get(&id).copied().unwrap_or(self.timing)
    }

    /// The slowest of every node's timeouts and heartbeat: what bounds the cluster's
    /// convergence when they differ.
    pub fn slowest_timing(&self) -> Timing {
        self.node_timing.values().fold(self.timing, |a, b| Timing {
            heartbeat_ms: a.heartbeat_ms.max(b.heartbeat_ms),
            suspect_after_ms: a.suspect_after_ms.max(b.suspect_after_ms),
            answer_timeout_ms: a.answer_timeout_ms.max(b.answer_timeout_ms),
            coordinator_timeout_ms: a.coordinator_timeout_ms.max(b.coordinator_timeout_ms),
            ..a
        })
    }
}

/// A point in a node's action stream right after which an armed crash happens: lets
/// scenarios kill a node "after its Answer but before its Coordinator", or after it
/// persisted an epoch but before it told anyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Right after a `Persist` completed.
    AfterPersist,
    /// Right after one message of this kind was sent (to one peer: a broadcast is cut).
    AfterSend(MessageKind),
}
