//! The bench's table: one row per system and fault, its runs gathered as they end, and
//! one row for each system skipped, saying why.

use crate::run::Figures;
use crate::system::{Fault, Kind};
use std::time::Duration;

/// The runs of one fault on one system.
pub struct Row {
    kind: Kind,
    fault: Fault,
    figures: Vec<Figures>,
    /// Why runs failed (each once).
    errors: Vec<String>,
    failures: usize,
    /// Why the system did not run at all, if it did not.
    skipped: Option<String>,
}

impl Row {
    /// A row without runs yet.
    pub fn new(kind: Kind, fault: Fault) -> Row {
        Row {
            kind,
            fault,
            figures: Vec::new(),
            errors: Vec::new(),
            failures: 0,
            skipped: None,
        }
    }

    /// The row of a system that could not run, and why (its fault is only a
    /// placeholder: the row covers every fault).
    pub fn skipped(kind: Kind, why: &str) -> Row {
        Row {
            skipped: Some(why.to_string()),
            ..Row::new(kind, Fault::Kill)
        }
    }

    /// Whether the system could not run.
    pub fn is_skipped(&self) -> bool {
        self.skipped.is_some()
    }

    /// Adds one run's outcome.
    pub fn add(&mut self, run: Result<Figures, String>) {
        match run {
            Ok(figures) => self.figures.push(figures),
            Err(why) => self.failed(&why),
        }
    }

    /// Counts a failed run (its first line is shown once).
    pub fn failed(&mut self, why: &str) {
        self.failures += 1;
        let first: String = why.lines().next().unwrap_or("").chars().take(90).collect();
        if !self.errors.contains(&first) {
            self.errors.push(first);
        }
    }

    /// Runs done, measured or failed.
    pub fn runs(&self) -> usize {
        self.figures.len() + self.failures
    }
}

/// The table, with `hold` in the pause and cut faults' names.
pub fn render(rows: &[Row], hold: Duration) -> String {
    let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let mut lines = vec![
        "| system | fault | runs ok | write gap median | write gap max | committed lost | two writable (max) | failed runs |".to_string(),
        "|---|---|---|---|---|---|---|---|".to_string(),
    ];
    for row in rows {
        if let Some(why) = &row.skipped {
            lines.push(format!(
                "| {} | every fault | skipped | - | - | - | - | skipped: {why} |",
                row.kind.name()
            ));
            continue;
        }
        let mut gaps: Vec<Duration> = row.figures.iter().map(|f| f.gap).collect();
        gaps.sort();
        let median = match gaps.len() {
            0 => "-".to_string(),
            n if n % 2 == 1 => secs(gaps[n / 2]),
            n => secs((gaps[n / 2 - 1] + gaps[n / 2]) / 2),
        };
        let max = gaps.last().map_or("-".to_string(), |&g| secs(g));
        let lost: usize = row.figures.iter().map(|f| f.lost).sum();
        let two = row.figures.iter().map(|f| f.two_writable).max();
        lines.push(format!(
            "| {} | {} | {}/{} | {median} | {max} | {lost} | {} | {} |",
            row.kind.name(),
            row.fault.label(hold),
            row.figures.len(),
            row.runs(),
            two.map_or("-".to_string(), |d| format!("{} ms", d.as_millis())),
            if row.errors.is_empty() {
                "-".to_string()
            } else {
                row.errors.join("; ")
            }
        ));
    }
    lines.join("\n")
}

/// `/proc/loadavg`'s three load averages: the table is only as good as the machine was
/// idle.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The message a panic carried.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}
