//! What a load balancer sees while the network splits: 5 real nodes behind the chaos
//! relay, `/coordinator` read on every node every ~5 ms (as HAProxy's `httpchk` would,
//! only faster), through the three partitions of issue 8, each held 4 s:
//! the coordinator (5) cut off alone, a {4,5} | {1,2,3} split, and follower 1 alone.
//!
//! ```sh
//! cargo run --release --example partition_probe -- quorum 3
//! cargo run --release --example partition_probe -- classic 1
//! ```
//! Prints, per partition: how long two nodes answered 200 at once, when the cut-off side
//! last answered 200 after the cut, the longest stretch in which no node of the majority
//! side answered 200, and how far the highest term rose.

use anyhow::{bail, Context, Result};
use bully::chaos::harness::{Harness, HarnessSpec};
use bully::chaos::plan::Step;
use bully::protocol::{Mode, NodeId, Timing};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NODES: u64 = 5;
const HOLD: Duration = Duration::from_secs(4);
const AGREE: Duration = Duration::from_secs(30);
const POLL_EVERY: Duration = Duration::from_millis(5);

/// One round of reads: when, and which nodes answered 200.
struct Sample {
    at: Instant,
    ok: Vec<bool>,
}

/// One partition: which nodes were cut off, and what that should elect.
struct Cut {
    name: &'static str,
    side: &'static [NodeId],
    majority_leader: NodeId,
}

const CUTS: [Cut; 3] = [
    Cut {
        name: "coordinator 5 alone",
        side: &[5],
        majority_leader: 4,
    },
    Cut {
        name: "split {4,5} | {1,2,3}",
        side: &[4, 5],
        majority_leader: 3,
    },
    Cut {
        name: "follower 1 alone",
        side: &[1],
        majority_leader: 5,
    },
];

