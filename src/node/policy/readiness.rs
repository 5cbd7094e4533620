//! When a new coordinator counts as ready for clients (`[http] coordinator_ready`), and
//! what a failed `on_elected` does (`[hooks] on_elected_failure`, `resign_for_ms`): a
//! pure decision, so a database `on_elected` could not promote never sits behind a
//! `/coordinator` 200.

use crate::api::Status;
use crate::config::{CoordinatorReady, ElectedHookFailure, NodeConfig};
use crate::node::shared::mailbox::ElectedHookDone;
use crate::protocol::{Epoch, Role};

/// The readiness settings of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// Ready as soon as it leads: no `on_elected`, or `coordinator_ready = "elected"`.
    at_once: bool,
    on_failure: ElectedHookFailure,
    resign_for_ms: u64,
}

/// What a finished `on_elected` means for the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterElectedHook {
    /// The node no longer leads the epoch it ran for: nothing to do.
    Stale,
    /// It succeeded: the node is ready for clients at this epoch.
    Ready(Option<Epoch>),
    /// It failed and the node stays coordinator, not ready for clients.
    Stay,
    /// It failed: the node resigns, ineligible for `for_ms`.
    Resign { for_ms: u64 },
}

impl Readiness {
    /// The settings in `config`.
    pub fn from_config(config: &NodeConfig) -> Readiness {
        Readiness {
            at_once: config.hooks.on_elected.is_none()
                || config.http.as_ref().map(|h| h.coordinator_ready)
                    == Some(CoordinatorReady::Elected),
            on_failure: config.hooks.on_elected_failure,
            resign_for_ms: config.hooks.resign_for_ms,
        }
    }

    /// Whether a coordinator is ready for clients as soon as it leads.
    pub fn at_once(&self) -> bool {
        self.at_once
    }

    /// Settings that wait for `on_elected` and resign for `resign_for_ms` when it fails.
    #[cfg(test)]
    pub fn waiting_for_on_elected(resign_for_ms: u64) -> Readiness {
        Readiness {
            at_once: false,
            on_failure: ElectedHookFailure::Resign,
            resign_for_ms,
        }
    }

    /// What `done` means for a node whose published status (its view, not read against
    /// the lease: see `Publisher::elected_hook_done`) is `now`.
    pub fn after_elected_hook(&self, done: ElectedHookDone, now: &Status) -> AfterElectedHook {
        if now.role != Role::Coordinator || now.epoch != done.epoch {
            return AfterElectedHook::Stale;
        }
        if done.succeeded {
            return AfterElectedHook::Ready(done.epoch);
        }
        match self.on_failure {
            ElectedHookFailure::Stay => AfterElectedHook::Stay,
            ElectedHookFailure::Resign => AfterElectedHook::Resign {
                for_ms: self.resign_for_ms,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Mode;

    fn leading(term: u64) -> Status {
        let epoch = Some(Epoch { term, leader: 2 });
        Status::for_test(2, Role::Coordinator, epoch, Mode::Classic, &[1])
    }

    fn done(term: u64, succeeded: bool) -> ElectedHookDone {
        ElectedHookDone {
            epoch: Some(Epoch { term, leader: 2 }),
            succeeded,
        }
    }

    #[test]
    fn only_the_epoch_still_led_is_made_ready_or_resigned() {
        let resign = Readiness {
            at_once: false,
            on_failure: ElectedHookFailure::Resign,
            resign_for_ms: 9_000,
        };
        let now = leading(4);
        assert_eq!(
            resign.after_elected_hook(done(4, true), &now),
            AfterElectedHook::Ready(done(4, true).epoch)
        );
        assert_eq!(
            resign.after_elected_hook(done(3, true), &now),
            AfterElectedHook::Stale
        );
        assert_eq!(
            resign.after_elected_hook(done(4, false), &now),
            AfterElectedHook::Resign { for_ms: 9_000 }
        );
        let stay = Readiness {
            on_failure: ElectedHookFailure::Stay,
            ..resign
        };
        assert_eq!(
            stay.after_elected_hook(done(4, false), &now),
            AfterElectedHook::Stay
        );
    }
}
