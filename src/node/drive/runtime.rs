//! The node runtime: one task owns the state machine, feeds it its [`Inputs`] and runs
//! its actions in order. It is a thin driver; what it carries out is decided elsewhere
//! (the machine, the [`Eligibility`] policy, [`crate::node::policy::readiness`]) and published by the
//! [`Publisher`].
//!
//! Order guarantees:
//! - a Persist is written and flushed before the next action (a send, a published view)
//!   can reveal it (I3);
//! - on a demotion the lease is withdrawn for readers before anything later goes out
//!   (a Resign);
//! - a coordinator leaving office voluntarily (stop, step-down, resign after a failed
//!   `on_elected`, health, handover) is asked by the machine to release its office
//!   first (`Action::AwaitRelease`, src/protocol/machine/release.rs): from then on it
//!   is shown as not leading (readers, keepers, the watchdog device), its `on_demoted`
//!   runs and its keepers stop; once both are done the machine is handed
//!   `Event::Released` and sends its Resign. Meanwhile the runtime goes on handling
//!   inputs, and the machine goes on heartbeating, so its followers' promises hold and
//!   no successor is elected before `on_demoted` has ended, however long it takes (up
//!   to its bound);
//! - the led-epoch watch is updated before hooks fire, so a stale `on_elected` is
//!   killed first;
//! - the `[watchdog]` device is disarmed as soon as the office is released or left, armed
//!   once the actions that made it coordinator have run, and kept alive on every
//!   renewal of its office ([`Watchdog`]); a required device that cannot be armed makes
//!   the node ineligible, and the machine's answer (a Resign) runs at once;
//! - systemd's watchdog is pinged from this loop ([`ServiceWatchdog`]).
//!
//! On stop (asked, or on a fatal error) a coordinator releases its office as above
//! (the runtime keeps handling the transport and the machine's ticks until the release
//! is done) and then resigns; then every node task is stopped through one signal and
//! waited for, and the transport closes.

use super::clock::Clock;
use super::inputs::{Input, Inputs};
use super::journal::Journal;
use super::reload;
use super::services::Services;
use super::watchdog::Watchdog;
use crate::api::HealthState;
use crate::api::Pause;
use crate::boot_clock::BootInstant;
use crate::config::NodeConfig;
use crate::history::Record;
use crate::node::commands::hooks::DemotedHook;
use crate::node::drive::pause_file::PauseFile;
use crate::node::policy::eligibility::{Eligibility, Expired};
use crate::node::policy::member_change::{PendingChange, Progress};
use crate::node::policy::office_grant::{self, Office};
use crate::node::policy::stall;
use crate::node::policy::step_down::Answered;
use crate::node::publish::publisher::Publisher;
use crate::node::serve::api::Api;
use crate::node::serve::keepers::Keepers;
use crate::node::shared::error::{NodeError, ReloadError};
use crate::node::shared::mailbox::{Command, ElectedHookDone, Reply};
use crate::node::shared::tasks::NodeTasks;
use crate::protocol::{
    Action, Body, ConfigId, DemotionReason, Epoch, Event, Fact, Machine, Millis, NodeId, View,
};
use crate::transport::{Transport, TransportEvent};
use crate::wall_clock::wall_ms;
use std::time::Duration;

/// How long a stopping node waits for its tasks (each ends at once on the stop signal;
/// this only bounds a task stuck somewhere it cannot see the signal).
const TASKS_GRACE: Duration = Duration::from_secs(5);

