//! Store recovery: what a node with an empty store does before it may vote or lead.
//!
//! An empty store is either a first boot or a lost one (a replaced disk, a container or
//! witness without a volume, a data dir deleted by hand); the node cannot tell which.
//! A lost store forgot every term it accepted and every lease promise it made, so if it
//! voted at once it could help a second candidate to a term it already helped another
//! to: two holders of one fencing token. The rule, in both modes:
//!
//! 1. Wait D after start before asking anything: a declaration the lost store acked
//!    before the loss is established within D − heartbeat of being sent or never (the
//!    lease span, `super::timing::lease_span_ms`), and every promise it made has run
//!    out by then.
//! 2. Then ask every peer for its highest term (`TermQuery`) and count the peers that
//!    report (`TermReport`), asking again every T' until enough have answered.
//! 3. Enough is `M − q + 1` of the *other* members (M members, majority q): together
//!    with any majority that accepted a term before the loss they share at least one
//!    member besides this node, whose term cell holds that term. The node raises its
//!    own term cell to the highest term reported (persisted) and from then on follows the
//!    usual rules, which accept only declarations above the term cell (Q1).
//!
//! Until then it accepts nothing, acks nothing, grants no pre-vote, answers no Election
//! and declares nothing; it does answer probes and term queries.
//!
//! Two stores lost in a row (the second while the first still recovers) must not vouch
//! for each other (quorum mode; classic keeps rules 1–3 alone, see below):
//! 4. A completed recovery is marked in the cells (`Cells::recovered`), written with
//!    the raised term. A recovering node whose store lacks the mark (a lost store, or
//!    one that never completed a recovery: it cannot tell which) and that has seen an
//!    epoch accepted or declared (a claim, a heartbeat, an Election or Ack naming one)
//!    answers a query with `TermUnknown`, which counts toward no recovery: its own
//!    store may have forgotten a higher term. Terms seen only in pre-votes prove
//!    nothing was accepted: a fresh cluster whose first pre-vote failed must still
//!    start. A marked store recovering again (it still holds no term) knows what it
//!    accepted since, and vouches.
//! 5. Once the asking node has seen a term above 0, a report of 0 counts for nothing:
//!    it came from a peer that had seen nothing when it answered (every query carries
//!    the asker's term, so a later answer reports at least that), which may be a
//!    second lost store. While nobody has seen any term, every report counts: that is
//!    how a fresh cluster, every store empty, starts.
//! With both, up to `q − 1` lost stores leave every majority a member that remembers
//! (`M − q + 1` reporters with stores are needed), so four or more members survive two
//! lost in a row. Losing a majority's stores (two of three) cannot be told from a
//! fresh cluster by anyone, and a term only they accepted is gone: `bully recover`.
//! Nodes that stop vouching never stall a quorum cluster: a quorum coordinator needs a
//! majority of acceptances, so whenever one leads, a majority's stores know their
//! terms, at least `M − q + 1` of them others. Classic mode keeps every report
//! counting: a classic node leads alone, and nodes still recovering when it declared
//! would wait for each other for ever.
//! A damaged or rolled-back `db` is refused at open (src/storage/mod.rs); a whole data
//! dir restored from an older copy is not empty and is not detected (docs/guarantees.md).
//!
//! The same queries serve a forced recovery (`bully recover`, src/protocol/majority_loss.rs,
//! quorum mode): each survivor stamps its new list one above the highest term *it* saw,
//! but the old majority that could tell every term is gone, so a term that one survivor
//! alone saw (its own declaration, acked by members now lost) could be declared again by
//! the others: two coordinators of one term (seed 228623 of the simulation). Until
//! **every** other survivor has reported ([`Recovery::after_forced`]), the node votes and
//! leads nothing; its next declaration is then above every term any survivor saw. Its
//! store forgot nothing, so it vouches all along.

use super::epoch::{Millis, NodeId};
use super::timing::Timing;
use std::collections::{BTreeMap, BTreeSet};

/// The state of one recovery, from start until enough peers reported their terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Recovery {
    /// When the next `TermQuery` goes out (the first one D after start).
    query_at: Millis,
    /// Whether a query went out: only reports to one of ours count.
    asked: bool,
    /// Peers that reported their term since the first query, with the term each
    /// reported (the highest it had seen).
    heard: BTreeMap<NodeId, u64>,
    /// How many distinct peers must report.
    needed: usize,
    /// A message showed an epoch that some node accepted or declared (a claim, a
    /// heartbeat, a Resign, an Election or Ack naming its accepted epoch): terms exist
    /// that this store may have forgotten, so it no longer vouches (rule 4). Terms seen
    /// in pre-votes and elections alone prove nothing was accepted.
    claimed: bool,
    /// After a forced recovery: every other voter must report, not `M − q + 1`, and the
    /// store (which forgot nothing) vouches all along.
    every: bool,
}

impl Recovery {
    /// A recovery for a node with `peers` other members, `majority` of all members
    /// needed for a quorum, started at `now`.
    pub(super) fn new(peers: usize, majority: usize, timing: &Timing, now: Millis) -> Recovery {
        Recovery {
            query_at: now + timing.suspect_after_ms,
            asked: false,
            heard: BTreeMap::new(),
            needed: reports_needed(peers + 1, majority),
            claimed: false,
            every: false,
        }
    }

