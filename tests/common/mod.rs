//! Helpers shared by the real-process tests: a cluster in a temp dir, bounded waits,
//! and views of every node.
#![allow(dead_code)]

use bully::api::Status;
use bully::certs;
use bully::cluster::{Cluster, ClusterSpec};
use bully::protocol::{Mode, NodeId, Preempt, Timing};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether `program` runs (`--version`, or `-v` for haproxy): tests that need an outside
/// program skip, saying so, when it is missing.
pub fn installed(program: &str) -> bool {
    let flag = if program == "haproxy" {
        "-v"
    } else {
        "--version"
    };
    std::process::Command::new(program)
        .arg(flag)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The `bully` binary cargo built for these tests.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bully"))
}

/// Starts `bully node --config config` and waits (within `timeout`) for it to exit, as
/// a node whose start must be refused does: its exit code and what it said on stderr,
/// or `None` when it was still running at the deadline (it is killed then).
pub async fn refused_start(
    config: &std::path::Path,
    timeout: std::time::Duration,
) -> Option<(Option<i32>, String)> {
    let mut child = std::process::Command::new(binary())
        .arg("node")
        .arg("--config")
        .arg(config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("bully node ran");
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for bully node") {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let mut said = String::new();
    let stderr = child.stderr.as_mut().expect("piped");
    std::io::Read::read_to_string(stderr, &mut said).expect("stderr");
    Some((status.code(), said))
}

/// Runs `bully` with `args` to its end (the CLI tests).
pub fn bully(args: &[&str]) -> std::process::Output {
    std::process::Command::new(binary())
        .args(args)
        .output()
        .expect("run bully")
}

/// What a finished `bully` printed, stdout then stderr.
pub fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A cluster whose files live in a temp dir that outlives it.
pub struct TestCluster {
    pub cluster: Cluster,
    pub dir: tempfile::TempDir,
}

impl TestCluster {
    /// Creates (does not start) `nodes` nodes with the given timing.
    pub fn new(nodes: u64, timing: Timing, preempt: Preempt) -> TestCluster {
        TestCluster::with_mode(nodes, timing, preempt, Mode::Quorum)
    }

    /// A cluster of `nodes` running `mode` (the default for [`TestCluster::new`] is
    /// quorum, like the config's).
    pub fn with_mode(nodes: u64, timing: Timing, preempt: Preempt, mode: Mode) -> TestCluster {
        TestCluster::routed(nodes, timing, preempt, mode, |_, to, addrs| addrs[&to])
    }

    /// Like [`TestCluster::with_mode`], each node dialing each peer at the address
    /// `route(from, to, listen_addrs)` gives (a relay's front, say).
    pub fn routed(
        nodes: u64,
        timing: Timing,
        preempt: Preempt,
        mode: Mode,
        route: impl Fn(NodeId, NodeId, &BTreeMap<NodeId, SocketAddr>) -> SocketAddr,
    ) -> TestCluster {
        let dir = tempfile::Builder::new()
            .prefix("bully-test-")
            .tempdir()
            .expect("temp dir");
        let spec = ClusterSpec {
            nodes,
            timing,
            preempt,
            mode,
            binary: binary(),
            dir: dir.path().to_path_buf(),
        };
        let cluster = Cluster::create_routed(spec, route).expect("create cluster");
        TestCluster { cluster, dir }
    }

    /// Starts every node.
    pub fn start_all(&mut self) {
        for id in self.cluster.ids() {
            self.cluster.start(id).expect("start node");
        }
    }

    /// Statuses of the given nodes (None where a node does not answer in time).
    pub async fn views(&self, ids: &[NodeId]) -> BTreeMap<NodeId, Option<Status>> {
        let asks = ids.iter().map(|&id| async move {
            (
                id,
                self.cluster
                    .status(id, Duration::from_millis(800))
                    .await
                    .ok(),
            )
        });
        futures::future::join_all(asks).await.into_iter().collect()
    }

    /// Waits until every node in `live` follows `leader` and `leader` alone says it is
    /// coordinator; returns the agreed epoch term. Panics with the last views and the
    /// node logs after `timeout`.
    pub async fn wait_for_leader(&self, live: &[NodeId], leader: NodeId, timeout: Duration) -> u64 {
        let started = Instant::now();
        let mut last = BTreeMap::new();
        while started.elapsed() < timeout {
            last = self.views(live).await;
            if let Some(term) = agreed(&last, leader) {
                return term;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "no agreement on leader {leader} among {live:?} within {timeout:?}; last views: {last:#?}\n{}",
            self.log_tail()
        );
    }

    /// The last lines of every node's log, for failure messages.
    pub fn log_tail(&self) -> String {
        self.cluster.log_tail(15)
    }
}

/// The agreed epoch term when every view follows `leader` and only `leader` leads.
pub fn agreed(views: &BTreeMap<NodeId, Option<Status>>, leader: NodeId) -> Option<u64> {
    let mut term = None;
    for status in views.values() {
        let status = status.as_ref()?;
        if status.coordinator() != Some(leader) {
            return None;
        }
        let is_leader = status.id == leader;
        if is_leader != (status.role == bully::protocol::Role::Coordinator) {
            return None;
        }
        let epoch = status.epoch?;
        if term.is_some_and(|t| t != epoch.term) {
            return None;
        }
        term = Some(epoch.term);
    }
    term
}

/// Polls `probe` every 50 ms until it yields a value or `timeout` passes.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first wall-clock millisecond after `t`: a cut at it keeps every record stamped
/// at or before `t` and none stamped after the caller goes on.
pub async fn wall_ms_after(t: u64) -> u64 {
    wait_until(
        "the wall clock to pass a millisecond",
        Duration::from_secs(5),
        || async {
            let now = bully::wall_clock::wall_ms();
            (now > t).then_some(now)
        },
    )
    .await
}

/// A quinn client config built by hand: trusts `ca`, presents `cert` (or nothing).
pub fn raw_client(ca: &Path, cert: Option<(&Path, &Path)>, alpn: &[u8]) -> quinn::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = certs::load_roots(ca).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots);
    let mut tls = match cert {
        Some((c, k)) => builder
            .with_client_auth_cert(certs::load_certs(c).unwrap(), certs::load_key(k).unwrap())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    tls.alpn_protocols = vec![alpn.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    quinn::ClientConfig::new(Arc::new(crypto))
}

/// Connects with a hand-built config, bounded by 5 s.
pub async fn raw_connect(
    config: quinn::ClientConfig,
    addr: SocketAddr,
    name: &str,
) -> Result<quinn::Connection, String> {
    let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let connecting = endpoint
        .connect_with(config, addr, name)
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(5), connecting)
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| e.to_string())
}

