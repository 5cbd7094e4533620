//! The Bully election, shared by both modes up to the point where a node runs for
//! office, and classic mode's own handling of claims. Rules of docs/design.md:
//!
//! - election: send Election to every higher eligible-capable ID (witnesses never lead)
//!   that is not known to be unreachable, and wait T; with none, go on at once. A peer
//!   is unreachable once the transport reported it down, or (for the leader a follower
//!   suspects) once its heartbeats stopped for D, until any message or `PeerUp` from it.
//!   If the last reachable higher peer goes down while we wait, go on at once.
//! - defer: a follower that suspects its leader while a higher peer is reachable waits T
//!   for that peer's declaration before electing, so in the common case only the
//!   highest survivor runs and a failover costs O(N) messages.
//! - answer_timeout: no Answer within T ⇒ run for office (classic: declare at `highest
//!   seen term + 1`; quorum: ask for pre-votes first, `quorum.rs`).
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
//! - suspect (with `timers.rs`): a follower with no heartbeat for D, or told its
//!   coordinator is down, elects (after the defer above). Classic heartbeats are acked
//!   only when the follower knows a newer term, so the coordinator hears of it.

use super::state::State;
use super::{Flaw, Machine};
use crate::protocol::epoch::{Cells, Epoch, Millis, NodeId};
use crate::protocol::message::Body;
use crate::protocol::view::{DemotionReason, Fact};

