//! Quorum mode's lease bookkeeping, kept apart from the state machine so the arithmetic
//! can be read (and tested) on its own.
//!
//! The argument (Q3): a follower that acks leader L at its local time `r` promises not
//! to accept another leader's declaration before `r + D`. The coordinator holds its
//! role only until `s + D - margin` (`super::timing::lease_span_ms`), where `s` is the
//! send time of the newest heartbeat (or the declaration) that a majority has acked.
//! Every ack of a heartbeat happens after it was sent (`r >= s`), so on clocks that run
//! at the same rate the coordinator's lease ends `margin` before any majority can accept
//! someone else. Why the margin also covers clocks that drift apart is argued with it,
//! in src/protocol/timing.rs.

use super::epoch::{Epoch, Millis, NodeId};
use super::view::Role;
use std::collections::{BTreeMap, VecDeque};

/// Q4, the one rule every reader of the role applies, on whatever clock it reads: a
/// coordinator whose office ends at `office_ends` (its lease end; `None` for an office
/// with no end, as in classic mode) is no coordinator at or after that instant, even
/// before its own next step notices. The machine ([`crate::protocol::Machine::role_at`])
/// and a node's published status (`Status::as_of` in `src/api/status.rs`) both read the
/// role through here.
pub fn role_at<T: Ord>(role: Role, office_ends: Option<T>, now: T) -> Role {
    match office_ends {
        Some(end) if role == Role::Coordinator && now >= end => Role::Candidate,
        _ => role,
    }
}

/// A follower's promise to its leader: no other declaration before `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Promise {
    /// The epoch whose declaration or heartbeat was acked; its `Resign` releases it.
    pub epoch: Epoch,
    /// Local time until which the promise binds.
    pub until: Millis,
}

impl Promise {
    /// Whether the promise still forbids accepting `candidate` at `now`.
    pub fn blocks(&self, candidate: NodeId, now: Millis) -> bool {
        self.epoch.leader != candidate && now < self.until
    }
}

/// The coordinator's side: which heartbeat rounds were sent when, which each peer has
/// acked, and the lease end that follows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    /// Members (itself included) whose acks make a majority.
    majority: usize,
    /// `super::timing::lease_span_ms`: how long after an acked send the lease lasts,
    /// for rounds sent from now on (the cluster's D may change in office).
    span: Millis,
    /// Rounds sent and not yet superseded by a majority-acked newer one, oldest first,
    /// each with its send time and the span it was sent under: the followers that ack
    /// it promise the D that span was cut from (docs/design.md#cluster-settings).
    sent: VecDeque<(u64, Millis, Millis)>,
    /// Highest round each peer has acked.
    acked: BTreeMap<NodeId, u64>,
    round: u64,
    until: Millis,
}

impl Lease {
    /// The lease of a declaration sent at `declared_at` (round 0) and accepted by
    /// `voters` (a majority, the declarer excluded).
    pub fn new(
        majority: usize,
        span: Millis,
        declared_at: Millis,
        voters: impl IntoIterator<Item = NodeId>,
    ) -> Lease {
        Lease {
            majority,
            span,
            sent: VecDeque::from([(0, declared_at, span)]),
            acked: voters.into_iter().map(|v| (v, 0)).collect(),
            round: 0,
            until: declared_at + span,
        }
    }

    /// The local time at which the role ends unless more acks arrive.
    pub fn until(&self) -> Millis {
        self.until
    }

    /// The latest the lease can end without a new round: the newest round already sent
    /// renews it to its send time plus the span once a majority's acks arrive (acks
    /// queued while the process was stopped are handled after it resumes).
    pub fn until_at_most(&self) -> Millis {
        let newest_sent = self.sent.back().map_or(0, |&(_, at, span)| at + span);
        self.until.max(newest_sent)
    }

    /// The cluster's D changed in office: rounds sent from now on last `span`, and
    /// no round already sent counts for more (a repeat of it, sent to a peer that
    /// reconnects, asks the new D). The lease already earned stands: the followers whose
    /// acks earned it promised the D those rounds were sent under.
    pub fn respan(&mut self, span: Millis) {
        self.span = span;
        for (_, _, sent_span) in self.sent.iter_mut() {
            *sent_span = (*sent_span).min(span);
        }
    }

