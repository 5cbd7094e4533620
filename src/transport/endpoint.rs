//! [`Transport`]: the handle the runtime holds — starting the node's QUIC endpoint,
//! sending messages, reloading certificates, and shutting everything down.

use super::accept::accept_loop;
use super::close;
use super::config::TransportConfig;
use super::error::TransportError;
use super::event::TransportEvent;
use super::hello::Settings;
use super::link::Link;
use super::member_checks::{check_node_id, check_peers};
use super::outbound;
use super::peer_addr::PeerAddr;
use super::runtime::QuietRuntime;
use super::shared::{Parts, Shared};
use super::silence;
use super::socket;
use super::stats::TransportStats;
use super::tls;
use crate::certs::Identity;
use crate::protocol::{ConfigId, Message, NodeId};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// Events waiting for the runtime; beyond this, peer readers wait (QUIC flow control
/// then slows the senders) and informational `Rejected` events are dropped.
const EVENT_QUEUE: usize = 1024;
/// How long `shutdown` waits for tasks and for close frames to go out.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);
/// How long `shutdown` then waits for quinn to close the socket: one wake of its
/// driver, unless the runtime still holds an API connection (which keeps it open).
const RELEASE_WAIT: Duration = Duration::from_millis(100);

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

/// The runtime's end of a started transport: the handle and its events.
type Started = (Transport, mpsc::Receiver<TransportEvent>);

impl Transport {
    /// Checks the config and certificates, binds `cfg.listen`, and starts dialing
    /// every peer. Fails (naming the file or field) if our certificate is not for
    /// `node-<id>`, a file is missing or unusable, the peers list is invalid, or the
    /// address cannot be bound.
    pub async fn start(cfg: TransportConfig) -> Result<Started, TransportError> {
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
    ) -> Result<Started, TransportError> {
        let configs = prepare(&cfg)?;
        launch(cfg, configs, socket)
    }

    /// The member list changed (the node runtime stored a new one): from now on dial
    /// and admit exactly `peers` (every member but us, with its address), and send our
    /// hellos with us and them as our member list. A peer new to us gets a link and a
    /// dialer, as at start; a peer no longer listed has its dialer stopped and every
    /// connection with it closed with [`close::REMOVED`] (the runtime hears `PeerDown`
    /// if it was up), and its certificate is refused from then on; a peer whose
    /// address changed is redialed there. Entries for our own ID, a reserved ID or a
    /// second time the same ID are left out, with a warning. Call
    /// [`Transport::set_config_id`] first, so no hello pairs the new list with the old
    /// identity. Never blocks; connections open and close in the background.
    pub fn set_peers(&self, peers: Vec<(NodeId, PeerAddr)>) {
        let shared = &self.shared;
        let wanted = usable_peers(shared.id, peers);
        let parent = shared.shutdown();
        let (mut added, mut removed, mut moved) = (Vec::new(), Vec::new(), Vec::new());
        {
            let mut links = shared.write_links();
            links.retain(|peer, link| {
                let keep = wanted.contains_key(peer);
                if !keep {
                    removed.push(link.clone());
                }
                keep
            });
            for (peer, addr) in wanted {
                match links.get(&peer) {
                    Some(link) if link.addr() != addr => moved.push((link.clone(), addr)),
                    Some(_) => {}
                    None => {
                        let link = Link::new(peer, addr, &parent);
                        links.insert(peer, link.clone());
                        added.push(link);
                    }
                }
            }
        }
        // After the link left the map: an inbound connection registered after this
        // sees no link and closes itself (see `inbound::note_arrival`).
        for link in &removed {
            link.retire();
            for conn in shared.inbound.take_all(link.peer) {
                conn.close(close::REMOVED, close::REMOVED_REASON);
            }
            info!(
                peer = link.peer,
                "peer removed from the member list; disconnected"
            );
        }
        for (link, addr) in moved {
            info!(peer = link.peer, from = %link.addr(), to = %addr, "peer moved; redialing");
            link.readdress(addr);
        }
        for link in &added {
            info!(peer = link.peer, addr = %link.addr(), "peer added to the member list");
            shared.spawn(outbound::run(shared.clone(), link.clone()));
        }
        added.sort_unstable_by_key(|l| l.peer);
        removed.sort_unstable_by_key(|l| l.peer);
        let ids = |links: &[Arc<Link>]| links.iter().map(|l| l.peer).collect::<Vec<_>>();
        info!(
            added = ?ids(&added),
            removed = ?ids(&removed),
            members = ?shared.members(),
            "member list applied"
        );
    }

