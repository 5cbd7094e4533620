//! Load and watchers for the PostgreSQL example (`tests/postgres_failover.rs`, and any
//! bench driving the same servers):
//!
//! - [`PgWriter`]: a client writing one row per write, each an autocommit `INSERT` that
//!   returns the accepting primary's `bully.epoch` (the fencing token the manager
//!   writes to its primary's settings, src/node/postgres/manager.rs) and port. With `synchronous_commit = on` an
//!   answered INSERT is a commit a standby flushed too. Every attempt is recorded as a
//!   `writers::Attempt` (shared with the Redis test), so `writers::longest_gap`,
//!   `writers::failures` and `writers::stale_primary_writes` judge them as they judge
//!   the Redis writes.
//! - [`missing`]: the committed rows a server does not hold.
//! - [`RolePoller`]: asks every server every [`POLL`] whether it takes writes, so the
//!   time with two writable primaries is measured on the servers themselves, not only
//!   through what a writer happened to see.
//!
//! Included with `#[path = "common/postgres_load.rs"] mod postgres_load;` next to
//! `postgres_cluster.rs`, `writers.rs` and `resp.rs`.
#![allow(dead_code)]

use super::postgres_cluster::{connect, role_of};
use super::writers::{Attempt, Style, PACE, WRITE_TIMEOUT};
use bully::protocol::NodeId;
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The table the writers fill.
pub const TABLE: &str = "bully_writes";
/// How often the role poller asks each server.
pub const POLL: Duration = Duration::from_millis(25);

/// Creates [`TABLE`] (if missing) through `addr`.
pub async fn create_table(addr: SocketAddr) -> Result<(), String> {
    let client = connect(addr, Duration::from_secs(5))
        .await
        .ok_or("no connection")?;
    let ddl = format!(
        "CREATE TABLE IF NOT EXISTS {TABLE} (key text PRIMARY KEY, at timestamptz DEFAULT now())"
    );
    tokio::time::timeout(Duration::from_secs(10), client.batch_execute(&ddl))
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())
}

/// A running writer: a task writing rows `name:1`, `name:2`, ... through `addr` every
/// `writers::PACE`, reconnecting after any error or a write that took longer than
/// `writers::WRITE_TIMEOUT` (a stopped or frozen primary).
pub struct PgWriter {
    stop: watch::Sender<bool>,
    records: Arc<Mutex<Vec<Attempt>>>,
    task: Option<JoinHandle<()>>,
}

impl PgWriter {
    /// Starts the writer.
    pub fn start(name: &'static str, addr: SocketAddr) -> PgWriter {
        let (stop, stopped) = watch::channel(false);
        let records = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(write_loop(name, addr, stopped, Arc::clone(&records)));
        PgWriter {
            stop,
            records,
            task: Some(task),
        }
    }

    /// Every attempt so far.
    pub fn records(&self) -> Vec<Attempt> {
        self.records.lock().unwrap().clone()
    }

    /// Stops the task and returns every attempt.
    pub async fn stop(mut self) -> Vec<Attempt> {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.records()
    }
}

impl Drop for PgWriter {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn write_loop(
    name: &'static str,
    addr: SocketAddr,
    mut stopped: watch::Receiver<bool>,
    records: Arc<Mutex<Vec<Attempt>>>,
) {
    let sql = format!(
        "INSERT INTO {TABLE} (key) VALUES ($1) \
         RETURNING coalesce(nullif(current_setting('bully.epoch', true), ''), '0'), \
         inet_server_port()"
    );
    let mut client: Option<tokio_postgres::Client> = None;
    let mut seq: u64 = 0;
    let mut tick = tokio::time::interval(PACE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !*stopped.borrow() {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => break,
        }
        let Some(c) = client.as_ref() else {
            client = connect(addr, WRITE_TIMEOUT).await;
            continue;
        };
        seq += 1;
        let key = format!("{name}:{seq}");
        let start = Instant::now();
        let answer = tokio::time::timeout(WRITE_TIMEOUT, c.query_one(&sql, &[&key])).await;
        let end = Instant::now();
        let (epoch, port, error) = match answer {
            Ok(Ok(row)) => {
                let epoch: String = row.get(0);
                let port: i32 = row.get(1);
                (epoch.parse().ok(), port as u16, None)
            }
            Ok(Err(e)) => (None, 0, Some(e.to_string())),
            Err(_) => (None, 0, Some(format!("no answer within {WRITE_TIMEOUT:?}"))),
        };
        if error.is_some() {
            client = None; // errors and timeouts: reconnect (HAProxy may route elsewhere)
        }
        records.lock().unwrap().push(Attempt {
            writer: name,
            style: Style::Waiting,
            value: key.clone(),
            key,
            port,
            start,
            end,
            replicated: epoch.is_some(),
            epoch,
            error,
        });
    }
}

/// The committed rows among `attempts` that the server at `addr` does not hold.
pub async fn missing(addr: SocketAddr, attempts: &[Attempt]) -> Result<Vec<String>, String> {
    let client = connect(addr, Duration::from_secs(5))
        .await
        .ok_or("no connection")?;
    let rows = tokio::time::timeout(
        Duration::from_secs(20),
        client.query(&format!("SELECT key FROM {TABLE}"), &[]),
    )
    .await
    .map_err(|_| "timed out".to_string())?
    .map_err(|e| e.to_string())?;
    let held: HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
    Ok(attempts
        .iter()
        .filter(|a| a.epoch.is_some() && !held.contains(&a.key))
        .map(|a| a.key.clone())
        .collect())
}

/// One poll of one server: whether it took writes (a primary, not read-only) when asked.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub node: NodeId,
    pub at: Instant,
    /// `None`: it did not answer within the probe's bound (down, frozen, cut off: it
    /// acknowledges nothing either).
    pub writable: Option<bool>,
}

