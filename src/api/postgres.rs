//! What a node that keeps a PostgreSQL server (`[postgres]`, src/node/postgres/) tells
//! the world about that server: its role as last observed by a SQL round trip, its WAL
//! positions and lag, and what the manager is doing. Published in [`super::Status`], so
//! `bully status --cluster`, the Patroni-compatible HTTP routes
//! (src/node/serve/http_routes.rs) and the other members' managers all read the same
//! record.

use crate::protocol::membership::ConfigId;
use crate::protocol::NodeId;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::SocketAddr;

/// The server's role, as its last SQL round trip (or the data dir, when it is down)
/// showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PgRole {
    /// Running and out of recovery: it accepts writes.
    Primary,
    /// Running in recovery (a standby), streaming or not.
    Replica,
    /// Not running (stopped, starting, fenced or crashed), with a data dir.
    Stopped,
    /// No data dir yet: waiting for `initdb` or a clone.
    Absent,
    /// Running, but the last SQL round trip failed or timed out.
    Unreachable,
    /// No data dir, though this member's server held the cluster's data (a volume not
    /// mounted?): nothing is created in its place until `bully pg reinit N`. Appended
    /// last: variants are encoded by position.
    Missing,
}

impl PgRole {
    /// The word `bully status` and the HTTP routes print.
    pub fn word(self) -> &'static str {
        match self {
            PgRole::Primary => "primary",
            PgRole::Replica => "replica",
            PgRole::Stopped => "stopped",
            PgRole::Absent => "absent",
            PgRole::Unreachable => "unreachable",
            PgRole::Missing => "missing",
        }
    }
}

impl fmt::Display for PgRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// The managed server as the node last saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgState {
    /// Where the other members' standbys reach the server (`[postgres] connect_address`,
    /// else `listen`).
    pub listen: SocketAddr,
    pub role: PgRole,
    /// The server's timeline (from `pg_control_checkpoint()`, or the data dir when down).
    pub timeline: Option<u32>,
    /// The term of the office whose promotion began that timeline, as bully recorded it
    /// in the data dir (src/node/policy/postgres.rs `Position`); 0: not known.
    pub branch: Option<u64>,
    /// The position elections compare (est): a primary's flushed WAL, a standby's
    /// received (else replayed) WAL, as a byte offset.
    pub wal_position: Option<u64>,
    /// A standby's replayed WAL position.
    pub replayed: Option<u64>,
    /// How far a standby is behind the primary's last observed WAL position, in bytes.
    pub lag_bytes: Option<u64>,
    /// The member whose server this standby streams from (its WAL receiver is up); 0
    /// is a standby cluster's remote primary (`crate::postgres_rules::REMOTE_PRIMARY`).
    pub streaming_from: Option<NodeId>,
    /// On a primary: `synchronous_standby_names` as the server has it now.
    pub synchronous_standby_names: Option<String>,
    /// What the manager did last or waits for, in words (`promoted for epoch 4@2`,
    /// `rewinding from node 2`, `refuses to promote: node 1 holds newer WAL`).
    pub note: String,
    /// When this was observed: the host's boot clock in nanoseconds
    /// (`crate::boot_clock::BootInstant::as_nanos`), meaningful on this host only.
    pub observed_at_ns: u64,
    /// The parameters the server holds for its next restart (`pg_settings.pending_restart`,
    /// after a `bully pg reload`), by name; empty when none (or not running). Appended
    /// last: fields are encoded by position.
    #[serde(default)]
    pub pending_restart: Vec<String>,
    /// The data dir was made by this node's own `initdb` and its server never promoted
    /// (src/node/postgres/held.rs): no client wrote to it, so the coordinator counts
    /// this member as one without data. Appended last, as `pending_restart`.
    #[serde(default)]
    pub initdb_unpromoted: bool,
    /// The server's PostgreSQL system identifier (from its control file; `None`: no
    /// data). A member whose own records do not name the cluster's identity yet takes
    /// the coordinator's primary's, so it never mistakes a stranger's data dir for the
    /// cluster's. Appended last, as `pending_restart`.
    #[serde(default)]
    pub system_id: Option<u64>,
    /// The server's data is not the cluster's (another cluster's volume, or this
    /// node's own initdb that lost the race): the health routes never send clients to
    /// it. Appended last, as `pending_restart`.
    #[serde(default)]
    pub other_cluster: bool,
    /// The member list whose PostgreSQL parameters (a cluster setting,
    /// src/node/postgres/parameters.rs) this server was last given: applied, or refused
    /// as `parameters_refused` says. `None` before the first. Appended last, as
    /// `pending_restart`.
    #[serde(default)]
    pub parameters_list: Option<ConfigId>,
    /// Why this server does not run the cluster's parameters (PostgreSQL refused them;
    /// the ones before stay), until the list changes. Appended last, as
    /// `pending_restart`.
    #[serde(default)]
    pub parameters_refused: Option<String>,
    /// The synchronous mode this manager runs its server by (a cluster setting,
    /// `postgres.synchronous`): what `bully config set` waits for. `None` from a node
    /// before it was one. Appended last, as `pending_restart`.
    #[serde(default)]
    pub synchronous: Option<crate::postgres_rules::Synchronous>,
    /// A replica streaming from the coordinator's primary whose
    /// `synchronous_standby_names` name it (its acknowledgements count): Patroni's
    /// `quorum_standby`. Appended last, as `pending_restart`.
    #[serde(default)]
    pub quorum_standby: bool,
    /// This member's tags (`[postgres.tags]`): the primary leaves a `nosync` member out
    /// of its names, a member without data clones from a `clonefrom` one, and `/replica`
    /// leaves a `noloadbalance` one out. Appended last, as `pending_restart`.
    #[serde(default)]
    pub tags: crate::postgres_rules::Tags,
}

