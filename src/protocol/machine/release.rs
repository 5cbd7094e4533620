//! release (docs/design.md#hooks-order): a coordinator that leaves office on its own (a
//! clean stop, a failed health check or step-down, a handover to a higher node) first
//! asks its driver to release the office ([`Action::AwaitRelease`]): the runtime runs
//! `on_demoted` and waits for its keepers to stop what they run. Meanwhile the machine
//! stays in office and keeps heartbeating, so its followers' promises hold and no
//! successor can be elected; the driver shows it as leaving (readers are told it does
//! not lead, keepers are fenced). On [`Event::Released`](super::Event), or once
//! `release_bound_ms` has passed, it leaves office as it did before this rule: the
//! `Demoted` fact, the view, the Resign (and a handover's vote). A crash or a hang
//! while it waits stops its heartbeats too, and the others elect after D as after any
//! crash. Without a bound (`release_bound_ms: None`) it leaves at once.
//!
//! The action list is the one statement of that order: the simulator and the model
//! checker run it as the node does.

use super::event::Action;
use super::state::State;
use super::Machine;
use crate::protocol::epoch::{Epoch, Millis, NodeId};
use crate::protocol::message::Body;
use crate::protocol::view::DemotionReason;

/// Why a coordinator leaves office on its own, and what follows once it is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Leave {
    /// A clean stop.
    Stop,
    /// The health check failed (or a step-down).
    Ineligible,
    /// A handover (Q7) to `to`, which asked for a pre-vote at `term`.
    Yield { to: NodeId, term: u64 },
}

/// A voluntary departure waiting for its release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Releasing {
    epoch: Epoch,
    why: Leave,
    /// When it leaves office even without a release (the driver's bound).
    until: Millis,
}

impl Machine {
    /// Whether leaving office for `why` waits for a release; if it does, the request
    /// goes out now (once: a second reason while waiting joins the first).
    pub(super) fn hold_for_release(&mut self, epoch: Epoch, why: Leave, now: Millis) -> bool {
        let Some(bound) = self.config.release_bound_ms else {
            return false;
        };
        if self.releasing.is_none() {
            self.releasing = Some(Releasing {
                epoch,
                why,
                until: now + bound,
            });
            self.actions.push_back(Action::AwaitRelease { epoch });
        }
        true
    }

    /// When a waiting release runs out, if one waits.
    pub(super) fn release_deadline(&self) -> Option<Millis> {
        self.releasing.map(|r| r.until)
    }

    /// The driver has released `epoch` (its `on_demoted` and keepers are done).
    pub(super) fn on_released(&mut self, epoch: Epoch, now: Millis) {
        if self.releasing.is_some_and(|r| r.epoch == epoch) {
            self.leave_released(now);
        }
    }

    /// The release's bound has passed: leave office without it.
    pub(super) fn release_timed_out(&mut self, now: Millis) {
        if self.releasing.is_some_and(|r| now >= r.until) {
            self.leave_released(now);
        }
    }

    /// Leaves office as the waiting departure said, now that it is released.
    fn leave_released(&mut self, now: Millis) {
        let Some(releasing) = self.releasing.take() else {
            return;
        };
        let State::Coordinator { epoch, .. } = self.state else {
            return;
        };
        if epoch != releasing.epoch {
            return;
        }
        match releasing.why {
            Leave::Stop => {
                let idle = self.idle_state(now);
                self.leave_office(DemotionReason::Stopped, idle, now);
                self.broadcast(Body::Resign { epoch });
            }
            Leave::Ineligible => {
                let idle = self.idle_state(now);
                self.resign_ineligible(epoch, idle, now);
            }
            Leave::Yield { to, term } => {
                let next = self.awaiting(now);
                self.leave_office(DemotionReason::Yielded { to }, next, now);
                self.broadcast(Body::Resign { epoch });
                if term > self.cells.term {
                    self.grant_vote(to, term, now);
                }
            }
        }
    }

    /// Leaving office for any other reason (a lapsed lease, a newer epoch) ends the
    /// wait: there is nothing left to release.
    pub(super) fn forget_release(&mut self) {
        self.releasing = None;
    }
}
