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
    /// Members (this node included) needed for a majority.
    pub fn majority(&self) -> usize {
        // floor(M / 2) + 1 with M = peers + 1 members.
        self.peers.len().div_ceil(2) + 1
    }

    /// Whether `node` is one of the other members.
    pub(super) fn is_peer(&self, node: NodeId) -> bool {
        self.peers.contains(&node)
    }
}

impl Machine {
    /// Higher IDs that could lead (witnesses never answer an Election).
    pub(super) fn higher_peers(&self) -> Vec<NodeId> {
        self.config
            .peers
            .iter()
            .copied()
            .filter(|&p| p > self.config.id && !self.config.witnesses.contains(&p))
            .collect()
    }

    /// Whether `voters` (this node included) make a majority of the members.
    pub(super) fn is_majority(&self, voters: &BTreeSet<NodeId>) -> bool {
        voters.len() >= self.config.majority()
    }

    /// Whether a claim by `leader` may be followed without a fight.
    pub(super) fn may_follow(&self, leader: NodeId) -> bool {
        !self.eligible || leader > self.config.id || self.config.preempt == Preempt::Never
    }

    /// Whether a live coordinator `leader` is one this node bullies (eligibility aside).
    pub(super) fn preempts(&self, leader: NodeId) -> bool {
        leader < self.config.id && self.config.preempt == Preempt::Always
    }
}
