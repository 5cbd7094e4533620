//! A node's TOML configuration: parsing, path resolution and validation.
//!
//! A config that [`load`] accepts is one the node can start with: every check that can be
//! made before binding a socket is made here, so a typo stops `bully node` with exit 2
//! and one clear line instead of a half-started node.
//!
//! Every error names the file and the field, e.g.
//! `config/node1.toml: peers[1].id: duplicate peer id 2 (also peers[0].id)`; TOML syntax
//! and type errors also carry the line and column (`config/node1.toml:3:10: listen: ...`).
//!
//! # Paths
//! Relative paths (`data_dir`, `tls.ca`, `tls.cert`, `tls.key`) are resolved against the
//! directory of the config file, not the working directory, so
//! `bully node --config config/node1.toml` works from anywhere. The resolved paths stay
//! relative to the working directory when the config path was relative; absolute paths
//! are kept as they are.
//!
//! # Checks
//! - unknown keys anywhere (every table denies unknown fields), missing required keys;
//! - `id` and every peer ID at least 1 (0 is reserved for "no node", e.g. in metrics)
//!   and at most [`MAX_NODE_ID`] (a classic-mode fencing token keeps the leader ID in
//!   its low bits, see [`crate::protocol::Epoch::token`]);
//! - no duplicate peer IDs, own ID not among the peers, no peer at the node's own listen
//!   address, no two peers at one address, peer addresses dialable (no `0.0.0.0`, no
//!   port 0);
//! - in quorum mode, at least one member (this node or a peer) is not a witness: a
//!   cluster of witnesses can never elect anyone;
//! - `[timing]` as [`Timing::validate`] requires (`suspect_after_ms > 2 x heartbeat_ms`);
//! - a witness has no `[hooks]` command and no `[health]` section: it never leads, so
//!   they would never run (or, for health, never matter) — a config that has them was
//!   meant for a data node;
//! - `hooks.timeout_ms`, `hooks.resign_for_ms`, `health.interval_ms`,
//!   `health.timeout_ms`, `health.rise`, `health.fall` at least 1; hook and health
//!   commands not blank;
//! - `data_dir` is a directory or can be created (no file in its place or on its path);
//! - `tls.ca`, `tls.cert`, `tls.key` exist and are readable files (their contents are
//!   checked when the transport loads them).
//!
//! An empty peer list is allowed: a one-node cluster is a legitimate degenerate case
//! (the node declares itself coordinator at once), handy for trying hooks and HTTP.

use crate::protocol::{Mode, NodeId, Preempt, Timing, MAX_NODE_ID, TOKEN_LEADER_BITS};
use crate::transport::PeerAddr;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

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
    /// Whether a (re)started higher node takes over from a healthy lower coordinator.
    #[serde(default)]
    pub preempt: Preempt,
    /// `quorum` (default): never two coordinators; `classic`: the seeds' Bully, where a
    /// partition gives one coordinator per side. Every member must use the same mode.
    #[serde(default)]
    pub mode: Mode,
    /// A witness votes and counts for majorities but never leads (no hooks, no health).
    #[serde(default)]
    pub witness: bool,
    pub tls: TlsPaths,
    #[serde(default)]
    pub timing: Timing,
    /// Every other member of the cluster.
    #[serde(default)]
    pub peers: Vec<PeerConfig>,
    #[serde(default)]
    pub hooks: HooksConfig,
    /// Off unless set: without a health check the node is always eligible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthConfig>,
    /// Off unless set: the HTTP endpoint for load balancers and Prometheus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpConfig>,
}

