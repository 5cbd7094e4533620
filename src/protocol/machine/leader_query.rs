//! leader_query: what a member answers when a client asks it who leads (`bully leader`
//! through any member), the rule the node's API, the simulator and the model checker
//! share (docs/design.md#asking-who-leads).
//!
//! Read-index style: a coordinator answers for itself, read against its lease (Q4); any
//! other member names a coordinator only if that coordinator, asked at the moment of the
//! query, says it leads (read against its own lease). So in quorum mode an answer that
//! names X at time t is backed by X's own lease at t: X's office covers t (checked by
//! `checker::check_leader_answers`). A member's own view, however fresh, is never
//! enough: a heartbeat heard 1 ms ago comes from a coordinator that may have died 0.5
//! ms ago. The sabotage `Flaw::FollowerWindow` answers from that view instead (the old
//! rule: heard within D - 2.5 heartbeats), and the checks must catch it.

use super::config::Flaw;
use super::Machine;
use crate::protocol::{Epoch, Millis, NodeId, Role};

/// What a coordinator says of itself when asked: its role read against its lease at the
/// moment it answers, and its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelfReport {
    pub role: Role,
    pub epoch: Option<Epoch>,
}

impl Machine {
    /// This node's answer to "who leads?" at local time `now`: the coordinator's epoch,
    /// or `None` when it cannot name one for sure. `ask` reaches the coordinator this
    /// node follows and returns its [`SelfReport`], or `None` when it cannot be reached.
    pub fn leader_answer(
        &self,
        now: Millis,
        ask: impl FnOnce(NodeId) -> Option<SelfReport>,
    ) -> Option<Epoch> {
        let view = self.view();
        if self.role_at(now) == Role::Coordinator {
            return view.epoch;
        }
        let followed = view.epoch.filter(|_| view.role == Role::Follower)?;
        if self.config.has(Flaw::FollowerWindow) {
            return self
                .heard_within_old_window(followed, now)
                .then_some(followed);
        }
        let report = ask(followed.leader)?;
        confirmed(followed.leader, report)
    }

    /// The sabotaged rule: the promise this node gave `epoch` began (its last ack) at
    /// most D - 2.5 heartbeats ago.
    fn heard_within_old_window(&self, epoch: Epoch, now: Millis) -> bool {
        let timing = &self.config.timing;
        let window = timing
            .suspect_after_ms
            .saturating_sub(2 * timing.heartbeat_ms + timing.heartbeat_ms / 2);
        let Some(promise) = self.quorum.as_ref().and_then(|q| q.promise) else {
            return false;
        };
        let acked_at = promise.until.saturating_sub(timing.suspect_after_ms);
        promise.epoch == epoch && now <= acked_at + window
    }
}

/// The epoch `coordinator` confirmed it leads, if its report says so.
pub fn confirmed(coordinator: NodeId, report: SelfReport) -> Option<Epoch> {
    let epoch = report.epoch.filter(|e| e.leader == coordinator)?;
    (report.role == Role::Coordinator).then_some(epoch)
}
