//! Switchover (`bully step-down [--for D]`): the coordinator becomes ineligible for `D`,
//! resigns, and the answer waits until another node leads.
//!
//! "Refused when no other eligible node is alive" is decided in two steps, because a
//! node does not know its peers' eligibility (health is local; the protocol only shows
//! it indirectly, by an ineligible node not answering Elections):
//! 1. up front: refused at once if this node does not lead or no peer is connected;
//! 2. by trying: if no other node leads within [`handover_wait_ms`], the step-down is
//!    undone (the node is eligible again and re-declares at a new epoch) and refused.
//!
//! Step 2 costs a short leaderless spell (about the wait) when every peer is ineligible,
//! and gives an honest answer: "node 2 took over at epoch 9@2 after 104 ms".
//!
//! Pure: times are the runtime's milliseconds and the reply is whatever the caller
//! answers through (`R`), so [`super::eligibility`] tests all of it without tokio.

use crate::api::Status;
use crate::protocol::{Millis, NodeId, Role, Timing, View};

/// A reply and the answer it is owed: the text a client is shown as done (`Ok`) or
/// refused (`Err`).
#[derive(Debug, PartialEq, Eq)]
pub struct Answered<R> {
    pub reply: R,
    pub answer: Result<String, String>,
}

/// A step-down in progress: the answer waits until another node leads, or until its
/// deadline, when the step-down is undone and refused.
#[derive(Debug)]
pub struct Handover<R> {
    reply: R,
    /// On the runtime's clock.
    deadline: Millis,
    started: Millis,
    for_ms: u64,
    /// A switchover's chosen successor; any other node taking over is a refusal.
    to: Option<NodeId>,
}

impl<R> Handover<R> {
    /// Starts waiting, at `now`, up to `wait_ms` for a successor.
    pub fn new(reply: R, now: Millis, for_ms: u64, wait_ms: Millis, to: Option<NodeId>) -> Self {
        Handover {
            reply,
            deadline: now + wait_ms,
            started: now,
            for_ms,
            to,
        }
    }

    /// When the step-down is undone and refused if no other node leads by then.
    pub fn deadline(&self) -> Millis {
        self.deadline
    }

    /// The answer if `view` (published at `now`) shows another node leading;
    /// otherwise the handover, still waiting.
    pub fn complete_if_taken_over(self, view: View, now: Millis) -> Result<Answered<R>, Self> {
        let (Some(coordinator), Some(epoch)) = (view.coordinator(), view.epoch) else {
            return Err(self);
        };
        if coordinator == view.id {
            return Err(self);
        }
        let took = now.saturating_sub(self.started);
        let answer = match self.to.filter(|&to| to != coordinator) {
            Some(to) => Err(format!(
                "node {coordinator} took over at epoch {epoch} instead of node {to} (after {took} ms)"
            )),
            None => Ok(format!(
                "node {id} stepped down; node {coordinator} took over at epoch {epoch} after {took} ms; node {id} stays ineligible for {} ms",
                self.for_ms,
                id = view.id,
            )),
        };
        Ok(Answered {
            reply: self.reply,
            answer,
        })
    }

    /// The refusal after `wait_ms` without a successor; the caller has made the node
    /// eligible again.
    pub fn refuse(self, status: &Status, wait_ms: Millis) -> Answered<R> {
        let up: Vec<String> = status
            .peers
            .iter()
            .filter(|p| p.connected)
            .map(|p| p.id.to_string())
            .collect();
        let answer = Err(format!(
            "no other eligible node took over within {wait_ms} ms (peers up: {}); node {} is eligible again and will lead",
            up.join(","),
            status.id
        ));
        Answered {
            reply: self.reply,
            answer,
        }
    }
}

/// Why a step-down cannot start now, if it cannot (step 1 of the module docs).
pub fn refusal(status: &Status, for_ms: u64, in_progress: bool) -> Option<String> {
    if for_ms == 0 {
        return Some("a step-down needs a duration above 0".to_string());
    }
    if in_progress {
        return Some(format!("node {} is already stepping down", status.id));
    }
    if status.role != Role::Coordinator {
        let coordinator = status
            .coordinator()
            .map(|c| c.to_string())
            .unwrap_or_else(|| "none".into());
        return Some(format!(
            "node {} is not the coordinator (coordinator: {coordinator})",
            status.id
        ));
    }
    if !status.peers.iter().any(|p| p.connected) {
        return Some(format!(
            "no other node is reachable to take over from node {}",
            status.id
        ));
    }
    None
}

/// How long a step-down waits for another node to lead before it is undone: the
/// followers elect at once on Resign, so an answer timeout, a coordinator timeout and a
/// re-election of each, plus a suspicion timeout and a margin for a loaded machine.
pub fn handover_wait_ms(timing: &Timing) -> Millis {
    2 * (timing.answer_timeout_ms + timing.coordinator_timeout_ms) + timing.suspect_after_ms + 500
}
