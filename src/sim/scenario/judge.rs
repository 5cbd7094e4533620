//! Which history checks apply to a seeded run, with which bounds, and their verdict
//! (beyond what the simulator checks as it goes).

use super::seed_run::Gap;
use crate::checker::{
    check_convergence, check_leader_answers, check_no_overlap_with, check_one_per_term,
    check_start_delay_where, check_unique_terms, lease_bound_ms, offices_with, quiet_window,
    Convergence, Invariant, Violation,
};
use crate::history::Entry;
use crate::protocol::{Millis, Mode, NodeId, Preempt, Role, Timing};
use crate::sim::{Forced, Sim, SimConfig};
use std::collections::{BTreeMap, BTreeSet};

/// Which checks apply to a run, and with which bounds, given its settings.
pub(super) struct Judge {
    mode: Mode,
    /// The members of the initial lists.
    members: Vec<NodeId>,
    /// The slowest node's timeouts (they bound convergence).
    pub(super) timing: Timing,
    /// The shortest D any node runs with: whether a lease can hold on this network
    /// depends on it, not on the slowest node's.
    shortest_d: Millis,
    /// How long each node's office can outlast its pause (its own heartbeat sets its
    /// lease margin).
    lease_bounds: BTreeMap<NodeId, Millis>,
    preempt: Preempt,
    max_delay: Millis,
    slow_network: bool,
    /// How long a voluntary departure may wait for its release: a coordinator that
    /// leaves near the last fault holds office that much longer.
    release_ms: Millis,
    /// Two stores were lost in a row: a node still recovering at the end may be waiting
    /// for reporters with a store, which is the rule at work (src/protocol/recovery.rs).
    two_stores_lost: bool,
}

impl Judge {
    /// The operator changed the preemption policy online: the highest live node need
    /// not lead at the end, since `preempt` acts when a node starts, and a running node
    /// that learns `always` does not take over until its next start (the machine's
    /// `start` in src/protocol/machine/mod.rs).
    pub(super) fn preempt_changed(&mut self) {
        self.preempt = Preempt::Never;
    }

    /// The checks for a cluster of `config`, on a network as slow as the seed chose.
    /// `two_stores_lost`: the seed lost two stores in a row.
    pub(super) fn new(config: &SimConfig, slow_network: bool, two_stores_lost: bool) -> Judge {
        Judge {
            mode: config.mode,
            members: config.ids.clone(),
            timing: config.slowest_timing(),
            shortest_d: config
                .processes()
                .into_iter()
                .map(|id| config.timing_of(id).suspect_after_ms)
                .min()
                .unwrap_or(config.timing.suspect_after_ms),
            lease_bounds: config
                .processes()
                .into_iter()
                .map(|id| (id, lease_bound_ms(&config.timing_of(id))))
                .collect(),
            preempt: config.preempt,
            max_delay: config.delay_ms.1,
            slow_network,
            two_stores_lost,
            release_ms: 0,
        }
    }

    /// Widens the bounds to every timing in `timings` (an operator's roll runs nodes on
    /// two timings, one after the other): the slowest timeouts, each node's longest
    /// lease bound.
    pub(super) fn allow_for(&mut self, timings: &[Timing]) {
        for t in timings {
            self.shortest_d = self.shortest_d.min(t.suspect_after_ms);
            self.timing = Timing {
                heartbeat_ms: self.timing.heartbeat_ms.max(t.heartbeat_ms),
                suspect_after_ms: self.timing.suspect_after_ms.max(t.suspect_after_ms),
                answer_timeout_ms: self.timing.answer_timeout_ms.max(t.answer_timeout_ms),
                coordinator_timeout_ms: self
                    .timing
                    .coordinator_timeout_ms
                    .max(t.coordinator_timeout_ms),
                ..self.timing
            };
            for bound in self.lease_bounds.values_mut() {
                *bound = (*bound).max(lease_bound_ms(t));
            }
        }
    }

