//! Checks the invariants I1–I7 (README.md, "Invariants") over a history ([`crate::history::Entry`]).
//!
//! The same checks judge simulated runs (virtual ms) and real processes (wall-clock
//! ms, nodes killed without a `Crashed` record: a `Started` record marks the restart).
//!
//! - [`Safety`] / [`check_safety`]: I1 fencing, the per-node part of I2, I3 durability
//!   and I4 recovery. These hold at every instant, whatever the faults.
//! - [`check_start_delay`]: the timing half of I4 (no declaration within the preempt
//!   delay of a restart).
//! - [`check_unique_terms`]: the cluster-wide part of I2, only inside quiet windows
//!   ([`quiet_window`], defined there).
//! - [`check_convergence`]: I5 after the last fault, given the live set and a deadline
//!   ([`convergence_deadline`]).
//! - [`check_no_overlap`] / [`check_one_per_term`]: I6 and I7 of quorum mode, from the
//!   machine's own `Established`/`Demoted` facts ([`offices`]).

use crate::history::{Entry, Record};
use crate::protocol::{Body, Epoch, Fact, Millis, NodeId, Role, Timing, View};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// The invariants listed in README.md, "Invariants".
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
    /// Not in the README's list: the machine broke its own contract (flagged an honest peer as
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
            Invariant::Protocol => "machine contract",
        })
    }
}

/// One broken invariant: which, where, when and why, in words a human can check
/// against the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    pub node: NodeId,
    pub at_ms: Millis,
    pub explanation: String,
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

fn violation(invariant: Invariant, entry: &Entry, explanation: String) -> Violation {
    Violation {
        invariant,
        node: entry.node,
        at_ms: entry.at_ms,
        explanation,
    }
}

fn show(epoch: Option<Epoch>) -> String {
    epoch.map_or_else(|| "none".to_string(), |e| e.to_string())
}

/// What the safety checker remembers about one node, across its restarts.
#[derive(Debug, Default)]
struct NodeTrack {
    /// The accepted epoch of the last Persisted record.
    accepted: Option<Epoch>,
    /// The term cell of the last Persisted record.
    term: u64,
    /// Every epoch ever persisted as accepted (I3: what may be revealed).
    persisted: HashSet<Epoch>,
    /// Terms this node declared, with the time (I2).
    declared: HashMap<u64, Millis>,
    /// Epochs this node declared before its latest restart (I4).
    declared_before_restart: HashSet<Epoch>,
    /// Every epoch this node declared.
    declared_all: HashSet<Epoch>,
    /// A Started record was seen and no View since (I4: that View must be Candidate).
    awaiting_first_view: bool,
}

/// Incremental checker for I1, the per-node part of I2, I3 and I4. Feed it every entry
/// in history order; it keeps a little state per node. Useful when a driver wants to
/// stop at the first violation (the simulator does); [`check_safety`] runs it over a
/// whole history.
#[derive(Debug, Default)]
pub struct Safety {
    nodes: HashMap<NodeId, NodeTrack>,
}

impl Safety {
    /// A checker that has seen nothing yet.
    pub fn new() -> Safety {
        Safety::default()
    }

