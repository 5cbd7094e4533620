//! The machine's side of a store recovery (src/protocol/recovery.rs): what a node on an
//! empty store does with messages until enough peers reported their terms, and how it
//! starts over once they have.

use super::Machine;
use super::{preempt_from, starting};
use crate::protocol::epoch::{Cells, Millis, NodeId};
use crate::protocol::message::{Body, Message};
use crate::protocol::recovery::Recovery;
use crate::protocol::view::Fact;

impl Machine {
    /// While recovering an empty store: whether `msg` is handled as usual. Claims,
    /// Elections and pre-votes are not (the node may neither follow, answer nor vote
    /// before it knows which terms it forgot); the terms they name still count as seen.
    pub(super) fn handle_while_recovering(&mut self, msg: &Message) -> bool {
        let claim = match msg.body {
            Body::Coordinator { .. } | Body::Heartbeat { .. } | Body::Resign { .. } => true,
            Body::Election { accepted } | Body::Ack { accepted, .. } => accepted.is_some(),
            _ => false,
        };
        if let (true, Some(recovery)) = (claim, self.recovery.as_mut()) {
            recovery.saw_claim();
        }
        match msg.body {
            Body::Coordinator { epoch } | Body::Heartbeat { epoch, .. } => {
                self.observe(epoch.term);
                false
            }
            Body::Election { accepted } => {
                self.observe_accepted(accepted);
                false
            }
            // Unanswered, the term a candidate asks for is remembered apart: this node's
            // own next pre-vote asks above it (seed 914415 of the leader-answer run: a
            // node recovering its store ignored node 1's PreVote(2), then asked for term
            // 2 itself, and both declared it).
            Body::PreVote { term, .. } => {
                if let Some(q) = self.quorum.as_mut() {
                    q.asked_unanswered = q.asked_unanswered.max(term);
                }
                false
            }
            Body::Answer
            | Body::Ack { .. }
            | Body::Probe
            | Body::Resign { .. }
            | Body::Vote { .. }
            | Body::TermQuery
            | Body::TermReport
            | Body::TermUnknown
            | Body::Members { .. } => true,
        }
    }

    /// The answer to a peer's `TermQuery`: our highest term seen, as a `TermReport`,
    /// unless we are recovering a store that never completed a recovery and have seen a
    /// term: then we cannot vouch that no majority we were part of accepted a higher
    /// one, and say so (`TermUnknown`), so that two stores lost in a row do not vouch
    /// for each other (src/protocol/recovery.rs).
    pub(super) fn answer_term_query(&mut self, from: NodeId) {
        let claimed = self
            .recovery
            .as_ref()
            .is_some_and(Recovery::may_have_forgotten);
        let forgot = claimed && !self.cells.recovered;
        let body = if forgot && self.only_knowing_stores_vouch() {
            Body::TermUnknown
        } else {
            Body::TermReport
        };
        self.send(from, body);
    }

    /// A peer's answer to our `TermQuery` (its term already observed). Once enough have
    /// answered, the highest term seen becomes the term cell, persisted before the node
    /// votes for anything (src/protocol/recovery.rs).
    pub(super) fn on_term_report(&mut self, from: NodeId, term: u64, now: Millis) {
        if !self.counts(from) {
            return; // only voters' acceptances made a term
        }
        let seen = if self.only_knowing_stores_vouch() {
            self.seen
        } else {
            0 // every report counts
        };
        let Some(recovery) = self.recovery.as_mut() else {
            return;
        };
        if !recovery.report(from, term, seen) {
            return;
        }
        self.recovery = None;
        let term = self.seen;
        if term > self.cells.term || !self.cells.recovered || self.cells.awaits_survivors {
            // The mark that this store has recovered: from now on it vouches, even
            // while its cells hold no term (`Cells::recovered`); a forced recovery's
            // wait is over.
            self.persist(Cells {
                term: term.max(self.cells.term),
                recovered: true,
                awaits_survivors: false,
                ..self.cells
            });
        }
        self.fact(Fact::Recovered { term });
        // Start again, as if it started now: probe for the coordinator, wait for higher
        // peers, then elect in Bully order (it answered no Election meanwhile).
        let others = self.members.others(self.config.id).len();
        self.state = starting(&self.config, others, now);
        self.preempt_from = preempt_from(&self.config, others, now);
        self.broadcast(Body::Probe);
    }
}
