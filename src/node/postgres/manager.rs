//! The manager's loop: every `[postgres] interval_ms` (and on every change of the node's
//! status) it looks at the local server (`look`), asks the pure decisions what to do
//! (src/node/policy/postgres.rs), does it (`act`), and reports to the runtime: the
//! health verdict (eligibility), the estimate (the server's rank) and the record every
//! reader of the status sees ([`PgState`]).

mod copies;

use super::control;
use super::files;
use super::held::IdNote;
use super::owned;
use super::parameters::{self, Parameters};
use super::peers::PeerServers;
use super::programs::Programs;
use super::records::Records;
use super::secrets::{self, Passwords};
use super::sql::{self, Described};
use crate::api::postgres::{PgRole, PgState, PgVerb};
use crate::api::Status;
use crate::boot_clock::BootInstant;
use crate::config::postgres::PostgresConfig;
use crate::node::commands::health::{Measured, Verdict};
use crate::node::shared::tasks::NodeTasks;
use crate::postgres_rules::{
    self as rules, Act, Cluster, Command, Copier, Done, Engine, Look, Office, PeerWal, Position,
    Rules, Running, Server, SyncRecord, SyncView, Synchronous, WalRemoved,
};
use crate::postmaster;
use crate::protocol::membership::ConfigId;
use crate::protocol::settings::synchronous_word;
use crate::protocol::{NodeId, Role};
use futures::StreamExt;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// How long a SQL round trip to a server may take before it counts as unanswered.
const SQL_TIMEOUT: Duration = Duration::from_millis(500);

/// How often an unchanged verdict is sent again: its estimate stays fresh for two of
/// these and a round trip, so a node whose manager runs never looks stale.
const RESEND: Duration = Duration::from_millis(500);

/// How soon a server that missed a look is looked at again.
const UNANSWERED_PAUSE: Duration = Duration::from_millis(100);

/// How long after the majority answered the promotion check waits for the others.
const STRAGGLERS: Duration = Duration::from_millis(30);

/// How long a standby with the right upstream may go without streaming before it is
/// stopped and rewound (its timeline cannot follow).
const STUCK_FOR: Duration = Duration::from_secs(15);

/// With a `restore_command`, how long a standby whose upstream removed the WAL it
/// needs must replay nothing before it counts as settled (`WalRemoved::settled`): the
/// startup process tries the archive, then streaming, then waits
/// `wal_retrieve_retry_interval` (bully's default 250 ms; the user may raise it to
/// PostgreSQL's 5 s), and a fetch of a segment from a remote archive takes its time;
/// without one, a single look without replay settles it.
const ARCHIVE_SETTLE: Duration = Duration::from_secs(15);

/// What the manager runs with.
pub struct Manager {
    pub config: PostgresConfig,
    pub id: NodeId,
    /// The node's data dir: the server's log goes there.
    pub node_data_dir: PathBuf,
    pub programs: Programs,
    pub status: watch::Receiver<Status>,
    pub peers: PeerServers,
    pub verdicts: mpsc::Sender<Verdict>,
    pub generation: u64,
    /// The manager's state and decisions (src/postgres_rules/engine.rs); survives the
    /// manager's restarts (a reload, a stall).
    pub engine: Arc<Mutex<Engine>>,
    /// `bully pg` orders (shared with the managers before and after this one).
    pub orders: super::Orders,
    /// The superuser's password as the node started (src/node/postgres/secrets.rs); the
    /// replication password is read from its file at each use.
    pub superuser_password: Option<String>,
    /// The synchronous records: this node's, and the way to the other voters'.
    pub records: Records,
    /// The note that this node's server held the cluster's data (`pg_held`).
    pub held: IdNote,
    /// The note of a cluster this node's `initdb` made, never promoted (`pg_made`).
    pub made: IdNote,
    /// The configured peers' addresses (`host:port`): `pg_hba.conf` lets them in.
    pub member_hosts: Vec<String>,
    /// `[postgres] tls = "on"`: where the server's TLS files come from (the user's or
    /// the node's `[tls]`), copied beside the data dir at every write of `bully.conf`.
    pub tls: Option<crate::certs::TlsFiles>,
    /// How the round trips to the servers connect (TLS with `tls = "on"`).
    pub connector: super::tls::Connector,
}

/// Why parameters were not applied.
enum Unapplied {
    /// PostgreSQL (or the include file's writer) refused them: the ones before stay.
    Refused(String),
    /// Written, but the server did not answer the reload: tried again at a later look.
    Unanswered(String),
}

/// Aborts the heartbeat task it holds when dropped.
struct Heartbeat(Option<tokio::task::JoinHandle<()>>);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// The state one run of the loop keeps.
struct Loop {
    m: Manager,
    local: Option<tokio_postgres::Client>,
    /// What the last look did or waits for.
    note: String,
    last_sent: Option<(Verdict, Instant)>,
    /// The members whose servers the last promotion check reached, each with the
    /// timeline it read there.
    reached: Vec<(NodeId, u32)>,
    /// The newest timeline seen on the running server (its postmaster's PID with it): a
    /// standby's own reading lags while its WAL receiver reconnects, and its timeline
    /// never goes back while it runs.
    seen_timeline: Option<(i32, u32)>,
    /// The node's tasks: once they stop, no server is started (a look cut short by the
    /// stop would leave it running without its node).
    tasks: NodeTasks,
    /// A standby's replayed position at the last look, and when it last moved
    /// (`WalRemoved::settled`).
    last_replayed: (Option<u64>, Instant),
    /// The server's system identifier as the last look read it (0: no data).
    system_id: u64,
    /// The last look found the server's data not the cluster's (`rules::foreign`).
    other_cluster: bool,
    /// The password files as this node last followed them (its passfile, its logins
    /// to the peers' servers).
    passwords_followed: Option<Passwords>,
    /// The password files as this primary last set them on its roles (`ALTER ROLE`).
    passwords_set: Option<Passwords>,
    /// The last look promoted the server: the next one runs at once, so the new
    /// primary is reported (and HAProxy's check finds it) a look sooner.
    look_again: bool,
    /// The cluster's parameters as this manager last applied them to the server (or
    /// left for its next start); `None` before the first, so a manager started beside
    /// a running server applies the list's once whatever its include file holds.
    parameters_applied: Option<Parameters>,
    /// The member list whose parameters were last taken up (applied or refused).
    parameters_list: Option<ConfigId>,
    /// The cluster's parameters PostgreSQL refused, and why: not tried again until the
    /// list gives others.
    parameters_refused: Option<(Parameters, String)>,
    /// The synchronous mode the decisions run by: the list's (a cluster setting), the
    /// file's only while the list holds none (a list stored before it was one).
    synchronous: Synchronous,
    /// `postgres.standby_cluster` as the list has it: the decisions' standby cluster,
    /// and where [`rules::REMOTE_PRIMARY`] is.
    standby_cluster: Option<RemotePrimary>,
    /// When the manager started: for [`FIRST_REPORTS_WAIT`].
    started: Instant,
}

/// A standby cluster's remote primary (`postgres.standby_cluster`), as last resolved.
struct RemotePrimary {
    /// HOST:PORT as the setting names it.
    name: String,
    /// Its address (`None`: the name did not resolve).
    addr: Option<std::net::SocketAddr>,
    resolved: Instant,
}

/// How long a copy just started may take to answer before its act ends
/// ([`Loop::wait_answering`]).
const COPY_STARTS_WITHIN: Duration = Duration::from_secs(30);

/// How often the remote primary's name is resolved again while it resolves.
const RESOLVE_REMOTE_EVERY: Duration = Duration::from_secs(10);

/// How long a member without data waits, at most, for every other member's first
/// report before it clones from the primary (`Cluster::reports_pending`): a
/// `clonefrom` standby not heard from yet would otherwise be passed over (the member
/// just added, refused by the others until they apply the list that adds it).
const FIRST_REPORTS_WAIT: Duration = Duration::from_secs(5);

