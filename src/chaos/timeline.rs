//! What a run's history says about speed: when the cluster agreed on a coordinator,
//! how long each failover and reclaim took and how that time splits into phases.
//!
//! Everything is read from the nodes' own event logs (each View record is stamped by
//! the node when it publishes the view, before any client sees it) and the runner's
//! step times, all on one wall clock. "Agreed" means: every available node (running,
//! not paused, on the majority side) follows the same epoch of one available leader,
//! and that leader says it is the coordinator.

use super::plan::{Availability, Step};
use crate::history::{Entry, Record};
use crate::protocol::{Epoch, Millis, Mode, NodeId, Role, View};
use serde::Serialize;
use std::collections::BTreeMap;

/// A step the runner took, stamped with the wall clock (ms since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Executed {
    pub at_ms: Millis,
    pub step: Step,
}

/// The latest view of every node, as its event log tells it. A kill or a restart
/// forgets a node's view: a dead process believes nothing.
#[derive(Debug, Clone)]
pub struct Views {
    views: BTreeMap<NodeId, Option<View>>,
}

impl Views {
    /// No node has published anything yet.
    pub fn new(ids: &[NodeId]) -> Views {
        Views {
            views: ids.iter().map(|&id| (id, None)).collect(),
        }
    }

    /// Folds one history entry in.
    pub fn apply(&mut self, entry: &Entry) {
        let slot = self.views.entry(entry.node).or_default();
        match &entry.record {
            Record::View(view) => *slot = Some(*view),
            Record::Started { .. } | Record::Crashed => *slot = None,
            _ => {}
        }
    }

    /// The node's latest view.
    pub fn get(&self, id: NodeId) -> Option<View> {
        self.views.get(&id).copied().flatten()
    }

    /// The coordinator every node in `available` follows at one epoch, if there is one
    /// and it is itself available and leading.
    pub fn agreed(&self, available: &[NodeId]) -> Option<(NodeId, Epoch)> {
        let mut agreed: Option<Epoch> = None;
        for &id in available {
            let view = self.get(id)?;
            let epoch = view.epoch?;
            view.coordinator()?;
            if agreed.is_some_and(|a| a != epoch) {
                return None;
            }
            agreed = Some(epoch);
        }
        let epoch = agreed?;
        let leader = self.get(epoch.leader)?;
        (available.contains(&epoch.leader) && leader.role == Role::Coordinator)
            .then_some((epoch.leader, epoch))
    }
}

/// Why a sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleKind {
    /// The coordinator was killed, paused or cut off; the others took over.
    Failover,
    /// The highest node came back (start, restart, resume, heal) and took over.
    Reclaim,
}

/// How long one failover or reclaim took, and its phases.
///
/// Failover phases: detection (fault → first available node turns candidate),
/// election (→ the new leader declares), announcement (→ every available node follows).
/// Reclaim phases: startup (start → the process logs `Started`; 0 for resume/heal),
/// election (→ it declares), announcement (→ every available node follows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sample {
    pub kind: SampleKind,
    /// The step that caused it: kill, pause, partition, start, restart, resume, heal.
    pub cause: &'static str,
    pub at_ms: Millis,
    /// The node expected to lead afterwards.
    pub leader: NodeId,
    /// Fault → agreement on the expected leader; `None` when another step came first.
    pub total_ms: Option<Millis>,
    /// The three phases in order (see the type's doc); `None` when not measured.
    pub phases: Option<[Millis; 3]>,
}

/// What [`analyse`] finds.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Every change of the agreed coordinator: `(time, leader)`, `None` = no agreement.
    pub changes: Vec<(Millis, Option<NodeId>)>,
    pub samples: Vec<Sample>,
    /// Declarations (a node persisting an epoch it leads) in the history.
    pub elections: usize,
    /// When the cluster first agreed on a coordinator.
    pub first_agreement_ms: Option<Millis>,
    /// From the first agreement to the end: total and longest time without agreement.
    pub no_agreement_ms: Millis,
    pub longest_no_agreement_ms: Millis,
}

