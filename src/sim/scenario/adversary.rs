//! The adversary: it injects faults that look at the cluster's state, schedules their
//! follow-ups (restarts, resumes, heals, peer-down notices) and at the end calms
//! everything down so I5 can be judged.
//!
//! [`Todo`] is not a list of faults: the faults are calls on [`Sim`] made the moment
//! the adversary draws them (a crash at a [`CrashPoint`], a cut, a lost message), with
//! the simulated cluster's state at hand, and `Todo` keeps only what comes back later
//! (a restart, a resume, a heal, a link noticed down, the next step of an operator's
//! plan), ordered in virtual time. The chaos runner's `Step` (src/chaos/plan.rs) acts
//! on real processes and is planned up front without seeing the cluster; the model
//! checker's `Transition` (src/model/transition.rs) enumerates every edge, message
//! delivery and clock included. Hence three types, one meaning where they overlap.

use super::plans::{DamagePlan, FileEditPlan, ForcedPlan, MemberPlan, RollPlan, TwoLost};
use crate::protocol::membership::majority_of;
use crate::protocol::{recovery, MessageKind, Millis, Mode, NodeId, Role};
use crate::sim::{CrashPoint, Sim, SimConfig};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Something scheduled for later by the adversary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Todo {
    Start(NodeId),
    Resume(NodeId),
    Heal,
    PeerDown {
        node: NodeId,
        peer: NodeId,
    },
    /// An operator asks for a membership change (`membership.rs` picks which).
    ChangeMembers,
    /// The operator's config roll reaches this node (`operator.rs`).
    Roll(NodeId),
    /// The first or second of two stores lost in a row (`operator.rs`).
    LoseStore {
        second: bool,
    },
    /// One survivor of a forced recovery is cut off from the others with the members
    /// to be lost, and their coordinator crashes (`forced.rs`).
    ForcedAhead,
    /// The survivors of a forced recovery are cut off and stopped (`forced.rs`).
    ForceRecovery,
    /// ...then recovered with `bully recover --force` and started again.
    ForcedRestart,
    /// A store goes back to an older copy while its node is down (`damage.rs`).
    RollBackStore,
    /// The operator cuts a minority off and restarts it with files naming only each
    /// other (`file_edits.rs`).
    EditFiles,
    /// ...and later puts the files back.
    RestoreFiles,
}

/// The adversary: its own RNG (so the sim's delay draws do not shift its choices),
/// the simulated cluster and the agenda of scheduled follow-ups.
pub(super) struct Adversary {
    rng: SmallRng,
    pub(super) sim: Sim,
    agenda: BinaryHeap<Reverse<(Millis, u64, Todo)>>,
    seq: u64,
    pub(super) steps: Vec<String>,
    max_delay: Millis,
    /// The membership changes this seed asks for, if any (`membership.rs`).
    pub(super) members: Option<MemberPlan>,
    /// The config roll this seed does, if any (`operator.rs`).
    pub(super) operator: Option<RollPlan>,
    /// The two stores this seed loses in a row, if it does (`operator.rs`).
    pub(super) two_lost: Option<TwoLost>,
    /// The forced recovery this seed does, if any (`forced.rs`).
    pub(super) forced: Option<ForcedPlan>,
    /// The store this seed rolls back, if it does (`damage.rs`).
    pub(super) damage: Option<DamagePlan>,
    /// The member lists this seed's operator edits in files, if any (`file_edits.rs`).
    pub(super) file_edit: Option<FileEditPlan>,
    /// The operator asked `bully config set preempt=…` (`operator.rs`).
    pub(super) preempt_asked: bool,
}

impl Adversary {
    /// An adversary drawing from `rng` against a new cluster of `config`, every node down.
    /// `members`: the membership changes to ask for (`None`: the seed draws none).
    /// `operator`: the config roll to do (`None`: the seed draws none).
    pub(super) fn new(
        rng: SmallRng,
        config: SimConfig,
        members: Option<MemberPlan>,
        operator: Option<RollPlan>,
        two_lost: Option<TwoLost>,
        forced: Option<ForcedPlan>,
        damage: Option<DamagePlan>,
    ) -> Adversary {
        Adversary {
            rng,
            max_delay: config.delay_ms.1,
            sim: Sim::new(config),
            agenda: BinaryHeap::new(),
            seq: 0,
            steps: Vec::new(),
            members,
            operator,
            two_lost,
            forced,
            damage,
            file_edit: None,
            preempt_asked: false,
        }
    }

