//! `bully run` on real processes (tests/run_fencing.rs and its sabotage twin): 3 nodes
//! behind the chaos relay, a keeper with a singleton job on each
//! (`examples/lease_job.rs`, which stamps its start, its liveness every 2 ms and its
//! stop on the boot clock, lingering 200 ms after SIGTERM), and faults on the coordinator. What the jobs wrote is
//! judged from their files alone: no two ran at once, and tokens rose.
//! Included with `#[path = "common/keepers.rs"] mod keepers;` next to `mod common;`
//! (tests/common/rolling_d.rs puts the same keepers on a rolling restart).
#![allow(dead_code)]

use super::common::{binary, relay_spec, wait_until};
use bully::boot_clock::BootInstant;
use bully::chaos::harness::Harness;
use bully::chaos::plan::Step;
use bully::client::Client;
use bully::history::Entry;
use bully::protocol::{Mode, NodeId, Timing};
use bully::signals::{self, Signal};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Generous bounds for a busy 2-core machine; the figures are printed.
pub const AGREE: Duration = Duration::from_secs(20);

/// How long a job stays alive after its SIGTERM, like a database flushing: longer than
/// a handover takes (about 125 ms from a step-down to the successor's job here), so a
/// successor elected without waiting for the release would overlap it; after a lapse
/// its SIGKILL (74 ms after the SIGTERM with the default timing) cuts it short.
const LINGER_MS: &str = "200";

/// The cluster's size: node 3 leads whenever it can (preempt = always).
const NODES: u64 = 3;

/// One fault on the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Kill,
    /// SIGSTOP of `bully node` only: its keeper must fence by itself.
    PauseNode,
    PauseNodeAndJob,
    /// Cut off alone by the relay: its lease lapses without acks.
    Partition,
    CleanStop,
    StepDown,
}

/// One run of a job, from its file: its start and its last sign of life.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub node: NodeId,
    pub token: u64,
    pub pid: u32,
    pub start: BootInstant,
    pub last: BootInstant,
}

/// What a scenario saw.
pub struct Seen {
    /// Every job run, by start.
    pub runs: Vec<Run>,
    /// Per fault: from the fault to the next job's start, in ms.
    pub gaps_ms: Vec<f64>,
    /// Per node-only SIGSTOP: from the stalled job's last sign of life to the next
    /// job's start, in ms (negative: they overlapped).
    pub stall_margins_ms: Vec<f64>,
    /// The nodes' merged event logs.
    pub history: Vec<Entry>,
    pub timing: Timing,
    /// The keepers' logs, for failure messages.
    pub keeper_logs: String,
}

/// Runs `faults` in order on whichever node leads (all with `timing`), each held until
/// the next job has started and `hold` more, then healed; waits for node 3 to lead
/// (and its job to run) again before the next.
pub async fn scenario(dir: &Path, faults: &[Fault], hold: Duration, timing: Timing) -> Seen {
    let spec = relay_spec(NODES, timing, Mode::Quorum, dir);
    let mut h = Harness::start(&spec)
        .await
        .expect("start 3 nodes behind the relay");
    assert!(h.wait_for_leader(NODES, AGREE).await, "no first leader");
    let keepers = Keepers::start(&h, dir);
    let mut current = keepers.next_run(0).await;
    let mut gaps_ms = Vec::new();
    // Per node-only SIGSTOP: the stalled leader, its job and when the next job started;
    // the margin is read once every job has ended, since the stalled job may still
    // give signs of life after the next one started (that is the overlap to measure).
    let mut stalls = Vec::new();
    for (i, &fault) in faults.iter().enumerate() {
        let leader = current.node;
        eprintln!(
            "=== fault {i}: {fault:?} on node {leader} (token {})",
            current.token
        );
        let at = BootInstant::now();
        inject(&mut h, fault, leader, current.pid).await;
        let next = keepers.next_run(current.token).await;
        gaps_ms.push(ms(next.start.saturating_duration_since(at)));
        if fault == Fault::PauseNode {
            stalls.push((leader, current.pid, next.start));
        }
        tokio::time::sleep(hold).await;
        heal(&mut h, fault, leader, current.pid);
        assert!(
            h.wait_for_leader(NODES, AGREE).await,
            "node {NODES} did not lead again"
        );
        let (_, epoch) = h.agreed().expect("agreed");
        current = keepers.next_run(epoch.token() - 1).await;
    }
    let mut keepers = keepers;
    keepers.stop();
    let stall_margins_ms = stalls
        .into_iter()
        .map(|(leader, pid, next_start)| signed_ms(keepers.run_of(leader, pid).last, next_start))
        .collect();
    h.stop_all();
    Seen {
        runs: keepers.runs(),
        gaps_ms,
        stall_margins_ms,
        history: h.history(),
        timing,
        keeper_logs: keepers.log_tail(),
    }
}

