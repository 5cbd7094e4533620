//! Starting a node: open its data dir, bind its endpoints, wire the runtime's parts
//! together and spawn it. Every step that can fail (a locked data dir, a port in use, a
//! certificate for another node) fails here, before anything runs.

use super::clock::Clock;
use super::handle::NodeHandle;
use super::inputs::Inputs;
use super::journal::Journal;
use super::members;
use super::pause_file::PauseFile;
use super::runtime::{OfficeBasis, Runtime};
use super::service_watchdog::ServiceWatchdog;
use super::services::{ServiceLinks, Services};
use super::watchdog::Watchdog;
use crate::api::event_log::EventLog;
use crate::api::keeper::Grant;
use crate::api::{HealthState, Status};
use crate::config::NodeConfig;
use crate::exact_timer::ExactTimer;
use crate::node::commands::health::Verdict;
use crate::node::commands::hooks::{HookReports, Hooks};
use crate::node::policy::eligibility::Eligibility;
use crate::node::policy::readiness::Readiness;
use crate::node::postgres::SyncStore;
use crate::node::publish::publisher::{Publisher, Watches};
use crate::node::serve::api::{Api, ApiParts};
use crate::node::serve::http_auth::Security;
use crate::node::serve::keepers::Keepers;
use crate::node::serve::scheduled_switchover::Schedule;
use crate::node::serve::switchover::PeerApis;
use crate::node::shared::error::NodeError;
use crate::node::shared::mailbox::{Command, ElectedHookDone};
use crate::node::shared::metrics::Metrics;
use crate::node::shared::tasks::NodeTasks;
use crate::protocol::{Cells, Machine, MachineConfig, Member, Membership, NodeId};
use crate::shutdown::Shutdown;
use crate::transport::{PeerAddr, Transport, TransportEvent};
use crate::wall_clock::wall_ms;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};

/// Starts a node from a validated config: opens its data dir (refusing a locked or
/// corrupted one), binds its endpoints and begins as a candidate (I4). Hooks and the
/// health check run in the data dir; see [`start_in`].
pub async fn start(config: NodeConfig) -> Result<NodeHandle, NodeError> {
    let workdir = config.data_dir.clone();
    start_in(config, workdir).await
}

/// Like [`start`], with hooks and the health check run in `workdir` (`bully node` passes
/// the config file's directory, so commands such as `./health.sh` sit beside it). Each
/// wing starts in a function of its own, in this order: storage, the keeper socket and
/// HTTP listener, transport, what may keep the node from leading, the machine, the
/// publishing side, the serving side; then the runtime that joins them is spawned.
pub async fn start_in(config: NodeConfig, workdir: PathBuf) -> Result<NodeHandle, NodeError> {
    let stored = Stored::open(&config)?;
    // The transport's waits, the watchdog's timeout and the eligibility's waits follow
    // the timing the cluster lives by, not the file's (docs/design.md#cluster-settings).
    let living = living_by(&config, &stored.members);
    let keeper_socket = bind_keeper_socket(&config)?;
    let http_security = super::services::http_security(&config).map_err(NodeError::HttpSecurity)?;
    let http = bind_http(&config).await?;
    let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
    let (transport, transport_events, applied_dial) = start_transport(&living, &stored).await?;
    let local_addr = transport.local_addr();
    let clock = Clock::new();
    let gates = LeadingGates::at_start(&living);
    let start_ms = clock.now();
    let Stored {
        journal,
        cells,
        pause,
        pg_sync,
        members,
        ..
    } = stored;
    let members_id = members.id;
    let machine_config = machine_config(&config, gates.eligible_at_start(&config));
    let machine = Machine::start_with(machine_config, cells, Some(members), start_ms);
    let applied_members = (members_id, machine.peers_to_keep());
    let status = initial_status(&config, &machine, cells, &gates, &pause);
    let (status_tx, status_rx) = watch::channel(status);
    tracing::info!(
        id = config.id,
        %local_addr,
        ?http_addr,
        incarnation = cells.incarnation + 1,
        accepted = ?cells.accepted,
        "node starting as a candidate"
    );
    let publishing = publish(
        &config,
        &workdir,
        status_tx,
        keeper_socket,
        &journal,
        &transport,
    );
    let Publishing {
        metrics,
        tasks,
        keepers,
        publisher,
        elected_hooks,
    } = publishing;
    let with = ServeWith {
        workdir,
        http,
        http_security,
        local_addr,
        pg_sync,
    };
    let serving = serve(&config, with, &status_rx, &metrics, &tasks);
    let eligibility = eligibility(&living, start_ms, &gates, &pause);
    let stop = Shutdown::new();
    let ended = Shutdown::new();
    let (release_done, released) = mpsc::unbounded_channel();
    let runtime = Runtime {
        machine,
        clock,
        inputs: Inputs {
            stop_requested: stop.clone(),
            _ended: ended.trip_on_drop(),
            transport: transport_events,
            commands: serving.commands,
            health_verdicts: serving.health_verdicts,
            elected_hooks,
            released,
            tick_timer: ExactTimer::new(),
            service_watchdog: ServiceWatchdog::from_env(),
        },
        journal,
        transport,
        eligibility,
        publisher,
        services: serving.services,
        api: serving.api,
        keepers,
        office: OfficeBasis::new(config.peers.len()),
        lease_lapsed: false,
        watchdog: gates.watchdog,
        tasks,
        applied_members,
        applied_dial,
        member_change: None,
        pause,
        releasing: None,
        release_done,
    };
    Ok(NodeHandle {
        commands: serving.commands_tx,
        status: status_rx,
        stop: stop.trip_on_drop(),
        ended,
        runtime: tokio::spawn(runtime.run()),
        local_addr,
        http_addr,
        metrics,
    })
}

