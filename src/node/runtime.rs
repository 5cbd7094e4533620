//! The node runtime: one task owns the state machine, feeds it transport events,
//! timer ticks and API commands, and runs its actions in order — a Persist is written
//! and flushed before the next action (a send, a published view) can reveal it (I3).

use super::api::{self, Command};
use super::event_log::EventLog;
use super::metrics::Metrics;
use super::status::{wall_ms, Status};
use crate::config::NodeConfig;
use crate::history::Record;
use crate::protocol::{
    Action, Cells, Event, Machine, MachineConfig, MessageKind, Millis, NodeId, Role, View,
};
use crate::storage::Storage;
use crate::transport::{Transport, TransportConfig, TransportEvent};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Why a node could not start or had to stop.
#[derive(Debug, Error)]
pub enum NodeError {
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),
    #[error("cannot open the event log in {dir}: {source}")]
    EventLog { dir: String, source: std::io::Error },
    #[error("the storage task failed: {0}")]
    Join(String),
}

/// A running node. Dropping it does not stop the node; call [`NodeHandle::shutdown`].
pub struct NodeHandle {
    status: watch::Receiver<Status>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), NodeError>>,
    local_addr: SocketAddr,
    metrics: Arc<Metrics>,
}

impl NodeHandle {
    /// The node's current status (role, epoch, coordinator, peers).
    pub fn view(&self) -> Status {
        self.status.borrow().clone()
    }

    /// A receiver that wakes on every status change.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// The node's live counters.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// The UDP address the node's QUIC endpoint is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops the node: closes connections (peers see it go at once rather than after
    /// the idle timeout) and waits for the runtime task to end.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        let _ = self.stop.send(true);
        self.wait().await
    }

    /// Waits until the node stops by itself (a fatal storage error) or is shut down.
    pub async fn wait(self) -> Result<(), NodeError> {
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(NodeError::Join(e.to_string())),
        }
    }
}

/// Starts a node from a validated config: opens its data dir (refusing a locked or
/// corrupted one), binds its endpoint and begins as a candidate (I4).
pub async fn start(config: NodeConfig) -> Result<NodeHandle, NodeError> {
    let storage = Arc::new(Storage::open(&config.data_dir)?);
    let cells = storage.load()?;
    let event_log =
        EventLog::open(&config.data_dir, config.id).map_err(|source| NodeError::EventLog {
            dir: config.data_dir.display().to_string(),
            source,
        })?;
    let peers: Vec<NodeId> = config.peers.iter().map(|p| p.id).collect();
    let (transport, events) = Transport::start(TransportConfig {
        id: config.id,
        listen: config.listen,
        tls: crate::certs::TlsFiles {
            ca: config.tls.ca.clone(),
            cert: config.tls.cert.clone(),
            key: config.tls.key.clone(),
        },
        peers: config.peers.iter().map(|p| (p.id, p.addr)).collect(),
        timing: config.timing,
    })
    .await?;
    let local_addr = transport.local_addr();
    let clock = Clock::new();
    let machine = Machine::start(
        MachineConfig {
            id: config.id,
            peers: peers.clone(),
            timing: config.timing,
            preempt: config.preempt,
            eligible: true,
        },
        cells,
        clock.now(),
    );
    let status = Status::initial(machine.view(), cells, &peers, wall_ms());
    let (status_tx, status_rx) = watch::channel(status);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (commands_tx, commands_rx) = mpsc::channel(16);
    tracing::info!(
        id = config.id,
        %local_addr,
        incarnation = cells.incarnation + 1,
        accepted = ?cells.accepted,
        "node starting as a candidate"
    );
    let metrics = Arc::new(Metrics::new(config.id));
    let runtime = Runtime {
        higher_peers: peers.iter().any(|&p| p > config.id),
        metrics: Arc::clone(&metrics),
        tracker: ViewTracker::default(),
        machine,
        storage,
        event_log,
        transport,
        events,
        status: status_tx,
        commands: commands_rx,
        commands_tx,
        clock,
        eligible_again_at: None,
    };
    let task = tokio::spawn(runtime.run(stop_rx));
    Ok(NodeHandle {
        status: status_rx,
        stop: stop_tx,
        task,
        local_addr,
        metrics,
    })
}

