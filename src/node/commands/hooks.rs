//! Hooks: `[hooks] on_elected, on_demoted, on_change` run with `sh -c` when the view
//! changes, with the `BULLY_*` environment below.
//!
//! - One at a time, in the order of the changes: the runtime only queues hook runs (an
//!   unbounded queue), and one task runs them in turn. One exception to the order: an
//!   `on_demoted` goes ahead of every `on_change` still queued ([`enqueue`]), so a
//!   demoted node (a lapsed lease included) stops acting as primary before any
//!   informational hook runs.
//! - The runtime waits for one hook only: the `on_demoted` of a coordinator that leaves
//!   office voluntarily ([`DemotedHook`]), which must finish before its Resign goes out
//!   (see `node/drive/runtime.rs` and `src/protocol/machine/release.rs`).
//! - A hook still running after `timeout_ms` is killed with its whole process group;
//!   failures (non-zero exit, timeout, cannot start) are logged and counted.
//! - Hooks only ever see durable epochs: the runtime queues them on `ViewChanged`, which
//!   the machine emits after the `Persist` that stores the epoch has been flushed (I3).
//! - For one view change the order is `on_demoted`, `on_elected`, `on_change`.
//! - Each finished `on_elected` is reported back ([`ElectedHookDone`]): the runtime
//!   marks the epoch ready for `/coordinator` on success, or resigns on failure.
//! - An `on_elected` is killed (with its process group) as soon as the node no longer
//!   leads the epoch it runs for: a slow promotion must not go on acting after the node
//!   was demoted, when another node may already run its own (in quorum mode the old
//!   lease ends a heartbeat before anyone else can be elected, so the kill comes first).
//! - `BULLY_DATA_DIR` is absolute: hooks run in the config file's directory, not the
//!   caller's, so a relative data dir would point elsewhere.
//!
//! Environment (empty string for "none"):
//! `BULLY_HOOK` (on_elected, on_demoted, on_change), `BULLY_NODE_ID`, `BULLY_ROLE`
//! (coordinator, follower, candidate), `BULLY_MODE` (quorum, classic), `BULLY_TOKEN` and
//! its older name `BULLY_EPOCH` (the fencing token of the epoch followed or led: unique
//! per leadership and ordered: `term * 2^20 + leader` in both modes, see
//! `Epoch::token` in `src/protocol/epoch.rs`), `BULLY_TERM`,
//! `BULLY_EPOCH_LEADER`, `BULLY_COORDINATOR`, `BULLY_PREVIOUS_COORDINATOR`,
//! `BULLY_PREVIOUS_EPOCH` (the previous token), `BULLY_ELIGIBLE` (1 or 0),
//! `BULLY_DATA_DIR`. Health checks get the same variables except the hook ones.

use super::environment::environment;
use crate::api::event_log::EventLog;
use crate::api::Status;
use crate::config::HooksConfig;
use crate::history::Record;
use crate::node::policy::transitions::Transition;
use crate::node::shared::mailbox::ElectedHookDone;
use crate::node::shared::metrics::Metrics;
use crate::node::shared::tasks::NodeTasks;
use crate::protocol::Epoch;
use crate::shell::{self, Shell, ShellExit};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// What the hook task works through, in order.
#[derive(Debug)]
enum Queued {
    Run(HookRun),
    /// The last entry: answered once every run queued before it has finished, and
    /// the hook task ends.
    Finish(oneshot::Sender<()>),
}

/// One queued hook run.
#[derive(Debug)]
struct HookRun {
    name: &'static str,
    command: String,
    env: Vec<(String, String)>,
    /// The epoch the node followed or led when the hook was queued.
    epoch: Option<Epoch>,
    /// Per run, so a reload's new `timeout_ms` applies from the next hook on.
    timeout: Duration,
    /// Told when the run has ended (or dropped unrun): an `on_demoted` the runtime
    /// waits for.
    ended: Option<oneshot::Sender<()>>,
}

/// A queued `on_demoted` the runtime can wait for: a coordinator leaving office
/// voluntarily sends its Resign only once its database has stopped being primary.
#[derive(Debug)]
pub struct DemotedHook {
    ended: oneshot::Receiver<()>,
    /// How long waiting may take: the hook running now and this one, each bounded by
    /// `timeout_ms`, plus a second to kill and reap.
    bound: Duration,
}

impl DemotedHook {
    /// Waits until the `on_demoted` has ended (succeeded, failed, timed out and been
    /// killed, or dropped because the hook task ended), at most its bound. Returns
    /// whether it ended in time.
    pub async fn ended(self) -> bool {
        // The sender is dropped when the run ends: an error is the end too.
        tokio::time::timeout(self.bound, self.ended).await.is_ok()
    }

