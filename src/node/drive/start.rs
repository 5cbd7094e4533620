//! Starting a node: open its data dir, bind its endpoints, wire the runtime's parts
//! together and spawn it. Every step that can fail (a locked data dir, a port in use, a
//! certificate for another node) fails here, before anything runs.

use super::clock::Clock;
use super::handle::NodeHandle;
use super::inputs::Inputs;
use super::journal::Journal;
use super::runtime::{OfficeBasis, Runtime};
use super::service_watchdog::ServiceWatchdog;
use super::services::{ServiceLinks, Services};
use super::watchdog::Watchdog;
use crate::api::event_log::EventLog;
use crate::api::keeper::Grant;
use crate::api::{HealthState, Status};
use crate::config::NodeConfig;
use crate::exact_timer::ExactTimer;
use crate::node::commands::hooks::{HookReports, Hooks};
use crate::node::policy::eligibility::Eligibility;
use crate::node::policy::readiness::Readiness;
use crate::node::publish::publisher::{Publisher, Watches};
use crate::node::serve::api::{Api, ApiParts};
use crate::node::serve::keepers::Keepers;
use crate::node::serve::scheduled_switchover::Schedule;
use crate::node::serve::switchover::PeerApis;
use crate::node::shared::error::NodeError;
use crate::node::shared::metrics::Metrics;
use crate::node::shared::tasks::NodeTasks;
use crate::protocol::{Machine, MachineConfig, NodeId};
use crate::transport::Transport;
use crate::wall_clock::wall_ms;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

/// Starts a node from a validated config: opens its data dir (refusing a locked or
/// corrupted one), binds its endpoints and begins as a candidate (I4). Hooks and the
/// health check run in the data dir; see [`start_in`].
pub async fn start(config: NodeConfig) -> Result<NodeHandle, NodeError> {
    let workdir = config.data_dir.clone();
    start_in(config, workdir).await
}

