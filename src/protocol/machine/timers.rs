//! Deadlines: when each state next needs the machine, and what happens when that time
//! comes: an election or a wait for a winner runs out (answer_timeout,
//! coordinator_timeout), a follower's leader falls silent (suspect), a preempt delay
//! ends (bully), a coordinator heartbeats or, in quorum mode, leaves office when its
//! lease ran out (lease, Q3), a pre-vote round or a declaration fails to win a majority
//! (prevote, established), a held-back pre-vote is answered (deferred_vote), and a store
//! recovery repeats its query. And one rule of docs/design.md of its own:
//!
//! - suspect_spares_a_live_leader: a leader that sent anything but a heartbeat since
//!   its last one (a restart's Probe) is alive, not silent: the follower does not skip
//!   it, so its Election reaches the restarted leader and the two never declare one
//!   term (the soft half of I2).

use super::config::Flaw;
use super::state::State;
use super::Machine;
use crate::protocol::epoch::Millis;
use crate::protocol::lease::Lease;
use crate::protocol::message::Body;
use crate::protocol::view::DemotionReason;

impl Machine {
    /// Quorum mode: the latest local time the coordinator role can last without a new
    /// round (acks of rounds already sent may still renew it, see
    /// [`Lease::until_at_most`]); what a stopped process's office can reach.
    pub fn lease_until_at_most(&self) -> Option<Millis> {
        match self.state {
            State::Coordinator { .. } => self.lease().map(Lease::until_at_most),
            _ => None,
        }
    }

    /// Quorum mode: the local time at which the coordinator role ends unless more acks
    /// arrive. `None` when the role does not expire (not coordinator, or classic mode).
    pub fn lease_until(&self) -> Option<Millis> {
        match self.state {
            State::Coordinator { .. } => self.lease().map(Lease::until),
            _ => None,
        }
    }

    /// When the caller should deliver the next `Event::Tick`.
    pub fn next_deadline(&self) -> Millis {
        if self.is_inert() {
            return Millis::MAX;
        }
        let deadline = self.state_deadline();
        let deadline = match self.deferred_vote_at() {
            Some(at) => deadline.min(at),
            None => deadline,
        };
        let deadline = match self.release_deadline() {
            Some(at) => deadline.min(at),
            None => deadline,
        };
        match &self.recovery {
            Some(recovery) => deadline.min(recovery.deadline()),
            None => deadline,
        }
    }

    /// Whether the lease is to be ignored (the sabotage [`Flaw::IgnoreLease`]).
    pub(super) fn flawed_lease(&self) -> bool {
        self.config.has(Flaw::IgnoreLease)
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

    /// Time has passed: fire whatever is due.
    pub(super) fn on_tick(&mut self, now: Millis) {
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
        self.release_timed_out(now);
    }

    fn on_state_deadline(&mut self, now: Millis) {
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
                    .lease()
                    .is_some_and(|l| now >= l.until() && !self.flawed_lease());
                if lease_over {
                    // Q3: stop heartbeating for this term; try to win a new one.
                    self.leave_office(DemotionReason::LeaseLost, self.idle_state(now), now);
                    self.start_election(now);
                    return;
                }
                self.heartbeat(epoch, now);
            }
        }
    }

    /// The coordinator of `epoch` sends a heartbeat round now (in quorum mode a new
    /// round of its lease) and schedules the next one a heartbeat period later.
    pub(super) fn heartbeat(&mut self, epoch: crate::protocol::epoch::Epoch, now: Millis) {
        let round = match self.quorum.as_mut().and_then(|q| q.lease.as_mut()) {
            Some(lease) => lease.next_round(now),
            None => 0,
        };
        self.broadcast(Body::Heartbeat { epoch, round });
        self.enter(
            State::Coordinator {
                epoch,
                next_heartbeat: now + self.config.timing.heartbeat_ms,
            },
            now,
        );
    }
}
