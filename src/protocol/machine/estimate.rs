//! est(S): elections ordered by `(estimate, id)` instead of the ID alone
//! (docs/design.md#elected-by-data-est). A node has an estimate once the runtime gave it
//! one ([`super::Event::SetEstimate`]); until then, and forever in a cluster without
//! estimate sources, every rule reads exactly as before. Rules:
//!
//! - rank: a node's rank is `(est, id)`, `est` its fresh estimate while it is eligible,
//!   else 0. Its own estimate is fresh until the instant the runtime gave with it; a
//!   peer's is the one its newest message carried (`Message::est`).
//! - ranked_election: a ranked node sends its Election to every peer that may lead
//!   (not only higher IDs), elects at once when its leader fails (no defer: it cannot
//!   know who is above it), and answers an Election only from a lower rank; in office it
//!   answers every Election with its epoch (the coordinator is kept).
//! - kept: a ranked node follows any coordinator: no bully, no handover, no re-declaring
//!   over newer news. Estimates order elections only; a standby whose estimate passes
//!   the primary's does not preempt it.
//! - est_up_to_date (quorum): a voter refuses a candidate whose estimate is below one it
//!   knows of from a live eligible peer (heard within D, not since resigned or down)
//!   or its own (Raft's up-to-date rule in Bully's order).

use super::config::Flaw;
use super::Machine;
use crate::protocol::epoch::{Millis, NodeId};
use std::collections::BTreeMap;

/// What the machine knows of estimates: its own and its peers'.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(super) struct Estimates {
    /// The runtime's latest report: the value (`None`: none usable) and until when it
    /// is fresh. `None` before any report: the node is not ranked.
    own: Option<(Option<u64>, Millis)>,
    /// The own value while fresh, as of the last event (refreshed by
    /// [`Machine::refresh_estimate`] before each event is handled).
    fresh: Option<u64>,
    /// Each peer's estimate from its newest message, and when it arrived.
    peers: BTreeMap<NodeId, (u64, Millis)>,
}

impl Machine {
    /// The runtime measured our estimate: `value` (none if the source failed or printed
    /// nothing usable), fresh until `fresh_until`.
    pub(super) fn on_estimate(&mut self, value: Option<u64>, fresh_until: Millis, now: Millis) {
        self.estimates.own = Some((value, fresh_until));
        self.refresh_estimate(now);
    }

    /// Drops an own estimate past its freshness bound (a paused node's old value never
    /// wins an election).
    pub(super) fn refresh_estimate(&mut self, now: Millis) {
        self.estimates.fresh = match self.estimates.own {
            Some((value, until)) if now <= until => value,
            _ => None,
        };
    }

    /// Whether this node has an estimate source, so elections go by rank.
    pub(super) fn ranked(&self) -> bool {
        self.estimates.own.is_some()
    }

    /// The estimate our messages carry (`Message::est`): `None` when not ranked.
    pub(super) fn envelope_est(&self) -> Option<u64> {
        self.ranked().then(|| self.own_est())
    }

    /// Our estimate as it counts in a rank: fresh and eligible, else 0.
    pub fn own_est(&self) -> u64 {
        match self.estimates.fresh {
            Some(value) if self.eligible => value,
            _ => 0,
        }
    }

    /// Our estimate as the runtime last reported it and whether it is still fresh, for
    /// status readers (`None`: no estimate source or no value).
    pub fn estimate(&self) -> Option<(u64, bool)> {
        let (value, _) = self.estimates.own?;
        value.map(|v| (v, self.estimates.fresh == Some(v)))
    }

    /// A peer's message carried `est`: remember it (or forget: it has no source).
    pub(super) fn note_est(&mut self, from: NodeId, est: Option<u64>, now: Millis) {
        match est {
            Some(value) => self.estimates.peers.insert(from, (value, now)),
            None => self.estimates.peers.remove(&from),
        };
    }

    /// A peer went down or resigned: its estimate no longer speaks for a live,
    /// eligible node.
    pub(super) fn forget_est(&mut self, peer: NodeId) {
        self.estimates.peers.remove(&peer);
    }

    /// Whether this node is above `peer` in the election order: by `(est, id)` when
    /// ranked, by ID otherwise. The sabotage [`Flaw::IdOrder`] compares IDs only.
    pub(super) fn above(&self, peer: NodeId) -> bool {
        if !self.ranked() || self.config.has(Flaw::IdOrder) {
            return self.config.id > peer;
        }
        let theirs = self.estimates.peers.get(&peer).map_or(0, |&(v, _)| v);
        (self.own_est(), self.config.id) > (theirs, peer)
    }

    /// est_up_to_date (quorum): whether `candidate`'s estimate is at least every one we
    /// know of from a live eligible node (ours included, peers heard within D).
    pub(super) fn est_up_to_date(&self, candidate: NodeId, now: Millis) -> bool {
        if !self.ranked() || self.config.has(Flaw::IdOrder) {
            return true;
        }
        let window = self.config.timing.suspect_after_ms;
        let theirs = self.estimates.peers.get(&candidate).map_or(0, |&(v, _)| v);
        let best = self
            .estimates
            .peers
            .iter()
            .filter(|&(&p, &(_, at))| p != candidate && now < at.saturating_add(window))
            .map(|(_, &(v, _))| v)
            .chain(std::iter::once(self.own_est()))
            .max()
            .unwrap_or(0);
        theirs >= best
    }
}