    /// Checks one entry against what came before it; appends any violation to `out`.
    pub fn observe(&mut self, entry: &Entry, out: &mut Vec<Violation>) {
        let track = self.nodes.entry(entry.node).or_default();
        match &entry.record {
            Record::Started { .. } => {
                track.awaiting_first_view = true;
                track.declared_before_restart = track.declared_all.clone();
            }
            Record::Persisted(cells) => {
                if cells.accepted != track.accepted {
                    if cells.accepted < track.accepted {
                        out.push(violation(
                            Invariant::Fencing,
                            entry,
                            format!(
                                "persisted accepted epoch {} after {}: accepted epochs must rise",
                                show(cells.accepted),
                                show(track.accepted)
                            ),
                        ));
                    }
                    if let Some(epoch) = cells.accepted.filter(|e| e.leader == entry.node) {
                        if let Some(first) = track.declared.insert(epoch.term, entry.at_ms) {
                            out.push(violation(
                                Invariant::Uniqueness,
                                entry,
                                format!(
                                    "declared term {} again (first declared at {first} ms)",
                                    epoch.term
                                ),
                            ));
                        }
                        track.declared_all.insert(epoch);
                    }
                }
                if cells.term < track.term {
                    out.push(violation(
                        Invariant::Uniqueness,
                        entry,
                        format!(
                            "term cell went back from {} to {}: a later declaration could reuse a term",
                            track.term, cells.term
                        ),
                    ));
                }
                if let Some(a) = cells.accepted.filter(|a| a.term > cells.term) {
                    out.push(violation(
                        Invariant::Uniqueness,
                        entry,
                        format!("term cell {} is below the accepted epoch {a}", cells.term),
                    ));
                }
                track.accepted = cells.accepted;
                track.term = track.term.max(cells.term);
                if let Some(a) = cells.accepted {
                    track.persisted.insert(a);
                }
            }
            Record::View(view) => Self::observe_view(track, entry, view, out),
            // A new, empty store: what the lost one held binds nothing per node any more.
            // Two holders of one term still show in I7 and I2's cluster-wide checks.
            Record::StoreLost => *track = NodeTrack::default(),
            _ => {}
        }
    }

    fn observe_view(track: &mut NodeTrack, entry: &Entry, view: &View, out: &mut Vec<Violation>) {
        if std::mem::take(&mut track.awaiting_first_view) && view.role != Role::Candidate {
            out.push(violation(
                Invariant::Recovery,
                entry,
                format!(
                    "first view after a restart is {} {}, not candidate",
                    view.role,
                    show(view.epoch)
                ),
            ));
        }
        let Some(epoch) = view.epoch else {
            if view.role != Role::Candidate {
                out.push(violation(
                    Invariant::Durability,
                    entry,
                    format!("{} view without an epoch", view.role),
                ));
            }
            return;
        };
        if !track.persisted.contains(&epoch) {
            out.push(violation(
                Invariant::Durability,
                entry,
                format!("view reveals epoch {epoch}, which was never persisted as accepted"),
            ));
        }
        if Some(epoch) < track.accepted {
            out.push(violation(
                Invariant::Fencing,
                entry,
                format!(
                    "view reveals epoch {epoch}, older than the accepted {}",
                    show(track.accepted)
                ),
            ));
        }
        if view.role == Role::Coordinator {
            if epoch.leader != entry.node {
                out.push(violation(
                    Invariant::Fencing,
                    entry,
                    format!("coordinator of epoch {epoch}, which another node leads"),
                ));
            } else if track.declared_before_restart.contains(&epoch) {
                out.push(violation(
                    Invariant::Recovery,
                    entry,
                    format!("coordinator again for epoch {epoch}, declared before a restart"),
                ));
            }
        }
    }
}

/// Runs [`Safety`] over a whole history: I1, the per-node part of I2, I3 and I4.
pub fn check_safety(entries: &[Entry]) -> Vec<Violation> {
    let mut safety = Safety::new();
    let mut out = Vec::new();
    for entry in entries {
        safety.observe(entry, &mut out);
    }
    out
}