    /// Which member list ours is (the runtime's stored list's ID), sent in every hello
    /// from now on: while both ends' lists are still the seeded, unstamped ones they
    /// must be within one member of each other, and once either is stamped the
    /// protocol orders them instead (see `agreement`). Until called, hellos say
    /// [`ConfigId::default()`], a seeded list: a node that starts from a stored,
    /// stamped list should call this right after [`Transport::start`].
    pub fn set_config_id(&self, config: ConfigId) {
        debug!(%config, "member list identity set");
        self.shared.set_config(config);
    }

    /// Sets the members a forced recovery on this node gave up (`bully recover` stores
    /// them): a connection from one of them is refused with [`close::GIVEN_UP`], which
    /// tells it to stand down for good, rather than as a stranger's.
    /// Each of them with an address is also dialed and told at once
    /// (`super::given_up::tell`), once the network lets the dial through.
    pub fn set_gave_up(&self, members: Vec<(NodeId, PeerAddr)>) {
        let ids = members.iter().map(|(id, _)| *id).collect();
        self.shared.set_gave_up(ids);
        for (peer, addr) in members {
            debug!(peer, %addr, "a member given up by a forced recovery");
            let shared = self.shared.clone();
            self.shared.spawn(super::given_up::tell(shared, peer, addr));
        }
    }

    /// Queues `msg` for `to` on its FIFO stream. Never blocks: the message is dropped
    /// (and counted) if the peer is unknown, not connected, or its queue is full.
    pub fn send(&self, to: NodeId, msg: Message) {
        let kind = msg.body.kind();
        let sent = self.shared.link(to).is_some_and(|l| l.try_send(msg));
        if !sent {
            self.shared.stats.add_dropped(1);
            debug!(peer = to, kind = kind.name(), "message dropped");
        }
    }

    /// Re-reads the certificate, key and CA named in `cfg.tls` (the rest of `cfg` is
    /// only checked): new handshakes and dials use them, connections already up stay
    /// up, so a node rotates its certificate without leaving the cluster. On an error
    /// nothing changes.
    pub fn reload_tls(&self, cfg: &TransportConfig) -> Result<(), TransportError> {
        if cfg.id != self.shared.id {
            return Err(TransportError::IdChanged {
                running: self.shared.id,
                new: cfg.id,
            });
        }
        let configs = prepare(cfg)?;
        if let Some(endpoint) = self.shared.endpoint() {
            endpoint.set_server_config(Some(configs.server));
        }
        self.shared.set_dial_config(configs.dial);
        info!(id = cfg.id, cert = %cfg.tls.cert.display(), "certificates reloaded");
        Ok(())
    }

