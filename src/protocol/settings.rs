//! The cluster settings: what every member lives by and no host's file decides once the
//! cluster exists (docs/design.md#cluster-settings). They travel inside the member list
//! (`super::membership`), so they are stored, spread, ordered and committed exactly as
//! the list is, one change at a time, by the coordinator only.
//!
//! Why this is safe to change while the cluster runs: a follower's promise lasts at
//! least the D its coordinator leases under (every message carries the sender's D,
//! `super::message::Message::promise_ms`), so a coordinator and a follower that hold
//! different settings for a while still keep Q3; and a node whose D shrinks keeps
//! storing and honouring the longer one until every promise made under it has run
//! out (`Machine::carry_promise` in src/protocol/machine/quorum.rs).
//!
//! PostgreSQL's server parameters ride along as opaque names and values: the protocol
//! only stores and orders them; each member's manager applies the committed ones to
//! its server (src/node/postgres/parameters.rs).

use super::mode::Preempt;
use super::timing::Timing;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// PostgreSQL server parameters, name to value.
pub type PgParameters = BTreeMap<String, String>;

/// The prefix of every PostgreSQL cluster key (a member without `[postgres]`, a
/// witness, has no say in them).
pub const PG_KEYS: &str = "postgres.";

/// The prefix of the keys that name a PostgreSQL server parameter.
pub const PG_PARAMETER_KEY: &str = "postgres.parameters.";

/// `postgres.synchronous`: how many standbys a PostgreSQL commit waits for (the rules:
/// src/postgres_rules.rs). A cluster setting, so every member's manager and promotion
/// check read one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Asynchronous replication: a failover may lose the last commits (bounded by
    /// `maximum_lag_on_failover`).
    Off,
    /// `ANY k (...)` over the live standbys, k such that every acknowledged commit is on
    /// a server every electable majority contains; with too few standbys the primary
    /// keeps writing with the ones it has.
    #[default]
    Quorum,
    /// As `quorum`, but the primary refuses writes rather than run with fewer than k
    /// standbys.
    Strict,
}

/// The cluster settings a member list carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClusterSettings {
    /// h, D, T, T' and the preempt delay.
    pub timing: Timing,
    /// Whether a restarted higher node takes over from a healthy lower coordinator.
    pub preempt: Preempt,
    /// The server parameters every member's PostgreSQL runs with (`[postgres]
    /// parameters` of the seeding file). `None` only in settings stored before the
    /// parameters were cluster settings: the node fills them from its file at start
    /// (src/node/drive/start.rs) until a coordinator writes the next list.
    pub pg_parameters: Option<PgParameters>,
    /// The PostgreSQL synchronous mode (`[postgres] synchronous` of the seeding file).
    /// `None` as `pg_parameters`, and for a cluster that keeps no PostgreSQL.
    pub pg_synchronous: Option<Synchronous>,
    /// `postgres.standby_cluster`: the remote primary (`HOST:PORT`) this whole cluster
    /// follows as a standby cluster (docs/postgresql.md#a-standby-cluster); `None`: the
    /// cluster runs its own primary. A cluster setting, so every member's manager agrees
    /// whether the coordinator may promote.
    pub pg_standby_cluster: Option<String>,
}

/// The settings as stored before `postgres.standby_cluster` was one of them (decoded
/// only to upgrade a store in place, src/storage/mod.rs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SettingsBeforeStandbyCluster {
    pub timing: Timing,
    pub preempt: Preempt,
    pub pg_parameters: Option<PgParameters>,
    pub pg_synchronous: Option<Synchronous>,
}

impl From<SettingsBeforeStandbyCluster> for ClusterSettings {
    fn from(old: SettingsBeforeStandbyCluster) -> ClusterSettings {
        ClusterSettings {
            pg_parameters: old.pg_parameters,
            pg_synchronous: old.pg_synchronous,
            ..ClusterSettings::new(old.timing, old.preempt)
        }
    }
}

/// The settings as stored before PostgreSQL's parameters were part of them (decoded
/// only to upgrade a store in place, src/storage/mod.rs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SettingsBeforePg {
    pub timing: Timing,
    pub preempt: Preempt,
}

impl From<SettingsBeforePg> for ClusterSettings {
    fn from(old: SettingsBeforePg) -> ClusterSettings {
        ClusterSettings::new(old.timing, old.preempt)
    }
}