/// Runs the manager until `tasks` stops.
pub async fn run(manager: Manager, tasks: NodeTasks) {
    let interval = Duration::from_millis(manager.config.interval_ms);
    let mut status = manager.status.clone();
    let orders = Arc::clone(&manager.orders);
    let Some(mut orders) = tasks.until_stopped(orders.lock_owned()).await else {
        return;
    };
    let synchronous = manager.config.synchronous;
    let mut state = Loop {
        m: manager,
        local: None,
        note: "starting".into(),
        last_sent: None,
        seen_timeline: None,
        reached: Vec::new(),
        tasks: tasks.clone(),
        last_replayed: (None, Instant::now()),
        system_id: 0,
        other_cluster: false,
        passwords_followed: None,
        passwords_set: None,
        look_again: false,
        started: Instant::now(),
        parameters_applied: None,
        parameters_list: None,
        parameters_refused: None,
        synchronous,
        standby_cluster: None,
    };
    loop {
        if tasks.until_stopped(state.look()).await.is_none() {
            return;
        }
        if std::mem::take(&mut state.look_again) {
            continue;
        }
        // A server that missed a look is looked at again soon, after a pause (its round
        // trip may fail at once: looking again at once spun a core), and orders are
        // still taken meanwhile.
        let pause = match state.unanswered() {
            0 => interval,
            _ => interval.min(UNANSWERED_PAUSE),
        };
        let woken = async {
            tokio::select! {
                _ = tokio::time::sleep(pause) => None,
                _ = status.changed() => None,
                order = orders.recv() => order,
            }
        };
        match tasks.until_stopped(woken).await {
            None => return,
            // An order that waited past its deadline is dropped, never run late.
            Some(Some(order)) => match order.take() {
                Ok(taken) => {
                    let answer = state.obey(taken.verb).await;
                    taken.answer(answer);
                }
                Err(why) => tracing::warn!("postgres: {why}"),
            },
            Some(None) => {}
        }
    }
}

impl Loop {
    /// An operator's verb (`bully pg`), between two looks.
    async fn obey(&mut self, verb: PgVerb) -> Result<String, String> {
        let status = self.m.status.borrow().as_of_now();
        let (server, described) = self.observe().await;
        let office = self.office(&status);
        let timeout = Duration::from_millis(self.m.config.action_timeout_ms);
        let primary = matches!(&server, Server::Running(r) if !r.in_recovery);
        tracing::info!(verb = verb.word(), "postgres: the operator asks");
        match verb {
            PgVerb::Reload if matches!(server, Server::Unreachable) => Err(
                "the server runs but does not answer; nothing changed (ask again once it does)"
                    .into(),
            ),
            PgVerb::Reload => {
                let wanted = self.cluster_parameters(&status);
                self.take_parameters(wanted, described.as_ref(), &office)
                    .await
            }
            PgVerb::Restart => {
                let running = matches!(server, Server::Running(_) | Server::Unreachable);
                if !running {
                    return Err("the server is not running; the manager starts it by itself".into());
                }
                match (primary, office) {
                    (true, Office::Leading { token }) => {
                        self.restart_primary_in_place(token, timeout).await
                    }
                    _ => {
                        self.stop_server(timeout).await?;
                        Ok("stopped; the manager starts it again as a standby".into())
                    }
                }
            }
            PgVerb::AcceptLoss => {
                let Office::Leading { token } = office else {
                    return Err(format!(
                        "node {} does not lead now: `bully step-down --to {}` first, then ask \
                         again",
                        self.m.id, self.m.id
                    ));
                };
                self.lock_engine().accept_loss_in(token);
                tracing::warn!(
                    token,
                    "postgres: the operator accepts losing commits to promote"
                );
                Ok(format!(
                    "node {} promotes at its next look without the synchronous record's check \
                     (office {token} only); commits only other servers hold are lost",
                    self.m.id
                ))
            }
            PgVerb::Reinit => {
                let Office::Following {
                    leader,
                    server: Some(_),
                } = office
                else {
                    return Err(
                        "reinit clones from the coordinator's primary: this node leads, or no \
                         coordinator's server is known; switch over first (bully step-down --to N)"
                            .into(),
                    );
                };
                if primary {
                    return Err("this server is a primary; switch over first".into());
                }
                let from = self.server_of(leader)?;
                self.stop_server(timeout).await?;
                // Never the replica method: the data it replaces may hold acknowledged
                // commits an older backup lacks (src/postgres_rules/replica_method.rs).
                self.reinit_from(from, Copier::BaseBackup).await?;
                Ok(format!(
                    "copied afresh (pg_basebackup) to stream from node {leader}'s server \
                     ({from}); the old data dir is kept aside"
                ))
            }
        }
    }

    /// The parameters the member list `status` holds gives the servers (the ones this
    /// manager runs with while it holds no settings), with the list's ID.
    fn cluster_parameters(&self, status: &Status) -> (Option<ConfigId>, Parameters) {
        let tls = self.m.config.tls;
        match parameters::of_the_cluster(status.members.as_ref(), tls) {
            Some((list, wanted, dropped)) => {
                if !dropped.is_empty() && self.parameters_list != Some(list) {
                    tracing::warn!(
                        "postgres: member list {list} names parameters bully sets itself, \
                         left out: {}",
                        dropped.join(", ")
                    );
                }
                (Some(list), wanted)
            }
            None => (None, self.m.config.parameters.clone()),
        }
    }

    /// A look's part in following the cluster's parameters: the list's are applied when
    /// they are not what the server was last given, unless PostgreSQL refused that very
    /// set already. A server that runs but does not answer waits for a later look.
    async fn follow_parameters(
        &mut self,
        status: &Status,
        server: &Server,
        described: Option<&Described>,
        office: &Office,
    ) {
        let (list, wanted) = self.cluster_parameters(status);
        let refused = matches!(&self.parameters_refused, Some((set, _)) if *set == wanted);
        let applied = self.parameters_applied.as_ref() == Some(&wanted);
        if applied {
            // Back to what the server runs (a refused set undone): nothing to apply.
            self.parameters_refused = None;
        }
        if refused || applied || matches!(server, Server::Unreachable) {
            self.parameters_list = list.or(self.parameters_list);
            return;
        }
        let verbose = self.parameters_applied.is_some();
        match self
            .take_parameters((list, wanted), described, office)
            .await
        {
            Ok(answer) if verbose => tracing::info!("postgres: the cluster's parameters: {answer}"),
            Ok(answer) => tracing::debug!("postgres: the cluster's parameters: {answer}"),
            Err(why) => tracing::warn!("postgres: the cluster's parameters: {why}"),
        }
    }

    /// A look's part in following the cluster's synchronous mode: the list's, read at
    /// each look, so every decision of this look (the names, the promotion check) runs
    /// by one mode (docs/design.md#keeping-postgresql says what a change promises).
    fn follow_synchronous(&mut self, status: &Status) {
        let held = status.members.as_ref().and_then(|list| {
            let mode = list.settings.as_ref()?.pg_synchronous?;
            Some((list.id, mode))
        });
        if let Some((list, mode)) = held.filter(|&(_, mode)| mode != self.synchronous) {
            tracing::info!(
                from = synchronous_word(self.synchronous),
                to = synchronous_word(mode),
                "postgres: the cluster's synchronous mode changed (member list {list})"
            );
            self.synchronous = mode;
        }
    }

    /// A look's part in following `postgres.standby_cluster`: the list's, with the
    /// remote primary's name resolved when it changes, while it does not resolve, and
    /// every [`RESOLVE_REMOTE_EVERY`] (a DR site's primary may move to another address
    /// under one name). A list without settings keeps what was held.
    async fn follow_standby_cluster(&mut self, status: &Status) {
        let Some(settings) = status.members.as_ref().and_then(|l| l.settings.as_ref()) else {
            return;
        };
        let wanted = settings.pg_standby_cluster.clone();
        let held = self.standby_cluster.as_ref().map(|r| &r.name);
        if wanted.as_ref() != held {
            tracing::info!(
                from = held.map_or("none", |r| r.as_str()),
                to = wanted.as_deref().unwrap_or("none"),
                "postgres: the cluster's standby_cluster changed"
            );
        }
        let Some(name) = wanted else {
            self.standby_cluster = None;
            return;
        };
        let fresh = self.standby_cluster.as_ref().filter(|r| {
            r.name == name && r.addr.is_some() && r.resolved.elapsed() < RESOLVE_REMOTE_EVERY
        });
        if fresh.is_some() {
            return;
        }
        // Said once per failure, not at every look that tries again.
        let said = self
            .standby_cluster
            .as_ref()
            .is_some_and(|r| r.name == name && r.addr.is_none());
        let addr = match tokio::net::lookup_host(name.as_str()).await {
            Ok(mut found) => found.next(),
            Err(e) => {
                if !said {
                    tracing::warn!(remote = %name, "postgres: the remote primary does not resolve: {e}");
                }
                None
            }
        };
        self.standby_cluster = Some(RemotePrimary {
            name,
            addr,
            resolved: Instant::now(),
        });
    }

    /// Applies `wanted` (from member list `list`) and keeps the outcome for the report:
    /// applied, or refused with why (the parameters before stay).
    async fn take_parameters(
        &mut self,
        (list, wanted): (Option<ConfigId>, Parameters),
        described: Option<&Described>,
        office: &Office,
    ) -> Result<String, String> {
        let outcome = self.apply_parameters(&wanted, described, office).await;
        match outcome {
            Ok(answer) => {
                self.parameters_list = list.or(self.parameters_list);
                self.parameters_applied = Some(wanted);
                self.parameters_refused = None;
                Ok(answer)
            }
            Err(Unapplied::Refused(why)) => {
                self.parameters_list = list.or(self.parameters_list);
                self.parameters_refused = Some((wanted, why.clone()));
                Err(why)
            }
            // Written, but the server was not seen to reread them: the next look
            // applies them again.
            Err(Unapplied::Unanswered(why)) => Err(why),
        }
    }

