//! The operator's replica method (`[postgres] replica_method`,
//! src/postgres_rules/replica_method.rs) and the backup repository it restores from,
//! drawn per seed from a stream of their own (`Spec::backups`), so a seed without them
//! keeps its course: in about half the seeds `Rules::replica_method` is on. The
//! operator backs up the coordinator's primary at the first step it has one and every
//! few dozen steps after: each backup is a copy of its data dir then (WAL, branch
//! records, system identifier), so the newest may be older than the WAL the primary
//! still keeps (src/sim/postgres/retention.rs), or of a branch a failover abandoned
//! since. The method restores the newest backup and its standby then starts streaming
//! from the copy's source, as src/node/postgres/manager/copies.rs (`restore_for`) does
//! (only a clone: a reinit is always `pg_basebackup`); like it, the executor here checks what it restored with `check_restored` and, on any failure,
//! leaves the data dir empty and reports `Done::CopyFailed`. Its faults, during the
//! fault steps: the command exits non-zero now and then, the repository holds no backup
//! yet, and in some seeds a backup of another cluster (a wrong stanza) lands in the
//! repository as the newest; in one method seed in eight the stanza is wrong for the
//! whole run, so only `pg_basebackup` ever makes a copy (the method, once failed, is
//! not tried again before one worked: `Memory::method_spent`). What the checks hold of the copies is in
//! src/sim/postgres/restored.rs.

use super::decisions::{check_restored, Copier, Done};
use super::log::Event;
use super::server::{Data, MethodCopy};
use super::world::World;
use super::Sabotage;
use crate::protocol::NodeId;
use rand::Rng;

impl World {
    /// The operator's backup, when one is due and the coordinator's server is a
    /// primary: a copy of it, or during the faults maybe another cluster's.
    pub(super) fn back_up(&mut self) {
        let leader = self.office.map(|h| h.leader);
        let primary = leader.and_then(|l| self.member(l).pg.as_ref().filter(|d| d.primary()));
        let (Some(leader), Some(primary)) = (leader, primary) else {
            return;
        };
        let repo = &self.backups;
        if !repo.method || self.now < repo.next_at {
            return;
        }
        let backup = Data::copy_of(primary);
        let faults = self.healed_at.is_none();
        let repo = &mut self.backups;
        repo.next_at = self.now + repo.rng.gen_range(20..60);
        let foreign = repo.wrong_stanza || faults && repo.rng.gen_ratio(repo.foreign_percent, 100);
        let words = match foreign {
            true => {
                let data = super::strangers::another_clusters(self.next_system_id, &mut repo.rng);
                self.next_system_id += 1;
                repo.newest = Some(data);
                "a backup of another cluster (a wrong stanza) lands in the repository".into()
            }
            false => {
                let words = format!(
                    "backs up {leader}'s primary ({} commits, timeline {})",
                    backup.wal.len(),
                    backup.wal.timeline()
                );
                repo.newest = Some(backup);
                words
            }
        };
        self.event(Event::Operator(words));
    }

    /// The replica method for member `id`, to stream from `from` (the runtime's
    /// `restore_for`): the newest backup restored into the empty data dir, its system
    /// identifier checked against the cluster's `system_id` (the sabotage
    /// `RestoredUnchecked` skips the check); on failure the data dir stays empty. A
    /// copy of another cluster's data started fails the run.
    pub(super) fn restore_for(
        &mut self,
        id: NodeId,
        from: NodeId,
        system_id: u64,
    ) -> Result<(), String> {
        let by = Copier::Method { system_id };
        let checked = self.spec.sabotage != Some(Sabotage::RestoredUnchecked);
        let faults = self.healed_at.is_none();
        let repo = &mut self.backups;
        let exits_non_zero = faults && repo.rng.gen_ratio(repo.fail_percent, 100);
        let repo = &self.backups;
        // (why it failed, whether a backup of another cluster was refused)
        let restored = match &repo.newest {
            _ if exits_non_zero => Err(("the replica method exited 1".to_string(), false)),
            None => Err((
                "the replica method exited 1: the repository holds no backup".into(),
                false,
            )),
            Some(backup) if checked => match check_restored(backup.system_id, system_id) {
                Ok(()) => Ok(Data::copy_of(backup)),
                Err(why) => Err((why, true)),
            },
            Some(backup) => Ok(Data::copy_of(backup)),
        };
        match restored {
            Ok(mut data) => {
                data.method_copy = Some(MethodCopy {
                    by_manager: self.member(id).managers,
                    fell_short: false,
                });
                let system = data.system_id;
                self.install(id, data, from);
                self.member_mut(id).clone_failed_at = None;
                self.done(id, Done::Copied { by });
                self.summary.method_copies += 1;
                self.check_restored_system(id, system)
            }
            Err((why, refused)) => {
                self.member_mut(id).pg = None;
                self.summary.method_failures += 1;
                self.summary.foreign_backups_refused += u64::from(refused);
                let what = match refused {
                    true => "replica method (another cluster's backup refused)",
                    false => "replica method",
                };
                self.event(Event::Failed { id, what });
                let at_ms = self.member(id).engine.now_ms();
                self.done(id, Done::CopyFailed { why, at_ms, by });
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::world::{Archive, Repository};
    use super::super::{run_seed, Spec, Summary, Violation};
    use crate::config::postgres::Synchronous;

    #[test]
    fn the_method_is_drawn_in_about_half_the_seeds_and_never_when_off() {
        let on = Spec::new(3, Synchronous::Quorum);
        let drawn = (0..400).filter(|&s| Repository::new(s, &on).method).count();
        assert!((150..250).contains(&drawn), "{drawn} of 400");
        let off = Spec {
            backups: false,
            ..on
        };
        assert!((0..400).all(|s| !Repository::new(s, &off).method && !Archive::new(s, &off).on));
    }

    /// The draws come from streams of their own: a seed that draws neither the method
    /// nor the archive runs as it did before they were modelled.
    #[test]
    fn a_seed_drawing_neither_keeps_its_course() {
        let on = Spec::new(3, Synchronous::Quorum);
        let off = Spec {
            backups: false,
            ..on
        };
        let neither = (0..60)
            .filter(|&s| !Repository::new(s, &on).method && !Archive::new(s, &on).on)
            .take(12);
        for seed in neither {
            let (a, b) = (run_seed(seed, &on), run_seed(seed, &off));
            let strip = |r: Result<Summary, Violation>| r.map_err(|v| (v.step, v.what));
            assert_eq!(strip(a), strip(b), "seed {seed}");
        }
    }
}
