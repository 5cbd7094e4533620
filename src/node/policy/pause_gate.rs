//! The maintenance pause's part of eligibility (src/api/pause.rs): a paused cluster
//! reserves the role for its holder, and a node does not stand for election while it
//! has not yet compared its pause with every peer it is connected to
//! (src/node/serve/pause_sync.rs). The second rule closes a race: a member that was
//! down or cut off when `bully pause` ran would otherwise be eligible for the moment
//! between its link coming up and learning the pause, and could take over (a restart
//! holds an election at once). In quorum mode an election needs a majority of
//! connected voters, and a pause is kept by a majority, so some voter it compared with
//! holds the pause. A coordinator is not held back by the comparison (a follower's
//! link coming up must not make it resign); only the pause itself binds it.

use crate::api::Ineligible;
use crate::protocol::NodeId;
use std::collections::BTreeSet;

/// Why the maintenance pause keeps this node from leading, if it does.
#[derive(Debug, Default)]
pub struct PauseGate {
    /// The pause reserves the role for another node (the reason), or no pause.
    held_back: Option<String>,
    /// Connected peers whose pause this node has not compared with its own yet.
    unreconciled: BTreeSet<NodeId>,
    /// Whether this node leads now.
    leading: bool,
}

impl PauseGate {
    /// Why this node may not lead now, if it may not.
    pub fn reason(&self) -> Option<Ineligible> {
        if self.held_back.is_some() {
            return Some(Ineligible::Paused);
        }
        if self.leading || self.unreconciled.is_empty() {
            return None;
        }
        let peers = self.unreconciled.iter().copied().collect();
        Some(Ineligible::ComparingPause(peers))
    }

    /// The pause kept now reserves the role for another node (`Some(why)`), or not;
    /// whether that changed.
    pub fn set_held_back(&mut self, reason: Option<String>) -> bool {
        let changed = self.held_back != reason;
        self.held_back = reason;
        changed
    }

    /// `peer`'s link came up (its pause is to be compared) or went down.
    pub fn on_link(&mut self, peer: NodeId, connected: bool) {
        if connected {
            self.unreconciled.insert(peer);
        } else {
            self.unreconciled.remove(&peer);
        }
    }

    /// The comparison with `peer` succeeded (a failed one is tried again while the link
    /// is up, src/node/serve/pause_sync.rs).
    pub fn reconciled(&mut self, peer: NodeId) {
        self.unreconciled.remove(&peer);
    }

    /// Whether this node leads now.
    pub fn set_leading(&mut self, leading: bool) {
        self.leading = leading;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_coming_up_holds_a_follower_back_until_compared() {
        let mut gate = PauseGate::default();
        assert_eq!(gate.reason(), None);
        gate.on_link(2, true);
        gate.on_link(3, true);
        assert_eq!(gate.reason(), Some(Ineligible::ComparingPause(vec![2, 3])));
        gate.reconciled(2);
        gate.on_link(3, false);
        assert_eq!(
            gate.reason(),
            None,
            "a peer gone is nothing to compare with"
        );
    }

    #[test]
    fn a_coordinator_is_held_back_by_the_pause_only() {
        let mut gate = PauseGate::default();
        gate.set_leading(true);
        gate.on_link(2, true);
        assert_eq!(
            gate.reason(),
            None,
            "a follower's link must not make it resign"
        );
        gate.set_held_back(Some("paused".into()));
        assert_eq!(gate.reason(), Some(Ineligible::Paused));
        gate.set_held_back(None);
        gate.set_leading(false);
        assert!(
            gate.reason().is_some(),
            "once it follows, the comparison counts"
        );
    }
}