impl ClusterSettings {
    /// Settings with `timing` and `preempt`, the PostgreSQL parameters not known yet.
    pub fn new(timing: Timing, preempt: Preempt) -> ClusterSettings {
        ClusterSettings {
            timing,
            preempt,
            pg_parameters: None,
            pg_synchronous: None,
            pg_standby_cluster: None,
        }
    }

    /// These settings with `parameters` as PostgreSQL's.
    pub fn with_pg_parameters(mut self, parameters: PgParameters) -> ClusterSettings {
        self.pg_parameters = Some(parameters);
        self
    }

    /// Every key and its value as `bully config show` prints them, in order.
    pub fn entries(&self) -> Vec<(String, String)> {
        let t = &self.timing;
        let mut out: Vec<(String, String)> = [
            ("timing.heartbeat_ms", t.heartbeat_ms),
            ("timing.suspect_after_ms", t.suspect_after_ms),
            ("timing.answer_timeout_ms", t.answer_timeout_ms),
            ("timing.coordinator_timeout_ms", t.coordinator_timeout_ms),
            ("timing.preempt_delay_ms", t.preempt_delay_ms),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        out.push(("preempt".into(), preempt_word(self.preempt).into()));
        if let Some(mode) = self.pg_synchronous {
            out.push((PG_SYNCHRONOUS_KEY.into(), synchronous_word(mode).into()));
        }
        if let Some(remote) = &self.pg_standby_cluster {
            out.push((PG_STANDBY_CLUSTER_KEY.into(), remote.clone()));
        }
        for (name, value) in self.pg_parameters.iter().flatten() {
            out.push((format!("{PG_PARAMETER_KEY}{name}"), value.clone()));
        }
        out
    }

    /// These settings with `key` set to `value`, or why not: an unknown key, a value
    /// that does not parse, or timing the algorithm cannot run on
    /// ([`Timing::validate`]). `mode` is refused with the reason it is not a setting.
    /// `postgres.parameters.NAME=VALUE` sets a server parameter, an empty VALUE removes
    /// it; which names bully owns itself is the caller's check
    /// (`crate::config::postgres::parameter_problem`).
    pub fn with(&self, key: &str, value: &str) -> Result<ClusterSettings, String> {
        let next = self.with_unchecked(key, value)?;
        next.timing.validate()?;
        Ok(next)
    }

    /// Every `(key, value)` of `pairs` set in turn, the timing checked once at the end
    /// (so `timing.heartbeat_ms` and `timing.suspect_after_ms` may move together in
    /// either order).
    pub fn with_all(&self, pairs: &[(String, String)]) -> Result<ClusterSettings, String> {
        let next = pairs
            .iter()
            .try_fold(self.clone(), |s, (key, value)| s.with_unchecked(key, value))?;
        next.timing.validate()?;
        Ok(next)
    }

    /// [`ClusterSettings::with`] without the timing check.
    fn with_unchecked(&self, key: &str, value: &str) -> Result<ClusterSettings, String> {
        let mut next = self.clone();
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{key}: `{value}` is not a whole number of milliseconds"))
        };
        match key {
            "timing.heartbeat_ms" => next.timing.heartbeat_ms = number()?,
            "timing.suspect_after_ms" => next.timing.suspect_after_ms = number()?,
            "timing.answer_timeout_ms" => next.timing.answer_timeout_ms = number()?,
            "timing.coordinator_timeout_ms" => next.timing.coordinator_timeout_ms = number()?,
            "timing.preempt_delay_ms" => next.timing.preempt_delay_ms = number()?,
            "preempt" => {
                next.preempt = match value {
                    "always" => Preempt::Always,
                    "never" => Preempt::Never,
                    _ => return Err(format!("preempt: `{value}` is neither always nor never")),
                }
            }
            "mode" => return Err(MODE_IS_OFFLINE.into()),
            PG_SYNCHRONOUS_KEY => {
                let mode = Synchronous::ALL
                    .into_iter()
                    .find(|&mode| synchronous_word(mode) == value);
                let Some(mode) = mode else {
                    return Err(format!(
                        "{key}: `{value}` is none of off, quorum and strict"
                    ));
                };
                next.pg_synchronous = Some(mode);
            }
            PG_STANDBY_CLUSTER_KEY => {
                next.pg_standby_cluster = match value.is_empty() {
                    true => None,
                    false => Some(remote_primary(value).map(|_| value.to_string())?),
                }
            }
            _ if key.starts_with(PG_PARAMETER_KEY) => {
                let name = &key[PG_PARAMETER_KEY.len()..];
                if let Some(problem) = pg_parameter_syntax(name, value) {
                    return Err(format!("{key}: {problem}"));
                }
                let parameters = next.pg_parameters.get_or_insert_with(PgParameters::new);
                match value.is_empty() {
                    true => parameters.remove(name),
                    false => parameters.insert(name.to_string(), value.to_string()),
                };
            }
            _ if key.starts_with("postgres.") => {
                return Err(format!(
                    "`{key}` is a host key, read from each host's file; the PostgreSQL \
                     cluster keys are postgres.synchronous, postgres.standby_cluster and \
                     postgres.parameters.NAME (docs/configuration.md)"
                ))
            }
            _ => {
                return Err(format!(
                    "unknown cluster key `{key}`; the cluster keys are timing.heartbeat_ms, \
                     timing.suspect_after_ms, timing.answer_timeout_ms, \
                     timing.coordinator_timeout_ms, timing.preempt_delay_ms, preempt, \
                     postgres.synchronous, postgres.standby_cluster and \
                     postgres.parameters.NAME"
                ))
            }
        }
        Ok(next)
    }
}

