//! [`Transport`]: the node's QUIC endpoint, its accept loop, and the handle the
//! runtime uses to send messages.

use super::hello::Hello;
use super::inbound::{self, InboundTable};
use super::peer::{self, Link};
use super::tls::{self, negotiated_alpn, peer_identity};
use super::{
    close, PeerAddr, TransportConfig, TransportError, TransportEvent, ALPN_API, ALPN_PEER,
};
use crate::certs::Identity;
use crate::protocol::{Message, NodeId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Events waiting for the runtime; beyond this, peer readers wait (QUIC flow control
/// then slows the senders) and informational `Rejected` events are dropped.
const EVENT_QUEUE: usize = 1024;
/// How long `shutdown` waits for tasks and for close frames to go out.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// A cheap, cloneable handle on the running transport. Call [`Transport::shutdown`]
/// to stop it: its tasks hold the endpoint open until then.
#[derive(Clone)]
pub struct Transport {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("id", &self.shared.id)
            .field("local_addr", &self.shared.local_addr)
            .finish()
    }
}

/// Counters for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportStats {
    /// Messages written to a peer stream.
    pub messages_sent: u64,
    /// Messages read from peers and handed to the runtime.
    pub messages_received: u64,
    /// Messages dropped: peer unreachable, queue full, or queued before a reconnect.
    pub messages_dropped: u64,
    /// Frames refused (truncated, oversized, wrong version, undecodable); each one
    /// closed its connection.
    pub bad_frames: u64,
    /// Incoming handshakes or connections refused (no or foreign certificate, unknown
    /// peer, client certificate on the peer protocol).
    pub connections_refused: u64,
    /// Outbound peer connections established (first connects and reconnects).
    pub peer_connects: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    sent: AtomicU64,
    received: AtomicU64,
    dropped: AtomicU64,
    bad_frames: AtomicU64,
    refused: AtomicU64,
    connects: AtomicU64,
}

impl Counters {
    pub fn add_sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add_received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add_dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }
    pub fn add_bad_frame(&self) {
        self.bad_frames.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add_connect(&self) {
        self.connects.fetch_add(1, Ordering::Relaxed);
    }
    fn snapshot(&self) -> TransportStats {
        TransportStats {
            messages_sent: self.sent.load(Ordering::Relaxed),
            messages_received: self.received.load(Ordering::Relaxed),
            messages_dropped: self.dropped.load(Ordering::Relaxed),
            bad_frames: self.bad_frames.load(Ordering::Relaxed),
            connections_refused: self.refused.load(Ordering::Relaxed),
            peer_connects: self.connects.load(Ordering::Relaxed),
        }
    }
}

/// State shared by the handle and every task.
pub(super) struct Shared {
    pub id: NodeId,
    pub endpoint: quinn::Endpoint,
    pub local_addr: SocketAddr,
    pub links: HashMap<NodeId, Arc<Link>>,
    pub inbound: InboundTable,
    pub stats: Counters,
    /// Sent in every hello; new per process (see `inbound`).
    pub nonce: u64,
    /// Us and our configured peers, ascending: sent in every hello, compared with theirs.
    pub members: Vec<NodeId>,
    /// The TLS config each dial uses; replaced by [`Transport::reload_tls`].
    dial: Mutex<quinn::ClientConfig>,
    events: mpsc::Sender<TransportEvent>,
    shutdown: watch::Sender<bool>,
    tasks: Mutex<JoinSet<()>>,
}

