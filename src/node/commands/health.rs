//! The health check that gates eligibility: `[health] command` runs every
//! `interval_ms` (with `sh -c`, in the node's working directory, killed after
//! `timeout_ms`); `rise` passes in a row make a failing node healthy, `fall` failures in
//! a row make a healthy node failing. The node starts *failing* and the first result
//! decides at once, so a restarted node cannot win an election before its first check
//! has passed (the Redis example relies on this: an empty Redis must not lead).
//!
//! The check runs in its own task and only reports verdict changes (and, with an
//! estimate source, every measured estimate: src/node/commands/estimate.rs), so a slow
//! check never delays the protocol. It ends on its group's stop signal (the node stopping, or
//! a reload replacing the check), killing a check that is still running.

use super::environment::environment;
use super::estimate::{self, Said};
use crate::api::postgres::PgState;
use crate::api::{HealthState, Status};
use crate::boot_clock::BootInstant;
use crate::config::HealthConfig;
use crate::node::shared::metrics::Metrics;
use crate::node::shared::tasks::NodeTasks;
use crate::shell::{self, Shell};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Rise/fall hysteresis over a stream of pass/fail results.
#[derive(Debug, Clone)]
pub struct Gate {
    rise: u32,
    fall: u32,
    /// The current verdict; `None` until the first result.
    healthy: Option<bool>,
    /// Results in a row that disagree with the verdict.
    streak: u32,
}

impl Gate {
    /// A gate that needs `rise` passes (or `fall` failures) in a row to flip.
    pub fn new(rise: u32, fall: u32) -> Gate {
        Gate {
            rise: rise.max(1),
            fall: fall.max(1),
            healthy: None,
            streak: 0,
        }
    }

    /// The current verdict; `None` before the first result.
    pub fn verdict(&self) -> Option<bool> {
        self.healthy
    }

    /// Feeds one result; returns the new verdict when it changes. The first result
    /// always sets the verdict.
    pub fn record(&mut self, passed: bool) -> Option<bool> {
        match self.healthy {
            None => {
                self.healthy = Some(passed);
                Some(passed)
            }
            Some(healthy) if healthy == passed => {
                self.streak = 0;
                None
            }
            Some(_) => {
                self.streak += 1;
                let needed = if passed { self.rise } else { self.fall };
                if self.streak >= needed {
                    self.streak = 0;
                    self.healthy = Some(passed);
                    Some(passed)
                } else {
                    None
                }
            }
        }
    }
}

/// A verdict change, from the check task of `generation`: the runtime takes only the
/// current task's (a restarted check, after a reload or a stall, makes the old task's
/// verdicts stale, even those already queued).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub generation: u64,
    pub healthy: bool,
    /// The estimate this run measured, with an estimate source (`None`: the check
    /// reports no estimate at all).
    pub estimate: Option<Measured>,
    /// From the PostgreSQL manager (src/node/postgres/), which stands in for the
    /// health check: its server as observed, for the status.
    pub postgres: Option<PgState>,
}

impl Verdict {
    /// Whether `other` says the same, apart from when it was measured: the manager
    /// sends a verdict again only when something changed (or a second passed).
    pub fn same_as(&self, other: &Verdict) -> bool {
        let value = |v: &Verdict| v.estimate.map(|m| m.value);
        let record = |v: &Verdict| {
            v.postgres.clone().map(|mut p| {
                p.observed_at_ns = 0;
                p
            })
        };
        self.generation == other.generation
            && self.healthy == other.healthy
            && value(self) == value(other)
            && record(self) == record(other)
    }
}

/// One measured estimate: its value (`None`: the source failed or printed nothing
/// usable) and until when it may win an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub value: Option<u64>,
    pub fresh_until: BootInstant,
}

/// What a health check task runs with.
pub struct HealthCheck {
    pub config: HealthConfig,
    /// Where the command runs (the config file's directory).
    pub workdir: PathBuf,
    /// For `BULLY_DATA_DIR`.
    pub data_dir: PathBuf,
    /// Supplies the `BULLY_*` environment of each run.
    pub status: watch::Receiver<Status>,
    pub metrics: Arc<Metrics>,
    /// Where each verdict change goes: the runtime's eligibility.
    pub health_verdicts: mpsc::Sender<Verdict>,
    /// Which start of the check this is (see [`Verdict`]).
    pub generation: u64,
}

