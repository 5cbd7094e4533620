//! Who and when: node IDs, the time unit, epochs (the fencing token) and the durable
//! cells. Every other file of the protocol builds on these.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node's identity. Bound to its TLS certificate, so it is never taken from a message.
pub type NodeId = u64;

/// Virtual or real time in milliseconds from an arbitrary origin. The core never reads
/// a clock; the caller passes `now` with every event.
pub type Millis = u64;

/// The fencing token: ordered by term, then leader. A database primary can refuse
/// writes that carry an older epoch than the newest it has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Epoch {
    /// Declared at one above the highest term its leader had seen.
    pub term: u64,
    /// The node that declared this epoch.
    pub leader: NodeId,
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.term, self.leader)
    }
}

/// What must survive a crash. Written as one transaction and flushed before any action
/// that depends on it runs (invariant I3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Cells {
    /// Highest term this node has declared or accepted; the next declaration is above it.
    pub term: u64,
    /// The newest epoch this node accepted or declared; later ones must be strictly higher.
    pub accepted: Option<Epoch>,
    /// How many times the node has started; lets logs and checkers tell lives apart.
    pub incarnation: u64,
    /// The longest D (`suspect_after_ms`) under which a promise of this node may still
    /// bind: each life stores the larger of its own D and, until its restart hold-off
    /// is over, the D its previous life stored. A restart holds off for this D, not
    /// the one it restarts with, so a rolling restart that lowers D keeps the old
    /// lease promises (docs/design.md#q5-restart-hold-off). 0: a store written before
    /// this cell existed (the hold-off then uses the D the node starts with).
    /// Not in the history's JSON: the event log's `Persisted` lines keep their form.
    #[serde(default, skip_serializing)]
    pub promise_ms: u64,
    /// This store has completed a store recovery (src/protocol/recovery.rs) since it was
    /// created: even while its cells hold no term it knows what it accepted, so its
    /// answer to a term query vouches. A lost store, and one that never completed a
    /// recovery, cannot tell itself from the other and does not. Not in the history's
    /// JSON, like `promise_ms`.
    #[serde(default, skip_serializing)]
    pub recovered: bool,
    /// A forced recovery (`bully recover`) gave this node up: a survivor refused it as
    /// a member the survivors' new list leaves out. For good: it never leads, votes or
    /// acks again (docs/design.md#recovery-from-a-lost-majority); only a wiped data dir
    /// ends it. Not in the history's JSON, like `promise_ms`.
    #[serde(default, skip_serializing)]
    pub given_up: bool,
    /// A forced recovery (`bully recover`) stored this node's list and no other survivor
    /// has reported its term since: in quorum mode the node votes and leads nothing
    /// until every other survivor has, so that no term a survivor alone saw is used
    /// again (src/protocol/majority_loss.rs). Not in the history's JSON, like
    /// `promise_ms`.
    #[serde(default, skip_serializing)]
    pub awaits_survivors: bool,
}

impl Epoch {
    /// The fencing token handed to hooks, HTTP and the CLI: one integer that is unique
    /// per leadership and ordered like the epoch, `term * 2^20 + leader` (IDs are below
    /// 2^20, see [`MAX_NODE_ID`]). The same form in both modes: in classic mode two
    /// nodes can declare one term in a partition, so the leader must be folded in; in
    /// quorum mode one term has one holder (Q1), and using the same form there keeps the
    /// token rising when a cluster switches modes (a database that fences on ">= the
    /// highest token seen" would refuse every later primary if it fell to the term).
    pub fn token(&self) -> u64 {
        self.term
            .saturating_mul(1 << TOKEN_LEADER_BITS)
            .saturating_add(self.leader)
    }
}

/// Bits of a fencing token that hold the leader ID.
pub const TOKEN_LEADER_BITS: u32 = 20;

/// The highest node ID a config may use, so a fencing token stays unique.
pub const MAX_NODE_ID: NodeId = (1 << TOKEN_LEADER_BITS) - 1;

#[cfg(test)]
mod tests {
    use super::{Epoch, MAX_NODE_ID};

    #[test]
    fn the_token_rises_with_the_epoch_whatever_the_mode() {
        // A classic-mode leadership, then the cluster restarts in quorum mode and elects
        // a lower ID at the next term: the token must not fall (it did when quorum mode
        // handed out the bare term).
        let classic = Epoch { term: 7, leader: 5 };
        let quorum = Epoch { term: 8, leader: 1 };
        assert!(quorum.token() > classic.token());
        // Ordered like the epoch, unique per (term, leader), for every legal ID.
        let epochs = [
            Epoch { term: 0, leader: 1 },
            Epoch { term: 1, leader: 1 },
            Epoch { term: 1, leader: 2 },
            Epoch {
                term: 1,
                leader: MAX_NODE_ID,
            },
            Epoch { term: 2, leader: 1 },
        ];
        for pair in epochs.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].token() < pair[1].token(), "{pair:?}");
        }
        assert_eq!(Epoch { term: 3, leader: 2 }.token(), 3 * (1 << 20) + 2);
    }
}
