//! The real servers of the Redis tests, run the way `examples/redis-primary` runs
//! them: `redis-server` with the example's `redis.conf` (password on stdin, as
//! `redis.sh` does), HAProxy with the example's `haproxy.cfg` (ports swapped for free
//! ones) and one keeper per node (`bully run --config`, as `cluster.sh` starts them).
//! Every process is killed by its PID on drop, also when a test panics.
//! Included with `#[path = "common/redis_servers.rs"]` next to `resp.rs`.
#![allow(dead_code)]

use super::resp::{redis, Reply};
use bully::protocol::NodeId;
use bully::signals::{self, Signal};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to start on a busy machine.
const START: Duration = Duration::from_secs(20);

/// The example's directory.
pub fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/redis-primary")
}

/// The redis-server processes, one per bully node.
pub struct Redises {
    pub dir: PathBuf,
    pub addrs: BTreeMap<NodeId, SocketAddr>,
    pub password: String,
    children: BTreeMap<NodeId, Child>,
}

impl Redises {
    /// Servers (not started yet) on the given addresses, files under `dir`.
    pub fn new(dir: &Path, addrs: BTreeMap<NodeId, SocketAddr>, password: &str) -> Redises {
        Redises {
            dir: dir.to_path_buf(),
            addrs,
            password: password.to_string(),
            children: BTreeMap::new(),
        }
    }

    /// The password, as the clients pass it.
    pub fn auth(&self) -> Option<&str> {
        Some(&self.password)
    }

