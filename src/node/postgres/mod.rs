//! The PostgreSQL manager (`[postgres]`, docs/design.md#keeping-postgresql): the node
//! keeps one server itself, with no hook scripts. It stands in for the health check:
//! its verdict gates eligibility and its estimate is the server's rank (timeline, then
//! WAL position), so elections go to the freshest server. The decisions are pure
//! (src/node/policy/postgres.rs); this wing observes and acts:
//! - `manager`: the loop (observe, decide, act, report);
//! - `sql`: the round trips (describe, promote, reload, the replication role);
//! - `programs`: initdb, pg_basebackup, pg_rewind, pg_controldata and the server itself
//!   as child processes, as `run_as`, with timeouts, never through a shell;
//! - `files`: bully's include file, `standby.signal`, the branch records; `control`: a
//!   stopped server's control file and its system identifier;
//! - `secrets`: the roles' passwords (their files, generated ones), the passfile the
//!   server's libpq reads them from, and the `pg_hba.conf` lines of a new cluster;
//!   `quote`: quoting by PostgreSQL's config lexer, libpq's conninfo and pgpass rules;
//! - `tls`: `[postgres] tls = "on"`: the server's certificate and key beside its data
//!   dir, and the clients' verification of it (libpq's and the manager's own);
//! - `peers`: the other members' servers, from their statuses;
//! - `sync_store`: the synchronous record this node keeps for the cluster (every node
//!   has one, witnesses too); `records`: reading and committing it across the voters;
//! - `held`: the note that this node's server held the cluster's data;
//! - `adopt`: `bully pg adopt`, a server that ran without bully taken over with its data;
//! - `order`: an operator's verb on its way in, dropped once its deadline passed;
//! - `owned`: files handed to the server's user, and private ones (mode 0600);
//! - `parameters`: the cluster's server parameters (a cluster setting in the member
//!   list) followed and applied by reload, and those a server holds for its next
//!   restart.
//!
//! The fence is not here: the keeper (`bully run --config`, src/keeper/) stops the
//! server by the lease's deadlines, so a stalled or killed node cannot leave a primary
//! writing after a successor may have promoted.

pub mod adopt;
mod control;
pub(crate) mod files;
mod held;
mod manager;
mod order;
mod outside_config;
mod owned;
mod parameters;
mod peers;
mod programs;
pub mod quote;
#[cfg(test)]
mod real_server_tests;
mod records;
mod secrets;
mod sql;
mod sync_store;
pub mod tls;

pub use order::{hand, order, Order, Pending};
pub use sync_store::SyncStore;

use crate::api::postgres::{PgRole, PgState};
use crate::api::Status;
use crate::boot_clock::BootInstant;
use crate::config::NodeConfig;
use crate::node::commands::health::Verdict;
use crate::node::shared::tasks::NodeTasks;
use crate::postgres_rules::Engine;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The manager's end of the orders: shared by every manager the services start in turn
/// (a reload or a stall restarts it), each holding it while it runs.
pub type Orders = Arc<tokio::sync::Mutex<mpsc::Receiver<Order>>>;

/// A channel for `bully pg` orders: the API's end and the managers'.
pub fn orders() -> (mpsc::Sender<Order>, Orders) {
    let (tx, rx) = mpsc::channel(4);
    (tx, Arc::new(tokio::sync::Mutex::new(rx)))
}

/// How often a manager that cannot run says so again.
const RETRY_SETUP: Duration = Duration::from_secs(10);

/// What the manager's tasks share with the node's services.
pub struct Links {
    pub status: watch::Receiver<Status>,
    pub verdicts: mpsc::Sender<Verdict>,
    pub generation: u64,
    /// The manager's engine, kept by the services across the manager's restarts.
    pub engine: Arc<Mutex<Engine>>,
    /// `bully pg` orders.
    pub orders: Orders,
    /// The synchronous record this node keeps.
    pub pg_sync: SyncStore,
}

/// Starts the manager and its peer poller in `group` (the node has `[postgres]`).
pub fn spawn(config: &NodeConfig, links: Links, group: &NodeTasks) {
    let Some(pg) = config.postgres.clone() else {
        return;
    };
    let servers = peers::PeerServers::default();
    let configured: Vec<_> = config
        .peers
        .iter()
        .map(|p| (p.id, p.addr.clone()))
        .collect();
    let records = records::Records::new(
        links.pg_sync.clone(),
        config.tls.clone(),
        configured.clone(),
    );
    let interval = Duration::from_millis(pg.interval_ms);
    group.spawn(peers::poll(
        servers.clone(),
        links.status.clone(),
        configured,
        config.tls.clone(),
        interval,
        group.clone(),
    ));
    let tls_sources = tls::sources(&pg, &config.tls);
    let setup = programs::Programs::find(pg.bin_dir.as_deref(), pg.run_as.as_deref()).and_then(
        |programs| {
            let passwords = secrets::Passwords::prepare(&pg, &config.data_dir)?;
            let connector = tls::Connector::new(tls_sources.as_ref())?;
            Ok((programs, passwords, connector))
        },
    );
    match setup {
        Ok((programs, passwords, connector)) => {
            // A standby's WAL receiver rereads the passfile at its next connection: a
            // password file changed and reloaded reaches it without a restart.
            if files::has_data(&pg.data_dir) {
                if let Err(e) = secrets::write_passfile(&pg, &passwords, programs.owner()) {
                    tracing::warn!("postgres: {e}");
                }
            }
            let member_hosts = config.peers.iter().map(|p| p.addr.to_string()).collect();
            let manager = manager::Manager {
                config: pg,
                id: config.id,
                node_data_dir: config.data_dir.clone(),
                programs,
                status: links.status,
                peers: servers,
                verdicts: links.verdicts,
                generation: links.generation,
                engine: links.engine,
                orders: links.orders,
                superuser_password: passwords.superuser,
                member_hosts,
                records,
                held: held::IdNote::new(&config.data_dir, held::HELD_FILE),
                made: held::IdNote::new(&config.data_dir, held::MADE_FILE),
                tls: tls_sources,
                connector,
            };
            // On a thread of its own: its file writes, fsyncs and child processes
            // must not stall the node's heartbeats (issue 49: a busy database host).
            if let Err(e) = group.spawn_on_thread("postgres", manager::run(manager, group.clone()))
            {
                tracing::error!("postgres: cannot start the manager's thread: {e}");
            }
        }
        Err(why) => {
            group.spawn(cannot_run(
                why,
                pg.listen,
                pg.data_dir,
                links,
                group.clone(),
            ));
        }
    }
}

/// Says why the manager cannot run, every [`RETRY_SETUP`], and keeps the node
/// ineligible: a node that cannot keep its server must not lead.
async fn cannot_run(
    why: String,
    listen: std::net::SocketAddr,
    data_dir: std::path::PathBuf,
    links: Links,
    tasks: NodeTasks,
) {
    loop {
        tracing::error!("postgres: the manager cannot run: {why}");
        let role = match files::has_data(Path::new(&data_dir)) {
            true => PgRole::Stopped,
            false => PgRole::Absent,
        };
        let verdict = Verdict {
            generation: links.generation,
            healthy: false,
            estimate: None,
            postgres: Some(PgState::bare(
                listen,
                role,
                format!("the manager cannot run: {why}"),
                BootInstant::now().as_nanos(),
            )),
        };
        if tasks
            .until_stopped(links.verdicts.send(verdict))
            .await
            .is_none()
        {
            return;
        }
        if tasks
            .until_stopped(tokio::time::sleep(RETRY_SETUP))
            .await
            .is_none()
        {
            return;
        }
    }
}
