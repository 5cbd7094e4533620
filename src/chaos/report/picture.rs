//! What the HTML timeline (`--html`, drawn by `chaos/picture/`) shows, read off the
//! run's history (the one the checker judged) with the functions the report's figures
//! come from, so picture and verdict cannot disagree: each node's lane (what it
//! believed, or that it was down or paused), the terms of office and where two of them
//! overlapped, who the cluster agreed on, the partitions and the steps taken. Times
//! are ms since the run's start, clipped to the run.

use crate::chaos::office::{self, PartitionSpan};
use crate::chaos::plan::Step;
use crate::chaos::timeline::{self, Executed, Sample, Timeline, Views};
use crate::checker::{self, Office};
use crate::history::{Entry, Record};
use crate::protocol::{Millis, Mode, NodeId, Timing, View};
use std::collections::BTreeMap;

/// What a node's lane shows for a stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No process: not started yet, or killed.
    Down,
    /// The process runs but has published no view yet.
    Starting,
    /// The process is stopped (SIGSTOP), still holding its last view (if any).
    Paused(Option<View>),
    /// The node published this view: candidate, follower or coordinator.
    Believes(View),
    /// Not in the member list: before its first start, for a node added at runtime,
    /// or after its removal (docs/design.md#membership). Its lane is left empty there.
    Absent,
}

/// One stretch of one state on a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    pub from_ms: Millis,
    pub until_ms: Millis,
    pub state: State,
}

/// A node's lane: its bands in time order, covering the whole run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    pub node: NodeId,
    pub bands: Vec<Band>,
}

/// A stretch of the run with the coordinator every available node agreed on, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreement {
    pub from_ms: Millis,
    pub until_ms: Millis,
    pub leader: Option<NodeId>,
}

/// Everything the timeline draws, besides the report's own figures and violations.
#[derive(Debug, Clone, Default)]
pub struct Picture {
    /// The run's length: the right edge of the timeline.
    pub span_ms: Millis,
    /// One lane per member, ascending IDs.
    pub lanes: Vec<Lane>,
    /// Terms of office as [`office::terms`] reads them (what I6 and the figures use).
    pub offices: Vec<Office>,
    /// Stretches with two or more nodes in office ([`checker::overlaps`]).
    pub overlaps: Vec<(Millis, Millis)>,
    /// The agreed coordinator over time ([`timeline::stretches`]), from the start.
    pub agreement: Vec<Agreement>,
    pub partitions: Vec<PartitionSpan>,
    /// Every step the runner took, in order.
    pub steps: Vec<Executed>,
    /// Every failover and reclaim the timeline found (measured or not).
    pub samples: Vec<Sample>,
}

/// What a picture is built from: the history and steps of a run and how it ran.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The merged, time-ordered history the checker judged.
    pub history: &'a [Entry],
    /// The members, ascending.
    pub ids: &'a [NodeId],
    /// The steps taken, stamped on the history's clock.
    pub steps: &'a [Executed],
    /// [`timeline::analyse`] of the same history and steps, as the report uses it.
    pub timeline: &'a Timeline,
    pub timing: Timing,
    pub mode: Mode,
    /// Wall-clock ms of the run's start and end.
    pub origin_ms: Millis,
    pub end_ms: Millis,
}

