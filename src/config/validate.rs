//! The checks a config must pass before the node starts (listed in the module docs of
//! [`super`]), in the order a reader of the file meets the fields; the filesystem last.
//! Each failure names the key path and what is wrong.

use super::{ConfigError, HealthConfig, NodeConfig};
use crate::protocol::{Mode, NodeId};
use crate::transport::{check_node_id, check_peers};
use std::fs::File;
use std::io;
use std::path::Path;

/// The key path and message of the first problem found.
type Invalid = (String, String);

/// `sun_path`'s size on Linux, the terminating NUL included.
const MAX_SOCKET_PATH: usize = 108;

fn invalid(field: &str, message: impl Into<String>) -> Invalid {
    (field.to_string(), message.into())
}

impl NodeConfig {
    /// Every check of the module docs, for configs built in code (e.g. by an embedding
    /// program); `origin` only names the source in errors. Paths are checked as given.
    pub fn validate(&self, origin: &Path) -> Result<(), ConfigError> {
        self.check()
            .map_err(|(field, message)| ConfigError::new(origin, Some(field), message))
    }

    fn check(&self) -> Result<(), Invalid> {
        check_node_id(self.id).map_err(|e| invalid("id", e.to_string()))?;
        check_path("data_dir", &self.data_dir)?;
        let peers = self.peers.iter().map(|p| (p.id, &p.addr));
        check_peers(self.id, self.listen, peers).map_err(|e| {
            let field = format!("peers[{}].{}", e.index, e.problem.key());
            (field, e.problem.to_string())
        })?;
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
        self.watchdog.check(self.witness)?;
        self.check_postgres()?;
        if let Some(http) = &self.http {
            check_http(http)?;
        }
        self.check_data_dir()?;
        self.check_tls_files()
    }