/// The driver: the machine and what it drives.
pub struct Runtime {
    pub machine: Machine,
    pub clock: Clock,
    pub inputs: Inputs,
    /// Storage and event log: persist, then log.
    pub journal: Journal,
    pub transport: Transport,
    /// Health, step-down, handover and hold: whether the node may lead. A step-down's
    /// reply is `None` for a resign after a failed `on_elected` (nobody to answer).
    pub eligibility: Eligibility<Option<Reply>>,
    pub publisher: Publisher,
    /// Health check and HTTP endpoint, replaced by a reload.
    pub services: Services,
    pub api: Api,
    /// The host's keepers (`bully run`): told the office and its deadlines, waited
    /// for before a voluntary Resign.
    pub keepers: Keepers,
    /// What the keepers' deadlines count from in classic mode.
    pub office: OfficeBasis,
    /// The last batch ended the office on a lapsed lease: the health verdict is
    /// distrusted once the batch has run.
    pub lease_lapsed: bool,
    /// The `[watchdog]` device a coordinator keeps armed.
    pub watchdog: Watchdog,
    /// Every task of the node but this one, and the signal that stops them.
    pub tasks: NodeTasks,
    /// The member list the transport and the status were last given, and the peers the
    /// machine kept (a member being removed stays until the change is committed).
    pub applied_members: (ConfigId, std::collections::BTreeSet<NodeId>),
    /// The peers and addresses the transport was last given.
    pub applied_dial: Vec<(NodeId, crate::transport::PeerAddr)>,
    /// The operator's membership change this coordinator carries out, if any.
    pub member_change: Option<PendingChange<Reply>>,
    /// The maintenance pause this node keeps (src/api/pause.rs).
    pub pause: PauseFile,
    /// The epoch whose office is being released (the machine is still in office and
    /// heartbeats; everyone else is told it does not lead).
    pub releasing: Option<Epoch>,
    /// Where a finished release is reported, to come back as [`Input::Released`].
    pub release_done: tokio::sync::mpsc::UnboundedSender<Epoch>,
}

/// Classic mode's basis for the keepers' deadlines, which quorum mode takes from its
/// lease (`src/node/policy/office_grant.rs`), and the last fencing deadline granted.
pub struct OfficeBasis {
    /// When the newest heartbeat or declaration went out to every peer (a broadcast:
    /// a probe's or an Election's one-peer answer restarts no other follower's clock).
    last_round_sent: Option<Millis>,
    /// The fencing deadline of the last grant made while leading: what bounds the
    /// wait for the keepers' release once the office ends.
    fence_by: Option<BootInstant>,
    /// How many peers a broadcast goes to; 0: a one-node cluster, which has no
    /// successor to fence against.
    peers: usize,
    /// In the batch of actions being run: when its first heartbeat or declaration
    /// went out, and to how many peers (a broadcast is sent within one batch).
    batch: Option<(Millis, usize)>,
}

impl OfficeBasis {
    /// Nothing sent yet, with `peers` other members.
    pub fn new(peers: usize) -> OfficeBasis {
        OfficeBasis {
            last_round_sent: None,
            fence_by: None,
            peers,
            batch: None,
        }
    }

    /// A heartbeat or declaration goes out at `now`.
    fn round_message(&mut self, now: Millis) {
        let (_, sent) = self.batch.get_or_insert((now, 0));
        *sent += 1;
    }

    /// The batch is over: if its heartbeats reached every peer it was a round, which
    /// counts from its first send (no later than any follower heard it).
    fn close_batch(&mut self) {
        if let Some((at, sent)) = self.batch.take() {
            if self.peers > 0 && sent >= self.peers {
                self.last_round_sent = Some(at);
            }
        }
    }
}

impl Runtime {
    /// Runs until asked to stop or a fatal (storage) error, then stops the node.
    pub async fn run(mut self) -> Result<(), NodeError> {
        self.journal.log(Record::Started {
            incarnation: self.machine.cells().incarnation,
        });
        if !self.machine.view().eligible {
            self.journal.log(Record::EligibilitySet {
                eligible: false,
                why: self.eligibility.why_not(),
            });
        }
        let result = self.event_loop().await;
        if let Err(e) = &result {
            tracing::error!("node stopping on a fatal error: {e}");
        }
        self.stop().await;
        result
    }