impl Picture {
    /// Reads the picture off a run.
    pub fn build(source: &Source) -> Picture {
        let origin = source.origin_ms;
        let end = source.end_ms.max(origin);
        let at = |t: Millis| t.clamp(origin, end) - origin;
        let offices: Vec<Office> = office::terms(source.history, &source.timing, source.mode, end)
            .into_iter()
            .map(|o| Office {
                from_ms: at(o.from_ms),
                until_ms: at(o.until_ms),
                ..o
            })
            .collect();
        Picture {
            span_ms: end - origin,
            lanes: lanes(source.history, source.ids, source.steps, origin, end),
            overlaps: checker::overlaps(&offices),
            offices,
            agreement: timeline::stretches(&source.timeline.changes, origin, end)
                .into_iter()
                .map(|(from, until, leader)| Agreement {
                    from_ms: at(from),
                    until_ms: at(until),
                    leader,
                })
                .collect(),
            partitions: office::partitions(source.history, source.ids, end)
                .into_iter()
                .map(|p| PartitionSpan {
                    from_ms: at(p.from_ms),
                    until_ms: at(p.until_ms),
                    ..p
                })
                .collect(),
            steps: source
                .steps
                .iter()
                .map(|s| Executed {
                    at_ms: at(s.at_ms),
                    step: s.step.clone(),
                })
                .collect(),
            samples: source
                .timeline
                .samples
                .iter()
                .map(|s| Sample {
                    at_ms: at(s.at_ms),
                    ..s.clone()
                })
                .collect(),
        }
    }
}

/// One lane being drawn: where the node's process is, the state shown since when, and
/// the bands already closed.
#[derive(Debug)]
struct Track {
    /// In the member list: from its first start if it was added at runtime, until a
    /// removal, and again from its next start.
    member: bool,
    running: bool,
    paused: bool,
    since: Millis,
    state: State,
    bands: Vec<Band>,
}

/// Each member's lane: views from [`Views`] (which forgets a killed node's view), the
/// process's state from the runner's and the node's own records, and membership from
/// the runner's steps: a node added at runtime appears at its first start, a removed
/// one leaves at its [`Step::Remove`] and appears again when started anew.
fn lanes(
    history: &[Entry],
    ids: &[NodeId],
    steps: &[Executed],
    origin: Millis,
    end: Millis,
) -> Vec<Lane> {
    let added: Vec<NodeId> = ids
        .iter()
        .copied()
        .filter(|&id| {
            let first = steps.iter().find(|s| step_node(&s.step) == Some(id));
            first.is_some_and(|s| matches!(s.step, Step::Add(_)))
        })
        .collect();
    let mut removals: Vec<(Millis, NodeId)> = steps
        .iter()
        .filter_map(|s| match s.step {
            Step::Remove(n) => Some((s.at_ms, n)),
            _ => None,
        })
        .collect();
    removals.reverse(); // popped in time order
    let mut views = Views::new(ids);
    let mut tracks: BTreeMap<NodeId, Track> = ids
        .iter()
        .map(|&id| {
            let member = !added.contains(&id);
            let track = Track {
                member,
                running: false,
                paused: false,
                since: 0,
                state: if member { State::Down } else { State::Absent },
                bands: Vec::new(),
            };
            (id, track)
        })
        .collect();
    let set = |track: &mut Track, at_ms: Millis, state: State| {
        if track.state != state {
            let now = at_ms.max(origin) - origin;
            push(&mut track.bands, track.since, now, track.state);
            (track.since, track.state) = (now, state);
        }
    };
    for entry in history.iter().filter(|e| e.at_ms <= end) {
        while let Some(&(at_ms, node)) = removals.last().filter(|(at, _)| *at <= entry.at_ms) {
            removals.pop();
            if let Some(track) = tracks.get_mut(&node) {
                track.member = false;
                set(track, at_ms, State::Absent);
            }
        }
        let Some(track) = tracks.get_mut(&entry.node) else {
            continue;
        };
        views.apply(entry);
        match entry.record {
            Record::Started { .. } => {
                (track.member, track.running, track.paused) = (true, true, false)
            }
            Record::Crashed => (track.running, track.paused) = (false, false),
            Record::Paused => track.paused = track.running,
            Record::Resumed => track.paused = false,
            _ => {}
        }
        let state = match (
            track.member,
            track.running,
            track.paused,
            views.get(entry.node),
        ) {
            (false, ..) => State::Absent,
            (_, false, _, _) => State::Down,
            (_, true, true, view) => State::Paused(view),
            (_, true, false, None) => State::Starting,
            (_, true, false, Some(view)) => State::Believes(view),
        };
        set(track, entry.at_ms, state);
    }
    for (at_ms, node) in removals.into_iter().rev().filter(|(at, _)| *at <= end) {
        if let Some(track) = tracks.get_mut(&node) {
            set(track, at_ms, State::Absent);
        }
    }
    tracks
        .into_iter()
        .map(|(node, mut track)| {
            push(&mut track.bands, track.since, end - origin, track.state);
            Lane {
                node,
                bands: track.bands,
            }
        })
        .collect()
}

