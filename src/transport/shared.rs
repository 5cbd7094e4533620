//! [`Shared`]: the state the [`super::Transport`] handle and every task it spawned
//! hold, and the one [`Shutdown`] signal that ends them all. It imports none of the
//! tasks (accept loop, dialers, readers), so none of them imports another.

use super::event::{Events, TransportEvent};
use super::hello::{Hello, Settings};
use super::inbound_table::InboundTable;
use super::link::Link;
use super::socket::Released;
use super::stats::Counters;
use super::verdicts::Verdicts;
use crate::protocol::{ConfigId, NodeId};
use crate::shutdown::Shutdown;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::warn;

/// Locks a mutex whose data stays whole even if a holder panicked.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// State shared by the handle and every task.
pub(super) struct Shared {
    pub id: NodeId,
    pub local_addr: SocketAddr,
    /// Our peers now (the member list less us), each with its link: whom we dial,
    /// whose certificates we admit, and (with us) the member list every hello carries.
    /// Changed only by [`super::Transport::set_peers`]; held only briefly, never across
    /// an await.
    links: RwLock<HashMap<NodeId, Arc<Link>>>,
    pub inbound: InboundTable,
    pub stats: Counters,
    /// Sent in every hello; new per process (see `inbound`).
    pub nonce: u64,
    /// Which member list ours is, sent in every hello: whether `agreement` compares
    /// the two lists depends on it. Set by [`super::Transport::set_config_id`].
    config: Mutex<ConfigId>,
    /// The members a forced recovery on this node gave up: refused as such, not as
    /// strangers. Set by [`super::Transport::set_gave_up`].
    gave_up: Mutex<BTreeSet<NodeId>>,
    /// Our mode and safety timing: sent in every hello, compared with theirs.
    pub settings: Settings,
    /// Which peers' configs were last seen to disagree with ours.
    pub verdicts: Verdicts,
    /// [`crate::protocol::Timing::peer_idle_timeout_ms`]: how long a connection may go
    /// unanswered, and a handshake may take.
    pub silence: Duration,
    /// The endpoint until shutdown takes it (its last handle: dropping it lets quinn
    /// close the socket).
    endpoint: Mutex<Option<quinn::Endpoint>>,
    /// Resolves once the socket is closed; shutdown waits for it.
    released: Mutex<Option<Released>>,
    /// The TLS config each dial uses; replaced by [`super::Transport::reload_tls`].
    dial: Mutex<quinn::ClientConfig>,
    /// What the tasks tell the runtime.
    pub events: Events,
    shutdown: Shutdown,
    tasks: Mutex<JoinSet<()>>,
}

/// What [`Shared::new`] needs (the peers' links are added after, see
/// [`Shared::write_links`]).
pub(super) struct Parts {
    pub id: NodeId,
    pub endpoint: quinn::Endpoint,
    pub released: Released,
    pub local_addr: SocketAddr,
    pub dial: quinn::ClientConfig,
    pub events: mpsc::Sender<TransportEvent>,
    pub silence: Duration,
    pub settings: Settings,
}

impl Shared {
    pub fn new(parts: Parts) -> Shared {
        Shared {
            id: parts.id,
            local_addr: parts.local_addr,
            links: RwLock::new(HashMap::new()),
            inbound: InboundTable::default(),
            stats: Counters::default(),
            nonce: rand::random(),
            config: Mutex::new(ConfigId::default()),
            gave_up: Mutex::new(BTreeSet::new()),
            settings: parts.settings,
            verdicts: Verdicts::default(),
            silence: parts.silence,
            endpoint: Mutex::new(Some(parts.endpoint)),
            released: Mutex::new(Some(parts.released)),
            dial: Mutex::new(parts.dial),
            events: Events::new(parts.events),
            shutdown: Shutdown::new(),
            tasks: Mutex::new(JoinSet::new()),
        }
    }

