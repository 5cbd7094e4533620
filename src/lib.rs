//! bully: leader election for small clusters with the Bully algorithm, over QUIC with
//! mutual TLS, with durable epochs as fencing tokens.
//!
//! # Layout
//! - [`protocol`]: the pure state machine (no I/O, no clock) in both modes, classic and
//!   quorum (with its lease arithmetic in `protocol::lease`); the simulator drives it.
//! - [`codec`]: the one place bincode is called; frames with a version and a size cap.
//! - [`storage`]: sled storage cells, one flushed transaction per change.
//! - [`history`] / [`checker`]: event records and the I1–I7 invariant checks, shared by
//!   the simulator, the real-process tests and the chaos runner.
//! - [`sim`]: deterministic simulation (seeded RNG, virtual clock, faults).
//! - [`model`]: exhaustive, bounded model checking of the same machine (N ≤ 4).
//! - [`certs`] / [`transport`]: certificates bound to node IDs (file names, identity,
//!   loading and issuing in one module each); the QUIC endpoint with mutual TLS, one
//!   FIFO stream per peer, and API connections (`transport/shared.rs` holds the state
//!   the accept loop, the dialers and the inbound readers share, so none imports another).
//! - [`config`]: the TOML node config: types, validation, error location, durations.
//! - [`node`]: a thin runtime (`node/runtime.rs`) that runs the machine's actions in
//!   order, fed by `inputs`, writing through `journal`, publishing through `publisher`;
//!   the eligibility policy (`eligibility.rs`, pure, tested like the machine); the client
//!   API, status, event log, health checks, hooks, metrics and HTTP; every task stops on
//!   one shutdown signal (`tasks.rs`).
//! - [`shutdown`]: that signal, the one kind of stop signal the node's tasks and the
//!   transport's both wait on (trip once, ask, await; a child stops with its parent).
//! - [`client`]: the API client behind the CLI queries, `local`, chaos and the tests.
//! - [`cluster`]: N real node processes on loopback (`local`, `chaos`, tests); [`ports`]:
//!   the free loopback ports they and the tests are given, picked together.
//! - [`chaos`]: seeded fault injection through a UDP relay, verdicts and benchmarks.
//! - [`cli`]: the clap command line of the `bully` binary.
//! - [`signals`]: signals to child processes through nix; one of the crate's two `unsafe`
//!   blocks (the other is in `exact_timer`).
//! - [`exact_timer`]: a kernel timer for the idle node's long waits, which tokio's
//!   timer wheel would wake for twice.
//! - [`boot_clock`]: the clock leases run on, which counts time suspended.
//! - [`wall_clock`]: wall-clock milliseconds for records compared across processes.
//! - `sabotage` (debug builds only): switches that break the node on purpose so the
//!   tests can show the checker catches it.

pub mod api;
pub mod boot_clock;
pub mod certs;
pub mod chaos;
pub mod checker;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod codec;
pub mod config;
pub mod exact_timer;
pub mod history;
pub mod model;
pub mod node;
pub mod ports;
pub mod protocol;
#[cfg(debug_assertions)]
pub mod sabotage;
pub mod shutdown;
pub mod signals;
pub mod sim;
pub mod storage;
pub mod transport;
pub mod wall_clock;