/// The node a step aims at, if one (partitions and heals aim at none).
pub fn step_node(step: &Step) -> Option<NodeId> {
    match step {
        Step::Kill(n)
        | Step::Restart(n)
        | Step::Pause(n)
        | Step::Start(n)
        | Step::Resume(n)
        | Step::Deafen(n)
        | Step::Add(n)
        | Step::Remove(n)
        | Step::Replace(n)
        | Step::Damage(n)
        | Step::Reconfigure(n) => Some(*n),
        Step::Partition(_) | Step::Heal => None,
    }
}

/// Appends a band, skipping empty ones and merging it into the last one when it goes
/// on with the same state.
fn push(bands: &mut Vec<Band>, from_ms: Millis, until_ms: Millis, state: State) {
    if until_ms <= from_ms {
        return;
    }
    match bands.last_mut() {
        Some(last) if last.state == state && last.until_ms == from_ms => last.until_ms = until_ms,
        _ => bands.push(Band {
            from_ms,
            until_ms,
            state,
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::chaos::plan::Step;
    use crate::protocol::{Epoch, Fact, Role};

    pub(crate) fn view(
        at_ms: Millis,
        node: NodeId,
        role: Role,
        term: u64,
        leader: NodeId,
    ) -> Entry {
        let epoch = (role != Role::Candidate).then_some(Epoch { term, leader });
        Entry::new(
            at_ms,
            node,
            Record::View(View {
                id: node,
                role,
                epoch,
                eligible: true,
                incarnation: 1,
            }),
        )
    }

    pub(crate) fn established(at_ms: Millis, node: NodeId, term: u64) -> Entry {
        Entry::new(
            at_ms,
            node,
            Record::Fact(Fact::Established {
                epoch: Epoch { term, leader: node },
            }),
        )
    }

    /// A classic 3-node run starting at wall time 10 000: all start, 3 leads from
    /// 10 100; 3 is cut off alone at 11 000 and stays coordinator on its side while 2
    /// takes office at 11 400; healed at 12 000, 2 follows 3 again at 12 100 (its office
    /// ends: a crash of 2 here for brevity at 12 100, back at 12 300). 1 is paused at
    /// 12 500 and resumed at 12 700. The run ends at 13 000.
    pub(crate) fn story() -> (Vec<Entry>, Vec<Executed>) {
        use Role::{Candidate as C, Coordinator as K, Follower as F};
        let mut h = Vec::new();
        for n in 1..=3 {
            h.push(Entry::new(10_010, n, Record::Started { incarnation: 1 }));
            h.push(view(10_020, n, C, 0, 0));
        }
        h.extend([
            established(10_100, 3, 1),
            view(10_100, 3, K, 1, 3),
            view(10_110, 1, F, 1, 3),
            view(10_110, 2, F, 1, 3),
        ]);
        for (n, cut_off) in [(3, vec![1, 2]), (1, vec![3]), (2, vec![3])] {
            h.push(Entry::new(11_000, n, Record::Partitioned { cut_off }));
        }
        h.extend([
            view(11_300, 2, C, 0, 0),
            view(11_300, 1, C, 0, 0),
            established(11_400, 2, 2),
            view(11_400, 2, K, 2, 2),
            view(11_410, 1, F, 2, 2),
        ]);
        for n in 1..=3 {
            h.push(Entry::new(12_000, n, Record::Healed));
        }
        h.extend([
            Entry::new(12_100, 2, Record::Crashed),
            view(12_100, 1, F, 1, 3),
            Entry::new(12_300, 2, Record::Started { incarnation: 2 }),
            view(12_310, 2, C, 0, 0),
            view(12_350, 2, F, 1, 3),
            Entry::new(12_500, 1, Record::Paused),
            Entry::new(12_700, 1, Record::Resumed),
        ]);
        h.sort_by_key(|e| e.at_ms);
        let steps = [
            (11_000, Step::Partition(vec![3])),
            (12_000, Step::Heal),
            (12_100, Step::Restart(2)),
            (12_500, Step::Pause(1)),
            (12_700, Step::Resume(1)),
        ]
        .into_iter()
        .map(|(at_ms, step)| Executed { at_ms, step })
        .collect();
        (h, steps)
    }

    pub(crate) fn picture(mode: Mode) -> Picture {
        let (history, steps) = story();
        let ids = [1, 2, 3];
        let timeline = timeline::analyse(&history, &ids, &steps, 13_000, mode);
        Picture::build(&Source {
            history: &history,
            ids: &ids,
            steps: &steps,
            timeline: &timeline,
            timing: Timing::default(),
            mode,
            origin_ms: 10_000,
            end_ms: 13_000,
        })
    }

    fn kinds(lane: &Lane) -> Vec<(Millis, Millis, &'static str)> {
        lane.bands
            .iter()
            .map(|b| {
                let kind = match b.state {
                    State::Down => "down",
                    State::Absent => "absent",
                    State::Starting => "starting",
                    State::Paused(_) => "paused",
                    State::Believes(v) => match v.role {
                        Role::Candidate => "candidate",
                        Role::Follower => "follower",
                        Role::Coordinator => "coordinator",
                    },
                };
                (b.from_ms, b.until_ms, kind)
            })
            .collect()
    }

    #[test]
    fn lanes_cover_the_run_with_down_paused_and_every_view() {
        let p = picture(Mode::Classic);
        assert_eq!(p.span_ms, 3000);
        assert_eq!(
            p.lanes.iter().map(|l| l.node).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(
            kinds(&p.lanes[1]),
            vec![
                (0, 10, "down"),
                (10, 20, "starting"),
                (20, 110, "candidate"),
                (110, 1300, "follower"),
                (1300, 1400, "candidate"),
                (1400, 2100, "coordinator"),
                (2100, 2300, "down"),
                (2300, 2310, "starting"),
                (2310, 2350, "candidate"),
                (2350, 3000, "follower"),
            ]
        );
        let node1 = kinds(&p.lanes[0]);
        assert!(node1.contains(&(2500, 2700, "paused")), "{node1:?}");
        // Back from the pause it believes what it did before: 3 leads at term 1.
        assert_eq!(node1.last(), Some(&(2700, 3000, "follower")));
    }

    #[test]
    fn overlaps_offices_and_agreement_come_from_the_reports_readers() {
        let p = picture(Mode::Classic);
        // 3 in office throughout (classic: nothing ends it), 2 from 1400 to its crash.
        assert_eq!(p.overlaps, vec![(1400, 2100)]);
        let (history, _) = story();
        let figures = office::figures(
            &history,
            &[1, 2, 3],
            &Timing::default(),
            Mode::Classic,
            13_000,
        );
        let drawn: Millis = p.overlaps.iter().map(|(a, b)| b - a).sum();
        assert_eq!(drawn, figures.two_coordinators_ms);
        assert_eq!(p.partitions.len(), 1);
        assert_eq!(
            (p.partitions[0].from_ms, p.partitions[0].until_ms),
            (1000, 2000)
        );
        assert_eq!(p.partitions[0].majority_side, Some(vec![1, 2]));
        assert_eq!(p.agreement[0].leader, None);
        assert!(p.agreement.iter().any(|a| a.leader == Some(3)));
        assert_eq!(p.agreement.last().map(|a| a.until_ms), Some(3000));
        assert_eq!(p.steps.len(), 5);
        assert_eq!(p.steps[0].at_ms, 1000);
    }
}