    pub(super) fn schedule(&mut self, at: Millis, todo: Todo) {
        self.seq += 1;
        self.agenda.push(Reverse((at, self.seq, todo)));
    }

    /// Runs the cluster to `until`, carrying out scheduled follow-ups on time.
    pub(super) fn run_to(&mut self, until: Millis) {
        while let Some(&Reverse((at, _, todo))) = self.agenda.peek() {
            if at > until {
                break;
            }
            self.agenda.pop();
            self.sim.run_until(at);
            self.carry_out(todo);
        }
        self.sim.run_until(until);
    }

    fn carry_out(&mut self, todo: Todo) {
        let now = self.sim.now();
        match todo {
            Todo::Start(id) if !self.sim.is_up(id) => {
                self.note(format!("start n{id}"));
                self.sim.start(id);
            }
            Todo::Resume(id) if self.sim.is_paused(id) => {
                self.note(format!("resume n{id}"));
                self.sim.resume(id);
            }
            Todo::Heal if self.sim.is_disturbed() => {
                self.note("heal".to_string());
                self.sim.heal();
            }
            Todo::PeerDown { node, peer } if self.sim.is_up(node) => {
                self.note(format!("n{node} told n{peer} is down"));
                self.sim.peer_down(node, peer);
            }
            Todo::ChangeMembers => self.change_members(),
            Todo::Roll(id) => self.roll(id),
            Todo::LoseStore { second } => self.lose_store_in_a_row(second),
            Todo::ForcedAhead => self.one_survivor_ahead(),
            Todo::ForceRecovery => self.begin_forced_recovery(),
            Todo::ForcedRestart => self.finish_forced_recovery(),
            Todo::RollBackStore => self.roll_back_a_store(),
            Todo::EditFiles => self.edit_files(),
            Todo::RestoreFiles => self.restore_files(),
            _ => {}
        }
        debug_assert_eq!(now, self.sim.now());
    }

    /// The operator takes node `id` down: a clean stop (SIGTERM) or a kill -9, noted
    /// with `why`.
    pub(super) fn stop_or_kill(&mut self, id: NodeId, clean: bool, why: &str) {
        if clean {
            self.note(format!("stop n{id} (SIGTERM) {why}"));
            self.sim.stop(id);
        } else {
            self.note(format!("kill -9 n{id} {why}"));
            self.sim.crash(id);
        }
    }

    pub(super) fn note(&mut self, what: String) {
        self.steps.push(format!("{:>6} ms  {what}", self.sim.now()));
    }

    /// Every process, spares included.
    pub(super) fn ids(&self) -> Vec<NodeId> {
        self.sim.config().processes()
    }

    pub(super) fn up(&self) -> Vec<NodeId> {
        self.ids()
            .into_iter()
            .filter(|&id| self.sim.is_up(id))
            .collect()
    }

    fn down(&self) -> Vec<NodeId> {
        self.ids()
            .into_iter()
            .filter(|&id| !self.sim.is_up(id))
            .collect()
    }

    /// The node that believes it leads (the highest if several), else the highest up.
    pub(super) fn coordinator(&self) -> Option<NodeId> {
        let up = self.up();
        up.iter()
            .rev()
            .copied()
            .find(|&id| {
                self.sim
                    .view(id)
                    .is_some_and(|v| v.role == Role::Coordinator)
            })
            .or_else(|| up.last().copied())
    }

    fn pick(&mut self, from: &[NodeId]) -> Option<NodeId> {
        from.choose(&mut self.rng).copied()
    }

