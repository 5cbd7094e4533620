//! A made-up chaos run as dense as a real one, for tests that need a long history
//! without spending minutes of wall time on it: the real seeded schedule, and every
//! node reacting to each step the way the protocol does.
#![allow(dead_code)]

use bully::chaos::office;
use bully::chaos::plan::{plan, FaultKind, PlanSpec, Step};
use bully::chaos::report::picture::{Picture, Source};
use bully::chaos::report::{Report, RunParams, StepLine};
use bully::chaos::timeline::{self, Executed};
use bully::history::{Entry, Record};
use bully::protocol::{DemotionReason, Epoch, Fact, Millis, Mode, NodeId, Role, Timing, View};
use std::collections::{BTreeMap, BTreeSet};

/// A report for a made-up run as dense as a real one: the real seeded schedule of a
/// classic chaos run with every fault kind, and every node reacting to each step the
/// way the protocol does (stand, then lead or follow the highest node it can reach).
pub fn report(nodes: u64, duration_ms: Millis) -> Report {
    let (timing, mode) = (Timing::default(), Mode::Classic);
    let schedule = plan(&PlanSpec {
        nodes,
        duration_ms,
        faults: FaultKind::IN_ALL.to_vec(),
        timing,
        mode,
        slack_ms: timing.convergence_bound_in(mode),
        seed: 1,
    });
    let origin = 1_700_000_000_000;
    let ids: Vec<NodeId> = (1..=nodes).collect();
    let mut world = World::new(&ids);
    for &n in &ids {
        world.start(origin + 10, n);
    }
    world.settle(origin + 100);
    let mut steps = Vec::new();
    for planned in schedule {
        let t = origin + 1_000 + planned.at_ms;
        world.apply(t, &planned.step);
        world.settle(t);
        steps.push(Executed {
            at_ms: t,
            step: planned.step,
        });
    }
    let end = origin + 1_000 + duration_ms;
    let mut history = world.history;
    history.sort_by_key(|e| e.at_ms);
    let timeline = timeline::analyse(&history, &ids, &steps, end, mode);
    let (failover, reclaim, share) = Report::figures(&timeline, end);
    let mut faults = BTreeMap::new();
    for s in &steps {
        *faults.entry(s.step.name().to_string()).or_insert(0) += 1;
    }
    let report = Report {
        params: RunParams {
            command: "chaos (synthetic)".into(),
            mode,
            nodes,
            seed: 1,
            duration_s: duration_ms as f64 / 1000.0,
            timing_profile: "default".into(),
            timing,
            ..RunParams::default()
        },
        verdict: "pass",
        faults,
        steps: steps
            .iter()
            .map(|s| StepLine {
                at_s: (s.at_ms - origin) as f64 / 1000.0,
                step: s.step.to_string(),
            })
            .collect(),
        elections: timeline.elections,
        failover,
        reclaim,
        no_agreement_ms: timeline.no_agreement_ms,
        longest_no_agreement_ms: timeline.longest_no_agreement_ms,
        no_agreement_share: share,
        offices: office::figures(&history, &ids, &timing, mode, end),
        picture: Picture::build(&Source {
            history: &history,
            ids: &ids,
            steps: &steps,
            timeline: &timeline,
            timing,
            mode,
            origin_ms: origin,
            end_ms: end,
        }),
        ..Report::default()
    };
    report
}

/// The made-up cluster: who runs, who is paused, the cut side, whom each node follows
/// and who leads, and the history written so far.
struct World {
    ids: Vec<NodeId>,
    running: BTreeSet<NodeId>,
    paused: BTreeSet<NodeId>,
    cut: BTreeSet<NodeId>,
    follows: BTreeMap<NodeId, Epoch>,
    leading: BTreeMap<NodeId, Epoch>,
    term: u64,
    history: Vec<Entry>,
}

impl World {
    fn new(ids: &[NodeId]) -> World {
        World {
            ids: ids.to_vec(),
            running: BTreeSet::new(),
            paused: BTreeSet::new(),
            cut: BTreeSet::new(),
            follows: BTreeMap::new(),
            leading: BTreeMap::new(),
            term: 0,
            history: Vec::new(),
        }
    }

    fn log(&mut self, at_ms: Millis, node: NodeId, record: Record) {
        self.history.push(Entry {
            at_ms,
            node,
            record,
        });
    }

