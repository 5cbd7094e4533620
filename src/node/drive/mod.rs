//! Starting and driving the node: `start` wires the parts, `runtime` owns the state
//! machine and runs its actions in order, fed by `inputs`, timed by `clock`, writing
//! through `journal`; `services` and `reload` are what SIGHUP replaces; `handle` is
//! what an embedder holds; `pause_file` keeps the maintenance pause. `service_watchdog` pings systemd from the runtime's loop;
//! `watchdog` carries out the `[watchdog]` device's duty (a coordinator keeps it
//! armed) on `watchdog_device`, the device's I/O. `forced_recovery` is `bully recover`
//! on a stopped node's store.

pub mod clock;
pub mod forced_recovery;
pub mod handle;
pub mod inputs;
pub mod journal;
pub mod members;
pub mod pause_file;
pub mod reload;
pub mod runtime;
pub mod service_watchdog;
pub mod services;
pub mod start;
pub mod watchdog;
pub mod watchdog_device;
