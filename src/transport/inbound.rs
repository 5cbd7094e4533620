//! The inbound side of peer connections: read the peer's stream (hello, then
//! messages), drop the connection on any bad frame, notice a restarted peer, and offer
//! our hello stream back as a path for our messages (see [`super::path`]).

use super::agreement;
use super::close;
use super::event::TransportEvent;
use super::frame::{read_frame, FrameError};
use super::given_up;
use super::hello::{self, Hello, HELLO_TIMEOUT};
use super::link::Link;
use super::path;
use super::shared::Shared;
use crate::codec::CodecError;
use crate::protocol::{Message, NodeId};
use crate::shutdown::Shutdown;
use std::sync::Arc;
use tracing::{debug, info, warn};

/// Serves one authenticated connection from peer `peer` (a member when admitted) until
/// it ends.
pub(super) async fn serve(shared: Arc<Shared>, conn: quinn::Connection, peer: NodeId) {
    let shutdown = shared.shutdown();
    let exchange = async {
        // Ours first: the dialer reports us up only once it has it.
        let back = hello::send(&conn, &shared.hello()).await?;
        let (recv, theirs) = hello::recv(&conn).await?;
        Ok::<_, FrameError>((back, recv, theirs))
    };
    let theirs = tokio::select! {
        r = tokio::time::timeout(HELLO_TIMEOUT, exchange) => r,
        _ = shutdown.tripped() => return,
    };
    let (back, mut recv, hello) = match theirs {
        Ok(Ok(v)) => v,
        Ok(Err(FrameError::Codec(e))) => return bad_frame(&shared, peer, &conn, e),
        Ok(Err(FrameError::Io(e))) => {
            // A survivor of a forced recovery telling us we were given up.
            let closed = conn.close_reason();
            if let Some(reason) = closed.as_ref().and_then(close::given_up_reason) {
                given_up::report(&shared, peer, reason, &mut None, &shutdown).await;
                return;
            }
            // The dialer may have refused our hello before we read its own.
            if let Some(mismatch) = agreement::refused_by_peer(peer, &conn) {
                agreement::disagreed(&shared, peer, mismatch, &shutdown).await;
                return;
            }
            debug!(peer, error = %e, "inbound connection ended before its hello");
            return;
        }
        Err(_) => {
            let reason = format!("no hello within {HELLO_TIMEOUT:?}");
            warn!(peer, remote = %conn.remote_address(), %reason, "dropping inbound connection");
            conn.close(close::PROTOCOL, reason.as_bytes());
            shared
                .events
                .reject(Some(peer), conn.remote_address().to_string(), reason);
            return;
        }
    };
    if let Some(mismatch) = agreement::compare(shared.id, &shared.hello(), peer, &hello) {
        agreement::refuse(&shared, &conn, peer, mismatch, &shutdown).await;
        return;
    }
    if !agreement::agreed(&shared, peer, &shutdown).await {
        return;
    }
    let nonce = hello.nonce;
    let Some(link) = note_arrival(&shared, peer, &conn, hello) else {
        return;
    };
    debug!(peer, remote = %conn.remote_address(), "inbound connection up");
    // Our stream back is a path for our messages while this connection lives.
    let (task_shared, task_conn) = (shared.clone(), conn.clone());
    shared.spawn(async move {
        let shutdown = task_shared.shutdown();
        path::carry(&task_shared, &link, &task_conn, nonce, back, &shutdown).await;
    });
    read_messages(&shared, peer, &conn, &mut recv, &shutdown).await;
    if !shared.inbound.unregister(peer, &conn) {
        // Our dialer stood back while this connection carried both directions.
        if let Some(link) = shared.link(peer) {
            link.wake();
        }
    }
}

/// Reads the peer's stream back on our own outbound connection (its hello already
/// read) until it ends: the peer's messages when that is its path to us.
pub(super) async fn read_stream(
    shared: Arc<Shared>,
    peer: NodeId,
    conn: quinn::Connection,
    mut recv: quinn::RecvStream,
) {
    let shutdown = shared.shutdown();
    read_messages(&shared, peer, &conn, &mut recv, &shutdown).await;
}

/// Registers the connection, retires older ones from the same peer, and tells our
/// dialer to that peer what this arrival means. Returns the peer's link, or `None`
/// (the connection closed) if the peer has left our member list since it was admitted.
fn note_arrival(
    shared: &Shared,
    peer: NodeId,
    conn: &quinn::Connection,
    hello: Hello,
) -> Option<Arc<Link>> {
    for old in shared.inbound.register(peer, conn) {
        old.close(close::SUPERSEDED, b"superseded by a newer connection");
    }
    // Looked up after registering: `Transport::set_peers` removes the link before it
    // closes the registered connections, so one of the two catches a removed peer.
    let Some(link) = shared.link(peer) else {
        conn.close(close::REMOVED, close::REMOVED_REASON);
        shared.inbound.unregister(peer, conn);
        debug!(peer, "inbound connection from a removed peer closed");
        return None;
    };
    // After a crash and restart our outbound connection still points at the dead
    // process and would only notice after the idle timeout.
    if link.kick_if_stale(hello.nonce) {
        info!(peer, "peer restarted; its connection carries us now");
    }
    // A dial of ours still in its handshake is abandoned: this connection carries both
    // directions (see outbound::run).
    if !link.is_connected() {
        link.wake();
    }
    Some(link)
}

async fn read_messages(
    shared: &Shared,
    peer: NodeId,
    conn: &quinn::Connection,
    recv: &mut quinn::RecvStream,
    shutdown: &Shutdown,
) {
    loop {
        // read_frame is not cancel-safe, but it is only cancelled at shutdown, when
        // the rest of the stream no longer matters.
        let frame = tokio::select! {
            r = read_frame::<Message>(recv) => r,
            _ = shutdown.tripped() => return,
        };
        match frame {
            Ok(Some(msg)) => {
                #[cfg(debug_assertions)]
                if crate::sabotage::drops(shared.id, peer, &msg) {
                    continue;
                }
                if !shared
                    .events
                    .emit(TransportEvent::Message { from: peer, msg }, shutdown)
                    .await
                {
                    return;
                }
            }
            Ok(None) => {
                // A live peer never finishes its stream and keeps the connection (it
                // closes the connection instead): this one is dying, or not following
                // the protocol. Close it, so a path of ours on it ends now rather than
                // carrying on unwatched until QUIC's long idle timeout.
                debug!(peer, "peer finished its stream; closing the connection");
                conn.close(close::PROTOCOL, b"your message stream ended");
                return;
            }
            Err(FrameError::Codec(e)) => return bad_frame(shared, peer, conn, e),
            Err(FrameError::Io(e)) => {
                // Usually the connection is gone already; if only the stream was reset,
                // the connection is no use either (as above).
                debug!(peer, error = %e, "inbound connection ended");
                conn.close(close::PROTOCOL, b"your message stream failed");
                return;
            }
        }
    }
}

/// A peer sent bytes that are not a valid frame: log it with the peer ID, count it,
/// close that connection with an error code, and carry on.
fn bad_frame(shared: &Shared, peer: NodeId, conn: &quinn::Connection, e: CodecError) {
    let remote = conn.remote_address();
    warn!(peer, %remote, error = %e, "bad frame from peer; dropping its connection");
    shared.stats.add_bad_frame();
    let reason = format!("bad frame: {e}");
    conn.close(close::BAD_FRAME, reason.as_bytes());
    shared.events.reject(Some(peer), remote.to_string(), reason);
}
