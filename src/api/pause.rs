//! The maintenance pause (`bully pause` / `bully resume`): while the cluster is paused
//! no node but the coordinator it had when the pause was set (the *holder*) may lead, so
//! there is no automatic failover and no preemption; the holder keeps its role as long
//! as its lease holds. Built on eligibility, with no new protocol rule (the machine
//! already elects no one when nobody eligible is alive), so every invariant the checker
//! proves holds unchanged (docs/design.md#maintenance-pause).
//!
//! Every node keeps the newest [`Pause`] it has seen in its data dir
//! (`node/drive/pause_file.rs`), so a restart keeps it. `bully pause` and `bully resume`
//! write one to every member they reach; a member that was not reached learns it from
//! the first peer it connects to (`node/serve/pause_sync.rs`): of two records the one
//! with the higher generation wins.

use crate::protocol::NodeId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One setting of the pause, ordered by `generation`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Pause {
    /// Each `pause` or `resume` writes one above the highest it saw; 0 is "never
    /// paused".
    pub generation: u64,
    /// Whether automatic failover and preemption are off.
    pub paused: bool,
    /// The coordinator when the pause was set: the one node that may still lead.
    pub holder: Option<NodeId>,
    /// Wall-clock milliseconds (Unix) when it was set, for people reading it.
    pub set_at_ms: u64,
}

impl Pause {
    /// Whether this record replaces `other`: a higher generation; on a tie (two
    /// operators at once) a resume wins over a pause, then the higher holder, so every
    /// node picks the same one.
    pub fn supersedes(&self, other: &Pause) -> bool {
        let key = |p: &Pause| (p.generation, !p.paused, p.holder);
        key(self) > key(other)
    }

    /// Why this record keeps node `me` from leading, if it does: the cluster is paused
    /// and `me` is not the holder.
    pub fn holds_back(&self, me: NodeId) -> Option<String> {
        (self.paused && self.holder != Some(me)).then(|| self.to_string())
    }
}

impl fmt::Display for Pause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.paused, self.holder) {
            (false, _) => write!(
                f,
                "cluster not paused (generation {}): automatic failover is on",
                self.generation
            ),
            (true, Some(holder)) => write!(
                f,
                "cluster paused (generation {}): only node {holder} may lead; no automatic \
                 failover until `bully resume`",
                self.generation
            ),
            (true, None) => write!(
                f,
                "cluster paused (generation {}): no node may lead until `bully resume`",
                self.generation
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(generation: u64, paused: bool, holder: Option<NodeId>) -> Pause {
        Pause {
            generation,
            paused,
            holder,
            set_at_ms: 0,
        }
    }

    #[test]
    fn the_higher_generation_wins_and_a_tie_goes_to_resume() {
        assert!(pause(2, true, Some(3)).supersedes(&pause(1, false, None)));
        assert!(!pause(1, true, Some(3)).supersedes(&pause(2, false, None)));
        assert!(pause(2, false, None).supersedes(&pause(2, true, Some(3))));
        assert!(!pause(2, true, Some(3)).supersedes(&pause(2, true, Some(3))));
        assert!(pause(1, true, Some(3)).supersedes(&Pause::default()));
    }

    #[test]
    fn only_the_holder_may_lead_while_paused() {
        let paused = pause(1, true, Some(3));
        assert_eq!(paused.holds_back(3), None);
        assert!(paused
            .holds_back(2)
            .unwrap()
            .contains("only node 3 may lead"));
        assert_eq!(pause(2, false, None).holds_back(2), None);
        assert!(pause(1, true, None).holds_back(3).is_some());
    }
}
