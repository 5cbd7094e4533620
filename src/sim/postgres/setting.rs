//! The operator's `bully config set postgres.synchronous=…` during the faults (issue 47):
//! the synchronous mode is a cluster setting (src/protocol/settings.rs), so it reaches
//! the members with the member list that carries it, the coordinator's first and each
//! other's at a step of its own, and every member's decisions read the mode its node
//! holds (src/node/postgres/manager.rs, `rules`). Drawn with its own RNG
//! (`Spec::synchronous_changes`), so the seeds recorded before keep their course when
//! off.
//!
//! What the checks hold across a change (docs/design.md#keeping-postgresql):
//!
//! - a commit is promised when the primary's `synchronous_standby_names` were written
//!   while its node held `quorum` or `strict` (`Data::names_off` false): the names
//!   under `off` promise nothing, whatever the node holds by the time it acknowledges;
//! - a promotion decided by a coordinator that holds `off` may lose commits (up to
//!   `maximum_lag_on_failover`): the operator's change accepted that. One decided
//!   under `quorum` or `strict` keeps every promised commit, also the ones a primary
//!   acknowledged before the change reached it.
//!
//! The sabotage `SynchronousFromFile` has the decisions read the seed's first mode (a
//! host's file) whatever the cluster holds: after a change to `quorum` a primary still
//! acknowledges alone and a promotion passes over its commits.

use super::log::Event;
use super::world::World;
use super::Sabotage;
use crate::config::postgres::Synchronous;
use crate::postgres_rules::Rules;
use crate::protocol::NodeId;
use rand::Rng;

/// The chance a fault step draws a change, in percent.
const CHANGE_PERCENT: u32 = 2;
/// The most steps the changed list takes to reach a member other than the coordinator.
pub(super) const LONGEST_SPREAD: u64 = 4;

/// The other mode a change sets: `off` from a synchronous one, back to the seed's own
/// (or `quorum` for a seed that started `off`).
fn flipped(last: Synchronous, first: Synchronous) -> Synchronous {
    match (last, first) {
        (Synchronous::Off, Synchronous::Off) => Synchronous::Quorum,
        (Synchronous::Off, first) => first,
        _ => Synchronous::Off,
    }
}

impl World {
    /// Every step: changes that reached a member take effect. During fault steps: maybe
    /// the operator sets the other mode.
    pub(super) fn draw_setting_change(&mut self, faults: bool) {
        let now = self.now;
        for m in &mut self.members {
            if let Some((_, mode)) = m.synchronous_next.filter(|&(at, _)| at <= now) {
                m.synchronous = mode;
                m.synchronous_next = None;
            }
        }
        let changes = &mut self.settings;
        if !faults || !self.spec.synchronous_changes || !changes.rng.gen_ratio(CHANGE_PERCENT, 100)
        {
            return;
        }
        let mode = flipped(changes.last, self.spec.synchronous);
        changes.last = mode;
        let leader = self.office.map(|h| h.leader);
        let ids: Vec<NodeId> = self.members.iter().map(|m| m.id).collect();
        for id in ids {
            let spread = match Some(id) == leader {
                true => 0,
                false => self.settings.rng.gen_range(0..=LONGEST_SPREAD),
            };
            self.member_mut(id).synchronous_next = Some((now + spread, mode));
        }
        let name = match mode {
            Synchronous::Off => "bully config set postgres.synchronous=off",
            Synchronous::Quorum => "bully config set postgres.synchronous=quorum",
            Synchronous::Strict => "bully config set postgres.synchronous=strict",
        };
        *self.summary.faults.entry(name).or_default() += 1;
        self.event(Event::Operator(format!("{name} (from {leader:?})")));
        // The coordinator holds the list at once.
        if let Some(leader) = leader {
            let m = self.member_mut(leader);
            m.synchronous = mode;
            m.synchronous_next = None;
        }
    }

    /// The rules member `id`'s decisions run by: the mode its node holds, or the seed's
    /// first under the sabotage `SynchronousFromFile`; `postgres.standby_cluster` as its
    /// node holds it (src/sim/postgres/remote.rs).
    pub(super) fn rules_of(&self, id: NodeId) -> Rules {
        let synchronous = match self.spec.sabotage {
            Some(Sabotage::SynchronousFromFile) => self.spec.synchronous,
            _ => self.member(id).synchronous,
        };
        Rules {
            synchronous,
            standby_cluster: self.standby_cluster_of(id),
            ..self.rules
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_sets_off_then_the_seeds_own_mode_back() {
        use Synchronous::*;
        assert_eq!(flipped(Quorum, Quorum), Off);
        assert_eq!(flipped(Off, Quorum), Quorum);
        assert_eq!(flipped(Off, Strict), Strict);
        assert_eq!(flipped(Strict, Strict), Off);
        assert_eq!(flipped(Off, Off), Quorum);
        assert_eq!(flipped(Quorum, Off), Off);
    }
}
