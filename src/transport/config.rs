//! [`TransportConfig`]: the part of a node's config the transport runs on.

use super::peer_addr::PeerAddr;
use crate::certs::TlsFiles;
use crate::protocol::{Mode, NodeId, Timing};
use std::net::SocketAddr;

/// Everything the transport needs to run one node.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// Our node ID; our certificate must say `node-<id>.bully`.
    pub id: NodeId,
    /// UDP address to listen on (port 0 picks one; see [`super::Transport::local_addr`]).
    pub listen: SocketAddr,
    /// Our certificate and key, and the CA every peer and client must be signed by.
    pub tls: TlsFiles,
    /// Every other member and where to dial it (a name is resolved at each dial).
    pub peers: Vec<(NodeId, PeerAddr)>,
    /// Checked with [`Timing::validate`]; a peer connection that hears nothing back is
    /// dropped after [`Timing::peer_idle_timeout_ms`].
    pub timing: Timing,
    /// Sent in every hello with the timing; a peer running the other mode is refused.
    pub mode: Mode,
}
