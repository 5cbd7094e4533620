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
//! Only the resend timeout of the node that announces itself decides how fast a
//! failover is heard, and Bully makes the highest live node coordinator, so only the
//! [`TRAINING_RANKS`] highest members refresh their links (at 32 nodes, every node
//! training cost an idle cluster three times its CPU for the first half minute).
//!
//! So each time the silence watch looks, a connection whose estimate is far above the
//! least RTT it ever measured gets a short train of probes, one at a time, until the
//! estimate is back near that least (each sample moves it by 1/8, so a few dozen
//! probes) or stops falling (the machine is busy, and that is the link's real RTT now).
//! A connection is trained again once new samples (traffic) have pushed its estimate
//! well above what its last train left, or, if that train stopped short of fresh (it
//! ran while the machine was busy, as at start-up), after a backoff that doubles from
//! 10 s. Probes on a loaded machine bring slow samples of their own, and retraining on
//! those at once would feed on itself (the first version did, and tripled an idle
//! 32-node cluster's CPU). quinn 0.11 has no public ping and our peers read only frames on the wire,
//! so a probe is a QUIC MAX_DATA frame, which every QUIC peer acknowledges: raising the
//! connection's receive window by one byte queues one, and lowering it again costs
//! nothing on the wire. No message changes, so nodes of earlier builds take part.

use super::shared::{lock, Shared};
use super::tls::RECEIVE_WINDOW;
use crate::protocol::NodeId;
use crate::shutdown::Shutdown;
use quinn::VarInt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;
use tracing::debug;

/// How many of the highest members refresh their links: the coordinator and its heir.
pub(super) const TRAINING_RANKS: usize = 2;

/// Whether node `id` is one of the [`TRAINING_RANKS`] highest of `members` (ascending).
pub(super) fn trains(id: NodeId, members: &[NodeId]) -> bool {
    members.iter().rev().take(TRAINING_RANKS).any(|&m| m == id)
}

/// An estimate above `STALE_FACTOR` × the least RTT + `STALE_MARGIN` gets a train.
const STALE_FACTOR: u32 = 4;
const STALE_MARGIN: Duration = Duration::from_millis(5);
/// A train stops once the estimate is within 2 × the least RTT + this.
const FRESH_MARGIN: Duration = Duration::from_millis(2);
/// Probes in one train, at most: enough to bring 600 ms down to a few (7/8 per sample).
const MAX_PROBES: u32 = 48;
/// A train also ends after this many answered probes in a row that did not bring the
/// estimate to a new low: it has met the link's present RTT.
const MAX_FLAT: u32 = 6;
/// Time between looks at whether a probe was answered; also the least time between
/// probes, far above a loopback or LAN round trip.
const PROBE_GAP: Duration = Duration::from_millis(10);
/// A probe with no ACK after this long counts as unanswered...
const PROBE_WAIT: Duration = Duration::from_millis(250);
/// ...and this many in a row end the train (the far end is gone or swamped).
const MAX_UNANSWERED: u32 = 3;
/// A train that stopped short of fresh is tried again after this, doubled per try up
/// to 64 times this.
const RETRY_AFTER: Duration = Duration::from_secs(10);
const MAX_RETRY_DOUBLINGS: u32 = 6;

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

/// Which connections need a train, remembering what each one's last train left, so a
/// connection is trained again only after traffic has pushed its estimate up since.
/// Shared by the silence watch and the train it started.
#[derive(Default)]
pub(super) struct Refresher {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Whether a train is running: one at a time per node.
    running: bool,
    /// Connection (quinn's stable id) → what its last train left.
    trained: HashMap<usize, Trained>,
}

/// What a connection's last train left.
#[derive(Debug, Clone, Copy)]
struct Trained {
    /// The estimate when it ended.
    left: Duration,
    /// When it ended.
    at: Instant,
    /// How long after `at` to try again, had it stopped short of fresh (`None` if it
    /// reached fresh: only traffic brings it back).
    retry_after: Option<Duration>,
}

impl Trained {
    /// After a train ending at `at` with estimate `left`; `before` is the connection's
    /// previous record, whose backoff this one doubles.
    fn new(left: Rtt, at: Instant, before: Option<&Trained>) -> Trained {
        let retry_after = (!left.is_fresh()).then(|| {
            before.and_then(|t| t.retry_after).map_or(RETRY_AFTER, |d| {
                (d * 2).min(RETRY_AFTER * (1 << MAX_RETRY_DOUBLINGS))
            })
        });
        Trained {
            left: left.smoothed,
            at,
            retry_after,
        }
    }
}

impl State {
    /// Whether `rtt` calls for a train at `now`, given what an earlier train left on
    /// `conn_id`.
    fn wants_train(&self, conn_id: usize, rtt: Rtt, now: Instant) -> bool {
        rtt.is_stale()
            && self.trained.get(&conn_id).map_or(true, |t| {
                rtt.smoothed > t.left * 2 + STALE_MARGIN
                    || t.retry_after.is_some_and(|d| now >= t.at + d)
            })
    }
}

