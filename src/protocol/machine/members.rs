//! Who the other members are, as the rules ask it: whether a sender is a member at all,
//! which peers are above this node and could lead, how many members make a majority
//! (Q1, Q2, Q6 and the lease of Q3), and whether a leader is one to follow or to bully
//! (Bully order: rules accept and bully of docs/design.md). Every such question is
//! answered here, so a member set that changes, or a majority counted another way,
//! changes this file and no rule.

use super::config::MachineConfig;
use super::Machine;
use crate::protocol::epoch::NodeId;
use crate::protocol::mode::Preempt;
use std::collections::BTreeSet;

impl MachineConfig {
    /// Members (this node included) needed for a majority of the seeded list.
    pub fn majority(&self) -> usize {
        crate::protocol::membership::majority_of(self.peers.len() + 1)
    }
}

impl Machine {
    /// Higher IDs that could lead (witnesses never answer an Election); for a ranked
    /// node every peer that could lead, since any of them may hold a higher estimate
    /// (ranked_election, `estimate.rs`).
    pub(super) fn higher_peers(&self) -> Vec<NodeId> {
        let never = self.members.never_lead();
        let ranked = self.ranked();
        self.members
            .others(self.config.id)
            .into_iter()
            .filter(|&p| (ranked || p > self.config.id) && !never.contains(&p))
            .collect()
    }

    /// Whether `voters` (this node included) make a majority of the members.
    pub(super) fn is_majority(&self, voters: &BTreeSet<NodeId>) -> bool {
        self.members.has_majority(voters)
    }

    /// Whether a claim by `leader` may be followed without a fight.
    pub(super) fn may_follow(&self, leader: NodeId) -> bool {
        !self.eligible || leader > self.config.id || !self.preempting()
    }

    /// Whether a live coordinator `leader` is one this node bullies (eligibility aside).
    pub(super) fn preempts(&self, leader: NodeId) -> bool {
        leader < self.config.id && self.preempting()
    }

    /// Whether this node takes office from a live coordinator below it: with preempt
    /// always, unless it is ranked (kept, `estimate.rs`: estimates order elections only).
    pub(super) fn preempting(&self) -> bool {
        self.config.preempt == Preempt::Always && !self.ranked()
    }
}
