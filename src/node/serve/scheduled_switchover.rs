//! `bully step-down --to N --at TIME`: a switchover the coordinator holds until a
//! wall-clock time, then runs like `--to N` (`switchover.rs`), whose checks then decide
//! again (N may have become ineligible or unreachable meanwhile: refused, and logged).
//!
//! Accepted only if N could take over now (the same checks, up front) and no other
//! schedule is pending; `bully step-down --cancel` drops it. Held in memory only: it
//! belongs to this coordinator's term of office, so it is dropped, with a log line,
//! when this node stops leading or its epoch changes, and a restart (which ends the
//! office) drops it too. A schedule that outlived its office could hand over from a
//! node that no longer leads, on a plan made under other conditions.

use super::switchover::{self, PeerApis};
use crate::api::{ScheduledSwitchover, Status};
use crate::history::Record;
use crate::node::shared::mailbox::Command;
use crate::node::shared::tasks::NodeTasks;
use crate::protocol::Role;
use crate::wall_clock::wall_ms;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// The furthest ahead a switchover may be scheduled: a week, so a typo in a date is
/// refused rather than held for years.
const FURTHEST_MS: u64 = 7 * 24 * 3600 * 1000;

/// The coordinator's pending schedule, if any, shared by the API's request streams.
#[derive(Clone, Default)]
pub struct Schedule {
    slot: Arc<Mutex<Option<Pending>>>,
}

/// A schedule and the means to cancel it: dropping `cancel` ends its task.
struct Pending {
    plan: ScheduledSwitchover,
    /// Which schedule this is, so a task clears only its own.
    seq: u64,
    _cancel: oneshot::Sender<()>,
}

/// Writes `outcome` of `plan` to the node's event log (through the runtime, which owns
/// it); a full queue drops the record, never blocks the API.
fn note(commands: &mpsc::Sender<Command>, plan: ScheduledSwitchover, outcome: String) {
    let record = Record::ScheduledSwitchover {
        to: plan.to,
        at_ms: plan.at_ms,
        outcome,
    };
    if commands.try_send(Command::Note(record)).is_err() {
        tracing::warn!(
            to = plan.to,
            "the event log missed a scheduled switchover record"
        );
    }
}

/// The longest single sleep towards a wall-clock time: the sleep runs on the monotonic
/// clock, so a step of the wall clock (NTP, an operator's `date -s`) is noticed within
/// this long.
const WALL_CLOCK_RECHECK: Duration = Duration::from_secs(30);

/// Returns once the wall clock reads `at_ms` or later (never earlier, whatever the
/// wall clock does meanwhile).
async fn until_wall_time(at_ms: u64) {
    loop {
        let left = at_ms.saturating_sub(wall_ms());
        if left == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(left).min(WALL_CLOCK_RECHECK)).await;
    }
}

/// What a scheduled switchover needs from the node.
pub struct Node<'a> {
    pub members: &'a Arc<PeerApis>,
    pub status: &'a watch::Receiver<Status>,
    pub commands: &'a mpsc::Sender<Command>,
    pub tasks: &'a NodeTasks,
}

impl Schedule {
    /// The pending schedule, for status answers.
    pub fn pending(&self) -> Option<ScheduledSwitchover> {
        self.lock().as_ref().map(|p| p.plan)
    }