    /// After a crash, the survivors' transports may notice: none, some, or all at once.
    pub(super) fn notices_for(&mut self, dead: NodeId) {
        let now = self.sim.now();
        let others: Vec<NodeId> = self.up();
        match self.rng.gen_range(0..3) {
            0 => {}
            1 => {
                for node in others {
                    if self.rng.gen_bool(0.4) {
                        let at = now + self.rng.gen_range(1..=2 * self.max_delay);
                        self.schedule(at, Todo::PeerDown { node, peer: dead });
                    }
                }
            }
            _ => {
                for node in others {
                    self.schedule(now + 1, Todo::PeerDown { node, peer: dead });
                }
            }
        }
    }

    fn maybe_restart_later(&mut self, id: NodeId, chance: f64, range: (Millis, Millis)) {
        if self.rng.gen_bool(chance) {
            let at = self.sim.now() + self.rng.gen_range(range.0..=range.1);
            self.schedule(at, Todo::Start(id));
        }
    }

    pub(super) fn crash(&mut self, id: NodeId, why: &str) {
        self.note(format!("crash n{id} ({why})"));
        self.sim.crash(id);
        self.notices_for(id);
    }

    /// Any crash point: after a persist, or after sending one message of any kind. A
    /// seed without membership changes sends no `Members` message, so it draws among
    /// the other kinds (as it did before lists could change: the same draw).
    fn any_point(&mut self) -> CrashPoint {
        let changes = self.members.is_some();
        let kinds: Vec<MessageKind> = MessageKind::ALL
            .into_iter()
            .filter(|&kind| changes || kind != MessageKind::Members)
            // Drawn as before the kind existed: seeds keep their draws.
            .filter(|&kind| kind != MessageKind::TermUnknown)
            .collect();
        match kinds.choose(&mut self.rng) {
            Some(&kind) if self.rng.gen_bool(0.8) => CrashPoint::AfterSend(kind),
            _ => CrashPoint::AfterPersist,
        }
    }

    /// Starts every node, all at once (concurrent elections) or staggered; sometimes
    /// one or two fail their health check from the start (by config or by a later
    /// event). Returns whether some did.
    pub(super) fn start_cluster(&mut self) -> bool {
        // The members of the initial lists; spares start when `membership.rs` says.
        let ids = self.sim.config().ids.clone();
        let ineligible_from_start = self.rng.gen_bool(0.15);
        let mut unhealthy: Vec<NodeId> = ids.clone();
        unhealthy.shuffle(&mut self.rng);
        let two = ids.len() > 2 && self.rng.gen_bool(0.35);
        unhealthy.truncate(if two { 2 } else { 1 });
        let via_event = self.rng.gen_bool(0.5);
        if ineligible_from_start && !via_event {
            for &id in &unhealthy {
                self.note(format!("n{id} starts ineligible"));
                self.sim.set_eligible(id, false);
            }
        }
        let staggered = self.rng.gen_bool(0.5);
        for &id in &ids {
            let at = if staggered {
                self.rng.gen_range(0..=600)
            } else {
                0
            };
            self.schedule(at, Todo::Start(id));
        }
        self.run_to(0);
        if ineligible_from_start && via_event {
            let at = self.rng.gen_range(0..=300);
            self.run_to(at);
            for &id in &unhealthy {
                self.note(format!("n{id} ineligible"));
                self.sim.set_eligible(id, false);
            }
        }
        ineligible_from_start
    }

    /// Up to eight faults, some in quick bursts; returns how many.
    pub(super) fn inject_faults(&mut self) -> usize {
        let faults = self.rng.gen_range(0..=8usize);
        let mut t = self.sim.now() + self.rng.gen_range(200..=1500);
        for _ in 0..faults {
            self.run_to(t);
            self.inject();
            t += if self.rng.gen_bool(0.3) {
                self.rng.gen_range(0..=40)
            } else {
                self.rng.gen_range(50..=1500)
            };
        }
        self.run_to(t);
        faults
    }

