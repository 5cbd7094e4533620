//! A cluster of real `bully node` processes on loopback, shared by `bully local`,
//! `bully chaos` and the real-process tests: certificates, configs, ports, and
//! children that are started, killed (SIGKILL), paused (SIGSTOP) and resumed by PID.
//! Dropping a [`Cluster`] kills every child it started, also when a test panics.

use crate::api::{event_log, Status};
use crate::certs::{self, TlsFiles};
use crate::client::Client;
use crate::config::{self, HooksConfig, NodeConfig, PeerConfig};
use crate::history::{Entry, Record};
use crate::ports::free_udp_addrs;
use crate::protocol::{Mode, NodeId, Preempt, Timing};
use crate::signals::Signal;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// What to build.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Node IDs are 1..=nodes.
    pub nodes: u64,
    pub timing: Timing,
    pub preempt: Preempt,
    /// The election algorithm every node runs.
    pub mode: Mode,
    /// The `bully` executable to run for each node.
    pub binary: PathBuf,
    /// Where certs, configs, data dirs and logs go.
    pub dir: PathBuf,
}

/// One member: its files, address and (when running) its process.
#[derive(Debug)]
struct Member {
    addr: SocketAddr,
    config: PathBuf,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    paused: bool,
    /// Never started, its store never lost: its first start is a new cluster's
    /// (`bully node --new-cluster`), so a cluster created here may start with any
    /// subset of its members up.
    new: bool,
}

/// A running cluster on 127.0.0.1.
#[derive(Debug)]
pub struct Cluster {
    spec: ClusterSpec,
    members: BTreeMap<NodeId, Member>,
    client_tls: TlsFiles,
    /// Faults injected through this handle, as history records.
    faults: Vec<Entry>,
    /// The event logs of stores this handle deleted ([`Cluster::lose_store`]), so the
    /// history still holds what those lives did.
    lost_logs: Vec<Entry>,
}

impl Cluster {
    /// Writes certificates and one config per node into `spec.dir`, each node's peers
    /// pointing straight at each other. Starts nothing.
    pub fn create(spec: ClusterSpec) -> Result<Cluster> {
        Self::create_routed(spec, |_, to, addrs| addrs[&to])
    }

    /// Like [`Cluster::create`], but `route(from, to, listen_addrs)` picks the address
    /// `from` dials to reach `to` (the chaos runner puts a relay there).
    pub fn create_routed(
        spec: ClusterSpec,
        route: impl Fn(NodeId, NodeId, &BTreeMap<NodeId, SocketAddr>) -> SocketAddr,
    ) -> Result<Cluster> {
        if spec.nodes == 0 {
            bail!("a cluster needs at least one node");
        }
        fs::create_dir_all(&spec.dir)
            .with_context(|| format!("cannot create {}", spec.dir.display()))?;
        let ids: Vec<NodeId> = (1..=spec.nodes).collect();
        let cert_dir = spec.dir.join("certs");
        certs::init(&cert_dir, &ids).context("cannot make certificates")?;
        let addrs: BTreeMap<NodeId, SocketAddr> = ids
            .iter()
            .copied()
            .zip(free_udp_addrs(ids.len())?)
            .collect();
        let mut members = BTreeMap::new();
        for &id in &ids {
            let peers: Vec<(NodeId, SocketAddr)> = ids
                .iter()
                .filter(|&&p| p != id)
                .map(|&p| (p, route(id, p, &addrs)))
                .collect();
            members.insert(id, write_member(&spec, id, addrs[&id], &peers)?);
        }
        Ok(Cluster {
            client_tls: TlsFiles::for_client(&cert_dir),
            spec,
            members,
            faults: Vec::new(),
            lost_logs: Vec::new(),
        })
    }

