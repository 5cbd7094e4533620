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
//! Rules shared by both modes, each covered by a unit test of the same name in
//! `tests/protocol_rules.rs`:
//! - start: a (re)started node persists a new incarnation, probes every peer and waits
//!   `max(T, preempt_delay)` as a candidate before it holds an election (I4); with
//!   preempt never in classic mode at least D, so it hears a live coordinator before it
//!   could out-declare it. While that wait has more than T left it answers no Election,
//!   so it never holds up a failover.
//! - startup_wait: it also waits until every higher peer has been up, so nodes started
//!   one by one do not each declare before the next one connects: 3D, or D after the
//!   last higher peer came up if that is later (never past 3D after the probe window);
//!   a running coordinator's claim ends the wait.
//! - election: send Election to every higher eligible-capable ID (witnesses never lead)
//!   that is not known to be unreachable, and wait T; with none, go on at once. A peer
//!   is unreachable once the transport reported it down, or (for the leader a follower
//!   suspects) once its heartbeats stopped for D, until any message or `PeerUp` from it.
//!   If the last reachable higher peer goes down while we wait, go on at once.
//! - defer: a follower that suspects its leader while a higher peer is reachable waits T
//!   for that peer's declaration before electing, so in the common case only the
//!   highest survivor runs and a failover costs O(N) messages.
//! - answer_timeout: no Answer within T ⇒ classic: declare at `highest seen term + 1`;
//!   quorum: ask for pre-votes first.
//! - startup_answer: an election that ends a start-up wait extended for higher peers
//!   waits T' (not T) for an Answer: those peers are starting too and answer late while
//!   they do their own handshakes; each Answer late by more than T made a lower node
//!   declare in a fresh cluster.
//! - coordinator_timeout: an Answer but no Coordinator within T' ⇒ elect again.
//! - answer_lower: an eligible node answers every Election from a lower ID; a
//!   coordinator also re-sends its epoch, or gives way if the sender knows a newer one.
//!   Unlike the textbook Bully, a follower does not start an election of its own: it
//!   heard its leader within D, and if that leader is gone its own suspicion follows.
//! - accept: a claim newer than the accepted epoch from a node we may follow is
//!   persisted, then followed.
//! - gave_way: a classic coordinator that so follows a newer claim resigns its old
//!   epoch, as newer_news does: its followers elect at once and ask it, instead of
//!   suspecting it D later and skipping it as silent.
//! - bully: a newer claim from a lower ID while we are eligible (preempt = always)
//!   starts an election (or, as classic coordinator, re-declares above it).
//! - stale_claim: a claim older than our accepted epoch is answered with an Ack that
//!   carries our epoch, so the stale leader learns of it.
//! - newer_news: a coordinator that learns of a newer epoch gives way: with preempt
//!   always it holds an election (classic: re-declaring above it unless a higher node
//!   is reachable); with preempt never it waits to follow the newer leader. Unless it
//!   re-declares at once, it leaves office and sends Resign first, so that followers
//!   that missed the newer epoch do not take its silence for death.
//! - suspect: a follower with no heartbeat for D, or told its coordinator is down,
//!   elects (after the defer above). Classic heartbeats are acked only when the follower
//!   knows a newer term, so the coordinator hears of it; quorum heartbeats always are.
//! - suspect_spares_a_live_leader: a leader that sent anything but a heartbeat since
//!   its last one (a restart's Probe) is alive, not silent: the follower does not skip
//!   it, so its Election reaches the restarted leader and the two never declare one
//!   term (the soft half of I2).
//! - peer_up: a peer that (re)connects gets the probe, Election, pre-vote, declaration,
//!   epoch or (from anyone else) the Ack a probe would have got, which it may have
//!   missed while its link was down.
//! - term_jump: a message whose term is more than [`MAX_TERM_JUMP`] above ours is
//!   misbehaviour: one forged term near `u64::MAX` would otherwise end all elections.
//! - ineligible: a node whose health check fails neither answers nor declares; a
//!   coordinator that becomes ineligible resigns so the others elect at once.
//! - shutdown: a coordinator that stops cleanly demotes itself, then resigns.
//!
//! Quorum mode adds (README.md, "Modes", Q1–Q7; M members, majority `M/2 + 1`):
//! - prevote (Q6): before persisting a new term a candidate asks every peer; only with a
//!   majority of yes (itself included) does it persist and declare. A node cut off from
//!   the majority therefore never raises the term.
//! - one_per_term (Q1): a declaration is accepted only with a term strictly above the
//!   node's term cell, persisted before the ack, so one term has at most one majority.
//! - established (Q2): a declarer is coordinator only once a majority, itself included,
//!   has persisted its acceptance.
//! - lease (Q3): acking a declaration or heartbeat promises the leader that no other
//!   declaration is accepted for D; the coordinator holds its role only until
//!   `s + D - heartbeat` (see [`super::lease`]) and, when that passes, demotes itself and
//!   stops heartbeating for that term.
//! - restart_holdoff (Q5): a restarted node that had accepted anything accepts no
//!   declaration (its own included) for D after start: its promises were volatile.
//!   Heartbeats of an established coordinator it may follow at once.
//! - handover (Q7): a coordinator asked for a pre-vote by a higher eligible node (preempt
//!   always) that shows it heard one of the coordinator's heartbeats within D demotes
//!   itself, then resigns; followers that deferred their vote for the higher node until
//!   their promise was released vote for it then. A candidate that cannot hear (a
//!   one-way link) shows no such heartbeat and gets a heartbeat instead of the office.
//! - deferred_vote: a pre-vote that arrives while our promise to the old leader still
//!   binds is answered the moment the promise runs out, not dropped, so the highest
//!   survivor, which suspects first, is not held up by followers a moment behind it.
//! - one_vote: a pre-vote granted binds for T': no lower candidate gets our vote for
//!   that term meanwhile. A higher node that is running answers a lower candidate's
//!   pre-vote at once (even while its own votes are blocked) and asks above that
//!   term, and a candidate declares the term it was voted for: two candidates never
//!   declare one term unless something failed (the soft half of I2).

use super::lease::{Lease, Promise};
use super::recovery::Recovery;
use super::types::*;
use std::collections::{BTreeSet, VecDeque};

/// Static settings of one node's machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MachineConfig {
    pub id: NodeId,
    /// Every other member of the cluster.
    pub peers: Vec<NodeId>,
    pub timing: Timing,
    pub preempt: Preempt,
    /// Whether the node starts out eligible (health checks may change it later).
    pub eligible: bool,
    pub mode: Mode,
    /// This node is a witness: it votes and acks, counts for majorities, never leads.
    pub witness: bool,
    /// Peers that are witnesses; they get no Election (they would never answer).
    pub witnesses: Vec<NodeId>,
    /// Whether a node that starts on an empty store learns the terms it may have
    /// forgotten before it votes or leads (src/protocol/recovery.rs). Always on in a
    /// real node; the rule tests of the other rules turn it off to start from empty cells
    /// at t = 0, and the simulator's sabotage [`Flaw::SkipStoreRecovery`] does too.
    pub recover_empty_store: bool,
    /// Deliberately broken behaviour, only so tests can show the checkers catch it.
    pub flaw: Option<Flaw>,
}

impl MachineConfig {
    /// A config with the defaults a node has without a config file's opinions:
    /// default timing, preempt always, eligible, quorum mode, no witnesses.
    pub fn new(id: NodeId, peers: Vec<NodeId>) -> MachineConfig {
        MachineConfig {
            id,
            peers,
            timing: Timing::default(),
            preempt: Preempt::Always,
            eligible: true,
            mode: Mode::Quorum,
            witness: false,
            witnesses: Vec::new(),
            recover_empty_store: true,
            flaw: None,
        }
    }

