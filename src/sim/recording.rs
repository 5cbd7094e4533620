//! The history the simulator writes, checked as it is written: every entry goes
//! through [`crate::checker::Safety`], every send through I3's message rule.

use super::Sim;
use crate::checker::{check_send, Invariant, Violation};
use crate::history::{Entry, Record};
use crate::protocol::{Message, NodeId};

impl Sim {
    /// I3 for a send ([`check_send`]: a message reveals only what its sender stored),
    /// and notes the highest epoch the node revealed for the check at its crash.
    pub(super) fn check_reveal(&mut self, id: NodeId, msg: &Message) {
        let stored = self.nodes[&id].disk.accepted;
        if let Some(violation) = check_send(id, self.now, &msg.body, stored) {
            self.report(violation);
        }
        if let Some(node) = self.nodes.get_mut(&id) {
            node.revealed = node.revealed.max(msg.body.reveals().epoch());
        }
    }

    /// Appends `record` to the history and checks it with [`crate::checker::Safety`].
    pub(super) fn record(&mut self, node: NodeId, record: Record) {
        let entry = Entry {
            at_ms: self.now,
            node,
            record,
        };
        let before = self.violations.len();
        self.safety.observe(&entry, &mut self.violations);
        self.history.push(entry);
        if self.violations.len() > before && self.first_violation_at.is_none() {
            self.first_violation_at = Some(self.history.len());
        }
    }

    /// Reports a violation found by the simulator itself, now, on `node`.
    pub(super) fn violate(&mut self, invariant: Invariant, node: NodeId, explanation: String) {
        self.report(Violation::new(invariant, node, self.now, explanation));
    }

    /// Keeps `violation` and, for the first one, where the history stood.
    pub(super) fn report(&mut self, violation: Violation) {
        self.violations.push(violation);
        if self.first_violation_at.is_none() {
            self.first_violation_at = Some(self.history.len());
        }
    }
}