    /// How long node `node`'s office can outlast its pause (quorum mode).
    fn lease_bound(&self, node: NodeId) -> Millis {
        self.lease_bounds
            .get(&node)
            .copied()
            .unwrap_or_else(|| lease_bound_ms(&self.timing))
    }

    /// Allows for a voluntary departure that waits up to `bound` for its release.
    pub(super) fn allow_release(&mut self, bound: Millis) {
        self.release_ms = bound;
    }

    /// When the cluster must have converged after the last fault: the bound plus eight
    /// one-way delays of slack (see `convergence_deadline`), and the clocks' drift.
    pub(super) fn deadline(&self, last_fault: Millis) -> Millis {
        let bound =
            self.timing.convergence_bound_in(self.mode) + 8 * self.max_delay + self.release_ms;
        last_fault + bound + bound / 50
    }

    /// The history checks beyond the ones the simulator runs as it goes: the
    /// violations, and apart what a known gap of the machine explains ([`Gap`]).
    pub(super) fn violations(
        &self,
        sim: &Sim,
        history: &[Entry],
        live: &[NodeId],
        deadline_ms: Millis,
    ) -> (Vec<Violation>, Vec<(Gap, Violation)>) {
        let (timing, mode) = (&self.timing, self.mode);
        let mut gaps = Vec::new();
        // The node's clock may run up to 1% fast: its delay can end that much early.
        let mut violations =
            check_start_delay_where(history, timing.preempt_delay_ms * 98 / 100, |node, at| {
                !sim.started_alone(node, at)
            });
        if !self.slow_network {
            let mut quiet = quiet_window(timing, self.max_delay);
            if self.preempt == Preempt::Never && mode == Mode::Classic {
                // Such a node listens D after a start before it may declare (src/protocol/machine/
                // `start`), silent like one in a preempt delay.
                quiet.before_ms += timing.suspect_after_ms;
            }
            // After a forced recovery used beside the old majority, each side numbers
            // its own terms (seed 845427: the given-up side and the lone survivor both
            // declared term 3 before they met); within a side they are unique as ever.
            match sim.forced() {
                None => violations.extend(check_unique_terms(history, quiet)),
                Some(forced) => {
                    for side in sides(history, forced) {
                        violations.extend(check_unique_terms(&side, quiet));
                    }
                }
            }
        }
        // Q4 for readers: every answer naming a coordinator lies within its office (in
        // classic mode a paused coordinator's office lasts until it notices).
        let quorum = mode == Mode::Quorum;
        let answer_bound = |node| quorum.then(|| self.lease_bound(node));
        let offices = offices_with(history, answer_bound);
        // An office still open is read as ending with the history's last entry: the
        // answers after that entry are beyond what the history can judge.
        let end = history.last().map_or(0, |e| e.at_ms);
        let answers = sim.leader_answers();
        let judged = &answers[..answers.partition_point(|a| a.at_ms <= end)];
        violations.extend(check_leader_answers(judged, &offices));
        if mode == Mode::Quorum {
            let bound = |node: NodeId| self.lease_bound(node);
            match sim.forced() {
                None => {
                    violations.extend(check_no_overlap_with(history, bound));
                    violations.extend(check_one_per_term(history));
                }
                Some(forced) => {
                    let settle = self.release_ms + 4 * self.max_delay;
                    violations.extend(forced_recovery_checks(history, forced, bound, settle));
                }
            }
        }
        // A quorum coordinator holds its lease only while acks come back within
        // D - 2 x heartbeat; on a slower network quorum mode promises safety, not a leader.
        let lease_holds =
            2 * self.max_delay < self.shortest_d.saturating_sub(2 * timing.heartbeat_ms);
        if mode == Mode::Classic || lease_holds {
            // The list the live nodes end on (lists spread, so the newest one held), or
            // while none was written the initial members' (a spare's seed lists itself).
            let list = sim.newest_list(live);
            let member = |id: &NodeId| {
                list.as_ref()
                    .map_or(self.members.contains(id), |l| l.contains(*id))
            };
            let (members, outsiders): (Vec<NodeId>, Vec<NodeId>) =
                live.iter().copied().partition(member);
            // A recovering node is short of reporters by the rule when too many voters
            // are down (any list: classic seed 7512363 of the million run, a seeded list
            // whose third member stayed down), or by the gap below (only a node that
            // lives by a written list, or after two stores lost in a row).
            let all_members = members.clone();
            let (stuck, members): (Vec<NodeId>, Vec<NodeId>) =
                members.into_iter().partition(|&id| {
                    sim.is_recovering(id)
                        && (self.two_stores_lost
                            || sim.members(id).is_some_and(|l| l.id.stamp.is_some())
                            || reporters_down(sim, id, &all_members))
                });
            let convergence = Convergence::among_members(
                list.as_ref(),
                &members,
                |id| sim.is_eligible(id),
                self.preempt == Preempt::Always,
                deadline_ms,
            );
            let converged = check_convergence(history, &convergence);
            // The stuck members are the ones that could lead, or (quorum mode) their
            // votes are what a majority lacks: no leader is the gap's doing.
            // Without a written list, the initial members (a witness is never eligible).
            let can_lead = |id: &NodeId| {
                sim.is_eligible(*id)
                    && list.as_ref().map_or(self.members.contains(id), |l| {
                        l.get(*id).is_some_and(|m| m.may_lead())
                    })
            };
            let majority_of = |nodes: &BTreeSet<NodeId>| match &list {
                Some(l) => l.has_majority(nodes),
                None => {
                    let among = self.members.iter().filter(|m| nodes.contains(m)).count();
                    among >= crate::protocol::membership::majority_of(self.members.len())
                }
            };
            let up: BTreeSet<NodeId> = members.iter().copied().collect();
            let with_stuck: BTreeSet<NodeId> = up.iter().chain(&stuck).copied().collect();
            let lacking = !majority_of(&up) && majority_of(&with_stuck);
            let leaderless = !members.iter().any(can_lead) && stuck.iter().any(can_lead);
            let explained = !stuck.is_empty() && (leaderless || (mode == Mode::Quorum && lacking));
            // A recovery short of reporters because enough voters are down is the rule
            // at work, not a gap: its lost votes may lie with them (src/protocol/
            // recovery.rs), and until they are back no leader is owed.
            let stuck: Vec<NodeId> = stuck
                .into_iter()
                .filter(|&id| !reporters_down(sim, id, &members))
                .collect();
            if !explained {
                violations.extend(converged);
            } else if !stuck.is_empty() {
                gaps.extend(converged.into_iter().map(|v| (Gap::RecoveryStuck, v)));
            }
            gaps.extend(
                stuck_recoveries(sim, &stuck, deadline_ms)
                    .into_iter()
                    .map(|v| (Gap::RecoveryStuck, v)),
            );
            let (informed, unaware) = outsiders_lead(sim, &outsiders, deadline_ms);
            violations.extend(informed);
            gaps.extend(unaware.into_iter().map(|v| (Gap::UnawareOutsiderLeads, v)));
        }
        (violations, gaps)
    }
}

