//! Two figures about terms of office that the report gives in both modes, read off the
//! history with [`checker::offices`]:
//! - time with two coordinators: classic mode has some whenever a partition cuts a
//!   coordinator off (one per side); quorum mode must have none (I6);
//! - time the majority side of a partition had no coordinator: what a partition costs
//!   the side that could go on working. Quorum mode pays a failover there only when
//!   the coordinator was on the minority side; the figure shows whether it pays more.
//!
//! Partitions come from the runner's `Partitioned` / `Healed` records, so the same code
//! reads a chaos run, a benchmark or a hand-made history.

use super::stats::Summary;
use crate::checker::{self, Office};
use crate::history::{Entry, Record};
use crate::protocol::membership::majority_of;
use crate::protocol::{Millis, Mode, NodeId, Timing};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The two figures, in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OfficeFigures {
    /// Total time during which two or more nodes were in office.
    pub two_coordinators_ms: Millis,
    /// Total time, during partitions, in which the side holding a majority of the
    /// members had no node in office (partitions without a majority side count 0).
    pub majority_side_leaderless_ms: Millis,
    /// Takeovers by a higher node from a lower one still in office (a restarted node
    /// reclaiming): the gap between the old office's end and the new one's start.
    pub takeover_gaps: Summary,
}

/// The gaps (ms) between consecutive terms of office where a higher node followed a
/// lower one: the handover of quorum mode (Q7) or the bully of classic mode. A
/// failover after a kill is never counted: there the next office is a lower node's.
pub fn takeover_gaps(offices: &[Office]) -> Vec<Millis> {
    let mut by_start: Vec<&Office> = offices.iter().collect();
    by_start.sort_by_key(|o| o.from_ms);
    by_start
        .windows(2)
        .filter(|w| w[1].node > w[0].node && w[1].from_ms >= w[0].until_ms)
        .map(|w| w[1].from_ms - w[0].until_ms)
        .collect()
}

/// How long a paused coordinator can stay in office, for [`checker::offices`]: D in
/// quorum mode (its lease runs out, Q3); unbounded in classic mode, where it remains
/// coordinator until it notices.
pub fn lease_bound(timing: &Timing, mode: Mode) -> Option<Millis> {
    match mode {
        Mode::Quorum => Some(crate::checker::lease_bound_ms(timing)),
        Mode::Classic => None,
    }
}

/// Both figures for `history` (time-ordered) up to `end_ms`, for a cluster of
/// `members` running `mode`.
pub fn figures(
    history: &[Entry],
    members: &[NodeId],
    timing: &Timing,
    mode: Mode,
    end_ms: Millis,
) -> OfficeFigures {
    let offices = terms(history, timing, mode, end_ms);
    OfficeFigures {
        two_coordinators_ms: checker::overlap_ms(&offices),
        majority_side_leaderless_ms: majority_side_leaderless_ms(
            history, members, &offices, end_ms,
        ),
        takeover_gaps: Summary::of(&takeover_gaps(&offices)),
    }
}

/// The terms of office in `history` up to `end_ms`, those still open running to
/// `end_ms`: what both figures are computed from, and what the HTML timeline draws,
/// so the picture shows the time the report counts.
pub fn terms(history: &[Entry], timing: &Timing, mode: Mode, end_ms: Millis) -> Vec<Office> {
    let upto = history.partition_point(|e| e.at_ms <= end_ms);
    let mut history = history[..upto].to_vec();
    // `checker::offices` ends the terms still open at the history's last entry; a
    // record at `end_ms` that means nothing to either reader (node 0 is no member)
    // makes them run to the end, as the partitions do.
    history.push(Entry {
        at_ms: end_ms,
        node: 0,
        record: Record::Healed,
    });
    checker::offices(&history, lease_bound(timing, mode))
}

/// A stretch of time during which one partition was in effect, with the side that
/// holds a majority of the members (`None` when neither side does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpan {
    pub from_ms: Millis,
    pub until_ms: Millis,
    pub majority_side: Option<Vec<NodeId>>,
}

