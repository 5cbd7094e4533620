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
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
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
    /// Per job, so a reload's new `timeout_ms` applies from the next hook on.
    timeout: Duration,
}

/// The runtime's side of the hook queue.
pub struct Hooks {
    config: HooksConfig,
    data_dir: PathBuf,
    queue: mpsc::UnboundedSender<Queued>,
}

impl Hooks {
    /// Starts the task that runs hooks in `workdir`; abort the handle to stop it (a
    /// running hook is then killed).
    pub fn start(
        config: HooksConfig,
        workdir: PathBuf,
        data_dir: PathBuf,
        metrics: Arc<Metrics>,
    ) -> (Hooks, JoinHandle<()>) {
        let (queue, jobs) = mpsc::unbounded_channel();
        let task = tokio::spawn(run_jobs(jobs, workdir, metrics));
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
        ("BULLY_DATA_DIR".to_string(), data_dir.display().to_string()),
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

async fn run_jobs(
    mut jobs: mpsc::UnboundedReceiver<Queued>,
    workdir: PathBuf,
    metrics: Arc<Metrics>,
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
        let (outcome, took) = command::run(&shell).await;
        let failed = !outcome.is_success();
        metrics.hook_ran(job.name, failed);
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