/// The history of the survivors of a forced recovery, and that of the members it gave
/// up: two clusters from then on, each numbering its own terms.
fn sides(history: &[Entry], forced: &Forced) -> [Vec<Entry>; 2] {
    let (survivors, given_up) = history
        .iter()
        .cloned()
        .partition(|e| forced.survivors.contains(&e.node));
    [survivors, given_up]
}

/// I6 and I7 after a forced recovery used while the old majority ran: two clusters
/// exist from then on, the survivors and the members they gave up, each with its own
/// terms. Within each side, I6 and I7 hold as always. Across them, the given-up side
/// must stand down once it meets the survivors (src/protocol/machine/given_up.rs): an
/// office of a given-up node may last past the first time that node reached a running
/// survivor by at most its lease bound and `settle` (a release, a few delays), and
/// one that begins later is a violation too.
fn forced_recovery_checks(
    history: &[Entry],
    forced: &Forced,
    bound: impl Fn(NodeId) -> Millis + Copy,
    settle: Millis,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    for entries in sides(history, forced) {
        violations.extend(check_no_overlap_with(&entries, bound));
        violations.extend(check_one_per_term(&entries));
    }
    for office in offices_with(history, |node| Some(bound(node))) {
        let Some(&met) = forced.contact.get(&office.node) else {
            continue;
        };
        let deadline = met + bound(office.node) + settle;
        if office.until_ms > deadline {
            violations.push(Violation::new(
                Invariant::NoOverlap,
                office.node,
                deadline,
                format!(
                    "given up by the forced recovery at {} ms and refused by a survivor at \
                     {met} ms, yet led {} from {} to {} ms (it had to stand down by {deadline} \
                     ms)",
                    forced.at_ms, office.epoch, office.from_ms, office.until_ms
                ),
            ));
        }
    }
    violations
}

