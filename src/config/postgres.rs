//! `[postgres]`: the PostgreSQL server this node keeps itself (src/node/postgres/), with
//! no hook scripts. What is bully's and what stays the user's: bully writes the
//! parameters below, `primary_conninfo` and `synchronous_standby_names` to an include
//! file it owns in the data dir (`bully.conf`, included from the end of
//! `postgresql.conf`); `postgresql.conf` and `pg_hba.conf` stay the user's.

pub use crate::postgres_rules::{Synchronous, Tags};

use super::bytes;
use super::duration;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The name of the include file bully owns inside the PostgreSQL data dir.
pub const OWNED_INCLUDE: &str = "bully.conf";

/// The managed server: where it lives, how to reach it, how it replicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// The directory of `initdb`, `pg_ctl`, `pg_basebackup`, `pg_rewind` and
    /// `postgres`; unset: the newest `/usr/lib/postgresql/*/bin` (Debian's layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin_dir: Option<PathBuf>,
    /// The server's data directory; created by `initdb` or a clone when empty.
    pub data_dir: PathBuf,
    /// The address and port the server listens on (an IP address: the node's own SQL
    /// round trips use it too).
    pub listen: SocketAddr,
    /// Where the other members' standbys and managers reach this server, when not at
    /// `listen` (a NAT, a forwarder); unset: `listen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_address: Option<SocketAddr>,
    /// The operating-system user the server and its programs run as; unset: the node's
    /// own user, or `postgres` (Debian's) when the node runs as root, since PostgreSQL
    /// refuses to run as root. Only a node running as root can name another user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as: Option<String>,
    /// The superuser the node's SQL round trips log in as.
    #[serde(default = "Credentials::default_superuser")]
    pub superuser: Credentials,
    /// The user the standbys stream as and `pg_basebackup` / `pg_rewind` log in as.
    #[serde(default = "Credentials::default_replication")]
    pub replication: Credentials,
    /// How the members log in to each other's servers (the `pg_hba.conf` lines bully
    /// adds after `initdb`, one per member address): `scram-sha-256` with the password
    /// files (generated in the node's data dir when unset), or `trust`, which lets
    /// anyone at a member's address in as the superuser.
    #[serde(default)]
    pub auth: Auth,
    /// TLS between the members' servers (docs/postgresql.md, "TLS between the
    /// members"): `"on"` gives the server a certificate (`ssl = on`), turns the
    /// `pg_hba.conf` lines bully adds for the members into `hostssl` (and refuses
    /// bully's roles from those addresses without TLS), and has the standbys,
    /// `pg_basebackup`, `pg_rewind` and the node's own round trips verify the server
    /// against the CA (`sslmode=verify-ca`). `"off"`: no TLS setting of bully's.
    #[serde(default)]
    pub tls: TlsMode,
    /// With `tls = "on"`: the CA the members verify each other's servers against (the
    /// user's). Unset, with `tls_cert` and `tls_key` unset too: the node's `[tls]` CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// With `tls = "on"`: the server's certificate, signed by `tls_ca`. Unset: the
    /// node's `[tls]` certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// With `tls = "on"`: the key of `tls_cert`. bully copies it beside the server's
    /// data dir (mode 0600, the server's user's), as PostgreSQL requires. Unset: the
    /// node's `[tls]` key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// Server parameters bully writes to its include file (`shared_buffers = "1GB"`);
    /// the ones bully must own itself (`port`, `listen_addresses`, `primary_conninfo`,
    /// `synchronous_standby_names`, ...) are refused here. **Cluster setting**: seeds a
    /// new cluster only; change them with `bully config set
    /// postgres.parameters.NAME=VALUE` (docs/postgresql.md#changing-parameters).
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// Synchronous replication managed by bully (docs/design.md#keeping-postgresql):
    /// `quorum`, `strict` or `off`. **Cluster setting**: seeds a new cluster only;
    /// change it with `bully config set postgres.synchronous=…`
    /// (docs/postgresql.md#changing-the-synchronous-mode).
    #[serde(default)]
    pub synchronous: Synchronous,
    /// A standby cluster: the remote primary (`HOST:PORT`) the whole cluster follows
    /// instead of running its own (Patroni's `standby_cluster`; a second site kept for
    /// disaster recovery). The coordinator's server, the standby leader, streams from it
    /// as bully's replication user, the other members stream from the standby leader,
    /// and nothing is promoted or initialized. **Cluster setting**: seeds a new cluster
    /// only; `bully config set postgres.standby_cluster=` (empty) turns the cluster
    /// into one with its own primary (docs/postgresql.md#a-standby-cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_cluster: Option<String>,
    /// With `synchronous = "off"`: a standby further behind the last primary position
    /// it saw than this may not be promoted (`16MB`, or a number of bytes).
    #[serde(
        default = "PostgresConfig::default_maximum_lag",
        deserialize_with = "bytes::deserialize"
    )]
    pub maximum_lag_on_failover: u64,
    /// The most WAL the primary keeps for a member's replication slot (`bully_<id>`,
    /// one per other member that may lead) while that member's standby is down or
    /// behind: past it the WAL goes and the member clones itself afresh when it is back
    /// (docs/design.md#keeping-postgresql). `8GB` by default, so a dead member cannot
    /// fill the primary's disk yet a member down for a few hours of ordinary writes
    /// comes back by streaming; `-1`: no limit (PostgreSQL's default). At least 16MB
    /// (one WAL segment; PostgreSQL keeps whole segments, so less keeps nothing and
    /// clones lose their slots). Written to the server as `max_slot_wal_keep_size`.
    #[serde(
        default = "PostgresConfig::default_max_slot_wal_keep_size",
        deserialize_with = "bytes::deserialize_or_unlimited"
    )]
    pub max_slot_wal_keep_size: i64,
    /// A former primary rejoins by `pg_rewind`; off: by a fresh clone.
    #[serde(default = "yes")]
    pub rewind: bool,
    /// Data checksums on a new cluster's `initdb` (`--data-checksums`): PostgreSQL then
    /// detects pages a disk or a controller corrupted instead of serving them. Read
    /// only when the first coordinator runs `initdb`; an existing cluster keeps what it
    /// was made with.
    #[serde(default = "yes")]
    pub data_checksums: bool,
    /// More `initdb` options for a new cluster, each one word as `initdb` takes it
    /// (`["--locale=C.UTF-8", "--encoding=UTF8"]`): without them the locale and
    /// encoding are the service's environment's. Options bully sets itself (the data
    /// dir, the superuser, authentication, the password file) are refused.
    #[serde(default)]
    pub initdb_options: Vec<String>,
    /// A command that restores the cluster into a member's empty data dir from the
    /// operator's backups, one word per entry, the program an absolute path (no
    /// shell): `["/usr/bin/pgbackrest", "--stanza=main", "restore"]`. Tried before
    /// `pg_basebackup` for a member that never held data (a new one), so a big clone
    /// does not load the primary; a reinit, which replaces data that may hold
    /// acknowledged commits, is always `pg_basebackup`. It runs as the server's user with
    /// `PGDATA` (the empty data dir), `BULLY_PRIMARY_HOST`, `BULLY_PRIMARY_PORT` and
    /// `BULLY_PRIMARY_CONNINFO` (the server the copy then streams from) and `PGPASSFILE`
    /// set, for as long as it keeps writing into the data dir
    /// (`clone_stall_timeout_ms`). What it restores must be this cluster (its system
    /// identifier is checked) and old enough WAL is then replayed from the upstream, or
    /// from the archive with a `restore_command` parameter. `pg_basebackup` goes next
    /// when it fails (docs/postgresql.md#replicas-from-backups-wal-from-an-archive). Empty: `pg_basebackup`
    /// only.
    #[serde(default)]
    pub replica_method: Vec<String>,
    /// When rewinding fails (after its retries), or when the primary removed the WAL a
    /// standby needs, clone afresh, keeping the old data directory aside
    /// (`<data_dir>.aside`); off: the node stays out, saying why.
    #[serde(default = "yes")]
    pub reinit_on_failed_rewind: bool,
    /// How long a start, a promotion or a fast stop may take before it counts as failed.
    #[serde(
        default = "PostgresConfig::default_action_timeout_ms",
        deserialize_with = "duration::millis"
    )]
    pub action_timeout_ms: u64,
    /// How long `initdb` and `pg_rewind` may take.
    #[serde(
        default = "PostgresConfig::default_copy_timeout_ms",
        deserialize_with = "duration::millis"
    )]
    pub copy_timeout_ms: u64,
    /// A clone (`pg_basebackup`) runs as long as it keeps writing into the data dir, so
    /// a cluster of any size clones in what it takes; it is killed (and tried again
    /// after a backoff) once the data dir has not grown for this long. Leave room for
    /// the primary's checkpoint, which comes before the first byte.
    #[serde(
        default = "PostgresConfig::default_clone_stall_timeout_ms",
        deserialize_with = "duration::millis"
    )]
    pub clone_stall_timeout_ms: u64,
    /// How often the manager looks at the server (one SQL round trip).
    #[serde(
        default = "PostgresConfig::default_interval_ms",
        deserialize_with = "duration::millis"
    )]
    pub interval_ms: u64,
    /// `[postgres.tags]`: Patroni's per-node tags, this host's own (not a cluster
    /// setting): each member reports its tags with its server, so the primary leaves a
    /// `nosync` member out of its names and elections weigh `failover_priority`.
    #[serde(default)]
    pub tags: Tags,
}