    /// One fault, chosen by weight among those that make sense right now.
    fn inject(&mut self) {
        let up = self.up();
        let down = self.down();
        let roll = self.rng.gen_range(0..122);
        match roll {
            0..=19 if !up.is_empty() => self.crash_coordinator(),
            20..=29 if !up.is_empty() => self.crash_random(&up),
            30..=44 => self.crash_coordinator_and_heir(&up),
            45..=59 if !down.is_empty() => self.restart_one(&down),
            60..=64 if !up.is_empty() => self.crash_and_quickly_restart_highest(&up),
            65..=74 if !up.is_empty() => self.pause_one(&up),
            75..=80 => self.partition(),
            81..=84 => self.lose_messages(),
            85..=88 if !up.is_empty() => self.arm_crash_anywhere(&up),
            89..=102 => self.flip_eligibility(&up),
            103..=109 => self.report_down_but_alive(&up),
            110..=117 if !up.is_empty() => self.lose_a_store(&up),
            118..=121 if !up.is_empty() => self.deafen_one(&up),
            _ => {}
        }
    }

    /// The coordinator crashes; it may come back later.
    fn crash_coordinator(&mut self) {
        let Some(c) = self.coordinator() else { return };
        self.crash(c, "coordinator");
        self.maybe_restart_later(c, 0.6, (50, 2000));
    }

    /// Any live node crashes; it may come back later.
    fn crash_random(&mut self, up: &[NodeId]) {
        let Some(n) = self.pick(up) else { return };
        self.crash(n, "random");
        self.maybe_restart_later(n, 0.5, (50, 2000));
    }

    /// The would-be winner dies after its Answer (or while declaring) as the coordinator crashes.
    fn crash_coordinator_and_heir(&mut self, up: &[NodeId]) {
        // The would-be winner dies after its Answer (or while declaring).
        let Some(c) = self.coordinator() else { return };
        let Some(&heir) = up.iter().rev().find(|&&n| n != c) else {
            return;
        };
        let point = match self.rng.gen_range(0..6) {
            0 | 1 => CrashPoint::AfterSend(MessageKind::Answer),
            2 => CrashPoint::AfterSend(MessageKind::Coordinator),
            3 => CrashPoint::AfterPersist,
            _ => self.any_point(),
        };
        self.note(format!("arm crash of n{heir} at {point:?}"));
        self.sim.arm_crash(heir, point);
        self.crash(c, "coordinator, heir armed");
        if let Some(&low) = up.iter().find(|&&n| n != heir && n != c) {
            let at = self.sim.now() + 1;
            self.schedule(at, Todo::PeerDown { node: low, peer: c });
        }
        self.maybe_restart_later(heir, 0.5, (300, 2500));
        self.maybe_restart_later(c, 0.3, (300, 2500));
    }

    /// A down node restarts, the highest one more often; sometimes into a crash loop.
    fn restart_one(&mut self, down: &[NodeId]) {
        let id = if self.rng.gen_bool(0.6) {
            down[down.len() - 1]
        } else {
            self.pick(down).unwrap_or(down[0])
        };
        self.note(format!("restart n{id}"));
        self.sim.start(id);
        if self.rng.gen_bool(0.25) {
            // A crash loop: it dies again somewhere in its first election.
            let point = self.any_point();
            self.note(format!("arm crash of n{id} at {point:?}"));
            self.sim.arm_crash(id, point);
        }
    }

    /// The highest node crashes and comes back before anyone suspects it.
    fn crash_and_quickly_restart_highest(&mut self, up: &[NodeId]) {
        // The highest node crashes and comes back before anyone suspects it.
        let top = up[up.len() - 1];
        self.crash(top, "highest, quick restart");
        let at = self.sim.now() + self.rng.gen_range(1..=200);
        self.schedule(at, Todo::Start(top));
    }

    /// A node (the coordinator half the time) dies and loses its disk; it usually comes
    /// back on an empty store, sometimes at once (a container restarted without its
    /// volume), sometimes much later (a replaced disk).
    fn lose_a_store(&mut self, up: &[NodeId]) {
        // The rule tolerates one lost store at a time (docs/guarantees.md): not while another is empty and unrecovered.
        if !self.store_loss_tolerated() {
            return;
        }
        let Some(id) = self.coordinator_or_pick(up) else {
            return;
        };
        if self.is_survivor(id) || self.file_edited(id) {
            return;
        }
        self.note(format!("n{id} loses its store"));
        self.sim.lose_store(id);
        self.notices_for(id);
        self.maybe_restart_later(id, 0.8, (1, 2500));
    }

