//! Dialing a node as an API client (`bully leader`, `status`, `watch`): a client
//! endpoint of its own and one connection on the API ALPN.

use super::error::{ConnectError, TransportError};
use super::tls::{self, ANY_NODE_SERVER_NAME};
use crate::certs::{node_dns_name, TlsFiles};
use crate::protocol::NodeId;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// Connects to the node at `addr` with the certificate in `tls` (a client certificate,
/// or a node's own). With `expect = Some(id)` the server must hold `node-<id>`'s
/// certificate; with `None` any node certificate from the cluster CA will do.
///
/// The node checks our certificate after the handshake completes on our side, so a
/// refused client sees the connection close on its first request rather than here.
/// The endpoint lives as long as the returned connection.
pub async fn connect_client(
    addr: SocketAddr,
    tls: &TlsFiles,
    expect: Option<NodeId>,
) -> Result<quinn::Connection, TransportError> {
    let material = tls.load()?;
    let config = tls::api_client_config(tls, &material, expect)?;
    let bind: SocketAddr = if addr.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let connect_error = |source: ConnectError| TransportError::Connect { addr, source };
    let endpoint =
        quinn::Endpoint::client(bind).map_err(|e| connect_error(ConnectError::Bind(e)))?;
    let server_name = match expect {
        Some(id) => node_dns_name(id),
        None => ANY_NODE_SERVER_NAME.to_string(),
    };
    let connecting = endpoint
        .connect_with(config, addr, &server_name)
        .map_err(|e| connect_error(e.into()))?;
    connecting.await.map_err(|e| connect_error(e.into()))
}
