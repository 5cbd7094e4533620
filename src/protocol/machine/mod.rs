//! The Bully state machine, in both modes.
//!
//! Read it like quinn-proto's `Connection`: inputs go in through [`Machine::handle`]
//! (with the caller's `now`), outputs come out through [`Machine::poll_action`], and
//! [`Machine::next_deadline`] says when to call `handle(Event::Tick, now)` next.
//!
//! The caller MUST run the actions in the order they are polled, and MUST finish a
//! [`Action::Persist`] (written and flushed) before running the next action: the
//! actions after it may reveal the epoch it stores (invariant I3).
//!
//! # Where each rule lives
//! Every rule below is tested in `tests/protocol_rules.rs` (both modes) or
//! `tests/quorum_rules.rs` (quorum mode), by a test of its name (defer within `suspect`,
//! term_jump within `misbehaviour_term_overflow`, the store recovery by the
//! `store_recovery_*` tests), and has its text in the module doc of the one file that
//! implements it:
//! - this file: start, and the dispatch of every event;
//! - `reach.rs`: startup_wait, peer_up, and who counts as reachable for election;
//! - `election.rs`: election, defer, answer_timeout, startup_answer,
//!   coordinator_timeout, answer_lower, accept, gave_way, bully, stale_claim, suspect;
//! - `timers.rs`: what each deadline fires, suspect_spares_a_live_leader;
//! - `quorum.rs` (quorum mode, Q1–Q6): prevote, one_per_term, established, lease,
//!   restart_holdoff, deferred_vote, one_vote; its state is `quorum_state.rs`;
//! - `handover.rs`: newer_news, handover (Q7), ineligible, shutdown;
//! - `misbehaviour.rs`: term_jump and the other checks on a peer's messages;
//! - `recovering.rs`: the store recovery of src/protocol/recovery.rs;
//! - `release.rs`: release, a voluntary departure held until the driver released it;
//! - `leader_query.rs`: leader_query, who a member names when a client asks who leads;
//! - `given_up.rs`: given_up, a node a forced recovery left out stands down for good;
//! - `members.rs`: who is a member, who is above this node, what a majority is;
//! - `output.rs`, `state.rs`, `event.rs`, `config.rs`: the machine's parts.
//!
//! # Where the modes part
//! The two modes share the Bully election and differ in a handful of steps. This file
//! alone asks which mode is configured: at start (`quorum_state`, `starting`) and in
//! the `impl` block headed "where the modes part", one method per step that differs
//! (elsewhere a rule may only ask whether the quorum state is there). The rules
//! in the other files call those methods and read the same in both modes; a classic
//! machine carries no quorum state at all (`Machine::quorum` is `None`).
//!
//! # start
//! A (re)started node persists a new incarnation, probes every peer and waits
//! `max(T, preempt_delay)` as a candidate before it holds an election (I4); with
//! preempt never in classic mode at least D, so it hears a live coordinator before it
//! could out-declare it. While that wait has more than T left it answers no Election,
//! so it never holds up a failover. A quorum node that had accepted anything also
//! holds off accepting declarations for D (restart_holdoff, Q5, `quorum.rs`).

mod config;
mod election;
mod estimate;
mod event;
mod given_up;
mod handover;
mod leader_query;
mod members;
mod membership;
mod misbehaviour;
mod output;
mod quorum;
mod quorum_state;
mod reach;
mod recovering;
mod release;
mod state;
mod timers;

pub use config::{Flaw, MachineConfig};
pub use event::{Action, Event};
pub use leader_query::{confirmed, SelfReport};
pub use misbehaviour::{Misbehaviour, MAX_TERM_JUMP};

use crate::protocol::epoch::{Cells, Epoch, Millis, NodeId};
use crate::protocol::lease;
use crate::protocol::membership::{Member, Membership, Seat};
use crate::protocol::message::{Body, Message};
use crate::protocol::mode::{Mode, Preempt};
use crate::protocol::recovery::Recovery;
use crate::protocol::settings::ClusterSettings;
use crate::protocol::timing::Timing;
use crate::protocol::view::{DemotionReason, Fact, Role, View};
use estimate::Estimates;
use membership::MemberState;
use quorum_state::QuorumState;
use state::{Reach, State};
use std::collections::{BTreeMap, VecDeque};