    /// The member list changed while in office: from now on `majority` of `voters`
    /// (this node included) renew the lease, and only voters' acks count. The lease
    /// already earned stands: the promises behind it bind whatever the list (any
    /// majority of the old list and of the new one share a member).
    pub fn recount(&mut self, majority: usize, voters: &std::collections::BTreeSet<NodeId>) {
        self.majority = majority;
        self.acked.retain(|peer, _| voters.contains(peer));
    }

    /// The number of the newest heartbeat round sent.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// Starts a new heartbeat round sent at `now`; returns its number.
    pub fn next_round(&mut self, now: Millis) -> u64 {
        self.round += 1;
        self.sent.push_back((self.round, now, self.span));
        if self.majority <= 1 {
            // A one-member cluster is its own majority for every round.
            self.until = self.until.max(now + self.span);
            self.sent.pop_front();
        }
        self.round
    }

    /// Records that `peer` acked `round`, and extends the lease if a majority now has
    /// acked a newer round.
    pub fn ack(&mut self, peer: NodeId, round: u64) {
        if round > self.round {
            return; // not a round we sent
        }
        let slot = self.acked.entry(peer).or_insert(0);
        *slot = (*slot).max(round);
        // The coordinator itself counts for every round; it needs `majority - 1` peers.
        let needed = self.majority.saturating_sub(1);
        let mut rounds: Vec<u64> = self.acked.values().copied().collect();
        rounds.sort_unstable_by(|a, b| b.cmp(a));
        let majority_round = match needed {
            0 => self.round,
            n => match rounds.get(n - 1) {
                Some(&r) => r,
                None => return,
            },
        };
        while self.sent.len() > 1 && self.sent[1].0 <= majority_round {
            self.sent.pop_front();
        }
        if let Some(&(r, at, span)) = self.sent.front() {
            if r <= majority_round {
                self.until = self.until.max(at + span);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_follows_the_newest_round_a_majority_acked() {
        // 5 members: the coordinator plus 2 peers make a majority.
        let mut lease = Lease::new(3, 200, 1000, [1, 2]);
        assert_eq!(lease.until(), 1200);
        let r1 = lease.next_round(1100);
        let r2 = lease.next_round(1200);
        lease.ack(1, r2);
        assert_eq!(lease.until(), 1200, "one peer is not a majority");
        lease.ack(3, r1);
        assert_eq!(lease.until(), 1300, "peers 1 and 3 both acked round 1");
        lease.ack(3, r2);
        assert_eq!(lease.until(), 1400);
        lease.ack(2, 99);
        assert_eq!(
            lease.until(),
            1400,
            "an ack of a round never sent counts for nothing"
        );
    }

    #[test]
    fn a_round_keeps_the_span_it_was_sent_under() {
        let mut lease = Lease::new(2, 200, 1000, [1]);
        let r1 = lease.next_round(1100);
        lease.respan(2_900);
        let r2 = lease.next_round(1200);
        lease.ack(1, r1);
        assert_eq!(lease.until(), 1300, "round 1 was sent under the short span");
        lease.ack(1, r2);
        assert_eq!(lease.until(), 4100, "round 2 under the long one");
        let r3 = lease.next_round(1300);
        lease.respan(100);
        assert_eq!(
            lease.until(),
            4100,
            "a shorter span takes back nothing earned"
        );
        assert_eq!(lease.until_at_most(), 4100);
        let r4 = lease.next_round(5000);
        lease.ack(1, r3);
        assert_eq!(
            lease.until(),
            4100,
            "round 3 now counts for the short span only"
        );
        lease.ack(1, r4);
        assert_eq!(lease.until(), 5100);
    }

    #[test]
    fn lone_node_lease_needs_no_acks() {
        let mut lease = Lease::new(1, 200, 0, []);
        let r = lease.next_round(100);
        lease.ack(7, r);
        assert_eq!(lease.until(), 300);
    }

    #[test]
    fn promise_binds_only_against_others_and_only_until_its_end() {
        let p = Promise {
            epoch: Epoch { term: 3, leader: 5 },
            until: 400,
        };
        assert!(p.blocks(4, 399));
        assert!(!p.blocks(5, 399));
        assert!(!p.blocks(4, 400));
    }
}