impl PgState {
    /// A record of a server whose role is known and nothing else (no SQL answer):
    /// what a manager that cannot run reports, and the base of the tests' records.
    pub fn bare(listen: SocketAddr, role: PgRole, note: String, observed_at_ns: u64) -> PgState {
        PgState {
            listen,
            role,
            timeline: None,
            branch: None,
            wal_position: None,
            replayed: None,
            lag_bytes: None,
            streaming_from: None,
            synchronous_standby_names: None,
            note,
            observed_at_ns,
            pending_restart: Vec::new(),
            initdb_unpromoted: false,
            system_id: None,
            other_cluster: false,
            parameters_list: None,
            parameters_refused: None,
            synchronous: None,
            quorum_standby: false,
            tags: Default::default(),
        }
    }

    /// Whether the server accepts writes right now as far as this record knows.
    pub fn writable(&self) -> bool {
        self.role == PgRole::Primary
    }

    /// Whether the server answers reads (a primary or a standby that runs).
    pub fn readable(&self) -> bool {
        matches!(self.role, PgRole::Primary | PgRole::Replica)
    }
}

/// What `bully pg` asks a node to do with its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PgVerb {
    /// Clone the server afresh from the coordinator's primary, the old data dir kept
    /// aside (refused on the primary).
    Reinit,
    /// Stop the server (fast shutdown) and start it again in the role it had; the
    /// leading primary in place, within its office.
    Restart,
    /// Reread `[postgres] parameters` from the node's config file, rewrite bully's
    /// include file with them and have the server reread its configuration.
    Reload,
    /// The coordinator may promote its server though the synchronous record says some
    /// acknowledged commits may be elsewhere (`bully pg failover --accept-loss`), for
    /// its current office only. Appended last: variants are encoded by position.
    AcceptLoss,
}

impl PgVerb {
    /// The verb as `bully pg` spells it.
    pub fn word(self) -> &'static str {
        match self {
            PgVerb::Reinit => "reinit",
            PgVerb::Restart => "restart",
            PgVerb::Reload => "reload",
            PgVerb::AcceptLoss => "failover --accept-loss",
        }
    }
}

/// Formats a WAL byte offset as PostgreSQL prints an LSN (`0/3000148`).
pub fn lsn_text(position: u64) -> String {
    format!("{:X}/{:X}", position >> 32, position & 0xFFFF_FFFF)
}

/// Parses PostgreSQL's LSN text (`0/3000148`) into a byte offset; `None` when it is not one.
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.trim().split_once('/')?;
    let high = u64::from_str_radix(high, 16).ok()?;
    let low = u64::from_str_radix(low, 16).ok()?;
    if high > u32::MAX as u64 || low > u32::MAX as u64 {
        return None;
    }
    Some(high << 32 | low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsn_text_round_trips_and_rejects_what_is_not_one() {
        for position in [0, 0x3000148, 0x1_0000_0000, 0xFFFF_FFFF_FFFF_FFFF] {
            assert_eq!(parse_lsn(&lsn_text(position)), Some(position));
        }
        assert_eq!(parse_lsn("0/3000148"), Some(0x3000148));
        assert_eq!(parse_lsn("16/B374D848"), Some(0x16_B374_D848));
        for bad in ["", "0", "x/1", "1/", "/1", "100000000/0", "0/1/2"] {
            assert_eq!(parse_lsn(bad), None, "{bad}");
        }
    }
}
