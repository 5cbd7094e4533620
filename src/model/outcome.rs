//! What an exploration returns: its figures and, if a property broke, the path to it.

use super::transition::Transition;
use crate::checker::Violation;
use std::fmt;

/// The result of one exploration.
#[derive(Debug, Clone)]
pub struct Exploration {
    pub states: usize,
    pub transitions: usize,
    pub max_depth: usize,
    /// Whether the depth bound cut some paths short (otherwise the bounded space was
    /// explored to its end).
    pub depth_limited: bool,
    pub liveness_checked: usize,
    pub counterexample: Option<Counterexample>,
}

/// A path to a violation.
#[derive(Debug, Clone)]
pub struct Counterexample {
    pub violation: Violation,
    pub steps: Vec<Transition>,
    /// One line per step: the step and the nodes' roles after it.
    pub trace: Vec<String>,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.violation)?;
        for (i, line) in self.trace.iter().enumerate() {
            writeln!(f, "  {:>3}. {line}", i + 1)?;
        }
        Ok(())
    }
}