    /// The signal every task selects on; it trips once shutdown has begun.
    pub fn shutdown(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// Signals shutdown to every task; returns whether it had already begun.
    pub fn begin_shutdown(&self) -> bool {
        // Under the task lock, so `spawn` either sees the signal or adds its task
        // before `take_tasks` collects them.
        let _tasks = lock(&self.tasks);
        self.shutdown.trip()
    }

    /// A handle on the endpoint; `None` once shutdown has taken it.
    pub fn endpoint(&self) -> Option<quinn::Endpoint> {
        lock(&self.endpoint).clone()
    }

    /// The endpoint and the socket's release signal, for shutdown (once).
    pub fn take_endpoint(&self) -> Option<(quinn::Endpoint, Released)> {
        let endpoint = lock(&self.endpoint).take()?;
        Some((endpoint, lock(&self.released).take()?))
    }

    /// Every task spawned so far; after [`Shared::begin_shutdown`], all there will be.
    pub fn take_tasks(&self) -> JoinSet<()> {
        std::mem::take(&mut *lock(&self.tasks))
    }

    /// Lets go of every peer connection the tables hold, once the tasks have ended: a
    /// task aborted at shutdown's grace period never unregistered its connection, and
    /// each connection keeps the endpoint's UDP socket open while it lives.
    pub fn forget_connections(&self) {
        self.inbound.clear();
        for link in self.links() {
            link.disconnected();
        }
    }

    /// Spawns a task that `shutdown` will wait for (and abort if it lingers). Once
    /// shutdown has begun the task is not started.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.tasks);
        if self.shutdown.is_tripped() {
            return;
        }
        // Reap finished tasks so the set does not grow with every connection.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }

    /// Refuses a connection: counts it, logs it, closes it with `code` and tells the
    /// runtime.
    pub fn refuse(
        &self,
        conn: &quinn::Connection,
        peer: Option<NodeId>,
        code: quinn::VarInt,
        reason: String,
    ) {
        let remote = conn.remote_address();
        self.stats.add_refused();
        warn!(?peer, %remote, %reason, "refusing connection");
        conn.close(code, reason.as_bytes());
        self.events.reject(peer, remote.to_string(), reason);
    }

    fn read_links(&self) -> RwLockReadGuard<'_, HashMap<NodeId, Arc<Link>>> {
        // Every write is a whole insert or removal: a panic cannot leave the map torn.
        self.links.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The links by peer, to change the peer set; hold it only to edit the map.
    pub fn write_links(&self) -> RwLockWriteGuard<'_, HashMap<NodeId, Arc<Link>>> {
        self.links.write().unwrap_or_else(|e| e.into_inner())
    }

    /// `peer`'s link, while it is one of our peers.
    pub fn link(&self, peer: NodeId) -> Option<Arc<Link>> {
        self.read_links().get(&peer).cloned()
    }

    /// Whether `peer` is one of our peers now (its certificate is admitted).
    pub fn is_peer(&self, peer: NodeId) -> bool {
        self.read_links().contains_key(&peer)
    }

    /// Every peer's link, in no particular order.
    pub fn links(&self) -> Vec<Arc<Link>> {
        self.read_links().values().cloned().collect()
    }

    /// Us and our peers now, ascending: sent in every hello, compared with theirs.
    pub fn members(&self) -> Vec<NodeId> {
        let mut members: Vec<NodeId> = self.read_links().keys().copied().collect();
        members.push(self.id);
        members.sort_unstable();
        members
    }

    /// Every live peer connection, outbound and inbound, with its peer.
    pub fn peer_connections(&self) -> Vec<(NodeId, quinn::Connection)> {
        let outbound = self
            .links()
            .into_iter()
            .filter_map(|link| link.outbound_connection().map(|c| (link.peer, c)));
        outbound.chain(self.inbound.all()).collect()
    }

    /// Our hello: nonce, member list (us and our peers now, ascending), which list that
    /// is, and settings.
    pub fn hello(&self) -> Hello {
        Hello {
            nonce: self.nonce,
            members: self.members(),
            config: *lock(&self.config),
            settings: self.settings,
        }
    }

    /// Our hellos from now on say our member list is `config`.
    pub fn set_config(&self, config: ConfigId) {
        *lock(&self.config) = config;
    }

    /// Sets the members a forced recovery on this node gave up.
    pub fn set_gave_up(&self, ids: BTreeSet<NodeId>) {
        *lock(&self.gave_up) = ids;
    }

    /// Whether `peer`, not a member, is one a forced recovery on this node gave up.
    pub fn gave_up(&self, peer: NodeId) -> bool {
        lock(&self.gave_up).contains(&peer)
    }

    /// The dial config as of now (certificates may have been reloaded).
    pub fn dial_config(&self) -> quinn::ClientConfig {
        lock(&self.dial).clone()
    }

    /// Dials from now on use `config`.
    pub fn set_dial_config(&self, config: quinn::ClientConfig) {
        *lock(&self.dial) = config;
    }
}
