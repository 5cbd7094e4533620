//! Hooks: `[hooks] on_elected, on_demoted, on_change` run with `sh -c` when the view
//! changes, with the `BULLY_*` environment below.
//!
//! - One at a time, in the order of the changes: the runtime only pushes jobs onto an
//!   unbounded queue (it never waits for a hook), and one task runs them in turn.
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
//! per leadership and ordered; the term in quorum mode, `term * 2^20 + leader` in
//! classic mode, where two nodes can declare one term), `BULLY_TERM`,
//! `BULLY_EPOCH_LEADER`, `BULLY_COORDINATOR`, `BULLY_PREVIOUS_COORDINATOR`,
//! `BULLY_PREVIOUS_EPOCH` (the previous token), `BULLY_ELIGIBLE` (1 or 0),
//! `BULLY_DATA_DIR`. Health checks get the same variables except the hook ones.

use super::command::{self, Shell};
use super::metrics::Metrics;
use super::status::Status;
use super::transitions::Transition;
use crate::config::HooksConfig;
use crate::protocol::Epoch;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// What the hook task works through, in order.
#[derive(Debug)]
enum Queued {
    Run(Job),
    /// Answered once every job queued before it has finished.
    Drained(oneshot::Sender<()>),
}

/// One queued hook run.
#[derive(Debug)]
struct Job {
    name: &'static str,
    command: String,
    env: Vec<(String, String)>,
    /// The epoch the node followed or led when the hook was queued.
    epoch: Option<Epoch>,
    /// Per job, so a reload's new `timeout_ms` applies from the next hook on.
    timeout: Duration,
}

/// How an `on_elected` run ended, for the epoch it was run for: the coordinator is
/// ready for clients only once its database was promoted for that very epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectedHookDone {
    pub epoch: Option<Epoch>,
    pub succeeded: bool,
}

/// The runtime's side of the hook queue.
pub struct Hooks {
    config: HooksConfig,
    data_dir: PathBuf,
    queue: mpsc::UnboundedSender<Queued>,
}

impl Hooks {
    /// Starts the task that runs hooks in `workdir`; abort the handle to stop it (a
    /// running hook is then killed). Every finished `on_elected` is sent to `elected`;
    /// `led` is the epoch the node leads right now (`None` when it does not lead): an
    /// `on_elected` for another epoch is killed.
    pub fn start(
        config: HooksConfig,
        workdir: PathBuf,
        data_dir: PathBuf,
        metrics: Arc<Metrics>,
        elected: mpsc::UnboundedSender<ElectedHookDone>,
        led: watch::Receiver<Option<Epoch>>,
    ) -> (Hooks, JoinHandle<()>) {
        let (queue, jobs) = mpsc::unbounded_channel();
        let reports = Reports { metrics, elected };
        let task = tokio::spawn(run_jobs(jobs, workdir, reports, led));
        (
            Hooks {
                config,
                data_dir,
                queue,
            },
            task,
        )
    }

    /// Replaces the commands and timeout (a reload): hooks already queued run as they
    /// were queued, later changes run the new commands.
    pub fn reconfigure(&mut self, config: HooksConfig) {
        self.config = config;
    }

    /// Queues the hooks `transition` calls for, with the environment of `status` (the
    /// status that includes the new view). Never waits.
    pub fn fire(&self, transition: &Transition, status: &Status) {
        let c = &self.config;
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
            let job = Job {
                name,
                command: command.clone(),
                env,
                epoch: status.coordinator.and(status.epoch),
                timeout: Duration::from_millis(c.timeout_ms),
            };
            if self.queue.send(Queued::Run(job)).is_err() {
                tracing::error!("hook {name} not run: the hook task has stopped");
            }
        }
    }

    /// Waits until every hook queued so far has run (each is bounded by `timeout_ms`),
    /// so a stopping node's on_demoted finishes before the process exits.
    pub async fn drain(&self) {
        let (done, finished) = oneshot::channel();
        if self.queue.send(Queued::Drained(done)).is_ok() {
            let _ = finished.await;
        }
    }
}

