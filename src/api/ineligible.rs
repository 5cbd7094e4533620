//! Why a node may not lead, worded once. The eligibility policy's first reason goes to
//! the event log (`Eligibility::why_not`, src/node/policy/eligibility.rs) and every
//! reason a status shows goes on its line (`Status::eligibility_note`,
//! src/api/status.rs); both print these, so a reason reads the same in `bully history`,
//! `bully status` and the logs.

use crate::protocol::NodeId;
use std::fmt;

/// Why a node a forced recovery gave up may not lead, and what ends it.
pub const GIVEN_UP_NOTE: &str = "given up by a forced recovery (bully recover on the survivors): \
     it never leads, votes or acks again; wipe its data dir and add it back as a new member";

/// One reason a node may not lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ineligible {
    /// The health check fails or has not passed yet, in its own words
    /// (`HealthState::ineligible_reason`, src/api/health.rs).
    Health(&'static str),
    /// A forced recovery gave the node up ([`GIVEN_UP_NOTE`]).
    GivenUp,
    /// A step-down's or a switchover's stand-aside period runs.
    SteppedDown,
    /// Peers whose config disagrees with ours (src/node/policy/config_conflict.rs).
    ConfigConflict(String),
    /// The required `[watchdog]` device cannot be armed.
    WatchdogUnavailable(String),
    /// The maintenance pause reserves the role for another node (src/api/pause.rs).
    Paused,
    /// The maintenance pause is not yet compared with these connected peers
    /// (src/node/policy/pause_gate.rs).
    ComparingPause(Vec<NodeId>),
    /// None of the above, so a passing one: the start-up hello wait, or the pause
    /// comparison with a peer just connected.
    Starting,
}

impl fmt::Display for Ineligible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ineligible::Health(why) => f.write_str(why),
            Ineligible::GivenUp => f.write_str(GIVEN_UP_NOTE),
            Ineligible::SteppedDown => f.write_str("stepped down or standing aside"),
            Ineligible::ConfigConflict(why) | Ineligible::WatchdogUnavailable(why) => {
                f.write_str(why)
            }
            Ineligible::Paused => f.write_str("cluster paused"),
            Ineligible::ComparingPause(peers) => {
                let peers: Vec<String> = peers.iter().map(|p| p.to_string()).collect();
                write!(
                    f,
                    "comparing the maintenance pause with peers {}",
                    peers.join(",")
                )
            }
            Ineligible::Starting => f.write_str("starting up or comparing with peers"),
        }
    }
}

/// The note a status line ends with: empty without `reasons`, else
/// `  (ineligible: health check failing, cluster paused)`.
pub fn note(reasons: &[Ineligible]) -> String {
    if reasons.is_empty() {
        return String::new();
    }
    let reasons: Vec<String> = reasons.iter().map(Ineligible::to_string).collect();
    format!("  (ineligible: {})", reasons.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_lists_every_reason_in_the_words_the_event_log_uses() {
        assert_eq!(note(&[]), "");
        let reasons = [
            Ineligible::SteppedDown,
            Ineligible::Paused,
            Ineligible::ComparingPause(vec![2, 3]),
        ];
        assert_eq!(
            note(&reasons),
            "  (ineligible: stepped down or standing aside, cluster paused, \
             comparing the maintenance pause with peers 2,3)"
        );
    }
}