/// Resolves once shutdown has begun; every task selects on it.
pub(super) struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Cancellation-safe; returns at once if shutdown already began.
    pub async fn wait(&mut self) {
        // An error means the sender is gone, which also means shutdown.
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

impl Shared {
    pub fn shutdown_signal(&self) -> Shutdown {
        Shutdown(self.shutdown.subscribe())
    }

    /// Hands an event to the runtime, waiting for room unless shutdown begins.
    /// Returns false if the event could not be delivered (shutdown or no receiver).
    pub async fn emit(&self, event: TransportEvent, shutdown: &mut Shutdown) -> bool {
        tokio::select! {
            r = self.events.send(event) => r.is_ok(),
            _ = shutdown.wait() => false,
        }
    }

    /// For informational events: never waits, drops the event if the queue is full.
    pub fn emit_nowait(&self, event: TransportEvent) {
        let _ = self.events.try_send(event);
    }

    /// Our hello: nonce and member list.
    pub fn hello(&self) -> Hello {
        Hello {
            nonce: self.nonce,
            members: self.members.clone(),
        }
    }

    /// The dial config as of now (certificates may have been reloaded).
    pub fn dial_config(&self) -> quinn::ClientConfig {
        self.dial.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn tasks(&self) -> MutexGuard<'_, JoinSet<()>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Spawns a task that `shutdown` will wait for (and abort if it lingers).
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks();
        // Reap finished tasks so the set does not grow with every connection.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }
}

impl Transport {
    /// Checks the config and certificates, binds `cfg.listen`, and starts dialing
    /// every peer. Fails (naming the file or field) if our certificate is not for
    /// `node-<id>`, a file is missing or unusable, the peers list is invalid, or the
    /// address cannot be bound.
    pub async fn start(
        cfg: TransportConfig,
    ) -> Result<(Transport, mpsc::Receiver<TransportEvent>), TransportError> {
        let configs = prepare(&cfg)?;
        let socket =
            std::net::UdpSocket::bind(cfg.listen).map_err(|source| TransportError::Bind {
                addr: cfg.listen,
                source,
            })?;
        launch(cfg, configs, socket)
    }

    /// Like [`Transport::start`] on a socket the caller already bound (`cfg.listen` is
    /// ignored). Lets tests and embedders bind port 0 for every node before any node
    /// needs to know its peers' addresses.
    pub async fn start_on(
        cfg: TransportConfig,
        socket: std::net::UdpSocket,
    ) -> Result<(Transport, mpsc::Receiver<TransportEvent>), TransportError> {
        let configs = prepare(&cfg)?;
        launch(cfg, configs, socket)
    }

    /// Queues `msg` for `to` on its FIFO stream. Never blocks: the message is dropped
    /// (and counted) if the peer is unknown, not connected, or its queue is full.
    pub fn send(&self, to: NodeId, msg: Message) {
        let sent = self.shared.links.get(&to).is_some_and(|l| l.try_send(msg));
        if !sent {
            self.shared.stats.add_dropped(1);
            debug!(peer = to, kind = msg.body.kind().name(), "message dropped");
        }
    }

    /// Re-reads the certificate, key and CA named in `cfg.tls` (the rest of `cfg` is
    /// only checked): new handshakes and dials use them, connections already up stay
    /// up, so a node rotates its certificate without leaving the cluster. On an error
    /// nothing changes.
    pub fn reload_tls(&self, cfg: &TransportConfig) -> Result<(), TransportError> {
        if cfg.id != self.shared.id {
            return Err(TransportError::Config(format!(
                "id changed from {} to {}",
                self.shared.id, cfg.id
            )));
        }
        let configs = prepare(cfg)?;
        self.shared.endpoint.set_server_config(Some(configs.server));
        *self.shared.dial.lock().unwrap_or_else(|e| e.into_inner()) = configs.dial;
        info!(id = cfg.id, cert = %cfg.tls.cert.display(), "certificates reloaded");
        Ok(())
    }

    /// Closes every inbound connection from `peer` (e.g. it broke a protocol rule).
    /// The peer may dial again; our outbound connection to it is left alone.
    pub fn disconnect(&self, peer: NodeId, reason: &str) {
        let conns = self.shared.inbound.take_all(peer);
        if !conns.is_empty() {
            warn!(peer, %reason, "disconnecting peer");
        }
        for conn in conns {
            conn.close(close::MISBEHAVED, reason.as_bytes());
        }
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Our node ID.
    pub fn id(&self) -> NodeId {
        self.shared.id
    }

    /// Peers whose outbound connection is up, in ID order.
    pub fn connected_peers(&self) -> Vec<NodeId> {
        let mut peers: Vec<NodeId> = self
            .shared
            .links
            .iter()
            .filter(|(_, l)| l.is_connected())
            .map(|(id, _)| *id)
            .collect();
        peers.sort_unstable();
        peers
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> TransportStats {
        self.shared.stats.snapshot()
    }

    /// Closes every connection (peers see the close at once, not after their idle
    /// timeout), stops every task and waits up to about a second for close frames to
    /// go out (about 100 ms on loopback). Idempotent. Once it has returned and every
    /// handle is dropped, the UDP port is free to bind again.
    pub async fn shutdown(&self) {
        if self.shared.shutdown.send_replace(true) {
            return;
        }
        info!(id = self.shared.id, "transport shutting down");
        self.shared
            .endpoint
            .close(close::SHUTDOWN, b"node shutting down");
        let mut tasks = std::mem::take(&mut *self.shared.tasks());
        let drained = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_GRACE, drained).await.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.shared.endpoint.wait_idle()).await;
    }
}

/// The quinn configs for a node, built once its config and certificates check out.
struct Configs {
    server: quinn::ServerConfig,
    dial: quinn::ClientConfig,
}

fn prepare(cfg: &TransportConfig) -> Result<Configs, TransportError> {
    cfg.timing.validate().map_err(TransportError::Config)?;
    check_peers(cfg.id, &cfg.peers)?;
    let material = cfg.tls.load()?;
    if material.identity != Identity::Node(cfg.id) {
        return Err(TransportError::IdentityMismatch {
            path: cfg.tls.cert.clone(),
            found: material.identity,
            configured: cfg.id,
        });
    }
    Ok(Configs {
        server: tls::server_config(&cfg.tls, &material, &cfg.timing)?,
        dial: tls::peer_client_config(&cfg.tls, &material, &cfg.timing)?,
    })
}

/// Must run inside a tokio runtime: quinn spawns the endpoint driver on it.
fn launch(
    cfg: TransportConfig,
    configs: Configs,
    socket: std::net::UdpSocket,
) -> Result<(Transport, mpsc::Receiver<TransportEvent>), TransportError> {
    let bind_error = |source| TransportError::Bind {
        addr: cfg.listen,
        source,
    };
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(configs.server),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(bind_error)?;
    let local_addr = endpoint.local_addr().map_err(bind_error)?;

    let (events, events_rx) = mpsc::channel(EVENT_QUEUE);
    let mut links = HashMap::new();
    let mut queues = Vec::new();
    for (peer, addr) in &cfg.peers {
        let (link, queue) = Link::new(*peer, addr.clone());
        links.insert(*peer, link.clone());
        queues.push((link, queue));
    }
    let shared = Arc::new(Shared {
        id: cfg.id,
        endpoint,
        local_addr,
        links,
        inbound: InboundTable::default(),
        stats: Counters::default(),
        nonce: rand::random(),
        members: {
            let mut members: Vec<NodeId> = cfg.peers.iter().map(|(id, _)| *id).collect();
            members.push(cfg.id);
            members.sort_unstable();
            members
        },
        dial: Mutex::new(configs.dial),
        events,
        shutdown: watch::channel(false).0,
        tasks: Mutex::new(JoinSet::new()),
    });
    for (link, queue) in queues {
        shared.spawn(peer::run(shared.clone(), link, queue));
    }
    shared.spawn(accept_loop(shared.clone()));
    info!(id = cfg.id, addr = %local_addr, peers = cfg.peers.len(), "transport listening");
    Ok((Transport { shared }, events_rx))
}

fn check_peers(id: NodeId, peers: &[(NodeId, PeerAddr)]) -> Result<(), TransportError> {
    let mut seen = BTreeSet::new();
    for &(peer, _) in peers {
        if peer == id {
            return Err(TransportError::Config(format!(
                "peers lists our own id {id}"
            )));
        }
        if !seen.insert(peer) {
            return Err(TransportError::Config(format!(
                "peer id {peer} is listed twice"
            )));
        }
    }
    Ok(())
}

async fn accept_loop(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown_signal();
    loop {
        let incoming = tokio::select! {
            i = shared.endpoint.accept() => i,
            _ = shutdown.wait() => return,
        };
        let Some(incoming) = incoming else { return };
        shared.spawn(handle_incoming(shared.clone(), incoming));
    }
}

/// Completes the handshake (the CA-signed client certificate is checked by rustls),
/// then sorts the connection by certificate and ALPN.
async fn handle_incoming(shared: Arc<Shared>, incoming: quinn::Incoming) {
    let remote = incoming.remote_address();
    let mut shutdown = shared.shutdown_signal();
    let conn = tokio::select! {
        r = incoming.into_future() => r,
        _ = shutdown.wait() => return,
    };
    let conn = match conn {
        Ok(conn) => conn,
        Err(e) => {
            shared.stats.add_refused();
            info!(%remote, error = %e, "incoming handshake failed");
            shared.emit_nowait(TransportEvent::Rejected {
                peer: None,
                remote: remote.to_string(),
                reason: format!("handshake failed: {e}"),
            });
            return;
        }
    };
    let identity = peer_identity(&conn);
    let alpn = negotiated_alpn(&conn);
    match (identity, alpn.as_deref()) {
        (Ok(Identity::Node(id)), Some(ALPN_PEER)) if shared.links.contains_key(&id) => {
            inbound::serve(shared, conn, id).await;
        }
        (Ok(identity), Some(ALPN_API)) => {
            debug!(%remote, %identity, "API client connected");
            conn.set_max_concurrent_uni_streams(0u32.into());
            shared
                .emit(TransportEvent::Client(conn), &mut shutdown)
                .await;
        }
        (Ok(Identity::Node(id)), Some(ALPN_PEER)) => refuse(
            &shared,
            &conn,
            Some(id),
            close::UNKNOWN_PEER,
            format!("node-{id} is not a configured peer of node-{}", shared.id),
        ),
        (Ok(Identity::Client), _) => refuse(
            &shared,
            &conn,
            None,
            close::FORBIDDEN,
            "a client certificate may not speak the peer protocol".into(),
        ),
        (Err(e), _) => refuse(&shared, &conn, None, close::FORBIDDEN, e.to_string()),
        (Ok(identity), other) => refuse(
            &shared,
            &conn,
            None,
            close::PROTOCOL,
            format!("{identity} negotiated unknown ALPN {other:?}"),
        ),
    }
}

/// Refuses a connection: counts it, logs it, closes it with `code` and tells the runtime.
pub(super) fn refuse(
    shared: &Shared,
    conn: &quinn::Connection,
    peer: Option<NodeId>,
    code: quinn::VarInt,
    reason: String,
) {
    let remote = conn.remote_address();
    shared.stats.add_refused();
    warn!(?peer, %remote, %reason, "refusing connection");
    conn.close(code, reason.as_bytes());
    shared.emit_nowait(TransportEvent::Rejected {
        peer,
        remote: remote.to_string(),
        reason,
    });
}