/// Like [`start`], with hooks and the health check run in `workdir` (`bully node` passes
/// the config file's directory, so commands such as `./health.sh` sit beside it).
pub async fn start_in(config: NodeConfig, workdir: PathBuf) -> Result<NodeHandle, NodeError> {
    let (journal, cells) = Journal::open(&config.data_dir, config.id)?;
    let pause = super::pause_file::PauseFile::open(&config.data_dir)?;
    let stored_members = journal.load_members()?;
    let gave_up = journal.load_gave_up()?;
    if let Some(disagreement) = stored_members
        .as_ref()
        .and_then(|stored| super::members::file_disagrees(stored, &config))
    {
        tracing::warn!("{disagreement}");
    }
    let members = stored_members.unwrap_or_else(|| super::members::seed(&config));
    let mut transport_config = config.transport_config();
    transport_config.peers = super::members::dial_list(&members, config.id, &config);
    let applied_dial = transport_config.peers.clone();
    let keeper_path = config.keeper_socket();
    let keeper_socket = Keepers::bind(&keeper_path).map_err(|source| NodeError::KeeperSocket {
        path: keeper_path.display().to_string(),
        source,
    })?;
    let http = bind_http(&config).await?;
    let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
    let (transport, transport_events) = Transport::start(transport_config).await?;
    transport.set_config_id(members.id);
    transport.set_gave_up(super::members::dial_addresses(&gave_up, config.id, &config));
    if cells.given_up {
        tracing::error!("{}", crate::api::GIVEN_UP_NOTE);
    }
    let local_addr = transport.local_addr();
    let clock = Clock::new();
    // With a health check (or the PostgreSQL manager) the node starts ineligible; its
    // first result decides.
    let health = HealthState::at_start(config.checks_health());
    // With `[watchdog] mode = "required"` a device that cannot be armed keeps the node
    // from leading.
    let watchdog = Watchdog::new(&config.watchdog, &config.timing);
    let watchdog_unavailable = watchdog.check_required();
    let start_ms = clock.now();
    let eligible = !config.checks_health() && watchdog_unavailable.is_none();
    let members_id = members.id;
    let machine = Machine::start_with(
        machine_config(&config, eligible),
        cells,
        Some(members),
        start_ms,
    );
    let machine_keeps = machine.peers_to_keep();
    let peers: Vec<NodeId> = config.peers.iter().map(|p| p.id).collect();
    let mut status = Status::initial(machine.view(), config.mode, cells, &peers, wall_ms());
    status.health = health;
    status.timing = config.timing;
    status.watchdog_unavailable = watchdog_unavailable.clone();
    status.pause = pause.current().clone();
    let (status_tx, status_rx) = watch::channel(status);
    tracing::info!(
        id = config.id,
        %local_addr,
        ?http_addr,
        incarnation = cells.incarnation + 1,
        accepted = ?cells.accepted,
        "node starting as a candidate"
    );
    let metrics = node_metrics(config.id, health, machine.view().eligible, &transport);
    metrics.attach_event_log(journal.event_log_failures());
    let tasks = NodeTasks::new();
    let (grants, grants_rx) = watch::channel(Grant::none(config.id));
    let keepers = Keepers::serve(keeper_socket, grants_rx, status_tx.clone(), &tasks);
    let watches = Watches {
        status: status_tx,
        led: watch::channel(None).0,
        grants,
    };
    let hook_log = journal
        .event_log()
        .map_err(|e| tracing::warn!("hook runs will not be in the event log: {e}"))
        .ok();
    let (publisher, elected_hooks) =
        publisher(&config, &workdir, watches, &metrics, hook_log, &tasks);
    let (commands_tx, commands) = mpsc::channel(16);
    let (verdicts_tx, health_verdicts) = mpsc::channel(4);
    let schedule = Schedule::default();
    let (postgres_tx, postgres_orders) = crate::node::postgres::orders();
    let links = ServiceLinks {
        workdir,
        status: status_rx.clone(),
        metrics: Arc::clone(&metrics),
        health_verdicts: verdicts_tx,
        schedule: schedule.clone(),
        postgres_orders,
    };
    let services = Services::start(&config, links, http, &tasks);
    let members = PeerApis {
        peers: config.peers.clone(),
        tls: config.transport_config().tls,
        local_addr,
    };
    let api = Api::new(ApiParts {
        data_dir: config.data_dir.clone(),
        status: status_rx.clone(),
        commands: commands_tx.clone(),
        metrics: Arc::clone(&metrics),
        members,
        schedule,
        postgres: postgres_tx,
        tasks: tasks.clone(),
    });
    let (stop, stop_requested) = watch::channel(false);
    let (release_done, released) = mpsc::unbounded_channel();
    let runtime = Runtime {
        machine,
        clock,
        inputs: Inputs {
            stop_requested,
            transport: transport_events,
            commands,
            health_verdicts,
            elected_hooks,
            released,
            tick_timer: ExactTimer::new(),
            service_watchdog: ServiceWatchdog::from_env(),
        },
        journal,
        transport,
        eligibility: eligibility(&config, health, start_ms, watchdog_unavailable, &pause),
        publisher,
        services,
        api,
        keepers,
        office: OfficeBasis::new(config.peers.len()),
        lease_lapsed: false,
        watchdog,
        tasks,
        applied_members: (members_id, machine_keeps),
        applied_dial,
        member_change: None,
        pause,
        releasing: None,
        release_done,
    };
    Ok(NodeHandle {
        commands: commands_tx,
        status: status_rx,
        stop,
        runtime: tokio::spawn(runtime.run()),
        local_addr,
        http_addr,
        metrics,
    })
}

/// The node's counters, with what is known at start.
fn node_metrics(
    id: NodeId,
    health: HealthState,
    eligible: bool,
    transport: &Transport,
) -> Arc<Metrics> {
    let metrics = Arc::new(Metrics::new(id));
    metrics.set_health(health);
    metrics.attach_transport(transport.clone());
    metrics.set_eligible(eligible);
    metrics
}

/// Binds `[http] listen`, if configured, so a busy port fails the start.
async fn bind_http(config: &NodeConfig) -> Result<Option<TcpListener>, NodeError> {
    let Some(http) = config.http else {
        return Ok(None);
    };
    let listener = crate::node::serve::http::bind(http.listen)
        .await
        .map_err(|source| NodeError::Http {
            addr: http.listen,
            source,
        })?;
    Ok(Some(listener))
}

