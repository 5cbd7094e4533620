//! Terms of office and the two quorum-mode invariants about them: I6 (no two
//! coordinators' offices overlap in real time) and I7 (one coordinator per term, ever).
//! Each comes in two forms: over a history (the simulator's runs, real processes, the
//! chaos runner) and at the instant a node takes office (the model checker, which sees
//! every machine instead of a history).

use super::invariant::{show, Invariant, Violation};
use crate::history::{Entry, Record};
use crate::protocol::{Epoch, Fact, Millis, NodeId, Timing};
use std::collections::BTreeMap;

/// One node's term of office as coordinator, read off a history: from its
/// `Established` fact to the earliest of its `Demoted` fact's office end, its crash or
/// restart, and — while it is paused — the pause start plus the lease bound (a paused
/// process processes no acks, so its lease cannot outlive that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Office {
    /// The coordinator.
    pub node: NodeId,
    /// The epoch it led.
    pub epoch: Epoch,
    /// When it established itself.
    pub from_ms: Millis,
    /// When its office ended at the latest.
    pub until_ms: Millis,
}

#[cfg(test)]
impl Office {
    /// `node`'s office from `from_ms` to `until_ms`, in the epoch of term `from_ms` (so
    /// each office of a test has its own epoch).
    pub(crate) fn for_test(node: NodeId, from_ms: Millis, until_ms: Millis) -> Office {
        let epoch = Epoch {
            term: from_ms,
            leader: node,
        };
        Office {
            node,
            epoch,
            from_ms,
            until_ms,
        }
    }
}

/// Every term of office in `entries`. `lease_bound_ms` is [`lease_bound_ms`] in quorum
/// mode (a paused coordinator's office ends within it of the pause); `None` in classic
/// mode, where a paused coordinator stays one until it notices.
pub fn offices(entries: &[Entry], lease_bound_ms: Option<Millis>) -> Vec<Office> {
    offices_with(entries, |_| lease_bound_ms)
}

/// [`offices`] with each node's own lease bound (nodes with their own heartbeat have
/// their own lease margin).
pub fn offices_with(
    entries: &[Entry],
    lease_bound_ms: impl Fn(NodeId) -> Option<Millis>,
) -> Vec<Office> {
    // node -> (epoch, start, end bound while paused)
    let mut open: BTreeMap<NodeId, (Epoch, Millis, Option<PauseBound>)> = BTreeMap::new();
    let mut out = Vec::new();
    let close = |out: &mut Vec<Office>,
                 node,
                 (epoch, from, paused): (Epoch, Millis, Option<PauseBound>),
                 at: Millis| {
        let until = paused.map_or(at, |p| p.until.min(at)).max(from);
        out.push(Office {
            node,
            epoch,
            from_ms: from,
            until_ms: until,
        });
    };
    let end = entries.iter().map(|e| e.at_ms).max().unwrap_or(0);
    for entry in entries {
        let (node, t) = (entry.node, entry.at_ms);
        match &entry.record {
            Record::Fact(Fact::Established { epoch }) => {
                if let Some(office) = open.remove(&node) {
                    close(&mut out, node, office, t);
                }
                open.insert(node, (*epoch, t, None));
            }
            Record::Fact(Fact::Demoted {
                epoch,
                office_ended_at,
                ..
            }) if open.get(&node).is_some_and(|o| o.0 == *epoch) => {
                if let Some(office) = open.remove(&node) {
                    close(&mut out, node, office, (*office_ended_at).min(t));
                }
            }
            Record::Crashed | Record::Started { .. } => {
                if let Some(office) = open.remove(&node) {
                    close(&mut out, node, office, t);
                }
            }
            Record::Paused => {
                if let (Some(office), Some(d)) = (open.get_mut(&node), lease_bound_ms(node)) {
                    office.2 = Some(PauseBound::at_most(office.2, t + d, None));
                }
            }
            Record::PausedLease {
                until_ms,
                renewable_until_ms,
            } => {
                if let Some(office) = open.get_mut(&node) {
                    let renewable = Some(*renewable_until_ms);
                    office.2 = Some(PauseBound::at_most(office.2, *until_ms, renewable));
                }
            }
            Record::Resumed => {
                if let Some(office) = open.get_mut(&node) {
                    // Resumed in time, the lease goes on: before it ran out, or before
                    // the rounds sent ahead of the pause run out, whose acks (queued
                    // meanwhile) renew it. Its own demotion then says where it ended.
                    if office
                        .2
                        .is_some_and(|p| t < p.until.max(p.renewable.unwrap_or(0)))
                    {
                        office.2 = None;
                    }
                }
            }
            _ => {}
        }
    }
    for (node, office) in open {
        close(&mut out, node, office, end);
    }
    out.sort_by_key(|o| (o.from_ms, o.node));
    out
}