    /// Makes node `id` ready to join at runtime (docs/design.md#membership): a
    /// certificate from this cluster's CA, a free address, a config listing `peers` (the
    /// members it must find, at the address it is to dial: their own, or a relay's)
    /// and a data dir; starts nothing. A node this handle already has (one removed from
    /// the list) must be stopped: its store, stale once removed, is lost
    /// ([`Cluster::lose_store`]) and its config rewritten with `peers`.
    pub fn add_member(&mut self, id: NodeId, peers: &[(NodeId, SocketAddr)]) -> Result<()> {
        let peers: Vec<(NodeId, SocketAddr)> =
            peers.iter().copied().filter(|&(p, _)| p != id).collect();
        if self.members.contains_key(&id) {
            if self.is_running(id) {
                bail!("node {id} is running: stop it before it is added again");
            }
            if self.data_dir(id).exists() {
                self.lose_store(id)?;
            }
            let addr = self.addr(id);
            let fresh = write_member(&self.spec, id, addr, &peers)?;
            self.member_mut(id).config = fresh.config;
            return Ok(());
        }
        let cert_dir = self.spec.dir.join("certs");
        certs::add_nodes(&cert_dir, &[id])
            .with_context(|| format!("cannot make a certificate for node {id}"))?;
        let addr = free_udp_addrs(1)?[0];
        let member = write_member(&self.spec, id, addr, &peers)?;
        self.members.insert(id, member);
        Ok(())
    }

    /// Every node ID, ascending.
    pub fn ids(&self) -> Vec<NodeId> {
        self.members.keys().copied().collect()
    }

    /// The spec this cluster was made from.
    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// The client certificate files that every node accepts.
    pub fn client_tls(&self) -> &TlsFiles {
        &self.client_tls
    }

    /// A node's API/peer address.
    pub fn addr(&self, id: NodeId) -> SocketAddr {
        self.member(id).addr
    }

    /// A node's config file.
    pub fn config_path(&self, id: NodeId) -> PathBuf {
        self.member(id).config.clone()
    }

    /// A node's data dir (sled cells and `events.jsonl`).
    pub fn data_dir(&self, id: NodeId) -> PathBuf {
        self.member(id).data_dir.clone()
    }

    /// A node's log file (its stdout and stderr).
    pub fn log_path(&self, id: NodeId) -> PathBuf {
        self.member(id).log.clone()
    }

    /// Whether the node's process is running (paused counts as running).
    pub fn is_running(&mut self, id: NodeId) -> bool {
        let member = self.member_mut(id);
        match &mut member.child {
            Some(child) => match child.try_wait() {
                Ok(None) => true,
                _ => {
                    member.child = None;
                    false
                }
            },
            None => false,
        }
    }

    /// Whether the node is stopped with SIGSTOP.
    pub fn is_paused(&self, id: NodeId) -> bool {
        self.member(id).paused
    }

    /// The PID of a running node.
    pub fn pid(&self, id: NodeId) -> Option<u32> {
        self.member(id).child.as_ref().map(|c| c.id())
    }

    /// Starts a node's process; its output goes to its log file.
    pub fn start(&mut self, id: NodeId) -> Result<()> {
        self.start_with(id, &[])
    }

