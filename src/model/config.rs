//! What one model is: the cluster, its settings, and the bounds that keep its state
//! space finite.

use crate::protocol::{Flaw, MachineConfig, Millis, Mode, NodeId, Preempt, Timing};

/// What keeps the state space finite; printed with every result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Steps from the initial state.
    pub depth: usize,
    /// The global clock never passes this (ms of the model's timing).
    pub time: Millis,
    /// Crashes (the store kept) on any path.
    pub crashes: u8,
    /// Crashes that also lose the node's store (it restarts on an empty one).
    pub wipes: u8,
    /// Partitions (a minority cut off) on any path.
    pub partitions: u8,
    /// Pauses on any path.
    pub pauses: u8,
    /// Health-check flips on any path.
    pub health_flips: u8,
    /// States whose highest term exceeds this are not expanded.
    pub term: u64,
    /// Steps the fair schedule of the liveness check may take.
    pub liveness_steps: usize,
}

/// One model: the cluster, its settings and the bounds.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Every member; each is a peer of all the others.
    pub ids: Vec<NodeId>,
    /// Classic or quorum.
    pub mode: Mode,
    /// The member that votes but never leads (quorum mode), if any.
    pub witness: Option<NodeId>,
    /// Whether a higher node takes over from a live lower coordinator.
    pub preempt: Preempt,
    /// Every node's timing (see [`ModelConfig::small_timing`]).
    pub timing: Timing,
    /// A deliberately broken machine, to show the properties catch it.
    pub flaw: Option<Flaw>,
    /// What keeps the state space finite.
    pub bounds: Bounds,
    /// Start from the cluster already settled under its highest node (every link
    /// empty), so the depth bound is spent on faults and failovers, not on start-up.
    pub settled_start: bool,
}

impl ModelConfig {
    /// Small timing (heartbeat 2, D 5, T 1, T' 2) keeps the clock's values few while
    /// keeping every relation the machine relies on (D > 2 heartbeats, T' ≥ T).
    pub fn small_timing() -> Timing {
        Timing {
            heartbeat_ms: 2,
            suspect_after_ms: 5,
            answer_timeout_ms: 1,
            coordinator_timeout_ms: 2,
            preempt_delay_ms: 0,
        }
    }

    /// How many members make a majority.
    pub(super) fn majority(&self) -> usize {
        self.ids.len() / 2 + 1
    }

    /// The machine config of member `id`, eligible or not.
    pub(super) fn machine_config(&self, id: NodeId, eligible: bool) -> MachineConfig {
        MachineConfig {
            id,
            peers: self.ids.iter().copied().filter(|&p| p != id).collect(),
            timing: self.timing,
            preempt: self.preempt,
            eligible,
            mode: self.mode,
            witness: self.witness == Some(id),
            witnesses: self.witness.into_iter().collect(),
            recover_empty_store: self.flaw != Some(Flaw::SkipStoreRecovery),
            flaw: self.flaw,
        }
    }
}