/// The eligibility policy of a node starting at `start_ms` with `health`, with the
/// required watchdog device unavailable for the reason given, if any, and held back by
/// the maintenance pause it kept, if that reserves the role for another node.
fn eligibility(
    config: &NodeConfig,
    health: HealthState,
    start_ms: crate::protocol::Millis,
    watchdog_unavailable: Option<String>,
    pause: &super::pause_file::PauseFile,
) -> Eligibility<Option<crate::node::shared::mailbox::Reply>> {
    let peers: Vec<NodeId> = config.peers.iter().map(|p| p.id).collect();
    let hello_wait_ms = config.timing.suspect_after_ms;
    let mut policy =
        Eligibility::new(health, &config.timing).with_peers(&peers, start_ms, hello_wait_ms);
    policy.set_watchdog_unavailable(watchdog_unavailable);
    policy.set_paused(pause.holds_back(config.id));
    policy
}

/// The machine's part of a node config; the node starts eligible only when nothing
/// else holds it back (`eligible`: no health check, the required watchdog armable)
/// and it has no peers.
fn machine_config(config: &NodeConfig, eligible: bool) -> MachineConfig {
    MachineConfig {
        id: config.id,
        peers: config.peers.iter().map(|p| p.id).collect(),
        timing: config.timing,
        preempt: config.preempt,
        // Nor before its first hello with each peer settled (see `config_conflict`).
        eligible: eligible && config.peers.is_empty(),
        mode: config.mode,
        witness: config.witness,
        witnesses: config
            .peers
            .iter()
            .filter(|p| p.witness)
            .map(|p| p.id)
            .collect(),
        recover_empty_store: !config.new_cluster,
        release_bound_ms: Some(release_bound_ms(config)),
        flaw: sabotaged_flaw(),
    }
}

/// How long a coordinator leaving office on its own waits for its release before it
/// resigns anyway (src/protocol/machine/release.rs): `on_demoted` is killed after
/// `hooks.timeout_ms` (the one running before it too), and the keepers are waited for
/// until their fencing deadline, which is at most D away, plus a margin.
fn release_bound_ms(config: &NodeConfig) -> u64 {
    const MARGIN_MS: u64 = 5_000;
    2 * config.hooks.timeout_ms + config.timing.suspect_after_ms + MARGIN_MS
}

/// The machine's sabotage switches (debug builds, `BULLY_TEST_FAULT=deaf_handover`,
/// `id_order`, `holdoff_by_new_d` or `ignores_given_up`).
#[cfg(debug_assertions)]
fn sabotaged_flaw() -> Option<crate::protocol::Flaw> {
    use crate::protocol::Flaw;
    let deaf = crate::sabotage::deaf_handover().then_some(Flaw::DeafHandover);
    let holdoff = crate::sabotage::holdoff_by_new_d().then_some(Flaw::HoldoffByNewD);
    let given_up = crate::sabotage::ignores_given_up().then_some(Flaw::IgnoresGivenUp);
    deaf.or(crate::sabotage::id_order().then_some(Flaw::IdOrder))
        .or(holdoff)
        .or(given_up)
}

/// Release builds carry no sabotage.
#[cfg(not(debug_assertions))]
fn sabotaged_flaw() -> Option<crate::protocol::Flaw> {
    None
}

/// The publisher of `watches`, with the hook runner started as one of `tasks`; the
/// receiver of the runner's finished `on_elected` runs.
fn publisher(
    config: &NodeConfig,
    workdir: &std::path::Path,
    watches: Watches,
    metrics: &Arc<Metrics>,
    log: Option<EventLog>,
    tasks: &NodeTasks,
) -> (
    Publisher,
    mpsc::UnboundedReceiver<crate::node::shared::mailbox::ElectedHookDone>,
) {
    let (elected, elected_hooks) = mpsc::unbounded_channel();
    let reports = HookReports {
        metrics: Arc::clone(metrics),
        elected,
        led: watches.led.subscribe(),
        log,
    };
    let hooks = Hooks::start(
        config.hooks.clone(),
        workdir.to_path_buf(),
        config.data_dir.clone(),
        reports,
        tasks,
    );
    let readiness = Readiness::from_config(config);
    let publisher = Publisher::new(watches, Arc::clone(metrics), hooks, readiness);
    (publisher, elected_hooks)
}
