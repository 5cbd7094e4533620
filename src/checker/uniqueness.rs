//! I2 uniqueness: no node declares a term twice (the per-node rule on `Declared` facts
//! the model checker applies), and no two nodes declare one term while the cluster is
//! quiet ([`check_unique_terms`], over a history, inside quiet windows).

use super::invariant::{Invariant, Violation};
use crate::history::{Entry, Record};
use crate::protocol::{Body, Epoch, Fact, Millis, NodeId, Timing};
use std::collections::{BTreeMap, HashMap, HashSet};

/// I2, per node, on the machine's `Declared` facts: a node declares only terms above
/// the last one it declared (`last`, 0 before any), so it never declares one twice.
/// (The history form, [`super::Safety`], reads declarations off the persisted cells.)
pub fn check_declares_anew(node: NodeId, at_ms: Millis, last: u64, term: u64) -> Option<Violation> {
    (term <= last).then(|| {
        let explanation =
            format!("declares term {term} again (it already declared up to term {last})");
        Violation::new(Invariant::Uniqueness, node, at_ms, explanation)
    })
}

/// The epoch this entry declares, if it is the machine's `Declared` fact.
pub(super) fn declared(entry: &Entry) -> Option<Epoch> {
    match entry.record {
        Record::Fact(Fact::Declared { epoch }) => Some(epoch),
        _ => None,
    }
}

/// Every declaration in a history, in order, as the machines reported them. Public so
/// the chaos runner counts elections the same way the I2 check finds them.
pub fn declarations(entries: &[Entry]) -> Vec<(Millis, NodeId, Epoch)> {
    entries
        .iter()
        .filter_map(|e| declared(e).map(|epoch| (e.at_ms, e.node, epoch)))
        .collect()
}

/// A message whose loss leaves a live node acting on a stale picture until it suspects
/// the sender's office: a declaration (it goes on believing in the leader the
/// declaration replaced) or a member list (it goes on reading who gets an Election and
/// who may lead from the list the lost one replaced; classic seed 7746024 of the
/// million run: a coordinator crashed while seating a learner, the learner took itself
/// for a voter, the node that lost the list skipped it and both declared one term).
fn misleads_when_lost(body: &Body) -> bool {
    matches!(body, Body::Coordinator { .. } | Body::Members { .. })
}

/// A message whose loss leaves its election without the Answer that would have held
/// its sender back: that sender declares when its election ends, which a starting node
/// puts off until its start-up wait ends (classic seed 665150 of the leader-answer
/// million run: an Election lost under message loss 30 ms before the heal, and the
/// sender, restarted 300 ms earlier, declared 280 ms after the heal beside the node
/// that should have answered it).
fn unanswered_when_lost(body: &Body) -> bool {
    matches!(body, Body::Election { .. } | Body::Answer)
}

/// Time intervals (inclusive) in which some fault was happening: a point for each
/// fault record, the whole span of every pause, partition and lossy period
/// (open-ended when it never ends), and `stale_view_ms` after a declaration or member
/// list that a live node lost (its sender crashed mid-broadcast), see
/// [`misleads_when_lost`].
fn disturbed_intervals(entries: &[Entry], quiet: QuietWindow) -> Vec<(Millis, Millis)> {
    let mut open: HashMap<(NodeId, bool), Millis> = HashMap::new();
    let mut down: HashSet<NodeId> = HashSet::new();
    let mut spans = Vec::new();
    for entry in entries {
        let t = entry.at_ms;
        match &entry.record {
            Record::Crashed => {
                down.insert(entry.node);
            }
            Record::Started { .. } => {
                down.remove(&entry.node);
            }
            Record::Lost { msg, .. }
                if misleads_when_lost(&msg.body) && !down.contains(&entry.node) =>
            {
                spans.push((t, t + quiet.stale_view_ms));
            }
            Record::Lost { msg, .. } if unanswered_when_lost(&msg.body) => {
                spans.push((t, t + quiet.election_ms));
            }
            _ => {}
        }
        if !entry.record.is_fault() {
            continue;
        }
        spans.push((t, t));
        match entry.record {
            Record::Paused => {
                open.entry((entry.node, true)).or_insert(t);
            }
            Record::Partitioned { .. } | Record::Lossy { .. } => {
                open.entry((entry.node, false)).or_insert(t);
            }
            // A restart ends a pause too (the paused process was killed).
            Record::Resumed | Record::Started { .. } | Record::Crashed => {
                if let Some(start) = open.remove(&(entry.node, true)) {
                    spans.push((start, t));
                }
            }
            Record::Healed => {
                if let Some(start) = open.remove(&(entry.node, false)) {
                    spans.push((start, t));
                }
            }
            _ => {}
        }
    }
    spans.extend(open.into_values().map(|start| (start, Millis::MAX)));
    spans
}

