//! Keeping one Redis primary with the scripts of `examples/redis-primary/`, on real
//! `redis-server` processes and real bully nodes on 127.0.0.1:
//! 1. writes go to the coordinator's Redis (replicas refuse them);
//! 2. kill -9 the coordinator and its Redis: a new primary accepts writes within a
//!    bound and the other replica follows it;
//! 3. restart the old highest node with an empty Redis: its health check keeps it
//!    ineligible until its Redis has caught up as a replica, then it takes over, and
//!    every key a primary acknowledged (to WAIT) is still there.
//!
//! Skips, saying why, when `redis-server` or `redis-cli` is not installed
//! (`apt-get install redis-server`; `.ci/run` installs it).

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::cluster::free_tcp_addr;
use bully::config::{HealthConfig, HooksConfig};
use bully::history::Record;
use bully::protocol::{NodeId, Preempt, Role, Timing};
use common::TestCluster;
use primary::{events, phase, quoted, status};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const AGREE: Duration = Duration::from_secs(20);
/// How long clients may be without a writable primary after the kill.
const FAILOVER_BOUND: Duration = Duration::from_secs(10);

/// A RESP reply, as much of it as the test needs.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<String>),
    Array(Vec<Reply>),
}

/// A connection to one Redis. WAIT counts the writes of its own connection, so writes
/// and their WAIT must share one.
struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_write_timeout(Some(Duration::from_secs(3)))?;
        Ok(Conn {
            reader: BufReader::new(stream),
        })
    }

    fn call(&mut self, args: &[&str]) -> std::io::Result<Reply> {
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        self.reader.get_mut().write_all(request.as_bytes())?;
        read_reply(&mut self.reader)
    }
}

/// One command on a fresh connection (robust against killed servers).
fn redis(addr: SocketAddr, args: &[&str]) -> std::io::Result<Reply> {
    Conn::open(addr)?.call(args)
}

fn read_reply(reader: &mut impl BufRead) -> std::io::Result<Reply> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(line.len().min(1));
    Ok(match kind {
        "+" => Reply::Simple(rest.into()),
        "-" => Reply::Error(rest.into()),
        ":" => Reply::Int(rest.parse().map_err(|_| bad(line))?),
        "$" => {
            let len: i64 = rest.parse().map_err(|_| bad(line))?;
            if len < 0 {
                Reply::Bulk(None)
            } else {
                let mut buf = vec![0; len as usize + 2];
                std::io::Read::read_exact(reader, &mut buf)?;
                buf.truncate(len as usize);
                Reply::Bulk(Some(String::from_utf8_lossy(&buf).into()))
            }
        }
        "*" => {
            let n: i64 = rest.parse().map_err(|_| bad(line))?;
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_reply(reader)?);
            }
            Reply::Array(items)
        }
        _ => return Err(bad(line)),
    })
}

