//! Keeps the RTT estimate of quiet links close to the truth, so a message lost on one
//! is resent after milliseconds, not after a second.
//!
//! QUIC resends a lost packet after its probe timeout (PTO), about the smoothed RTT
//! plus four times its variance. A link between two followers carries nothing for
//! minutes, so its estimate stays whatever the last samples said: after a 32-node
//! start-up, when 32 processes share 2 cores, quiet links held estimates of 65 ms
//! (median) up to 595 ms while busy links held 1 ms or less. When such a link's turn
//! comes (its far end is the new coordinator) and loopback drops the first packet under
//! the burst, the survivor hears the coordinator a second late (one failover in 80 at
//! 32 nodes took 1445 ms).
//!
//! So each time the silence watch looks, a connection whose estimate is far above the
//! least RTT it ever measured gets a short train of probes, one at a time, until the
//! estimate is back near that least (each sample moves it by 1/8, so a few dozen
//! probes). quinn 0.11 has no public ping and our peers read only frames on the wire,
//! so a probe is a QUIC MAX_DATA frame, which every QUIC peer acknowledges: raising the
//! connection's receive window by one byte queues one, and lowering it again costs
//! nothing on the wire. No message changes, so nodes of earlier builds take part.

use super::shared::{lock, Shared, Shutdown};
use super::tls::RECEIVE_WINDOW;
use crate::protocol::NodeId;
use quinn::VarInt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tracing::debug;

/// An estimate above `STALE_FACTOR` × the least RTT + `STALE_MARGIN` gets a train.
const STALE_FACTOR: u32 = 4;
const STALE_MARGIN: Duration = Duration::from_millis(5);
/// A train stops once the estimate is within 2 × the least RTT + this.
const FRESH_MARGIN: Duration = Duration::from_millis(2);
/// Probes in one train, at most: enough to bring 600 ms down to a few (7/8 per sample).
const MAX_PROBES: u32 = 48;
/// Time between looks at whether a probe was answered; also the least time between
/// probes, far above a loopback or LAN round trip.
const PROBE_GAP: Duration = Duration::from_millis(10);
/// A probe with no ACK after this long counts as unanswered...
const PROBE_WAIT: Duration = Duration::from_millis(250);
/// ...and this many in a row end the train (the far end is gone or swamped).
const MAX_UNANSWERED: u32 = 3;

/// One connection's RTT figures, as quinn reports them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Rtt {
    /// The smoothed estimate the PTO is computed from.
    pub smoothed: Duration,
    /// The least sample ever taken on the connection.
    pub least: Duration,
}

impl Rtt {
    fn of(conn: &quinn::Connection) -> Rtt {
        Rtt {
            smoothed: conn.rtt(),
            least: conn.min_rtt(),
        }
    }

    /// Far above what the link has shown it can do: worth a train.
    pub fn is_stale(&self) -> bool {
        self.smoothed > self.least * STALE_FACTOR + STALE_MARGIN
    }

    /// Close enough to the least: the train is done.
    pub fn is_fresh(&self) -> bool {
        self.smoothed <= self.least * 2 + FRESH_MARGIN
    }
}

/// Which connections need a train, remembering those whose last train ended without
/// reaching a fresh estimate (a link that really got slower) until their estimate
/// rises again, so they are not probed on every look. Shared by the silence watch and
/// the train it started.
#[derive(Default)]
pub(super) struct Refresher {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Whether a train is running: one at a time per node.
    running: bool,
    /// Connection (quinn's stable id) → the estimate its last unfinished train left.
    settled: HashMap<usize, Duration>,
}

impl State {
    /// Whether `rtt` calls for a train, given what an earlier train left on `conn_id`.
    fn wants_train(&self, conn_id: usize, rtt: Rtt) -> bool {
        rtt.is_stale()
            && self
                .settled
                .get(&conn_id)
                .map_or(true, |&left| rtt.smoothed > left * 2)
    }
}

