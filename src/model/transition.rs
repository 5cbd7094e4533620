//! The model's transitions: one edge of its state graph each (deliver, tick, advance
//! the clock, a fault, an operator's membership change, or a client's query). A
//! counterexample is a list of them.
//!
//! Faults share this type with deliveries and ticks because the checker enumerates
//! every enabled edge of a state, whatever its kind, and keeps it small (`Copy`,
//! hashable) for the search. The chaos runner's `Step` (src/chaos/plan.rs) drives real
//! processes from a plan fixed before the run, and the simulator's `Todo`
//! (src/sim/scenario/adversary.rs) schedules the follow-ups of faults drawn at random
//! in virtual time; neither enumerates anything, so neither fits here, nor this there.

use crate::protocol::{Millis, NodeId};
use std::fmt;

/// One transition of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    Deliver {
        from: NodeId,
        to: NodeId,
    },
    Tick(NodeId),
    Advance(Millis),
    Crash(NodeId),
    /// A crash that also loses the node's store (a replaced disk).
    Wipe(NodeId),
    Restart(NodeId),
    Pause(NodeId),
    Resume(NodeId),
    /// Cut these nodes off from the rest.
    Cut(u8),
    Heal,
    Health(NodeId, bool),
    /// The operator asks this node for the next change of
    /// [`super::ModelConfig::changes`] (`bully member ...` sent to it).
    Ask(NodeId),
    /// The operator restarts this node (kill -9 and start at once) onto
    /// [`super::ModelConfig::restart_timing`]: one step of a rolling restart.
    Roll(NodeId),
    /// This node's `on_demoted` (and keepers) ended: the driver releases the epoch its
    /// machine asked it to ([`crate::protocol::Action::AwaitRelease`]).
    Release(NodeId),
    /// A client asks this node who leads (`bully leader` through it): the answer
    /// changes nothing, and a coordinator it names must be in office
    /// (docs/design.md#asking-who-leads).
    Query(NodeId),
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transition::Deliver { from, to } => write!(f, "deliver n{from} -> n{to}"),
            Transition::Tick(n) => write!(f, "timer of n{n} fires"),
            Transition::Advance(t) => write!(f, "clock to {t}"),
            Transition::Crash(n) => write!(f, "crash n{n}"),
            Transition::Wipe(n) => write!(f, "crash n{n}, its store lost"),
            Transition::Restart(n) => write!(f, "restart n{n}"),
            Transition::Pause(n) => write!(f, "pause n{n}"),
            Transition::Resume(n) => write!(f, "resume n{n}"),
            Transition::Cut(mask) => {
                write!(f, "cut off node set {mask:#06b} (bit i = i-th member)")
            }
            Transition::Heal => write!(f, "heal"),
            Transition::Health(n, ok) => {
                write!(f, "n{n} health {}", if *ok { "passes" } else { "fails" })
            }
            Transition::Ask(n) => write!(f, "the operator asks n{n} for the next change"),
            Transition::Release(n) => write!(f, "n{n}'s on_demoted ends: released"),
            Transition::Roll(n) => write!(f, "restart n{n} onto the new D"),
            Transition::Query(n) => write!(f, "a client asks n{n} who leads"),
        }
    }
}
