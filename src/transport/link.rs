//! [`Link`]: our state for one peer, shared by its dialer task, `send`, the inbound
//! side (which can tell us the peer is back or has restarted) and the paths that carry
//! our messages to it (see [`super::path`]). A link lives while its peer is in our
//! member list: [`Link::retire`] ends it when `Transport::set_peers` drops the peer, and
//! [`Link::readdress`] moves its dials when the list gives the peer a new address.

use super::close;
use super::event::{Events, TransportEvent};
use super::peer_addr::PeerAddr;
use super::stats::Counters;
use crate::protocol::{Message, NodeId};
use crate::shutdown::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::futures::Notified;
use tokio::sync::{mpsc, Notify};

/// Messages queued per peer while its stream is busy; beyond this, `send` drops.
const QUEUE_LEN: usize = 256;

/// Our state for one peer.
pub(super) struct Link {
    pub peer: NodeId,
    queue: mpsc::Sender<Message>,
    /// The queue's reading end. The path that holds it writes every message; a second
    /// path waits for it, so the peer sees one stream, in order, at a time.
    pub(super) pending: tokio::sync::Mutex<mpsc::Receiver<Message>>,
    /// The paths that are up. Changed (and PeerUp/PeerDown told) under this lock, so
    /// the runtime hears the transitions in the order they happened.
    paths: tokio::sync::Mutex<Paths>,
    /// `paths > 0`, readable without waiting.
    sendable: AtomicBool,
    /// Where we dial, the outbound connection and whether the peer left the list: one
    /// lock, so a dial that completes just as the peer moves or leaves is caught by
    /// either the change or [`Link::connected`], never by neither.
    state: Mutex<State>,
    /// Set when [`Link::kick_if_stale`] or [`Link::readdress`] closed the outbound
    /// connection: redial at once.
    kicked: AtomicBool,
    /// "The peer just reached us" (or moved): skip the rest of the backoff and dial now.
    wake: Notify,
    /// Tripped by [`Link::retire`], or with its parent at shutdown: the dialer stops.
    stop: Shutdown,
}

/// What `Link::state` guards.
struct State {
    /// As the member list gives it; a host name is resolved at each dial.
    addr: PeerAddr,
    /// Our outbound connection while it is up.
    current: Option<Current>,
    /// The peer left our member list: no connection of ours to it may come up again.
    retired: bool,
}

/// How many paths are up, and which process of the peer the newest one reached.
#[derive(Default)]
struct Paths {
    up: usize,
    nonce: u64,
}

/// The outbound connection in use and which process of the peer it reached.
struct Current {
    conn: quinn::Connection,
    /// The nonce in the peer's hello on this connection.
    nonce: u64,
}

