//! A path to a peer: one stream we can write its messages on. There are at most two:
//! the stream we opened on our own outbound connection, and the stream back on the
//! peer's connection to us (the one our hello went out on, kept open).
//!
//! Whichever path comes up first carries every message, in order, until it dies; only
//! then does the other take over (it waits for the link's queue). So a reply goes back
//! at once on the peer's own connection while ours is still being dialed (at start-up
//! a node's 60-odd handshakes take long, and Answers and Coordinator messages dropped
//! meanwhile made lower nodes declare), and the peer still reads one FIFO stream at a
//! time, as the protocol (and the simulator and model checker) assume.

use super::frame::write_frame;
use super::link::Link;
use super::shared::Shared;
use crate::shutdown::Shutdown;
use tracing::debug;

/// How a path ended.
pub(super) enum PathEnd {
    Shutdown,
    /// The connection closed or the stream failed.
    Lost(String),
}

/// Carries the link's messages on `stream` (a stream of `conn`, which reached the
/// peer's process `nonce`) from when the path holds the queue until `conn` ends or
/// shutdown. The link tells the runtime PeerUp/PeerDown (see [`Link::path_up`]).
pub(super) async fn carry(
    shared: &Shared,
    link: &Link,
    conn: &quinn::Connection,
    nonce: u64,
    mut stream: quinn::SendStream,
    shutdown: &Shutdown,
) -> PathEnd {
    if !link.path_up(nonce, &shared.events, shutdown).await {
        return PathEnd::Shutdown;
    }
    let end = write_queue(link, conn, &mut stream, shutdown).await;
    if !link
        .path_down(&shared.events, &shared.stats, shutdown)
        .await
    {
        return PathEnd::Shutdown;
    }
    end
}

/// Waits for the queue (another path may hold it), then writes every message in order.
async fn write_queue(
    link: &Link,
    conn: &quinn::Connection,
    stream: &mut quinn::SendStream,
    shutdown: &Shutdown,
) -> PathEnd {
    let mut queue = tokio::select! {
        q = link.pending.lock() => q,
        e = conn.closed() => return PathEnd::Lost(e.to_string()),
        _ = shutdown.tripped() => return PathEnd::Shutdown,
    };
    debug!(peer = link.peer, remote = %conn.remote_address(), "path carries our messages");
    loop {
        tokio::select! {
            biased;
            _ = shutdown.tripped() => return PathEnd::Shutdown,
            e = conn.closed() => return PathEnd::Lost(e.to_string()),
            msg = queue.recv() => {
                // The Link holds the sender, so the queue never closes while we run.
                let Some(msg) = msg else { return PathEnd::Shutdown };
                // Written in the branch body, not raced: write_all is not cancel-safe.
                if let Err(e) = write_frame(stream, &msg).await {
                    // E.g. the peer stopped our stream: without it the connection is
                    // useless, so drop it.
                    conn.close(super::close::PROTOCOL, b"message stream failed");
                    return PathEnd::Lost(e.to_string());
                }
            }
        }
    }
}
