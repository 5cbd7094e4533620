//! The node's decisions, pure: they take the status, the view and `now` and return what
//! to do, with no task, socket, file or clock of their own, so they are tested like the
//! state machine (`tests/layering.rs` keeps them so).

pub mod config_conflict;
pub mod eligibility;
pub mod member_change;
pub mod office_grant;
pub mod pause_gate;
pub mod readiness;
pub mod stall;
pub mod step_down;
pub mod transitions;
pub mod watchdog;
