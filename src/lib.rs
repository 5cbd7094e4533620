//! bully: leader election for small clusters with the Bully algorithm, over QUIC with
//! mutual TLS, with durable epochs as fencing tokens.
//!
//! # Layout
//! From the ground floor up: a module imports only modules listed before it (but the
//! debug-only `sabotage`, which the layers it breaks read).
//! `docs/design.md` explains the design; `tests/layering.rs` keeps the pure layers pure.
//! - [`protocol`]: the pure state machine (no I/O, no clock) in both modes, classic and
//!   quorum: the vocabulary (epochs, messages, views, timing), the lease arithmetic, the
//!   recovery of an empty store, what a message reveals (`protocol::reveal`), and
//!   `protocol/machine/` split by concern (election, quorum, handover, ...) with the mode
//!   switch in one place.
//! - [`codec`]: the one place bincode is called; frames with a version and a size cap.
//! - [`boot_clock`]: the clock leases run on, which counts time suspended;
//!   [`wall_clock`]: wall-clock milliseconds for records compared across processes.
//! - [`shutdown`]: the one kind of stop signal the node's runtime, its tasks and the
//!   transport's all wait on (trip once, ask, await; a child stops with its parent).
//! - [`signals`]: signals to child processes through nix. [`ports`]: free loopback
//!   ports for clusters and tests, picked together. [`sd_notify`]: systemd's notify
//!   protocol (readiness, and the service watchdog's `WATCHDOG=1`), which the CLI and
//!   the node's runtime both send. [`shell`]: one user command with `sh -c` and a
//!   timeout that kills its process group (hooks, health checks, a keeper's fence
//!   command). [`postmaster`]: stopping a PostgreSQL server by signals from its data
//!   dir, only once /proc shows the process is its postmaster (the node's manager and
//!   the keeper's fence). The crate's few `unsafe` blocks: in `signals`, in [`exact_timer`] (a
//!   kernel timer for the idle node's long waits, which tokio's timer wheel would wake
//!   for twice), in the node's watchdog device ioctls and in the keeper's guard (the
//!   installing of its signal handlers; each site says why no safe call serves).
//! - [`history`] / [`checker`]: event records and the I1–I7 invariant checks (one file
//!   per concern), the one checker the simulator, the model checker, the real-process
//!   tests and the chaos runner all use.
//! - [`postgres_rules`]: the PostgreSQL manager's decisions, pure (promote, fence,
//!   rewind, clone, the synchronous set), below the simulator that drives them.
//! - [`model`]: exhaustive, bounded model checking of the same machine (N ≤ 4);
//!   [`sim`]: deterministic simulation (seeded RNG, virtual clock, faults).
//! - [`storage`]: sled storage cells, one flushed transaction per change.
//! - [`certs`] / [`transport`]: certificates bound to node IDs; the QUIC endpoint with
//!   mutual TLS, one FIFO stream per peer, and API connections (`transport/shared.rs`
//!   holds the state the accept loop, the dialers and the inbound readers share, so none
//!   imports another; the data they exchange sits below it).
//! - [`config`]: the TOML node config: types, validation, error location, durations.
//! - [`api`]: what a client and a node share: requests and answers, the status, the
//!   counters, the health verdict, the event log. Everything above reads a node
//!   through it.
//! - [`keeper`]: `bully run`, the process that fences this host for its node: runs a
//!   job only while the node leads and stops it by the lease's deadlines, even when
//!   the node is stalled or dead (it reads the node through `api::keeper` only).
//! - [`client`]: the API client behind the CLI queries, `local`, chaos, the tests and a
//!   switchover's requests to the other members.
//! - [`node`]: the node in six wings, each above the ones before it: `shared` (tasks,
//!   mailbox, counters, errors), `policy` (pure decisions: eligibility, step-down,
//!   readiness, transitions), `commands` (hooks, health check), `publish` (status,
//!   counters and hooks after each step), `serve` (client API, HTTP), `drive` (start and
//!   the runtime that runs the machine's actions in order).
//! - [`cluster`]: N real node processes on loopback (`local`, `chaos`, tests).
//! - [`chaos`]: seeded fault injection through a UDP relay, verdicts and benchmarks.
//! - [`cli`]: the clap command line of the `bully` binary.
//! - `sabotage` (debug builds only): switches that break the node on purpose so the
//!   tests can show the checker catches it.

pub mod api;
pub mod boot_clock;
pub mod certs;
pub mod chaos;
pub mod checker;
pub mod cli;
pub mod client;
pub mod client_pool;
pub mod cluster;
pub mod codec;
pub mod config;
pub mod exact_timer;
pub mod history;
pub mod keeper;
pub mod model;
pub mod node;
pub mod ports;
pub mod postgres_rules;
pub mod postmaster;
pub mod protocol;
#[cfg(debug_assertions)]
pub mod sabotage;
pub mod sd_notify;
pub mod shell;
pub mod shutdown;
pub mod signals;
pub mod sim;
pub mod storage;
pub mod transport;
pub mod wall_clock;