/// `postgres.standby_cluster`: the remote primary a standby cluster follows.
pub const PG_STANDBY_CLUSTER_KEY: &str = "postgres.standby_cluster";

/// The host and port of a `postgres.standby_cluster` value (`HOST:PORT`, `[V6]:PORT`),
/// or what is wrong with it: checked where it is set, so a member's manager never
/// meets one it cannot connect by.
pub fn remote_primary(value: &str) -> Result<(&str, u16), String> {
    let bad = |why: &str| {
        format!(
            "{PG_STANDBY_CLUSTER_KEY}: `{value}` {why}; give the remote primary as \
             HOST:PORT (an empty value: not a standby cluster)"
        )
    };
    let (host, port) = value.rsplit_once(':').ok_or_else(|| bad("has no port"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(|| bad("has no port from 1 to 65535"))?;
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
    match host_ok {
        true => Ok((host, port)),
        false => Err(bad("is not a host name or address")),
    }
}

/// What is wrong with a PostgreSQL parameter's name or value as text, if anything: a
/// name is letters, digits, `_` and `.` (a custom `ext.name` too), and no value holds a
/// NUL, which no `postgresql.conf` line can.
pub fn pg_parameter_syntax(name: &str, value: &str) -> Option<String> {
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !name_ok {
        return Some(format!("`{name}` is not a PostgreSQL parameter name"));
    }
    value
        .contains('\0')
        .then(|| format!("`{name}` holds a NUL, which no postgresql.conf value can"))
}

/// Why `bully config set mode=…` is refused (docs/design.md#config-agreement).
pub const MODE_IS_OFFLINE: &str = "mode is not changed online: the two modes disagree on what \
     a vote and a lease mean, so no term could be valid under both while the change \
     spreads. Stop every node, change `mode` in every file, and start each once with \
     `bully node --change-mode` (docs/modes.md)";

impl Synchronous {
    /// Every mode, in the order the docs and `/metrics` list them.
    pub const ALL: [Synchronous; 3] = [Synchronous::Off, Synchronous::Quorum, Synchronous::Strict];
}

/// The key of the PostgreSQL synchronous mode.
pub const PG_SYNCHRONOUS_KEY: &str = "postgres.synchronous";

/// The word a config file and `bully config` use for `mode`.
pub fn synchronous_word(mode: Synchronous) -> &'static str {
    match mode {
        Synchronous::Off => "off",
        Synchronous::Quorum => "quorum",
        Synchronous::Strict => "strict",
    }
}

fn preempt_word(preempt: Preempt) -> &'static str {
    match preempt {
        Preempt::Always => "always",
        Preempt::Never => "never",
    }
}

