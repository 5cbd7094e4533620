//! Reload (`systemctl reload`, SIGHUP): the node re-reads its config file and replaces
//! what can change without leaving the cluster — hooks, the health check, the HTTP
//! endpoint, the readiness settings and the TLS certificates — while its peer
//! connections, its state machine and its term stay as they are, so a reload never
//! causes an election. The HTTP endpoint is restarted only when its address changes.
//!
//! `timing`, `preempt`, `[postgres] synchronous` and `[postgres] parameters` are cluster settings
//! (docs/design.md#cluster-settings): a file's values are not applied, by a reload nor by
//! a restart; `bully config set` changes them. What the protocol or the peers depend on (`id`, `listen`,
//! `data_dir`, `mode`, `witness`, `preempt`, `timing`, `peers`), the `[watchdog]`
//! device the runtime holds, and the other `[postgres]` keys need a restart: a reload
//! that changes those
//! applies the rest and names the fields it left alone. A reload that cannot be applied
//! (a certificate that does not load, an HTTP address in use) changes nothing.
//! The running services themselves are `services`'s.

use super::services::Services;
use crate::config::postgres::PostgresConfig;
use crate::config::NodeConfig;
use crate::node::commands::hooks::Hooks;
use crate::node::policy::readiness::Readiness;
use crate::node::serve::http;
use crate::node::shared::error::ReloadError;
use crate::postgres_rules::Synchronous;
use crate::transport::Transport;
use std::net::SocketAddr;

/// What a successful reload changed, for the runtime and the log.
#[derive(Debug)]
pub struct Reloaded {
    /// The `[health]` section is gone: the node is no longer gated by a check.
    pub health_removed: bool,
    /// The readiness settings now in force.
    pub readiness: Readiness,
    /// One line for the log and the `Done` answer.
    pub summary: String,
}

/// Applies `new` to the running services, hooks and certificates: the fallible steps
/// (certificates, HTTP bind) first, so an error leaves the node exactly as it was.
pub async fn reload(
    services: &mut Services,
    new: NodeConfig,
    hooks: &mut Hooks,
    transport: &Transport,
) -> Result<Reloaded, ReloadError> {
    let applied = services.applied();
    let ignored = restart_needed(applied, &new);
    // Every fallible load first, so a refused reload changes nothing.
    let security = super::services::http_security(&new).map_err(ReloadError::HttpSecurity)?;
    let mut tls = new.transport_config();
    // Peers are not reloaded; check the certificates against the ones in use.
    tls.peers = applied.transport_config().peers;
    transport.reload_tls(&tls)?;
    let listen = |config: &NodeConfig| config.http.as_ref().map(|h| h.listen);
    let http_moved = listen(&new) != listen(applied);
    let listener = match &new.http {
        Some(wanted) if http_moved => Some(bind_http(wanted.listen).await?),
        _ => None,
    };
    let postgres_cluster_keys = match (&applied.postgres, &new.postgres) {
        (Some(running), Some(wanted)) => pg_cluster_keys(running) != pg_cluster_keys(wanted),
        _ => false,
    };
    let http_changed = new.http != applied.http;
    let health_changed = new.health != applied.health;
    let health_removed = health_changed && new.health.is_none();
    if http_moved {
        services.stop_http();
    }
    services.set_http_security(security);
    if let Some(listener) = listener {
        services.serve_http(listener);
    }
    hooks.reconfigure(new.hooks.clone());
    let mut summary = summary(health_changed, http_changed, &ignored);
    let before = services.applied();
    if (new.timing, new.preempt) != (before.timing, before.preempt) || postgres_cluster_keys {
        summary.push_str(
            "; timing, preempt, [postgres] synchronous and parameters are cluster settings: the file's \
             values are not applied (`bully status` names what differs; change them with \
             `bully config set`)",
        );
    }
    // Keep the fields that need a restart as they run, so the next reload reports
    // them again rather than believing they took effect.
    let mut applied = new;
    keep_restart_fields(&mut applied, services.applied().clone());
    services.set_applied(applied);
    if health_changed {
        services.restart_health();
    }
    Ok(Reloaded {
        health_removed,
        readiness: Readiness::from_config(services.applied()),
        summary,
    })
}

async fn bind_http(addr: SocketAddr) -> Result<tokio::net::TcpListener, ReloadError> {
    http::bind(addr)
        .await
        .map_err(|source| ReloadError::Http { addr, source })
}

