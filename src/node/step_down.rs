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

use super::status::Status;
use crate::protocol::{Millis, NodeId, Role, Timing, View};
use std::time::Instant;
use tokio::sync::oneshot;

/// A step-down in progress: the answer waits until another node leads, or until
/// `deadline`, when the step-down is undone and refused.
pub struct Handover {
    reply: oneshot::Sender<Result<String, String>>,
    /// On the runtime's clock.
    pub deadline: Millis,
    started: Instant,
    for_ms: u64,
    /// A switchover's chosen successor; any other node taking over is a refusal.
    to: Option<NodeId>,
}

impl Handover {
    /// Starts waiting for a successor at `now`.
    pub fn new(
        reply: oneshot::Sender<Result<String, String>>,
        now: Millis,
        for_ms: u64,
        timing: &Timing,
        to: Option<NodeId>,
    ) -> Handover {
        Handover {
            reply,
            deadline: now + handover_wait_ms(timing),
            started: Instant::now(),
            for_ms,
            to,
        }
    }

    /// Answers if `view` shows another node leading; otherwise gives the handover back.
    pub fn complete_if_taken_over(self, view: View) -> Option<Handover> {
        let (Some(coordinator), Some(epoch)) = (view.coordinator(), view.epoch) else {
            return Some(self);
        };
        if coordinator == view.id {
            return Some(self);
        }
        let took = self.started.elapsed().as_millis();
        if let Some(to) = self.to.filter(|&to| to != coordinator) {
            let _ = self.reply.send(Err(format!(
                "node {coordinator} took over at epoch {epoch} instead of node {to} (after {took} ms)"
            )));
            return None;
        }
        let _ = self.reply.send(Ok(format!(
            "node {id} stepped down; node {coordinator} took over at epoch {epoch} after {took} ms; node {id} stays ineligible for {} ms",
            self.for_ms,
            id = view.id,
        )));
        None
    }

    /// Refuses after the wait; the caller has made the node eligible again.
    pub fn refuse(self, status: &Status, timing: &Timing) {
        let up: Vec<String> = status
            .peers
            .iter()
            .filter(|p| p.connected)
            .map(|p| p.id.to_string())
            .collect();
        let _ = self.reply.send(Err(format!(
            "no other eligible node took over within {} ms (peers up: {}); node {} is eligible again and will lead",
            handover_wait_ms(timing),
            up.join(","),
            status.id
        )));
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
            .coordinator
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
