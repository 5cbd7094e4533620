//! How a member without usable data gets a copy ([`Copier`]): `pg_basebackup` from a
//! running server, or the operator's replica method (`[postgres] replica_method`, a
//! command restoring from a backup repository such as pgBackRest or WAL-G, Patroni's
//! `create_replica_methods`). The decisions (src/postgres_rules.rs) only say *that* a
//! copy is due and from whose server it then streams; [`choose`] says *how*:
//!
//! - the method only fills an empty data dir (a clone); a reinit, which replaces data
//!   that may hold acknowledged commits, is always `pg_basebackup` from the primary,
//!   whose copy holds them all at once;
//! - the method only when the cluster's system identifier is known: its result is then
//!   checked ([`check_restored`]) and a backup of another cluster (a wrong stanza, a
//!   repository shared by two clusters) is never started;
//! - `pg_basebackup` after the method failed (a wrong stanza would otherwise be
//!   restored at every try, for ever); a method's copy that cannot follow its upstream
//!   (a backup older than what the upstream keeps with no archive, `restore_command`,
//!   to bridge the gap, or of a branch the upstream left) is replaced by a reinit, so
//!   by `pg_basebackup` too;
//! - the method again after a `pg_basebackup` worked: a repository that was down
//!   comes back into use.
//!
//! The runtime (src/node/postgres/manager.rs) and the simulator (src/sim/postgres/)
//! both run the engine, which applies [`choose`] after every decision.

use super::{Act, Cluster, Decision, Memory, Rules};

/// How a copy is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Copier {
    /// `pg_basebackup` from the source's running server.
    #[default]
    BaseBackup,
    /// The operator's command; its result must hold the cluster `system_id`.
    Method { system_id: u64 },
}

impl Copier {
    /// The word the log and the status use.
    pub fn word(self) -> &'static str {
        match self {
            Copier::BaseBackup => "pg_basebackup",
            Copier::Method { .. } => "the replica method",
        }
    }
}

/// The copier for the next copy under `rules`, given what the memory says of the
/// method and what the cluster knows of its identity.
pub fn copier(cluster: &Cluster, memory: &Memory, rules: &Rules) -> Copier {
    let system_id = match cluster.system_id {
        0 => cluster.sync.system_id(),
        known => known,
    };
    match rules.replica_method && !memory.method_spent && system_id != 0 {
        true => Copier::Method { system_id },
        false => Copier::BaseBackup,
    }
}

/// `decision` with its clone made by [`copier`]. A reinit is always `pg_basebackup`:
/// it replaces data that may hold acknowledged commits, and a backup older than them
/// would leave them on the source's server alone until the copy caught up (the
/// simulator lost them when that server failed next, seed 760 of three members).
pub fn choose(decision: Decision, cluster: &Cluster, memory: &Memory, rules: &Rules) -> Decision {
    let act = match decision.act {
        Act::Clone { from, .. } => Act::Clone {
            from,
            by: copier(cluster, memory, rules),
        },
        Act::Reinit { from, .. } => Act::Reinit {
            from,
            by: Copier::BaseBackup,
        },
        other => other,
    };
    Decision { act, ..decision }
}

/// Whether what the replica method left in the data dir may be started: a cluster
/// (`restored` is its system identifier, 0 when it holds none) and the cluster's own.
pub fn check_restored(restored: u64, wanted: u64) -> Result<(), String> {
    match restored {
        0 => Err("the replica method exited 0 but left no cluster in the data dir".into()),
        r if r != wanted => Err(format!(
            "the replica method restored another cluster (system identifier {r}; the \
             cluster's is {wanted}): it is not started"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::SyncView;
    use super::*;
    use crate::postgres_rules::Done;

    fn rules(method: bool) -> Rules {
        Rules {
            replica_method: method,
            ..Rules::for_test()
        }
    }

    fn cluster(system_id: u64) -> Cluster {
        Cluster {
            system_id,
            ..Cluster::of(2, &[1, 2, 3])
        }
    }

    fn clone_of(d: Decision) -> Act {
        choose(d, &cluster(7), &Memory::default(), &rules(true)).act
    }

    #[test]
    fn the_method_serves_only_when_set_and_the_identity_is_known() {
        let fresh = Memory::default();
        let by = |c: &Cluster, r: &Rules| copier(c, &fresh, r);
        assert_eq!(
            by(&cluster(7), &rules(true)),
            Copier::Method { system_id: 7 }
        );
        assert_eq!(by(&cluster(7), &rules(false)), Copier::BaseBackup);
        assert_eq!(
            by(&cluster(0), &rules(true)),
            Copier::BaseBackup,
            "an unknown identity cannot be checked"
        );
        let read = Cluster {
            sync: SyncView::Read(Some(crate::postgres_rules::SyncRecord {
                system_id: 9,
                ..crate::postgres_rules::SyncRecord::default()
            })),
            ..cluster(0)
        };
        assert_eq!(by(&read, &rules(true)), Copier::Method { system_id: 9 });
        let clone = Decision {
            act: Act::Clone {
                from: 1,
                by: Copier::BaseBackup,
            },
            eligible: false,
        };
        assert_eq!(
            clone_of(clone),
            Act::Clone {
                from: 1,
                by: Copier::Method { system_id: 7 }
            }
        );
        let wait = Decision {
            act: Act::Wait("x".into()),
            eligible: true,
        };
        assert_eq!(clone_of(wait), Act::Wait("x".into()));
        let reinit = Decision {
            act: Act::Reinit {
                from: 1,
                by: Copier::Method { system_id: 7 },
            },
            eligible: false,
        };
        assert_eq!(
            clone_of(reinit),
            Act::Reinit {
                from: 1,
                by: Copier::BaseBackup
            },
            "a reinit replaces data: never by the method"
        );
    }

    #[test]
    fn a_failed_method_gives_way_to_pg_basebackup_until_one_works() {
        let (r, c) = (rules(true), cluster(7));
        let mut memory = Memory::default();
        memory.on_done(
            Done::CopyFailed {
                why: "exit 1".into(),
                at_ms: 10,
                by: Copier::Method { system_id: 7 },
            },
            &r,
        );
        assert_eq!(copier(&c, &memory, &r), Copier::BaseBackup);
        assert_eq!(
            memory.copy_failed, None,
            "no backoff: pg_basebackup goes next"
        );
        memory.on_done(
            Done::Copied {
                by: Copier::BaseBackup,
            },
            &r,
        );
        assert_eq!(copier(&c, &memory, &r), Copier::Method { system_id: 7 });
    }

    #[test]
    fn only_the_clusters_own_restored_data_may_start() {
        assert_eq!(check_restored(7, 7), Ok(()));
        assert!(check_restored(0, 7)
            .unwrap_err()
            .contains("left no cluster"));
        assert!(check_restored(8, 7)
            .unwrap_err()
            .contains("another cluster"));
    }
}
