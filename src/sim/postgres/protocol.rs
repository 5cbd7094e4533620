//! The office from the real protocol (`Spec::protocol`). Each member's node is a real
//! `Machine` in the protocol's simulator (src/sim/mod.rs), in quorum mode at the
//! default timing, and each step of the PostgreSQL world runs it one look's worth of
//! time ([`STEP_MS`]). What the world draws reaches the machines as it reaches a real
//! node: a kill crashes it (a restart starts it from its store), a stall pauses it, a
//! cut partitions it off. After each look the member's verdict and its server's rank
//! go to its machine as its health and its estimate, as the runtime sends them.
//!
//! The office is what the machines hold: the member whose machine is coordinator with
//! a lease leads (no lease yet: elected, not ready), and nothing else decides who that
//! is. Each member's keeper keeps the lease end of the last grant its node published
//! and fences its server when that end passes unrenewed, or as soon as its running
//! node publishes no lease (src/keeper/plan.rs), through the same check of the pid
//! file as every other signal. The protocol simulator's own checks (I1–I4) run on
//! every step, and a violation fails the run with the protocol's words.

use super::log::Event;
use super::machines::{Protocol, BOOTSTRAP_MS, STEP_MS};
use super::world::{Holder, World};
use super::{Sabotage, Start};
use crate::protocol::{NodeId, Role};
use std::collections::BTreeSet;

impl World {
    /// Starts every member's machine. A running cluster's coordinator is member 1, as
    /// its server is the primary: the others are held ineligible until its machine
    /// leads, and the keeper holds its grant from then on.
    pub(super) fn start_protocol(&mut self) -> Result<(), String> {
        let Some(mut p) = self.protocol.take() else {
            return Ok(());
        };
        let ids: Vec<NodeId> = self.members.iter().map(|m| m.id).collect();
        let running = self.spec.start == Start::Running;
        for &id in &ids {
            let first = !running || id == 1;
            p.sim.set_eligible(id, first && !self.member(id).witness);
            if let Some(est) = self.estimate_told(id) {
                p.sim.set_estimate(id, Some(est));
            }
            p.sim.start(id);
            p.lives.insert(id, self.member(id).life);
        }
        if running {
            let led = p
                .sim
                .run_until_or(BOOTSTRAP_MS, |sim| sim.lease_until(1).is_some());
            if !led {
                return Err("the protocol elected no coordinator at the start".into());
            }
            p.origin = p.sim.now();
            for &id in &ids {
                let eligible = self.member(id).eligible;
                p.sim.set_eligible(id, eligible);
            }
        }
        self.protocol = Some(p);
        self.follow_protocol()
    }

    /// One step of the protocol: the world's faults reach the machines, the machines
    /// run a look's worth of time, the keepers fence what lost its lease, and the
    /// office is read from the machines.
    pub(super) fn run_protocol(&mut self) -> Result<(), String> {
        let Some(mut p) = self.protocol.take() else {
            return Ok(());
        };
        self.tell_faults(&mut p);
        let until = p.at(self.now);
        p.sim.run_until(until);
        self.protocol = Some(p);
        self.follow_protocol()
    }

    /// After the looks: each member whose manager ran sends its verdict (held back
    /// from all but the pause's holder while paused) and its server's rank.
    pub(super) fn tell_verdicts(&mut self) {
        let Some(mut p) = self.protocol.take() else {
            return;
        };
        let now = self.now;
        for id in self.data_members().map(|m| m.id).collect::<Vec<_>>() {
            let m = self.member(id);
            let looked = m.alive && m.stalled_until <= now && m.manager_stalled_until <= now;
            if !looked {
                continue;
            }
            p.sim.set_eligible(id, m.eligible && self.may_lead(id));
            p.sim.set_estimate(id, self.estimate_told(id));
        }
        self.protocol = Some(p);
    }

    /// The estimate `id`'s node sends: its server's rank (0 while its data is not
    /// reported yet); none for a witness.
    fn estimate_told(&self, id: NodeId) -> Option<u64> {
        let m = self.member(id);
        if m.witness {
            return None;
        }
        Some(match m.unreported_until > self.now {
            true => 0,
            false => m.est(self.reading()),
        })
    }

