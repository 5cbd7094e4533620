//! `bully run` on real processes: 3 nodes, a keeper with a singleton job on each
//! (`examples/lease_job.rs`, which stamps its start, its liveness every 2 ms and its
//! SIGTERM on the boot clock), and 60 faults on the coordinator: kill -9, SIGSTOP of
//! the node only (20 of them), SIGSTOP of the node and its job, a clean stop, a
//! step-down. Judged from the jobs' files alone: no two jobs ever ran at once, tokens
//! rise, and after each fault a job runs again; the margin by which a stalled node's
//! job was dead before the next one started is printed. The nodes' event logs are
//! checked against I1–I7 too.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::boot_clock::BootInstant;
use bully::protocol::{NodeId, Preempt, Timing};
use common::{binary, wait_until, TestCluster};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Generous bounds for a busy 2-core machine; the figures are printed.
const AGREE: Duration = Duration::from_secs(20);
const ROUNDS: usize = 10;

/// One fault on the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Kill,
    PauseNode,
    PauseNodeAndJob,
    CleanStop,
    StepDown,
}

/// A round: each kind once, and the node-only pause twice (20 in 10 rounds).
const ROUND: [Fault; 6] = [
    Fault::PauseNode,
    Fault::Kill,
    Fault::PauseNodeAndJob,
    Fault::CleanStop,
    Fault::PauseNode,
    Fault::StepDown,
];

/// One line a job wrote.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    token: u64,
    pid: u32,
    at: BootInstant,
}

/// One run of a job, from its files: when it started and the last sign of life.
#[derive(Debug, Clone, Copy)]
struct Run {
    node: NodeId,
    token: u64,
    pid: u32,
    start: BootInstant,
    last: BootInstant,
}

/// The keepers, one per node, killed (and with them their jobs) when dropped.
struct Keepers {
    children: BTreeMap<NodeId, Child>,
    dir: PathBuf,
}