/// I5 beyond the members: a live node outside the list the cluster ends on (removed, or
/// a spare never added) must not believe it leads at the end, or clients that ask it
/// are told of a second coordinator. Returns the violations, and apart the outsiders
/// that lead without knowing they are out (their own list still names them): a removed
/// member that missed the list without it is refused by every member before anyone
/// could tell it (a gap of the machine reported in tests/simulation.rs, counted there
/// rather than failed).
fn outsiders_lead(
    sim: &Sim,
    outsiders: &[NodeId],
    at_ms: Millis,
) -> (Vec<Violation>, Vec<Violation>) {
    let leading = outsiders
        .iter()
        .copied()
        .filter(|&id| sim.view(id).is_some_and(|v| v.role == Role::Coordinator));
    let (mut informed, mut unaware) = (Vec::new(), Vec::new());
    for id in leading {
        let knows = sim.members(id).is_some_and(|list| !list.contains(id));
        let (list, explanation) = if knows {
            (
                &mut informed,
                "holds a list without itself, yet a coordinator at the end",
            )
        } else {
            (
                &mut unaware,
                "not in the list the cluster ends on, never told so, and a coordinator at the end",
            )
        };
        list.push(Violation::new(
            Invariant::Convergence,
            id,
            at_ms,
            explanation.to_string(),
        ));
    }
    (informed, unaware)
}

/// Whether node `id`'s store recovery cannot complete with the voters that are up: the
/// voters of its list other than itself that are live and not recovering themselves
/// (`answering`) are fewer than the reports it needs.
fn reporters_down(sim: &Sim, id: NodeId, answering: &[NodeId]) -> bool {
    let Some((_, needed)) = sim.recovery_progress(id) else {
        return false;
    };
    let voters = sim.members(id).map(|l| l.voters()).unwrap_or_default();
    let up = voters
        .iter()
        .filter(|&&v| v != id && answering.contains(&v))
        .count();
    up < needed
}

/// Members still recovering an empty store at the end, after every member came back:
/// their recovery counts the reports the list they started with asks for, whatever
/// list they hold since, so a member removed meanwhile (which refuses them) or a list
/// with learners (counted as members, not as voters) can leave them short forever (a
/// gap of the machine reported in tests/simulation.rs). They take no part in I5.
fn stuck_recoveries(sim: &Sim, stuck: &[NodeId], at_ms: Millis) -> Vec<Violation> {
    stuck
        .iter()
        .map(|&id| {
            let (heard, needed) = sim.recovery_progress(id).unwrap_or_default();
            let others = sim.members(id).map_or(0, |l| l.others(id).len());
            let explanation = format!(
                "still recovering its store at the end: {heard} of {needed} reports, with \
                 {others} other members in its list"
            );
            Violation::new(Invariant::Convergence, id, at_ms, explanation)
        })
        .collect()
}
