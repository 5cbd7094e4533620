//! [`Link`]: our outbound state for one peer, shared by its dialer task, `send`, and
//! the inbound side (which can tell us the peer is back or has restarted).

use super::close;
use super::peer_addr::PeerAddr;
use crate::protocol::{Message, NodeId};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::futures::Notified;
use tokio::sync::{mpsc, Notify};

/// Messages queued per peer while its stream is busy; beyond this, `send` drops.
const QUEUE_LEN: usize = 256;

/// Our outbound state for one peer.
pub(super) struct Link {
    pub peer: NodeId,
    /// As configured; a host name is resolved at each dial.
    pub addr: PeerAddr,
    queue: mpsc::Sender<Message>,
    current: Mutex<Option<Current>>,
    /// "The peer just reached us": skip the rest of the backoff and dial now.
    wake: Notify,
}

/// The outbound connection in use and which process of the peer it reached.
struct Current {
    conn: quinn::Connection,
    /// The nonce in the peer's hello on this connection.
    nonce: u64,
}

impl Link {
    /// A link with no connection yet, and the receiving end of its message queue (for
    /// the dialer task).
    pub fn new(peer: NodeId, addr: PeerAddr) -> (Arc<Link>, mpsc::Receiver<Message>) {
        let (queue, rx) = mpsc::channel(QUEUE_LEN);
        let link = Link {
            peer,
            addr,
            queue,
            current: Mutex::new(None),
            wake: Notify::new(),
        };
        (Arc::new(link), rx)
    }

    fn current(&self) -> MutexGuard<'_, Option<Current>> {
        // A panic while holding this lock cannot leave the Option half-written.
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a message if the peer is connected and its queue has room; never blocks.
    pub fn try_send(&self, msg: Message) -> bool {
        self.is_connected() && self.queue.try_send(msg).is_ok()
    }

    /// Whether an outbound connection to the peer is up.
    pub fn is_connected(&self) -> bool {
        self.current().is_some()
    }

    /// Records the connection now carrying our messages, to the process with `nonce`.
    pub fn connected(&self, conn: quinn::Connection, nonce: u64) {
        *self.current() = Some(Current { conn, nonce });
    }

    /// The outbound connection is gone: messages are dropped until the next one.
    pub fn disconnected(&self) {
        self.current().take();
    }

    /// The peer just connected to us, so it is up: dial now instead of waiting.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Resolves at the next [`Link::wake`] (or at once for one that came meanwhile).
    pub fn woken(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// The peer just dialed us from the process with `live_nonce`. If our outbound
    /// connection reached a different process, that one is gone (the peer restarted):
    /// close it so the dialer reconnects at once rather than after the idle timeout.
    /// Returns whether it did.
    pub fn kick_if_stale(&self, live_nonce: u64) -> bool {
        let current = self.current();
        match current.as_ref() {
            Some(c) if c.nonce != live_nonce => {
                c.conn.close(close::SUPERSEDED, b"you restarted; redialing");
                true
            }
            _ => false,
        }
    }
}
