//! [`Verdicts`]: what this node remembers of each peer's config verdict, so that a
//! disagreement is logged and reported to the runtime once per peer (not at every
//! redial), and its end too (`agreement` reaches the verdicts and tells).

use super::mismatch::ConfigMismatch;
use crate::protocol::NodeId;
use std::collections::HashMap;
use tokio::sync::{Mutex, MutexGuard};

/// The peers whose config was last seen to disagree with ours, and how. Held across
/// the event it causes, so the runtime hears a peer's verdicts in the order they were
/// reached even when two connections of the pair report at once.
#[derive(Debug, Default)]
pub(super) struct Verdicts(Mutex<Known>);

/// The verdicts themselves, reached through [`Verdicts::lock`].
#[derive(Debug, Default)]
pub(super) struct Known(HashMap<NodeId, ConfigMismatch>);

impl Verdicts {
    /// The verdicts, held until the guard is dropped (across the event a change causes).
    pub async fn lock(&self) -> MutexGuard<'_, Known> {
        self.0.lock().await
    }
}

impl Known {
    /// Records that `peer` disagrees; true if that is news (it agreed or was unknown, or
    /// disagreed otherwise).
    pub fn disagrees(&mut self, peer: NodeId, mismatch: &ConfigMismatch) -> bool {
        let same = self.0.get(&peer).is_some_and(|m| m.kind == mismatch.kind);
        self.0.insert(peer, mismatch.clone());
        !same
    }

    /// Records that `peer` agrees; true if that is news (it disagreed).
    pub fn agrees(&mut self, peer: NodeId) -> bool {
        self.0.remove(&peer).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::mismatch::MismatchKind;

    #[test]
    fn a_disagreement_is_news_once_per_kind() {
        let mut known = Known::default();
        let mode = ConfigMismatch {
            kind: MismatchKind::Mode,
            reason: "a".into(),
        };
        assert!(known.disagrees(2, &mode));
        assert!(!known.disagrees(2, &mode), "the same again is no news");
        let timing = ConfigMismatch {
            kind: MismatchKind::Timing,
            ..mode.clone()
        };
        assert!(known.disagrees(2, &timing), "another kind is");
        assert!(known.disagrees(3, &timing), "another peer is");
    }
}