/// How the members' standbys and managers prove who they are to a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Auth {
    /// Passwords (SCRAM), from the roles' password files.
    #[default]
    #[serde(rename = "scram-sha-256")]
    ScramSha256,
    /// No password: only for a network where every host at a member's address is
    /// trusted.
    #[serde(rename = "trust")]
    Trust,
}

/// Whether the members' servers and their clients speak TLS (`[postgres] tls`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TlsMode {
    /// No TLS setting of bully's: the server and libpq's defaults, as before.
    #[default]
    #[serde(rename = "off")]
    Off,
    /// The server takes TLS only from the members (for bully's roles), and every
    /// client of bully's verifies it against the CA.
    #[serde(rename = "on")]
    On,
}

/// Server parameters bully sets itself when `[postgres] tls = "on"`.
pub const TLS_PARAMETERS: &[&str] = &["ssl", "ssl_cert_file", "ssl_key_file", "ssl_ca_file"];

/// `initdb` options bully passes itself, by their long and short names.
const OWNED_INITDB_OPTIONS: &[&str] = &[
    "-D",
    "--pgdata",
    "-U",
    "--username",
    "-A",
    "--auth",
    "--auth-host",
    "--auth-local",
    "--pwfile",
    "-W",
    "--pwprompt",
];

/// What is wrong with one `[postgres] initdb_options` word, if anything.
fn initdb_option_problem(option: &str) -> Option<String> {
    if !option.starts_with('-') {
        return Some(format!(
            "`{option}` is not an option: each entry is one option as initdb takes it, \
             e.g. \"--locale=C.UTF-8\""
        ));
    }
    let name = option.split('=').next().unwrap_or(option);
    let owned = OWNED_INITDB_OPTIONS
        .iter()
        .any(|o| name == *o || (o.len() == 2 && option.starts_with(o)));
    owned.then(|| {
        format!(
            "`{option}` is set by bully itself (the data dir, the superuser, \
             authentication and the password file come from [postgres])"
        )
    })
}