/// One node's Bully state machine. Deterministic: the same events at the same times
/// give the same actions. Clone, Eq and Hash let a model checker store and compare
/// whole machines as parts of its states.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Machine {
    config: MachineConfig,
    /// The durable cells as last persisted.
    cells: Cells,
    /// Highest term seen in any message; volatile, it only ever raises the next
    /// declaration, and declarations persist their own term.
    seen: u64,
    eligible: bool,
    /// Whether the health check (or a step-down) lets this node lead; `eligible` is this
    /// and the node's own entry in the member list (a learner or witness never leads).
    wants_eligible: bool,
    /// The member list this node lives by: stored, or seeded from its config file
    /// (docs/design.md#membership).
    members: Membership,
    /// Other nodes' lists as their messages showed them, and the coordinator's change in
    /// progress (`membership.rs`).
    member_state: MemberState,
    state: State,
    actions: VecDeque<Action>,
    published: Option<View>,
    /// Why the node is about to leave office, for the `Demoted` fact.
    leaving: Option<DemotionReason>,
    /// What only quorum mode keeps (votes, lease, promise, hold-off, deferred and
    /// granted pre-votes, the newest heartbeat heard); `None` in classic mode.
    quorum: Option<QuorumState>,
    /// What we know of each peer's reachability (absent: nothing yet).
    reach: BTreeMap<NodeId, Reach>,
    /// The leader whose heartbeats stopped: unreachable for the election that follows,
    /// until we follow someone or hear from it again.
    suspected: Option<NodeId>,
    /// Started on an empty store: votes and leads nothing until enough peers reported
    /// their terms (src/protocol/recovery.rs).
    recovery: Option<Recovery>,
    /// Follower: the leader sent something other than a heartbeat since its last one (a
    /// restart's Probe, a pre-vote), so it is alive and its silence is no reason to
    /// skip it in the election that follows (`suspect_spares_a_live_leader`).
    leader_heard: bool,
    /// The earliest time this incarnation bullies a live lower coordinator: its start
    /// (or the end of its store recovery) plus `preempt_delay_ms`. A node that followed
    /// that coordinator first (it started ineligible: a health check, the config hello)
    /// waits as long as one that stayed a candidate.
    preempt_from: Millis,
    /// Follower: a lower coordinator is to be bullied at `preempt_from`.
    preempt_pending: bool,
    /// Our estimate and our peers' (`estimate.rs`); empty without an estimate source.
    estimates: Estimates,
    /// An earlier life's D when it was longer than ours and its promises may still
    /// bind (until the restart hold-off ends; 0 otherwise): stored with every write,
    /// so a crash during the hold-off keeps it for the next life.
    carried_promise_ms: Millis,
    /// Until when `carried_promise_ms` may bind besides the restart hold-off: the end of
    /// the last promise made under a D longer than ours (promise_span, `quorum.rs`).
    carried_until: Millis,
    /// The D each peer's newest declaration or heartbeat said its sender leads under
    /// (`Message::promise_ms`): a quorum ack to it promises at least that long
    /// (promise_span, `quorum.rs`), and a follower suspects it no sooner.
    asked: BTreeMap<NodeId, Millis>,
    /// A voluntary departure waiting for the driver's release (`release.rs`).
    releasing: Option<release::Releasing>,
}

impl Machine {
    /// Starts a node from its loaded cells (I4: always as a candidate, whatever it was
    /// before the crash). The first actions persist the new incarnation and probe peers.
    pub fn start(config: MachineConfig, loaded: Cells, now: Millis) -> Machine {
        Machine::start_with(config, loaded, None, now)
    }

