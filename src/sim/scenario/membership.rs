//! Membership changes as faults: in some seeds an operator adds a spare node, removes a
//! member or replaces one (sometimes after its disk was lost), while the adversary's
//! other faults go on (src/protocol/machine/membership.rs has the rules). The change goes
//! to the node that believes it leads, or now and then to any live node, which refuses
//! it unless it leads.
//!
//! Everything here draws from the plan's own RNG, seeded apart from the adversary's: a
//! seed that draws no membership change runs exactly as it did before they existed
//! (the simulation tests' fingerprint shows it).

use super::adversary::{Adversary, Todo};
use super::plans::MemberPlan;
use crate::protocol::{Change, Membership, Millis, Mode, NodeId, Seat};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Share of seeds that ask for membership changes.
const SHARE: f64 = 0.15;

/// How a seed's membership changes are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changes {
    /// In no seed: every seed runs as it did before lists could change (to compare
    /// fingerprints with runs from before).
    None,
    /// In a share of the seeds, one to four changes, seconds apart.
    Some,
    /// In every seed, six to ten changes, often in quick succession: a flaw that needs
    /// two changes in a row to matter (`Flaw::OldMajorityOnly`) gets its chance.
    Many,
}

/// Whether `seed` asks for membership changes, and if so the plan and the spares (IDs
/// in no initial list) it needs. Draws nothing from the adversary's RNG.
pub(super) fn draw_plan(
    seed: u64,
    ids: &[NodeId],
    changes: Changes,
) -> Option<(MemberPlan, Vec<NodeId>)> {
    let mut rng = plan_rng(seed);
    let many = changes == Changes::Many;
    let drawn = rng.gen_bool(SHARE);
    if changes == Changes::None || !(drawn || many) {
        return None;
    }
    let mut spares: Vec<NodeId> = Vec::new();
    for _ in 0..if many { 2 } else { 1 } {
        let taken: Vec<NodeId> = ids.iter().chain(&spares).copied().collect();
        // Half the time a new highest ID: once it takes its seat, it takes over.
        let spare = if rng.gen_bool(0.5) {
            taken.iter().max().map_or(1, |top| top + 1)
        } else {
            let free: Vec<NodeId> = (1..=60).filter(|id| !taken.contains(id)).collect();
            free[rng.gen_range(0..free.len())]
        };
        spares.push(spare);
    }
    spares.sort_unstable();
    let count = if many {
        rng.gen_range(6..=10)
    } else {
        rng.gen_range(1..=4)
    };
    let plan = MemberPlan {
        rng,
        changes: count,
        hurried: many,
    };
    Some((plan, spares))
}

/// The plan's RNG for `seed`, apart from the adversary's.
fn plan_rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ 0x6d65_6d62_6572_7321)
}

/// Whether `seed` asks for membership changes when they are drawn in a share of the
/// seeds ([`Changes::Some`]), so a test can pick out the seeds that do not, whatever it
/// draws.
pub fn asks_for_changes(seed: u64) -> bool {
    plan_rng(seed).gen_bool(SHARE)
}

impl Adversary {
    /// Schedules the plan: when each spare starts (some before anyone asks to add them,
    /// to be refused as strangers meanwhile; the others when they are added) and when
    /// each change is asked for, among the other faults.
    pub(super) fn plan_membership(&mut self) {
        let Some(plan) = self.members.as_mut() else {
            return;
        };
        let now = self.sim.now();
        let mut todo: Vec<(Millis, Todo)> = Vec::new();
        for spare in self.sim.config().spares.clone() {
            if plan.rng.gen_bool(0.5) {
                todo.push((now + plan.rng.gen_range(0..=3000), Todo::Start(spare)));
            }
        }
        let mut at = now + plan.rng.gen_range(300..=1500);
        for _ in 0..plan.changes {
            todo.push((at, Todo::ChangeMembers));
            at += match (plan.hurried, plan.rng.gen_range(0..4)) {
                // Right behind the previous one: refused while it is in progress.
                (_, 0) => plan.rng.gen_range(0..=40),
                (true, _) => plan.rng.gen_range(40..=600),
                (false, _) => plan.rng.gen_range(300..=2500),
            };
        }
        for (at, what) in todo {
            self.schedule(at, what);
        }
    }

    /// The members the cluster is made of now: those of the newest list a coordinator
    /// wrote that any process holds, or the initial members while none was written.
    pub(super) fn cluster_now(&self) -> Vec<NodeId> {
        match self.sim.newest_list(&self.ids()) {
            Some(list) => list.members.iter().map(|m| m.id).collect(),
            None => self.sim.config().ids.clone(),
        }
    }

