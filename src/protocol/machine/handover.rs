//! How a coordinator leaves office, and what its followers do when it does. Rules of
//! docs/design.md:
//!
//! - newer_news: a coordinator that learns of a newer epoch gives way: with preempt
//!   always it holds an election (classic: re-declaring above it unless a higher node
//!   is reachable); with preempt never it waits to follow the newer leader. Unless it
//!   re-declares at once, it leaves office and sends Resign first, so that followers
//!   that missed the newer epoch do not take its silence for death.
//! - handover (Q7): a quorum coordinator asked for a pre-vote by a higher eligible node
//!   (preempt always) that shows it heard one of the coordinator's heartbeats within D
//!   leaves office, then resigns; followers that deferred their vote for the higher
//!   node until their promise was released vote for it then. A candidate that cannot
//!   hear (a one-way link) shows no such heartbeat and gets a heartbeat instead of the
//!   office.
//! - ineligible: a node whose health check fails neither answers nor declares; a
//!   coordinator that becomes ineligible resigns so the others elect at once.
//! - shutdown: a coordinator that stops cleanly leaves office, then resigns.
//! - A follower of a resigned epoch elects at once.

use super::config::Flaw;
use super::release::Leave;
use super::state::State;
use super::Machine;
use crate::protocol::epoch::{Epoch, Millis, NodeId};
use crate::protocol::message::{Body, Heard};
use crate::protocol::view::DemotionReason;

impl Machine {
    /// Leaves office (if in it) for `reason`, then publishes the new view before anything
    /// else goes out, so a reader never sees the old role after a Resign was sent.
    pub(super) fn leave_office(&mut self, reason: DemotionReason, next: State, now: Millis) {
        self.leaving = Some(reason);
        self.enter(next, now);
        self.publish();
    }

    /// newer_news: a coordinator learned of a newer epoch than its own.
    pub(super) fn newer_news(&mut self, now: Millis) {
        let State::Coordinator { epoch, .. } = self.state else {
            return;
        };
        if self.redeclares_over_newer_news() {
            // Classic and highest reachable: re-declares above it at once, in office
            // throughout; the declaration tells every follower.
            self.leaving = Some(DemotionReason::NewerEpoch);
            self.start_election(now);
            return;
        }
        let preempt = self.preempting();
        let next = if preempt {
            self.idle_state(now)
        } else {
            // Follow the newer leader when it heartbeats; elect only if it does not.
            self.awaiting(now)
        };
        self.leave_office(DemotionReason::NewerEpoch, next, now);
        // Out of office first (Q7's order), then say so: our followers may not have
        // heard the newer epoch (a lost declaration) and would take our silence for
        // death, skipping us, alive, in their next election (a twin declaration).
        self.broadcast(Body::Resign { epoch });
        if preempt {
            self.start_election(now);
        }
    }

    /// ineligible: the health check (or a step-down) changed whether we may lead.
    pub(super) fn on_eligibility(&mut self, eligible: bool, now: Millis) {
        self.wants_eligible = eligible;
        self.refresh_eligibility(now);
    }

    /// ineligible: what the health check wants, and whether our entry in the member
    /// list lets us lead (a witness, learner or removed node never does).
    pub(super) fn refresh_eligibility(&mut self, now: Millis) {
        let eligible = self.wants_eligible && self.may_lead_here();
        if eligible == self.eligible {
            return;
        }
        self.eligible = eligible;
        let idle = self.idle_state(now);
        if !eligible {
            if let State::Coordinator { epoch, .. } = self.state {
                if !self.hold_for_release(epoch, Leave::Ineligible, now) {
                    self.resign_ineligible(epoch, idle, now);
                }
                return;
            }
            match self.state {
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

    /// shutdown: a coordinator leaves office, then resigns; a declarer withdraws.
    pub(super) fn on_shutdown(&mut self, now: Millis) {
        let idle = self.idle_state(now);
        match self.state {
            State::Coordinator { epoch, .. } => {
                if self.hold_for_release(epoch, Leave::Stop, now) {
                    return;
                }
                self.leave_office(DemotionReason::Stopped, idle, now);
                self.broadcast(Body::Resign { epoch });
            }
            State::Declaring { epoch, .. } => {
                self.broadcast(Body::Resign { epoch });
                self.enter(idle, now);
            }
            _ => {}
        }
    }

    /// The leader of `epoch` resigned: its promise no longer binds (handover: the vote
    /// held back for the higher node goes out now), and its followers elect at once.
    pub(super) fn on_resign(&mut self, epoch: Epoch, now: Millis) {
        let held_back = self.quorum.as_mut().and_then(|q| q.release(epoch));
        if let Some((candidate, term, heard)) = held_back {
            if self.on_prevote(candidate, term, heard, now) {
                if !matches!(self.state, State::Coordinator { .. }) {
                    self.enter(self.awaiting(now), now);
                }
                return;
            }
        }
        // Read after the release: answering the held-back pre-vote may have started an
        // election already.
        let following = matches!(self.state, State::Follower { epoch: e, .. } if e == epoch);
        if following {
            self.start_election(now);
        }
    }

    /// handover (Q7): a pre-vote reached us in office. A higher candidate that hears us
    /// gets the office (we leave, resign, then vote); anyone else gets a heartbeat.
    /// Returns whether we voted.
    pub(super) fn prevote_in_office(
        &mut self,
        from: NodeId,
        term: u64,
        heard: Option<Heard>,
        epoch: Epoch,
        now: Millis,
    ) -> bool {
        let hands_over = from > self.config.id
            && self.preempting()
            && (self.hears_us(epoch, heard) || self.config.has(Flaw::DeafHandover));
        if hands_over {
            let why = Leave::Yield { to: from, term };
            if self.hold_for_release(epoch, why, now) {
                return false; // it votes once released
            }
            // Leave office first, then resign, then vote.
            let next = self.awaiting(now);
            self.leave_office(DemotionReason::Yielded { to: from }, next, now);
            self.broadcast(Body::Resign { epoch });
            if term > self.cells.term {
                return self.grant_vote(from, term, now);
            }
        } else {
            let round = self.current_round();
            self.send(from, Body::Heartbeat { epoch, round });
        }
        false
    }

    /// Handover (Q7) goes only to a candidate that hears this coordinator: its pre-vote
    /// shows one of our heartbeats sent within the last D. A node that can send but
    /// not receive never shows one, so it is not handed an office it could not hold
    /// (its votes and acks would never reach it); it stays a follower in effect.
    fn hears_us(&self, epoch: Epoch, heard: Option<Heard>) -> bool {
        let timing = self.config.timing;
        let recent_rounds = timing.suspect_after_ms.div_ceil(timing.heartbeat_ms.max(1));
        let round = self.current_round();
        heard.is_some_and(|h| h.epoch == epoch && h.round.saturating_add(recent_rounds) >= round)
    }
}
