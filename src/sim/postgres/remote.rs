//! A standby cluster (`postgres.standby_cluster`, docs/postgresql.md#a-standby-cluster),
//! drawn in a fraction of the seeds of a new cluster from a stream of its own
//! (`Spec::standby_cluster`), so a seed without it keeps its course. The cluster
//! begins with every data dir empty and the setting on; a **remote primary** runs
//! outside the members: a modelled server of its own system that is always a running
//! primary and commits on its own every step (its commits are the remote's to
//! acknowledge, none of this cluster's). It is [`Member`]-shaped and answers to
//! [`REMOTE_PRIMARY`] wherever the world resolves a member (`World::member`), so a
//! clone, a rewind or a standby's stream from it goes through the same code as from any
//! member's server. During the faults it may be unreachable for a while; it never fails
//! over.
//!
//! In half of those seeds the operator unsets the setting at a drawn fault step (a DR
//! promotion): a cluster setting, the coordinator holds the new list at once and each
//! other member at a step of its own, as `postgres.synchronous` spreads
//! (src/sim/postgres/setting.rs); each member's decisions run by what its node holds,
//! as the runtime's `rules` reads it (src/node/postgres/manager.rs).
//!
//! What the checks hold:
//!
//! - while the setting is on, no member's server is ever a primary (never promoted, no
//!   `initdb`) and every member's data, once it has any, is the remote's system;
//! - progress, while it is on: once faults stop, the coordinator's server streams from
//!   the remote and every other member streams from it (or is legitimately out);
//! - after the unset, the usual checks; and the first promotion, decided under `quorum`
//!   or `strict`, holds every commit of the remote that more servers held than a
//!   promotion check may leave unreached: `may_promote` reaches a majority of the voters
//!   and never promotes behind a reached server on the same branch, so it passes over
//!   only what fewer servers hold (under `off`, `maximum_lag_on_failover` allows less).

use super::decisions::{Office, REMOTE_PRIMARY};
use super::log::Event;
use super::server::{Data, State};
use super::world::{Member, Remote, World};
use super::{Sabotage, Spec, Start};
use crate::config::postgres::Synchronous;
use crate::protocol::NodeId;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The chance a seed of a new cluster is a standby cluster: one in this many.
const ONE_IN: u32 = 3;
/// The chance a fault step makes the remote unreachable, in percent.
const OUTAGE_PERCENT: u32 = 3;
/// The first step at which the operator may unset the setting.
const EARLIEST_UNSET: u64 = 10;

impl Remote {
    /// The draws of `seed`: a standby cluster in one seed of [`ONE_IN`] of a new
    /// cluster, never when `spec.standby_cluster` is off; the unset in half of them.
    pub fn draw(seed: u64, spec: &Spec) -> Option<Remote> {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5354_414e_4442_5921);
        let drawn = spec.standby_cluster && spec.start == Start::New && rng.gen_ratio(1, ONE_IN);
        if !drawn {
            return None;
        }
        let last = spec.fault_steps.max(EARLIEST_UNSET + 1);
        let unset_at = rng
            .gen_bool(0.5)
            .then(|| rng.gen_range(EARLIEST_UNSET..last));
        Some(Remote {
            rng,
            server: Member::new(REMOTE_PRIMARY, false, spec.synchronous),
            unset_at,
            unset: false,
            reaches: Vec::new(),
            promoted: false,
        })
    }
}

impl World {
    /// The start of a standby cluster, if drawn: the remote primary with its own
    /// system and a few commits, the setting on in every member's node.
    pub(super) fn start_standby_cluster(&mut self) {
        let Some(remote) = self.remote.as_mut() else {
            return;
        };
        let mut data = Data::initdb(self.next_system_id);
        self.next_system_id += 1;
        let count = remote.rng.gen_range(0..20u64);
        data.wal.commits = (self.next_commit..self.next_commit + count).collect();
        self.next_commit += count;
        data.state = State::Primary;
        remote.server.pg = Some(data);
        remote.reaches = vec![u64::MAX; self.members.len()];
        self.rules.standby_cluster = true;
        self.summary.standby_clusters += 1;
    }

    /// Whether `postgres.standby_cluster` is set in the cluster now (the operator has
    /// not unset it).
    pub(super) fn standby_cluster_set(&self) -> bool {
        self.remote.as_ref().is_some_and(|r| !r.unset)
    }

    /// Whether member `id`'s node holds the setting now.
    fn standby_cluster_held(&self, id: NodeId) -> bool {
        let at = (id as usize).checked_sub(1);
        let reaches = |r: &Remote| at.and_then(|at| r.reaches.get(at).copied());
        self.remote
            .as_ref()
            .and_then(reaches)
            .is_some_and(|from| self.now < from)
    }

