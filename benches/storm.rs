//! No failover storm on a busy host (issue 49): three bully nodes at the default timing
//! (quorum mode, on loopback) beside a disk flood and beside busy loops, and etcd 3.4 at
//! its defaults beside the same loads in the same sitting; one table of coordinator
//! (leader) changes and time without one.
//!
//! ```text
//! cargo bench --bench storm
//! STORM_SECS=60          how long each load runs (default 60)
//! STORM_SYSTEMS=bully,etcd  (default: both; etcd is skipped, saying why, when missing:
//!                            `apt-get install etcd-server etcd-client`)
//! ```
//!
//! The loads, each for `STORM_SECS` on this host, in the system's own temp dir (the
//! same disk as its data): `disk`, four threads each writing a 256 MB file in 1 MB
//! writes and fsyncing it, over and over (a checkpoint, a bulk load, a base backup);
//! `cpu`, eight threads spinning (twice as many as needed to fill two cores).
//!
//! bully's figures come from its nodes' event logs (the checker's terms of office,
//! `bully::checker::offices`): offices that began during the load, and the time
//! within it that no node was in office. etcd's from each member's `/metrics`
//! (`etcd_server_leader_changes_seen_total`, the largest change over the load) and
//! `etcd_server_has_leader` polled every 100 ms on member 1. Every process is a child
//! killed by its PID at the end, also on panic. Not part of `cargo test`.

#[path = "../tests/common/mod.rs"]
mod common;

use bully::checker::offices;
use bully::protocol::{Preempt, Timing};
use common::TestCluster;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One load for one system: changes of coordinator, and time without one.
struct Figures {
    system: &'static str,
    load: &'static str,
    changes: u64,
    leaderless_ms: u64,
    note: String,
}

fn main() {
    let secs: u64 = std::env::var("STORM_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let systems = std::env::var("STORM_SYSTEMS").unwrap_or_else(|_| "bully,etcd".into());
    let span = Duration::from_secs(secs);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut rows = Vec::new();
    println!("load average before: {}", load_average());
    for system in systems.split(',') {
        for load in [Load::Disk, Load::Cpu] {
            let figures = match system {
                "bully" => runtime.block_on(bully_under(load, span)),
                "etcd" => etcd_under(load, span),
                other => panic!("STORM_SYSTEMS: unknown system {other}"),
            };
            println!(
                "{:<6} {:<5} changes {:>3}  without a leader {:>6} ms  {}",
                figures.system, figures.load, figures.changes, figures.leaderless_ms, figures.note
            );
            rows.push(figures);
        }
    }
    println!(
        "\n{secs} s per load, 3 members on loopback, this host ({} cores):",
        cores()
    );
    println!("| system | load | coordinator changes | time without one | note |");
    println!("|---|---|---|---|---|");
    for f in &rows {
        println!(
            "| {} | {} | {} | {:.1} s | {} |",
            f.system,
            f.load,
            f.changes,
            f.leaderless_ms as f64 / 1000.0,
            f.note
        );
    }
    println!("load average after: {}", load_average());
}

#[derive(Debug, Clone, Copy)]
enum Load {
    Disk,
    Cpu,
}

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::Disk => "disk",
            Load::Cpu => "cpu",
        }
    }

    /// Starts the load's threads in `dir`; they stop when the returned guard drops.
    fn start(self, dir: &Path) -> Running {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = match self {
            Load::Disk => (0..4)
                .map(|i| {
                    let (stop, file) = (Arc::clone(&stop), dir.join(format!("flood-{i}")));
                    std::thread::spawn(move || flood(&file, &stop))
                })
                .collect(),
            Load::Cpu => (0..8)
                .map(|_| {
                    let stop = Arc::clone(&stop);
                    std::thread::spawn(move || {
                        let mut x = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                    })
                })
                .collect(),
        };
        Running { stop, threads }
    }
}

/// A load's threads, stopped and joined when dropped.
struct Running {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Writes `file` with 256 MB in 1 MB writes and fsyncs it, over and over, until `stop`.
fn flood(file: &Path, stop: &AtomicBool) {
    let chunk = vec![0x5au8; 1 << 20];
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut f) = std::fs::File::create(file) else {
            return;
        };
        for _ in 0..256 {
            if stop.load(Ordering::Relaxed) || f.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = f.sync_all();
    }
    let _ = std::fs::remove_file(file);
}