/// The size of a WAL segment on the servers bully creates (initdb's default):
/// PostgreSQL keeps a slot's WAL in whole segments, so a smaller
/// `max_slot_wal_keep_size` keeps none.
const WAL_SEGMENT_BYTES: i64 = 16 << 20;

/// What is wrong with server parameter `name = value` for a cluster whose servers run
/// with `tls`, if anything: a name bully sets itself (with `tls = "on"` the TLS ones
/// too), or a name or value no `postgresql.conf` line can hold. The one check of the
/// file's `[postgres] parameters` and of `bully config set postgres.parameters.NAME`.
pub fn parameter_problem(name: &str, value: &str, tls: TlsMode) -> Option<String> {
    if RESERVED_PARAMETERS.contains(&name) {
        return Some(format!("`{name}` is set by bully itself; leave it out"));
    }
    if tls == TlsMode::On && TLS_PARAMETERS.contains(&name) {
        return Some(format!(
            "`{name}` is set by bully itself with tls = \"on\"; leave it out"
        ));
    }
    crate::protocol::pg_parameter_syntax(name, value)
}

/// A PostgreSQL role and how it proves who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// The role's name.
    pub user: String,
    /// A file holding the password (its first line), the same on every member; unset:
    /// a password bully generates (`postgres-<role>.password` in the node's data dir),
    /// or none with `auth = "trust"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
}