/// PEM files for mutual TLS, as written by `bully certs init`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsPaths {
    /// The cluster CA certificate: peers and clients must present a certificate it signed.
    pub ca: PathBuf,
    /// This node's certificate, bound to its ID.
    pub cert: PathBuf,
    /// This node's private key.
    pub key: PathBuf,
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
    pub timeout_ms: u64,
    /// What a coordinator does when `on_elected` fails: by default it resigns, so a
    /// node whose database could not be promoted never stays in office.
    pub on_elected_failure: ElectedHookFailure,
    /// How long a node that resigned after a failed `on_elected` stays ineligible
    /// (if no other node takes over, it leads again at once and retries the hook).
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
    #[serde(default = "HealthConfig::default_interval_ms")]
    pub interval_ms: u64,
    /// A check still running after this long is killed and counts as a failure.
    #[serde(default = "HealthConfig::default_timeout_ms")]
    pub timeout_ms: u64,
    /// Consecutive successes before an ineligible node becomes eligible.
    #[serde(default = "HealthConfig::default_rise")]
    pub rise: u32,
    /// Consecutive failures before an eligible node becomes ineligible.
    #[serde(default = "HealthConfig::default_fall")]
    pub fall: u32,
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

/// The plain-HTTP endpoint (`/coordinator`, `/health`, `/status`, `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// The TCP address to bind; keep it on loopback or a trusted network (no TLS).
    pub listen: SocketAddr,
    /// When `/coordinator` starts answering 200 on a new coordinator.
    #[serde(default)]
    pub coordinator_ready: CoordinatorReady,
}

impl HttpConfig {
    /// An endpoint on `listen` with the default readiness.
    pub fn on(listen: SocketAddr) -> Self {
        HttpConfig {
            listen,
            coordinator_ready: CoordinatorReady::default(),
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

/// A config that cannot be used, with the file, the field and (for TOML errors) the
/// position, so the message alone tells the user what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    file: PathBuf,
    position: Option<(usize, usize)>,
    field: Option<String>,
    message: String,
}

impl ConfigError {
    fn new(file: &Path, field: Option<String>, message: String) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            position: None,
            field,
            message,
        }
    }

    /// The config file the error is about.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The offending key as a path such as `peers[1].id`, when one is known.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The 1-based line and column in the file, for TOML syntax and type errors.
    pub fn position(&self) -> Option<(usize, usize)> {
        self.position
    }

    /// What is wrong, without the file and field prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        match &self.field {
            // Messages from `Timing::validate` already open with the field name.
            Some(field) if !self.message.starts_with(field.as_str()) => {
                write!(f, ": {field}: {}", self.message)
            }
            _ => write!(f, ": {}", self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Reads, parses and validates the config at `path` (see the module docs for the checks).
pub fn load(path: &Path) -> Result<NodeConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(path, None, format!("cannot read config file: {e}")))?;
    parse(&text, path)
}

/// Parses and validates config `text`; `origin` is the file it came from, named in
/// errors and used as the base of relative paths. Checks that the TLS files exist.
pub fn parse(text: &str, origin: &Path) -> Result<NodeConfig, ConfigError> {
    let mut config: NodeConfig = toml::from_str(text).map_err(|e| toml_error(&e, text, origin))?;
    config.resolve_paths(origin.parent().unwrap_or(Path::new("")));
    config.validate(origin)?;
    Ok(config)
}

/// The config as TOML, so `bully local` and tests can write configs for generated
/// clusters. Fails only on paths that are not UTF-8.
pub fn render(config: &NodeConfig) -> Result<String, toml::ser::Error> {
    toml::to_string(config)
}

impl NodeConfig {
    /// Every check of the module docs, for configs built in code (e.g. by an embedding
    /// program); `origin` only names the source in errors. Paths are checked as given.
    pub fn validate(&self, origin: &Path) -> Result<(), ConfigError> {
        self.check()
            .map_err(|(field, message)| ConfigError::new(origin, Some(field), message))
    }

