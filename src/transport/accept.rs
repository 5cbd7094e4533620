//! The accept loop: completes each incoming handshake and sorts the connection by its
//! certificate and ALPN — a current peer's stream, an API client, or a refusal.

use super::close;
use super::event::TransportEvent;
use super::given_up;
use super::inbound;
use super::shared::Shared;
use super::tls::{negotiated_alpn, peer_identity, ALPN_API, ALPN_PEER};
use crate::certs::Identity;
use std::future::IntoFuture;
use std::sync::Arc;
use tracing::{debug, info};

/// Accepts connections until shutdown, each handled by a task of its own.
pub(super) async fn accept_loop(shared: Arc<Shared>) {
    let shutdown = shared.shutdown();
    let Some(endpoint) = shared.endpoint() else {
        return;
    };
    loop {
        let incoming = tokio::select! {
            i = endpoint.accept() => i,
            _ = shutdown.tripped() => return,
        };
        let Some(incoming) = incoming else { return };
        shared.spawn(handle_incoming(shared.clone(), incoming));
    }
}

/// Completes the handshake (the CA-signed client certificate is checked by rustls),
/// then sorts the connection by certificate and ALPN.
async fn handle_incoming(shared: Arc<Shared>, incoming: quinn::Incoming) {
    let remote = incoming.remote_address();
    let shutdown = shared.shutdown();
    // QUIC's own handshake timeout is its idle timeout, which is long (quiet links).
    let conn = tokio::select! {
        r = tokio::time::timeout(shared.silence, incoming.into_future()) => r,
        _ = shutdown.tripped() => return,
    };
    let conn = match conn {
        Ok(Ok(conn)) => conn,
        Err(_) => {
            info!(%remote, timeout = ?shared.silence, "incoming handshake timed out");
            return;
        }
        Ok(Err(e)) => {
            shared.stats.add_refused();
            info!(%remote, error = %e, "incoming handshake failed");
            shared
                .events
                .reject(None, remote.to_string(), format!("handshake failed: {e}"));
            return;
        }
    };
    let identity = peer_identity(&conn);
    let alpn = negotiated_alpn(&conn);
    let refuse = |peer, code, reason: String| shared.refuse(&conn, peer, code, reason);
    match (identity, alpn.as_deref()) {
        // Our peers as of now: `Transport::set_peers` changes them (and closes the
        // connections of a peer it removes, even one admitted here just before).
        (Ok(Identity::Node(id)), Some(ALPN_PEER)) if shared.is_peer(id) => {
            inbound::serve(shared.clone(), conn, id).await;
        }
        (Ok(identity), Some(ALPN_API)) => {
            debug!(%remote, %identity, "API client connected");
            conn.set_max_concurrent_uni_streams(0u32.into());
            shared
                .events
                .emit(TransportEvent::Client(conn), &shutdown)
                .await;
        }
        (Ok(Identity::Node(id)), Some(ALPN_PEER)) if shared.gave_up(id) => {
            refuse(Some(id), close::GIVEN_UP, given_up::reason(shared.id, id))
        }
        (Ok(Identity::Node(id)), Some(ALPN_PEER)) => refuse(
            Some(id),
            close::UNKNOWN_PEER,
            format!(
                "node-{id} is not a configured peer of node-{} (not in its member list)",
                shared.id
            ),
        ),
        (Ok(Identity::Client), _) => refuse(
            None,
            close::FORBIDDEN,
            "a client certificate may not speak the peer protocol".into(),
        ),
        (Err(e), _) => refuse(None, close::FORBIDDEN, e.to_string()),
        (Ok(identity), other) => refuse(
            None,
            close::PROTOCOL,
            format!("{identity} negotiated unknown ALPN {other:?}"),
        ),
    }
}
