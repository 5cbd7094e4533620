//! Clients asking "who leads?" (`bully leader` through any member): every
//! [`QUERY_EVERY_MS`] of virtual time each running, unpaused node is asked, and answers
//! by the rule the node's API follows (src/protocol/machine/leader_query.rs): for itself
//! if it leads, else only once the coordinator it follows, reached over a working link
//! and not paused, confirms its office. Every answer that names a node is kept, for the
//! judge to check against the offices of the history (`checker::check_leader_answers`;
//! in classic mode an office ends only when its holder notices).

use super::Sim;
use crate::checker::LeaderAnswer;
use crate::protocol::{Millis, NodeId, SelfReport};

/// How often (virtual ms) every node is asked: several times per heartbeat, so an answer
/// falls in every gap between a coordinator's death and its followers' suspicion.
pub const QUERY_EVERY_MS: Millis = 10;

impl Sim {
    /// Asks every node at each query time up to and including `until` not yet asked.
    /// Called before the event at `until` runs: the state seen is the one up to it.
    pub(super) fn ask_who_leads_until(&mut self, until: Millis) {
        while self.next_query_at <= until {
            let at = self.next_query_at.max(self.now);
            self.next_query_at = at + QUERY_EVERY_MS;
            self.now = at;
            let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
            for id in ids {
                if let Some(epoch) = self.leader_answer(id) {
                    let asked = id;
                    let at_ms = at;
                    self.leader_answers.push(LeaderAnswer {
                        asked,
                        epoch,
                        at_ms,
                    });
                }
            }
        }
    }

    /// What node `id` answers now, if it is up, not paused and names a coordinator.
    fn leader_answer(&self, id: NodeId) -> Option<crate::protocol::Epoch> {
        let node = self.nodes.get(&id).filter(|n| !n.paused)?;
        let machine = node.machine.as_ref()?;
        let ask = |leader: NodeId| {
            let theirs = self.nodes.get(&leader).filter(|n| !n.paused)?;
            let m = theirs.machine.as_ref()?;
            self.reachable(id, leader).then(|| SelfReport {
                role: m.role_at(theirs.local(self.now)),
                epoch: m.view().epoch,
            })
        };
        machine.leader_answer(node.local(self.now), ask)
    }

    /// Every answer naming a coordinator that the queries got so far.
    pub fn leader_answers(&self) -> &[LeaderAnswer] {
        &self.leader_answers
    }
}
