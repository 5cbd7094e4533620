//! Where the node is in the algorithm ([`State`], each waiting state with its own
//! deadline) and what it knows of each peer's reachability ([`Reach`]).

use crate::protocol::epoch::{Epoch, Millis};

/// Where the node is in the algorithm; each waiting state holds its own deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum State {
    /// Just (re)started: probing peers, no election before `until`, nor before every
    /// higher peer has been up unless `give_up` has passed.
    Starting {
        until: Millis,
        give_up: Millis,
    },
    /// Sent Election to the higher IDs; waiting for an Answer.
    Electing {
        until: Millis,
    },
    /// A higher node answered; waiting for its Coordinator message.
    Awaiting {
        until: Millis,
    },
    /// Not eligible (or out of terms) and no coordinator known; asks again at `until`.
    Idle {
        until: Millis,
    },
    /// Quorum: asked every peer whether it would accept a declaration at `term`.
    PreVoting {
        term: u64,
        until: Millis,
    },
    /// Quorum: persisted and announced `epoch`; collecting acceptances until `until`.
    Declaring {
        epoch: Epoch,
        sent_at: Millis,
        until: Millis,
        /// The smallest D its declaration asked promises for (the cluster's D may
        /// change while it waits): the lease it takes is cut from this.
        asked_ms: Millis,
    },
    Follower {
        epoch: Epoch,
        suspect_at: Millis,
    },
    Coordinator {
        epoch: Epoch,
        next_heartbeat: Millis,
    },
}

/// What the transport (or a silent leader) last told us about a peer since this start.
/// A peer we have heard nothing about is in none of these states: it may be alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Reach {
    /// Connected, or it sent us a message.
    Up,
    /// It was up and then its link was lost.
    Lost,
    /// The transport could not reach it yet: it may still be starting.
    Unreached,
}