/// A paused coordinator's office: it ends by `until` unless the process resumes first,
/// or (simulator) before `renewable`, how far acks queued meanwhile for rounds sent
/// before the pause can renew its lease.
#[derive(Debug, Clone, Copy)]
struct PauseBound {
    until: Millis,
    renewable: Option<Millis>,
}

impl PauseBound {
    /// `earlier` tightened to end by `until`; `renewable` when given, else the earlier.
    fn at_most(earlier: Option<PauseBound>, until: Millis, renewable: Option<Millis>) -> Self {
        PauseBound {
            until: earlier.map_or(until, |e| e.until.min(until)),
            renewable: renewable.or(earlier.and_then(|e| e.renewable)),
        }
    }
}

/// How long after a coordinator stops processing (a pause) its term of office can last
/// at most: its lease ends `D - heartbeat` after the newest send a majority acked, which
/// was before the pause; 2 % more covers clocks that run up to 1 % slow, plus 1 ms.
pub fn lease_bound_ms(timing: &Timing) -> Millis {
    (timing.suspect_after_ms - timing.heartbeat_ms) * 102 / 100 + 1
}

/// I6: no two coordinators' terms of office overlap in real time (quorum mode).
/// `lease_bound_ms` as in [`offices`].
pub fn check_no_overlap(entries: &[Entry], lease_bound_ms: Millis) -> Vec<Violation> {
    check_no_overlap_with(entries, |_| lease_bound_ms)
}

/// [`check_no_overlap`] with each node's own lease bound.
pub fn check_no_overlap_with(
    entries: &[Entry],
    lease_bound_ms: impl Fn(NodeId) -> Millis,
) -> Vec<Violation> {
    let all = offices_with(entries, |node| Some(lease_bound_ms(node)));
    let mut out = Vec::new();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            if a.node == b.node {
                continue;
            }
            let (from, until) = (a.from_ms.max(b.from_ms), a.until_ms.min(b.until_ms));
            if from < until {
                out.push(Violation {
                    invariant: Invariant::NoOverlap,
                    node: b.node,
                    at_ms: from,
                    explanation: format!(
                        "node {} led {} from {} to {} ms while node {} led {} from {} to {} ms \
                         ({} ms with two coordinators)",
                        a.node,
                        a.epoch,
                        a.from_ms,
                        a.until_ms,
                        b.node,
                        b.epoch,
                        b.from_ms,
                        b.until_ms,
                        until - from
                    ),
                });
            }
        }
    }
    out
}

/// Total time (ms) during which two or more nodes were in office: the figure chaos
/// reports in both modes (classic is expected to have some under partitions).
pub fn overlap_ms(offices: &[Office]) -> Millis {
    overlaps(offices)
        .iter()
        .map(|&(from, until)| until - from)
        .sum()
}

/// The stretches `(from, until)` during which two or more nodes were in office, in
/// time order and merged where they touch: where [`overlap_ms`] comes from, so a
/// timeline drawn from them shows exactly the time the report counts.
pub fn overlaps(offices: &[Office]) -> Vec<(Millis, Millis)> {
    let mut edges: Vec<(Millis, i64)> = Vec::new();
    for o in offices.iter().filter(|o| o.until_ms > o.from_ms) {
        edges.push((o.from_ms, 1));
        edges.push((o.until_ms, -1));
    }
    edges.sort_unstable();
    let (mut open, mut last) = (0i64, 0);
    let mut out: Vec<(Millis, Millis)> = Vec::new();
    for (t, d) in edges {
        if open >= 2 && t > last {
            match out.last_mut() {
                Some(span) if span.1 == last => span.1 = t,
                _ => out.push((last, t)),
            }
        }
        open += d;
        last = t;
    }
    out
}