    /// `Rules::standby_cluster` for member `id`'s decisions: what its node holds, but
    /// false for a coordinator with data under the sabotage `StandbyLeaderPromotes`.
    pub(super) fn standby_cluster_of(&self, id: NodeId) -> bool {
        let held = self.standby_cluster_held(id);
        let promotes = self.spec.sabotage == Some(Sabotage::StandbyLeaderPromotes)
            && self.member(id).pg.is_some()
            && matches!(self.office_of(id), Office::Leading { .. } | Office::Elected);
        held && !promotes
    }

    /// Whether the coordinator's server `leader` serves the cluster as member `viewer`'s
    /// node reads it (src/node/postgres/manager.rs, `serves`): a primary, or, while the
    /// node holds the setting, a running standby (the standby leader).
    pub(super) fn serves(&self, viewer: NodeId, leader: &Data) -> bool {
        leader.primary()
            || self.standby_cluster_held(viewer) && matches!(leader.state, State::Standby { .. })
    }

    /// Whether the coordinator's server is where the settled cluster wants it: the
    /// standby leader streaming from the remote while the setting is on, else a primary.
    pub(super) fn serves_settled(&self, leader: &Data) -> bool {
        match self.standby_cluster_set() {
            true => {
                leader.state
                    == State::Standby {
                        upstream: Some(REMOTE_PRIMARY),
                        streaming: true,
                    }
            }
            false => leader.primary(),
        }
    }

    /// Each step: the unset reaching members' nodes, the operator's unset at its step,
    /// and during the faults maybe the remote unreachable for a while (after them it
    /// answers again).
    pub(super) fn draw_standby_cluster(&mut self, faults: bool) {
        let now = self.now;
        let leader = self.office.map(|h| h.leader);
        let Some(remote) = self.remote.as_mut() else {
            return;
        };
        if !faults {
            remote.server.cut_off_until = remote.server.cut_off_until.min(now);
            return;
        }
        if remote.unset_at == Some(now) {
            remote.unset = true;
            for (i, reaches) in remote.reaches.iter_mut().enumerate() {
                let spread = match leader == Some(i as NodeId + 1) {
                    true => 0,
                    false => remote.rng.gen_range(0..=super::setting::LONGEST_SPREAD),
                };
                *reaches = now + spread;
            }
            let name = "bully config unset postgres.standby_cluster (a DR promotion)";
            *self.summary.faults.entry(name).or_default() += 1;
            self.event(Event::Operator(format!("{name} (from {leader:?})")));
            return;
        }
        let Some(remote) = self.remote.as_mut() else {
            return;
        };
        if remote.rng.gen_ratio(OUTAGE_PERCENT, 100) {
            remote.server.cut_off_until = now + remote.rng.gen_range(2..15);
            self.fault("remote primary unreachable", REMOTE_PRIMARY);
        }
    }

    /// The remote primary takes 0 to 2 commits, as the cluster's primaries do
    /// (src/sim/postgres/replication.rs): acknowledged by the remote, not by this
    /// cluster, so none is this cluster's to keep.
    pub(super) fn remote_commit(&mut self) {
        let first = self.next_commit;
        let Some(remote) = self.remote.as_mut() else {
            return;
        };
        let count = remote.rng.gen_range(0..3u64);
        let d = remote
            .server
            .pg
            .as_mut()
            .expect("the remote primary's data");
        d.wal.commits.extend(first..first + count);
        self.next_commit += count;
    }

    /// A copy from the remote primary that worked, counted.
    pub(super) fn note_copy_from(&mut self, source: NodeId) {
        self.summary.clones_from_remote += u64::from(source == REMOTE_PRIMARY);
    }

    /// While the setting is on: no member's server is a primary, and every member's
    /// data is the remote's system.
    pub(super) fn check_standby_cluster(&self) -> Result<(), String> {
        let Some(remote) = self.remote.as_ref().filter(|r| !r.unset) else {
            return Ok(());
        };
        let system = remote.server.pg.as_ref().map_or(0, |d| d.system_id);
        for m in self.data_members() {
            let Some(d) = &m.pg else {
                continue;
            };
            if d.primary() {
                return Err(format!(
                    "{}'s server is a primary while postgres.standby_cluster is set (a \
                     standby cluster is never promoted; its data comes from the remote)",
                    m.id
                ));
            }
            if d.system_id != system {
                return Err(format!(
                    "{}'s data is of system {} while postgres.standby_cluster is set (the \
                     remote primary's is {system}: a standby cluster is cloned from it, \
                     never made by initdb)",
                    m.id, d.system_id
                ));
            }
        }
        Ok(())
    }