/// What a node's data dir holds when it starts: its store (journal and cells), its
/// maintenance pause, the member list it lives by (the stored one, else the config
/// file's) and the members a forced recovery gave up.
struct Stored {
    journal: Journal,
    cells: Cells,
    pause: PauseFile,
    /// The PostgreSQL synchronous record this node keeps for the cluster (every node,
    /// witnesses too: src/node/postgres/sync_store.rs).
    pg_sync: SyncStore,
    members: Membership,
    gave_up: Vec<Member>,
}

impl Stored {
    /// Opens the data dir, refusing a locked or corrupted one or a mode the store was
    /// not started in; stores the file's member list on a first start, and warns when
    /// the stored list and the config file disagree (the stored one counts).
    fn open(config: &NodeConfig) -> Result<Stored, NodeError> {
        let (journal, cells) = Journal::open(&config.data_dir, config.id)?;
        let pause = PauseFile::open(&config.data_dir)?;
        let pg_sync = SyncStore::open(&config.data_dir).map_err(NodeError::SyncRecord)?;
        settle_mode(&journal, config)?;
        let members = stored_or_seeded(&journal, config)?;
        let gave_up = journal.load_gave_up()?;
        if let Some(disagreement) = members::file_disagrees(&members, config) {
            tracing::warn!("{disagreement}");
        }
        if cells.given_up {
            tracing::error!("{}", crate::api::GIVEN_UP_NOTE);
        }
        Ok(Stored {
            journal,
            cells,
            pause,
            pg_sync,
            members,
            gave_up,
        })
    }
}

/// The member list the store holds; a store that holds none (a first start, or a store
/// written by a version that left the file's list unstored until the first `bully
/// member` change) stores the config file's list now, so that from here on an edited
/// `[[peers]]` never counts (issue 47: two members restarted with files naming only
/// each other counted a majority of two under a partition and led beside the others).
/// `config` with the cluster settings of `list` in place of the file's (a list stored
/// before the settings were part of it keeps the file's).
fn living_by(config: &NodeConfig, list: &Membership) -> NodeConfig {
    let mut living = config.clone();
    if let Some(settings) = &list.settings {
        living.timing = settings.timing;
        living.preempt = settings.preempt;
    }
    living
}

fn stored_or_seeded(journal: &Journal, config: &NodeConfig) -> Result<Membership, NodeError> {
    let (list, seeded) =
        crate::protocol::membership::list_at_start(journal.load_members()?, || {
            members::seed(config)
        });
    if seeded {
        journal.save_members(&list)?;
    }
    Ok(members::fill_from_file(list, config))
}

/// The mode is cluster state: stored at the store's first start (or its first start by
/// a version that stores it), and from then on a config file naming another mode is
/// refused, unless `bully node --change-mode` says the whole cluster changes (issue 47:
/// two members restarted in classic mode under a partition led beside the quorum
/// side's coordinator for 8.6 s).
fn settle_mode(journal: &Journal, config: &NodeConfig) -> Result<(), NodeError> {
    let stored = journal.load_mode()?;
    let (mode, store) = crate::protocol::mode_at_start(stored, config.mode, config.change_mode)
        .map_err(|stored| NodeError::ModeDiffers {
            stored,
            file: config.mode,
        })?;
    if let Some(stored) = stored.filter(|&s| s != mode) {
        tracing::warn!(
            "--change-mode: the cluster's mode changes from {stored} to {mode} on this node"
        );
    }
    if store {
        journal.save_mode(mode)?;
    }
    Ok(())
}

