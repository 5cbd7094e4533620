//! The timing knobs and what follows from them: the start-up wait, the transport's
//! idle timeouts, the convergence bound (I5) and quorum mode's lease span with its
//! drift margin (Q3), and the relations [`Timing::validate`] enforces between them.
//!
//! The drift margin: a coordinator's lease (`super::lease`) must end before its
//! followers' promise of D does, on clocks that do not run at the same rate. With each
//! clock within ±1 % of true time, the promise lasts at least D / 1.01 of real time and
//! the lease at most (D - margin) / 0.99; the lease ends first when margin >= 1.98 % of
//! D. The margin is therefore the larger of one heartbeat period and
//! [`DRIFT_BOUND_PERMILLE`] of D ([`drift_margin_ms`]): a fixed heartbeat alone would
//! not cover D >> heartbeat (D = 10 s with a 100 ms heartbeat drifts ~200 ms apart at
//! ±1 %).

use super::epoch::Millis;
use super::mode::Mode;
use serde::{Deserialize, Serialize};

/// The timing knobs, in milliseconds (docs/configuration.md#timing-timing-milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timing {
    /// h: how often the coordinator sends its heartbeat to every member.
    pub heartbeat_ms: u64,
    /// D: a follower suspects its coordinator after this long without a heartbeat.
    pub suspect_after_ms: u64,
    /// T: how long an electing node waits for an Answer from a higher ID.
    pub answer_timeout_ms: u64,
    /// T': how long a node that got an Answer waits for the Coordinator message.
    pub coordinator_timeout_ms: u64,
    /// How long a (re)started node waits before its first election.
    pub preempt_delay_ms: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            heartbeat_ms: 100,
            suspect_after_ms: 300,
            answer_timeout_ms: 100,
            coordinator_timeout_ms: 300,
            preempt_delay_ms: 0,
        }
    }
}

impl Timing {
    /// A faster profile for chaos runs and benchmarks on loopback.
    pub fn fast() -> Self {
        Timing {
            heartbeat_ms: 25,
            suspect_after_ms: 100,
            answer_timeout_ms: 30,
            coordinator_timeout_ms: 100,
            preempt_delay_ms: 0,
        }
    }

    /// How long a starting node waits for higher peers it has not reached yet before it
    /// elects without them (3D; at most that long after its probe window): nodes of a
    /// fresh cluster started one by one find each other instead of each declaring in
    /// turn. A node that hears a running coordinator stops waiting at once.
    pub fn startup_wait_ms(&self) -> u64 {
        3 * self.suspect_after_ms
    }

    /// How long a peer connection that carries messages may hear nothing back before
    /// the transport drops it and reports the peer down (20 D); also the bound on a dial.
    /// The protocol's own suspicion detects a dead leader after D; the notice is a hint.
    /// A stalled connection must not live much longer: after a partition heals, QUIC's
    /// retransmission backoff would hold its messages back for about as long as the
    /// partition lasted. The simulator uses the same figure.
    pub fn peer_idle_timeout_ms(&self) -> u64 {
        self.suspect_after_ms.saturating_mul(20)
    }

    /// QUIC's own idle timeout (200 D), which applies to quiet links only: those between
    /// followers carry nothing for as long as the coordinator lives, and a keep-alive at
    /// half of [`Timing::peer_idle_timeout_ms`] on each of them was a third of an idle
    /// 32-node cluster's CPU. The dialer pings at half of this; a connection with
    /// traffic is watched against the shorter timeout instead (`transport::silence`).
    pub fn quiet_link_timeout_ms(&self) -> u64 {
        self.suspect_after_ms.saturating_mul(200)
    }

    /// The I5 bound: every live node follows the highest live ID within this long
    /// after the last fault (D + 2T + T' plus the start-up wait and a margin).
    pub fn convergence_bound_ms(&self) -> u64 {
        self.suspect_after_ms
            + 2 * self.answer_timeout_ms
            + self.coordinator_timeout_ms
            + self.preempt_delay_ms
            + self.answer_timeout_ms
            + self.startup_wait_ms()
            + 2 * self.heartbeat_ms
    }

    /// The I5 bound for `mode`. Quorum mode adds what its safety costs at worst: the
    /// restart hold-off (D, Q5), a pre-vote round and a declaration's wait for acks
    /// (T + T'), and a handover's extra round (T).
    pub fn convergence_bound_in(&self, mode: Mode) -> u64 {
        match mode {
            Mode::Classic => self.convergence_bound_ms(),
            Mode::Quorum => {
                self.convergence_bound_ms()
                    + self.suspect_after_ms
                    + 2 * self.answer_timeout_ms
                    + self.coordinator_timeout_ms
            }
        }
    }

