//! The config's types: one struct per TOML table, with its defaults. Keys ending in
//! `_ms` take milliseconds, or a duration string such as `"5s"` ([`super::duration`]).

use super::duration;
use super::postgres::PostgresConfig;
use super::watchdog::WatchdogConfig;
use crate::certs::TlsFiles;
use crate::protocol::{Mode, NodeId, Preempt, Timing};
use crate::transport::{PeerAddr, TransportConfig};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

/// File name of the keeper socket inside the data dir.
pub const KEEPER_SOCKET: &str = "keeper.sock";

/// Everything one `bully node` process needs to know before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// This node's ID; its certificate must be issued for it. Higher IDs win elections.
    pub id: NodeId,
    /// The UDP address the QUIC endpoint binds (peers and clients connect here).
    pub listen: SocketAddr,
    /// Where the storage cells and the event log live; created on start.
    pub data_dir: PathBuf,
    /// Set by `bully node --new-cluster`, never by the file: an empty store votes at once
    /// instead of recovering the terms it may have lost (src/protocol/recovery.rs).
    #[serde(skip)]
    pub new_cluster: bool,
    /// Set by `bully node --change-mode`, never by the file: the file's `mode` replaces
    /// the one the store was first started in (every node stopped, every file changed;
    /// src/node/drive/start.rs).
    #[serde(skip)]
    pub change_mode: bool,
    /// Whether a (re)started higher node takes over from a healthy lower coordinator.
    /// **Cluster setting**: seeds a new cluster only; change it with `bully config set
    /// preempt=never` (docs/configuration.md#what-the-file-decides-and-what-the-cluster-does).
    #[serde(default)]
    pub preempt: Preempt,
    /// `quorum` (default): never two coordinators; `classic`: the seeds' Bully, where a
    /// partition gives one coordinator per side. Every member must use the same mode.
    /// **Cluster setting**: stored at a store's first start; changed offline only, with
    /// `bully node --change-mode` on every node (docs/modes.md).
    #[serde(default)]
    pub mode: Mode,
    /// A witness votes and counts for majorities but never leads (no hooks, no health).
    #[serde(default)]
    pub witness: bool,
    /// The `[tls]` table: the CA, and this node's certificate and key.
    pub tls: TlsFiles,
    /// The `[timing]` table: the protocol's timers, in milliseconds. **Cluster
    /// setting**: seeds a new cluster only; change it with `bully config set
    /// timing.KEY=VALUE`, which every member lives by with no restart.
    #[serde(default)]
    pub timing: Timing,
    /// Every other member of the cluster. **Cluster setting** for who is a member
    /// (seeds a new cluster's list; change it with `bully member`); a host setting for
    /// the addresses this host dials.
    #[serde(default)]
    pub peers: Vec<PeerConfig>,
    /// Commands run on role changes; none by default.
    #[serde(default)]
    pub hooks: HooksConfig,
    /// Off unless set: without a health check the node is always eligible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthConfig>,
    /// Off unless set: the HTTP endpoint for load balancers and Prometheus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpConfig>,
    /// What this host's keeper (`bully run --config`) does when the office ends here;
    /// the node itself only serves the keeper socket in its data dir.
    #[serde(default, skip_serializing_if = "FenceConfig::is_default")]
    pub fence: FenceConfig,
    /// The `[watchdog]` table; off unless set.
    #[serde(default, skip_serializing_if = "WatchdogConfig::is_default")]
    pub watchdog: WatchdogConfig,
    /// Off unless set: the PostgreSQL server this node keeps itself (initdb or clone,
    /// start as a standby, promote, fence, rewind), with no hook scripts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresConfig>,
}

impl NodeConfig {
    /// This node's ID followed by its peers' IDs, sorted: the cluster's members.
    pub fn members(&self) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = std::iter::once(self.id)
            .chain(self.peers.iter().map(|p| p.id))
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Whether something gates the node's eligibility: a `[health]` check, or the
    /// PostgreSQL manager, which stands in for one. Such a node starts ineligible and
    /// the first verdict decides.
    pub fn checks_health(&self) -> bool {
        self.health.is_some() || self.postgres.is_some()
    }

    /// Where the node listens for its host's keepers (`bully run`, `src/api/keeper.rs`).
    pub fn keeper_socket(&self) -> PathBuf {
        self.data_dir.join(KEEPER_SOCKET)
    }

    /// The part of this config the transport runs on, at start and after a reload.
    pub fn transport_config(&self) -> TransportConfig {
        TransportConfig {
            id: self.id,
            listen: self.listen,
            tls: self.tls.clone(),
            peers: self.peers.iter().map(|p| (p.id, p.addr.clone())).collect(),
            timing: self.timing,
            mode: self.mode,
        }
    }
}

/// One other member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// The ID its certificate must carry; a peer presenting another ID is refused.
    pub id: NodeId,
    /// Where to dial it: `IP:port` or `host:port`; a host name is resolved at every
    /// dial, so a peer that moves to a new address behind its name is followed.
    pub addr: PeerAddr,
    /// Whether that peer is a witness (it never leads, so it gets no Election).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub witness: bool,
}

