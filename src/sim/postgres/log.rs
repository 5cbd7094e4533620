//! The history a violation carries: the events of the last steps, kept as values and
//! worded only when a violation is reported (a passing sweep formats nothing).

use super::decisions::{Act, Office};
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
    Failed {
        id: NodeId,
        what: &'static str,
    },
    Promoted {
        id: NodeId,
        timeline: u32,
        at: usize,
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
}

impl Event {
    fn words(&self) -> String {
        match self {
            Event::Fault(f) => format!("fault: {f}"),
            Event::Elected {
                id,
                est,
                stale,
                token,
            } => format!(
                "elected {id} (est tl {} wal {}{}), token {token}",
                est >> 48,
                est & ((1 << 48) - 1),
                if *stale { ", stale estimates" } else { "" }
            ),
            Event::OfficeEnded { id, why } => format!("office of {id} ends: {why}"),
            Event::Fenced(id) => format!("keeper of {id} fences its primary"),
            Event::Acted { id, office, act } => format!("{id} ({office:?}): {act:?}"),
            Event::Waits { id, why } => format!("{id} waits: {why}"),
            Event::Failed { id, what } => format!("{id}: {what} failed"),
            Event::Promoted { id, timeline, at } => {
                format!("{id} promoted: timeline {timeline} from position {at}")
            }
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
