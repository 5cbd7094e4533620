//! One member list per identity: no two nodes ever hold different lists under the same
//! [`ConfigId`]. Every rule that compares lists (a node stores only a newer one, votes
//! only for a candidate at least as new: src/protocol/machine/membership.rs) reads the
//! identity alone, so two lists under one identity would let nodes that "agree" on
//! the newest list live by different members.

use super::invariant::{Invariant, Violation};
use crate::protocol::{ConfigId, Membership, Millis, NodeId};
use std::collections::BTreeMap;

/// Every stamped list seen so far, by identity, with the first node that held it.
/// Lists seeded from config files (`stamp: None`) are left out: each node's file seeds
/// its own (a new node's file lists itself, the members' files do not), none is ever
/// stored, and every list a coordinator writes outranks them all.
#[derive(Debug, Default)]
pub struct ListIdentity {
    seen: BTreeMap<ConfigId, (NodeId, Membership)>,
}

impl ListIdentity {
    /// A check that has seen no list yet.
    pub fn new() -> ListIdentity {
        ListIdentity::default()
    }

    /// `node` stores `list` at `at_ms`: a violation if another node (or this one, in
    /// an earlier life) held a different list under the same identity.
    pub fn observe(&mut self, node: NodeId, at_ms: Millis, list: &Membership) -> Option<Violation> {
        list.id.stamp?;
        let (first, held) = self
            .seen
            .entry(list.id)
            .or_insert_with(|| (node, list.clone()));
        (held != list).then(|| {
            let explanation = format!(
                "stores list {} with members {}; node {first} held {} with members {}",
                list.id,
                described(list),
                held.id,
                described(held)
            );
            Violation::new(Invariant::ListIdentity, node, at_ms, explanation)
        })
    }
}

/// A list's members in words: `1, 2 (witness), 4 (learner)`.
fn described(list: &Membership) -> String {
    let member = |m: &crate::protocol::Member| {
        let mut out = m.id.to_string();
        if m.seat == crate::protocol::Seat::Witness {
            out.push_str(" (witness)");
        }
        if m.learner {
            out.push_str(" (learner)");
        }
        out
    };
    list.members
        .iter()
        .map(member)
        .collect::<Vec<_>>()
        .join(", ")
}