/// Milliseconds since the node started: the machine's notion of `now`.
struct Clock {
    origin: Instant,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            origin: Instant::now(),
        }
    }

    fn now(&self) -> Millis {
        self.origin.elapsed().as_millis() as Millis
    }

    fn instant(&self, at: Millis) -> tokio::time::Instant {
        (self.origin + Duration::from_millis(at)).into()
    }
}

struct Runtime {
    machine: Machine,
    storage: Arc<Storage>,
    event_log: EventLog,
    transport: Transport,
    events: mpsc::Receiver<TransportEvent>,
    status: watch::Sender<Status>,
    commands: mpsc::Receiver<Command>,
    commands_tx: mpsc::Sender<Command>,
    clock: Clock,
    /// When a step-down ends and the node may lead again.
    eligible_again_at: Option<Millis>,
    metrics: Arc<Metrics>,
    /// Whether any peer has a higher ID (else a declaration is an election of its own).
    higher_peers: bool,
    tracker: ViewTracker,
}

/// What the runtime remembers between views to count coordinator changes and time
/// failovers.
#[derive(Debug, Default)]
struct ViewTracker {
    /// The last coordinator this node followed or was (kept through candidate spells).
    last_coordinator: Option<NodeId>,
    /// When the node lost its coordinator (its view turned candidate).
    lost_at: Option<Instant>,
}

