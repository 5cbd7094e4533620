//! The checks that hold at every instant, whatever the faults, read one history entry
//! at a time: I1 fencing, the per-node part of I2, I3 for views and I4 recovery.

use super::cells::{check_accepted_rises, check_term_rises};
use super::invariant::{show, violation, Invariant, Violation};
use crate::history::{Entry, Record};
use crate::protocol::{Epoch, Millis, NodeId, Role, View};
use std::collections::{HashMap, HashSet};

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
                    out.extend(check_accepted_rises(
                        entry.node,
                        entry.at_ms,
                        track.accepted,
                        cells.accepted,
                    ));
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
                out.extend(check_term_rises(
                    entry.node,
                    entry.at_ms,
                    track.term,
                    cells.term,
                ));
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