    /// At the first promotion after the unset, of `id`'s server: a DR promotion when it
    /// holds the remote's data, counted; decided under `quorum` or `strict`, it holds
    /// every commit of the remote that more data servers hold than a majority of the
    /// voters leaves out (see the module doc).
    pub(super) fn check_dr_promotion(&mut self, id: NodeId) -> Result<(), String> {
        match self.remote.as_mut() {
            Some(r) if r.unset && !r.promoted => r.promoted = true,
            _ => return Ok(()),
        }
        let remote = self
            .member(REMOTE_PRIMARY)
            .pg
            .as_ref()
            .expect("the remote's data");
        let promoted = self.member(id).pg.as_ref().expect("the promoted server");
        if promoted.system_id != remote.system_id {
            return Ok(()); // unset before any data came: a new cluster of its own
        }
        let passed_over = self.passed_over(id, remote, promoted);
        self.summary.dr_promotions += 1;
        passed_over.map_or(Ok(()), Err)
    }

    /// What the DR promotion of `id` to `promoted` passed over of `remote`'s WAL that it
    /// must not: nothing under `off`.
    fn passed_over(&self, id: NodeId, remote: &Data, promoted: &Data) -> Option<String> {
        if self.member(id).synchronous == Synchronous::Off {
            return None;
        }
        // How far each data server holds the remote's WAL, furthest first.
        let mut held: Vec<usize> = self
            .data_members()
            .filter_map(|m| m.pg.as_ref())
            .filter(|d| d.system_id == remote.system_id)
            .map(|d| {
                (0..d.wal.len().min(remote.wal.len()))
                    .take_while(|&p| d.wal.commits[p] == remote.wal.commits[p])
                    .count()
            })
            .collect();
        held.sort_unstable_by(|a, b| b.cmp(a));
        // A promotion check reaches at least this many data servers (itself included).
        let witnesses = self.members.len() - self.spec.members;
        let reached = self.majority().saturating_sub(witnesses);
        let unreached = self.spec.members.saturating_sub(reached);
        let kept = *held.get(unreached)?;
        let p = (0..kept).find(|&p| !promoted.wal.holds(p, remote.wal.commits[p]))?;
        Some(format!(
            "the DR promotion of {id} passed over the remote's commit #{} (position {p}), \
             which at least {} data servers held (its WAL has {} commits)",
            remote.wal.commits[p],
            unreached + 1,
            promoted.wal.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{run_seed, Spec, Start, Summary, Violation};
    use super::*;

    fn new_cluster() -> Spec {
        Spec {
            start: Start::New,
            ..Spec::new(3, Synchronous::Quorum)
        }
    }

    #[test]
    fn a_standby_cluster_is_drawn_in_a_third_of_new_clusters_only() {
        let on = new_cluster();
        let drawn = (0..600).filter(|&s| Remote::draw(s, &on).is_some()).count();
        assert!((150..250).contains(&drawn), "{drawn} of 600");
        let running = Spec::new(3, Synchronous::Quorum);
        let off = Spec {
            standby_cluster: false,
            ..on
        };
        assert!((0..600).all(|s| Remote::draw(s, &running).is_none()));
        assert!((0..600).all(|s| Remote::draw(s, &off).is_none()));
    }

    /// A DR promotion under `quorum` must hold what enough servers held to meet every
    /// majority of the voters (two of three here), and only that.
    #[test]
    fn a_dr_promotion_behind_a_majority_is_caught() {
        let spec = new_cluster();
        let seed = (0..)
            .find(|&s| Remote::draw(s, &spec).is_some())
            .expect("a seed");
        let check = |held: [usize; 3]| {
            let mut world = World::new(seed, spec);
            let remote = world.remote.as_mut().expect("a standby cluster");
            remote.unset = true;
            let d = remote.server.pg.as_mut().expect("the remote's data");
            d.wal.commits = (100..104).collect();
            let source = d.clone();
            for (m, n) in world.members.iter_mut().zip(held) {
                let mut data = Data::copy_of(&source);
                data.wal.commits.truncate(n);
                m.pg = Some(data);
            }
            if let Some(d) = world.member_mut(1).pg.as_mut() {
                d.state = State::Primary;
                d.wal.fork();
            }
            world.check_dr_promotion(1)
        };
        assert!(check([2, 4, 4]).is_err(), "two of three held all four");
        assert!(check([2, 2, 4]).is_ok(), "one alone held the last two");
        assert!(check([4, 2, 3]).is_ok());
    }

    /// The draw comes from a stream of its own: a seed that does not draw it runs as it
    /// did before it was modelled.
    #[test]
    fn a_seed_not_drawing_it_keeps_its_course() {
        let on = new_cluster();
        let off = Spec {
            standby_cluster: false,
            ..on
        };
        let undrawn = (0..40).filter(|&s| Remote::draw(s, &on).is_none()).take(10);
        for seed in undrawn {
            let (a, b) = (run_seed(seed, &on), run_seed(seed, &off));
            let strip = |r: Result<Summary, Violation>| r.map_err(|v| (v.step, v.what));
            assert_eq!(strip(a), strip(b), "seed {seed}");
        }
    }
}