    /// How long after a heartbeat round was sent (in quorum mode: the newest round a
    /// majority acked) no other node can take office, on the sender's clock: D less the
    /// drift allowance ([`DRIFT_BOUND_PERMILLE`] of D, rounded up). A follower suspects
    /// (classic) or its promise binds (quorum) for D of its own clock after it heard the
    /// round, which is at least D / 1.01 of real time; on a sender's clock running up
    /// to 1 % slow that is at least D x 0.99 / 1.01 > 0.98 D. A keeper that has fenced
    /// its host's database by then has done so before any successor could be elected
    /// (`src/keeper/plan.rs`).
    pub fn takeover_floor_ms(&self) -> Millis {
        self.suspect_after_ms.saturating_sub(drift_ms(self))
    }

    /// How long after an acked send the coordinator's lease lasts (see
    /// [`lease_span_ms`]).
    pub fn lease_span_ms(&self) -> Millis {
        lease_span_ms(self)
    }

    /// Checks the relations the algorithm relies on; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.heartbeat_ms == 0 {
            return Err("timing.heartbeat_ms must be at least 1".into());
        }
        let span = lease_span_ms(self);
        if span < self.heartbeat_ms.saturating_mul(2) {
            return Err(format!(
                "timing.suspect_after_ms ({}) must be at least 3 x timing.heartbeat_ms ({}): \
                 the coordinator's lease lasts D less a drift margin of {} ms (the larger of \
                 the heartbeat and {} % of D), {span} ms, and must span two heartbeats so \
                 that one late ack does not end it",
                self.suspect_after_ms,
                self.heartbeat_ms,
                drift_margin_ms(self),
                DRIFT_BOUND_PERMILLE as f64 / 10.0,
            ));
        }
        if self.answer_timeout_ms == 0 {
            return Err("timing.answer_timeout_ms must be at least 1".into());
        }
        if self.coordinator_timeout_ms < self.answer_timeout_ms {
            return Err(format!(
                "timing.coordinator_timeout_ms ({}) must be at least timing.answer_timeout_ms ({})",
                self.coordinator_timeout_ms, self.answer_timeout_ms
            ));
        }
        Ok(())
    }
}

/// The clock-rate drift the lease allows for, in permille of D: ±1 % on the follower's
/// clock and ±1 % on the coordinator's, together.
pub const DRIFT_BOUND_PERMILLE: u64 = 20;

/// How much shorter the coordinator's lease is than its followers' promise: the larger
/// of one heartbeat period and [`DRIFT_BOUND_PERMILLE`] of D, rounded up.
pub fn drift_margin_ms(timing: &Timing) -> Millis {
    timing.heartbeat_ms.max(drift_ms(timing))
}

/// [`DRIFT_BOUND_PERMILLE`] of D, rounded up: how far two clocks may drift apart in D.
fn drift_ms(timing: &Timing) -> Millis {
    let drift = u128::from(timing.suspect_after_ms) * u128::from(DRIFT_BOUND_PERMILLE);
    Millis::try_from(drift.div_ceil(1000)).unwrap_or(Millis::MAX)
}

/// How long after an acked send the coordinator's lease lasts: D less the drift margin
/// (0 if the margin swallows D, which [`Timing::validate`] refuses).
pub fn lease_span_ms(timing: &Timing) -> Millis {
    timing
        .suspect_after_ms
        .saturating_sub(drift_margin_ms(timing))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // docs/modes.md's slow network, D = 10 s: 200 ms, not the 100 ms heartbeat.
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

    /// The takeover floor lies between the lease end and D, and on clocks 1 % apart
    /// (sender slow, follower fast) still before the earliest real takeover.
    #[test]
    fn the_takeover_floor_falls_after_the_lease_and_before_any_successor() {
        assert_eq!(timing(100, 300).takeover_floor_ms(), 294);
        assert_eq!(timing(100, 10_000).takeover_floor_ms(), 9_800);
        for d in (3..2_000).chain((2_000..200_000).step_by(997)) {
            for heartbeat in [1, 10, d / 3] {
                let t = timing(heartbeat.max(1), d);
                let floor = t.takeover_floor_ms();
                assert!(t.lease_span_ms() <= floor && floor <= d, "D {d}");
                let floor_real = floor as f64 / 0.99;
                let promise_real = d as f64 / 1.01;
                assert!(
                    floor_real <= promise_real,
                    "D {d}: {floor_real} > {promise_real}"
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
}
