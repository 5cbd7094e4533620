//! The Bully state machine.
//!
//! Read it like quinn-proto's `Connection`: inputs go in through [`Machine::handle`]
//! (with the caller's `now`), outputs come out through [`Machine::poll_action`], and
//! [`Machine::next_deadline`] says when to call `handle(Event::Tick, now)` next.
//!
//! The caller MUST run the actions in the order they are polled, and MUST finish a
//! [`Action::Persist`] (written and flushed) before running the next action: the
//! actions after it may reveal the epoch it stores (invariant I3).
//!
//! Rules, each covered by a unit test of the same name in `tests/protocol_rules.rs`:
//! - start: a (re)started node persists a new incarnation, probes every peer and waits
//!   `max(T, preempt_delay)` as a candidate before it holds an election (I4).
//! - election: send Election to every higher ID and wait T; with no higher ID, declare.
//! - answer_timeout: no Answer within T ⇒ declare at `highest seen term + 1`.
//! - coordinator_timeout: an Answer but no Coordinator within T' ⇒ elect again.
//! - answer_lower: an eligible node answers every Election from a lower ID and, unless
//!   it already runs one, starts its own election (classic Bully); a coordinator instead
//!   re-sends its epoch, or re-declares if the sender knows a newer term.
//! - accept: a claim (Coordinator or Heartbeat) newer than the accepted epoch from a
//!   node we may follow is persisted, then followed.
//! - bully: a newer claim from a lower ID while we are eligible (preempt = always)
//!   starts an election (or, as coordinator, re-declares above it).
//! - stale_claim: a claim older than our accepted epoch is answered with an Ack that
//!   carries our epoch, so the stale leader learns of it.
//! - newer_news: a coordinator that learns of a newer term or epoch from anyone holds
//!   an election, which re-declares above it unless a higher node is alive.
//! - suspect: a follower with no heartbeat for D, or told its coordinator is down,
//!   elects. Heartbeats are acked so the coordinator hears its followers' terms.
//! - peer_up: a peer that (re)connects gets the probe, Election or epoch it may have
//!   missed while its link was down.
//! - ineligible: a node whose health check fails neither answers nor declares; a
//!   coordinator that becomes ineligible resigns so the others elect at once.

use super::types::*;
use std::collections::VecDeque;

/// Static settings of one node's machine.
#[derive(Debug, Clone)]
pub struct MachineConfig {
    pub id: NodeId,
    /// Every other member of the cluster.
    pub peers: Vec<NodeId>,
    pub timing: Timing,
    pub preempt: Preempt,
    /// Whether the node starts out eligible (health checks may change it later).
    pub eligible: bool,
}

/// An input to the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// An output of the machine, to be run in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// Protocol rules a peer can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    /// Coordinator, Heartbeat or Resign for an epoch whose leader is not the sender.
    ForeignClaim,
    /// Election from a higher ID (Elections only go up).
    ElectionFromHigher,
    /// Answer from a lower ID (Answers only go down).
    AnswerFromLower,
    /// A message from an ID that is not a configured peer.
    UnknownPeer,
}

impl std::fmt::Display for Misbehaviour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Misbehaviour::ForeignClaim => "claimed an epoch led by another node",
            Misbehaviour::ElectionFromHigher => "sent Election to a lower node",
            Misbehaviour::AnswerFromLower => "sent Answer to a higher node",
            Misbehaviour::UnknownPeer => "is not a configured peer",
        })
    }
}

/// Where the node is in the algorithm; each waiting state holds its own deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Just (re)started: probing peers, no election yet.
    Starting {
        until: Millis,
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
    Follower {
        epoch: Epoch,
        suspect_at: Millis,
    },
    Coordinator {
        epoch: Epoch,
        next_heartbeat: Millis,
    },
}

/// One node's Bully state machine. Deterministic: the same events at the same times
/// give the same actions.
#[derive(Debug)]
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
}

impl Machine {
    /// Starts a node from its loaded cells (I4: always as a candidate, whatever it was
    /// before the crash). The first actions persist the new incarnation and probe peers.
    pub fn start(config: MachineConfig, loaded: Cells, now: Millis) -> Machine {
        let wait = config
            .timing
            .answer_timeout_ms
            .max(config.timing.preempt_delay_ms);
        let wait = if config.peers.is_empty() { 0 } else { wait };
        let mut machine = Machine {
            eligible: config.eligible,
            seen: loaded.term,
            cells: loaded,
            state: State::Starting { until: now + wait },
            actions: VecDeque::new(),
            published: None,
            config,
        };
        let mut cells = machine.cells;
        cells.incarnation += 1;
        machine.persist(cells);
        machine.broadcast(Body::Probe);
        machine.publish();
        machine
    }