/// Five nodes behind the chaos relay (default timing, `mode`), in `dir`: what the
/// partition and one-way tests cut apart.
pub async fn five_behind_relay(dir: &Path, mode: Mode) -> bully::chaos::harness::Harness {
    bully::chaos::harness::Harness::start(&relay_spec(5, Timing::default(), mode, dir))
        .await
        .expect("start 5 nodes behind the relay")
}

/// `nodes` nodes of `timing` and `mode` behind the chaos relay, in `dir`, without HTTP:
/// the cluster every relay test starts.
pub fn relay_spec(
    nodes: u64,
    timing: Timing,
    mode: Mode,
    dir: &Path,
) -> bully::chaos::harness::HarnessSpec {
    bully::chaos::harness::HarnessSpec {
        nodes,
        timing,
        mode,
        binary: binary(),
        dir: dir.to_path_buf(),
        relay: true,
        seed: 1,
        http: false,
        slow_hooks: false,
        config_roll: false,
    }
}

/// Stops every node (each given 5 s to end cleanly), then [`assert_invariants`]: the
/// last check of a test whose nodes ran scenarios to the end.
pub fn stop_all_and_assert_invariants(t: &mut TestCluster) {
    for id in t.cluster.ids() {
        let _ = t.cluster.stop(id, Duration::from_secs(5));
    }
    assert_invariants(t);
}

/// I1–I4 (`check_safety`), I6 and I7 on the merged event logs of a cluster run at
/// default timing; fails with the violations, the history's tail and the node logs.
pub fn assert_invariants(t: &TestCluster) {
    let history = t.cluster.history();
    let mut violations = bully::checker::check_safety(&history);
    let bound = bully::checker::lease_bound_ms(&Timing::default());
    violations.extend(bully::checker::check_no_overlap(&history, bound));
    violations.extend(bully::checker::check_one_per_term(&history));
    assert!(
        violations.is_empty(),
        "{violations:#?}\n{}\n{}",
        bully::history::tail(&history, 80),
        t.log_tail()
    );
}

/// I6 (no two offices overlap) and I7 (one holder per term) on the merged event logs of
/// a cluster run at default timing; fails with the violations and the history's tail.
pub fn assert_offices_never_overlap(t: &TestCluster) {
    let history = t.cluster.history();
    let timing = Timing::default();
    let mut violations =
        bully::checker::check_no_overlap(&history, bully::checker::lease_bound_ms(&timing));
    violations.extend(bully::checker::check_one_per_term(&history));
    assert!(
        violations.is_empty(),
        "{violations:#?}\n{}",
        bully::history::tail(&history, 80)
    );
}

/// Where bully set `data_dir` aside (`<data_dir>.aside.<unix seconds>`, never deleted),
/// if it did: the newest such dir that holds a cluster.
#[allow(dead_code)]
pub fn set_aside(data_dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let prefix = format!("{}.aside.", data_dir.file_name()?.to_string_lossy());
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(data_dir.parent()?)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .filter(|p| p.join("PG_VERSION").is_file())
        .collect();
    found.sort();
    found.pop()
}
