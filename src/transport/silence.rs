//! The silence watch: drops a peer connection on which we kept sending and heard
//! nothing back for [`crate::protocol::Timing::peer_idle_timeout_ms`] (20 D).
//!
//! QUIC's own idle timeout cannot tell a quiet link from a stalled one, so it had to be
//! short, and then every quiet link (those between followers) paid a keep-alive at half
//! of it: a third of an idle 32-node cluster's CPU. Now QUIC's timeout is long (see
//! `tls::timed_transport`) and this watch covers links with traffic: a connection whose
//! ack-eliciting sends (messages, retransmissions, probes, pings) go unanswered is cut
//! after the silence timeout, as the short idle timeout did, so a peer behind a
//! partition or dead after `kill -9` is reported down and its link redialed instead of
//! waiting out QUIC's retransmission backoff. A quiet link is left alone until its own
//! keep-alive goes unanswered.
//!
//! One task per transport reads every connection's counters a few times per timeout:
//! far fewer wake-ups than a timer per connection.

use super::close;
use super::rtt_refresh::Refresher;
use super::shared::Shared;
use crate::exact_timer::ExactTimer;
use crate::protocol::NodeId;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::info;

/// Checks per silence timeout: a stall is cut between 1 and 1 + 1/8 timeouts after
/// the first unanswered send was seen.
const CHECKS_PER_TIMEOUT: u32 = 8;

/// What the watch remembers of one connection between checks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Seen {
    /// Datagrams received, as of the last check.
    heard: u64,
    /// The check that first saw `heard` at its current value.
    heard_at: Instant,
    /// Ack-eliciting frames sent (stream data and pings), as of the last check.
    asked: u64,
    /// The first check that saw us send with nothing heard since the last receipt.
    waiting_since: Option<Instant>,
}

/// One connection's counters at a check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Counters {
    /// UDP datagrams received on the connection.
    pub heard: u64,
    /// Ack-eliciting frames sent on it: stream frames and pings.
    pub asked: u64,
}

impl Counters {
    fn of(conn: &quinn::Connection) -> Counters {
        let stats = conn.stats();
        Counters {
            heard: stats.udp_rx.datagrams,
            asked: stats.frame_tx.stream + stats.frame_tx.ping,
        }
    }
}

impl Seen {
    /// A connection first seen with these counters at `at`.
    pub fn new(now: Counters, at: Instant) -> Seen {
        Seen {
            heard: now.heard,
            heard_at: at,
            asked: now.asked,
            waiting_since: None,
        }
    }

    /// Takes in the counters of a check at `at`; returns whether the connection has
    /// gone unanswered for `silence`. A receipt ends the wait even if a send in the
    /// same interval may have come after it: a stall keeps sending (retransmissions and
    /// probes), so the next check starts the wait again, at most one check later.
    pub fn check(&mut self, now: Counters, at: Instant, silence: Duration) -> bool {
        if now.heard != self.heard {
            self.waiting_since = None;
            self.heard_at = at;
        } else if now.asked != self.asked && self.waiting_since.is_none() {
            self.waiting_since = Some(at);
        }
        self.heard = now.heard;
        self.asked = now.asked;
        self.waiting_since
            .is_some_and(|since| at.duration_since(since) >= silence)
    }

    /// Whether nothing has arrived for `silence` as of `at` (a quiet link, or one
    /// whose peer is gone).
    pub fn unheard_for(&self, at: Instant, silence: Duration) -> bool {
        at.duration_since(self.heard_at) >= silence
    }
}