/// The partitions in `history`: a partition is in effect while some node's latest
/// `Partitioned` record has not been followed by its `Healed`; one still in effect at
/// the end runs to `end_ms`. Each node's record names the nodes it is cut off from, so
/// any one record gives both sides.
pub fn partitions(history: &[Entry], members: &[NodeId], end_ms: Millis) -> Vec<PartitionSpan> {
    let mut cut: BTreeMap<NodeId, BTreeSet<NodeId>> = BTreeMap::new();
    let mut open: Option<(Millis, Option<Vec<NodeId>>)> = None;
    let mut out = Vec::new();
    for entry in history.iter().filter(|e| e.at_ms <= end_ms) {
        match &entry.record {
            Record::Partitioned { cut_off } => {
                cut.insert(entry.node, cut_off.iter().copied().collect());
            }
            Record::Healed => {
                cut.remove(&entry.node);
            }
            _ => continue,
        }
        let now = (!cut.is_empty()).then(|| majority_side(&cut, members));
        let changed = match (&open, &now) {
            (Some((_, was)), Some(is)) => was != is,
            (None, None) => false,
            _ => true,
        };
        if changed {
            if let Some((from_ms, majority_side)) = open.take() {
                out.push(PartitionSpan {
                    from_ms,
                    until_ms: entry.at_ms,
                    majority_side,
                });
            }
            open = now.map(|side| (entry.at_ms, side));
        }
    }
    if let Some((from_ms, majority_side)) = open {
        out.push(PartitionSpan {
            from_ms,
            until_ms: end_ms.max(from_ms),
            majority_side,
        });
    }
    out
}

/// The side of the partition described by `cut` that holds a majority of `members`.
/// Read from the lowest node that has a record: its side is every member it is not cut
/// off from, the other side the members it is cut off from.
fn majority_side(
    cut: &BTreeMap<NodeId, BTreeSet<NodeId>>,
    members: &[NodeId],
) -> Option<Vec<NodeId>> {
    let (_, cut_off) = cut.iter().next()?;
    let (other, own): (Vec<NodeId>, Vec<NodeId>) =
        members.iter().partition(|n| cut_off.contains(n));
    let majority = majority_of(members.len());
    [own, other].into_iter().find(|side| side.len() >= majority)
}

/// Total time during partitions in which no node of the majority side was in office.
pub fn majority_side_leaderless_ms(
    history: &[Entry],
    members: &[NodeId],
    offices: &[Office],
    end_ms: Millis,
) -> Millis {
    partitions(history, members, end_ms)
        .iter()
        .map(|span| {
            let Some(side) = &span.majority_side else {
                return 0;
            };
            let mut covered: Vec<(Millis, Millis)> = offices
                .iter()
                .filter(|o| side.contains(&o.node))
                .map(|o| (o.from_ms.max(span.from_ms), o.until_ms.min(span.until_ms)))
                .filter(|(from, until)| from < until)
                .collect();
            let length = span.until_ms - span.from_ms;
            length.saturating_sub(union_ms(&mut covered))
        })
        .sum()
}

/// How steady leadership was over a window: what a one-way fault (a coordinator that
/// sends but cannot hear) is judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stability {
    /// Terms of office that began within the window: each is a change of coordinator.
    pub offices_begun: usize,
    /// The longest stretch within the window in which no node was in office.
    pub longest_leaderless_ms: Millis,
}

/// [`Stability`] of `offices` over `[from_ms, until_ms)`.
pub fn stability(offices: &[Office], from_ms: Millis, until_ms: Millis) -> Stability {
    let mut spans: Vec<(Millis, Millis)> = offices
        .iter()
        .map(|o| (o.from_ms.max(from_ms), o.until_ms.min(until_ms)))
        .filter(|(from, until)| from < until)
        .collect();
    spans.sort_unstable();
    let mut longest = 0;
    let mut reach = from_ms;
    for &(from, until) in &spans {
        longest = longest.max(from.saturating_sub(reach));
        reach = reach.max(until);
    }
    Stability {
        offices_begun: offices
            .iter()
            .filter(|o| (from_ms..until_ms).contains(&o.from_ms))
            .count(),
        longest_leaderless_ms: longest.max(until_ms.saturating_sub(reach)),
    }
}

