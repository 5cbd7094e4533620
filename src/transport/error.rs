//! [`TransportError`]: why the transport could not start or a client could not connect.

use super::member_checks::{NodeIdError, PeerListError};
use crate::certs::{CertError, Identity};
use crate::protocol::NodeId;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// Why the transport could not start, reload, or connect a client. Each variant names
/// the file, field or address to fix.
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
    #[error("invalid node id: {0}")]
    NodeId(#[from] NodeIdError),
    #[error("invalid peer list: {0}")]
    PeerList(#[from] PeerListError),
    /// [`crate::protocol::Timing::validate`] refused the timing; its reason.
    #[error("invalid timing: {0}")]
    Timing(String),
    #[error("the node id cannot change while it runs (from {running} to {new}); restart it")]
    IdChanged { running: NodeId, new: NodeId },
    #[error("idle timeout {0:?} is out of range")]
    IdleTimeout(Duration),
    #[error("cannot use certificate {} with key {}: {source}", cert.display(), key.display())]
    Tls {
        cert: PathBuf,
        key: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: ConnectError,
    },
    #[error("peer identity: {0}")]
    PeerIdentity(#[from] PeerIdentityError),
}

/// Which step of an API client's connection failed.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// No local UDP socket for the client endpoint.
    #[error(transparent)]
    Bind(std::io::Error),
    /// quinn refused to start the attempt (e.g. an unusable address).
    #[error(transparent)]
    Start(#[from] quinn::ConnectError),
    /// The handshake failed (unreachable, timed out, certificate refused).
    #[error(transparent)]
    Handshake(#[from] quinn::ConnectionError),
}

/// Why the other side of a connection has no usable identity.
#[derive(Debug, Error)]
pub enum PeerIdentityError {
    #[error("no certificate presented")]
    NoCertificate,
    #[error("unexpected identity type")]
    UnexpectedType,
    #[error("empty certificate chain")]
    EmptyChain,
    #[error(transparent)]
    Cert(#[from] CertError),
}