/// The epoch this entry declares, if it is the machine's `Declared` fact.
fn declared(entry: &Entry) -> Option<Epoch> {
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

/// The timing half of I4: a (re)started node holds its first election only after
/// `preempt_delay_ms`, so no declaration may come sooner after a `Started` record —
/// unless the node followed a coordinator in between (a Follower view): from then on
/// it is an ordinary member and elects as soon as that coordinator fails or resigns.
/// (A node with no peers declares at once; do not use this on one-node clusters.)
pub fn check_start_delay(entries: &[Entry], preempt_delay_ms: Millis) -> Vec<Violation> {
    let mut last_start: HashMap<NodeId, Millis> = HashMap::new();
    let mut out = Vec::new();
    for entry in entries {
        match &entry.record {
            Record::Started { .. } => {
                last_start.insert(entry.node, entry.at_ms);
            }
            Record::View(v) if v.role == Role::Follower => {
                last_start.remove(&entry.node);
            }
            _ => {}
        }
        let (Some(epoch), Some(&start)) = (declared(entry), last_start.get(&entry.node)) else {
            continue;
        };
        if entry.at_ms < start + preempt_delay_ms {
            out.push(violation(
                Invariant::Recovery,
                entry,
                format!(
                    "declared {epoch} {} ms after starting at {start} ms, before the preempt \
                     delay of {preempt_delay_ms} ms",
                    entry.at_ms - start
                ),
            ));
        }
    }
    out
}

/// Time intervals (inclusive) in which some fault was happening: a point for each
/// fault record, the whole span of every pause, partition and lossy period
/// (open-ended when it never ends), and `stale_view_ms` after a declaration that a live
/// node lost (its sender crashed mid-broadcast): that node goes on believing in the
/// leader the declaration replaced until it suspects it.
fn disturbed_intervals(entries: &[Entry], stale_view_ms: Millis) -> Vec<(Millis, Millis)> {
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
                if matches!(msg.body, Body::Coordinator { .. }) && !down.contains(&entry.node) =>
            {
                spans.push((t, t + stale_view_ms));
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
///     fault record) after that;
/// (b) without asking H: H was reported down (a fault record), or H was L's leader and
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
    let spans = disturbed_intervals(entries, quiet.stale_view_ms);
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
    }
}

/// One node's term of office as coordinator, read off a history: from its
/// `Established` fact to the earliest of its `Demoted` fact's office end, its crash or
/// restart, and — while it is paused — the pause start plus the lease bound (a paused
/// process processes no acks, so its lease cannot outlive that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Office {
    pub node: NodeId,
    pub epoch: Epoch,
    pub from_ms: Millis,
    pub until_ms: Millis,
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
    let mut open: BTreeMap<NodeId, (Epoch, Millis, Option<Millis>)> = BTreeMap::new();
    let mut out = Vec::new();
    let close = |out: &mut Vec<Office>,
                 node,
                 (epoch, from, bound): (Epoch, Millis, Option<Millis>),
                 at: Millis| {
        let until = bound.map_or(at, |b| b.min(at)).max(from);
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
                    office.2 = Some(office.2.unwrap_or(t + d).min(t + d));
                }
            }
            Record::PausedLease { until_ms } => {
                if let Some(office) = open.get_mut(&node) {
                    office.2 = Some(office.2.map_or(*until_ms, |b| b.min(*until_ms)));
                }
            }
            Record::Resumed => {
                if let Some(office) = open.get_mut(&node) {
                    if office.2.is_some_and(|b| t < b) {
                        office.2 = None; // resumed in time: the lease may go on
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
    let mut holder: BTreeMap<u64, (NodeId, Millis)> = BTreeMap::new();
    let mut out = Vec::new();
    for entry in entries {
        if let Record::Fact(Fact::Established { epoch }) = &entry.record {
            match holder.get(&epoch.term) {
                Some(&(node, at)) if node != entry.node => out.push(Violation {
                    invariant: Invariant::OnePerTerm,
                    node: entry.node,
                    at_ms: entry.at_ms,
                    explanation: format!(
                        "became coordinator of term {}, which node {node} already held from {at} ms",
                        epoch.term
                    ),
                }),
                Some(_) => {}
                None => {
                    holder.insert(epoch.term, (entry.node, entry.at_ms));
                }
            }
        }
    }
    out
}

/// Which node the cluster must converge on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leader {
    /// This node (preempt = always: the highest live eligible ID).
    Node(NodeId),
    /// Any one live eligible node, as long as everyone agrees (preempt = never).
    AnyLive,
}

/// The I5 expectation: who is live at the end, whom they must follow, and from when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Convergence {
    /// Nodes running (not crashed, not paused) from the last fault to the end.
    pub live: Vec<NodeId>,
    pub leader: Leader,
    /// From this time to the end of the history the cluster must be converged.
    pub deadline_ms: Millis,
}

