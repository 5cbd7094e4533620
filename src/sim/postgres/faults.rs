//! What each seed draws, and the end of it: members killed (node and server; the data
//! directory stays) and restarted, a server crashing under a live node, a standby that
//! receives nothing for a while, a node stopped whole (no looks, votes nor renewals; its
//! keeper still fences at the lease end) or only its manager stalled, a member cut off,
//! a promotion, rewind or clone that fails once, a dead member's data directory wiped,
//! an election on stale estimates, standbys the primary refuses to stream to (a
//! password or an hba line: their servers and nodes still answer), a dead member's
//! volume not mounted when it comes back, and every member rebooted with no volume
//! mounted (servers that stall, their nodes running on: src/sim/postgres/stalls.rs).
//! At the heal the operator mounts the volumes back and runs `bully pg reinit`
//! for a member whose data dir is gone.

use super::decisions::SyncRecord;
use super::log::Event;
use super::world::World;
use crate::protocol::NodeId;
use rand::seq::SliceRandom;
use rand::Rng;

/// The chance a step draws a fault, in percent.
const FAULT_PERCENT: u32 = 18;

impl World {
    pub(super) fn draw_faults(&mut self) {
        if !self.rng.gen_ratio(FAULT_PERCENT, 100) {
            return;
        }
        let now = self.now;
        let all: Vec<NodeId> = self.members.iter().map(|m| m.id).collect();
        let data: Vec<NodeId> = self.data_members().map(|m| m.id).collect();
        let kind = self.rng.gen_range(0..15);
        let pick = |w: &mut World, from: &[NodeId]| *from.choose(&mut w.rng).expect("members");
        let (name, id): (&'static str, NodeId) = match kind {
            0 | 1 => {
                let id = pick(self, &all);
                if !self.member(id).alive {
                    return self.restart(id);
                }
                self.kill(id);
                ("kill", id)
            }
            2 => {
                let dead: Vec<NodeId> = all
                    .iter()
                    .copied()
                    .filter(|&id| !self.member(id).alive)
                    .collect();
                let Some(&id) = dead.choose(&mut self.rng) else {
                    return;
                };
                return self.restart(id);
            }
            3 => {
                let id = pick(self, &data);
                let m = self.member_mut(id);
                match m.pg.as_mut().filter(|d| d.running()) {
                    Some(d) => d.stop(false),
                    None => return,
                }
                ("server crash", id)
            }
            4 => {
                let id = pick(self, &data);
                let until = now + self.rng.gen_range(2..7);
                self.member_mut(id).lagging_until = until;
                ("lagging standby", id)
            }
            5 => {
                let id = pick(self, &all);
                let until = now + self.rng.gen_range(2..9);
                self.member_mut(id).stalled_until = until;
                ("node stalled", id)
            }
            6 => {
                let id = pick(self, &data);
                let until = now + self.rng.gen_range(2..7);
                self.member_mut(id).manager_stalled_until = until;
                ("manager stalled", id)
            }
            7 => {
                let id = pick(self, &all);
                let until = now + self.rng.gen_range(2..9);
                self.member_mut(id).cut_off_until = until;
                ("cut off", id)
            }
            8 => {
                let id = match self.office {
                    Some(h) if self.rng.gen_bool(0.7) => h.leader,
                    _ => pick(self, &data),
                };
                self.member_mut(id).fail_promote = true;
                ("next promotion fails", id)
            }
            9 => {
                let id = pick(self, &data);
                let m = self.member_mut(id);
                m.fail_rewind = true;
                m.fail_clone = true;
                ("next rewind and clone fail", id)
            }
            10 => {
                let id = pick(self, &data);
                if self.member(id).alive || self.member(id).pg.is_none() || !self.may_wipe(id) {
                    return;
                }
                self.wipe(id);
                ("data directory wiped", id)
            }
            12 => {
                let count = self.rng.gen_range(1..=data.len());
                let refused: Vec<NodeId> = data
                    .choose_multiple(&mut self.rng, count)
                    .copied()
                    .collect();
                let until = now + self.rng.gen_range(5..40);
                for &id in &refused {
                    self.member_mut(id).refused_until = until;
                }
                ("standbys refused streaming", refused[0])
            }
            13 => {
                let id = pick(self, &data);
                let m = self.member_mut(id);
                if m.alive || m.pg.is_none() {
                    return;
                }
                m.unmounted = m.pg.take();
                ("volume not mounted", id)
            }
            14 if self.rng.gen_ratio(1, 4) => {
                for id in all.clone() {
                    self.kill(id);
                    let m = self.member_mut(id);
                    if m.pg.is_some() {
                        m.unmounted = m.pg.take();
                    }
                    m.alive = true;
                }
                ("every member rebooted without its volume", 0)
            }
            14 => return,
            _ => {
                self.stale_next = Some(self.rng.gen_range(1..5));
                ("next election on stale estimates", 0)
            }
        };
        self.fault(name, id);
    }

