//! The machine's inputs ([`Event`]) and outputs ([`Action`]): everything that crosses
//! between the pure protocol and whoever drives it (the runtime, the simulator, the
//! model checker).

use super::misbehaviour::Misbehaviour;
use crate::protocol::epoch::{Cells, Millis, NodeId};
use crate::protocol::membership::{Change, Membership};
use crate::protocol::message::Message;
use crate::protocol::view::{Fact, View};

/// An input to the machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// A message from an authenticated peer.
    Message { from: NodeId, msg: Message },
    /// Time has passed; the machine fires whatever deadlines are due.
    Tick,
    /// The transport lost its connection to this peer.
    PeerDown(NodeId),
    /// The transport (re)connected to this peer. Messages sent while it was down were
    /// dropped, so the machine repeats what the peer must not miss.
    PeerUp(NodeId),
    /// The health check (or a step-down) changed whether this node may lead.
    SetEligible(bool),
    /// The estimate source measured `value` (`None`: it failed or printed nothing
    /// usable), fresh until `fresh_until` on the machine's clock; from the first one on,
    /// elections go by `(estimate, id)` (docs/design.md#elected-by-data-est).
    SetEstimate {
        value: Option<u64>,
        fresh_until: Millis,
    },
    /// The process is stopping cleanly: a coordinator demotes itself and resigns.
    Shutdown,
    /// An operator asks for a change of the member list (only a coordinator acts on it;
    /// the outcome is a [`Fact`]).
    ChangeMembers(Change),
    /// The driver released `epoch`, which the machine asked it to with
    /// [`Action::AwaitRelease`]: `on_demoted` and the keepers are done.
    Released {
        epoch: crate::protocol::epoch::Epoch,
    },
    /// Peer `by` refused this node as one a forced recovery gave up (its transport
    /// closed our connection saying so): the node stands down for good
    /// (src/protocol/machine/given_up.rs).
    GivenUp { by: NodeId },
}

/// An output of the machine, to be run in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Write these cells in one transaction and flush before the next action.
    Persist(Cells),
    /// Store this member list (and fsync) before the next action: later actions live by
    /// it (docs/design.md#membership).
    PersistMembers(Membership),
    Send {
        to: NodeId,
        msg: Message,
    },
    /// The node's view changed; publish it (clients, hooks, event log).
    ViewChanged(View),
    /// A peer sent something it may not send; the runtime closes its connection.
    Misbehaved {
        peer: NodeId,
        what: Misbehaviour,
    },
    /// Something happened that the runtime, simulator and checker want to know about.
    Fact(Fact),
    /// The coordinator of `epoch` is leaving office on its own: show it as not leading,
    /// run `on_demoted`, let the keepers stop, then hand the machine
    /// [`Event::Released`]. Until then it stays in office and heartbeats
    /// (`release.rs`).
    AwaitRelease {
        epoch: crate::protocol::epoch::Epoch,
    },
}