    /// The wait of a survivor of a forced recovery whose list holds `peers` other
    /// voters, started at `now`: it asks at once (its store lost nothing, so no promise
    /// needs to run out) and needs every one of them.
    pub(super) fn after_forced(peers: usize, now: Millis) -> Recovery {
        Recovery {
            query_at: now,
            asked: false,
            heard: BTreeMap::new(),
            needed: peers,
            claimed: false,
            every: true,
        }
    }

    /// The node stored another member list while recovering: from now on reports count
    /// from `others` (the voters of that list but itself), `majority` of its voters
    /// needed for a quorum. A list committed after the forgotten term carries a stamp at
    /// or above it, which the node observed when it stored the list (`membership.rs`).
    /// `votes`: whether this node is a voter of that list itself (a learner is not: the
    /// majorities it must meet lie among the others alone).
    pub(super) fn relist(&mut self, others: &BTreeSet<NodeId>, majority: usize, votes: bool) {
        self.heard.retain(|p, _| others.contains(p));
        self.needed = if self.every {
            others.len()
        } else {
            reports_needed(others.len() + usize::from(votes), majority)
        };
    }

    /// When the machine must act next for this recovery (send or repeat the query).
    pub(super) fn deadline(&self) -> Millis {
        self.query_at
    }

    /// Whether the query is due at `now`; if so, the caller sends it and the next one is
    /// scheduled T' later (peers that were down may have come up).
    pub(super) fn query_due(&mut self, timing: &Timing, now: Millis) -> bool {
        if now < self.query_at {
            return false;
        }
        self.asked = true;
        self.query_at = now + timing.coordinator_timeout_ms;
        true
    }

    /// Counts a report of `term` from `from`; whether enough peers have now reported,
    /// for a node that has seen `seen` (see [`Recovery::complete`]).
    pub(super) fn report(&mut self, from: NodeId, term: u64, seen: u64) -> bool {
        if self.asked {
            self.heard.insert(from, term);
        }
        self.complete(seen)
    }

    /// Whether enough peers have reported, for a node that has seen `seen`. Once it has
    /// seen a term above 0, a report of 0 counts for nothing: it came from a peer that
    /// had seen nothing when it answered, which may be a second lost store (a peer with
    /// a store that accepted a term reports it, and every later query carries our term).
    /// While nobody has seen a term, every report counts: a fresh cluster starts so.
    pub(super) fn complete(&self, seen: u64) -> bool {
        self.asked && self.counted(seen) >= self.needed
    }

    /// How many reports count for a node that has seen `seen`.
    fn counted(&self, seen: u64) -> usize {
        self.heard
            .values()
            .filter(|&&term| term > 0 || seen == 0)
            .count()
    }

    /// A message showed an accepted or declared epoch (see [`Recovery::claimed`]).
    pub(super) fn saw_claim(&mut self) {
        self.claimed = true;
    }

    /// Whether this store may have forgotten a term it accepted, as far as a message
    /// showed (rule 4): an epoch was claimed since the start of a store recovery. A
    /// forced recovery's store forgot nothing.
    pub(super) fn may_have_forgotten(&self) -> bool {
        self.claimed && !self.every
    }

    /// How many peers have reported, and how many must.
    pub(super) fn progress(&self) -> (usize, usize) {
        (self.heard.len(), self.needed)
    }
}

/// Other members that must report so that they meet every majority of `members` in a
/// member other than the asking node: a majority holds at least `majority − 1` of the
/// `members − 1` others, so `members − majority + 1` of them always include one.
pub fn reports_needed(members: usize, majority: usize) -> usize {
    (members + 1).saturating_sub(majority).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_needed_meet_every_majority_outside_the_asker() {
        for members in 2..=32usize {
            let majority = crate::protocol::membership::majority_of(members);
            let needed = reports_needed(members, majority);
            let others = members - 1;
            // Any majority keeps at least majority - 1 others; together with `needed`
            // others they exceed the others there are, so they share one.
            assert!(needed + (majority - 1) > others, "members {members}");
            // And no fewer would do.
            assert!((needed - 1) + (majority - 1) <= others, "members {members}");
        }
        assert_eq!(reports_needed(3, 2), 2);
        assert_eq!(reports_needed(5, 3), 3);
        assert_eq!(reports_needed(4, 3), 2);
    }

    #[test]
    fn reports_count_only_after_the_first_query() {
        let timing = Timing::default();
        let mut r = Recovery::new(2, 2, &timing, 1000);
        assert!(
            !r.report(2, 4, 4),
            "a report before any query counts for nothing"
        );
        assert!(!r.query_due(&timing, 1000 + timing.suspect_after_ms - 1));
        assert!(r.query_due(&timing, 1000 + timing.suspect_after_ms));
        assert!(!r.report(2, 4, 4));
        assert!(!r.report(2, 4, 4), "the same peer twice is one report");
        assert!(r.report(3, 4, 4));
        assert_eq!(r.progress(), (2, 2));
    }

    #[test]
    fn a_report_of_term_zero_counts_only_while_no_term_is_known() {
        let timing = Timing::default();
        let mut r = Recovery::new(2, 2, &timing, 0);
        assert!(r.query_due(&timing, timing.suspect_after_ms));
        // A fresh cluster: nobody has seen a term, and both reports of 0 count.
        assert!(!r.report(2, 0, 0));
        assert!(r.report(3, 0, 0));
        // Once a term is known, the report of 0 (a second lost store, say) does not.
        assert!(!r.complete(5));
        assert!(!r.report(2, 5, 5), "one report of the term is one of two");
        assert!(r.report(3, 5, 5), "and the second makes two");
    }
}