    /// A coordinator that stops (cleanly or on a storage error) demotes itself, runs
    /// on_demoted to its end and then resigns before the process goes, so its database
    /// stops being primary and the others elect at once. Nothing is persisted on this
    /// path. Then every task ends, and the transport closes.
    async fn stop(mut self) {
        self.machine.handle(Event::Shutdown, self.clock.now());
        if let Err(e) = self.run_actions().await {
            tracing::warn!("while stopping: {e}");
        }
        self.finish_release().await;
        self.publisher.finish_hooks().await;
        self.tasks.stop();
        let left = self.tasks.wait(TASKS_GRACE).await;
        if left > 0 {
            tracing::warn!(left, "node tasks still running after {TASKS_GRACE:?}");
        }
        self.transport.shutdown().await;
        self.publisher.metrics().detach_transport();
        tracing::info!(id = self.machine.id(), "node stopped");
    }

    async fn event_loop(&mut self) -> Result<(), NodeError> {
        self.run_actions().await?;
        loop {
            let tick_at = self.clock.instant(self.machine.next_deadline());
            let policy_at = self
                .eligibility
                .next_deadline()
                .map(|at| self.clock.instant(at));
            // A deadline already past (a long hold for on_demoted) is not a stall.
            let due = tick_at.max(BootInstant::now());
            let input = self.inputs.next(policy_at, tick_at).await;
            self.notice_stall(due);
            match input {
                Input::Stop => return Ok(()),
                Input::WatchdogPing => {
                    if let Some(watchdog) = &mut self.inputs.service_watchdog {
                        watchdog.ping();
                    }
                }
                Input::Transport(event) => self.on_transport(event),
                Input::Command(command) => self.on_command(command).await,
                Input::HealthVerdict(verdict) if self.services.current(&verdict) => {
                    if verdict.postgres.is_some() {
                        self.publisher.postgres(verdict.postgres.clone());
                    }
                    // The estimate first: a node made eligible by this verdict runs its
                    // election by (estimate, id) at once, not by ID.
                    if let Some(measured) = verdict.estimate {
                        let value = measured.value;
                        let fresh_until = self.clock.at(measured.fresh_until);
                        let event = Event::SetEstimate { value, fresh_until };
                        self.machine.handle(event, self.clock.now());
                    }
                    let health = HealthState::from_verdict(verdict.healthy);
                    self.eligibility.set_health(health);
                    self.apply_eligibility();
                }
                Input::HealthVerdict(stale) => {
                    tracing::debug!(?stale, "a verdict of a check since restarted; ignored")
                }
                Input::ElectedHook(done) => self.on_elected_hook(done),
                Input::Released(epoch) => self
                    .machine
                    .handle(Event::Released { epoch }, self.clock.now()),
                Input::PolicyDeadline => self.on_policy_deadline(),
                Input::Tick => self.machine.handle(Event::Tick, self.clock.now()),
            }
            self.run_actions().await?;
            self.publisher.estimate(self.machine.estimate());
            if std::mem::take(&mut self.lease_lapsed) {
                self.distrust_health("its lease lapsed (stopped, starved or cut off)");
                self.run_actions().await?;
            }
        }
    }

    /// Before an input is handled: if the runtime woke more than D after the machine's
    /// deadline `due` (`stall::stalled`), the process did not run for that long
    /// (SIGSTOP, a VM pause, swap). Done first, so the input that woke the node (a
    /// queued Election) cannot make it declare on the old verdict.
    fn notice_stall(&mut self, due: BootInstant) {
        let late = BootInstant::now().saturating_duration_since(due);
        if stall::stalled(late, &self.machine.timing()) {
            let why = format!("the node did not run for {} ms", late.as_millis());
            self.distrust_health(&why);
        }
    }

