//! When a keeper stops what it runs for an epoch, from the node's grant alone (pure).
//!
//! The grant (`src/api/keeper.rs`) carries two instants: the lease end, after which
//! the node no longer claims to lead unless it renewed, and the fencing deadline, the
//! earliest instant any other node could take office (`Timing::takeover_floor_ms` in
//! src/protocol/timing.rs). The keeper sends SIGTERM (and runs the fence command) at
//! the lease end, or earlier when the job asks for a longer grace, and SIGKILL
//! [`KILL_MARGIN`] before the fencing deadline, so the job is dead before a successor
//! can exist. A renewal moves both instants on; the job never notices.

use crate::api::keeper::Grant;
use crate::boot_clock::BootInstant;
use std::time::Duration;

/// How long before the fencing deadline the SIGKILL goes out: the kernel ends a
/// process group in well under a millisecond; the rest covers a keeper woken late on a
/// busy host.
pub const KILL_MARGIN: Duration = Duration::from_millis(20);

/// The instants at which a job held under a grant is stopped, unless a renewal comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// SIGTERM and the fence command.
    pub term_at: BootInstant,
    /// SIGKILL of the whole process group.
    pub kill_at: BootInstant,
}

/// Why a grant cannot be kept with the settings asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "--grace {asked:?} does not fit the node's lease: a healthy node's renewal may be due \
         as late as {allowed:?} before the fencing deadline (one round lost), so the job \
         would be stopped while its node leads; use at most {allowed:?} or raise \
         timing.suspect_after_ms"
    )]
    GraceTooLong { asked: Duration, allowed: Duration },
    #[error("the node's instants are on the {node:?} clock, this process reads {ours:?}")]
    ClockMismatch {
        node: crate::boot_clock::Source,
        ours: crate::boot_clock::Source,
    },
}

/// The deadlines of `grant` for a job that wants at least `grace` between SIGTERM and
/// SIGKILL (`None`: whatever the lease leaves, the time from its end to the kill).
/// `Ok(None)` when the node grants no end at all (a one-node classic cluster).
pub fn deadlines(grant: &Grant, grace: Option<Duration>) -> Result<Option<Deadlines>, PlanError> {
    let ours = crate::boot_clock::source();
    if grant.clock != ours {
        return Err(PlanError::ClockMismatch {
            node: grant.clock,
            ours,
        });
    }
    let Some(fence_by) = grant.fence_by() else {
        return Ok(None);
    };
    let kill_at = fence_by - KILL_MARGIN;
    let lease_end = grant.lease_end().unwrap_or(kill_at).min(kill_at);
    let term_at = match grace {
        None => lease_end,
        Some(grace) => {
            let latest_renewal = lease_end - Duration::from_millis(grant.renewal_slack_ms);
            let allowed = kill_at.saturating_duration_since(latest_renewal);
            if grace > allowed {
                return Err(PlanError::GraceTooLong {
                    asked: grace,
                    allowed,
                });
            }
            lease_end.min(kill_at - grace)
        }
    };
    Ok(Some(sabotaged(Deadlines { term_at, kill_at })))
}

/// The debug-only sabotage `late_fence` moves both instants past the fencing deadline.
#[cfg(debug_assertions)]
fn sabotaged(d: Deadlines) -> Deadlines {
    if !crate::sabotage::late_fence() {
        return d;
    }
    let late = KILL_MARGIN + Duration::from_millis(500);
    Deadlines {
        term_at: d.kill_at + late,
        kill_at: d.kill_at + late,
    }
}

/// Release builds carry no sabotage.
#[cfg(not(debug_assertions))]
fn sabotaged(d: Deadlines) -> Deadlines {
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Epoch;

    fn grant(lease_end_ms: u64, fence_by_ms: u64, origin: BootInstant) -> Grant {
        let at = |ms| (origin + Duration::from_millis(ms)).as_nanos();
        Grant {
            epoch: Some(Epoch { term: 2, leader: 3 }),
            lease_end_ns: Some(at(lease_end_ms)),
            fence_by_ns: Some(at(fence_by_ms)),
            renewal_slack_ms: 100,
            ..Grant::none(3)
        }
    }

    fn ms(origin: BootInstant, at: BootInstant) -> u64 {
        at.saturating_duration_since(origin).as_millis() as u64
    }

    #[test]
    fn sigterm_at_the_lease_end_and_sigkill_before_any_successor() {
        let origin = BootInstant::now();
        // Default timing: round acked at 0, lease to 200, no successor before 294.
        let d = deadlines(&grant(200, 294, origin), None).unwrap().unwrap();
        assert_eq!(ms(origin, d.term_at), 200);
        assert_eq!(ms(origin, d.kill_at), 274);
    }

    #[test]
    fn a_longer_grace_moves_sigterm_earlier_only_as_far_as_a_late_renewal() {
        let origin = BootInstant::now() + Duration::from_secs(1);
        let g = grant(200, 294, origin);
        let d = deadlines(&g, Some(Duration::from_millis(150)))
            .unwrap()
            .unwrap();
        assert_eq!(ms(origin, d.term_at), 124);
        assert_eq!(ms(origin, d.kill_at), 274);
        // A short grace changes nothing: the lease end comes first anyway.
        let d = deadlines(&g, Some(Duration::from_millis(10)))
            .unwrap()
            .unwrap();
        assert_eq!(ms(origin, d.term_at), 200);
        // With a slack of 100 ms the latest renewal due is at 100; from there to the
        // kill is 174 ms.
        let err = deadlines(&g, Some(Duration::from_millis(175))).unwrap_err();
        assert_eq!(
            err,
            PlanError::GraceTooLong {
                asked: Duration::from_millis(175),
                allowed: Duration::from_millis(174),
            }
        );
        assert!(
            err.to_string().contains("raise timing.suspect_after_ms"),
            "{err}"
        );
    }

    #[test]
    fn no_end_granted_means_no_deadlines_and_another_clock_is_refused() {
        let leads = Grant {
            epoch: Some(Epoch { term: 1, leader: 1 }),
            ..Grant::none(1)
        };
        assert_eq!(deadlines(&leads, None), Ok(None));
        let other = crate::boot_clock::Source::Monotonic;
        let foreign = Grant {
            clock: other,
            ..leads
        };
        assert!(matches!(
            deadlines(&foreign, None),
            Err(PlanError::ClockMismatch { .. })
        ));
    }
}