    /// The longest [`DemotedHook::ended`] waits.
    pub fn bound(&self) -> Duration {
        self.bound
    }
}

/// The runtime's side of the hook queue.
pub struct Hooks {
    config: HooksConfig,
    data_dir: PathBuf,
    queue: mpsc::UnboundedSender<Queued>,
}

impl Hooks {
    /// Starts the task (one of `tasks`) that runs hooks in `workdir`, until
    /// [`Hooks::finish`]. It does not stop on the node's stop signal: the `on_demoted` a
    /// stopping coordinator queues must still run. Every finished `on_elected` is sent
    /// to `elected`; `led` is the epoch the node leads right now (`None` when it does
    /// not lead): an `on_elected` for another epoch is killed.
    pub fn start(
        config: HooksConfig,
        workdir: PathBuf,
        data_dir: PathBuf,
        reports: HookReports,
        tasks: &NodeTasks,
    ) -> Hooks {
        let (queue, runs) = mpsc::unbounded_channel();
        tasks.spawn(run_hooks(runs, workdir, reports));
        Hooks {
            config,
            data_dir,
            queue,
        }
    }

    /// Replaces the commands and timeout (a reload): hooks already queued run as they
    /// were queued, later changes run the new commands.
    pub fn reconfigure(&mut self, config: HooksConfig) {
        self.config = config;
    }

    /// Queues the hooks `transition` calls for, with the environment of `status` (the
    /// status that includes the new view). Never waits; returns the queued `on_demoted`
    /// for a caller that must wait for it.
    pub fn fire(&self, transition: &Transition, status: &Status) -> Option<DemotedHook> {
        let c = &self.config;
        let mut demoted = None;
        let wanted = [
            ("on_demoted", transition.demoted, &c.on_demoted),
            ("on_elected", transition.elected, &c.on_elected),
            ("on_change", transition.epoch_changed, &c.on_change),
        ];
        for (name, fired, command) in wanted {
            let (true, Some(command)) = (fired, command) else {
                continue;
            };
            let mut env = environment(status, Some(transition), &self.data_dir);
            env.push(("BULLY_HOOK".into(), name.into()));
            let timeout = Duration::from_millis(c.timeout_ms);
            let mut ended = None;
            if name == "on_demoted" {
                let (tx, rx) = oneshot::channel();
                ended = Some(tx);
                demoted = Some(DemotedHook {
                    ended: rx,
                    bound: 2 * timeout + Duration::from_secs(1),
                });
            }
            let run = HookRun {
                name,
                command: command.clone(),
                env,
                epoch: status.coordinator().and(status.epoch),
                timeout,
                ended,
            };
            if self.queue.send(Queued::Run(run)).is_err() {
                tracing::error!("hook {name} not run: the hook task has stopped");
            }
        }
        demoted
    }

    /// Waits until every hook queued so far has run (each is bounded by `timeout_ms`),
    /// so a stopping node's on_demoted finishes before the process exits; the hook task
    /// then ends. Hooks fired later are not run.
    pub async fn finish(&self) {
        let (done, finished) = oneshot::channel();
        if self.queue.send(Queued::Finish(done)).is_ok() {
            let _ = finished.await;
        }
    }
}

/// Where the hook task reports what it ran, and what it kills an `on_elected` on.
pub struct HookReports {
    pub metrics: Arc<Metrics>,
    /// Every finished `on_elected`, for the runtime to mark the epoch ready or resign.
    pub elected: mpsc::UnboundedSender<ElectedHookDone>,
    /// The epoch the node leads (`None` when it does not).
    pub led: watch::Receiver<Option<Epoch>>,
    /// Where each run's outcome is recorded ([`Record::HookRan`], read by `bully
    /// history`); `None` in tests and when the log could not be shared.
    pub log: Option<EventLog>,
}

/// Completes once the node no longer leads `epoch` (at once if it does not now).
async fn leadership_over(mut led: watch::Receiver<Option<Epoch>>, epoch: Option<Epoch>) {
    // An error means the runtime is gone: the leadership is over too.
    let _ = led.wait_for(|now| *now != epoch).await;
}

/// Adds `queued` to the runs not started yet: at the back, except that an `on_demoted`
/// goes ahead of every `on_change` waiting (they keep their order among themselves, and
/// so does everything else), unless a Finish is waiting (nothing after it runs).
fn enqueue(pending: &mut VecDeque<Queued>, queued: Queued) {
    let is = |q: &Queued, name: &str| matches!(q, Queued::Run(r) if r.name == name);
    let finishing = pending.iter().any(|q| matches!(q, Queued::Finish(_)));
    if !is(&queued, "on_demoted") || finishing {
        pending.push_back(queued);
        return;
    }
    let (changes, mut rest): (VecDeque<Queued>, VecDeque<Queued>) =
        pending.drain(..).partition(|q| is(q, "on_change"));
    rest.push_back(queued);
    rest.extend(changes);
    *pending = rest;
}

