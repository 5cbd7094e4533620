//! The node runtime and what it exposes: the client API, the status it publishes, the
//! append-only event log that tests and the chaos runner check, and what keeps a
//! database primary: health gating, hooks, step-down, HTTP and metrics.
//!
//! Starting and driving:
//! - `start`: opens the data dir, binds the endpoints, wires the parts below; `handle`:
//!   the [`NodeHandle`] an embedder holds.
//! - `runtime`: the one task that owns the state machine and runs its actions in order;
//!   `resign_hold`: how far it runs before a voluntary demotion's `on_demoted` ends;
//!   `inputs`: what it waits for; `clock`: its milliseconds; `journal`: storage and
//!   event log, persisted then logged; `error`: why a node could not start or stopped.
//! - `tasks`: every other task of the node and the one signal that stops them.
//!
//! Deciding (pure, tested without tokio):
//! - `eligibility`: whether the node may lead (health, step-down, handover, hold,
//!   config conflicts); `config_conflict`: the rule for peers whose config disagrees;
//!   `step_down`: a step-down's refusals and answers; [`health_state`]: the health
//!   check's state and its every translation; `readiness`: when a coordinator is ready
//!   for clients and what a failed `on_elected` does; [`transitions`]: what a new view
//!   means (elected, demoted, new epoch, failover).
//!
//! Publishing and serving:
//! - `publisher`: the status watch, metrics, led-epoch watch and hooks, in order.
//! - [`api`]: requests over QUIC (status, watch, step-down, metrics); `switchover`:
//!   `step-down --to N`, asking the members above N to stand aside.
//! - [`hooks`]: commands run on role changes, one at a time, never blocking;
//!   [`health`]: the check that gates eligibility (rise/fall); `shell`: runs one such
//!   command with a timeout that kills its process group; `environment`: their
//!   `BULLY_*` variables.
//! - `services`: the health check and HTTP endpoint a reload may replace; [`reload`]:
//!   what SIGHUP re-reads (hooks, health, HTTP, certificates) and what needs a restart.
//! - [`http`]: `/coordinator`, `/health`, `/status`, `/metrics` over TCP;
//!   [`http_routes`]: what each answers; [`http_slots`] bounds its connections without
//!   letting slow clients starve it.
//! - [`metrics`]: shared counters; [`exposition`] renders them for Prometheus;
//!   [`status`]: what a node tells the world; [`event_log`]: the history it appends.

pub mod api;
mod clock;
mod config_conflict;
mod eligibility;
mod environment;
mod error;
pub mod event_log;
pub mod exposition;
mod handle;
pub mod health;
pub mod health_state;
pub mod hooks;
pub mod http;
pub mod http_routes;
pub mod http_slots;
mod inputs;
mod journal;
pub mod metrics;
mod publisher;
mod readiness;
pub mod reload;
mod resign_hold;
mod runtime;
mod services;
mod shell;
mod start;
pub mod status;
mod step_down;
mod switchover;
mod tasks;
pub mod transitions;

pub use error::NodeError;
pub use handle::NodeHandle;
pub use health_state::HealthState;
pub use metrics::{Metrics, MetricsSnapshot};
pub use reload::ReloadError;
pub use start::{start, start_in};
pub use status::{PeerState, Status};