/// Binds the keeper socket in the data dir (`NodeConfig::keeper_socket`), so a path
/// that cannot be bound fails the start.
fn bind_keeper_socket(config: &NodeConfig) -> Result<UnixListener, NodeError> {
    let path = config.keeper_socket();
    Keepers::bind(&path).map_err(|source| NodeError::KeeperSocket {
        path: path.display().to_string(),
        source,
    })
}

/// Starts the transport dialing the members `stored` lists and refusing those it gave
/// up; returns it, its events and the dial list it was given.
async fn start_transport(
    config: &NodeConfig,
    stored: &Stored,
) -> Result<
    (
        Transport,
        mpsc::Receiver<TransportEvent>,
        Vec<(NodeId, PeerAddr)>,
    ),
    NodeError,
> {
    let mut transport_config = config.transport_config();
    transport_config.peers = members::dial_list(&stored.members, config.id, config);
    let dialed = transport_config.peers.clone();
    let (transport, events) = Transport::start(transport_config).await?;
    transport.set_config_id(stored.members.id);
    transport.set_gave_up(members::dial_addresses(&stored.gave_up, config.id, config));
    Ok((transport, events, dialed))
}

/// What may keep a starting node from leading before any rule of the protocol does:
/// its health check and a `[watchdog]` device it requires.
struct LeadingGates {
    /// With a health check (or the PostgreSQL manager) the node starts ineligible; its
    /// first result decides.
    health: HealthState,
    /// The device a coordinator keeps armed.
    watchdog: Watchdog,
    /// With `[watchdog] mode = "required"`: why the device cannot be armed, if it
    /// cannot (then the node may not lead).
    watchdog_unavailable: Option<String>,
}

impl LeadingGates {
    /// The gates as the config sets them, the watchdog device tried once.
    fn at_start(config: &NodeConfig) -> LeadingGates {
        let watchdog = Watchdog::new(&config.watchdog, &config.timing);
        LeadingGates {
            health: HealthState::at_start(config.checks_health()),
            watchdog_unavailable: watchdog.check_required(),
            watchdog,
        }
    }

    /// Whether nothing here holds the node back at start: no health check to wait
    /// for, and the required watchdog device (if any) armable.
    fn eligible_at_start(&self, config: &NodeConfig) -> bool {
        !config.checks_health() && self.watchdog_unavailable.is_none()
    }
}

/// The status a node publishes before its first change: the machine's view and the
/// `cells` it loaded, with the gates' verdicts, the timing and the pause it kept.
fn initial_status(
    config: &NodeConfig,
    machine: &Machine,
    cells: Cells,
    gates: &LeadingGates,
    pause: &PauseFile,
) -> Status {
    let peers: Vec<NodeId> = config.peers.iter().map(|p| p.id).collect();
    let mut status = Status::initial(machine.view(), config.mode, cells, &peers, wall_ms());
    status.health = gates.health;
    status.timing = machine.timing();
    status.watchdog_unavailable = gates.watchdog_unavailable.clone();
    status.pause = pause.current().clone();
    status.file_differs = members::file_disagrees(machine.members(), config);
    status.http = super::services::http_endpoint(config);
    status
}

/// The serving side of a node: its services (health check, HTTP), its client API, and
/// the channels the runtime reads their requests from.
struct Serving {
    services: Services,
    api: Api,
    /// The API's and the handle's way in.
    commands_tx: mpsc::Sender<Command>,
    commands: mpsc::Receiver<Command>,
    health_verdicts: mpsc::Receiver<Verdict>,
}

/// What the serving side is started with besides the status, counters and tasks it
/// shares with the rest of the node.
struct ServeWith {
    /// Where hooks and checks run.
    workdir: PathBuf,
    /// The HTTP listener, bound already (a busy port fails the start).
    http: Option<TcpListener>,
    /// Its HTTPS material and write credentials, loaded already.
    http_security: Security,
    /// The transport's address, which the API dials members from.
    local_addr: SocketAddr,
    /// The PostgreSQL synchronous record this node keeps.
    pg_sync: SyncStore,
}