impl Keepers {
    fn start(t: &TestCluster) -> Keepers {
        let dir = t.dir.path().join("jobs");
        std::fs::create_dir_all(&dir).unwrap();
        let mut keepers = Keepers {
            children: BTreeMap::new(),
            dir,
        };
        for id in t.cluster.ids() {
            let log = std::fs::File::create(keepers.dir.join(format!("keeper-{id}.log"))).unwrap();
            let child = Command::new(binary())
                .arg("run")
                .arg("--config")
                .arg(t.cluster.config_path(id))
                .arg("--")
                .arg(job_binary())
                .arg(keepers.job_file(id))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
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

    /// Every run of every job so far, by start.
    fn runs(&self) -> Vec<Run> {
        let mut runs = Vec::new();
        for &id in self.children.keys() {
            runs.extend(runs_in(&self.job_file(id), id));
        }
        runs.sort_by_key(|r| r.start);
        runs
    }

    /// The newest run, once one with a token above `above` has started.
    async fn next_run(&self, above: u64) -> Run {
        wait_until(
            &format!("a job with a token above {above}"),
            AGREE,
            || async { self.runs().into_iter().rev().find(|r| r.token > above) },
        )
        .await
    }

    /// SIGTERM to every keeper (each stops its job first), then a bounded wait.
    fn stop(&mut self) {
        for child in self.children.values() {
            let _ = bully::signals::send(child.id(), bully::signals::Signal::SIGTERM);
        }
        for (id, child) in &mut self.children {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while child.try_wait().unwrap().is_none() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "keeper {id} did not stop"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    fn log_tail(&self) -> String {
        let mut out = String::new();
        for id in self.children.keys() {
            let text = std::fs::read_to_string(self.dir.join(format!("keeper-{id}.log")))
                .unwrap_or_default();
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
    let dir = exe.parent().expect("target dir");
    dir.join("examples").join("lease_job")
}

/// The runs in one job file: a `start` line opens one, every later line of the same
/// pid is a sign of life.
fn runs_in(path: &Path, node: NodeId) -> Vec<Run> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut runs: Vec<Run> = Vec::new();
    for line in text.lines() {
        let Some((kind, stamp)) = parse(line) else {
            continue; // a line cut short by a SIGKILL
        };
        match kind {
            "start" => runs.push(Run {
                node,
                token: stamp.token,
                pid: stamp.pid,
                start: stamp.at,
                last: stamp.at,
            }),
            _ => {
                if let Some(run) = runs.iter_mut().rev().find(|r| r.pid == stamp.pid) {
                    run.last = run.last.max(stamp.at);
                }
            }
        }
    }
    runs
}

fn parse(line: &str) -> Option<(&str, Stamp)> {
    let mut parts = line.split(' ');
    let kind = parts.next()?;
    let token = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    let at = BootInstant::from_nanos(parts.next()?.parse().ok()?);
    Some((kind, Stamp { token, pid, at }))
}

/// Two runs overlapped, or a later start carried a lower token.
fn violations(runs: &[Run]) -> Vec<String> {
    let mut out = Vec::new();
    for pair in runs.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.last >= b.start {
            out.push(format!(
                "overlap: node {} job (token {}, pid {}) alive {:?} after node {}'s (token {}, pid {}) started",
                a.node,
                a.token,
                a.pid,
                a.last.saturating_duration_since(b.start),
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(label: &str, mut figures: Vec<f64>) {
    figures.sort_by(f64::total_cmp);
    if figures.is_empty() {
        return;
    }
    let median = figures[figures.len() / 2];
    eprintln!(
        "    {label}: n={} min {:.1} ms, median {:.1} ms, max {:.1} ms",
        figures.len(),
        figures[0],
        median,
        figures[figures.len() - 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_jobs_ever_run_at_once_across_sixty_faults() {
    let timing = Timing::default();
    let mut t = TestCluster::new(3, timing, Preempt::Always);
    let all = t.cluster.ids();
    t.start_all();
    t.wait_for_leader(&all, 3, AGREE).await;
    let mut keepers = Keepers::start(&t);
    let mut current = keepers.next_run(0).await;
    let bound = timing.suspect_after_ms + 2 * timing.answer_timeout_ms + 1000;
    let mut gaps: Vec<f64> = Vec::new();
    let mut over_bound = 0;
    let mut stall_margins: Vec<f64> = Vec::new();

    for round in 0..ROUNDS {
        for fault in ROUND {
            let leader = current.node;
            eprintln!(
                "=== round {round}: {fault:?} on node {leader} (token {})",
                current.token
            );
            let at = BootInstant::now();
            match fault {
                Fault::Kill => t.cluster.kill(leader).unwrap(),
                Fault::PauseNode => t.cluster.pause(leader).unwrap(),
                Fault::PauseNodeAndJob => {
                    t.cluster.pause(leader).unwrap();
                    let _ = bully::signals::send(current.pid, bully::signals::Signal::SIGSTOP);
                }
                Fault::CleanStop => t.cluster.stop(leader, Duration::from_secs(10)).unwrap(),
                Fault::StepDown => {
                    let client = primary::client(&t, leader).await.expect("client");
                    client.step_down(1_000).await.expect("step-down accepted");
                }
            }
            let next = keepers.next_run(current.token).await;
            let gap = next.start.saturating_duration_since(at);
            gaps.push(ms(gap));
            if gap > Duration::from_millis(bound) {
                over_bound += 1;
            }
            let old = runs_in(&keepers.job_file(leader), leader)
                .into_iter()
                .find(|r| r.pid == current.pid)
                .expect("the old run is on file");
            if matches!(fault, Fault::PauseNode) {
                stall_margins.push(ms(next.start.saturating_duration_since(old.last)));
            }
            // Heal, and wait for the cluster to settle on the highest node again.
            match fault {
                Fault::Kill | Fault::CleanStop => t.cluster.start(leader).unwrap(),
                Fault::PauseNode => t.cluster.resume(leader).unwrap(),
                Fault::PauseNodeAndJob => {
                    let _ = bully::signals::send(current.pid, bully::signals::Signal::SIGCONT);
                    t.cluster.resume(leader).unwrap();
                }
                Fault::StepDown => {}
            }
            let term = t.wait_for_leader(&all, 3, AGREE).await;
            let token = bully::protocol::Epoch { term, leader: 3 }.token();
            current = keepers.next_run(token - 1).await;
            assert_eq!(current.node, 3, "{current:?}");
            let found = violations(&keepers.runs());
            assert!(found.is_empty(), "{found:#?}\n{}", keepers.log_tail());
        }
    }

    keepers.stop();
    let runs = keepers.runs();
    let found = violations(&runs);
    eprintln!(
        "    {} job runs, {} faults",
        runs.len(),
        ROUNDS * ROUND.len()
    );
    summary("fault to the next job's start", gaps);
    eprintln!("    over D + 2T + 1 s ({bound} ms): {over_bound}");
    summary(
        "node SIGSTOPped: its job's last sign of life to the next job's start",
        stall_margins.clone(),
    );
    assert!(found.is_empty(), "{found:#?}\n{}", keepers.log_tail());
    assert!(
        stall_margins.iter().all(|&m| m > 0.0),
        "a stalled node's job outlived the next start: {stall_margins:?}"
    );

    for id in t.cluster.ids() {
        let _ = t.cluster.stop(id, Duration::from_secs(5));
    }
    let history = t.cluster.history();
    let mut violations = bully::checker::check_safety(&history);
    let lease = bully::checker::lease_bound_ms(&timing);
    violations.extend(bully::checker::check_no_overlap(&history, lease));
    violations.extend(bully::checker::check_one_per_term(&history));
    assert!(violations.is_empty(), "{violations:#?}\n{}", t.log_tail());
}
