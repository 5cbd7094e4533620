//! The node runtime: one task owns the state machine, feeds it transport events,
//! timer ticks and API commands, and runs its actions in order — a Persist is written
//! and flushed before the next action (a send, a published view) can reveal it (I3).

use super::api::{self, Command};
use super::error::NodeError;
use super::event_log::EventLog;
use super::hooks::{ElectedHookDone, Hooks};
use super::metrics::{HealthState, Metrics};
use super::reload::{self, Services};
use super::status::Status;
use super::step_down::{self, Handover};
use super::switchover::{self, Hold, Members};
use super::transitions::Tracker;
use crate::config::{CoordinatorReady, ElectedHookFailure, NodeConfig};
use crate::history::Record;
use crate::protocol::{
    Action, Body, Cells, Epoch, Event, Fact, Machine, MachineConfig, Millis, NodeId, Role, Timing,
    View,
};
use crate::storage::Storage;
use crate::transport::{Transport, TransportEvent};
use crate::wall_clock::wall_ms;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// A running node. Dropping it does not stop the node; call [`NodeHandle::shutdown`].
pub struct NodeHandle {
    commands: mpsc::Sender<Command>,
    status: watch::Receiver<Status>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), NodeError>>,
    local_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    metrics: Arc<Metrics>,
}

impl NodeHandle {
    /// The node's current status (role, epoch, coordinator, peers).
    pub fn view(&self) -> Status {
        self.status.borrow().as_of_now()
    }