impl Refresher {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Called by the silence watch on each look at `live`, the node's peer
    /// connections: starts a train over those that need one, unless one is running.
    pub fn look(&self, shared: &Arc<Shared>, live: &[(NodeId, quinn::Connection)]) {
        let mut state = self.state();
        state
            .settled
            .retain(|id, _| live.iter().any(|(_, c)| c.stable_id() == *id));
        if state.running {
            return;
        }
        let stale: Vec<(NodeId, quinn::Connection)> = live
            .iter()
            .filter(|(_, c)| c.close_reason().is_none())
            .filter(|(_, c)| state.wants_train(c.stable_id(), Rtt::of(c)))
            .cloned()
            .collect();
        if stale.is_empty() {
            return;
        }
        state.running = true;
        drop(state);
        let (task_state, task_shared) = (self.state.clone(), shared.clone());
        shared.spawn(async move {
            let mut shutdown = task_shared.shutdown_signal();
            for (peer, conn) in stale {
                let from = conn.rtt();
                let (end, probes) = train(&task_shared, &conn, &mut shutdown).await;
                debug!(peer, ?from, to = ?conn.rtt(), least = ?conn.min_rtt(), probes, outcome = ?end, "link RTT estimate refreshed");
                match end {
                    Train::Fresh | Train::Closed => {}
                    Train::Settled(left) => {
                        lock(&task_state).settled.insert(conn.stable_id(), left);
                    }
                    Train::Shutdown => break,
                }
            }
            lock(&task_state).running = false;
        });
    }
}

/// How a train ended.
#[derive(Debug, PartialEq)]
enum Train {
    /// The estimate is near the least RTT again.
    Fresh,
    /// The probes ran out, or went unanswered, with the estimate here.
    Settled(Duration),
    /// The connection closed meanwhile.
    Closed,
    Shutdown,
}

/// Probes `conn` one at a time, each once the last was answered (so a busy machine
/// slows the train down rather than ending it), until its estimate is fresh. Returns
/// how it ended and how many probes it sent.
async fn train(shared: &Shared, conn: &quinn::Connection, shutdown: &mut Shutdown) -> (Train, u32) {
    let mut unanswered = 0;
    for sent in 0..MAX_PROBES {
        if conn.close_reason().is_some() {
            return (Train::Closed, sent);
        }
        if Rtt::of(conn).is_fresh() {
            return (Train::Fresh, sent);
        }
        let acks_before = conn.stats().frame_rx.acks;
        probe(conn);
        shared.stats.add_rtt_probe();
        match answered(conn, acks_before, shutdown).await {
            None => return (Train::Shutdown, sent + 1),
            Some(true) => unanswered = 0,
            Some(false) => {
                unanswered += 1;
                if unanswered >= MAX_UNANSWERED {
                    return (Train::Settled(conn.rtt()), sent + 1);
                }
            }
        }
    }
    let end = if Rtt::of(conn).is_fresh() {
        Train::Fresh
    } else {
        Train::Settled(conn.rtt())
    };
    (end, MAX_PROBES)
}

/// Whether an ACK came after `acks_before` within [`PROBE_WAIT`]; `None` at shutdown.
async fn answered(
    conn: &quinn::Connection,
    acks_before: u64,
    shutdown: &mut Shutdown,
) -> Option<bool> {
    let deadline = tokio::time::Instant::now() + PROBE_WAIT;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PROBE_GAP) => {}
            _ = shutdown.wait() => return None,
        }
        if conn.stats().frame_rx.acks > acks_before {
            return Some(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Some(false);
        }
    }
}

/// Makes `conn` send one ack-eliciting packet (a MAX_DATA frame) without touching the
/// streams: quinn queues MAX_DATA when the receive window grows; the step back down is
/// a debt of one byte against later credit and sends nothing.
fn probe(conn: &quinn::Connection) {
    conn.set_receive_window(VarInt::from_u32(RECEIVE_WINDOW + 1));
    conn.set_receive_window(VarInt::from_u32(RECEIVE_WINDOW));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtt(smoothed_ms: u64, least_us: u64) -> Rtt {
        Rtt {
            smoothed: Duration::from_millis(smoothed_ms),
            least: Duration::from_micros(least_us),
        }
    }

    #[test]
    fn an_estimate_far_above_the_least_is_stale_until_near_it_again() {
        // After a 32-node start: 65 ms estimated on a loopback link that has done 0.2 ms.
        assert!(rtt(65, 200).is_stale());
        assert!(!rtt(65, 200).is_fresh());
        // Hysteresis: 4 ms is neither stale (no new train) nor fresh (a train goes on).
        assert!(!rtt(4, 200).is_stale());
        assert!(!rtt(4, 200).is_fresh());
        assert!(rtt(2, 200).is_fresh());
        // A WAN link: 80 ms estimated, 60 ms least.
        assert!(!rtt(80, 60_000).is_stale());
    }

    #[test]
    fn a_link_left_slow_by_a_train_waits_until_its_estimate_doubles() {
        let mut state = State::default();
        assert!(state.wants_train(7, rtt(65, 200)));
        state.settled.insert(7, Duration::from_millis(40));
        assert!(!state.wants_train(7, rtt(65, 200)));
        assert!(state.wants_train(7, rtt(81, 200)));
        assert!(
            state.wants_train(8, rtt(65, 200)),
            "other connections unaffected"
        );
    }
}