/// The total length of the union of half-open intervals.
fn union_ms(intervals: &mut [(Millis, Millis)]) -> Millis {
    intervals.sort_unstable();
    let mut total = 0;
    let mut reach = 0;
    for &(from, until) in intervals.iter() {
        let from = from.max(reach);
        if until > from {
            total += until - from;
            reach = until;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    #[test]
    fn stability_counts_new_offices_and_the_longest_gap() {
        let office = Office::for_test;
        // 5 leads until 300; nobody until 900; 4 from 900 to 1500, 3 from 1400 on.
        let offices = [
            office(5, 0, 300),
            office(4, 900, 1500),
            office(3, 1400, 5000),
        ];
        let s = super::stability(&offices, 100, 2000);
        assert_eq!(s.offices_begun, 2);
        assert_eq!(s.longest_leaderless_ms, 600);
        // Nobody at the end of the window counts too.
        let s = super::stability(&offices[..2], 100, 2000);
        assert_eq!(s.longest_leaderless_ms, 600);
        let s = super::stability(&offices[..2], 100, 2400);
        assert_eq!(s.longest_leaderless_ms, 900);
    }

    use super::*;
    use crate::protocol::{DemotionReason, Epoch, Fact};

    const MEMBERS: [NodeId; 5] = [1, 2, 3, 4, 5];

    #[test]
    fn takeover_gap_counts_a_higher_node_after_a_lower_one_only() {
        let office = |node, from_ms, until_ms| Office {
            node,
            epoch: Epoch {
                term: from_ms,
                leader: node,
            },
            from_ms,
            until_ms,
        };
        // 5 killed at 100, 4 fails over at 400 (not a takeover), 5 back and handed
        // over at 900 -> 907.
        let offices = [office(5, 0, 100), office(4, 400, 900), office(5, 907, 2000)];
        assert_eq!(takeover_gaps(&offices), vec![7]);
    }

    fn established(at_ms: Millis, node: NodeId, term: u64) -> Entry {
        Entry::new(
            at_ms,
            node,
            Record::Fact(Fact::Established {
                epoch: Epoch { term, leader: node },
            }),
        )
    }

    fn demoted(at_ms: Millis, node: NodeId, term: u64, office_ended_at: Millis) -> Entry {
        Entry::new(
            at_ms,
            node,
            Record::Fact(Fact::Demoted {
                epoch: Epoch { term, leader: node },
                reason: DemotionReason::LeaseLost,
                office_ended_at,
            }),
        )
    }

    /// The runner's records for cutting `side` off from the other members at `at_ms`.
    fn partition(at_ms: Millis, side: &[NodeId]) -> Vec<Entry> {
        let rest: Vec<NodeId> = MEMBERS
            .iter()
            .copied()
            .filter(|n| !side.contains(n))
            .collect();
        let mut out = Vec::new();
        for (nodes, cut_off) in [(side, &rest), (&rest[..], &side.to_vec())] {
            for &n in nodes {
                out.push(Entry::new(
                    at_ms,
                    n,
                    Record::Partitioned {
                        cut_off: cut_off.clone(),
                    },
                ));
            }
        }
        out
    }

    fn heal(at_ms: Millis) -> Vec<Entry> {
        MEMBERS
            .iter()
            .map(|&n| Entry::new(at_ms, n, Record::Healed))
            .collect()
    }

    fn sorted(mut h: Vec<Entry>) -> Vec<Entry> {
        h.sort_by_key(|e| e.at_ms);
        h
    }

    /// 5 leads; cut off alone at 1000 it loses its lease at 1300 (logged 1350); 4 takes
    /// office at 1400. Healed at 3000, 4 yields at 3100 and 5 leads again from 3200.
    /// Then {4, 5} | {1, 2, 3} at 5000: 5 stays in office until 5300, 3 takes over at
    /// 5600; healed at 7000, 3 yields at 7050, 5 back at 7100. Then {1, 2} | {3, 4, 5}
    /// at 9000, healed at 9500: 5 never leaves office. End at 10000.
    fn quorum_story() -> Vec<Entry> {
        let mut h = vec![
            established(100, 5, 1),
            demoted(1350, 5, 1, 1300),
            established(1400, 4, 2),
            demoted(3100, 4, 2, 3100),
            established(3200, 5, 3),
            demoted(5350, 5, 3, 5300),
            established(5600, 3, 4),
            demoted(7050, 3, 4, 7050),
            established(7100, 5, 5),
        ];
        h.extend(partition(1000, &[5]));
        h.extend(heal(3000));
        h.extend(partition(5000, &[4, 5]));
        h.extend(heal(7000));
        h.extend(partition(9000, &[1, 2]));
        h.extend(heal(9500));
        sorted(h)
    }

    #[test]
    fn partitions_are_read_with_their_majority_side() {
        let spans = partitions(&quorum_story(), &MEMBERS, 10_000);
        let got: Vec<(Millis, Millis, Option<Vec<NodeId>>)> = spans
            .into_iter()
            .map(|s| (s.from_ms, s.until_ms, s.majority_side))
            .collect();
        assert_eq!(
            got,
            vec![
                (1000, 3000, Some(vec![1, 2, 3, 4])),
                (5000, 7000, Some(vec![1, 2, 3])),
                (9000, 9500, Some(vec![3, 4, 5])),
            ]
        );
    }

    #[test]
    fn majority_side_without_a_coordinator_in_quorum_mode() {
        let h = quorum_story();
        let f = figures(&h, &MEMBERS, &Timing::default(), Mode::Quorum, 10_000);
        // 1000..1400 (4 not yet in office) + 5000..5600 (5 on the minority side; its
        // office until 5300 does not count for the majority side) + 0 (5 is on it).
        assert_eq!(f.majority_side_leaderless_ms, 400 + 600);
        assert_eq!(f.two_coordinators_ms, 0);
    }

    #[test]
    fn classic_overlap_is_counted_and_ends_the_leaderless_time() {
        // Classic: 5 stays coordinator on its own side until the heal; 4 declares at 1400.
        let mut h = vec![
            established(100, 5, 1),
            established(1400, 4, 2),
            demoted(3100, 4, 2, 3100),
            established(3150, 5, 3),
        ];
        h.extend(partition(1000, &[5]));
        h.extend(heal(3000));
        let h = sorted(h);
        let f = figures(&h, &MEMBERS, &Timing::default(), Mode::Classic, 4000);
        assert_eq!(f.majority_side_leaderless_ms, 400);
        // 1400..3100 both 4 and 5 (5's office from 100 restarts at 3150 with term 3).
        assert_eq!(f.two_coordinators_ms, 3100 - 1400);
    }

    #[test]
    fn no_majority_side_counts_nothing_and_an_open_partition_runs_to_the_end() {
        let members = [1, 2, 3, 4];
        let mut h = vec![established(100, 4, 1)];
        for (nodes, cut_off) in [([1, 2], vec![3, 4]), ([3, 4], vec![1, 2])] {
            for n in nodes {
                h.push(Entry::new(
                    500,
                    n,
                    Record::Partitioned {
                        cut_off: cut_off.clone(),
                    },
                ));
            }
        }
        h.push(demoted(900, 4, 1, 800));
        let f = figures(&h, &members, &Timing::default(), Mode::Quorum, 2000);
        assert_eq!(
            f.majority_side_leaderless_ms, 0,
            "2 | 2 has no majority side"
        );
        let spans = partitions(&h, &members, 2000);
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].from_ms, spans[0].until_ms), (500, 2000));
        assert_eq!(spans[0].majority_side, None);

        // A 3 | 1 cut of the same four never healed: 1..3 lead nobody until the end.
        let mut h = vec![established(100, 4, 1)];
        h.push(Entry::new(
            500,
            4,
            Record::Partitioned {
                cut_off: vec![1, 2, 3],
            },
        ));
        h.push(demoted(900, 4, 1, 800));
        let f = figures(&h, &members, &Timing::default(), Mode::Quorum, 2000);
        assert_eq!(f.majority_side_leaderless_ms, 1500);
        // If 3 takes office at 1200 and the history ends there, it holds office to
        // the end of the run, not to its last record.
        h.push(established(1200, 3, 2));
        let f = figures(&h, &members, &Timing::default(), Mode::Quorum, 2000);
        assert_eq!(f.majority_side_leaderless_ms, 1200 - 500);
    }

    #[test]
    fn union_of_overlapping_intervals() {
        assert_eq!(union_ms(&mut [(0, 10), (5, 15), (20, 30), (21, 22)]), 25);
        assert_eq!(union_ms(&mut []), 0);
    }
}