/// Does `fault` to `leader` (whose job runs as `job`).
async fn inject(h: &mut Harness, fault: Fault, leader: NodeId, job: u32) {
    match fault {
        Fault::Kill => h.execute(Step::Kill(leader)),
        Fault::PauseNode => h.execute(Step::Pause(leader)),
        Fault::PauseNodeAndJob => {
            h.execute(Step::Pause(leader));
            let _ = signals::send(job, Signal::SIGSTOP);
        }
        Fault::Partition => h.execute(Step::Partition(vec![leader])),
        Fault::CleanStop => h
            .cluster
            .stop(leader, Duration::from_secs(10))
            .expect("clean stop"),
        Fault::StepDown => {
            let c = &h.cluster;
            let client = Client::connect(c.addr(leader), c.client_tls(), Some(leader), AGREE)
                .await
                .expect("client");
            client.step_down(1_000).await.expect("step-down accepted");
        }
    }
}

/// Undoes `fault`.
fn heal(h: &mut Harness, fault: Fault, leader: NodeId, job: u32) {
    match fault {
        Fault::Kill | Fault::CleanStop => h.execute(Step::Start(leader)),
        Fault::PauseNode => h.execute(Step::Resume(leader)),
        Fault::PauseNodeAndJob => {
            // Killed by its keeper while stopped, as a rule; continue it if not.
            let _ = signals::send(job, Signal::SIGCONT);
            h.execute(Step::Resume(leader));
        }
        Fault::Partition => h.execute(Step::Heal),
        Fault::StepDown => {}
    }
}

/// Overlapping runs and falling tokens, each said in a line.
pub fn violations(runs: &[Run]) -> Vec<String> {
    let mut out = Vec::new();
    for pair in runs.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.last >= b.start {
            out.push(format!(
                "overlap: node {}'s job (token {}, pid {}) was alive {:.1} ms after node {}'s \
                 (token {}, pid {}) started",
                a.node,
                a.token,
                a.pid,
                ms(a.last.saturating_duration_since(b.start)),
                b.node,
                b.token,
                b.pid
            ));
        }
        if b.token < a.token {
            out.push(format!(
                "token fell: node {} started with {} after node {} with {}",
                b.node, b.token, a.node, a.token
            ));
        }
    }
    out
}

