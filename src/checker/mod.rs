//! The one home of the invariants I1–I7 (docs/design.md#invariants): every check the
//! simulator, the model checker, the real-process tests and the chaos runner make, and
//! the one [`Violation`] type they all report.
//!
//! Over a history ([`crate::history::Entry`]), the same checks judge simulated runs
//! (virtual ms) and real processes (wall-clock ms, nodes killed without a `Crashed`
//! record: a `Started` record marks the restart):
//! - [`Safety`] / [`check_safety`]: I1 fencing, the per-node part of I2, I3 durability
//!   and I4 recovery. These hold at every instant, whatever the faults.
//! - [`check_start_delay`]: the timing half of I4 (no declaration within the preempt
//!   delay of a restart).
//! - [`check_unique_terms`]: the cluster-wide part of I2, only inside quiet windows
//!   ([`quiet_window`], defined there).
//! - [`check_convergence`]: I5 after the last fault, given the live set and a deadline
//!   ([`convergence_deadline`]).
//! - [`check_no_overlap`] / [`check_one_per_term`]: I6 and I7 of quorum mode, from the
//!   machine's own `Established`/`Demoted` facts ([`offices`]).
//! - [`check_leader_answers`]: Q4 for readers in quorum mode, an answer to "who leads?"
//!   naming X at t lies within X's office (the model's form: [`check_answer_in_office`]).
//!
//! One step at a time, for the drivers that see each node's state (the simulator, the
//! model checker): [`check_accepted_rises`] (I1) and [`check_term_rises`] (I2) on a
//! write of the cells, which [`Safety`] applies too; [`check_declares_anew`] (I2);
//! [`check_send`] and [`check_crash`] (I3); [`check_alone_in_office`] (I6) and
//! [`TermHolders`] (I7); [`check_elected_by_data`] (I8); [`honest_peer_flagged`] and [`stranger_refused`] (the
//! machine's own contract); [`ListIdentity`] (one member list per identity).

mod cells;
mod contract;
mod convergence;
mod durability;
mod elected_by_data;
mod invariant;
mod leader_answers;
mod lists;
mod office;
mod safety;
mod start_delay;
#[cfg(test)]
mod tests;
mod uniqueness;

pub use cells::{check_accepted_rises, check_term_rises};
pub use contract::{honest_peer_flagged, stranger_refused};
pub use convergence::{check_convergence, convergence_deadline, Convergence, Leader};
pub use durability::{check_crash, check_send};
pub use elected_by_data::{check_elected_by_data, Rank};
pub use invariant::{Invariant, Violation};
pub use leader_answers::{check_answer_in_office, check_leader_answers, LeaderAnswer};
pub use lists::ListIdentity;
pub use office::{
    check_alone_in_office, check_no_overlap, check_no_overlap_with, check_one_per_term,
    lease_bound_ms, offices, offices_with, overlap_ms, overlaps, InOffice, Office, TermHolders,
};
pub use safety::{check_safety, Safety};
pub use start_delay::{check_start_delay, check_start_delay_where};
pub use uniqueness::{
    check_declares_anew, check_unique_terms, declarations, quiet_window, QuietWindow,
};
