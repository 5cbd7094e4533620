//! The machine's own contract, judged where every peer is known to be honest (the
//! simulator and the model checker): an honest peer is never flagged as misbehaving,
//! except the one refusal an honest peer can earn: a message from a node that is not in
//! the receiver's member list (a spare not added yet, a removed member, or a member the
//! receiver has not heard of yet) is refused as `UnknownPeer`
//! (src/protocol/machine/misbehaviour.rs).

use super::invariant::{Invariant, Violation};
use crate::protocol::{Millis, Misbehaviour, NodeId};

/// Whether flagging `peer` for `what` is the receiver's membership rule at work rather
/// than a breach of the contract: `UnknownPeer` for a peer its list (`listed`) lacks.
/// The same flag for a listed peer is still a breach.
pub fn stranger_refused(what: Misbehaviour, listed: bool) -> bool {
    what == Misbehaviour::UnknownPeer && !listed
}
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
