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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Cells {
    /// Highest term this node has declared or accepted; the next declaration is above it.
    pub term: u64,
    /// The newest epoch this node accepted or declared; later ones must be strictly higher.
    pub accepted: Option<Epoch>,
    /// How many times the node has started; lets logs and checkers tell lives apart.
    pub incarnation: u64,
}

/// A coordinator heartbeat a node received: whose office (`epoch`) and which of its
/// rounds. Ordered by epoch, then round, so the newest is the largest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Heard {
    pub epoch: Epoch,
    pub round: u64,
}

/// A peer-to-peer message. The sender is the TLS-authenticated peer, never a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// The sender's highest seen term, so news of newer epochs spreads with every message.
    pub term: u64,
    pub body: Body,
}

/// The kinds of message. `Election`, `Answer`, `Coordinator` and `Heartbeat` are the
/// classic Bully set; `Ack`, `Probe` and `Resign` let nodes learn the current term after
/// a restart and hand leadership over without waiting for a timeout; `PreVote` and
/// `Vote` are quorum mode's ask-before-you-raise-the-term round (Q6); `TermQuery` and
/// `TermReport` let a node with an empty store learn the terms it forgot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Body {
    /// To every higher ID: "is anyone above me alive?" Carries the sender's accepted
    /// epoch so a coordinator can tell whether the sender already knows it.
    Election { accepted: Option<Epoch> },
    /// Back to a lower ID that sent Election: "I am alive and take over".
    Answer,
    /// From the winner to all: the new epoch. Only its leader may send it.
    Coordinator { epoch: Epoch },
    /// From the coordinator to all, every `heartbeat_ms`. Only its leader may send it.
    /// `round` numbers the heartbeats of one epoch so acks can be matched to the send
    /// time that the quorum lease counts from (0 = the declaration itself).
    Heartbeat { epoch: Epoch, round: u64 },
    /// A follower's answer to a declaration, heartbeat or probe: its accepted epoch and
    /// the heartbeat round it answers (0 when it answers no heartbeat).
    Ack { accepted: Option<Epoch>, round: u64 },
    /// Sent by a (re)starting node to every peer so it learns the current term and
    /// coordinator before it declares anything.
    Probe,
    /// From a coordinator that stops being eligible or yields: elect someone else now.
    /// In quorum mode it also releases the followers' lease promise.
    Resign { epoch: Epoch },
    /// Quorum mode: "would you accept my declaration at `term`?" Nothing is persisted
    /// until a majority says yes, so a node cut off from the majority never raises the
    /// term (Q6).
    /// `heard` is the newest coordinator heartbeat the candidate has received: a
    /// coordinator hands over only to a candidate that has shown it hears it (a node
    /// that can send but not receive would otherwise be handed an office it cannot
    /// hold, again and again).
    PreVote { term: u64, heard: Option<Heard> },
    /// Quorum mode: a yes to a `PreVote` for `term`.
    Vote { term: u64 },
    /// From a node whose store is empty (first boot or a lost disk): "what is the highest
    /// term you have seen?" (src/protocol/recovery.rs). Sent D after its start.
    TermQuery,
    /// The answer to a `TermQuery`; the message's own `term` is the answer.
    TermReport,
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
            Body::PreVote { .. } => MessageKind::PreVote,
            Body::Vote { .. } => MessageKind::Vote,
            Body::TermQuery => MessageKind::TermQuery,
            Body::TermReport => MessageKind::TermReport,
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
    PreVote,
    Vote,
    TermQuery,
    TermReport,
}

impl MessageKind {
    /// Every kind, in a stable order for tables and metrics.
    pub const ALL: [MessageKind; 11] = [
        MessageKind::Election,
        MessageKind::Answer,
        MessageKind::Coordinator,
        MessageKind::Heartbeat,
        MessageKind::Ack,
        MessageKind::Probe,
        MessageKind::Resign,
        MessageKind::PreVote,
        MessageKind::Vote,
        MessageKind::TermQuery,
        MessageKind::TermReport,
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
            MessageKind::PreVote => "prevote",
            MessageKind::Vote => "vote",
            MessageKind::TermQuery => "term_query",
            MessageKind::TermReport => "term_report",
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
    /// The coordinator this node follows or is, if any.
    pub fn coordinator(&self) -> Option<NodeId> {
        match self.role {
            Role::Candidate => None,
            _ => self.epoch.map(|e| e.leader),
        }
    }
}

/// Which election algorithm the cluster runs. Every member must use the same one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Bully order plus a majority and a lease: never two coordinators, under any
    /// partition or pause; a side without a majority has no coordinator (README.md, "Modes").
    #[default]
    Quorum,
    /// The seeds' Bully algorithm: any live node can lead, even alone, so a partition
    /// gives one coordinator per side until it heals.
    Classic,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Quorum => "quorum",
            Mode::Classic => "classic",
        })
    }
}

impl Epoch {
    /// The fencing token handed to hooks, HTTP and the CLI: one integer that is unique
    /// per leadership and ordered like the epoch, `term * 2^20 + leader` (IDs are below
    /// 2^20, see [`MAX_NODE_ID`]). The same form in both modes: in classic mode two
    /// nodes can declare one term in a partition, so the leader must be folded in; in
    /// quorum mode one term has one holder (Q1), and using the same form there keeps the
    /// token rising when a cluster switches modes (a database that fences on ">= the
    /// highest token seen" would refuse every later primary if it fell to the term).
    pub fn token(&self) -> u64 {
        self.term
            .saturating_mul(1 << TOKEN_LEADER_BITS)
            .saturating_add(self.leader)
    }
}

