//! Refusing to lead rather than split: which peers' configs were seen to disagree with
//! ours (the transport refuses their connections, see `crate::transport`'s
//! `agreement`), and whether that leaves this node on the wrong side of a half-done
//! config change. A pure rule, fed by [`super::eligibility::Eligibility`].
//!
//! Two rules, for N members (this node included) and a majority q = N/2 + 1:
//! - **Member lists.** A node that has seen, since it started, a peer whose member list
//!   differs from ours by more than one member is ineligible until that peer connects
//!   again with a list within one. Two lists two apart can each count a majority of
//!   their own ({1,2} of [1,2,3] and {3,4,5} of [1..5]), and a refusal only
//!   disconnects: both sides would elect. Every node that sees the conflict stands
//!   down, so at worst no node leads; never two.
//! - **Mode.** A node is ineligible while more than N - q peers were seen to run
//!   another mode: the members that agree with it are then fewer than q, so it is on
//!   the minority side of a half-done change. A `classic` member among quorum members,
//!   which would lead alone once refused, stands down. (D is no longer compared: it is
//!   cluster state, changed online, docs/design.md#cluster-settings.)
//!
//! A peer that disagreed keeps counting, even while down, until it connects with a
//! config that agrees: it would come back as it was.
//!
//! **Hello gate.** The rules can only count what the node has seen, so a starting node
//! does not lead until its first hello exchange with every peer has settled (accepted,
//! refused, or the peer found unreachable), or D has passed: a `classic` node started
//! among quorum peers, whose runtime stalled past its probe window on a busy machine,
//! declared itself between the first refusals and the one that would have made it
//! ineligible. Peers that are up settle within a round trip, so the gate costs nothing
//! then, and at most D while some peer is down.

use crate::protocol::membership::majority_of;
use crate::protocol::{Millis, NodeId};
use crate::transport::MismatchKind;
use std::collections::{BTreeMap, BTreeSet};

/// What this node has seen of its peers' configs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigConflicts {
    /// N: the members, this node included.
    members: usize,
    /// Peers whose config was last seen to disagree, and how.
    peers: BTreeMap<NodeId, MismatchKind>,
    /// Peers whose first hello exchange has not settled yet (the hello gate).
    unsettled: BTreeSet<NodeId>,
    /// When the hello gate opens even with peers unsettled; `None` once it is open.
    gate_until: Option<Millis>,
}

impl ConfigConflicts {
    /// No conflict seen yet, in a cluster of `members` (this node included), and no
    /// hello gate.
    pub fn new(members: usize) -> ConfigConflicts {
        ConfigConflicts {
            members: members.max(1),
            peers: BTreeMap::new(),
            unsettled: BTreeSet::new(),
            gate_until: None,
        }
    }

    /// A node starting with `peers`: the hello gate is closed until each of them has
    /// settled, or until `gate_until` (start plus D).
    pub fn starting(peers: &[NodeId], gate_until: Millis) -> ConfigConflicts {
        let mut conflicts = ConfigConflicts::new(peers.len() + 1);
        conflicts.unsettled = peers.iter().copied().collect();
        conflicts.gate_until = (!peers.is_empty()).then_some(gate_until);
        conflicts
    }

    /// A peer's config was seen to disagree (`Some`) or to agree (`None`).
    pub fn on_peer(&mut self, peer: NodeId, mismatch: Option<MismatchKind>) {
        self.settled(peer);
        match mismatch {
            Some(kind) => self.peers.insert(peer, kind),
            None => self.peers.remove(&peer),
        };
    }

    /// A peer's first hello exchange settled (it came up, was refused or refused us,
    /// or was found unreachable); the gate opens when the last one has.
    pub fn settled(&mut self, peer: NodeId) {
        self.unsettled.remove(&peer);
        if self.unsettled.is_empty() {
            self.gate_until = None;
        }
    }

    /// When the hello gate opens by itself, if it is closed.
    pub fn gate_deadline(&self) -> Option<Millis> {
        self.gate_until
    }

    /// The gate's deadline has come: it opens whatever is unsettled.
    pub fn open_gate(&mut self) {
        self.gate_until = None;
        self.unsettled.clear();
    }

    /// Why the node may not lead, if the conflicts (or the hello gate) forbid it.
    pub fn reason(&self) -> Option<String> {
        if let Some(gate) = self.reason_of_conflicts() {
            return Some(gate);
        }
        self.gate_until.map(|_| {
            let waiting: Vec<NodeId> = self.unsettled.iter().copied().collect();
            format!(
                "waiting for the first hello with {} (at most D)",
                nodes(&waiting)
            )
        })
    }