async fn run_hooks(
    mut runs: mpsc::UnboundedReceiver<Queued>,
    workdir: PathBuf,
    mut reports: HookReports,
) {
    let mut pending = VecDeque::new();
    loop {
        if pending.is_empty() {
            match runs.recv().await {
                Some(queued) => enqueue(&mut pending, queued),
                None => return,
            }
        }
        while let Ok(queued) = runs.try_recv() {
            enqueue(&mut pending, queued);
        }
        let Some(queued) = pending.pop_front() else {
            continue;
        };
        let run = match queued {
            Queued::Run(run) => run,
            Queued::Finish(done) => {
                // Its log handle goes first: the last handle on a log writes what is
                // queued before it is gone (src/api/log_writer.rs).
                drop(reports);
                let _ = done.send(());
                return;
            }
        };
        run_one(&run, &workdir, &mut reports).await;
        if let Some(ended) = run.ended {
            // Whoever waits for this run (an on_demoted) may go on; a run dropped
            // unrun (after a Finish) tells them the same by dropping the sender.
            let _ = ended.send(());
        }
        let behind = pending.len() + runs.len();
        if behind > 16 {
            tracing::warn!(queued = behind, "hooks are falling behind the view changes");
        }
    }
}

/// Runs one hook to its end and reports it (metrics, the runtime, the event log, the
/// node's log).
async fn run_one(run: &HookRun, workdir: &std::path::Path, reports: &mut HookReports) {
    let shell = Shell {
        command: &run.command,
        dir: workdir,
        env: &run.env,
        timeout: run.timeout,
        quiet: false,
    };
    let (exit, took) = if run.name == "on_elected" {
        shell::run_until(&shell, leadership_over(reports.led.clone(), run.epoch)).await
    } else {
        shell::run(&shell).await
    };
    let failed = !exit.is_success();
    reports.metrics.hook_ran(run.name, failed);
    if let Some(log) = &mut reports.log {
        log.append(Record::HookRan {
            hook: run.name.to_string(),
            ok: !failed,
            took_ms: took.as_millis() as u64,
            failure: failure(&exit),
        });
    }
    if run.name == "on_elected" {
        // The runtime may be stopping (receiver gone): nothing left to report to.
        let _ = reports.elected.send(ElectedHookDone {
            epoch: run.epoch,
            succeeded: !failed,
        });
    }
    let epoch = run
        .env
        .iter()
        .find(|(k, _)| k == "BULLY_EPOCH")
        .map_or("", |(_, v)| v.as_str());
    if failed {
        tracing::warn!(hook = run.name, epoch, ?took, "hook {exit}");
    } else {
        tracing::info!(hook = run.name, epoch, ?took, "hook {exit}");
    }
}