    /// The node was away (`why`: a stall, a lapsed lease) and the world may have
    /// changed under its health verdict (another node may have taken over): with a
    /// health check, it becomes ineligible (health pending) and the check starts
    /// afresh, whose first result decides (`src/node/policy/stall.rs`).
    fn distrust_health(&mut self, why: &str) {
        #[cfg(debug_assertions)]
        if crate::sabotage::ignore_stall() {
            return;
        }
        if !self.services.applied().checks_health() {
            return;
        }
        tracing::warn!(
            "{why}: its health verdict is stale; not eligible until a fresh check passes"
        );
        self.eligibility.set_health(HealthState::Pending);
        self.publisher.health(HealthState::Pending);
        self.apply_eligibility();
        self.services.restart_health();
    }

    fn on_transport(&mut self, event: TransportEvent) {
        let now = self.clock.now();
        match event {
            TransportEvent::Message { from, msg } => {
                self.publisher.metrics().message_received(msg.body.kind());
                // The declaration is the lease's round 0: readers age a view from it too.
                if let Body::Heartbeat { .. } | Body::Coordinator { .. } = msg.body {
                    self.publisher.heartbeat(from);
                }
                self.machine.handle(Event::Message { from, msg }, now)
            }
            TransportEvent::PeerUp(peer) => {
                // Published first: the comparison retries only while the status
                // shows the link up.
                self.publisher.peer(peer, true);
                self.api.sync_pause(peer);
                self.eligibility.on_peer(peer, true, now);
                self.apply_eligibility();
                self.machine.handle(Event::PeerUp(peer), now);
            }
            TransportEvent::PeerDown(peer) => {
                self.publisher.peer(peer, false);
                self.eligibility.on_peer(peer, false, now);
                self.apply_eligibility();
                self.machine.handle(Event::PeerDown(peer), now);
            }
            TransportEvent::PeerConfig { peer, mismatch } => {
                self.eligibility.on_peer_config(peer, mismatch.as_ref());
                self.apply_eligibility();
            }
            TransportEvent::GivenUp { by, reason } => {
                tracing::debug!(by, %reason, "refused as given up");
                self.machine.handle(Event::GivenUp { by }, now);
            }
            TransportEvent::Client(conn) => self.api.serve(conn),
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
                let answer = self.reload(*config).await;
                let _ = reply.send(answer);
            }
            Command::StandAside {
                for_ms,
                target,
                reply,
            } => {
                let now = self.clock.now();
                let status = self.publisher.status().clone();
                let answer = self.eligibility.stand_aside(&status, now, for_ms, target);
                if answer.is_ok() {
                    self.apply_eligibility();
                }
                let _ = reply.send(answer);
            }
            Command::StepDown { for_ms, to, reply } => {
                tracing::info!(for_ms, ?to, "stepping down on request");
                self.step_down(for_ms, to, Some(reply));
            }
            Command::ChangeMembers { change, reply } => {
                tracing::info!(%change, "membership change asked for");
                if self.member_change.is_some() {
                    let _ = reply.send(Err(
                        "another membership change is in progress; one at a time".into(),
                    ));
                    return;
                }
                let now = self.clock.now();
                self.member_change = Some(PendingChange::new(change.clone(), reply, now));
                self.machine.handle(Event::ChangeMembers(change), now);
            }
            Command::SetPause { pause, reply } => {
                let _ = reply.send(self.set_pause(pause).await);
            }
            Command::PauseReconciled { peer } => {
                self.eligibility.pause_reconciled(peer);
                self.apply_eligibility();
            }
            Command::Note(record) => self.journal.log(record),
        }
    }

    /// Keeps a maintenance pause setting that supersedes ours: stored durably, logged,
    /// then acted on (this node may lead only if the pause allows it). No hook runs for
    /// the pause itself; a coordinator it holds back resigns like any ineligible one.
    async fn set_pause(&mut self, pause: Pause) -> Result<String, String> {
        let me = self.machine.view().id;
        let generation = pause.generation;
        match self.pause.keep(pause.clone()).await {
            Ok(true) => {}
            Ok(false) => {
                let kept = self.pause.current().generation;
                return Ok(format!(
                    "node {me} already keeps generation {kept} (asked: {generation})"
                ));
            }
            Err(e) => return Err(format!("node {me} cannot store the pause: {e}")),
        }
        tracing::info!(generation, paused = pause.paused, holder = ?pause.holder, "maintenance pause: {pause}");
        self.journal.log(Record::Maintenance {
            paused: pause.paused,
            generation,
            holder: pause.holder,
        });
        self.eligibility.set_paused(self.pause.holds_back(me));
        self.publisher.pause(&pause);
        self.apply_eligibility();
        // Passed on along every live link: a member the operator's command did not
        // reach learns it from its peers, without waiting for one of its links to come
        // up again (each node passes a generation on once, when it first keeps it).
        for peer in self.publisher.connected_peers() {
            self.api.sync_pause(peer);
        }
        Ok(format!("node {me} keeps generation {generation}: {pause}"))
    }

    /// Applies a re-read config (see [`reload`]).
    async fn reload(&mut self, config: NodeConfig) -> Result<String, ReloadError> {
        let hooks = self.publisher.hooks_mut();
        let result = reload::reload(&mut self.services, config, hooks, &self.transport).await;
        match result {
            Ok(reloaded) => {
                tracing::info!("{}", reloaded.summary);
                self.publisher.set_readiness(reloaded.readiness);
                let http = super::services::http_endpoint(self.services.applied());
                self.publisher.set_http(http);
                self.check_file();
                if reloaded.health_removed {
                    self.eligibility.set_health(HealthState::Unchecked);
                    self.publisher.health(HealthState::Unchecked);
                    self.apply_eligibility();
                }
                Ok(reloaded.summary)
            }
            Err(e) => {
                tracing::error!("reload refused, nothing changed: {e}");
                Err(e)
            }
        }
    }

    /// Becomes ineligible for `for_ms` and waits for another node (`to`, if given) to
    /// take over; a refusal goes to `reply`, or for a resign (no reply) to the log.
    fn step_down(&mut self, for_ms: u64, to: Option<NodeId>, reply: Option<Reply>) {
        let now = self.clock.now();
        let status = self.publisher.status().clone();
        match self.eligibility.step_down(&status, now, for_ms, to, reply) {
            Ok(()) => self.apply_eligibility(),
            Err(Answered {
                reply: None,
                answer: Err(reason),
            }) => tracing::warn!("cannot resign: {reason}; staying coordinator, not ready"),
            Err(refused) => deliver(refused),
        }
    }

    /// An `on_elected` finished: success makes its epoch ready for clients, failure
    /// resigns (unless configured to stay), so a database that could not be promoted
    /// never sits behind a coordinator.
    fn on_elected_hook(&mut self, done: ElectedHookDone) {
        if let Some(for_ms) = self.publisher.elected_hook_done(done) {
            self.step_down(for_ms, None, None);
        }
    }

    /// The policy's deadline: a step-down period ended or a handover timed out.
    fn on_policy_deadline(&mut self) {
        let status = self.publisher.status().clone();
        match self.eligibility.on_deadline(&status) {
            None => {}
            Some(Expired::SteppedDownPeriodOver | Expired::HelloWaitOver) => {
                self.apply_eligibility()
            }
            Some(Expired::HandoverTimedOut(refused)) => {
                self.apply_eligibility();
                deliver(refused);
            }
        }
    }

    /// Tells the machine when the policy's verdict changed, and publishes why.
    fn apply_eligibility(&mut self) {
        let now = self.clock.now();
        let why = self.eligibility.why_not();
        let eligible = why.is_none();
        let health = self.eligibility.health();
        let stepped_down_until = self.eligibility.stepped_down_until();
        if eligible != self.machine.view().eligible {
            let stepped_down = stepped_down_until.is_some();
            tracing::info!(eligible, ?health, stepped_down, "eligibility changed");
            self.journal.log(Record::EligibilitySet { eligible, why });
            self.machine.handle(Event::SetEligible(eligible), now);
        }
        let until = stepped_down_until.map(|at| wall_ms() + at.saturating_sub(now));
        self.publisher.eligibility(health, until);
        self.publisher
            .config_conflict(self.eligibility.config_conflict());
        self.publisher
            .watchdog_unavailable(self.eligibility.watchdog_unavailable());
    }

    /// Runs the machine's actions in order; a Persist completes (flushed, fsynced)
    /// before the next action runs. After a voluntary demotion the actions from the
    /// Resign waits for the release (src/protocol/machine/release.rs).
    async fn run_actions(&mut self) -> Result<(), NodeError> {
        loop {
            self.run_polled_actions().await?;
            self.publish_office();
            if !self.tend_watchdog() {
                return Ok(());
            }
        }
    }

    /// Runs the actions the machine has now, in order (see [`Runtime::run_actions`]).
    async fn run_polled_actions(&mut self) -> Result<(), NodeError> {
        while let Some(action) = self.machine.poll_action() {
            self.run_action(action).await?;
        }
        let in_office = self.machine.view().role == crate::protocol::Role::Coordinator;
        if !in_office {
            self.releasing = None;
        }
        self.office.close_batch();
        self.apply_members();
        self.answer_member_change();
        Ok(())
    }

    /// A stopping node whose office is being released: handles the transport, the
    /// machine's ticks and the release (nothing else) until the machine has left
    /// office, so it heartbeats meanwhile and resigns once released.
    async fn finish_release(&mut self) {
        while self.releasing.is_some() {
            let tick_at = self.clock.instant(self.machine.next_deadline());
            let now = self.clock.now();
            match self.inputs.next_while_stopping(tick_at).await {
                Input::Transport(event) => self.on_transport(event),
                Input::Released(epoch) => self.machine.handle(Event::Released { epoch }, now),
                Input::Tick => self.machine.handle(Event::Tick, now),
                _ => return, // the transport is gone: nobody to resign to
            }
            if let Err(e) = self.run_actions().await {
                tracing::warn!("while stopping: {e}");
                return;
            }
        }
    }

    /// The machine asks to release the office of `epoch` before it leaves it: shown as
    /// not leading from now on (readers, keepers, the watchdog device), `on_demoted`
    /// queued, and the release reported once it and the keepers are done.
    fn begin_release(&mut self, epoch: Epoch) {
        self.releasing = Some(epoch);
        let hook = self.publish(self.shown(self.machine.view()));
        self.publish_office();
        self.tend_watchdog();
        let done = self.release_done.clone();
        #[cfg(debug_assertions)]
        if crate::sabotage::resign_before_on_demoted() {
            let _ = done.send(epoch);
            return;
        }
        let keepers = self.keepers.clone();
        let fence_by = self.office.fence_by;
        self.tasks.spawn(async move {
            let hook = async {
                if let Some(hook) = hook {
                    wait_for_on_demoted(hook).await;
                }
            };
            tokio::join!(hook, wait_for_keepers(&keepers, epoch, fence_by));
            let _ = done.send(epoch);
        });
    }

    /// `view` as others are to see it: while its office is being released, a
    /// coordinator is shown as a candidate.
    fn shown(&self, view: View) -> View {
        let releasing = self.releasing.is_some() && self.releasing == view.epoch;
        if releasing && view.role == crate::protocol::Role::Coordinator {
            View {
                role: crate::protocol::Role::Candidate,
                ..view
            }
        } else {
            view
        }
    }

    /// The member list the machine stored in this batch, applied to what the node runs
    /// by it: after the batch, so the list reaches a member it removes before its
    /// link is dropped (docs/design.md#membership).
    fn apply_members(&mut self) {
        let list = self.machine.members();
        self.publisher
            .members(list, self.machine.members_committed());
        let keep = self.machine.peers_to_keep();
        if (list.id, &keep) == (self.applied_members.0, &self.applied_members.1) {
            return;
        }
        self.check_file();
        let me = self.machine.id();
        self.office.peers = list.others(me).len();
        let listed = super::members::dial_list(list, me, self.services.applied());
        // A member being removed stays dialed until the change is committed.
        let dial = super::members::keep_departing(listed, &self.applied_dial, &keep);
        self.transport.set_config_id(list.id);
        self.transport.set_peers(dial.clone());
        self.applied_dial = dial;
        self.applied_members = (list.id, keep);
    }

    /// Shows in the status what the host's config file says otherwise than the stored
    /// member list (it never counts): after every change of either.
    fn check_file(&self) {
        let differs =
            super::members::file_disagrees(self.machine.members(), self.services.applied());
        self.publisher.file_differs(differs);
    }

    /// Answers the operator's membership change once it is done or failed.
    fn answer_member_change(&mut self) {
        let Some(pending) = &self.member_change else {
            return;
        };
        let leading = self.machine.view().role == crate::protocol::Role::Coordinator;
        let progress = pending.progress(
            self.machine.members(),
            self.machine.members_committed(),
            leading,
            self.clock.now(),
        );
        let answer = match progress {
            Progress::Waiting => return,
            Progress::Done(text) => Ok(text),
            Progress::Failed(text) => Err(text),
        };
        if let Some(pending) = self.member_change.take() {
            let _ = pending.reply.send(answer);
        }
    }

    /// The office as the machine stands now.
    fn office(&self) -> Office {
        Office {
            view: self.shown(self.machine.view()),
            mode: self.machine.mode(),
            timing: self.machine.timing(),
            lease_until: self
                .machine
                .lease_until()
                .filter(|_| self.releasing.is_none()),
            last_round_sent: self.office.last_round_sent,
            has_peers: self.office.peers > 0,
        }
    }

    /// Hands readers the lease and keepers the grant, as the machine stands now.
    fn publish_office(&mut self) {
        self.publisher.lease(self.lease_instant());
        let office = self.office();
        let clock = &self.clock;
        let grant = office_grant::grant(&office, |at| clock.instant(at));
        if grant.epoch.is_some() {
            self.office.fence_by = grant.fence_by();
        }
        self.publisher.grant(grant);
    }

    /// Arms, keeps alive or disarms the watchdog device for the office as it stands;
    /// `true` when a required device could not be armed and that made the node
    /// ineligible (the machine then has actions to run: its Resign).
    fn tend_watchdog(&mut self) -> bool {
        let office = self.office();
        let Some(reason) = self.watchdog.tend(&office, self.clock.now()) else {
            return false;
        };
        let was_eligible = self.eligibility.eligible();
        self.eligibility.set_watchdog_unavailable(Some(reason));
        self.apply_eligibility();
        was_eligible
    }

    /// Runs one action.
    async fn run_action(&mut self, action: Action) -> Result<(), NodeError> {
        match action {
            Action::Persist(cells) => {
                let took = self.journal.persist(cells).await?;
                self.publisher.persisted(cells, took);
            }
            Action::PersistMembers(list) => self.journal.persist_members(list).await?,
            Action::Send { to, msg } => {
                self.publisher.metrics().message_sent(msg.body.kind());
                if let Body::Heartbeat { .. } | Body::Coordinator { .. } = msg.body {
                    self.office.round_message(self.clock.now());
                }
                self.transport.send(to, msg);
            }
            Action::ViewChanged(view) => {
                // A voluntary demotion's on_demoted was queued by begin_release; one a
                // lapse or a newer epoch queues is waited for by nobody.
                let _queued = self.publish(self.shown(view));
            }
            Action::AwaitRelease { epoch } => self.begin_release(epoch),
            Action::Misbehaved { peer, what } => {
                tracing::warn!(peer, "peer {what}; closing its connection");
                self.transport.disconnect(peer, &what.to_string());
            }
            Action::Fact(fact) => self.on_fact(fact),
        }
        Ok(())
    }

    /// Logs what the machine reports. A demotion also ends the lease the readers check
    /// at once, before any later action (a Resign) can go out.
    fn on_fact(&mut self, mut fact: Fact) {
        if let Fact::Demoted {
            office_ended_at, ..
        } = &mut fact
        {
            // The machine has left office: its lease is gone for readers and keepers,
            // and the watchdog is disarmed (leaving office never fails to).
            self.publish_office();
            self.tend_watchdog();
            *office_ended_at = self.clock.wall(*office_ended_at);
        }
        if let Fact::Demoted {
            reason: DemotionReason::LeaseLost,
            ..
        } = fact
        {
            self.lease_lapsed = true;
        }
        if let Fact::ChangeRefused { reason } = fact {
            if let Some(pending) = self.member_change.take() {
                let _ = pending.reply.send(Err(reason.to_string()));
            }
        }
        self.publisher.fact(&fact);
        self.journal.log(Record::Fact(fact));
    }

    /// Publishes a view (its epoch is already durable: the machine persists before it
    /// publishes): event log, then the publisher, then the policy's handover and hold.
    /// Returns the `on_demoted` it queued, if any.
    fn publish(&mut self, view: View) -> Option<DemotedHook> {
        self.journal.log(Record::View(view));
        let demoted_hook = self.publisher.view(view, self.lease_instant());
        if let Some(answered) = self.eligibility.on_view(view, self.clock.now()) {
            deliver(answered);
        }
        demoted_hook
    }

    /// The machine's lease end on the clock readers compare it with
    /// ([`crate::boot_clock`], which counts suspension like the machine's time).
    fn lease_instant(&self) -> Option<crate::boot_clock::BootInstant> {
        let lease = self
            .machine
            .lease_until()
            .filter(|_| self.releasing.is_none());
        lease.map(|at| self.clock.instant(at))
    }
}