/// Runs until shutdown: cuts connections that stay unanswered for `shared.silence`.
pub(super) async fn watch(shared: Arc<Shared>) {
    let silence = shared.silence;
    let shutdown = shared.shutdown();
    let period = silence / CHECKS_PER_TIMEOUT;
    // A kernel timer: tokio's would wake this idle node twice per look.
    let mut timer = ExactTimer::new();
    let mut seen: HashMap<usize, Seen> = HashMap::new();
    let refresher = Refresher::default();
    loop {
        tokio::select! {
            _ = timer.sleep_until(Instant::now() + period) => {}
            _ = shutdown.tripped() => return,
        }
        let at = Instant::now();
        let live = shared.peer_connections();
        seen.retain(|id, _| live.iter().any(|(_, c)| c.stable_id() == *id));
        let mut silent_peers = Vec::new();
        for (peer, conn) in &live {
            let counters = Counters::of(conn);
            let entry = seen
                .entry(conn.stable_id())
                .or_insert_with(|| Seen::new(counters, at));
            if entry.check(counters, at, silence) {
                cut(&shared, *peer, conn);
                silent_peers.push(*peer);
            }
        }
        refresher.look(&shared, &live);
        // Both connections of a pair run between the same two sockets: if one went
        // unanswered, the other, quiet just as long, is no better; otherwise our
        // messages would move to it and wait out the timeout once more.
        for (peer, conn) in &live {
            let quiet = seen
                .get(&conn.stable_id())
                .is_some_and(|s| s.unheard_for(at, silence));
            if quiet && silent_peers.contains(peer) && conn.close_reason().is_none() {
                cut(&shared, *peer, conn);
            }
        }
    }
}

fn cut(shared: &Shared, peer: NodeId, conn: &quinn::Connection) {
    info!(peer, remote = %conn.remote_address(), silence = ?shared.silence, "peer connection silent; dropping it");
    shared.stats.add_silenced();
    conn.close(close::SILENT, b"nothing heard back");
}

#[cfg(test)]
mod tests {
    use super::*;

    const SILENCE: Duration = Duration::from_secs(6);

    fn counters(heard: u64, asked: u64) -> Counters {
        Counters { heard, asked }
    }

    #[test]
    fn sends_unanswered_for_the_timeout_cut_the_connection() {
        let t0 = Instant::now();
        let mut seen = Seen::new(counters(10, 10), t0);
        assert!(
            !seen.check(counters(10, 11), t0, SILENCE),
            "the wait starts"
        );
        assert!(!seen.check(counters(10, 12), t0 + SILENCE / 2, SILENCE));
        assert!(seen.check(counters(10, 13), t0 + SILENCE, SILENCE));
    }

    #[test]
    fn any_receipt_ends_the_wait() {
        let t0 = Instant::now();
        let mut seen = Seen::new(counters(10, 10), t0);
        seen.check(counters(10, 11), t0, SILENCE);
        assert!(!seen.check(counters(11, 12), t0 + SILENCE / 2, SILENCE));
        assert!(
            !seen.check(counters(11, 12), t0 + SILENCE * 3, SILENCE),
            "quiet since"
        );
        // A stall after that: the wait starts at the first send seen without a receipt.
        assert!(!seen.check(counters(11, 13), t0 + SILENCE * 4, SILENCE));
        assert!(seen.check(counters(11, 14), t0 + SILENCE * 5, SILENCE));
    }

    #[test]
    fn a_quiet_link_is_never_cut() {
        let t0 = Instant::now();
        let mut seen = Seen::new(counters(10, 10), t0);
        for k in 1..100 {
            assert!(!seen.check(counters(10, 10), t0 + SILENCE * k, SILENCE));
        }
        // Its keep-alive, answered within the same interval, does not start a wait.
        assert!(!seen.check(counters(11, 11), t0 + SILENCE * 100, SILENCE));
        assert!(!seen.check(counters(11, 11), t0 + SILENCE * 200, SILENCE));
    }

    #[test]
    fn unheard_counts_from_the_last_receipt() {
        let t0 = Instant::now();
        let mut seen = Seen::new(counters(10, 10), t0);
        assert!(!seen.unheard_for(t0 + SILENCE / 2, SILENCE));
        assert!(seen.unheard_for(t0 + SILENCE, SILENCE));
        seen.check(counters(11, 10), t0 + SILENCE, SILENCE);
        assert!(!seen.unheard_for(t0 + SILENCE * 3 / 2, SILENCE));
    }

    #[test]
    fn a_link_that_only_receives_is_not_cut() {
        // Classic followers only acknowledge heartbeats: no ack-eliciting sends.
        let t0 = Instant::now();
        let mut seen = Seen::new(counters(10, 0), t0);
        for k in 1..20 {
            assert!(!seen.check(counters(10 + k, 0), t0 + SILENCE * k as u32, SILENCE));
        }
    }
}
