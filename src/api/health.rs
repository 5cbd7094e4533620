//! Where a node's health check stands: the one home of that fact and of its every
//! translation (the verdict it comes from, whether it lets the node lead, its name in
//! JSON and `/metrics`, the words `bully status` shows), so the runtime, the health
//! check, the status, the metrics and the CLI cannot disagree about it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where a health check stands (after rise/fall).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthState {
    /// No `[health]` section: the node is always healthy.
    Unchecked,
    /// A check is configured but has not reported yet; the node is not eligible.
    Pending,
    /// The last rise/fall verdict was "healthy".
    Passing,
    /// The last rise/fall verdict was "failing".
    Failing,
}

impl HealthState {
    /// Every state, in the order `/metrics` lists them.
    pub const ALL: [HealthState; 4] = [
        HealthState::Unchecked,
        HealthState::Pending,
        HealthState::Passing,
        HealthState::Failing,
    ];

    /// Before any result: a configured check holds the node back until it has passed
    /// once, so a restarted node cannot lead on an unchecked database.
    pub fn at_start(checked: bool) -> HealthState {
        if checked {
            HealthState::Pending
        } else {
            HealthState::Unchecked
        }
    }

    /// The state a rise/fall verdict (`healthy` or not) puts the node in.
    pub fn from_verdict(healthy: bool) -> HealthState {
        if healthy {
            HealthState::Passing
        } else {
            HealthState::Failing
        }
    }

    /// Whether the node may lead as far as its health goes (a step-down may still
    /// hold it back).
    pub fn allows_leading(self) -> bool {
        matches!(self, HealthState::Passing | HealthState::Unchecked)
    }

    /// The name in JSON, `/metrics` labels and the config's vocabulary.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Unchecked => "unchecked",
            HealthState::Pending => "pending",
            HealthState::Passing => "passing",
            HealthState::Failing => "failing",
        }
    }

    /// How `bully status` words it: `health check {described}`.
    pub fn described(self) -> &'static str {
        match self {
            HealthState::Unchecked => "none configured",
            HealthState::Pending => "no result yet",
            HealthState::Passing => "passing",
            HealthState::Failing => "failing",
        }
    }

    /// Why this state makes a node ineligible, if it does.
    pub fn ineligible_reason(self) -> Option<&'static str> {
        match self {
            HealthState::Failing => Some("health check failing"),
            HealthState::Pending => Some("waiting for the first health check"),
            HealthState::Unchecked | HealthState::Passing => None,
        }
    }

    /// A small number for a lock-free gauge ([`HealthState::from_index`] reads it back).
    pub fn index(self) -> u8 {
        self as u8
    }

    /// The state stored as [`HealthState::index`]; `Unchecked` for anything else.
    pub fn from_index(index: u8) -> HealthState {
        HealthState::ALL
            .get(usize::from(index))
            .copied()
            .unwrap_or(HealthState::Unchecked)
    }
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of [`HealthState::as_str`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown health state {0:?} (expected unchecked, pending, passing or failing)")]
pub struct UnknownHealthState(pub String);

impl FromStr for HealthState {
    type Err = UnknownHealthState;

    fn from_str(name: &str) -> Result<HealthState, UnknownHealthState> {
        HealthState::ALL
            .into_iter()
            .find(|state| state.as_str() == name)
            .ok_or_else(|| UnknownHealthState(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for state in HealthState::ALL {
            assert_eq!(state.as_str().parse::<HealthState>(), Ok(state));
            assert_eq!(HealthState::from_index(state.index()), state);
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{state}\""));
        }
        assert!("healthy".parse::<HealthState>().is_err());
    }

    #[test]
    fn only_a_passing_or_absent_check_allows_leading() {
        let leading: Vec<bool> = HealthState::ALL.map(HealthState::allows_leading).into();
        assert_eq!(leading, [true, false, true, false]);
        assert_eq!(HealthState::at_start(true), HealthState::Pending);
        assert_eq!(HealthState::at_start(false), HealthState::Unchecked);
        assert_eq!(HealthState::from_verdict(false), HealthState::Failing);
        for state in HealthState::ALL {
            assert_eq!(state.ineligible_reason().is_none(), state.allows_leading());
        }
    }
}