/// Waits for a voluntary demotion's `on_demoted` (bounded); says so when it ran over.
async fn wait_for_on_demoted(hook: DemotedHook) {
    let bound = hook.bound();
    let started = std::time::Instant::now();
    if hook.ended().await {
        tracing::info!(took = ?started.elapsed(), "on_demoted ended; resigning");
    } else {
        tracing::warn!(?bound, "on_demoted still not ended; resigning anyway");
    }
}

/// Waits for the host's keepers to stop what they run for `epoch`, at the latest
/// shortly after `fence_by` (the office's last fencing deadline: by then each has
/// SIGKILLed its job); says so when some did not.
async fn wait_for_keepers(keepers: &Keepers, epoch: Epoch, fence_by: Option<BootInstant>) {
    let started = std::time::Instant::now();
    match keepers.released(epoch, fence_by).await {
        0 => tracing::debug!(took = ?started.elapsed(), "keepers released {epoch}"),
        left => tracing::warn!(left, %epoch, "keepers still hold the epoch; resigning anyway"),
    }
}

/// Sends a step-down's answer to whoever asked, if anyone did.
fn deliver(answered: Answered<Option<Reply>>) {
    if let Some(reply) = answered.reply {
        let _ = reply.send(answered.answer);
    }
}

#[cfg(test)]
mod tests {
    use super::OfficeBasis;

    #[test]
    fn only_a_heartbeat_to_every_peer_is_a_round() {
        let mut office = OfficeBasis::new(2);
        // A probe's answer: one peer only.
        office.round_message(100);
        office.close_batch();
        assert_eq!(office.last_round_sent, None);
        // A broadcast, counted from its first send.
        office.round_message(200);
        office.round_message(201);
        office.close_batch();
        assert_eq!(office.last_round_sent, Some(200));
        // A later one-peer answer does not move it.
        office.round_message(250);
        office.close_batch();
        assert_eq!(office.last_round_sent, Some(200));
        let mut alone = OfficeBasis::new(0);
        alone.round_message(5);
        alone.close_batch();
        assert_eq!(alone.last_round_sent, None, "no peers, no rounds");
    }
}