    /// The coordinator half the time (none if there is none), else a random node of `up`.
    fn coordinator_or_pick(&mut self, up: &[NodeId]) -> Option<NodeId> {
        if self.rng.gen_bool(0.5) {
            self.coordinator()
        } else {
            self.pick(up)
        }
    }

    /// The coordinator or a random node pauses, and resumes later.
    fn pause_one(&mut self, up: &[NodeId]) {
        let Some(id) = self.coordinator_or_pick(up) else {
            return;
        };
        self.note(format!("pause n{id}"));
        self.sim.pause(id);
        let at = self.sim.now() + self.rng.gen_range(20..=1200);
        self.schedule(at, Todo::Resume(id));
    }

    /// The nodes split into two or three groups until a later heal.
    fn partition(&mut self) {
        let mut ids = self.ids();
        ids.shuffle(&mut self.rng);
        let parts = if ids.len() > 2 && self.rng.gen_bool(0.2) {
            3
        } else {
            2
        };
        let mut groups: Vec<Vec<NodeId>> = vec![Vec::new(); parts];
        for (i, id) in ids.into_iter().enumerate() {
            let g = if i < parts {
                i
            } else {
                self.rng.gen_range(0..parts)
            };
            groups[g].push(id);
        }
        groups.iter_mut().for_each(|g| g.sort_unstable());
        self.note(format!("partition {groups:?}"));
        self.sim.partition(&groups);
        let at = self.sim.now() + self.rng.gen_range(50..=2000);
        self.schedule(at, Todo::Heal);
    }

    /// One-way links: a live node (the coordinator half the time) hears no one until a
    /// later heal, while what it sends still arrives.
    fn deafen_one(&mut self, up: &[NodeId]) {
        let id = match self.coordinator() {
            Some(c) if self.rng.gen_bool(0.5) => c,
            _ => up[self.rng.gen_range(0..up.len())],
        };
        self.note(format!("deafen n{id}"));
        self.sim.deafen(id);
        let at = self.sim.now() + self.rng.gen_range(50..=2000);
        self.schedule(at, Todo::Heal);
    }

    /// A share of messages is lost until a later heal.
    fn lose_messages(&mut self) {
        let percent = self.rng.gen_range(5..=60);
        self.note(format!("lose {percent}% of messages"));
        self.sim.set_loss(percent);
        let at = self.sim.now() + self.rng.gen_range(50..=2000);
        self.schedule(at, Todo::Heal);
    }

    /// A live node will crash at a random point of its next steps.
    fn arm_crash_anywhere(&mut self, up: &[NodeId]) {
        let Some(id) = self.pick(up) else { return };
        let point = self.any_point();
        self.note(format!("arm crash of n{id} at {point:?}"));
        self.sim.arm_crash(id, point);
        self.maybe_restart_later(id, 0.7, (300, 2500));
    }

    /// An ineligible node becomes eligible again, or a node becomes ineligible.
    fn flip_eligibility(&mut self, up: &[NodeId]) {
        let ineligible: Vec<NodeId> = self
            .ids()
            .into_iter()
            .filter(|&id| !self.sim.is_eligible(id))
            .collect();
        if !ineligible.is_empty() && self.rng.gen_bool(0.6) {
            let Some(id) = self.pick(&ineligible) else {
                return;
            };
            self.note(format!("n{id} eligible again"));
            self.sim.set_eligible(id, true);
        } else {
            let id = if self.rng.gen_bool(0.5) {
                self.coordinator()
            } else {
                self.pick(up)
            };
            let Some(id) = id else { return };
            self.note(format!("n{id} ineligible"));
            self.sim.set_eligible(id, false);
        }
    }

