//! Everything the machine emits, queued in the order the caller must run it: cells to
//! persist (before anything that reveals them, I3), messages, facts and the view; and
//! [`Machine::enter`], the one door every state change goes through, so that taking and
//! leaving office are reported exactly once.

use super::event::Action;
use super::state::State;
use super::Machine;
use crate::protocol::epoch::{Cells, Epoch, Millis, NodeId};
use crate::protocol::message::{Body, Message};
use crate::protocol::view::{DemotionReason, Fact};

impl Machine {
    /// Every state change goes through here, so leaving and taking office are reported
    /// as facts exactly once, in order with the other actions.
    pub(super) fn enter(&mut self, state: State, now: Millis) {
        let old = std::mem::replace(&mut self.state, state);
        let reason = self.leaving.take();
        if let State::Coordinator { epoch, .. } = old {
            if !matches!(state, State::Coordinator { epoch: e, .. } if e == epoch) {
                self.drop_change();
                self.forget_release();
                let office_ended_at = match self.quorum.as_mut().and_then(|q| q.lease.take()) {
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

    /// Raises the highest term seen.
    pub(super) fn observe(&mut self, term: u64) {
        self.seen = self.seen.max(term);
    }

    /// Raises the highest term seen to a peer's accepted epoch, if it has one.
    pub(super) fn observe_accepted(&mut self, accepted: Option<Epoch>) {
        if let Some(a) = accepted {
            self.observe(a.term);
        }
    }

    /// Adopts `cells` and asks the driver to store them before any later action runs.
    /// Every write carries the D this node's promises may still bind under
    /// ([`Cells::promise_ms`]): its own, or an earlier life's longer one while the
    /// restart hold-off lasts.
    pub(super) fn persist(&mut self, mut cells: Cells) {
        cells.promise_ms = self
            .config
            .timing
            .suspect_after_ms
            .max(self.carried_promise_ms);
        self.cells = cells;
        self.actions.push_back(Action::Persist(cells));
    }

    /// Reports a fact of the machine's own (election started, declared, ...).
    pub(super) fn fact(&mut self, fact: Fact) {
        self.actions.push_back(Action::Fact(fact));
    }

    /// Sends `body` with our highest seen term.
    pub(super) fn send(&mut self, to: NodeId, body: Body) {
        let msg = Message {
            term: self.seen,
            config: self.members.id,
            est: self.envelope_est(),
            promise_ms: self.promise_asked(&body),
            body,
        };
        self.actions.push_back(Action::Send { to, msg });
    }

    /// The D a message says its sender leads under (`Message::promise_ms`): ours, on a
    /// declaration or heartbeat (in quorum mode the messages an ack promises for; in
    /// classic mode, which promises nothing, it times the receiver's suspicion only);
    /// 0 on every other message.
    fn promise_asked(&self, body: &Body) -> Millis {
        let asks = matches!(body, Body::Coordinator { .. } | Body::Heartbeat { .. });
        if asks {
            self.config.timing.suspect_after_ms
        } else {
            0
        }
    }

    /// Sends `body` to every peer.
    pub(super) fn broadcast(&mut self, body: Body) {
        for peer in self.members.others(self.config.id) {
            self.send(peer, body.clone());
        }
    }

    /// Publishes the view if it changed since it was last published.
    pub(super) fn publish(&mut self) {
        let view = self.view();
        if self.published != Some(view) {
            self.published = Some(view);
            self.actions.push_back(Action::ViewChanged(view));
        }
    }
}
