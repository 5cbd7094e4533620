//! The invariants' names and what a broken one looks like: one [`Violation`] type for
//! the history checks, the simulator's own checks and the model checker.

use crate::history::Entry;
use crate::protocol::{Epoch, Millis, NodeId};
use std::fmt;

/// The invariants of docs/design.md#invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// I1: accepted and declared epochs strictly increase, across restarts.
    Fencing,
    /// I2: no term declared twice by a node; no two nodes declare one term while quiet.
    Uniqueness,
    /// I3: an epoch is flushed to the cells before anything reveals it.
    Durability,
    /// I4: a restarted node starts as a candidate and never acts on its old role.
    Recovery,
    /// I5: after the last fault plus the bound, one coordinator that all live nodes follow.
    Convergence,
    /// I6 (quorum mode): no two coordinators' terms of office overlap in real time.
    NoOverlap,
    /// I7 (quorum mode): each term has at most one coordinator, ever.
    OnePerTerm,
    /// Q6 (quorum mode; docs/contributing.md#model-checking-srcmodel-testsmodel_checkrs): a node raises the term only if a
    /// live majority was reachable at some point of its election. Checked by the model
    /// checker, which sees who was reachable.
    MajorityReached,
    /// I8 (both modes, nodes with estimates): no node declares while a live eligible
    /// node of higher `(estimate, id)` was reachable by it throughout its election
    /// (docs/design.md#i8-elected-by-data). Checked by the model checker and the
    /// simulator, which see every node's estimate.
    ElectedByData,
    /// Q4 for readers (quorum mode, docs/design.md#asking-who-leads): an answer to "who
    /// leads?" that names X at time t comes from within X's office. Checked by the
    /// simulator and the model checker, which ask at every step.
    LeaderAnswer,
    /// Not in docs/design.md's list: two nodes held different member lists under one
    /// identity (`ConfigId`), so "newer list" no longer names one list
    /// (src/protocol/membership.rs). Found by the simulator, which sees every stored list.
    ListIdentity,
    /// Not in docs/design.md's list: the machine broke its own contract (flagged an honest peer as
    /// misbehaving, stopped advancing its deadline, flooded the network). Found by the
    /// simulator, which knows every peer is honest.
    Protocol,
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Invariant::Fencing => "I1 fencing",
            Invariant::Uniqueness => "I2 uniqueness",
            Invariant::Durability => "I3 durability",
            Invariant::Recovery => "I4 recovery",
            Invariant::Convergence => "I5 convergence",
            Invariant::NoOverlap => "I6 no overlap",
            Invariant::OnePerTerm => "I7 one coordinator per term",
            Invariant::MajorityReached => "Q6 majority reached before raising the term",
            Invariant::ElectedByData => "I8 elected by data",
            Invariant::LeaderAnswer => "Q4 an answer naming a coordinator lies within its office",
            Invariant::ListIdentity => "one member list per identity",
            Invariant::Protocol => "machine contract",
        })
    }
}

/// One broken invariant: which, where, when and why, in words a human can check
/// against the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant broke.
    pub invariant: Invariant,
    /// The node that broke it (0 for the cluster as a whole).
    pub node: NodeId,
    /// When, on the history's (or the model's) clock.
    pub at_ms: Millis,
    /// Why, in words that can be checked against the history or the trace.
    pub explanation: String,
}

impl Violation {
    /// `invariant` broken on `node` at `at_ms`, for the reason given.
    pub fn new(invariant: Invariant, node: NodeId, at_ms: Millis, explanation: String) -> Self {
        Violation {
            invariant,
            node,
            at_ms,
            explanation,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} violated at {} ms on node {}: {}",
            self.invariant, self.at_ms, self.node, self.explanation
        )
    }
}

/// `invariant` broken by this history entry.
pub(super) fn violation(invariant: Invariant, entry: &Entry, explanation: String) -> Violation {
    Violation::new(invariant, entry.node, entry.at_ms, explanation)
}

/// An optional epoch in words: `none` or `term@leader`.
pub(super) fn show(epoch: Option<Epoch>) -> String {
    epoch.map_or_else(|| "none".to_string(), |e| e.to_string())
}