    /// [`Machine::start`] with the member list a store held (`None`: seeded from the
    /// config's peers and witnesses, as on a first start).
    pub fn start_with(
        config: MachineConfig,
        loaded: Cells,
        members: Option<Membership>,
        now: Millis,
    ) -> Machine {
        let mut members = members.unwrap_or_else(|| seed_members(&config));
        // A list stored before the settings were part of it: live by the file's until
        // a coordinator writes the next list (docs/design.md#cluster-settings).
        let settings = members
            .settings
            .get_or_insert_with(|| settings_of(&config))
            .clone();
        let config = MachineConfig {
            timing: settings.timing,
            preempt: settings.preempt,
            ..config
        };
        let others = members.others(config.id).len();
        let majority = crate::protocol::membership::majority_of(members.voters().len());
        let other_voters = members.voters().iter().filter(|&&v| v != config.id).count();
        // An empty store may be a lost one: learn the terms it forgot first (from the
        // voters: only their acceptances made a term).
        let empty = loaded.term == 0 && loaded.accepted.is_none();
        // A survivor of a forced recovery learns every other survivor's terms first
        // (quorum mode: classic promises no term to one coordinator, and leads alone).
        let forced = loaded.awaits_survivors
            && config.mode == Mode::Quorum
            && !config.has(Flaw::SurvivorsTrustOwnTerms);
        let recovery = if empty && config.recover_empty_store && other_voters > 0 {
            Some(Recovery::new(other_voters, majority, &config.timing, now))
        } else if forced && other_voters > 0 {
            Some(Recovery::after_forced(other_voters, now))
        } else {
            None
        };
        let recovery = recovery.map(|mut recovery| {
            let voters = members.voters();
            let others = voters.iter().copied().filter(|&v| v != config.id).collect();
            recovery.relist(&others, majority, voters.contains(&config.id));
            recovery
        });
        // given_up (`given_up.rs`): a node a forced recovery gave up never leads again.
        let given_up = loaded.given_up && !config.has(Flaw::IgnoresGivenUp);
        let may_lead = !given_up && members.get(config.id).is_some_and(Member::may_lead);
        let mut machine = Machine {
            eligible: config.eligible && may_lead,
            wants_eligible: config.eligible,
            member_state: MemberState::default(),
            seen: loaded.term,
            cells: loaded,
            state: starting(&config, others, now),
            actions: VecDeque::new(),
            published: None,
            leaving: None,
            quorum: quorum_state(&config, &loaded, now),
            reach: Default::default(),
            suspected: None,
            recovery,
            leader_heard: false,
            preempt_from: preempt_from(&config, others, now),
            preempt_pending: false,
            estimates: Estimates::default(),
            carried_promise_ms: carried_promise(&config, &loaded),
            carried_until: 0,
            asked: BTreeMap::new(),
            releasing: None,
            members,
            config,
        };
        let mut cells = machine.cells;
        cells.incarnation += 1;
        machine.persist(cells);
        if let Some(recovery) = &machine.recovery {
            let (_, needed) = recovery.progress();
            let survivors = !empty;
            machine.fact(Fact::RecoveryStarted { needed, survivors });
        }
        machine.broadcast(Body::Probe);
        machine.publish();
        machine
    }

    /// This node's ID.
    pub fn id(&self) -> NodeId {
        self.config.id
    }

    /// The mode this machine runs.
    pub fn mode(&self) -> Mode {
        self.config.mode
    }

    /// The timing this machine runs on.
    pub fn timing(&self) -> Timing {
        self.config.timing
    }

    /// The cells as last persisted (what a crash right now would keep).
    pub fn cells(&self) -> Cells {
        self.cells
    }

    /// The highest term this node has seen, durable or not.
    pub fn seen_term(&self) -> u64 {
        self.seen
    }

    /// The current view, as last computed from the state. A reader that must not see a
    /// stale coordinator (Q4) uses [`Machine::role_at`] or checks [`Machine::lease_until`].
    pub fn view(&self) -> View {
        let (role, epoch) = match self.state {
            State::Follower { epoch, .. } => (Role::Follower, Some(epoch)),
            State::Coordinator { epoch, .. } => (Role::Coordinator, Some(epoch)),
            _ => (Role::Candidate, None),
        };
        View {
            id: self.config.id,
            role,
            epoch,
            eligible: self.eligible,
            incarnation: self.cells.incarnation,
        }
    }

    /// The role at `now`, read against the lease (Q4): a coordinator whose lease has run
    /// out is not one, even before its next tick demotes it.
    pub fn role_at(&self, now: Millis) -> Role {
        let ends = self.lease_until().filter(|_| !self.flawed_lease());
        lease::role_at(self.view().role, ends, now)
    }

    /// While the node recovers from an empty store: how many peers have reported their
    /// terms, and how many must (src/protocol/recovery.rs). `None` once it may vote.
    pub fn recovery_progress(&self) -> Option<(usize, usize)> {
        self.recovery.as_ref().map(Recovery::progress)
    }