    /// Whether `id` may lead by the newest list (by its seat in the config while no
    /// list was written: a witness never leads).
    pub(super) fn may_lead(&self, id: NodeId) -> bool {
        match self.sim.newest_list(&self.ids()) {
            Some(list) => list.get(id).is_some_and(|m| m.may_lead()),
            None => !self.sim.config().witnesses.contains(&id),
        }
    }

    /// Whether a store may be lost now within what the recovery rule tolerates (docs/guarantees.md;
    /// src/protocol/recovery.rs): one empty, unrecovered
    /// store among the members at a time (a spare nobody added yet votes for no one, so
    /// its store does not count), and other voters to report the terms it forgot (the
    /// only voter's store is the cluster's memory: lost, nothing can recover it).
    pub(super) fn store_loss_tolerated(&self) -> bool {
        let voters = match self.sim.newest_list(&self.ids()) {
            Some(list) => list.voters().len(),
            None => self.sim.config().ids.len(),
        };
        voters > 1
            && !self
                .cluster_now()
                .iter()
                .any(|&id| self.sim.store_is_empty(id))
    }

    /// Draws from the plan's own RNG (`None` in a seed without a plan).
    fn draw<T>(&mut self, f: impl FnOnce(&mut SmallRng) -> T) -> Option<T> {
        self.members.as_mut().map(|plan| f(&mut plan.rng))
    }

    /// An operator asks for one change: add a spare (or a removed node), remove a
    /// member, or replace one, sometimes after its disk was lost.
    pub(super) fn change_members(&mut self) {
        let up = self.up();
        let leader = self.coordinator();
        let target = self.draw(|rng| match leader {
            Some(c) if rng.gen_bool(0.8) => Some(c),
            _ => up.choose(rng).copied(),
        });
        let Some(target) = target.flatten() else {
            return;
        };
        let Some(list) = self.sim.members(target) else {
            return;
        };
        let outsiders: Vec<NodeId> = self
            .ids()
            .into_iter()
            .filter(|&id| !list.contains(id))
            .collect();
        let roll = self.draw(|rng| rng.gen_range(0..10)).unwrap_or(0);
        let change = if roll < 4 && !outsiders.is_empty() {
            self.add_one(&outsiders)
        } else if roll < 7 {
            self.subject(&list, target).map(|id| Change::Remove { id })
        } else {
            self.replace_one(&list, target)
        };
        let Some(change) = change else {
            return;
        };
        self.note(format!("ask n{target}: {change}"));
        self.sim.change_members(target, change);
    }

    /// Add: a spare, or a node removed earlier, as a voter (a witness now and then in
    /// quorum mode); it is started now or soon if it is down.
    fn add_one(&mut self, outsiders: &[NodeId]) -> Option<Change> {
        let witness_ok = self.sim.config().mode == Mode::Quorum;
        let (id, witness, start_in) = self.draw(|rng| {
            let id = outsiders.choose(rng).copied();
            (
                id,
                witness_ok && rng.gen_bool(0.15),
                rng.gen_range(0..=1500),
            )
        })?;
        let id = id?;
        if !self.sim.is_up(id) {
            let at = self.sim.now() + start_in;
            self.schedule(at, Todo::Start(id));
        }
        Some(Change::Add {
            id,
            addr: format!("n{id}:7000"),
            seat: if witness { Seat::Witness } else { Seat::Voter },
        })
    }

    /// Replace: a member turns learner again; half the time its disk was lost first (it
    /// comes back on an empty store soon), unless another member's store is empty and
    /// unrecovered.
    fn replace_one(&mut self, list: &Membership, target: NodeId) -> Option<Change> {
        let id = self.subject(list, target)?;
        let (lost_disk, back_in) = self.draw(|rng| (rng.gen_bool(0.5), rng.gen_range(1..=1500)))?;
        if lost_disk && id != target && self.store_loss_tolerated() {
            self.note(format!("n{id} loses its store (to be replaced)"));
            self.sim.lose_store(id);
            self.notices_for(id);
            let at = self.sim.now() + back_in;
            self.schedule(at, Todo::Start(id));
        }
        Some(Change::Replace { id })
    }

    /// The member a remove or replace is about: another member, or one time in ten the
    /// target itself (refused: a coordinator hands over first, and any other node
    /// does not lead).
    fn subject(&mut self, list: &Membership, target: NodeId) -> Option<NodeId> {
        let others = list.others(target);
        self.draw(|rng| {
            if rng.gen_bool(0.1) {
                Some(target)
            } else {
                others.choose(rng).copied()
            }
        })?
    }
}
