//! The pg_auto_failover side of the comparison: pg_auto_failover 2.0 (Debian's
//! `postgresql-15-auto-failover`, from `examples/postgres-primary/pg_auto_failover/
//! install.sh`): a monitor and three data nodes, each `pg_autoctl run` with its own
//! PostgreSQL 15, + HAProxy, run through
//! `examples/postgres-primary/pg_auto_failover/pgaf.sh` (driven by
//! `scripted::Scripted`).
//!
//! At its defaults: the monitor's health checks (every 5 s, 5 s timeout, 2 retries
//! 2 s apart), a node unhealthy after 20 s without a report
//! (`node_considered_unhealthy_timeout`), 30 s for an unreachable primary to drain
//! before a standby is promoted (`primary_demote_timeout`), and a keeper that demotes
//! its primary after 20 s with neither the monitor nor a standby
//! (`network_partition_timeout`). `number_sync_standbys` is 1, which the monitor sets
//! by itself once the second standby registers: `synchronous_standby_names = 'ANY 1
//! (both standbys)'`, the same as bully's servers, and the most 3 nodes allow (it
//! needs `number_sync_standbys + 1` standbys).
//!
//! Clients: pg_auto_failover has no REST API; its clients are meant to use a libpq
//! multi-host string with `target_session_attrs=read-write`. The bench keeps its one
//! writer for every system (`tests/common/postgres_load.rs`, one address) behind
//! HAProxy with the same check cadence as the others, and HAProxy's check asks each
//! server what libpq's `read-write` asks (`pgaf.sh`'s `haproxy.cfg`: the startup
//! answer's `in_hot_standby` and `default_transaction_read_only` both `off`). So a
//! writer reaches a pg_auto_failover primary as a libpq client would, and the figures
//! differ from the other systems' by the manager, not by the client path.

use crate::scripted::{which, Spec};
use std::path::Path;

/// Why pg_auto_failover cannot run here, if it cannot: a program `pgaf.sh` needs is
/// missing.
pub fn cannot_run() -> Option<String> {
    let mut missing: Vec<String> = ["pg_autoctl", "python3", "setpriv", "psql", "od"]
        .into_iter()
        .filter(|p| which(p).is_none())
        .map(String::from)
        .collect();
    let extension = "/usr/share/postgresql/15/extension/pgautofailover.control";
    if !Path::new(extension).is_file() {
        missing.push(extension.into());
    }
    (!missing.is_empty()).then(|| {
        format!(
            "{} missing (examples/postgres-primary/pg_auto_failover/install.sh)",
            missing.join(", ")
        )
    })
}

/// `pgaf.sh start`.
pub fn spec() -> Spec {
    Spec {
        script: "examples/postgres-primary/pg_auto_failover/pgaf.sh",
        prefix: "PGAF_",
        ports: &["HAPROXY", "MONITOR", "PG1", "PG2", "PG3"],
        start: Vec::new(),
        env: Vec::new(),
        pause_what: None,
    }
}
