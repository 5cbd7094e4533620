//! Quorum mode's rules (docs/modes.md; docs/design.md Q1–Q6; M members, majority
//! `M/2 + 1`): pre-votes before a term is raised, acceptance by a majority, the lease a
//! follower's ack promises, and the hold-off after a restart. Its state is
//! [`super::quorum_state::QuorumState`]; the coordinator's handover (Q7) is in
//! `handover.rs`.
//!
//! - prevote (Q6): before persisting a new term a candidate asks every peer; only with a
//!   majority of yes (itself included) does it persist and declare. A node cut off from
//!   the majority therefore never raises the term.
//! - one_per_term (Q1): a declaration is accepted only with a term strictly above the
//!   node's term cell, persisted before the ack, so one term has at most one majority.
//! - established (Q2): a declarer is coordinator only once a majority, itself included,
//!   has persisted its acceptance.
//! - lease (Q3): acking a declaration or heartbeat promises the leader that no other
//!   declaration is accepted for D; the coordinator holds its role only until
//!   `s + D - margin` (src/protocol/lease.rs) and, when that passes, demotes itself and
//!   stops heartbeating for that term (`timers.rs`).
//! - restart_holdoff (Q5): a restarted node that had accepted anything accepts no
//!   declaration (its own included) for D after start: its promises were volatile.
//!   D here is the one its promises were made under, kept in the cells
//!   (`Cells::promise_ms`), not the one it restarts with: a restart that lowers D
//!   must still outlast the longer promises of the life before. Until the hold-off
//!   ends, every write keeps storing that longer D, so a second restart inside it
//!   holds off as long. Heartbeats of an established coordinator it may follow at once.
//! - deferred_vote: a pre-vote that arrives while our promise to the old leader still
//!   binds is answered the moment the promise runs out, not dropped, so the highest
//!   survivor, which suspects first, is not held up by followers a moment behind it.
//! - one_vote: a pre-vote granted binds for T': no lower candidate gets our vote for
//!   that term meanwhile. A higher node that is running answers a lower candidate's
//!   pre-vote at once (even while its own votes are blocked) and asks above that
//!   term, and a candidate declares the term it was voted for: two candidates never
//!   declare one term unless something failed (the soft half of I2).
//! - suspect: quorum heartbeats are always acked (the ack keeps the lease running).

use super::config::Flaw;
use super::quorum_state::QuorumState;
use super::state::State;
use super::Machine;
use crate::protocol::epoch::{Epoch, Millis, NodeId};
use crate::protocol::lease::{Lease, Promise};
use crate::protocol::message::{Body, Heard};
use crate::protocol::settings::ClusterSettings;
use crate::protocol::timing::{lease_span_ms, Timing};
use crate::protocol::view::DemotionReason;

/// Why a quorum rule may expect quorum mode's state.
const QUORUM_ONLY: &str = "quorum rules run in quorum mode only";

impl Machine {
    /// Quorum mode's state, which [`Machine::start`] made for a quorum node. Only quorum
    /// rules ask for it, and only a quorum node runs them: the mode switch of `mod.rs`
    /// calls them, or a state only quorum mode enters (pre-voting, a held-back vote).
    pub(super) fn quorum_state(&self) -> &QuorumState {
        self.quorum.as_ref().expect(QUORUM_ONLY)
    }

    /// [`Machine::quorum_state`], to change.
    fn quorum_state_mut(&mut self) -> &mut QuorumState {
        self.quorum.as_mut().expect(QUORUM_ONLY)
    }

    /// The coordinator's lease (quorum mode only).
    pub(super) fn lease(&self) -> Option<&Lease> {
        self.quorum.as_ref().and_then(|q| q.lease.as_ref())
    }

    /// The newest heartbeat round of our lease; 0 without one (and in classic mode).
    pub(super) fn current_round(&self) -> u64 {
        self.quorum.as_ref().map_or(0, QuorumState::current_round)
    }

    /// When a pre-vote held back by a promise or the hold-off may be granted.
    pub(super) fn deferred_vote_at(&self) -> Option<Millis> {
        self.quorum.as_ref().and_then(QuorumState::deferred_vote_at)
    }