    /// The next action to run, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Feeds one event at time `now`.
    pub fn handle(&mut self, event: Event, now: Millis) {
        self.refresh_estimate(now);
        self.drop_expired_promise(now);
        match event {
            Event::Tick if self.is_inert() => {}
            Event::Tick => self.on_tick(now),
            Event::PeerDown(peer) => self.on_peer_down(peer, now),
            Event::PeerUp(peer) => self.on_peer_up(peer, now),
            Event::SetEligible(eligible) => self.on_eligibility(eligible, now),
            Event::SetEstimate { value, fresh_until } => self.on_estimate(value, fresh_until, now),
            Event::Shutdown => self.on_shutdown(now),
            Event::ChangeMembers(change) => self.on_change(change, now),
            Event::Released { epoch } => self.on_released(epoch, now),
            Event::GivenUp { by } => self.on_given_up(by, now),
            // given_up: a node out of the cluster takes part in nothing.
            Event::Message { .. } if self.is_given_up() => {}
            Event::Message { from, msg } => {
                // A newer list may come from a member we do not know of yet.
                if let Body::Members { list } = msg.body {
                    // term_jump: a list stamped impossibly far above our term would
                    // raise it (and, in office, make us give way) for good.
                    if misbehaviour::stamp_jumps(self.seen, &list) {
                        let what = Misbehaviour::TermJump;
                        self.actions
                            .push_back(Action::Misbehaved { peer: from, what });
                        return;
                    }
                    self.on_members(from, list, now);
                    return self.publish();
                }
                // Validate before observing: a message we refuse must not raise our term.
                let member = self.knows(from);
                let refused =
                    misbehaviour::misbehaviour(&self.config, member, self.seen, from, &msg);
                if let Some(what) = refused {
                    if what == Misbehaviour::UnknownPeer {
                        // removed: a member that missed its removal learns it.
                        self.tell_stranger(from, msg.config, now);
                    }
                    self.actions
                        .push_back(Action::Misbehaved { peer: from, what });
                    return;
                }
                let newly_heard = self.heard_from(from);
                self.note_asked(from, msg.promise_ms);
                self.observe(msg.term);
                self.note_est(from, msg.est, now);
                self.note_list(from, msg.config, now);
                if self.recovery.is_some() && !self.handle_while_recovering(&msg) {
                    return self.publish();
                }
                if let (State::Coordinator { epoch, .. }, Body::Ack { accepted, .. }) =
                    (self.state, &msg.body)
                {
                    if *accepted == Some(epoch) {
                        self.note_follower(from);
                    }
                }
                self.on_message(from, msg, now);
                self.advance_members(now);
                // After the message itself: a heartbeat that brings the last higher peer
                // is followed, not answered with an election.
                if newly_heard {
                    self.on_reach_change(now);
                }
            }
        }
        self.publish();
    }
}

/// Where the modes part: the only place that asks which mode runs.
impl Machine {
    /// A valid message, handed to the rule that handles it in this node's mode.
    fn on_message(&mut self, from: NodeId, msg: Message, now: Millis) {
        match (self.config.mode, msg.body) {
            (_, Body::Election { accepted }) => self.on_election(from, msg.term, accepted, now),
            (_, Body::Answer) => self.on_answer(now),
            // Classic: a declaration and a heartbeat are both a claim to follow.
            (Mode::Classic, Body::Coordinator { epoch }) => self.on_claim(from, epoch, false, now),
            (Mode::Classic, Body::Heartbeat { epoch, .. }) => self.on_claim(from, epoch, true, now),
            // Quorum: a declaration asks for acceptance (Q1), a heartbeat for the lease.
            (Mode::Quorum, Body::Coordinator { epoch }) => self.on_declaration(from, epoch, now),
            (Mode::Quorum, Body::Heartbeat { epoch, round }) => {
                self.on_heartbeat(from, epoch, round, now)
            }
            (Mode::Classic, Body::Ack { accepted, .. }) => {
                self.on_classic_ack(msg.term, accepted, now)
            }
            (Mode::Quorum, Body::Ack { accepted, round }) => {
                self.on_quorum_ack(from, msg.term, accepted, round, now)
            }
            (_, Body::Probe) => self.on_probe(from),
            (_, Body::Resign { epoch }) => {
                // Out of office and out of this election: its estimate speaks no more.
                self.forget_est(from);
                self.on_resign(epoch, now)
            }
            (Mode::Quorum, Body::PreVote { term, heard }) => {
                self.on_prevote(from, term, heard, now);
            }
            (Mode::Quorum, Body::Vote { term }) => self.on_vote(from, term, now),
            // A classic node ignores quorum-only messages (a mixed-mode cluster is a
            // config error the operator sees in the logs of both).
            (Mode::Classic, Body::PreVote { .. } | Body::Vote { .. }) => {}
            (_, Body::TermQuery) => self.answer_term_query(from),
            (_, Body::TermReport) => self.on_term_report(from, msg.term, now),
            // Its term is observed; it vouches for nothing.
            (_, Body::TermUnknown) => {}
            // Handled in `handle` before validation (a list may come from a member we
            // do not know of yet).
            (_, Body::Members { .. }) => {}
        }
    }

