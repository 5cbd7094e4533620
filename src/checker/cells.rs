//! Rules on one write of a node's stored cells, judged against what it stored before:
//! I1 (the accepted epoch never goes back) and the per-node part of I2 (the term cell
//! never goes back). The history checker ([`super::Safety`]) and the model checker
//! (src/model/properties.rs) both call these.

use super::invariant::{show, Invariant, Violation};
use crate::protocol::{Epoch, Millis, NodeId};

/// I1: a write that takes the accepted epoch from `before` back to `after`.
pub fn check_accepted_rises(
    node: NodeId,
    at_ms: Millis,
    before: Option<Epoch>,
    after: Option<Epoch>,
) -> Option<Violation> {
    (after < before).then(|| {
        let explanation = format!(
            "persisted accepted epoch {} after {}: accepted epochs must rise",
            show(after),
            show(before)
        );
        Violation::new(Invariant::Fencing, node, at_ms, explanation)
    })
}

/// I2, per node: a write that takes the term cell from `before` back to `after`, so a
/// later declaration could reuse a term.
pub fn check_term_rises(node: NodeId, at_ms: Millis, before: u64, after: u64) -> Option<Violation> {
    (after < before).then(|| {
        let explanation = format!(
            "term cell went back from {before} to {after}: a later declaration could reuse a term"
        );
        Violation::new(Invariant::Uniqueness, node, at_ms, explanation)
    })
}