    /// This node's ID followed by its peers' IDs, sorted: the cluster's members.
    pub fn members(&self) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = std::iter::once(self.id)
            .chain(self.peers.iter().map(|p| p.id))
            .collect();
        ids.sort_unstable();
        ids
    }

    fn resolve_paths(&mut self, base: &Path) {
        for path in [
            &mut self.data_dir,
            &mut self.tls.ca,
            &mut self.tls.cert,
            &mut self.tls.key,
        ] {
            // An empty path stays empty so that validation reports it.
            if path.is_relative() && !path.as_os_str().is_empty() {
                *path = base.join(&*path);
            }
        }
    }

    /// The checks, in the order a reader of the file meets the fields; the filesystem
    /// last. Returns the field path and the message of the first problem.
    fn check(&self) -> Result<(), (String, String)> {
        check_id("id", self.id)?;
        check_not_empty("data_dir", &self.data_dir)?;
        self.check_peers()?;
        self.check_someone_can_lead()?;
        self.timing.validate().map_err(|message| {
            let field = message.split(' ').next().unwrap_or("timing").to_string();
            (field, message)
        })?;
        self.check_hooks()?;
        if let Some(health) = &self.health {
            if self.witness {
                return Err(invalid(
                    "health",
                    "a witness never leads, so a health check would gate nothing; \
                     remove [health] or set witness = false",
                ));
            }
            check_health(health)?;
        }
        self.check_data_dir()?;
        self.check_tls_files()
    }

    /// The data dir, or the first of its ancestors that exists, must be a directory;
    /// otherwise the store fails later with a bare "File exists".
    fn check_data_dir(&self) -> Result<(), (String, String)> {
        let Some(existing) = self.data_dir.ancestors().find(|p| p.exists()) else {
            return Ok(());
        };
        if existing.is_dir() {
            return Ok(());
        }
        let message = if existing == self.data_dir {
            format!("{} exists and is not a directory", self.data_dir.display())
        } else {
            format!(
                "{} is a file, so {} cannot be created",
                existing.display(),
                self.data_dir.display()
            )
        };
        Err(invalid("data_dir", message))
    }

    /// Quorum mode elects only non-witness members; with none, no election can ever
    /// succeed, which is better said now than discovered as a cluster that never leads.
    fn check_someone_can_lead(&self) -> Result<(), (String, String)> {
        if self.mode != Mode::Quorum || !self.witness || self.peers.iter().any(|p| !p.witness) {
            return Ok(());
        }
        let members = self.members().len();
        Err(invalid(
            "witness",
            format!(
                "every member ({members}: this node and all its peers) is a witness, so quorum \
                 mode can never elect a coordinator; at least one member needs witness = false"
            ),
        ))
    }

    fn check_peers(&self) -> Result<(), (String, String)> {
        let mut ids: HashMap<NodeId, usize> = HashMap::new();
        let mut addrs: HashMap<&PeerAddr, usize> = HashMap::new();
        for (i, peer) in self.peers.iter().enumerate() {
            let id_field = format!("peers[{i}].id");
            let addr_field = format!("peers[{i}].addr");
            check_id(&id_field, peer.id)?;
            if peer.id == self.id {
                return Err(invalid(
                    &id_field,
                    format!(
                        "{} is this node's own id; list only the other members",
                        peer.id
                    ),
                ));
            }
            if let Some(first) = ids.insert(peer.id, i) {
                return Err(invalid(
                    &id_field,
                    format!("duplicate peer id {} (also peers[{first}].id)", peer.id),
                ));
            }
            let ip = peer.addr.ip();
            if ip.is_some_and(|a| a.ip().is_unspecified()) || peer.addr.port() == 0 {
                return Err(invalid(
                    &addr_field,
                    format!(
                        "{} cannot be dialed; give the address and port the peer listens on",
                        peer.addr
                    ),
                ));
            }
            if ip == Some(self.listen) {
                return Err(invalid(
                    &addr_field,
                    format!("{} is this node's own listen address", peer.addr),
                ));
            }
            if ip.is_some_and(|ip| is_own_address(self.listen, ip)) {
                return Err(invalid(
                    &addr_field,
                    format!(
                        "{} reaches this node's own listen address {}",
                        peer.addr, self.listen
                    ),
                ));
            }
            if let Some(first) = addrs.insert(&peer.addr, i) {
                return Err(invalid(
                    &addr_field,
                    format!("duplicate address {} (also peers[{first}].addr)", peer.addr),
                ));
            }
        }
        Ok(())
    }

    fn check_hooks(&self) -> Result<(), (String, String)> {
        let hooks = &self.hooks;
        if hooks.timeout_ms == 0 {
            return Err(invalid("hooks.timeout_ms", "must be at least 1"));
        }
        if hooks.resign_for_ms == 0 {
            return Err(invalid("hooks.resign_for_ms", "must be at least 1"));
        }
        for (name, command) in [
            ("hooks.on_elected", &hooks.on_elected),
            ("hooks.on_demoted", &hooks.on_demoted),
            ("hooks.on_change", &hooks.on_change),
        ] {
            if command.as_deref().is_some_and(|c| c.trim().is_empty()) {
                return Err(invalid(name, "is blank; remove the key to run no hook"));
            }
            if command.is_some() && self.witness {
                return Err(invalid(
                    name,
                    "a witness never leads, so its hooks would never run; remove the hook \
                     or set witness = false",
                ));
            }
        }
        Ok(())
    }

    fn check_tls_files(&self) -> Result<(), (String, String)> {
        let members = self.members();
        for (field, path) in [
            ("tls.ca", &self.tls.ca),
            ("tls.cert", &self.tls.cert),
            ("tls.key", &self.tls.key),
        ] {
            check_not_empty(field, path)?;
            check_readable_file(path, &members).map_err(|m| invalid(field, m))?;
        }
        Ok(())
    }
}

