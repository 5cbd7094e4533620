//! given_up: a forced recovery gave this node up (docs/design.md#recovery-from-a-lost-majority).
//! - A survivor's transport refused this node as a member that the survivors' new list
//!   leaves out ([`Event::GivenUp`]). The node persists the mark (`Cells::given_up`)
//!   before anything else. A coordinator leaves office through the release, like any
//!   voluntary departure, and a declarer withdraws.
//! - From then on it neither leads, votes nor acks: every message is dropped unread.
//!   That also takes its support from an old-side coordinator that has not met the
//!   survivors itself, so that coordinator's lease runs out within D.
//! - For good: the mark survives restarts; only a wiped data dir ends it (the node
//!   then joins again as a new member).
//! - A node that is already given up ignores the event, so a repeated refusal writes
//!   nothing. So does a node whose store holds no term: a new member on a wiped data
//!   dir, re-added under a given-up ID (as docs/recovery.md asks), dials the
//!   survivors before its addition commits; it took part in no old term, and its
//!   dials are refused only until the list takes it in.

use super::state::State;
use super::{Cells, Fact, Flaw, Machine, Millis, NodeId};

impl Machine {
    /// given_up: `by`, a survivor of a forced recovery, refused us as given up.
    pub(super) fn on_given_up(&mut self, by: NodeId, now: Millis) {
        let empty = self.cells.term == 0 && self.cells.accepted.is_none();
        if self.cells.given_up || empty || self.config.has(Flaw::IgnoresGivenUp) {
            return;
        }
        self.persist(Cells {
            given_up: true,
            ..self.cells
        });
        self.fact(Fact::GivenUp { by });
        self.refresh_eligibility(now);
    }

    /// Whether a forced recovery gave this node up: then it takes part in nothing.
    pub(super) fn is_given_up(&self) -> bool {
        self.cells.given_up && !self.config.has(Flaw::IgnoresGivenUp)
    }

    /// Given up and out of office: no timer to fire, no election to start (a
    /// coordinator still finishes its departure).
    pub(super) fn is_inert(&self) -> bool {
        self.is_given_up() && !matches!(self.state, State::Coordinator { .. })
    }
}