impl Link {
    /// A link with no connection yet, stopped by [`Link::retire`] or by `parent` (the
    /// transport's shutdown signal).
    pub fn new(peer: NodeId, addr: PeerAddr, parent: &Shutdown) -> Arc<Link> {
        let (queue, rx) = mpsc::channel(QUEUE_LEN);
        Arc::new(Link {
            peer,
            queue,
            pending: tokio::sync::Mutex::new(rx),
            paths: tokio::sync::Mutex::new(Paths::default()),
            sendable: AtomicBool::new(false),
            state: Mutex::new(State {
                addr,
                current: None,
                retired: false,
            }),
            kicked: AtomicBool::new(false),
            wake: Notify::new(),
            stop: parent.child(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every write to the state is a single assignment: a panic cannot leave it torn.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where to dial the peer now.
    pub fn addr(&self) -> PeerAddr {
        self.state().addr.clone()
    }

    /// Trips when the peer leaves the member list or the transport shuts down: what the
    /// dialer waits on, so it ends with its link.
    pub fn stop_signal(&self) -> Shutdown {
        self.stop.clone()
    }

    /// Whether the peer left our member list.
    pub fn is_retired(&self) -> bool {
        self.state().retired
    }

    /// The peer left our member list: the dialer stops and our outbound connection is
    /// closed saying why (its paths then end, and the last one tells the runtime the
    /// peer is down). The caller closes the peer's connections to us.
    pub fn retire(&self) {
        let mut state = self.state();
        state.retired = true;
        self.stop.trip();
        if let Some(c) = state.current.as_ref() {
            c.conn.close(close::REMOVED, close::REMOVED_REASON);
        }
    }

    /// The member list gives the peer a new address: an outbound connection to the old
    /// one is closed and the dialer redials at once, at the new one (an attempt under
    /// way is abandoned, see `outbound::handshake`).
    pub fn readdress(&self, addr: PeerAddr) {
        let mut state = self.state();
        if state.addr == addr {
            return;
        }
        state.addr = addr;
        if let Some(c) = state.current.as_ref() {
            self.kicked.store(true, Ordering::Release);
            c.conn
                .close(close::SUPERSEDED, b"your address changed; redialing there");
        }
        drop(state);
        self.wake();
    }

    /// Queues a message if a path to the peer is up and its queue has room; never
    /// blocks.
    pub fn try_send(&self, msg: Message) -> bool {
        self.is_sendable() && self.queue.try_send(msg).is_ok()
    }

    /// A path to the peer's process `nonce` came up: the first one, or the first to a
    /// restarted process (whose old paths are being closed), tells the runtime the
    /// peer is up, so it repeats what the peer must know. Returns false if the event
    /// could not be delivered (shutdown).
    pub async fn path_up(&self, nonce: u64, events: &Events, shutdown: &Shutdown) -> bool {
        let mut paths = self.paths.lock().await;
        let news = paths.up == 0 || paths.nonce != nonce;
        paths.up += 1;
        paths.nonce = nonce;
        if !news {
            return true;
        }
        self.sendable.store(true, Ordering::Release);
        events
            .emit(TransportEvent::PeerUp(self.peer), shutdown)
            .await
    }

    /// A path went down: after the last one, what is still queued is stale (dropped,
    /// counted in `stats`) and the runtime hears the peer is down.
    pub async fn path_down(&self, events: &Events, stats: &Counters, shutdown: &Shutdown) -> bool {
        let mut paths = self.paths.lock().await;
        paths.up = paths.up.saturating_sub(1);
        if paths.up > 0 {
            return true;
        }
        self.sendable.store(false, Ordering::Release);
        if let Ok(mut queue) = self.pending.try_lock() {
            let mut stale = 0;
            while queue.try_recv().is_ok() {
                stale += 1;
            }
            stats.add_dropped(stale);
        }
        events
            .emit(TransportEvent::PeerDown(self.peer), shutdown)
            .await
    }

    /// A dial failed before any path was up: tells the runtime the peer cannot be
    /// reached (unless the peer's own connection to us carries our messages).
    pub async fn report_unreached(&self, events: &Events, shutdown: &Shutdown) -> bool {
        if self.paths.lock().await.up > 0 {
            return true;
        }
        events
            .emit(TransportEvent::PeerDown(self.peer), shutdown)
            .await
    }

    /// Whether a path to the peer is up (on either side's connection).
    pub fn is_sendable(&self) -> bool {
        self.sendable.load(Ordering::Acquire)
    }

    /// Whether our own outbound connection to the peer is up.
    pub fn is_connected(&self) -> bool {
        self.state().current.is_some()
    }

    /// Records the connection now carrying our messages, to the process with `nonce`,
    /// dialed at `dialed`. Refused (the connection closed, false returned) if the peer
    /// left the member list or moved while it was dialed; after a move
    /// [`Link::take_kicked`] is then true.
    pub fn connected(&self, conn: quinn::Connection, nonce: u64, dialed: &PeerAddr) -> bool {
        self.kicked.store(false, Ordering::Release);
        let mut state = self.state();
        if state.retired {
            conn.close(close::REMOVED, close::REMOVED_REASON);
            return false;
        }
        if state.addr != *dialed {
            self.kicked.store(true, Ordering::Release);
            conn.close(close::SUPERSEDED, b"your address changed; redialing there");
            return false;
        }
        state.current = Some(Current { conn, nonce });
        true
    }

    /// Our outbound connection, while it is up.
    pub fn outbound_connection(&self) -> Option<quinn::Connection> {
        self.state().current.as_ref().map(|c| c.conn.clone())
    }

    /// The outbound connection is gone.
    pub fn disconnected(&self) {
        self.state().current.take();
    }

    /// Whether the outbound connection that just ended was closed by
    /// [`Link::kick_if_stale`] (the peer restarted) or [`Link::readdress`] (it moved):
    /// then redial at once.
    pub fn take_kicked(&self) -> bool {
        self.kicked.swap(false, Ordering::AcqRel)
    }

    /// Closes our outbound connection, if one is up (the peer broke a protocol rule).
    pub fn close_outbound(&self, reason: &str) {
        if let Some(c) = self.state().current.as_ref() {
            c.conn.close(close::MISBEHAVED, reason.as_bytes());
        }
    }

    /// The peer's connection to us came up (our dialer stands back, abandoning a
    /// handshake in progress) or ended (our dialer dials now instead of waiting).
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
        let state = self.state();
        match state.current.as_ref() {
            Some(c) if c.nonce != live_nonce => {
                self.kicked.store(true, Ordering::Release);
                c.conn.close(close::SUPERSEDED, b"you restarted; redialing");
                true
            }
            _ => false,
        }
    }
}