    /// The data dir, or the first of its ancestors that exists, must be a directory;
    /// otherwise the store fails later with a bare "File exists".
    fn check_data_dir(&self) -> Result<(), Invalid> {
        let socket = self.keeper_socket();
        let len = socket.as_os_str().len();
        if len >= MAX_SOCKET_PATH {
            return Err(invalid(
                "data_dir",
                format!(
                    "the keeper socket {} would be {len} bytes long; unix sockets take at most                      {} (use a shorter data_dir)",
                    socket.display(),
                    MAX_SOCKET_PATH - 1
                ),
            ));
        }
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
    fn check_someone_can_lead(&self) -> Result<(), Invalid> {
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

    fn check_hooks(&self) -> Result<(), Invalid> {
        let hooks = &self.hooks;
        check_at_least_1("hooks.timeout_ms", hooks.timeout_ms)?;
        check_at_least_1("hooks.resign_for_ms", hooks.resign_for_ms)?;
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

    /// The manager is the node's health check and keeps a server no witness has.
    fn check_postgres(&self) -> Result<(), Invalid> {
        let Some(postgres) = &self.postgres else {
            return Ok(());
        };
        if self.witness {
            return Err(invalid(
                "postgres",
                "a witness never leads, so it keeps no PostgreSQL server; remove [postgres] \
                 or set witness = false",
            ));
        }
        if self.health.is_some() {
            return Err(invalid(
                "health",
                "with [postgres] the node checks its server itself (a SQL round trip, and \
                 its WAL position as the estimate); remove [health]",
            ));
        }
        if self.mode != Mode::Quorum {
            return Err(invalid(
                "mode",
                "[postgres] needs mode = \"quorum\": classic mode elects one coordinator per \
                 side of a partition, which would make two primaries",
            ));
        }
        check_path("postgres.data_dir", &postgres.data_dir)?;
        if postgres.data_dir.starts_with(&self.data_dir) {
            return Err(invalid(
                "postgres.data_dir",
                "must not lie inside the node's data_dir (the node's store and the server's \
                 files are wiped and recovered separately)",
            ));
        }
        if let Some((field, message)) = postgres.problem() {
            return Err(invalid(field, message));
        }
        for (field, path) in postgres.tls_files() {
            check_path(field, path)?;
            check_user_file(path).map_err(|m| invalid(field, m))?;
        }
        Ok(())
    }

    fn check_tls_files(&self) -> Result<(), Invalid> {
        let members = self.members();
        for (field, path) in [
            ("tls.ca", &self.tls.ca),
            ("tls.cert", &self.tls.cert),
            ("tls.key", &self.tls.key),
        ] {
            check_path(field, path)?;
            check_readable_file(path, &members).map_err(|m| invalid(field, m))?;
        }
        Ok(())
    }
}

/// `[http]`: the write routes' basic authentication needs both its keys, and HTTPS
/// (a password is never sent in clear); the password file must be readable.
fn check_http(http: &super::HttpConfig) -> Result<(), Invalid> {
    match (&http.username, &http.password_file) {
        (None, None) => return Ok(()),
        (Some(_), None) => {
            return Err(invalid(
                "http.password_file",
                "http.username needs a password_file (its first line is the password)",
            ))
        }
        (None, Some(_)) => {
            return Err(invalid(
                "http.username",
                "http.password_file needs the username it is the password of",
            ))
        }
        (Some(user), Some(file)) => {
            if user.trim().is_empty() || user.contains(':') {
                return Err(invalid(
                    "http.username",
                    format!("{user:?} is not a user name for basic authentication (blank, or has a ':')"),
                ));
            }
            check_path("http.password_file", file)?;
            check_user_file(file).map_err(|m| invalid("http.password_file", m))?;
        }
    }
    if !http.tls {
        return Err(invalid(
            "http.tls",
            "http.username and password_file need tls = true: a password is never sent in clear",
        ));
    }
    Ok(())
}

fn check_health(health: &HealthConfig) -> Result<(), Invalid> {
    if health.command.trim().is_empty() {
        return Err(invalid("health.command", "must not be blank"));
    }
    check_at_least_1("health.interval_ms", health.interval_ms)?;
    check_at_least_1("health.timeout_ms", health.timeout_ms)?;
    check_at_least_1("health.rise", u64::from(health.rise))?;
    check_at_least_1("health.fall", u64::from(health.fall))
}

fn check_at_least_1(field: &str, value: u64) -> Result<(), Invalid> {
    if value == 0 {
        return Err(invalid(field, "must be at least 1"));
    }
    Ok(())
}

/// The check every path-valued key gets (`data_dir`, `tls.*`, `watchdog.device`).
pub(super) fn check_path(field: &str, path: &Path) -> Result<(), Invalid> {
    match path_problem(path) {
        Some(problem) => Err(invalid(field, problem)),
        None => Ok(()),
    }
}

/// What is wrong with a path as written, if anything: empty, only whitespace, or
/// whitespace at either end. Resolved against the config's directory, `""` or `" "`
/// would quietly name that directory (or a dir called " " in it), and `"data "` a
/// directory no one meant; a padded path is a typo far more often than a name.
/// `resolve_paths` (`config.rs`) leaves such a path as written, for the error to show.
pub(super) fn path_problem(path: &Path) -> Option<String> {
    let text = path.to_string_lossy();
    if text.is_empty() {
        return Some("must not be empty".into());
    }
    if text.trim().is_empty() {
        return Some(format!(
            "must not be empty (it is only whitespace: {text:?})"
        ));
    }
    if text.trim() != text {
        return Some(format!(
            "{text:?} starts or ends with whitespace; remove it"
        ));
    }
    None
}

/// Checks that `path`, a file the user provides (not one `bully certs` makes), exists
/// and is a file this process can open.
fn check_user_file(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Err(e) => Err(format!("cannot access {}: {e}", path.display())),
        Ok(meta) if !meta.is_file() => Err(format!("{} is not a file", path.display())),
        Ok(_) => File::open(path)
            .map(drop)
            .map_err(|e| format!("file {} is not readable: {e}", path.display())),
    }
}

/// Checks that `path` is a file this process can open; the message for a missing file
/// says how to make the cluster's certificates.
fn check_readable_file(path: &Path, members: &[NodeId]) -> Result<(), String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = super::directory_of(path);
            let nodes: Vec<String> = members.iter().map(|id| id.to_string()).collect();
            Err(format!(
                "file {} does not exist (make certs with: bully certs init --dir {} --nodes {})",
                path.display(),
                dir.display(),
                nodes.join(",")
            ))
        }
        _ => check_user_file(path),
    }
}
