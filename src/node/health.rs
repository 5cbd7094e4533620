//! The health check that gates eligibility: `[health] command` runs every
//! `interval_ms` (with `sh -c`, in the node's working directory, killed after
//! `timeout_ms`); `rise` passes in a row make a failing node healthy, `fall` failures in
//! a row make a healthy node failing. The node starts *failing* and the first result
//! decides at once, so a restarted node cannot win an election before its first check
//! has passed (the Redis example relies on this: an empty Redis must not lead).
//!
//! The check runs in its own task and only reports verdict changes, so a slow check
//! never delays the protocol.

use super::command::{self, Shell};
use super::metrics::{HealthState, Metrics};
use super::status::Status;
use crate::config::HealthConfig;
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

/// Runs the check in `workdir` until `verdicts` is closed (the runtime stopped),
/// sending each verdict change. `status` supplies the `BULLY_*` environment of each run.
pub async fn run(
    config: HealthConfig,
    workdir: PathBuf,
    data_dir: PathBuf,
    status: watch::Receiver<Status>,
    metrics: Arc<Metrics>,
    verdicts: mpsc::Sender<bool>,
) {
    let mut gate = Gate::new(config.rise, config.fall);
    let interval = Duration::from_millis(config.interval_ms);
    let mut ticks = tokio::time::interval(interval);
    // A check slower than the interval delays the next one rather than bunching up.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = verdicts.closed() => return,
        }
        let env = super::hooks::environment(&status.borrow().as_of_now(), None, &data_dir);
        let shell = Shell {
            command: &config.command,
            dir: &workdir,
            env: &env,
            timeout: Duration::from_millis(config.timeout_ms),
            quiet: true,
        };
        let (outcome, took) = command::run(&shell).await;
        let passed = outcome.is_success();
        metrics.health_checked(passed);
        if !passed {
            tracing::debug!(?took, "health check {outcome}");
        }
        if let Some(healthy) = gate.record(passed) {
            metrics.set_health(if healthy {
                HealthState::Passing
            } else {
                HealthState::Failing
            });
            if healthy {
                tracing::info!(?took, "health check passing");
            } else {
                tracing::warn!(?took, "health check failing (last run {outcome})");
            }
            if verdicts.send(healthy).await.is_err() {
                return;
            }
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