/// A node ID must be at least 1 (0 means "no node") and at most [`MAX_NODE_ID`].
fn check_id(field: &str, id: NodeId) -> Result<(), (String, String)> {
    if id == 0 {
        return Err(invalid(field, "0 is reserved; node IDs start at 1"));
    }
    if id > MAX_NODE_ID {
        return Err(invalid(
            field,
            format!(
                "{id} is above the highest node ID {MAX_NODE_ID} (fencing tokens keep the \
                 leader ID in {TOKEN_LEADER_BITS} bits)"
            ),
        ));
    }
    Ok(())
}

fn check_health(health: &HealthConfig) -> Result<(), (String, String)> {
    if health.command.trim().is_empty() {
        return Err(invalid("health.command", "must not be blank"));
    }
    for (field, value) in [
        ("health.interval_ms", health.interval_ms),
        ("health.timeout_ms", health.timeout_ms),
        ("health.rise", u64::from(health.rise)),
        ("health.fall", u64::from(health.fall)),
    ] {
        if value == 0 {
            return Err(invalid(field, "must be at least 1"));
        }
    }
    Ok(())
}

fn check_not_empty(field: &str, path: &Path) -> Result<(), (String, String)> {
    if path.as_os_str().is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    Ok(())
}

fn invalid(field: &str, message: impl Into<String>) -> (String, String) {
    (field.to_string(), message.into())
}

/// Whether dialing `addr` would reach this node's own endpoint bound to all addresses.
fn is_own_address(listen: SocketAddr, addr: SocketAddr) -> bool {
    listen.ip().is_unspecified() && addr.ip().is_loopback() && addr.port() == listen.port()
}

/// Checks that `path` is a file this process can open; the message for a missing file
/// says how to make the cluster's certificates.
fn check_readable_file(path: &Path, members: &[NodeId]) -> Result<(), String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = match path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            };
            let nodes: Vec<String> = members.iter().map(|id| id.to_string()).collect();
            Err(format!(
                "file {} does not exist (make certs with: bully certs init --dir {} --nodes {})",
                path.display(),
                dir.display(),
                nodes.join(",")
            ))
        }
        Err(e) => Err(format!("cannot access {}: {e}", path.display())),
        Ok(meta) if !meta.is_file() => Err(format!("{} is not a file", path.display())),
        Ok(_) => File::open(path)
            .map(drop)
            .map_err(|e| format!("file {} is not readable: {e}", path.display())),
    }
}

