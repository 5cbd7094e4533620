//! [`TransportEvent`]: what the transport tells the node runtime.

use super::agreement::ConfigMismatch;
use crate::protocol::{Message, NodeId};

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
    /// A connection or handshake was refused, or a peer was dropped for a bad frame.
    /// Informational: the transport has already acted. Dropped if the event queue is full.
    Rejected {
        peer: Option<NodeId>,
        /// The remote address, or the peer's configured `host:port` when a dial failed.
        remote: String,
        reason: String,
    },
}
