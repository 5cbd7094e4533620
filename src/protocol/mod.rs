//! The Bully algorithm as a pure state machine: no tokio, no sockets, no disk, no clock.
//! The runtime and the simulator drive the same [`Machine`].
//!
//! From the bottom up: `epoch.rs` (node IDs, time, epochs, the durable cells),
//! `mode.rs` (the algorithm and preemption choices), `timing.rs` (the timing knobs and
//! the lease span they give), `settings.rs` (what the member list carries for every
//! member to live by), `message.rs` (what peers send each other), `view.rs`
//! (what a node reports), `lease.rs` and `recovery.rs` (quorum mode's lease
//! bookkeeping, an empty store's recovery), `reveal.rs` (what a message tells about
//! its sender's stored cells, for invariant I3), and `machine/` (the state machine
//! itself).

mod epoch;
pub mod lease;
mod machine;
pub mod majority_loss;
pub mod membership;
mod message;
mod message_serde;
mod mode;
pub mod recovery;
pub mod reveal;
pub mod settings;
mod timing;
mod view;

pub use epoch::{Cells, Epoch, Millis, NodeId, MAX_NODE_ID, TOKEN_LEADER_BITS};
pub use machine::{
    confirmed, seed_members, settings_of, Action, Event, Flaw, Machine, MachineConfig,
    Misbehaviour, SelfReport, MAX_TERM_JUMP,
};
pub use membership::{Change, ChangeRefused, ConfigId, Member, Membership, Seat};
pub use message::{Body, Heard, Message, MessageKind};
pub use mode::{mode_at_start, Mode, Preempt};
pub use settings::{
    pg_parameter_syntax, ClusterSettings, PgParameters, PG_KEYS, PG_PARAMETER_KEY,
    PG_STANDBY_CLUSTER_KEY, PG_SYNCHRONOUS_KEY,
};
pub use timing::Timing;
pub use view::{DemotionReason, Fact, Role, View};
