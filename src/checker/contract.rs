//! The machine's own contract, judged where every peer is known to be honest (the
//! simulator and the model checker): an honest peer is never flagged as misbehaving.

use super::invariant::{Invariant, Violation};
use crate::protocol::{Millis, NodeId};
use std::fmt::Display;

/// `node` flagged the honest `peer` as misbehaving, for the reason `what`.
pub fn honest_peer_flagged(
    node: NodeId,
    at_ms: Millis,
    peer: NodeId,
    what: impl Display,
) -> Violation {
    let explanation = format!("flagged honest peer {peer}: {what}");
    Violation::new(Invariant::Protocol, node, at_ms, explanation)
}