/// `min / median / max` of some figures in ms, for the test's output.
pub fn summary(label: &str, figures: &[f64]) {
    let mut sorted = figures.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (Some(min), Some(max)) = (sorted.first(), sorted.last()) else {
        return;
    };
    let median = sorted[sorted.len() / 2];
    eprintln!(
        "    {label}: n={} min {min:.1} ms, median {median:.1} ms, max {max:.1} ms",
        sorted.len()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `to - from` in ms, negative when `to` came first.
fn signed_ms(from: BootInstant, to: BootInstant) -> f64 {
    ms(to.saturating_duration_since(from)) - ms(from.saturating_duration_since(to))
}

/// The keepers, one per node, killed (and their jobs with them: PR_SET_PDEATHSIG)
/// when dropped, also on a panic. Also used by tests/common/rolling_d.rs.
pub struct Keepers {
    children: BTreeMap<NodeId, Child>,
    dir: PathBuf,
}

impl Keepers {
    /// A keeper with a job for every node of `h`, its files under `dir/jobs`.
    pub fn start(h: &Harness, dir: &Path) -> Keepers {
        let dir = dir.join("jobs");
        std::fs::create_dir_all(&dir).expect("jobs dir");
        let mut keepers = Keepers {
            children: BTreeMap::new(),
            dir,
        };
        for &id in h.ids() {
            let log = std::fs::File::create(keepers.log_file(id)).expect("keeper log");
            let child = Command::new(binary())
                .arg("run")
                .arg("--config")
                .arg(h.cluster.config_path(id))
                .arg("--")
                .arg(job_binary())
                .arg(keepers.job_file(id))
                .env("LINGER_MS", LINGER_MS)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("keeper log"))
                .stderr(log)
                .spawn()
                .expect("start bully run");
            keepers.children.insert(id, child);
        }
        keepers
    }

    fn job_file(&self, id: NodeId) -> PathBuf {
        self.dir.join(format!("job-{id}.log"))
    }

    fn log_file(&self, id: NodeId) -> PathBuf {
        self.dir.join(format!("keeper-{id}.log"))
    }

    /// Every run of every job so far, by start.
    pub fn runs(&self) -> Vec<Run> {
        let mut runs: Vec<Run> = self
            .children
            .keys()
            .flat_map(|&id| runs_in(&self.job_file(id), id))
            .collect();
        runs.sort_by_key(|r| r.start);
        runs
    }

    /// Node `id`'s run with process `pid`.
    fn run_of(&self, id: NodeId, pid: u32) -> Run {
        runs_in(&self.job_file(id), id)
            .into_iter()
            .find(|r| r.pid == pid)
            .expect("the run is on file")
    }

    /// The newest run, once one with a token above `above` has started.
    pub async fn next_run(&self, above: u64) -> Run {
        let what = format!("a job with a token above {above}");
        wait_until(&what, AGREE, || async {
            self.runs().into_iter().rev().find(|r| r.token > above)
        })
        .await
    }

    /// SIGTERM to every keeper (each stops its job first), then a bounded wait.
    pub fn stop(&mut self) {
        for child in self.children.values() {
            let _ = signals::send(child.id(), Signal::SIGTERM);
        }
        for (id, child) in &mut self.children {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while child.try_wait().expect("wait for a keeper").is_none() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "keeper {id} did not stop"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// The last lines of every keeper's log.
    pub fn log_tail(&self) -> String {
        let mut out = String::new();
        for &id in self.children.keys() {
            let text = std::fs::read_to_string(self.log_file(id)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("--- keeper {id} (tail)\n"));
            for line in &lines[lines.len().saturating_sub(12)..] {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
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

/// The job binary cargo built beside the tests (`cargo test` builds the examples).
fn job_binary() -> PathBuf {
    let exe = binary();
    let dir = exe.parent().expect("the target dir");
    dir.join("examples").join("lease_job")
}

/// The runs in one job file: a `start` line opens one; every later line of the same
/// pid is a sign of life. A line cut short by a SIGKILL is skipped.
fn runs_in(path: &Path, node: NodeId) -> Vec<Run> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut runs: Vec<Run> = Vec::new();
    for (kind, token, pid, at) in text.lines().filter_map(parse) {
        match kind {
            "start" => runs.push(Run {
                node,
                token,
                pid,
                start: at,
                last: at,
            }),
            _ => {
                if let Some(run) = runs.iter_mut().rev().find(|r| r.pid == pid) {
                    run.last = run.last.max(at);
                }
            }
        }
    }
    runs
}

/// `kind token pid nanos`.
fn parse(line: &str) -> Option<(&str, u64, u32, BootInstant)> {
    let mut parts = line.split(' ');
    let kind = parts.next()?;
    let token = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    let at = BootInstant::from_nanos(parts.next()?.parse().ok()?);
    Some((kind, token, pid, at))
}