    /// Kills, restarts, stalls and cuts as the machines live them.
    fn tell_faults(&self, p: &mut Protocol) {
        let now = self.now;
        for m in &self.members {
            let id = m.id;
            if p.lives.get(&id) != Some(&m.life) {
                p.sim.crash(id);
                p.paused.remove(&id);
                p.lives.insert(id, m.life);
            }
            match (m.alive, p.sim.is_up(id)) {
                (true, false) => p.sim.start(id),
                (false, true) => p.sim.crash(id),
                _ => {}
            }
            let stalled = m.alive && m.stalled_until > now;
            match (stalled, p.paused.contains(&id)) {
                (true, false) => {
                    p.sim.pause(id);
                    p.paused.insert(id);
                }
                (false, true) => {
                    p.sim.resume(id);
                    p.paused.remove(&id);
                }
                _ => {}
            }
        }
        let cut: BTreeSet<NodeId> = self
            .members
            .iter()
            .filter(|m| m.cut_off_until > now)
            .map(|m| m.id)
            .collect();
        if cut != p.cut {
            match cut.is_empty() {
                true => p.sim.heal(),
                false => {
                    let groups: Vec<Vec<NodeId>> = cut.iter().map(|&id| vec![id]).collect();
                    p.sim.partition(&groups);
                }
            }
            p.cut = cut;
        }
    }

    /// The protocol's checks, the keepers' fences, and the office as the machines
    /// hold it.
    fn follow_protocol(&mut self) -> Result<(), String> {
        let Some(mut p) = self.protocol.take() else {
            return Ok(());
        };
        let broken = p.sim.violations().first().map(|v| format!("{v:?}"));
        let t = p.at(self.now);
        let waits = self.spec.sabotage == Some(Sabotage::KeeperWaitsForItsNode);
        let mut fenced = Vec::new();
        let mut leaders = Vec::new();
        for m in &self.members {
            let id = m.id;
            let publishes = p.sim.is_up(id) && !p.sim.is_paused(id);
            let lease = p.sim.lease_until(id).filter(|&end| end > t);
            if let (Some(end), Some(view)) = (lease, p.sim.view(id)) {
                leaders.push((view.epoch.map_or(0, |e| e.token()), id, end));
            }
            let ended = match (publishes, lease, p.grants.get(&id)) {
                (true, Some(end), _) => {
                    p.grants.insert(id, end);
                    false
                }
                (true, None, Some(_)) => true,
                (false, _, Some(&end)) => end <= t && !waits,
                (_, _, None) => false,
            };
            if ended {
                p.grants.remove(&id);
                fenced.push(id);
            }
        }
        let elected = self.coordinator_elected(&p);
        self.protocol = Some(p);
        if let Some(why) = broken {
            return Err(format!("the protocol broke an invariant: {why}"));
        }
        for id in fenced {
            self.event(Event::OfficeEnded {
                id,
                why: "its keeper's grant ended",
            });
            self.fence(id);
        }
        let holder = leaders.iter().max().map(|&(token, leader, end)| Holder {
            leader,
            token,
            lease_end: self.now + (end - t).div_ceil(STEP_MS),
            leading_from: self.now,
        });
        let holder = holder.or(elected);
        if holder.map(|h| h.token) != self.office.map(|h| h.token) {
            if let Some(h) = holder {
                self.summary.elections += 1;
                let est = self.estimate_told(h.leader).unwrap_or(0);
                self.event(Event::Elected {
                    id: h.leader,
                    est,
                    stale: false,
                    token: h.token,
                });
            }
        }
        self.office = holder;
        Ok(())
    }

    /// A coordinator without a lease yet (declared, not established): elected, not
    /// ready. One whose lease lapsed is no coordinator at all (as the runtime reads its
    /// status: `Status::as_of_now`).
    fn coordinator_elected(&self, p: &Protocol) -> Option<Holder> {
        self.members
            .iter()
            .filter(|m| p.sim.lease_until(m.id).is_none())
            .filter_map(|m| {
                let view = p.sim.view(m.id).filter(|v| v.role == Role::Coordinator)?;
                let token = view.epoch?.token();
                Some(Holder {
                    leader: m.id,
                    token,
                    lease_end: self.now + 1,
                    leading_from: u64::MAX,
                })
            })
            .max_by_key(|h| h.token)
    }
}
