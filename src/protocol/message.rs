//! The peer-to-peer messages: what a node may say to another, and the kinds counted in
//! logs and metrics.

use super::epoch::Epoch;
use super::membership::{ConfigId, Membership};
use serde::{Deserialize, Serialize};

/// A coordinator heartbeat a node received: whose office (`epoch`) and which of its
/// rounds. Ordered by epoch, then round, so the newest is the largest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Heard {
    pub epoch: Epoch,
    pub round: u64,
}

/// A peer-to-peer message. The sender is the TLS-authenticated peer, never a field.
/// Its serde form is in `message_serde.rs`: `est` is always on the wire, and in JSON
/// (histories, event logs) only when present, so a run without estimates records what
/// it recorded before estimates existed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Message {
    /// The sender's highest seen term, so news of newer epochs spreads with every message.
    pub term: u64,
    /// The sender's member list, by identity: a receiver holding a newer one sends it
    /// the list, and a voter refuses a candidate whose list is older than its own
    /// (docs/design.md#membership).
    pub config: ConfigId,
    /// The sender's estimate est(S) (docs/design.md#elected-by-data-est): `None` from a
    /// node that has no estimate source; `Some(0)` from one whose estimate is stale,
    /// unknown, or that is ineligible; otherwise its fresh value. Elections order
    /// nodes by `(est, id)` when it is present.
    pub est: Option<u64>,
    /// The D the sender leases under: a follower that acks its declaration or
    /// heartbeat promises at least this long, whatever its own D, so a coordinator and
    /// a follower that hold different cluster settings for a while keep Q3
    /// (docs/design.md#cluster-settings); in both modes a follower suspects the sender
    /// no sooner than this. 0: not said (the receiver's own D).
    pub promise_ms: u64,
    pub body: Body,
}

impl Message {
    /// A message from a node whose member list is still the one seeded from its config
    /// file (tests and tools that predate runtime membership changes).
    pub fn seeded(term: u64, body: Body) -> Message {
        Message {
            term,
            config: ConfigId::default(),
            est: None,
            promise_ms: 0,
            body,
        }
    }
}

/// The kinds of message. `Election`, `Answer`, `Coordinator` and `Heartbeat` are the
/// classic Bully set; `Ack`, `Probe` and `Resign` let nodes learn the current term after
/// a restart and hand leadership over without waiting for a timeout; `PreVote` and
/// `Vote` are quorum mode's ask-before-you-raise-the-term round (Q6); `TermQuery` and
/// `TermReport` let a node with an empty store learn the terms it forgot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// The answer to a `TermQuery` from a node that is itself recovering an empty store
    /// and has seen a term above 0: its store may have forgotten terms it accepted, so
    /// its answer counts toward no recovery (src/protocol/recovery.rs). Its `term` is
    /// still observed. A recovering node that has seen no term at all answers with a
    /// `TermReport`: that is how a fresh cluster, every store empty, starts.
    TermUnknown,
    /// A member list newer than the one the receiver's last message showed: sent by a
    /// coordinator that changed it, and by any node to a peer that is behind. The
    /// receiver stores it if it is newer than its own (docs/design.md#membership).
    Members { list: Membership },
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
            Body::TermUnknown => MessageKind::TermUnknown,
            Body::Members { .. } => MessageKind::Members,
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
    Members,
    TermUnknown,
}

impl MessageKind {
    /// Every kind, in a stable order for tables and metrics.
    pub const ALL: [MessageKind; 13] = [
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
        MessageKind::Members,
        MessageKind::TermUnknown,
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
            MessageKind::Members => "members",
            MessageKind::TermUnknown => "term_unknown",
        }
    }
}
