//! The cluster under test, shared by the chaos run and the benchmark: real node
//! processes (optionally behind the relay), the history being collected, the latest
//! view of every node, and the steps that break and mend it, each stamped and recorded.

use super::collect::Collector;
use super::office;
use super::plan::{rolled_timing, Availability, Step};
use super::relay::Relay;
use super::report::picture::{self, Picture};
use super::report::{Report, RunParams, StepLine};
use super::setup::RunSetup;
use super::timeline::{self, Executed, Views};
use super::verdict::{self, Verdict};
use crate::client::{Client, ClientError};
use crate::cluster::{Cluster, ClusterSpec};
use crate::history::{Entry, Record};
use crate::protocol::{Change, Epoch, Fact, Millis, Mode, NodeId, Preempt, Timing};
use crate::wall_clock::wall_ms;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How often the harness reads the logs while waiting for a condition.
const POLL: Duration = Duration::from_millis(10);

/// How long bringing the cluster up and electing the first coordinator may take: the
/// I5 bound does not cover starting N processes that each open a TLS connection to
/// every peer (on 2 cores, 32 nodes behind the relay take a few seconds), so the first
/// election gets its own generous limit, growing with the node count and with the
/// mode's bound (quorum mode's start-up hold-off and pre-vote add to it).
pub fn first_election_limit(timing: &Timing, nodes: u64, mode: Mode) -> Duration {
    Duration::from_millis(5_000 + 4 * timing.convergence_bound_in(mode) + 250 * nodes)
}

/// How many advisory warnings the report explains (a 32-node start-up can raise
/// hundreds of them, all alike).
const MAX_WARNINGS: usize = 20;

/// What to build.
#[derive(Debug, Clone)]
pub struct HarnessSpec {
    pub nodes: u64,
    pub timing: Timing,
    /// The election mode every node runs.
    pub mode: Mode,
    pub binary: PathBuf,
    pub dir: PathBuf,
    /// Route every peer link through a relay (needed for partitions).
    pub relay: bool,
    /// Seeds the relay's loss decisions.
    pub seed: u64,
    /// Give every node an `[http]` endpoint on a free loopback port, so a prober can
    /// read `/coordinator` the way a load balancer does.
    pub http: bool,
    /// Give every node an `on_demoted` hook that sleeps (see [`super::plan::FaultKind::SlowHooks`]).
    pub slow_hooks: bool,
    /// The run rolls timings (see [`super::plan::FaultKind::Config`]): the judge bounds
    /// leases and convergence by the wider [`rolled_timing`].
    pub config_roll: bool,
}

impl HarnessSpec {
    /// The cluster a run's `setup` asks for, without HTTP endpoints; `relay` routes its
    /// links through the relay (the fault runner needs it, the benches do not).
    pub fn of(setup: &RunSetup, relay: bool) -> HarnessSpec {
        HarnessSpec {
            nodes: setup.nodes,
            timing: setup.timing,
            mode: setup.mode,
            binary: setup.binary.clone(),
            dir: setup.dir.clone(),
            relay,
            seed: setup.seed,
            http: false,
            slow_hooks: false,
            config_roll: false,
        }
    }
}

/// A running cluster and what has been seen and done to it.
pub struct Harness {
    pub cluster: Cluster,
    relay: Option<Relay>,
    collector: Collector,
    views: Views,
    availability: Availability,
    executed: Vec<Executed>,
    /// Every node the harness ever ran, members or not, ascending.
    ids: Vec<NodeId>,
    /// How many nodes it started with (IDs 1..=nodes).
    nodes: u64,
    timing: Timing,
    /// What the judge bounds leases and convergence by: `timing`, or the wider
    /// [`rolled_timing`] in a run that rolls timings.
    judge_timing: Timing,
    mode: Mode,
    /// When the nodes were started (wall ms): time zero of the report.
    pub origin_ms: Millis,
    /// Problems outside the invariants: a node that exited by itself, a failed step.
    pub anomalies: Vec<String>,
    /// Declarations read from the event logs so far (each is one won pre-vote or
    /// election): the benches count coordinator changes with it.
    pub declarations: usize,
    /// How the `store` faults ended, by outcome, for the report's step counts.
    damage_outcomes: BTreeMap<&'static str, usize>,
    /// The seed the slow hooks were drawn from, when the run has them: a member added
    /// later gets its hook from it too.
    slow_hooks: Option<u64>,
}

