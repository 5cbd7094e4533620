//! Quorum mode's volatile bookkeeping, grouped in one struct the machine owns: the votes
//! being counted, the lease held (Q3), the promise given (Q3), the restart hold-off
//! (Q5), the pre-vote held back (deferred_vote) and the one granted (one_vote), and the
//! newest coordinator heartbeat heard (handover, Q7). The rules that use it are in
//! `quorum.rs` and `handover.rs`. A classic machine has none of it: its `quorum` field
//! is `None`.

use crate::protocol::epoch::{Epoch, Millis, NodeId};
use crate::protocol::lease::{Lease, Promise};
use crate::protocol::message::Heard;
use std::collections::BTreeSet;

/// A pre-vote we granted (see [`QuorumState::voted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Vote {
    term: u64,
    candidate: NodeId,
    until: Millis,
}

/// The state only quorum mode keeps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct QuorumState {
    /// Pre-vote grants or acceptances of the running `PreVoting`/`Declaring`.
    pub(super) votes: BTreeSet<NodeId>,
    /// The coordinator's lease (meaningful in `Coordinator` state only).
    pub(super) lease: Option<Lease>,
    /// The promise this node gave its leader by acking it.
    pub(super) promise: Option<Promise>,
    /// No declaration is accepted before this (Q5).
    pub(super) holdoff_until: Millis,
    /// A pre-vote (candidate, term, heard) to grant once the promise is released (Q7)
    /// or runs out.
    pub(super) deferred: Option<(NodeId, u64, Option<Heard>)>,
    /// The last candidate we pre-voted for, at which term, and until when it has to
    /// declare (T'). Meanwhile a lower candidate asking for the same term is not voted
    /// for: two majorities of pre-votes at one term would make two nodes declare it (the
    /// soft half of I2). After T' the vote no longer binds, or a candidate that died
    /// after our vote would block its term for good.
    voted: Option<Vote>,
    /// The newest coordinator heartbeat (or declaration, round 0) received, shown in our
    /// pre-votes (see `Machine::hears_us`).
    pub(super) heard: Option<Heard>,
    /// The highest term a candidate asked us for while our store recovered and we could
    /// neither vote nor answer: our own next pre-vote asks above it, so the two never
    /// declare one term (seed 914415 of the leader-answer run). Not a term seen: it
    /// raises no term cell, so that candidate's declaration is still accepted.
    pub(super) asked_unanswered: u64,
}

impl QuorumState {
    /// Nothing counted, held, promised or heard; no declaration accepted before
    /// `holdoff_until` (Q5).
    pub(super) fn new(holdoff_until: Millis) -> QuorumState {
        QuorumState {
            votes: BTreeSet::new(),
            lease: None,
            promise: None,
            holdoff_until,
            deferred: None,
            voted: None,
            heard: None,
            asked_unanswered: 0,
        }
    }

    /// Starts a new count (pre-votes or acceptances) with our own vote in it.
    pub(super) fn count_afresh(&mut self, own: NodeId) {
        self.votes.clear();
        self.votes.insert(own);
    }

    /// The number of the newest heartbeat round of our lease (0 without one).
    pub(super) fn current_round(&self) -> u64 {
        self.lease.as_ref().map_or(0, Lease::round)
    }

    /// A coordinator's heartbeat (or its declaration, as round 0) reached us.
    pub(super) fn note_heard(&mut self, epoch: Epoch, round: u64) {
        let heard = Heard { epoch, round };
        if self.heard < Some(heard) {
            self.heard = Some(heard);
        }
    }

    /// Until when a declaration by `candidate` (this node included) may not be
    /// accepted: a live lease promise to another leader (Q3) or the restart hold-off
    /// (Q5). `None` when it may be accepted now.
    pub(super) fn blocked_until(&self, candidate: NodeId, now: Millis) -> Option<Millis> {
        let mut until = None;
        if now < self.holdoff_until {
            until = Some(self.holdoff_until);
        }
        if let Some(p) = self.promise.filter(|p| p.blocks(candidate, now)) {
            until = Some(until.map_or(p.until, |u: Millis| u.max(p.until)));
        }
        until
    }

    /// When a pre-vote held back by a promise or the hold-off may be granted.
    pub(super) fn deferred_vote_at(&self) -> Option<Millis> {
        let (candidate, _, _) = self.deferred?;
        let promised = self
            .promise
            .filter(|p| p.epoch.leader != candidate)
            .map_or(0, |p| p.until);
        Some(promised.max(self.holdoff_until))
    }

    /// handover: the leader of `epoch` resigned. Releases our promise to it, if we gave
    /// one, and returns the pre-vote held back meanwhile, to be answered now.
    pub(super) fn release(&mut self, epoch: Epoch) -> Option<(NodeId, u64, Option<Heard>)> {
        if !self.promise.is_some_and(|p| p.epoch == epoch) {
            return None;
        }
        self.promise = None;
        self.deferred.take()
    }

    /// Remembers that `candidate` has our pre-vote for `term` until `until`.
    pub(super) fn record_vote(&mut self, candidate: NodeId, term: u64, until: Millis) {
        self.voted = Some(Vote {
            term,
            candidate,
            until,
        });
    }

    /// one_vote: whether a higher candidate than `from` still holds our vote for `term`.
    pub(super) fn voted_above(&self, from: NodeId, term: u64, now: Millis) -> bool {
        self.voted
            .is_some_and(|v| v.term == term && v.candidate > from && now < v.until)
    }
}