/// I7: each term has at most one coordinator, ever (quorum mode).
pub fn check_one_per_term(entries: &[Entry]) -> Vec<Violation> {
    let mut holders = TermHolders::default();
    let mut out = Vec::new();
    for entry in entries {
        if let Record::Fact(Fact::Established { epoch }) = &entry.record {
            if let Err(holder) = holders.establish(epoch.term, entry.node) {
                let since = entries
                    .iter()
                    .find(|e| e.node == holder && established_term(e) == Some(epoch.term))
                    .map(|e| e.at_ms);
                out.push(two_holders(
                    entry.node,
                    entry.at_ms,
                    epoch.term,
                    holder,
                    since,
                ));
            }
        }
    }
    out
}

/// The term whose office this entry opens, if it is an `Established` fact.
fn established_term(entry: &Entry) -> Option<u64> {
    match entry.record {
        Record::Fact(Fact::Established { epoch }) => Some(epoch.term),
        _ => None,
    }
}

/// I7's memory: the first coordinator of each term so far. Hashable, so the model
/// checker keeps it in its state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TermHolders(BTreeMap<u64, NodeId>);

impl TermHolders {
    /// Notes that `node` became coordinator of `term`; `Err` with the other node that
    /// held the term first.
    pub fn establish(&mut self, term: u64, node: NodeId) -> Result<(), NodeId> {
        match self.0.get(&term) {
            Some(&holder) if holder != node => Err(holder),
            Some(_) => Ok(()),
            None => {
                self.0.insert(term, node);
                Ok(())
            }
        }
    }

    /// I7 at the instant `node` becomes coordinator of `term` (the model checker's form
    /// of [`check_one_per_term`]).
    pub fn check(&mut self, node: NodeId, at_ms: Millis, term: u64) -> Option<Violation> {
        let holder = self.establish(term, node).err()?;
        Some(two_holders(node, at_ms, term, holder, None))
    }
}

/// The I7 violation: `node` took `term`, which `holder` held first (from `since_ms`).
fn two_holders(
    node: NodeId,
    at_ms: Millis,
    term: u64,
    holder: NodeId,
    since_ms: Option<Millis>,
) -> Violation {
    let since = since_ms.map_or_else(String::new, |at| format!(" from {at} ms"));
    let explanation =
        format!("became coordinator of term {term}, which node {holder} already held{since}");
    Violation::new(Invariant::OnePerTerm, node, at_ms, explanation)
}

/// A node whose machine reads itself coordinator at some instant: an office in progress
/// as the model checker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InOffice {
    /// The node in office.
    pub node: NodeId,
    /// The epoch its view holds.
    pub epoch: Option<Epoch>,
    /// Its lease end by its own clock (quorum mode).
    pub lease_until: Option<Millis>,
}

/// I6 at the instant `node` takes office for `epoch`: nobody else may be in office then.
/// `others` are the other nodes in office at `at_ms`; the first one breaks the rule. The
/// model checker's form of [`check_no_overlap`]: it reads each machine's own view of its
/// office rather than offices off a history.
pub fn check_alone_in_office(
    node: NodeId,
    epoch: Epoch,
    at_ms: Millis,
    others: impl IntoIterator<Item = InOffice>,
) -> Option<Violation> {
    let other = others.into_iter().next()?;
    let lease = other
        .lease_until
        .map_or_else(|| "no lease".to_string(), |t| format!("lease until {t} ms"));
    let explanation = format!(
        "became coordinator of {epoch} while node {} still held {} ({lease})",
        other.node,
        show(other.epoch)
    );
    Some(Violation::new(
        Invariant::NoOverlap,
        node,
        at_ms,
        explanation,
    ))
}
