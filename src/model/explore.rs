//! The breadth-first search over every state within the bounds, and the replay that
//! turns a path into a readable counterexample.

use super::fingerprint::{FingerprintMap, FingerprintSet};
use super::outcome::{Counterexample, Exploration};
use super::transition::Transition;
use super::{fingerprint, Model, World};
use crate::checker::Violation;
use crate::protocol::{Membership, Seat};
use std::collections::hash_map::Entry;
use std::collections::VecDeque;

impl Model {
    /// Breadth-first search over every state within the bounds.
    pub fn explore(&self) -> Exploration {
        let mut outcome = Exploration {
            states: 0,
            transitions: 0,
            max_depth: 0,
            depth_limited: false,
            liveness_checked: 0,
            changed: 0,
            newest_version: 0,
            counterexample: None,
        };
        let initial = match self.initial() {
            Ok(w) => w,
            Err(v) => {
                outcome.counterexample = Some(self.counterexample(v, Vec::new()));
                return outcome;
            }
        };
        // Every state seen but the root, with the state and step it was first reached by.
        let mut parents: FingerprintMap<(u64, Transition)> = FingerprintMap::default();
        let root = fingerprint(&initial);
        let mut frontier: VecDeque<(World, u64, usize)> = VecDeque::from([(initial, root, 0)]);
        let mut converging = FingerprintSet::default();
        while let Some((world, hash, depth)) = frontier.pop_front() {
            outcome.states += 1;
            outcome.max_depth = outcome.max_depth.max(depth);
            outcome.changed += usize::from(world.asked > 0);
            let versions = world.nodes.iter().filter_map(|n| n.list.as_ref());
            let newest = versions.map(|l| l.id.version).max().unwrap_or(0);
            outcome.newest_version = outcome.newest_version.max(newest);
            if let Err((v, fair)) = self.converges_cached(&world, &mut converging) {
                let mut steps = path(&parents, hash);
                let faulty = steps.len();
                steps.extend(fair);
                let mut c = self.counterexample(v, steps);
                c.trace.insert(
                    faulty.min(c.trace.len()),
                    "-- every fault ends; fair schedule:".into(),
                );
                outcome.counterexample = Some(c);
                return outcome;
            }
            outcome.liveness_checked += 1;
            if depth >= self.config.bounds.depth {
                outcome.depth_limited = true;
                continue;
            }
            if self.highest_term(&world) > self.config.bounds.term {
                continue;
            }
            for step in self.enabled(&world) {
                outcome.transitions += 1;
                match self.apply(&world, step) {
                    Ok(next) => {
                        let h = fingerprint(&next);
                        if h != root {
                            if let Entry::Vacant(e) = parents.entry(h) {
                                e.insert((hash, step));
                                frontier.push_back((next, h, depth + 1));
                            }
                        }
                    }
                    Err(v) => {
                        let mut steps = path(&parents, hash);
                        steps.push(step);
                        outcome.counterexample = Some(self.counterexample(v, steps));
                        return outcome;
                    }
                }
            }
        }
        outcome
    }

    /// Replays `steps` from the initial state, one line per step.
    pub fn counterexample(&self, violation: Violation, steps: Vec<Transition>) -> Counterexample {
        let mut trace = Vec::new();
        if let Ok(mut w) = self.initial() {
            for &step in &steps {
                let asked = match step {
                    Transition::Ask(_) => self
                        .config
                        .changes
                        .get(usize::from(w.asked))
                        .map_or(String::new(), |c| format!(" ({c})")),
                    _ => String::new(),
                };
                match self.apply(&w, step) {
                    Ok(next) => {
                        trace.push(format!("{step}{asked}  => {}", self.describe(&next)));
                        w = next;
                    }
                    Err(v) => {
                        trace.push(format!("{step}{asked}  => {v}"));
                        break;
                    }
                }
            }
        }
        Counterexample {
            violation,
            steps,
            trace,
        }
    }

    /// Whether the nodes' lists may differ (a joining process, an operator's change):
    /// then [`Model::describe`] shows each node's list.
    fn lists_change(&self) -> bool {
        self.config.joining.is_some() || !self.config.changes.is_empty()
    }

    /// The nodes' roles and epochs (and lists, when they may differ) at a glance.
    pub fn describe(&self, w: &World) -> String {
        let nodes: Vec<String> = w
            .nodes
            .iter()
            .zip(&self.config.ids)
            .map(|(node, id)| match &node.machine {
                None => format!("n{id} down"),
                Some(m) => {
                    let epoch = m.view().epoch.map_or("-".to_string(), |e| e.to_string());
                    let paused = if node.paused { " paused" } else { "" };
                    let list = if self.lists_change() {
                        format!(" {}", list_summary(m.members()))
                    } else {
                        String::new()
                    };
                    format!("n{id} {} {epoch}{list}{paused}", m.role_at(w.now))
                }
            })
            .collect();
        format!("t={} [{}]", w.now, nodes.join(", "))
    }

    /// Replays `steps`; the first violation met, if any (for regression tests).
    pub fn replay(&self, steps: &[Transition]) -> Result<World, Violation> {
        let mut w = self.initial()?;
        for &step in steps {
            w = self.apply(&w, step)?;
        }
        Ok(w)
    }
}

/// A list at a glance: its members (`L` a learner, `W` a witness), its version and
/// the term it was written under (`-`: seeded from the config files).
fn list_summary(list: &Membership) -> String {
    let members: Vec<String> = list
        .members
        .iter()
        .map(|m| {
            let mark = match (m.learner, m.seat) {
                (true, _) => "L",
                (false, Seat::Witness) => "W",
                (false, Seat::Voter) => "",
            };
            format!("{}{mark}", m.id)
        })
        .collect();
    let stamp = list.id.stamp.map_or("-".to_string(), |e| e.to_string());
    format!("[{}]v{}/{stamp}", members.join(","), list.id.version)
}

/// The transitions from the initial state to the state `hash`, read off the BFS tree.
fn path(parents: &FingerprintMap<(u64, Transition)>, mut hash: u64) -> Vec<Transition> {
    let mut steps = Vec::new();
    while let Some(&(parent, step)) = parents.get(&hash) {
        steps.push(step);
        hash = parent;
    }
    steps.reverse();
    steps
}
