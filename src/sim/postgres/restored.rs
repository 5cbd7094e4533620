//! What the checks hold of the replica method's copies (src/sim/postgres/backups.rs),
//! from what the world knows rather than from the manager's memory:
//!
//! - no member starts data of another cluster the method restored (a backup of a
//!   wrong stanza must be refused by `check_restored`, as
//!   src/node/postgres/manager/copies.rs does; the sabotage `RestoredUnchecked` skips it);
//! - the method is not restored again in place of a member's method copy that never
//!   streamed (src/postgres_rules/replica_method.rs): one that fell short of its
//!   upstream's WAL (its manager was told the WAL it needs is gone, for good), or that
//!   is on a branch its upstream left, would land there again, for ever; it is
//!   replaced by a reinit, always `pg_basebackup` (the sabotage `ReinitByMethod`).
//!
//! It also counts the copies that fell short and then went by `pg_basebackup`.

use super::decisions::{Act, Copier, WalRemoved};
use super::world::World;
use crate::protocol::NodeId;

impl World {
    /// After the method restored data of `system` for member `id` and started it: it
    /// must be the cluster's.
    pub(super) fn check_restored_system(&self, id: NodeId, system: u64) -> Result<(), String> {
        match self.served_system {
            Some(served) if served != system => Err(format!(
                "{id} started a backup of another cluster (system {system}; the cluster's \
                 is {served}) that the replica method restored"
            )),
            _ => Ok(()),
        }
    }

    /// Before a copy by member `id`: not by the method in place of a method copy its
    /// manager restored that never streamed (those that fell short are counted when
    /// `pg_basebackup` goes).
    pub(super) fn check_method_again(&mut self, id: NodeId, act: &Act) -> Result<(), String> {
        let (Act::Clone { by, .. } | Act::Reinit { by, .. }) = *act else {
            return Ok(());
        };
        let m = self.member(id);
        match (m.pg.as_ref().and_then(|d| d.method_copy), by) {
            (None, _) => Ok(()),
            (Some(copy), Copier::BaseBackup) => {
                self.summary.short_method_copies_replaced += u64::from(copy.fell_short);
                Ok(())
            }
            (Some(copy), Copier::Method { .. }) => Err(format!(
                "{id} restores the replica method again in place of its own method copy, \
                 which never streamed{} (the same backup would land there again)",
                match copy.fell_short {
                    true => " and fell short of its upstream's WAL",
                    false => "",
                }
            )),
        }
    }

    /// What a look of member `id` tells of its method copy: it fell short when the
    /// manager that restored it is told the WAL it needs is gone for good.
    pub(super) fn note_method_copy(&mut self, id: NodeId, removed: Option<WalRemoved>) {
        if !removed.is_some_and(|r| r.settled) {
            return;
        }
        let m = self.member_mut(id);
        if let Some(copy) = m.pg.as_mut().and_then(|d| d.method_copy.as_mut()) {
            copy.fell_short |= copy.by_manager == m.managers;
        }
    }
}