/// Runs the check until `tasks` stops or the runtime stops listening, sending each
/// verdict change.
pub async fn run(check: HealthCheck, tasks: NodeTasks) {
    let config = &check.config;
    let mut gate = Gate::new(config.rise, config.fall);
    let interval = Duration::from_millis(config.interval_ms);
    let mut ticks = tokio::time::interval(interval);
    // A check slower than the interval delays the next one rather than bunching up.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Once an estimate source showed itself, every run reports one.
    let mut ranked = config.estimate.is_some();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = check.health_verdicts.closed() => return,
            _ = tasks.stopped() => return,
        }
        let env = environment(&check.status.borrow().as_of_now(), None, &check.data_dir);
        let shell = Shell {
            command: &config.command,
            dir: &check.workdir,
            env: &env,
            timeout: Duration::from_millis(config.timeout_ms),
            quiet: true,
        };
        let started = BootInstant::now();
        let (exit, took, out) = shell::run_capture_until(&shell, tasks.stopped()).await;
        if tasks.is_stopped() {
            return;
        }
        let said = match &config.estimate {
            Some(command) => {
                let shell = Shell { command, ..shell };
                let (exit, _, out) = shell::run_capture_until(&shell, tasks.stopped()).await;
                if tasks.is_stopped() {
                    return;
                }
                match exit.is_success() {
                    true => estimate::from_estimate_output(&out),
                    false => Said::Malformed(format!("the estimate command {exit}")),
                }
            }
            None => estimate::from_health_output(&out),
        };
        if let Said::Malformed(why) = &said {
            tracing::warn!("no fresh estimate from this run: {why}");
        }
        ranked |= said != Said::Nothing;
        let measured = ranked.then(|| Measured {
            value: said.value(),
            fresh_until: started + estimate::fresh_for(config),
        });
        let passed = exit.is_success();
        check.metrics.health_checked(passed);
        if !passed {
            tracing::debug!(?took, "health check {exit}");
        }
        let changed = gate.record(passed);
        if let Some(healthy) = changed {
            check.metrics.set_health(HealthState::from_verdict(healthy));
            if healthy {
                tracing::info!(?took, "health check passing");
            } else {
                tracing::warn!(?took, "health check failing (last run {exit})");
            }
        }
        let Some(healthy) = gate.verdict().filter(|_| changed.is_some() || ranked) else {
            continue;
        };
        let sent = tasks
            .until_stopped(check.health_verdicts.send(Verdict {
                generation: check.generation,
                healthy,
                estimate: measured,
                postgres: None,
            }))
            .await;
        if !matches!(sent, Some(Ok(()))) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_result_decides_then_rise_and_fall_apply() {
        let mut gate = Gate::new(2, 3);
        assert_eq!(gate.record(true), Some(true));
        assert_eq!(gate.record(false), None);
        assert_eq!(gate.record(false), None);
        assert_eq!(gate.record(true), None, "a pass resets the failure streak");
        assert_eq!(gate.record(false), None);
        assert_eq!(gate.record(false), None);
        assert_eq!(gate.record(false), Some(false), "three failures in a row");
        assert_eq!(gate.record(true), None);
        assert_eq!(gate.record(true), Some(true), "two passes in a row");
    }

    #[test]
    fn alternating_results_never_flip_with_rise_and_fall_above_one() {
        let mut gate = Gate::new(2, 2);
        assert_eq!(gate.record(true), Some(true));
        for i in 0..20 {
            assert_eq!(gate.record(i % 2 == 0), None, "flipped at result {i}");
        }
    }

    #[test]
    fn a_failing_first_result_makes_the_node_unhealthy() {
        let mut gate = Gate::new(1, 1);
        assert_eq!(gate.record(false), Some(false));
        assert_eq!(gate.record(true), Some(true));
    }
}