/// The I5 deadline: `last_fault_ms + timing.convergence_bound_ms()` plus slack for
/// message delays. Each step of the slowest recovery chain (suspicion, Election,
/// Answer, re-election after T', Election to a dead node, declaration, Coordinator)
/// adds at most one one-way delay on top of the timeouts the bound already counts;
/// eight delays cover that chain with room to spare. Real-process tests pass their own
/// generous bound for the network (and scheduling) delay.
pub fn convergence_deadline(
    last_fault_ms: Millis,
    timing: &Timing,
    max_delay_ms: Millis,
) -> Millis {
    last_fault_ms + timing.convergence_bound_ms() + 8 * max_delay_ms
}

/// I5: from `deadline_ms` to the end of the history, every live node follows one
/// leader (the expected one), which is live, eligible and the only coordinator, and at
/// the end all live nodes hold the same epoch.
///
/// Views are read per node: the node's view at the deadline is its last View record at
/// or before it; every later View record must satisfy the same rule.
pub fn check_convergence(entries: &[Entry], expect: &Convergence) -> Vec<Violation> {
    let at = expect.deadline_ms;
    let views = views_from(entries, expect);
    let missing: Vec<Violation> = views
        .iter()
        .filter(|(_, list)| list.first().map_or(true, |&(t, _)| t > at))
        .map(|(&node, _)| convergence_failure(node, at, "no view published by the deadline".into()))
        .collect();
    if !missing.is_empty() {
        return missing;
    }
    let leader = match expected_leader(&views, expect) {
        Ok(leader) => leader,
        Err(violation) => return vec![violation],
    };
    let wrong = wrong_views(&views, leader, at);
    if !wrong.is_empty() {
        return wrong;
    }
    let final_epoch = |n: &NodeId| views[n].last().and_then(|&(_, v)| v.epoch);
    let leader_epoch = final_epoch(&leader);
    views
        .keys()
        .filter(|n| final_epoch(n) != leader_epoch)
        .map(|&node| {
            let explanation = format!(
                "ends on epoch {}, the leader on {}",
                show(final_epoch(&node)),
                show(leader_epoch)
            );
            convergence_failure(node, at, explanation)
        })
        .collect()
}

/// Per live node, its views from the deadline on: the last one at or before the
/// deadline first (absent if it published none by then), then every later one.
type ViewsFrom = BTreeMap<NodeId, Vec<(Millis, View)>>;

fn views_from(entries: &[Entry], expect: &Convergence) -> ViewsFrom {
    let mut views: ViewsFrom = expect.live.iter().map(|&n| (n, Vec::new())).collect();
    for entry in entries {
        if let (Record::View(view), Some(list)) = (&entry.record, views.get_mut(&entry.node)) {
            if entry.at_ms <= expect.deadline_ms {
                list.clear();
            }
            list.push((entry.at_ms, *view));
        }
    }
    views
}

fn convergence_failure(node: NodeId, at_ms: Millis, explanation: String) -> Violation {
    Violation {
        invariant: Invariant::Convergence,
        node,
        at_ms,
        explanation,
    }
}

/// The node every live node must follow: the expected one, or with
/// [`Leader::AnyLive`] the one live coordinator at the deadline.
fn expected_leader(views: &ViewsFrom, expect: &Convergence) -> Result<NodeId, Violation> {
    let at = expect.deadline_ms;
    let leader = match expect.leader {
        Leader::Node(id) => id,
        Leader::AnyLive => {
            let coordinators: Vec<NodeId> = views
                .iter()
                .filter(|(_, list)| list[0].1.role == Role::Coordinator)
                .map(|(&n, _)| n)
                .collect();
            let [one] = coordinators[..] else {
                let node = expect.live.first().copied().unwrap_or_default();
                let explanation =
                    format!("live coordinators at the deadline: {coordinators:?}, not one");
                return Err(convergence_failure(node, at, explanation));
            };
            one
        }
    };
    if !views.contains_key(&leader) {
        let explanation = format!(
            "expected leader {leader} is not in the live set {:?}",
            expect.live
        );
        return Err(convergence_failure(leader, at, explanation));
    }
    Ok(leader)
}