    /// A receiver that wakes on every status change.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// The node's live counters.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// The TCP address of the HTTP endpoint as started, when `[http]` is configured (a
    /// reload may move it).
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The UDP address the node's QUIC endpoint is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Applies a re-read config without leaving the cluster (see [`super::reload`]):
    /// `Ok` says what changed, `Err` why nothing did.
    pub async fn reload(&self, config: NodeConfig) -> Result<String, String> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let command = Command::Reload {
            config: Box::new(config),
            reply,
        };
        if self.commands.send(command).await.is_err() {
            return Err("the node is stopping".into());
        }
        answer
            .await
            .unwrap_or_else(|_| Err("the node is stopping".into()))
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
/// corrupted one), binds its endpoints and begins as a candidate (I4). Hooks and the
/// health check run in the data dir; see [`start_in`].
pub async fn start(config: NodeConfig) -> Result<NodeHandle, NodeError> {
    let workdir = config.data_dir.clone();
    start_in(config, workdir).await
}

/// Like [`start`], with hooks and the health check run in `workdir` (`bully node` passes
/// the config file's directory, so commands such as `./health.sh` sit beside it).
pub async fn start_in(config: NodeConfig, workdir: PathBuf) -> Result<NodeHandle, NodeError> {
    let storage = Arc::new(Storage::open(&config.data_dir)?);
    let cells = storage.load()?;
    let event_log =
        EventLog::open(&config.data_dir, config.id).map_err(|source| NodeError::EventLog {
            dir: config.data_dir.display().to_string(),
            source,
        })?;
    let http = match config.http {
        Some(http) => {
            Some(
                super::http::bind(http.listen)
                    .await
                    .map_err(|source| NodeError::Http {
                        addr: http.listen,
                        source,
                    })?,
            )
        }
        None => None,
    };
    let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
    let peers: Vec<NodeId> = config.peers.iter().map(|p| p.id).collect();
    let (transport, events) = Transport::start(reload::transport_config(&config)).await?;
    let local_addr = transport.local_addr();
    let clock = Clock::new();
    // With a health check the node starts ineligible; its first result decides.
    let health_state = if config.health.is_some() {
        HealthState::Pending
    } else {
        HealthState::Unchecked
    };
    let machine = Machine::start(
        MachineConfig {
            id: config.id,
            peers: peers.clone(),
            timing: config.timing,
            preempt: config.preempt,
            eligible: config.health.is_none(),
            mode: config.mode,
            witness: config.witness,
            witnesses: config
                .peers
                .iter()
                .filter(|p| p.witness)
                .map(|p| p.id)
                .collect(),
            flaw: None,
        },
        cells,
        clock.now(),
    );
    let mut status = Status::initial(machine.view(), config.mode, cells, &peers, wall_ms());
    status.health = health_state;
    let (status_tx, status_rx) = watch::channel(status);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (commands_tx, commands_rx) = mpsc::channel(16);
    tracing::info!(
        id = config.id,
        %local_addr,
        ?http_addr,
        incarnation = cells.incarnation + 1,
        accepted = ?cells.accepted,
        "node starting as a candidate"
    );
    let metrics = Arc::new(Metrics::new(config.id));
    metrics.set_health(health_state);
    metrics.attach_transport(transport.clone());
    metrics.set_eligible(machine.view().eligible);
    let (elected_tx, elected_hooks) = mpsc::unbounded_channel();
    let (led, led_rx) = watch::channel(None);
    let (hooks, hook_task) = Hooks::start(
        config.hooks.clone(),
        workdir.clone(),
        config.data_dir.clone(),
        Arc::clone(&metrics),
        elected_tx,
        led_rx,
    );
    let (verdicts_tx, verdicts) = mpsc::channel(4);
    let readiness = Readiness {
        at_once: config.hooks.on_elected.is_none()
            || config.http.map(|h| h.coordinator_ready) == Some(CoordinatorReady::Elected),
        on_failure: config.hooks.on_elected_failure,
        resign_for_ms: config.hooks.resign_for_ms,
    };
    let services = Services::start(
        &config,
        workdir,
        status_rx.clone(),
        Arc::clone(&metrics),
        verdicts_tx,
        http,
    );
    let runtime = Runtime {
        timing: config.timing,
        readiness,
        elected_hooks,
        led,
        metrics: Arc::clone(&metrics),
        tracker: Tracker::default(),
        hooks,
        hook_task,
        services,
        verdicts,
        health: health_state,
        machine,
        storage,
        event_log,
        transport,
        events,
        status: status_tx,
        commands: commands_rx,
        commands_tx: commands_tx.clone(),
        clock,
        eligible_again_at: None,
        handover: None,
        hold: None,
        members: Arc::new(Members {
            peers: config.peers.clone(),
            tls: reload::transport_config(&config).tls,
            local_addr,
        }),
    };
    let task = tokio::spawn(runtime.run(stop_rx));
    Ok(NodeHandle {
        commands: commands_tx,
        status: status_rx,
        stop: stop_tx,
        task,
        local_addr,
        http_addr,
        metrics,
    })
}

/// Milliseconds since the node started: the machine's notion of `now`.
struct Clock {
    origin: Instant,
    /// Wall-clock ms (Unix) at `origin`, to put machine times into the event log.
    wall_origin: Millis,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            origin: Instant::now(),
            wall_origin: wall_ms(),
        }
    }

    /// A machine time as wall-clock ms, the event log's clock.
    fn wall(&self, at: Millis) -> Millis {
        self.wall_origin + at
    }

    fn now(&self) -> Millis {
        self.origin.elapsed().as_millis() as Millis
    }

    fn instant(&self, at: Millis) -> tokio::time::Instant {
        (self.origin + Duration::from_millis(at)).into()
    }
}

/// When a new coordinator counts as ready for clients, and what a failed
/// `on_elected` does (`[http] coordinator_ready`, `[hooks] on_elected_failure`).
struct Readiness {
    /// Ready as soon as it leads: no `on_elected`, or `coordinator_ready = "elected"`.
    at_once: bool,
    on_failure: ElectedHookFailure,
    resign_for_ms: u64,
}

struct Runtime {
    machine: Machine,
    readiness: Readiness,
    /// Finished `on_elected` runs, to mark an epoch ready or resign.
    elected_hooks: mpsc::UnboundedReceiver<ElectedHookDone>,
    /// The epoch the node leads (`None` when it does not): the hook task kills an
    /// `on_elected` whose epoch is over.
    led: watch::Sender<Option<Epoch>>,
    storage: Arc<Storage>,
    event_log: EventLog,
    transport: Transport,
    events: mpsc::Receiver<TransportEvent>,
    status: watch::Sender<Status>,
    commands: mpsc::Receiver<Command>,
    commands_tx: mpsc::Sender<Command>,
    clock: Clock,
    timing: Timing,
    /// When a step-down ends and the node may lead again.
    eligible_again_at: Option<Millis>,
    /// A step-down waiting for another node to take over.
    handover: Option<Handover>,
    /// Held back (ineligible) for a switchover to another node.
    hold: Option<Hold>,
    /// The health check's verdicts (never yields without a `[health]` section).
    verdicts: mpsc::Receiver<bool>,
    health: HealthState,
    hooks: Hooks,
    /// The hook runner; aborted when the node stops.
    hook_task: JoinHandle<()>,
    /// Health check and HTTP endpoint, replaced by a reload.
    services: Services,
    metrics: Arc<Metrics>,
    tracker: Tracker,
    /// Peers and our certificate, for a switchover's requests to them.
    members: Arc<Members>,
}

