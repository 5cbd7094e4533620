//! Which history checks apply to a seeded run, with which bounds, and their verdict
//! (beyond what the simulator checks as it goes).

use crate::checker::{
    check_convergence, check_no_overlap_with, check_one_per_term, check_start_delay,
    check_unique_terms, lease_bound_ms, quiet_window, Convergence, Leader, Violation,
};
use crate::history::Entry;
use crate::protocol::{Millis, Mode, NodeId, Preempt, Timing};
use crate::sim::{Sim, SimConfig};
use std::collections::BTreeMap;

/// Which checks apply to a run, and with which bounds, given its settings.
pub(super) struct Judge {
    mode: Mode,
    /// The slowest node's timeouts (they bound convergence).
    pub(super) timing: Timing,
    /// How long each node's office can outlast its pause (its own heartbeat sets its
    /// lease margin).
    lease_bounds: BTreeMap<NodeId, Millis>,
    preempt: Preempt,
    max_delay: Millis,
    slow_network: bool,
}

impl Judge {
    /// The checks for a cluster of `config`, on a network as slow as the seed chose.
    pub(super) fn new(config: &SimConfig, slow_network: bool) -> Judge {
        Judge {
            mode: config.mode,
            timing: config.slowest_timing(),
            lease_bounds: config
                .ids
                .iter()
                .map(|&id| (id, lease_bound_ms(&config.timing_of(id))))
                .collect(),
            preempt: config.preempt,
            max_delay: config.delay_ms.1,
            slow_network,
        }
    }

    /// When the cluster must have converged after the last fault: the bound plus eight
    /// one-way delays of slack (see `convergence_deadline`), and the clocks' drift.
    pub(super) fn deadline(&self, last_fault: Millis) -> Millis {
        let bound = self.timing.convergence_bound_in(self.mode) + 8 * self.max_delay;
        last_fault + bound + bound / 50
    }

    /// The history checks beyond the ones the simulator runs as it goes.
    pub(super) fn violations(
        &self,
        sim: &Sim,
        history: &[Entry],
        live: &[NodeId],
        deadline_ms: Millis,
    ) -> Vec<Violation> {
        let (timing, mode) = (&self.timing, self.mode);
        // The node's clock may run up to 1% fast: its delay can end that much early.
        let mut violations = check_start_delay(history, timing.preempt_delay_ms * 98 / 100);
        if !self.slow_network {
            let mut quiet = quiet_window(timing, self.max_delay);
            if self.preempt == Preempt::Never && mode == Mode::Classic {
                // Such a node listens D after a start before it may declare (src/protocol/machine/
                // `start`), silent like one in a preempt delay.
                quiet.before_ms += timing.suspect_after_ms;
            }
            violations.extend(check_unique_terms(history, quiet));
        }
        if mode == Mode::Quorum {
            let bound = |node: NodeId| {
                self.lease_bounds
                    .get(&node)
                    .copied()
                    .unwrap_or_else(|| lease_bound_ms(timing))
            };
            violations.extend(check_no_overlap_with(history, bound));
            violations.extend(check_one_per_term(history));
        }
        // A quorum coordinator holds its lease only while acks come back within
        // D - 2 x heartbeat; on a slower network quorum mode promises safety, not a leader.
        let lease_holds = 2 * self.max_delay < timing.suspect_after_ms - 2 * timing.heartbeat_ms;
        if mode == Mode::Classic || lease_holds {
            let leader = match self.preempt {
                Preempt::Always => live
                    .iter()
                    .rev()
                    .copied()
                    .find(|&id| sim.is_eligible(id))
                    .map_or(Leader::AnyLive, Leader::Node),
                Preempt::Never => Leader::AnyLive,
            };
            let convergence = Convergence {
                live: live.to_vec(),
                leader,
                deadline_ms,
            };
            violations.extend(check_convergence(history, &convergence));
        }
        violations
    }
}
