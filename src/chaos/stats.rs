//! Percentile summaries of durations, for the report and the benchmark.

use serde::Serialize;

/// p50/p90/p99/max of a set of durations in ms (nearest-rank percentiles: every
/// figure is one of the measured values, none is interpolated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct Summary {
    pub count: usize,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
    pub min: u64,
}

impl Summary {
    /// Summarises `values`; all zeros with `count` 0 when there are none.
    pub fn of(values: &[u64]) -> Summary {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let rank = |p: f64| -> u64 {
            if sorted.is_empty() {
                return 0;
            }
            let index = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
            sorted[index.clamp(1, sorted.len()) - 1]
        };
        Summary {
            count: sorted.len(),
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max: sorted.last().copied().unwrap_or(0),
            min: sorted.first().copied().unwrap_or(0),
        }
    }

    /// `p50 / p90 / p99 / max` in ms, or `-` without samples.
    pub fn cells(&self) -> [String; 5] {
        if self.count == 0 {
            return ["0".into(), "-".into(), "-".into(), "-".into(), "-".into()];
        }
        [
            self.count.to_string(),
            self.p50.to_string(),
            self.p90.to_string(),
            self.p99.to_string(),
            self.max.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u64> = (1..=100).rev().collect();
        let s = Summary::of(&values);
        assert_eq!(
            (s.count, s.p50, s.p90, s.p99, s.max, s.min),
            (100, 50, 90, 99, 100, 1)
        );
        let one = Summary::of(&[7]);
        assert_eq!((one.p50, one.p99, one.max), (7, 7, 7));
        assert_eq!(Summary::of(&[]).count, 0);
        assert_eq!(Summary::of(&[]).cells()[1], "-");
    }
}