/// Each node's first view from the deadline on that is not "the leader as an eligible
/// coordinator" or "following the leader".
fn wrong_views(views: &ViewsFrom, leader: NodeId, at: Millis) -> Vec<Violation> {
    let mut out = Vec::new();
    for (&node, list) in views {
        let bad = list.iter().find(|(_, v)| {
            if node == leader {
                v.role != Role::Coordinator || !v.eligible
            } else {
                v.role != Role::Follower || v.coordinator() != Some(leader)
            }
        });
        if let Some(&(t, v)) = bad {
            let wanted = if node == leader {
                "an eligible coordinator".to_string()
            } else {
                format!("following node {leader}")
            };
            let explanation = format!(
                "view is {} {} (eligible {}), expected {wanted}",
                v.role,
                show(v.epoch),
                v.eligible
            );
            out.push(convergence_failure(node, t.max(at), explanation));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Cells, Message};

    fn e(at_ms: Millis, node: NodeId, record: Record) -> Entry {
        Entry {
            at_ms,
            node,
            record,
        }
    }

    fn ep(term: u64, leader: NodeId) -> Epoch {
        Epoch { term, leader }
    }

    fn persisted(term: u64, accepted: Option<Epoch>) -> Record {
        Record::Persisted(Cells {
            term,
            accepted,
            incarnation: 1,
        })
    }

    fn declared(term: u64, leader: NodeId) -> Record {
        Record::Fact(Fact::Declared {
            epoch: ep(term, leader),
        })
    }

    fn fact(fact: Fact) -> Record {
        Record::Fact(fact)
    }

    #[test]
    fn i6_offices_overlap_and_pause_bound() {
        use crate::protocol::DemotionReason;
        let est = |t, l| fact(Fact::Established { epoch: ep(t, l) });
        let h = vec![
            e(100, 2, est(1, 2)),
            e(500, 1, est(2, 1)),
            e(
                600,
                2,
                fact(Fact::Demoted {
                    epoch: ep(1, 2),
                    reason: DemotionReason::LeaseLost,
                    office_ended_at: 450,
                }),
            ),
        ];
        assert_eq!(check_no_overlap(&h, 300), vec![], "office ended at 450");
        let mut late = h.clone();
        late[2] = e(
            600,
            2,
            fact(Fact::Demoted {
                epoch: ep(1, 2),
                reason: DemotionReason::LeaseLost,
                office_ended_at: 550,
            }),
        );
        assert_eq!(
            kinds(&check_no_overlap(&late, 300)),
            vec![Invariant::NoOverlap]
        );
        assert_eq!(overlap_ms(&offices(&late, Some(300))), 50);
        assert_eq!(overlaps(&offices(&late, Some(300))), vec![(500, 550)]);
        // Paused at 150 and never heard from again: the lease bound ends it at 450.
        let paused = vec![
            e(100, 2, est(1, 2)),
            e(150, 2, Record::Paused),
            e(500, 1, est(2, 1)),
            e(700, 3, Record::Healed),
        ];
        assert_eq!(check_no_overlap(&paused, 300), vec![]);
        assert_eq!(
            kinds(&check_no_overlap(&paused, 400)),
            vec![Invariant::NoOverlap]
        );
    }

    #[test]
    fn overlaps_are_the_stretches_with_two_in_office_merged_where_they_touch() {
        let office = |node, from_ms, until_ms| Office {
            node,
            epoch: ep(from_ms, node),
            from_ms,
            until_ms,
        };
        // 3 leads 0..100; 2 from 50..150; 1 from 100..200 (2 and 1 overlap 100..150,
        // touching 3 and 2's 50..100); 4 alone at 300..400, 5 from 390.
        let all = [
            office(3, 0, 100),
            office(2, 50, 150),
            office(1, 100, 200),
            office(4, 300, 400),
            office(5, 390, 500),
        ];
        assert_eq!(overlaps(&all), vec![(50, 150), (390, 400)]);
        assert_eq!(overlap_ms(&all), 110);
        assert_eq!(overlaps(&all[..1]), vec![]);
    }

    #[test]
    fn i7_two_coordinators_of_one_term() {
        let h = vec![
            e(1, 1, fact(Fact::Established { epoch: ep(4, 1) })),
            e(2, 2, fact(Fact::Established { epoch: ep(4, 2) })),
        ];
        assert_eq!(kinds(&check_one_per_term(&h)), vec![Invariant::OnePerTerm]);
    }

    fn view(id: NodeId, role: Role, epoch: Option<Epoch>) -> Record {
        Record::View(View {
            id,
            role,
            epoch,
            eligible: true,
            incarnation: 1,
        })
    }

    fn kinds(v: &[Violation]) -> Vec<Invariant> {
        v.iter().map(|v| v.invariant).collect()
    }

    #[test]
    fn clean_history_passes() {
        let h = vec![
            e(0, 2, Record::Started { incarnation: 1 }),
            e(0, 2, persisted(0, None)),
            e(0, 2, view(2, Role::Candidate, None)),
            e(100, 2, persisted(1, Some(ep(1, 2)))),
            e(100, 2, view(2, Role::Coordinator, Some(ep(1, 2)))),
            e(0, 1, Record::Started { incarnation: 1 }),
            e(0, 1, view(1, Role::Candidate, None)),
            e(101, 1, persisted(1, Some(ep(1, 2)))),
            e(101, 1, view(1, Role::Follower, Some(ep(1, 2)))),
        ];
        assert_eq!(check_safety(&h), vec![]);
        let expect = Convergence {
            live: vec![1, 2],
            leader: Leader::Node(2),
            deadline_ms: 200,
        };
        assert_eq!(check_convergence(&h, &expect), vec![]);
        let any = Convergence {
            leader: Leader::AnyLive,
            ..expect
        };
        assert_eq!(check_convergence(&h, &any), vec![]);
    }

    #[test]
    fn i1_accepted_epoch_going_back() {
        let h = vec![
            e(1, 1, persisted(5, Some(ep(5, 3)))),
            e(2, 1, Record::Started { incarnation: 2 }),
            e(3, 1, persisted(5, Some(ep(4, 3)))),
        ];
        assert_eq!(kinds(&check_safety(&h)), vec![Invariant::Fencing]);
    }

    #[test]
    fn i2_same_term_declared_twice_by_one_node() {
        let h = vec![
            e(1, 1, persisted(5, Some(ep(5, 1)))),
            e(2, 1, persisted(6, Some(ep(6, 2)))),
            e(3, 1, persisted(6, Some(ep(5, 1)))),
        ];
        let found = kinds(&check_safety(&h));
        assert!(found.contains(&Invariant::Uniqueness), "{found:?}");
        assert!(found.contains(&Invariant::Fencing), "{found:?}");
    }

    #[test]
    fn i2_term_cell_going_back() {
        let h = vec![e(1, 1, persisted(5, None)), e(2, 1, persisted(4, None))];
        assert_eq!(kinds(&check_safety(&h)), vec![Invariant::Uniqueness]);
    }

    #[test]
    fn i2_soft_only_in_quiet_windows() {
        let h = vec![
            e(0, 1, Record::Started { incarnation: 1 }),
            e(0, 2, Record::Started { incarnation: 1 }),
            e(1000, 1, declared(3, 1)),
            e(1010, 2, declared(3, 2)),
        ];
        assert_eq!(
            kinds(&check_unique_terms(&h, quiet(500))),
            vec![Invariant::Uniqueness]
        );
        assert_eq!(check_unique_terms(&h, quiet(2000)), vec![]);
        let mut paused = h.clone();
        paused.insert(2, e(10, 1, Record::Paused));
        assert_eq!(check_unique_terms(&paused, quiet(500)), vec![]);
    }

    fn quiet(before_ms: Millis) -> QuietWindow {
        QuietWindow {
            before_ms,
            stale_view_ms: 400,
        }
    }

    #[test]
    fn i2_soft_not_while_a_lost_declaration_misleads_a_live_node() {
        let lost = |node| {
            e(
                300,
                node,
                Record::Lost {
                    from: 3,
                    msg: Message {
                        term: 2,
                        body: Body::Coordinator { epoch: ep(2, 3) },
                    },
                },
            )
        };
        let twins = [e(1000, 1, declared(3, 1)), e(1010, 2, declared(3, 2))];
        // Node 2 lost node 3's declaration at 300 ms: misled until 700 ms, within the
        // 500 ms before the twins.
        let misled = [vec![lost(2)], twins.to_vec()].concat();
        assert_eq!(check_unique_terms(&misled, quiet(500)), vec![]);
        // Long enough before, or lost by a node that was down: the twins count.
        assert_eq!(
            kinds(&check_unique_terms(&misled, quiet(200))),
            vec![Invariant::Uniqueness]
        );
        let down = [vec![e(100, 2, Record::Crashed), lost(2)], twins.to_vec()].concat();
        assert_eq!(
            kinds(&check_unique_terms(&down, quiet(500))),
            vec![Invariant::Uniqueness]
        );
    }

    #[test]
    fn i4_declaring_before_the_preempt_delay() {
        let h = vec![
            e(100, 1, Record::Started { incarnation: 2 }),
            e(100, 1, persisted(0, None)),
            e(150, 1, persisted(1, Some(ep(1, 1)))),
            e(150, 1, declared(1, 1)),
        ];
        assert_eq!(
            kinds(&check_start_delay(&h, 100)),
            vec![Invariant::Recovery]
        );
        assert_eq!(check_start_delay(&h, 50), vec![]);
        let mut followed = h.clone();
        followed.insert(2, e(120, 1, view(1, Role::Follower, Some(ep(0, 2)))));
        assert_eq!(check_start_delay(&followed, 100), vec![]);
    }

    #[test]
    fn i3_view_of_unpersisted_epoch() {
        let h = vec![e(1, 1, view(1, Role::Follower, Some(ep(1, 2))))];
        assert_eq!(kinds(&check_safety(&h)), vec![Invariant::Durability]);
    }

    #[test]
    fn i4_first_view_after_restart_and_old_coordinator_epoch() {
        let h = vec![
            e(1, 1, persisted(1, Some(ep(1, 1)))),
            e(1, 1, view(1, Role::Coordinator, Some(ep(1, 1)))),
            e(2, 1, Record::Started { incarnation: 2 }),
            e(3, 1, view(1, Role::Coordinator, Some(ep(1, 1)))),
        ];
        assert_eq!(
            kinds(&check_safety(&h)),
            vec![Invariant::Recovery, Invariant::Recovery]
        );
    }

    #[test]
    fn i5_wrong_leader_two_coordinators_and_late_flap() {
        let h = vec![
            e(1, 1, persisted(1, Some(ep(1, 1)))),
            e(1, 1, view(1, Role::Coordinator, Some(ep(1, 1)))),
            e(1, 2, persisted(1, Some(ep(1, 2)))),
            e(1, 2, view(2, Role::Coordinator, Some(ep(1, 2)))),
        ];
        let expect = Convergence {
            live: vec![1, 2],
            leader: Leader::Node(2),
            deadline_ms: 10,
        };
        assert_eq!(
            kinds(&check_convergence(&h, &expect)),
            vec![Invariant::Convergence]
        );
        let any = Convergence {
            leader: Leader::AnyLive,
            ..expect.clone()
        };
        assert_eq!(
            kinds(&check_convergence(&h, &any)),
            vec![Invariant::Convergence]
        );
        let mut fixed = h.clone();
        fixed.push(e(5, 1, persisted(1, Some(ep(1, 2)))));
        fixed.push(e(5, 1, view(1, Role::Follower, Some(ep(1, 2)))));
        assert_eq!(check_convergence(&fixed, &expect), vec![]);
        fixed.push(e(50, 1, view(1, Role::Candidate, None)));
        assert_eq!(
            kinds(&check_convergence(&fixed, &expect)),
            vec![Invariant::Convergence]
        );
    }
}
