//! The Bully algorithm as a pure state machine: no tokio, no sockets, no disk, no clock.
//! The runtime and the simulator drive the same [`Machine`].

mod machine;
mod types;

pub use machine::{Action, Event, Machine, MachineConfig, Misbehaviour};
pub use types::*;