    /// This node's ID.
    pub fn id(&self) -> NodeId {
        self.config.id
    }

    /// The cells as last persisted (what a crash right now would keep).
    pub fn cells(&self) -> Cells {
        self.cells
    }

    /// The highest term this node has seen, durable or not.
    pub fn seen_term(&self) -> u64 {
        self.seen
    }

    /// The current view.
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

    /// When the caller should deliver the next `Event::Tick`.
    pub fn next_deadline(&self) -> Millis {
        match self.state {
            State::Starting { until }
            | State::Electing { until }
            | State::Awaiting { until }
            | State::Idle { until } => until,
            State::Follower { suspect_at, .. } => suspect_at,
            State::Coordinator { next_heartbeat, .. } => next_heartbeat,
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
            Event::PeerDown(peer) => {
                if matches!(self.state, State::Follower { epoch, .. } if epoch.leader == peer) {
                    self.start_election(now);
                }
            }
            Event::PeerUp(peer) => self.on_peer_up(peer),
            Event::SetEligible(eligible) => self.on_eligibility(eligible, now),
            Event::Message { from, msg } => {
                // Validate before observing: a message we refuse must not raise our term.
                if let Some(what) = self.misbehaviour(from, &msg.body) {
                    self.misbehaved(from, what);
                    return;
                }
                self.observe(msg.term);
                match msg.body {
                    Body::Election { accepted } => self.on_election(from, msg.term, accepted, now),
                    Body::Answer => self.on_answer(now),
                    Body::Coordinator { epoch } => self.on_claim(from, epoch, false, now),
                    Body::Heartbeat { epoch } => self.on_claim(from, epoch, true, now),
                    Body::Ack { accepted } => self.on_ack(msg.term, accepted, now),
                    Body::Probe => self.on_probe(from),
                    Body::Resign { epoch } => self.on_resign(epoch, now),
                }
            }
        }
        self.publish();
    }

    fn on_tick(&mut self, now: Millis) {
        if now < self.next_deadline() {
            return;
        }
        match self.state {
            State::Starting { .. } | State::Awaiting { .. } | State::Idle { .. } => {
                self.start_election(now)
            }
            State::Follower { .. } => self.start_election(now),
            State::Electing { .. } => {
                if self.eligible {
                    self.declare(now);
                } else {
                    self.state = State::Idle {
                        until: now + self.config.timing.coordinator_timeout_ms,
                    };
                }
            }
            State::Coordinator { epoch, .. } => {
                self.broadcast(Body::Heartbeat { epoch });
                self.state = State::Coordinator {
                    epoch,
                    next_heartbeat: now + self.config.timing.heartbeat_ms,
                };
            }
        }
    }

    /// peer_up: repeat the message a (re)connected peer may have missed — our probe
    /// while starting, our Election while electing, our epoch while leading.
    fn on_peer_up(&mut self, peer: NodeId) {
        match self.state {
            State::Starting { .. } => self.send(peer, Body::Probe),
            State::Electing { .. } if peer > self.config.id => self.send(
                peer,
                Body::Election {
                    accepted: self.cells.accepted,
                },
            ),
            State::Coordinator { epoch, .. } => self.send(peer, Body::Heartbeat { epoch }),
            _ => {}
        }
    }

    fn on_eligibility(&mut self, eligible: bool, now: Millis) {
        if eligible == self.eligible {
            return;
        }
        self.eligible = eligible;
        if !eligible {
            if let State::Coordinator { epoch, .. } = self.state {
                self.broadcast(Body::Resign { epoch });
                self.state = State::Idle {
                    until: now + self.config.timing.coordinator_timeout_ms,
                };
            }
            return;
        }
        match self.state {
            State::Idle { .. } => self.start_election(now),
            State::Follower { epoch, .. }
                if epoch.leader < self.config.id && self.config.preempt == Preempt::Always =>
            {
                self.start_election(now)
            }
            _ => {}
        }
    }

    fn on_election(&mut self, from: NodeId, term: u64, accepted: Option<Epoch>, now: Millis) {
        if let Some(a) = accepted {
            self.observe(a.term);
        }
        if !self.eligible {
            return;
        }
        self.send(from, Body::Answer);
        match self.state {
            State::Coordinator { epoch, .. } => {
                if term > epoch.term || accepted > Some(epoch) {
                    self.start_election(now);
                } else {
                    self.send(from, Body::Coordinator { epoch });
                }
            }
            State::Follower { .. } if self.config.preempt == Preempt::Never => {}
            State::Follower { .. } => self.start_election(now),
            _ => {}
        }
    }

    fn on_answer(&mut self, now: Millis) {
        if let State::Electing { .. } = self.state {
            self.state = State::Awaiting {
                until: now + self.config.timing.coordinator_timeout_ms,
            };
        }
    }