/// Turns a TOML error into a one-line [`ConfigError`] with position and field path.
fn toml_error(error: &toml::de::Error, text: &str, origin: &Path) -> ConfigError {
    let span = error.span();
    let mut position = span.as_ref().map(|s| line_column(text, s.start));
    let mut field = span.and_then(|s| field_at(text, s));
    // Syntax errors come on several lines ("invalid string\nexpected ..."); keep one.
    let mut message = error
        .message()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    // serde reports a missing key on the table that lacks it; name the key itself.
    if let Some(key) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        let key = key.to_string();
        field = Some(match field {
            Some(table) => format!("{table}.{key}"),
            None => {
                // The root table has no header to point at; 1:1 would mislead.
                position = None;
                key
            }
        });
        message = "required key is missing".to_string();
    }
    ConfigError {
        file: origin.to_path_buf(),
        position,
        field,
        message,
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The key path (e.g. `peers[1].id`) of the innermost key or value whose span covers
/// `span`, found by re-parsing `text` with toml_edit, which keeps spans.
fn field_at(text: &str, span: Range<usize>) -> Option<String> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let path = path_in_table(doc.as_table(), &span).concat();
    let path = path.strip_prefix('.').unwrap_or(&path);
    (!path.is_empty()).then(|| path.to_string())
}

fn covers(outer: Option<Range<usize>>, inner: &Range<usize>) -> bool {
    outer.is_some_and(|o| o.start <= inner.start && inner.end <= o.end)
}

fn path_in_table(table: &toml_edit::Table, span: &Range<usize>) -> Vec<String> {
    let entries = table
        .iter()
        .filter_map(|(name, _)| table.get_key_value(name));
    path_in_entries(entries, span)
}

/// Path segments (`.key`, `[index]`) from a table's entries down to `span`.
fn path_in_entries<'a>(
    entries: impl Iterator<Item = (&'a toml_edit::Key, &'a toml_edit::Item)>,
    span: &Range<usize>,
) -> Vec<String> {
    for (key, item) in entries {
        let segment = format!(".{}", key.get());
        if covers(key.span(), span) {
            return vec![segment];
        }
        let inner = path_in_item(item, span);
        if !inner.is_empty() || covers(item.span(), span) {
            return std::iter::once(segment).chain(inner).collect();
        }
    }
    Vec::new()
}

/// Path segments from an array's elements, each given as (its span, the path inside it).
fn path_in_elements(
    elements: impl Iterator<Item = (Option<Range<usize>>, Vec<String>)>,
    span: &Range<usize>,
) -> Vec<String> {
    elements
        .enumerate()
        .find_map(|(i, (own, inner))| {
            (!inner.is_empty() || covers(own, span))
                .then(|| std::iter::once(format!("[{i}]")).chain(inner).collect())
        })
        .unwrap_or_default()
}

fn path_in_item(item: &toml_edit::Item, span: &Range<usize>) -> Vec<String> {
    match item {
        toml_edit::Item::Table(table) => path_in_table(table, span),
        toml_edit::Item::ArrayOfTables(tables) => path_in_elements(
            tables.iter().map(|t| (t.span(), path_in_table(t, span))),
            span,
        ),
        toml_edit::Item::Value(value) => path_in_value(value, span),
        toml_edit::Item::None => Vec::new(),
    }
}

fn path_in_value(value: &toml_edit::Value, span: &Range<usize>) -> Vec<String> {
    match value {
        toml_edit::Value::Array(array) => path_in_elements(
            array.iter().map(|v| (v.span(), path_in_value(v, span))),
            span,
        ),
        toml_edit::Value::InlineTable(table) => {
            let entries = table
                .iter()
                .filter_map(|(name, _)| table.get_key_value(name));
            path_in_entries(entries, span)
        }
        _ => Vec::new(),
    }
}
