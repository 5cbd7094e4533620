//! What the host and the election race do to a data dir without bully asking, drawn
//! with their own RNG so the seeds recorded before keep their course when off
//! (`Spec::strangers`):
//! - **The initdb race.** Two coordinators in quick succession each find every data
//!   dir empty: the first one's `initdb` runs while a newer epoch is declared, so the
//!   record of its identity is refused and the others have not heard of its data yet
//!   (the real-process start of tests/postgres_unstreamable.rs). The second one's
//!   `initdb` becomes the cluster's. The first one's data, made here and never
//!   promoted, holds nothing a client wrote: the decisions replace it by a clone
//!   (src/postgres_rules.rs, `replace_own_initdb`), and the operator does not act.
//! - **A stranger's volume.** A dead member comes back with another cluster's data dir
//!   mounted (an operator's slip), its WAL maybe far ahead on a later branch, its
//!   server maybe running already (once the cluster served: before, data found on a
//!   member is what a new cluster adopts). It must
//!   never be promoted, counted as reached by a promotion check (it holds none of the
//!   cluster's commits), or replaced by the decisions: only the operator moves it.
//!
//! [`World::check_replaces_only_own`] fails a run whose decisions replace or rewind a
//! data dir of another cluster that the node did not make itself.

use super::decisions::{foreign, Act, Cluster};
use super::server::{Data, State};
use super::world::World;
use crate::protocol::NodeId;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::Rng;

/// The chance an `initdb` during the fault steps races a newer epoch, in percent.
const RACE_PERCENT: u32 = 40;
/// The chance a fault step mounts a stranger's volume on a dead member, in percent.
const STRANGER_PERCENT: u32 = 2;

impl World {
    /// After an `initdb` by `id`: whether a newer epoch was declared while it ran. If
    /// so the office ends, the identity record is not committed, and for a few steps
    /// no other member has heard of this data (nor of the node's estimate).
    pub(super) fn initdb_raced(&mut self, id: NodeId) -> bool {
        if !self.spec.strangers
            || self.healed_at.is_some()
            || !self.strangers.rng.gen_ratio(RACE_PERCENT, 100)
        {
            return false;
        }
        let unheard = self.strangers.rng.gen_range(2..5);
        self.member_mut(id).unreported_until = self.now + unheard;
        self.end_office("a newer epoch was declared while initdb ran");
        self.fault("initdb raced a newer epoch", id);
        true
    }

    /// During fault steps: maybe a dead member's volume is replaced by another
    /// cluster's (what it held is lost, as a wipe).
    pub(super) fn draw_stranger(&mut self, faults: bool) {
        // Before the first promotion a cluster has no data of its own to tell a
        // stranger's from: a data dir found then is adopted, not a stranger's (seed
        // 19210, a new cluster, deadlocked on a volume mounted that early).
        if !faults || !self.spec.strangers || self.served_system.is_none() {
            return;
        }
        if !self.strangers.rng.gen_ratio(STRANGER_PERCENT, 100) {
            return;
        }
        let dead: Vec<NodeId> = self
            .data_members()
            .filter(|m| !m.alive && m.pg.is_some())
            .map(|m| m.id)
            .collect();
        let Some(&id) = dead.choose(&mut self.strangers.rng) else {
            return;
        };
        if !self.may_wipe(id) {
            return;
        }
        let stranger = self.stranger_data();
        self.wipe(id);
        self.member_mut(id).pg = Some(stranger);
        self.fault("another cluster's volume mounted", id);
    }

    /// Another cluster's data: its own system identifier, commits no one here made,
    /// sometimes far ahead on a late branch.
    fn stranger_data(&mut self) -> Data {
        let mut data = another_clusters(self.next_system_id, &mut self.strangers.rng);
        self.next_system_id += 1;
        // Sometimes its server runs already (started by hand, or by the distribution's
        // own unit), as a standby of nothing.
        if self.strangers.rng.gen_bool(0.5) {
            data.state = State::Standby {
                upstream: None,
                streaming: false,
            };
        }
        data
    }

    /// Before an act that replaces or rewinds `id`'s data dir: it must be the
    /// cluster's, or one this node's own `initdb` made (never a stranger's).
    pub(super) fn check_replaces_only_own(
        &self,
        id: NodeId,
        act: &Act,
        cluster: &Cluster,
    ) -> Result<(), String> {
        if !matches!(act, Act::Reinit { .. } | Act::Rewind { .. }) {
            return Ok(());
        }
        let m = self.member(id);
        let system = m.pg.as_ref().map_or(0, |d| d.system_id);
        // The truth, not what this node knows: the first server promoted, else the
        // identity the records name.
        let seen = Cluster {
            server_system_id: system,
            system_id: self.served_system.unwrap_or(cluster.system_id),
            ..cluster.clone()
        };
        match foreign(&seen).is_some() && m.made != Some(system) {
            true => Err(format!(
                "{id}'s decisions would {} a data dir of another cluster (system {system}) \
                 that its node did not make: only the operator may move it",
                act.word()
            )),
            false => Ok(()),
        }
    }
}

/// A stopped data dir of another cluster, of system `system_id`: commits no one here
/// made, sometimes far ahead on a late branch (a stranger's volume, and a backup of
/// another cluster in the repository: src/sim/postgres/backups.rs).
pub(super) fn another_clusters(system_id: u64, rng: &mut SmallRng) -> Data {
    let mut data = Data::initdb(system_id);
    let commits = rng.gen_range(0..80);
    let ids: Vec<u64> = (0..commits).map(|i| u64::MAX - i).collect();
    data.wal.receive(&ids, &[(1, 0)]);
    if rng.gen_bool(0.5) {
        data.wal.fork();
        data.record_branch(data.wal.timeline(), 1_000_000);
    }
    data
}
