//! Plain data shared by every layer: node IDs, epochs, the durable cells,
//! the peer-to-peer messages and the view a node exposes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node's identity. Bound to its TLS certificate, so it is never taken from a message.
pub type NodeId = u64;

/// Virtual or real time in milliseconds from an arbitrary origin. The core never reads
/// a clock; the caller passes `now` with every event.
pub type Millis = u64;

/// The fencing token: ordered by term, then leader. A database primary can refuse
/// writes that carry an older epoch than the newest it has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Epoch {
    /// Declared at one above the highest term its leader had seen.
    pub term: u64,
    /// The node that declared this epoch.
    pub leader: NodeId,
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.term, self.leader)
    }
}

/// What must survive a crash. Written as one transaction and flushed before any action
/// that depends on it runs (invariant I3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Cells {
    /// Highest term this node has declared or accepted; the next declaration is above it.
    pub term: u64,
    /// The newest epoch this node accepted or declared; later ones must be strictly higher.
    pub accepted: Option<Epoch>,
    /// How many times the node has started; lets logs and checkers tell lives apart.
    pub incarnation: u64,
}

/// A peer-to-peer message. The sender is the TLS-authenticated peer, never a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// The sender's highest seen term, so news of newer epochs spreads with every message.
    pub term: u64,
    pub body: Body,
}

/// The kinds of message. `Election`, `Answer`, `Coordinator` and `Heartbeat` are the
/// classic Bully set; `Ack`, `Probe` and `Resign` let nodes learn the current term after
/// a restart and hand leadership over without waiting for a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Body {
    /// To every higher ID: "is anyone above me alive?" Carries the sender's accepted
    /// epoch so a coordinator can tell whether the sender already knows it.
    Election { accepted: Option<Epoch> },
    /// Back to a lower ID that sent Election: "I am alive and take over".
    Answer,
    /// From the winner to all: the new epoch. Only its leader may send it.
    Coordinator { epoch: Epoch },
    /// From the coordinator to all, every `heartbeat_ms`. Only its leader may send it.
    Heartbeat { epoch: Epoch },
    /// A follower's answer to a heartbeat or probe: its accepted epoch.
    Ack { accepted: Option<Epoch> },
    /// Sent by a (re)starting node to every peer so it learns the current term and
    /// coordinator before it declares anything.
    Probe,
    /// From a coordinator that stops being eligible: elect someone else now.
    Resign { epoch: Epoch },
}

impl Body {
    /// A short stable name for logs and metrics.
    pub fn kind(&self) -> MessageKind {
        match self {
            Body::Election { .. } => MessageKind::Election,
            Body::Answer => MessageKind::Answer,
            Body::Coordinator { .. } => MessageKind::Coordinator,
            Body::Heartbeat { .. } => MessageKind::Heartbeat,
            Body::Ack { .. } => MessageKind::Ack,
            Body::Probe => MessageKind::Probe,
            Body::Resign { .. } => MessageKind::Resign,
        }
    }
}

/// Message kinds without payload, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum MessageKind {
    Election,
    Answer,
    Coordinator,
    Heartbeat,
    Ack,
    Probe,
    Resign,
}

impl MessageKind {
    /// Every kind, in a stable order for tables and metrics.
    pub const ALL: [MessageKind; 7] = [
        MessageKind::Election,
        MessageKind::Answer,
        MessageKind::Coordinator,
        MessageKind::Heartbeat,
        MessageKind::Ack,
        MessageKind::Probe,
        MessageKind::Resign,
    ];

    /// Lower-case name used in logs, JSON and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            MessageKind::Election => "election",
            MessageKind::Answer => "answer",
            MessageKind::Coordinator => "coordinator",
            MessageKind::Heartbeat => "heartbeat",
            MessageKind::Ack => "ack",
            MessageKind::Probe => "probe",
            MessageKind::Resign => "resign",
        }
    }
}

/// The role a node reports to clients. Everything that is neither following nor
/// leading (starting, electing, waiting for a winner) is `Candidate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Candidate,
    Follower,
    Coordinator,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The coordinator this node follows or is, if any.
    pub fn coordinator(&self) -> Option<NodeId> {
        match self.role {
            Role::Candidate => None,
            _ => self.epoch.map(|e| e.leader),
        }
    }
}

/// Whether a restarted higher node takes over from a healthy lower coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preempt {
    /// The classic Bully: the highest live eligible ID always leads.
    #[default]
    Always,
    /// A (re)started node follows any live coordinator; the newest epoch wins.
    Never,
}

/// The timing knobs, in milliseconds (DESIGN.md "Timing").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timing {
    pub heartbeat_ms: u64,
    /// D: a follower suspects its coordinator after this long without a heartbeat.
    pub suspect_after_ms: u64,
    /// T: how long an electing node waits for an Answer from a higher ID.
    pub answer_timeout_ms: u64,
    /// T': how long a node that got an Answer waits for the Coordinator message.
    pub coordinator_timeout_ms: u64,
    /// How long a (re)started node waits before its first election.
    pub preempt_delay_ms: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            heartbeat_ms: 100,
            suspect_after_ms: 300,
            answer_timeout_ms: 100,
            coordinator_timeout_ms: 300,
            preempt_delay_ms: 0,
        }
    }
}

impl Timing {
    /// A faster profile for chaos runs and benchmarks on loopback.
    pub fn fast() -> Self {
        Timing {
            heartbeat_ms: 25,
            suspect_after_ms: 100,
            answer_timeout_ms: 30,
            coordinator_timeout_ms: 100,
            preempt_delay_ms: 0,
        }
    }

    /// The I5 bound: every live node follows the highest live ID within this long
    /// after the last fault (D + 2T + T' plus the startup probe and a margin).
    pub fn convergence_bound_ms(&self) -> u64 {
        self.suspect_after_ms
            + 2 * self.answer_timeout_ms
            + self.coordinator_timeout_ms
            + self.preempt_delay_ms
            + self.answer_timeout_ms
            + 2 * self.heartbeat_ms
    }

    /// Checks the relations the algorithm relies on; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.heartbeat_ms == 0 {
            return Err("timing.heartbeat_ms must be at least 1".into());
        }
        if self.suspect_after_ms <= 2 * self.heartbeat_ms {
            return Err(format!(
                "timing.suspect_after_ms ({}) must be more than 2 x timing.heartbeat_ms ({})",
                self.suspect_after_ms, self.heartbeat_ms
            ));
        }
        if self.answer_timeout_ms == 0 {
            return Err("timing.answer_timeout_ms must be at least 1".into());
        }
        if self.coordinator_timeout_ms < self.answer_timeout_ms {
            return Err(format!(
                "timing.coordinator_timeout_ms ({}) must be at least timing.answer_timeout_ms ({})",
                self.coordinator_timeout_ms, self.answer_timeout_ms
            ));
        }
        Ok(())
    }
}