    fn reason_of_conflicts(&self) -> Option<String> {
        let lists = self.peers_where(|k| k == MismatchKind::Members);
        if !lists.is_empty() {
            return Some(format!(
                "member list differs by more than one from {}",
                nodes(&lists)
            ));
        }
        let settings = self.peers_where(|k| k != MismatchKind::Members);
        let majority = majority_of(self.members);
        let spare = self.members - majority;
        (settings.len() > spare).then(|| {
            format!(
                "mode differs from {} ({} of {} members; more than {spare} \
                 leaves the agreeing ones short of a majority)",
                nodes(&settings),
                settings.len(),
                self.members
            )
        })
    }

    fn peers_where(&self, pred: impl Fn(MismatchKind) -> bool) -> Vec<NodeId> {
        self.peers
            .iter()
            .filter(|(_, &kind)| pred(kind))
            .map(|(&peer, _)| peer)
            .collect()
    }
}

/// `node 3` or `nodes 1,2`.
fn nodes(ids: &[NodeId]) -> String {
    let list: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    let noun = if ids.len() == 1 { "node" } else { "nodes" };
    format!("{noun} {}", list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use MismatchKind::{Members, Mode, Timing};

    #[test]
    fn one_member_list_two_apart_forbids_leading_until_it_agrees() {
        let mut c = ConfigConflicts::new(5);
        assert_eq!(c.reason(), None);
        c.on_peer(3, Some(Members));
        let why = c.reason().expect("ineligible");
        assert!(
            why.contains("member list differs by more than one from node 3"),
            "{why}"
        );
        c.on_peer(4, Some(Timing));
        assert!(
            c.reason().unwrap().contains("member list"),
            "lists come first"
        );
        c.on_peer(3, None);
        assert_eq!(
            c.reason(),
            None,
            "one settings conflict of 5 is within N - q = 2"
        );
    }

    /// A rolling change of D on 3 nodes, seen from each node in turn.
    #[test]
    fn a_rolling_change_of_d_leaves_the_side_with_a_majority_eligible() {
        // Node 3 changed first: it sees 1 and 2 disagree (2 > N - q = 1).
        let mut changed = ConfigConflicts::new(3);
        changed.on_peer(1, Some(Timing));
        changed.on_peer(2, Some(Timing));
        let why = changed.reason().expect("the changed node stands down");
        assert!(
            why.contains("nodes 1,2 (2 of 3 members; more than 1"),
            "{why}"
        );
        // Nodes 1 and 2 each see node 3 alone disagree.
        let mut old = ConfigConflicts::new(3);
        old.on_peer(3, Some(Timing));
        assert_eq!(old.reason(), None, "the unchanged pair still leads");
        // Node 2 changes too: node 3 sees it agree; node 1 now sees two disagree.
        changed.on_peer(2, None);
        assert_eq!(changed.reason(), None);
        old.on_peer(2, Some(Timing));
        assert!(old.reason().is_some(), "the last old node stands down");
    }

    #[test]
    fn a_classic_member_among_quorum_members_stands_down_and_they_do_not() {
        let mut classic = ConfigConflicts::new(5);
        for peer in [1, 2, 4, 5] {
            classic.on_peer(peer, Some(Mode));
        }
        assert!(classic.reason().unwrap().contains("nodes 1,2,4,5 (4 of 5"));
        let mut quorum = ConfigConflicts::new(5);
        quorum.on_peer(3, Some(Mode));
        assert_eq!(quorum.reason(), None);
        // Exactly N - q disagreeing still leaves a majority that agrees.
        classic.on_peer(4, None);
        classic.on_peer(5, None);
        assert_eq!(classic.reason(), None, "2 of 5 disagree: 3 agree");
    }

    #[test]
    fn a_starting_node_waits_for_every_peers_first_hello_or_its_deadline() {
        let mut c = ConfigConflicts::starting(&[1, 2, 4, 5], 300);
        assert_eq!(c.gate_deadline(), Some(300));
        let why = c.reason().unwrap();
        assert!(why.contains("first hello with nodes 1,2,4,5"), "{why}");
        c.on_peer(1, Some(Mode));
        c.settled(2);
        c.on_peer(4, Some(Mode));
        assert!(
            c.reason().unwrap().contains("node 5"),
            "one still unsettled"
        );
        // The stalled classic node of the module docs: the third refusal decides.
        c.on_peer(5, Some(Mode));
        assert_eq!(c.gate_deadline(), None);
        assert!(c.reason().unwrap().contains("differs from nodes 1,4,5"));
        // A peer that never answers: the deadline opens the gate.
        let mut c = ConfigConflicts::starting(&[1, 2], 300);
        c.settled(1);
        c.open_gate();
        assert_eq!((c.reason(), c.gate_deadline()), (None, None));
        assert_eq!(ConfigConflicts::starting(&[], 300).reason(), None, "alone");
    }

    #[test]
    fn with_four_members_one_dissenter_is_the_most_tolerated() {
        let mut c = ConfigConflicts::new(4);
        c.on_peer(1, Some(Timing));
        assert_eq!(c.reason(), None);
        c.on_peer(2, Some(Mode));
        assert!(c.reason().is_some(), "2 of 4 disagree: 2 agree, short of 3");
    }
}
