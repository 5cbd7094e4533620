//! The Bully algorithm as a pure state machine: no tokio, no sockets, no disk, no clock.
//! The runtime and the simulator drive the same [`Machine`].

pub mod lease;
mod machine;
pub mod recovery;
pub mod reveal;
mod types;

pub use machine::{Action, Event, Flaw, Machine, MachineConfig, Misbehaviour, MAX_TERM_JUMP};
pub use types::*;