    /// `wanted` become the manager's parameters, its include file is rewritten with
    /// them for the server as it runs now (a standby's upstream, a primary's
    /// synchronous names and office), and the server rereads it; the answer says which
    /// changes apply and which wait for a restart (src/node/postgres/parameters.rs). A
    /// file PostgreSQL would refuse is put back as it was before the server rereads
    /// anything. A server that does not run gets them at its next start.
    async fn apply_parameters(
        &mut self,
        wanted: &Parameters,
        described: Option<&Described>,
        office: &Office,
    ) -> Result<String, Unapplied> {
        let changed = parameters::changed(&self.m.config.parameters, wanted);
        let Some(d) = described else {
            self.m.config.parameters = wanted.clone();
            return Ok(format!(
                "node {}: the server is not running; the parameters are written at its next start",
                self.m.id
            ));
        };
        let (upstream, names, token) = match (d.in_recovery, office) {
            (true, _) => (d.upstream, String::new(), None),
            (false, Office::Leading { token }) => {
                (None, d.synchronous_standby_names.clone(), Some(*token))
            }
            (false, _) => (None, d.synchronous_standby_names.clone(), None),
        };
        let include = self
            .m
            .config
            .data_dir
            .join(crate::config::postgres::OWNED_INCLUDE);
        let before = std::fs::read_to_string(&include).ok();
        let started_with = std::mem::replace(&mut self.m.config.parameters, wanted.clone());
        let timeout = Duration::from_millis(self.m.config.action_timeout_ms);
        let written = self.write_conf(upstream, &names, token);
        let checked = match written {
            Ok(()) => {
                let dir = &self.m.config.data_dir;
                parameters::check_files(&self.m.programs, dir, timeout).await
            }
            Err(e) => Err(e),
        };
        if let Err(why) = checked {
            self.m.config.parameters = started_with;
            if let Some(text) = before {
                files::write_conf(&self.m.config.data_dir, &text, self.m.programs.owner())
                    .map_err(Unapplied::Refused)?;
            }
            return Err(Unapplied::Refused(format!("{why}; nothing changed")));
        }
        let client = self.local_client().await.map_err(Unapplied::Unanswered)?;
        let seen = parameters::reload_and_wait(client, timeout)
            .await
            .map_err(Unapplied::Unanswered)?;
        let pending = parameters::pending(client, SQL_TIMEOUT)
            .await
            .map_err(Unapplied::Unanswered)?;
        Ok(parameters::answer(self.m.id, &changed, &pending, seen))
    }