    /// Starts node `id`'s Redis: empty, or from its RDB file when `keep`. Waits until it
    /// answers PING (a large RDB file takes a moment to load).
    pub fn start(&mut self, id: NodeId, keep: bool) {
        let addr = self.addrs[&id];
        let dir = self.dir.join(format!("redis{id}"));
        if !keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("redis.log"))
            .unwrap();
        let mut child = Command::new("redis-server")
            .arg("-")
            .args(["--port", &addr.port().to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start redis-server");
        let config = format!(
            "requirepass \"{p}\"\nmasterauth \"{p}\"\ninclude {}\n",
            example_dir().join("redis.conf").display(),
            p = self.password
        );
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(config.as_bytes()).unwrap();
        drop(stdin);
        self.children.insert(id, child);
        let started = Instant::now();
        loop {
            let reply = redis(addr, self.auth(), &["PING"]).ok();
            if reply == Some(Reply::Simple("PONG".into())) {
                break;
            }
            assert!(
                started.elapsed() < START,
                "redis-server {id} on {addr} did not start: {reply:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// kill -9 of node `id`'s Redis.
    pub fn kill(&mut self, id: NodeId) {
        if let Some(mut child) = self.children.remove(&id) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP of node `id`'s Redis: it keeps its connections and answers nothing.
    pub fn pause(&mut self, id: NodeId) {
        self.signal(id, Signal::SIGSTOP);
    }

    /// SIGCONT of node `id`'s Redis.
    pub fn resume(&mut self, id: NodeId) {
        self.signal(id, Signal::SIGCONT);
    }

    fn signal(&self, id: NodeId, signal: Signal) {
        let pid = self.children[&id].id();
        signals::send(pid, signal).unwrap_or_else(|e| panic!("{signal:?} to Redis {id}: {e}"));
    }

    /// The node whose Redis listens on `port`.
    pub fn node_on_port(&self, port: u16) -> Option<NodeId> {
        self.addrs
            .iter()
            .find(|(_, a)| a.port() == port)
            .map(|(&id, _)| id)
    }
}

impl Drop for Redises {
    fn drop(&mut self) {
        let ids: Vec<NodeId> = self.children.keys().copied().collect();
        for id in ids {
            self.kill(id);
        }
    }
}

/// HAProxy with the example's config; killed on drop.
pub struct Haproxy {
    pub front: SocketAddr,
    child: Child,
}

impl Haproxy {
    /// Renders `haproxy.cfg` with `front` and each node's Redis and HTTP address in
    /// place of the example's, starts it in the foreground and waits until it accepts.
    pub fn start(
        dir: &Path,
        front: SocketAddr,
        redis: &BTreeMap<NodeId, SocketAddr>,
        http: &BTreeMap<NodeId, SocketAddr>,
    ) -> Haproxy {
        Haproxy::start_from(&example_dir(), dir, front, redis, http)
    }

    /// [`Haproxy::start`] for any example's `haproxy.cfg` (the PostgreSQL one too): its
    /// `bind` line and each `server nodeN` line are rewritten to `front` and to node
    /// N's backend and HTTP check address.
    pub fn start_from(
        example: &Path,
        dir: &Path,
        front: SocketAddr,
        backends: &BTreeMap<NodeId, SocketAddr>,
        http: &BTreeMap<NodeId, SocketAddr>,
    ) -> Haproxy {
        Haproxy::start_fronts(example, dir, &[front], backends, http)
    }

    /// [`Haproxy::start_from`] for a `haproxy.cfg` with one `bind` line per front (the
    /// PostgreSQL example's writes and reads): the n-th `bind` is rewritten to the n-th
    /// of `fronts`, every `server nodeN` line as there. Waits for the first front.
    pub fn start_fronts(
        example: &Path,
        dir: &Path,
        fronts: &[SocketAddr],
        backends: &BTreeMap<NodeId, SocketAddr>,
        http: &BTreeMap<NodeId, SocketAddr>,
    ) -> Haproxy {
        let front = fronts[0];
        let template = std::fs::read_to_string(example.join("haproxy.cfg")).unwrap();
        let mut binds = fronts.iter();
        let mut swapped = 0;
        let config: String = template
            .lines()
            .map(|line| {
                let indent = &line[..line.len() - line.trim_start().len()];
                let words: Vec<&str> = line.split_whitespace().collect();
                let server = |word: &str| {
                    let id: NodeId = word.strip_prefix("node")?.parse().ok()?;
                    Some((id, backends.get(&id)?, http.get(&id)?))
                };
                match words.as_slice() {
                    ["bind", ..] => {
                        swapped += 1;
                        let front = binds.next().expect("more bind lines than fronts");
                        format!("{indent}bind {front}")
                    }
                    ["server", name, ..] => match server(name) {
                        Some((id, addr, check)) => {
                            swapped += 1;
                            format!(
                                "{indent}server node{id} {addr} check addr {} port {}",
                                check.ip(),
                                check.port()
                            )
                        }
                        None => line.to_string(),
                    },
                    _ => line.to_string(),
                }
            })
            .map(|line| line + "\n")
            .collect();
        assert_eq!(
            swapped,
            (backends.len() + 1) * fronts.len(),
            "{}: per front, one bind line and a `server nodeN` line per node expected",
            example.join("haproxy.cfg").display()
        );
        Haproxy::run(dir, &config, front)
    }

    /// HAProxy running `config` (written to `dir/haproxy.cfg`, its log beside it),
    /// once it accepts on `front`.
    pub fn run(dir: &Path, config: &str, front: SocketAddr) -> Haproxy {
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let log = std::fs::File::create(dir.join("haproxy.log")).unwrap();
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start haproxy");
        let haproxy = Haproxy { front, child };
        let started = Instant::now();
        while std::net::TcpStream::connect_timeout(&front, Duration::from_millis(200)).is_err() {
            assert!(
                started.elapsed() < START,
                "haproxy did not listen on {front}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        haproxy
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The example's keepers: one `bully run --config <node's config>` per node, with no
/// job, so each only runs its node's `[fence] command` (`fence.sh`) when the office
/// ends on its host. Like the host's supervisor, a keeper outlives its node's kills and
/// restarts (it reconnects to the node's socket by itself). Killed on drop.
pub struct Keepers {
    dir: PathBuf,
    children: BTreeMap<NodeId, Child>,
}

impl Keepers {
    /// Starts `binary run --config <config>` for each node, logs under `dir`.
    pub fn start(binary: &Path, configs: &BTreeMap<NodeId, PathBuf>, dir: &Path) -> Keepers {
        let mut keepers = Keepers {
            dir: dir.to_path_buf(),
            children: BTreeMap::new(),
        };
        for (&id, config) in configs {
            keepers.spawn(binary, id, config);
        }
        keepers
    }

    /// (Re)starts node `id`'s keeper, appending to its log: a host restarted after a
    /// kill -9 of its processes gets its keeper back.
    pub fn spawn(&mut self, binary: &Path, id: NodeId, config: &Path) {
        self.kill(id);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_file(id))
            .unwrap();
        let child = Command::new(binary)
            .arg("run")
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start bully run");
        self.children.insert(id, child);
    }

    /// kill -9 of node `id`'s keeper (a host losing its processes): it fences nothing.
    pub fn kill(&mut self, id: NodeId) {
        if let Some(mut child) = self.children.remove(&id) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log_file(&self, id: NodeId) -> PathBuf {
        self.dir.join(format!("keeper-{id}.log"))
    }

    /// Node `id`'s keeper log.
    pub fn log(&self, id: NodeId) -> String {
        std::fs::read_to_string(self.log_file(id)).unwrap_or_default()
    }

    /// The lines of node `id`'s keeper log that contain `needle`.
    pub fn lines_with(&self, id: NodeId, needle: &str) -> Vec<String> {
        self.log(id)
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    /// Whether every keeper still runs (a keeper that exited fences nothing).
    pub fn all_running(&mut self) -> bool {
        self.children
            .values_mut()
            .all(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Keepers {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