/// Reads the history (time-ordered) against the steps taken (time-ordered) for the
/// nodes `ids` running `mode`, up to `end_ms`. A step after which no coordinator is
/// expected (quorum mode without an available majority) yields no sample.
pub fn analyse(
    history: &[Entry],
    ids: &[NodeId],
    steps: &[Executed],
    end_ms: Millis,
    mode: Mode,
) -> Timeline {
    let nodes = ids.iter().copied().max().unwrap_or(0);
    let mut views = Views::new(ids);
    let mut availability = Availability::default();
    let mut agreed: Option<NodeId> = None;
    let mut changes: Vec<(Millis, Option<NodeId>)> = vec![(0, None)];
    // Before each step: the agreed leader and the expected one after it.
    let mut around_steps: Vec<(Option<NodeId>, Option<NodeId>)> = Vec::new();
    let mut entries = history.iter().filter(|e| e.at_ms <= end_ms).peekable();
    let mut next_step = steps.iter().peekable();
    loop {
        let take_step = match (entries.peek(), next_step.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            // A step goes before entries of the same ms: the runner's own record of
            // it (a Crashed stamped at the step's time) must not hide what it broke.
            (Some(e), Some(s)) => s.at_ms <= e.at_ms,
        };
        let now = if take_step {
            let step = next_step.next().expect("peeked");
            availability.apply(&step.step);
            if let Step::Kill(n) | Step::Restart(n) | Step::Replace(n) | Step::Reconfigure(n) =
                step.step
            {
                views.apply(&Entry {
                    at_ms: step.at_ms,
                    node: n,
                    record: Record::Crashed,
                });
            }
            around_steps.push((agreed, availability.expected_leader(nodes, mode)));
            step.at_ms
        } else {
            let entry = entries.next().expect("peeked");
            views.apply(entry);
            entry.at_ms
        };
        let now_agreed = views
            .agreed(&availability.available(nodes))
            .map(|(leader, _)| leader);
        if now_agreed != agreed {
            agreed = now_agreed;
            changes.push((now, agreed));
        }
    }
    let first_agreement_ms = changes.iter().find(|(_, l)| l.is_some()).map(|&(t, _)| t);
    let (no_agreement_ms, longest_no_agreement_ms) =
        first_agreement_ms.map_or((0, 0), |from| gaps(&changes, from, end_ms));
    let declarations = crate::checker::declarations(history);
    let samples = steps
        .iter()
        .enumerate()
        .filter_map(|(i, step)| {
            let (before, expected) = around_steps.get(i).copied()?;
            let until = steps.get(i + 1).map_or(end_ms, |s| s.at_ms);
            sample(
                step,
                before,
                expected?,
                until,
                &changes,
                history,
                &declarations,
            )
        })
        .collect();
    Timeline {
        elections: declarations.len(),
        changes,
        samples,
        first_agreement_ms,
        no_agreement_ms,
        longest_no_agreement_ms,
    }
}

/// Total and longest time without agreement in `[from, to]`.
fn gaps(changes: &[(Millis, Option<NodeId>)], from: Millis, to: Millis) -> (Millis, Millis) {
    stretches(changes, from, to)
        .iter()
        .filter(|(_, _, leader)| leader.is_none())
        .map(|&(start, end, _)| end - start)
        .fold((0, 0), |(total, longest), gap| {
            (total + gap, longest.max(gap))
        })
}

/// [`Timeline::changes`] as stretches `(start, end, agreed leader)` of `[from, to]`:
/// the report's figures add up those without a leader, and the HTML timeline draws
/// them all.
pub fn stretches(
    changes: &[(Millis, Option<NodeId>)],
    from: Millis,
    to: Millis,
) -> Vec<(Millis, Millis, Option<NodeId>)> {
    let mut out = Vec::new();
    for (i, &(t, leader)) in changes.iter().enumerate() {
        let end = changes.get(i + 1).map_or(to, |&(next, _)| next).min(to);
        let start = t.max(from);
        if end > start {
            out.push((start, end, leader));
        }
    }
    out
}

