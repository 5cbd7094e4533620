//! One simulated process: its machine while up, its disk, and its own clock.

use crate::protocol::{Cells, Epoch, Event, Machine, Membership, Millis, Mode, NodeId, Timing};
use std::collections::{BTreeSet, VecDeque};

/// One simulated process and its disk.
#[derive(Debug, Default)]
pub(super) struct SimNode {
    /// `None` while down (crashed or not started yet).
    pub(super) machine: Option<Machine>,
    /// The stored cells: what survives a crash.
    pub(super) disk: Cells,
    /// The stored member list (`None`: never written; a start seeds it).
    pub(super) members: Option<Membership>,
    /// The health check's verdict; survives restarts (it is about the host).
    pub(super) eligible: bool,
    pub(super) paused: bool,
    /// Events that arrived while paused, handled on resume.
    pub(super) inbox: VecDeque<Event>,
    /// Counts starts; messages to an earlier life are lost.
    pub(super) life: u64,
    /// Highest epoch this node revealed (views and messages) in any life.
    pub(super) revealed: Option<Epoch>,
    /// Highest term this node declared.
    pub(super) declared_term: u64,
    /// The machine stopped advancing its deadline; its timers are no longer fired.
    pub(super) stalled: bool,
    /// Clock rate in per mille of real time, and the clock's reading at real time 0.
    pub(super) rate: u64,
    pub(super) origin: Millis,
    /// When the current pause began (its connections die after D).
    pub(super) paused_at: Option<Millis>,
    /// Its estimate source's value, given to every start (`None`: no source);
    /// docs/design.md#elected-by-data-est.
    pub(super) estimate: Option<Option<u64>>,
    /// The timing its current (or last) life started with: what its transport's hello
    /// shows, and what peers compare D with (src/transport/agreement.rs).
    pub(super) timing: Timing,
    /// The mode its store holds (`None`: never started, or a lost store).
    pub(super) stored_mode: Option<Mode>,
    /// The mode its current (or last) life runs: what its transport's hello shows.
    pub(super) mode: Mode,
    /// The members a forced recovery of this store gave up (`bully recover`): its
    /// transport refuses them as given up (src/transport/accept.rs). On the disk.
    pub(super) gave_up: BTreeSet<NodeId>,
    /// The cells it stored before the current ones, newest last (at most
    /// [`PAST_CELLS`]): what an older copy of its store would hold.
    pub(super) past: VecDeque<Cells>,
}

/// How many earlier cell states a node keeps for [`SimNode::past`].
pub(super) const PAST_CELLS: usize = 8;

impl SimNode {
    /// This node's clock reading at real (simulated) time `at`.
    pub(super) fn local(&self, at: Millis) -> Millis {
        self.origin + at * self.rate / 1000
    }

    /// The first real time at which this node's clock reads at least `local`.
    pub(super) fn real(&self, local: Millis) -> Millis {
        // A machine with nothing to time asks for `Millis::MAX`: never, here too.
        let elapsed = local.saturating_sub(self.origin);
        elapsed.saturating_mul(1000).div_ceil(self.rate)
    }
}
