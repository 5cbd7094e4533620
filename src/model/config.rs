//! What one model is: the cluster, its settings, and the bounds that keep its state
//! space finite.

use crate::protocol::{Change, Flaw, MachineConfig, Millis, Mode, NodeId, Preempt, Timing};

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
    /// A process of `ids` that is in no other member's list at the start: its own
    /// config names every process, as a new node's config file would, and the others
    /// refuse its messages until they store a list with it (docs/design.md#membership).
    pub joining: Option<NodeId>,
    /// What the operator asks for, in order ([`super::Transition::Ask`]): the next
    /// change goes to whichever up node the step names; a node that refuses it leaves
    /// the world as it was, so each change is taken at most once, when a coordinator
    /// takes it. Empty: the member list never changes.
    pub changes: Vec<Change>,
    /// Each member's estimate, in the order of `ids`, fed to its machine at every start
    /// and fresh for ever (docs/design.md#elected-by-data-est); empty: no estimates.
    pub estimates: Vec<u64>,
    /// The timing every restart's config file names (`None`: the same as `timing`): a
    /// rolling restart onto a changed D. A node whose stored list carries settings
    /// lives by those, not by its file's (docs/design.md#cluster-settings); nodes on
    /// different D talk, each follower promising the longer D.
    pub restart_timing: Option<Timing>,
    /// The bound on a voluntary departure's release (`MachineConfig::release_bound_ms`;
    /// `None`: no release asked for). With one, the release is a transition of its own
    /// ([`super::Transition::Release`]) taken at any moment before the bound: an
    /// `on_demoted` of any length, or one that hangs.
    pub release_bound_ms: Option<Millis>,
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

    /// The timing a node runs with: `restart_timing` once it has restarted
    /// (`restarted`), else `timing`.
    pub(super) fn timing_of(&self, restarted: bool) -> Timing {
        match self.restart_timing {
            Some(timing) if restarted => timing,
            _ => self.timing,
        }
    }

    /// The machine config of member `id`, eligible or not, restarted or not. Its peers
    /// seed its list when its store holds none: every other process for the joining
    /// one, every other process but the joining one for the others.
    pub(super) fn machine_config(
        &self,
        id: NodeId,
        eligible: bool,
        restarted: bool,
    ) -> MachineConfig {
        let listed = |p: NodeId| p != id && (self.joining != Some(p) || self.joining == Some(id));
        let peers = self.ids.iter().copied().filter(|&p| listed(p)).collect();
        MachineConfig::new(id, peers)
            .with_timing(self.timing_of(restarted))
            .with_preempt(self.preempt)
            .with_eligible(eligible)
            .with_mode(self.mode)
            .with_witnesses(self.witness == Some(id), self.witness.into_iter().collect())
            .with_release_bound_ms(self.release_bound_ms)
            .with_flaw(self.flaw)
    }
}