    /// No higher node will run (answer_timeout): classic declares at once; quorum asks
    /// for pre-votes first (Q6).
    fn run_for_office(&mut self, now: Millis) {
        match self.config.mode {
            Mode::Classic => self.declare(now),
            Mode::Quorum => self.begin_prevote(now),
        }
    }

    /// Our declaration of `epoch` went out: classic takes office at once; quorum waits
    /// for a majority to accept it (Q2).
    fn after_declaring(&mut self, epoch: Epoch, now: Millis) {
        match self.config.mode {
            Mode::Classic => self.take_office(epoch, now),
            Mode::Quorum => self.collect_acceptances(epoch, now),
        }
    }

    /// Before an election's messages go out: a quorum coordinator leaves office first (it
    /// must win a majority again); a classic one stays in office and re-declares.
    fn before_electing(&mut self, now: Millis) {
        match self.config.mode {
            Mode::Classic => {}
            Mode::Quorum => {
                if matches!(self.state, State::Coordinator { .. }) {
                    let reason = self.leaving.unwrap_or(DemotionReason::NewerEpoch);
                    let next = self.idle_state(now);
                    self.leave_office(reason, next, now);
                }
            }
        }
    }

    /// peer_up for the leader we follow: quorum acks it (its lease runs on our acks);
    /// classic tells it our accepted epoch, as it answers a probe.
    fn greet_leader(&mut self, epoch: Epoch, now: Millis) {
        match self.config.mode {
            Mode::Classic => self.on_probe(epoch.leader),
            Mode::Quorum => self.ack(epoch, 0, now),
        }
    }

    /// answer_lower in office: news of a newer epoch than ours makes us give way
    /// (newer_news); otherwise the sender is reminded of our office, by a Coordinator
    /// (classic) or by a heartbeat of the current lease round (quorum).
    fn answer_election_in_office(
        &mut self,
        from: NodeId,
        term: u64,
        accepted: Option<Epoch>,
        epoch: Epoch,
        now: Millis,
    ) {
        if self.outdates(term, accepted, epoch) {
            return self.newer_news(now);
        }
        match self.config.mode {
            Mode::Classic => self.send(from, Body::Coordinator { epoch }),
            Mode::Quorum => {
                let round = self.current_round();
                self.send(from, Body::Heartbeat { epoch, round })
            }
        }
    }

    /// newer_news: whether a peer's term and accepted epoch show that our office `epoch`
    /// is no longer current. Classic: a higher term, or a higher accepted epoch. Quorum:
    /// only an accepted epoch counts, of a higher term or of our term held by another
    /// declarer.
    fn outdates(&self, term: u64, accepted: Option<Epoch>, epoch: Epoch) -> bool {
        match self.config.mode {
            Mode::Classic => term > epoch.term || accepted > Some(epoch),
            Mode::Quorum => accepted
                .is_some_and(|a| a.term > epoch.term || (a.term == epoch.term && a != epoch)),
        }
    }

    /// ineligible in office: quorum leaves office before its Resign goes out (Q7's
    /// order); classic resigns first.
    fn resign_ineligible(&mut self, epoch: Epoch, next: State, now: Millis) {
        match self.config.mode {
            Mode::Classic => {
                self.broadcast(Body::Resign { epoch });
                self.leave_office(DemotionReason::Ineligible, next, now);
            }
            Mode::Quorum => {
                self.leave_office(DemotionReason::Ineligible, next, now);
                self.broadcast(Body::Resign { epoch });
            }
        }
    }

    /// Store recovery (src/protocol/recovery.rs, rules 4 and 5): whether only a store
    /// that knows what it accepted vouches for its term. Quorum mode: yes, so that two
    /// stores lost in a row do not vouch for each other; a quorum leader needs a
    /// majority of acceptances, so enough stores that know are there whenever one
    /// leads. Classic: no, as before (a classic node leads alone, and nodes still
    /// recovering when it declared would wait for each other for ever; classic mode
    /// promises nothing of terms under faults).
    pub(super) fn only_knowing_stores_vouch(&self) -> bool {
        match self.config.mode {
            Mode::Classic => false,
            Mode::Quorum => !self.config.has(Flaw::EmptyStoreVouches),
        }
    }