impl Runtime {
    async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), NodeError> {
        self.event_log.append(Record::Started {
            incarnation: self.machine.cells().incarnation,
        });
        let result = self.event_loop(&mut stop).await;
        if let Err(e) = &result {
            tracing::error!("node stopping on a fatal error: {e}");
        }
        self.transport.shutdown().await;
        tracing::info!(id = self.machine.id(), "node stopped");
        result
    }

    async fn event_loop(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), NodeError> {
        self.run_actions().await?;
        loop {
            let tick_at = self.clock.instant(self.machine.next_deadline());
            let eligible_at = self.eligible_again_at.map(|at| self.clock.instant(at));
            // Every branch is cancellation-safe: mpsc/watch receivers and sleeps lose
            // nothing when another branch wins.
            tokio::select! {
                biased;
                _ = stop.changed() => return Ok(()),
                event = self.events.recv() => match event {
                    Some(event) => self.on_transport(event),
                    None => return Ok(()),
                },
                Some(command) = self.commands.recv() => self.on_command(command),
                _ = sleep_until_some(eligible_at) => {
                    self.eligible_again_at = None;
                    tracing::info!("step-down period over; eligible again");
                    self.machine.handle(Event::SetEligible(true), self.clock.now());
                }
                _ = tokio::time::sleep_until(tick_at) => {
                    self.machine.handle(Event::Tick, self.clock.now());
                }
            }
            self.run_actions().await?;
        }
    }

    fn on_transport(&mut self, event: TransportEvent) {
        let now = self.clock.now();
        match event {
            TransportEvent::Message { from, msg } => {
                self.metrics.message_received(msg.body.kind());
                self.machine.handle(Event::Message { from, msg }, now)
            }
            TransportEvent::PeerUp(peer) => {
                self.set_peer(peer, true);
                self.machine.handle(Event::PeerUp(peer), now);
            }
            TransportEvent::PeerDown(peer) => {
                self.set_peer(peer, false);
                self.machine.handle(Event::PeerDown(peer), now);
            }
            TransportEvent::Client(conn) => {
                tokio::spawn(api::serve_client(
                    conn,
                    api::ApiContext {
                        status: self.status.subscribe(),
                        commands: self.commands_tx.clone(),
                        metrics: Arc::clone(&self.metrics),
                    },
                ));
            }
            TransportEvent::Rejected {
                peer,
                remote,
                reason,
            } => {
                tracing::warn!(?peer, %remote, "refused a connection: {reason}");
            }
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::StepDown { for_ms, reply } => {
                let status = self.status.borrow().clone();
                let answer = if status.coordinator != Some(status.id) {
                    Err(format!(
                        "node {} is not the coordinator (coordinator: {})",
                        status.id,
                        status
                            .coordinator
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "none".into())
                    ))
                } else if !status.peers.iter().any(|p| p.connected) {
                    Err("no other node is reachable to take over".to_string())
                } else {
                    let now = self.clock.now();
                    self.eligible_again_at = Some(now + for_ms);
                    self.machine.handle(Event::SetEligible(false), now);
                    Ok(format!(
                        "node {} stepped down for {} ms; the next highest eligible node takes over",
                        status.id, for_ms
                    ))
                };
                let _ = reply.send(answer);
            }
        }
    }

    fn set_peer(&mut self, peer: NodeId, connected: bool) {
        self.status
            .send_if_modified(|s| s.set_peer(peer, connected));
        let up = self
            .status
            .borrow()
            .peers
            .iter()
            .filter(|p| p.connected)
            .count();
        self.metrics.set_peers_up(up as u64);
    }

    /// Runs the machine's actions in order; a Persist completes (flushed, fsynced)
    /// before the next action runs.
    async fn run_actions(&mut self) -> Result<(), NodeError> {
        let mut sent_election = false;
        let mut declared = false;
        while let Some(action) = self.machine.poll_action() {
            match action {
                Action::Persist(cells) => {
                    if self.persist(cells).await? {
                        declared = true;
                        self.metrics.declared();
                    }
                }
                Action::Send { to, msg } => {
                    let kind = msg.body.kind();
                    sent_election |= kind == MessageKind::Election;
                    self.metrics.message_sent(kind);
                    self.transport.send(to, msg);
                }
                Action::ViewChanged(view) => {
                    self.event_log.append(Record::View(view));
                    self.track_view(view);
                    let now = wall_ms();
                    self.status.send_modify(|s| {
                        if s.apply_view(view, now) {
                            tracing::info!(
                                role = %view.role,
                                epoch = ?view.epoch,
                                coordinator = ?view.coordinator(),
                                "view changed"
                            );
                        }
                    });
                }
                Action::Misbehaved { peer, what } => {
                    tracing::warn!(peer, "peer {what}; closing its connection");
                    self.transport.disconnect(peer, &what.to_string());
                }
            }
        }
        // One batch of actions answers one event, so it begins at most one election.
        if sent_election || (declared && !self.higher_peers) {
            self.metrics.election_started();
        }
        Ok(())
    }

    /// Counts coordinator changes and failover durations, and updates the role gauges.
    fn track_view(&mut self, view: View) {
        let coordinator = view.coordinator();
        self.metrics.set_view(
            view.role == Role::Coordinator,
            coordinator.and(view.epoch).map_or(0, |e| e.term),
        );
        self.metrics.set_eligible(view.eligible);
        let tracker = &mut self.tracker;
        match coordinator {
            None => {
                if tracker.last_coordinator.is_some() && tracker.lost_at.is_none() {
                    tracker.lost_at = Some(Instant::now());
                }
            }
            Some(c) => {
                if let Some(lost_at) = tracker.lost_at.take() {
                    self.metrics
                        .observe_failover(lost_at.elapsed().as_millis() as u64);
                }
                if tracker.last_coordinator != Some(c) {
                    tracker.last_coordinator = Some(c);
                    self.metrics.coordinator_changed();
                }
            }
        }
    }

    /// Writes and flushes the cells; returns whether they hold a new epoch declared by
    /// this node.
    async fn persist(&mut self, cells: Cells) -> Result<bool, NodeError> {
        let before = self.status.borrow().accepted;
        let storage = Arc::clone(&self.storage);
        tokio::task::spawn_blocking(move || storage.save(&cells))
            .await
            .map_err(|e| NodeError::Join(e.to_string()))??;
        self.event_log.append(Record::Persisted(cells));
        self.status.send_modify(|s| s.apply_cells(cells));
        let id = self.machine.id();
        Ok(cells.accepted != before && cells.accepted.is_some_and(|e| e.leader == id))
    }
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
