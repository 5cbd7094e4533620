//! [`TransportEvent`]: what the transport tells the node runtime, and [`Events`], the
//! queue every task tells it through.

use super::mismatch::ConfigMismatch;
use crate::protocol::{Message, NodeId};
use crate::shutdown::Shutdown;
use tokio::sync::mpsc;

/// What the transport tells the node runtime, in the order it happened.
#[derive(Debug)]
pub enum TransportEvent {
    /// A message from an authenticated peer (the sender is its certificate's ID).
    Message { from: NodeId, msg: Message },
    /// Our outbound connection to the peer is up: messages to it flow from now on.
    PeerUp(NodeId),
    /// Our outbound connection to the peer was lost, or a first dial to it failed;
    /// messages to it are dropped until the next `PeerUp`. Sent once per outage.
    PeerDown(NodeId),
    /// An API client connected (ALPN [`super::ALPN_API`], certificate from the cluster
    /// CA); it opens one bidirectional stream per request.
    Client(quinn::Connection),
    /// What a peer's hello showed of its config, reported when it changes: `Some` the
    /// first time the peer's config is seen to disagree with ours (its connections are
    /// refused from then on, by either end), `None` when a peer that disagreed connects
    /// with a config that agrees. Never dropped: eligibility depends on it.
    PeerConfig {
        peer: NodeId,
        mismatch: Option<ConfigMismatch>,
    },
    /// The peer refused our connection as one a forced recovery on it gave up
    /// (`super::close::GIVEN_UP`): the node must stand down for good. Reported at each
    /// refused dial (the machine acts on the first); `reason` is the peer's words.
    GivenUp { by: NodeId, reason: String },
    /// A connection or handshake was refused, or a peer was dropped for a bad frame.
    /// Informational: the transport has already acted. Dropped if the event queue is full.
    Rejected {
        peer: Option<NodeId>,
        /// The remote address, or the peer's configured `host:port` when a dial failed.
        remote: String,
        reason: String,
    },
}

/// The sending end of the runtime's event queue, shared by every task.
pub(super) struct Events(mpsc::Sender<TransportEvent>);

impl Events {
    /// Events sent on `queue`.
    pub fn new(queue: mpsc::Sender<TransportEvent>) -> Events {
        Events(queue)
    }

    /// Hands an event to the runtime, waiting for room unless shutdown begins.
    /// Returns false if the event could not be delivered (shutdown or no receiver).
    pub async fn emit(&self, event: TransportEvent, shutdown: &Shutdown) -> bool {
        tokio::select! {
            r = self.0.send(event) => r.is_ok(),
            _ = shutdown.tripped() => false,
        }
    }

    /// Tells the runtime a connection or peer was refused or dropped. Informational:
    /// never waits, dropped if the queue is full.
    pub fn reject(&self, peer: Option<NodeId>, remote: String, reason: String) {
        let _ = self.0.try_send(TransportEvent::Rejected {
            peer,
            remote,
            reason,
        });
    }
}