    /// [`Cluster::start`] with more flags for `bully node` (`--change-mode`).
    pub fn start_with(&mut self, id: NodeId, flags: &[&str]) -> Result<()> {
        if self.is_running(id) {
            bail!("node {id} is already running");
        }
        let binary = self.spec.binary.clone();
        let member = self.member_mut(id);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&member.log)
            .with_context(|| format!("cannot open {}", member.log.display()))?;
        let mut command = Command::new(&binary);
        command.arg("node").arg("--config").arg(&member.config);
        if std::mem::take(&mut member.new) {
            command.arg("--new-cluster");
        }
        command.args(flags);
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot run {}", binary.display()))?;
        member.child = Some(child);
        member.paused = false;
        Ok(())
    }

    /// Kills a node with SIGKILL (no goodbye to its peers) and reaps it.
    pub fn kill(&mut self, id: NodeId) -> Result<()> {
        let member = self.member_mut(id);
        let Some(mut child) = member.child.take() else {
            bail!("node {id} is not running");
        };
        member.paused = false;
        let _ = child.kill();
        let _ = child.wait();
        self.note(id, Record::Crashed);
        Ok(())
    }

    /// Deletes a stopped node's data dir, as a replaced disk or a container without its
    /// volume would: its next start is on an empty store. What its event log held is
    /// kept for [`Cluster::history`], followed by a `StoreLost` record.
    pub fn lose_store(&mut self, id: NodeId) -> Result<()> {
        if self.is_running(id) {
            bail!("node {id} is running: stop or kill it before its store is lost");
        }
        let dir = self.data_dir(id);
        self.lost_logs
            .extend(event_log::read_log(&dir).unwrap_or_default());
        fs::remove_dir_all(&dir).with_context(|| format!("deleting {}", dir.display()))?;
        self.member_mut(id).new = false;
        self.note(id, Record::StoreLost);
        Ok(())
    }

    /// Cuts a stopped node's `db` file to half of what sled wrote into it, as a disk
    /// that lost the end of a file would; returns the file's size and the bytes written.
    pub fn damage_store(&mut self, id: NodeId) -> Result<(usize, usize)> {
        if self.is_running(id) {
            bail!("node {id} is running: stop or kill it before its store is damaged");
        }
        let dir = self.data_dir(id);
        cut_db_to_half(&dir).with_context(|| format!("cutting the db in {}", dir.display()))
    }

    /// Starts a node and waits up to `limit` for it to exit by itself: its exit status,
    /// or `None` if it is still running then (it found its store fit to use).
    pub fn start_awaiting_exit(
        &mut self,
        id: NodeId,
        limit: Duration,
    ) -> Result<Option<std::process::ExitStatus>> {
        self.start(id)?;
        let deadline = std::time::Instant::now() + limit;
        loop {
            let member = self.member_mut(id);
            let child = member.child.as_mut().context("the node was just started")?;
            if let Some(status) = child.try_wait()? {
                member.child = None;
                return Ok(Some(status));
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Writes down a fault this cluster injected, stamped after it took effect, so the
    /// checker can end a killed coordinator's term of office at the kill (a killed
    /// process writes nothing) and bound a paused one's.
    fn note(&mut self, node: NodeId, record: Record) {
        self.faults.push(Entry {
            at_ms: crate::wall_clock::wall_ms(),
            node,
            record,
        });
    }

    /// Stops a node's process with SIGSTOP: it keeps its sockets but processes nothing.
    pub fn pause(&mut self, id: NodeId) -> Result<()> {
        self.signal(id, Signal::SIGSTOP)?;
        self.member_mut(id).paused = true;
        self.note(id, Record::Paused);
        Ok(())
    }

    /// Continues a paused node with SIGCONT.
    pub fn resume(&mut self, id: NodeId) -> Result<()> {
        self.note(id, Record::Resumed);
        self.signal(id, Signal::SIGCONT)?;
        self.member_mut(id).paused = false;
        Ok(())
    }

    /// Asks a node to stop cleanly (SIGTERM) and waits up to `timeout` before killing it.
    pub fn stop(&mut self, id: NodeId, timeout: Duration) -> Result<()> {
        if self.is_paused(id) {
            self.resume(id)?;
        }
        self.signal(id, Signal::SIGTERM)?;
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if !self.is_running(id) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill(id)
    }

    /// Sends `signal` to a running node's process (spawned here, not yet reaped).
    pub fn signal(&mut self, id: NodeId, signal: Signal) -> Result<()> {
        if !self.is_running(id) {
            bail!("node {id} is not running");
        }
        let pid = self.pid(id).expect("running node has a pid");
        crate::signals::send(pid, signal)
            .with_context(|| format!("cannot signal node {id} (pid {pid})"))
    }

    /// Changes a node's config file (hooks, health check, HTTP, timing, ...): reads and
    /// validates it, applies `edit`, validates the result and writes it back. Takes
    /// effect at the node's next start.
    pub fn edit_config(&self, id: NodeId, edit: impl FnOnce(&mut NodeConfig)) -> Result<()> {
        let path = self.config_path(id);
        let mut node = config::load(&path)?;
        edit(&mut node);
        node.validate(&path)?;
        let text = config::render(&node).context("cannot render a node config")?;
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Asks one node for its status over the client API.
    pub async fn status(&self, id: NodeId, timeout: Duration) -> Result<Status> {
        let client = Client::connect(self.addr(id), &self.client_tls, Some(id), timeout).await?;
        Ok(client.status().await?)
    }

    /// Asks one node for its counters over the client API.
    pub async fn metrics(
        &self,
        id: NodeId,
        timeout: Duration,
    ) -> Result<crate::api::MetricsSnapshot> {
        let client = Client::connect(self.addr(id), &self.client_tls, Some(id), timeout).await?;
        Ok(client.metrics().await?)
    }

    /// The last `lines` lines of every node's log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut out = String::new();
        for id in self.ids() {
            let text = fs::read_to_string(self.log_path(id)).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            out.push_str(&format!(
                "--- node {id} log (tail)\n{}\n",
                all[from..].join("\n")
            ));
        }
        out
    }

    /// Every node's event log and the faults this cluster injected (kill, pause,
    /// resume), merged and ordered by time.
    pub fn history(&self) -> Vec<Entry> {
        let logs = self
            .members
            .values()
            .filter_map(|m| event_log::read_log(&m.data_dir).ok());
        let kept = [self.lost_logs.clone(), self.faults.clone()];
        crate::history::merge(logs.chain(kept))
    }

    fn member(&self, id: NodeId) -> &Member {
        self.members
            .get(&id)
            .unwrap_or_else(|| panic!("node {id} is not a member of this cluster"))
    }

    fn member_mut(&mut self, id: NodeId) -> &mut Member {
        self.members
            .get_mut(&id)
            .unwrap_or_else(|| panic!("node {id} is not a member of this cluster"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for member in self.members.values_mut() {
            if let Some(mut child) = member.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Writes node `id`'s config (listening at `addr`, dialing `peers` at the given
/// addresses) and returns it as a member not started yet: one helper for
/// [`Cluster::create_routed`] and [`Cluster::add_member`].
fn write_member(
    spec: &ClusterSpec,
    id: NodeId,
    addr: SocketAddr,
    peers: &[(NodeId, SocketAddr)],
) -> Result<Member> {
    let cert_dir = spec.dir.join("certs");
    let data_dir = spec.dir.join(format!("data/node{id}"));
    let config = spec.dir.join(format!("node{id}.toml"));
    let node = node_config(id, addr, &data_dir, &cert_dir, spec, peers);
    let text = config::render(&node).context("cannot render a node config")?;
    fs::write(&config, text).with_context(|| format!("cannot write {}", config.display()))?;
    Ok(Member {
        addr,
        config,
        data_dir,
        log: spec.dir.join(format!("node{id}.log")),
        child: None,
        paused: false,
        new: true,
    })
}

/// Cuts `db` in the data dir `dir` to half of what sled wrote into it (up to its last
/// non-zero byte: sled may size the file to a whole segment and write only at its
/// front); returns the file's size and the bytes written. The damage a store must
/// refuse (src/storage/check.rs), for the chaos runner's `store` fault and the tests.
pub fn cut_db_to_half(dir: &Path) -> std::io::Result<(usize, usize)> {
    let db = dir.join("db");
    let bytes = fs::read(&db)?;
    let written = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    OpenOptions::new()
        .write(true)
        .open(&db)?
        .set_len(written as u64 / 2)?;
    Ok((bytes.len(), written))
}

/// The config of one generated node: absolute paths, the spec's timing and preemption.
fn node_config(
    id: NodeId,
    listen: SocketAddr,
    data_dir: &Path,
    cert_dir: &Path,
    spec: &ClusterSpec,
    peers: &[(NodeId, SocketAddr)],
) -> NodeConfig {
    NodeConfig {
        id,
        listen,
        data_dir: data_dir.to_path_buf(),
        new_cluster: false,
        change_mode: false,
        preempt: spec.preempt,
        mode: spec.mode,
        witness: false,
        tls: TlsFiles::for_node(cert_dir, id),
        timing: spec.timing,
        peers: peers
            .iter()
            .map(|&(id, addr)| PeerConfig {
                id,
                addr: addr.into(),
                witness: false,
            })
            .collect(),
        hooks: HooksConfig::default(),
        health: None,
        http: None,
        fence: Default::default(),
        watchdog: crate::config::WatchdogConfig::default(),
        postgres: None,
    }
}
