//! The node's ground floor, used by every other wing: the task group and the one signal
//! that stops it, the runtime's mailbox, the live counters and the errors.

pub mod error;
pub mod mailbox;
pub mod metrics;
pub mod tasks;
