//! The node runtime and what it exposes: the client API, the status it publishes, the
//! append-only event log that tests and the chaos runner check, and what keeps a
//! database primary: health gating, hooks, step-down, HTTP and metrics.
//!
//! - `runtime`: the one task that owns the state machine and runs its actions in order.
//! - [`api`]: requests over QUIC (status, watch, step-down, metrics).
//! - `error`: why a node could not start, and the config field to blame.
//! - [`health`]: the check that gates eligibility (rise/fall).
//! - [`hooks`]: commands run on role changes, one at a time, never blocking.
//! - [`reload`]: SIGHUP re-reads hooks, health, HTTP and certificates in place.
//! - `step_down`: switchover that answers once another node leads, or is undone.
//! - `switchover`: `step-down --to N`: members above N stand aside, then step-down.
//! - [`transitions`]: what a new view means (elected, demoted, new epoch, failover).
//! - [`http`]: `/coordinator`, `/health`, `/status`, `/metrics`; [`http_slots`] bounds
//!   its connections without letting slow clients starve it.
//! - [`metrics`]: shared counters; [`exposition`] renders them for Prometheus.

pub mod api;
mod command;
mod error;
pub mod event_log;
pub mod exposition;
pub mod health;
pub mod hooks;
pub mod http;
pub mod http_slots;
pub mod metrics;
pub mod reload;
mod runtime;
pub mod status;
mod step_down;
mod switchover;
pub mod transitions;

pub use error::NodeError;
pub use metrics::{Metrics, MetricsSnapshot};
pub use runtime::{start, start_in, NodeHandle};
pub use status::{PeerState, Status};