/// Three bully nodes, settled, then `load` for `span`: the offices in the event logs.
async fn bully_under(load: Load, span: Duration) -> Figures {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, Duration::from_secs(30))
        .await;
    let from = bully::wall_clock::wall_ms();
    {
        let _load = load.start(t.dir.path());
        tokio::time::sleep(span).await;
    }
    let until = bully::wall_clock::wall_ms();
    let mut entries = Vec::new();
    for id in t.cluster.ids() {
        entries
            .extend(bully::api::event_log::read_log(&t.cluster.data_dir(id)).unwrap_or_default());
    }
    entries.sort_by_key(|e| e.at_ms);
    // An office still open runs to the end of the load (the checker ends open offices
    // at the history's last entry).
    entries.push(bully::history::Entry::new(
        until,
        1,
        bully::history::Record::Healed,
    ));
    let all = offices(&entries, None);
    let changes = all
        .iter()
        .filter(|o| o.from_ms >= from && o.from_ms < until)
        .count() as u64;
    let covered: Vec<(u64, u64)> = all
        .iter()
        .map(|o| (o.from_ms.max(from), o.until_ms.min(until)))
        .filter(|(a, b)| a < b)
        .collect();
    Figures {
        system: "bully",
        load: load.name(),
        changes,
        leaderless_ms: (until - from).saturating_sub(union_ms(covered)),
        note: "default timing (heartbeat 100 ms, D 300 ms), quorum".into(),
    }
}

/// The total length of the union of `spans`.
fn union_ms(mut spans: Vec<(u64, u64)>) -> u64 {
    spans.sort_unstable();
    let (mut total, mut end) = (0, 0);
    for (a, b) in spans {
        let a = a.max(end);
        if b > a {
            total += b - a;
            end = b;
        }
    }
    total
}

/// Three etcd members at their defaults (heartbeat 100 ms, election timeout 1000 ms),
/// then `load` for `span`: the leader changes they counted and the time member 1 had
/// none.
fn etcd_under(load: Load, span: Duration) -> Figures {
    let skipped = |why: &str| Figures {
        system: "etcd",
        load: load.name(),
        changes: 0,
        leaderless_ms: 0,
        note: format!("SKIPPED: {why}"),
    };
    if !common::installed("etcd") {
        return skipped("etcd not installed (apt-get install etcd-server etcd-client)");
    }
    let dir = tempfile::Builder::new()
        .prefix("bully-storm-etcd-")
        .tempdir()
        .unwrap();
    let ports = free_ports(6);
    let client = |i: usize| format!("http://127.0.0.1:{}", ports[2 * i]);
    let peer = |i: usize| format!("http://127.0.0.1:{}", ports[2 * i + 1]);
    let cluster: Vec<String> = (0..3).map(|i| format!("m{i}={}", peer(i))).collect();
    let members = Members(
        (0..3)
            .map(|i| {
                Command::new("etcd")
                    .args(["--name", &format!("m{i}")])
                    .arg("--data-dir")
                    .arg(dir.path().join(format!("m{i}")))
                    .args(["--listen-client-urls", &client(i)])
                    .args(["--advertise-client-urls", &client(i)])
                    .args(["--listen-peer-urls", &peer(i)])
                    .args(["--initial-advertise-peer-urls", &peer(i)])
                    .args(["--initial-cluster", &cluster.join(",")])
                    .args(["--initial-cluster-state", "new"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start etcd")
            })
            .collect(),
    );
    let metrics = |i: usize| format!("{}/metrics", client(i));
    let settled = Instant::now();
    while metric(&metrics(0), "etcd_server_has_leader") != Some(1.0) {
        assert!(
            settled.elapsed() < Duration::from_secs(30),
            "etcd elected no leader in 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let changes = |i: usize| metric(&metrics(i), "etcd_server_leader_changes_seen_total");
    let before: Vec<Option<f64>> = (0..3).map(changes).collect();
    let mut leaderless = Duration::ZERO;
    {
        let _load = load.start(dir.path());
        let started = Instant::now();
        while started.elapsed() < span {
            let asked = Instant::now();
            if metric(&metrics(0), "etcd_server_has_leader") != Some(1.0) {
                leaderless += Duration::from_millis(100);
            }
            std::thread::sleep(Duration::from_millis(100).saturating_sub(asked.elapsed()));
        }
    }
    let after: Vec<Option<f64>> = (0..3).map(changes).collect();
    let seen = before
        .iter()
        .zip(&after)
        .filter_map(|(b, a)| Some(a.as_ref()? - b.as_ref()?))
        .fold(0.0f64, f64::max);
    drop(members);
    Figures {
        system: "etcd",
        load: load.name(),
        changes: seen as u64,
        leaderless_ms: leaderless.as_millis() as u64,
        note: format!(
            "{} defaults (heartbeat 100 ms, election 1000 ms)",
            etcd_version()
        ),
    }
}

/// etcd member processes, killed by PID when dropped.
struct Members(Vec<Child>);

impl Drop for Members {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One value of a Prometheus text page at `url` (curl, 1 s), if it answered.
fn metric(url: &str, name: &str) -> Option<f64> {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "1", url])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
}

/// `count` ports free on 127.0.0.1 now.
fn free_ports(count: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("its address").port())
        .collect()
}

fn etcd_version() -> String {
    let out = Command::new("etcd").arg("--version").output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    text.lines()
        .next()
        .map(|l| l.replace("etcd Version: ", "etcd "))
        .unwrap_or_else(|| "etcd".into())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