    /// Closes every connection with `peer` (e.g. it broke a protocol rule): its
    /// messages may come on either. Both sides may dial again.
    pub fn disconnect(&self, peer: NodeId, reason: &str) {
        warn!(peer, %reason, "disconnecting peer");
        for conn in self.shared.inbound.take_all(peer) {
            conn.close(close::MISBEHAVED, reason.as_bytes());
        }
        if let Some(link) = self.shared.link(peer) {
            link.close_outbound(reason);
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

    /// Peers we can send to (a connection either side dialed is up), in ID order.
    pub fn connected_peers(&self) -> Vec<NodeId> {
        let mut peers: Vec<NodeId> = self
            .shared
            .links()
            .iter()
            .filter(|l| l.is_sendable())
            .map(|l| l.peer)
            .collect();
        peers.sort_unstable();
        peers
    }

    /// Each live peer connection's smoothed RTT estimate, by peer (a pair whose dials
    /// crossed has two): what QUIC's resend timeout is computed from, so an operator
    /// or a test can see a link that would resend slowly.
    pub fn link_rtts(&self) -> Vec<(NodeId, Duration)> {
        let mut rtts: Vec<(NodeId, Duration)> = self
            .shared
            .peer_connections()
            .into_iter()
            .map(|(peer, conn)| (peer, conn.rtt()))
            .collect();
        rtts.sort_unstable();
        rtts
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> TransportStats {
        self.shared.stats.snapshot()
    }

    /// Closes every connection (peers see the close at once, not after their idle
    /// timeout), ends every task the transport spawned (waiting for them, aborting any
    /// that lingers past a grace period), waits for the close frames to go out (about
    /// 100 ms on loopback) and lets go of the endpoint, so the UDP socket is closed and
    /// the port free to bind again — even while clones of this handle live on. Only a
    /// `quinn::Connection` still held elsewhere (an API client from a
    /// [`TransportEvent::Client`]) keeps the socket open until it is dropped.
    /// Idempotent: a second call returns at once.
    pub async fn shutdown(&self) {
        if self.shared.begin_shutdown() {
            return;
        }
        info!(id = self.shared.id, "transport shutting down");
        let Some((endpoint, mut released)) = self.shared.take_endpoint() else {
            return;
        };
        endpoint.close(close::SHUTDOWN, b"node shutting down");
        let mut tasks = self.shared.take_tasks();
        let drained = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_GRACE, drained).await.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        self.shared.forget_connections();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, endpoint.wait_idle()).await;
        // Our handle was the last: quinn's driver now ends and closes the socket.
        drop(endpoint);
        if tokio::time::timeout(RELEASE_WAIT, released.wait())
            .await
            .is_err()
        {
            debug!(
                id = self.shared.id,
                "UDP socket left open: an API connection is still held"
            );
        }
    }
}

/// The entries of a member list the transport can act on, by ID: the list comes from
/// the replicated state, not a checked config file, so an entry for our own ID, a
/// reserved ID or an ID seen before is left out (and logged) rather than refused whole.
fn usable_peers(id: NodeId, peers: Vec<(NodeId, PeerAddr)>) -> HashMap<NodeId, PeerAddr> {
    let mut usable = HashMap::new();
    for (peer, addr) in peers {
        let problem = if peer == id {
            Some("our own ID".to_string())
        } else if let Err(e) = check_node_id(peer) {
            Some(e.to_string())
        } else if usable.contains_key(&peer) {
            Some("listed twice (the first kept)".to_string())
        } else {
            None
        };
        match problem {
            Some(why) => warn!(peer, %addr, %why, "member list entry left out"),
            None => {
                usable.insert(peer, addr);
            }
        }
    }
    usable
}

/// The quinn configs for a node, built once its config and certificates check out.
struct Configs {
    server: quinn::ServerConfig,
    dial: quinn::ClientConfig,
}

fn prepare(cfg: &TransportConfig) -> Result<Configs, TransportError> {
    cfg.timing.validate().map_err(TransportError::Timing)?;
    check_node_id(cfg.id)?;
    check_peers(cfg.id, cfg.listen, cfg.peers.iter().map(|(id, a)| (*id, a)))?;
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
) -> Result<Started, TransportError> {
    let bind_error = |source| TransportError::Bind {
        addr: cfg.listen,
        source,
    };
    let runtime = Arc::new(QuietRuntime);
    let (socket, released) = socket::wrap(socket, &*runtime).map_err(bind_error)?;
    let endpoint = quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        Some(configs.server),
        socket,
        runtime,
    )
    .map_err(bind_error)?;
    let local_addr = endpoint.local_addr().map_err(bind_error)?;

    let (events, events_rx) = mpsc::channel(EVENT_QUEUE);
    let shared = Arc::new(Shared::new(Parts {
        id: cfg.id,
        endpoint,
        released,
        local_addr,
        dial: configs.dial,
        events,
        silence: Duration::from_millis(cfg.timing.peer_idle_timeout_ms()),
        settings: Settings::new(cfg.mode, &cfg.timing),
    }));
    let links: Vec<Arc<Link>> = {
        let parent = shared.shutdown();
        let mut map = shared.write_links();
        for (peer, addr) in &cfg.peers {
            map.insert(*peer, Link::new(*peer, addr.clone(), &parent));
        }
        map.values().cloned().collect()
    };
    for link in links {
        shared.spawn(outbound::run(shared.clone(), link));
    }
    shared.spawn(accept_loop(shared.clone()));
    shared.spawn(silence::watch(shared.clone()));
    info!(id = cfg.id, addr = %local_addr, peers = cfg.peers.len(), "transport listening");
    Ok((Transport { shared }, events_rx))
}
