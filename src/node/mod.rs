//! The node: a thin runtime around the state machine, and what keeps a database
//! primary: health gating, hooks, step-down, the client API, HTTP and metrics. What it
//! shares with clients (requests, status, counters, the event log) is `crate::api`.
//!
//! Six wings, each importing only the ones listed before it:
//! - `shared`: the ground floor every part uses: the task group and its stop signal
//!   (`tasks`), the runtime's mailbox (`mailbox`), the live counters (`metrics`) and
//!   the errors (`error`).
//! - `policy`: the decisions, pure and tested without tokio (`tests/layering.rs`
//!   keeps them so): whether the node may lead (`eligibility`, `config_conflict`), a
//!   step-down's refusals and answers (`step_down`), when a coordinator is ready for
//!   clients (`readiness`), what a new view means (`transitions`), how long a
//!   voluntary demotion waits for `on_demoted` (the machine's release, src/protocol/machine/release.rs).
//! - `commands`: the operator's commands the node runs: the hooks on role changes
//!   (`hooks`), the health check that gates eligibility (`health`), each run through
//!   `crate::shell` (a timeout that kills its process group), their `BULLY_*` variables
//!   (`environment`).
//! - [`postgres`]: the PostgreSQL manager (`[postgres]`), which stands in for the health
//!   check: observes the server, runs the pure decisions of `crate::postgres_rules`, acts.
//! - `publish`: after each step, in order: the status watch, the counters, the
//!   led-epoch watch and the hooks (`publisher`); the Prometheus rendering of the
//!   counters (`exposition`).
//! - [`serve`]: the client API over QUIC (`api`) and `step-down --to N` (`switchover`);
//!   `/coordinator`, `/health`, `/status`, `/metrics` over TCP (`http`, `http_routes`,
//!   bounded by `http_slots`).
//! - `drive`: starting and driving: `start` opens the data dir, binds the endpoints
//!   and wires the parts above; `runtime` is the one task that owns the machine and runs
//!   its actions in order, fed by `inputs`, on `clock`, writing through `journal`
//!   (storage, then the event log); `services` and `reload` are what SIGHUP replaces;
//!   `handle` is the [`NodeHandle`] an embedder holds; `forced_recovery` is `bully
//!   recover`, run on a stopped node's data dir.

mod commands;
mod drive;
mod policy;
pub mod postgres;
mod publish;
pub mod serve;
mod shared;

pub use drive::forced_recovery::{self, Prepared, RecoverError};
pub use drive::handle::NodeHandle;
pub use drive::start::{start, start_in};
pub use shared::error::{NodeError, ReloadError};
pub use shared::metrics::Metrics;