    /// A declaration (Q1, Q3, Q5).
    pub(super) fn on_declaration(&mut self, from: NodeId, epoch: Epoch, now: Millis) {
        self.quorum_state_mut().note_heard(epoch, 0);
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
            || (self.config.has(Flaw::AcceptEqualTerm) && epoch.term == self.cells.term);
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
        if !self.up_to_date(from) {
            return; // up_to_date: its list is older than ours; it got ours
        }
        self.leaving = Some(DemotionReason::NewerEpoch);
        self.accept(epoch, now);
        self.ack(epoch, 0, now);
    }

    /// A heartbeat of an established coordinator.
    pub(super) fn on_heartbeat(&mut self, from: NodeId, epoch: Epoch, round: u64, now: Millis) {
        self.quorum_state_mut().note_heard(epoch, round);
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

    /// Acks the leader of `epoch` and promises it the lease (Q3): for the longer of our
    /// D and the one its messages ask (promise_span), never ending an earlier promise
    /// to it sooner, and stored before the ack goes out when it binds longer than our
    /// store says.
    pub(super) fn ack(&mut self, epoch: Epoch, round: u64, now: Millis) {
        let span = self.promise_span_for(epoch.leader);
        let mut until = now + span;
        if let Some(earlier) = self.quorum_state().promise.filter(|p| p.epoch == epoch) {
            until = until.max(earlier.until);
        }
        self.quorum_state_mut().promise = Some(Promise { epoch, until });
        self.carry_promise(span, until);
        self.send(
            epoch.leader,
            Body::Ack {
                accepted: Some(epoch),
                round,
            },
        );
    }

    /// An Ack: an acceptance of our declaration, a heartbeat ack for our lease, or news
    /// of a term someone else holds.
    pub(super) fn on_quorum_ack(
        &mut self,
        from: NodeId,
        term: u64,
        accepted: Option<Epoch>,
        round: u64,
        now: Millis,
    ) {
        self.observe_accepted(accepted);
        match self.state {
            State::Declaring {
                epoch,
                sent_at,
                asked_ms,
                ..
            } if accepted == Some(epoch) => {
                if !self.counts(from) {
                    return; // a learner's acceptance is no vote
                }
                self.quorum_state_mut().votes.insert(from);
                if self.is_majority(&self.quorum_state().votes) {
                    self.establish(epoch, sent_at, asked_ms, now);
                }
            }
            State::Coordinator { epoch, .. } if accepted == Some(epoch) => {
                if !self.counts(from) {
                    return; // a learner's ack holds no lease
                }
                if let Some(lease) = self.quorum_state_mut().lease.as_mut() {
                    lease.ack(from, round);
                }
            }
            State::Coordinator { epoch, .. } if self.outdates(term, accepted, epoch) => {
                self.newer_news(now)
            }
            State::PreVoting { term: asked, .. } if accepted.is_some_and(|a| a.term >= asked) => {
                // Asked for a term someone already holds: ask again, above it.
                self.begin_prevote(now)
            }
            _ => {}
        }
    }

    /// A candidate asks whether we would accept it at `term` (Q6). Returns whether we
    /// voted for it.
    pub(super) fn on_prevote(
        &mut self,
        from: NodeId,
        term: u64,
        heard: Option<Heard>,
        now: Millis,
    ) -> bool {
        if !self.up_to_date(from) {
            // up_to_date: it holds an older list; it got ours (`note_list`) and asks again.
            return false;
        }
        match self.state {
            State::Coordinator { epoch, .. } => {
                return self.prevote_in_office(from, term, heard, epoch, now)
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
        if self.quorum_state().voted_above(from, term, now) {
            // one_vote: a higher candidate has our vote for this term already.
            return false;
        }
        let blocked = self.acceptance_blocked_until(from, now).is_some();
        let running = matches!(
            self.state,
            State::Starting { .. } | State::Electing { .. } | State::PreVoting { .. }
        );
        if self.eligible && self.above(from) && self.runs_soon(now) && (running || !blocked) {
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
        if !self.est_up_to_date(from, now) {
            // est_up_to_date: a live eligible node holds fresher data (`estimate.rs`).
            return false;
        }
        if blocked {
            // deferred_vote: asked again when the promise is released or runs out.
            self.quorum_state_mut().deferred = Some((from, term, heard));
            return false;
        }
        self.grant_vote(from, term, now);
        if !self.above(from) {
            if let State::Electing { .. } | State::PreVoting { .. } | State::Idle { .. } =
                self.state
            {
                self.enter(self.awaiting(now), now);
            }
        }
        true
    }

    /// Sends our pre-vote and remembers it (one_vote). Always true: "we voted".
    pub(super) fn grant_vote(&mut self, candidate: NodeId, term: u64, now: Millis) -> bool {
        self.send(candidate, Body::Vote { term });
        let until = now + self.config.timing.coordinator_timeout_ms;
        self.quorum_state_mut().record_vote(candidate, term, until);
        true
    }

    /// deferred_vote: answers the pre-vote we held back, as if it arrived now.
    pub(super) fn release_deferred_vote(&mut self, now: Millis) {
        if let Some((candidate, term, heard)) = self.quorum_state_mut().deferred.take() {
            self.on_prevote(candidate, term, heard, now);
        }
    }

    /// A yes to our pre-vote for `term`.
    pub(super) fn on_vote(&mut self, from: NodeId, term: u64, now: Millis) {
        if let State::PreVoting { term: asked, .. } = self.state {
            if term == asked && self.counts(from) {
                self.quorum_state_mut().votes.insert(from);
                if self.is_majority(&self.quorum_state().votes) {
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

    /// Until when a declaration by `candidate` (this node included) may not be
    /// accepted (Q3, Q5); `None` when it may be accepted now.
    pub(super) fn acceptance_blocked_until(
        &self,
        candidate: NodeId,
        now: Millis,
    ) -> Option<Millis> {
        if self.config.has(Flaw::IgnoreLease) {
            return None;
        }
        self.quorum_state().blocked_until(candidate, now)
    }

    /// prevote (Q6): ask every peer before raising the term.
    pub(super) fn begin_prevote(&mut self, now: Millis) {
        if let Some(until) = self.acceptance_blocked_until(self.config.id, now) {
            // Our own vote is promised elsewhere (or we just restarted): wait it out,
            // still open to an Answer from a higher node.
            self.enter(State::Electing { until }, now);
            return;
        }
        let above = self.seen.max(self.quorum_state().asked_unanswered);
        let Some(term) = above.checked_add(1) else {
            self.idle(now);
            return;
        };
        let own = self.config.id;
        self.quorum_state_mut().count_afresh(own);
        if self.is_majority(&self.quorum_state().votes) {
            self.declare(now);
            return;
        }
        self.broadcast(Body::PreVote {
            term,
            heard: self.quorum_state().heard,
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

    /// established (Q2): after our declaration went out, count acceptances until a
    /// majority (ourselves included) has persisted it.
    pub(super) fn collect_acceptances(&mut self, epoch: Epoch, now: Millis) {
        let own = self.config.id;
        let quorum = self.quorum_state_mut();
        quorum.promise = None;
        quorum.deferred = None;
        quorum.count_afresh(own);
        if self.is_majority(&self.quorum_state().votes) {
            let asked = self.config.timing.suspect_after_ms;
            self.establish(epoch, now, asked, now);
            return;
        }
        self.enter(
            State::Declaring {
                epoch,
                sent_at: now,
                until: now + self.config.timing.coordinator_timeout_ms,
                asked_ms: self.config.timing.suspect_after_ms,
            },
            now,
        );
    }

    /// A majority accepted `epoch`, declared at `sent_at` asking promises of at least
    /// `asked_ms` (Q2): take office with a lease counted from the declaration (Q3) and
    /// cut from the smaller of that D and ours.
    fn establish(&mut self, epoch: Epoch, sent_at: Millis, asked_ms: Millis, now: Millis) {
        let timing = self.config.timing;
        let span = lease_span_ms(&Timing {
            suspect_after_ms: asked_ms.min(timing.suspect_after_ms),
            ..timing
        });
        let voters = self
            .quorum_state()
            .votes
            .iter()
            .copied()
            .filter(|&v| v != self.config.id);
        let majority = crate::protocol::membership::majority_of(self.members.voters().len());
        let lease = Lease::new(majority, span, sent_at, voters);
        if lease.until() <= now {
            // The acks came too late to hold any lease: release them, try again.
            self.broadcast(Body::Resign { epoch });
            self.idle(now);
            return;
        }
        self.quorum_state_mut().lease = Some(lease);
        self.enter(
            State::Coordinator {
                epoch,
                next_heartbeat: (sent_at + timing.heartbeat_ms).max(now + 1),
            },
            now,
        );
    }
}

/// restart_holdoff and promise_span: when a promise longer than our own D stops
/// binding, and what our store says of it meanwhile.
impl Machine {
    /// Once the restart hold-off is over and every promise made under a longer D than
    /// ours has run out, a longer D binds nothing: the next write stores this life's
    /// own D (`Cells::promise_ms`).
    pub(super) fn drop_expired_promise(&mut self, now: Millis) {
        let over = self
            .quorum
            .as_ref()
            .map_or(true, |q| now >= q.holdoff_until);
        if over && now >= self.carried_until {
            self.carried_promise_ms = 0;
        }
    }

    /// promise_span: remembers the D `from`'s message said it leads under (0: it said
    /// none), in both modes: a follower also suspects its coordinator no sooner than
    /// that D (`Machine::suspect_span`).
    pub(super) fn note_asked(&mut self, from: NodeId, promise_ms: Millis) {
        if promise_ms > 0 {
            self.asked.insert(from, promise_ms);
        }
    }

    /// promise_span: how long an ack to `leader` promises: the longer of our D and the
    /// D its last message asked (or, if none reached this life yet, the longest our
    /// store says we may have promised).
    fn promise_span_for(&self, leader: NodeId) -> Millis {
        let own = self.config.timing.suspect_after_ms;
        let asked = (self.asked.get(&leader).copied()).unwrap_or(self.cells.promise_ms);
        own.max(asked)
    }

    /// A promise of `span` binding until `until`, or promises made under a D we no
    /// longer run with: while they bind, every write stores the longer D, and if the
    /// store says less it is written now, before the ack or anything else that relies
    /// on it (persist-then-act), so a crash restarts into the right hold-off (Q5).
    pub(super) fn carry_promise(&mut self, span: Millis, until: Millis) {
        if self.quorum.is_none() {
            return;
        }
        if span > self.config.timing.suspect_after_ms {
            self.carried_promise_ms = self.carried_promise_ms.max(span);
            self.carried_until = self.carried_until.max(until);
        }
        let binding = self
            .config
            .timing
            .suspect_after_ms
            .max(self.carried_promise_ms);
        if binding > self.cells.promise_ms {
            self.persist(self.cells);
        }
    }

    /// The cluster settings changed (a newer list carries others): live by them from
    /// now on. A shorter D keeps binding the promises made under the longer one; a
    /// coordinator cuts the rounds it sends from now on from the new D, and no round
    /// already sent counts for more than the new span (a repeat of it asks the new D).
    pub(super) fn live_by(&mut self, settings: &ClusterSettings, now: Millis) {
        let old = self.config.timing.suspect_after_ms;
        self.config.timing = settings.timing;
        self.config.preempt = settings.preempt;
        let new = settings.timing.suspect_after_ms;
        if new < old {
            self.carry_promise(old, now + old);
        } else {
            self.carry_promise(new, now);
        }
        if let State::Declaring { asked_ms, .. } = &mut self.state {
            *asked_ms = (*asked_ms).min(new);
        }
        let span = lease_span_ms(&settings.timing);
        if let Some(lease) = self.quorum.as_mut().and_then(|q| q.lease.as_mut()) {
            lease.respan(span);
        }
    }
}
