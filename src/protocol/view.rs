//! What a node tells the world: its role and view, and the facts it reports about
//! itself (declared, established, demoted, recovering).

use super::epoch::{Epoch, Millis, NodeId};
use super::membership::{ChangeRefused, ConfigId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The role a node reports to clients. Everything that is neither following nor
/// leading (starting, electing, waiting for a winner) is `Candidate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Candidate,
    Follower,
    Coordinator,
}

impl Role {
    /// The coordinator a node in this role with `epoch` follows or is: the epoch's
    /// leader, unless the node is a candidate (electing, or shown as one while it
    /// releases its office). The one rule [`View::coordinator`] and
    /// `api::Status::coordinator` both read.
    pub fn coordinator_in(self, epoch: Option<Epoch>) -> Option<NodeId> {
        match self {
            Role::Candidate => None,
            Role::Follower | Role::Coordinator => epoch.map(|e| e.leader),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Candidate => "candidate",
            Role::Follower => "follower",
            Role::Coordinator => "coordinator",
        })
    }
}

/// What a node believes right now; published to clients, hooks and the event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct View {
    pub id: NodeId,
    pub role: Role,
    /// The epoch this node follows or leads; `None` while it knows no coordinator.
    pub epoch: Option<Epoch>,
    /// Whether the health check (and step-down) allow this node to lead.
    pub eligible: bool,
    pub incarnation: u64,
}

impl View {
    /// Node `id` in `role` with no epoch yet, eligible, in its first incarnation: the
    /// view a status is built from where no machine runs (unit tests, generated pages).
    pub fn new(id: NodeId, role: Role) -> View {
        View {
            id,
            role,
            epoch: None,
            eligible: true,
            incarnation: 1,
        }
    }

    /// The coordinator this node follows or is, if any.
    pub fn coordinator(&self) -> Option<NodeId> {
        self.role.coordinator_in(self.epoch)
    }
}

/// Why a coordinator stopped being one; reported by the machine itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DemotionReason {
    /// Quorum mode: no majority acked a heartbeat recently enough to hold the lease.
    LeaseLost,
    /// It handed over to a higher node that asked (Q7).
    Yielded { to: NodeId },
    /// Its health check failed or it stepped down.
    Ineligible,
    /// It learned of a newer term or epoch than its own.
    NewerEpoch,
    /// The process is stopping cleanly.
    Stopped,
}

impl fmt::Display for DemotionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemotionReason::LeaseLost => f.write_str("lease lost"),
            DemotionReason::Yielded { to } => write!(f, "yielded to node {to}"),
            DemotionReason::Ineligible => f.write_str("ineligible"),
            DemotionReason::NewerEpoch => f.write_str("newer epoch seen"),
            DemotionReason::Stopped => f.write_str("stopping"),
        }
    }
}

/// What the machine says happened, in its own words, so the runtime, the simulator and
/// the checker never have to re-derive it from cell comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fact {
    /// This node began an election (sent Election to higher nodes, or went straight to
    /// declaring with none above it).
    ElectionStarted,
    /// Right after [`Fact::ElectionStarted`] of a node with an estimate source: the
    /// estimate it runs with (0 when stale or unknown; docs/design.md#elected-by-data-est).
    Ranked { est: u64 },
    /// This node persisted and announced its own epoch.
    Declared { epoch: Epoch },
    /// This node is the coordinator of `epoch` from now on: at once in classic mode,
    /// after a majority persisted its acceptance in quorum mode (Q2).
    Established { epoch: Epoch },
    /// This node stopped being the coordinator of `epoch`. `office_ended_at` is the
    /// machine time its term of office really ended: now, or in quorum mode the lease
    /// end if that came first (a paused process notices late, but its lease did not
    /// wait for it).
    Demoted {
        epoch: Epoch,
        reason: DemotionReason,
        office_ended_at: Millis,
    },
    /// This node started on an empty store and waits for its peers' terms before it
    /// votes or leads (src/protocol/recovery.rs): `needed` of them must report.
    /// `survivors`: not an empty store but a forced recovery's survivor, waiting for
    /// every other survivor.
    RecoveryStarted {
        needed: usize,
        #[serde(default)]
        survivors: bool,
    },
    /// Enough peers reported: the node's term cell is now `term`, the highest reported,
    /// and it votes and leads by the usual rules from here on.
    Recovered { term: u64 },
    /// This node stored a new member list (its own change, or one it was sent) and lives
    /// by it from now on; `voters` is how many of its members vote.
    MembersChanged { id: ConfigId, voters: usize },
    /// The coordinator wrote list `id`, a change about member `subject`.
    ChangeProposed { id: ConfigId, subject: NodeId },
    /// The coordinator's list `id` is stored by a majority of the voters before and
    /// after its change: the next change may start.
    MembersCommitted { id: ConfigId },
    /// A change was refused, and why.
    ChangeRefused { reason: ChangeRefused },
    /// Node `by` refused this node as one a forced recovery gave up: it stood down for
    /// good (src/protocol/machine/given_up.rs).
    GivenUp { by: NodeId },
}
