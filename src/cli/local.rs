//! `bully local --nodes N`: a whole cluster of real node processes on loopback, a live
//! view of every node, and a tiny shell (`kill K`, `start K`, `pause K`, `resume K`,
//! `status`, `quit`) so a newcomer can watch the bully take over.

use super::run_dir::RunDir;
use super::LocalArgs;
use crate::certs::TlsFiles;
use crate::chaos::harness::{Harness, HarnessSpec};
use crate::chaos::plan::Step;
use crate::chaos::report::RunParams;
use crate::client::Client;
use crate::node::Status;
use crate::protocol::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A status update from one node's watcher; `None` means the node is unreachable.
type Update = (NodeId, Option<Status>);

/// Runs the local cluster until `quit`, end of input or Ctrl-C.
pub async fn run(args: &LocalArgs) -> ExitCode {
    match run_inner(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run_inner(args: &LocalArgs) -> anyhow::Result<()> {
    let run_dir = RunDir::new(args.dir.as_deref(), "bully-local-")?;
    let mut h = start(args, run_dir.path()).await?;
    let (updates, watchers) = watch_every_node(&h);
    shell(&mut h, updates).await;
    for watcher in watchers {
        watcher.abort();
    }
    let (timing, mode) = (args.timing.timing(), args.mode.mode());
    let origin_ms = h.origin_ms;
    let report = h.finish(|end_ms| RunParams {
        command: "local".into(),
        mode,
        nodes: args.nodes,
        duration_s: end_ms.saturating_sub(origin_ms) as f64 / 1000.0,
        timing_profile: format!("{:?}", args.timing).to_lowercase(),
        timing,
        slack_ms: timing.convergence_bound_in(mode),
        ..RunParams::default()
    });
    if let Some(path) = &args.html {
        crate::chaos::picture::write(&report, path)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        println!(
            "wrote the session's timeline to {} ({} violations found)",
            path.display(),
            report.violations.len()
        );
    }
    if args.keep_dir && run_dir.is_temporary() {
        println!("kept {}", run_dir.keep().display());
    }
    println!("stopped every node");
    Ok(())
}

/// Starts the nodes and says where they are. The chaos harness without the relay: it
/// records every command as a step and collects the history, so `--html` draws the
/// session the way it draws a chaos run.
async fn start(args: &LocalArgs, dir: &Path) -> anyhow::Result<Harness> {
    let h = Harness::start(&HarnessSpec {
        nodes: args.nodes,
        timing: args.timing.timing(),
        mode: args.mode.mode(),
        binary: std::env::current_exe()?,
        dir: dir.to_path_buf(),
        relay: false,
        seed: 0,
        http: false,
    })
    .await?;
    println!(
        "bully local: {} nodes on 127.0.0.1, files in {}",
        args.nodes,
        dir.display()
    );
    for &id in h.ids() {
        println!(
            "  started node {id} at {} (pid {})",
            h.cluster.addr(id),
            h.cluster.pid(id).unwrap_or(0)
        );
    }
    println!("commands: kill K | start K | pause K | resume K | status | quit");
    Ok(h)
}

/// One watcher task per node, all sending their status updates to one channel.
fn watch_every_node(h: &Harness) -> (mpsc::Receiver<Update>, Vec<JoinHandle<()>>) {
    let (updates_tx, updates) = mpsc::channel::<Update>(256);
    let watchers = h
        .ids()
        .iter()
        .map(|&id| {
            tokio::spawn(watch_node(
                id,
                h.cluster.addr(id),
                h.cluster.client_tls().clone(),
                updates_tx.clone(),
            ))
        })
        .collect();
    (updates, watchers)
}

/// Prints every change of view as it comes and runs the user's commands, until
/// `quit` or Ctrl-C (the end of input only stops the reading of commands).
async fn shell(h: &mut Harness, mut updates: mpsc::Receiver<Update>) {
    let started = Instant::now();
    let mut views: BTreeMap<NodeId, Option<Status>> =
        h.ids().iter().map(|&id| (id, None)).collect();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut stdin_open = true;
    loop {
        tokio::select! {
            Some((id, status)) = updates.recv() => {
                if let Some(line) = describe_change(views.get(&id).cloned().flatten(), status.as_ref(), id) {
                    println!("[{:>7.3}s] {line}", started.elapsed().as_secs_f64());
                    views.insert(id, status);
                    println!("           {}", agreement(&views));
                } else {
                    views.insert(id, status);
                }
            }
            line = stdin.next_line(), if stdin_open => match line {
                Ok(Some(line)) => {
                    if !command(h, line.trim(), &views) { break; }
                }
                _ => { stdin_open = false; }
            },
            _ = super::shutdown_signal() => break,
        }
    }
}

/// Runs one shell command; returns false on `quit`.
fn command(h: &mut Harness, line: &str, views: &BTreeMap<NodeId, Option<Status>>) -> bool {
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or("");
    let target: Option<NodeId> = words.next().and_then(|w| w.parse().ok());
    let result = match (verb, target) {
        ("", _) => Ok(()),
        ("quit" | "exit" | "q", _) => return false,
        ("status" | "s", _) => {
            for (id, view) in views {
                match view {
                    Some(status) => println!("  {}", status.line()),
                    None => println!("  node {id:<3} unreachable"),
                }
            }
            Ok(())
        }
        (_, Some(id)) if !h.ids().contains(&id) => {
            Err(anyhow::anyhow!("no node {id}; nodes are {:?}", h.ids()))
        }
        ("kill" | "k", Some(id)) => take(h, Step::Kill(id)),
        ("start", Some(id)) => take(h, Step::Start(id)),
        ("pause" | "p", Some(id)) => take(h, Step::Pause(id)),
        ("resume" | "r", Some(id)) => take(h, Step::Resume(id)),
        _ => Err(anyhow::anyhow!(
            "unknown command `{line}`; try kill K, start K, pause K, resume K, status, quit"
        )),
    };
    if let Err(e) = result {
        println!("  {e}");
    }
    true
}

/// Takes a step if the node's state allows it (a typo is no fault to record).
fn take(h: &mut Harness, step: Step) -> anyhow::Result<()> {
    let (id, done) = match step {
        Step::Kill(id) => (id, "killed (SIGKILL)"),
        Step::Start(id) => (id, "started"),
        Step::Pause(id) => (id, "paused (SIGSTOP)"),
        Step::Resume(id) => (id, "resumed (SIGCONT)"),
        _ => anyhow::bail!("`bully local` takes no {} step", step.name()),
    };
    let (running, paused) = (h.cluster.is_running(id), h.cluster.is_paused(id));
    match step {
        Step::Start(_) if running => anyhow::bail!("node {id} is already running"),
        Step::Kill(_) | Step::Pause(_) if !running => anyhow::bail!("node {id} is not running"),
        Step::Pause(_) if paused => anyhow::bail!("node {id} is already paused"),
        Step::Resume(_) if !paused => anyhow::bail!("node {id} is not paused"),
        _ => {}
    }
    let before = h.anomalies.len();
    h.execute(step);
    match h.anomalies.get(before..).and_then(|new| new.last()) {
        Some(anomaly) => Err(anyhow::anyhow!("{anomaly}")),
        None => {
            println!("  node {id} {done}");
            Ok(())
        }
    }
}

/// Follows one node's watch stream, reconnecting while it is down or paused.
async fn watch_node(id: NodeId, addr: SocketAddr, tls: TlsFiles, updates: mpsc::Sender<Update>) {
    loop {
        if let Ok(client) = Client::connect(addr, &tls, Some(id), Duration::from_millis(500)).await
        {
            if let Ok(mut stream) = client.watch().await {
                while let Ok(Some(status)) = stream.next().await {
                    if updates.send((id, Some(status))).await.is_err() {
                        return;
                    }
                }
            }
        }
        if updates.send((id, None)).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A line for a change worth showing (role, epoch or reachability), else None.
fn describe_change(before: Option<Status>, after: Option<&Status>, id: NodeId) -> Option<String> {
    match (before, after) {
        (None, None) => None,
        (Some(_), None) => Some(format!("node {id:<3} unreachable")),
        (Some(b), Some(a)) if (b.role, b.epoch, b.eligible) == (a.role, a.epoch, a.eligible) => {
            None
        }
        (_, Some(a)) => Some(a.line()),
    }
}

/// Who the reachable nodes follow, e.g. `coordinator 5 (5 of 5 agree)`.
fn agreement(views: &BTreeMap<NodeId, Option<Status>>) -> String {
    let mut votes: BTreeMap<NodeId, usize> = BTreeMap::new();
    let reachable = views.values().flatten().count();
    for status in views.values().flatten() {
        if let Some(c) = status.coordinator {
            *votes.entry(c).or_default() += 1;
        }
    }
    match votes.iter().max_by_key(|(_, n)| **n) {
        Some((c, n)) => format!("coordinator {c} ({n} of {reachable} reachable agree)"),
        None => format!("no coordinator yet ({reachable} reachable)"),
    }
}
