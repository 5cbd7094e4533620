//! The verdict and figures of a chaos run or a failover benchmark: one serializable
//! [`Report`] (written with `--json`) and its human rendering (a few tables).

use super::office::OfficeFigures;
use super::picture::Picture;
use super::plan::FaultKind;
use super::stats::Summary;
use super::timeline::{Sample, SampleKind, Timeline};
use super::verdict::Explained;
use crate::protocol::{Mode, Timing};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

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
    pub idle: Option<super::idle::IdleFigures>,
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

impl FailoverCosts {
    fn render(&self, out: &mut String) {
        let m = &self.bully_messages;
        let v = &self.vote_messages;
        let d = &self.declarations_per_kill;
        let _ = writeln!(
            out,
            "messages/failover  Election+Answer+Coordinator p50 {} / max {}; PreVote+Vote \
             p50 {} / max {} (over {} kills)",
            m.p50, m.max, v.p50, v.max, m.count
        );
        let _ = writeln!(
            out,
            "declarations/kill  min {} / max {} (1 = exactly one coordinator change)",
            d.min, d.max
        );
    }
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

    /// The human rendering: parameters, counts, the timing table, violations.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_parameters(&mut out);
        self.render_counts(&mut out);
        self.render_timings(&mut out);
        self.render_findings(&mut out);
        let _ = writeln!(
            out,
            "\nverdict: {} ({} violations, {} anomalies, {} advisory warnings)",
            self.verdict.to_uppercase(),
            self.violations.len(),
            self.anomalies.len(),
            self.warnings_total
        );
        out
    }

    /// The command, mode, seed and timing the run used.
    fn render_parameters(&self, out: &mut String) {
        let p = &self.params;
        let _ = writeln!(
            out,
            "bully {}: {} mode, {} nodes, seed {}, {}, timing {} (heartbeat {} ms, D {} ms, T {} ms, T' {} ms)",
            p.command,
            p.mode,
            p.nodes,
            p.seed,
            match p.runs {
                Some(runs) => format!("{runs} runs"),
                None => format!("{:.0} s", p.duration_s),
            },
            p.timing_profile,
            p.timing.heartbeat_ms,
            p.timing.suspect_after_ms,
            p.timing.answer_timeout_ms,
            p.timing.coordinator_timeout_ms,
        );
        if let Some(dir) = &p.dir {
            let _ = writeln!(out, "files kept in {dir}");
        }
    }

    /// Steps, elections, time without (or with two) coordinators, and the costs.
    fn render_counts(&self, out: &mut String) {
        let p = &self.params;
        let steps: Vec<String> = self
            .faults
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        let _ = writeln!(out, "\nsteps taken        {}", steps.join(", "));
        let _ = writeln!(out, "elections          {}", self.elections);
        let _ = writeln!(
            out,
            "no coordinator     {:.2} s in total ({:.1} % of the run), longest {:.2} s",
            self.no_agreement_ms as f64 / 1000.0,
            self.no_agreement_share * 100.0,
            self.longest_no_agreement_ms as f64 / 1000.0
        );
        let _ = writeln!(
            out,
            "two coordinators   {:.2} s in total ({})",
            self.offices.two_coordinators_ms as f64 / 1000.0,
            match p.mode {
                Mode::Quorum => "I6: must be 0",
                Mode::Classic => "classic mode: reported, not judged",
            }
        );
        let _ = writeln!(
            out,
            "majority side      {:.2} s without a coordinator during partitions",
            self.offices.majority_side_leaderless_ms as f64 / 1000.0
        );
        let gaps = self.offices.takeover_gaps;
        if gaps.count > 0 {
            let _ = writeln!(
                out,
                "takeover gap       p50 {} / p90 {} / max {} ms over {} takeovers (no \
                 coordinator while a higher node took over from a lower one)",
                gaps.p50, gaps.p90, gaps.max, gaps.count
            );
        }
        let _ = writeln!(
            out,
            "I5 windows         {} judged, {} too short to judge",
            self.i5_windows_checked, self.i5_windows_skipped
        );
        if let Some(n) = self.startup_declarations {
            let _ = writeln!(
                out,
                "start-up           {n} declarations before every node followed the highest"
            );
        }
        if let Some(idle) = &self.idle {
            idle.render(out);
        }
        match &self.failover_costs {
            Some(c) => c.render(out),
            None if self.idle.is_some() => {}
            None => {
                let _ = writeln!(
                    out,
                    "messages/election  not measured (only --bench failover counts them)"
                );
            }
        }
    }

    /// The failover and reclaim percentiles with their phases and causes.
    fn render_timings(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\n{:<22}{:>6}{:>8}{:>8}{:>8}{:>8}   (ms)",
            "", "n", "p50", "p90", "p99", "max"
        );
        for (name, t) in [("failover", &self.failover), ("reclaim", &self.reclaim)] {
            row(out, name, &t.total);
            for phase in &t.phases {
                row(out, &format!("  {}", phase.name), &phase.summary);
            }
            let causes: Vec<String> = t.causes.iter().map(|(c, n)| format!("{c} {n}")).collect();
            if !causes.is_empty() || t.unmeasured > 0 {
                let _ = writeln!(
                    out,
                    "  caused by {}{}",
                    causes.join(", "),
                    if t.unmeasured > 0 {
                        format!("; {} cut short by the next step", t.unmeasured)
                    } else {
                        String::new()
                    }
                );
            }
        }
    }

    /// Anomalies, then violations and warnings (the first few with their history).
    fn render_findings(&self, out: &mut String) {
        for a in &self.anomalies {
            let _ = writeln!(out, "\nANOMALY: {a}");
        }
        for (title, list) in [
            ("VIOLATION", &self.violations),
            ("warning (advisory)", &self.warnings),
        ] {
            for (i, v) in list.iter().enumerate() {
                if i >= DETAILED {
                    let _ = writeln!(
                        out,
                        "{title}: {} at {:.3} s on node {}: {}",
                        v.invariant, v.at_s, v.node, v.explanation
                    );
                    continue;
                }
                let _ = writeln!(
                    out,
                    "\n{title}: {} at {:.3} s on node {}: {}",
                    v.invariant, v.at_s, v.node, v.explanation
                );
                let _ = writeln!(out, "  history around it (ms since the start):");
                for line in &v.history {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
    }
}

/// How many violations (and warnings) the human report shows with their history; the
/// rest get one line each (the JSON report has every history).
const DETAILED: usize = 5;

fn row(out: &mut String, name: &str, s: &Summary) {
    let [n, p50, p90, p99, max] = s.cells();
    let _ = writeln!(out, "{name:<22}{n:>6}{p50:>8}{p90:>8}{p99:>8}{max:>8}");
}
