//! A message on the simulated wire, ordered so the heap of flights pops the earliest.

use crate::protocol::{Message, Millis, NodeId};
use std::cmp::Ordering;

/// A message on the wire. Ordered by delivery time, then send order, so the heap
/// pops the earliest first and each link stays FIFO.
#[derive(Debug, Clone)]
pub(super) struct Flight {
    pub(super) at: Millis,
    pub(super) seq: u64,
    pub(super) from: NodeId,
    pub(super) to: NodeId,
    pub(super) msg: Message,
    /// The receiver's life when sent: a message to an earlier life is lost (the
    /// connection it travelled on died with that process).
    pub(super) to_life: u64,
    /// Sent across a partition (or drawn as lost): lost even if it heals before delivery.
    pub(super) cut: bool,
}

impl PartialEq for Flight {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Flight {}

impl PartialOrd for Flight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Flight {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the earliest.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}
