//! What a client sends a node over the client API and what the node answers: one
//! request per bidirectional stream, framed by the codec (see `node/serve/api.rs`).

use super::counters::MetricsSnapshot;
use super::event_log::RecentEvents;
use super::pause::Pause;
use super::status::Status;
use crate::protocol::{Change, NodeId};
use serde::{Deserialize, Serialize};

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Status,
    Watch,
    /// Become ineligible for `for_ms` so the next highest eligible node takes over.
    StepDown {
        for_ms: u64,
    },
    /// A snapshot of the node's counters.
    Metrics,
    /// Switchover: the coordinator hands over to node `to` (see `switchover`).
    SwitchOver {
        to: NodeId,
        for_ms: u64,
    },
    /// From a coordinator preparing a switchover to `target`: be ineligible for
    /// `for_ms`, or until `target` has led and stopped leading.
    StandAside {
        for_ms: u64,
        target: NodeId,
    },
    /// A change of the member list (docs/design.md#membership). Any member takes it: a
    /// node that does not lead passes it to the coordinator (`forwarded`: it was passed
    /// once already, and is refused rather than passed again).
    ChangeMembers {
        change: Change,
        forwarded: bool,
    },
    /// The maintenance pause (`bully pause` / `bully resume`, and a peer passing on a
    /// newer one): kept if it supersedes the node's own (see [`Pause::supersedes`]).
    SetPause {
        pause: Pause,
    },
    /// The newest lines of the node's event log written at or after `since_ms`
    /// (wall-clock ms since the Unix epoch), at most `max` (`bully history`).
    Events {
        since_ms: u64,
        max: u32,
    },
    /// A switchover to `to` held by the coordinator until wall-clock `at_ms` (ms since
    /// the Unix epoch), then run like `SwitchOver`
    /// (src/node/serve/scheduled_switchover.rs). Appended last, like `CancelSwitchOver`:
    /// variants are encoded by position.
    ScheduleSwitchOver {
        to: NodeId,
        at_ms: u64,
        for_ms: u64,
    },
    /// Drops the coordinator's scheduled switchover.
    CancelSwitchOver,
    /// `bully pg VERB`: an operator's verb for the PostgreSQL server this node keeps
    /// (src/node/postgres/). Appended last: variants are encoded by position.
    Postgres {
        verb: super::postgres::PgVerb,
    },
    /// The PostgreSQL synchronous record this node keeps (src/postgres_rules/
    /// durability.rs): with `keep`, a primary's new one, kept if newer. The answer is
    /// the record kept afterwards. Appended last: variants are encoded by position.
    PgSync {
        keep: Option<crate::postgres_rules::SyncRecord>,
    },
    /// Who leads, confirmed (`bully leader`, docs/design.md#asking-who-leads): a
    /// coordinator answers for itself; another member passes a `Status` request to the
    /// coordinator it follows and returns that answer beside its own. Appended last:
    /// variants are encoded by position.
    Leader,
    /// A mutating request (step-down, switchover, a scheduled one or its cancel) that a
    /// member which does not lead passed on to the coordinator it follows: served where
    /// it lands, never passed on again, so two members with different views never
    /// bounce it. Appended last: variants are encoded by position.
    Forwarded {
        request: Box<Request>,
    },
}

/// What a node answers. A status is the largest answer by far; each answer is built
/// once and written once, so boxing it would save nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum Response {
    Status(Status),
    Metrics(MetricsSnapshot),
    /// A request was accepted; the text says what happens next.
    Done(String),
    /// A request was refused; the text says why.
    Refused(String),
    /// The answer to [`Request::Events`].
    Events(RecentEvents),
    /// The answer to [`Request::PgSync`]: the record the node keeps.
    PgSync(Option<crate::postgres_rules::SyncRecord>),
    /// The answer to [`Request::Leader`]. Appended last.
    Leader(LeaderReply),
}

/// A member's answer to [`Request::Leader`]: its own status and, when it does not lead
/// but follows a coordinator, that coordinator's status as the coordinator gave it when
/// asked (`Err`: why it could not be asked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderReply {
    pub own: Status,
    pub coordinator: Option<Result<Status, String>>,
}
