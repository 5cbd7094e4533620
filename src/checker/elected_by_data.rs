//! I8 elected by data (docs/design.md#i8-elected-by-data): a declarer whose election
//! ran while a live, eligible node of higher `(estimate, id)` could answer it has
//! skipped fresher data. The drivers decide who could answer throughout the election
//! (the model checker: its fault-free prompt schedule; the simulator: quiet windows);
//! this is the one comparison they share.

use super::invariant::{Invariant, Violation};
use crate::protocol::{Millis, NodeId};

/// A node's place in the election order: its fresh estimate (0 without one) and ID.
pub type Rank = (u64, NodeId);

/// I8: `declarer` at `rank` declared at `at_ms`; `rivals` are the ranks of the nodes
/// that were live, eligible and reachable by it throughout its election. A violation
/// names the highest rival above it.
pub fn check_elected_by_data(
    declarer: NodeId,
    rank: Rank,
    at_ms: Millis,
    rivals: impl IntoIterator<Item = Rank>,
) -> Option<Violation> {
    let above = rivals.into_iter().filter(|&r| r > rank).max()?;
    let explanation = format!(
        "declared at (est {}, id {}) while n{} at (est {}, id {}) was live, eligible and \
         reachable throughout its election",
        rank.0, rank.1, above.1, above.0, above.1
    );
    Some(Violation::new(
        Invariant::ElectedByData,
        declarer,
        at_ms,
        explanation,
    ))
}
