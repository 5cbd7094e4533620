//! Reload (`systemctl reload`, SIGHUP): the node re-reads its config file and replaces
//! what can change without leaving the cluster — hooks, the health check, the HTTP
//! endpoint and the TLS certificates — while its peer connections, its state machine
//! and its term stay as they are, so a reload never causes an election.
//!
//! What the protocol or the peers depend on (`id`, `listen`, `data_dir`, `mode`,
//! `witness`, `preempt`, `timing`, `peers`) needs a restart: a reload that changes those
//! applies the rest and names the fields it left alone. A reload that cannot be applied
//! (a certificate that does not load, an HTTP address in use) changes nothing.

use super::health;
use super::hooks::Hooks;
use super::http::{self, HttpState};
use super::metrics::Metrics;
use super::status::Status;
use crate::config::NodeConfig;
use crate::transport::{Transport, TransportConfig};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// The helper tasks a reload may replace (health check, HTTP endpoint) and the config
/// they were started from.
pub struct Services {
    applied: NodeConfig,
    workdir: PathBuf,
    status: watch::Receiver<Status>,
    metrics: Arc<Metrics>,
    verdicts: mpsc::Sender<bool>,
    health: Option<JoinHandle<()>>,
    http: Option<JoinHandle<()>>,
}

/// What a successful reload changed, for the runtime and the log.
#[derive(Debug)]
pub struct Reloaded {
    /// The `[health]` section is gone: the node is no longer gated by a check.
    pub health_removed: bool,
    /// One line for the log and the `Done` answer.
    pub summary: String,
}

impl Services {
    /// Starts the health check (if configured) and serves HTTP on `listener` (bound by
    /// the caller, so a busy port fails the node's start).
    pub fn start(
        config: &NodeConfig,
        workdir: PathBuf,
        status: watch::Receiver<Status>,
        metrics: Arc<Metrics>,
        verdicts: mpsc::Sender<bool>,
        listener: Option<TcpListener>,
    ) -> Services {
        let mut services = Services {
            applied: config.clone(),
            workdir,
            status,
            metrics,
            verdicts,
            health: None,
            http: None,
        };
        services.start_health();
        if let Some(listener) = listener {
            services.serve_http(listener);
        }
        services
    }

    /// Stops the health check and the HTTP endpoint (the node is stopping).
    pub fn stop(&mut self) {
        for task in [self.health.take(), self.http.take()].into_iter().flatten() {
            task.abort();
        }
    }

    /// Applies `new`: the fallible steps (certificates, HTTP bind) first, so an error
    /// leaves the node exactly as it was.
    pub async fn reload(
        &mut self,
        new: NodeConfig,
        hooks: &mut Hooks,
        transport: &Transport,
    ) -> Result<Reloaded, String> {
        let ignored = restart_needed(&self.applied, &new);
        let mut tls = transport_config(&new);
        // Peers are not reloaded; check the certificates against the ones in use.
        tls.peers = transport_config(&self.applied).peers;
        transport.reload_tls(&tls).map_err(|e| e.to_string())?;
        let listener =
            match (&new.http, &self.applied.http) {
                (Some(wanted), Some(now)) if wanted == now => None,
                (Some(wanted), _) => Some(http::bind(wanted.listen).await.map_err(|e| {
                    format!("http.listen: cannot listen on {}: {e}", wanted.listen)
                })?),
                (None, _) => None,
            };
        if new.http != self.applied.http {
            if let Some(old) = self.http.take() {
                old.abort();
            }
        }
        if let Some(listener) = listener {
            self.serve_http(listener);
        }
        hooks.reconfigure(new.hooks.clone());
        let health_changed = new.health != self.applied.health;
        let health_removed = health_changed && new.health.is_none();
        let mut summary = format!(
            "reloaded hooks, certificates{}{}",
            if health_changed { ", health check" } else { "" },
            if new.http != self.applied.http {
                ", http"
            } else {
                ""
            },
        );
        if !ignored.is_empty() {
            summary.push_str(&format!(
                "; changes to {} need a restart and were not applied",
                ignored.join(", ")
            ));
        }
        // Keep the fields that need a restart as they run, so the next reload reports
        // them again rather than believing they took effect.
        let running = std::mem::replace(&mut self.applied, new);
        keep_restart_fields(&mut self.applied, running);
        if health_changed {
            if let Some(old) = self.health.take() {
                old.abort();
            }
            self.start_health();
        }
        Ok(Reloaded {
            health_removed,
            summary,
        })
    }

    fn start_health(&mut self) {
        if let Some(config) = self.applied.health.clone() {
            self.health = Some(tokio::spawn(health::run(
                config,
                self.workdir.clone(),
                self.applied.data_dir.clone(),
                self.status.clone(),
                Arc::clone(&self.metrics),
                self.verdicts.clone(),
            )));
        }
    }

    fn serve_http(&mut self, listener: TcpListener) {
        let state = HttpState {
            status: self.status.clone(),
            metrics: Arc::clone(&self.metrics),
        };
        self.http = Some(tokio::spawn(http::serve(listener, state)));
    }
}

/// The transport's part of a node config.
pub fn transport_config(config: &NodeConfig) -> TransportConfig {
    TransportConfig {
        id: config.id,
        listen: config.listen,
        tls: config.tls.clone(),
        peers: config
            .peers
            .iter()
            .map(|p| (p.id, p.addr.clone()))
            .collect(),
        timing: config.timing,
    }
}

/// The config fields that differ between `running` and `new` and need a restart.
pub fn restart_needed(running: &NodeConfig, new: &NodeConfig) -> Vec<&'static str> {
    let fields = [
        ("id", running.id != new.id),
        ("listen", running.listen != new.listen),
        ("data_dir", running.data_dir != new.data_dir),
        ("mode", running.mode != new.mode),
        ("witness", running.witness != new.witness),
        ("preempt", running.preempt != new.preempt),
        ("timing", running.timing != new.timing),
        ("peers", running.peers != new.peers),
    ];
    fields
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(name, _)| name)
        .collect()
}

/// Copies the restart-only fields of `running` into `config`.
fn keep_restart_fields(config: &mut NodeConfig, running: NodeConfig) {
    config.id = running.id;
    config.listen = running.listen;
    config.data_dir = running.data_dir;
    config.mode = running.mode;
    config.witness = running.witness;
    config.preempt = running.preempt;
    config.timing = running.timing;
    config.peers = running.peers;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> NodeConfig {
        // The config checks that the TLS files exist; their content does not matter here.
        let dir = tempfile::tempdir().unwrap();
        for file in ["ca.pem", "node-2.pem", "node-2.key"] {
            std::fs::write(dir.path().join(file), "").unwrap();
        }
        crate::config::parse(
            r#"
id = 2
listen = "127.0.0.1:7002"
data_dir = "/tmp/bully-2"
[tls]
ca = "ca.pem"
cert = "node-2.pem"
key = "node-2.key"
[[peers]]
id = 1
addr = "127.0.0.1:7001"
[[peers]]
id = 3
addr = "127.0.0.1:7003"
"#,
            &dir.path().join("node2.toml"),
        )
        .expect("valid config")
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
    }
}