impl Runtime {
    async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), NodeError> {
        self.event_log.append(Record::Started {
            incarnation: self.machine.cells().incarnation,
        });
        if !self.machine.view().eligible {
            self.event_log
                .append(Record::EligibilitySet { eligible: false });
        }
        let result = self.event_loop(&mut stop).await;
        if let Err(e) = &result {
            tracing::error!("node stopping on a fatal error: {e}");
        }
        // A coordinator that stops (cleanly or on a storage error) demotes itself, runs
        // on_demoted and resigns before the process goes, so its database stops being
        // primary and the others elect at once. Nothing is persisted on this path.
        self.machine.handle(Event::Shutdown, self.clock.now());
        if let Err(e) = self.run_actions().await {
            tracing::warn!("while stopping: {e}");
        }
        self.hooks.drain().await;
        self.hook_task.abort();
        self.services.stop();
        self.transport.shutdown().await;
        tracing::info!(id = self.machine.id(), "node stopped");
        result
    }

    async fn event_loop(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), NodeError> {
        self.run_actions().await?;
        loop {
            let tick_at = self.clock.instant(self.machine.next_deadline());
            let eligible_at = self.eligible_again_at.map(|at| self.clock.instant(at));
            let handover_at = self
                .handover
                .as_ref()
                .map(|h| self.clock.instant(h.deadline));
            // Every branch is cancellation-safe: mpsc/watch receivers and sleeps lose
            // nothing when another branch wins.
            tokio::select! {
                biased;
                _ = stop.changed() => return Ok(()),
                event = self.events.recv() => match event {
                    Some(event) => self.on_transport(event),
                    None => return Ok(()),
                },
                Some(command) = self.commands.recv() => self.on_command(command).await,
                Some(healthy) = self.verdicts.recv() => self.on_health(healthy),
                Some(done) = self.elected_hooks.recv() => self.on_elected_hook(done),
                _ = sleep_until_some(eligible_at) => {
                    self.eligible_again_at = None;
                    self.hold = None;
                    tracing::info!("step-down period over");
                    self.refresh_eligibility();
                }
                _ = sleep_until_some(handover_at) => self.handover_timed_out(),
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
                if let Body::Heartbeat { .. } = msg.body {
                    // Readers compute the lag from this; no watcher needs waking.
                    self.status.send_if_modified(|s| {
                        s.last_heartbeat = Some((from, Instant::now()));
                        false
                    });
                }
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
                        members: Arc::clone(&self.members),
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

    async fn on_command(&mut self, command: Command) {
        match command {
            Command::Reload { config, reply } => {
                let result = self
                    .services
                    .reload(*config, &mut self.hooks, &self.transport)
                    .await;
                let answer = match result {
                    Ok(reloaded) => {
                        tracing::info!("{}", reloaded.summary);
                        if reloaded.health_removed {
                            self.health = HealthState::Unchecked;
                            self.metrics.set_health(HealthState::Unchecked);
                            self.refresh_eligibility();
                        }
                        Ok(reloaded.summary)
                    }
                    Err(e) => {
                        tracing::error!("reload refused, nothing changed: {e}");
                        Err(e)
                    }
                };
                let _ = reply.send(answer);
            }
            Command::StandAside {
                for_ms,
                target,
                reply,
            } => {
                if let Some(reason) = switchover::stand_aside_refusal(&self.status.borrow(), for_ms)
                {
                    let _ = reply.send(Err(reason));
                    return;
                }
                tracing::info!(for_ms, target, "standing aside for a switchover");
                self.hold = Some(Hold::new(target));
                self.eligible_again_at = Some(self.clock.now().saturating_add(for_ms));
                self.refresh_eligibility();
                let _ = reply.send(Ok(format!(
                    "node {} stands aside for node {target}",
                    self.machine.id()
                )));
            }
            Command::StepDown { for_ms, to, reply } => {
                tracing::info!(for_ms, ?to, "stepping down on request");
                self.step_down(for_ms, to, reply);
            }
        }
    }

    /// Becomes ineligible for `for_ms` and waits for another node (`to`, if given) to
    /// take over (see [`step_down`]); `reply` gets the outcome.
    fn step_down(
        &mut self,
        for_ms: u64,
        to: Option<NodeId>,
        reply: tokio::sync::oneshot::Sender<Result<String, String>>,
    ) {
        let refused = step_down::refusal(&self.status.borrow(), for_ms, self.handover.is_some());
        if let Some(reason) = refused {
            let _ = reply.send(Err(reason));
            return;
        }
        let now = self.clock.now();
        self.eligible_again_at = Some(now.saturating_add(for_ms));
        self.handover = Some(Handover::new(reply, now, for_ms, &self.timing, to));
        self.hold = to.map(Hold::new);
        self.refresh_eligibility();
    }

    /// An `on_elected` finished. If the node still leads that epoch: success makes it
    /// ready for clients; failure resigns (unless configured to stay), so a database
    /// that could not be promoted never sits behind a coordinator.
    fn on_elected_hook(&mut self, done: ElectedHookDone) {
        let status = self.status.borrow().as_of_now();
        if status.role != Role::Coordinator || status.epoch != done.epoch {
            return;
        }
        if done.succeeded {
            self.status.send_modify(|s| s.ready_epoch = done.epoch);
            return;
        }
        match self.readiness.on_failure {
            ElectedHookFailure::Stay => {
                tracing::warn!("on_elected failed; staying coordinator, not ready for clients");
            }
            ElectedHookFailure::Resign => {
                let for_ms = self.readiness.resign_for_ms;
                tracing::warn!(for_ms, "on_elected failed; resigning");
                let (reply, mut outcome) = tokio::sync::oneshot::channel();
                self.step_down(for_ms, None, reply);
                if let Ok(Err(reason)) = outcome.try_recv() {
                    tracing::warn!("cannot resign: {reason}; staying coordinator, not ready");
                }
            }
        }
    }

    /// No other node took over in time: undo the step-down and refuse it.
    fn handover_timed_out(&mut self) {
        let Some(handover) = self.handover.take() else {
            return;
        };
        tracing::warn!("step-down refused: no other eligible node took over");
        self.eligible_again_at = None;
        self.hold = None;
        self.refresh_eligibility();
        handover.refuse(&self.status.borrow(), &self.timing);
    }

    fn on_health(&mut self, healthy: bool) {
        self.health = if healthy {
            HealthState::Passing
        } else {
            HealthState::Failing
        };
        self.refresh_eligibility();
    }

    /// Eligible = health passing (or unchecked) and not stepped down; tells the machine
    /// when that changes and publishes why in the status.
    fn refresh_eligibility(&mut self) {
        let healthy = matches!(self.health, HealthState::Passing | HealthState::Unchecked);
        let eligible = healthy && self.eligible_again_at.is_none();
        if eligible != self.machine.view().eligible {
            tracing::info!(eligible, health = ?self.health, stepped_down = self.eligible_again_at.is_some(), "eligibility changed");
            self.event_log.append(Record::EligibilitySet { eligible });
            self.machine
                .handle(Event::SetEligible(eligible), self.clock.now());
        }
        let health = self.health;
        let until = self
            .eligible_again_at
            .map(|at| wall_ms() + at.saturating_sub(self.clock.now()));
        self.status.send_if_modified(|s| {
            let changed =
                s.health != health || s.stepped_down_until_ms.is_some() != until.is_some();
            s.health = health;
            s.stepped_down_until_ms = until;
            changed
        });
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
        while let Some(action) = self.machine.poll_action() {
            match action {
                Action::Persist(cells) => self.persist(cells).await?,
                Action::Send { to, msg } => {
                    self.metrics.message_sent(msg.body.kind());
                    self.transport.send(to, msg);
                }
                Action::ViewChanged(view) => self.publish(view),
                Action::Misbehaved { peer, what } => {
                    tracing::warn!(peer, "peer {what}; closing its connection");
                    self.transport.disconnect(peer, &what.to_string());
                }
                Action::Fact(fact) => self.on_fact(fact),
            }
        }
        self.publish_lease();
        Ok(())
    }

    /// Counts and logs what the machine reports. A demotion also ends the lease the
    /// readers check at once, before any later action (a Resign) can go out.
    fn on_fact(&mut self, fact: Fact) {
        let fact = match fact {
            Fact::ElectionStarted => {
                self.metrics.election_started();
                fact
            }
            Fact::Declared { epoch } => {
                self.metrics.declared();
                tracing::info!(%epoch, "declared");
                fact
            }
            Fact::Established { epoch } => {
                tracing::info!(%epoch, "established as coordinator");
                fact
            }
            Fact::Demoted {
                epoch,
                reason,
                office_ended_at,
            } => {
                // The machine has left office: its lease is gone for readers too.
                self.publish_lease();
                tracing::info!(%epoch, %reason, "no longer coordinator");
                Fact::Demoted {
                    epoch,
                    reason,
                    office_ended_at: self.clock.wall(office_ended_at),
                }
            }
        };
        self.event_log.append(Record::Fact(fact));
    }

    /// Hands the machine's current lease end to the readers (Q4), without waking
    /// watchers: it changes with every acked heartbeat.
    fn publish_lease(&mut self) {
        let until = self.lease_instant();
        self.status.send_if_modified(|s| {
            s.lease_until = until;
            false
        });
    }

    /// Publishes a view: event log, status watch, metrics, hooks, pending step-down.
    /// The epoch in it is already durable (the machine persists before it publishes).
    fn publish(&mut self, view: View) {
        self.event_log.append(Record::View(view));
        let now = wall_ms();
        let lease = self.lease_instant();
        let ready_at_once = self.readiness.at_once;
        self.status.send_modify(|s| {
            s.lease_until = lease;
            if ready_at_once && view.role == Role::Coordinator {
                s.ready_epoch = view.epoch;
            }
            if s.apply_view(view, now) {
                tracing::info!(
                    role = %view.role,
                    epoch = ?view.epoch,
                    coordinator = ?view.coordinator(),
                    "view changed"
                );
            }
        });
        let transition = self.tracker.on_view(view, Instant::now());
        let m = &self.metrics;
        m.set_view(
            view.role == Role::Coordinator,
            view.coordinator().and(view.epoch).map_or(0, |e| e.term),
        );
        m.set_eligible(view.eligible);
        if transition.coordinator_changed {
            m.coordinator_changed();
        }
        if let Some(took) = transition.failover {
            m.observe_failover(took);
        }
        // Before the hooks, and before any later action (a Resign) goes out: a running
        // on_elected for an epoch now over is killed first.
        let led = (view.role == Role::Coordinator)
            .then_some(view.epoch)
            .flatten();
        self.led
            .send_if_modified(|l| std::mem::replace(l, led) != led);
        self.hooks.fire(&transition, &self.status.borrow());
        self.handover = self
            .handover
            .take()
            .and_then(|h| h.complete_if_taken_over(view));
        if self.hold.as_mut().is_some_and(|h| !h.keeps_holding(view)) {
            // The switchover's target stopped leading: the wait branch makes this node
            // eligible again on the next turn of the loop.
            tracing::info!("the switchover target stopped leading; no longer held back");
            self.hold = None;
            self.eligible_again_at = Some(self.clock.now());
        }
    }

    /// The machine's lease end as an instant readers can compare with `Instant::now()`.
    fn lease_instant(&self) -> Option<std::time::Instant> {
        self.machine
            .lease_until()
            .map(|at| self.clock.instant(at).into_std())
    }

    /// Writes and flushes the cells.
    async fn persist(&mut self, cells: Cells) -> Result<(), NodeError> {
        let storage = Arc::clone(&self.storage);
        let started = Instant::now();
        tokio::task::spawn_blocking(move || storage.save(&cells))
            .await
            .map_err(|e| NodeError::Join(e.to_string()))??;
        self.metrics.observe_persist(started.elapsed());
        self.event_log.append(Record::Persisted(cells));
        self.status.send_modify(|s| s.apply_cells(cells));
        Ok(())
    }
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
