//! The report's human rendering (what `bully chaos` prints): the parameters, the
//! counts and costs, the table of takeover times and the findings, a few lines each.

use super::idle_figures::IdleFigures;
use super::{FailoverCosts, Report};
use crate::chaos::stats::Summary;
use crate::protocol::Mode;
use std::fmt::Write as _;

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

impl IdleFigures {
    /// The lines the report prints for an idle run.
    fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "idle CPU           p50 {:.2} % / max {:.2} % of a core per node over {:.0} s; \
             all nodes {:.3} core-s per 10 s",
            self.cpu_percent_p50, self.cpu_percent_max, self.window_s, self.core_seconds_per_10s
        );
        let _ = writeln!(
            out,
            "idle memory        RSS p50 {:.1} MB / max {:.1} MB per node",
            self.rss_mb_p50, self.rss_mb_max
        );
        let _ = writeln!(
            out,
            "idle messages      {:.1}/s in the cluster; per coordinator link {:.1} \
             heartbeats/s and {:.1} acks/s",
            self.messages_per_s, self.heartbeats_per_link_s, self.acks_per_link_s
        );
        let q = &self.leader_query_ms;
        let _ = writeln!(
            out,
            "bully leader       p50 {} / p90 {} / max {} ms per whole process ({} runs)",
            q.p50, q.p90, q.max, q.count
        );
    }
}
