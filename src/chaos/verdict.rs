//! Judges a run's history with [`crate::checker`]: I1–I4 over everything, I5 over each
//! quiet window, I6 and I7 (no two coordinators at once, one per term) over everything
//! in quorum mode, and the advisory cluster-wide part of I2. Cheap enough to redo from
//! scratch every second while the run goes on, so the live count and the final report
//! come from the same code.
//!
//! Classic mode promises neither I6 nor I7 (a partition elects one coordinator per
//! side), so there they are reported as advisory warnings, not judged.

use super::plan::Availability;
use super::timeline::Executed;
use crate::checker::{self, Convergence, Leader, Violation};
use crate::history::{self, Entry};
use crate::protocol::{Millis, Mode, NodeId, Timing};
use serde::Serialize;

/// A stretch between two steps (or the last step and the end) in which no partition
/// was in effect (and, in quorum mode, a majority was available), so I5 applies: the
/// available nodes must converge on the highest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub from_ms: Millis,
    pub to_ms: Millis,
    pub live: Vec<NodeId>,
    /// A fixed deadline instead of `last fault + bound + slack`: the first window
    /// uses one, because bringing N processes up (TLS handshakes to every peer) is
    /// not a fault the I5 bound covers.
    pub deadline_ms: Option<Millis>,
}

/// The I5 windows of a run: after every step with no partition in effect, up to the
/// next step or `end_ms`; in quorum mode only those where a coordinator is expected at
/// all (a majority of the members is available, see [`Availability::expected_leader`]).
pub fn windows(steps: &[Executed], nodes: u64, end_ms: Millis, mode: Mode) -> Vec<Window> {
    let mut availability = Availability::default();
    let mut out = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        availability.apply(&step.step);
        let to_ms = steps.get(i + 1).map_or(end_ms, |s| s.at_ms);
        let expected = availability.expected_leader(nodes, mode).is_some();
        if !availability.partitioned(nodes) && expected && to_ms > step.at_ms {
            out.push(Window {
                from_ms: step.at_ms,
                to_ms,
                live: availability.available(nodes),
                deadline_ms: None,
            });
        }
    }
    out
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// I1–I5, and in quorum mode I6 and I7: each one fails the run.
    pub violations: Vec<Violation>,
    /// Two nodes declaring one term in a quiet stretch (the soft part of I2): on real
    /// processes only advisory, because its proof assumes delays below T/2, which a
    /// loaded machine does not promise (see [`checker::check_unique_terms`]). In
    /// classic mode also I6 and I7, which that mode does not promise.
    pub warnings: Vec<Violation>,
    /// Quiet windows judged for I5, and those too short to judge (the next step came
    /// before the deadline).
    pub i5_checked: usize,
    pub i5_skipped: usize,
}

/// Checks `history` (time-ordered) for a cluster running `mode`. `slack_ms` is added
/// to the mode's I5 bound ([`Timing::convergence_bound_in`]) for real scheduling and
/// network delays; `max_delay_ms` sizes the soft-I2 quiet window.
pub fn judge(
    history: &[Entry],
    windows: &[Window],
    timing: &Timing,
    mode: Mode,
    slack_ms: Millis,
    max_delay_ms: Millis,
) -> Verdict {
    let mut verdict = Verdict {
        violations: checker::check_safety(history),
        warnings: checker::check_unique_terms(history, checker::quiet_window(timing, max_delay_ms)),
        ..Verdict::default()
    };
    // A paused coordinator's office ends within its lease span (Q3).
    let mut quorum_rules = checker::check_no_overlap(history, checker::lease_bound_ms(timing));
    quorum_rules.extend(checker::check_one_per_term(history));
    match mode {
        Mode::Quorum => verdict.violations.extend(quorum_rules),
        Mode::Classic => {
            verdict.warnings.extend(quorum_rules);
            verdict.warnings.sort_by_key(|v| v.at_ms);
        }
    }
    let bound = timing.convergence_bound_in(mode);
    for window in windows {
        let Some(&leader) = window.live.last() else {
            continue;
        };
        let upto = history.partition_point(|e| e.at_ms < window.to_ms);
        let slice = &history[..upto];
        let last_fault = history::last_fault_ms(slice)
            .unwrap_or(window.from_ms)
            .max(window.from_ms);
        let deadline_ms = window.deadline_ms.unwrap_or(last_fault + bound + slack_ms);
        if deadline_ms >= window.to_ms {
            verdict.i5_skipped += 1;
            continue;
        }
        verdict.i5_checked += 1;
        verdict.violations.extend(checker::check_convergence(
            slice,
            &Convergence {
                live: window.live.clone(),
                leader: Leader::Node(leader),
                deadline_ms,
            },
        ));
    }
    verdict
}

/// A violation with the history around it, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct Explained {
    pub invariant: String,
    pub node: NodeId,
    /// Seconds since the run started.
    pub at_s: f64,
    pub explanation: String,
    /// The entries within a couple of seconds of it (at most [`CONTEXT_LINES`]),
    /// rendered with times in ms since the run's start.
    pub history: Vec<String>,
}

/// How many history lines to show around each violation.
pub const CONTEXT_LINES: usize = 40;

/// Explains `violation` with the entries nearest to it in time (before-heavy: the
/// cause usually precedes the symptom).
pub fn explain(violation: &Violation, history: &[Entry], origin_ms: Millis) -> Explained {
    let at = violation.at_ms;
    let near: Vec<&Entry> = history
        .iter()
        .filter(|e| e.at_ms + 2000 >= at && e.at_ms <= at + 500)
        .collect();
    let centre = near.partition_point(|e| e.at_ms <= at);
    let from = centre.saturating_sub(CONTEXT_LINES * 3 / 4);
    let to = (from + CONTEXT_LINES).min(near.len());
    Explained {
        invariant: violation.invariant.to_string(),
        node: violation.node,
        at_s: relative_s(at, origin_ms),
        explanation: violation.explanation.clone(),
        history: near[from..to]
            .iter()
            .map(|e| render_relative(e, origin_ms))
            .collect(),
    }
}