/// Starts the services (with `http`, bound already) as `tasks`, and the client API
/// that answers with `status` and asks members at their configured addresses.
fn serve(
    config: &NodeConfig,
    with: ServeWith,
    status: &watch::Receiver<Status>,
    metrics: &Arc<Metrics>,
    tasks: &NodeTasks,
) -> Serving {
    let ServeWith {
        workdir,
        http,
        http_security,
        local_addr,
        pg_sync,
    } = with;
    let (commands_tx, commands) = mpsc::channel(16);
    let (verdicts_tx, health_verdicts) = mpsc::channel(4);
    let schedule = Schedule::default();
    let (postgres_tx, postgres_orders) = crate::node::postgres::orders();
    let members = PeerApis {
        peers: config.peers.clone(),
        tls: config.transport_config().tls,
        local_addr,
        clients: Default::default(),
    };
    let api = Api::new(ApiParts {
        data_dir: config.data_dir.clone(),
        status: status.clone(),
        commands: commands_tx.clone(),
        metrics: Arc::clone(metrics),
        members,
        schedule,
        postgres: postgres_tx,
        pg_sync: pg_sync.clone(),
        tasks: tasks.clone(),
    });
    let links = ServiceLinks {
        workdir,
        status: status.clone(),
        metrics: Arc::clone(metrics),
        health_verdicts: verdicts_tx,
        api: api.requests(),
        http_security,
        postgres_orders,
        pg_sync,
    };
    let services = Services::start(config, links, http, tasks);
    Serving {
        services,
        api,
        commands_tx,
        commands,
        health_verdicts,
    }
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
    let Some(http) = &config.http else {
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

/// The eligibility policy of a node starting at `start_ms` behind `gates` (its health,
/// the required watchdog device unavailable for the reason given, if any), and held
/// back by the maintenance pause it kept, if that reserves the role for another node.
fn eligibility(
    config: &NodeConfig,
    start_ms: crate::protocol::Millis,
    gates: &LeadingGates,
    pause: &PauseFile,
) -> Eligibility<Option<crate::node::shared::mailbox::Reply>> {
    let peers: Vec<NodeId> = config.peers.iter().map(|p| p.id).collect();
    let hello_wait_ms = config.timing.suspect_after_ms;
    let mut policy =
        Eligibility::new(gates.health, &config.timing).with_peers(&peers, start_ms, hello_wait_ms);
    policy.set_watchdog_unavailable(gates.watchdog_unavailable.clone());
    policy.set_paused(pause.holds_back(config.id));
    policy
}

/// The machine's part of a node config; the node starts eligible only when nothing
/// else holds it back (`eligible`: no health check, the required watchdog armable)
/// and it has no peers.
fn machine_config(config: &NodeConfig, eligible: bool) -> MachineConfig {
    let peers = config.peers.iter().map(|p| p.id).collect();
    let witnesses = config
        .peers
        .iter()
        .filter(|p| p.witness)
        .map(|p| p.id)
        .collect();
    MachineConfig::new(config.id, peers)
        .with_timing(config.timing)
        .with_preempt(config.preempt)
        // Nor before its first hello with each peer settled (see `config_conflict`).
        .with_eligible(eligible && config.peers.is_empty())
        .with_mode(config.mode)
        .with_witnesses(config.witness, witnesses)
        .with_store_recovery(!config.new_cluster)
        .with_release_bound_ms(Some(release_bound_ms(config)))
        .with_flaw(sabotaged_flaw())
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

/// The publishing side of a node: its counters, the group of its tasks, the keeper
/// channel, and the publisher that tells watchers, hooks and keepers what changed.
struct Publishing {
    metrics: Arc<Metrics>,
    tasks: NodeTasks,
    keepers: Keepers,
    publisher: Publisher,
    /// Finished `on_elected` runs, for the runtime.
    elected_hooks: mpsc::UnboundedReceiver<ElectedHookDone>,
}

/// Starts the publishing side: the counters (with the transport's and the event log's),
/// the keepers served on `keeper_socket`, and the publisher of `status` with its hook
/// runner, whose runs go to the event log when it can be opened.
fn publish(
    config: &NodeConfig,
    workdir: &std::path::Path,
    status: watch::Sender<Status>,
    keeper_socket: UnixListener,
    journal: &Journal,
    transport: &Transport,
) -> Publishing {
    let (health, eligible) = {
        let now = status.borrow();
        (now.health, now.eligible)
    };
    let metrics = node_metrics(config.id, health, eligible, transport);
    metrics.attach_event_log(journal.event_log_failures());
    let tasks = NodeTasks::new();
    let (grants, grants_rx) = watch::channel(Grant::none(config.id));
    let keepers = Keepers::serve(keeper_socket, grants_rx, status.clone(), &tasks);
    let watches = Watches {
        status,
        led: watch::channel(None).0,
        grants,
    };
    let hook_log = journal
        .event_log()
        .map_err(|e| tracing::warn!("hook runs will not be in the event log: {e}"))
        .ok();
    let (publisher, elected_hooks) =
        publisher(config, workdir, watches, &metrics, hook_log, &tasks);
    Publishing {
        metrics,
        tasks,
        keepers,
        publisher,
        elected_hooks,
    }
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
) -> (Publisher, mpsc::UnboundedReceiver<ElectedHookDone>) {
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
