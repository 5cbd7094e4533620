//! Quorum mode's lease bookkeeping, kept apart from the state machine so the arithmetic
//! can be read (and tested) on its own.
//!
//! The argument (Q3): a follower that acks leader L at its local time `r` promises not
//! to accept another leader's declaration before `r + D`. The coordinator holds its
//! role only until `s + D - margin` ([`lease_span_ms`]), where `s` is the send time of
//! the newest heartbeat (or the declaration) that a majority has acked. Every ack of a
//! heartbeat happens after it was sent (`r >= s`), so on clocks that run at the same
//! rate the coordinator's lease ends `margin` before any majority can accept someone
//! else.
//!
//! Clocks do not run at the same rate. With each clock within ±1 % of true time, the
//! promise lasts at least D / 1.01 of real time and the lease at most
//! (D - margin) / 0.99; the lease ends first when margin >= 1.98 % of D. The margin is
//! therefore the larger of one heartbeat period and [`DRIFT_BOUND_PERMILLE`] of D
//! ([`drift_margin_ms`]): a fixed heartbeat alone would not cover D >> heartbeat (D =
//! 10 s with a 100 ms heartbeat drifts ~200 ms apart at ±1 %).

use super::types::{Epoch, Millis, NodeId, Timing};
use std::collections::{BTreeMap, VecDeque};

/// The clock-rate drift the lease allows for, in permille of D: ±1 % on the follower's
/// clock and ±1 % on the coordinator's, together.
pub const DRIFT_BOUND_PERMILLE: u64 = 20;

/// How much shorter the coordinator's lease is than its followers' promise: the larger
/// of one heartbeat period and [`DRIFT_BOUND_PERMILLE`] of D, rounded up.
pub fn drift_margin_ms(timing: &Timing) -> Millis {
    let drift = u128::from(timing.suspect_after_ms) * u128::from(DRIFT_BOUND_PERMILLE);
    let drift = Millis::try_from(drift.div_ceil(1000)).unwrap_or(Millis::MAX);
    timing.heartbeat_ms.max(drift)
}

/// How long after an acked send the coordinator's lease lasts: D less the drift margin
/// (0 if the margin swallows D, which [`Timing::validate`] refuses).
pub fn lease_span_ms(timing: &Timing) -> Millis {
    timing
        .suspect_after_ms
        .saturating_sub(drift_margin_ms(timing))
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
    /// [`lease_span_ms`]: how long after an acked send the lease lasts.
    span: Millis,
    /// Rounds sent and not yet superseded by a majority-acked newer one, oldest first.
    sent: VecDeque<(u64, Millis)>,
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
            sent: VecDeque::from([(0, declared_at)]),
            acked: voters.into_iter().map(|v| (v, 0)).collect(),
            round: 0,
            until: declared_at + span,
        }
    }

    /// The local time at which the role ends unless more acks arrive.
    pub fn until(&self) -> Millis {
        self.until
    }

    /// The number of the newest heartbeat round sent.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// Starts a new heartbeat round sent at `now`; returns its number.
    pub fn next_round(&mut self, now: Millis) -> u64 {
        self.round += 1;
        self.sent.push_back((self.round, now));
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
        if let Some(&(r, at)) = self.sent.front() {
            if r <= majority_round {
                self.until = self.until.max(at + self.span);
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

    fn timing(heartbeat_ms: u64, suspect_after_ms: u64) -> Timing {
        Timing {
            heartbeat_ms,
            suspect_after_ms,
            ..Timing::default()
        }
    }

    #[test]
    fn the_margin_is_a_heartbeat_until_drift_over_d_exceeds_it() {
        assert_eq!(DRIFT_BOUND_PERMILLE, 20, "±1 % on each of two clocks");
        // Default timing: 2 % of 300 ms is 6 ms, under the 100 ms heartbeat.
        assert_eq!(drift_margin_ms(&timing(100, 300)), 100);
        assert_eq!(lease_span_ms(&timing(100, 300)), 200);
        // D = 5 s with a 100 ms heartbeat: the heartbeat is exactly 2 %.
        assert_eq!(drift_margin_ms(&timing(100, 5_000)), 100);
        // The README's slow network, D = 10 s: 200 ms, not the 100 ms heartbeat.
        assert_eq!(drift_margin_ms(&timing(100, 10_000)), 200);
        assert_eq!(lease_span_ms(&timing(100, 10_000)), 9_800);
        // Rounded up: 2 % of 5_001 is 100.02.
        assert_eq!(drift_margin_ms(&timing(1, 5_001)), 101);
        // No overflow at the top of the range.
        assert_eq!(drift_margin_ms(&timing(1, u64::MAX)), u64::MAX / 50 + 1);
        assert_eq!(lease_span_ms(&timing(100, 50)), 0, "saturates");
    }

    /// The claim of the module docs: with the margin, the lease (at most span / 0.99 of
    /// real time) ends no later than the promise (at least D / 1.01), for every D.
    #[test]
    fn the_lease_ends_before_the_promise_at_one_percent_drift_on_each_clock() {
        for d in (3..2_000).chain((2_000..200_000).step_by(997)) {
            for heartbeat in [1, 10, d / 3] {
                let t = timing(heartbeat.max(1), d);
                let lease_real = lease_span_ms(&t) as f64 / 0.99;
                let promise_real = d as f64 / 1.01;
                assert!(
                    lease_real <= promise_real,
                    "D {d} heartbeat {heartbeat}: lease {lease_real} > promise {promise_real}"
                );
            }
        }
    }

    #[test]
    fn validate_refuses_a_lease_span_under_two_heartbeats() {
        assert_eq!(timing(100, 300).validate(), Ok(()));
        assert_eq!(timing(100, 10_000).validate(), Ok(()));
        assert_eq!(timing(1, 3).validate(), Ok(()));
        let why = timing(100, 299).validate().unwrap_err();
        assert!(
            why.starts_with(
                "timing.suspect_after_ms (299) must be at least 3 x timing.heartbeat_ms (100)"
            ),
            "{why}"
        );
        assert!(why.contains("drift margin of 100 ms"), "{why}");
        assert!(why.contains("2 % of D), 199 ms"), "{why}");
        assert!(timing(100, 150).validate().is_err());
        assert!(
            timing(u64::MAX, u64::MAX).validate().is_err(),
            "no overflow"
        );
        // Large D: 2 % of it is the margin, and the span stays far above 2 heartbeats.
        assert_eq!(timing(10, 1_000_000).validate(), Ok(()));
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
