//! QUIC with mutual TLS between nodes, and the API clients' way in.
//!
//! # Layout
//! - [`tls`]: rustls (ring only) and quinn configs; who a connection's certificate is.
//! - [`frame`]: one length-prefixed frame on a stream ([`read_frame`], [`write_frame`]).
//! - [`hello`]: the first frame each side of a peer connection sends.
//! - `endpoint`: [`Transport`]: the endpoint, the accept loop, sorting connections.
//! - `peer`: the outbound side: one connection and one unidirectional stream per peer,
//!   dialed by us, redialed with capped backoff. This stream is the FIFO channel the
//!   algorithm assumes.
//! - `inbound`: the inbound side: reading a peer's stream, dropping peers that send bad
//!   frames, noticing a peer that restarted.
//! - `client`: [`connect_client`] for the CLI.
//!
//! # Who is who
//! A peer is identified by its certificate (SAN `node-<id>.bully`), never by its
//! address: QUIC connections migrate. The sender of every message is the
//! authenticated peer. We dial peer X with the server name `node-X.bully`, so a
//! process holding another node's certificate fails TLS name verification.
//!
//! Two ALPN protocols share the port: [`ALPN_PEER`] for node-to-node streams (node
//! certificate of a configured peer required) and [`ALPN_API`] for API clients (any
//! certificate from the cluster CA, so `bully leader` can use a node's own files).
//!
//! # Peer stream protocol
//! The dialer opens one unidirectional stream, writes a [`hello::Hello`] frame carrying
//! a random per-process nonce, then one frame per message. The accepting node answers
//! with its own hello on a stream of its own. The dialer reports `PeerUp` only after
//! that answer (so the peer has accepted our certificate), and a node that is dialed
//! by a process other than the one its own outbound connection reached knows that
//! connection is stale (the peer restarted) and redials at once.

mod client;
mod endpoint;
pub mod frame;
pub mod hello;
mod inbound;
mod peer;
mod peer_addr;
pub mod tls;

pub use client::connect_client;
pub use endpoint::{Transport, TransportStats};
pub use frame::{read_frame, write_frame, FrameError};
pub use peer_addr::PeerAddr;
pub use tls::peer_identity;

use crate::certs::{CertError, Identity, TlsFiles};
use crate::protocol::{Message, NodeId, Timing};
use std::net::SocketAddr;
use std::path::PathBuf;
use thiserror::Error;

/// ALPN for node-to-node connections (the peer stream protocol above).
pub const ALPN_PEER: &[u8] = b"bully-peer/1";
/// ALPN for API clients (`bully leader`, `status`, `watch`): bidirectional request streams.
pub const ALPN_API: &[u8] = b"bully-api/1";

/// QUIC application close codes, so the other side's logs say why it was dropped.
pub mod close {
    use quinn::VarInt;
    /// Orderly shutdown of this node.
    pub const SHUTDOWN: VarInt = VarInt::from_u32(0);
    /// Replaced by a newer connection (the peer redialed or restarted).
    pub const SUPERSEDED: VarInt = VarInt::from_u32(1);
    /// The certificate names a node that is not one of our configured peers.
    pub const UNKNOWN_PEER: VarInt = VarInt::from_u32(2);
    /// A truncated, oversized, wrong-version or undecodable frame.
    pub const BAD_FRAME: VarInt = VarInt::from_u32(3);
    /// The runtime asked to drop the peer (it broke a protocol rule).
    pub const MISBEHAVED: VarInt = VarInt::from_u32(4);
    /// The certificate's identity may not use the requested protocol (e.g. a client
    /// certificate on the peer ALPN), or names no identity.
    pub const FORBIDDEN: VarInt = VarInt::from_u32(5);
    /// The peer did not follow the stream protocol (e.g. no hello in time).
    pub const PROTOCOL: VarInt = VarInt::from_u32(6);
    /// The peer's member list differs from ours by more than one member.
    pub const MEMBERSHIP: VarInt = VarInt::from_u32(7);
}

/// Everything the transport needs to run one node.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// Our node ID; our certificate must say `node-<id>.bully`.
    pub id: NodeId,
    /// UDP address to listen on (port 0 picks one; see [`Transport::local_addr`]).
    pub listen: SocketAddr,
    pub tls: TlsFiles,
    /// Every other member and where to dial it (a name is resolved at each dial).
    pub peers: Vec<(NodeId, PeerAddr)>,
    /// Keep-alive = `heartbeat_ms`, idle timeout = `suspect_after_ms`.
    pub timing: Timing,
}

/// What the transport tells the node runtime.
#[derive(Debug)]
pub enum TransportEvent {
    /// A message from an authenticated peer (the sender is its certificate's ID).
    Message { from: NodeId, msg: Message },
    /// Our outbound connection to the peer is up: messages to it flow from now on.
    PeerUp(NodeId),
    /// Our outbound connection to the peer was lost, or a first dial to it failed;
    /// messages to it are dropped until the next `PeerUp`. Sent once per outage.
    PeerDown(NodeId),
    /// An API client connected (ALPN [`ALPN_API`], certificate from the cluster CA);
    /// it opens one bidirectional stream per request.
    Client(quinn::Connection),
    /// A connection or handshake was refused, or a peer was dropped for a bad frame.
    /// Informational: the transport has already acted. Dropped if the event queue is full.
    Rejected {
        peer: Option<NodeId>,
        /// The remote address, or the peer's configured `host:port` when a dial failed.
        remote: String,
        reason: String,
    },
}

/// Why the transport could not start or a client could not connect.
#[derive(Debug, Error)]
pub enum TransportError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("certificate {} is for {found} but this node is configured as id {configured}", path.display())]
    IdentityMismatch {
        path: PathBuf,
        found: Identity,
        configured: NodeId,
    },
    #[error("invalid transport config: {0}")]
    Config(String),
    #[error("cannot use certificate {} with key {}: {detail}", cert.display(), key.display())]
    Tls {
        cert: PathBuf,
        key: PathBuf,
        detail: String,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot connect to {addr}: {detail}")]
    Connect { addr: SocketAddr, detail: String },
    #[error("peer identity: {0}")]
    PeerIdentity(String),
}