/// An entry as one line, its time in ms since `origin_ms` (the run's start).
pub fn render_relative(entry: &Entry, origin_ms: Millis) -> String {
    let mut shifted = entry.clone();
    shifted.at_ms = entry.at_ms.saturating_sub(origin_ms);
    shifted.to_string()
}

fn relative_s(at_ms: Millis, origin_ms: Millis) -> f64 {
    (at_ms as f64 - origin_ms as f64) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::plan::Step;
    use crate::history::Record;
    use crate::protocol::{Cells, Epoch, Role, View};

    fn steps() -> Vec<Executed> {
        [
            (1000, Step::Kill(3)),
            (5000, Step::Partition(vec![1])),
            (6000, Step::Heal),
            (6100, Step::Start(3)),
        ]
        .into_iter()
        .map(|(at_ms, step)| Executed { at_ms, step })
        .collect()
    }

    #[test]
    fn windows_skip_partitions_and_track_the_live_set() {
        let w = windows(&steps(), 3, 9000, Mode::Classic);
        let spans: Vec<(u64, u64, Vec<NodeId>)> = w
            .into_iter()
            .map(|w| (w.from_ms, w.to_ms, w.live))
            .collect();
        assert_eq!(
            spans,
            vec![
                (1000, 5000, vec![1, 2]),
                (6000, 6100, vec![1, 2]),
                (6100, 9000, vec![1, 2, 3]),
            ]
        );
    }

    #[test]
    fn quorum_mode_expects_no_leader_without_a_majority() {
        let steps: Vec<Executed> = [(1000, Step::Kill(3)), (2000, Step::Pause(2))]
            .into_iter()
            .map(|(at_ms, step)| Executed { at_ms, step })
            .collect();
        let froms = |mode| -> Vec<Millis> {
            windows(&steps, 3, 9000, mode)
                .iter()
                .map(|w| w.from_ms)
                .collect()
        };
        // Node 1 alone is no majority of 3: nothing to converge on in quorum mode.
        assert_eq!(froms(Mode::Quorum), vec![1000]);
        assert_eq!(froms(Mode::Classic), vec![1000, 2000]);
    }

    #[test]
    fn overlapping_offices_fail_quorum_runs_and_warn_in_classic_ones() {
        use crate::protocol::Fact;
        let est = |at_ms, node, term| {
            Entry::new(
                at_ms,
                node,
                Record::Fact(Fact::Established {
                    epoch: Epoch { term, leader: node },
                }),
            )
        };
        // Node 2 leads from 100; node 1 establishes term 2 at 500 while 2 still leads
        // (no Demoted, no crash), and term 2 again on node 2 at 600.
        let history = vec![est(100, 2, 1), est(500, 1, 2), est(600, 2, 2)];
        let quorum = judge(&history, &[], &Timing::default(), Mode::Quorum, 500, 10);
        let found: Vec<String> = quorum
            .violations
            .iter()
            .map(|v| v.invariant.to_string())
            .collect();
        assert!(found.contains(&"I6 no overlap".to_string()), "{found:?}");
        assert!(
            found.contains(&"I7 one coordinator per term".to_string()),
            "{found:?}"
        );
        let classic = judge(&history, &[], &Timing::default(), Mode::Classic, 500, 10);
        assert!(classic.violations.is_empty(), "{:?}", classic.violations);
        assert_eq!(classic.warnings.len(), quorum.violations.len());
        assert!(classic
            .warnings
            .windows(2)
            .all(|w| w[0].at_ms <= w[1].at_ms));
    }

    #[test]
    fn a_window_that_never_converges_is_flagged_and_a_short_one_skipped() {
        let epoch = Epoch { term: 1, leader: 2 };
        let history = vec![
            Entry::new(
                10,
                2,
                Record::Persisted(Cells {
                    term: 1,
                    accepted: Some(epoch),
                    incarnation: 1,
                    promise_ms: 0,
                    recovered: false,
                    given_up: false,
                    awaits_survivors: false,
                }),
            ),
            Entry::new(
                10,
                2,
                Record::View(View {
                    id: 2,
                    role: Role::Coordinator,
                    epoch: Some(epoch),
                    eligible: true,
                    incarnation: 1,
                }),
            ),
            Entry::new(
                20,
                1,
                Record::View(View {
                    id: 1,
                    role: Role::Candidate,
                    epoch: None,
                    eligible: true,
                    incarnation: 1,
                }),
            ),
        ];
        let w = [
            Window {
                from_ms: 0,
                to_ms: 5000,
                live: vec![1, 2],
                deadline_ms: None,
            },
            Window {
                from_ms: 5000,
                to_ms: 5100,
                live: vec![1, 2],
                deadline_ms: None,
            },
        ];
        let v = judge(&history, &w, &Timing::default(), Mode::Classic, 0, 10);
        assert_eq!((v.i5_checked, v.i5_skipped), (1, 1));
        assert_eq!(v.violations.len(), 1, "{:?}", v.violations);
        assert_eq!(v.violations[0].node, 1);
        let explained = explain(&v.violations[0], &history, 0);
        assert_eq!(explained.history.len(), 3);
        assert!(
            explained.history[2].contains("n1"),
            "{:?}",
            explained.history
        );
        assert!(
            explained.history[2].starts_with("      20 ms"),
            "{:?}",
            explained.history
        );
    }
}