/// The log line of a reload: what it changed and what needs a restart.
fn summary(health_changed: bool, http_changed: bool, ignored: &[&str]) -> String {
    let mut summary = format!(
        "reloaded hooks, certificates{}{}",
        if health_changed { ", health check" } else { "" },
        if http_changed { ", http" } else { "" },
    );
    if !ignored.is_empty() {
        summary.push_str(&format!(
            "; changes to {} need a restart and were not applied",
            ignored.join(", ")
        ));
    }
    summary
}

/// The config fields that differ between `running` and `new` and need a restart.
pub fn restart_needed(running: &NodeConfig, new: &NodeConfig) -> Vec<&'static str> {
    let fields = [
        ("id", running.id != new.id),
        ("listen", running.listen != new.listen),
        ("data_dir", running.data_dir != new.data_dir),
        ("mode", running.mode != new.mode),
        ("witness", running.witness != new.witness),
        ("peers", running.peers != new.peers),
        ("watchdog", running.watchdog != new.watchdog),
        (
            "postgres",
            but_cluster_keys(running) != but_cluster_keys(new),
        ),
    ];
    fields
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(name, _)| name)
        .collect()
}

/// The `[postgres]` keys that are cluster settings (`parameters`, `synchronous`), as a
/// file gives them: the one list of them here.
type PgClusterKeys = (std::collections::BTreeMap<String, String>, Synchronous);

fn pg_cluster_keys(pg: &PostgresConfig) -> PgClusterKeys {
    (pg.parameters.clone(), pg.synchronous)
}

fn set_pg_cluster_keys(pg: &mut PostgresConfig, (parameters, synchronous): PgClusterKeys) {
    pg.parameters = parameters;
    pg.synchronous = synchronous;
}

/// `[postgres]` without its cluster keys: a file's values of those never need a
/// restart, they are not applied at all.
fn but_cluster_keys(config: &NodeConfig) -> Option<PostgresConfig> {
    config.postgres.clone().map(|mut p| {
        set_pg_cluster_keys(&mut p, Default::default());
        p
    })
}

/// Copies the restart-only fields of `running` into `config`: `[postgres]` but its
/// cluster keys, which stay the file's so `bully status` can name where the file and
/// the cluster's differ (the servers run the cluster's, src/node/postgres/parameters.rs
/// and `follow_synchronous` in src/node/postgres/manager.rs).
fn keep_restart_fields(config: &mut NodeConfig, running: NodeConfig) {
    let file_keys = config.postgres.as_ref().map(pg_cluster_keys);
    config.id = running.id;
    config.listen = running.listen;
    config.data_dir = running.data_dir;
    config.mode = running.mode;
    config.witness = running.witness;
    config.peers = running.peers;
    config.watchdog = running.watchdog;
    config.postgres = running.postgres.map(|mut pg| {
        set_pg_cluster_keys(&mut pg, file_keys.unwrap_or_default());
        pg
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> NodeConfig {
        crate::config::sample::node_two()
    }

    #[test]
    fn restart_fields_are_named_and_kept() {
        let running = config();
        let mut new = config();
        new.hooks.on_change = Some("true".into());
        assert!(restart_needed(&running, &new).is_empty());
        new.listen = "127.0.0.1:7999".parse().unwrap();
        new.peers.pop();
        assert_eq!(restart_needed(&running, &new), ["listen", "peers"]);
        keep_restart_fields(&mut new, running.clone());
        assert!(restart_needed(&running, &new).is_empty());
        assert_eq!(new.hooks.on_change.as_deref(), Some("true"));
        // Cluster settings: not the file's to apply, so no restart applies them either.
        new.timing.suspect_after_ms = 3_000;
        new.preempt = crate::protocol::Preempt::Never;
        assert!(restart_needed(&running, &new).is_empty());
    }

    #[test]
    fn postgres_parameters_need_no_restart_its_other_keys_do() {
        let mut running = config();
        running.postgres = Some(crate::config::postgres::PostgresConfig::new(
            "/tmp/bully-2-pg",
            "127.0.0.1:5432".parse().unwrap(),
        ));
        let mut new = running.clone();
        let pg = new.postgres.as_mut().unwrap();
        pg.parameters.insert("work_mem".into(), "7MB".into());
        pg.synchronous = crate::postgres_rules::Synchronous::Off;
        assert!(restart_needed(&running, &new).is_empty());
        new.postgres.as_mut().unwrap().listen = "127.0.0.1:5999".parse().unwrap();
        assert_eq!(restart_needed(&running, &new), ["postgres"]);
    }
}