/// Commands run (with `sh -c`) on role changes, with `BULLY_*` environment variables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    /// Run when this node becomes coordinator, and again on each re-declaration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_elected: Option<String>,
    /// Run when this node stops being coordinator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_demoted: Option<String>,
    /// Run whenever the coordinator this node follows or is changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_change: Option<String>,
    /// A hook still running after this long is killed (and counted as failed).
    #[serde(deserialize_with = "duration::millis")]
    pub timeout_ms: u64,
    /// What a coordinator does when `on_elected` fails: by default it resigns, so a
    /// node whose database could not be promoted never stays in office.
    pub on_elected_failure: ElectedHookFailure,
    /// How long a node that resigned after a failed `on_elected` stays ineligible
    /// (if no other node takes over, it leads again at once and retries the hook).
    #[serde(deserialize_with = "duration::millis")]
    pub resign_for_ms: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            on_elected: None,
            on_demoted: None,
            on_change: None,
            timeout_ms: 5000,
            on_elected_failure: ElectedHookFailure::default(),
            resign_for_ms: 5000,
        }
    }
}

/// `[hooks] on_elected_failure`: whether a failed `on_elected` ends the term of office.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElectedHookFailure {
    /// Step down for `resign_for_ms` so another node (whose hook may work) leads.
    #[default]
    Resign,
    /// Stay coordinator; with `coordinator_ready = "hook_ok"` `/coordinator` stays 503.
    Stay,
}

/// A health check gating eligibility: a failing node neither answers nor declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// Run with `sh -c`; exit status 0 means healthy.
    pub command: String,
    /// Time between the starts of two checks.
    #[serde(
        default = "HealthConfig::default_interval_ms",
        deserialize_with = "duration::millis"
    )]
    pub interval_ms: u64,
    /// A check still running after this long is killed and counts as a failure.
    #[serde(
        default = "HealthConfig::default_timeout_ms",
        deserialize_with = "duration::millis"
    )]
    pub timeout_ms: u64,
    /// Consecutive successes before an ineligible node becomes eligible.
    #[serde(default = "HealthConfig::default_rise")]
    pub rise: u32,
    /// Consecutive failures before an eligible node becomes ineligible.
    #[serde(default = "HealthConfig::default_fall")]
    pub fall: u32,
    /// A command printing this node's estimate est(S) (a decimal u64, e.g. its WAL
    /// position), run after each check; elections then go by `(estimate, id)`
    /// (docs/design.md#elected-by-data-est). Without it the check's own `est=N` line,
    /// if it prints one, is the estimate.
    #[serde(default)]
    pub estimate: Option<String>,
}

impl HealthConfig {
    /// A check of `command` with the default interval, timeout, rise and fall.
    pub fn new(command: impl Into<String>) -> Self {
        HealthConfig {
            command: command.into(),
            interval_ms: Self::default_interval_ms(),
            timeout_ms: Self::default_timeout_ms(),
            rise: Self::default_rise(),
            fall: Self::default_fall(),
            estimate: None,
        }
    }

    fn default_interval_ms() -> u64 {
        1000
    }

    fn default_timeout_ms() -> u64 {
        500
    }

    fn default_rise() -> u32 {
        2
    }

    fn default_fall() -> u32 {
        3
    }
}

/// The HTTP endpoint (`/coordinator`, `/health`, `/status`, `/metrics`, Patroni's
/// routes; docs/patroni.md#rest-routes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// The TCP address to bind. Without `tls`, keep it on loopback or a trusted network.
    pub listen: SocketAddr,
    /// When `/coordinator` starts answering 200 on a new coordinator.
    #[serde(default)]
    pub coordinator_ready: CoordinatorReady,
    /// Serve HTTPS with the node's certificate (`node-<id>.bully`, from the cluster CA
    /// of `[tls]`); a client certificate from the same CA is asked for, and required by
    /// the write routes (`POST /switchover`, `/restart`, ...). Off: plain HTTP, and every
    /// write route is refused (403).
    #[serde(default)]
    pub tls: bool,
    /// With `password_file`: the write routes also need HTTP basic authentication as this
    /// user (Patroni's `restapi.authentication`), on top of the client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// A file whose first line is `username`'s password (needs `tls`: a password is
    /// never sent in clear).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
}

impl HttpConfig {
    /// A plain endpoint on `listen` with the default readiness.
    pub fn on(listen: SocketAddr) -> Self {
        HttpConfig {
            listen,
            coordinator_ready: CoordinatorReady::default(),
            tls: false,
            username: None,
            password_file: None,
        }
    }
}

/// `[http] coordinator_ready`: what "coordinator" means to a load balancer.
///
/// The default is `hook_ok` because a load balancer sends writes to whatever answers
/// 200: before `on_elected` has promoted the database, those writes would be refused
/// (or worse, land on a replica that is about to be resynced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoordinatorReady {
    /// 200 once the node leads (established in quorum mode), hooks or not.
    Elected,
    /// 200 once `on_elected` has succeeded for the epoch the node leads (at once when
    /// no `on_elected` is configured).
    #[default]
    HookOk,
}

/// `[fence]`: read by `bully run --config` (the keeper, `src/keeper/`), which acts on
/// this node's lease from outside the node's process.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FenceConfig {
    /// Run with `sh -c` (beside the config file) whenever the office ends on this host
    /// (the lease lapsed, the node died or stalled, or it handed over), with
    /// `BULLY_TOKEN` of the epoch that ended; killed at the fencing deadline, the
    /// earliest instant another node could lead. E.g. `redis-cli CLIENT PAUSE 60000 WRITE`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The least time the keeper's job needs between SIGTERM and SIGKILL; 0 (the
    /// default): what the lease leaves (`bully run --grace`).
    #[serde(deserialize_with = "duration::millis")]
    pub grace_ms: u64,
}

impl FenceConfig {
    /// Whether nothing is set (the table is then left out of a rendered config).
    pub fn is_default(&self) -> bool {
        self == &FenceConfig::default()
    }
}