impl Credentials {
    fn default_superuser() -> Credentials {
        Credentials {
            user: "postgres".into(),
            password_file: None,
        }
    }

    fn default_replication() -> Credentials {
        Credentials {
            user: "replicator".into(),
            password_file: None,
        }
    }
}

/// Parameters bully sets itself; `[postgres] parameters` may not name them.
pub const RESERVED_PARAMETERS: &[&str] = &[
    "port",
    "listen_addresses",
    "primary_conninfo",
    "primary_slot_name",
    "max_slot_wal_keep_size",
    "synchronous_standby_names",
    "hot_standby",
    "wal_log_hints",
    "recovery_target_timeline",
];

fn yes() -> bool {
    true
}

impl PostgresConfig {
    fn default_maximum_lag() -> u64 {
        1 << 20
    }

    fn default_max_slot_wal_keep_size() -> i64 {
        8 << 30
    }

    fn default_action_timeout_ms() -> u64 {
        60_000
    }

    fn default_copy_timeout_ms() -> u64 {
        3_600_000
    }

    fn default_clone_stall_timeout_ms() -> u64 {
        600_000
    }

    fn default_interval_ms() -> u64 {
        250
    }

    /// A section with every default, for a server at `data_dir` listening on `listen`.
    pub fn new(data_dir: impl Into<PathBuf>, listen: SocketAddr) -> PostgresConfig {
        PostgresConfig {
            bin_dir: None,
            data_dir: data_dir.into(),
            listen,
            connect_address: None,
            run_as: None,
            superuser: Credentials::default_superuser(),
            replication: Credentials::default_replication(),
            auth: Auth::default(),
            tls: TlsMode::default(),
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            parameters: BTreeMap::new(),
            synchronous: Synchronous::default(),
            standby_cluster: None,
            maximum_lag_on_failover: Self::default_maximum_lag(),
            max_slot_wal_keep_size: Self::default_max_slot_wal_keep_size(),
            rewind: true,
            data_checksums: true,
            initdb_options: Vec::new(),
            replica_method: Vec::new(),
            reinit_on_failed_rewind: true,
            action_timeout_ms: Self::default_action_timeout_ms(),
            copy_timeout_ms: Self::default_copy_timeout_ms(),
            clone_stall_timeout_ms: Self::default_clone_stall_timeout_ms(),
            interval_ms: Self::default_interval_ms(),
            tags: Tags::default(),
        }
    }

    /// The user's TLS files (`tls_ca`, `tls_cert`, `tls_key`) with their keys, those
    /// that are set.
    pub fn tls_files(&self) -> Vec<(&'static str, &PathBuf)> {
        [
            ("postgres.tls_ca", &self.tls_ca),
            ("postgres.tls_cert", &self.tls_cert),
            ("postgres.tls_key", &self.tls_key),
        ]
        .into_iter()
        .filter_map(|(key, path)| path.as_ref().map(|p| (key, p)))
        .collect()
    }

