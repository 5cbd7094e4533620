//! The cluster-wide choices every member must share: which algorithm runs, and whether
//! a higher node takes over from a live lower one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which election algorithm the cluster runs. Every member must use the same one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Bully order plus a majority and a lease: never two coordinators, under any
    /// partition or pause; a side without a majority has no coordinator (docs/modes.md).
    #[default]
    Quorum,
    /// The seeds' Bully algorithm: any live node can lead, even alone, so a partition
    /// gives one coordinator per side until it heals.
    Classic,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Quorum => "quorum",
            Mode::Classic => "classic",
        })
    }
}

/// What a start does with the mode its config file names (`file`) and the one its store
/// holds (`stored`, `None` on a first start): the mode to run and whether to store it
/// now, or the stored mode when the file names another and `change` (`bully node
/// --change-mode`) was not given: the start is refused. The mode is cluster state,
/// stored at a store's first start (issue 47: two members restarted in classic mode
/// under a cut led beside the quorum side's coordinator for 8.6 s). The node's start
/// (src/node/drive/start.rs) and the simulator's (src/sim/faults.rs) both decide here.
pub fn mode_at_start(stored: Option<Mode>, file: Mode, change: bool) -> Result<(Mode, bool), Mode> {
    match stored {
        Some(stored) if stored == file => Ok((file, false)),
        Some(stored) if !change => Err(stored),
        _ => Ok((file, true)),
    }
}

/// Whether a restarted higher node takes over from a healthy lower coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preempt {
    /// The classic Bully: the highest live eligible ID always leads.
    #[default]
    Always,
    /// A (re)started node follows any live coordinator; the newest epoch wins.
    Never,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_mode_rules_unless_the_change_is_asked_for() {
        use Mode::{Classic, Quorum};
        assert_eq!(mode_at_start(None, Classic, false), Ok((Classic, true)));
        assert_eq!(
            mode_at_start(Some(Quorum), Quorum, false),
            Ok((Quorum, false))
        );
        assert_eq!(mode_at_start(Some(Quorum), Classic, false), Err(Quorum));
        assert_eq!(
            mode_at_start(Some(Quorum), Classic, true),
            Ok((Classic, true))
        );
    }
}
