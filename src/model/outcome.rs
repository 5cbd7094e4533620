//! What an exploration returns: its figures and, if a property broke, the path to it.

use super::transition::Transition;
use crate::checker::Violation;
use std::fmt;

/// The result of one exploration.
#[derive(Debug, Clone)]
pub struct Exploration {
    /// Distinct states visited (by fingerprint).
    pub states: usize,
    /// Transitions applied, including those to states already seen.
    pub transitions: usize,
    /// The deepest state reached, in transitions from the initial one.
    pub max_depth: usize,
    /// Whether the depth bound cut some paths short (otherwise the bounded space was
    /// explored to its end).
    pub depth_limited: bool,
    /// States whose liveness was checked (every visited one, until a violation).
    pub liveness_checked: usize,
    /// States in which the operator had at least one change taken (how much of the
    /// search ran with a change under way or done; 0 without changes).
    pub changed: usize,
    /// The highest list version any node held in a visited state (0: the lists were
    /// only ever seeded or confirmed): how far the changes got within the depth bound.
    pub newest_version: u64,
    /// The first violation found, with the path to it; `None` if every property held.
    pub counterexample: Option<Counterexample>,
}

/// A path to a violation.
#[derive(Debug, Clone)]
pub struct Counterexample {
    /// The property broken, where and why.
    pub violation: Violation,
    /// The transitions from the initial state (for liveness, then the fair schedule's).
    pub steps: Vec<Transition>,
    /// One line per transition: the transition and the nodes' roles after it.
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