    /// The node's status as a reader sees it now (`Status::as_of_now`), with the
    /// pending schedule, which lives here rather than in the runtime's status: what
    /// the API's `status` and HTTP `/status` both answer.
    pub fn status_now(&self, status: &watch::Receiver<Status>) -> Status {
        let mut now = status.borrow().as_of_now();
        now.scheduled_switchover = self.pending();
        now
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Pending>> {
        // A panic elsewhere while holding the lock leaves a plain Option: still sound.
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Accepts `plan` if this node leads, nothing else is pending, the time is ahead
    /// (within a week) and its target could take over now; starts the task that waits.
    pub async fn add(&self, node: Node<'_>, plan: ScheduledSwitchover) -> Result<String, String> {
        let now = node.status.borrow().as_of_now();
        let wall = wall_ms();
        if plan.at_ms <= wall {
            return Err(format!(
                "the time is {} ms in the past: give a time ahead",
                wall - plan.at_ms
            ));
        }
        if plan.at_ms - wall > FURTHEST_MS {
            return Err("the time is more than a week ahead".to_string());
        }
        if let Some(pending) = self.pending() {
            return Err(format!(
                "a switchover to node {} is already scheduled; cancel it first \
                 (`bully step-down --cancel`)",
                pending.to
            ));
        }
        switchover::could_take_over(node.members, &now, plan.to).await?;
        let (cancel, cancelled) = oneshot::channel();
        let seq = {
            let mut slot = self.lock();
            if slot.is_some() {
                return Err("another switchover was scheduled meanwhile".to_string());
            }
            let seq = wall;
            *slot = Some(Pending {
                plan,
                seq,
                _cancel: cancel,
            });
            seq
        };
        tracing::info!(to = plan.to, at_ms = plan.at_ms, "switchover scheduled");
        note(node.commands, plan, "scheduled".to_string());
        let run = self.clone().wait_and_run(
            Arc::clone(node.members),
            node.status.clone(),
            node.commands.clone(),
            plan,
            seq,
            cancelled,
        );
        let tasks = node.tasks.clone();
        node.tasks.spawn(async move {
            tasks.until_stopped(run).await;
        });
        Ok(format!(
            "switchover to node {} scheduled in {} s, held by node {} while it leads",
            plan.to,
            (plan.at_ms - wall).div_ceil(1000),
            now.id
        ))
    }

    /// Drops the pending schedule, if any.
    pub fn cancel(&self, commands: &mpsc::Sender<Command>) -> Result<String, String> {
        let taken = self.lock().take();
        match taken {
            Some(pending) => {
                tracing::info!(to = pending.plan.to, "scheduled switchover cancelled");
                note(commands, pending.plan, "cancelled".to_string());
                Ok(format!(
                    "the switchover to node {} is cancelled",
                    pending.plan.to
                ))
            }
            None => Err("no switchover is scheduled on this node".to_string()),
        }
    }

    /// Clears the slot if it still holds schedule `seq`.
    fn clear(&self, seq: u64) {
        let mut slot = self.lock();
        if slot.as_ref().is_some_and(|p| p.seq == seq) {
            *slot = None;
        }
    }

    /// Waits for the time, a cancel or the end of this office; at the time, runs the
    /// switchover and logs its outcome.
    async fn wait_and_run(
        self,
        members: Arc<PeerApis>,
        mut status: watch::Receiver<Status>,
        commands: mpsc::Sender<Command>,
        plan: ScheduledSwitchover,
        seq: u64,
        cancelled: oneshot::Receiver<()>,
    ) {
        let epoch = status.borrow().epoch;
        let office_ends = status.wait_for(|s| s.role != Role::Coordinator || s.epoch != epoch);
        tokio::select! {
            _ = cancelled => return,
            _ = office_ends => {
                self.clear(seq);
                tracing::warn!(
                    to = plan.to,
                    "scheduled switchover dropped: this node stopped leading before its time"
                );
                note(&commands, plan, "dropped: this node stopped leading first".to_string());
                return;
            }
            _ = until_wall_time(plan.at_ms) => {}
        }
        self.clear(seq);
        let now = status.borrow().as_of_now();
        let outcome = switchover::run(&members, &now, &commands, plan.to, plan.for_ms).await;
        let outcome = match outcome {
            Ok(text) => {
                tracing::info!(to = plan.to, "scheduled switchover done: {text}");
                format!("done: {text}")
            }
            Err(why) => {
                tracing::warn!(to = plan.to, "scheduled switchover refused: {why}");
                format!("refused: {why}")
            }
        };
        note(&commands, plan, outcome);
    }
}
