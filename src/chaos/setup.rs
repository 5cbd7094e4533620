//! What a chaos run or a benchmark is asked to do, as the command line built it: the
//! plain settings the runner, the failover bench and the idle bench all start from,
//! below every one of them so none imports another for its settings.

use super::progress;
use super::report::RunParams;
use crate::protocol::{Mode, Timing};
use std::path::PathBuf;

/// What every run of the chaos runner or the bench is set up with.
#[derive(Debug, Clone)]
pub struct RunSetup {
    pub nodes: u64,
    pub seed: u64,
    /// The timing profile's name, for the report.
    pub timing_profile: String,
    pub timing: Timing,
    /// The election mode every node runs; it also picks the I5 bound and whether I6
    /// and I7 are judged.
    pub mode: Mode,
    /// Added to `timing.convergence_bound_in(mode)` before I5 is judged.
    pub slack_ms: u64,
    /// The `bully` executable the nodes run.
    pub binary: PathBuf,
    /// Where certs, configs, data and logs go.
    pub dir: PathBuf,
    pub progress: progress::Mode,
}

/// What a benchmark (`--bench failover` or `--bench idle`) was asked to do.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub setup: RunSetup,
    /// Kill/restart rounds.
    pub runs: u32,
}

impl RunSetup {
    /// The parameters a report of `command` over `duration_s` seconds prints, taken
    /// from this setup: no runs, faults or kept folder (the caller adds those it has).
    pub fn params(&self, command: &str, duration_s: f64) -> RunParams {
        RunParams {
            command: command.into(),
            mode: self.mode,
            nodes: self.nodes,
            seed: self.seed,
            duration_s,
            runs: None,
            faults: Vec::new(),
            timing_profile: self.timing_profile.clone(),
            timing: self.timing,
            slack_ms: self.slack_ms,
            dir: None,
        }
    }
}

impl BenchConfig {
    /// Checks that the benchmark can measure anything, before a cluster is started.
    pub fn validate(&self) -> Result<(), String> {
        if self.setup.nodes < 2 {
            return Err("--bench failover needs at least 2 nodes".into());
        }
        if self.setup.mode == Mode::Quorum && self.setup.nodes < 3 {
            return Err(
                "--bench failover in quorum mode needs at least 3 nodes: the survivor of 2 \
                 is no majority and may not lead (use --mode classic to measure 2 nodes)"
                    .into(),
            );
        }
        if self.runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        Ok(())
    }
}