impl Harness {
    /// Writes certs and configs, binds the relay (if asked) and starts every node.
    pub async fn start(spec: &HarnessSpec) -> Result<Harness> {
        let ids: Vec<NodeId> = (1..=spec.nodes).collect();
        let cluster_spec = ClusterSpec {
            nodes: spec.nodes,
            timing: spec.timing,
            preempt: Preempt::Always,
            mode: spec.mode,
            binary: spec.binary.clone(),
            dir: spec.dir.clone(),
        };
        let (mut cluster, relay) = if spec.relay {
            let mut relay = Relay::bind(&ids)
                .await
                .context("cannot bind the relay's sockets on 127.0.0.1")?;
            let cluster =
                Cluster::create_routed(cluster_spec, |from, to, _| relay.front_addr(from, to))?;
            let targets: BTreeMap<NodeId, _> =
                ids.iter().map(|&id| (id, cluster.addr(id))).collect();
            relay
                .start(&targets, spec.seed)
                .await
                .context("cannot start the relay")?;
            (cluster, Some(relay))
        } else {
            (Cluster::create(cluster_spec)?, None)
        };
        let data_dirs: Vec<(NodeId, PathBuf)> =
            ids.iter().map(|&id| (id, cluster.data_dir(id))).collect();
        let collector = Collector::new(&spec.dir, &data_dirs)
            .with_context(|| format!("cannot write the runner's log in {}", spec.dir.display()))?;
        if spec.http {
            let listens = crate::ports::free_tcp_addrs(ids.len())?;
            for (&id, listen) in ids.iter().zip(listens) {
                cluster
                    .edit_config(id, |c| c.http = Some(crate::config::HttpConfig::on(listen)))?;
            }
        }
        if spec.slow_hooks {
            for &id in &ids {
                slow_down_hooks(&cluster, id, &spec.timing, spec.seed)?;
            }
        }
        let origin_ms = wall_ms();
        for &id in &ids {
            cluster.start(id)?;
        }
        Ok(Harness {
            cluster,
            relay,
            collector,
            views: Views::new(&ids),
            availability: Availability::default(),
            executed: Vec::new(),
            timing: spec.timing,
            judge_timing: match spec.config_roll {
                true => rolled_timing(&spec.timing),
                false => spec.timing,
            },
            mode: spec.mode,
            ids,
            nodes: spec.nodes,
            origin_ms,
            anomalies: Vec::new(),
            declarations: 0,
            damage_outcomes: BTreeMap::new(),
            slow_hooks: spec.slow_hooks.then_some(spec.seed),
        })
    }

    /// Takes a membership step ([`Step::Add`], [`Step::Remove`], [`Step::Replace`])
    /// the way an operator would with `bully member` (docs/design.md#membership), for
    /// `bully local` and the chaos runner alike, and returns the cluster's answer:
    /// - an add launches the node ([`Harness::launch_member`]), asks the cluster to add
    ///   it and, once committed, records the step; if refused or not answered in time,
    ///   the new process is stopped again;
    /// - a removal asks first (the coordinator refuses to remove itself) and, once
    ///   committed, records the step, which stops the process;
    /// - a replacement is the lost disk: the step is recorded first (the node is killed
    ///   and its data dir wiped), then the cluster is asked to make it a learner; it
    ///   stays down until started (a [`Step::Start`]), on its empty store.
    pub async fn change_step(&mut self, step: Step, timeout: Duration) -> Result<String> {
        let change = match step {
            Step::Add(id) => {
                self.launch_member(id).await?;
                let addr = self.dial_addr(id).await?.to_string();
                let seat = crate::protocol::Seat::Voter;
                Change::Add { id, addr, seat }
            }
            Step::Remove(id) | Step::Replace(id) if !self.members().contains(&id) => {
                anyhow::bail!(
                    "node {id} is not a member; members are {:?}",
                    self.members()
                )
            }
            Step::Remove(id) => Change::Remove { id },
            Step::Replace(id) => {
                // A killed or paused node's last view may still say coordinator.
                self.poll();
                let role = self.views.get(id).map(|v| v.role);
                let up = self.available().contains(&id);
                if up && role == Some(crate::protocol::Role::Coordinator) {
                    anyhow::bail!(
                        "node {id} is the coordinator: the cluster refuses to replace it \
                         (step it down first)"
                    );
                }
                self.take(step.clone())?;
                Change::Replace { id }
            }
            other => anyhow::bail!("`{other}` is no membership step"),
        };
        let answer = self.change_with_retries(change, timeout).await;
        match (answer, step) {
            (Ok(text), Step::Replace(_)) => Ok(text),
            (Ok(text), step) => self.take(step).map(|()| text),
            (Err(e), Step::Add(id)) => {
                let _ = self.cluster.stop(id, Duration::from_secs(3));
                Err(e.context(format!("node {id} was not added (its process is stopped)")))
            }
            (Err(e), Step::Replace(id)) => Err(e.context(format!(
                "node {id} was not replaced (it is down, its store wiped)"
            ))),
            (Err(e), step) => Err(e.context(format!("`{step}` was not done"))),
        }
    }