/// Whether `addr` answers `GET /coordinator` with 200 within 50 ms.
async fn answers_200(addr: SocketAddr) -> bool {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET /coordinator HTTP/1.0\r\nHost: probe\r\n\r\n")
            .await
            .ok()?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.ok()?;
        Some(head.ends_with(b"200"))
    };
    tokio::time::timeout(Duration::from_millis(50), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Reads every node, all at once, until `stop` is set.
async fn poll(addrs: Vec<SocketAddr>, samples: Arc<Mutex<Vec<Sample>>>, stop: Arc<Mutex<bool>>) {
    loop {
        if *stop.lock().expect("stop flag") {
            return;
        }
        let reads: Vec<_> = addrs
            .iter()
            .map(|&a| tokio::spawn(answers_200(a)))
            .collect();
        let mut ok = Vec::with_capacity(reads.len());
        for read in reads {
            ok.push(read.await.unwrap_or(false));
        }
        samples.lock().expect("samples").push(Sample {
            at: Instant::now(),
            ok,
        });
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Milliseconds in `samples` (between consecutive reads) for which `pred` held.
fn time_where(
    samples: &[Sample],
    from: Instant,
    to: Instant,
    pred: impl Fn(&Sample) -> bool,
) -> u64 {
    samples
        .windows(2)
        .filter(|w| w[0].at >= from && w[0].at < to && pred(&w[0]))
        .map(|w| (w[1].at - w[0].at).as_millis() as u64)
        .sum()
}

/// The longest stretch within `[from, to)` in which `pred` held on every read.
fn longest_where(
    samples: &[Sample],
    from: Instant,
    to: Instant,
    pred: impl Fn(&Sample) -> bool,
) -> u64 {
    let (mut best, mut start) = (0, None);
    for s in samples.iter().filter(|s| s.at >= from && s.at < to) {
        match (pred(s), start) {
            (true, None) => start = Some(s.at),
            (false, Some(t)) => {
                best = best.max((s.at - t).as_millis() as u64);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(t) = start {
        best = best.max((to - t).as_millis() as u64);
    }
    best
}

fn highest_term(h: &mut Harness) -> u64 {
    h.poll();
    bully::history::highest_term(&h.history())
}

async fn run_once(mode: Mode, binary: std::path::PathBuf) -> Result<Vec<String>> {
    let dir = tempfile::Builder::new().prefix("bully-probe-").tempdir()?;
    let mut h = Harness::start(&HarnessSpec {
        nodes: NODES,
        timing: Timing::default(),
        mode,
        binary,
        dir: dir.path().to_path_buf(),
        relay: true,
        seed: 1,
        http: true,
        slow_hooks: false,
        config_roll: false,
    })
    .await?;
    let addrs: Vec<SocketAddr> = (1..=NODES)
        .map(|id| h.http_addr(id).context("node without [http]"))
        .collect::<Result<_>>()?;
    if !h.wait_for_leader(NODES, AGREE).await {
        bail!("node 5 did not lead within {AGREE:?}");
    }
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(Mutex::new(false));
    let poller = tokio::spawn(poll(addrs, Arc::clone(&samples), Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut windows = Vec::new();
    for cut in &CUTS {
        let before = highest_term(&mut h);
        let cut_at = Instant::now();
        h.execute(Step::Partition(cut.side.to_vec()));
        let elected = h.wait_for_leader(cut.majority_leader, AGREE).await;
        tokio::time::sleep_until((cut_at + HOLD).into()).await;
        let heal_at = Instant::now();
        h.execute(Step::Heal);
        let back = h.wait_for_leader(NODES, AGREE).await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let after = highest_term(&mut h);
        windows.push((
            cut,
            cut_at,
            heal_at,
            Instant::now(),
            before,
            after,
            elected && back,
        ));
    }
    *stop.lock().expect("stop flag") = true;
    poller.await?;
    h.stop_all();
    let samples = samples.lock().expect("samples");
    let mut rows = Vec::new();
    for (cut, cut_at, heal_at, end, before, after, agreed) in windows {
        let side: Vec<usize> = cut.side.iter().map(|&id| id as usize - 1).collect();
        let majority: Vec<usize> = (0..NODES as usize).filter(|i| !side.contains(i)).collect();
        let two = time_where(&samples, cut_at, end, |s| {
            s.ok.iter().filter(|&&ok| ok).count() >= 2
        });
        let side_last_200 = samples
            .iter()
            .filter(|s| s.at >= cut_at && s.at < heal_at && side.iter().any(|&i| s.ok[i]))
            .map(|s| (s.at - cut_at).as_millis() as u64)
            .max();
        let leaderless = longest_where(&samples, cut_at, heal_at, |s| {
            !majority.iter().any(|&i| s.ok[i])
        });
        rows.push(format!(
            "{mode:<7} {:<22} two-200 {:>5} ms | cut-off side last 200 {:>9} | majority side without 200 {:>4} ms | terms {before} -> {after}{}",
            cut.name,
            two,
            side_last_200.map_or("never".to_string(), |ms| format!("+{ms} ms")),
            leaderless,
            if agreed { "" } else { "  (NO AGREEMENT)" },
        ));
    }
    Ok(rows)
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = match args.next().as_deref() {
        Some("classic") => Mode::Classic,
        Some("quorum") | None => Mode::Quorum,
        Some(other) => bail!("mode must be quorum or classic, not {other:?}"),
    };
    let runs: u32 = args
        .next()
        .map_or(Ok(1), |r| r.parse())
        .context("runs must be a number")?;
    let binary = std::env::current_exe()?
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("bully"))
        .context("cannot find the bully binary beside the example")?;
    if !binary.exists() {
        bail!(
            "{} not found: run `cargo build --release` first",
            binary.display()
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for run in 1..=runs {
        println!("run {run}/{runs}");
        for row in rt.block_on(run_once(mode, binary.clone()))? {
            println!("  {row}");
        }
    }
    Ok(())
}