    /// Members (this node included) needed for a majority.
    pub fn majority(&self) -> usize {
        // floor(M / 2) + 1 with M = peers + 1 members.
        self.peers.len().div_ceil(2) + 1
    }
}

/// A deliberate protocol bug, for the tests that prove a broken machine is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flaw {
    /// Quorum mode: the coordinator keeps its role after its lease ran out, and
    /// followers ignore their lease promises.
    IgnoreLease,
    /// Quorum mode: a declaration at a term equal to the node's term cell is accepted.
    AcceptEqualTerm,
    /// A node that starts on an empty store votes and leads at once, as if it had never
    /// run before: the simulator and model checker build its machine with
    /// `recover_empty_store` off (src/protocol/recovery.rs).
    SkipStoreRecovery,
    /// Quorum mode: a coordinator hands over to any higher candidate that asks, whether
    /// or not its pre-vote shows it hears the coordinator (before one-way links were
    /// considered, a node that could send but not receive was handed office again and
    /// again).
    DeafHandover,
}

/// The furthest a message's term may be above the highest term we have seen. Each
/// election raises the term by one, so no honest peer is anywhere near this; a peer
/// beyond it is refused as misbehaving.
pub const MAX_TERM_JUMP: u64 = 1 << 32;

/// What the transport (or a silent leader) last told us about a peer since this start.
/// A peer we have heard nothing about is in none of these states: it may be alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Reach {
    /// Connected, or it sent us a message.
    Up,
    /// It was up and then its link was lost.
    Lost,
    /// The transport could not reach it yet: it may still be starting.
    Unreached,
}

/// An input to the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A message from an authenticated peer.
    Message { from: NodeId, msg: Message },
    /// Time has passed; the machine fires whatever deadlines are due.
    Tick,
    /// The transport lost its connection to this peer.
    PeerDown(NodeId),
    /// The transport (re)connected to this peer. Messages sent while it was down were
    /// dropped, so the machine repeats what the peer must not miss.
    PeerUp(NodeId),
    /// The health check (or a step-down) changed whether this node may lead.
    SetEligible(bool),
    /// The process is stopping cleanly: a coordinator demotes itself and resigns.
    Shutdown,
}

/// An output of the machine, to be run in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Write these cells in one transaction and flush before the next action.
    Persist(Cells),
    Send {
        to: NodeId,
        msg: Message,
    },
    /// The node's view changed; publish it (clients, hooks, event log).
    ViewChanged(View),
    /// A peer sent something it may not send; the runtime closes its connection.
    Misbehaved {
        peer: NodeId,
        what: Misbehaviour,
    },
    /// Something happened that the runtime, simulator and checker want to know about.
    Fact(Fact),
}

/// Protocol rules a peer can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Misbehaviour {
    /// Coordinator, Heartbeat or Resign for an epoch whose leader is not the sender.
    ForeignClaim,
    /// Election from a higher ID (Elections only go up).
    ElectionFromHigher,
    /// Answer from a lower ID (Answers only go down).
    AnswerFromLower,
    /// A message from an ID that is not a configured peer.
    UnknownPeer,
    /// A term more than [`MAX_TERM_JUMP`] above the highest we have seen.
    TermJump,
}

impl std::fmt::Display for Misbehaviour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Misbehaviour::ForeignClaim => "claimed an epoch led by another node",
            Misbehaviour::ElectionFromHigher => "sent Election to a lower node",
            Misbehaviour::AnswerFromLower => "sent Answer to a higher node",
            Misbehaviour::UnknownPeer => "is not a configured peer",
            Misbehaviour::TermJump => "sent a term impossibly far above ours",
        })
    }
}

/// Where the node is in the algorithm; each waiting state holds its own deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum State {
    /// Just (re)started: probing peers, no election before `until`, nor before every
    /// higher peer has been up unless `give_up` has passed.
    Starting {
        until: Millis,
        give_up: Millis,
    },
    /// Sent Election to the higher IDs; waiting for an Answer.
    Electing {
        until: Millis,
    },
    /// A higher node answered; waiting for its Coordinator message.
    Awaiting {
        until: Millis,
    },
    /// Not eligible (or out of terms) and no coordinator known; asks again at `until`.
    Idle {
        until: Millis,
    },
    /// Quorum: asked every peer whether it would accept a declaration at `term`.
    PreVoting {
        term: u64,
        until: Millis,
    },
    /// Quorum: persisted and announced `epoch`; collecting acceptances until `until`.
    Declaring {
        epoch: Epoch,
        sent_at: Millis,
        until: Millis,
    },
    Follower {
        epoch: Epoch,
        suspect_at: Millis,
    },
    Coordinator {
        epoch: Epoch,
        next_heartbeat: Millis,
    },
}

/// Quorum: a pre-vote we granted (see `Machine::voted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Vote {
    term: u64,
    candidate: NodeId,
    until: Millis,
}

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
    state: State,
    actions: VecDeque<Action>,
    published: Option<View>,
    /// Why the node is about to leave office, for the `Demoted` fact.
    leaving: Option<DemotionReason>,
    /// Quorum: pre-vote grants or acceptances of the running `PreVoting`/`Declaring`.
    votes: BTreeSet<NodeId>,
    /// Quorum: the coordinator's lease (meaningful in `Coordinator` state only).
    lease: Option<Lease>,
    /// Quorum: the promise this node gave its leader by acking it.
    promise: Option<Promise>,
    /// Quorum: no declaration is accepted before this (Q5).
    holdoff_until: Millis,
    /// Quorum: a pre-vote (candidate, term) to grant once the promise is released (Q7)
    /// or runs out.
    deferred: Option<(NodeId, u64, Option<Heard>)>,
    /// Quorum: the last candidate we pre-voted for, at which term, and until when it
    /// has to declare (T'). Meanwhile a lower candidate asking for the same term is not
    /// voted for: two majorities of pre-votes at one term would make two nodes declare
    /// it (the soft half of I2). After T' the vote no longer binds, or a candidate that
    /// died after our vote would block its term for good.
    voted: Option<Vote>,
    /// What we know of each peer's reachability (absent: nothing yet).
    reach: std::collections::BTreeMap<NodeId, Reach>,
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
    /// Quorum: the newest coordinator heartbeat (or declaration, round 0) received,
    /// shown in our pre-votes (see `hears_us`).
    heard: Option<Heard>,
}