    /// Asks for `change` until it is done or `timeout` has passed, as an operator would
    /// retry: a change that met no coordinator, or whose coordinator left office before
    /// it was committed (a kill, a cut or a lapsed lease during the change), is asked
    /// again once a coordinator is expected. A retry that finds the change already made
    /// (an add or a removal stored before the coordinator left) counts as done.
    async fn change_with_retries(&mut self, change: Change, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        let id = change.subject();
        let mut retried = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let asked = left.max(Duration::from_millis(500));
            let e = match self.change_members(change.clone(), asked).await {
                Ok(text) => return Ok(text),
                Err(e) => e,
            };
            let text = format!("{e:#}");
            match change {
                Change::Add { .. } if retried && text.contains("already a member") => {
                    let list = self.wait_for_seat(id, asked).await?;
                    return Ok(format!(
                        "node {id} joined as a voting member (member list {list}) on a retry"
                    ));
                }
                Change::Remove { .. } if retried && text.contains("not a member") => {
                    return Ok(format!("node {id} left the cluster on a retry"));
                }
                _ => {}
            }
            if !passing(&e) || Instant::now() >= deadline {
                return Err(e);
            }
            retried = true;
            tokio::time::sleep(POLL * 10).await;
            if let Some(leader) = self.expected_leader() {
                let left = deadline.saturating_duration_since(Instant::now());
                self.wait_for_leader(leader, left).await;
            }
        }
    }

    /// Takes one step ([`Harness::execute`]); an anomaly it raised is the error.
    pub fn take(&mut self, step: Step) -> Result<()> {
        let before = self.anomalies.len();
        self.execute(step);
        match self.anomalies.get(before..).and_then(|new| new.last()) {
            Some(anomaly) => Err(anyhow::anyhow!("{anomaly}")),
            None => Ok(()),
        }
    }

    /// Waits until node `id`'s own member list shows it seated (a voter, no learner),
    /// as a replaced node is once it has caught up; returns that list's identity.
    pub async fn wait_for_seat(&self, id: NodeId, timeout: Duration) -> Result<String> {
        let started = Instant::now();
        loop {
            if let Ok(status) = self.cluster.status(id, Duration::from_millis(500)).await {
                let list = status
                    .members
                    .filter(|l| l.get(id).is_some_and(|m| !m.learner));
                if let Some(list) = list {
                    return Ok(list.id.to_string());
                }
            }
            if started.elapsed() >= timeout {
                anyhow::bail!("node {id} has not taken its seat within {timeout:?}");
            }
            tokio::time::sleep(POLL * 10).await;
        }
    }

    /// How many nodes the harness started with (IDs 1..=nodes).
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// The HTTP address of node `id`, when the harness was started with `http`.
    pub fn http_addr(&self, id: NodeId) -> Option<std::net::SocketAddr> {
        let config = crate::config::load(&self.cluster.config_path(id)).ok()?;
        config.http.map(|h| h.listen)
    }

    /// Node IDs, ascending.
    pub fn ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// Writes what node `id` needs to join (certificate, config listing the current
    /// members at the addresses it is to dial, data dir; [`Cluster::add_member`]),
    /// follows its event log and starts it; behind the relay, every link of it goes
    /// through the relay's doors and the cut in effect applies to it
    /// ([`Harness::dial_addr`]). It is no member yet: the [`Step::Add`] taken once the
    /// cluster committed the change makes it one in the runner's model. A node added
    /// before and removed since joins again on an empty store.
    pub async fn launch_member(&mut self, id: NodeId) -> Result<()> {
        if self.members().contains(&id) {
            anyhow::bail!("node {id} is a member already");
        }
        let mut peers = Vec::new();
        for p in self.members() {
            peers.push((p, self.dial_addr(p).await?));
        }
        let had_store = self.ids.contains(&id) && self.cluster.data_dir(id).exists();
        self.poll();
        self.cluster.add_member(id, &peers)?;
        if self.availability.rolls_to_rolled() {
            let timing = rolled_timing(&self.timing);
            self.cluster.edit_config(id, |c| c.timing = timing)?;
        }
        if let Some(seed) = self.slow_hooks {
            slow_down_hooks(&self.cluster, id, &self.timing, seed)?;
        }
        if had_store {
            self.follow_new_store(id);
        } else {
            self.collector.follow(id, &self.cluster.data_dir(id));
        }
        if !self.ids.contains(&id) {
            self.ids.push(id);
            self.ids.sort_unstable();
        }
        self.dial_addr(id).await?;
        self.cut_like_the_rest(id);
        self.cluster.start(id)
    }

    /// Where the members are to dial node `id` when only the member list names it (a
    /// node added at runtime): the relay's door to it, else its own address.
    async fn dial_addr(&mut self, id: NodeId) -> Result<std::net::SocketAddr> {
        let own = self.cluster.addr(id);
        match &mut self.relay {
            Some(relay) => relay
                .door(id, own)
                .await
                .with_context(|| format!("cannot open the relay's door to node {id}")),
            None => Ok(own),
        }
    }

    /// Cuts node `id`'s links as the cut in effect cuts the members not cut off (a
    /// partition's majority side, or the others of a deaf node): a node added during a
    /// partition joins the side that may elect.
    fn cut_like_the_rest(&self, id: NodeId) {
        let Some(relay) = &self.relay else { return };
        let cut = self.executed.iter().rev().find_map(|s| match &s.step {
            Step::Partition(_) | Step::Deafen(_) | Step::Heal => Some(&s.step),
            _ => None,
        });
        match cut {
            Some(Step::Partition(side)) => relay.partition(side, &[id]),
            Some(Step::Deafen(deaf)) => relay.deafen(*deaf, &[id]),
            _ => {}
        }
    }

    /// The checker starts a new per-node history here (I1, I2), as for any lost store,
    /// and the node's new event log is followed from its start. The cluster's own
    /// record of the loss is not in the collected history.
    fn follow_new_store(&mut self, id: NodeId) {
        self.collector.record(id, Record::StoreLost);
        self.collector.follow(id, &self.cluster.data_dir(id));
    }

    /// The members as the runner last changed them (1..=nodes, plus adds, less
    /// removals), ascending.
    pub fn members(&self) -> Vec<NodeId> {
        self.availability.members(self.nodes)
    }

    /// Asks the cluster (any member that answers; it passes the change to the
    /// coordinator) to change its member list, and waits for the answer: once
    /// committed, or refused.
    pub async fn change_members(&self, change: Change, timeout: Duration) -> Result<String> {
        let mut last = anyhow::anyhow!("no member to ask");
        for id in self.available().into_iter().rev() {
            let addr = self.cluster.addr(id);
            let tls = self.cluster.client_tls();
            let asked = async {
                let client = Client::connect(addr, tls, Some(id), timeout).await?;
                anyhow::Ok(client.change_members(change.clone()).await?)
            };
            match tokio::time::timeout(timeout, asked).await {
                Ok(Ok(text)) => return Ok(text),
                Ok(Err(e)) if e.downcast_ref::<ClientError>().is_some_and(refused) => {
                    return Err(e)
                }
                Ok(Err(e)) => last = e,
                Err(_) => last = anyhow::anyhow!("node {id} gave no answer within {timeout:?}"),
            }
        }
        Err(last)
    }

    /// Reads what the nodes logged since the last call.
    pub fn poll(&mut self) {
        for entry in self.collector.poll() {
            if matches!(entry.record, Record::Fact(Fact::Declared { .. })) {
                self.declarations += 1;
            }
            self.views.apply(&entry);
        }
    }

    /// Nodes that are running, not paused and not cut off, ascending.
    pub fn available(&self) -> Vec<NodeId> {
        self.availability.available(self.nodes)
    }

    /// The node the available ones must end up following, if one is expected (in
    /// quorum mode only while a majority is available).
    pub fn expected_leader(&self) -> Option<NodeId> {
        self.availability.expected_leader(self.nodes, self.mode)
    }

    /// The election mode the nodes run.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The coordinator every available node follows, if they agree.
    pub fn agreed(&self) -> Option<(NodeId, Epoch)> {
        self.views.agreed(&self.available())
    }

    /// Polls the logs until every available node follows `leader`, or `timeout`.
    /// Returns whether they did.
    pub async fn wait_for_leader(&mut self, leader: NodeId, timeout: Duration) -> bool {
        let started = Instant::now();
        loop {
            self.poll();
            if self.agreed().map(|(l, _)| l) == Some(leader) {
                return true;
            }
            if started.elapsed() >= timeout {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Takes one step, stamping it (and writing the runner's fault records) so the
    /// history shows it in the right place. A failed step becomes an anomaly.
    pub fn execute(&mut self, step: Step) {
        self.notice_exits();
        let at_ms = match self.try_execute(&step) {
            Ok(at_ms) => at_ms,
            Err(e) => {
                self.anomalies.push(format!("step `{step}` failed: {e:#}"));
                wall_ms()
            }
        };
        self.availability.apply(&step);
        self.executed.push(Executed { at_ms, step });
    }

    /// Runs a step; returns its time. Records for kills and pauses are stamped after
    /// the signal (nothing the node logs later can predate them); records for
    /// resumes, partitions and heals before it (nothing the node logs in reaction
    /// can predate them).
    fn try_execute(&mut self, step: &Step) -> Result<Millis> {
        let c = &mut self.collector;
        Ok(match step {
            Step::Kill(n) => {
                self.cluster.kill(*n)?;
                c.record(*n, Record::Crashed).at_ms
            }
            Step::Restart(n) => {
                self.cluster.kill(*n)?;
                let at = c.record(*n, Record::Crashed).at_ms;
                self.cluster.start(*n)?;
                at
            }
            Step::Pause(n) => {
                self.cluster.pause(*n)?;
                c.record(*n, Record::Paused).at_ms
            }
            Step::Start(n) => {
                let at = wall_ms();
                self.cluster.start(*n)?;
                at
            }
            Step::Resume(n) => {
                let at = c.record(*n, Record::Resumed).at_ms;
                self.cluster.resume(*n)?;
                at
            }
            Step::Partition(side) => {
                let relay = self.relay.as_ref().context("partitions need the relay")?;
                let rest = others(&self.availability.members(self.nodes), side);
                let mut at = wall_ms();
                for (nodes, cut_off) in [(side, &rest), (&rest, side)] {
                    for &n in nodes.iter() {
                        let record = Record::Partitioned {
                            cut_off: cut_off.clone(),
                        };
                        at = at.min(c.record(n, record).at_ms);
                    }
                }
                relay.partition(side, &rest);
                at
            }
            Step::Deafen(n) => {
                let relay = self
                    .relay
                    .as_ref()
                    .context("one-way links need the relay")?;
                let rest = others(&self.availability.members(self.nodes), &[*n]);
                // Only the deaf node is cut off from anyone: the others still hear it.
                let record = Record::Partitioned {
                    cut_off: rest.clone(),
                };
                let at = c.record(*n, record).at_ms;
                relay.deafen(*n, &rest);
                at
            }
            Step::Add(n) => {
                // Started by `launch_member` before the cluster was asked.
                let at = wall_ms();
                if !self.cluster.is_running(*n) {
                    self.cluster.start(*n)?;
                }
                at
            }
            Step::Remove(n) => {
                let at = wall_ms();
                if self.cluster.is_running(*n) {
                    self.cluster.stop(*n, Duration::from_secs(3))?;
                }
                at
            }
            Step::Replace(n) => {
                let at = self.kill_if_running(*n)?;
                self.poll();
                self.cluster.lose_store(*n)?;
                self.follow_new_store(*n);
                at
            }
            Step::Damage(n) => {
                let at = self.kill_if_running(*n)?;
                self.damage(*n)?;
                at
            }
            Step::Reconfigure(n) => self.reconfigure(*n)?,
            Step::Heal => {
                let relay = self.relay.as_ref().context("healing needs the relay")?;
                let at = wall_ms();
                for n in self.availability.members(self.nodes) {
                    c.record(n, Record::Healed);
                }
                relay.heal();
                at
            }
        })
    }

    /// The timing a [`Step::Reconfigure`] of node `n` rolls it to: the other one.
    fn roll_target(&self, n: NodeId) -> Timing {
        match self.availability.is_rolled(n) {
            true => self.timing,
            false => rolled_timing(&self.timing),
        }
    }

    /// Before a [`Step::Reconfigure`] of node `n`: `bully config set` of the timing it
    /// rolls to, through any member (the timing is cluster state, so the file edit
    /// that follows counts for nothing: docs/design.md#cluster-settings). The answer
    /// once committed, or why not (a cut or a kill may keep it from committing).
    pub async fn set_timing_for(&self, n: NodeId, timeout: Duration) -> Result<String> {
        let timing = self.roll_target(n);
        let set = vec![
            (
                "timing.heartbeat_ms".into(),
                timing.heartbeat_ms.to_string(),
            ),
            (
                "timing.suspect_after_ms".into(),
                timing.suspect_after_ms.to_string(),
            ),
        ];
        self.change_members(Change::Settings { set }, timeout).await
    }

    /// A [`Step::Reconfigure`]: stops node `n` if it runs (SIGTERM, or SIGKILL when it
    /// is paused and on every other step taken), switches its config to the other
    /// timing and starts it; the time it went down, or now.
    fn reconfigure(&mut self, n: NodeId) -> Result<Millis> {
        let kill = self.cluster.is_paused(n) || self.executed.len() % 2 == 1;
        let at = match self.cluster.is_running(n) && !kill {
            true => {
                let at = wall_ms();
                self.cluster.stop(n, STOP_WAIT)?;
                at
            }
            false => self.kill_if_running(n)?,
        };
        let timing = self.roll_target(n);
        self.cluster.edit_config(n, |c| c.timing = timing)?;
        self.cluster.start(n)?;
        Ok(at)
    }

    /// Kills node `n` if it runs, recording the crash; the time of the kill, or now.
    fn kill_if_running(&mut self, n: NodeId) -> Result<Millis> {
        if !self.cluster.is_running(n) {
            return Ok(wall_ms());
        }
        self.cluster.kill(n)?;
        Ok(self.collector.record(n, Record::Crashed).at_ms)
    }

    /// The rest of a [`Step::Damage`] once the node is down: cuts its `db`, starts it and
    /// waits for it to refuse the store (exit 2), then wipes the refused store so a later
    /// start recovers it. A node still running after [`DAMAGE_WAIT`] found its store
    /// fit (the cut kept every current write; the checker would see a store that went
    /// back): it is killed again and keeps its store. Any other exit is an anomaly.
    fn damage(&mut self, n: NodeId) -> Result<()> {
        self.poll();
        self.cluster.damage_store(n)?;
        let outcome = match self.cluster.start_awaiting_exit(n, DAMAGE_WAIT)? {
            Some(status) => {
                if status.code() != Some(2) {
                    self.anomalies.push(format!(
                        "node {n} exited with {status} on its damaged store, not with 2 \
                         (store refused); see {}",
                        self.cluster.log_path(n).display()
                    ));
                }
                self.cluster.lose_store(n)?;
                self.follow_new_store(n);
                "damage refused"
            }
            None => {
                self.cluster.kill(n)?;
                self.collector.record(n, Record::Crashed);
                "damage passed its check"
            }
        };
        *self.damage_outcomes.entry(outcome).or_insert(0) += 1;
        Ok(())
    }

    /// Notes nodes the model believes running that are not (they exited by
    /// themselves: a panic or a fatal error, worth a look at their log).
    pub fn notice_exits(&mut self) {
        let model = self.availability.clone();
        for &id in &self.ids {
            // A node launched for an add that failed was stopped: it is no member.
            let should_run = model.members(self.nodes).contains(&id) && !model.is_killed(id);
            if should_run && !self.cluster.is_running(id) && !self.reported_exit(id) {
                self.anomalies.push(format!(
                    "node {id} exited by itself; see {}",
                    self.cluster.log_path(id).display()
                ));
            }
        }
    }

    fn reported_exit(&self, id: NodeId) -> bool {
        let prefix = format!("node {id} exited by itself");
        self.anomalies.iter().any(|a| a.starts_with(&prefix))
    }

    /// The steps taken so far.
    pub fn executed(&self) -> &[Executed] {
        &self.executed
    }

    /// The history so far, time-ordered.
    pub fn history(&self) -> Vec<Entry> {
        self.collector.history()
    }

    /// Log lines that did not parse so far.
    pub fn bad_lines(&self) -> usize {
        self.collector.bad_lines
    }

    /// Runs the checker over everything so far, with I5 windows up to `end_ms`; the
    /// first window runs from the start with every node live.
    pub fn judge(&self, end_ms: Millis, slack_ms: Millis) -> Verdict {
        let history = self.history();
        let first_limit = first_election_limit(&self.timing, self.nodes, self.mode);
        let mut windows = vec![verdict::Window {
            from_ms: self.origin_ms,
            to_ms: self.executed.first().map_or(end_ms, |s| s.at_ms),
            live: (1..=self.nodes).collect(),
            deadline_ms: Some(self.origin_ms + first_limit.as_millis() as Millis),
        }];
        windows.extend(verdict::windows(
            &self.executed,
            self.nodes,
            end_ms,
            self.mode,
        ));
        // Soft I2 assumes delays below T/2: allow a quarter of the slack for them.
        verdict::judge(
            &history,
            &windows,
            &self.judge_timing,
            self.mode,
            slack_ms,
            slack_ms / 4,
        )
    }

    /// Stops every node cleanly (paused ones are continued first).
    pub fn stop_all(&mut self) {
        for id in self.ids.clone() {
            if self.cluster.is_running(id) {
                let _ = self.cluster.stop(id, Duration::from_secs(3));
            }
        }
    }

    /// Ends a run: a last look at the logs and the processes, the verdict and figures
    /// up to now (`params` gets the seconds since the cluster started), then every node
    /// is stopped.
    pub fn finish(&mut self, params: impl FnOnce(f64) -> RunParams) -> Report {
        self.poll();
        self.notice_exits();
        let end_ms = wall_ms();
        let elapsed_s = end_ms.saturating_sub(self.origin_ms) as f64 / 1000.0;
        let report = self.report(params(elapsed_s), end_ms);
        self.stop_all();
        report
    }

    /// Judges the whole history up to `end_ms` and gathers the figures.
    pub fn report(&self, params: RunParams, end_ms: Millis) -> Report {
        let history = self.history();
        let verdict = self.judge(end_ms, params.slack_ms);
        let timeline = timeline::analyse(&history, &self.ids, &self.executed, end_ms, self.mode);
        let offices = office::figures(&history, &self.ids, &self.judge_timing, self.mode, end_ms);
        let (failover, reclaim, share) = Report::figures(&timeline, end_ms);
        let mut faults = BTreeMap::new();
        for step in &self.executed {
            *faults.entry(step.step.name().to_string()).or_insert(0) += 1;
        }
        for (outcome, count) in &self.damage_outcomes {
            faults.insert(outcome.to_string(), *count);
        }
        let explain = |list: &[crate::checker::Violation]| {
            list.iter()
                .map(|v| verdict::explain(v, &history, self.origin_ms))
                .collect::<Vec<_>>()
        };
        let violations = explain(&verdict.violations);
        Report {
            verdict: if violations.is_empty() && self.anomalies.is_empty() {
                "pass"
            } else {
                "fail"
            },
            params,
            faults,
            steps: self
                .executed
                .iter()
                .map(|s| StepLine {
                    at_s: (s.at_ms as f64 - self.origin_ms as f64) / 1000.0,
                    step: s.step.to_string(),
                })
                .collect(),
            elections: timeline.elections,
            failover,
            reclaim,
            failover_costs: None,
            idle: None,
            startup_declarations: None,
            no_agreement_ms: timeline.no_agreement_ms,
            longest_no_agreement_ms: timeline.longest_no_agreement_ms,
            no_agreement_share: share,
            offices,
            i5_windows_checked: verdict.i5_checked,
            i5_windows_skipped: verdict.i5_skipped,
            violations,
            warnings: explain(&verdict.warnings[..verdict.warnings.len().min(MAX_WARNINGS)]),
            warnings_total: verdict.warnings.len(),
            anomalies: self.anomalies.clone(),
            unparsed_log_lines: self.collector.bad_lines,
            picture: Picture::build(&picture::Source {
                history: &history,
                ids: &self.ids,
                steps: &self.executed,
                timeline: &timeline,
                timing: self.timing,
                mode: self.mode,
                origin_ms: self.origin_ms,
                end_ms,
            }),
        }
    }
}

/// How long a clean stop (SIGTERM) of a rolled node may take before it is killed: its
/// `on_demoted` (up to 3 D with slow hooks) and the keepers' release, on a loaded
/// machine.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// How long a node started on a damaged store has to refuse it: opening and checking
/// a store takes milliseconds; generous for a loaded machine.
const DAMAGE_WAIT: Duration = Duration::from_secs(10);

/// The sleep of node `id`'s `on_demoted` hook in a run with slow hooks: 0, D/2, 2 D or
/// 3 D, turned by the run's seed, so some departures wait past the lease the hook
/// used to have to fit in (tests/hook_order.rs checks the order on one departure).
pub fn slow_hook_ms(id: NodeId, timing: &Timing, seed: u64) -> u64 {
    let d = timing.suspect_after_ms;
    let choices = [0, d / 2, 2 * d, 3 * d];
    // Consecutive IDs take consecutive choices: every run has all four once it has
    // four nodes, and the seed turns which node gets which.
    choices[(seed.wrapping_add(id) % choices.len() as u64) as usize]
}

/// Gives node `id` an `on_demoted` hook that sleeps [`slow_hook_ms`], with a timeout
/// above it.
fn slow_down_hooks(cluster: &Cluster, id: NodeId, timing: &Timing, seed: u64) -> Result<()> {
    let ms = slow_hook_ms(id, timing, seed);
    cluster.edit_config(id, |c| {
        c.hooks.on_demoted = Some(format!("sleep {}.{:03}", ms / 1000, ms % 1000));
        c.hooks.timeout_ms = c.hooks.timeout_ms.max(ms + 2000);
    })
}

/// The members of `ids` not in `side`: the other side of a cut.
fn others(ids: &[NodeId], side: &[NodeId]) -> Vec<NodeId> {
    ids.iter().copied().filter(|n| !side.contains(n)).collect()
}

/// Whether a failed change may go through when asked again: no answer, or a refusal
/// for want of a coordinator that holds on to its office (the texts of
/// src/protocol/membership.rs, src/node/serve/api.rs and
/// src/node/policy/member_change.rs), not for what the change is.
fn passing(e: &anyhow::Error) -> bool {
    let Some(ClientError::Refused { .. }) = e.downcast_ref::<ClientError>() else {
        return true;
    };
    let text = format!("{e:#}");
    [
        "left office",
        "knows no coordinator",
        "not the coordinator",
        "one change at a time",
        "not committed within",
    ]
    .iter()
    .any(|t| text.contains(t))
}

/// Whether the node answered with a refusal (the coordinator's word, final), rather
/// than failing to answer (another member may).
fn refused(e: &ClientError) -> bool {
    matches!(e, ClientError::Refused { .. })
}
