//! What a newly published view means compared with the ones before it: elected,
//! demoted, a new epoch to follow, a failover that just ended. The runtime turns this
//! into hooks and metrics; keeping the comparison here makes it a pure, tested function.

use crate::protocol::{Epoch, Role, View};
use std::time::{Duration, Instant};

/// The meaning of one view change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Transition {
    /// The node leads an epoch it did not lead before (first win or a re-declaration).
    pub elected: bool,
    /// The node led and no longer does.
    pub demoted: bool,
    /// The node follows or leads an epoch other than the last one it followed or led.
    pub epoch_changed: bool,
    /// ... and that epoch has a different leader.
    pub coordinator_changed: bool,
    /// The last epoch followed or led before this change (kept through candidate spells).
    pub previous_epoch: Option<Epoch>,
    /// Set when the node follows or leads again after losing its coordinator: the time
    /// spent without one.
    pub failover: Option<Duration>,
}

/// Remembers enough of the past views to classify the next one.
#[derive(Debug, Clone)]
pub struct Tracker {
    role: Role,
    /// The newest epoch the node followed or led; survives candidate spells.
    last_epoch: Option<Epoch>,
    /// When the node lost its coordinator.
    lost_at: Option<Instant>,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            role: Role::Candidate,
            last_epoch: None,
            lost_at: None,
        }
    }
}

impl Tracker {
    /// Classifies `view`, published at `now`, and remembers it.
    pub fn on_view(&mut self, view: View, now: Instant) -> Transition {
        let current = match view.role {
            Role::Candidate => None,
            _ => view.epoch,
        };
        let mut t = Transition {
            demoted: self.role == Role::Coordinator && view.role != Role::Coordinator,
            previous_epoch: self.last_epoch,
            ..Transition::default()
        };
        match current {
            None => {
                if self.last_epoch.is_some() && self.lost_at.is_none() {
                    self.lost_at = Some(now);
                }
            }
            Some(epoch) => {
                t.failover = self.lost_at.take().map(|at| now.duration_since(at));
                t.epoch_changed = self.last_epoch != Some(epoch);
                t.coordinator_changed = self.last_epoch.map(|e| e.leader) != Some(epoch.leader);
                t.elected = view.role == Role::Coordinator && t.epoch_changed;
                self.last_epoch = Some(epoch);
            }
        }
        self.role = view.role;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(role: Role, epoch: Option<(u64, u64)>) -> View {
        View {
            id: 3,
            role,
            epoch: epoch.map(|(term, leader)| Epoch { term, leader }),
            eligible: true,
            incarnation: 1,
        }
    }

    #[test]
    fn election_redeclaration_and_demotion() {
        let mut tracker = Tracker::default();
        let t0 = Instant::now();
        let start = tracker.on_view(view(Role::Candidate, None), t0);
        assert_eq!(start, Transition::default(), "a start is no change");

        let won = tracker.on_view(view(Role::Coordinator, Some((1, 3))), t0);
        assert!(won.elected && won.epoch_changed && won.coordinator_changed);
        assert_eq!(won.failover, None, "no coordinator was lost");

        let again = tracker.on_view(view(Role::Coordinator, Some((4, 3))), t0);
        assert!(again.elected && again.epoch_changed && !again.coordinator_changed);
        assert_eq!(again.previous_epoch, Some(Epoch { term: 1, leader: 3 }));

        let resigned = tracker.on_view(view(Role::Candidate, None), t0);
        assert!(resigned.demoted && !resigned.epoch_changed);

        let later = t0 + Duration::from_millis(250);
        let follows = tracker.on_view(view(Role::Follower, Some((5, 2))), later);
        assert!(!follows.elected && !follows.demoted);
        assert!(follows.epoch_changed && follows.coordinator_changed);
        assert_eq!(follows.previous_epoch, Some(Epoch { term: 4, leader: 3 }));
        assert_eq!(follows.failover, Some(Duration::from_millis(250)));
    }

    /// A tracker that has seen the node follow `epoch` (term, leader) at `t0`.
    fn following(epoch: (u64, u64), t0: Instant) -> Tracker {
        let mut tracker = Tracker::default();
        tracker.on_view(view(Role::Follower, Some(epoch)), t0);
        tracker
    }

    #[test]
    fn regaining_the_same_epoch_is_a_failover_but_no_change() {
        let t0 = Instant::now();
        let mut tracker = following((2, 3), t0);
        tracker.on_view(view(Role::Candidate, None), t0);
        let back = tracker.on_view(
            view(Role::Follower, Some((2, 3))),
            t0 + Duration::from_millis(40),
        );
        assert!(!back.epoch_changed && !back.coordinator_changed);
        assert_eq!(back.failover, Some(Duration::from_millis(40)));
    }

    #[test]
    fn a_follower_taken_over_directly_changes_without_failover() {
        let t0 = Instant::now();
        let mut tracker = following((2, 2), t0);
        let bullied = tracker.on_view(view(Role::Follower, Some((3, 3))), t0);
        assert!(bullied.coordinator_changed && bullied.failover.is_none());
    }
}