    /// What is wrong with the TLS keys: files without `tls = "on"`, some of the three
    /// files but not all (a certificate must be signed by the CA the others verify it
    /// against: the user's three together, or the node's), or a parameter bully sets
    /// for TLS itself.
    fn tls_problem(&self) -> Option<(&'static str, String)> {
        let files = self.tls_files();
        if self.tls == TlsMode::Off {
            let (key, _) = files.first()?;
            return Some((
                key,
                "is used only with tls = \"on\"; set it, or leave the file out".into(),
            ));
        }
        if !files.is_empty() && files.len() < 3 {
            let missing = ["postgres.tls_ca", "postgres.tls_cert", "postgres.tls_key"]
                .into_iter()
                .find(|key| !files.iter().any(|(k, _)| k == key))?;
            return Some((
                missing,
                "tls_ca, tls_cert and tls_key go together: all three (your CA, and the \
                 server's certificate and key it signed), or none (the node's [tls] files)"
                    .into(),
            ));
        }
        self.parameters
            .iter()
            .find_map(|(name, value)| parameter_problem(name, value, self.tls))
            .map(|problem| ("postgres.parameters", problem))
    }

    /// Where the other members reach this server.
    pub fn reached_at(&self) -> SocketAddr {
        self.connect_address.unwrap_or(self.listen)
    }

    /// The key and what is wrong with it; `None` when the section is usable.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if let Some(problem) = self
            .parameters
            .iter()
            .find_map(|(name, value)| parameter_problem(name, value, TlsMode::Off))
        {
            return Some(("postgres.parameters", problem));
        }
        if let Some(problem) = self.tls_problem() {
            return Some(problem);
        }
        if let Some(problem) = self
            .initdb_options
            .iter()
            .find_map(|o| initdb_option_problem(o))
        {
            return Some(("postgres.initdb_options", problem));
        }
        if let Some(problem) = self.tags.problem() {
            return Some(("postgres.tags", problem));
        }
        if let Some(Err(problem)) = self
            .standby_cluster
            .as_deref()
            .map(crate::protocol::settings::remote_primary)
        {
            return Some(("postgres.standby_cluster", problem));
        }
        if let Some(program) = self.replica_method.first() {
            if !std::path::Path::new(program).is_absolute() {
                return Some((
                    "postgres.replica_method",
                    format!(
                        "`{program}` is not an absolute path: the first word is the \
                         program (run without a shell), e.g. \"/usr/bin/pgbackrest\""
                    ),
                ));
            }
        }
        let timeouts = [
            self.action_timeout_ms,
            self.copy_timeout_ms,
            self.clone_stall_timeout_ms,
        ];
        if self.interval_ms == 0 || timeouts.contains(&0) {
            return Some((
                "postgres.interval_ms",
                "the interval and the timeouts must be above 0".into(),
            ));
        }
        if (0..WAL_SEGMENT_BYTES).contains(&self.max_slot_wal_keep_size) {
            return Some((
                "postgres.max_slot_wal_keep_size",
                format!(
                    "{} bytes is under one WAL segment (16MB): PostgreSQL keeps whole \
                     segments, so no slot would hold any WAL and a clone whose copy spans \
                     a segment switch loses its slot and starts over; 16MB or more, or -1",
                    self.max_slot_wal_keep_size
                ),
            ));
        }
        if self.listen.ip().is_unspecified() {
            return Some((
                "postgres.listen",
                format!(
                    "{} is a wildcard; name the address the other members' standbys reach it at",
                    self.listen
                ),
            ));
        }
        if self.reached_at().ip().is_unspecified() {
            return Some((
                "postgres.connect_address",
                "is a wildcard; name the address the other members reach the server at".into(),
            ));
        }
        if self.superuser.user.is_empty() || self.replication.user.is_empty() {
            return Some(("postgres.superuser", "user names must not be empty".into()));
        }
        for (key, name) in [
            ("postgres.superuser", &self.superuser.user),
            ("postgres.replication", &self.replication.user),
        ] {
            if name.chars().any(|c| c == '"' || c.is_control()) {
                return Some((
                    key,
                    format!("{name:?}: a role name bully writes to pg_hba.conf cannot hold `\"` or control characters"),
                ));
            }
        }
        None
    }
}
