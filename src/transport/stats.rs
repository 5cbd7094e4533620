//! The transport's counters: [`TransportStats`] for metrics and tests, and the atomics
//! every task counts into. Messages themselves are counted once, by kind, where the node
//! hands them over and takes them in (`node/shared/metrics.rs`); the transport counts
//! what only it sees: drops, bad frames, refusals, connects.

use super::mismatch::MismatchKind;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportStats {
    /// Messages dropped: peer unreachable, queue full, or queued before a reconnect.
    pub messages_dropped: u64,
    /// Frames refused (truncated, oversized, wrong version, undecodable); each one
    /// closed its connection.
    pub bad_frames: u64,
    /// Incoming handshakes or connections refused (no or foreign certificate, unknown
    /// peer, client certificate on the peer protocol).
    pub connections_refused: u64,
    /// Outbound peer connections established (first connects and reconnects).
    pub peer_connects: u64,
    /// Peer connections cut because what we sent went unanswered for the silence
    /// timeout (a dead or cut-off peer).
    pub connections_silenced: u64,
    /// Probes sent to bring a quiet link's RTT estimate back down (see
    /// `rtt_refresh`): a few dozen per link after a busy start, then none.
    pub rtt_probes: u64,
    /// Peer connections refused because the two configs disagree, by what differs;
    /// counted at both ends (the refused end learns the reason from the close).
    pub config_refusals: ConfigRefusals,
}

/// Peer connections refused over config, per [`MismatchKind`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRefusals {
    pub members: u64,
    pub mode: u64,
    pub timing: u64,
}

impl ConfigRefusals {
    /// The count for one kind.
    pub fn get(&self, kind: MismatchKind) -> u64 {
        match kind {
            MismatchKind::Members => self.members,
            MismatchKind::Mode => self.mode,
            MismatchKind::Timing => self.timing,
        }
    }
}

/// The live counters behind [`TransportStats`], shared by every task.
#[derive(Default)]
pub(super) struct Counters {
    dropped: AtomicU64,
    bad_frames: AtomicU64,
    refused: AtomicU64,
    connects: AtomicU64,
    silenced: AtomicU64,
    rtt_probes: AtomicU64,
    /// Per [`MismatchKind::ALL`].
    config_refusals: [AtomicU64; 3],
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    pub fn add_dropped(&self, n: u64) {
        add(&self.dropped, n);
    }
    pub fn add_bad_frame(&self) {
        add(&self.bad_frames, 1);
    }
    pub fn add_refused(&self) {
        add(&self.refused, 1);
    }
    pub fn add_connect(&self) {
        add(&self.connects, 1);
    }
    pub fn add_silenced(&self) {
        add(&self.silenced, 1);
    }
    pub fn add_rtt_probe(&self) {
        add(&self.rtt_probes, 1);
    }
    pub fn add_config_refusal(&self, kind: MismatchKind) {
        add(&self.config_refusals[kind_index(kind)], 1);
    }
    pub fn snapshot(&self) -> TransportStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let refusals = |kind| get(&self.config_refusals[kind_index(kind)]);
        TransportStats {
            messages_dropped: get(&self.dropped),
            bad_frames: get(&self.bad_frames),
            connections_refused: get(&self.refused),
            peer_connects: get(&self.connects),
            connections_silenced: get(&self.silenced),
            rtt_probes: get(&self.rtt_probes),
            config_refusals: ConfigRefusals {
                members: refusals(MismatchKind::Members),
                mode: refusals(MismatchKind::Mode),
                timing: refusals(MismatchKind::Timing),
            },
        }
    }
}

fn kind_index(kind: MismatchKind) -> usize {
    MismatchKind::ALL
        .iter()
        .position(|&k| k == kind)
        .unwrap_or(0)
}