/// The `BULLY_*` variables for a hook (with its transition) or a health check.
pub fn environment(
    status: &Status,
    transition: Option<&Transition>,
    data_dir: &Path,
) -> Vec<(String, String)> {
    fn text(value: Option<impl ToString>) -> String {
        value.map(|v| v.to_string()).unwrap_or_default()
    }
    let epoch = status.coordinator.and(status.epoch);
    let token = status.token();
    let mut env = vec![
        ("BULLY_NODE_ID".to_string(), status.id.to_string()),
        ("BULLY_ROLE".to_string(), status.role.to_string()),
        ("BULLY_MODE".to_string(), status.mode.to_string()),
        ("BULLY_EPOCH".to_string(), text(token)),
        ("BULLY_TOKEN".to_string(), text(token)),
        ("BULLY_TERM".to_string(), text(epoch.map(|e| e.term))),
        (
            "BULLY_EPOCH_LEADER".to_string(),
            text(epoch.map(|e| e.leader)),
        ),
        ("BULLY_COORDINATOR".to_string(), text(status.coordinator)),
        (
            "BULLY_ELIGIBLE".to_string(),
            if status.eligible { "1" } else { "0" }.to_string(),
        ),
        (
            "BULLY_DATA_DIR".to_string(),
            std::path::absolute(data_dir)
                .unwrap_or_else(|_| data_dir.to_path_buf())
                .display()
                .to_string(),
        ),
    ];
    if let Some(t) = transition {
        let previous = t.previous_epoch;
        env.push((
            "BULLY_PREVIOUS_COORDINATOR".to_string(),
            text(previous.map(|e| e.leader)),
        ));
        env.push((
            "BULLY_PREVIOUS_EPOCH".to_string(),
            text(previous.map(|e| e.token(status.mode))),
        ));
    }
    env
}

/// Where the hook task reports what it ran.
struct Reports {
    metrics: Arc<Metrics>,
    elected: mpsc::UnboundedSender<ElectedHookDone>,
}

/// Completes once the node no longer leads `epoch` (at once if it does not now).
async fn leadership_over(mut led: watch::Receiver<Option<Epoch>>, epoch: Option<Epoch>) {
    // An error means the runtime is gone: the leadership is over too.
    let _ = led.wait_for(|now| *now != epoch).await;
}

async fn run_jobs(
    mut jobs: mpsc::UnboundedReceiver<Queued>,
    workdir: PathBuf,
    reports: Reports,
    led: watch::Receiver<Option<Epoch>>,
) {
    while let Some(queued) = jobs.recv().await {
        let job = match queued {
            Queued::Run(job) => job,
            Queued::Drained(done) => {
                let _ = done.send(());
                continue;
            }
        };
        let shell = Shell {
            command: &job.command,
            dir: &workdir,
            env: &job.env,
            timeout: job.timeout,
            quiet: false,
        };
        let (outcome, took) = if job.name == "on_elected" {
            command::run_until(&shell, leadership_over(led.clone(), job.epoch)).await
        } else {
            command::run(&shell).await
        };
        let failed = !outcome.is_success();
        reports.metrics.hook_ran(job.name, failed);
        if job.name == "on_elected" {
            // The runtime may be stopping (receiver gone): nothing left to report to.
            let _ = reports.elected.send(ElectedHookDone {
                epoch: job.epoch,
                succeeded: !failed,
            });
        }
        let epoch = job
            .env
            .iter()
            .find(|(k, _)| k == "BULLY_EPOCH")
            .map_or("", |(_, v)| v.as_str());
        if failed {
            tracing::warn!(hook = job.name, epoch, ?took, "hook {outcome}");
        } else {
            tracing::info!(hook = job.name, epoch, ?took, "hook {outcome}");
        }
        if jobs.len() > 16 {
            tracing::warn!(
                queued = jobs.len(),
                "hooks are falling behind the view changes"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Cells, Mode, Role, View};

    #[test]
    fn data_dir_is_absolute_for_hooks_running_elsewhere() {
        let view = View {
            id: 1,
            role: Role::Follower,
            epoch: None,
            eligible: true,
            incarnation: 1,
        };
        let status = Status::initial(view, Mode::Quorum, Cells::default(), &[], 0);
        let env = environment(&status, None, Path::new("data/node1"));
        let dir = &env.iter().find(|(k, _)| k == "BULLY_DATA_DIR").unwrap().1;
        let dir = Path::new(dir);
        assert!(dir.is_absolute(), "{}", dir.display());
        assert_eq!(dir, std::env::current_dir().unwrap().join("data/node1"));
    }

    #[tokio::test]
    async fn on_elected_is_killed_when_its_epoch_ends() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("promoted");
        let epoch = Some(Epoch { term: 4, leader: 1 });
        let (led_tx, led) = watch::channel(epoch);
        let (elected, mut done) = mpsc::unbounded_channel();
        let (queue, jobs) = mpsc::unbounded_channel();
        let reports = Reports {
            metrics: Arc::new(Metrics::new(1)),
            elected,
        };
        let task = tokio::spawn(run_jobs(jobs, dir.path().into(), reports, led));
        let job = Job {
            name: "on_elected",
            command: format!("sleep 1; touch {}", marker.display()),
            env: Vec::new(),
            epoch,
            timeout: Duration::from_secs(10),
        };
        queue.send(Queued::Run(job)).unwrap();
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
        task.abort();
    }
}