    pub(super) fn fault(&mut self, name: &'static str, id: NodeId) {
        *self.summary.faults.entry(name).or_default() += 1;
        self.event(Event::Fault(format!("{name} ({id})")));
    }

    /// Node and server die; the data directory stays (a crash: not clean).
    fn kill(&mut self, id: NodeId) {
        let m = self.member_mut(id);
        m.alive = false;
        m.life += 1;
        if let Some(d) = m.pg.as_mut() {
            d.stop(false);
        }
        m.fresh_manager();
        m.eligible = false;
        m.last_wait = None;
        m.report = None;
        m.server_stall = None;
        // The order dies with its manager.
        m.restart = None;
    }

    fn restart(&mut self, id: NodeId) {
        let m = self.member_mut(id);
        m.alive = true;
        m.stalled_until = 0;
        m.manager_stalled_until = 0;
        let edited = m.tags_next.take().inspect(|tags| m.tags = *tags);
        self.fault("restart", id);
        if edited.is_some() {
            self.fault("restart with its tags edited (nofailover)", id);
        }
    }

    /// Whether `id`'s data directory may be lost and the cluster still recover: the
    /// other members keeping the cluster's data (a stranger's volume keeps none), with
    /// the witnesses, must remain a majority (beyond that the decisions rightly refuse
    /// to promote for ever). The cluster's system is the one served, else the one a
    /// record names: a raced `initdb` of another system is not the cluster's data once
    /// an identity is recorded (seed 3401, two members and a witness, new cluster: the
    /// only holder of the recorded system was wiped beside such a raced `initdb`).
    pub(super) fn may_wipe(&self, id: NodeId) -> bool {
        let recorded = SyncRecord::newest(self.members.iter().filter_map(|m| m.record.as_ref()))
            .map(|r| r.system_id)
            .filter(|&s| s != 0);
        let cluster = self.served_system.or(recorded);
        let kept = self
            .data_members()
            .filter(|m| m.id != id)
            .filter(|m| {
                m.pg.as_ref()
                    .is_some_and(|d| cluster.map_or(true, |s| s == d.system_id))
            })
            .count();
        let witnesses = self.members.len() - self.spec.members;
        kept + witnesses >= self.majority()
    }

    /// The data directory is lost; acknowledged commits held nowhere else are
    /// destroyed by the fault, not lost by the decisions.
    pub(super) fn wipe(&mut self, id: NodeId) {
        self.member_mut(id).pg = None;
        for i in 0..self.acked.len() {
            let a = self.acked[i];
            let held = self.data_members().any(|m| {
                m.pg.iter()
                    .chain(m.unmounted.iter())
                    .any(|d| d.wal.holds(a.pos, a.id))
            });
            if !held && !a.weak {
                self.acked[i].destroyed = true;
            }
        }
    }

    /// The faults end: every member back, nothing stalled, cut off, lagging or refused,
    /// no failure pending; the operator mounts every volume back, and runs `bully pg
    /// reinit` for a member whose data dir is gone (it clones afresh).
    pub(super) fn heal(&mut self) {
        let now = self.now;
        for m in &mut self.members {
            if m.pg.is_none() {
                m.pg = m.unmounted.take();
            }
            if m.pg.is_none() {
                m.held = false;
            }
            m.unmounted = None;
            m.refused_until = now.min(m.refused_until);
            m.alive = true;
            m.stalled_until = now.min(m.stalled_until);
            m.manager_stalled_until = now.min(m.manager_stalled_until);
            m.cut_off_until = now.min(m.cut_off_until);
            m.lagging_until = now.min(m.lagging_until);
            m.server_stall = None;
            m.fail_promote = false;
            m.fail_rewind = false;
            m.fail_clone = false;
        }
        self.stale_next = None;
        self.healed_at = Some(now);
        self.event(Event::Healed);
    }
}