/// Polls every server's role every [`POLL`] on a connection of its own (reopened when
/// it fails), straight to the server, as a client on its host would reach it.
pub struct RolePoller {
    samples: Arc<Mutex<Vec<Sample>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl RolePoller {
    /// Starts one polling task per server.
    pub fn start(addrs: &BTreeMap<NodeId, SocketAddr>) -> RolePoller {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let tasks = addrs
            .iter()
            .map(|(&node, &addr)| tokio::spawn(poll_loop(node, addr, Arc::clone(&samples))))
            .collect();
        RolePoller { samples, tasks }
    }

    /// Every sample so far.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().unwrap().clone()
    }

    /// How long two or more servers were writable at once within `[from, to]`: each
    /// server counts as writable from a sample that said so until its next sample, and
    /// the longest stretch with two or more such is returned, with the nodes involved.
    pub fn two_writable(&self, from: Instant, to: Instant) -> Overlap {
        two_writable(&self.samples(), from, to)
    }
}

impl Drop for RolePoller {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn poll_loop(node: NodeId, addr: SocketAddr, samples: Arc<Mutex<Vec<Sample>>>) {
    let mut client = None;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        if client.is_none() {
            client = connect(addr, super::postgres_cluster::PROBE).await;
        }
        let role = match client.as_ref() {
            Some(c) => role_of(c).await,
            None => None,
        };
        if role.is_none() {
            client = None;
        }
        samples.lock().unwrap().push(Sample {
            node,
            at: Instant::now(),
            writable: role.map(|r| r.writable()),
        });
    }
}

/// The longest stretch with two or more writable servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub longest: Duration,
    /// The servers writable in it (none when `longest` is zero).
    pub nodes: Vec<NodeId>,
    /// When it began.
    pub began: Option<Instant>,
}

/// [`RolePoller::two_writable`] on given samples.
pub fn two_writable(samples: &[Sample], from: Instant, to: Instant) -> Overlap {
    // Each node's writable stretches: from a writable sample to its next sample.
    let mut by_node: BTreeMap<NodeId, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        by_node.entry(s.node).or_default().push(s);
    }
    let mut edges: Vec<(Instant, i32, NodeId)> = Vec::new();
    for (&node, list) in &mut by_node {
        list.sort_by_key(|s| s.at);
        for pair in list.windows(2) {
            if pair[0].writable == Some(true) {
                let (a, b) = (pair[0].at.max(from), pair[1].at.min(to));
                if a < b {
                    edges.push((a, 1, node));
                    edges.push((b, -1, node));
                }
            }
        }
    }
    edges.sort_by_key(|&(at, delta, _)| (at, delta));
    let mut overlap = Overlap {
        longest: Duration::ZERO,
        nodes: Vec::new(),
        began: None,
    };
    let (mut open, mut began, mut nodes) = (0, None, Vec::new());
    let mut live: BTreeMap<NodeId, i32> = BTreeMap::new();
    for (at, delta, node) in edges {
        *live.entry(node).or_default() += delta;
        open += delta;
        if open >= 2 && began.is_none() {
            began = Some(at);
            nodes = live
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(&id, _)| id)
                .collect();
        }
        if open < 2 {
            if let Some(b) = began.take() {
                if at - b > overlap.longest {
                    overlap = Overlap {
                        longest: at - b,
                        nodes: std::mem::take(&mut nodes),
                        began: Some(b),
                    };
                }
            }
        }
    }
    overlap
}
