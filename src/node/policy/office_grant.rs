//! What a node grants its keepers (`src/api/keeper.rs`): the epoch it leads, when its
//! office ends unless renewed, and the earliest instant a successor could take over,
//! by which its host must have fenced whatever it runs as the coordinator.
//!
//! Both deadlines count from the newest heartbeat round that keeps the office: in
//! quorum mode the newest one a majority acked (the lease's basis,
//! `src/protocol/lease.rs`), in classic mode the newest one sent (followers suspect D
//! after they last heard one). The office ends one lease span after it, like the
//! machine's own lease; a successor cannot take over before
//! [`Timing::takeover_floor_ms`] after it.

use crate::api::keeper::Grant;
use crate::boot_clock::BootInstant;
use crate::protocol::{Millis, Mode, Role, Timing, View};

/// What the grant is computed from, in machine time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Office {
    pub view: View,
    pub mode: Mode,
    pub timing: Timing,
    /// Quorum mode: the machine's lease end.
    pub lease_until: Option<Millis>,
    /// Classic mode: when the newest heartbeat (or declaration) of this office went out.
    pub last_round_sent: Option<Millis>,
    /// Whether the node has peers at all: a one-node classic cluster has no successor
    /// to fear, so its office has no end.
    pub has_peers: bool,
}

#[cfg(test)]
impl Office {
    /// Node 3 in `role` of `epoch`, eligible, in `mode` with the default timing and
    /// peers, nothing sent and no lease yet: the office the policies' tests start from.
    pub(crate) fn for_test(role: Role, mode: Mode, epoch: crate::protocol::Epoch) -> Office {
        Office {
            view: View {
                id: 3,
                role,
                epoch: Some(epoch),
                eligible: true,
                incarnation: 1,
            },
            mode,
            timing: Timing::default(),
            lease_until: None,
            last_round_sent: None,
            has_peers: true,
        }
    }
}

/// The grant for `office`, its machine times turned into this host's clock by `instant`.
pub fn grant(office: &Office, instant: impl Fn(Millis) -> BootInstant) -> Grant {
    let view = office.view;
    let mut grant = Grant::none(view.id);
    let Some(epoch) = view.epoch.filter(|_| view.role == Role::Coordinator) else {
        return grant;
    };
    grant.epoch = Some(epoch);
    let timing = &office.timing;
    let span = timing.lease_span_ms();
    // One round lost or late is ordinary; the renewal after it is the latest one due.
    grant.renewal_slack_ms = span.saturating_sub(2 * timing.heartbeat_ms);
    let basis = match office.mode {
        Mode::Quorum => office.lease_until.map(|until| until.saturating_sub(span)),
        Mode::Classic if office.has_peers => office.last_round_sent,
        Mode::Classic => None,
    };
    if let Some(basis) = basis {
        let lease_end = office.lease_until.unwrap_or(basis + span);
        grant.lease_end_ns = Some(instant(lease_end).as_nanos());
        let fence_by = basis + timing.takeover_floor_ms();
        grant.fence_by_ns = Some(instant(fence_by).as_nanos());
    }
    grant
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Epoch;
    use std::time::Duration;

    const EPOCH: Epoch = Epoch { term: 4, leader: 3 };

    fn office(role: Role, mode: Mode) -> Office {
        Office::for_test(role, mode, EPOCH)
    }

    fn at(origin: BootInstant) -> impl Fn(Millis) -> BootInstant {
        move |ms| origin + Duration::from_millis(ms)
    }

    fn ms_after(origin: BootInstant, ns: Option<u64>) -> u64 {
        let at = BootInstant::from_nanos(ns.expect("a deadline"));
        at.saturating_duration_since(origin).as_millis() as u64
    }

    #[test]
    fn a_follower_or_candidate_is_granted_nothing() {
        let origin = BootInstant::now();
        for role in [Role::Follower, Role::Candidate] {
            let g = grant(&office(role, Mode::Quorum), at(origin));
            assert_eq!(g, Grant::none(3));
        }
    }

    #[test]
    fn quorum_deadlines_follow_the_lease_and_the_takeover_floor() {
        let origin = BootInstant::now();
        let mut o = office(Role::Coordinator, Mode::Quorum);
        // Acked round sent at 1_000: lease 1_000 + 200, successor not before 1_000 + 294.
        o.lease_until = Some(1_200);
        let g = grant(&o, at(origin));
        assert_eq!(g.epoch, Some(EPOCH));
        assert_eq!(g.token(), Some(EPOCH.token()));
        assert_eq!(ms_after(origin, g.lease_end_ns), 1_200);
        assert_eq!(ms_after(origin, g.fence_by_ns), 1_294);
        assert_eq!(g.renewal_slack_ms, 0, "span 200 less two 100 ms rounds");
    }

    #[test]
    fn classic_deadlines_count_from_the_last_round_sent() {
        let origin = BootInstant::now();
        let mut o = office(Role::Coordinator, Mode::Classic);
        assert_eq!(grant(&o, at(origin)).fence_by_ns, None, "nothing sent yet");
        o.last_round_sent = Some(500);
        let g = grant(&o, at(origin));
        assert_eq!(ms_after(origin, g.lease_end_ns), 700);
        assert_eq!(ms_after(origin, g.fence_by_ns), 794);
        o.has_peers = false;
        let alone = grant(&o, at(origin));
        assert_eq!(alone.epoch, Some(EPOCH));
        assert_eq!(alone.fence_by_ns, None, "no successor to fence against");
    }
}