impl Machine {
    /// Starts a node from its loaded cells (I4: always as a candidate, whatever it was
    /// before the crash). The first actions persist the new incarnation and probe peers.
    pub fn start(config: MachineConfig, loaded: Cells, now: Millis) -> Machine {
        // Q5: promises made in an earlier life were volatile. A node that never accepted
        // anything never promised anything, so a fresh cluster starts without waiting.
        let holdoff_until = match (config.mode, loaded.accepted) {
            (Mode::Quorum, Some(_)) => now + config.timing.suspect_after_ms,
            _ => now,
        };
        // An empty store may be a lost one: learn the terms it forgot first.
        let empty = loaded.term == 0 && loaded.accepted.is_none();
        let recovery = (empty && config.recover_empty_store && !config.peers.is_empty())
            .then(|| Recovery::new(config.peers.len(), config.majority(), &config.timing, now));
        let mut machine = Machine {
            eligible: config.eligible && !config.witness,
            seen: loaded.term,
            cells: loaded,
            state: starting(&config, now),
            actions: VecDeque::new(),
            published: None,
            leaving: None,
            votes: BTreeSet::new(),
            lease: None,
            promise: None,
            holdoff_until,
            deferred: None,
            voted: None,
            reach: Default::default(),
            suspected: None,
            recovery,
            leader_heard: false,
            preempt_from: preempt_from(&config, now),
            preempt_pending: false,
            heard: None,
            config,
        };
        let mut cells = machine.cells;
        cells.incarnation += 1;
        machine.persist(cells);
        if let Some(recovery) = &machine.recovery {
            let (_, needed) = recovery.progress();
            machine.fact(Fact::RecoveryStarted { needed });
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

    /// Quorum mode: the local time at which the coordinator role ends unless more acks
    /// arrive. `None` when the role does not expire (not coordinator, or classic mode).
    pub fn lease_until(&self) -> Option<Millis> {
        match self.state {
            State::Coordinator { .. } => self.lease.as_ref().map(Lease::until),
            _ => None,
        }
    }

    /// The role at `now`, read against the lease (Q4): a coordinator whose lease has run
    /// out is not one, even before its next tick demotes it.
    pub fn role_at(&self, now: Millis) -> Role {
        let role = self.view().role;
        match self.lease_until() {
            Some(until) if role == Role::Coordinator && now >= until && !self.flawed_lease() => {
                Role::Candidate
            }
            _ => role,
        }
    }

    /// When the caller should deliver the next `Event::Tick`.
    pub fn next_deadline(&self) -> Millis {
        let deadline = self.state_deadline();
        let deadline = match self.deferred_vote_at() {
            Some(at) => deadline.min(at),
            None => deadline,
        };
        match &self.recovery {
            Some(recovery) => deadline.min(recovery.deadline()),
            None => deadline,
        }
    }

    /// While the node recovers from an empty store: how many peers have reported their
    /// terms, and how many must (src/protocol/recovery.rs). `None` once it may vote.
    pub fn recovery_progress(&self) -> Option<(usize, usize)> {
        self.recovery.as_ref().map(Recovery::progress)
    }

    fn state_deadline(&self) -> Millis {
        match self.state {
            // Recovering an empty store: the start-up ends only once it has recovered.
            State::Starting { .. } if self.recovery.is_some() => Millis::MAX,
            State::Starting { until, give_up } => {
                if self.higher_resolved() {
                    until
                } else {
                    until.max(give_up)
                }
            }
            State::Electing { until }
            | State::Awaiting { until }
            | State::Idle { until }
            | State::PreVoting { until, .. }
            | State::Declaring { until, .. } => until,
            State::Follower { suspect_at, .. } if self.preempt_pending => {
                suspect_at.min(self.preempt_from)
            }
            State::Follower { suspect_at, .. } => suspect_at,
            State::Coordinator { next_heartbeat, .. } => match self.lease_until() {
                Some(until) if !self.flawed_lease() => next_heartbeat.min(until),
                _ => next_heartbeat,
            },
        }
    }

    /// The next action to run, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Feeds one event at time `now`.
    pub fn handle(&mut self, event: Event, now: Millis) {
        match event {
            Event::Tick => self.on_tick(now),
            Event::PeerDown(peer) => self.on_peer_down(peer, now),
            Event::PeerUp(peer) => {
                self.reach.insert(peer, Reach::Up);
                self.extend_startup_wait(peer, now);
                self.on_peer_up(peer, now);
                self.on_reach_change(now);
            }
            Event::SetEligible(eligible) => self.on_eligibility(eligible, now),
            Event::Shutdown => self.on_shutdown(now),
            Event::Message { from, msg } => {
                // Validate before observing: a message we refuse must not raise our term.
                if let Some(what) = self.misbehaviour(from, &msg) {
                    self.misbehaved(from, what);
                    return;
                }
                let newly_heard = self.heard_from(from);
                self.observe(msg.term);
                if self.recovery.is_some() && !self.handle_while_recovering(&msg) {
                    return self.publish();
                }
                match msg.body {
                    Body::Election { accepted } => self.on_election(from, msg.term, accepted, now),
                    Body::Answer => self.on_answer(now),
                    Body::Coordinator { epoch } if self.quorum() => {
                        self.note_heard(epoch, 0);
                        self.on_declaration(from, epoch, now)
                    }
                    Body::Heartbeat { epoch, round } if self.quorum() => {
                        self.note_heard(epoch, round);
                        self.on_heartbeat(from, epoch, round, now)
                    }
                    Body::Coordinator { epoch } => self.on_claim(from, epoch, false, now),
                    Body::Heartbeat { epoch, .. } => self.on_claim(from, epoch, true, now),
                    Body::Ack { accepted, round } => {
                        self.on_ack(from, msg.term, accepted, round, now)
                    }
                    Body::Probe => self.on_probe(from),
                    Body::Resign { epoch } => self.on_resign(epoch, now),
                    Body::PreVote { term, heard } if self.quorum() => {
                        self.on_prevote(from, term, heard, now);
                    }
                    Body::Vote { term } if self.quorum() => self.on_vote(from, term, now),
                    // A classic node ignores quorum-only messages (a mixed-mode cluster
                    // is a config error the operator sees in the logs of both).
                    Body::PreVote { .. } | Body::Vote { .. } => {}
                    Body::TermQuery => self.send(from, Body::TermReport),
                    Body::TermReport => self.on_term_report(from, now),
                }
                // After the message itself: a heartbeat that brings the last higher peer
                // is followed, not answered with an election.
                if newly_heard {
                    self.on_reach_change(now);
                }
            }
        }
        self.publish();
    }

    fn quorum(&self) -> bool {
        self.config.mode == Mode::Quorum
    }

    fn flawed_lease(&self) -> bool {
        self.config.flaw == Some(Flaw::IgnoreLease)
    }

    /// Every state change goes through here, so leaving and taking office are reported
    /// as facts exactly once, in order with the other actions.
    fn enter(&mut self, state: State, now: Millis) {
        let old = std::mem::replace(&mut self.state, state);
        let reason = self.leaving.take();
        if let State::Coordinator { epoch, .. } = old {
            if !matches!(state, State::Coordinator { epoch: e, .. } if e == epoch) {
                let office_ended_at = match self.lease.take() {
                    Some(lease) if !self.flawed_lease() => lease.until().min(now),
                    _ => now,
                };
                self.fact(Fact::Demoted {
                    epoch,
                    reason: reason.unwrap_or(DemotionReason::NewerEpoch),
                    office_ended_at,
                });
            }
        }
        if let State::Coordinator { epoch, .. } = state {
            self.suspected = None;
            if !matches!(old, State::Coordinator { epoch: e, .. } if e == epoch) {
                self.fact(Fact::Established { epoch });
            }
        }
    }

    /// Leaves office (if in it) for `reason`, then publishes the new view before anything
    /// else goes out, so a reader never sees the old role after a Resign was sent.
    fn step_down(&mut self, reason: DemotionReason, next: State, now: Millis) {
        self.leaving = Some(reason);
        self.enter(next, now);
        self.publish();
    }

    fn on_tick(&mut self, now: Millis) {
        let timing = self.config.timing;
        if self
            .recovery
            .as_mut()
            .is_some_and(|r| r.query_due(&timing, now))
        {
            self.broadcast(Body::TermQuery);
        }
        // The state's own deadline first: a follower whose promise and suspicion end
        // together suspects (and defers) before it answers the held-back pre-vote.
        let vote_due = self.deferred_vote_at().is_some_and(|at| now >= at);
        if now >= self.state_deadline() {
            self.on_state_deadline(now);
        }
        if vote_due {
            self.release_deferred_vote(now);
        }
    }

    fn on_state_deadline(&mut self, now: Millis) {
        let timing = self.config.timing;
        match self.state {
            State::Starting { .. } | State::Awaiting { .. } | State::Idle { .. } => {
                self.start_election(now)
            }
            State::Follower { epoch, suspect_at } if self.preempt_pending && now < suspect_at => {
                // The preempt delay is over: bully the lower coordinator now.
                self.preempt_pending = false;
                if self.eligible && self.preempts(epoch.leader) {
                    self.start_election(now);
                }
            }
            State::Follower { epoch, .. } => {
                self.preempt_pending = false;
                // No heartbeat for D: the leader is gone or cut off. The transport's
                // notice (silence timeout, 20 D) would come much later.
                // Fix (found by the simulator, seeds 9200061 classic and 9175459 quorum,
                // replayed in tests/simulation.rs): a leader that restarted probes us and
                // then runs its own election without heartbeating; skipped as silent, it
                // got no Election from us, and we declared the same term it did.
                if !self.leader_heard {
                    self.suspected = Some(epoch.leader);
                }
                self.suspect(now)
            }
            State::Electing { .. } => self.conclude_election(now),
            State::PreVoting { .. } => {
                // Q6: no majority said yes; nothing was persisted. Try again after T'.
                self.idle(now);
            }
            State::Declaring { epoch, .. } => {
                // No majority accepted in time: release those that did, try again later.
                self.broadcast(Body::Resign { epoch });
                self.idle(now);
            }
            State::Coordinator { epoch, .. } => {
                let lease_over = self
                    .lease
                    .as_ref()
                    .is_some_and(|l| now >= l.until() && !self.flawed_lease());
                if lease_over {
                    // Q3: stop heartbeating for this term; try to win a new one.
                    self.step_down(DemotionReason::LeaseLost, self.idle_state(now), now);
                    self.start_election(now);
                    return;
                }
                let round = match self.lease.as_mut() {
                    Some(lease) => lease.next_round(now),
                    None => 0,
                };
                self.broadcast(Body::Heartbeat { epoch, round });
                self.enter(
                    State::Coordinator {
                        epoch,
                        next_heartbeat: now + timing.heartbeat_ms,
                    },
                    now,
                );
            }
        }
    }

    /// peer_up: repeat the message a (re)connected peer may have missed.
    fn on_peer_up(&mut self, peer: NodeId, now: Millis) {
        match self.state {
            State::Starting { .. } => self.send(peer, Body::Probe),
            // The leader itself: a heartbeat ack (quorum) keeps its lease running.
            State::Follower { epoch, .. } if epoch.leader == peer && self.quorum() => {
                self.ack(epoch, 0, now)
            }
            State::Electing { .. } if self.higher_peers().contains(&peer) => self.send(
                peer,
                Body::Election {
                    accepted: self.cells.accepted,
                },
            ),
            State::PreVoting { term, .. } => {
                let heard = self.heard;
                self.send(peer, Body::PreVote { term, heard })
            }
            State::Declaring { epoch, .. } => self.send(peer, Body::Coordinator { epoch }),
            // What our reply to its probe said (a coordinator's heartbeat, anyone else's
            // accepted epoch): the dialer may have restarted and its probe's answer was
            // dropped while our link to it was still down.
            _ => self.on_probe(peer),
        }
    }

    /// The transport lost its link to `peer`: a leader we follow is suspected at once,
    /// and an election that only waits for unreachable peers goes on.
    fn on_peer_down(&mut self, peer: NodeId, now: Millis) {
        let down = match self.reach.get(&peer) {
            Some(Reach::Up | Reach::Lost) => Reach::Lost,
            _ => Reach::Unreached,
        };
        self.reach.insert(peer, down);
        if matches!(self.state, State::Follower { epoch, .. } if epoch.leader == peer) {
            self.suspect(now);
        }
        self.on_reach_change(now);
    }

    /// A valid message from `from` proves it alive, whatever the transport said last.
    /// Returns whether that is news (the caller then re-checks its waits).
    fn heard_from(&mut self, from: NodeId) -> bool {
        // A heartbeat clears this again when it is followed (`follow`).
        self.leader_heard |=
            matches!(self.state, State::Follower { epoch, .. } if epoch.leader == from);
        let was_suspected = self.suspected == Some(from);
        if was_suspected {
            self.suspected = None;
        }
        self.reach.insert(from, Reach::Up) != Some(Reach::Up) || was_suspected
    }

    /// Waits that depend on reachability end as soon as they can: the start-up wait once
    /// every higher peer is known, an election once no higher peer is left to answer.
    fn on_reach_change(&mut self, now: Millis) {
        match self.state {
            State::Starting { until, .. }
                if now >= until && self.higher_resolved() && self.recovery.is_none() =>
            {
                self.start_election(now)
            }
            State::Electing { .. } if self.reachable_higher().is_empty() => {
                self.conclude_election(now)
            }
            _ => {}
        }
    }

    /// Whether every higher peer has been up since this start (a peer the transport
    /// merely could not reach yet may be starting too: a fresh cluster waits for it).
    fn higher_resolved(&self) -> bool {
        self.higher_peers()
            .iter()
            .all(|p| matches!(self.reach.get(p), Some(Reach::Up | Reach::Lost)))
    }

    /// Higher peers that could still answer an Election: not known to be down.
    fn reachable_higher(&self) -> Vec<NodeId> {
        let mut higher = self.higher_peers();
        higher.retain(|&p| {
            matches!(self.reach.get(&p), None | Some(Reach::Up)) && self.suspected != Some(p)
        });
        higher
    }

    /// startup_wait: while higher peers keep coming up, the cluster is still starting:
    /// wait up to D after each one for the next, never past 3D after the probe window.
    fn extend_startup_wait(&mut self, peer: NodeId, now: Millis) {
        if let State::Starting { until, give_up } = self.state {
            let timing = self.config.timing;
            let cap = until + timing.startup_wait_ms();
            let later = (now + timing.suspect_after_ms).min(cap);
            if peer > self.config.id && later > give_up && !self.higher_resolved() {
                self.state = State::Starting {
                    until,
                    give_up: later,
                };
            }
        }
    }

    /// A coordinator's claim or heartbeat reached a starting node: the cluster is
    /// running, so a start-up wait for peers that may never come is pointless (a later
    /// higher PeerUp may still extend it, within the cap).
    fn running_cluster_seen(&mut self) {
        if let State::Starting { until, .. } = self.state {
            self.state = State::Starting {
                until,
                give_up: until,
            };
        }
    }

    /// defer: a follower that lost its leader lets a reachable higher peer run first; the
    /// highest survivor (no reachable higher peer) elects at once.
    fn suspect(&mut self, now: Millis) {
        if self.reachable_higher().is_empty() {
            self.start_election(now);
        } else {
            self.enter(
                State::Awaiting {
                    until: now + self.config.timing.answer_timeout_ms,
                },
                now,
            );
        }
    }

    /// No Answer came (or nobody is left who could send one): pre-vote or declare.
    fn conclude_election(&mut self, now: Millis) {
        if !self.eligible {
            self.idle(now);
        } else if self.quorum() {
            self.begin_prevote(now);
        } else {
            self.declare(now);
        }
    }

    /// Quorum: when a pre-vote held back by a promise or the hold-off may be granted.
    fn deferred_vote_at(&self) -> Option<Millis> {
        let (candidate, _, _) = self.deferred?;
        let promised = self
            .promise
            .filter(|p| p.epoch.leader != candidate)
            .map_or(0, |p| p.until);
        Some(promised.max(self.holdoff_until))
    }

    /// Quorum: answers the pre-vote we held back, as if it arrived now.
    fn release_deferred_vote(&mut self, now: Millis) {
        if let Some((candidate, term, heard)) = self.deferred.take() {
            self.on_prevote(candidate, term, heard, now);
        }
    }

    fn on_eligibility(&mut self, eligible: bool, now: Millis) {
        let eligible = eligible && !self.config.witness;
        if eligible == self.eligible {
            return;
        }
        self.eligible = eligible;
        let idle = self.idle_state(now);
        if !eligible {
            match self.state {
                State::Coordinator { epoch, .. } => {
                    if self.quorum() {
                        self.step_down(DemotionReason::Ineligible, idle, now);
                        self.broadcast(Body::Resign { epoch });
                    } else {
                        self.broadcast(Body::Resign { epoch });
                        self.leaving = Some(DemotionReason::Ineligible);
                        self.enter(idle, now);
                    }
                }
                State::Declaring { epoch, .. } => {
                    self.broadcast(Body::Resign { epoch });
                    self.enter(idle, now);
                }
                State::PreVoting { .. } => self.enter(idle, now),
                _ => {}
            }
            return;
        }
        match self.state {
            State::Idle { .. } => self.start_election(now),
            State::Follower { epoch, .. } if self.preempts(epoch.leader) => self.preempt_lower(now),
            _ => {}
        }
    }

    fn on_shutdown(&mut self, now: Millis) {
        let idle = self.idle_state(now);
        match self.state {
            State::Coordinator { epoch, .. } => {
                self.step_down(DemotionReason::Stopped, idle, now);
                self.broadcast(Body::Resign { epoch });
            }
            State::Declaring { epoch, .. } => {
                self.broadcast(Body::Resign { epoch });
                self.enter(idle, now);
            }
            _ => {}
        }
    }

    /// Whether this node, eligible, would start its own election now rather than let a
    /// lower node go ahead: not while a long start-up wait (a preempt delay) is still
    /// running, which would hold the failover up for that long.
    fn runs_soon(&self, now: Millis) -> bool {
        if self.recovery.is_some() {
            return false;
        }
        match self.state {
            State::Starting { until, .. } => {
                until.saturating_sub(now) <= self.config.timing.answer_timeout_ms
            }
            _ => true,
        }
    }

    fn on_election(&mut self, from: NodeId, term: u64, accepted: Option<Epoch>, now: Millis) {
        if let Some(a) = accepted {
            self.observe(a.term);
        }
        if !self.eligible || !self.runs_soon(now) {
            return;
        }
        self.send(from, Body::Answer);
        // A follower starts no election of its own: it heard its leader within D, and if
        // that leader is really gone its own suspicion (and the highest survivor's
        // declaration) follows within D while the sender, answered, waits T'. Starting
        // one here is what made the textbook Bully cost O(N^2) messages.
        if let State::Coordinator { epoch, .. } = self.state {
            let newer = if self.quorum() {
                newer_than(accepted, epoch)
            } else {
                term > epoch.term || accepted > Some(epoch)
            };
            if newer {
                self.newer_news(now);
            } else if self.quorum() {
                let round = self.current_round();
                self.send(from, Body::Heartbeat { epoch, round });
            } else {
                self.send(from, Body::Coordinator { epoch });
            }
        }
    }

    fn on_answer(&mut self, now: Millis) {
        if let State::Electing { .. } | State::PreVoting { .. } = self.state {
            // A live higher node runs now; should it fail, our next election asks the
            // suspected leader too: skipping it pays off in the first election only,
            // and it may be alive and silent towards us (it followed an epoch we never
            // heard of).
            self.suspected = None;
            self.enter(self.awaiting(now), now);
        }
    }

    /// Classic mode: Coordinator and Heartbeat both claim that `epoch` is current.
    fn on_claim(&mut self, from: NodeId, epoch: Epoch, heartbeat: bool, now: Millis) {
        self.observe(epoch.term);
        self.running_cluster_seen();
        let accepted = self.cells.accepted;
        if Some(epoch) < accepted {
            // stale_claim: tell the old leader what we follow now.
            self.send(from, Body::Ack { accepted, round: 0 });
            return;
        }
        if Some(epoch) == accepted {
            match self.state {
                State::Follower { .. } => self.follow(epoch, now),
                // Fix (found by reasoning, reproduced by the simulator scenario
                // `eligible_node_never_settles_under_a_lower_leader` in
                // tests/simulation.rs): Awaiting used to follow an equal claim from
                // anyone. A node that had accepted a lower leader's epoch while
                // ineligible, then became eligible, got an Answer from a higher node that
                // died before declaring, followed the lower leader on its next heartbeat
                // and stayed there forever, eligible and higher (I5). Same test as the
                // other waiting states now.
                State::Starting { .. }
                | State::Electing { .. }
                | State::Awaiting { .. }
                | State::Idle { .. }
                    if self.may_follow(from) =>
                {
                    self.follow(epoch, now)
                }
                _ => return,
            }
            // Ack only what the leader does not know: a newer term we have seen.
            if heartbeat && self.seen > epoch.term {
                self.send(from, Body::Ack { accepted, round: 0 });
            }
            return;
        }
        // A claim newer than anything we accepted.
        if self.may_follow(from) {
            if let State::Coordinator { epoch: old, .. } = self.state {
                // gave_way: out of office, then Resign, then follow, so our followers
                // elect at once (and ask us, who answer) rather than suspect us D later
                // and skip us as silent, which let a follower and this node declare one
                // term (simulator, classic seed 40803703).
                self.step_down(DemotionReason::NewerEpoch, self.awaiting(now), now);
                self.broadcast(Body::Resign { epoch: old });
            }
            self.accept(epoch, now);
            if heartbeat && self.seen > epoch.term {
                self.send(
                    from,
                    Body::Ack {
                        accepted: Some(epoch),
                        round: 0,
                    },
                );
            }
            return;
        }
        // bully: a lower node claims while we are alive, eligible and preempting.
        match self.state {
            State::Coordinator { .. } => self.declare(now),
            State::Follower { .. } | State::Idle { .. } => self.preempt_lower(now),
            _ => {}
        }
    }

    /// Quorum mode: a declaration (Q1, Q3, Q5).
    fn on_declaration(&mut self, from: NodeId, epoch: Epoch, now: Millis) {
        self.observe(epoch.term);
        let accepted = self.cells.accepted;
        if Some(epoch) == accepted {
            // A repeat (sent again on reconnect): ack it again if we follow it.
            let follows = match self.state {
                State::Follower { epoch: e, .. } => e == epoch,
                State::Coordinator { .. } | State::Declaring { .. } => false,
                _ => self.may_follow(from),
            };
            if follows {
                self.follow(epoch, now);
                self.ack(epoch, 0, now);
            }
            return;
        }
        let above = epoch.term > self.cells.term
            || (self.config.flaw == Some(Flaw::AcceptEqualTerm) && epoch.term == self.cells.term);
        if !above {
            // stale_claim / one_per_term: tell the declarer what we hold.
            self.send(from, Body::Ack { accepted, round: 0 });
            return;
        }
        if !self.may_follow(from) {
            // bully: we are higher, eligible and preempting; run ourselves.
            if let State::Follower { .. } | State::Idle { .. } = self.state {
                self.preempt_lower(now);
            }
            return;
        }
        if self.acceptance_blocked_until(from, now).is_some() {
            return; // lease promise (Q3) or restart hold-off (Q5)
        }
        self.leaving = Some(DemotionReason::NewerEpoch);
        self.accept(epoch, now);
        self.ack(epoch, 0, now);
    }

    /// Quorum mode: a heartbeat of an established coordinator.
    fn on_heartbeat(&mut self, from: NodeId, epoch: Epoch, round: u64, now: Millis) {
        self.observe(epoch.term);
        self.running_cluster_seen();
        let accepted = self.cells.accepted;
        if Some(epoch) == accepted {
            let follows = match self.state {
                State::Follower { .. } => true,
                State::Coordinator { .. } | State::Declaring { .. } => false,
                _ => self.may_follow(from),
            };
            if follows {
                self.follow(epoch, now);
                self.ack(epoch, round, now);
            }
            return;
        }
        // Stale only if we accepted something at its term or above. A term cell above the
        // accepted epoch (raised by a store recovery to the highest term reported, which may
        // be a declaration that never won) is no reason to refuse an established
        // coordinator: it holds its lease, so no later term was established (its
        // followers' promises), and following it creates no new holder of any term
        // (simulator seed 524: a recovered node refused the running 2@51 for good).
        let knows_term = accepted.is_some_and(|a| a.term >= epoch.term);
        if knows_term {
            self.send(from, Body::Ack { accepted, round: 0 });
            return;
        }
        // Newer than anything we hold, from a coordinator a majority accepted: following
        // it cannot overlap an older office (that one's lease ended before a majority
        // accepted this one), so promises and the hold-off do not apply.
        if !self.may_follow(from) {
            match self.state {
                State::Coordinator { .. } => self.newer_news(now),
                State::Follower { .. } | State::Idle { .. } => self.preempt_lower(now),
                _ => {}
            }
            return;
        }
        self.leaving = Some(DemotionReason::NewerEpoch);
        self.accept(epoch, now);
        self.ack(epoch, round, now);
    }

    /// Quorum mode: acks the leader of `epoch` and promises it the lease (Q3).
    fn ack(&mut self, epoch: Epoch, round: u64, now: Millis) {
        self.promise = Some(Promise {
            epoch,
            until: now + self.config.timing.suspect_after_ms,
        });
        self.send(
            epoch.leader,
            Body::Ack {
                accepted: Some(epoch),
                round,
            },
        );
    }

    fn on_ack(
        &mut self,
        from: NodeId,
        term: u64,
        accepted: Option<Epoch>,
        round: u64,
        now: Millis,
    ) {
        if let Some(a) = accepted {
            self.observe(a.term);
        }
        if !self.quorum() {
            if let State::Coordinator { epoch, .. } = self.state {
                if term > epoch.term || accepted > Some(epoch) {
                    self.newer_news(now);
                }
            }
            return;
        }
        match self.state {
            State::Declaring { epoch, sent_at, .. } if accepted == Some(epoch) => {
                self.votes.insert(from);
                if self.votes.len() >= self.config.majority() {
                    self.establish(epoch, sent_at, now);
                }
            }
            State::Coordinator { epoch, .. } if accepted == Some(epoch) => {
                if let Some(lease) = self.lease.as_mut() {
                    lease.ack(from, round);
                }
            }
            State::Coordinator { epoch, .. } if newer_than(accepted, epoch) => self.newer_news(now),
            State::PreVoting { term: asked, .. } if accepted.is_some_and(|a| a.term >= asked) => {
                // Asked for a term someone already holds: ask again, above it.
                self.begin_prevote(now)
            }
            _ => {}
        }
    }

    fn on_probe(&mut self, from: NodeId) {
        match self.state {
            State::Coordinator { epoch, .. } => {
                let round = self.current_round();
                self.send(from, Body::Heartbeat { epoch, round })
            }
            _ => self.send(
                from,
                Body::Ack {
                    accepted: self.cells.accepted,
                    round: 0,
                },
            ),
        }
    }

    fn on_resign(&mut self, epoch: Epoch, now: Millis) {
        if self.quorum() && self.promise.is_some_and(|p| p.epoch == epoch) {
            self.promise = None;
            // handover: the vote we held back for the higher node goes out now.
            if let Some((candidate, term, heard)) = self.deferred.take() {
                if self.on_prevote(candidate, term, heard, now) {
                    if !matches!(self.state, State::Coordinator { .. }) {
                        self.enter(self.awaiting(now), now);
                    }
                    return;
                }
            }
        }
        // Read after the release: answering the held-back pre-vote may have started an
        // election already.
        let following = matches!(self.state, State::Follower { epoch: e, .. } if e == epoch);
        if following {
            self.start_election(now);
        }
    }

    /// While recovering an empty store: whether `msg` is handled as usual. Claims,
    /// Elections and pre-votes are not (the node may neither follow, answer nor vote
    /// before it knows which terms it forgot); the terms they name still count as seen.
    fn handle_while_recovering(&mut self, msg: &Message) -> bool {
        match msg.body {
            Body::Coordinator { epoch } | Body::Heartbeat { epoch, .. } => {
                self.observe(epoch.term);
                false
            }
            Body::Election { accepted } => {
                if let Some(a) = accepted {
                    self.observe(a.term);
                }
                false
            }
            Body::PreVote { .. } => false,
            Body::Answer
            | Body::Ack { .. }
            | Body::Probe
            | Body::Resign { .. }
            | Body::Vote { .. }
            | Body::TermQuery
            | Body::TermReport => true,
        }
    }

    /// A peer's answer to our `TermQuery` (its term already observed). Once enough have
    /// answered, the highest term seen becomes the term cell, persisted before the node
    /// votes for anything (src/protocol/recovery.rs).
    fn on_term_report(&mut self, from: NodeId, now: Millis) {
        let Some(recovery) = self.recovery.as_mut() else {
            return;
        };
        if !recovery.report(from) {
            return;
        }
        self.recovery = None;
        let term = self.seen;
        if term > self.cells.term {
            self.persist(Cells { term, ..self.cells });
        }
        self.fact(Fact::Recovered { term });
        // Start again, as if it started now: probe for the coordinator, wait for higher
        // peers, then elect in Bully order (it answered no Election meanwhile).
        self.state = starting(&self.config, now);
        self.preempt_from = preempt_from(&self.config, now);
        self.broadcast(Body::Probe);
    }

    /// Quorum mode: a candidate asks whether we would accept it at `term` (Q6).
    /// Returns whether we voted for it.
    fn on_prevote(&mut self, from: NodeId, term: u64, heard: Option<Heard>, now: Millis) -> bool {
        match self.state {
            State::Coordinator { epoch, .. } => {
                let hands_over = from > self.config.id
                    && self.config.preempt == Preempt::Always
                    && (self.hears_us(epoch, heard)
                        || self.config.flaw == Some(Flaw::DeafHandover));
                if hands_over {
                    // handover (Q7): demote first, then resign, then vote.
                    let next = self.awaiting(now);
                    self.step_down(DemotionReason::Yielded { to: from }, next, now);
                    self.broadcast(Body::Resign { epoch });
                    if term > self.cells.term {
                        return self.grant_vote(from, term, now);
                    }
                } else {
                    let round = self.current_round();
                    self.send(from, Body::Heartbeat { epoch, round });
                }
                return false;
            }
            State::Declaring { .. } => return false,
            _ => {}
        }
        if term <= self.cells.term {
            self.send(
                from,
                Body::Ack {
                    accepted: self.cells.accepted,
                    round: 0,
                },
            );
            return false;
        }
        if self
            .voted
            .is_some_and(|v| v.term == term && v.candidate > from && now < v.until)
        {
            // voted: a higher candidate has our vote for this term already.
            return false;
        }
        let blocked = self.acceptance_blocked_until(from, now).is_some();
        let running = matches!(
            self.state,
            State::Starting { .. } | State::Electing { .. } | State::PreVoting { .. }
        );
        if self.eligible && self.config.id > from && self.runs_soon(now) && (running || !blocked) {
            // Bully order: a higher eligible node runs itself instead of voting. An
            // Answer accepts nothing, so a node that is running already answers even
            // while its promise or restart hold-off blocks votes: held back, the lower
            // candidate would gather a majority of pre-votes for the term we ask for too.
            // And we ask for a term above its: if our Answer comes too late and it
            // declares anyway, our declaration still carries another term (I2).
            self.observe(term);
            self.send(from, Body::Answer);
            match self.state {
                State::Follower { .. } | State::Idle { .. } => self.start_election(now),
                // Asking for the same term at the same moment: ask again, above it.
                State::PreVoting { term: asked, .. } if asked <= term => self.begin_prevote(now),
                _ => {}
            }
            return false;
        }
        if blocked {
            // deferred_vote: asked again when the promise is released or runs out.
            self.deferred = Some((from, term, heard));
            return false;
        }
        self.grant_vote(from, term, now);
        if from > self.config.id {
            if let State::Electing { .. } | State::PreVoting { .. } | State::Idle { .. } =
                self.state
            {
                self.enter(self.awaiting(now), now);
            }
        }
        true
    }

    /// Handover (Q7) goes only to a candidate that hears this coordinator: its pre-vote
    /// shows one of our heartbeats sent within the last D. A node that can send but
    /// not receive never shows one, so it is not handed an office it could not hold
    /// (its votes and acks would never reach it); it stays a follower in effect.
    fn hears_us(&self, epoch: Epoch, heard: Option<Heard>) -> bool {
        let timing = self.config.timing;
        let recent_rounds = timing.suspect_after_ms.div_ceil(timing.heartbeat_ms.max(1));
        heard.is_some_and(|h| {
            h.epoch == epoch && h.round.saturating_add(recent_rounds) >= self.current_round()
        })
    }

    /// Quorum: a coordinator's heartbeat (or its declaration, as round 0) reached us.
    fn note_heard(&mut self, epoch: Epoch, round: u64) {
        let heard = Heard { epoch, round };
        if self.heard < Some(heard) {
            self.heard = Some(heard);
        }
    }

    /// Sends our pre-vote and remembers it (see `voted`). Always true: "we voted".
    fn grant_vote(&mut self, candidate: NodeId, term: u64, now: Millis) -> bool {
        self.send(candidate, Body::Vote { term });
        self.voted = Some(Vote {
            term,
            candidate,
            until: now + self.config.timing.coordinator_timeout_ms,
        });
        true
    }

    fn on_vote(&mut self, from: NodeId, term: u64, now: Millis) {
        if let State::PreVoting { term: asked, .. } = self.state {
            if term == asked {
                self.votes.insert(from);
                if self.votes.len() >= self.config.majority() {
                    // The term the majority voted for, even if a higher one was asked
                    // for meanwhile: that asker counts on our term being below its own.
                    if asked > self.cells.term {
                        self.declare_term(asked, now);
                    } else {
                        self.declare(now);
                    }
                }
            }
        }
    }

    /// Whether a claim by `leader` may be followed without a fight.
    fn may_follow(&self, leader: NodeId) -> bool {
        !self.eligible || leader > self.config.id || self.config.preempt == Preempt::Never
    }

    /// Quorum mode: until when a declaration by `candidate` (this node included) may not
    /// be accepted: a live lease promise to another leader (Q3) or the restart hold-off
    /// (Q5). `None` when it may be accepted now.
    fn acceptance_blocked_until(&self, candidate: NodeId, now: Millis) -> Option<Millis> {
        if self.flawed_lease() {
            return None;
        }
        let mut until = None;
        if now < self.holdoff_until {
            until = Some(self.holdoff_until);
        }
        if let Some(p) = self.promise.filter(|p| p.blocks(candidate, now)) {
            until = Some(until.map_or(p.until, |u: Millis| u.max(p.until)));
        }
        until
    }

    fn current_round(&self) -> u64 {
        self.lease.as_ref().map_or(0, Lease::round)
    }

    /// Higher IDs that could lead (witnesses never answer an Election).
    fn higher_peers(&self) -> Vec<NodeId> {
        self.config
            .peers
            .iter()
            .copied()
            .filter(|&p| p > self.config.id && !self.config.witnesses.contains(&p))
            .collect()
    }

    fn newer_news(&mut self, now: Millis) {
        let State::Coordinator { epoch, .. } = self.state else {
            return;
        };
        let preempt = self.config.preempt != Preempt::Never;
        if preempt && !self.quorum() && self.reachable_higher().is_empty() {
            // Classic and highest reachable: re-declares above it at once, in office
            // throughout; the declaration tells every follower.
            self.leaving = Some(DemotionReason::NewerEpoch);
            self.start_election(now);
            return;
        }
        let next = if self.config.preempt == Preempt::Never {
            // Follow the newer leader when it heartbeats; elect only if it does not.
            self.awaiting(now)
        } else {
            self.idle_state(now)
        };
        self.step_down(DemotionReason::NewerEpoch, next, now);
        // Out of office first (Q7's order), then say so: our followers may not have
        // heard the newer epoch (a lost declaration) and would take our silence for
        // death, skipping us, alive, in their next election (a twin declaration).
        self.broadcast(Body::Resign { epoch });
        if preempt {
            self.start_election(now);
        }
    }

    /// Whether a live coordinator `leader` is one this node bullies (eligibility aside).
    fn preempts(&self, leader: NodeId) -> bool {
        leader < self.config.id && self.config.preempt == Preempt::Always
    }

    /// bully: run against a live lower coordinator, but a follower still within its
    /// preempt delay keeps following until `preempt_from` (README "Preemption").
    fn preempt_lower(&mut self, now: Millis) {
        if matches!(self.state, State::Follower { .. }) && now < self.preempt_from {
            self.preempt_pending = true;
        } else {
            self.start_election(now);
        }
    }

    fn start_election(&mut self, now: Millis) {
        let timing = self.config.timing;
        let higher = self.reachable_higher();
        let accepted = self.cells.accepted;
        if matches!(self.state, State::Coordinator { .. }) && self.quorum() {
            // Leave office before anything goes out.
            let reason = self.leaving.unwrap_or(DemotionReason::NewerEpoch);
            let next = self.idle_state(now);
            self.step_down(reason, next, now);
        }
        for &peer in &higher {
            self.send(peer, Body::Election { accepted });
        }
        if !self.eligible {
            self.idle(now);
            return;
        }
        self.fact(Fact::ElectionStarted);
        if higher.is_empty() {
            if self.quorum() {
                self.begin_prevote(now);
            } else {
                self.declare(now);
            }
        } else {
            // startup_answer: the higher peers we waited for are starting too, busy with
            // their own dozens of handshakes; an Answer late by more than T made lower
            // nodes declare.
            let waited_for_peers =
                matches!(self.state, State::Starting { until, .. } if now > until);
            let wait = if waited_for_peers {
                timing.answer_timeout_ms.max(timing.coordinator_timeout_ms)
            } else {
                timing.answer_timeout_ms
            };
            self.enter(State::Electing { until: now + wait }, now);
        }
    }

    /// Quorum mode: ask every peer before raising the term (Q6).
    fn begin_prevote(&mut self, now: Millis) {
        if let Some(until) = self.acceptance_blocked_until(self.config.id, now) {
            // Our own vote is promised elsewhere (or we just restarted): wait it out,
            // still open to an Answer from a higher node.
            self.enter(State::Electing { until }, now);
            return;
        }
        let Some(term) = self.seen.checked_add(1) else {
            self.idle(now);
            return;
        };
        self.votes.clear();
        self.votes.insert(self.config.id);
        if self.votes.len() >= self.config.majority() {
            self.declare(now);
            return;
        }
        self.broadcast(Body::PreVote {
            term,
            heard: self.heard,
        });
        // T' rather than T: votes need a full round trip, and the window only matters
        // when no majority answers.
        self.enter(
            State::PreVoting {
                term,
                until: now + self.config.timing.coordinator_timeout_ms,
            },
            now,
        );
    }

    /// Declares victory at one above the highest term seen: persist, then announce.
    /// Classic mode: coordinator at once. Quorum mode: once a majority accepted (Q2).
    fn declare(&mut self, now: Millis) {
        // Fix (found by tests/protocol_rules.rs `misbehaviour_term_overflow`): a peer
        // that sends term u64::MAX made `seen + 1` panic (debug) or wrap to 0, breaking
        // I1/I2 (release). No term is left above it, so refuse to declare and retry
        // after T' like an idle node; only a misbehaving peer can cause this.
        match self.seen.checked_add(1) {
            Some(term) if self.recovery.is_none() => self.declare_term(term, now),
            // Out of terms, or an empty store that has not yet heard which terms it forgot.
            _ => self.idle(now),
        }
    }

    /// Declares victory at `term` (above our term cell): persist, then announce.
    fn declare_term(&mut self, term: u64, now: Millis) {
        let epoch = Epoch {
            term,
            leader: self.config.id,
        };
        debug_assert!(
            Some(epoch) > self.cells.accepted,
            "I1: declared epoch must rise"
        );
        self.persist(Cells {
            term: epoch.term,
            accepted: Some(epoch),
            incarnation: self.cells.incarnation,
        });
        self.observe(epoch.term);
        self.fact(Fact::Declared { epoch });
        self.broadcast(Body::Coordinator { epoch });
        if !self.quorum() {
            self.enter(
                State::Coordinator {
                    epoch,
                    next_heartbeat: now + self.config.timing.heartbeat_ms,
                },
                now,
            );
            return;
        }
        self.promise = None;
        self.deferred = None;
        self.votes.clear();
        self.votes.insert(self.config.id);
        if self.votes.len() >= self.config.majority() {
            self.establish(epoch, now, now);
            return;
        }
        self.enter(
            State::Declaring {
                epoch,
                sent_at: now,
                until: now + self.config.timing.coordinator_timeout_ms,
            },
            now,
        );
    }

    /// Quorum mode: a majority accepted `epoch`, declared at `sent_at` (Q2).
    fn establish(&mut self, epoch: Epoch, sent_at: Millis, now: Millis) {
        let timing = self.config.timing;
        let span = super::lease::lease_span_ms(&timing);
        let voters = self.votes.iter().copied().filter(|&v| v != self.config.id);
        let lease = Lease::new(self.config.majority(), span, sent_at, voters);
        if lease.until() <= now {
            // The acks came too late to hold any lease: release them, try again.
            self.broadcast(Body::Resign { epoch });
            self.idle(now);
            return;
        }
        self.lease = Some(lease);
        self.enter(
            State::Coordinator {
                epoch,
                next_heartbeat: (sent_at + timing.heartbeat_ms).max(now + 1),
            },
            now,
        );
    }

    /// Accepts a newer epoch: persist first, then follow.
    fn accept(&mut self, epoch: Epoch, now: Millis) {
        debug_assert!(
            Some(epoch) > self.cells.accepted || self.config.flaw.is_some(),
            "I1: accepted epoch must rise"
        );
        self.persist(Cells {
            term: self.cells.term.max(epoch.term),
            accepted: Some(epoch),
            incarnation: self.cells.incarnation,
        });
        self.follow(epoch, now);
    }

    /// Follows an epoch that is already durable.
    fn follow(&mut self, epoch: Epoch, now: Millis) {
        self.suspected = None;
        self.leader_heard = false;
        self.enter(
            State::Follower {
                epoch,
                suspect_at: now + self.config.timing.suspect_after_ms,
            },
            now,
        );
    }

    /// Waits T' without a coordinator, then elects again.
    fn idle(&mut self, now: Millis) {
        self.enter(self.idle_state(now), now);
    }

    /// Idle for T': no coordinator known, elect again at its end.
    fn idle_state(&self, now: Millis) -> State {
        State::Idle {
            until: now + self.config.timing.coordinator_timeout_ms,
        }
    }

    /// Waiting T' for the declaration of a node that runs (or was voted for).
    fn awaiting(&self, now: Millis) -> State {
        State::Awaiting {
            until: now + self.config.timing.coordinator_timeout_ms,
        }
    }

    fn observe(&mut self, term: u64) {
        self.seen = self.seen.max(term);
    }

    fn persist(&mut self, cells: Cells) {
        self.cells = cells;
        self.actions.push_back(Action::Persist(cells));
    }

    fn fact(&mut self, fact: Fact) {
        self.actions.push_back(Action::Fact(fact));
    }

    fn send(&mut self, to: NodeId, body: Body) {
        let msg = Message {
            term: self.seen,
            body,
        };
        self.actions.push_back(Action::Send { to, msg });
    }

    fn broadcast(&mut self, body: Body) {
        for i in 0..self.config.peers.len() {
            let peer = self.config.peers[i];
            self.send(peer, body);
        }
    }

    /// The protocol rule `body` from `from` breaks, if any: unknown senders, Elections
    /// going down, Answers going up, claims for an epoch led by someone else.
    fn misbehaviour(&self, from: NodeId, msg: &Message) -> Option<Misbehaviour> {
        if !self.config.peers.contains(&from) {
            return Some(Misbehaviour::UnknownPeer);
        }
        let ceiling = self.seen.saturating_add(MAX_TERM_JUMP);
        if msg.term > ceiling || message_epoch_term(&msg.body).is_some_and(|t| t > ceiling) {
            return Some(Misbehaviour::TermJump);
        }
        match msg.body {
            Body::Election { .. } if from > self.config.id => {
                Some(Misbehaviour::ElectionFromHigher)
            }
            Body::Answer if from < self.config.id => Some(Misbehaviour::AnswerFromLower),
            Body::Coordinator { epoch }
            | Body::Heartbeat { epoch, .. }
            | Body::Resign { epoch }
                if epoch.leader != from =>
            {
                Some(Misbehaviour::ForeignClaim)
            }
            _ => None,
        }
    }

    fn misbehaved(&mut self, peer: NodeId, what: Misbehaviour) {
        self.actions.push_back(Action::Misbehaved { peer, what });
    }

    fn publish(&mut self) {
        let view = self.view();
        if self.published != Some(view) {
            self.published = Some(view);
            self.actions.push_back(Action::ViewChanged(view));
        }
    }
}

/// The start-up state (I4): probing, no election for `max(T, preempt_delay)` (D more with
/// preempt never in classic mode), nor before every higher peer has been up unless the
/// start-up wait gives up first. A node on an empty store enters it again once it has
/// recovered, as if it started then (src/protocol/recovery.rs).
fn starting(config: &MachineConfig, now: Millis) -> State {
    let timing = config.timing;
    let mut wait = timing.answer_timeout_ms.max(timing.preempt_delay_ms);
    if config.preempt == Preempt::Never && config.mode == Mode::Classic {
        // A live coordinator heartbeats every peer within D; a node that must not
        // out-declare it listens that long before it may declare (quorum mode needs
        // no wait: the coordinator's followers refuse the upstart).
        wait = wait.max(timing.suspect_after_ms);
    }
    let wait = if config.peers.is_empty() { 0 } else { wait };
    State::Starting {
        until: now + wait,
        give_up: now + timing.startup_wait_ms().max(wait),
    }
}

/// When a node (re)started at `now` may first bully a live lower coordinator.
fn preempt_from(config: &MachineConfig, now: Millis) -> Millis {
    if config.peers.is_empty() {
        now
    } else {
        now + config.timing.preempt_delay_ms
    }
}

/// Quorum mode: whether `accepted` (someone's accepted epoch) shows that `ours` is no
/// longer current: a higher term, or the same term held by another declarer.
fn newer_than(accepted: Option<Epoch>, ours: Epoch) -> bool {
    accepted.is_some_and(|a| a.term > ours.term || (a.term == ours.term && a != ours))
}

/// The highest term a message body names, besides the sender's own term.
fn message_epoch_term(body: &Body) -> Option<u64> {
    match *body {
        Body::Election { accepted } | Body::Ack { accepted, .. } => accepted.map(|e| e.term),
        Body::Coordinator { epoch } | Body::Heartbeat { epoch, .. } | Body::Resign { epoch } => {
            Some(epoch.term)
        }
        Body::PreVote { term, .. } | Body::Vote { term } => Some(term),
        Body::Answer | Body::Probe | Body::TermQuery | Body::TermReport => None,
    }
}
