//! `bully chaos`: start a cluster behind the relay, wait for the first coordinator,
//! take the seeded schedule's steps on time, re-check the invariants every second,
//! then stop everything and write the report.

use super::harness::{first_election_limit, Harness, HarnessSpec};
use super::plan::{self, FaultKind, PlanSpec, Step};
use super::progress::Progress;
use super::report::picture::step_node;
use super::report::{Report, RunParams};
use super::setup::RunSetup;
use crate::wall_clock::wall_ms;
use anyhow::Result;
use std::time::Duration;
use tokio::time::Instant;

/// What `bully chaos` was asked to do.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub setup: RunSetup,
    pub duration: Duration,
    pub faults: Vec<FaultKind>,
}

impl ChaosConfig {
    /// The schedule's spec for this run.
    pub fn plan_spec(&self) -> PlanSpec {
        PlanSpec {
            nodes: self.setup.nodes,
            duration_ms: self.duration.as_millis() as u64,
            faults: self.faults.clone(),
            timing: self.setup.timing,
            mode: self.setup.mode,
            slack_ms: self.setup.slack_ms,
            seed: self.setup.seed,
        }
    }
}

/// How long a member change may take: a quiet gap (the plan leaves one after it).
fn change_timeout(spec: &PlanSpec) -> Duration {
    Duration::from_millis(spec.min_quiet_ms())
}

/// How often the logs are re-read and the invariants re-checked.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Runs the chaos test; `Err` only when the cluster could not be set up. Argument
/// errors are caught by [`PlanSpec::validate`] before anything starts.
pub async fn run(config: &ChaosConfig) -> Result<Report> {
    let spec = config.plan_spec();
    spec.validate().map_err(anyhow::Error::msg)?;
    let schedule = plan::plan(&spec);
    let mut progress = Progress::new(config.setup.progress);
    let harness = HarnessSpec {
        slow_hooks: spec.faults.contains(&FaultKind::SlowHooks),
        config_roll: spec.faults.contains(&FaultKind::Config),
        ..HarnessSpec::of(&config.setup, true)
    };
    let mut h = Harness::start(&harness).await?;
    progress.event(&format!(
        "started {} nodes ({} mode) behind the relay in {}; {} steps planned (seed {})",
        config.setup.nodes,
        config.setup.mode,
        config.setup.dir.display(),
        schedule.len(),
        config.setup.seed
    ));
    let top = config.setup.nodes;
    if h.wait_for_leader(
        top,
        first_election_limit(&config.setup.timing, config.setup.nodes, config.setup.mode),
    )
    .await
    {
        progress.event(&format!("first election done: coordinator {top}"));
    } else {
        progress.event("no agreement on a first coordinator; going on (I5 will tell)");
    }
    let origin = Instant::now();
    let end = origin + config.duration;
    let mut violations = 0;
    let mut next_check = Instant::now();
    for planned in &schedule {
        let due = origin + Duration::from_millis(planned.at_ms);
        while Instant::now() < due {
            if Instant::now() >= next_check {
                violations = tick(&mut h, &mut progress, config, end, violations);
                next_check = Instant::now() + CHECK_EVERY;
            }
            tokio::time::sleep_until(due.min(next_check)).await;
        }
        let target = step_node(&planned.step);
        let is_add = matches!(planned.step, Step::Add(_));
        if target.is_some_and(|n| !is_add && !h.members().contains(&n)) {
            // A member change that failed (an anomaly already) left the plan's model.
            progress.event(&format!("skipped `{}`: not a member", planned.step));
            continue;
        }
        progress.event(&planned.step.to_string());
        match planned.step {
            Step::Add(_) | Step::Remove(_) | Step::Replace(_) => {
                let step = planned.step.clone();
                // The change goes through the coordinator: give the election after the
                // last step its time first (the plan left a quiet gap).
                if let Some(leader) = h.expected_leader() {
                    h.wait_for_leader(leader, change_timeout(&spec)).await;
                }
                if let Err(e) = h.change_step(step, change_timeout(&spec)).await {
                    h.anomalies
                        .push(format!("step `{}` failed: {e:#}", planned.step));
                }
            }
            Step::Reconfigure(n) => {
                match h.set_timing_for(n, change_timeout(&spec)).await {
                    Ok(text) => progress.event(&format!("config set: {text}")),
                    Err(e) => progress.event(&format!("config set not committed: {e:#}")),
                }
                h.execute(planned.step.clone());
            }
            _ => h.execute(planned.step.clone()),
        }
    }
    while Instant::now() < end {
        if Instant::now() >= next_check {
            violations = tick(&mut h, &mut progress, config, end, violations);
            next_check = Instant::now() + CHECK_EVERY;
        }
        tokio::time::sleep_until(end.min(next_check)).await;
    }
    let report = h.finish(|_| RunParams {
        faults: config.faults.clone(),
        ..config.setup.params("chaos", config.duration.as_secs_f64())
    });
    progress.finish();
    Ok(report)
}

/// One progress tick: re-read the logs, re-check, redraw. Returns the violation count.
fn tick(
    h: &mut Harness,
    progress: &mut Progress,
    config: &ChaosConfig,
    end: Instant,
    before: usize,
) -> usize {
    h.poll();
    let verdict = h.judge(wall_ms(), config.setup.slack_ms);
    let count = verdict.violations.len();
    if count > before {
        for v in &verdict.violations[before.min(count)..] {
            progress.event(&format!(
                "VIOLATION {} at {:.3} s on node {}: {}",
                v.invariant,
                (v.at_ms as f64 - h.origin_ms as f64) / 1000.0,
                v.node,
                v.explanation
            ));
        }
    }
    let coordinator = h
        .agreed()
        .map_or("none".to_string(), |(l, e)| format!("{l} (epoch {e})"));
    let left = end.saturating_duration_since(Instant::now()).as_secs_f64();
    progress.status(&format!(
        "chaos: {left:>5.1} s left | steps {} | coordinator {coordinator} | violations {count}",
        h.executed().len()
    ));
    count
}