/// The failover or reclaim sample a step caused, if it is one.
fn sample(
    step: &Executed,
    before: Option<NodeId>,
    expected: NodeId,
    until: Millis,
    changes: &[(Millis, Option<NodeId>)],
    history: &[Entry],
    declarations: &[(Millis, NodeId, Epoch)],
) -> Option<Sample> {
    let t0 = step.at_ms;
    let kind = match &step.step {
        Step::Kill(n) | Step::Pause(n) if before == Some(*n) => SampleKind::Failover,
        Step::Partition(side) if before.is_some_and(|l| side.contains(&l)) => SampleKind::Failover,
        // A restart of the leader counts too: it must win again with a new epoch.
        Step::Restart(n) if *n == expected => SampleKind::Reclaim,
        Step::Start(n) | Step::Resume(n) if *n == expected && before != Some(expected) => {
            SampleKind::Reclaim
        }
        Step::Heal if before != Some(expected) => SampleKind::Reclaim,
        _ => return None,
    };
    let converged = changes
        .iter()
        .find(|&&(t, l)| t >= t0 && t < until && l == Some(expected))
        .map(|&(t, _)| t);
    let in_window = |t: Millis| t >= t0 && converged.is_some_and(|c| t <= c);
    let declared = declarations
        .iter()
        .find(|&&(t, n, _)| n == expected && in_window(t))
        .map(|&(t, _, _)| t);
    if converged.is_some() && declared.is_none() {
        // Agreement came back without an election (a pause or cut shorter than the
        // failure detector): nothing was taken over.
        return None;
    }
    let first_phase_end = match kind {
        SampleKind::Failover => history
            .iter()
            .find(|e| {
                in_window(e.at_ms)
                    && matches!(e.record, Record::View(v) if v.role == Role::Candidate)
            })
            .map(|e| e.at_ms),
        SampleKind::Reclaim => match step.step {
            Step::Start(n) | Step::Restart(n) => history
                .iter()
                .find(|e| {
                    e.node == n && in_window(e.at_ms) && matches!(e.record, Record::Started { .. })
                })
                .map(|e| e.at_ms),
            _ => Some(t0),
        },
    };
    let phases = match (first_phase_end, declared, converged) {
        (Some(a), Some(d), Some(c)) if a <= d => Some([a - t0, d - a, c - d]),
        _ => None,
    };
    Some(Sample {
        kind,
        cause: step.step.name(),
        at_ms: t0,
        leader: expected,
        total_ms: converged.map(|c| c - t0),
        phases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(at_ms: Millis, node: NodeId, role: Role, epoch: Option<(u64, NodeId)>) -> Entry {
        Entry {
            at_ms,
            node,
            record: Record::View(View {
                id: node,
                role,
                epoch: epoch.map(|(term, leader)| Epoch { term, leader }),
                eligible: true,
                incarnation: 1,
            }),
        }
    }

    fn declare(at_ms: Millis, node: NodeId, term: u64) -> Entry {
        Entry {
            at_ms,
            node,
            record: Record::Fact(crate::protocol::Fact::Declared {
                epoch: Epoch { term, leader: node },
            }),
        }
    }

    use Role::{Candidate as C, Coordinator as K, Follower as F};

    /// Three nodes agree on 3; 3 is killed at 1000; 2 turns candidate at 1250,
    /// declares at 1350, 1 follows at 1360; 3 restarts at 2000, starts at 2040,
    /// declares at 2150, everyone follows at 2160.
    fn story() -> (Vec<Entry>, Vec<Executed>) {
        let mut h = vec![
            view(100, 1, F, Some((1, 3))),
            view(100, 2, F, Some((1, 3))),
            declare(99, 3, 1),
            view(100, 3, K, Some((1, 3))),
            view(1250, 2, C, None),
            view(1260, 1, C, None),
            declare(1350, 2, 2),
            view(1350, 2, K, Some((2, 2))),
            view(1360, 1, F, Some((2, 2))),
            Entry {
                at_ms: 2040,
                node: 3,
                record: Record::Started { incarnation: 2 },
            },
            view(2041, 3, C, None),
            declare(2150, 3, 3),
            view(2150, 3, K, Some((3, 3))),
            view(2155, 2, F, Some((3, 3))),
            view(2160, 1, F, Some((3, 3))),
        ];
        h.sort_by_key(|e| e.at_ms);
        let steps = vec![
            Executed {
                at_ms: 1000,
                step: Step::Kill(3),
            },
            Executed {
                at_ms: 2000,
                step: Step::Start(3),
            },
        ];
        (h, steps)
    }

    #[test]
    fn failover_and_reclaim_with_phases() {
        let (h, steps) = story();
        let t = analyse(&h, &[1, 2, 3], &steps, 3000, Mode::Classic);
        assert_eq!(t.first_agreement_ms, Some(100));
        assert_eq!(t.elections, 3);
        assert_eq!(t.samples.len(), 2, "{:?}", t.samples);
        let failover = &t.samples[0];
        assert_eq!(failover.kind, SampleKind::Failover);
        assert_eq!(failover.leader, 2);
        assert_eq!(failover.total_ms, Some(360));
        assert_eq!(failover.phases, Some([250, 100, 10]));
        let reclaim = &t.samples[1];
        assert_eq!(reclaim.kind, SampleKind::Reclaim);
        assert_eq!(reclaim.total_ms, Some(160));
        assert_eq!(reclaim.phases, Some([40, 110, 10]));
        assert_eq!(t.no_agreement_ms, 360 + 160);
        assert_eq!(t.longest_no_agreement_ms, 360);
    }

    #[test]
    fn a_step_before_convergence_leaves_the_sample_unmeasured() {
        let (h, mut steps) = story();
        steps.insert(
            1,
            Executed {
                at_ms: 1300,
                step: Step::Pause(1),
            },
        );
        let t = analyse(&h, &[1, 2, 3], &steps, 3000, Mode::Classic);
        assert_eq!(t.samples[0].kind, SampleKind::Failover);
        assert_eq!(t.samples[0].total_ms, None);
    }

    #[test]
    fn agreement_needs_one_epoch_and_a_leading_leader() {
        let mut v = Views::new(&[1, 2]);
        v.apply(&view(1, 1, F, Some((1, 2))));
        assert_eq!(v.agreed(&[1, 2]), None, "2 has published nothing");
        v.apply(&view(1, 2, K, Some((2, 2))));
        assert_eq!(v.agreed(&[1, 2]), None, "1 follows an older epoch");
        v.apply(&view(2, 1, F, Some((2, 2))));
        assert_eq!(v.agreed(&[1, 2]).map(|a| a.0), Some(2));
        assert_eq!(v.agreed(&[1]), None, "the leader must be available");
    }
}