/// Why a run failed, in a few words for the event log (`None` when it succeeded).
fn failure(exit: &ShellExit) -> Option<String> {
    /// Enough for `sh`'s own errors; a record stays one short line.
    const MAX_CHARS: usize = 120;
    let text = match exit {
        ShellExit::Success => return None,
        ShellExit::Failed(status) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => format!("exit {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => status.to_string(),
            }
        }
        ShellExit::TimedOut => "timed out".to_string(),
        ShellExit::Cancelled => "cancelled: no longer leading".to_string(),
        ShellExit::Error(e) => format!("could not run: {e}"),
    };
    Some(text.chars().take(MAX_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn on_elected_is_killed_when_its_epoch_ends() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("promoted");
        let epoch = Some(Epoch { term: 4, leader: 1 });
        let (led_tx, led) = watch::channel(epoch);
        let (elected, mut done) = mpsc::unbounded_channel();
        let (queue, runs) = mpsc::unbounded_channel();
        let reports = HookReports {
            metrics: Arc::new(Metrics::new(1)),
            elected,
            led,
            log: None,
        };
        let task = tokio::spawn(run_hooks(runs, dir.path().into(), reports));
        let run = HookRun {
            name: "on_elected",
            command: format!("sleep 1; touch {}", marker.display()),
            env: Vec::new(),
            epoch,
            timeout: Duration::from_secs(10),
            ended: None,
        };
        queue.send(Queued::Run(run)).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        led_tx.send_replace(None); // demoted while the hook runs
        let report = tokio::time::timeout(Duration::from_secs(5), done.recv()).await;
        assert_eq!(
            report.unwrap(),
            Some(ElectedHookDone {
                epoch,
                succeeded: false
            })
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!marker.exists(), "the cancelled on_elected went on");
        let (finish, finished) = oneshot::channel();
        queue.send(Queued::Finish(finish)).unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(
            ended.is_ok() && finished.await.is_ok(),
            "the hook task ended"
        );
    }

    fn queued(name: &'static str, term: u64) -> Queued {
        Queued::Run(HookRun {
            name,
            command: String::new(),
            env: Vec::new(),
            epoch: Some(Epoch { term, leader: 1 }),
            timeout: Duration::from_secs(1),
            ended: None,
        })
    }

    fn names(pending: &VecDeque<Queued>) -> Vec<String> {
        pending
            .iter()
            .map(|q| match q {
                Queued::Run(r) => format!("{}:{}", r.name, r.epoch.unwrap().term),
                Queued::Finish(_) => "finish".to_string(),
            })
            .collect()
    }

    #[test]
    fn on_demoted_goes_ahead_of_every_queued_on_change_only() {
        let mut pending = VecDeque::new();
        for q in [
            queued("on_change", 2),
            queued("on_elected", 3),
            queued("on_change", 3),
        ] {
            enqueue(&mut pending, q);
        }
        enqueue(&mut pending, queued("on_demoted", 3));
        assert_eq!(
            names(&pending),
            ["on_elected:3", "on_demoted:3", "on_change:2", "on_change:3"],
            "the on_elected before it keeps its place, the on_changes wait"
        );
        enqueue(&mut pending, queued("on_change", 4));
        assert_eq!(names(&pending).last().unwrap(), "on_change:4");

        let (finish, _finished) = oneshot::channel();
        let mut finishing = VecDeque::new();
        enqueue(&mut finishing, queued("on_change", 2));
        enqueue(&mut finishing, Queued::Finish(finish));
        enqueue(&mut finishing, queued("on_demoted", 2));
        assert_eq!(
            names(&finishing),
            ["on_change:2", "finish", "on_demoted:2"],
            "nothing moves ahead of a finish (what comes after it never runs)"
        );
    }

    /// A hook task in `dir` for a node that leads nothing, recording runs to `log`; its
    /// queue. (Only `on_demoted` and `on_change` runs: with nothing led, an
    /// `on_elected` would be cancelled at once.)
    fn runner(dir: &std::path::Path, log: Option<EventLog>) -> mpsc::UnboundedSender<Queued> {
        let (_, led) = watch::channel(None);
        let (elected, _) = mpsc::unbounded_channel();
        let (queue, runs) = mpsc::unbounded_channel();
        let reports = HookReports {
            metrics: Arc::new(Metrics::new(1)),
            elected,
            led,
            log,
        };
        tokio::spawn(run_hooks(runs, dir.into(), reports));
        queue
    }

    #[tokio::test]
    async fn a_demoted_hook_is_waited_for_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("demoted");
        let queue = runner(dir.path(), None);
        let (tx, rx) = oneshot::channel();
        let run = HookRun {
            name: "on_demoted",
            command: format!("sleep 0.3; touch {}", marker.display()),
            env: Vec::new(),
            epoch: None,
            timeout: Duration::from_secs(10),
            ended: Some(tx),
        };
        queue.send(Queued::Run(run)).unwrap();
        let hook = DemotedHook {
            ended: rx,
            bound: Duration::from_secs(10),
        };
        assert!(hook.ended().await, "the on_demoted ended within its bound");
        assert!(marker.exists(), "waiting ended only once the hook had run");
    }

    #[tokio::test]
    async fn each_run_is_recorded_with_its_outcome() {
        use crate::api::event_log::read_log;
        let dir = tempfile::tempdir().unwrap();
        let queue = runner(dir.path(), Some(EventLog::open(dir.path(), 1).unwrap()));
        for (name, command) in [("on_demoted", "exit 3"), ("on_change", "true")] {
            let run = HookRun {
                name,
                command: command.into(),
                env: Vec::new(),
                epoch: None,
                timeout: Duration::from_secs(10),
                ended: None,
            };
            queue.send(Queued::Run(run)).unwrap();
        }
        let (finish, finished) = oneshot::channel();
        queue.send(Queued::Finish(finish)).unwrap();
        tokio::time::timeout(Duration::from_secs(10), finished)
            .await
            .expect("the hooks ran in time")
            .unwrap();
        let runs: Vec<(String, bool, Option<String>)> = read_log(dir.path())
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.record {
                Record::HookRan {
                    hook, ok, failure, ..
                } => Some((hook, ok, failure)),
                _ => None,
            })
            .collect();
        assert_eq!(
            runs,
            [
                ("on_demoted".to_string(), false, Some("exit 3".to_string())),
                ("on_change".to_string(), true, None),
            ]
        );
    }
}