    /// newer_news: whether a coordinator re-declares above a newer epoch, staying in
    /// office. Classic does when it preempts and no higher node is reachable; quorum
    /// never does (it needs a majority's pre-votes first).
    fn redeclares_over_newer_news(&self) -> bool {
        match self.config.mode {
            Mode::Classic => self.preempting() && self.reachable_higher().is_empty(),
            Mode::Quorum => false,
        }
    }
}

/// A quorum node's fresh [`QuorumState`]; none for a classic node. restart_holdoff
/// (Q5): promises made in an earlier life were volatile, so a node that had accepted
/// anything accepts no declaration for the D those promises were made under (the
/// stored [`Cells::promise_ms`]; the D it starts with for a store from before that
/// cell). A node that never accepted anything never promised anything, so a fresh
/// cluster starts without waiting.
fn quorum_state(config: &MachineConfig, loaded: &Cells, now: Millis) -> Option<QuorumState> {
    let promised_under = if loaded.promise_ms == 0 || config.has(Flaw::HoldoffByNewD) {
        config.timing.suspect_after_ms
    } else {
        loaded.promise_ms
    };
    let holdoff_until = match loaded.accepted {
        Some(_) => now + promised_under,
        None => now,
    };
    match config.mode {
        Mode::Classic => None,
        Mode::Quorum => Some(QuorumState::new(holdoff_until)),
    }
}

/// The earlier life's D to keep storing while the hold-off lasts: only when it is
/// longer than the D this life runs with (a shorter one binds nothing longer).
fn carried_promise(config: &MachineConfig, loaded: &Cells) -> Millis {
    let ours = config.timing.suspect_after_ms;
    if config.mode == Mode::Quorum && loaded.promise_ms > ours && !config.has(Flaw::HoldoffByNewD) {
        loaded.promise_ms
    } else {
        0
    }
}

/// The start-up state (I4): probing, no election for `max(T, preempt_delay)` (D more with
/// preempt never in classic mode), nor before every higher peer has been up unless the
/// start-up wait gives up first. A node on an empty store enters it again once it has
/// recovered, as if it started then (src/protocol/recovery.rs).
fn starting(config: &MachineConfig, others: usize, now: Millis) -> State {
    let timing = config.timing;
    let mut wait = timing.answer_timeout_ms.max(timing.preempt_delay_ms);
    if config.preempt == Preempt::Never && config.mode == Mode::Classic {
        // A live coordinator heartbeats every peer within D; a node that must not
        // out-declare it listens that long before it may declare (quorum mode needs
        // no wait: the coordinator's followers refuse the upstart).
        wait = wait.max(timing.suspect_after_ms);
    }
    let wait = if others == 0 { 0 } else { wait };
    State::Starting {
        until: now + wait,
        give_up: now + timing.startup_wait_ms().max(wait),
    }
}

/// When a node (re)started at `now` may first bully a live lower coordinator.
fn preempt_from(config: &MachineConfig, others: usize, now: Millis) -> Millis {
    if others == 0 {
        now
    } else {
        now + config.timing.preempt_delay_ms
    }
}

/// The list a node without a stored one starts from: itself and its config's peers
/// (witnesses marked), unconfirmed; the runtime passes the addresses in its own seed.
/// The list a node with no stored list lives by: itself and its config's peers and
/// witnesses, unstamped. Also what `bully recover` starts from on such a store.
pub fn seed_members(config: &MachineConfig) -> Membership {
    let seat = |id: NodeId, witness: bool| Member {
        id,
        seat: if witness { Seat::Witness } else { Seat::Voter },
        learner: false,
        addr: String::new(),
    };
    let mut members = vec![seat(config.id, config.witness)];
    members.extend(
        config
            .peers
            .iter()
            .map(|&p| seat(p, config.witnesses.contains(&p))),
    );
    Membership::seeded(members).with_settings(settings_of(config))
}

/// The cluster settings a config names: what a new cluster's first list carries.
pub fn settings_of(config: &MachineConfig) -> ClusterSettings {
    ClusterSettings::new(config.timing, config.preempt)
}