impl Refresher {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Called by the silence watch on each look at `live`, the node's peer
    /// connections: starts a train over those that need one, unless one is running.
    pub fn look(&self, shared: &Arc<Shared>, live: &[(NodeId, quinn::Connection)]) {
        if !trains(shared.id, &shared.members()) {
            return;
        }
        let mut state = self.state();
        state
            .trained
            .retain(|id, _| live.iter().any(|(_, c)| c.stable_id() == *id));
        if state.running {
            return;
        }
        let stale: Vec<(NodeId, quinn::Connection)> = live
            .iter()
            .filter(|(_, c)| c.close_reason().is_none())
            .filter(|(_, c)| state.wants_train(c.stable_id(), Rtt::of(c), Instant::now()))
            .cloned()
            .collect();
        if stale.is_empty() {
            return;
        }
        state.running = true;
        drop(state);
        let (task_state, task_shared) = (self.state.clone(), shared.clone());
        shared.spawn(async move {
            let shutdown = task_shared.shutdown();
            for (peer, conn) in stale {
                let from = conn.rtt();
                let (end, probes) = train(&task_shared, &conn, &shutdown).await;
                debug!(peer, ?from, to = ?conn.rtt(), least = ?conn.min_rtt(), probes, outcome = ?end, "link RTT estimate refreshed");
                match end {
                    Train::Closed => {}
                    Train::Fresh | Train::Settled => {
                        let mut state = lock(&task_state);
                        let id = conn.stable_id();
                        let record = Trained::new(Rtt::of(&conn), Instant::now(), state.trained.get(&id));
                        state.trained.insert(id, record);
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
    /// The estimate stopped falling, or the probes ran out or went unanswered.
    Settled,
    /// The connection closed meanwhile.
    Closed,
    Shutdown,
}

/// Probes `conn` one at a time, each once the last was answered (so a busy machine
/// slows the train down rather than ending it), until its estimate is fresh. Returns
/// how it ended and how many probes it sent.
async fn train(shared: &Shared, conn: &quinn::Connection, shutdown: &Shutdown) -> (Train, u32) {
    let (mut unanswered, mut flat) = (0, 0);
    let mut lowest = conn.rtt();
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
            Some(true) => {
                unanswered = 0;
                let now = conn.rtt();
                if now < lowest {
                    (lowest, flat) = (now, 0);
                } else {
                    flat += 1;
                    if flat >= MAX_FLAT {
                        return (Train::Settled, sent + 1);
                    }
                }
            }
            Some(false) => {
                unanswered += 1;
                if unanswered >= MAX_UNANSWERED {
                    return (Train::Settled, sent + 1);
                }
            }
        }
    }
    let end = if Rtt::of(conn).is_fresh() {
        Train::Fresh
    } else {
        Train::Settled
    };
    (end, MAX_PROBES)
}

/// Whether an ACK came after `acks_before` within [`PROBE_WAIT`]; `None` at shutdown.
async fn answered(conn: &quinn::Connection, acks_before: u64, shutdown: &Shutdown) -> Option<bool> {
    let deadline = tokio::time::Instant::now() + PROBE_WAIT;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PROBE_GAP) => {}
            _ = shutdown.tripped() => return None,
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

    fn trained(left_ms: u64, at: Instant, retry_after: Option<Duration>) -> Trained {
        Trained {
            left: Duration::from_millis(left_ms),
            at,
            retry_after,
        }
    }

    #[test]
    fn only_the_two_highest_members_train() {
        let members = [1, 2, 3, 4, 5];
        let training: Vec<NodeId> = members
            .into_iter()
            .filter(|&id| trains(id, &members))
            .collect();
        assert_eq!(training, vec![4, 5]);
    }

    #[test]
    fn a_trained_link_is_trained_again_once_traffic_pushed_its_estimate_up() {
        let t0 = Instant::now();
        let mut state = State::default();
        assert!(state.wants_train(7, rtt(65, 200), t0));
        // A calm machine: the train reached 1 ms. A burst that lifts it to 6 ms waits,
        // 8 ms does not; time alone never brings it back.
        state.trained.insert(7, trained(1, t0, None));
        assert!(!state.wants_train(7, rtt(6, 200), t0 + Duration::from_secs(3600)));
        assert!(state.wants_train(7, rtt(8, 200), t0));
        assert!(
            state.wants_train(8, rtt(65, 200), t0),
            "other connections unaffected"
        );
    }

    #[test]
    fn a_train_stopped_short_is_retried_after_a_doubling_backoff() {
        let t0 = Instant::now();
        let mut state = State::default();
        // A busy machine: the train stopped at 40 ms.
        let first = Trained::new(rtt(40, 200), t0, None);
        assert_eq!(first.retry_after, Some(RETRY_AFTER));
        state.trained.insert(7, first);
        assert!(!state.wants_train(7, rtt(40, 200), t0 + RETRY_AFTER / 2));
        assert!(
            state.wants_train(7, rtt(86, 200), t0),
            "traffic pushed it up"
        );
        assert!(state.wants_train(7, rtt(40, 200), t0 + RETRY_AFTER));
        let second = Trained::new(rtt(40, 200), t0, Some(&first));
        assert_eq!(second.retry_after, Some(RETRY_AFTER * 2));
        let mut last = second;
        for _ in 0..10 {
            last = Trained::new(rtt(40, 200), t0, Some(&last));
        }
        assert_eq!(last.retry_after, Some(RETRY_AFTER * 64), "capped");
        // Reaching fresh ends the retries.
        assert_eq!(Trained::new(rtt(1, 200), t0, Some(&last)).retry_after, None);
    }
}
