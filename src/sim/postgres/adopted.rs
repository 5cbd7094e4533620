//! Clusters that begin with data bully did not make (`bully pg adopt`,
//! src/node/postgres/adopt.rs), drawn as the run's start ([`Start::Adopted`],
//! [`Start::TakenOver`]):
//! - **Adopted:** member 1 holds a server that ran without bully, stopped by adopt
//!   (cleanly, or killed after its shutdown timed out), its node noting the data as
//!   held; the others have empty data dirs. Every commit in its WAL was acknowledged
//!   to a client before bully.
//! - **Taken over** (from Patroni): member 1 was the primary; every other member holds
//!   a standby of the same system, stopped where it was (a few commits behind, or
//!   level with it), each node noting its data as held. The commits that the servers
//!   lacking them cannot outvote were acknowledged (a quorum-synchronous primary's
//!   promise); the others were not promised.
//!
//! Nothing is committed yet: no identity record, no office. The run's checks then hold
//! the decisions to every acknowledged commit through the first election, promotion
//! and clones, under the same faults as any run (a volume not mounted at the first
//! restart among them).

use super::server::{Data, State};
use super::world::{Acked, World};
use super::{Sabotage, Start};
use crate::protocol::NodeId;
use rand::Rng;

impl World {
    /// Sets up the start `start` names (nothing for the others).
    pub(super) fn adopted(&mut self, start: Start) {
        let taken_over = match start {
            Start::Adopted => false,
            Start::TakenOver => true,
            Start::New | Start::Running => return,
        };
        let system_id = self.next_system_id;
        self.next_system_id += 1;
        let mut first = Data::initdb(system_id);
        let count = self.rng.gen_range(3..20u64);
        first.wal.commits = (self.next_commit..self.next_commit + count).collect();
        self.next_commit += count;
        let clean = self.rng.gen_ratio(4, 5);
        first.state = State::Stopped {
            was_primary: true,
            clean,
        };
        let len = first.wal.len();
        let noted = self.spec.sabotage != Some(Sabotage::AdoptedUnnoted);
        let ids: Vec<NodeId> = self.data_members().map(|m| m.id).collect();
        for id in ids {
            let data = match (id, taken_over) {
                (1, _) => Some(first.clone()),
                (_, false) => None,
                (_, true) => {
                    let behind = self.rng.gen_range(0..4).min(len);
                    let mut copy = Data::copy_of(&first);
                    copy.wal.commits.truncate(len - behind);
                    copy.state = State::Stopped {
                        was_primary: false,
                        clean: true,
                    };
                    Some(copy)
                }
            };
            let m = self.member_mut(id);
            m.held = data.is_some() && noted;
            m.pg = data;
        }
        // A commit is promised when the servers lacking it cannot make a majority with
        // the witnesses: every promotion check then reaches one that holds it.
        let witnesses = self.members.len() - self.spec.members;
        for pos in 0..len {
            let id = first.wal.commits[pos];
            let holders = self
                .data_members()
                .filter(|m| m.pg.as_ref().is_some_and(|d| d.wal.holds(pos, id)))
                .count();
            if !taken_over || self.spec.members - holders < self.majority() - witnesses {
                self.acked.push(Acked {
                    id,
                    pos,
                    weak: false,
                    destroyed: false,
                    alone_in: None,
                    accepted: false,
                });
            }
        }
    }
}