    fn view(&mut self, at_ms: Millis, node: NodeId, role: Role, epoch: Option<Epoch>) {
        let view = View {
            id: node,
            role,
            epoch,
            eligible: true,
            incarnation: 1,
        };
        self.log(at_ms, node, Record::View(view));
    }

    fn start(&mut self, t: Millis, n: NodeId) {
        self.running.insert(n);
        self.log(t + 40, n, Record::Started { incarnation: 1 });
        self.view(t + 50, n, Role::Candidate, None);
    }

    fn stop(&mut self, t: Millis, n: NodeId) {
        self.log(t, n, Record::Crashed);
        self.running.remove(&n);
        self.paused.remove(&n);
        self.follows.remove(&n);
        self.leading.remove(&n);
    }

    /// The runner's records for one step.
    fn apply(&mut self, t: Millis, step: &Step) {
        match step {
            Step::Kill(n) => self.stop(t, *n),
            // A synthetic run has one timing: a roll's step is a restart.
            Step::Restart(n) | Step::Reconfigure(n) => {
                self.stop(t, *n);
                self.start(t, *n);
            }
            Step::Start(n) => self.start(t, *n),
            // Synthetic runs keep one member list: an add starts, a removal stops.
            Step::Add(n) => self.start(t, *n),
            Step::Remove(n) | Step::Replace(n) | Step::Damage(n) => self.stop(t, *n),
            Step::Pause(n) => {
                self.paused.insert(*n);
                self.log(t, *n, Record::Paused);
            }
            Step::Resume(n) => {
                self.paused.remove(n);
                self.log(t, *n, Record::Resumed);
            }
            Step::Partition(side) => {
                self.cut = side.iter().copied().collect();
                let (cut, rest): (Vec<NodeId>, Vec<NodeId>) =
                    self.ids.iter().partition(|n| self.cut.contains(n));
                for (nodes, cut_off) in [(&cut, &rest), (&rest, &cut)] {
                    for &n in nodes {
                        let cut_off = cut_off.clone();
                        self.log(t, n, Record::Partitioned { cut_off });
                    }
                }
            }
            Step::Deafen(n) => {
                // Drawn as a cut of its own: it hears no one (the others still hear it).
                self.cut = [*n].into();
                let cut_off: Vec<NodeId> = self.ids.iter().copied().filter(|p| p != n).collect();
                self.log(t, *n, Record::Partitioned { cut_off });
            }
            Step::Heal => {
                self.cut.clear();
                for n in self.ids.clone() {
                    self.log(t, n, Record::Healed);
                }
            }
        }
    }

    /// Every side elects the highest node it can reach; the others follow it.
    fn settle(&mut self, t: Millis) {
        let up: Vec<NodeId> = self
            .running
            .iter()
            .copied()
            .filter(|n| !self.paused.contains(n))
            .collect();
        let (cut, rest): (Vec<NodeId>, Vec<NodeId>) = up.iter().partition(|n| self.cut.contains(n));
        for side in [cut, rest] {
            let Some(&leader) = side.last() else {
                continue;
            };
            let epoch = match self.leading.get(&leader) {
                Some(&epoch) => epoch,
                None => {
                    self.term += 1;
                    let epoch = Epoch {
                        term: self.term,
                        leader,
                    };
                    self.view(t + 300, leader, Role::Candidate, None);
                    self.log(t + 400, leader, Record::Fact(Fact::Declared { epoch }));
                    self.log(t + 400, leader, Record::Fact(Fact::Established { epoch }));
                    self.view(t + 400, leader, Role::Coordinator, Some(epoch));
                    self.leading.insert(leader, epoch);
                    self.follows.insert(leader, epoch);
                    epoch
                }
            };
            for &n in side.iter().filter(|&&n| n != leader) {
                if self.follows.get(&n) == Some(&epoch) {
                    continue;
                }
                if let Some(old) = self.leading.remove(&n) {
                    let demoted = Fact::Demoted {
                        epoch: old,
                        reason: DemotionReason::NewerEpoch,
                        office_ended_at: t + 300,
                    };
                    self.log(t + 300, n, Record::Fact(demoted));
                }
                self.view(t + 300, n, Role::Candidate, None);
                self.view(t + 420, n, Role::Follower, Some(epoch));
                self.follows.insert(n, epoch);
            }
        }
    }
}
