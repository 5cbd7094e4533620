//! I3 durability as a driver that sees each node's stored cells judges it: a message
//! reveals no epoch its sender has not stored ([`check_send`], the simulator and the
//! model checker), and a crash keeps cells that hold all the node revealed and declared
//! ([`check_crash`], the simulator). Views are judged over a history by
//! [`super::Safety`].

use super::invariant::{Invariant, Violation};
use crate::protocol::{Body, Cells, Epoch, Millis, NodeId};

/// I3 for a send: `body` may reveal only what the sender's stored accepted epoch,
/// `stored`, holds ([`crate::protocol::reveal::Reveal`] says what each body reveals).
pub fn check_send(
    node: NodeId,
    at_ms: Millis,
    body: &Body,
    stored: Option<Epoch>,
) -> Option<Violation> {
    let reveal = body.reveals();
    (!reveal.is_stored(stored)).then(|| {
        let explanation = format!(
            "sends {body:?} revealing {:?}, but its stored accepted epoch is {stored:?}",
            reveal.epoch()
        );
        Violation::new(Invariant::Durability, node, at_ms, explanation)
    })
}

/// I3 at a crash: the cells it keeps, `kept`, must hold the highest epoch the node
/// revealed (in views and messages) and the highest term it declared.
pub fn check_crash(
    node: NodeId,
    at_ms: Millis,
    kept: Cells,
    revealed: Option<Epoch>,
    declared_term: u64,
) -> Option<Violation> {
    (revealed > kept.accepted || declared_term > kept.term).then(|| {
        let explanation = format!(
            "crash keeps cells {kept:?}, but the node revealed {revealed:?} and declared term \
             {declared_term}"
        );
        Violation::new(Invariant::Durability, node, at_ms, explanation)
    })
}