impl fmt::Display for ClusterSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self
            .entries()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&entries.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_parses_checks_and_names_what_is_wrong() {
        let base = ClusterSettings::new(Timing::default(), Preempt::Always);
        let slow = base.with("timing.suspect_after_ms", "3000").unwrap();
        assert_eq!(slow.timing.suspect_after_ms, 3000);
        assert_eq!(
            base.with("preempt", "never").unwrap().preempt,
            Preempt::Never
        );
        let err = base.with("timing.suspect_after_ms", "200").unwrap_err();
        assert!(err.contains("at least 3 x timing.heartbeat_ms"), "{err}");
        let err = base.with("timing.heartbeat_ms", "fast").unwrap_err();
        assert!(err.contains("not a whole number"), "{err}");
        assert!(base
            .with("mode", "classic")
            .unwrap_err()
            .contains("--change-mode"));
        assert!(base
            .with("id", "3")
            .unwrap_err()
            .contains("unknown cluster key"));
        let err = base.with("postgres.data_dir", "/x").unwrap_err();
        assert!(err.contains("host key"), "{err}");
    }

    #[test]
    fn the_synchronous_mode_is_set_by_word_and_shown() {
        let base = ClusterSettings::new(Timing::default(), Preempt::Always);
        assert!(!base.entries().iter().any(|(k, _)| k == PG_SYNCHRONOUS_KEY));
        let off = base.with(PG_SYNCHRONOUS_KEY, "off").unwrap();
        assert_eq!(off.pg_synchronous, Some(Synchronous::Off));
        assert!(off
            .entries()
            .contains(&(PG_SYNCHRONOUS_KEY.to_string(), "off".to_string())));
        let strict = off.with_all(&[(PG_SYNCHRONOUS_KEY.into(), "strict".into())]);
        assert_eq!(strict.unwrap().pg_synchronous, Some(Synchronous::Strict));
        let err = base.with(PG_SYNCHRONOUS_KEY, "sometimes").unwrap_err();
        assert!(err.contains("none of off, quorum and strict"), "{err}");
    }

    /// `postgres.standby_cluster` takes HOST:PORT (a bracketed v6 address too), is
    /// shown, goes with an empty value, and a value no manager could connect by is
    /// refused naming the key.
    #[test]
    fn the_standby_cluster_is_set_checked_and_unset() {
        let base = ClusterSettings::new(Timing::default(), Preempt::Never);
        let set = base
            .with(PG_STANDBY_CLUSTER_KEY, "dr-primary.example:5432")
            .unwrap();
        assert_eq!(
            set.pg_standby_cluster.as_deref(),
            Some("dr-primary.example:5432")
        );
        assert!(set.entries().contains(&(
            PG_STANDBY_CLUSTER_KEY.into(),
            "dr-primary.example:5432".into()
        )));
        assert_eq!(remote_primary("[::1]:6543"), Ok(("::1", 6543)));
        assert_eq!(set.with(PG_STANDBY_CLUSTER_KEY, "").unwrap(), base);
        for bad in [
            "dr-primary",
            "host:0",
            "host:99999",
            ":5432",
            "a b:5432",
            "h'x:1",
        ] {
            let err = base.with(PG_STANDBY_CLUSTER_KEY, bad).unwrap_err();
            assert!(
                err.starts_with("postgres.standby_cluster: `"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn postgres_parameters_are_set_and_removed_by_key() {
        let base = ClusterSettings::new(Timing::default(), Preempt::Always)
            .with_pg_parameters(PgParameters::new());
        let set = base
            .with("postgres.parameters.work_mem", "64MB")
            .unwrap()
            .with("postgres.parameters.pg_stat_statements.max", "500")
            .unwrap();
        let held = set.pg_parameters.clone().unwrap();
        assert_eq!(held["work_mem"], "64MB");
        assert!(set
            .entries()
            .contains(&("postgres.parameters.work_mem".into(), "64MB".into())));
        let removed = set.with("postgres.parameters.work_mem", "").unwrap();
        assert!(!removed.pg_parameters.unwrap().contains_key("work_mem"));
        let err = base.with("postgres.parameters.bad name", "1").unwrap_err();
        assert!(err.contains("not a PostgreSQL parameter name"), "{err}");
        let err = base.with("postgres.parameters.x", "a\0b").unwrap_err();
        assert!(err.contains("NUL"), "{err}");
    }
}
