//! What a client and a node share: the requests and answers of the client API, the
//! status a node publishes, its counters, its health verdict and its event log. The
//! CLI, `client`, `cluster` and `chaos` read a node through these types only, never
//! through the node's internals (`node/`), which implement them.
//!
//! - `request`: [`Request`] and [`Response`], one pair per client API stream.
//! - `status`: [`Status`], what a node tells the world, read as of now against its lease.
//! - `counters`: [`MetricsSnapshot`], a copy of the node's counters.
//! - `health`: [`HealthState`], the health check's verdict and its every translation.
//! - [`keeper`]: the lines a node and its keepers (`bully run`) exchange over the
//!   unix socket in the data dir: the grant of office with its deadlines, the release.
//! - [`postgres`]: [`postgres::PgState`], the managed PostgreSQL server as its node
//!   last saw it (`[postgres]`).
//! - `pause`: [`Pause`], the maintenance pause every node keeps (`bully pause`).
//! - `ineligible`: [`Ineligible`], why a node may not lead, in the one wording the
//!   event log, the status line and the logs share.
//! - [`event_log`]: the append-only history a node writes in its data dir and the
//!   tests, `cluster` and the chaos runner read.

mod counters;
pub mod event_log;
mod health;
mod ineligible;
pub mod keeper;
mod log_writer;
mod pause;
pub mod postgres;
mod request;
mod status;

pub use counters::{Histogram, HookCounts, MetricsSnapshot, HOOK_NAMES};
pub use health::{HealthState, UnknownHealthState};
pub use ineligible::{Ineligible, GIVEN_UP_NOTE};
pub use pause::Pause;
pub use request::{LeaderReply, Request, Response};
pub use status::{Estimate, HttpEndpoint, PeerState, ScheduledSwitchover, Status};
