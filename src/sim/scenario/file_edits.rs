//! The operator edits the cluster's keys in config files (issue 47), as the tester did
//! to real processes: under a cut, a minority of the members is restarted with files
//! that name only each other, or that name the other mode. A node stores its list and
//! its mode at its first start ([`crate::protocol::membership::list_at_start`],
//! [`crate::protocol::mode_at_start`]), so the edit must change nothing: the minority
//! finds no majority of the stored list and elects nobody, and a start whose file names
//! another mode is refused (exit 2) and stays down. Under the old rules
//! ([`crate::protocol::Flaw::FileListCounts`], [`crate::protocol::Flaw::FileModeCounts`]:
//! each start takes the file's list or mode) the minority leads beside the rest, which
//! I6 and I7 catch. The files are put back a while after the heal, as an operator who
//! noticed would, and the nodes that stayed down are started again.
//!
//! Drawn from the plan's own RNG, and not in seeds that change members, lose two
//! stores in a row, force a recovery or roll a store back (then wiped): a store lost
//! while its file is edited seeds the edited list, as a real node would, and the
//! general faults lose no store of an edited node either. A seed that draws no edit
//! runs exactly as before.

use super::adversary::{Adversary, Todo};
use super::operator::Operator;
use super::plans::FileEditPlan;
use crate::protocol::{membership::majority_of, Millis, Mode, NodeId};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Share of seeds whose operator edits member lists.
const SHARE: f64 = 0.1;

/// Whether `seed` edits member lists, and if so whose: a minority of `ids` (at least
/// one), each of whose files will name only the others of the group.
pub(super) fn draw_file_edit(
    seed: u64,
    ids: &[NodeId],
    operator: Operator,
    loses_stores: bool,
) -> Option<FileEditPlan> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0f11_e0ed_0000_0007);
    let drawn = rng.gen_bool(SHARE);
    let minority = ids.len().saturating_sub(majority_of(ids.len()));
    if !operator.draws(drawn) || loses_stores || minority == 0 {
        return None;
    }
    let size = rng.gen_range(1..=minority);
    let mut group: Vec<NodeId> = ids.choose_multiple(&mut rng, size).copied().collect();
    group.sort_unstable();
    let mode = rng.gen_bool(0.5);
    Some(FileEditPlan { rng, group, mode })
}

impl Adversary {
    /// Schedules the edit among the other faults.
    pub(super) fn plan_file_edit(&mut self) {
        let Some(plan) = self.file_edit.as_mut() else {
            return;
        };
        let at = self.sim.now() + plan.rng.gen_range(300..=4000);
        self.schedule(at, Todo::EditFiles);
    }

    /// Whether node `id`'s file is edited now (its store is then never lost).
    pub(super) fn file_edited(&self, id: NodeId) -> bool {
        let config = self.sim.config();
        config.file_peers.contains_key(&id) || config.file_mode.contains_key(&id)
    }

    /// Cuts the group off among the members that have run, edits each of their files
    /// (to name only the group, or the other mode), restarts those that run (a clean
    /// stop or a kill), and schedules the heal and the files put back.
    pub(super) fn edit_files(&mut self) {
        let Some(plan) = self.file_edit.as_mut() else {
            return;
        };
        // Only files of nodes that have run: a first start seeds its list from its
        // file, whatever it says (left open: a node first started on a wrong file keeps
        // the list it seeded).
        let group: Vec<NodeId> = plan
            .group
            .iter()
            .copied()
            .filter(|&id| self.sim.members(id).is_some())
            .collect();
        plan.group.clone_from(&group);
        if group.is_empty() {
            self.note("no file edited: the chosen nodes never ran".into());
            return;
        }
        let Some(plan) = self.file_edit.as_mut() else {
            return;
        };
        let d = self.sim.config().timing.suspect_after_ms.max(100);
        let hold: Millis = plan.rng.gen_range(2 * d..=10 * d);
        let restore_after: Millis = plan.rng.gen_range(0..=3 * d);
        let restarts: Vec<(bool, Millis)> = group
            .iter()
            .map(|_| (plan.rng.gen_bool(0.5), plan.rng.gen_range(1..=300)))
            .collect();
        let mode = plan.mode;
        let rest: Vec<NodeId> = self
            .ids()
            .into_iter()
            .filter(|id| !group.contains(id))
            .collect();
        let groups = vec![group.clone(), rest];
        self.note(format!("partition {groups:?} (to edit files)"));
        self.sim.partition(&groups);
        let other_mode = match self.sim.config().mode {
            Mode::Quorum => Mode::Classic,
            Mode::Classic => Mode::Quorum,
        };
        for (&id, &(clean, back_in)) in group.iter().zip(&restarts) {
            let what = if mode {
                self.sim.edit_mode(id, Some(other_mode));
                let refused = match self.sim.stored_mode(id) {
                    Some(stored) if stored != other_mode => {
                        format!(" (its store holds {stored}: refused, exit 2)")
                    }
                    _ => String::new(),
                };
                format!("a file naming mode {other_mode}{refused}")
            } else {
                let peers: Vec<NodeId> = group.iter().copied().filter(|&p| p != id).collect();
                self.sim.edit_peers(id, Some(peers.clone()));
                format!("a file naming only {peers:?}")
            };
            if !self.sim.is_up(id) {
                self.note(format!("n{id} gets {what} while down"));
                continue;
            }
            self.stop_or_kill(id, clean, &format!("to restart with {what}"));
            let at = self.sim.now() + back_in;
            self.schedule(at, Todo::Start(id));
        }
        let heal = self.sim.now() + hold;
        self.schedule(heal, Todo::Heal);
        self.schedule(heal + restore_after, Todo::RestoreFiles);
    }

    /// The operator puts the group's files back as they were.
    pub(super) fn restore_files(&mut self) {
        let Some(group) = self.file_edit.as_ref().map(|p| p.group.clone()) else {
            return;
        };
        for &id in &group {
            self.sim.edit_peers(id, None);
            self.sim.edit_mode(id, None);
        }
        self.note(format!("the files of {group:?} are put back"));
        // A start refused for its mode left its node down: started again.
        for id in group {
            if !self.sim.is_up(id) {
                self.note(format!("start n{id} on its file put back"));
                let now = self.sim.now();
                self.schedule(now, Todo::Start(id));
            }
        }
    }
}
