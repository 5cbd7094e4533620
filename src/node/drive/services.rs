//! The node's replaceable helper services, the health check (or the PostgreSQL
//! manager standing in for it) and the HTTP endpoint:
//! each runs as its own child group of the node's tasks, so a reload retires the one it
//! replaces (gracefully, through that group's stop signal) and the node's stop ends
//! them all. What a reload changes is decided in [`super::reload`].

use crate::api::Status;
use crate::config::NodeConfig;
use crate::node::commands::health::{self, HealthCheck, Verdict};
use crate::node::serve::api::ApiRequests;
use crate::node::serve::http::{self, HttpState};
use crate::node::serve::http_auth::Security;
use crate::node::shared::metrics::Metrics;
use crate::node::shared::tasks::NodeTasks;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

/// The running health check and HTTP endpoint, and the config they run from.
pub struct Services {
    /// The config as applied (restart-only fields as they run).
    applied: NodeConfig,
    workdir: PathBuf,
    status: watch::Receiver<Status>,
    metrics: Arc<Metrics>,
    health_verdicts: mpsc::Sender<Verdict>,
    /// The client API, which the HTTP endpoint answers through.
    api: ApiRequests,
    tasks: NodeTasks,
    /// The running check's group, if any.
    health: Option<NodeTasks>,
    /// How many checks were started: the running one's verdicts carry this.
    health_generation: u64,
    /// The running endpoint's group, if any.
    http: Option<NodeTasks>,
    /// The endpoint's HTTPS and write credentials, shared with it and replaced in
    /// place by a reload.
    http_security: Arc<std::sync::RwLock<Security>>,
    /// The PostgreSQL manager's engine, kept across its restarts.
    postgres_engine: Arc<std::sync::Mutex<crate::postgres_rules::Engine>>,
    /// `bully pg` orders, for whichever manager runs.
    postgres_orders: crate::node::postgres::Orders,
    pg_sync: crate::node::postgres::SyncStore,
}

/// What the services read and report to, shared by every check and endpoint started.
pub struct ServiceLinks {
    /// Where hooks and checks run (the config file's directory).
    pub workdir: PathBuf,
    pub status: watch::Receiver<Status>,
    pub metrics: Arc<Metrics>,
    pub health_verdicts: mpsc::Sender<Verdict>,
    /// The client API, which the HTTP endpoint answers through (`/status` with the
    /// scheduled switchover, `/cluster`).
    pub api: ApiRequests,
    /// The endpoint's HTTPS and write credentials, loaded by the start.
    pub http_security: Security,
    /// Where `bully pg` orders arrive (src/node/postgres/).
    pub postgres_orders: crate::node::postgres::Orders,
    /// The synchronous record this node keeps (src/node/postgres/sync_store.rs).
    pub pg_sync: crate::node::postgres::SyncStore,
}

impl Services {
    /// Starts the health check (if configured) and serves HTTP on `listener` (bound by
    /// the caller, so a busy port fails the node's start), as children of `tasks`.
    pub fn start(
        config: &NodeConfig,
        links: ServiceLinks,
        listener: Option<TcpListener>,
        tasks: &NodeTasks,
    ) -> Services {
        let mut services = Services {
            applied: config.clone(),
            workdir: links.workdir,
            status: links.status,
            metrics: links.metrics,
            health_verdicts: links.health_verdicts,
            api: links.api,
            tasks: tasks.clone(),
            health: None,
            health_generation: 0,
            http: None,
            http_security: Arc::new(std::sync::RwLock::new(links.http_security)),
            postgres_engine: Default::default(),
            postgres_orders: links.postgres_orders,
            pg_sync: links.pg_sync,
        };
        services.restart_health();
        if let Some(listener) = listener {
            services.serve_http(listener);
        }
        services
    }

    /// The config the services run from.
    pub fn applied(&self) -> &NodeConfig {
        &self.applied
    }

    /// Records `config` as applied; the caller restarts what it changed.
    pub fn set_applied(&mut self, config: NodeConfig) {
        self.applied = config;
    }

    /// Stops the endpoint, if one runs.
    pub fn stop_http(&mut self) {
        if let Some(old) = self.http.take() {
            old.stop();
        }
    }

    /// Serves HTTP on `listener` (stop the old endpoint first).
    pub fn serve_http(&mut self, listener: TcpListener) {
        let state = HttpState {
            api: self.api.clone(),
            metrics: Arc::clone(&self.metrics),
            pg_data_dir: self.applied.postgres.as_ref().map(|pg| pg.data_dir.clone()),
            security: Arc::clone(&self.http_security),
            cluster_asks: Default::default(),
        };
        let group = self.tasks.child();
        group.spawn(http::serve(listener, state, group.clone()));
        self.http = Some(group);
    }

    /// New HTTPS material and write credentials (a reload): the next connection uses them.
    pub fn set_http_security(&mut self, security: Security) {
        *self
            .http_security
            .write()
            .unwrap_or_else(|e| e.into_inner()) = security;
    }

    /// Whether `verdict` comes from the check running now.
    pub fn current(&self, verdict: &Verdict) -> bool {
        verdict.generation == self.health_generation
    }

    /// Stops the running check and starts the applied config's, if it has one; its
    /// first result decides at once, and the old check's verdicts no longer count.
    pub fn restart_health(&mut self) {
        if let Some(old) = self.health.take() {
            old.stop();
        }
        self.health_generation += 1;
        if self.applied.postgres.is_some() {
            let links = crate::node::postgres::Links {
                status: self.status.clone(),
                verdicts: self.health_verdicts.clone(),
                generation: self.health_generation,
                engine: Arc::clone(&self.postgres_engine),
                orders: Arc::clone(&self.postgres_orders),
                pg_sync: self.pg_sync.clone(),
            };
            let group = self.tasks.child();
            crate::node::postgres::spawn(&self.applied, links, &group);
            self.health = Some(group);
            return;
        }
        let Some(config) = self.applied.health.clone() else {
            return;
        };
        let check = HealthCheck {
            config,
            workdir: self.workdir.clone(),
            data_dir: self.applied.data_dir.clone(),
            status: self.status.clone(),
            metrics: Arc::clone(&self.metrics),
            health_verdicts: self.health_verdicts.clone(),
            generation: self.health_generation,
        };
        let group = self.tasks.child();
        group.spawn(health::run(check, group.clone()));
        self.health = Some(group);
    }
}

/// Where the config puts the node's HTTP endpoint, as its status shows it.
pub fn http_endpoint(config: &NodeConfig) -> Option<crate::api::HttpEndpoint> {
    config.http.as_ref().map(|h| crate::api::HttpEndpoint {
        listen: h.listen,
        tls: h.tls,
    })
}

/// The HTTP endpoint's HTTPS material and write credentials (`[http]`), so a bad
/// certificate or password file fails the start with a clear error.
pub fn http_security(config: &NodeConfig) -> Result<Security, String> {
    match &config.http {
        Some(http) => Security::load(http, &config.transport_config().tls),
        None => Ok(Security::default()),
    }
}
