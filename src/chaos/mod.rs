//! `bully chaos`: break a real cluster on a seeded schedule, check I1–I5 (and I6, I7 in
//! quorum mode), measure.
//!
//! # Layout
//! - [`plan`]: the fault schedule, a pure function of the seed (minority down at most).
//! - [`relay`]: a UDP relay per directed link, so partitions need no root.
//! - [`harness`]: the cluster under test; takes steps and records them.
//! - [`collect`]: follows the nodes' event logs, writes the runner's own records.
//! - [`timeline`]: agreement over time, failover and reclaim samples with phases.
//! - [`verdict`]: the [`crate::checker`] over the history, I5 per quiet window.
//! - [`office`]: time with two coordinators, and the majority side's time without one.
//! - [`stats`] / [`report`]: percentiles, the report (table and JSON) with what the
//!   HTML timeline draws and the idle figures: the record, which imports no doer.
//! - [`setup`]: what a run or a benchmark is asked to do (the runner's and benches'
//!   shared settings).
//! - [`picture`]: the report drawn as one self-contained HTML timeline (`--html`):
//!   lanes of roles per node, faults, overlaps, leaderless stretches, takeover
//!   histograms.
//! - [`runner`] / [`bench`]: `bully chaos` and `bully chaos --bench failover` (also
//!   `reclaim` and `messages`: the same kill/restart loop measures all three).
//! - [`idle`]: `bully chaos --bench idle`: CPU, memory and messages of a settled
//!   cluster, start-up declarations, `bully leader` latency.
//! - [`progress`]: the live status line.

pub mod bench;
pub mod collect;
pub mod harness;
pub mod idle;
pub mod office;
pub mod picture;
pub mod plan;
pub mod progress;
pub mod relay;
pub mod report;
pub mod runner;
pub mod setup;
pub mod stats;
pub mod timeline;
pub mod verdict;

pub use bench::failover as bench_failover;
pub use idle::idle as bench_idle;
pub use plan::FaultKind;
pub use report::Report;
pub use runner::{run, ChaosConfig};
pub use setup::{BenchConfig, RunSetup};
