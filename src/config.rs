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
//!   and at most [`MAX_NODE_ID`](crate::protocol::MAX_NODE_ID) (a fencing token keeps
//!   the leader ID in its low bits, see [`crate::protocol::Epoch::token`]);
//! - no duplicate peer IDs, own ID not among the peers, no peer at the node's own listen
//!   address, no two peers at one address, peer addresses dialable (no `0.0.0.0`, no
//!   port 0);
//! - in quorum mode, at least one member (this node or a peer) is not a witness: a
//!   cluster of witnesses can never elect anyone;
//! - `[timing]` as [`Timing::validate`](crate::protocol::Timing::validate) requires
//!   (`suspect_after_ms` at least 3 x `heartbeat_ms`);
//! - a witness has no `[hooks]` command and no `[health]` section: it never leads, so
//!   they would never run (or, for health, never matter) — a config that has them was
//!   meant for a data node;
//! - `hooks.timeout_ms`, `hooks.resign_for_ms`, `health.interval_ms`,
//!   `health.timeout_ms`, `health.rise`, `health.fall` at least 1; hook and health
//!   commands not blank;
//! - `watchdog.device` an absolute path; a witness has `watchdog.mode = "off"` (it
//!   never leads, so it would never arm the device). Whether the device exists is not
//!   checked here: with `mode = "required"` a missing device makes the node
//!   ineligible at run time, with `auto` it leads without;
//! - every path (`data_dir`, `tls.ca`, `tls.cert`, `tls.key`, `watchdog.device`) not
//!   empty, not only whitespace and without whitespace at its start or end (a typo far
//!   more often than a name; resolved, `" "` would name a directory no one meant);
//! - `data_dir` is a directory or can be created (no file in its place or on its path);
//! - `tls.ca`, `tls.cert`, `tls.key` exist and are readable files (their contents are
//!   checked when the transport loads them).
//!
//! The peer list is checked by [`crate::transport::check_peers`], the same check the
//! transport makes when it starts.
//!
//! # Durations
//! The `_ms` keys of every table but `[timing]` take a number of milliseconds or a
//! duration string: `timeout_ms = 5000` and `timeout_ms = "5s"` are the same
//! ([`duration`]).
//!
//! # Layout
//! - `types`: one struct per table, with its defaults.
//! - `validate`: the checks above.
//! - `watchdog`: the `[watchdog]` table, its defaults and its checks.
//! - `error`: [`ConfigError`], with the key path and position of TOML errors.
//! - [`duration`]: the duration parser, shared with the command line; [`bytes`]: the
//!   byte-size parser, shared with the HTTP routes.
//! - [`postgres`]: `[postgres]`, the server a node keeps itself.
//!
//! An empty peer list is allowed: a one-node cluster is a legitimate degenerate case
//! (the node declares itself coordinator at once), handy for trying hooks and HTTP.

pub mod bytes;
pub mod duration;
mod error;
pub mod postgres;
#[cfg(test)]
pub mod sample;
mod types;
mod validate;
mod watchdog;

pub use error::ConfigError;
pub use types::{
    CoordinatorReady, ElectedHookFailure, FenceConfig, HealthConfig, HooksConfig, HttpConfig,
    NodeConfig, PeerConfig,
};
pub use watchdog::{WatchdogConfig, WatchdogMode};

use std::path::Path;

/// The directory `file` sits in, `.` for a bare file name: where a config's hooks,
/// health check, keeper job and fence command run, and where certificates are made.
pub fn directory_of(file: &Path) -> &Path {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Reads, parses and validates the config at `path` (see the module docs for the checks).
pub fn load(path: &Path) -> Result<NodeConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(path, None, format!("cannot read config file: {e}")))?;
    parse(&text, path)
}

/// Parses and validates config `text`; `origin` is the file it came from, named in
/// errors and used as the base of relative paths. Checks that the TLS files exist.
pub fn parse(text: &str, origin: &Path) -> Result<NodeConfig, ConfigError> {
    let mut config: NodeConfig = serde_path_to_error::deserialize(toml::Deserializer::new(text))
        .map_err(|e| ConfigError::from_toml(e, text, origin))?;
    resolve_paths(&mut config, origin.parent().unwrap_or(Path::new("")));
    config.validate(origin)?;
    Ok(config)
}

/// The config as TOML, so `bully local` and tests can write configs for generated
/// clusters. Fails only on paths that are not UTF-8.
pub fn render(config: &NodeConfig) -> Result<String, toml::ser::Error> {
    toml::to_string(config)
}

/// Makes the relative paths of `config` relative to `base`, the config file's directory.
fn resolve_paths(config: &mut NodeConfig, base: &Path) {
    let mut paths = vec![
        &mut config.data_dir,
        &mut config.tls.ca,
        &mut config.tls.cert,
        &mut config.tls.key,
    ];
    if let Some(pg) = config.postgres.as_mut() {
        paths.push(&mut pg.data_dir);
        paths.extend(pg.bin_dir.as_mut());
        paths.extend(pg.superuser.password_file.as_mut());
        paths.extend(pg.replication.password_file.as_mut());
        paths.extend(pg.tls_ca.as_mut());
        paths.extend(pg.tls_cert.as_mut());
        paths.extend(pg.tls_key.as_mut());
    }
    if let Some(http) = config.http.as_mut() {
        paths.extend(http.password_file.as_mut());
    }
    for path in paths {
        // An empty, blank or padded path stays as written so that validation reports it.
        if path.is_relative() && validate::path_problem(path).is_none() {
            *path = base.join(&*path);
        }
    }
}