impl Machine {
    /// defer: a follower that lost its leader lets a reachable higher peer run first; the
    /// highest survivor (no reachable higher peer) elects at once.
    pub(super) fn suspect(&mut self, now: Millis) {
        // A ranked node cannot tell who is above it: it elects at once (`estimate.rs`).
        if self.ranked() || self.reachable_higher().is_empty() {
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

    /// No Answer came (or nobody is left who could send one): run for office.
    pub(super) fn conclude_election(&mut self, now: Millis) {
        if !self.eligible {
            self.idle(now);
        } else {
            self.run_for_office(now);
        }
    }

    /// Whether this node, eligible, would start its own election now rather than let a
    /// lower node go ahead: not while a long start-up wait (a preempt delay) is still
    /// running, which would hold the failover up for that long.
    pub(super) fn runs_soon(&self, now: Millis) -> bool {
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

    /// answer_lower: an Election from a lower ID.
    pub(super) fn on_election(
        &mut self,
        from: NodeId,
        term: u64,
        accepted: Option<Epoch>,
        now: Millis,
    ) {
        self.observe_accepted(accepted);
        if !self.eligible || !self.runs_soon(now) {
            return;
        }
        let in_office = matches!(self.state, State::Coordinator { .. });
        if !in_office && !self.above(from) {
            return; // ranked_election: the sender is above us (`estimate.rs`)
        }
        self.send(from, Body::Answer);
        // A follower starts no election of its own: it heard its leader within D, and if
        // that leader is really gone its own suspicion (and the highest survivor's
        // declaration) follows within D while the sender, answered, waits T'. Starting
        // one here is what made the textbook Bully cost O(N^2) messages.
        if let State::Coordinator { epoch, .. } = self.state {
            self.answer_election_in_office(from, term, accepted, epoch, now);
        }
        // Unless we follow a coordinator below us and preempt: the sender bullies our
        // lower coordinator and waits for us to take over, so we do. Without this a
        // cluster whose policy was changed to `always` online, its highest node still
        // following a lower one, left a restarted middle node electing forever (quorum
        // seed 843935 of the 10⁶ run).
        if let State::Follower { epoch, .. } = self.state {
            if self.preempts(epoch.leader) && !self.config.has(Flaw::WaitsOverLowerLeader) {
                self.preempt_lower(now);
            }
        }
    }

    /// An Answer from a higher node: it takes over, so wait for its declaration.
    pub(super) fn on_answer(&mut self, now: Millis) {
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
    pub(super) fn on_claim(&mut self, from: NodeId, epoch: Epoch, heartbeat: bool, now: Millis) {
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
            // Ack only what the leader does not know: a newer term we have seen, or that
            // our member list is not its own (members_spread, learner).
            if heartbeat && (self.seen > epoch.term || self.list_news_for(from)) {
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
                self.leave_office(DemotionReason::NewerEpoch, self.awaiting(now), now);
                self.broadcast(Body::Resign { epoch: old });
            }
            self.accept(epoch, now);
            if heartbeat && (self.seen > epoch.term || self.list_news_for(from)) {
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

    /// Classic mode: an Ack tells a coordinator of a newer term or epoch, if any.
    pub(super) fn on_classic_ack(&mut self, term: u64, accepted: Option<Epoch>, now: Millis) {
        self.observe_accepted(accepted);
        if let State::Coordinator { epoch, .. } = self.state {
            if self.outdates(term, accepted, epoch) {
                self.newer_news(now);
            }
        }
    }

    /// bully: run against a live lower coordinator, but a follower still within its
    /// preempt delay keeps following until `preempt_from` (docs/design.md#preemption).
    pub(super) fn preempt_lower(&mut self, now: Millis) {
        if matches!(self.state, State::Follower { .. }) && now < self.preempt_from {
            self.preempt_pending = true;
        } else {
            self.start_election(now);
        }
    }

    /// election: ask every reachable higher peer, or run for office at once if none is.
    pub(super) fn start_election(&mut self, now: Millis) {
        let timing = self.config.timing;
        let higher = self.reachable_higher();
        let accepted = self.cells.accepted;
        self.before_electing(now);
        for &peer in &higher {
            self.send(peer, Body::Election { accepted });
        }
        if !self.eligible {
            self.idle(now);
            return;
        }
        self.fact(Fact::ElectionStarted);
        if self.ranked() {
            self.fact(Fact::Ranked {
                est: self.own_est(),
            });
        }
        if higher.is_empty() {
            self.run_for_office(now);
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

    /// Declares victory at one above the highest term seen: persist, then announce.
    pub(super) fn declare(&mut self, now: Millis) {
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
    /// Classic mode: coordinator at once. Quorum mode: once a majority accepted (Q2).
    pub(super) fn declare_term(&mut self, term: u64, now: Millis) {
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
            ..self.cells
        });
        self.observe(epoch.term);
        self.fact(Fact::Declared { epoch });
        self.broadcast(Body::Coordinator { epoch });
        self.after_declaring(epoch, now);
    }

    /// Classic mode: the declarer is coordinator as soon as its declaration went out.
    pub(super) fn take_office(&mut self, epoch: Epoch, now: Millis) {
        self.enter(
            State::Coordinator {
                epoch,
                next_heartbeat: now + self.config.timing.heartbeat_ms,
            },
            now,
        );
    }

    /// Accepts a newer epoch: persist first, then follow.
    pub(super) fn accept(&mut self, epoch: Epoch, now: Millis) {
        debug_assert!(
            Some(epoch) > self.cells.accepted || self.config.flaw.is_some(),
            "I1: accepted epoch must rise"
        );
        self.persist(Cells {
            term: self.cells.term.max(epoch.term),
            accepted: Some(epoch),
            ..self.cells
        });
        self.follow(epoch, now);
    }

    /// Follows an epoch that is already durable.
    pub(super) fn follow(&mut self, epoch: Epoch, now: Millis) {
        self.suspected = None;
        self.leader_heard = false;
        self.enter(
            State::Follower {
                epoch,
                suspect_at: now + self.suspect_span(epoch.leader),
            },
            now,
        );
    }

    /// How long a follower waits without hearing `leader` before it suspects it: its
    /// own D, or the longer D the leader said it leads under (a cluster whose members
    /// hold different settings for a while, docs/design.md#cluster-settings: a leader
    /// on a longer D heartbeats less often).
    pub(super) fn suspect_span(&self, leader: NodeId) -> Millis {
        let own = self.config.timing.suspect_after_ms;
        if self.config.has(Flaw::SuspectByOwnD) {
            return own;
        }
        own.max(self.asked.get(&leader).copied().unwrap_or(0))
    }

    /// Waits T' without a coordinator, then elects again.
    pub(super) fn idle(&mut self, now: Millis) {
        self.enter(self.idle_state(now), now);
    }

    /// Idle for T': no coordinator known, elect again at its end.
    pub(super) fn idle_state(&self, now: Millis) -> State {
        State::Idle {
            until: now + self.config.timing.coordinator_timeout_ms,
        }
    }

    /// Waiting T' for the declaration of a node that runs (or was voted for).
    pub(super) fn awaiting(&self, now: Millis) -> State {
        State::Awaiting {
            until: now + self.config.timing.coordinator_timeout_ms,
        }
    }
}