    /// `bully pg restart` of the leading primary: stopped and started again in place,
    /// within the office. The last report (eligible) is sent on meanwhile, and the order
    /// ends only once the server answers as a primary again: a look in between would
    /// see a server that does not answer yet and, after two such looks, make the node
    /// ineligible, which gave the office away (issue 49: 4.7 s write gaps).
    ///
    /// The server starts again as a primary only within the office `token` the order
    /// began in, asked just before the start and again once it answers: a node stopped
    /// whole mid-restart (a SIGSTOP, swap) woke after its lease, the keeper's fence had
    /// found no server to stop, and its server came back as a second writable primary
    /// beside the one elected meanwhile (seed 277 of tests/postgres_sim.rs, sabotage
    /// `RestartIgnoresOffice`). Outside that office the server is left stopped, and the
    /// next look rewinds it and starts it as a standby. The same office, not merely "this
    /// node leads": a re-election may have let another primary serve in between.
    async fn restart_primary_in_place(
        &mut self,
        token: u64,
        timeout: Duration,
    ) -> Result<String, String> {
        let _beat = self.heartbeat(None);
        let started = Instant::now();
        self.stop_server(timeout).await?;
        self.office_kept(token)?;
        self.start_server(None, false).await?;
        let deadline = started + timeout;
        loop {
            // An office that ends while the server starts (the node stopping, a lost
            // lease) ends the restart at once: the server is stopped again, and the
            // operator hears why now rather than at the timeout.
            if let Err(why) = self.office_kept(token) {
                self.stop_server(timeout).await?;
                return Err(why);
            }
            let answer = match self.describe_local().await {
                Ok(d) if !d.in_recovery => {
                    return Ok(format!(
                        "restarted in place as the primary in {} ms; the office is kept",
                        started.elapsed().as_millis()
                    ));
                }
                Ok(_) => "it answers as a standby".to_string(),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "restarted, but the server does not answer as the primary after {timeout:?}: {answer}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether this node still holds the office `token` under its lease (a restart in
    /// place goes on only then); else why not, for the operator's answer.
    fn office_kept(&self, token: u64) -> Result<(), String> {
        let status = self.m.status.borrow().as_of_now();
        match self.office(&status) {
            Office::Leading { token: now } if now == token => Ok(()),
            _ => Err(format!(
                "the office {token} ended during the restart; the server is left stopped and \
                 the next look starts it as a standby"
            )),
        }
    }

    /// One look: observe, decide, act, report.
    async fn look(&mut self) {
        let status = self.m.status.borrow().as_of_now();
        let (mut server, described) = self.observe().await;
        self.adopt_branch(&mut server);
        let office = self.office(&status);
        self.follow_parameters(&status, &server, described.as_ref(), &office)
            .await;
        self.follow_synchronous(&status);
        self.follow_standby_cluster(&status).await;
        let mut cluster = self.cluster(&status, &office, described.as_ref());
        self.identify(&mut cluster, &server).await;
        self.system_id = cluster.server_system_id;
        self.other_cluster = rules::foreign(&cluster).is_some();
        // A coordinator about to promote or run initdb reads the servers' positions and
        // the voters' synchronous records at once.
        let promoting = self.standby_cluster.is_none()
            && matches!((&office, &server),
                (Office::Leading { .. }, Server::Running(r)) if r.in_recovery);
        let founding = matches!((&office, &server), (Office::Leading { .. }, Server::Absent));
        let positions = async {
            match promoting {
                true => self.peer_wals(&cluster).await,
                false => Vec::new(),
            }
        };
        let records = async {
            match promoting || founding {
                true => self.m.records.read(&status).await,
                false => SyncView::Unread,
            }
        };
        let (answers, view) = tokio::join!(positions, records);
        if view.system_id() != 0 {
            cluster.system_id = view.system_id();
        }
        cluster.sync = view;
        self.reached = answers
            .iter()
            .filter_map(|(p, timeline)| Some((p.id, (*timeline)?)))
            .collect();
        let peers: Vec<PeerWal> = answers.into_iter().map(|(p, _)| p).collect();
        let removed = self
            .wal_removed(&server, &office, &cluster, described.as_ref())
            .await;
        let look = Look {
            now_ms: engine_now_ms(),
            office,
            server: server.clone(),
            peers,
            reports: self.reports(&cluster),
            standbys: streaming_standbys(described.as_ref()),
            cluster,
            removed,
        };
        let rules = self.rules();
        let (decision, cluster) = self.lock_engine().handle(look, &rules);
        let keeper = !status.keepers.is_empty();
        // A server that misses a look (starting, a slow checkpoint, a disk stall) keeps
        // the verdict it had; one that stays silent makes the node ineligible.
        let decided = decision.eligible;
        let eligible = self.lock_engine().settle(rules::Decision {
            eligible: decided && keeper,
            ..decision
        });
        let token = match office {
            Office::Leading { token } => Some(token),
            _ => None,
        };
        let (mut note, mut promoted) = (String::new(), false);
        loop {
            let command = self.lock_engine().poll_command();
            match command {
                None => break,
                Some(Command::NoteHeld { system_id }) => self.note_held(system_id),
                Some(Command::Act(act)) => {
                    let promotes = matches!(act, Act::Promote);
                    (note, promoted) = match self.act(act, &server, &cluster, token, &status).await
                    {
                        Ok(note) => (note, promotes),
                        Err(e) => {
                            tracing::warn!("postgres: {e}");
                            (e, false)
                        }
                    };
                }
            }
        }
        if note != self.note {
            tracing::info!("postgres: {note}");
        }
        self.note = note;
        if promoted {
            // What this look saw is a standby no more: the next look, at once, sees the
            // primary, keeps its slots and reports it (25 ms sooner than after this
            // look's slot work and a report of the standby it was).
            self.look_again = true;
            return;
        }
        if matches!(server, Server::Running(_)) {
            let leading_primary =
                token.is_some() && matches!(&server, Server::Running(r) if !r.in_recovery);
            self.keep_slots(&cluster, leading_primary).await;
            self.follow_passwords(leading_primary).await;
        }
        if decided && !keeper {
            self.note = format!(
                "{}; not eligible: no keeper connected (run `bully run --config` on this host)",
                self.note
            );
        }
        self.report(eligible, &server, described.as_ref()).await;
    }

    /// A standby streaming from its upstream records which office began the upstream's
    /// timeline, when its data dir does not say so yet (a timeline switch streamed in,
    /// or a rewind that needed no copy), or says otherwise of the timeline its WAL is on
    /// (`rules::branch_to_adopt`: a failed promotion's record for that number).
    fn adopt_branch(&self, server: &mut Server) {
        let Server::Running(running) = server else {
            return;
        };
        let Some(upstream) = running
            .upstream
            .filter(|_| running.in_recovery && running.streaming)
        else {
            return;
        };
        let report = self.m.peers.get(upstream).flatten();
        let report = report.and_then(|r| r.timeline.zip(r.branch));
        let dir = &self.m.config.data_dir;
        // The highest record for a timeline is the one read (`files::branch_of`).
        let Some((timeline, branch)) =
            rules::branch_to_adopt(report, running.timeline, |tl| files::branch_of(dir, tl))
        else {
            return;
        };
        match files::record_branch(dir, timeline, branch, self.m.programs.owner()) {
            Ok(()) if timeline == running.timeline => {
                running.wal.branch = files::wal_branch(dir, timeline)
            }
            Ok(()) => {}
            Err(e) => tracing::warn!("postgres: {e}"),
        }
    }

    fn rules(&self) -> Rules {
        let c = &self.m.config;
        let interval = Duration::from_millis(c.interval_ms);
        Rules {
            synchronous: self.synchronous,
            maximum_lag_on_failover: c.maximum_lag_on_failover,
            rewind: c.rewind,
            reinit_on_failed_rewind: c.reinit_on_failed_rewind,
            stuck_after: (STUCK_FOR.as_millis() / interval.as_millis().max(1)) as u32,
            standby_grace_ms: rules::STANDBY_GRACE_MS,
            replica_method: !c.replica_method.is_empty(),
            standby_cluster: self.standby_cluster.is_some(),
        }
    }

    /// The office as the decisions need it, from the status as of now (a lapsed lease
    /// reads as no coordinator).
    fn office(&self, status: &Status) -> Office {
        match (status.role, status.coordinator()) {
            (Role::Coordinator, _) if status.ready() && status.lease_until.is_some() => {
                Office::Leading {
                    token: status.token().unwrap_or(0),
                }
            }
            (Role::Coordinator, _) => Office::Elected,
            (_, Some(leader)) if leader != self.m.id => Office::Following {
                leader,
                server: self.m.peers.get(leader).flatten().map(|_| leader),
            },
            _ => Office::Nobody,
        }
    }

    /// The members around this node, from its list (or config) and their reports (the
    /// engine adds which standbys know this primary's branch, and how many stream).
    fn cluster(&self, status: &Status, office: &Office, described: Option<&Described>) -> Cluster {
        let (voters, data_voters): (usize, Vec<NodeId>) = match &status.members {
            Some(list) => (
                list.voters().len(),
                list.members
                    .iter()
                    .filter(|m| m.may_lead())
                    .map(|m| m.id)
                    .collect(),
            ),
            None => {
                let mut ids: Vec<NodeId> = std::iter::once(self.m.id)
                    .chain(status.peers.iter().map(|p| p.id))
                    .collect();
                ids.sort_unstable();
                (ids.len(), ids)
            }
        };
        let others: Vec<NodeId> = data_voters
            .iter()
            .copied()
            .filter(|&m| m != self.m.id)
            .collect();
        // A member whose data its own initdb made, never promoted, holds no commit either
        // (two coordinators' initdb raced: src/sim/postgres/strangers.rs).
        let all_absent = others.iter().all(|&m| {
            matches!(self.m.peers.get(m),
                Some(Some(s)) if s.role == PgRole::Absent || s.initdb_unpromoted)
        });
        let leader_state = match office {
            Office::Following { leader, .. } => self
                .m
                .peers
                .get(*leader)
                .flatten()
                .filter(|s| self.serves(s)),
            _ => None,
        };
        let leader_primary = leader_state.is_some();
        let leader_system = leader_state.and_then(|s| s.system_id);
        Cluster {
            id: self.m.id,
            data_voters,
            voters,
            all_absent,
            leader_primary,
            streaming: 0,
            knows_branch: Vec::new(),
            sync: SyncView::Unread,
            // Until `identify` reads a record this node keeps: the coordinator's
            // primary's, which is the cluster's (a promotion commits the identity first).
            system_id: leader_system.unwrap_or(0),
            server_system_id: 0,
            held_data: false,
            made_here: 0,
            paused: status.pause.paused,
            flushed: described
                .filter(|d| !d.in_recovery)
                .map(|d| {
                    d.standbys
                        .iter()
                        .filter_map(|(name, lsn)| Some((member_named(name)?, *lsn)))
                        .collect()
                })
                .unwrap_or_default(),
            // The last tags each member reported, also a stale answer's: a member's
            // tags are its file's, and naming churns on every missed poll otherwise.
            nosync: others
                .iter()
                .copied()
                .filter(|&m| self.m.peers.last_tags(m).is_some_and(|t| t.nosync))
                .collect(),
            nofailover: std::iter::once(self.m.id)
                .filter(|_| self.m.config.tags.never_leads())
                .chain(
                    others
                        .iter()
                        .copied()
                        .filter(|&m| self.m.peers.last_tags(m).is_some_and(|t| t.never_leads())),
                )
                .collect(),
            reports_pending: self.started.elapsed() < FIRST_REPORTS_WAIT
                && others.iter().any(|&m| !self.m.peers.ever_heard(m)),
            clone_sources: match office {
                Office::Following { leader, .. } => others
                    .iter()
                    .copied()
                    .filter(|&m| {
                        matches!(self.m.peers.get(m), Some(Some(s)) if s.tags.clonefrom
                            && s.role == PgRole::Replica
                            && s.streaming_from == Some(*leader)
                            && s.system_id.is_some()
                            && s.system_id == leader_system)
                    })
                    .collect(),
                _ => Vec::new(),
            },
        }
    }

    /// Fills in who the cluster and this server are: the system identifier the record
    /// this node keeps names, the one this server's control file holds, and whether
    /// this node noted holding the cluster's data.
    async fn identify(&self, cluster: &mut Cluster, server: &Server) {
        let kept = self
            .m
            .records
            .store
            .current()
            .await
            .map_or(0, |r| r.system_id);
        if kept != 0 {
            cluster.system_id = kept;
        }
        cluster.server_system_id = match server {
            Server::Absent => 0,
            _ => control::system_id(&self.m.config.data_dir).unwrap_or(0),
        };
        cluster.held_data = self.m.held.system_id().is_some();
        cluster.made_here = self.m.made.system_id().unwrap_or(0);
    }

    /// Notes a clone's data as held at once, before the server streams a commit: a
    /// volume lost right after must not read as a member that never held data. A data
    /// dir this node's `initdb` made is gone with it.
    fn note_cloned(&self) {
        let cloned = control::system_id(&self.m.config.data_dir);
        if let Some(Err(e)) = cloned.map(|id| self.m.held.note(id)) {
            tracing::warn!("postgres: {e}");
        }
        if let Err(e) = self.forget_made() {
            tracing::warn!("postgres: {e}");
        }
    }

    /// Follows changed password files (issue 49, "a changed password file is applied
    /// with ALTER ROLE"): the passfile is rewritten, so a standby's next connection,
    /// `pg_basebackup` and `pg_rewind` use the new passwords, and so do this node's
    /// logins to its peers' servers; a leading primary sets both roles' passwords
    /// (`ALTER ROLE`, replicated to every standby, kept out of the server's log). The
    /// operator changes the files on every host; until a host's file changes, its
    /// standby's existing connection streams on and a new one is refused.
    async fn follow_passwords(&mut self, leading_primary: bool) {
        let Ok(current) = self.passwords() else {
            return; // an unreadable file fails the next act that needs it, saying why
        };
        if self.passwords_followed.as_ref() != Some(&current) {
            if let Err(e) = self.passfile() {
                tracing::warn!("postgres: the password files changed: {e}");
                return;
            }
            if self.passwords_followed.is_some() {
                tracing::info!("postgres: the password files changed: the passfile is rewritten");
            }
            self.m.superuser_password = current.superuser.clone();
            self.passwords_followed = Some(current.clone());
        }
        if !leading_primary || self.passwords_set.as_ref() == Some(&current) {
            return;
        }
        match self.set_role_passwords(&current).await {
            Ok(()) => {
                if self.passwords_set.is_some() {
                    tracing::info!("postgres: the password files changed: ALTER ROLE done");
                }
                self.passwords_set = Some(current);
            }
            Err(e) => tracing::warn!("postgres: the password files changed: {e}"),
        }
    }

    /// Sets the roles' passwords from `passwords` on this (primary) server.
    async fn set_role_passwords(&mut self, passwords: &Passwords) -> Result<(), String> {
        let (superuser, replication) = (
            self.m.config.superuser.user.clone(),
            self.m.config.replication.user.clone(),
        );
        let client = self.local_client().await?;
        sql::ensure_replication_role(
            client,
            &replication,
            passwords.replication.as_deref(),
            SQL_TIMEOUT,
        )
        .await?;
        if let Some(password) = &passwords.superuser {
            sql::set_password(client, &superuser, password, SQL_TIMEOUT).await?;
        }
        Ok(())
    }

    /// Whether the server's data is what this node's own `initdb` made, never promoted.
    fn initdb_unpromoted(&self) -> bool {
        self.system_id != 0 && self.m.made.system_id() == Some(self.system_id)
    }

    /// Notes the cluster this node's `initdb` just made (src/node/postgres/held.rs):
    /// until it is promoted, it holds nothing a client wrote.
    fn note_made(&self) {
        let made = control::system_id(&self.m.config.data_dir);
        if let Some(Err(e)) = made.map(|id| self.m.made.note(id)) {
            tracing::warn!("postgres: {e}");
        }
    }

    /// Drops the note of a cluster this node made: it is about to be promoted (clients
    /// may write to it from then on), or a clone replaced it. A failure to drop it is
    /// an error: a note left over a promoted server would let the decisions replace
    /// data clients wrote.
    fn forget_made(&self) -> Result<(), String> {
        self.m.made.clear()
    }

    /// Notes that this node's server runs with the cluster's data (`Command::NoteHeld`):
    /// a missing data dir is then a lost volume.
    fn note_held(&self, system_id: u64) {
        if let Err(e) = self.m.held.note(system_id) {
            tracing::warn!("postgres: {e}");
        }
    }

    /// The other members' reports as the engine weighs them: the timeline and branch
    /// of each running server.
    fn reports(&self, cluster: &Cluster) -> Vec<(NodeId, Option<(u32, u64)>)> {
        cluster
            .data_voters
            .iter()
            .filter(|&&m| m != self.m.id)
            .filter_map(|&m| {
                let report = self.m.peers.get(m).flatten()?;
                Some((m, report.timeline.zip(report.branch)))
            })
            .collect()
    }

    /// The engine, shared with the managers before and after this one
    /// (src/postgres_rules/engine.rs).
    fn lock_engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.m.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Looks in a row at which the running server did not answer.
    fn unanswered(&self) -> u32 {
        self.lock_engine().memory().unanswered
    }

    /// The local server: its data dir, its postmaster, one SQL round trip.
    async fn observe(&mut self) -> (Server, Option<Described>) {
        let data_dir = &self.m.config.data_dir;
        if !files::has_data(data_dir) {
            self.local = None;
            return (Server::Absent, None);
        }
        // Only a verified postmaster of this data dir is the server: a stale or foreign
        // postmaster.pid (a reused PID) reads as stopped, and the start clears it.
        let postmaster = match postmaster::find(data_dir) {
            postmaster::Found::Running(p) => Some(p.pid()),
            // Nothing acts on a server that cannot be told apart from a stranger.
            found @ (postmaster::Found::Unreadable(_) | postmaster::Found::Doubtful { .. }) => {
                // Said once per streak: the looks that follow come every pause.
                if self.unanswered() == 0 {
                    tracing::warn!("postgres: {}", found.describe());
                }
                self.local = None;
                return (Server::Unreachable, None);
            }
            _ => None,
        };
        if postmaster.is_none() {
            self.local = None;
            let control = self
                .m
                .programs
                .run(
                    "pg_controldata",
                    &[data_dir.display().to_string()],
                    &[("LC_ALL".into(), "C".into())],
                    SQL_TIMEOUT * 5,
                )
                .await
                .ok()
                .and_then(|ran| control::parse(&ran.stdout));
            let (was_primary, clean) = control.map_or((false, false), |c| (c.was_primary, c.clean));
            return (Server::Stopped { was_primary, clean }, None);
        }
        match self.describe_local().await {
            Ok(mut d) => {
                let pid = postmaster;
                if let (Some((seen_pid, seen)), Some(pid)) = (self.seen_timeline, pid) {
                    if seen_pid == pid {
                        d.timeline = d.timeline.max(seen);
                    }
                }
                self.seen_timeline = pid.map(|pid| (pid, d.timeline));
                let running = Running {
                    in_recovery: d.in_recovery,
                    timeline: d.timeline,
                    wal: Position {
                        branch: files::wal_branch(&self.m.config.data_dir, d.timeline),
                        lsn: d.wal,
                    },
                    upstream: d.upstream.and_then(|up| self.member_at(up)),
                    streaming: d.streaming,
                    synchronous_standby_names: d.synchronous_standby_names.clone(),
                };
                (Server::Running(running), Some(d))
            }
            Err(e) => {
                tracing::debug!("postgres: the local server does not answer: {e}");
                self.local = None;
                (Server::Unreachable, None)
            }
        }
    }

    async fn describe_local(&mut self) -> Result<Described, String> {
        let client = self.local_client().await?;
        sql::describe(client, SQL_TIMEOUT).await
    }

    async fn local_client(&mut self) -> Result<&tokio_postgres::Client, String> {
        if !matches!(&self.local, Some(c) if !c.is_closed()) {
            let c = &self.m.config;
            let client = sql::connect(
                &self.m.connector,
                c.listen,
                &c.superuser.user,
                self.m.superuser_password.as_deref(),
                SQL_TIMEOUT,
            )
            .await?;
            self.local = Some(client);
        }
        Ok(self.local.as_ref().expect("just connected"))
    }

    /// The other data voters' ranks, read from their servers directly (their own
    /// reports may be a look old), until a majority answered and a little after; each
    /// with the timeline read there (`None` where not reached).
    async fn peer_wals(&self, cluster: &Cluster) -> Vec<(PeerWal, Option<u32>)> {
        let own_system = cluster.server_system_id;
        let mut asked: futures::stream::FuturesUnordered<_> = cluster
            .data_voters
            .iter()
            .copied()
            .filter(|&m| m != self.m.id)
            .map(|m| {
                let reported = self.m.peers.get(m).flatten();
                let (user, password) = (
                    self.m.config.superuser.user.clone(),
                    self.m.superuser_password.clone(),
                );
                let connector = &self.m.connector;
                async move {
                    let read = match reported {
                        None => None,
                        // A member without data is not reached: the majority must be
                        // of servers that hold data (src/sim/postgres/ found a wiped
                        // member outvoting one that was only down).
                        Some(s) if matches!(s.role, PgRole::Absent | PgRole::Missing) => None,
                        Some(s) => {
                            let login = (connector, user.as_str(), password.as_deref());
                            peer_position(&s, own_system, login).await
                        }
                    };
                    let (wal, timeline) = read.unzip();
                    (PeerWal { id: m, wal }, timeline)
                }
            })
            .collect();
        let mut answers = Vec::new();
        let mut stragglers_until: Option<tokio::time::Instant> = None;
        loop {
            let reached = answers
                .iter()
                .filter(|(p, _): &&(PeerWal, _)| p.wal.is_some());
            let (_, majority) = rules::reached_majority(reached.count(), cluster);
            if majority && stragglers_until.is_none() {
                stragglers_until = Some(tokio::time::Instant::now() + STRAGGLERS);
            }
            let next = match stragglers_until {
                Some(until) => match tokio::time::timeout_at(until, asked.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
                None => asked.next().await,
            };
            match next {
                Some(answer) => answers.push(answer),
                None => break,
            }
        }
        answers
    }

    /// Does `act`; the words say what was done.
    async fn act(
        &mut self,
        act: Act,
        server: &Server,
        cluster: &Cluster,
        token: Option<u64>,
        status: &Status,
    ) -> Result<String, String> {
        let c = self.m.config.clone();
        let timeout = Duration::from_millis(c.action_timeout_ms);
        match act {
            Act::Wait(why) => Ok(why),
            Act::InitDb => {
                // From now on this member holds data: its peers must not read it as a
                // member that never did (a coordinator after this one would run a
                // second initdb while this one runs, the record of its identity not
                // committed yet).
                let _beat = self.heartbeat(Some(PgRole::Stopped));
                self.init_db().await?;
                self.note_made();
                self.commit_identity(status, cluster, token).await;
                self.start_server(None, true).await?;
                Ok("initdb done; started as a standby".into())
            }
            Act::Clone { from, by } => {
                let _beat = self.heartbeat(None);
                let from = self.server_of(from)?;
                self.clone_from(from, by).await?;
                self.note_cloned();
                self.done(Done::Copied { by });
                self.start_server(Some(from), true).await?;
                self.wait_answering(COPY_STARTS_WITHIN).await;
                Ok(format!("copied ({}); streams from {from}", by.word()))
            }
            Act::StartStandby { upstream } => {
                let upstream = upstream.map(|m| self.server_of(m)).transpose()?;
                self.done(Done::Starting);
                self.start_server(upstream, true).await?;
                Ok(match upstream {
                    Some(up) => format!("started as a standby of {up}"),
                    None => "started as a standby".into(),
                })
            }
            Act::Repoint { upstream } => {
                let upstream = upstream.map(|m| self.server_of(m)).transpose()?;
                self.write_conf(upstream, "", None)?;
                let client = self.local_client().await?;
                sql::reload(client, SQL_TIMEOUT).await?;
                Ok(match upstream {
                    Some(up) => format!("streams from {up}"),
                    None => "no upstream".into(),
                })
            }
            Act::Promote => {
                // The branch is recorded before the promotion, here and on every
                // standby the promotion check reached, so a server that becomes a
                // primary always has it: this office's term for the timeline it picks.
                let term = self.m.status.borrow().epoch.map(|e| e.term).unwrap_or(0);
                let Server::Running(r) = server else {
                    return Err("no running server to promote".into());
                };
                let next = files::next_timeline(&c.data_dir, r.timeline);
                files::record_branch(&c.data_dir, next, term, self.m.programs.owner())?;
                let told = self.write_branch_to_reached(next, term).await;
                // The names hold every standby that knows the branch before the first
                // commit is taken, so no commit is acknowledged by the new primary
                // alone, nor by a standby that would rank it below an older branch.
                let rules = self.rules();
                let names = self.lock_engine().promoting(next, &told, cluster, &rules);
                self.write_conf(None, &names, token)?;
                let password = self.passwords()?.replication;
                self.forget_made()?;
                let client = self.local_client().await?;
                sql::reload(client, SQL_TIMEOUT).await?;
                let started = Instant::now();
                sql::promote(client, timeout).await?;
                // No checkpoint here, which would hold the new primary's record (and
                // HAProxy's switch) back: a member that rewinds from this server makes
                // sure its control file names the new timeline first (`checkpointed`).
                sql::ensure_replication_role(
                    client,
                    &c.replication.user,
                    password.as_deref(),
                    SQL_TIMEOUT,
                )
                .await?;
                self.done(Done::Promoted);
                tracing::info!(took_ms = started.elapsed().as_millis() as u64, %names, "postgres: promoted");
                Ok(format!("promoted (synchronous_standby_names = '{names}')"))
            }
            Act::CommitSync { record } => self.commit_record(status, record).await,
            Act::SetSynchronous { names } => {
                self.write_conf(None, &names, token)?;
                let client = self.local_client().await?;
                sql::reload(client, SQL_TIMEOUT).await?;
                tracing::info!(%names, "postgres: synchronous_standby_names");
                Ok(format!("primary; synchronous_standby_names = '{names}'"))
            }
            Act::Stop { why } => {
                self.done(Done::Stopped(why));
                tracing::warn!("postgres: stopping the server: {why}");
                self.stop_server(timeout).await?;
                Ok(format!("stopped: {why}"))
            }
            Act::Rewind { from } => {
                let _beat = self.heartbeat(None);
                let from = self.server_of(from)?;
                self.rewind_and_start(from).await
            }
            Act::Reinit { from, by } => {
                let _beat = self.heartbeat(None);
                let from = self.server_of(from)?;
                // A standby whose upstream removed its WAL is cloned while it runs.
                let removed = self.lock_engine().memory().wal_removed;
                self.stop_server(timeout).await?;
                self.reinit_from(from, by).await?;
                let why = match removed {
                    Some(r) => format!(
                        "node {}'s server removed the WAL this standby needs: ",
                        r.upstream
                    ),
                    None => String::new(),
                };
                Ok(format!(
                    "{why}copied afresh ({}) to stream from {from}; the old data dir is kept \
                     aside",
                    by.word()
                ))
            }
        }
    }

    /// `pg_rewind` from `from`, then a start as its standby; a failure is counted, and
    /// after the last allowed one without reinit the server stays out.
    async fn rewind_and_start(&mut self, from: std::net::SocketAddr) -> Result<String, String> {
        match self.rewind(from).await {
            Ok(()) => {
                self.done(Done::Rewound);
                self.start_server(Some(from), true).await?;
                Ok(format!("rewound from {from}; streams from it"))
            }
            Err(e) => {
                self.done(Done::RewindFailed(e.clone()));
                Err(format!("rewind from {from} failed: {e}"))
            }
        }
    }

    /// While a long program runs (initdb, a clone, a rewind), the last record is sent
    /// again every [`RESEND`] with a fresh time, so readers (`/liveness`) see the
    /// manager alive; stops when the guard drops. With `role` the record says that
    /// role instead, sent at once (an initdb under way: the data dir is no longer
    /// absent).
    fn heartbeat(&self, role: Option<PgRole>) -> Heartbeat {
        let Some((mut last, _)) = self.last_sent.clone() else {
            return Heartbeat(None);
        };
        if let (Some(role), Some(state)) = (role, last.postgres.as_mut()) {
            state.role = role;
        }
        let verdicts = self.m.verdicts.clone();
        let at_once = role.is_some();
        Heartbeat(Some(tokio::spawn(async move {
            if !at_once {
                tokio::time::sleep(RESEND).await;
            }
            loop {
                let mut verdict = last.clone();
                if let Some(state) = verdict.postgres.as_mut() {
                    state.observed_at_ns = BootInstant::now().as_nanos();
                }
                if verdicts.send(verdict).await.is_err() {
                    return;
                }
                tokio::time::sleep(RESEND).await;
            }
        })))
    }

    /// Writes this office's branch for `timeline` into the data dir of every server the
    /// promotion check reached whose timeline is below it, at once; returns the members
    /// that took it.
    async fn write_branch_to_reached(&self, timeline: u32, term: u64) -> Vec<NodeId> {
        let c = &self.m.config;
        // A peer already on `timeline`'s number (as the promotion check just read it)
        // is on another branch's timeline (two promotions on two sides of a fault can
        // pick one number): the record would relabel its own WAL with this office's
        // term, and it would outrank the commits acknowledged here (the simulator's
        // seeds 11325 and 3072). It learns the branch when it follows, from this
        // primary's report.
        let below = self.reached.iter().filter(|&&(_, on)| on < timeline);
        let writes = below.filter_map(|&(m, _)| {
            let listen = self.m.peers.get(m).flatten()?.listen;
            let (user, password) = (c.superuser.user.clone(), self.m.superuser_password.clone());
            let connector = &self.m.connector;
            Some(async move {
                let client =
                    sql::connect(connector, listen, &user, password.as_deref(), SQL_TIMEOUT)
                        .await?;
                sql::write_branch(&client, timeline, term, SQL_TIMEOUT).await?;
                Ok::<NodeId, String>(m)
            })
        });
        let mut knows = Vec::new();
        for result in futures::future::join_all(writes).await {
            match result {
                Ok(m) => knows.push(m),
                Err(e) => tracing::warn!("postgres: the branch did not reach a standby: {e}"),
            }
        }
        knows
    }

    /// Commits the new cluster's identity right after `initdb`
    /// (`postgres_rules::identity_record`); a failure is logged, and the promotion
    /// commits it before it promotes.
    async fn commit_identity(&self, status: &Status, cluster: &Cluster, token: Option<u64>) {
        let (Some(token), Some(system_id)) = (token, control::system_id(&self.m.config.data_dir))
        else {
            return;
        };
        let memory = self.lock_engine().memory().clone();
        let record = rules::identity_record(token, cluster, &memory, system_id);
        if let Err(e) = self.commit_record(status, record).await {
            tracing::warn!("postgres: the new cluster's identity: {e}");
        }
    }

    /// Stores `record` on every voter; it counts once a majority kept it.
    async fn commit_record(&self, status: &Status, record: SyncRecord) -> Result<String, String> {
        let kept = self.m.records.commit(status, &record).await;
        let majority = kept.as_ref().is_ok_and(|k| k.majority());
        self.done(Done::SyncWritten {
            record: record.clone(),
            kept_by_majority: majority,
        });
        let kept = kept?;
        match majority {
            true => {
                tracing::info!(%record, kept = kept.by, voters = kept.voters, "postgres: synchronous record committed");
                Ok(format!("committed the synchronous record ({record})"))
            }
            false => Err(format!(
                "the synchronous record ({record}) was kept by {} of {} voters, not a \
                 majority: the primary keeps waiting for its standbys",
                kept.by, kept.voters
            )),
        }
    }

    /// For a standby that does not stream while the coordinator's server is primary: whether the
    /// primary still holds the WAL it needs next, asked by SQL there (its oldest WAL
    /// segment against the standby's received, else replayed, position). `None`: it
    /// does, or it could not be asked (the upstream may be gone: the standby stays
    /// eligible for the failover).
    async fn wal_removed(
        &mut self,
        server: &Server,
        office: &Office,
        cluster: &Cluster,
        described: Option<&Described>,
    ) -> Option<WalRemoved> {
        let replayed = described.and_then(|d| d.replayed);
        let still = replayed.is_some() && replayed == self.last_replayed.0;
        if !still {
            self.last_replayed = (replayed, Instant::now());
        }
        let archive = described.is_some_and(|d| d.archive);
        let settled = still && (!archive || self.last_replayed.1.elapsed() >= ARCHIVE_SETTLE);
        let (
            Office::Following {
                server: Some(upstream),
                ..
            },
            Server::Running(r),
        ) = (office, server)
        else {
            return None;
        };
        // Whatever its upstream now (a restarted standby may not be repointed yet): it
        // must follow the coordinator's server.
        let stuck = r.in_recovery && !r.streaming;
        let needed = described.map(|d| d.wal)?;
        if !stuck || !cluster.leader_primary {
            return None;
        }
        let listen = self.m.peers.get(*upstream).flatten()?.listen;
        let c = &self.m.config;
        let client = sql::connect(
            &self.m.connector,
            listen,
            &c.superuser.user,
            self.m.superuser_password.as_deref(),
            SQL_TIMEOUT,
        )
        .await
        .ok()?;
        let oldest = match sql::oldest_wal(&client, SQL_TIMEOUT).await {
            Ok(oldest) => oldest?,
            Err(e) => {
                tracing::debug!("postgres: the upstream's oldest WAL: {e}");
                return None;
            }
        };
        (needed < oldest).then_some(WalRemoved {
            upstream: *upstream,
            settled,
        })
    }

    /// Keeps the server's slots one per other data voter (`postgres_rules::slot_changes`);
    /// a failure is logged and tried again at the next look.
    async fn keep_slots(&mut self, cluster: &Cluster, leading_primary: bool) {
        let Ok(client) = self.local_client().await else {
            return;
        };
        let slots = match sql::slots(client, SQL_TIMEOUT).await {
            Ok(slots) => slots,
            Err(e) => {
                tracing::debug!("postgres: {e}");
                return;
            }
        };
        for change in rules::slot_changes(cluster, leading_primary, &slots) {
            match sql::change_slot(client, &change, SQL_TIMEOUT).await {
                Ok(()) => tracing::info!(?change, "postgres: replication slot"),
                Err(e) => tracing::warn!("postgres: {e}"),
            }
        }
    }

    /// Tells the engine how an act ended (src/postgres_rules/engine.rs).
    fn done(&self, done: Done) {
        let rules = self.rules();
        self.lock_engine().on_done(done, &rules);
    }

    /// Writes bully's include file: the upstream, the synchronous names and, on the
    /// leading primary, `bully.epoch` (the office's fencing token, which clients can
    /// read with `current_setting('bully.epoch')` to stamp their writes).
    fn write_conf(
        &self,
        upstream: Option<std::net::SocketAddr>,
        names: &str,
        token: Option<u64>,
    ) -> Result<(), String> {
        let passfile = self.passfile()?;
        self.install_tls()?;
        let upstream = upstream.map(|server| files::Upstream {
            server,
            member: self.member_at(server) != Some(rules::REMOTE_PRIMARY),
        });
        let mut text = files::owned_conf(
            &self.m.config,
            self.m.id,
            upstream,
            passfile.as_deref(),
            names,
        );
        if let Some(token) = token {
            text.push_str(&format!("bully.epoch = '{token}'\n"));
        }
        files::write_conf(&self.m.config.data_dir, &text, self.m.programs.owner())
    }

    /// Creates the (empty) data dir, owned by the server's user, mode 0700.
    fn make_data_dir(&self) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let dir = &self.m.config.data_dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot set the mode of {}: {e}", dir.display()))?;
        owned::give(dir, self.m.programs.owner())
    }

    async fn init_db(&self) -> Result<(), String> {
        let c = &self.m.config;
        let owner = self.m.programs.owner();
        // Resolved before anything is written: a member name that does not resolve
        // leaves no half-made cluster.
        let addresses = secrets::addresses_for(c, &self.m.member_hosts).await?;
        self.make_data_dir()?;
        let mut args = vec![
            "-D".to_string(),
            c.data_dir.display().to_string(),
            "-U".into(),
            c.superuser.user.clone(),
            // Local sockets: trust, as before (bully.conf turns them off unless
            // `unix_socket_directories` is set); every host line by `auth`.
            "--auth-local=trust".into(),
            format!("--auth-host={}", secrets::method(c.auth)),
        ];
        let pwfile = match &self.passwords()?.superuser {
            Some(password) => Some(secrets::initdb_pwfile(c, password, owner)?),
            None => None,
        };
        if let Some(file) = &pwfile {
            args.push(format!("--pwfile={}", file.display()));
        }
        if c.data_checksums {
            args.push("--data-checksums".into());
        }
        args.extend(c.initdb_options.iter().cloned());
        let copy_timeout = Duration::from_millis(c.copy_timeout_ms);
        let ran = self
            .m
            .programs
            .run("initdb", &args, &[], copy_timeout)
            .await;
        if let Some(file) = &pwfile {
            let _ = std::fs::remove_file(file);
        }
        ran?;
        let hba = c.data_dir.join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba).map_err(|e| format!("{}: {e}", hba.display()))?;
        let text = secrets::hba_file(c, &addresses, &text);
        files::write_owned(&hba, &text, owner)?;
        tracing::info!(data_dir = %c.data_dir.display(), auth = secrets::method(c.auth), ?addresses, "postgres: initdb done (a new cluster)");
        Ok(())
    }

    async fn rewind(&self, from: std::net::SocketAddr) -> Result<(), String> {
        let c = &self.m.config;
        let ca = self.install_tls()?.map(|t| t.ca);
        let source = files::conninfo(from, &c.superuser.user, None, "bully_rewind", ca.as_deref())
            + " dbname=postgres";
        let args = vec![
            "-D".to_string(),
            c.data_dir.display().to_string(),
            format!("--source-server={source}"),
        ];
        let source = sql::connect(
            &self.m.connector,
            from,
            &c.superuser.user,
            self.m.superuser_password.as_deref(),
            SQL_TIMEOUT,
        )
        .await?;
        sql::checkpointed(&source, Duration::from_millis(c.action_timeout_ms)).await?;
        drop(source);
        let env = secrets::passfile_env(self.passfile()?.as_deref());
        tracing::info!(%from, "postgres: pg_rewind");
        let copy_timeout = Duration::from_millis(c.copy_timeout_ms);
        let ran = self
            .m
            .programs
            .run("pg_rewind", &args, &env, copy_timeout)
            .await?;
        tracing::info!(
            "postgres: pg_rewind: {}",
            super::programs::last_lines(&ran.stderr, 2)
        );
        Ok(())
    }

    /// The roles' passwords, read from their files now (a changed file counts from the
    /// next use: a start, a repoint, a clone, a rewind, a promotion).
    fn passwords(&self) -> Result<Passwords, String> {
        Passwords::read(&self.m.config, &self.m.node_data_dir)
    }

    /// Writes the passfile from the password files as they are now; its path, `None`
    /// when no role has a password. libpq's programs get it as `PGPASSFILE` rather
    /// than `PGPASSWORD`: one file serves the standby's WAL receiver (`passfile=` in
    /// `primary_conninfo`), `pg_basebackup` and `pg_rewind`, and no password sits in a
    /// process environment, where every child inherits it.
    fn passfile(&self) -> Result<Option<PathBuf>, String> {
        let passwords = self.passwords()?;
        secrets::write_passfile(&self.m.config, &passwords, self.m.programs.owner())
    }

    /// With `[postgres] tls = "on"`: copies the TLS files as they are now beside the
    /// data dir (src/node/postgres/tls.rs), for the server and for libpq's programs
    /// (a clone, a rewind, a standby's WAL receiver); their paths.
    fn install_tls(&self) -> Result<Option<super::tls::Installed>, String> {
        let Some(sources) = &self.m.tls else {
            return Ok(None);
        };
        let dir = &self.m.config.data_dir;
        super::tls::install(sources, dir, self.m.programs.owner()).map(Some)
    }

    /// Starts the server (with `standby`, as a standby of `upstream`; without, as its
    /// data dir left it: a primary's restart), in a process group of its own,
    /// its output appended to `postgres.log` in the node's data dir; returns once its
    /// postmaster runs (not once it accepts connections: the next looks see that).
    async fn start_server(
        &mut self,
        upstream: Option<std::net::SocketAddr>,
        standby: bool,
    ) -> Result<(), String> {
        let c = &self.m.config;
        if standby {
            self.write_conf(upstream, "", None)?;
            files::standby_signal(&c.data_dir, self.m.programs.owner())?;
        }
        if self.tasks.is_stopped() {
            return Err("the node is stopping: the server stays stopped".into());
        }
        postmaster::clear_stale(&c.data_dir)?;
        let log_path = self.m.node_data_dir.join("postgres.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = self.m.programs.command(
            "postgres",
            &["-D".to_string(), c.data_dir.display().to_string()],
            &[],
        );
        command.stdout(log).stderr(err).process_group(0);
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start postgres: {e}"))?;
        let pid = child.id();
        drop(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if postmaster::running(&c.data_dir).is_some() {
                tracing::info!(?pid, ?upstream, "postgres: started as a standby");
                return Ok(());
            }
            if pid.is_some_and(|p| kill(Pid::from_raw(p as i32), None).is_err()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(format!(
            "postgres did not start; see {}",
            log_path.display()
        ))
    }

    /// Waits, at most `within`, until the server just started answers SQL. A fresh copy
    /// replays its WAL before it lets anyone in, and every look until then finds it
    /// silent: two such looks in quick succession would make a coordinator that copied
    /// (a standby cluster's first standby leader) resign, its keeper fence the copy, and
    /// the next coordinator copy the remote again. Past `within` the looks judge it as
    /// any silent server.
    async fn wait_answering(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline && !self.tasks.is_stopped() {
            if self.local_client().await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Fast shutdown; after `timeout`, every process of the server's group is killed.
    async fn stop_server(&mut self, timeout: Duration) -> Result<(), String> {
        self.local = None;
        match postmaster::stop(&self.m.config.data_dir, timeout).await? {
            postmaster::Stopped::Killed(pid) => Err(format!(
                "the server (PID {pid}) did not stop within {timeout:?}; killed"
            )),
            _ => Ok(()),
        }
    }

    /// Sends the verdict and the status record when they changed (at least every
    /// second, so readers see the record is fresh).
    async fn report(&mut self, eligible: bool, server: &Server, described: Option<&Described>) {
        let pending_restart = self.pending_restart(server).await;
        let c = &self.m.config;
        let role = match server {
            Server::Absent if self.m.held.system_id().is_some() => PgRole::Missing,
            Server::Absent => PgRole::Absent,
            Server::Stopped { .. } => PgRole::Stopped,
            Server::Unreachable => PgRole::Unreachable,
            Server::Running(r) if r.in_recovery => PgRole::Replica,
            Server::Running(_) => PgRole::Primary,
        };
        let (position, timeline) = match server {
            Server::Running(r) => (Some(r.wal), Some(r.timeline)),
            _ => (None, None),
        };
        let coordinator = self.m.status.borrow().coordinator();
        let leader_primary = coordinator
            .and_then(|l| self.m.peers.get(l).flatten())
            .filter(|s| self.serves(s));
        let leader_wal = leader_primary.as_ref().and_then(|s| s.wal_position);
        let streaming_from = described
            .filter(|d| d.streaming)
            .and_then(|d| d.upstream)
            .and_then(|up| self.member_at(up));
        // Named by the primary it streams from: Patroni's quorum standby.
        let quorum_standby = role == PgRole::Replica
            && streaming_from.is_some()
            && streaming_from == coordinator
            && leader_primary
                .as_ref()
                .and_then(|p| p.synchronous_standby_names.as_deref())
                .is_some_and(|names| rules::names_standby(names, self.m.id));
        let wal = described.map(|d| d.wal);
        let state = PgState {
            listen: c.reached_at(),
            role,
            timeline,
            branch: position.map(|p| p.branch),
            wal_position: wal,
            replayed: described.and_then(|d| d.replayed),
            lag_bytes: match (role, leader_wal, described.and_then(|d| d.replayed)) {
                (PgRole::Replica, Some(primary), Some(replayed)) => {
                    Some(primary.saturating_sub(replayed))
                }
                _ => None,
            },
            streaming_from,
            synchronous_standby_names: described
                .filter(|d| !d.in_recovery)
                .map(|d| d.synchronous_standby_names.clone()),
            note: self.note.clone(),
            observed_at_ns: BootInstant::now().as_nanos(),
            pending_restart,
            initdb_unpromoted: self.initdb_unpromoted(),
            system_id: (self.system_id != 0).then_some(self.system_id),
            other_cluster: self.other_cluster,
            parameters_list: self.parameters_list,
            parameters_refused: self.parameters_refused.as_ref().map(|(_, why)| why.clone()),
            synchronous: Some(self.synchronous),
            quorum_standby,
            tags: c.tags,
        };
        let fresh_for = 2 * RESEND.max(Duration::from_millis(c.interval_ms)) + SQL_TIMEOUT;
        let verdict = Verdict {
            generation: self.m.generation,
            healthy: eligible,
            estimate: Some(Measured {
                value: position.map(|p| rules::election_rank(p, c.tags.failover_priority)),
                fresh_until: BootInstant::now() + fresh_for,
            }),
            postgres: Some(state),
        };
        let due = match &self.last_sent {
            None => true,
            Some((last, at)) => !last.same_as(&verdict) || at.elapsed() >= RESEND,
        };
        if due {
            self.last_sent = Some((verdict.clone(), Instant::now()));
            let _ = self.m.verdicts.send(verdict).await;
        }
    }

    /// The parameters a running server holds for its next restart; none when it does
    /// not run or does not answer (the report says so by its role).
    async fn pending_restart(&mut self, server: &Server) -> Vec<String> {
        if !matches!(server, Server::Running(_)) {
            return Vec::new();
        }
        match self.local_client().await {
            Ok(client) => parameters::pending(client, SQL_TIMEOUT)
                .await
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// Where member `id`'s server is reached, from its report.
    fn server_of(&self, id: NodeId) -> Result<std::net::SocketAddr, String> {
        if id == rules::REMOTE_PRIMARY {
            return match &self.standby_cluster {
                Some(RemotePrimary {
                    addr: Some(addr), ..
                }) => Ok(*addr),
                Some(RemotePrimary { name, .. }) => Err(format!(
                    "the remote primary {name} (postgres.standby_cluster) does not resolve"
                )),
                None => Err("postgres.standby_cluster is not set: no remote primary".into()),
            };
        }
        self.m
            .peers
            .get(id)
            .flatten()
            .map(|s| s.listen)
            .ok_or_else(|| format!("node {id}'s server address is not known (no fresh report)"))
    }

    /// Whether a member's reported server serves the cluster: a primary, or, in a
    /// standby cluster, a running standby (the coordinator's is the standby leader).
    fn serves(&self, state: &PgState) -> bool {
        match self.standby_cluster {
            Some(_) => matches!(state.role, PgRole::Primary | PgRole::Replica),
            None => state.role == PgRole::Primary,
        }
    }

    /// The member whose server listens at `addr`, from the members' reports.
    fn member_at(&self, addr: std::net::SocketAddr) -> Option<NodeId> {
        if self
            .standby_cluster
            .as_ref()
            .is_some_and(|r| r.addr == Some(addr))
        {
            return Some(rules::REMOTE_PRIMARY);
        }
        let status = self.m.status.borrow();
        status.peers.iter().map(|p| p.id).find(|&id| {
            self.m
                .peers
                .get(id)
                .flatten()
                .is_some_and(|s| s.listen == addr)
        })
    }
}

/// The member a standby's application name (`bully_<id>`) stands for.
fn member_named(name: &str) -> Option<NodeId> {
    name.strip_prefix("bully_")?.parse().ok()
}

/// Where one member's server's WAL ends, read from the server itself by SQL: its
/// position, and its branch from its own `bully.branch` (not from its report, which
/// may be a look old), with its timeline; `None` when it does not answer.
async fn peer_position(
    reported: &PgState,
    own_system: u64,
    (connector, user, password): (&super::tls::Connector, &str, Option<&str>),
) -> Option<(Position, u32)> {
    let client = sql::connect(connector, reported.listen, user, password, SQL_TIMEOUT)
        .await
        .ok()?;
    let d = sql::describe(&client, SQL_TIMEOUT).await.ok()?;
    if own_system != 0 && d.system_id != own_system {
        tracing::debug!(
            listen = %reported.listen,
            system = d.system_id,
            own_system,
            "postgres: a peer's server holds another cluster: not counted as reached"
        );
        return None;
    }
    let branch = sql::wal_branch(&client, d.timeline, SQL_TIMEOUT)
        .await
        .ok()?;
    Some((Position { branch, lsn: d.wal }, d.timeline))
}

/// The other members whose standbys stream from this primary now, by the application
/// names `pg_stat_replication` shows (none on a standby).
fn streaming_standbys(described: Option<&Described>) -> Vec<NodeId> {
    described
        .filter(|d| !d.in_recovery)
        .map(|d| {
            d.standbys
                .iter()
                .filter_map(|(name, _)| member_named(name))
                .collect()
        })
        .unwrap_or_default()
}

/// The engine's clock (src/postgres_rules/engine.rs, `Look::now_ms`): the boot clock in
/// ms, which counts a suspension too.
fn engine_now_ms() -> u64 {
    BootInstant::now().as_nanos() / 1_000_000
}
