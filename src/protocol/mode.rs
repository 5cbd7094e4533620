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
