//! `bully local --nodes N`: a whole cluster of real node processes on loopback, a live
//! view of every node, and a tiny shell (`kill K`, `start K`, `pause K`, `resume K`,
//! `add K`, `remove K`, `replace K`, `status`, `quit`) so a newcomer can watch the bully
//! take over and the member list change (docs/design.md#membership).

use super::local_board::{Board, NodeState};
use super::run_dir::RunDir;
use super::LocalArgs;
use crate::api::Status;
use crate::certs::TlsFiles;
use crate::chaos::harness::{Harness, HarnessSpec};
use crate::chaos::plan::Step;
use crate::chaos::report::RunParams;
use crate::client::Client;
use crate::protocol::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The shell's commands, for the greeting and for a typo.
const COMMANDS: &str =
    "kill K | start K | pause K | resume K | add K | remove K | replace K | status | quit";

/// How long a member change may take: an add waits for the new node to catch up.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(30);

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
    let mut watchers = Watchers::start(&h);
    shell(&mut h, &mut watchers).await;
    watchers.stop_all();
    let (timing, mode) = (args.timing.timing(), args.mode.mode());
    let report = h.finish(|elapsed_s| RunParams {
        command: "local".into(),
        mode,
        nodes: args.nodes,
        duration_s: elapsed_s,
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
        slow_hooks: false,
        config_roll: false,
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
    println!("commands: {COMMANDS}");
    Ok(h)
}

/// One watcher task per running node, all sending their status updates to one channel.
/// A node's watcher is stopped when the shell kills or pauses it (its connection
/// would hang on until QUIC gives up) and started afresh when the node runs again.
struct Watchers {
    tasks: BTreeMap<NodeId, JoinHandle<()>>,
    updates_tx: mpsc::Sender<Update>,
    updates: mpsc::Receiver<Update>,
    tls: TlsFiles,
    addrs: BTreeMap<NodeId, SocketAddr>,
}

impl Watchers {
    fn start(h: &Harness) -> Watchers {
        let (updates_tx, updates) = mpsc::channel::<Update>(256);
        let mut watchers = Watchers {
            tasks: BTreeMap::new(),
            updates_tx,
            updates,
            tls: h.cluster.client_tls().clone(),
            addrs: h.ids().iter().map(|&id| (id, h.cluster.addr(id))).collect(),
        };
        for &id in h.ids() {
            watchers.watch(id);
        }
        watchers
    }

    /// (Re)starts node `id`'s watcher; `addr` for a node added at runtime.
    fn watch_at(&mut self, id: NodeId, addr: SocketAddr) {
        self.addrs.insert(id, addr);
        self.watch(id);
    }

    /// (Re)starts node `id`'s watcher.
    fn watch(&mut self, id: NodeId) {
        self.stop(id);
        let task = tokio::spawn(watch_node(
            id,
            self.addrs[&id],
            self.tls.clone(),
            self.updates_tx.clone(),
        ));
        self.tasks.insert(id, task);
    }

    fn stop(&mut self, id: NodeId) {
        if let Some(task) = self.tasks.remove(&id) {
            task.abort();
        }
    }

    fn stop_all(&mut self) {
        for (_, task) in std::mem::take(&mut self.tasks) {
            task.abort();
        }
    }
}

/// Prints every change of view as it comes and runs the user's commands, until
/// `quit` or Ctrl-C (the end of input only stops the reading of commands).
async fn shell(h: &mut Harness, watchers: &mut Watchers) {
    let started = Instant::now();
    let stamp = || format!("[{:>7.3}s]", started.elapsed().as_secs_f64());
    let mut board = Board::new(h.ids());
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut stdin_open = true;
    loop {
        tokio::select! {
            Some((id, status)) = watchers.updates.recv() => {
                let before = board.view(id).cloned();
                board.update(id, status);
                if let Some(line) = describe_change(before, board.view(id), id) {
                    println!("{} {line}", stamp());
                    println!("           {}", board.agreement());
                }
            }
            line = stdin.next_line(), if stdin_open => match line {
                Ok(Some(line)) => {
                    match command(h, line.trim(), &mut board).await {
                        Outcome::Quit => break,
                        Outcome::Stay => {}
                        Outcome::Joined(id) => {
                            watchers.watch_at(id, h.cluster.addr(id));
                            board.set(id, NodeState::Live(None));
                            println!("           {}", board.agreement());
                        }
                        Outcome::Left(id) => {
                            watchers.stop(id);
                            board.remove(id);
                            println!("           {}", board.agreement());
                        }
                        Outcome::Changed(id, state) => {
                            match state {
                                NodeState::Live(_) => watchers.watch(id),
                                _ => watchers.stop(id),
                            }
                            board.set(id, state);
                            println!("           {}", board.agreement());
                        }
                    }
                }
                _ => { stdin_open = false; }
            },
            _ = super::sigterm_or_ctrl_c() => break,
        }
    }
}

/// What a shell command did.
enum Outcome {
    Quit,
    Stay,
    /// A node's process was killed, started, paused or resumed: its new state.
    Changed(NodeId, NodeState),
    /// A node was added to the member list: it joins the board.
    Joined(NodeId),
    /// A node was removed from the member list and stopped: it leaves the board.
    Left(NodeId),
}

/// Runs one shell command.
async fn command(h: &mut Harness, line: &str, board: &mut Board) -> Outcome {
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or("");
    let target: Option<NodeId> = words.next().and_then(|w| w.parse().ok());
    let result = match (verb, target) {
        ("", _) => Ok(None),
        ("quit" | "exit" | "q", _) => return Outcome::Quit,
        ("status" | "s", _) => {
            // A node that died on its own is down too, whatever its watcher last heard.
            for id in h.members() {
                if !h.cluster.is_running(id) {
                    board.set(id, NodeState::Down);
                }
            }
            for line in board.lines() {
                println!("  {line}");
            }
            println!("  {}", board.agreement());
            Ok(None)
        }
        ("add" | "a", Some(id)) => {
            return match h.change_step(Step::Add(id), CHANGE_TIMEOUT).await {
                Ok(text) => {
                    println!("  started node {id} at {}; {text}", h.cluster.addr(id));
                    Outcome::Joined(id)
                }
                Err(e) => fail(e),
            }
        }
        ("remove" | "rm", Some(id)) => {
            return match h.change_step(Step::Remove(id), CHANGE_TIMEOUT).await {
                Ok(text) => {
                    println!("  {text}; node {id} stopped");
                    Outcome::Left(id)
                }
                Err(e) => fail(e),
            }
        }
        ("replace", Some(id)) => {
            return match replace(h, id).await {
                Ok(text) => {
                    println!("  {text}");
                    Outcome::Changed(id, NodeState::Live(None))
                }
                Err(e) => fail(e),
            }
        }
        (_, Some(id)) if !h.members().contains(&id) => Err(anyhow::anyhow!(
            "no node {id}; members are {:?}",
            h.members()
        )),
        ("kill" | "k", Some(id)) => take(h, Step::Kill(id)).map(|()| Some((id, NodeState::Down))),
        ("start", Some(id)) => take(h, Step::Start(id)).map(|()| Some((id, NodeState::Live(None)))),
        ("pause" | "p", Some(id)) => {
            take(h, Step::Pause(id)).map(|()| Some((id, NodeState::Paused)))
        }
        ("resume" | "r", Some(id)) => {
            take(h, Step::Resume(id)).map(|()| Some((id, NodeState::Live(None))))
        }
        _ => Err(anyhow::anyhow!("unknown command `{line}`; try {COMMANDS}")),
    };
    match result {
        Ok(Some((id, state))) => Outcome::Changed(id, state),
        Ok(None) => Outcome::Stay,
        Err(e) => fail(e),
    }
}

/// Prints why a command failed; the shell goes on.
fn fail(e: anyhow::Error) -> Outcome {
    println!("  {e:#}");
    Outcome::Stay
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
    h.take(step)?;
    println!("  node {id} {done}");
    Ok(())
}

/// `replace K`, a lost disk end to end: kill the node, wipe its data dir, `bully member
/// replace K` (it becomes a learner), start it empty; it takes its seat once caught up.
async fn replace(h: &mut Harness, id: NodeId) -> anyhow::Result<String> {
    let text = h.change_step(Step::Replace(id), CHANGE_TIMEOUT).await?;
    h.take(Step::Start(id))?;
    let list = h.wait_for_seat(id, CHANGE_TIMEOUT).await?;
    Ok(format!(
        "{text}\n  node {id} started on an empty data dir and took its seat (member list {list})"
    ))
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