    /// Reported down but alive: a node's transport wrongly reports a live peer down.
    fn report_down_but_alive(&mut self, up: &[NodeId]) {
        // Reported down but alive: a node's transport wrongly reports a live peer
        // down, the coordinator or any other (it then skips waiting for it).
        let target = if self.rng.gen_bool(0.5) {
            self.coordinator()
        } else {
            self.pick(up)
        };
        let Some(c) = target else { return };
        let others: Vec<NodeId> = up.iter().copied().filter(|&n| n != c).collect();
        let Some(f) = self.pick(&others) else {
            return;
        };
        self.note(format!("n{f} wrongly told n{c} is down"));
        self.sim.peer_down(f, c);
    }

    /// Ends every fault: disarm, heal, resume, run what is scheduled, make sure some
    /// live node may lead.
    pub(super) fn calm_down(&mut self) {
        self.sim.disarm();
        while let Some(Reverse((at, _, _))) = self.agenda.peek().copied() {
            self.run_to(at);
        }
        if self.sim.is_disturbed() {
            self.note("heal".to_string());
            self.sim.heal();
        }
        for id in self.ids() {
            if self.sim.is_paused(id) {
                self.note(format!("resume n{id}"));
                self.sim.resume(id);
            }
        }
        if self.rng.gen_bool(0.3) {
            for id in self.down() {
                self.note(format!("restart n{id} (end)"));
                self.sim.start(id);
            }
        }
        if self.up().is_empty() {
            let ids = self.ids();
            let top = ids[ids.len() - 1];
            self.note(format!("restart n{top} (none left)"));
            self.sim.start(top);
        }
        // Who the cluster is made of now (a membership change may have changed it).
        let cluster = self.cluster_now();
        let up_members = |adv: &Adversary| -> Vec<NodeId> {
            adv.up()
                .into_iter()
                .filter(|id| cluster.contains(id))
                .collect()
        };
        let down_members = |adv: &Adversary| -> Vec<NodeId> {
            adv.down()
                .into_iter()
                .filter(|id| cluster.contains(id))
                .collect()
        };
        if self.members.is_some() {
            // Who leads at the end depends on which members are up, and a list change
            // still in progress needs its majorities: every member comes back.
            for id in down_members(self) {
                self.note(format!("restart n{id} (a member)"));
                self.sim.start(id);
            }
        }
        if self.sim.config().mode == Mode::Quorum {
            // Quorum mode promises a coordinator only where a majority is up.
            let majority = majority_of(cluster.len());
            while up_members(self).len() < majority {
                let Some(id) = down_members(self).pop() else {
                    break;
                };
                self.note(format!("restart n{id} (for a majority)"));
                self.sim.start(id);
            }
        }
        // A node on an empty store votes and leads only once enough other members
        // report their terms (src/protocol/recovery.rs): M - q + 1 of them up that are
        // not recovering themselves (in quorum mode a recovering store that has seen a
        // claim vouches for nothing).
        let members = cluster.len();
        let needed = recovery::reports_needed(members, majority_of(members));
        let knowing = |adv: &Adversary| {
            up_members(adv)
                .iter()
                .filter(|&&id| !adv.sim.is_recovering(id))
                .count()
        };
        while up_members(self)
            .iter()
            .any(|&id| self.sim.is_recovering(id))
            && knowing(self) < needed
        {
            let Some(id) = down_members(self).pop() else {
                break;
            };
            self.note(format!("restart n{id} (for a store recovery)"));
            self.sim.start(id);
        }
        let up = up_members(self);
        if !up
            .iter()
            .any(|&id| self.sim.is_eligible(id) && self.may_lead(id))
        {
            let top = up.iter().rev().copied().find(|&id| self.may_lead(id));
            let top = match top {
                Some(top) => top,
                None => {
                    // Only members that never lead are up: start the highest other one.
                    let Some(id) = down_members(self)
                        .into_iter()
                        .rev()
                        .find(|&id| self.may_lead(id))
                    else {
                        return;
                    };
                    self.note(format!("restart n{id} (only a witness up)"));
                    self.sim.start(id);
                    id
                }
            };
            self.note(format!("n{top} eligible again (none eligible)"));
            self.sim.set_eligible(top, true);
        }
        // A peer-down notice may have been scheduled by the last fault.
        while let Some(Reverse((at, _, _))) = self.agenda.peek().copied() {
            self.run_to(at);
        }
    }
}
