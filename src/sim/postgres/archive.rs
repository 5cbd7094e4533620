//! The WAL archive (`restore_command` among the cluster's parameters, with the
//! primaries' `archive_command`), drawn per seed from a stream of its own
//! (`Spec::backups`), with or without the replica method (src/sim/postgres/backups.rs).
//! The coordinator's primary archives its WAL each step, a few commits behind (a drawn
//! lag), and, as PostgreSQL, recycles none of it before it is archived
//! (src/sim/postgres/retention.rs). A standby whose next position its upstream no
//! longer keeps replays from the archive what lies on its upstream's history, and
//! streams once past the gap; its manager counts the gap as settled
//! (`WalRemoved::settled`) only once its replay has not moved for the runtime's 15 s
//! (src/node/postgres/manager.rs, `ARCHIVE_SETTLE`). Without an archive the model
//! settles at once: a standby that does not stream replays nothing more, which the
//! runtime finds at its next look.
//!
//! The limit of the model: the archive is one WAL, the newest the coordinator's
//! primary archived, not PostgreSQL's files per timeline. A standby replays from it
//! only when its own WAL is a prefix of the archived one and the archived one is on
//! its upstream's history (`Wal::follows`); archived WAL of another history is never
//! replayed, as real tools keep each timeline's files apart and PostgreSQL checks the
//! timeline history before it follows one. So a standby on a branch a failover
//! abandoned is not carried onto its upstream's history by the archive: it is rewound
//! or copied afresh.

use super::decisions::Server;
use super::machines::STEP_MS;
use super::server::{Chunk, Data, Wal};
use super::world::World;
use crate::protocol::NodeId;
use rand::Rng;

/// How long a standby past its upstream's WAL must replay nothing before its manager
/// counts the gap as settled, with an archive (src/node/postgres/manager.rs,
/// `ARCHIVE_SETTLE`).
const ARCHIVE_SETTLE_MS: u64 = 15_000;

impl World {
    /// Steps a settling standby waits with an archive (none without): the progress
    /// check's bound grows by as much.
    pub(super) fn archive_settle_steps(&self) -> u64 {
        match self.archive.on {
            true => ARCHIVE_SETTLE_MS / STEP_MS,
            false => 0,
        }
    }

    /// How far `wal` is archived: all of it without an archive, else as far as the
    /// archived WAL follows it (none when it does not).
    pub(super) fn archived_of(&self, wal: &Wal) -> usize {
        match (&self.archive.held, self.archive.on) {
            (_, false) => wal.len(),
            (Some((_, archived)), true) if archived.follows(wal) => archived.len(),
            _ => 0,
        }
    }

    /// What a standby with data `own` replays from the archive, at most `chunk`
    /// commits, past what its upstream (`up`) no longer keeps: the commits and the
    /// archive's timelines, when its WAL is a prefix of the archived WAL and that is on
    /// the upstream's history.
    pub(super) fn replay_archived(&self, own: &Data, up: &Data, chunk: usize) -> Option<Chunk> {
        let (system, archived) = self.archive.held.as_ref().filter(|_| self.archive.on)?;
        let n = own.wal.len();
        let useful = *system == own.system_id
            && n < up.kept_from
            && n < archived.len()
            && own.wal.follows(archived)
            && archived.follows(&up.wal);
        useful.then(|| {
            let upto = archived.len().min(n + chunk);
            (archived.commits[n..upto].to_vec(), archived.forks.clone())
        })
    }

    /// The coordinator's primary archives its WAL, a drawn few commits behind.
    pub(super) fn archive_wal(&mut self) {
        if !self.archive.on {
            return;
        }
        let Some(leader) = self.office.map(|h| h.leader) else {
            return;
        };
        let lag = self.archive.rng.gen_range(0..=self.archive.max_lag);
        let Some(primary) = self.member(leader).pg.as_ref().filter(|d| d.primary()) else {
            return;
        };
        let archived = primary.wal.upto(primary.wal.len().saturating_sub(lag));
        self.archive.held = Some((primary.system_id, archived));
    }

    /// The runtime's `WalRemoved::settled` at this look of member `id`, which saw
    /// `server`: its standby's replay has not moved since the last look and, with an
    /// archive, for `ARCHIVE_SETTLE_MS` (src/node/postgres/manager.rs, `wal_removed`).
    pub(super) fn replay_settled(&mut self, id: NodeId, server: &Server) -> bool {
        let (now, archive) = (self.now, self.archive.on);
        let replayed = match server {
            Server::Running(r) if r.in_recovery => Some(r.wal.lsn),
            _ => None,
        };
        let m = self.member_mut(id);
        let still = replayed.is_some() && replayed == m.replayed.0;
        if !still {
            m.replayed = (replayed, now);
        }
        !archive || still && (now - m.replayed.1) * STEP_MS >= ARCHIVE_SETTLE_MS
    }
}