/// The cluster-wide part of I2: no two nodes declare the same term while the cluster is
/// quiet.
///
/// Definition: two declarations of one term by different nodes, at `t1 <= t2`, are a
/// violation only if nothing disturbed the cluster during `[t1 - quiet.before_ms, t2]`:
/// no fault record (crash, (re)start, pause, resume, partition, loss, heal, peer-down
/// notice, eligibility change) in that span, no pause, partition or loss in effect, and
/// no live node still misled by a declaration it lost (`quiet.stale_view_ms`). Message
/// delays must also stay below T/2 (the simulator's do; a real network's only usually
/// do, so real-process tests should treat this check as advisory).
///
/// Why that is sound, with `quiet` from [`quiet_window`]: a node declares term
/// `x = seen + 1` (quorum mode: the term a majority pre-voted for). For B to declare x
/// after A did, B must not have heard A's Coordinator, so (no loss, no restart of B)
/// the two declarations are within one delay of each other. The lower of the two, L,
/// declared either
/// (a) when its Election, sent T earlier, got no Answer from the higher one, H — so H
///     was down, ineligible, paused or cut off at `t1 - T - delay` and came back (a
///     fault record) after that, or the Election or the Answer was lost (counted for
///     `T + 3D` after the loss: a starting node declares only once its start-up wait
///     ends, `quiet.election_ms`);
/// (b) without asking H: H was reported down (a fault record), or H was not a voter in
///     the list L held because L lost the list that seated H (a stale list, counted for
///     D after the loss like a stale view), or H was L's leader and
///     fell silent for D while alive — superseded by a declaration L lost (a stale
///     view, counted for D after the loss) or paused or cut off (fault records);
/// (c) quorum mode, asking H, whose Answer came after L's majority of pre-votes: H
///     then asks for a term above L's, so the two terms differ; or
/// (d) as a coordinator bullied by a still lower coordinator's claim, which needs two
///     coordinators at once: the leftover of a heal or resume, whose claims cross within
///     a heartbeat plus a delay.
/// A crash that cuts A's broadcast short happens at or after `t1`. So every cause lies
/// within `T + heartbeat + 2 delays` before `t1`, or later, or in a stale view.
pub fn check_unique_terms(entries: &[Entry], quiet: QuietWindow) -> Vec<Violation> {
    let spans = disturbed_intervals(entries, quiet);
    let mut by_term: BTreeMap<u64, Vec<(Millis, NodeId)>> = BTreeMap::new();
    for (at, node, epoch) in declarations(entries) {
        by_term.entry(epoch.term).or_default().push((at, node));
    }
    let mut out = Vec::new();
    for (term, claims) in by_term {
        for (i, &(t1, n1)) in claims.iter().enumerate() {
            for &(t2, n2) in &claims[i + 1..] {
                if n1 == n2 {
                    continue; // the per-node part is checked by `Safety`
                }
                let (from, to) = (t1.min(t2).saturating_sub(quiet.before_ms), t1.max(t2));
                if spans.iter().all(|&(s, e)| e < from || s > to) {
                    out.push(Violation {
                        invariant: Invariant::Uniqueness,
                        node: n2,
                        at_ms: t2,
                        explanation: format!(
                            "declared term {term}, which node {n1} declared at {t1} ms, with no \
                             fault since {from} ms"
                        ),
                    });
                }
            }
        }
    }
    out
}

/// How long the cluster must have been quiet for the soft part of I2 to apply (see
/// [`check_unique_terms`] for why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietWindow {
    /// Before two same-term declarations: `T + heartbeat + 2 x max delay + preempt
    /// delay`.
    pub before_ms: Millis,
    /// After a live node lost a declaration: D, until it suspects the leader that the
    /// lost declaration replaced.
    pub stale_view_ms: Millis,
    /// After an Election or Answer was lost: the longest its sender's election may
    /// still run, T or a starting node's whole start-up wait (3D), `T + 3D`.
    pub election_ms: Millis,
}

/// The quiet window for `timing` on a network whose delays stay below `max_delay_ms`.
pub fn quiet_window(timing: &Timing, max_delay_ms: Millis) -> QuietWindow {
    // A (re)started node answers no Election while more than T of its start-up wait
    // (the preempt delay) is left, so that it never holds a failover up: for that long
    // it is as good as down, and its restart is the disturbance that explains a twin.
    QuietWindow {
        before_ms: timing.answer_timeout_ms
            + timing.heartbeat_ms
            + 2 * max_delay_ms
            + timing.preempt_delay_ms,
        stale_view_ms: timing.suspect_after_ms,
        election_ms: timing.answer_timeout_ms + timing.startup_wait_ms(),
    }
}
