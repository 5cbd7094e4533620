//! The verdict and figures of a chaos run or a benchmark: one serializable [`Report`]
//! (written with `--json`), the record every doer above it (harness, runner, benches,
//! the HTML picture) fills in or reads, and which imports none of them.
//!
//! - [`picture`]: what `--html` draws, read off the same history;
//! - [`idle_figures`]: what `--bench idle` measured;
//! - `text`: the human rendering (a few tables), [`Report::render`].

pub mod idle_figures;
pub mod picture;
mod text;

pub use idle_figures::IdleFigures;
pub use picture::Picture;

use crate::chaos::office::OfficeFigures;
use crate::chaos::plan::FaultKind;
use crate::chaos::stats::Summary;
use crate::chaos::timeline::{Sample, SampleKind, Timeline};
use crate::chaos::verdict::Explained;
use crate::protocol::{Mode, Timing};
use serde::Serialize;
use std::collections::BTreeMap;

/// Durations of one kind of takeover (failover or reclaim), in total and per phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Takeovers {
    /// Fault → every available node follows the new leader, ms.
    pub total: Summary,
    /// The three phases, in order, with their names.
    pub phases: Vec<Phase>,
    /// Takeovers cut short by the next step (not measured).
    pub unmeasured: usize,
    /// How many takeovers each step kind caused (kill, pause, partition, ...).
    pub causes: BTreeMap<String, usize>,
}

/// One phase of a takeover.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: &'static str,
    #[serde(flatten)]
    pub summary: Summary,
}

impl Takeovers {
    /// Summarises the samples of one kind.
    pub fn of(samples: &[Sample], kind: SampleKind) -> Takeovers {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.kind == kind).collect();
        let names = match kind {
            SampleKind::Failover => ["detection", "election", "announcement"],
            SampleKind::Reclaim => ["startup", "election", "announcement"],
        };
        let totals: Vec<u64> = mine.iter().filter_map(|s| s.total_ms).collect();
        let phases = names
            .iter()
            .enumerate()
            .map(|(i, &name)| Phase {
                name,
                summary: Summary::of(
                    &mine
                        .iter()
                        .filter_map(|s| s.phases.map(|p| p[i]))
                        .collect::<Vec<_>>(),
                ),
            })
            .collect();
        let mut causes = BTreeMap::new();
        for s in &mine {
            *causes.entry(s.cause.to_string()).or_insert(0) += 1;
        }
        Takeovers {
            total: Summary::of(&totals),
            phases,
            unmeasured: mine.len() - totals.len(),
            causes,
        }
    }
}

/// What the run was asked to do.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunParams {
    /// `chaos` or `chaos --bench failover`.
    pub command: String,
    /// The election mode the nodes ran (`quorum` or `classic`).
    pub mode: Mode,
    pub nodes: u64,
    pub seed: u64,
    pub duration_s: f64,
    pub runs: Option<u32>,
    pub faults: Vec<FaultKind>,
    pub timing_profile: String,
    pub timing: Timing,
    /// Added to the mode's I5 bound (`timing.convergence_bound_in(mode)`) before judging.
    pub slack_ms: u64,
    /// The run's folder when kept (`--keep-dir`).
    pub dir: Option<String>,
}

/// A step as it happened, in seconds since the run's start.
#[derive(Debug, Clone, Serialize)]
pub struct StepLine {
    pub at_s: f64,
    pub step: String,
}

/// Everything a run found. `Default` is an empty run, for building reports by hand.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub params: RunParams,
    /// `pass` with no violation and no anomaly, else `fail`.
    pub verdict: &'static str,
    /// Steps taken, by kind (kill, pause, restart, partition, start, resume, heal).
    pub faults: BTreeMap<String, usize>,
    pub steps: Vec<StepLine>,
    /// Declarations seen in the nodes' logs (each is one won election).
    pub elections: usize,
    pub failover: Takeovers,
    pub reclaim: Takeovers,
    /// What each failover cost, measured by `--bench` only, since overlapping faults in a
    /// chaos run blur which election a message belongs to.
    pub failover_costs: Option<FailoverCosts>,
    /// `--bench idle`: CPU, memory and messages of the settled cluster.
    pub idle: Option<IdleFigures>,
    /// `--bench`: declarations from the start until every node first followed the
    /// highest one (1 = no start-up storm).
    pub startup_declarations: Option<usize>,
    /// From the first agreement to the end, ms without an agreed coordinator.
    pub no_agreement_ms: u64,
    pub longest_no_agreement_ms: u64,
    /// The share of the run (after the first agreement) without one, 0–1.
    pub no_agreement_share: f64,
    /// Time with two coordinators at once, and time the majority side of a partition
    /// had none (`two_coordinators_ms`, `majority_side_leaderless_ms` in the JSON).
    #[serde(flatten)]
    pub offices: OfficeFigures,
    /// Quiet windows judged for I5, and those too short to judge.
    pub i5_windows_checked: usize,
    pub i5_windows_skipped: usize,
    pub violations: Vec<Explained>,
    /// Advisory findings (the soft part of I2), with their history (the first few).
    pub warnings: Vec<Explained>,
    pub warnings_total: usize,
    /// Things that went wrong outside the invariants (a node exiting by itself, a
    /// step that failed): each fails the run.
    pub anomalies: Vec<String>,
    /// Event-log lines that did not parse (a line torn by a kill).
    pub unparsed_log_lines: usize,
    /// What `--html` draws, read off the same history (not in the JSON: the history
    /// itself is in the run's folder).
    #[serde(skip)]
    pub picture: Picture,
}

/// The cost of each kill in `--bench failover`, from the survivors' metrics and the
/// event logs, kill to convergence.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FailoverCosts {
    /// Election + Answer + Coordinator sent per failover (the classic Bully's count).
    pub bully_messages: Summary,
    /// PreVote + Vote per failover: quorum mode's extra round (0 in classic mode).
    pub vote_messages: Summary,
    /// Declarations per kill: 1 everywhere means exactly one coordinator change.
    pub declarations_per_kill: Summary,
}

impl Report {
    /// Whether the run passed: no violation, no anomaly.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.anomalies.is_empty()
    }

    /// Fills the figures from a timeline; the caller sets the rest.
    pub fn figures(timeline: &Timeline, end_ms: u64) -> (Takeovers, Takeovers, f64) {
        let span = timeline
            .first_agreement_ms
            .map_or(0, |first| end_ms.saturating_sub(first));
        let share = if span == 0 {
            0.0
        } else {
            timeline.no_agreement_ms as f64 / span as f64
        };
        (
            Takeovers::of(&timeline.samples, SampleKind::Failover),
            Takeovers::of(&timeline.samples, SampleKind::Reclaim),
            share,
        )
    }
}
