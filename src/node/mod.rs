//! The node runtime and what it exposes: the client API, the status it publishes and
//! the append-only event log that tests and the chaos runner check.

pub mod api;
pub mod event_log;
pub mod metrics;
mod runtime;
pub mod status;

pub use metrics::{Metrics, MetricsSnapshot};
pub use runtime::{start, NodeError, NodeHandle};
pub use status::{PeerState, Status};