    /// Coordinator and Heartbeat: both claim that `epoch` is current.
    fn on_claim(&mut self, from: NodeId, epoch: Epoch, heartbeat: bool, now: Millis) {
        self.observe(epoch.term);
        let accepted = self.cells.accepted;
        if Some(epoch) < accepted {
            // stale_claim: tell the old leader what we follow now.
            self.send(from, Body::Ack { accepted });
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
            if heartbeat {
                self.send(from, Body::Ack { accepted });
            }
            return;
        }
        // A claim newer than anything we accepted.
        if self.may_follow(from) {
            self.accept(epoch, now);
            if heartbeat {
                self.send(
                    from,
                    Body::Ack {
                        accepted: Some(epoch),
                    },
                );
            }
            return;
        }
        // bully: a lower node claims while we are alive, eligible and preempting.
        match self.state {
            State::Coordinator { .. } => self.declare(now),
            State::Starting { .. } | State::Electing { .. } | State::Awaiting { .. } => {}
            State::Follower { .. } | State::Idle { .. } => self.start_election(now),
        }
    }

    fn on_ack(&mut self, term: u64, accepted: Option<Epoch>, now: Millis) {
        if let Some(a) = accepted {
            self.observe(a.term);
        }
        if let State::Coordinator { epoch, .. } = self.state {
            if term > epoch.term || accepted > Some(epoch) {
                // newer_news: someone knows a newer epoch than ours.
                self.start_election(now);
            }
        }
    }

    fn on_probe(&mut self, from: NodeId) {
        match self.state {
            State::Coordinator { epoch, .. } => self.send(from, Body::Heartbeat { epoch }),
            _ => self.send(
                from,
                Body::Ack {
                    accepted: self.cells.accepted,
                },
            ),
        }
    }

    fn on_resign(&mut self, epoch: Epoch, now: Millis) {
        if matches!(self.state, State::Follower { epoch: e, .. } if e == epoch) {
            self.start_election(now);
        }
    }

    /// Whether a claim by `leader` may be followed without a fight.
    fn may_follow(&self, leader: NodeId) -> bool {
        !self.eligible || leader > self.config.id || self.config.preempt == Preempt::Never
    }

    fn start_election(&mut self, now: Millis) {
        let timing = self.config.timing;
        let higher: Vec<NodeId> = self
            .config
            .peers
            .iter()
            .copied()
            .filter(|&p| p > self.config.id)
            .collect();
        let accepted = self.cells.accepted;
        for &peer in &higher {
            self.send(peer, Body::Election { accepted });
        }
        if !self.eligible {
            self.state = State::Idle {
                until: now + timing.coordinator_timeout_ms,
            };
        } else if higher.is_empty() {
            self.declare(now);
        } else {
            self.state = State::Electing {
                until: now + timing.answer_timeout_ms,
            };
        }
    }

    /// Declares victory at one above the highest term seen: persist, then announce.
    fn declare(&mut self, now: Millis) {
        // Fix (found by tests/protocol_rules.rs `misbehaviour_term_overflow`): a peer
        // that sends term u64::MAX made `seen + 1` panic (debug) or wrap to 0, breaking
        // I1/I2 (release). No term is left above it, so refuse to declare and retry
        // after T' like an idle node; only a misbehaving peer can cause this.
        let Some(term) = self.seen.checked_add(1) else {
            self.state = State::Idle {
                until: now + self.config.timing.coordinator_timeout_ms,
            };
            return;
        };
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
        self.seen = epoch.term;
        self.broadcast(Body::Coordinator { epoch });
        self.state = State::Coordinator {
            epoch,
            next_heartbeat: now + self.config.timing.heartbeat_ms,
        };
    }

    /// Accepts a newer epoch: persist first, then follow.
    fn accept(&mut self, epoch: Epoch, now: Millis) {
        debug_assert!(
            Some(epoch) > self.cells.accepted,
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
        self.state = State::Follower {
            epoch,
            suspect_at: now + self.config.timing.suspect_after_ms,
        };
    }

    fn observe(&mut self, term: u64) {
        self.seen = self.seen.max(term);
    }

    fn persist(&mut self, cells: Cells) {
        self.cells = cells;
        self.actions.push_back(Action::Persist(cells));
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
    fn misbehaviour(&self, from: NodeId, body: &Body) -> Option<Misbehaviour> {
        if !self.config.peers.contains(&from) {
            return Some(Misbehaviour::UnknownPeer);
        }
        match *body {
            Body::Election { .. } if from > self.config.id => {
                Some(Misbehaviour::ElectionFromHigher)
            }
            Body::Answer if from < self.config.id => Some(Misbehaviour::AnswerFromLower),
            Body::Coordinator { epoch } | Body::Heartbeat { epoch } | Body::Resign { epoch }
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