/// `INFO replication` of one Redis as a map.
fn replication(addr: SocketAddr) -> Option<BTreeMap<String, String>> {
    match redis(addr, &["INFO", "replication"]).ok()? {
        Reply::Bulk(Some(text)) => Some(
            text.lines()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        _ => None,
    }
}

fn is_primary(addr: SocketAddr) -> bool {
    replication(addr).is_some_and(|r| r["role"] == "master")
}

/// Whether `replica` replicates from `primary` with the link up.
fn follows(replica: SocketAddr, primary: SocketAddr) -> bool {
    replication(replica).is_some_and(|r| {
        r["role"] == "slave"
            && r.get("master_port") == Some(&primary.port().to_string())
            && r.get("master_link_status").map(String::as_str) == Some("up")
    })
}

/// The redis-server processes; killed by PID on drop, also on panic.
struct Redises {
    dir: PathBuf,
    addrs: BTreeMap<NodeId, SocketAddr>,
    children: BTreeMap<NodeId, Child>,
}

impl Redises {
    fn start(&mut self, id: NodeId) {
        let addr = self.addrs[&id];
        let dir = self.dir.join(format!("redis{id}"));
        // A fresh, empty dir: no persistence, so a restart means empty data.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(dir.join("redis.log")).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &addr.port().to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--repl-diskless-sync-delay", "0", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start redis-server");
        self.children.insert(id, child);
        let started = Instant::now();
        while redis(addr, &["PING"]).ok() != Some(Reply::Simple("PONG".into())) {
            assert!(
                started.elapsed() < AGREE,
                "redis-server {id} on {addr} did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self, id: NodeId) {
        if let Some(mut child) = self.children.remove(&id) {
            let _ = child.kill();
            let _ = child.wait();
        }
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

fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/redis-primary")
}

/// The example's hooks and health check, pointed at this test's Redis ports.
fn configure(t: &TestCluster, nodes_file: &Path) {
    let script = |name: &str| {
        format!(
            "REDIS_NODES_FILE={} {}",
            quoted(nodes_file),
            quoted(&example_dir().join(name))
        )
    };
    for id in t.cluster.ids() {
        t.cluster
            .edit_config(id, |c| {
                c.hooks = HooksConfig {
                    on_elected: Some(script("on-elected.sh")),
                    on_demoted: Some(script("on-demoted.sh")),
                    on_change: Some(script("on-change.sh")),
                    timeout_ms: 5000,
                    ..HooksConfig::default()
                };
                c.health = Some(HealthConfig {
                    command: script("health.sh"),
                    interval_ms: 100,
                    timeout_ms: 2000,
                    rise: 2,
                    fall: 2,
                });
            })
            .unwrap();
    }
}

/// The Redis of whichever live node the bully nodes agree leads.
async fn primary_redis(t: &TestCluster, live: &[NodeId], redises: &Redises) -> Option<SocketAddr> {
    let views = t.views(live).await;
    let leader = views
        .values()
        .flatten()
        .find(|s| s.role == Role::Coordinator)?
        .id;
    common::agreed(&views, leader)?;
    Some(redises.addrs[&leader])
}

/// Writes `keys` to `primary`, then waits until `replicas` replicas acknowledged them
/// (what a client that must not lose a write does with asynchronous replication).
fn write_keys(primary: SocketAddr, keys: std::ops::Range<u32>, replicas: i64) {
    let mut conn = Conn::open(primary).unwrap();
    for i in keys {
        let key = format!("key:{i}");
        let reply = conn.call(&["SET", &key, &format!("value {i}")]).unwrap();
        assert_eq!(reply, Reply::Simple("OK".into()), "SET {key} on {primary}");
    }
    let acked = conn.call(&["WAIT", &replicas.to_string(), "5000"]).unwrap();
    assert_eq!(
        acked,
        Reply::Int(replicas),
        "replicas acknowledging the writes"
    );
}

fn assert_keys(addr: SocketAddr, keys: std::ops::Range<u32>) {
    for i in keys {
        let got = redis(addr, &["GET", &format!("key:{i}")]).unwrap();
        assert_eq!(
            got,
            Reply::Bulk(Some(format!("value {i}"))),
            "key:{i} on {addr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_redis_primary_survives_kill_and_stale_restart() {
    if !installed("redis-server") || !installed("redis-cli") {
        eprintln!(
            "SKIPPED: redis-server and redis-cli are needed (apt-get install redis-server); \
             this test runs the examples/redis-primary scripts against real Redis processes"
        );
        return;
    }
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let mut redises = Redises {
        dir: t.dir.path().to_path_buf(),
        addrs: t
            .cluster
            .ids()
            .into_iter()
            .map(|id| (id, free_tcp_addr().unwrap()))
            .collect(),
        children: BTreeMap::new(),
    };
    let nodes_file = t.dir.path().join("nodes.conf");
    let map: String = redises
        .addrs
        .iter()
        .map(|(id, a)| format!("{id} {} {}\n", a.ip(), a.port()))
        .collect();
    std::fs::write(&nodes_file, map).unwrap();
    configure(&t, &nodes_file);
    let r = redises.addrs.clone();

    phase("start three empty Redis servers and the bully nodes; node 3's Redis is the primary");
    for id in t.cluster.ids() {
        redises.start(id);
    }
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    primary::wait_logged(
        &t,
        "Redis 1 and 2 to replicate from Redis 3",
        AGREE,
        || async {
            (is_primary(r[&3]) && follows(r[&1], r[&3]) && follows(r[&2], r[&3])).then_some(())
        },
    )
    .await;

    phase("writes go to the coordinator's Redis; replicas refuse them");
    let primary = primary_redis(&t, &[1, 2, 3], &redises).await.unwrap();
    assert_eq!(primary, r[&3]);
    write_keys(primary, 0..100, 2);
    let refused = redis(r[&1], &["SET", "key:x", "x"]).unwrap();
    assert!(
        matches!(&refused, Reply::Error(e) if e.starts_with("READONLY")),
        "{refused:?}"
    );

    phase("kill -9 node 3 and its Redis; a new primary takes writes within the bound");
    t.cluster.kill(3).unwrap();
    redises.kill(3);
    let killed = Instant::now();
    let new_primary = primary::wait_logged(&t, "a writable primary", FAILOVER_BOUND, || async {
        let addr = primary_redis(&t, &[1, 2], &redises).await?;
        let ok = redis(addr, &["SET", "after-failover", "yes"]).ok()?;
        (ok == Reply::Simple("OK".into())).then_some(addr)
    })
    .await;
    let failover = killed.elapsed();
    eprintln!("a new Redis primary accepted writes {failover:?} after the kill");
    assert_eq!(new_primary, r[&2], "node 2, the highest live node, leads");
    primary::wait_logged(&t, "Redis 1 to replicate from Redis 2", AGREE, || async {
        follows(r[&1], r[&2]).then_some(())
    })
    .await;
    write_keys(new_primary, 100..200, 1);
    assert_keys(r[&1], 0..200);

    phase("restart node 3 with an empty Redis: it catches up first, then takes over");
    redises.start(3);
    assert_eq!(redis(r[&3], &["DBSIZE"]).unwrap(), Reply::Int(0));
    let restarted = Instant::now();
    t.cluster.start(3).unwrap();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    let takeover = restarted.elapsed();
    eprintln!("node 3 caught up and took over {takeover:?} after its restart");
    primary::wait_logged(
        &t,
        "Redis 3 primary, Redis 1 and 2 its replicas",
        AGREE,
        || async {
            (is_primary(r[&3]) && follows(r[&1], r[&3]) && follows(r[&2], r[&3])).then_some(())
        },
    )
    .await;
    assert_keys(r[&3], 0..200);
    assert_eq!(
        redis(r[&3], &["GET", "after-failover"]).unwrap(),
        Reply::Bulk(Some("yes".into()))
    );
    write_keys(r[&3], 200..210, 2);

    phase("node 3's log: ineligible, follows node 2, eligible, then leads");
    let story: Vec<String> = events(&t, 3)
        .iter()
        .skip_while(|e| !matches!(e.record, Record::Started { incarnation } if incarnation > 1))
        .filter_map(|e| match &e.record {
            Record::EligibilitySet { eligible } => Some(format!("eligible={eligible}")),
            Record::View(v) if v.role != Role::Candidate => {
                Some(format!("{}:{}", v.role, v.epoch.map_or(0, |e| e.leader)))
            }
            _ => None,
        })
        .collect();
    let first_eligible = story.iter().position(|s| s == "eligible=true");
    let followed = story.iter().position(|s| s == "follower:2");
    let led = story.iter().position(|s| s == "coordinator:3");
    assert_eq!(
        story.first().map(String::as_str),
        Some("eligible=false"),
        "{story:?}"
    );
    assert!(
        followed < first_eligible && first_eligible < led && followed.is_some(),
        "node 3 must follow node 2, then become eligible, then lead: {story:?}"
    );
    assert!(status(&t, 3).await.unwrap().eligible);
}