/// Bits of a fencing token that hold the leader ID.
pub const TOKEN_LEADER_BITS: u32 = 20;

/// The highest node ID a config may use, so a fencing token stays unique.
pub const MAX_NODE_ID: NodeId = (1 << TOKEN_LEADER_BITS) - 1;

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
    RecoveryStarted { needed: usize },
    /// Enough peers reported: the node's term cell is now `term`, the highest reported,
    /// and it votes and leads by the usual rules from here on.
    Recovered { term: u64 },
}

/// Whether a restarted higher node takes over from a healthy lower coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preempt {
    /// The classic Bully: the highest live eligible ID always leads.
    #[default]
    Always,
    /// A (re)started node follows any live coordinator; the newest epoch wins.
    Never,
}

/// The timing knobs, in milliseconds (README.md, "Timing").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

    /// How long a starting node waits for higher peers it has not reached yet before it
    /// elects without them (3D; at most that long after its probe window): nodes of a
    /// fresh cluster started one by one find each other instead of each declaring in
    /// turn. A node that hears a running coordinator stops waiting at once.
    pub fn startup_wait_ms(&self) -> u64 {
        3 * self.suspect_after_ms
    }

    /// How long a peer connection that carries messages may hear nothing back before
    /// the transport drops it and reports the peer down (20 D); also the bound on a dial.
    /// The protocol's own suspicion detects a dead leader after D; the notice is a hint.
    /// A stalled connection must not live much longer: after a partition heals, QUIC's
    /// retransmission backoff would hold its messages back for about as long as the
    /// partition lasted. The simulator uses the same figure.
    pub fn peer_idle_timeout_ms(&self) -> u64 {
        self.suspect_after_ms.saturating_mul(20)
    }

    /// QUIC's own idle timeout (200 D), which applies to quiet links only: those between
    /// followers carry nothing for as long as the coordinator lives, and a keep-alive at
    /// half of [`Timing::peer_idle_timeout_ms`] on each of them was a third of an idle
    /// 32-node cluster's CPU. The dialer pings at half of this; a connection with
    /// traffic is watched against the shorter timeout instead (`transport::silence`).
    pub fn quiet_link_timeout_ms(&self) -> u64 {
        self.suspect_after_ms.saturating_mul(200)
    }

    /// The I5 bound: every live node follows the highest live ID within this long
    /// after the last fault (D + 2T + T' plus the start-up wait and a margin).
    pub fn convergence_bound_ms(&self) -> u64 {
        self.suspect_after_ms
            + 2 * self.answer_timeout_ms
            + self.coordinator_timeout_ms
            + self.preempt_delay_ms
            + self.answer_timeout_ms
            + self.startup_wait_ms()
            + 2 * self.heartbeat_ms
    }

    /// The I5 bound for `mode`. Quorum mode adds what its safety costs at worst: the
    /// restart hold-off (D, Q5), a pre-vote round and a declaration's wait for acks
    /// (T + T'), and a handover's extra round (T).
    pub fn convergence_bound_in(&self, mode: Mode) -> u64 {
        match mode {
            Mode::Classic => self.convergence_bound_ms(),
            Mode::Quorum => {
                self.convergence_bound_ms()
                    + self.suspect_after_ms
                    + 2 * self.answer_timeout_ms
                    + self.coordinator_timeout_ms
            }
        }
    }

    /// Checks the relations the algorithm relies on; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.heartbeat_ms == 0 {
            return Err("timing.heartbeat_ms must be at least 1".into());
        }
        let span = super::lease::lease_span_ms(self);
        if span < self.heartbeat_ms.saturating_mul(2) {
            return Err(format!(
                "timing.suspect_after_ms ({}) must be at least 3 x timing.heartbeat_ms ({}): \
                 the coordinator's lease lasts D less a drift margin of {} ms (the larger of \
                 the heartbeat and {} % of D), {span} ms, and must span two heartbeats so \
                 that one late ack does not end it",
                self.suspect_after_ms,
                self.heartbeat_ms,
                super::lease::drift_margin_ms(self),
                super::lease::DRIFT_BOUND_PERMILLE as f64 / 10.0,
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

#[cfg(test)]
mod token_tests {
    use super::{Epoch, MAX_NODE_ID};

    #[test]
    fn the_token_rises_with_the_epoch_whatever_the_mode() {
        // A classic-mode leadership, then the cluster restarts in quorum mode and elects
        // a lower ID at the next term: the token must not fall (it did when quorum mode
        // handed out the bare term).
        let classic = Epoch { term: 7, leader: 5 };
        let quorum = Epoch { term: 8, leader: 1 };
        assert!(quorum.token() > classic.token());
        // Ordered like the epoch, unique per (term, leader), for every legal ID.
        let epochs = [
            Epoch { term: 0, leader: 1 },
            Epoch { term: 1, leader: 1 },
            Epoch { term: 1, leader: 2 },
            Epoch {
                term: 1,
                leader: MAX_NODE_ID,
            },
            Epoch { term: 2, leader: 1 },
        ];
        for pair in epochs.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].token() < pair[1].token(), "{pair:?}");
        }
        assert_eq!(Epoch { term: 3, leader: 2 }.token(), 3 * (1 << 20) + 2);
    }
}
