//! The history a violation carries: the events of the last steps, kept as values and
//! worded only when a violation is reported (a passing sweep formats nothing).

use super::decisions::{Act, Office, PeerWal, Position};
use super::server::COMMIT_BYTES;
use crate::protocol::NodeId;
use std::collections::VecDeque;

/// How many steps back a violation's history reaches.
const KEPT_STEPS: u64 = 40;

/// One thing that happened.
#[derive(Debug, Clone)]
pub(super) enum Event {
    Fault(String),
    Elected {
        id: NodeId,
        est: u64,
        stale: bool,
        token: u64,
    },
    OfficeEnded {
        id: NodeId,
        why: &'static str,
    },
    Fenced(NodeId),
    Acted {
        id: NodeId,
        office: Office,
        act: Act,
    },
    Waits {
        id: NodeId,
        why: String,
    },
    /// What a coordinator read before it decided to promote.
    Read {
        id: NodeId,
        own: Position,
        peers: Vec<PeerWal>,
    },
    Failed {
        id: NodeId,
        what: &'static str,
    },
    Promoted {
        id: NodeId,
        timeline: u32,
        branch: u64,
        at: usize,
        /// The standbys it names under their own names (known to have its branch).
        knows: Vec<NodeId>,
    },
    Committed {
        id: NodeId,
        first: u64,
        count: u64,
    },
    Acknowledged {
        by: NodeId,
        upto: u64,
        k: usize,
        weak: bool,
    },
    Healed,
    /// What the operator did: after the heal (src/sim/postgres/operator.rs), or a
    /// `bully pg` order during the faults (src/sim/postgres/restarts.rs).
    Operator(String),
}

impl Event {
    fn words(&self) -> String {
        match self {
            Event::Fault(f) => format!("fault: {f}"),
            Event::Operator(what) => format!("operator: {what}"),
            Event::Elected {
                id,
                est,
                stale,
                token,
            } => format!(
                "elected {id} (est branch {} wal {}{}), token {token}",
                est >> 44,
                (est & ((1 << 44) - 1)) * 16 / COMMIT_BYTES,
                if *stale { ", stale estimates" } else { "" }
            ),
            Event::OfficeEnded { id, why } => format!("office of {id} ends: {why}"),
            Event::Fenced(id) => format!("keeper of {id} fences its primary"),
            Event::Acted { id, office, act } => format!("{id} ({office:?}): {act:?}"),
            Event::Waits { id, why } => format!("{id} waits: {why}"),
            Event::Read { id, own, peers } => {
                let words =
                    |p: &Position| format!("branch {} at #{}", p.branch, p.lsn / COMMIT_BYTES);
                let peers: Vec<String> = peers
                    .iter()
                    .map(|p| match &p.wal {
                        Some(wal) => format!("{}: {}", p.id, words(wal)),
                        None => format!("{}: not reached", p.id),
                    })
                    .collect();
                format!(
                    "{id} reads itself at {}, peers {}",
                    words(own),
                    peers.join(", ")
                )
            }
            Event::Failed { id, what } => format!("{id}: {what} failed"),
            Event::Promoted {
                id,
                timeline,
                branch,
                at,
                knows,
            } => format!(
                "{id} promoted: timeline {timeline} (branch {branch}) from position {at}, \
                 standbys named {knows:?}"
            ),
            Event::Committed { id, first, count } => {
                format!(
                    "primary {id} writes commits #{first}..#{}",
                    first + count - 1
                )
            }
            Event::Acknowledged { by, upto, k, weak } => format!(
                "primary {by} acknowledges up to #{upto} (k {k}{})",
                if *weak { ", weak" } else { "" }
            ),
            Event::Healed => "faults end: every member back".into(),
        }
    }
}

/// The last steps' events.
#[derive(Debug, Default)]
pub(super) struct Log {
    events: VecDeque<(u64, Event)>,
}

impl Log {
    pub fn push(&mut self, step: u64, event: Event) {
        while self
            .events
            .front()
            .is_some_and(|&(at, _)| at + KEPT_STEPS < step)
        {
            self.events.pop_front();
        }
        self.events.push_back((step, event));
    }

    /// One line per event, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|(step, event)| format!("step {step}: {}", event.words()))
            .collect()
    }
}
