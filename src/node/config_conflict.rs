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
//! - **Mode and D.** A node is ineligible while more than N - q peers were seen to run
//!   another mode or another `timing.suspect_after_ms`: the members that agree with it
//!   are then fewer than q, so it is on the minority side of a half-done change. In a
//!   rolling change of D on 3 nodes, the first changed node stands down and the other
//!   two still lead; once two are changed, the last old one stands down. A `classic`
//!   member among quorum members, which would lead alone once refused, stands down.
//!
//! A peer that disagreed keeps counting, even while down, until it connects with a
//! config that agrees: it would come back as it was.

use crate::protocol::NodeId;
use crate::transport::MismatchKind;
use std::collections::BTreeMap;

/// What this node has seen of its peers' configs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigConflicts {
    /// N: the members, this node included.
    members: usize,
    /// Peers whose config was last seen to disagree, and how.
    peers: BTreeMap<NodeId, MismatchKind>,
}

impl ConfigConflicts {
    /// No conflict seen yet, in a cluster of `members` (this node included).
    pub fn new(members: usize) -> ConfigConflicts {
        ConfigConflicts {
            members: members.max(1),
            peers: BTreeMap::new(),
        }
    }

    /// A peer's config was seen to disagree (`Some`) or to agree (`None`).
    pub fn on_peer(&mut self, peer: NodeId, mismatch: Option<MismatchKind>) {
        match mismatch {
            Some(kind) => self.peers.insert(peer, kind),
            None => self.peers.remove(&peer),
        };
    }

    /// Why the node may not lead, if the conflicts forbid it.
    pub fn reason(&self) -> Option<String> {
        let lists = self.peers_where(|k| k == MismatchKind::Members);
        if !lists.is_empty() {
            return Some(format!(
                "member list differs by more than one from {}",
                nodes(&lists)
            ));
        }
        let settings = self.peers_where(|k| k != MismatchKind::Members);
        let majority = self.members / 2 + 1;
        let spare = self.members - majority;
        (settings.len() > spare).then(|| {
            format!(
                "mode or suspect_after_ms differs from {} ({} of {} members; more than {spare} \
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
    fn with_four_members_one_dissenter_is_the_most_tolerated() {
        let mut c = ConfigConflicts::new(4);
        c.on_peer(1, Some(Timing));
        assert_eq!(c.reason(), None);
        c.on_peer(2, Some(Mode));
        assert!(c.reason().is_some(), "2 of 4 disagree: 2 agree, short of 3");
    }
}
